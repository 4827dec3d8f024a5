#pragma once
// Byte ranges of a file, so that several subtasks can read one large file (issue 9).
//
// A file split with range size B has ranges r = 0, 1, ...: range r is every line that STARTS
// in bytes [r × B, (r + 1) × B). Its reader goes to the first line start at or after r × B
// (r × B itself when byte r × B - 1 is a newline), and reads lines while they start before
// (r + 1) × B: the line that straddles the end is its range's, read whole. Range r exists
// once the file has more than r × B bytes (range 0 always).
//
// Why fixed-size ranges rather than "the file's size / parallelism": every subtask decides
// its ranges alone, from what it sees of the file when it gets there; a size-derived split
// would differ between two subtasks that saw a growing file at different sizes (lines lost
// or read twice), while B × r does not depend on when the file was looked at. A file that
// grows gets new ranges, dealt like the others.
//
// Ranges are dealt to subtasks by range_owner(): file f's range r goes to subtask
// (f + r) mod parallelism, so a file read whole (one range) goes to f mod parallelism, as
// before ranges existed.

#include <cstdint>
#include <optional>
#include <string>

#include "state/error.hpp"

namespace streamctl::operators {

// The default range size of the file source's `range_bytes` key.
constexpr std::uint64_t kDefaultRangeBytes = std::uint64_t{4} << 20;

inline std::size_t range_owner(std::size_t file, std::uint64_t range, std::size_t parallelism) {
  return static_cast<std::size_t>((file + range) % parallelism);
}

// The first line start at or after `from` (> 0) in `fd`: one past the first newline at or
// after byte `from` - 1. nullopt when no newline follows before the end of the file (the last
// line, unterminated, started before `from`). Reads with pread.
Result<std::optional<std::uint64_t>> first_line_start(int fd, std::uint64_t from);

// How many newlines bytes [from, to) of `fd` hold: the lines between two line starts, which
// gives a range's reader the line number it starts at (for bad-record messages). Reads with
// pread and counts with memchr: about a second per ten GB in the page cache.
Result<std::uint64_t> count_newlines(int fd, std::uint64_t from, std::uint64_t to);

// The file's first non-blank line, without its "\r\n" (a csv header, which every range of a
// csv file needs to decode its lines); empty when the file has no complete line yet.
Result<std::string> first_nonblank_line(int fd);

} // namespace streamctl::operators
