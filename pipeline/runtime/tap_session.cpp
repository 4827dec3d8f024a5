#include "pipeline/runtime/tap_session.hpp"

#include <cstdio>
#include <random>

#include "pipeline/runtime/tap_protocol.hpp"
#include "state/error.hpp"
#include "transport/control.hpp"

namespace streamctl::runtime {

namespace {
std::string random_tap_id() {
  std::random_device device;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", device(), device());
  return text;
}
} // namespace

TapSession::TapSession(const JobEntry& job, Request request)
    : socket_(context_, zmq::socket_type::dealer), id_(random_tap_id()), request_(std::move(request)) {
  if ((job.state != "running" && job.state != "restarting") || job.control.empty())
    throw Error(ErrorKind::Usage, "job " + job.id + " is not running (it is " + job.state +
                                      (job.lost ? ": its coordinator is gone" : "") + ")");
  socket_.set(zmq::sockopt::linger, 200); // long enough for the UNTAP to leave
  socket_.connect(job.control);
  last_heard_ = Clock::now();
  send_request();
}

TapSession::~TapSession() {
  try {
    close();
  } catch (const zmq::error_t&) {
    // The coordinator's lease lets the tap go by itself.
  }
}

void TapSession::send_request() {
  transport::ControlMessage m{"TAP", {}};
  char sample[32];
  std::snprintf(sample, sizeof sample, "%.17g", request_.sample);
  m.set("tap", id_).set("node", request_.node).set("sample", sample).set("limit", std::to_string(request_.limit));
  std::string body = transport::encode_control(m);
  socket_.send(zmq::buffer(body), zmq::send_flags::dontwait);
  next_renewal_ = Clock::now() + kTapRenewEvery;
}

void TapSession::close() {
  if (!open_) return;
  open_ = false;
  std::string body = transport::encode_control(transport::ControlMessage{"UNTAP", {}}.set("tap", id_));
  socket_.send(zmq::buffer(body), zmq::send_flags::dontwait);
}

TapSession::Event TapSession::next(std::chrono::milliseconds timeout) {
  Event event;
  if (!open_) return event;
  auto now = Clock::now();
  if (now >= next_renewal_) send_request();
  auto until_renewal = std::chrono::duration_cast<std::chrono::milliseconds>(next_renewal_ - now);
  zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
  zmq::poll(items, 1, std::max(std::chrono::milliseconds(0), std::min(timeout, until_renewal)));
  zmq::message_t reply;
  if (!(items[0].revents & ZMQ_POLLIN) || !socket_.recv(reply, zmq::recv_flags::dontwait)) return event;
  last_heard_ = Clock::now();
  auto m = transport::decode_control(reply.to_string_view());
  if (!m || (m->get("tap") != id_ && m->type != "ERROR")) return event; // not ours
  if (m->type == "TAP_OK") {
    if (opened_) return event;
    opened_ = true;
    event.kind = Event::Kind::Opened;
    event.subtasks = static_cast<int>(m->get_int("subtasks", 0));
  } else if (m->type == "TAP_RECORDS") {
    event.kind = Event::Kind::Records;
    event.lines = m->get("lines");
    event.skipped = static_cast<std::uint64_t>(m->get_int("skipped", 0));
  } else if (m->type == "TAP_END") {
    open_ = false;
    event.kind = Event::Kind::Ended;
    event.message = m->get("message");
  } else if (m->type == "ERROR") {
    open_ = false;
    event.kind = Event::Kind::Refused;
    event.message = m->get("message");
  }
  return event;
}

} // namespace streamctl::runtime
