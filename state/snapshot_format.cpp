#include "state/snapshot_format.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "state/le_bytes.hpp"
#include "state/lz4_frame.hpp"

namespace streamctl::state {

namespace {

// Segments are gathered in a buffer and written in writes of about this size.
constexpr std::size_t write_chunk = 1 << 20;
// A header larger than this is corrupt (a chain of a few names is well under a KiB).
constexpr std::uint32_t max_header_length = 1 << 20;
// LZ4 cannot expand more than ~255x; a larger raw length in an index is corrupt, and
// believing it would allocate without bound.
constexpr std::uint64_t max_lz4_ratio = 256;

std::string error_text(int err) {
  char buf[256];
  // GNU strerror_r: thread-safe, returns a pointer to the message.
  return ::strerror_r(err, buf, sizeof buf);
}

std::uint64_t xxh64(std::string_view bytes) {
  return XXH64(bytes.data(), bytes.size(), 0);
}

void put_u8(std::string& out, std::uint8_t v) {
  out.push_back(static_cast<char>(v));
}
void put_u16(std::string& out, std::uint16_t v) {
  append_le(out, v);
}
void put_u32(std::string& out, std::uint32_t v) {
  append_le(out, v);
}
void put_u64(std::string& out, std::uint64_t v) {
  append_le(out, v);
}
void put_string(std::string& out, std::string_view s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}

std::uint64_t get_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Reads little-endian fields from a byte range; any read past the end sets `bad`.
class Cursor {
public:
  explicit Cursor(std::string_view bytes) : bytes_(bytes) {}
  std::uint64_t get(int width) {
    if (bad || bytes_.size() - pos_ < std::size_t(width)) {
      bad = true;
      return 0;
    }
    std::uint64_t v = get_le(bytes_.data() + pos_, width);
    pos_ += width;
    return v;
  }
  std::string get_string() {
    std::uint64_t n = get(4);
    if (bad || bytes_.size() - pos_ < n) {
      bad = true;
      return {};
    }
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  bool at_end() const { return pos_ == bytes_.size(); }
  bool bad = false;

private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

void encode_header(const SnapshotHeader& h, std::string& out) {
  put_string(out, h.job_name);
  put_u64(out, h.pipeline_hash);
  put_u64(out, h.checkpoint_id);
  put_u64(out, static_cast<std::uint64_t>(h.created_at_ms));
  put_u32(out, h.max_parallelism);
  put_u32(out, h.chain_id);
  put_u32(out, h.subtask);
  put_u32(out, h.parallelism);
  put_u32(out, h.key_groups.first);
  put_u32(out, h.key_groups.end);
  put_u32(out, static_cast<std::uint32_t>(h.chain_nodes.size()));
  for (const auto& node : h.chain_nodes)
    put_string(out, node);
}

// What is inconsistent in a header, or empty.
std::string check_header(const SnapshotHeader& h) {
  if (h.max_parallelism < 1 || h.max_parallelism > max_key_groups)
    return "max_parallelism " + std::to_string(h.max_parallelism) + " is outside 1.." +
           std::to_string(max_key_groups);
  if (h.parallelism < 1) return "parallelism is 0";
  if (h.subtask >= h.parallelism)
    return "subtask " + std::to_string(h.subtask) + " is not below parallelism " +
           std::to_string(h.parallelism);
  if (h.key_groups.first > h.key_groups.end || h.key_groups.end > h.max_parallelism)
    return "key-group range [" + std::to_string(h.key_groups.first) + ", " +
           std::to_string(h.key_groups.end) + ") is outside [0, " +
           std::to_string(h.max_parallelism) + ")";
  if (h.chain_nodes.empty()) return "the chain has no node";
  if (h.chain_nodes.size() > 0xFFFF) return "the chain has more than 65535 nodes";
  for (std::size_t i = 0; i < h.chain_nodes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (h.chain_nodes[i] == h.chain_nodes[j])
        return "node " + h.chain_nodes[i] + " appears twice";
  return {};
}

std::uint64_t segment_identity(std::uint16_t node, SegmentKind kind, std::uint32_t key_group) {
  return (std::uint64_t(node) << 40) | (std::uint64_t(kind) << 32) | key_group;
}

// write() all of `bytes`, retrying short writes and EINTR. Returns 0 or an errno.
int write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

// pread() exactly `length` bytes at `offset` into out. Returns 0, an errno, or -1 when the
// file ends first.
int read_exactly(int fd, std::uint64_t offset, std::size_t length, std::string& out) {
  out.resize(length);
  std::size_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd, out.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return -1;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

class UniqueFd {
public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Closes and reports the error of close() (NFS and some filesystems report write errors
  // only there). Returns 0 or an errno.
  int close_checked() {
    int fd = std::exchange(fd_, -1);
    if (fd >= 0 && ::close(fd) != 0 && errno != EINTR) return errno;
    return 0;
  }

private:
  int fd_;
};

} // namespace

std::string_view segment_kind_name(SegmentKind kind) {
  switch (kind) {
  case SegmentKind::Keyed: return "keyed";
  case SegmentKind::Subtask: return "subtask";
  case SegmentKind::SourcePosition: return "source_position";
  case SegmentKind::SinkPending: return "sink_pending";
  case SegmentKind::KeyedDelta: return "keyed_delta";
  }
  return "unknown";
}

std::string describe_segment(const SegmentInfo& s) {
  if (s.kind == SegmentKind::Keyed)
    return "segment of node " + s.node + " key group " + std::to_string(s.key_group);
  if (s.kind == SegmentKind::KeyedDelta)
    return "delta segment of node " + s.node + " key group " + std::to_string(s.key_group);
  return std::string(segment_kind_name(s.kind)) + " segment of node " + s.node;
}

// ---------------------------------------------------------------------------------------
// Writer

struct SnapshotWriter::State {
  std::filesystem::path path;
  std::filesystem::path temp_path;
  UniqueFd fd;
  SnapshotHeader header;
  Lz4FrameCompressor compressor;
  std::string buffer;          // bytes not yet written
  std::uint64_t written = 0;   // bytes written to the file so far
  std::uint64_t raw_bytes = 0; // sum of raw lengths
  std::vector<SegmentInfo> segments;
  std::vector<std::uint16_t> segment_nodes;
  std::unordered_set<std::uint64_t> identities;
  std::string failure; // set once an I/O error happened: every later call repeats it
  bool finished = false;
  bool has_deltas = false; // a keyed_delta segment was added: the file is version 2

  Failure failed(std::string what) {
    failure = path.string() + ": " + what;
    fd.reset();
    if (!temp_path.empty()) ::unlink(temp_path.c_str());
    temp_path.clear();
    return fail(failure);
  }
  Failure failed_errno(const std::string& what, int err) {
    return failed(what + ": " + error_text(err));
  }

  // Writes the buffer out; returns 0 or an errno.
  int flush() {
    if (int err = write_all(fd.get(), buffer)) return err;
    written += buffer.size();
    buffer.clear();
    return 0;
  }
};

SnapshotWriter::SnapshotWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
SnapshotWriter::SnapshotWriter(SnapshotWriter&&) noexcept = default;
SnapshotWriter& SnapshotWriter::operator=(SnapshotWriter&& other) noexcept {
  if (this != &other) {
    SnapshotWriter discard(std::move(*this)); // an unfinished writer unlinks its file
    state_ = std::move(other.state_);
  }
  return *this;
}

SnapshotWriter::~SnapshotWriter() {
  if (state_ && !state_->finished && !state_->temp_path.empty()) {
    state_->fd.reset();
    ::unlink(state_->temp_path.c_str());
  }
}

const std::filesystem::path& SnapshotWriter::path() const {
  return state_->path;
}

Result<SnapshotWriter> SnapshotWriter::create(const std::filesystem::path& path,
                                              SnapshotHeader header) {
  if (std::string problem = check_header(header); !problem.empty())
    return fail(path.string() + ": invalid snapshot header: " + problem);
  if (!path.has_filename()) return fail(path.string() + ": not a file name");
  auto state = std::make_unique<State>();
  state->path = path;
  state->header = std::move(header);

  std::filesystem::path dir = path.parent_path();
  std::string temp = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return fail(path.string() + ": cannot create a temporary file: " + error_text(errno));
  state->fd = UniqueFd(fd);
  state->temp_path = temp;
  ::fchmod(fd, 0644); // mkostemp creates 0600; a snapshot is as readable as any output

  std::string header_bytes;
  encode_header(state->header, header_bytes);
  std::string& b = state->buffer;
  b.reserve(write_chunk + 64);
  b.append(snapshot_magic, sizeof snapshot_magic);
  // Version 1 unless a keyed_delta segment comes: finish() then rewrites it as 2.
  put_u32(b, snapshot_format_version_without_deltas);
  put_u32(b, static_cast<std::uint32_t>(header_bytes.size()));
  b += header_bytes;
  put_u64(b, xxh64(header_bytes));
  return SnapshotWriter(std::move(state));
}

Result<void> SnapshotWriter::add_segment(std::string_view node, SegmentKind kind,
                                         std::uint32_t key_group, std::string_view bytes) {
  State& s = *state_;
  if (!s.failure.empty()) return fail(s.failure);
  if (s.finished) return fail(s.path.string() + ": add_segment after finish");
  const auto& nodes = s.header.chain_nodes;
  std::size_t node_index = 0;
  while (node_index < nodes.size() && nodes[node_index] != node)
    ++node_index;
  if (node_index == nodes.size())
    return fail(s.path.string() + ": node " + std::string(node) + " is not in the task's chain");
  if (is_keyed(kind)) {
    if (!s.header.key_groups.contains(key_group))
      return fail(s.path.string() + ": key group " + std::to_string(key_group) +
                  " is not owned by this subtask");
  } else if (key_group != no_key_group) {
    return fail(s.path.string() + ": a " + std::string(segment_kind_name(kind)) +
                " segment has no key group");
  }
  auto node16 = static_cast<std::uint16_t>(node_index);
  if (!s.identities.insert(segment_identity(node16, kind, key_group)).second)
    return fail(s.path.string() + ": a second " +
                describe_segment(SegmentInfo{std::string(node), kind, key_group}));
  const SegmentKind other = kind == SegmentKind::Keyed ? SegmentKind::KeyedDelta : SegmentKind::Keyed;
  if (is_keyed(kind) && s.identities.count(segment_identity(node16, other, key_group)))
    return fail(s.path.string() + ": both a keyed and a keyed_delta segment of node " + std::string(node) +
                " key group " + std::to_string(key_group));
  if (kind == SegmentKind::KeyedDelta) s.has_deltas = true;

  std::size_t start = s.buffer.size();
  if (auto r = s.compressor.compress(bytes, s.buffer); !r) return s.failed(r.error());
  std::string_view frame(s.buffer.data() + start, s.buffer.size() - start);
  SegmentInfo info{std::string(node), kind,         key_group,   s.written + start,
                   frame.size(),      bytes.size(), xxh64(frame)};
  s.segments.push_back(std::move(info));
  s.segment_nodes.push_back(node16);
  s.raw_bytes += bytes.size();
  if (s.buffer.size() >= write_chunk)
    if (int err = s.flush()) return s.failed_errno("cannot write", err);
  return {};
}

Result<SnapshotSummary> SnapshotWriter::finish() {
  State& s = *state_;
  if (!s.failure.empty()) return fail(s.failure);
  if (s.finished) return fail(s.path.string() + ": finish called twice");

  std::uint64_t index_offset = s.written + s.buffer.size();
  std::string index;
  index.reserve(4 + snapshot_index_entry_size * s.segments.size());
  put_u32(index, static_cast<std::uint32_t>(s.segments.size()));
  for (std::size_t k = 0; k < s.segments.size(); ++k) {
    const SegmentInfo& seg = s.segments[k];
    put_u16(index, s.segment_nodes[k]);
    put_u8(index, static_cast<std::uint8_t>(seg.kind));
    put_u8(index, 0);
    put_u32(index, seg.key_group);
    put_u64(index, seg.offset);
    put_u64(index, seg.compressed_length);
    put_u64(index, seg.raw_length);
    put_u64(index, seg.checksum);
  }
  s.buffer += index;
  put_u64(s.buffer, index_offset);
  put_u64(s.buffer, index.size());
  put_u64(s.buffer, xxh64(index));
  s.buffer.append(snapshot_end_magic, sizeof snapshot_end_magic);

  if (int err = s.flush()) return s.failed_errno("cannot write", err);
  if (s.has_deltas) {
    std::string version;
    put_u32(version, snapshot_format_version);
    if (::pwrite(s.fd.get(), version.data(), version.size(), 8) != static_cast<ssize_t>(version.size()))
      return s.failed_errno("cannot write", errno);
  }
  if (::fsync(s.fd.get()) != 0) return s.failed_errno("cannot fsync", errno);
  if (int err = s.fd.close_checked()) return s.failed_errno("cannot close", err);
  if (::rename(s.temp_path.c_str(), s.path.c_str()) != 0)
    return s.failed_errno("cannot rename " + s.temp_path.string() + " into place", errno);
  s.temp_path.clear();
  s.finished = true;
  // The rename is durable only once the directory is synced.
  std::filesystem::path dir = s.path.parent_path();
  if (dir.empty()) dir = ".";
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0 || ::fsync(dir_fd.get()) != 0) {
    int err = errno;
    s.failure =
        s.path.string() + ": cannot fsync the directory " + dir.string() + ": " + error_text(err);
    return fail(s.failure);
  }
  return SnapshotSummary{s.segments.size(), s.raw_bytes, s.written};
}

// ---------------------------------------------------------------------------------------
// Reader

struct SnapshotReader::State {
  std::filesystem::path path;
  UniqueFd fd;
  std::uint64_t size = 0;
  std::uint32_t version = 0;
  SnapshotHeader header;
  std::vector<SegmentInfo> segments;
  std::unordered_map<std::uint64_t, std::size_t> by_identity; // segment_identity -> index
  std::string compressed;                                     // reused read buffer
  Lz4FrameDecompressor decompressor;

  Failure failed(const std::string& what) const { return fail(path.string() + ": " + what); }
};

SnapshotReader::SnapshotReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
SnapshotReader::SnapshotReader(SnapshotReader&&) noexcept = default;
SnapshotReader& SnapshotReader::operator=(SnapshotReader&&) noexcept = default;
SnapshotReader::~SnapshotReader() = default;

const std::filesystem::path& SnapshotReader::path() const {
  return state_->path;
}
std::uint32_t SnapshotReader::format_version() const {
  return state_->version;
}
std::uint64_t SnapshotReader::file_size() const {
  return state_->size;
}
const SnapshotHeader& SnapshotReader::header() const {
  return state_->header;
}
const std::vector<SegmentInfo>& SnapshotReader::segments() const {
  return state_->segments;
}

const SegmentInfo* SnapshotReader::find(std::string_view node, SegmentKind kind,
                                        std::uint32_t key_group) const {
  const auto& nodes = state_->header.chain_nodes;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    if (nodes[n] != node) continue;
    auto it =
        state_->by_identity.find(segment_identity(static_cast<std::uint16_t>(n), kind, key_group));
    return it == state_->by_identity.end() ? nullptr : &state_->segments[it->second];
  }
  return nullptr;
}

Result<SnapshotReader> SnapshotReader::open(const std::filesystem::path& path) {
  auto state = std::make_unique<State>();
  State& s = *state;
  s.path = path;
  s.fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (s.fd.get() < 0) return s.failed("cannot open: " + error_text(errno));
  struct stat st {};
  if (::fstat(s.fd.get(), &st) != 0) return s.failed("cannot stat: " + error_text(errno));
  if (!S_ISREG(st.st_mode)) return s.failed("not a regular file");
  s.size = static_cast<std::uint64_t>(st.st_size);

  auto read_at = [&](std::uint64_t offset, std::size_t length, std::string& out) -> Result<void> {
    int err = read_exactly(s.fd.get(), offset, length, out);
    if (err == -1)
      return s.failed("truncated (the file ends at byte " + std::to_string(s.size) + ")");
    if (err != 0) return s.failed("cannot read: " + error_text(err));
    return {};
  };

  // Magic and version.
  std::string start;
  if (auto r = read_at(0, static_cast<std::size_t>(std::min<std::uint64_t>(s.size, 16)), start); !r)
    return fail(r.error());
  std::size_t magic_seen = std::min(start.size(), sizeof snapshot_magic);
  if (std::memcmp(start.data(), snapshot_magic, magic_seen) != 0)
    return s.failed("bad magic: not a streamctl snapshot file");
  const std::uint64_t min_size = 16 + 8 + 4 + snapshot_trailer_size;
  if (s.size < min_size)
    return s.failed("truncated (" + std::to_string(s.size) + " bytes, a snapshot has at least " +
                    std::to_string(min_size) + ")");
  s.version = static_cast<std::uint32_t>(get_le(start.data() + 8, 4));
  if (s.version < 1 || s.version > snapshot_format_version)
    return s.failed("unsupported snapshot format version " + std::to_string(s.version) +
                    " (this streamctl reads versions 1 to " + std::to_string(snapshot_format_version) +
                    ")");
  auto header_length = static_cast<std::uint32_t>(get_le(start.data() + 12, 4));
  if (header_length > max_header_length)
    return s.failed("corrupt header length " + std::to_string(header_length));
  const std::uint64_t data_start = 16 + std::uint64_t(header_length) + 8;

  // The trailer: its end magic tells a complete file from a truncated one.
  std::string trailer;
  if (auto r = read_at(s.size - snapshot_trailer_size, snapshot_trailer_size, trailer); !r)
    return fail(r.error());
  if (std::memcmp(trailer.data() + 24, snapshot_end_magic, sizeof snapshot_end_magic) != 0)
    return s.failed("truncated or corrupt: the end marker is missing");
  std::uint64_t index_offset = get_le(trailer.data(), 8);
  std::uint64_t index_length = get_le(trailer.data() + 8, 8);
  std::uint64_t index_checksum = get_le(trailer.data() + 16, 8);
  if (s.size < data_start + 4 + snapshot_trailer_size)
    return s.failed("truncated (" + std::to_string(s.size) + " bytes, the header alone needs " +
                    std::to_string(data_start) + ")");
  if (index_offset < data_start || index_length > s.size ||
      index_offset != s.size - snapshot_trailer_size - index_length)
    return s.failed("corrupt trailer: the index at offset " + std::to_string(index_offset) +
                    " of " + std::to_string(index_length) + " bytes does not end at the trailer");

  // The header.
  std::string header_bytes;
  if (auto r = read_at(16, header_length + 8, header_bytes); !r) return fail(r.error());
  std::uint64_t header_checksum = get_le(header_bytes.data() + header_length, 8);
  header_bytes.resize(header_length);
  if (xxh64(header_bytes) != header_checksum) return s.failed("header checksum mismatch");
  {
    Cursor c(header_bytes);
    SnapshotHeader& h = s.header;
    h.job_name = c.get_string();
    h.pipeline_hash = c.get(8);
    h.checkpoint_id = c.get(8);
    h.created_at_ms = static_cast<std::int64_t>(c.get(8));
    h.max_parallelism = static_cast<std::uint32_t>(c.get(4));
    h.chain_id = static_cast<std::uint32_t>(c.get(4));
    h.subtask = static_cast<std::uint32_t>(c.get(4));
    h.parallelism = static_cast<std::uint32_t>(c.get(4));
    h.key_groups.first = static_cast<std::uint32_t>(c.get(4));
    h.key_groups.end = static_cast<std::uint32_t>(c.get(4));
    std::uint64_t node_count = c.get(4);
    for (std::uint64_t k = 0; k < node_count && !c.bad; ++k)
      h.chain_nodes.push_back(c.get_string());
    if (c.bad) return s.failed("corrupt header: it ends inside a field");
    if (!c.at_end()) return s.failed("corrupt header: bytes after its last field");
    if (std::string problem = check_header(h); !problem.empty())
      return s.failed("corrupt header: " + problem);
  }

  // The index. Its length is bounded by what the header allows (one segment per node, kind
  // and key group) before it is read, so that a damaged trailer cannot make us read the
  // whole file into memory.
  const std::uint64_t max_segments =
      std::uint64_t(s.header.chain_nodes.size()) * (s.header.key_groups.size() + 3);
  if (index_length < 4 || (index_length - 4) % snapshot_index_entry_size != 0 ||
      (index_length - 4) / snapshot_index_entry_size > max_segments)
    return s.failed("corrupt trailer: an index of " + std::to_string(index_length) +
                    " bytes is impossible for this header");
  std::string index;
  if (auto r = read_at(index_offset, static_cast<std::size_t>(index_length), index); !r)
    return fail(r.error());
  if (xxh64(index) != index_checksum) return s.failed("index checksum mismatch");
  Cursor c(index);
  std::uint64_t count = c.get(4);
  if (c.bad || index_length != 4 + snapshot_index_entry_size * count)
    return s.failed("corrupt index: " + std::to_string(index_length) + " bytes cannot hold " +
                    std::to_string(count) + " segments");
  std::uint64_t expected_offset = data_start;
  s.segments.reserve(count);
  for (std::uint64_t k = 0; k < count; ++k) {
    auto node = static_cast<std::uint16_t>(c.get(2));
    auto kind_byte = static_cast<std::uint8_t>(c.get(1));
    auto reserved = c.get(1);
    SegmentInfo seg;
    seg.key_group = static_cast<std::uint32_t>(c.get(4));
    seg.offset = c.get(8);
    seg.compressed_length = c.get(8);
    seg.raw_length = c.get(8);
    seg.checksum = c.get(8);
    std::string where = "corrupt index entry " + std::to_string(k) + ": ";
    if (node >= s.header.chain_nodes.size())
      return s.failed(where + "no node " + std::to_string(node));
    const auto newest_kind = s.version >= 2 ? SegmentKind::KeyedDelta : SegmentKind::SinkPending;
    if (kind_byte > static_cast<std::uint8_t>(newest_kind) || reserved != 0)
      return s.failed(where + "unknown kind " + std::to_string(kind_byte));
    seg.node = s.header.chain_nodes[node];
    seg.kind = static_cast<SegmentKind>(kind_byte);
    if (is_keyed(seg.kind) ? !s.header.key_groups.contains(seg.key_group)
                                       : seg.key_group != no_key_group)
      return s.failed(where + "key group " + std::to_string(seg.key_group) + " does not fit a " +
                      std::string(segment_kind_name(seg.kind)) + " segment of this subtask");
    if (seg.offset != expected_offset || seg.compressed_length > index_offset - seg.offset)
      return s.failed(where + "the segment's bytes [" + std::to_string(seg.offset) + ", +" +
                      std::to_string(seg.compressed_length) + ") are not where the previous ended");
    if (seg.raw_length > seg.compressed_length * max_lz4_ratio)
      return s.failed(where + "implausible raw length " + std::to_string(seg.raw_length));
    if (!s.by_identity.emplace(segment_identity(node, seg.kind, seg.key_group), s.segments.size())
             .second)
      return s.failed(where + "a second " + describe_segment(seg));
    if (is_keyed(seg.kind)) {
      const SegmentKind other = seg.kind == SegmentKind::Keyed ? SegmentKind::KeyedDelta : SegmentKind::Keyed;
      if (s.by_identity.count(segment_identity(node, other, seg.key_group)))
        return s.failed(where + "both a keyed and a keyed_delta segment of node " + seg.node + " key group " +
                        std::to_string(seg.key_group));
    }
    expected_offset = seg.offset + seg.compressed_length;
    s.segments.push_back(std::move(seg));
  }
  if (expected_offset != index_offset)
    return s.failed("corrupt index: " + std::to_string(index_offset - expected_offset) +
                    " bytes between the last segment and the index");
  return SnapshotReader(std::move(state));
}

namespace {
// Reads, checks and decompresses one segment with the given buffers (pread: the file offset
// is not shared state, so readers on several threads may use one descriptor).
Result<void> read_segment_with(const std::filesystem::path& path, int fd, const SegmentInfo& seg,
                               std::string& compressed, Lz4FrameDecompressor& decompressor,
                               std::string& out) {
  auto failed = [&](const std::string& what) { return fail(path.string() + ": " + what); };
  int err = read_exactly(fd, seg.offset, static_cast<std::size_t>(seg.compressed_length), compressed);
  if (err == -1) return failed("truncated: the " + describe_segment(seg) + " is cut off");
  if (err != 0) return failed("cannot read the " + describe_segment(seg) + ": " + error_text(err));
  if (xxh64(compressed) != seg.checksum) return failed("checksum mismatch in " + describe_segment(seg));
  if (auto r = decompressor.decompress(compressed, static_cast<std::size_t>(seg.raw_length), out); !r)
    return failed(describe_segment(seg) + ": " + r.error());
  return {};
}
} // namespace

Result<void> SnapshotReader::read_segment(const SegmentInfo& seg, std::string& out) {
  State& s = *state_;
  return read_segment_with(s.path, s.fd.get(), seg, s.compressed, s.decompressor, out);
}

Result<std::string> SnapshotReader::read_segment_concurrently(const SegmentInfo& seg) const {
  std::string compressed, out;
  Lz4FrameDecompressor decompressor;
  if (auto r = read_segment_with(state_->path, state_->fd.get(), seg, compressed, decompressor, out); !r)
    return fail(r.error());
  return out;
}

Result<std::string> SnapshotReader::read_segment(const SegmentInfo& seg) {
  std::string out;
  if (auto r = read_segment(seg, out); !r) return fail(r.error());
  return out;
}

Result<SnapshotSummary> SnapshotReader::verify() {
  SnapshotSummary summary{state_->segments.size(), 0, state_->size};
  std::string scratch;
  for (const auto& seg : state_->segments) {
    if (auto r = read_segment(seg, scratch); !r) return fail(r.error());
    summary.raw_bytes += seg.raw_length;
  }
  return summary;
}

} // namespace streamctl::state
