#pragma once
// The snapshot file (streamctl-snapshot(5)): the state of one task (one subtask of a fused
// chain) at one checkpoint or savepoint. A checkpoint directory holds one such file per task
// (and a _metadata file, written last by the coordinator, which is not this format).
//
// Byte order: every integer is little-endian, fixed width. "string" is a u32 byte length and
// then the bytes (UTF-8 by convention, not checked). XXH64 is xxHash's 64-bit hash, seed 0.
//
//   file:
//     +0   8 bytes  magic 53 43 53 4E 41 50 0D 0A ("SCSNAP\r\n": a text-mode transfer that
//                   rewrites line ends, or a file that is not a snapshot, fails here)
//     +8   u32      format version: 1, or 2 when a keyed_delta segment is in the file (a file
//                   with none is written as version 1, readable by every streamctl)
//     +12  u32      H = byte length of the header
//     +16  H bytes  header
//     +16+H u64     XXH64 of the H header bytes
//     then the segments, back to back from D = 24+H on: each is one LZ4 frame (lz4frame
//                   format; content checksum on; content size on unless the segment is
//                   empty) of the bytes an operator gave; where each begins and ends is
//                   known only from the index
//     then the index, I bytes at offset X
//     then the trailer, the last 32 bytes of the file:
//       +0  u64     X = offset of the index
//       +8  u64     I = byte length of the index; X + I + 32 = the file size
//       +16 u64     XXH64 of the I index bytes
//       +24 8 bytes end magic 53 43 53 4E 45 4E 44 0A ("SCSNEND\n"; missing = truncated)
//
//   header:
//     string        job name
//     u64           pipeline hash (of the pipeline that wrote it; 0 = unknown)
//     u64           checkpoint id
//     i64           created at, epoch milliseconds
//     u32           max_parallelism (the number of key groups), 1..32768
//     u32           chain id (pipeline::Chain::id)
//     u32           subtask index, < parallelism
//     u32           parallelism of the chain
//     u32           first key group owned, u32 end (exclusive): [first, end) within
//                   [0, max_parallelism)
//     u32           N = number of nodes in the chain, then N strings: the node names, head first
//     (nothing else: the header is exactly H bytes)
//
//   index:
//     u32           S = segment count; I = 4 + 40*S
//     S entries of 40 bytes, in file order (entry k+1 begins where entry k ends; the first at
//     D, the last ends at X):
//       +0  u16     node: index into the header's node names
//       +2  u8      kind: 0 keyed (one key group of the node's keyed state), 1 subtask (the
//                   node's non-keyed state), 2 source_position, 3 sink_pending, 4 keyed_delta
//                   (version 2 only: what changed in one key group since an earlier file of
//                   the same task, below)
//       +3  u8      reserved, 0
//       +4  u32     key group (keyed, keyed_delta: within [first, end) of the header;
//                   otherwise FFFFFFFF)
//       +8  u64     offset of the LZ4 frame in the file
//       +16 u64     compressed length (bytes of the frame)
//       +24 u64     raw length (bytes of the segment after decompression)
//       +32 u64     XXH64 of the compressed bytes
//     at most one segment per (node, kind, key group)
//
// A keyed_delta segment (incremental checkpoints, pipeline/runtime/incremental_snapshots.hpp)
// holds the operator's changelog of one key group against the group as the task's earlier
// files leave it: a restore reads the group's newest keyed segment in the task's chain of
// files (the full one first, then the deltas, oldest first), or none (the group was empty),
// and applies every keyed_delta of the group written after it, in file order
// (Operator::load_key_group_with_deltas). A file holds a keyed or a keyed_delta segment for a
// group, never both. The bytes are the operator's own, drawn beside its keyed segment (a
// window: operators/window.cpp, "Key-group delta segment"); every operator's begins as its
// keyed segment does, with a version byte and a kind letter.
//
// The index is at the end so that a writer streams segments without knowing them in
// advance; a reader reads the magic, the header and the trailer, checks the index, and then
// reads only the segments it wants (a restore reads the key groups it owns). Checking the
// compressed bytes' XXH64 before decompressing turns any damage into a clean error.
//
// Versions: the reader checks magic and version and rejects what it does not know. A change
// of layout bumps the version and keeps the reader of each older version beside the new one;
// tests/data/snapshots/golden-v1.snap must keep reading as tests/unit/state/
// snapshot_format_test.cpp expects. Version 2 is version 1 with kind 4 allowed; a version 1
// reader refuses it by its version rather than by an unknown kind (tests/data/checkpoints/
// delta-chain-v2 is its golden chain).
//
// Every failure is a Result naming the file: "PATH: truncated (...)", "PATH: bad magic ...",
// "PATH: checksum mismatch in segment of node X key group 7". Thread-compatible: no global
// state; use one writer or reader per thread.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "state/error.hpp"
#include "state/key_group.hpp"

namespace streamctl::state {

inline constexpr char snapshot_magic[8] = {'S', 'C', 'S', 'N', 'A', 'P', '\r', '\n'};
inline constexpr char snapshot_end_magic[8] = {'S', 'C', 'S', 'N', 'E', 'N', 'D', '\n'};
// The newest version this streamctl writes and reads; it reads every older one too.
inline constexpr std::uint32_t snapshot_format_version = 2;
// What a file without a keyed_delta segment is written as.
inline constexpr std::uint32_t snapshot_format_version_without_deltas = 1;
inline constexpr std::size_t snapshot_trailer_size = 32;
inline constexpr std::size_t snapshot_index_entry_size = 40;
// The key group of a segment that is not keyed.
inline constexpr std::uint32_t no_key_group = 0xFFFFFFFFu;

enum class SegmentKind : std::uint8_t {
  Keyed = 0,          // Operator::snapshot_key_group
  Subtask = 1,        // Operator::snapshot_subtask_state
  SourcePosition = 2, // Source::snapshot_position
  SinkPending = 3,    // Sink::pre_commit
  KeyedDelta = 4,     // Operator::snapshot_key_group_delta (format version 2)
};

// Keyed and KeyedDelta: the kinds that belong to one key group.
constexpr bool is_keyed(SegmentKind kind) {
  return kind == SegmentKind::Keyed || kind == SegmentKind::KeyedDelta;
}

// "keyed", "subtask", "source_position", "sink_pending", "keyed_delta".
std::string_view segment_kind_name(SegmentKind kind);

struct SnapshotHeader {
  std::string job_name;
  std::uint64_t pipeline_hash = 0;
  std::uint64_t checkpoint_id = 0;
  std::int64_t created_at_ms = 0;
  std::uint32_t max_parallelism = 128;
  std::uint32_t chain_id = 0;
  std::uint32_t subtask = 0;
  std::uint32_t parallelism = 1;
  KeyGroupRange key_groups; // what this subtask owns: key_group_range(subtask, parallelism, maxP)
  std::vector<std::string> chain_nodes; // head first

  bool operator==(const SnapshotHeader&) const = default;
};

struct SegmentInfo {
  std::string node;
  SegmentKind kind = SegmentKind::Keyed;
  std::uint32_t key_group = no_key_group;
  std::uint64_t offset = 0;
  std::uint64_t compressed_length = 0;
  std::uint64_t raw_length = 0;
  std::uint64_t checksum = 0; // XXH64 of the compressed bytes
};

// "segment of node X key group 7", "subtask segment of node X", ... for messages.
std::string describe_segment(const SegmentInfo& segment);

struct SnapshotSummary {
  std::size_t segments = 0;
  std::uint64_t raw_bytes = 0;  // sum of raw lengths
  std::uint64_t file_bytes = 0; // size of the file
};

// Writes one snapshot file: create(), add_segment() as state comes, finish(). The file is
// written under a temporary name in the same directory (".NAME.tmp-XXXXXX") and appears under
// its name only when finish() has made it durable (fsync, rename, fsync of the directory).
// A writer destroyed before finish() succeeded unlinks the temporary file. I/O errors (ENOSPC,
// EIO, EFBIG) come back as failures naming the file; after one, every call fails the same way.
// Movable, not copyable; safe to use from a background thread (one writer per thread).
class SnapshotWriter {
public:
  // Fails if the header is inconsistent (subtask >= parallelism, a key-group range outside
  // [0, max_parallelism), ...) or the temporary file cannot be created.
  static Result<SnapshotWriter> create(const std::filesystem::path& path, SnapshotHeader header);

  SnapshotWriter(SnapshotWriter&&) noexcept;
  SnapshotWriter& operator=(SnapshotWriter&&) noexcept;
  ~SnapshotWriter();

  // Compresses `bytes` as one segment and writes it (buffered). `node` must be one of the
  // header's chain nodes; a Keyed segment needs a key group in the header's range, the other
  // kinds take no_key_group. At most one segment per (node, kind, key group).
  Result<void> add_segment(std::string_view node, SegmentKind kind, std::uint32_t key_group,
                           std::string_view bytes);
  // Writes the index and the trailer, fsyncs, renames into place, fsyncs the directory.
  Result<SnapshotSummary> finish();

  const std::filesystem::path& path() const;

private:
  struct State;
  explicit SnapshotWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Reads one snapshot file. open() checks magic, version, header, trailer and the index's
// checksum and consistency; segments are read (checksum, decompression) one at a time, on
// demand, by seeking through the index. Movable; one reader per thread, except for
// read_segment_concurrently.
class SnapshotReader {
public:
  static Result<SnapshotReader> open(const std::filesystem::path& path);

  SnapshotReader(SnapshotReader&&) noexcept;
  SnapshotReader& operator=(SnapshotReader&&) noexcept;
  ~SnapshotReader();

  const std::filesystem::path& path() const;
  std::uint32_t format_version() const;
  std::uint64_t file_size() const;
  const SnapshotHeader& header() const;
  const std::vector<SegmentInfo>& segments() const; // in file order
  // The segment for (node, kind, key group), or nullptr.
  const SegmentInfo* find(std::string_view node, SegmentKind kind,
                          std::uint32_t key_group = no_key_group) const;

  // Reads one segment: checks the XXH64 of its compressed bytes, decompresses (which checks
  // the LZ4 content checksum) into `out`, replacing its contents. Reads nothing else.
  Result<void> read_segment(const SegmentInfo& segment, std::string& out);
  Result<std::string> read_segment(const SegmentInfo& segment);
  // The same with buffers of its own: safe to call from several threads at once (a parallel
  // restore), as long as no thread moves or destroys the reader meanwhile.
  Result<std::string> read_segment_concurrently(const SegmentInfo& segment) const;
  // Reads and checks every segment.
  Result<SnapshotSummary> verify();

private:
  struct State;
  explicit SnapshotReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

} // namespace streamctl::state
