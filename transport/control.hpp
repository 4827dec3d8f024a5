#pragma once
// The control protocol between the coordinator (a ROUTER) and its workers (DEALERs).
//
// A control message is one ZeroMQ frame of text:
//
//   TYPE\n
//   key=value\n      (zero or more; in values, '\' is written "\\" and newline "\n")
//
// Types, worker -> coordinator: READY (task, input endpoint), HEARTBEAT (task, metrics),
// FINISHED (task, metrics), FAILED (task, node, message).
// Coordinator -> worker: START (the output endpoints), STOP (sources end their input as if it
// were exhausted, so the job drains), CANCEL (exit now, committing nothing), RELEASE (every
// task has finished: exit).
// Text keeps the protocol debuggable with a ZeroMQ sniffer; these messages are few.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace streamctl::transport {

struct ControlMessage {
  std::string type;
  std::map<std::string, std::string> fields;

  const std::string& get(const std::string& key) const;  // "" when absent
  std::int64_t get_int(const std::string& key, std::int64_t fallback = 0) const;
  ControlMessage& set(const std::string& key, std::string value) {
    fields[key] = std::move(value);
    return *this;
  }
};

std::string encode_control(const ControlMessage& message);
std::optional<ControlMessage> decode_control(std::string_view text);

} // namespace streamctl::transport
