#include "operators/map.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "operators/bad_record.hpp"
#include "operators/field_reads.hpp"
#include "operators/toml_order.hpp"
#include "operators/wall_clock.hpp"
#include "pipeline/spec/expression.hpp"
#include "state/error.hpp"

namespace streamctl::operators {

namespace {

struct Assignment {
  state::FieldId field;
  pipeline::Expression expression;
};

struct Rename {
  state::FieldId from;
  state::FieldId to;
};

class Map final : public Operator {
public:
  Map(std::vector<Assignment> sets, std::vector<Rename> renames, std::vector<state::FieldId> removes)
      : sets_(std::move(sets)), renames_(std::move(renames)), removes_(std::move(removes)),
        values_(sets_.size()) {
    for (state::FieldId id : removes_) {
      if (id >= removed_.size()) removed_.resize(id + 1, 0);
      removed_[id] = 1;
    }
  }

  void process(const state::Batch& in, state::Batch& out) override {
    out.retain_memory_of(in);
    if (sets_.empty() && renames_.empty()) {
      remove_only(in, out);
      return;
    }
    eval_.arena = &out.arena(); // strings made by `set` live as long as the output batch
    eval_.now_ms = wall_clock_ms(); // now() is the same for every record of a batch
    evaluate(std::span<const state::Record>(in.begin(), in.end()));
    for (std::size_t row = 0; row < in.size(); ++row) {
      const state::Record& record = in[row];
      if (failed_[row]) {
        report_bad_record(ctx_, record, errors_[row]);
        continue;
      }
      // Built in place in the output's arena, with room for every `set` to add a field.
      auto* fields = out.arena().allocate_array<state::Field>(record.size + sets_.size());
      std::copy(record.begin(), record.end(), fields);
      std::uint32_t size = record.size;
      for (std::size_t k = 0; k < sets_.size(); ++k)
        set_field(fields, size, sets_[k].field, values_[k][row]);
      for (const auto& r : renames_) rename(fields, size, r);
      for (auto field : removes_) remove_field(fields, size, field);
      out.add_in_place(fields, size, record.timestamp);
    }
  }

private:
  // A map of `remove` alone (Nexmark q0, q2: the usual way to drop fields) copies each record's
  // fields but those straight into the output's arena, or shares the record when it has none
  // of them: through a RecordBuilder, each field was copied twice and each removal shifted the
  // rest. One pass over each record's names, each looked up in a table (a std::find over
  // `remove` per field, twice, was most of the map's instructions in Nexmark q0).
  void remove_only(const state::Batch& in, state::Batch& out) {
    for (const state::Record& record : in) {
      std::uint32_t first = 0; // the first field removed
      while (first < record.size && !removed(record.fields[first].name)) ++first;
      if (first == record.size) {
        out.add_shared(record);
        continue;
      }
      state::InPlaceRecord kept(out, record.size);
      for (std::uint32_t k = 0; k < first; ++k) kept.append(record.fields[k].name, record.fields[k].value);
      for (std::uint32_t k = first + 1; k < record.size; ++k)
        if (!removed(record.fields[k].name)) kept.append(record.fields[k].name, record.fields[k].value);
      kept.finish(record.timestamp);
    }
  }
  bool removed(state::FieldId name) const { return name < removed_.size() && removed_[name] != 0; }

  // Each `set` expression over the whole batch (faster than record by record) into
  // values_[k]; a record fails with the error of the first `set` that fails for it, as when
  // the expressions ran in order record by record.
  void evaluate(std::span<const state::Record> records) {
    failed_.assign(records.size(), 0);
    errors_.resize(records.size());
    for (std::size_t k = 0; k < sets_.size(); ++k) {
      values_[k].resize(records.size());
      std::size_t at = 0;
      while (at < records.size()) {
        at += sets_[k].expression.eval_batch(records.subspan(at), eval_, values_[k].data() + at);
        if (at == records.size()) break;
        if (!failed_[at]) {
          failed_[at] = 1;
          errors_[at] = eval_.error;
        }
        ++at;
      }
    }
  }

  // The fields [fields, fields + size) of a record being built, changed in place.
  static void set_field(state::Field* fields, std::uint32_t& size, state::FieldId name,
                        const state::Value& value) {
    for (std::uint32_t k = 0; k < size; ++k)
      if (fields[k].name == name) {
        fields[k].value = value;
        return;
      }
    fields[size++] = state::Field{name, value};
  }
  static void remove_field(state::Field* fields, std::uint32_t& size, state::FieldId name) {
    for (std::uint32_t k = 0; k < size; ++k)
      if (fields[k].name == name) {
        std::copy(fields + k + 1, fields + size, fields + k);
        --size;
        return;
      }
  }
  static void rename(state::Field* fields, std::uint32_t& size, const Rename& r) {
    const bool present =
        std::any_of(fields, fields + size, [&](const state::Field& f) { return f.name == r.from; });
    if (!present || r.from == r.to) return;
    remove_field(fields, size, r.to); // the renamed field replaces one of the new name
    for (std::uint32_t k = 0; k < size; ++k)
      if (fields[k].name == r.from) fields[k].name = r.to;
  }

  std::vector<Assignment> sets_;
  std::vector<Rename> renames_;
  std::vector<state::FieldId> removes_;
  std::vector<std::uint8_t> removed_; // by FieldId: 1 for the names in removes_
  std::vector<std::vector<state::Value>> values_; // [set][record of the batch]
  std::vector<std::uint8_t> failed_;               // [record]: some `set` failed
  std::vector<std::string> errors_;                // [record]: why, when failed_
  pipeline::EvalContext eval_;
};

} // namespace

namespace {

// Projection, backwards through the map (set, then rename, then remove): a field that `set`
// assigns is not read from the input unless an expression reads it; the old name of a renamed
// field is read when its new name is; both names are kept, for records without the old one.
std::vector<pipeline::FieldSet> map_reads(const pipeline::PipelineSpec&, const pipeline::NodeSpec& node,
                                          const pipeline::FieldSet& main, const pipeline::FieldSet&) {
  pipeline::FieldSet reads = main;
  // What it removes is not read from its input, unless an expression or a rename reads it
  // (added back below). Behind a sink that writes whole records this is what lets a source
  // skip the removed fields: "every field but these".
  if (const auto* removes = node.config["remove"].as_array())
    for (const auto& f : *removes)
      if (const auto* name = f.as_string()) reads.leave_out(name->get());
  if (const auto* renames = node.config["rename"].as_table())
    for (const auto& [from, to] : *renames)
      if (const auto* name = to.as_string(); name == nullptr || main.contains(name->get()))
        reads.add(std::string(from.str()));
  if (const auto* sets = node.config["set"].as_table()) {
    // Behind a sink of whole records, a field that `set` overwrites is read all the same: it
    // keeps its place in the record that way (projection must not reorder the output).
    for (const auto& [name, value] : *sets)
      if (!main.all || !main.contains(std::string(name.str()))) reads.leave_out(std::string(name.str()));
    for (const auto& [name, value] : *sets) add_expression_fields(reads, &value);
  }
  return {reads};
}

} // namespace

pipeline::NodeTypeSchema map_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  pipeline::NodeTypeSchema schema{
      "map",
      {
          KeySchema{"set", KeyType::ExpressionMap, false, {}, {}, "fields to assign: name = expression"},
          KeySchema{"rename", KeyType::StringMap, false, {}, {}, "fields to rename: old = new"},
          KeySchema{"remove", KeyType::StringArray, false, {}, {}, "fields to remove"},
      }};
  schema.read_fields = map_reads;
  return schema;
}

std::unique_ptr<Operator> make_map(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                   state::FieldNames& names) {
  std::vector<Assignment> sets;
  for (const auto& [name, value] : in_file_order(node.config["set"].as_table()))
    sets.push_back(Assignment{names.intern(name),
                              pipeline::Expression::compile(value->value_or(std::string()), names)});
  std::vector<Rename> renames;
  for (const auto& [from, to] : in_file_order(node.config["rename"].as_table()))
    renames.push_back(Rename{names.intern(from), names.intern(to->value_or(std::string()))});
  std::vector<state::FieldId> removes;
  if (const auto* list = node.config["remove"].as_array())
    for (const auto& f : *list) removes.push_back(names.intern(f.value_or(std::string())));
  if (sets.empty() && renames.empty() && removes.empty())
    throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "type") + ": operator '" + node.name +
                                      "' (map) needs at least one of 'set', 'rename', 'remove'");
  return std::make_unique<Map>(std::move(sets), std::move(renames), std::move(removes));
}

} // namespace streamctl::operators
