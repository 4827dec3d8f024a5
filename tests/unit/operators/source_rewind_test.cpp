// Sources rewind (operator.hpp "Rewinding"): a source snapshotted part-way and restored at
// another parallelism emits every record of its input exactly once across both runs.

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <fcntl.h>
#include <unistd.h>

#include "harness.hpp"
#include "unit/temp_dir.hpp"
#include "operators/file_position.hpp"
#include "operators/stdin_source.hpp"

using streamctl::operators::OperatorContext;
using streamctl::operators::Source;
using streamctl::operators::SourceStatus;
using streamctl::testing::Harness;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// One source subtask, driven as the task loop would.
struct SourceRun {
  SourceRun(Harness& h, const std::string& name, int subtask, int parallelism,
            const std::vector<std::string>* positions = nullptr, fs::path checkpoint_dir = {}, int fd = -1,
            std::string run_tag = {})
      : h_(h) {
    source = fd >= 0 ? streamctl::operators::make_stdin_source_reading(fd, h.job().spec, h.node(name), h.names())
                     : h.registry().make_source(h.job().spec, h.node(name), h.names());
    OperatorContext ctx = h.context(name, subtask, parallelism);
    ctx.checkpoint_dir = std::move(checkpoint_dir);
    ctx.run_tag = std::move(run_tag);
    source->open(ctx);
    if (positions != nullptr) {
      std::vector<std::string_view> views(positions->begin(), positions->end());
      auto restored = source->restore_position(views);
      INFO(restored.error());
      REQUIRE(restored.ok());
    }
  }
  // Polls `polls` times with batches of at most `batch` records.
  void poll(int polls, std::size_t batch) {
    for (int k = 0; k < polls && !ended; ++k) {
      streamctl::state::Batch out;
      auto status = source->poll(out, batch);
      h_.append(out, records);
      if (status == SourceStatus::End) ended = true;
    }
  }
  void drain(std::size_t batch = 7) {
    for (int k = 0; k < 100000 && !ended; ++k) poll(1, batch);
    REQUIRE(ended);
  }
  std::string position() const {
    std::string out;
    source->snapshot_position(out);
    return out;
  }
  std::string savepoint_position() const {
    std::string out;
    source->snapshot_self_contained_position(out);
    return out;
  }

  Harness& h_;
  std::unique_ptr<Source> source;
  std::vector<std::string> records;
  bool ended = false;
};

std::string file_pipeline(const std::string& source_keys) {
  return "name = \"t\"\n[sources.in]\ntype = \"file\"\n" + source_keys +
         "\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n";
}

// Runs `steps` generations of subtasks of the given parallelisms over source `name`: each
// generation restores the previous one's positions, polls `polls(subtask)` batches of
// `batch` (the last generation drains), and snapshots. Returns every record emitted.
std::vector<std::string> run_generations(Harness& h, const std::string& name, const std::vector<int>& parallelisms,
                                         std::mt19937& random, std::size_t batch = 3) {
  std::vector<std::string> all;
  std::vector<std::string> positions;
  for (std::size_t g = 0; g < parallelisms.size(); ++g) {
    bool last = g + 1 == parallelisms.size();
    std::vector<std::string> next;
    for (int s = 0; s < parallelisms[g]; ++s) {
      SourceRun run(h, name, s, parallelisms[g], g == 0 ? nullptr : &positions);
      if (last)
        run.drain(batch);
      else
        run.poll(static_cast<int>(random() % 6), batch);
      next.push_back(run.position());
      all.insert(all.end(), run.records.begin(), run.records.end());
    }
    positions = std::move(next);
  }
  std::sort(all.begin(), all.end());
  return all;
}

} // namespace

TEST_CASE("a file glob restored at another parallelism emits every line exactly once", "[rewind]") {
  TempDir dir;
  std::vector<std::string> expected;
  for (char f : std::string("abcde")) {
    std::string text;
    int lines = 5 + (f - 'a') * 7;
    for (int k = 0; k < lines; ++k) {
      std::string record = std::string(R"({"f":")") + f + R"(","i":)" + std::to_string(k) + "}";
      text += record + (k % 4 == 3 ? "\r\n\n" : "\n"); // CRLF and blank lines
      expected.push_back(record);
    }
    write_file(dir.path / (std::string(1, f) + ".jsonl"), text);
  }
  std::sort(expected.begin(), expected.end());
  Harness h(file_pipeline("path = \"" + (dir.path / "*.jsonl").string() + "\""));
  std::mt19937 random(42);
  for (auto parallelisms : std::vector<std::vector<int>>{
           {1, 3}, {3, 2}, {2, 2}, {1, 3, 2}, {3, 1, 4, 2}, {5, 2, 3}, {2, 7}}) {
    for (int trial = 0; trial < 5; ++trial) {
      INFO("parallelisms " << parallelisms.front() << "->...->" << parallelisms.back() << " trial " << trial);
      REQUIRE(run_generations(h, "in", parallelisms, random, 1 + trial) == expected);
    }
  }
}

TEST_CASE("a restored file source goes on mid-file, not from the start of a chunk", "[rewind]") {
  TempDir dir;
  std::string text;
  for (int k = 0; k < 100; ++k) text += R"({"i":)" + std::to_string(k) + "}\n";
  write_file(dir.path / "one.jsonl", text);
  Harness h(file_pipeline("path = \"" + (dir.path / "one.jsonl").string() + "\""));
  SourceRun first(h, "in", 0, 1);
  first.poll(1, 10);
  REQUIRE(first.records.size() == 10);
  std::vector<std::string> positions{first.position()};
  SourceRun second(h, "in", 0, 2, &positions); // file 0 stays with subtask 0
  second.poll(1, 1);
  REQUIRE(second.records == std::vector<std::string>{R"({"i":10})"});
  SourceRun other(h, "in", 1, 2, &positions); // owns no file
  other.drain();
  CHECK(other.records.empty());
}

TEST_CASE("a restored csv reader keeps the header's names and does not emit the header", "[rewind]") {
  TempDir dir;
  std::vector<std::string> expected;
  for (int f = 0; f < 3; ++f) {
    std::string text = "name,n\n";
    for (int k = 0; k < 10 + f; ++k) {
      text += "x" + std::to_string(f) + "," + std::to_string(k) + "\n";
      expected.push_back(R"({"name":"x)" + std::to_string(f) + R"(","n":)" + std::to_string(k) + "}");
    }
    write_file(dir.path / ("part" + std::to_string(f) + ".csv"), text);
  }
  std::sort(expected.begin(), expected.end());
  Harness h(file_pipeline("path = \"" + (dir.path / "*.csv").string() + "\"\nformat = \"csv\"\ntypes = {n = \"int\"}"));
  std::mt19937 random(7);
  for (auto parallelisms : std::vector<std::vector<int>>{{1, 3}, {3, 2}, {1, 2, 1}, {2, 3}}) {
    for (int trial = 0; trial < 4; ++trial) {
      h.errors.errors.clear();
      REQUIRE(run_generations(h, "in", parallelisms, random, 1 + trial) == expected);
      // Every file's header is a header, whichever subtask reads it and from wherever.
      CHECK(h.errors.errors.empty());
    }
  }
}

TEST_CASE("bad-record line numbers go on from the restored position", "[rewind]") {
  TempDir dir;
  std::string text;
  for (int k = 1; k <= 30; ++k) text += (k == 7 || k == 15 || k == 28) ? "not json\n" : R"({"k":)" + std::to_string(k) + "}\n";
  write_file(dir.path / "bad.jsonl", text);
  Harness h(file_pipeline("path = \"" + (dir.path / "bad.jsonl").string() + "\""));
  SourceRun first(h, "in", 0, 1);
  first.poll(2, 5); // lines 1..11 (line 7 is bad)
  REQUIRE(first.records.size() == 10);
  std::vector<std::string> positions{first.position()};
  for (int p : {1, 3}) {
    h.errors.errors.clear();
    std::size_t records = 0;
    for (int s = 0; s < p; ++s) {
      SourceRun next(h, "in", s, p, &positions);
      next.drain(4);
      records += next.records.size();
    }
    CHECK(records == 17);
    REQUIRE(h.errors.errors.size() == 2);
    CHECK(h.errors.errors[0].line == 15);
    CHECK(h.errors.errors[1].line == 28);
  }
}

TEST_CASE("a finished file is skipped at restore unless it has grown", "[rewind]") {
  TempDir dir;
  write_file(dir.path / "a.jsonl", "{\"i\":1}\n{\"i\":2}\n");
  Harness h(file_pipeline("path = \"" + (dir.path / "*.jsonl").string() + "\""));
  SourceRun first(h, "in", 0, 1);
  first.drain();
  REQUIRE(first.records.size() == 2);
  std::vector<std::string> positions{first.position()};
  {
    SourceRun again(h, "in", 0, 1, &positions);
    again.drain();
    CHECK(again.records.empty());
  }
  // Growing input (`run --resume` on a schedule): the new lines, and a new file, once each.
  std::ofstream(dir.path / "a.jsonl", std::ios::app) << "{\"i\":3}\n";
  write_file(dir.path / "b.jsonl", "{\"i\":4}\n");
  SourceRun grown(h, "in", 0, 1, &positions);
  grown.drain();
  CHECK(grown.records == std::vector<std::string>{R"({"i":3})", R"({"i":4})"});
  // Truncated in place (copytruncate: the same inode, shorter than its offset) and written
  // again: another file, read from its start with a warning (issue 7, finding 3).
  write_file(dir.path / "a.jsonl", "{}\n");
  std::vector<std::string> warnings;
  auto source = h.registry().make_source(h.job().spec, h.node("in"), h.names());
  auto ctx = h.context("in", 0, 1);
  ctx.warn = [&](const std::string& message) { warnings.push_back(message); };
  source->open(ctx);
  std::vector<std::string_view> views{positions[0]};
  auto restored = source->restore_position(views);
  INFO(restored.error());
  REQUIRE(restored.ok());
  std::vector<std::string> records;
  for (int k = 0; k < 100; ++k) {
    streamctl::state::Batch out;
    auto status = source->poll(out, 10);
    h.append(out, records);
    if (status == SourceStatus::End) break;
  }
  std::sort(records.begin(), records.end());
  CHECK(records == std::vector<std::string>{R"({"i":4})", "{}"});
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("truncated or rewritten in place"));
}

TEST_CASE("a version 1 file position is trusted when the file is not shorter", "[rewind]") {
  // Positions written before identities were recorded: the file at the name is taken for the
  // one read (with a warning), as before, and one shorter than the offset is refused.
  TempDir dir;
  write_file(dir.path / "a.jsonl", "{\"i\":1}\n{\"i\":2}\n");
  Harness h(file_pipeline("path = \"" + (dir.path / "a.jsonl").string() + "\""));
  std::string v1;
  v1 += '\x01';
  v1 += 'F';
  auto u32 = [&](std::uint32_t v) { for (int k = 0; k < 4; ++k) v1 += static_cast<char>((v >> (8 * k)) & 0xff); };
  auto u64 = [&](std::uint64_t v) { for (int k = 0; k < 8; ++k) v1 += static_cast<char>((v >> (8 * k)) & 0xff); };
  std::string name = (dir.path / "a.jsonl").string();
  u32(1);
  u32(static_cast<std::uint32_t>(name.size()));
  v1 += name;
  u64(8); // after {"i":1}
  u64(1);
  v1 += '\0';
  u32(0);
  std::vector<std::string> positions{v1};
  {
    SourceRun resumed(h, "in", 0, 1, &positions);
    resumed.drain();
    CHECK(resumed.records == std::vector<std::string>{R"({"i":2})"});
    // What it writes now is the current version, with the file's identity.
    CHECK(resumed.position()[0] == streamctl::operators::kFilePositionVersion);
  }
  write_file(dir.path / "a.jsonl", "{}\n");
  auto source = h.registry().make_source(h.job().spec, h.node("in"), h.names());
  auto ctx = h.context("in", 0, 1);
  source->open(ctx);
  std::vector<std::string_view> views{positions[0]};
  auto restored = source->restore_position(views);
  REQUIRE_FALSE(restored.ok());
  CHECK_THAT(restored.error(), Catch::Contains("truncated or replaced"));
}

namespace {
std::string generator_pipeline(const std::string& keys) {
  return "name = \"t\"\n[sources.gen]\ntype = \"generator\"\n" + keys +
         "\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"gen\"]\n";
}
} // namespace

TEST_CASE("a generator restored at any parallelism emits each sequence number once", "[rewind]") {
  Harness h(generator_pipeline("count = 200"));
  std::vector<std::string> expected;
  for (int n = 0; n < 200; ++n) expected.push_back(R"({"seq":)" + std::to_string(n) + R"(,"ts":)" + std::to_string(n) + "}");
  std::sort(expected.begin(), expected.end());
  std::mt19937 random(3);
  for (auto parallelisms : std::vector<std::vector<int>>{
           {1, 3}, {3, 2}, {3, 5, 2}, {7, 3}, {2, 3, 5, 7, 1}, {5, 5}, {1, 1}}) {
    for (int trial = 0; trial < 5; ++trial)
      REQUIRE(run_generations(h, "gen", parallelisms, random, 1 + trial * 3) == expected);
  }
  // WindFlow-style: random parallelisms and progress, always the same multiset.
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int> parallelisms;
    for (int g = 0; g < 2 + static_cast<int>(random() % 4); ++g) parallelisms.push_back(1 + static_cast<int>(random() % 9));
    REQUIRE(run_generations(h, "gen", parallelisms, random, 1 + random() % 10) == expected);
  }
}

TEST_CASE("a restored generator keeps its rate", "[rewind]") {
  Harness h(generator_pipeline("rate = 10.0"));
  SourceRun first(h, "gen", 0, 1);
  first.poll(1, 1000);
  REQUIRE(first.records.size() == 1);
  std::vector<std::string> positions{first.position()};
  SourceRun second(h, "gen", 1, 2, &positions);
  second.poll(3, 1000);
  CHECK(second.records == std::vector<std::string>{R"({"seq":1,"ts":1})"});
}

TEST_CASE("a generator of one nexmark kind restores without gaps", "[rewind]") {
  Harness h(generator_pipeline("profile = \"nexmark\"\nevents = \"person\"\ncount = 500"));
  std::mt19937 random(9);
  auto whole = run_generations(h, "gen", {1}, random, 1000);
  REQUIRE(!whole.empty());
  CHECK(run_generations(h, "gen", {3, 2}, random, 2) == whole);
  CHECK(run_generations(h, "gen", {1, 4, 3}, random, 1) == whole);
}

namespace {
struct Pipe {
  Pipe() { REQUIRE(::pipe(fds) == 0); }
  ~Pipe() {
    close_write();
    if (fds[0] >= 0) ::close(fds[0]);
  }
  void write(const std::string& text) {
    REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  }
  void close_write() {
    if (fds[1] >= 0) ::close(fds[1]);
    fds[1] = -1;
  }
  int fds[2] = {-1, -1};
};

std::string numbered_lines(int from, int to) {
  std::string text;
  for (int k = from; k < to; ++k) text += (k % 11 == 5 ? std::string("oops") : R"({"n":)" + std::to_string(k) + "}") + "\n";
  return text;
}

std::vector<std::string> numbered_records(int from, int to) {
  std::vector<std::string> out;
  for (int k = from; k < to; ++k)
    if (k % 11 != 5) out.push_back(R"({"n":)" + std::to_string(k) + "}");
  return out;
}
} // namespace

TEST_CASE("stdin spools what it reads and a restore replays it, then reads the new stdin", "[rewind]") {
  TempDir checkpoints;
  Harness hs("name = \"t\"\n[sources.in]\ntype = \"stdin\"\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n");
  std::vector<std::string> position;
  std::vector<std::string> first_records;
  {
    Pipe in;
    in.write(numbered_lines(0, 40));
    SourceRun first(hs, "in", 0, 1, nullptr, checkpoints.path, in.fds[0]);
    for (int k = 0; k < 50 && first.records.size() < 12; ++k) first.poll(1, 3);
    REQUIRE(first.records.size() == 12);
    position.push_back(first.position());
    first_records = first.records;
    // The first run goes on reading; what it emits after the snapshot is lost with it.
    in.write(numbered_lines(40, 50));
    first.poll(5, 100);
  }
  auto lines_of_errors = [&] {
    std::vector<std::uint64_t> lines;
    for (const auto& e : hs.errors.errors) lines.push_back(e.line);
    return lines;
  };
  // Restored twice from the same position: the same replay each time.
  for (int attempt = 0; attempt < 2; ++attempt) {
    hs.errors.errors.clear();
    Pipe in;
    in.write(numbered_lines(100, 120));
    in.close_write();
    SourceRun second(hs, "in", 0, 1, &position, checkpoints.path, in.fds[0]);
    second.drain(4);
    std::vector<std::string> all = first_records;
    all.insert(all.end(), second.records.begin(), second.records.end());
    auto expected = numbered_records(0, 50);
    auto more = numbered_records(100, 120);
    expected.insert(expected.end(), more.begin(), more.end());
    CHECK(all == expected);
    // Line numbers go on across the spool and into the new stdin (lines 1-based).
    CHECK(lines_of_errors() == std::vector<std::uint64_t>{17, 28, 39, 50, 55, 66});
  }
}

// Issue 7, finding 1: a restart before the first checkpoint read the stdin pipe from where it
// then stood, losing what the dead attempt had taken out of it (0 of 2,000,000 records).
TEST_CASE("a fresh stdin source replays what earlier attempts of its run spooled", "[rewind]") {
  TempDir checkpoints;
  Harness hs("name = \"t\"\n[sources.in]\ntype = \"stdin\"\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n");
  Pipe in;
  in.write(numbered_lines(0, 40));
  {
    // The first attempt takes everything the pipe holds, emits a little, and dies.
    SourceRun first(hs, "in", 0, 1, nullptr, checkpoints.path, in.fds[0], "job-1");
    for (int k = 0; k < 50 && first.records.size() < 5; ++k) first.poll(1, 5);
    REQUIRE(first.records.size() == 5);
  }
  {
    // So does the second, having read what came next.
    in.write(numbered_lines(40, 60));
    SourceRun second(hs, "in", 0, 1, nullptr, checkpoints.path, in.fds[0], "job-1");
    for (int k = 0; k < 50 && second.records.size() < 45; ++k) second.poll(1, 5);
    REQUIRE(second.records.size() == 45);
  }
  in.write(numbered_lines(60, 70));
  in.close_write();
  SourceRun third(hs, "in", 0, 1, nullptr, checkpoints.path, in.fds[0], "job-1");
  third.drain(6);
  CHECK(third.records == numbered_records(0, 70));
  // Another run starts afresh: it replays nothing of job-1's.
  Pipe other;
  other.write(numbered_lines(100, 103));
  other.close_write();
  SourceRun fresh(hs, "in", 0, 1, nullptr, checkpoints.path, other.fds[0], "job-2");
  fresh.drain();
  CHECK(fresh.records == numbered_records(100, 103));
}

// Restored twice from the same checkpoint in one run: the second restore replays what the
// first restored attempt took out of the pipe (it used to copy the checkpoint's spool tail
// anew and lose those bytes).
TEST_CASE("stdin restored again from the same position replays what the last attempt spooled", "[rewind]") {
  TempDir checkpoints;
  Harness hs("name = \"t\"\n[sources.in]\ntype = \"stdin\"\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n");
  for (std::string restored_run : {"job-1", "job-2"}) {
    INFO("restored by run " << restored_run);
    Pipe in;
    in.write(numbered_lines(0, 30));
    std::vector<std::string> position;
    std::vector<std::string> before;
    {
      SourceRun first(hs, "in", 0, 1, nullptr, checkpoints.path, in.fds[0], "job-1");
      for (int k = 0; k < 50 && first.records.size() < 10; ++k) first.poll(1, 5);
      REQUIRE(first.records.size() == 10);
      position.push_back(first.position());
      std::vector<std::string> files = first.source->referenced_files();
      REQUIRE(files.size() == 1);
      CHECK(files[0] == "stdin-in.job-1.spool");
      before = first.records;
      first.poll(3, 5); // emitted after the checkpoint: lost with the attempt
    }
    {
      in.write(numbered_lines(30, 50));
      SourceRun second(hs, "in", 0, 1, &position, checkpoints.path, in.fds[0], restored_run);
      for (int k = 0; k < 50 && second.records.size() < 30; ++k) second.poll(1, 5);
      REQUIRE(second.records.size() == 30);
    }
    in.write(numbered_lines(50, 60));
    in.close_write();
    SourceRun third(hs, "in", 0, 1, &position, checkpoints.path, in.fds[0], restored_run);
    third.drain(4);
    std::vector<std::string> all = before;
    all.insert(all.end(), third.records.begin(), third.records.end());
    CHECK(all == numbered_records(0, 60));
    fs::remove_all(checkpoints.path);
  }
}

TEST_CASE("a stdin position whose spool file was deleted is refused, naming the file", "[rewind]") {
  TempDir checkpoints;
  Harness hs("name = \"t\"\n[sources.in]\ntype = \"stdin\"\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n");
  Pipe in;
  in.write(numbered_lines(0, 10));
  in.close_write();
  std::string position;
  {
    SourceRun first(hs, "in", 0, 1, nullptr, checkpoints.path, in.fds[0], "job-1");
    first.poll(1, 3);
    position = first.position();
  }
  fs::remove(checkpoints.path / "stdin-in.job-1.spool");
  for (std::string run : {"job-1", "job-2"}) {
    auto source = streamctl::operators::make_stdin_source_reading(in.fds[0], hs.job().spec, hs.node("in"), hs.names());
    OperatorContext ctx = hs.context("in", 0, 1);
    ctx.checkpoint_dir = checkpoints.path;
    ctx.run_tag = run;
    source->open(ctx);
    std::vector<std::string_view> views{position};
    auto restored = source->restore_position(views);
    REQUIRE_FALSE(restored.ok());
    CHECK_THAT(restored.error(), Catch::Contains("stdin-in.job-1.spool"));
  }
}

// Issue 12: a savepoint's position carries the spool bytes it still needs, so it restores in
// another run with the spool file gone (the savepoint moved to another machine), and names no
// spool file for the janitor to keep.
TEST_CASE("a savepoint's stdin position replays without the spool file", "[rewind]") {
  TempDir checkpoints, elsewhere;
  Harness hs("name = \"t\"\n[sources.in]\ntype = \"stdin\"\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n");
  Pipe in;
  in.write(numbered_lines(0, 40));
  std::vector<std::string> position;
  std::vector<std::string> before;
  {
    SourceRun first(hs, "in", 0, 1, nullptr, checkpoints.path, in.fds[0], "job-1");
    for (int k = 0; k < 50 && first.records.size() < 12; ++k) first.poll(1, 3);
    REQUIRE(first.records.size() == 12);
    position.push_back(first.savepoint_position());
    CHECK(first.source->referenced_files().empty());
    CHECK(first.position().size() < position[0].size()); // a checkpoint's refers to the spool
    CHECK(first.source->referenced_files() == std::vector<std::string>{"stdin-in.job-1.spool"});
    before = first.records;
    first.poll(5, 100); // emitted after the savepoint: lost with the run
  }
  fs::remove_all(checkpoints.path);
  for (std::string run : {"job-2", "job-3"}) { // restored twice: the same replay
    Pipe next;
    next.write(numbered_lines(100, 110));
    next.close_write();
    SourceRun second(hs, "in", 0, 1, &position, elsewhere.path, next.fds[0], run);
    second.drain(4);
    std::vector<std::string> all = before;
    all.insert(all.end(), second.records.begin(), second.records.end());
    auto expected = numbered_records(0, 40);
    auto more = numbered_records(100, 110);
    expected.insert(expected.end(), more.begin(), more.end());
    CHECK(all == expected);
  }
}

// A savepoint holds the unread spool bytes in memory: the spool must not run far ahead of the
// reader however much the input has ready (here a 40 MB file, read one record per poll).
TEST_CASE("the spool runs at most about 16 MiB ahead of what the source has read", "[rewind]") {
  TempDir checkpoints;
  Harness hs("name = \"t\"\n[sources.in]\ntype = \"stdin\"\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n");
  std::string line = R"({"n":1,"pad":")" + std::string(80, 'x') + "\"}\n";
  std::string text;
  while (text.size() < (40u << 20)) text += line;
  write_file(checkpoints.path / "input.jsonl", text);
  int fd = ::open((checkpoints.path / "input.jsonl").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  {
    SourceRun run(hs, "in", 0, 1, nullptr, checkpoints.path / "spool", fd, "job-1");
    run.poll(40, 1);
    REQUIRE_FALSE(run.records.empty());
    auto spooled = fs::file_size(checkpoints.path / "spool" / "stdin-in.job-1.spool");
    CHECK(spooled >= (16u << 20));
    CHECK(spooled <= (22u << 20)); // 16 MiB ahead, one pump (4 MiB), what the reader buffers
    CHECK(run.savepoint_position().size() <= (22u << 20));
  }
  ::close(fd);
}

namespace {
// Restores `position` (truncated at every byte, and with random bytes flipped) into fresh
// subtasks: a truncation is always a Failure, a flip a Failure or a consistent restore, never
// a crash or an exception.
void fuzz_position(Harness& h, const std::string& name, const std::string& position, int parallelism,
                   const fs::path& checkpoint_dir = {}, int fd = -1) {
  auto restore = [&](const std::string& bytes) {
    std::vector<std::string> positions(static_cast<std::size_t>(parallelism), bytes);
    auto source = fd >= 0 ? streamctl::operators::make_stdin_source_reading(fd, h.job().spec, h.node(name), h.names())
                          : h.registry().make_source(h.job().spec, h.node(name), h.names());
    OperatorContext ctx = h.context(name, 0, parallelism);
    ctx.checkpoint_dir = checkpoint_dir;
    source->open(ctx);
    std::vector<std::string_view> views(positions.begin(), positions.end());
    return source->restore_position(views);
  };
  for (std::size_t cut = 1; cut < position.size(); ++cut) {
    INFO("truncated to " << cut << " bytes");
    auto restored = restore(position.substr(0, cut));
    CHECK_FALSE(restored.ok());
  }
  std::mt19937 random(11);
  for (int k = 0; k < 300; ++k) {
    std::string bytes = position;
    bytes[random() % bytes.size()] ^= static_cast<char>(1 + random() % 255);
    CHECK_NOTHROW(restore(bytes));
  }
  auto wrong_kind = position;
  wrong_kind[1] = 'Z';
  CHECK_FALSE(restore(wrong_kind).ok());
  auto wrong_version = position;
  wrong_version[0] = 9;
  CHECK_THAT(restore(wrong_version).error(), Catch::Contains("unknown version 9"));
  CHECK_FALSE(restore(position + "x").ok());
}
} // namespace

TEST_CASE("corrupt source positions are refused cleanly", "[rewind]") {
  TempDir dir;
  write_file(dir.path / "a.csv", "x,y\n1,2\n3,4\n");
  write_file(dir.path / "b.csv", "x,y\n5,6\n");
  Harness files(file_pipeline("path = \"" + (dir.path / "*.csv").string() + "\"\nformat = \"csv\""));
  {
    SourceRun run(files, "in", 0, 1);
    run.poll(1, 3); // a.csv done, b.csv's header read
    REQUIRE(run.records.size() == 3);
    fuzz_position(files, "in", run.position(), 1);
  }
  Harness gen(generator_pipeline("count = 100"));
  {
    std::vector<std::string> positions;
    for (int s = 0; s < 3; ++s) {
      SourceRun run(gen, "gen", s, 3);
      run.poll(2, 4);
      positions.push_back(run.position());
    }
    SourceRun restored(gen, "gen", 1, 2, &positions);
    restored.poll(1, 2);
    // A position with a layer from the restore, restored by one subtask of two.
    std::string layered = restored.position();
    auto restore_pair = [&](const std::string& bytes) {
      auto source = gen.registry().make_source(gen.job().spec, gen.node("gen"), gen.names());
      OperatorContext ctx = gen.context("gen", 0, 1);
      source->open(ctx);
      SourceRun other(gen, "gen", 0, 2, &positions);
      std::string zero = other.position();
      std::vector<std::string_view> views{zero, bytes};
      return source->restore_position(views);
    };
    REQUIRE(restore_pair(layered).ok());
    for (std::size_t cut = 0; cut < layered.size(); ++cut) CHECK_FALSE(restore_pair(layered.substr(0, cut)).ok());
    fuzz_position(gen, "gen", positions[0], 1);
  }
  TempDir checkpoints;
  Harness in("name = \"t\"\n[sources.in]\ntype = \"stdin\"\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n");
  {
    Pipe pipe;
    pipe.write(numbered_lines(0, 10));
    pipe.close_write();
    SourceRun run(in, "in", 0, 1, nullptr, checkpoints.path, pipe.fds[0]);
    run.poll(2, 2);
    fuzz_position(in, "in", run.position(), 1, checkpoints.path, pipe.fds[0]);
    // Without a checkpoint directory stdin is not spooled: its position cannot restore.
    SourceRun plain(in, "in", 0, 1, nullptr, {}, pipe.fds[0]);
    std::vector<std::string> positions{plain.position()};
    auto source = streamctl::operators::make_stdin_source_reading(pipe.fds[0], in.job().spec, in.node("in"), in.names());
    OperatorContext ctx = in.context("in", 0, 1);
    ctx.checkpoint_dir = checkpoints.path;
    source->open(ctx);
    std::vector<std::string_view> views{positions[0]};
    CHECK_THAT(source->restore_position(views).error(), Catch::Contains("cannot be replayed"));
  }
}
