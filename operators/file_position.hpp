#pragma once
// The position of a file source subtask (operator.hpp, snapshot_position): per file, where it
// was and which file it was. The identity is what lets `run --resume` tell a file that grew
// from one that was rotated in between (replaced, truncated in place, renamed), as log shippers
// do (Filebeat's and Vector's fingerprints): a byte offset alone applies to any file that
// happens to be at the path, and reading a new file from an old offset loses its first records.
//
// A file may be read by several subtasks at once, each a range of its bytes (file_ranges.hpp):
// an entry is then one range of a file, and a file has as many entries, across the subtasks'
// positions, as ranges were started.
//
// Version 3 (integers little-endian, str = u32 length + bytes):
//
//   u8  version = 3
//   u8  kind = 'F'
//   u32 entries: how many entries follow (the files or ranges this subtask started or finished)
//   per entry:
//     str name         the path as matched, relative to the pipeline file's directory when
//                      `path` is relative (so a savepoint survives moving the pipeline with
//                      its data)
//     u64 device       st_dev of the file read
//     u64 inode        st_ino of the file read
//     u32 fingerprint_bytes  how many of its first bytes the fingerprint covers:
//                      min(its size when fingerprinted, kFingerprintBytes), and at least
//                      min(offset, kFingerprintBytes)
//     u64 fingerprint  XXH64 (seed 0) of those bytes
//     u64 range_bytes  the size of the file's ranges: 0 when the file is one range, read
//                      whole by one subtask; else range r is the lines that start in bytes
//                      [r × range_bytes, (r + 1) × range_bytes) (the same in every entry of
//                      a file)
//     u64 range        r: which range of the file this entry is (0 when range_bytes is 0)
//     u64 offset       where the range's next line starts, from the file's start: records of
//                      every line of the range before it were emitted (at least the range's
//                      start, r × range_bytes)
//     u64 line         lines of the file before `offset` (bad-record line numbers go on
//                      from it)
//     u8  done         1 when the range was read to its end (for the last range, or a file
//                      read whole: the file's end then)
//     str header       the csv header line (the file's first line, once a range has it),
//                      empty when none
//
//   | 3 | F | entries | name | device | inode | fp bytes | fp | range_bytes | range |
//   | offset | line | done | header | name | device | ... (the next entry)
//
// Version 2, still read: the same without range_bytes and range: every entry is a whole
// file (range_bytes 0, range 0). Version 1, still read: version 2 without device, inode and
// fingerprint (written before streamctl recorded identities). Its entries have no identity;
// file_source.cpp says what a restore does with them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "state/error.hpp"

namespace streamctl::operators {

constexpr std::uint8_t kFilePositionVersion = 3;
// How many first bytes of a file its fingerprint covers at most (Filebeat's default length).
constexpr std::uint32_t kFingerprintBytes = 1024;

struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint32_t fingerprint_bytes = 0;
  std::uint64_t fingerprint = 0;
  bool operator==(const FileIdentity&) const = default;
};

struct FilePositionEntry {
  std::string name;
  std::optional<FileIdentity> identity; // none in a version 1 position
  std::uint64_t range_bytes = 0;        // 0: the file is read whole
  std::uint64_t range = 0;
  std::uint64_t offset = 0;
  std::uint64_t line = 0;
  bool done = false;
  std::string header;
  bool operator==(const FilePositionEntry&) const = default;
};

// Appends a version 3 position. Every entry must have an identity.
void write_file_position(std::string& out, const std::vector<FilePositionEntry>& files);

// Reads a version 1, 2 or 3 position; `what` names it in failures. Refuses anything malformed
// (a truncation, trailing bytes, a count the data cannot hold, a range of a file listed twice,
// more lines than bytes, a fingerprint longer than kFingerprintBytes or shorter than the
// offset requires, a range of a file read whole, an offset before its range's start).
Result<std::vector<FilePositionEntry>> read_file_position(std::string_view data, const std::string& what);

// The identity of the open file `fd`: device, inode and the fingerprint of its first
// min(size, kFingerprintBytes) bytes, read with pread (the file offset does not move).
Result<FileIdentity> identify_file(int fd);

// XXH64 of the first `length` bytes of `fd`, or nullopt when the file is shorter.
Result<std::optional<std::uint64_t>> fingerprint_file(int fd, std::uint32_t length);

// The first min(size, kFingerprintBytes) bytes of `fd`, read with pread.
Result<std::string> read_first_bytes(int fd);
// Whether `first` (from read_first_bytes) starts with the bytes `id` fingerprinted.
bool starts_with_fingerprint(std::string_view first, const FileIdentity& id);

} // namespace streamctl::operators
