#include "pipeline/runtime/record_tap.hpp"

#include <algorithm>
#include <cstdlib>

#include "pipeline/runtime/tap_protocol.hpp"

namespace streamctl::runtime {

RecordTap::RecordTap(std::vector<std::string> chain_nodes, const state::FieldNames& names)
    : chain_nodes_(std::move(chain_nodes)), writer_(names), random_(std::random_device{}()) {}

void RecordTap::open(const transport::ControlMessage& m, Clock::time_point now) {
  const std::string& id = m.get("tap");
  for (Tap& t : taps_)
    if (t.id == id) {
      t.lease_until = now + kTapLease;
      return;
    }
  auto at = std::find(chain_nodes_.begin(), chain_nodes_.end(), m.get("node"));
  if (id.empty() || at == chain_nodes_.end()) return;
  Tap t;
  t.id = id;
  t.position = static_cast<std::size_t>(at - chain_nodes_.begin());
  t.sample = std::clamp(std::strtod(m.get("sample").c_str(), nullptr), 0.0, 1.0);
  if (m.get("sample").empty()) t.sample = 1.0;
  std::int64_t limit = m.get_int("limit", 0);
  t.left = limit > 0 ? static_cast<std::uint64_t>(limit) : UINT64_MAX;
  t.lease_until = now + kTapLease;
  taps_.push_back(std::move(t));
}

void RecordTap::close(const std::string& id) {
  std::erase_if(taps_, [&](const Tap& t) { return t.id == id; });
}

void RecordTap::offer(std::size_t position, const state::Batch& batch) {
  for (Tap& t : taps_) {
    if (t.position != position) continue;
    std::bernoulli_distribution keep(t.sample);
    for (const state::Record& r : batch) {
      if (t.left == 0) break;
      if (t.sample < 1.0 && !keep(random_)) continue;
      if (t.lines.size() >= kTapMaxBytes) {
        ++t.skipped;
        continue;
      }
      writer_.append(r, t.lines);
      t.lines += '\n';
      --t.left;
    }
  }
}

std::vector<transport::ControlMessage> RecordTap::take_due(Clock::time_point now, bool all) {
  std::vector<transport::ControlMessage> due;
  if (now < next_flush_ && !all) return due;
  next_flush_ = now + kTapFlushEvery;
  std::erase_if(taps_, [&](const Tap& t) { return t.lease_until < now; });
  for (Tap& t : taps_) {
    if (t.lines.empty() && t.skipped == 0) continue;
    transport::ControlMessage m{"TAPPED", {}};
    m.set("tap", t.id).set("lines", std::move(t.lines)).set("skipped", std::to_string(t.skipped));
    due.push_back(std::move(m));
    t.lines.clear();
    t.skipped = 0;
  }
  return due;
}

} // namespace streamctl::runtime
