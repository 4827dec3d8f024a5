#include "pipeline/runtime/output_router.hpp"

#include <bit>

#include "state/batch_codec.hpp"
#include "state/error.hpp"
#include "state/key_group.hpp"

namespace streamctl::runtime {

OutputRouter::OutputRouter(zmq::context_t& context, const pipeline::PipelineSpec& spec,
                           const pipeline::PhysicalPlan& plan, const pipeline::Task& task, const std::map<int, std::string>& endpoints_by_task,
                           state::FieldNames& names, std::size_t batch_size,
                           std::chrono::milliseconds buffer_timeout, WaitWritable wait,
                           const transport::LinkSecurity& security)
    : names_(names), message_records_(kBatchesPerMessage * batch_size), buffer_timeout_(buffer_timeout), wait_(std::move(wait)) {
  for (const auto* e : plan.edges_out_of(task.chain)) {
    Edge edge;
    edge.partition = e->partition;
    edge.port = e->from_port;
    if (e->partition == pipeline::Partition::Key) {
      edge.key = operators::PartitionKey::for_input(spec, spec.nodes[e->to_node], e->input_index, names);
      if (!edge.key)
        throw Error(ErrorKind::Internal, "edge into '" + spec.nodes[e->to_node].name + "' is keyed but the node has no key");
      edge.max_parallelism = static_cast<std::uint32_t>(spec.max_parallelism);
      if (std::has_single_bit(edge.max_parallelism)) edge.group_mask = edge.max_parallelism - 1;
    }
    if (e->partition == pipeline::Partition::Key && spec.combines_into(e->to_node))
      edge.combiner = operators::WindowCombiner::for_node(spec, spec.nodes[e->to_node], names);
    std::shared_ptr<const std::vector<bool>> keep;
    if (auto reads = spec.fields_read(e->to_node, static_cast<std::size_t>(e->input_index)); !reads.all) {
      auto mask = pipeline::field_mask(reads, names);
      if (edge.combiner) // partials are made of fields of their own
        for (std::string_view name : {operators::kPartialKeyField, operators::kPartialStateField}) {
          const state::FieldId id = names.intern(name);
          if (id >= mask.size()) mask.resize(id + 1, false);
          mask[id] = true;
        }
      keep = std::make_shared<std::vector<bool>>(std::move(mask));
    }
    int downstream = plan.chains[static_cast<std::size_t>(e->to_chain)].parallelism;
    for (int d = 0; d < downstream; ++d) {
      if (!e->connects(task.subtask, d)) continue;
      const pipeline::Task* target = plan.task_of(e->to_chain, d);
      auto it = endpoints_by_task.find(target->id);
      if (it == endpoints_by_task.end())
        throw Error(ErrorKind::Internal, "no endpoint for task " + std::to_string(target->id));
      auto channel_id = static_cast<std::uint32_t>((e->id << 20) | (task.subtask << 10) | d);
      Channel channel;
      channel.keep = keep;
      channel.socket = std::make_unique<transport::OutputChannel>(
          context, it->second, channel_id, static_cast<std::uint16_t>(e->input_index), security);
      edge.channels.push_back(std::move(channel));
    }
    if (edge.partition == pipeline::Partition::Key) {
      const int parallelism = static_cast<int>(edge.channels.size());
      for (std::uint32_t group = 0; group < edge.max_parallelism; ++group)
        edge.channel_of_group.push_back(static_cast<std::uint16_t>(
            state::subtask_for_key_group(group, parallelism, edge.max_parallelism)));
    }
    edges_.push_back(std::move(edge));
  }
}

void OutputRouter::emit(const state::Batch& batch, int port) {
  if (batch.empty()) return;
  for (auto& edge : edges_) {
    if (edge.port != port) continue;
    switch (edge.partition) {
    case pipeline::Partition::Forward: append(edge.channels.front(), batch); break;
    case pipeline::Partition::Broadcast:
      for (auto& channel : edge.channels) append(channel, batch);
      break;
    case pipeline::Partition::Rebalance:
      append(edge.channels[edge.cursor++ % edge.channels.size()], batch);
      break;
    case pipeline::Partition::Key:
      if (edge.combiner && !idle_ && !edge.combiner->bypassing()) {
        combine(edge, batch);
      } else {
        if (edge.combiner) edge.combiner->bypassed(batch.size());
        route_by_key(edge, batch);
      }
      break;
    }
  }
}

void OutputRouter::append(Channel& channel, const state::Batch& batch) {
  if (channel.pending.empty() && !channel.watermark_due) channel.first_pending = Clock::now();
  channel.pending.retain_memory_of(batch);
  for (const auto& record : batch) {
    if (behind_due_watermark(channel, record)) {
      flush(channel);
      channel.pending.retain_memory_of(batch);
    }
    channel.pending.add_shared(record);
  }
  if (channel.pending.size() >= message_records_) flush(channel);
}

// Each record to the subtask that owns its key group (SPEC §3).
void OutputRouter::route_by_key(Edge& edge, const state::Batch& batch) {
  for (auto& channel : edge.channels) channel.retained_this_batch = false;
  edge.key->prepare(std::span<const state::Record>(batch.begin(), batch.end()));
  for (std::size_t i = 0; i < batch.size(); ++i) route_keyed(edge, batch, i);
}

void OutputRouter::route_keyed(Edge& edge, const state::Batch& batch, std::size_t row) {
  edge.key->encode_at(row, batch[row], names_, key_bytes_);
  route_hashed(edge, batch, row, state::hash_key_bytes(key_bytes_.view()));
}

void OutputRouter::route_hashed(Edge& edge, const state::Batch& batch, std::size_t row, std::uint64_t hash) {
  // hash % max_parallelism (key_group_of), without a 64-bit division for the usual power of two.
  const auto group = edge.group_mask != 0 ? static_cast<std::uint32_t>(hash & edge.group_mask)
                                          : state::key_group_of(hash, edge.max_parallelism);
  Channel& channel = edge.channels[edge.channel_of_group[group]];
  if (behind_due_watermark(channel, batch[row])) {
    flush(channel);
    channel.retained_this_batch = false;
  }
  if (!channel.retained_this_batch) {
    if (channel.pending.empty() && !channel.watermark_due) channel.first_pending = Clock::now();
    channel.pending.retain_memory_of(batch);
    channel.retained_this_batch = true;
  }
  channel.pending.add_shared(batch[row]);
  if (channel.pending.size() >= message_records_) {
    flush(channel);
    channel.retained_this_batch = false;
  }
}

// Two-phase aggregation (operators/window_combiner.hpp): what the combiner takes waits in it;
// what it passes through goes on now, by key.
void OutputRouter::combine(Edge& edge, const state::Batch& batch) {
  passed_.clear();
  edge.combiner->add(batch, passed_);
  if (!passed_.empty()) {
    for (auto& channel : edge.channels) channel.retained_this_batch = false;
    edge.key->prepare(std::span<const state::Record>(batch.begin(), batch.end()));
    for (std::uint32_t row : passed_) route_keyed(edge, batch, row);
  }
  if (edge.combiner->full()) send_partials(edge, std::nullopt);
}

void OutputRouter::send_partials(Edge& edge, std::optional<std::int64_t> watermark) {
  bool more = true;
  while (more) {
    partials_.clear();
    partial_hashes_.clear();
    more = watermark ? edge.combiner->take(*watermark, partials_, partial_hashes_, kPartialsPerTake)
                     : edge.combiner->take_all(partials_, partial_hashes_, kPartialsPerTake);
    for (auto& channel : edge.channels) channel.retained_this_batch = false;
    for (std::size_t i = 0; i < partials_.size(); ++i) route_hashed(edge, partials_, i, partial_hashes_[i]);
  }
}

void OutputRouter::send_all_partials() {
  for (auto& edge : edges_)
    if (edge.combiner) send_partials(edge, std::nullopt);
}

void OutputRouter::flush(Channel& channel) {
  if (channel.pending.empty()) {
    if (channel.watermark_due) {
      std::string payload;
      transport::write_watermark_payload(watermark_sent_, false, payload);
      send(channel, transport::FrameKind::Watermark, payload);
      channel.watermark_due = false;
    }
    return;
  }
  records_sent_ += channel.pending.size();
  send(channel, channel.watermark_due ? transport::FrameKind::DataWithWatermark : transport::FrameKind::Data);
  channel.watermark_due = false;
  channel.pending.clear();
}

void OutputRouter::send(Channel& channel, transport::FrameKind kind, std::string_view payload) {
  transport::FrameHeader header;
  header.kind = kind;
  header.channel = channel.socket->channel_id();
  header.input_index = channel.socket->input_index();
  header.sequence = channel.socket->next_sequence();
  zmq::message_t message;
  if (kind == transport::FrameKind::Data || kind == transport::FrameKind::DataWithWatermark) {
    message = encode_data(channel, header);
  } else {
    buffer_.clear();
    transport::write_frame_header(header, buffer_);
    buffer_.append(payload);
    message.rebuild(buffer_.data(), buffer_.size());
  }
  const std::size_t bytes = message.size();
  if (!channel.socket->try_send(message)) {
    ++sends_found_full_;
    do wait_(channel.socket->socket());
    while (!channel.socket->try_send(message));
  }
  ++batches_sent_;
  bytes_sent_ += bytes;
}

// The batch is encoded straight into the memory the message sends (a block of pool_, which
// ZeroMQ takes as it is and hands back once sent), where copying an encoded string into the
// message cost a pass over every byte. The block has room for the encoder's bound; the
// message is as long as what was written.
zmq::message_t OutputRouter::encode_data(Channel& channel, const transport::FrameHeader& header) {
  const bool piggyback = header.kind == transport::FrameKind::DataWithWatermark;
  const std::size_t head =
      transport::kFrameHeaderSize + (piggyback ? transport::kPiggybackWatermarkSize : 0);
  const std::size_t bound = encoder_.bound(channel.pending, names_, channel.keep.get());
  char* memory = pool_.acquire(head + bound);
  transport::write_frame_header(header, memory);
  if (piggyback) transport::write_piggyback_watermark(watermark_sent_, memory + transport::kFrameHeaderSize);
  const std::size_t size = head + encoder_.write(channel.pending, names_, memory + head);
  return pool_.wrap(memory, size);
}

void OutputRouter::flush_due(Clock::time_point now) {
  for (auto& edge : edges_)
    for (auto& channel : edge.channels)
      if ((!channel.pending.empty() || channel.watermark_due) &&
          now - channel.first_pending >= buffer_timeout_)
        flush(channel);
}

std::optional<Clock::time_point> OutputRouter::next_deadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& edge : edges_)
    for (const auto& channel : edge.channels)
      if (!channel.pending.empty() || channel.watermark_due) {
        auto due = channel.first_pending + buffer_timeout_;
        if (!next || due < *next) next = due;
      }
  return next;
}

void OutputRouter::flush_all() {
  for (auto& edge : edges_)
    for (auto& channel : edge.channels) flush(channel);
}

void OutputRouter::send_end_of_input() {
  send_all_partials();
  send_to_all(transport::FrameKind::EndOfInput, {});
}

void OutputRouter::send_watermark(std::int64_t watermark) {
  if (watermark <= watermark_sent_) return;
  // Partials of the panes the watermark ends go before it (window_combiner.hpp).
  for (auto& edge : edges_)
    if (edge.combiner) send_partials(edge, watermark);
  idle_ = false;
  watermark_sent_ = watermark;
  Clock::time_point now{};
  for (auto& edge : edges_)
    for (auto& channel : edge.channels) {
      if (channel.pending.empty() && !channel.watermark_due) {
        if (now == Clock::time_point{}) now = Clock::now();
        channel.first_pending = now; // the watermark alone waits at most buffer_timeout
      }
      channel.watermark_due = true;
    }
}

void OutputRouter::send_barrier(const transport::BarrierPayload& barrier) {
  std::string payload;
  transport::write_barrier_payload(barrier, payload);
  send_all_partials(); // no partial is checkpointed: each goes before the barrier
  send_to_all(transport::FrameKind::Barrier, payload);
}

void OutputRouter::send_idle() {
  // Downstream stops waiting for this subtask's watermark, so a partial held now could reach
  // a window that fired meanwhile: until the next watermark records go on as they are.
  send_all_partials();
  idle_ = true;
  std::string payload;
  transport::write_watermark_payload(watermark_sent_, true, payload);
  send_to_all(transport::FrameKind::Watermark, payload);
}

void OutputRouter::send_latency_marker(std::int64_t created_us) {
  std::string payload;
  transport::write_latency_marker_payload(created_us, payload);
  for (auto& edge : edges_) {
    if (edge.channels.empty()) continue;
    Channel& channel = edge.channels[edge.marker_cursor++ % edge.channels.size()];
    flush(channel);
    send(channel, transport::FrameKind::LatencyMarker, payload);
  }
}

void OutputRouter::send_to_all(transport::FrameKind kind, std::string_view payload) {
  for (auto& edge : edges_)
    for (auto& channel : edge.channels) {
      flush(channel);
      send(channel, kind, payload);
    }
}

} // namespace streamctl::runtime
