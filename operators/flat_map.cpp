#include "operators/flat_map.hpp"

#include "operators/bad_record.hpp"
#include "operators/field_reads.hpp"
#include "state/error.hpp"

namespace streamctl::operators {

namespace {

class Explode final : public Operator {
public:
  explicit Explode(state::FieldId field) : field_(field) {}

  void process(const state::Batch& in, state::Batch& out) override {
    out.retain_memory_of(in);
    for (const auto& record : in) {
      const state::Value* v = record.find(field_);
      if (v == nullptr || v->is_null()) continue;
      if (v->kind != state::Kind::Array) {
        report_bad_record(ctx_, record, std::string("explode: field '") +
                                            std::string(ctx_.names->name(field_)) + "' is a " +
                                            state::kind_name(v->kind) + ", not an array");
        continue;
      }
      for (std::uint32_t k = 0; k < v->size; ++k) {
        builder_.assign(record);
        builder_.set(field_, v->array[k]);
        builder_.finish(out);
      }
    }
  }

private:
  state::FieldId field_;
  state::RecordBuilder builder_;
};

class Split final : public Operator {
public:
  Split(state::FieldId field, std::string by, state::FieldId as)
      : field_(field), by_(std::move(by)), as_(as) {}

  void process(const state::Batch& in, state::Batch& out) override {
    out.retain_memory_of(in);
    for (const auto& record : in) {
      const state::Value* v = record.find(field_);
      if (v == nullptr || v->is_null()) continue;
      if (v->kind != state::Kind::String) {
        report_bad_record(ctx_, record, std::string("split: field '") +
                                            std::string(ctx_.names->name(field_)) + "' is a " +
                                            state::kind_name(v->kind) + ", not a string");
        continue;
      }
      // Pieces are views into the input string, which the output batch retains.
      std::string_view text = v->str();
      std::size_t start = 0;
      while (start <= text.size()) {
        std::size_t stop = text.find(by_, start);
        if (stop == std::string_view::npos) stop = text.size();
        if (stop > start) {
          builder_.assign(record);
          if (as_ != field_) builder_.remove(field_);
          builder_.set(as_, state::Value::string(text.substr(start, stop - start)));
          builder_.finish(out);
        }
        start = stop + by_.size();
      }
    }
  }

private:
  state::FieldId field_;
  std::string by_;
  state::FieldId as_;
  state::RecordBuilder builder_;
};

} // namespace

namespace {

// Projection: the exploded or split field, and what is read after it.
std::vector<pipeline::FieldSet> flat_map_reads(const pipeline::PipelineSpec&, const pipeline::NodeSpec& node,
                                               const pipeline::FieldSet& main, const pipeline::FieldSet&) {
  pipeline::FieldSet reads = main;
  if (auto explode = node.config["explode"].value<std::string>()) reads.add(*explode);
  if (auto field = node.config["split"]["field"].value<std::string>()) reads.add(*field);
  return {reads};
}

} // namespace

pipeline::NodeTypeSchema flat_map_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  pipeline::NodeTypeSchema schema{
      "flat_map",
      {
          KeySchema{"explode", KeyType::String, false, {}, {}, "array field: one record per element"},
          KeySchema{"split",
                    KeyType::Table,
                    false,
                    {},
                    {KeySchema{"field", KeyType::String, true, {}, {}, "string field to split"},
                     KeySchema{"by", KeyType::String, false, {}, {}, "separator (default \" \")"},
                     KeySchema{"as", KeyType::String, false, {}, {}, "name of the piece (default: field)"}},
                    "string field: one record per piece"},
      }};
  schema.read_fields = flat_map_reads;
  return schema;
}

std::unique_ptr<Operator> make_flat_map(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                        state::FieldNames& names) {
  auto explode = node.config["explode"].value<std::string>();
  const toml::table* split = node.config["split"].as_table();
  if (explode.has_value() == (split != nullptr))
    throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "type") + ": operator '" + node.name +
                                      "' (flat_map) needs exactly one of 'explode' and 'split'");
  if (explode) return std::make_unique<Explode>(names.intern(*explode));
  std::string field = (*split)["field"].value_or(std::string());
  std::string by = (*split)["by"].value_or(std::string(" "));
  if (by.empty())
    throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "split") + ": operator '" + node.name +
                                      "': split.by must not be empty");
  std::string as = (*split)["as"].value_or(field);
  return std::make_unique<Split>(names.intern(field), std::move(by), names.intern(as));
}

} // namespace streamctl::operators
