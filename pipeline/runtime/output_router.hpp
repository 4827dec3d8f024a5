#pragma once
// Sends what a chain's tail emits to the subtasks downstream, partitioned per edge:
// forward (to the subtask of the same index), rebalance (whole batches round-robin) or
// broadcast (to every subtask). Records wait in a pending message per channel until it holds
// kBatchesPerMessage x `batch_size` records or its oldest record has waited `buffer_timeout`
// (Flink's buffer timeout: throughput against latency); the receiver hands them on a batch at
// a time.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "operators/partition_key.hpp"
#include "operators/window_combiner.hpp"
#include "pipeline/spec/plan.hpp"
#include "state/batch.hpp"
#include "state/batch_codec.hpp"
#include "state/byte_scratch.hpp"
#include "transport/data_channel.hpp"
#include "transport/frame.hpp"
#include "transport/message_pool.hpp"

namespace streamctl::runtime {

using Clock = std::chrono::steady_clock;

// Batches of records a data message carries at most. Each message wakes a thread on both
// sides (ZeroMQ's I/O threads, the receiving task): four batches a message took 8-14% less CPU
// than one in the keyed count and Nexmark q5 and q8 at parallelism 2 (2026-12-06).
inline constexpr std::size_t kBatchesPerMessage = 4;

class OutputRouter {
public:
  // Called while a channel's queue is full; must return once `socket` may be writable again
  // (or throw to abandon the send). It is where backpressure time is spent.
  using WaitWritable = std::function<void(zmq::socket_t& socket)>;

  OutputRouter(zmq::context_t& context, const pipeline::PipelineSpec& spec, const pipeline::PhysicalPlan& plan,
               const pipeline::Task& task,
               const std::map<int, std::string>& endpoints_by_task, state::FieldNames& names,
               std::size_t batch_size, std::chrono::milliseconds buffer_timeout, WaitWritable wait,
               const transport::LinkSecurity& security = transport::LinkSecurity::plain());

  bool has_outputs() const { return !edges_.empty(); }
  // Sends what the chain's tail emitted on `port` (pipeline::kMainOutput, or kLateOutput for
  // a window's late records) along the edges that leave from that port.
  void emit(const state::Batch& batch, int port = pipeline::kMainOutput);
  // Sends the pending batches whose timeout has passed.
  void flush_due(Clock::time_point now);
  // When the next pending batch falls due, if any.
  std::optional<Clock::time_point> next_deadline() const;
  void flush_all();
  // Flushes, then tells every downstream channel that this subtask's input has ended.
  void send_end_of_input();
  // The watermark has advanced (nothing happens when it has not): each channel carries it in
  // the message of its next batch (FrameKind::DataWithWatermark), behind every record emitted
  // before it, or alone once buffer_timeout has passed when the channel has no records
  // pending. Flushing partial batches at every watermark, which a source advances after each
  // poll, sent two messages of half a batch where one full one does.
  void send_watermark(std::int64_t watermark);
  // Flushes each channel, then sends checkpoint barrier `barrier` on it: everything this
  // subtask emitted before goes before it (SPEC §7).
  void send_barrier(const transport::BarrierPayload& barrier);
  // Tells downstream not to wait for this subtask's watermark until it sends data again.
  void send_idle();
  // A latency marker made at `created_us` goes to one channel of each output edge, in turn
  // (as Flink's go to a random one: sent to all, they would multiply at every exchange), after
  // the records pending on it.
  void send_latency_marker(std::int64_t created_us);

  // The job has halted after a checkpoint and this process goes on (a rescale kept it):
  // nothing unsent matters, and its peers may be gone, so closing must not linger.
  void drop_unsent() {
    for (auto& edge : edges_)
      for (auto& channel : edge.channels) channel.socket->drop_unsent();
  }

  std::uint64_t records_sent() const { return records_sent_; }
  std::uint64_t batches_sent() const { return batches_sent_; }
  std::uint64_t bytes_sent() const { return bytes_sent_; } // frames of every kind
  // Frames that found their channel full and had to wait for room (backpressure).
  std::uint64_t sends_found_full() const { return sends_found_full_; }

private:
  struct Channel {
    std::unique_ptr<transport::OutputChannel> socket;
    state::Batch pending;
    Clock::time_point first_pending{};
    bool retained_this_batch = false;
    bool watermark_due = false; // watermark_sent_ has not gone out on this channel yet
    // By FieldId: the fields the receiving node reads (projection.hpp); null: all of them.
    std::shared_ptr<const std::vector<bool>> keep;
  };
  struct Edge {
    pipeline::Partition partition;
    int port = pipeline::kMainOutput;
    std::vector<Channel> channels; // for key partitioning: indexed by downstream subtask
    std::size_t cursor = 0;
    std::size_t marker_cursor = 0; // the channel the next latency marker takes
    std::optional<operators::PartitionKey> key; // the downstream input's key, for Partition::Key
    std::uint32_t max_parallelism = 128;
    std::uint32_t group_mask = 0; // max_parallelism - 1 when it is a power of two, else 0
    // For Partition::Key: by key group, the index of the channel (the downstream subtask) that
    // owns it, so that routing a record is a hash and a table lookup.
    std::vector<std::uint16_t> channel_of_group;
    // For Partition::Key into a window that takes partial aggregates (two-phase aggregation,
    // operators/window_combiner.hpp); null when records go as they are.
    std::unique_ptr<operators::WindowCombiner> combiner;
  };

  void route_by_key(Edge& edge, const state::Batch& batch);
  // Record `row` of `batch` to the channel of its key (of the key group of `hash`), after
  // edge.key->prepare(batch); channels' retained_this_batch must have been reset for `batch`.
  void route_keyed(Edge& edge, const state::Batch& batch, std::size_t row);
  void route_hashed(Edge& edge, const state::Batch& batch, std::size_t row, std::uint64_t hash);
  void combine(Edge& edge, const state::Batch& batch);
  // Routes the combiner's partials of panes the watermark ends, or all of them (nullopt).
  void send_partials(Edge& edge, std::optional<std::int64_t> watermark);
  void send_all_partials();

  // A record emitted after a watermark it is behind (a late record) waits for nothing: the
  // channel sends what it holds and that watermark first, so that the record arrives behind
  // it, late there too, whether the channel's message happened to fill before or not. Records
  // at or after the watermark ride with it in one message, ahead of it, as ever.
  bool behind_due_watermark(const Channel& channel, const state::Record& record) const {
    return channel.watermark_due && record.timestamp != state::kNoTimestamp &&
           record.timestamp <= watermark_sent_;
  }
  void append(Channel& channel, const state::Batch& batch);
  void flush(Channel& channel);
  void send(Channel& channel, transport::FrameKind kind, std::string_view payload = {});
  zmq::message_t encode_data(Channel& channel, const transport::FrameHeader& header);
  void send_to_all(transport::FrameKind kind, std::string_view payload);

  std::vector<Edge> edges_;
  state::FieldNames& names_;
  std::size_t message_records_; // kBatchesPerMessage x batch_size: a full message
  std::chrono::milliseconds buffer_timeout_;
  WaitWritable wait_;
  state::BatchEncoder encoder_;
  transport::MessagePool pool_; // the memory of data messages, reused once sent
  std::string buffer_; // control frames (watermark, barrier, end of input)
  state::ByteScratch key_bytes_;
  std::vector<std::uint32_t> passed_;         // scratch: rows the combiner passed through
  // Partials taken from a combiner at a time: about what fits in a core's L2 cache.
  static constexpr std::size_t kPartialsPerTake = 8192;
  state::Batch partials_;                     // scratch: partials taken from a combiner
  std::vector<std::uint64_t> partial_hashes_; // and the hash of each one's key
  bool idle_ = false; // send_idle() came, and no watermark since: nothing is combined
  std::int64_t watermark_sent_ = INT64_MIN;
  std::uint64_t records_sent_ = 0;
  std::uint64_t batches_sent_ = 0;
  std::uint64_t bytes_sent_ = 0;
  std::uint64_t sends_found_full_ = 0;
};

} // namespace streamctl::runtime
