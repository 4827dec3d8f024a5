#pragma once
// A spool file: every byte read from an input that cannot seek (stdin) is appended to a file
// in the checkpoint directory before it is parsed, so that a restore can replay what was read
// but not yet emitted (SPEC §6: "the others by spooling what they read"). The source reads its
// lines back from the file; its position is the file's name and the offset consumed.
//
// A spool file is never changed once a later one replaces it: a restore copies the unconsumed
// tail of the old spool into a new file, so the same checkpoint or savepoint can be restored
// any number of times. Deleting spool files that no retained checkpoint names is the
// runtime's job.
//
// Not thread-safe: owned by one source subtask.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "state/error.hpp"

namespace streamctl::operators {

class Spool {
public:
  enum class Pump { Read, WouldBlock, End };

  // Creates a new, empty spool file named `<prefix>-<16 hex digits>.spool` in `dir` (created if
  // needed). Throws Error(JobFailed) when it cannot.
  Spool(const std::filesystem::path& dir, const std::string& prefix);
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // The file's name within its directory, as positions record it.
  const std::string& name() const { return name_; }
  const std::filesystem::path& path() const { return path_; }
  std::uint64_t size() const { return size_; }

  // Appends bytes [offset, end) of spool file `from` (a restore). Fails when `from` is
  // missing or shorter than `offset`.
  Result<void> copy_tail(const std::filesystem::path& from, std::uint64_t offset);
  // Moves what `in_fd` has ready, up to about `max_bytes`, into the file without blocking:
  // Read when it moved some, WouldBlock when nothing was ready, End at the end of `in_fd`.
  // Throws Error(JobFailed) on a read or write error.
  Pump pump(int in_fd, std::size_t max_bytes);
  // Makes what was appended durable (at a checkpoint).
  void sync() const;
  // A new read-only descriptor on the file, at offset 0; the caller closes it.
  int open_reader() const;

  // A file name is safe to resolve in the checkpoint directory: no '/', not "." or "..".
  static bool valid_name(const std::string& name);

private:
  std::filesystem::path path_;
  std::string name_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::vector<char> buffer_;
};

} // namespace streamctl::operators
