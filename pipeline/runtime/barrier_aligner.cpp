#include "pipeline/runtime/barrier_aligner.hpp"

namespace streamctl::runtime {

bool BarrierAligner::take_replay(zmq::message_t& frame) {
  if (replay_.empty()) return false;
  frame = std::move(replay_.front());
  replay_.pop_front();
  return true;
}

bool BarrierAligner::complete() const {
  std::size_t live = static_cast<std::size_t>(channels_) - ended_.size();
  std::size_t delivered = 0;
  for (auto channel : barriers_)
    if (!ended_.count(channel)) ++delivered;
  return delivered >= live;
}

BarrierAligner::Outcome BarrierAligner::on_barrier(std::uint32_t channel, std::uint64_t checkpoint_id) {
  if (checkpoint_id <= taken_ || (aligning_ != 0 && checkpoint_id < aligning_)) return Outcome::Ignored;
  if (checkpoint_id > aligning_ && aligning_ != 0) {
    // The older checkpoint was given up: process what it held, before anything newer.
    taken_ = aligning_;
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) replay_.push_front(std::move(*it));
    held_.clear();
    barriers_.clear();
  }
  aligning_ = checkpoint_id;
  barriers_.insert(channel);
  return complete() ? Outcome::Complete : Outcome::Wait;
}

BarrierAligner::Outcome BarrierAligner::on_end(std::uint32_t channel) {
  ended_.insert(channel);
  if (aligning_ == 0) return Outcome::Ignored;
  return complete() ? Outcome::Complete : Outcome::Wait;
}

void BarrierAligner::release() {
  taken_ = aligning_;
  aligning_ = 0;
  barriers_.clear();
  // Held frames were read before anything still waiting for replay on their channels.
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) replay_.push_front(std::move(*it));
  held_.clear();
}

} // namespace streamctl::runtime
