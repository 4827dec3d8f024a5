#include "pipeline/spec/projection.hpp"

#include "pipeline/spec/expression.hpp"
#include "pipeline/spec/plan.hpp"

namespace streamctl::pipeline {

FieldSet fields_of_expression(std::string_view text) {
  state::FieldNames scratch;
  try {
    auto expression = Expression::compile(text, scratch);
    FieldSet out;
    for (const auto& name : expression.fields()) out.add(name);
    return out;
  } catch (const ExpressionError&) {
    return FieldSet::everything();
  }
}

namespace {

const NodeTypeSchema* schema_of(const SchemaCatalog& catalog, const NodeSpec& node) {
  const auto& list = node.role == NodeRole::Source     ? catalog.sources
                     : node.role == NodeRole::Operator ? catalog.operators
                                                       : catalog.sinks;
  for (const auto& schema : list)
    if (schema.type == node.type) return &schema;
  return nullptr;
}

// Works backwards from the sinks: what consumers read of each output of each node, memoised.
class ProjectionPlanner {
public:
  ProjectionPlanner(const PipelineSpec& spec, const SchemaCatalog& catalog)
      : spec_(spec), catalog_(catalog), inputs_(spec.nodes.size()), reads_(spec.nodes.size()),
        state_(spec.nodes.size(), State::Todo) {
    for (std::size_t k = 0; k < spec.nodes.size(); ++k)
      for (const auto& name : spec.nodes[k].inputs) inputs_[k].push_back(resolve_input(spec, name));
  }

  // What node `k` reads of each of its inputs.
  const std::vector<FieldSet>& reads(std::size_t k) {
    if (state_[k] == State::Done) return reads_[k];
    const NodeSpec& node = spec_.nodes[k];
    std::vector<FieldSet> everything(node.inputs.size(), FieldSet::everything());
    if (state_[k] == State::Busy) return reads_[k] = everything; // a cycle: validation's to report
    state_[k] = State::Busy;
    const NodeTypeSchema* schema = schema_of(catalog_, node);
    std::vector<FieldSet> result = everything;
    if (schema != nullptr && schema->read_fields && node.on_error == OnError::Drop) {
      FieldSet main = needed(k, kMainOutput);
      FieldSet late = needed(k, kLateOutput);
      result = schema->read_fields(spec_, node, main, late);
      if (result.size() != node.inputs.size()) result = everything;
    }
    reads_[k] = std::move(result);
    state_[k] = State::Done;
    return reads_[k];
  }

  // What the consumers of output `port` of node `k` read of it.
  FieldSet needed(std::size_t k, int port) {
    FieldSet out;
    for (std::size_t c = 0; c < spec_.nodes.size(); ++c)
      for (std::size_t i = 0; i < inputs_[c].size(); ++i)
        if (inputs_[c][i].node == k && inputs_[c][i].port == port) out.add(reads(c)[i]);
    return out;
  }

private:
  enum class State { Todo, Busy, Done };
  const PipelineSpec& spec_;
  const SchemaCatalog& catalog_;
  std::vector<std::vector<InputRef>> inputs_;
  std::vector<std::vector<FieldSet>> reads_;
  std::vector<State> state_;
};

} // namespace

void plan_projection(PipelineSpec& spec, const SchemaCatalog& catalog) {
  spec.input_fields.clear();
  spec.source_fields.clear();
  if (!spec.root["projection"].value_or(true)) return;
  ProjectionPlanner planner(spec, catalog);
  for (std::size_t k = 0; k < spec.nodes.size(); ++k) spec.input_fields.push_back(planner.reads(k));
  for (std::size_t k = 0; k < spec.nodes.size(); ++k) {
    const NodeSpec& node = spec.nodes[k];
    if (node.role != NodeRole::Source) {
      spec.source_fields.push_back(FieldSet::everything());
      continue;
    }
    FieldSet emitted = planner.needed(k, kMainOutput);
    if (const auto* event_time = node.config["event_time"].as_string()) {
      emitted.add(fields_of_expression(event_time->get()));
      // A record whose event time fails is reported as it was made (a generator's has no
      // raw line): with on_error fail or dead_letter, whole.
      if (node.on_error != OnError::Drop) emitted = FieldSet::everything();
    }
    spec.source_fields.push_back(std::move(emitted));
  }
}

} // namespace streamctl::pipeline
