#include "transport/zap_handler.hpp"

#include <array>
#include <cstdio>
#include <vector>

#include <zmq_addon.hpp>

#include "state/error.hpp"

namespace streamctl::transport {

namespace {

std::string unique_inproc(const char* what, const void* owner) {
  std::array<char, 64> name{};
  std::snprintf(name.data(), name.size(), "inproc://streamctl-%s-%p", what, owner);
  return name.data();
}

} // namespace

ZapHandler::ZapHandler(zmq::context_t& context, std::set<std::string> allowed_client_keys,
                       RefusalCallback on_refusal)
    : allowed_(std::move(allowed_client_keys)), on_refusal_(std::move(on_refusal)),
      requests_(context, zmq::socket_type::rep), stop_receiver_(context, zmq::socket_type::pair),
      stop_sender_(context, zmq::socket_type::pair) {
  requests_.set(zmq::sockopt::linger, 0);
  stop_receiver_.set(zmq::sockopt::linger, 0);
  stop_sender_.set(zmq::sockopt::linger, 0);
  try {
    requests_.bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    throw Error(ErrorKind::Internal,
                std::string("cannot start the ZAP handler: ") +
                    (e.num() == EADDRINUSE ? "another one runs in this context" : e.what()));
  }
  std::string stop_endpoint = unique_inproc("zap-stop", this);
  stop_receiver_.bind(stop_endpoint);
  stop_sender_.connect(stop_endpoint);
  thread_ = std::thread([this] { run(); });
}

ZapHandler::ZapHandler(zmq::context_t& context, const LinkSecurity& security,
                       RefusalCallback on_refusal)
    : ZapHandler(context, std::set<std::string>{security.client.public_key},
                 std::move(on_refusal)) {}

ZapHandler::~ZapHandler() {
  try {
    stop_sender_.send(zmq::str_buffer("stop"), zmq::send_flags::none);
  } catch (const zmq::error_t&) {
    // The context is shutting down: the thread sees that too and ends.
  }
  thread_.join();
}

void ZapHandler::run() {
  std::array<zmq::pollitem_t, 2> items{
      {{requests_.handle(), 0, ZMQ_POLLIN, 0}, {stop_receiver_.handle(), 0, ZMQ_POLLIN, 0}}};
  try {
    while (true) {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
      if (items[1].revents & ZMQ_POLLIN) break;
      if (items[0].revents & ZMQ_POLLIN) answer_one();
    }
    // Closing frees the name only later, in the reaper thread; unbinding frees it now, so a
    // new handler can start in this context as soon as this one is destroyed.
    requests_.unbind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t&) {
    // ETERM: the context is being terminated; nothing is left to answer.
  }
}

// Request frames (RFC 27): version "1.0", request id, domain, peer address, routing id,
// mechanism, credentials (CURVE: the client's 32-byte public key). Reply frames: version,
// request id, status code, status text, user id, metadata.
void ZapHandler::answer_one() {
  std::vector<zmq::message_t> request;
  if (!zmq::recv_multipart(requests_, std::back_inserter(request), zmq::recv_flags::dontwait))
    return;
  std::string status = "400";
  std::string text = "malformed ZAP request";
  Refusal refusal;
  if (request.size() >= 6 && request[0].to_string_view() == "1.0") {
    refusal.peer = request[3].to_string();
    refusal.mechanism = request[5].to_string();
    if (refusal.mechanism == "NULL") {
      status = "200";
    } else if (refusal.mechanism == "CURVE" && request.size() >= 7 && request[6].size() == 32) {
      std::array<char, 41> z85{};
      zmq_z85_encode(z85.data(), request[6].data<std::uint8_t>(), 32);
      if (allowed_.count(z85.data()) != 0) {
        status = "200";
      } else {
        refusal.key_prefix = key_prefix(z85.data());
        text = "not a key of this job";
      }
    } else {
      text = "mechanism not allowed";
    }
  }
  std::array<std::string, 6> reply{
      "1.0",  request.size() > 1 ? request[1].to_string() : std::string(),
      status, status == "200" ? "OK" : text,
      "",     ""};
  // Counted before the reply goes: once it has, the admitted peer's messages may be read
  // before this thread runs again (a test saw 0 admitted after the message arrived).
  if (status == "200") ++admitted_;
  else ++refused_;
  for (std::size_t i = 0; i < reply.size(); ++i)
    requests_.send(zmq::buffer(reply[i]),
                   i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  if (status == "200") return;
  refusal.reason = text;
  if (!on_refusal_) return;
  try {
    on_refusal_(refusal);
  } catch (...) {
    // A failing log call must not stop the handler: every later client would go unchecked.
  }
}

} // namespace streamctl::transport
