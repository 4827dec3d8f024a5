// A file read in byte ranges by several subtasks (operators/file_ranges.hpp, issue 9): every
// line once across subtasks, restores and rescales; the file's line numbers in bad records; a
// csv header for every range; a file that changes under its readers is an error naming it.

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "harness.hpp"
#include "state/error.hpp"
#include "unit/temp_dir.hpp"

using streamctl::operators::OperatorContext;
using streamctl::operators::Source;
using streamctl::operators::SourceStatus;
using streamctl::testing::Harness;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string file_pipeline(const fs::path& path, const std::string& more = {}) {
  return "name = \"t\"\n[sources.in]\ntype = \"file\"\npath = \"" + path.string() + "\"\n" + more +
         "\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n";
}

// One source subtask, driven as the task loop would.
struct Subtask {
  Subtask(Harness& h, int subtask, int parallelism, const std::vector<std::string>* positions = nullptr) : h_(h) {
    source = h.registry().make_source(h.job().spec, h.node("in"), h.names());
    OperatorContext ctx = h.context("in", subtask, parallelism);
    source->open(ctx);
    if (positions != nullptr) {
      std::vector<std::string_view> views(positions->begin(), positions->end());
      auto restored = source->restore_position(views);
      INFO(restored.error());
      REQUIRE(restored.ok());
    }
  }
  void poll(int polls, std::size_t batch) {
    for (int k = 0; k < polls && !ended; ++k) {
      streamctl::state::Batch out;
      if (source->poll(out, batch) == SourceStatus::End) ended = true;
      h_.append(out, records);
    }
  }
  void drain(std::size_t batch = 7) {
    for (int k = 0; k < 1000000 && !ended; ++k) poll(1, batch);
    REQUIRE(ended);
  }
  std::string position() const {
    std::string out;
    source->snapshot_position(out);
    return out;
  }
  Harness& h_;
  std::unique_ptr<Source> source;
  std::vector<std::string> records;
  bool ended = false;
};

// Generations of subtasks at the given parallelisms, each restoring the previous one's
// positions and polling a few random batches (the last drains). Every record emitted, sorted.
std::vector<std::string> run_generations(Harness& h, const std::vector<int>& parallelisms, std::mt19937& random,
                                         std::size_t batch, std::vector<std::string>* positions_out = nullptr) {
  std::vector<std::string> all;
  std::vector<std::string> positions;
  for (std::size_t g = 0; g < parallelisms.size(); ++g) {
    const bool last = g + 1 == parallelisms.size();
    std::vector<std::string> next;
    for (int s = 0; s < parallelisms[g]; ++s) {
      Subtask run(h, s, parallelisms[g], g == 0 ? nullptr : &positions);
      if (last)
        run.drain(batch);
      else
        run.poll(static_cast<int>(random() % 8), batch);
      next.push_back(run.position());
      all.insert(all.end(), run.records.begin(), run.records.end());
    }
    positions = std::move(next);
  }
  if (positions_out != nullptr) *positions_out = positions;
  std::sort(all.begin(), all.end());
  return all;
}

} // namespace

TEST_CASE("a file split in ranges is read once across restores at any parallelism", "[file_split]") {
  TempDir dir;
  std::mt19937 random(3);
  std::string text;
  std::vector<std::string> expected;
  for (int k = 0; k < 120; ++k) {
    // Lines shorter and longer than a range; CRLF and blank lines.
    std::string record = R"({"i":)" + std::to_string(k) + R"(,"s":")" + std::string(random() % 40, 'z') + "\"}";
    text += record + (k % 9 == 4 ? "\r\n\n" : "\n");
    expected.push_back(record);
  }
  text += R"({"i":"last"})"; // no newline at the end
  expected.push_back(R"({"i":"last"})");
  std::sort(expected.begin(), expected.end());
  write_file(dir.path / "one.jsonl", text);
  for (const char* bytes : {"1", "13", "64", "\"1KiB\""}) {
    Harness h(file_pipeline(dir.path / "one.jsonl", std::string("range_bytes = ") + bytes));
    for (auto parallelisms : std::vector<std::vector<int>>{{2}, {3}, {2, 3}, {3, 1}, {4, 2, 5}, {2, 2, 2}, {5, 3}}) {
      for (int trial = 0; trial < 3; ++trial) {
        INFO("range_bytes " << bytes << ", parallelisms " << parallelisms.front() << "->" << parallelisms.back()
                            << " trial " << trial);
        REQUIRE(run_generations(h, parallelisms, random, 1 + trial * 3) == expected);
        CHECK(h.errors.errors.empty());
      }
    }
  }
}

TEST_CASE("every range of a csv file decodes with the file's header", "[file_split]") {
  TempDir dir;
  std::string text = "name,n\n";
  std::vector<std::string> expected;
  for (int k = 0; k < 50; ++k) {
    text += "x,"  + std::to_string(k) + "\n";
    expected.push_back(R"({"name":"x","n":)" + std::to_string(k) + "}");
  }
  std::sort(expected.begin(), expected.end());
  write_file(dir.path / "a.csv", text);
  Harness h(file_pipeline(dir.path / "a.csv", "format = \"csv\"\ntypes = {n = \"int\"}\nrange_bytes = 11"));
  std::mt19937 random(5);
  for (auto parallelisms : std::vector<std::vector<int>>{{3}, {2, 4}, {4, 1}}) {
    h.errors.errors.clear();
    REQUIRE(run_generations(h, parallelisms, random, 4) == expected);
    CHECK(h.errors.errors.empty());
  }
}

TEST_CASE("bad records of a range carry the file's line numbers", "[file_split]") {
  TempDir dir;
  std::string text;
  for (int k = 1; k <= 200; ++k) text += k % 45 == 0 ? "not json " + std::to_string(k) + "\n" : R"({"k":1})" "\n";
  write_file(dir.path / "bad.jsonl", text);
  Harness h(file_pipeline(dir.path / "bad.jsonl", "range_bytes = 100"));
  std::mt19937 random(1);
  CHECK(run_generations(h, {3, 2}, random, 5).size() == 196);
  std::vector<std::pair<std::uint64_t, std::string>> got;
  for (const auto& e : h.errors.errors) got.emplace_back(e.line, e.raw);
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<std::pair<std::uint64_t, std::string>>{
                   {45, "not json 45"}, {90, "not json 90"}, {135, "not json 135"}, {180, "not json 180"}});
}

TEST_CASE("a split file that grew is read on: old ranges to their end, new ranges whole", "[file_split]") {
  TempDir dir;
  std::string first;
  for (int k = 0; k < 30; ++k) first += R"({"a":)" + std::to_string(k) + "}\n";
  write_file(dir.path / "g.jsonl", first);
  Harness h(file_pipeline(dir.path / "g.jsonl", "range_bytes = 40"));
  std::mt19937 random(8);
  std::vector<std::string> positions;
  auto before = run_generations(h, {2, 3}, random, 3, &positions);
  CHECK(before.size() == 30);
  std::ofstream(dir.path / "g.jsonl", std::ios::app) << R"({"b":1})" "\n" << R"({"b":2})" "\n";
  std::vector<std::string> after;
  for (int s = 0; s < 2; ++s) {
    Subtask run(h, s, 2, &positions);
    run.drain();
    after.insert(after.end(), run.records.begin(), run.records.end());
  }
  std::sort(after.begin(), after.end());
  CHECK(after == std::vector<std::string>{R"({"b":1})", R"({"b":2})"});
}

TEST_CASE("a split file replaced or shrunk while read is an error naming it", "[file_split]") {
  TempDir dir;
  std::string text;
  for (int k = 0; k < 100; ++k) text += R"({"c":)" + std::to_string(k) + "}\n";
  const fs::path path = dir.path / "c.jsonl";
  for (bool replace : {true, false}) {
    write_file(path, text);
    Harness h(file_pipeline(path, "range_bytes = 50"));
    Subtask run(h, 0, 2);
    run.poll(1, 2);
    REQUIRE(run.records.size() == 2);
    if (replace) {
      write_file(dir.path / "new", text);
      fs::rename(dir.path / "new", path); // another inode at the name
    } else {
      fs::resize_file(path, 300);
    }
    try {
      run.drain();
      FAIL("no error");
    } catch (const streamctl::Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("c.jsonl"));
      CHECK_THAT(e.what(), Catch::Contains(replace ? "it is another file now" : "shrank while being read"));
    }
  }
}
