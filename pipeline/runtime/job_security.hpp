#pragma once
// The job's link security as the runtime handles it: carried in the worker's bootstrap
// (WorkerBootstrap::security, text), and refusals of peers without the job's keys logged.
//
// A refused peer reconnects about every 100 ms, and each attempt is refused again: the log
// names the first refusal of each peer (address, or endpoint when libzmq gives no address)
// and then only counts, so that a port scan or a stray process cannot flood it.
//
// Threading: RefusalLog::callback() is called from ZAP and monitor threads; it locks.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <spdlog/logger.h>

#include "state/error.hpp"
#include "transport/curve_keys.hpp"
#include "transport/refusal.hpp"

namespace streamctl::runtime {

// The text that goes into WorkerBootstrap::security.
std::string encode_link_security(const transport::LinkSecurity& security);
// Empty text: plain (a bootstrap without keys).
Result<transport::LinkSecurity> decode_link_security(const std::string& text);

class RefusalLog {
public:
  RefusalLog(spdlog::logger& log, std::string where) : log_(log), where_(std::move(where)) {}
  transport::RefusalCallback callback() {
    return [this](const transport::Refusal& r) { on_refusal(r); };
  }
  std::uint64_t count() const;

private:
  void on_refusal(const transport::Refusal& refusal);

  spdlog::logger& log_;
  std::string where_; // "coordinator", "worker 3"
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t> by_peer_;
  std::uint64_t count_ = 0;
};

} // namespace streamctl::runtime
