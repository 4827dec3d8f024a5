#include "operators/connectors/line_framer.hpp"

#include <algorithm>
#include <cstring>

namespace streamctl::connectors {

namespace {
constexpr std::size_t kHeadBytes = 256; // of a too-long line, for its bad-record message
}

void LineFramer::complete(std::string_view line, std::string& out) {
  if (line.size() > max_line_) {
    too_long_(line.substr(0, kHeadBytes), line.size());
    return;
  }
  out.append(line);
  out.push_back('\n');
}

void LineFramer::report_skipped() {
  too_long_(skipped_head_, skipped_);
  skipping_ = false;
  skipped_ = 0;
  skipped_head_.clear();
}

void LineFramer::feed(std::string_view bytes, std::string& out) {
  while (!bytes.empty()) {
    const void* nl = std::memchr(bytes.data(), '\n', bytes.size());
    std::size_t stop =
        nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - bytes.data()) : bytes.size();
    std::string_view piece = bytes.substr(0, stop);
    if (skipping_) {
      skipped_ += piece.size();
    } else if (partial_.size() + piece.size() > max_line_) {
      // Too long already: keep its head and length, not its bytes.
      skipped_head_ = partial_.substr(0, kHeadBytes);
      if (skipped_head_.size() < kHeadBytes)
        skipped_head_.append(piece.substr(0, kHeadBytes - skipped_head_.size()));
      skipped_ = partial_.size() + piece.size();
      skipping_ = true;
      partial_.clear();
    } else if (nl && partial_.empty()) {
      complete(piece, out); // the common case: a whole line within `bytes`, copied once
    } else {
      partial_.append(piece);
    }
    if (!nl) return;
    if (skipping_) {
      report_skipped();
    } else if (!partial_.empty()) {
      complete(partial_, out);
      partial_.clear();
    }
    bytes.remove_prefix(stop + 1);
  }
}

void LineFramer::finish(std::string& out) {
  if (skipping_) {
    report_skipped();
  } else if (!partial_.empty()) {
    complete(partial_, out);
    partial_.clear();
  }
}

} // namespace streamctl::connectors
