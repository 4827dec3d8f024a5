#pragma once
// A TCP connection that a sink writes lines to, and that outlives its peer: while the peer is
// down, or after the connection breaks, it reconnects with backoff (50 ms doubling to 2 s) and
// the writer blocks meanwhile — a peer that is down is backpressure, not loss.
//
// Bytes that a broken connection may have lost are sent again on the next one. Which bytes it
// keeps for that depends on the mode:
//   - Checkpointed (retain_until_released): everything since the last release(), which the
//     sink calls at each checkpoint once the peer's TCP stack has acknowledged everything
//     before it (wait_acknowledged). That is what a restore from that checkpoint would replay:
//     a peer that closes with lines unread in its socket still gets them again.
//   - Otherwise: the lines its TCP stack has not acknowledged (SIOCOUTQ), from the start of the
//     first line not wholly acknowledged.
// Either way the peer may receive some lines twice, and a broken connection may end in the
// middle of a line (the peer drops an unterminated last line).
//
// Not thread-safe: owned by the sink's task thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace streamctl::connectors {

struct TcpAddress {
  std::string host;
  std::string port;
};

// "host:port", "[v6addr]:port". Returns the reason when it is not of that shape.
bool parse_tcp_address(std::string_view text, TcpAddress& out, std::string& why);

class TcpWriter {
public:
  // `who` starts every message ("sink 'out'"); `warn` logs an outage and its end (may be empty).
  TcpWriter(TcpAddress address, std::string who, bool retain_until_released,
            std::function<void(const std::string&)> warn);
  ~TcpWriter();
  TcpWriter(const TcpWriter&) = delete;
  TcpWriter& operator=(const TcpWriter&) = delete;

  // Sends `bytes` (whole lines), connecting first when needed; returns when the kernel has
  // taken them all. Throws Error(JobFailed) when the host name does not resolve.
  void send(std::string_view bytes);
  // Blocks until the peer's TCP stack has acknowledged every byte sent (reconnecting and
  // sending again as needed). Returns at once when not connected with nothing to send again.
  void wait_acknowledged();
  // Checkpointed mode: forget the bytes kept for sending again (they are acknowledged).
  void release();
  // Ends the connection in order (FIN after the last byte), or drops it at once.
  void close();
  void abort();

private:
  void connect_with_backoff();
  bool try_connect(std::string& why);
  void drop_connection(const std::string& why);
  // Sends resend_ from sent_ on; false when the connection broke (dropped).
  bool pump();
  // False when the peer has closed its end or the connection failed (and drops it).
  bool still_open();
  // Drops from resend_ the whole lines the peer's stack has acknowledged, once there are at
  // least `at_least` bytes of them (so that trimming is not a memmove per batch).
  void trim_acknowledged(std::size_t at_least);

  TcpAddress address_;
  std::string who_;
  bool retain_until_released_;
  std::function<void(const std::string&)> warn_;
  int fd_ = -1;
  std::string resend_;     // the bytes from stream offset base_ to written_
  std::uint64_t base_ = 0; // stream offset of resend_[0]
  std::uint64_t sent_ = 0; // stream offset up to which this connection has been given bytes
  bool outage_logged_ = false;
  std::chrono::milliseconds backoff_{50};
};

} // namespace streamctl::connectors
