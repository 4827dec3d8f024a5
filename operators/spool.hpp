#pragma once
// A spool file: every byte read from an input that cannot seek (stdin) is appended to a file
// in the checkpoint directory before it is parsed, so that a restart can replay what was read
// but not yet emitted (SPEC §6: "the others by spooling what they read"). The source reads its
// lines back from the file; its position is the file's name and the offset consumed.
//
// Bytes are only ever appended: what a checkpoint position points at (the bytes before its
// offset, and the order of those after it) never changes, so the same checkpoint or
// savepoint can be restored any number of times. A file is written by one process at a time
// (the coordinator reaps every worker before it starts the next attempt). Deleting spool
// files that no retained checkpoint names is the runtime's job (pipeline/runtime/
// spool_janitor.hpp).
//
// Not thread-safe: owned by one source subtask.

#include <cstdint>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "state/error.hpp"

namespace streamctl::operators {

class Spool {
public:
  enum class Pump { Read, WouldBlock, End };

  // Opens spool file `name` in `dir` (both created if needed) for appending after what it
  // already holds. Throws Error(JobFailed) when it cannot.
  static std::unique_ptr<Spool> open(const std::filesystem::path& dir, const std::string& name);
  // Creates spool file `name` in `dir` holding bytes [offset, end) of spool file `from` (a
  // restore into another run), through a temporary file renamed into place: the file exists
  // only once complete. Fails when `from` is missing or shorter than `offset`.
  static Result<std::unique_ptr<Spool>> create_from_tail(const std::filesystem::path& dir, const std::string& name,
                                                         const std::filesystem::path& from, std::uint64_t offset);
  // Creates spool file `name` in `dir` holding `bytes` (a savepoint's copy of another run's
  // unread tail), the same way: the file exists only once complete and durable.
  static Result<std::unique_ptr<Spool>> create_from_bytes(const std::filesystem::path& dir, const std::string& name,
                                                          std::string_view bytes);
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // The file's name within its directory, as positions record it.
  const std::string& name() const { return name_; }
  const std::filesystem::path& path() const { return path_; }
  std::uint64_t size() const { return size_; }

  // Moves what `in_fd` has ready, up to about `max_bytes`, into the file without blocking:
  // Read when it moved some, WouldBlock when nothing was ready, End at the end of `in_fd`.
  // Bytes go from a pipe to the file by splice(2), and from a regular file by
  // copy_file_range(2): one system call takes them out of the input and puts them in the
  // file, so a worker killed at any moment loses none. Other inputs (a terminal, a socket)
  // are read into memory and written. Throws Error(JobFailed) on a read or write error.
  Pump pump(int in_fd, std::size_t max_bytes);
  // Appends `bytes` (whole lines that a source framed itself: tcp connections, zmq messages).
  // Throws Error(JobFailed) when it cannot write them all.
  void append(std::string_view bytes);
  // Makes what was appended durable (at a checkpoint).
  void sync() const;
  // A new read-only descriptor on the file, at offset 0; the caller closes it.
  int open_reader() const;
  // Bytes [offset, size()) of the file. Throws Error(JobFailed) when it cannot read them.
  std::string read_from(std::uint64_t offset) const;

  // A file name is safe to resolve in the checkpoint directory: no '/', not "." or "..".
  static bool valid_name(const std::string& name);

  // Spool file names (what the runtime's janitor reads back):
  //
  //   PREFIX.RUN.spool          what a fresh source of run RUN read from its stdin
  //   PREFIX.RUN.ORIGIN.spool   the same for a source of run RUN restored from a position in
  //                             another run's file: that file's unread tail first; ORIGIN is
  //                             16 hex digits identifying the position (file and offset)
  //   PREFIX.RUN....spool.tmp   one being copied (create_from_tail), never named by a position
  //
  // PREFIX ("stdin-NODE") and RUN (the job id) hold only [A-Za-z0-9_-]: `safe_part` makes
  // them so. Files of older releases were named PREFIX-<16 hex digits>.spool.
  static std::string file_name(const std::string& prefix, const std::string& run, const std::string& origin = {});
  static std::string safe_part(const std::string& text);
  // RUN of a name in the layout above, or "" when the name has another layout.
  static std::string run_of(const std::string& name);

private:
  enum class Mover { Unknown, Splice, CopyRange, ReadWrite };
  Spool(std::filesystem::path dir, std::string name, int fd);
  // Moves at most `max_bytes` once; returns bytes moved, 0 at the end, -1 when none ready.
  long move_once(int in_fd, std::size_t max_bytes);

  std::filesystem::path path_;
  std::string name_;
  int fd_ = -1;
  std::uint64_t size_ = 0; // also where the next bytes go: the file is not O_APPEND (splice(2))
  Mover mover_ = Mover::Unknown;
  std::vector<char> buffer_;
};

} // namespace streamctl::operators
