// The snapshot file format (state/snapshot_format): round trips through real files, atomic
// appearance, reading one segment alone, every truncation and byte flip refused cleanly, write
// errors as failures, and the golden version-1 file that keeps old snapshots restorable.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "state/lz4_frame.hpp"
#include "state/snapshot_format.hpp"

using namespace streamctl::state;
namespace fs = std::filesystem;

namespace {

class TempDir {
public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "snapshot-test.XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(path_))
      out.push_back(entry.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Mildly compressible bytes, like serialised state: repeated field names, varying numbers.
std::string state_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out;
  while (out.size() < n)
    out += "{\"user\":\"u" + std::to_string(rng() % 5000) +
           "\",\"n\":" + std::to_string(rng() % 100000) + "}";
  out.resize(n);
  return out;
}

SnapshotHeader test_header() {
  SnapshotHeader h;
  h.job_name = "clicks";
  h.pipeline_hash = 0xfeedface01234567ull;
  h.checkpoint_id = 9;
  h.created_at_ms = 1764446206123;
  h.max_parallelism = 16;
  h.chain_id = 2;
  h.subtask = 1;
  h.parallelism = 4;
  h.key_groups = key_group_range(1, 4, 16); // [4, 8)
  h.chain_nodes = {"parse", "count", "out"};
  return h;
}

struct Seg {
  std::string node;
  SegmentKind kind;
  std::uint32_t key_group;
  std::string bytes;
};

std::vector<Seg> test_segments() {
  return {
      {"count", SegmentKind::Keyed, 4, state_bytes(1000, 4)},
      {"count", SegmentKind::Keyed, 5, ""},                      // an empty group
      {"count", SegmentKind::Keyed, 7, state_bytes(3 << 20, 7)}, // several LZ4 blocks
      {"count", SegmentKind::Subtask, no_key_group, "broadcast side"},
      {"parse", SegmentKind::SourcePosition, no_key_group, std::string("\x01offset=12345\0", 14)},
      {"out", SegmentKind::SinkPending, no_key_group, "part-1-9.inprogress"},
  };
}

void write_snapshot(const fs::path& path, const SnapshotHeader& header,
                    const std::vector<Seg>& segs) {
  auto w = SnapshotWriter::create(path, header);
  REQUIRE(w.ok());
  for (const auto& s : segs) {
    auto r = w->add_segment(s.node, s.kind, s.key_group, s.bytes);
    REQUIRE(r.ok());
  }
  auto done = w->finish();
  REQUIRE(done.ok());
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Opening and verifying `path` fails, with a message that names the file. Returns it.
std::string refused(const fs::path& path) {
  auto reader = SnapshotReader::open(path);
  std::string message;
  if (!reader.ok()) {
    message = reader.error();
  } else {
    auto verified = reader->verify();
    if (verified.ok()) return "(accepted)";
    message = verified.error();
  }
  if (!starts_with(message, path.string() + ": ")) return "(does not name the file) " + message;
  return message;
}

} // namespace

TEST_CASE("snapshot: a written file reads back field by field and segment by segment",
          "[snapshot]") {
  TempDir dir;
  fs::path path = dir / "count-1.snap";
  auto header = test_header();
  auto segs = test_segments();
  write_snapshot(path, header, segs);
  // Only the final file: the temporary name is gone.
  CHECK(dir.names() == std::vector<std::string>{"count-1.snap"});

  auto reader = SnapshotReader::open(path);
  REQUIRE(reader.ok());
  CHECK(reader->format_version() == 1);
  CHECK(reader->header() == header);
  CHECK(reader->file_size() == fs::file_size(path));
  REQUIRE(reader->segments().size() == segs.size());
  std::uint64_t raw = 0;
  for (std::size_t k = 0; k < segs.size(); ++k) {
    const SegmentInfo& info = reader->segments()[k];
    CHECK(info.node == segs[k].node);
    CHECK(info.kind == segs[k].kind);
    CHECK(info.key_group == segs[k].key_group);
    CHECK(info.raw_length == segs[k].bytes.size());
    CHECK(reader->find(segs[k].node, segs[k].kind, segs[k].key_group) == &info);
    auto bytes = reader->read_segment(info);
    REQUIRE(bytes.ok());
    CHECK(*bytes == segs[k].bytes);
    raw += segs[k].bytes.size();
  }
  CHECK(reader->find("count", SegmentKind::Keyed, 6) == nullptr);
  CHECK(reader->find("nope", SegmentKind::Subtask) == nullptr);
  CHECK(reader->find("count", SegmentKind::SourcePosition) == nullptr);
  // The 3 MiB group compressed (mildly compressible input).
  CHECK(reader->segments()[2].compressed_length < reader->segments()[2].raw_length * 3 / 4);

  auto summary = reader->verify();
  REQUIRE(summary.ok());
  CHECK(summary->segments == segs.size());
  CHECK(summary->raw_bytes == raw);
  CHECK(summary->file_bytes == fs::file_size(path));
}

TEST_CASE("snapshot: thousands of key groups, any of them found and read alone", "[snapshot]") {
  TempDir dir;
  fs::path path = dir / "many.snap";
  SnapshotHeader h = test_header();
  h.max_parallelism = 4096;
  h.subtask = 0;
  h.parallelism = 2;
  h.key_groups = key_group_range(0, 2, 4096); // [0, 2048)
  auto w = SnapshotWriter::create(path, h);
  REQUIRE(w.ok());
  for (std::uint32_t kg = 0; kg < 2048; ++kg)
    REQUIRE(w->add_segment("count", SegmentKind::Keyed, kg, "group " + std::to_string(kg)).ok());
  REQUIRE(w->finish().ok());

  auto reader = SnapshotReader::open(path);
  REQUIRE(reader.ok());
  CHECK(reader->segments().size() == 2048);
  for (std::uint32_t kg : {0u, 1u, 777u, 1024u, 2047u}) {
    const SegmentInfo* info = reader->find("count", SegmentKind::Keyed, kg);
    REQUIRE(info != nullptr);
    auto bytes = reader->read_segment(*info);
    REQUIRE(bytes.ok());
    CHECK(*bytes == "group " + std::to_string(kg));
  }
  CHECK(reader->find("count", SegmentKind::Keyed, 2048) == nullptr);
  REQUIRE(reader->verify().ok());
}

TEST_CASE("snapshot: a file with no segment is valid", "[snapshot]") {
  TempDir dir;
  write_snapshot(dir / "empty.snap", test_header(), {});
  auto reader = SnapshotReader::open(dir / "empty.snap");
  REQUIRE(reader.ok());
  CHECK(reader->segments().empty());
  REQUIRE(reader->verify().ok());
}

TEST_CASE("snapshot: one segment is read without touching the others", "[snapshot]") {
  TempDir dir;
  fs::path path = dir / "s.snap";
  auto segs = test_segments();
  write_snapshot(path, test_header(), segs);
  SegmentInfo damaged;
  {
    auto reader = SnapshotReader::open(path);
    REQUIRE(reader.ok());
    damaged = *reader->find("count", SegmentKind::Keyed, 7);
  }
  // Damage the middle of key group 7's frame: the index and the other segments are intact.
  std::string bytes = read_file(path);
  bytes[damaged.offset + damaged.compressed_length / 2] ^= 0x40;
  write_file(path, bytes);

  auto reader = SnapshotReader::open(path);
  REQUIRE(reader.ok());
  auto four = reader->read_segment(*reader->find("count", SegmentKind::Keyed, 4));
  REQUIRE(four.ok());
  CHECK(*four == segs[0].bytes);
  auto seven = reader->read_segment(*reader->find("count", SegmentKind::Keyed, 7));
  REQUIRE_FALSE(seven.ok());
  CHECK(seven.error() ==
        path.string() + ": checksum mismatch in segment of node count key group 7");
  auto position = reader->read_segment(*reader->find("parse", SegmentKind::SourcePosition));
  REQUIRE(position.ok());
  CHECK(*position == segs[4].bytes);
  auto verified = reader->verify();
  REQUIRE_FALSE(verified.ok());
  CHECK(verified.error() == seven.error());
}

TEST_CASE("snapshot: every truncation and every byte flip is refused with the file named",
          "[snapshot]") {
  TempDir dir;
  fs::path good = dir / "good.snap";
  std::vector<Seg> segs = {
      {"count", SegmentKind::Keyed, 4, state_bytes(120, 1)},
      {"count", SegmentKind::Keyed, 6, "x"},
      {"out", SegmentKind::SinkPending, no_key_group, "part-0"},
  };
  write_snapshot(good, test_header(), segs);
  const std::string bytes = read_file(good);
  fs::path bad = dir / "bad.snap";

  for (std::size_t n = 0; n < bytes.size(); ++n) {
    write_file(bad, std::string_view(bytes).substr(0, n));
    std::string message = refused(bad);
    INFO("truncated to " << n << " of " << bytes.size() << " bytes: " << message);
    CHECK(message.find("(accepted)") == std::string::npos);
    CHECK(message.find("(does not name the file)") == std::string::npos);
  }
  // The usual truncation says so.
  write_file(bad, std::string_view(bytes).substr(0, bytes.size() / 2));
  CHECK(refused(bad).find("truncated") != std::string::npos);
  write_file(bad, std::string_view(bytes).substr(0, 5));
  CHECK(refused(bad).find("truncated") != std::string::npos);

  std::mt19937 rng(5);
  for (std::size_t pos = 0; pos < bytes.size(); ++pos) {
    for (unsigned char mask :
         {std::uint8_t(0x01), std::uint8_t(0x80), std::uint8_t(1 + rng() % 255)}) {
      std::string flipped = bytes;
      flipped[pos] = static_cast<char>(flipped[pos] ^ mask);
      write_file(bad, flipped);
      std::string message = refused(bad);
      INFO("byte " << pos << " ^ " << int(mask) << ": " << message);
      CHECK(message.find("(accepted)") == std::string::npos);
      CHECK(message.find("(does not name the file)") == std::string::npos);
    }
  }
  // Bytes appended after the trailer are not ignored either.
  write_file(bad, bytes + "x");
  CHECK(refused(bad).find("(accepted)") == std::string::npos);
}

TEST_CASE("snapshot: clear messages for missing, foreign and newer files", "[snapshot]") {
  TempDir dir;
  fs::path missing = dir / "missing.snap";
  auto r = SnapshotReader::open(missing);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == missing.string() + ": cannot open: No such file or directory");

  r = SnapshotReader::open(dir.path());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == dir.path().string() + ": not a regular file");

  fs::path text = dir / "notes.txt";
  write_file(text, "these are not the bytes you are looking for, not by a long way at all\n");
  r = SnapshotReader::open(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == text.string() + ": bad magic: not a streamctl snapshot file");

  fs::path good = dir / "good.snap";
  write_snapshot(good, test_header(), {{"count", SegmentKind::Keyed, 4, "abc"}});
  std::string bytes = read_file(good);
  // A text-mode copy that turned \r\n into \n.
  fs::path mangled = dir / "mangled.snap";
  write_file(mangled, "SCSNAP\n" + bytes.substr(8));
  r = SnapshotReader::open(mangled);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find("bad magic") != std::string::npos);
  // A version from the future.
  bytes[8] = 3;
  fs::path newer = dir / "newer.snap";
  write_file(newer, bytes);
  r = SnapshotReader::open(newer);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() ==
        newer.string() +
            ": unsupported snapshot format version 3 (this streamctl reads versions 1 to 2)");
}

TEST_CASE("snapshot: the writer refuses misuse and leaves nothing behind", "[snapshot]") {
  TempDir dir;
  fs::path path = dir / "w.snap";

  SECTION("an inconsistent header") {
    auto h = test_header();
    h.subtask = 4;
    auto w = SnapshotWriter::create(path, h);
    REQUIRE_FALSE(w.ok());
    CHECK(w.error() ==
          path.string() + ": invalid snapshot header: subtask 4 is not below parallelism 4");
    h = test_header();
    h.key_groups = {4, 17};
    CHECK_FALSE(SnapshotWriter::create(path, h).ok());
    h = test_header();
    h.chain_nodes.clear();
    CHECK_FALSE(SnapshotWriter::create(path, h).ok());
  }
  SECTION("a directory that does not exist") {
    fs::path nowhere = dir / "no" / "such" / "w.snap";
    auto w = SnapshotWriter::create(nowhere, test_header());
    REQUIRE_FALSE(w.ok());
    CHECK(w.error() ==
          nowhere.string() + ": cannot create a temporary file: No such file or directory");
  }
  SECTION("bad segments") {
    auto w = SnapshotWriter::create(path, test_header());
    REQUIRE(w.ok());
    CHECK(w->add_segment("nope", SegmentKind::Subtask, no_key_group, "x").error() ==
          path.string() + ": node nope is not in the task's chain");
    CHECK(w->add_segment("count", SegmentKind::Keyed, 8, "x").error() ==
          path.string() + ": key group 8 is not owned by this subtask");
    CHECK_FALSE(w->add_segment("count", SegmentKind::Keyed, no_key_group, "x").ok());
    CHECK_FALSE(w->add_segment("count", SegmentKind::Subtask, 5, "x").ok());
    REQUIRE(w->add_segment("count", SegmentKind::Keyed, 5, "x").ok());
    CHECK(w->add_segment("count", SegmentKind::Keyed, 5, "y").error() ==
          path.string() + ": a second segment of node count key group 5");
    // The refusals did not break the writer.
    REQUIRE(w->add_segment("count", SegmentKind::Keyed, 6, "z").ok());
    REQUIRE(w->finish().ok());
    CHECK_FALSE(w->finish().ok());
    auto reader = SnapshotReader::open(path);
    REQUIRE(reader.ok());
    CHECK(reader->segments().size() == 2);
  }
  SECTION("an unfinished writer unlinks its temporary file") {
    {
      auto w = SnapshotWriter::create(path, test_header());
      REQUIRE(w.ok());
      REQUIRE(w->add_segment("count", SegmentKind::Keyed, 4, state_bytes(2 << 20, 3)).ok());
      CHECK(dir.names().size() == 1); // the temporary file, under another name
      CHECK(dir.names()[0].find(".w.snap.tmp-") == 0);
    }
    CHECK(dir.names().empty());
  }
  SECTION("a moved writer keeps writing, the moved-from one deletes nothing") {
    auto w = SnapshotWriter::create(path, test_header());
    REQUIRE(w.ok());
    SnapshotWriter moved = std::move(*w);
    REQUIRE(moved.add_segment("count", SegmentKind::Keyed, 4, "a").ok());
    REQUIRE(moved.finish().ok());
    CHECK(dir.names() == std::vector<std::string>{"w.snap"});
  }
}

// The disk-full path: a file size limit makes write() fail (EFBIG) as ENOSPC would. The
// failure names the file and the reason, the temporary file is gone, and the writer stays
// failed. (ENOSPC itself was checked by hand on a 1 MiB tmpfs.)
TEST_CASE("snapshot: a write error is a failure naming the file, not a crash", "[snapshot]") {
  TempDir dir;
  fs::path path = dir / "full.snap";
  auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  rlimit limit = old_limit;
  limit.rlim_cur = 256 << 10;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);

  auto w = SnapshotWriter::create(path, test_header());
  std::string first_error, second_error;
  if (w.ok()) {
    for (std::uint32_t kg = 4; kg < 8 && first_error.empty(); ++kg) {
      auto r = w->add_segment("count", SegmentKind::Keyed, kg, state_bytes(2 << 20, kg));
      if (!r) first_error = r.error();
    }
    auto r = w->finish();
    if (!r) second_error = r.error();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, previous_handler);

  REQUIRE(w.ok());
  CHECK(first_error == path.string() + ": cannot write: File too large");
  CHECK(second_error == first_error);
  CHECK(dir.names().empty());
}

TEST_CASE("snapshot: writers run on background threads, one each", "[snapshot]") {
  TempDir dir;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto header = test_header();
      auto w = SnapshotWriter::create(dir / ("t" + std::to_string(t) + ".snap"), header);
      if (!w) {
        errors[t] = w.error();
        return;
      }
      for (std::uint32_t kg = 4; kg < 8; ++kg)
        if (auto r =
                w->add_segment("count", SegmentKind::Keyed, kg, state_bytes(100000, kg * 10 + t));
            !r)
          errors[t] = r.error();
      if (auto r = w->finish(); !r) errors[t] = r.error();
    });
  }
  for (auto& th : threads)
    th.join();
  for (int t = 0; t < 4; ++t) {
    CHECK(errors[t].empty());
    auto reader = SnapshotReader::open(dir / ("t" + std::to_string(t) + ".snap"));
    REQUIRE(reader.ok());
    auto seg = reader->read_segment(*reader->find("count", SegmentKind::Keyed, 6));
    REQUIRE(seg.ok());
    CHECK(*seg == state_bytes(100000, 60 + t));
  }
}

TEST_CASE("snapshot: the LZ4 frame wrapper refuses damaged frames", "[snapshot]") {
  Lz4FrameCompressor compressor;
  Lz4FrameDecompressor decompressor;
  std::string raw = state_bytes(5000, 9);
  std::string frame;
  REQUIRE(compressor.compress(raw, frame).ok());
  std::string out;
  REQUIRE(decompressor.decompress(frame, raw.size(), out).ok());
  CHECK(out == raw);
  // Wrong expected length, a cut frame, extra bytes, a flipped content-checksum byte: all
  // clean failures, and the decompressor still works afterwards.
  CHECK_FALSE(decompressor.decompress(frame, raw.size() - 1, out).ok());
  CHECK_FALSE(decompressor.decompress(frame, raw.size() + 1, out).ok());
  CHECK_FALSE(
      decompressor.decompress(std::string_view(frame).substr(0, frame.size() - 3), raw.size(), out)
          .ok());
  CHECK_FALSE(decompressor.decompress(frame + "z", raw.size(), out).ok());
  std::string flipped = frame;
  flipped[flipped.size() - 1] ^= 1;
  CHECK_FALSE(decompressor.decompress(flipped, raw.size(), out).ok());
  REQUIRE(decompressor.decompress(frame, raw.size(), out).ok());
  CHECK(out == raw);
}

// ---------------------------------------------------------------------------------------
// The golden file of format version 1. It was written once by the hidden test below
// ("[.golden-generate]") and is committed: the reader must read it as this test says, for as
// long as streamctl claims to restore version-1 snapshots. Never regenerate it to make this
// test pass: a format change bumps snapshot_format_version and adds golden-v2.snap.

namespace {

fs::path golden_path() {
  if (const char* src = std::getenv("SOURCE_DIR"); src && *src)
    return fs::path(src) / "tests/data/snapshots/golden-v1.snap";
  return fs::path(__FILE__).parent_path().parent_path().parent_path() /
         "data/snapshots/golden-v1.snap";
}

SnapshotHeader golden_header() {
  SnapshotHeader h;
  h.job_name = "golden";
  h.pipeline_hash = 0x0123456789abcdefull;
  h.checkpoint_id = 42;
  h.created_at_ms = 1700000000000;
  h.max_parallelism = 8;
  h.chain_id = 3;
  h.subtask = 1;
  h.parallelism = 2;
  h.key_groups = {4, 8};
  h.chain_nodes = {"parse", "count", "out"};
  return h;
}

std::vector<Seg> golden_segments() {
  std::string repeated;
  for (int i = 0; i < 20; ++i)
    repeated += "{\"user\":\"u" + std::to_string(i % 3) + "\",\"n\":" + std::to_string(i) + "}\n";
  return {
      {"count", SegmentKind::Keyed, 4, "alpha=1\n"},
      {"count", SegmentKind::Keyed, 6, repeated},
      {"count", SegmentKind::Keyed, 7, ""},
      {"count", SegmentKind::Subtask, no_key_group, "subtask-state"},
      {"parse", SegmentKind::SourcePosition, no_key_group, "offset=12345"},
      {"out", SegmentKind::SinkPending, no_key_group, "part-1-42.pending"},
  };
}

} // namespace

TEST_CASE("snapshot: the golden version-1 file reads back exactly", "[snapshot]") {
  fs::path path = golden_path();
  INFO("golden file: " << path.string());
  REQUIRE(fs::exists(path));
  auto reader = SnapshotReader::open(path);
  REQUIRE(reader.ok());
  CHECK(reader->format_version() == 1);
  CHECK(reader->header() == golden_header());
  auto segs = golden_segments();
  REQUIRE(reader->segments().size() == segs.size());
  for (std::size_t k = 0; k < segs.size(); ++k) {
    const SegmentInfo& info = reader->segments()[k];
    CHECK(info.node == segs[k].node);
    CHECK(info.kind == segs[k].kind);
    CHECK(info.key_group == segs[k].key_group);
    auto bytes = reader->read_segment(info);
    REQUIRE(bytes.ok());
    CHECK(*bytes == segs[k].bytes);
  }
  REQUIRE(reader->verify().ok());

  // Today's writer still writes exactly these bytes: a layout change cannot slip in without
  // failing here. (Only a new liblz4 that compresses these tiny inputs differently could also
  // fail this part; then the reader check above is what must keep passing.)
  TempDir dir;
  write_snapshot(dir / "again.snap", golden_header(), segs);
  CHECK(read_file(dir / "again.snap") == read_file(path));
}

TEST_CASE("snapshot: write the golden file (run by hand, once per format version)",
          "[.golden-generate]") {
  fs::path path = golden_path();
  fs::create_directories(path.parent_path());
  write_snapshot(path, golden_header(), golden_segments());
}

// ---------------------------------------------------------------------------------------
// keyed_delta segments (format version 2): a file with one is version 2, a file without stays
// version 1; a group has a keyed or a keyed_delta segment, never both; every truncation and
// damage of a file with deltas is refused cleanly.

TEST_CASE("snapshot: a keyed_delta segment makes the file version 2, none leaves it version 1",
          "[snapshot][delta]") {
  TempDir dir;
  write_snapshot(dir / "full.snap", test_header(), test_segments());
  auto full = SnapshotReader::open(dir / "full.snap");
  REQUIRE(full.ok());
  CHECK(full->format_version() == 1);

  auto segs = test_segments();
  segs.push_back({"count", SegmentKind::KeyedDelta, 6, "delta of 6"});
  write_snapshot(dir / "delta.snap", test_header(), segs);
  auto delta = SnapshotReader::open(dir / "delta.snap");
  REQUIRE(delta.ok());
  CHECK(delta->format_version() == 2);
  const SegmentInfo* d = delta->find("count", SegmentKind::KeyedDelta, 6);
  REQUIRE(d != nullptr);
  CHECK(describe_segment(*d) == "delta segment of node count key group 6");
  CHECK(segment_kind_name(d->kind) == "keyed_delta");
  CHECK(*delta->read_segment(*d) == "delta of 6");
  CHECK(delta->find("count", SegmentKind::Keyed, 6) == nullptr);
  CHECK(delta->verify().ok());

  // Version 1 with kind 4 in its index: refused as an unknown kind.
  std::string bytes = read_file(dir / "delta.snap");
  bytes[8] = 1;
  { std::ofstream(dir / "v1-with-delta.snap", std::ios::binary) << bytes; }
  CHECK_THAT(refused(dir / "v1-with-delta.snap"), Catch::Contains("unknown kind 4"));
}

TEST_CASE("snapshot: a group with both a keyed and a keyed_delta segment is refused", "[snapshot][delta]") {
  TempDir dir;
  auto w = SnapshotWriter::create(dir / "both.snap", test_header());
  REQUIRE(w.ok());
  REQUIRE(w->add_segment("count", SegmentKind::Keyed, 4, "whole").ok());
  auto second = w->add_segment("count", SegmentKind::KeyedDelta, 4, "delta");
  REQUIRE_FALSE(second.ok());
  CHECK_THAT(second.error(), Catch::Contains("both a keyed and a keyed_delta segment"));
  // A delta outside the subtask's key groups, or without one.
  CHECK_FALSE(w->add_segment("count", SegmentKind::KeyedDelta, 0, "x").ok());
  CHECK_FALSE(w->add_segment("count", SegmentKind::KeyedDelta, no_key_group, "x").ok());
}

TEST_CASE("snapshot: every truncation and flipped byte of a file with deltas is refused cleanly",
          "[snapshot][delta]") {
  TempDir dir;
  std::vector<Seg> segs = {{"count", SegmentKind::Keyed, 4, state_bytes(3000, 4)},
                           {"count", SegmentKind::KeyedDelta, 5, state_bytes(500, 5)},
                           {"count", SegmentKind::KeyedDelta, 7, ""},
                           {"count", SegmentKind::Subtask, no_key_group, "w"}};
  write_snapshot(dir / "d.snap", test_header(), segs);
  const std::string good = read_file(dir / "d.snap");
  for (std::size_t n = 0; n < good.size(); n += (n < 128 || good.size() - n < 128) ? 1 : 37) {
    { std::ofstream(dir / "t.snap", std::ios::binary | std::ios::trunc) << good.substr(0, n); }
    INFO("truncated to " << n);
    CHECK_THAT(refused(dir / "t.snap"), !Catch::Equals("(accepted)") && !Catch::StartsWith("(does not name"));
  }
  for (std::size_t at = 0; at < good.size(); at += (at < 256 || good.size() - at < 256) ? 1 : 13) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x5A);
    { std::ofstream(dir / "f.snap", std::ios::binary | std::ios::trunc) << bad; }
    INFO("byte " << at << " flipped");
    CHECK_THAT(refused(dir / "f.snap"), !Catch::Equals("(accepted)") && !Catch::StartsWith("(does not name"));
  }
}
