#pragma once
// The checksum line that ends a version-2 _metadata file (checkpoint_metadata.hpp):
//
//   checksum = "0123456789abcdef"\n
//
// XXH64, seed 0, of every byte of the file before the line, as 16 lowercase hex digits. TOML
// tolerates many one-byte changes (a digit of `bytes`, a letter of a node name, a space): the
// line turns every such change, and every truncation, into a refusal.

#include <string>
#include <string_view>

#include "state/error.hpp"

namespace streamctl::runtime {

// `text` followed by its checksum line. `text` must end with a newline.
std::string append_checksum_line(std::string_view text);

struct ChecksummedText {
  std::string_view body; // the bytes before the checksum line (all of them when it has none)
  bool has_checksum = false;
};

// Splits off and verifies the last line when it is a checksum line (one that begins with
// "checksum"). Fails, naming `file`, when that line is malformed or the checksum does not
// match. A text whose last line is not a checksum line comes back whole, has_checksum false.
Result<ChecksummedText> split_checksum_line(std::string_view text, const std::string& file);

} // namespace streamctl::runtime
