#pragma once
// Barrier alignment at a task with several input channels (SPEC §7; the Chandy-Lamport
// variant of Flink's "Lightweight Asynchronous Snapshots for Distributed Dataflows").
//
// Exactly-once: once barrier N has come on a channel, what follows on that channel belongs
// after the checkpoint, so it is held back until N has come on every channel that has not
// ended; then the task snapshots its state, forwards N, and processes what was held, in
// order. At-least-once: nothing is held; the task snapshots when N has come on every
// channel, so records that overtook the barrier are in the state and replay after a restore
// (duplicates, never loss).
//
// A barrier newer than the one being aligned means the coordinator gave up on the older
// (timeout): the older alignment is dropped, and what it held is processed as usual.
//
// Held frames are kept in memory; they are what one channel delivers while another's
// barrier is on its way, usually little. Not thread-safe: owned by the task thread.

#include <cstdint>
#include <deque>
#include <set>

#include <zmq.hpp>

namespace streamctl::runtime {

class BarrierAligner {
public:
  BarrierAligner(int channels, bool exactly_once) : channels_(channels), exactly_once_(exactly_once) {}

  enum class Outcome {
    Wait,     // more barriers to come
    Complete, // every live channel has delivered the barrier: snapshot now, then release()
    Ignored,  // an old barrier, of a checkpoint already taken or given up
  };

  // Whether a frame from `channel` must be held (its barrier came, the others' did not).
  bool blocked(std::uint32_t channel) const { return exactly_once_ && barriers_.count(channel) > 0; }
  void hold(zmq::message_t&& frame) { held_.push_back(std::move(frame)); }
  // A frame to process before reading the socket again (released or given-up frames).
  bool take_replay(zmq::message_t& frame);
  bool has_replay() const { return !replay_.empty(); }

  Outcome on_barrier(std::uint32_t channel, std::uint64_t checkpoint_id);
  // `channel` has ended: it owes no barrier any more, which may complete an alignment.
  Outcome on_end(std::uint32_t channel);
  // After Complete, once the snapshot is taken: what was held is processed next, in order.
  void release();

  std::uint64_t aligning() const { return aligning_; }
  std::size_t held() const { return held_.size(); }

private:
  bool complete() const;

  int channels_;
  bool exactly_once_;
  std::uint64_t aligning_ = 0; // the checkpoint being aligned; 0 when none
  std::uint64_t taken_ = 0;    // the newest checkpoint this task has snapshotted or dropped
  std::set<std::uint32_t> barriers_; // channels that delivered barrier `aligning_`
  std::set<std::uint32_t> ended_;
  std::deque<zmq::message_t> held_;
  std::deque<zmq::message_t> replay_;
};

} // namespace streamctl::runtime
