#pragma once
// A worker's open taps (tap_protocol.hpp): which node of its chain each copies, how many
// records it may still copy, and the JSON lines waiting to be sent. The task chain offers it
// every batch leaving a node; it copies a sample of the records of tapped nodes.
//
// Not thread-safe: owned by a worker's task loop.

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "state/batch.hpp"
#include "state/json_writer.hpp"
#include "transport/control.hpp"

namespace streamctl::runtime {

class RecordTap {
public:
  using Clock = std::chrono::steady_clock;

  // `chain_nodes`: the chain's node names, by chain position (TaskChain::node_names).
  RecordTap(std::vector<std::string> chain_nodes, const state::FieldNames& names);

  // Whether any tap is open: the one test the data path makes.
  bool active() const { return !taps_.empty(); }

  // A TAP message: opens the tap, or renews its lease. Ignored for a node not in the chain.
  void open(const transport::ControlMessage& m, Clock::time_point now);
  // An UNTAP message.
  void close(const std::string& id);

  // A batch leaving the node at `position` of the chain.
  void offer(std::size_t position, const state::Batch& batch);

  // The TAPPED messages due now (every kTapFlushEvery; with `all`, whatever waits), and
  // forgets taps whose lease ran out.
  std::vector<transport::ControlMessage> take_due(Clock::time_point now, bool all = false);

private:
  struct Tap {
    std::string id;
    std::size_t position = 0;
    double sample = 1.0;
    std::uint64_t left = 0; // copies it may still make
    Clock::time_point lease_until;
    std::string lines;
    std::uint64_t skipped = 0;
  };

  std::vector<std::string> chain_nodes_;
  state::JsonRecordWriter writer_;
  std::vector<Tap> taps_;
  std::mt19937_64 random_;
  Clock::time_point next_flush_;
};

} // namespace streamctl::runtime
