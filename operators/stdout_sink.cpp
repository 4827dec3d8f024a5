#include "operators/stdout_sink.hpp"

#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <random>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "operators/fd_writer.hpp"
#include "operators/source_position.hpp"
#include "operators/text_format.hpp"
#include "operators/text_format_schema.hpp"

namespace streamctl::operators {

namespace {

// What pre_commit appends, version 1 (integers little-endian, str = u32 length + bytes):
//
//   u8  version = 1
//   u8  kind = 'O'
//   u64 checkpoint id
//   u32 files: the pending files prepared and not yet published, this checkpoint's and earlier,
//              in the order their lines were written
//   per file: u64 checkpoint id it was prepared for, str name in the checkpoint directory
//             (`stdout-<node>-<16 hex digits>.pending`)
//
// Nothing at all when the job takes no checkpoints (lines went straight to stdout).
constexpr std::uint8_t kSinkStateVersion = 1;
constexpr char kSinkStateKind = 'O';

// A pending file, version 1:
//
//   bytes 0-3   magic "SCPO" (streamctl pending output)
//   byte  4     version = 1
//   bytes 5-7   zero
//   bytes 8-15  u64 little-endian: bytes of the body already copied to stdout (0 until
//               publishing starts; updated after every chunk, not fsynced)
//   bytes 16-   the body: the encoded lines, exactly as they go to stdout
constexpr char kFileMagic[4] = {'S', 'C', 'P', 'O'};
constexpr std::uint8_t kFileVersion = 1;
constexpr std::size_t kFileHeaderBytes = 16;
constexpr std::size_t kProgressOffset = 8;
constexpr std::size_t kCopyBytes = 64 << 10;

struct Prepared {
  std::uint64_t checkpoint = 0;
  std::string name; // in the checkpoint directory
};

// Lines on the job's standard output.
//
// Without a checkpoint directory (the job takes no checkpoints) every batch goes straight to
// fd 1. With one, output is exactly-once by two-phase commit, like the file sink, except that
// stdout cannot hold output invisible: lines go to a pending file in the checkpoint directory,
// pre_commit makes it durable, and commit copies it to stdout and deletes it. So a restore
// publishes what the restored checkpoint prepared and its file still holds, and drops output
// no completed checkpoint covers (it will be replayed).
//
// Deleting a file is the record that it was published. One window remains, since stdout cannot
// be rolled back: a crash while a file is being copied repeats, at the restore, what was copied
// of it after its last progress record (bytes 8-15 of the file, written after every chunk of
// kCopyBytes): at most one chunk, possibly starting with the tail of a cut line. A machine
// crash (rather than a process crash) can lose a progress record that was not yet fsynced and
// repeat more of that one file. (Renaming a copied file to `.published` before unlinking it
// would narrow nothing: the unlink alone is as atomic.)
//
// Pending files a crash leaves before any checkpoint completes are never published; the next
// restore of the job deletes them.
//
// Not thread-safe: every method is called from the task thread that owns the sink.
class StdoutSink final : public Sink {
public:
  StdoutSink(const pipeline::NodeSpec& node, state::FieldNames& names) : encoder_(node, names) {}

  ~StdoutSink() override {
    if (fd_ >= 0) abort();
  }

  void open(OperatorContext& ctx) override {
    Sink::open(ctx);
    dir_ = ctx.checkpoint_dir;
    prefix_ = "stdout-";
    for (char c : ctx_.node->name)
      prefix_ += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
    prefix_ += '-';
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) {
      errno = ec.value();
      fail_io("cannot create directory", dir_);
    }
    // The pending file opens with the first write, so that restore_pending, called after open,
    // sees no file of this run among those a crash left behind.
  }

  void write(const state::Batch& in) override {
    buffer_.clear();
    encoder_.encode(in, buffer_);
    if (dir_.empty()) {
      write_stdout(buffer_);
      return;
    }
    if (buffer_.empty()) return;
    if (fd_ < 0) start_file();
    if (!write_all(fd_, buffer_)) fail_io("cannot write", dir_ / name_);
    pending_bytes_ += buffer_.size();
    writeback_.wrote(fd_, pending_bytes_);
  }

  void pre_commit(std::uint64_t checkpoint_id, std::string& out) override {
    if (dir_.empty()) return; // everything is on stdout already
    if (fd_ >= 0) {
      if (::fsync(fd_) != 0) fail_io("cannot fsync", dir_ / name_);
      ::close(fd_);
      fd_ = -1;
      sync_dir(); // the prepared file's name must survive a crash too
      prepared_.push_back(Prepared{checkpoint_id, name_});
    }
    // Nothing written since the last checkpoint: no file, rather than an empty one.
    PositionWriter w(out, kSinkStateVersion, kSinkStateKind);
    w.u64(checkpoint_id);
    w.u32(static_cast<std::uint32_t>(prepared_.size()));
    for (const auto& p : prepared_) {
      w.u64(p.checkpoint);
      w.str(p.name);
    }
  }

  void commit(std::uint64_t checkpoint_id) override {
    std::size_t done = 0;
    while (done < prepared_.size() && prepared_[done].checkpoint <= checkpoint_id) publish(prepared_[done++].name);
    if (done == 0) return;
    prepared_.erase(prepared_.begin(), prepared_.begin() + static_cast<std::ptrdiff_t>(done));
    sync_dir(); // the deletions record what was published
  }

  // A write to stdout that fails throws, as in write(): Error(OutputClosed) when its reader
  // has gone.
  Result<void> restore_pending(const std::vector<std::string_view>& old_subtasks) override {
    // Parse everything before touching a file: a corrupt state changes nothing.
    std::vector<Prepared> files;
    for (std::size_t s = 0; s < old_subtasks.size(); ++s) {
      if (old_subtasks[s].empty()) continue; // lines went straight to stdout
      PositionReader r(old_subtasks[s], "pending output of sink '" + ctx_.node->name + "'");
      if (auto ok = r.header(kSinkStateVersion, kSinkStateKind); !ok) return ok;
      auto checkpoint = r.u64();
      if (!checkpoint) return Failure{checkpoint.error()};
      auto count = r.u32();
      if (!count) return Failure{count.error()};
      if (*count > r.remaining() / 12) return r.failure("file count " + std::to_string(*count) + " exceeds the data");
      for (std::uint32_t k = 0; k < *count; ++k) {
        auto prepared_for = r.u64();
        if (!prepared_for) return Failure{prepared_for.error()};
        auto name = r.str(4096);
        if (!name) return Failure{name.error()};
        if (!is_pending_name(*name)) return r.failure("bad pending file name '" + *name + "'");
        if (*prepared_for > *checkpoint) return r.failure("'" + *name + "' prepared for a later checkpoint");
        files.push_back(Prepared{*prepared_for, std::move(*name)});
      }
      if (auto ok = r.end(); !ok) return ok;
    }
    if (dir_.empty()) {
      if (files.empty()) return {};
      return fail("pending output of sink '" + ctx_.node->name + "': no checkpoint directory to find '" +
                  files.front().name + "' in (the job now takes no checkpoints)");
    }
    // Their checkpoint completed: publish what is left of them (a missing file was published).
    for (const auto& p : files) publish(p.name);
    // Any other pending file of this sink holds output after the checkpoint, which the job
    // will replay.
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
      std::string name = entry.path().filename().string();
      if (!is_pending_name(name)) continue;
      if (::unlink(entry.path().c_str()) != 0 && errno != ENOENT)
        return fail("sink '" + ctx_.node->name + "': cannot delete '" + entry.path().string() +
                    "': " + std::strerror(errno));
    }
    if (ec) return fail("sink '" + ctx_.node->name + "': cannot list '" + dir_.string() + "': " + ec.message());
    sync_dir();
    return {};
  }

  void finish() override {
    // The whole job has ended: what the last checkpoints prepared, then what came after.
    if (dir_.empty()) return;
    for (const auto& p : prepared_) publish(p.name);
    prepared_.clear();
    if (fd_ >= 0) {
      ::close(fd_); // no fsync: it is copied and deleted right away
      fd_ = -1;
      publish(name_);
    }
    sync_dir();
  }

  void abort() override {
    // Files prepared for a checkpoint stay: it may yet complete, and a restore publishes them.
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    ::unlink((dir_ / name_).c_str());
  }

private:
  // `stdout-<node>-<16 lowercase hex digits>.pending`: a pending file of this sink.
  bool is_pending_name(std::string_view name) const {
    constexpr std::string_view suffix = ".pending";
    if (name.size() != prefix_.size() + 16 + suffix.size()) return false;
    if (name.substr(0, prefix_.size()) != prefix_) return false;
    if (name.substr(prefix_.size() + 16) != suffix) return false;
    for (char c : name.substr(prefix_.size(), 16))
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
  }

  // Creates a new pending file under a random name and writes its header.
  void start_file() {
    std::random_device random;
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
      std::uint64_t r = (static_cast<std::uint64_t>(random()) << 32) ^ random();
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
      name_ = prefix_ + hex + ".pending";
      fd_ = ::open((dir_ / name_).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
      if (fd_ < 0 && errno != EEXIST) fail_io("cannot create", dir_ / name_);
    }
    if (fd_ < 0) fail_io("cannot create", dir_ / name_);
    char header[kFileHeaderBytes] = {};
    std::memcpy(header, kFileMagic, sizeof kFileMagic);
    header[4] = static_cast<char>(kFileVersion);
    if (!write_all(fd_, std::string_view(header, sizeof header))) fail_io("cannot write", dir_ / name_);
    pending_bytes_ = sizeof header;
    writeback_.reset();
  }

  // Copies the rest of pending file `name` to stdout, recording progress in its header, then
  // deletes it. A file that does not exist was published already.
  void publish(const std::string& name) {
    std::filesystem::path path = dir_ / name;
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return;
    if (fd < 0) fail_io("cannot open", path);
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    unsigned char header[kFileHeaderBytes];
    ssize_t n = ::pread(fd, header, sizeof header, 0);
    if (n < 0) fail_io("cannot read", path);
    if (static_cast<std::size_t>(n) != sizeof header || std::memcmp(header, kFileMagic, sizeof kFileMagic) != 0 ||
        header[4] != kFileVersion)
      throw Error(ErrorKind::JobFailed, "sink '" + ctx_.node->name + "': '" + path.string() +
                                            "' is not a pending output file of version " +
                                            std::to_string(kFileVersion));
    std::uint64_t copied = 0;
    for (int k = 7; k >= 0; --k) copied = copied << 8 | header[kProgressOffset + static_cast<std::size_t>(k)];
    copy_.resize(kCopyBytes);
    for (;;) {
      n = ::pread(fd, copy_.data(), copy_.size(), static_cast<off_t>(kFileHeaderBytes + copied));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail_io("cannot read", path);
      if (n == 0) break;
      write_stdout(std::string_view(copy_.data(), static_cast<std::size_t>(n)));
      copied += static_cast<std::uint64_t>(n);
      unsigned char progress[8];
      for (std::size_t k = 0; k < 8; ++k) progress[k] = static_cast<unsigned char>(copied >> (8 * k));
      if (::pwrite(fd, progress, sizeof progress, kProgressOffset) != static_cast<ssize_t>(sizeof progress))
        fail_io("cannot record progress in", path);
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail_io("cannot delete", path);
  }

  // A pipe whose reader has closed it polls as POLLERR (a terminal or a file never does): the
  // job ends as a write would have ended it, without waiting for one.
  void check_output() override {
    pollfd p{STDOUT_FILENO, 0, 0};
    if (::poll(&p, 1, 0) == 1 && (p.revents & POLLERR) != 0)
      throw Error(ErrorKind::OutputClosed, "sink '" + ctx_.node->name + "': the reader of stdout has gone");
  }

  void write_stdout(std::string_view bytes) {
    auto written = write_all(STDOUT_FILENO, bytes);
    if (!written && errno == EPIPE)
      throw Error(ErrorKind::OutputClosed, "sink '" + ctx_.node->name + "': the reader of stdout has gone");
    if (!written)
      throw Error(ErrorKind::JobFailed, "sink '" + ctx_.node->name + "': cannot write to stdout: " + written.error());
  }

  void sync_dir() {
    int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

  [[noreturn]] void fail_io(const char* what, const std::filesystem::path& path) {
    throw Error(ErrorKind::JobFailed, "sink '" + ctx_.node->name + "': " + what + " '" + path.string() +
                                          "': " + std::strerror(errno));
  }

  LineEncoder encoder_;
  std::string buffer_;
  std::filesystem::path dir_;      // the checkpoint directory; empty: straight to stdout
  std::string prefix_;             // `stdout-<node>-`
  std::string name_;               // of the pending file in progress
  int fd_ = -1;                    // the pending file in progress, or -1
  std::uint64_t pending_bytes_ = 0; // its length
  WritebackPacer writeback_;        // of it
  std::vector<Prepared> prepared_; // fsynced, waiting for their checkpoint, in write order
  std::vector<char> copy_;
};

} // namespace

pipeline::NodeTypeSchema stdout_sink_schema() {
  pipeline::NodeTypeSchema schema{"stdout", text_format_keys()};
  schema.single_instance = true;
  return schema;
}

std::unique_ptr<Sink> make_stdout_sink(const pipeline::PipelineSpec&, const pipeline::NodeSpec& node,
                                       state::FieldNames& names) {
  return std::make_unique<StdoutSink>(node, names);
}

} // namespace streamctl::operators
