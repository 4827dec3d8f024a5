#include "operators/text_format.hpp"

#include "state/json_writer.hpp"
#include "state/utf8.hpp"

namespace streamctl::operators {

TextFormat text_format_of(const pipeline::NodeSpec& node) {
  std::string format = node.config["format"].value_or(std::string("json"));
  if (format == "csv") return TextFormat::Csv;
  if (format == "lines") return TextFormat::Lines;
  return TextFormat::Json;
}

namespace {
state::CsvOptions csv_options(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node) {
  state::CsvOptions options;
  std::string delimiter = node.config["delimiter"].value_or(std::string(","));
  options.delimiter = delimiter.empty() ? ',' : delimiter[0];
  options.header = node.config["header"].value_or(true);
  if (const auto* columns = node.config["columns"].as_array())
    for (const auto& c : *columns) options.columns.push_back(c.value_or(std::string()));
  if (const auto* types = node.config["types"].as_table())
    for (const auto& [column, type] : *types) {
      std::string t = type.value_or(std::string());
      if (t != "int" && t != "float" && t != "bool" && t != "string")
        throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "types") + ": column '" +
                                          std::string(column.str()) + "' of node '" + node.name +
                                          "': unknown type '" + t + "'; use int, float, bool or string");
      state::Kind kind = t == "int" ? state::Kind::Int
                         : t == "float" ? state::Kind::Float
                         : t == "bool" ? state::Kind::Bool
                                       : state::Kind::String;
      options.types.emplace_back(std::string(column.str()), kind);
    }
  return options;
}
} // namespace

LineDecoder::LineDecoder(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                         state::FieldNames& names)
    : format_(text_format_of(node)), names_(names), line_field_(names.intern("line")) {
  if (format_ == TextFormat::Csv) csv_ = std::make_unique<state::CsvReader>(csv_options(spec, node), names);
  if (format_ != TextFormat::Lines) {
    const pipeline::FieldSet emitted = spec.fields_emitted(spec.index_of(node));
    keep_ = pipeline::field_mask(emitted, names);
    left_out_ = pipeline::left_out_mask(emitted, names);
  }
  if (format_ == TextFormat::Json && !keep_.empty()) kept_json_.emplace(keep_, names_);
  if (format_ == TextFormat::Json && !left_out_.empty()) kept_json_.emplace(left_out_, names_, true);
  json_.expect_repeated_keys(); // names_ and kept_json_ are the same for every line
}

Result<void> LineDecoder::decode(std::string_view line, state::Batch& batch) {
  builder_.reset();
  switch (format_) {
  case TextFormat::Json: {
    auto r = json_.parse_record(line, names_, batch, builder_, kept_json_ ? &*kept_json_ : nullptr);
    if (!r) return r;
    builder_.finish(batch);
    return {};
  }
  case TextFormat::Csv: {
    if (csv_->needs_header()) return csv_->read_header(line);
    auto r = csv_->parse_line(line, batch, builder_);
    if (!r) return r;
    break;
  }
  case TextFormat::Lines: {
    // The same rule as json and csv: text that is not UTF-8 is a bad record, not output.
    std::size_t at = state::find_invalid_utf8(line);
    if (at != std::string_view::npos)
      return fail(state::invalid_utf8_reason(static_cast<unsigned char>(line[at])) + " at column " +
                  std::to_string(at + 1));
    builder_.append(line_field_, state::Value::string(line));
    break;
  }
  }
  if (!keep_.empty()) {
    auto& fields = builder_.mutable_fields();
    std::erase_if(fields, [this](const state::Field& f) { return f.name >= keep_.size() || !keep_[f.name]; });
  }
  if (!left_out_.empty()) {
    auto& fields = builder_.mutable_fields();
    std::erase_if(fields, [this](const state::Field& f) { return f.name < left_out_.size() && left_out_[f.name]; });
  }
  builder_.finish(batch);
  return {};
}

LineEncoder::LineEncoder(const pipeline::NodeSpec& node, state::FieldNames& names)
    : format_(text_format_of(node)), names_(names), line_field_(names.intern("line")),
      csv_writer_(node.config["delimiter"].value_or(std::string(",")).empty()
                      ? ','
                      : node.config["delimiter"].value_or(std::string(","))[0]),
      json_writer_(names) {
  if (const auto* columns = node.config["columns"].as_array())
    for (const auto& c : *columns) csv_columns_.push_back(c.value_or(std::string()));
}

void LineEncoder::encode(const state::Batch& batch, std::string& out,
                         std::vector<std::size_t>* record_starts) {
  for (const auto& record : batch) {
    if (record_starts != nullptr && format_ != TextFormat::Csv)
      record_starts->push_back(out.size());
    switch (format_) {
    case TextFormat::Json: json_writer_.append(record, out); break;
    case TextFormat::Lines: {
      // The `line` field as it is; records without one are written as JSON.
      const state::Value* line = record.find(line_field_);
      if (line != nullptr && line->kind == state::Kind::String) out.append(line->str());
      else json_writer_.append(record, out);
      break;
    }
    case TextFormat::Csv:
      if (!header_written_) {
        // Without `columns`, the first record's fields name the columns.
        if (csv_columns_.empty())
          for (const auto& f : record) csv_columns_.emplace_back(names_.name(f.name));
        for (const auto& c : csv_columns_) csv_column_ids_.push_back(names_.intern(c));
        csv_writer_.append_header(csv_columns_, out);
        out += '\n';
        header_written_ = true;
      }
      if (record_starts != nullptr) record_starts->push_back(out.size());
      csv_writer_.append_row(record, csv_column_ids_, names_, out);
      break;
    }
    out += '\n';
  }
}

} // namespace streamctl::operators
