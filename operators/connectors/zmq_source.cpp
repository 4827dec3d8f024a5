#include "operators/connectors/zmq_source.hpp"

#include <zmq.hpp>

#include "operators/connectors/live_source_options.hpp"
#include "operators/spooled_line_source.hpp"
#include "operators/text_format_schema.hpp"

namespace streamctl::connectors {

namespace {

struct ZmqConfig {
  zmq::socket_type type = zmq::socket_type::pull;
  std::string type_name = "PULL";
  std::string endpoint;
  bool bind = false;
  std::vector<std::string> subscribe;
};

class ZmqSource final : public operators::SpooledLineSource {
public:
  ZmqSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
            state::FieldNames& names, ZmqConfig config, std::string where,
            LiveSourceOptions options)
      : SpooledLineSource(spec, node, names, "zmq", 'Z'), config_(std::move(config)),
        where_(std::move(where)), options_(options) {}

  // Binds or connects here, before any record flows: an endpoint in use fails the job at once.
  void open(operators::OperatorContext& ctx) override {
    SpooledLineSource::open(ctx);
    context_.emplace(1);
    socket_.emplace(*context_, config_.type);
    socket_->set(zmq::sockopt::linger, 0); // a receiver has nothing to flush
    socket_->set(zmq::sockopt::rcvhwm, 100000);
    if (config_.type == zmq::socket_type::sub) {
      if (config_.subscribe.empty()) socket_->set(zmq::sockopt::subscribe, "");
      for (const auto& prefix : config_.subscribe)
        socket_->set(zmq::sockopt::subscribe, prefix);
    }
    try {
      if (config_.bind)
        socket_->bind(config_.endpoint);
      else
        socket_->connect(config_.endpoint);
    } catch (const zmq::error_t& e) {
      throw Error(ErrorKind::Usage, where_ + ": cannot " +
                                        (config_.bind ? "bind " : "connect to ") +
                                        config_.endpoint + ": " + e.what());
    }
    fd_ = socket_->get(zmq::sockopt::fd);
    last_activity_ms_ = monotonic_ms();
  }

protected:
  bool pump_input(std::size_t budget) override {
    framed_.clear();
    std::size_t moved = 0;
    more_ = false;
    while (moved < budget) {
      zmq::message_t frame;
      auto got = socket_->recv(frame, zmq::recv_flags::dontwait);
      if (!got) break;
      // The record is the last frame; a multipart message's earlier frames are skipped.
      while (frame.more()) {
        if (!socket_->recv(frame, zmq::recv_flags::none)) break;
      }
      moved += frame.size() + 1;
      take(std::string_view(static_cast<const char*>(frame.data()), frame.size()));
    }
    more_ = moved >= budget;
    if (!framed_.empty()) append(framed_);
    auto now = monotonic_ms();
    if (moved > 0) {
      last_activity_ms_ = now;
      received_any_ = true;
    }
    return options_.end_after_idle_ms > 0 && received_any_ &&
           now - last_activity_ms_ >= options_.end_after_idle_ms;
  }
  // ZMQ_FD is edge-triggered: it signals once for messages that arrive after a recv found
  // none, so a pump that stopped at its budget says so (input_has_more).
  int input_readiness_fd() const override { return fd_; }
  bool input_has_more() const override { return more_; }

private:
  // One message is one line: a trailing newline is dropped; a newline inside, or a message
  // longer than max_line, makes it a bad record.
  void take(std::string_view message) {
    if (!message.empty() && message.back() == '\n') message.remove_suffix(1);
    if (!message.empty() && message.back() == '\r') message.remove_suffix(1);
    if (message.size() > options_.max_line) {
      ctx_.errors->bad_record(message.substr(0, 256), 0,
                              too_long_reason(message.size(), options_.max_line));
      return;
    }
    if (message.find('\n') != std::string_view::npos) {
      ctx_.errors->bad_record(message, 0, "a message holds a newline: one message is one record");
      return;
    }
    framed_.append(message);
    framed_.push_back('\n');
  }

  ZmqConfig config_;
  std::string where_;
  LiveSourceOptions options_;
  std::optional<zmq::context_t> context_; // this source's own: no global context
  std::optional<zmq::socket_t> socket_;   // declared after the context: closed before it
  int fd_ = -1;
  std::string framed_;
  bool more_ = false;
  bool received_any_ = false;
  std::int64_t last_activity_ms_ = 0;
};
} // namespace

pipeline::NodeTypeSchema zmq_source_schema() {
  pipeline::NodeTypeSchema schema{"zmq", operators::text_format_keys()};
  std::vector<pipeline::KeySchema> own{
      {"socket", pipeline::KeyType::Enum, true, {"PULL", "SUB"}, {}, "socket type"},
      {"endpoint",
       pipeline::KeyType::String,
       true,
       {},
       {},
       "ZeroMQ endpoint, e.g. \"tcp://127.0.0.1:5555\""},
      {"bind",
       pipeline::KeyType::Bool,
       false,
       {},
       {},
       "bind the endpoint instead of connecting (default false)"},
      {"subscribe",
       pipeline::KeyType::StringArray,
       false,
       {},
       {},
       "SUB: topic prefixes to receive (default: everything)"}};
  schema.keys.insert(schema.keys.begin(), own.begin(), own.end());
  for (auto& key : live_source_keys(true))
    schema.keys.push_back(std::move(key));
  schema.one_subtask = true;
  return schema;
}

std::unique_ptr<operators::Source> make_zmq_source(const pipeline::PipelineSpec& spec,
                                                   const pipeline::NodeSpec& node,
                                                   state::FieldNames& names) {
  ZmqConfig config;
  config.type_name = node.config["socket"].value_or(std::string("PULL"));
  config.type = config.type_name == "SUB" ? zmq::socket_type::sub : zmq::socket_type::pull;
  config.endpoint = node.config["endpoint"].value_or(std::string());
  config.bind = node.config["bind"].value_or(false);
  if (auto* array = node.config["subscribe"].as_array())
    for (const auto& v : *array)
      if (auto s = v.value<std::string>()) config.subscribe.push_back(*s);
  if (!config.subscribe.empty() && config.type != zmq::socket_type::sub)
    throw Error(ErrorKind::Usage,
                where_in(spec, node, "subscribe") + ": 'subscribe' is for socket = \"SUB\" only");
  if (config.endpoint.find("://") == std::string::npos)
    throw Error(ErrorKind::Usage,
                where_in(spec, node, "endpoint") + ": endpoint '" + config.endpoint +
                    "' is not TRANSPORT://ADDRESS, e.g. \"tcp://127.0.0.1:5555\"");
  return std::make_unique<ZmqSource>(spec, node, names, std::move(config),
                                     where_in(spec, node, "endpoint"),
                                     read_live_source_options(spec, node));
}

} // namespace streamctl::connectors
