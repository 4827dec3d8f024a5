#include "pipeline/runtime/metadata_checksum.hpp"

#include <xxhash.h>

#include "state/hex.hpp"

namespace streamctl::runtime {

namespace {

constexpr std::string_view kPrefix = "checksum = \"";
constexpr std::size_t kHexDigits = 16;

std::uint64_t xxh64(std::string_view bytes) { return XXH64(bytes.data(), bytes.size(), 0); }

// Exactly `checksum = "` 16 lowercase hex digits `"`: an upper-case digit is a flipped bit
// (0x20), not the same number.
bool well_formed(std::string_view line) {
  if (line.size() != kPrefix.size() + kHexDigits + 1 || line.substr(0, kPrefix.size()) != kPrefix ||
      line.back() != '"')
    return false;
  for (char c : line.substr(kPrefix.size(), kHexDigits))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

} // namespace

std::string append_checksum_line(std::string_view text) {
  std::string out(text);
  out += kPrefix;
  out += state::hex64(xxh64(text));
  out += "\"\n";
  return out;
}

Result<ChecksummedText> split_checksum_line(std::string_view text, const std::string& file) {
  bool terminated = !text.empty() && text.back() == '\n';
  std::size_t content_end = terminated ? text.size() - 1 : text.size();
  std::size_t newline = content_end == 0 ? std::string_view::npos : text.rfind('\n', content_end - 1);
  std::size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
  std::string_view last = text.substr(line_start, content_end - line_start);
  if (last.substr(0, 8) != "checksum") return ChecksummedText{text, false};
  if (!terminated || !well_formed(last))
    return fail(file + ": malformed checksum line '" + std::string(last) +
                "' (expected checksum = \"16 lowercase hex digits\" and a newline, last): the file is damaged");
  std::string_view body = text.substr(0, line_start);
  std::string actual = state::hex64(xxh64(body));
  std::string_view written = last.substr(kPrefix.size(), kHexDigits);
  if (written != actual)
    return fail(file + ": checksum mismatch (the file says " + std::string(written) + ", its bytes hash to " + actual +
                "): it is damaged or was edited; it is not restored");
  return ChecksummedText{body, true};
}

} // namespace streamctl::runtime
