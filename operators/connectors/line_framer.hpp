#pragma once
// Cuts a byte stream (one tcp connection, a child's stdout) into whole lines for a spool, so
// that lines of several streams interleave only at line boundaries, and no line grows past
// `max_line` bytes in memory: a longer one is reported once, by its first bytes and its
// length, and its bytes are dropped up to its end.
//
// Not thread-safe: owned by one source subtask.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace streamctl::connectors {

class LineFramer {
public:
  // `too_long(head, length)`: a line of `length` bytes (at least; counted up to its end)
  // longer than max_line, `head` its first bytes.
  using TooLong = std::function<void(std::string_view head, std::size_t length)>;

  LineFramer(std::size_t max_line, TooLong too_long)
      : max_line_(max_line), too_long_(std::move(too_long)) {}

  // Appends the lines that `bytes` completes to `out`, each ending in '\n'; keeps the
  // unterminated rest for the next call.
  void feed(std::string_view bytes, std::string& out);
  // The stream ended: an unterminated last line is a line too.
  void finish(std::string& out);
  // Bytes of an unterminated line held now.
  std::size_t held() const { return partial_.size(); }

private:
  // A line (without '\n') is complete: append it or report it.
  void complete(std::string_view line, std::string& out);
  void report_skipped();

  std::size_t max_line_;
  TooLong too_long_;
  std::string partial_;     // the start of an unterminated line, at most max_line_ bytes
  bool skipping_ = false;   // inside a line already longer than max_line_
  std::size_t skipped_ = 0; // its length so far
  std::string skipped_head_;
};

} // namespace streamctl::connectors
