#include "pipeline/runtime/tap_relay.hpp"

#include <algorithm>

#include "pipeline/runtime/tap_protocol.hpp"
#include "pipeline/spec/schema_check.hpp"

namespace streamctl::runtime {

void TapRelay::on_client(const std::string& identity, const transport::ControlMessage& m) {
  auto now = Clock::now();
  expire(now);
  const std::string& id = m.get("tap");
  if (m.type == "UNTAP") {
    for (const Tap& t : taps_)
      if (t.id == id && t.client == identity) tell_workers(transport::ControlMessage{"UNTAP", {}}.set("tap", id), t.node);
    std::erase_if(taps_, [&](const Tap& t) { return t.id == id && t.client == identity; });
    return;
  }
  const std::string& node = m.get("node");
  std::vector<std::string> names;
  for (const auto& n : job_.spec.nodes) names.push_back(n.name);
  if (std::find(names.begin(), names.end(), node) == names.end() || id.empty()) {
    std::string message = id.empty() ? "a tap needs an id" : "the job has no node '" + node + "'";
    if (auto near = pipeline::detail::did_you_mean(node, names); !id.empty() && !near.empty()) message += "; " + near;
    control_.send(identity, transport::ControlMessage{"ERROR", {}}.set("message", message).set("usage", "1"));
    return;
  }
  auto it = std::find_if(taps_.begin(), taps_.end(), [&](const Tap& t) { return t.id == id; });
  if (it == taps_.end()) {
    taps_.push_back(Tap{id, identity, node, {}});
    it = taps_.end() - 1;
  }
  it->lease_until = now + kTapLease;
  // Sent again with every renewal: a worker started since (a restart, a rescale) gets it.
  transport::ControlMessage open{"TAP", {}};
  open.set("tap", id).set("node", node).set("sample", m.get("sample")).set("limit", m.get("limit"));
  int subtasks = tell_workers(open, node);
  control_.send(identity, transport::ControlMessage{"TAP_OK", {}}
                              .set("tap", id)
                              .set("subtasks", std::to_string(subtasks)));
}

void TapRelay::on_tapped(const transport::ControlMessage& m) {
  for (const Tap& t : taps_)
    if (t.id == m.get("tap")) {
      transport::ControlMessage records{"TAP_RECORDS", {}};
      records.set("tap", t.id).set("lines", m.get("lines")).set("skipped", m.get("skipped"));
      control_.send(t.client, records);
      return;
    }
}

void TapRelay::end_all(const std::string& message) {
  for (const Tap& t : taps_)
    control_.send(t.client, transport::ControlMessage{"TAP_END", {}}.set("tap", t.id).set("message", message));
  taps_.clear();
}

void TapRelay::expire(Clock::time_point now) {
  std::erase_if(taps_, [&](const Tap& t) { return t.lease_until < now; });
}

int TapRelay::tell_workers(const transport::ControlMessage& m, const std::string& node) {
  int told = 0;
  for (const TaskRuntime& t : workers_.tasks()) {
    if (t.task == nullptr || t.finished) continue;
    const auto& chain = job_.plan.chains[static_cast<std::size_t>(t.task->chain)];
    for (std::size_t index : chain.nodes)
      if (job_.spec.nodes[index].name == node) {
        workers_.send(t, m);
        ++told;
      }
  }
  return told;
}

} // namespace streamctl::runtime
