#include "pipeline/runtime/job_security.hpp"

namespace streamctl::runtime {

std::string encode_link_security(const transport::LinkSecurity& security) {
  transport::ControlMessage message{"SECURITY", {}};
  transport::write_link_security(security, message);
  return transport::encode_control(message);
}

Result<transport::LinkSecurity> decode_link_security(const std::string& text) {
  if (text.empty()) return transport::LinkSecurity::plain();
  auto message = transport::decode_control(text);
  if (!message || message->type != "SECURITY")
    return Failure{"the bootstrap's security field is not readable"};
  return transport::read_link_security(*message);
}

std::uint64_t RefusalLog::count() const {
  std::lock_guard lock(mutex_);
  return count_;
}

void RefusalLog::on_refusal(const transport::Refusal& refusal) {
  std::lock_guard lock(mutex_);
  ++count_;
  std::string peer = refusal.peer.empty() ? refusal.endpoint : refusal.peer;
  auto& seen = by_peer_[peer];
  if (seen++ == 0)
    log_.warn("{}: {} (further refusals of this peer are counted, not logged)", where_,
              transport::describe(refusal));
}

} // namespace streamctl::runtime
