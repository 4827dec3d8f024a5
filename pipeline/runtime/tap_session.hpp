#pragma once
// The client's part of `streamctl tap` (tap_protocol.hpp): one DEALER on the job's control
// socket that opens a tap, renews its lease, and hands over what arrives.
//
// Not thread-safe: one per `streamctl tap`.

#include <chrono>
#include <cstdint>
#include <string>

#include <zmq.hpp>

#include "pipeline/runtime/job_directory.hpp"

namespace streamctl::runtime {

class TapSession {
public:
  using Clock = std::chrono::steady_clock;

  struct Request {
    std::string node;
    double sample = 1.0;     // the share of records copied, in (0, 1]
    std::uint64_t limit = 0; // copies per worker at most; 0: no limit
  };

  // Connects to the job's coordinator and asks for the tap. Throws Error(Usage) when the job
  // is not running.
  TapSession(const JobEntry& job, Request request);
  // Closes the tap (UNTAP) when it is still open.
  ~TapSession();
  TapSession(const TapSession&) = delete;
  TapSession& operator=(const TapSession&) = delete;

  struct Event {
    enum class Kind { Opened, Records, Ended, Refused, Nothing };
    Kind kind = Kind::Nothing;
    std::string lines;        // Records: JSON lines
    std::uint64_t skipped = 0; // Records: copies the workers could not send
    int subtasks = 0;         // Opened: the subtasks that run the node now
    std::string message;      // Ended, Refused
  };
  // What arrives within `timeout` (Nothing when nothing did). Renews the lease when due.
  Event next(std::chrono::milliseconds timeout);
  // How long since the coordinator last said anything (it answers every renewal).
  Clock::duration silent_for() const { return Clock::now() - last_heard_; }
  // Tells the coordinator the tap is done; nothing more is sent to it.
  void close();

private:
  void send_request();

  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string id_;
  Request request_;
  bool open_ = true;
  bool opened_ = false;
  Clock::time_point next_renewal_;
  Clock::time_point last_heard_;
};

} // namespace streamctl::runtime
