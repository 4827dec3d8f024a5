#include "operators/file_position.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "operators/source_position.hpp"

namespace streamctl::operators {

void write_file_position(std::string& out, const std::vector<FilePositionEntry>& files) {
  PositionWriter w(out, kFilePositionVersion, 'F');
  w.u32(static_cast<std::uint32_t>(files.size()));
  for (const auto& f : files) {
    const FileIdentity id = f.identity.value_or(FileIdentity{});
    w.str(f.name);
    w.u64(id.device);
    w.u64(id.inode);
    w.u32(id.fingerprint_bytes);
    w.u64(id.fingerprint);
    w.u64(f.range_bytes);
    w.u64(f.range);
    w.u64(f.offset);
    w.u64(f.line);
    w.u8(f.done ? 1 : 0);
    w.str(f.header);
  }
}

Result<std::vector<FilePositionEntry>> read_file_position(std::string_view data, const std::string& what) {
  PositionReader r(data, what);
  auto version = r.header(1, kFilePositionVersion, 'F');
  if (!version) return Failure{version.error()};
  auto count = r.u32();
  if (!count) return Failure{count.error()};
  // Each entry takes at least 29 bytes (version 1; 57 in version 2, 73 in version 3): refuse a
  // count the data cannot hold before reserving anything.
  const std::size_t smallest = *version == 1 ? 29 : *version == 2 ? 57 : 73;
  if (*count > r.remaining() / smallest)
    return r.failure("file count " + std::to_string(*count) + " exceeds the data");
  std::vector<FilePositionEntry> files;
  files.reserve(*count);
  std::set<std::pair<std::string, std::uint64_t>> ranges;
  for (std::uint32_t k = 0; k < *count; ++k) {
    FilePositionEntry f;
    auto name = r.str(1 << 16);
    if (!name) return Failure{name.error()};
    f.name = std::move(*name);
    if (*version >= 2) {
      FileIdentity id;
      auto device = r.u64();
      if (!device) return Failure{device.error()};
      auto inode = r.u64();
      if (!inode) return Failure{inode.error()};
      auto bytes = r.u32();
      if (!bytes) return Failure{bytes.error()};
      auto fingerprint = r.u64();
      if (!fingerprint) return Failure{fingerprint.error()};
      if (*bytes > kFingerprintBytes)
        return r.failure("'" + f.name + "': fingerprint of " + std::to_string(*bytes) + " bytes, more than " +
                         std::to_string(kFingerprintBytes));
      f.identity = FileIdentity{*device, *inode, *bytes, *fingerprint};
    }
    if (*version >= 3) {
      auto range_bytes = r.u64();
      if (!range_bytes) return Failure{range_bytes.error()};
      auto range = r.u64();
      if (!range) return Failure{range.error()};
      if (*range_bytes == 0 && *range != 0)
        return r.failure("'" + f.name + "': range " + std::to_string(*range) + " of a file read whole");
      f.range_bytes = *range_bytes;
      f.range = *range;
    }
    auto offset = r.u64();
    if (!offset) return Failure{offset.error()};
    auto line = r.u64();
    if (!line) return Failure{line.error()};
    auto done = r.u8();
    if (!done) return Failure{done.error()};
    if (*done > 1) return r.failure("bad done flag");
    auto header = r.str();
    if (!header) return Failure{header.error()};
    if (*line > *offset) return r.failure("'" + f.name + "': more lines than bytes");
    // The fingerprint must cover the bytes consumed, up to its length: a shorter one could not
    // tell the file read from another that starts alike.
    if (f.identity && f.identity->fingerprint_bytes < std::min<std::uint64_t>(*offset, kFingerprintBytes))
      return r.failure("'" + f.name + "': fingerprint of " + std::to_string(f.identity->fingerprint_bytes) +
                       " bytes, fewer than the " + std::to_string(*offset) + " consumed");
    // The range's start without overflowing: range × range_bytes <= offset.
    if (f.range_bytes > 0 && f.range > *offset / f.range_bytes)
      return r.failure("'" + f.name + "': offset " + std::to_string(*offset) + " before the start of range " +
                       std::to_string(f.range));
    f.offset = *offset;
    f.line = *line;
    f.done = *done == 1;
    f.header = std::move(*header);
    if (!ranges.insert({f.name, f.range}).second)
      return r.failure("file '" + f.name + "'" + (f.range_bytes > 0 ? " range " + std::to_string(f.range) : "") +
                       " recorded twice");
    files.push_back(std::move(f));
  }
  if (auto ok = r.end(); !ok) return Failure{ok.error()};
  return files;
}

Result<std::optional<std::uint64_t>> fingerprint_file(int fd, std::uint32_t length) {
  char bytes[kFingerprintBytes];
  if (length > sizeof bytes) return fail("fingerprint of " + std::to_string(length) + " bytes asked for");
  std::size_t got = 0;
  while (got < length) {
    ssize_t n = ::pread(fd, bytes + got, length - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) return std::optional<std::uint64_t>{};
    got += static_cast<std::size_t>(n);
  }
  return std::optional<std::uint64_t>{XXH64(bytes, length, 0)};
}

Result<std::string> read_first_bytes(int fd) {
  std::string bytes(kFingerprintBytes, '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

bool starts_with_fingerprint(std::string_view first, const FileIdentity& id) {
  return first.size() >= id.fingerprint_bytes && XXH64(first.data(), id.fingerprint_bytes, 0) == id.fingerprint;
}

Result<FileIdentity> identify_file(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(std::string("cannot stat: ") + std::strerror(errno));
  FileIdentity id;
  id.device = static_cast<std::uint64_t>(st.st_dev);
  id.inode = static_cast<std::uint64_t>(st.st_ino);
  id.fingerprint_bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size),
                                                                            kFingerprintBytes));
  // A file that shrank since fstat is fingerprinted over what it still has.
  for (;;) {
    auto fingerprint = fingerprint_file(fd, id.fingerprint_bytes);
    if (!fingerprint) return Failure{fingerprint.error()};
    if (*fingerprint) {
      id.fingerprint = **fingerprint;
      return id;
    }
    if (::fstat(fd, &st) != 0) return fail(std::string("cannot stat: ") + std::strerror(errno));
    id.fingerprint_bytes = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), id.fingerprint_bytes - 1));
  }
}

} // namespace streamctl::operators
