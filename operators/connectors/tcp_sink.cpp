#include "operators/connectors/tcp_sink.hpp"

#include <netdb.h>
#include <optional>

#include "operators/connectors/output_lines.hpp"
#include "operators/connectors/tcp_writer.hpp"

namespace streamctl::connectors {

namespace {

// What pre_commit appends: the sequence count (sequence_numbers.cpp), or nothing without
// `sequence_field`. The lines themselves are not kept: a restore replays them.
//
// Not thread-safe: every method is called from the task thread that owns the sink.
class TcpSink final : public operators::Sink {
public:
  TcpSink(const pipeline::NodeSpec& node, state::FieldNames& names, TcpAddress address)
      : lines_(node, names), address_(std::move(address)) {}

  void open(operators::OperatorContext& ctx) override {
    Sink::open(ctx);
    lines_.open(ctx.subtask);
    // With checkpoints, a new connection gets everything since the last one again: what a
    // restore from it would replay, without the restart.
    writer_.emplace(address_, "sink '" + ctx.node->name + "'", !ctx.checkpoint_dir.empty(),
                    ctx.warn);
  }

  void write(const state::Batch& in) override {
    buffer_.clear();
    lines_.encode(in, buffer_);
    if (!buffer_.empty()) writer_->send(buffer_);
  }

  void pre_commit(std::uint64_t, std::string& out) override {
    // The checkpoint covers these lines: they must have reached the peer, since no restore
    // from it will send them again.
    writer_->wait_acknowledged();
    writer_->release();
    lines_.snapshot(out);
  }

  Result<void> restore_pending(const std::vector<std::string_view>& old_subtasks) override {
    return lines_.restore(old_subtasks, ctx_.parallelism, ctx_.node->name);
  }

  void finish() override {
    writer_->wait_acknowledged();
    writer_->close();
  }

  void abort() override {
    if (writer_) writer_->abort();
  }

private:
  OutputLines lines_;
  TcpAddress address_;
  std::optional<TcpWriter> writer_;
  std::string buffer_;
};

} // namespace

pipeline::NodeTypeSchema tcp_sink_schema() {
  pipeline::NodeTypeSchema schema{"tcp", output_line_keys()};
  schema.keys.insert(
      schema.keys.begin(),
      pipeline::KeySchema{
          "address", pipeline::KeyType::String, true, {}, {}, "\"host:port\" to connect to"});
  return schema;
}

std::unique_ptr<operators::Sink> make_tcp_sink(const pipeline::PipelineSpec& spec,
                                               const pipeline::NodeSpec& node,
                                               state::FieldNames& names) {
  const std::string text = node.config["address"].value_or(std::string());
  auto where = [&] {
    return pipeline::position_of(spec, node, "address") + ": sink '" + node.name + "': ";
  };
  TcpAddress address;
  std::string why;
  if (!parse_tcp_address(text, address, why))
    throw Error(ErrorKind::Usage, where() + "bad address '" + text + "': " + why);
  // A name that does not exist is a mistake in the file; a DNS server that does not answer
  // now (EAI_AGAIN) may answer later, and the sink retries then.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(address.host.c_str(), address.port.c_str(), &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (rc == EAI_NONAME || rc == EAI_FAIL || rc == EAI_SERVICE || rc == EAI_NODATA)
    throw Error(ErrorKind::Usage, where() + "cannot resolve '" + text + "': " + ::gai_strerror(rc));
  return std::make_unique<TcpSink>(node, names, std::move(address));
}

} // namespace streamctl::connectors
