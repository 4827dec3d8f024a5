#include "operators/connectors/zmq_sink.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include <zmq.hpp>

#include "operators/connectors/output_lines.hpp"

namespace streamctl::connectors {

namespace {

constexpr std::int64_t kDefaultLingerMs = 5000;

struct ZmqSinkConfig {
  zmq::socket_type type = zmq::socket_type::push;
  std::string endpoint;
  bool bind = false;
  std::int64_t linger_ms = kDefaultLingerMs;
};

// What pre_commit appends: the sequence count (sequence_numbers.cpp), or nothing without
// `sequence_field`.
//
// Not thread-safe: every method is called from the task thread that owns the sink, which also
// owns the socket and the sink's own context (no context is shared with the job's transport).
class ZmqSink final : public operators::Sink {
public:
  ZmqSink(const pipeline::NodeSpec& node, state::FieldNames& names, ZmqSinkConfig config)
      : lines_(node, names), config_(std::move(config)) {}

  ~ZmqSink() override { abort(); }

  void open(operators::OperatorContext& ctx) override {
    Sink::open(ctx);
    lines_.open(ctx.subtask);
    context_.emplace(1);
    socket_.emplace(*context_, config_.type);
    socket_->set(zmq::sockopt::linger, static_cast<int>(config_.linger_ms));
    try {
      if (config_.bind)
        socket_->bind(config_.endpoint);
      else
        socket_->connect(config_.endpoint);
    } catch (const zmq::error_t& e) {
      throw Error(ErrorKind::JobFailed, "sink '" + ctx.node->name + "': cannot " +
                                            (config_.bind ? "bind" : "connect") + " '" +
                                            config_.endpoint + "': " + e.what());
    }
  }

  void write(const state::Batch& in) override {
    buffer_.clear();
    starts_.clear();
    lines_.encode(in, buffer_, &starts_);
    for (std::size_t k = 0; k < starts_.size(); ++k) {
      const std::size_t end =
          (k + 1 < starts_.size() ? starts_[k + 1] : buffer_.size()) - 1; // drop "\n"
      // PUSH blocks here while no peer takes messages; PUB never blocks and drops instead.
      (void)socket_->send(zmq::const_buffer(buffer_.data() + starts_[k], end - starts_[k]),
                          zmq::send_flags::none);
    }
  }

  void pre_commit(std::uint64_t, std::string& out) override { lines_.snapshot(out); }

  Result<void> restore_pending(const std::vector<std::string_view>& old_subtasks) override {
    return lines_.restore(old_subtasks, ctx_.parallelism, ctx_.node->name);
  }

  void finish() override {
    // Closing the context waits up to `linger` for queued messages to go out.
    auto started = std::chrono::steady_clock::now();
    socket_.reset();
    context_.reset();
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    if (linger_ran_out(took) && ctx_.warn)
      ctx_.warn("sink '" + ctx_.node->name + "': messages were still queued for '" +
                config_.endpoint + "' when `linger` (" + std::to_string(config_.linger_ms) +
                " ms) ran out; they were dropped");
  }

  // ZeroMQ gives no count of the messages it dropped, so a close that took the whole `linger`
  // is taken to have dropped some. Its timers run on a clock of millisecond precision read
  // from a cache, so the linger can end a millisecond or two before `linger` has passed on
  // ours: a tolerance keeps the warning from depending on that rounding.
  bool linger_ran_out(std::chrono::milliseconds took) const {
    if (config_.linger_ms < 0) return false; // -1 waits for ever: nothing is dropped
    const std::int64_t tolerance = std::min<std::int64_t>(config_.linger_ms / 10, 20);
    return took.count() >= config_.linger_ms - tolerance;
  }

  void abort() override {
    if (!socket_) return;
    socket_->set(zmq::sockopt::linger, 0);
    socket_.reset();
    context_.reset();
  }

private:
  OutputLines lines_;
  ZmqSinkConfig config_;
  std::optional<zmq::context_t> context_;
  std::optional<zmq::socket_t> socket_;
  std::string buffer_;
  std::vector<std::size_t> starts_;
};

} // namespace

pipeline::NodeTypeSchema zmq_sink_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  pipeline::NodeTypeSchema schema{"zmq", output_line_keys()};
  schema.keys.insert(
      schema.keys.begin(),
      {KeySchema{"socket", KeyType::Enum, true, {"PUSH", "PUB"}, {}, "ZeroMQ socket type"},
       KeySchema{
           "endpoint", KeyType::String, true, {}, {}, "ZeroMQ endpoint, e.g. \"tcp://host:5555\""},
       KeySchema{"bind",
                 KeyType::Bool,
                 false,
                 {},
                 {},
                 "bind the endpoint rather than connect (default false)"},
       KeySchema{"linger",
                 KeyType::Duration,
                 false,
                 {},
                 {},
                 "how long the end of the job waits for queued messages (default 5s)"}});
  return schema;
}

std::unique_ptr<operators::Sink> make_zmq_sink(const pipeline::PipelineSpec& spec,
                                               const pipeline::NodeSpec& node,
                                               state::FieldNames& names) {
  ZmqSinkConfig config;
  config.type = node.config["socket"].value_or(std::string()) == "PUB" ? zmq::socket_type::pub
                                                                       : zmq::socket_type::push;
  config.endpoint = node.config["endpoint"].value_or(std::string());
  config.bind = node.config["bind"].value_or(false);
  config.linger_ms = pipeline::duration_ms_or(node.config.get("linger"), kDefaultLingerMs);
  auto where = [&](std::string_view key) {
    return pipeline::position_of(spec, node, key) + ": sink '" + node.name + "': ";
  };
  if (config.endpoint.find("://") == std::string::npos)
    throw Error(ErrorKind::Usage,
                where("endpoint") + "bad endpoint '" + config.endpoint +
                    "': expected \"transport://address\", e.g. \"tcp://127.0.0.1:5555\"");
  // Subtasks that all bind one endpoint would collide: one binds, or each connects.
  if (config.bind && spec.parallelism_of(node) > 1)
    throw Error(ErrorKind::Usage, where("bind") + "bind = true needs parallelism = 1 (each of " +
                                      std::to_string(spec.parallelism_of(node)) +
                                      " subtasks would bind '" + config.endpoint + "')");
  return std::make_unique<ZmqSink>(node, names, std::move(config));
}

} // namespace streamctl::connectors
