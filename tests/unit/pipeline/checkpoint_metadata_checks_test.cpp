// What read_metadata refuses (issue 7, finding 2): a _metadata that leaves out a task, lists
// one twice, wraps a subtask number, names an unknown kind, disagrees with itself, or was
// damaged after it was written. Before, a metadata listing fewer tasks than a chain's
// parallelism was restored: a source subtask without its entry read its input again from
// offset 0 (every record counted twice), a keyed one lost its key groups. Each is refused
// naming the file and what is wrong, for version 2 (signed: checksum line) and version 1.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "pipeline/runtime/checkpoint_metadata.hpp"
#include "pipeline/runtime/metadata_checksum.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl::runtime;
using streamctl::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One [[tasks]] entry, each field as TOML source text (so that any value can be written).
struct Entry {
  std::string file;
  std::string nodes;
  std::string subtask;
  std::string parallelism;
  std::string bytes = "100";
};

// The plan: a source chain ["src"] at parallelism 2 and a keyed chain ["counts", "out"] at 3.
std::vector<Entry> plan_entries() {
  return {
      {"'chain-0-subtask-0.snap'", "['src']", "0", "2"},
      {"'chain-0-subtask-1.snap'", "['src']", "1", "2"},
      {"'chain-1-subtask-0.snap'", "['counts', 'out']", "0", "3"},
      {"'chain-1-subtask-1.snap'", "['counts', 'out']", "1", "3"},
      {"'chain-1-subtask-2.snap'", "['counts', 'out']", "2", "3"},
  };
}

struct Header {
  std::string version = "2";
  std::string kind = "'savepoint'";
  std::string chains = "2";
  std::string max_parallelism = "128";
};

// Version 2 metadata text (signed unless told not to) of `entries`.
std::string text_of(const std::vector<Entry>& entries, const Header& h = {}, bool sign = true) {
  std::string t = "# streamctl checkpoint metadata\n";
  if (!h.chains.empty()) t += "chains = " + h.chains + "\n";
  t += "checkpoint_id = 4\ncreated_at = 1796000000000\nformat = 'streamctl-checkpoint'\n"
       "job_id = 'p-1'\njob_name = 'p'\nkind = " + h.kind + "\nmax_parallelism = " + h.max_parallelism +
       "\nversion = " + h.version + "\n";
  for (const auto& e : entries)
    t += "\n[[tasks]]\nbytes = " + e.bytes + "\nfile = " + e.file + "\nnodes = " + e.nodes +
         "\nparallelism = " + e.parallelism + "\nsubtask = " + e.subtask + "\n";
  return sign ? append_checksum_line(t) : t;
}

// read_metadata of `text` fails, and its message names the file and says `what`.
void check_refused(const std::string& text, const std::string& what) {
  TempDir tmp;
  write_text(tmp.path / kMetadataFile, text);
  auto r = read_metadata(tmp.path);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains((tmp.path / kMetadataFile).string()));
  CHECK_THAT(r.error(), Catch::Contains(what));
}

} // namespace

TEST_CASE("the plan fixture is accepted, signed as version 2 and unsigned as version 1", "[metadata_checks]") {
  // Guards the fixture that every rejection below edits.
  TempDir tmp;
  write_text(tmp.path / kMetadataFile, text_of(plan_entries()));
  auto r = read_metadata(tmp.path);
  REQUIRE(r);
  CHECK(r->version == 2);
  CHECK(r->chains == 2);
  CHECK(r->tasks.size() == 5);

  Header v1;
  v1.version = "1";
  v1.chains = "";
  write_text(tmp.path / kMetadataFile, text_of(plan_entries(), v1, false));
  r = read_metadata(tmp.path);
  REQUIRE(r);
  CHECK(r->version == 1);
  // A version-1 file may carry the line too; then it is checked.
  write_text(tmp.path / kMetadataFile, text_of(plan_entries(), v1, true));
  CHECK(read_metadata(tmp.path));
}

TEST_CASE("a missing task entry of a source chain or of a keyed chain is refused", "[metadata_checks]") {
  for (bool signed_v2 : {true, false}) {
    CAPTURE(signed_v2);
    Header h;
    if (!signed_v2) {
      h.version = "1";
      h.chains = "";
    }
    auto source = plan_entries();
    source.erase(source.begin() + 1);
    check_refused(text_of(source, h, signed_v2), "chain 'src' has parallelism 2 but no entry for subtask 1");
    auto keyed = plan_entries();
    keyed.erase(keyed.begin() + 2);
    check_refused(text_of(keyed, h, signed_v2),
                  "chain 'counts -> out' has parallelism 3 but no entry for subtask 0: the snapshot is incomplete");
  }
}

TEST_CASE("a chain left out whole is refused by the chain count", "[metadata_checks]") {
  auto entries = plan_entries();
  entries.resize(2);
  check_refused(text_of(entries), "the tasks form 1 chain(s), but chains = 2");
  Header missing;
  missing.chains = "";
  check_refused(text_of(plan_entries(), missing), "missing or bad chains");
}

TEST_CASE("a duplicated task entry is refused", "[metadata_checks]") {
  auto entries = plan_entries();
  entries.push_back(entries[3]);
  check_refused(text_of(entries), "task file 'chain-1-subtask-1.snap' is listed twice");
  // The same subtask under another file name.
  entries = plan_entries();
  entries[4].subtask = "1";
  check_refused(text_of(entries), "chain 'counts -> out' lists subtask 1 twice ('chain-1-subtask-1.snap' and "
                                  "'chain-1-subtask-2.snap')");
}

TEST_CASE("a subtask that does not fit 32 bits is refused, not wrapped to 0", "[metadata_checks]") {
  auto entries = plan_entries();
  entries[2].subtask = "4294967296";
  check_refused(text_of(entries), "subtask 4294967296 is not within 0..2");
  entries[2].subtask = "-1";
  check_refused(text_of(entries), "subtask -1 is not within 0..2");
  entries[2].subtask = "1.0";
  check_refused(text_of(entries), "subtask (missing or not an integer)");
  entries[2].subtask = "'0'";
  check_refused(text_of(entries), "subtask (missing or not an integer)");
  entries[2].parallelism = "4294967299";
  entries[2].subtask = "0";
  check_refused(text_of(entries), "parallelism 4294967299 is not within 1..max_parallelism (128)");
}

TEST_CASE("a kind other than checkpoint or savepoint is refused", "[metadata_checks]") {
  Header h;
  h.kind = "'bogus'";
  check_refused(text_of(plan_entries(), h), "kind is 'bogus', not 'checkpoint' or 'savepoint'");
  h.kind = "3";
  check_refused(text_of(plan_entries(), h), "kind is missing or not a string");
}

TEST_CASE("a parallelism above max_parallelism or differing within a chain is refused", "[metadata_checks]") {
  Header h;
  h.max_parallelism = "2";
  check_refused(text_of(plan_entries(), h), "parallelism 3 is not within 1..max_parallelism (2)");
  auto entries = plan_entries();
  entries[3].parallelism = "4";
  check_refused(text_of(entries), "chain 'counts -> out': its entries disagree on parallelism (3 for "
                                  "'chain-1-subtask-0.snap', 4 for 'chain-1-subtask-1.snap')");
}

TEST_CASE("a node in two chains or twice in one is refused", "[metadata_checks]") {
  auto entries = plan_entries();
  for (auto& e : entries)
    if (e.nodes == "['src']") e.nodes = "['src', 'out']";
  check_refused(text_of(entries), "node 'out' is in two chains");
  entries = plan_entries();
  for (auto& e : entries)
    if (e.nodes == "['src']") e.nodes = "['src', 'src']";
  check_refused(text_of(entries), "node 'src' appears twice in chain 'src -> src'");
  entries = plan_entries();
  entries[0].nodes = "['src', 7]";
  check_refused(text_of(entries), "a node name that is not a non-empty string");
}

TEST_CASE("bytes that are missing, negative or not an integer are refused", "[metadata_checks]") {
  for (std::string bad : {"-1", "1.5", "'100'"}) {
    CAPTURE(bad);
    auto entries = plan_entries();
    entries[1].bytes = bad;
    check_refused(text_of(entries), "task 'chain-0-subtask-1.snap': missing or bad bytes");
  }
}

TEST_CASE("task file names that are not plain names in the directory are refused", "[metadata_checks]") {
  for (std::string bad : {"'../x'", "'a/b'", "'/etc/passwd'", "'..'", "'.'", "''", "\"a\\u0000b\"", "7"}) {
    CAPTURE(bad);
    auto entries = plan_entries();
    entries[0].file = bad;
    check_refused(text_of(entries), "bad task file name");
  }
}

TEST_CASE("a version-2 file without its checksum line is refused", "[metadata_checks]") {
  check_refused(text_of(plan_entries(), Header{}, false), "no checksum line at its end");
}

TEST_CASE("a malformed checksum line is refused", "[metadata_checks]") {
  std::string good = text_of(plan_entries());
  std::string upper = good;
  // The hex digits in upper case: one flipped bit (0x20) in a letter must not pass.
  auto quote = upper.rfind("checksum = \"") + 12;
  bool changed = false;
  for (std::size_t k = quote; k < quote + 16; ++k)
    if (upper[k] >= 'a' && upper[k] <= 'f') {
      upper[k] = static_cast<char>(upper[k] - 0x20);
      changed = true;
      break;
    }
  if (changed) check_refused(upper, "malformed checksum line");
  check_refused(good.substr(0, good.size() - 1), "malformed checksum line"); // no final newline
  check_refused(good.substr(0, good.size() - 2) + "\"\"\n", "malformed checksum line");
}

TEST_CASE("every one-bit flip and every truncation of a written _metadata is refused", "[metadata_checks]") {
  TempDir tmp;
  CheckpointMetadata m;
  m.kind = "checkpoint";
  m.job_name = "p";
  m.job_id = "p-1";
  m.checkpoint_id = 12;
  m.created_at_ms = 1796000000000;
  m.max_parallelism = 128;
  for (int s = 0; s < 2; ++s) m.tasks.push_back(CheckpointTaskFile{task_snapshot_file(0, s), {"src"}, s, 2, 1000});
  for (int s = 0; s < 3; ++s)
    m.tasks.push_back(CheckpointTaskFile{task_snapshot_file(1, s), {"counts", "out"}, s, 3, 2000});
  REQUIRE(write_metadata(tmp.path, m));
  const std::string good = read_text(tmp.path / kMetadataFile);
  REQUIRE(read_metadata(tmp.path));
  std::size_t accepted = 0;
  std::string first_accepted;
  for (std::size_t k = 0; k < good.size(); ++k)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[k] = static_cast<char>(bad[k] ^ (1 << bit));
      write_text(tmp.path / kMetadataFile, bad);
      if (read_metadata(tmp.path) && accepted++ == 0)
        first_accepted = "byte " + std::to_string(k) + " bit " + std::to_string(bit);
    }
  CHECK(accepted == 0);
  CHECK(first_accepted.empty());
  for (std::size_t n = 0; n < good.size(); ++n) {
    write_text(tmp.path / kMetadataFile, good.substr(0, n));
    if (read_metadata(tmp.path)) FAIL("accepted when cut to " << n << " of " << good.size() << " bytes");
  }
}

TEST_CASE("write_metadata writes version 2 with the chain count and a checksum line last", "[metadata_checks]") {
  TempDir tmp;
  CheckpointMetadata m;
  m.job_name = "p";
  m.job_id = "p-1";
  m.tasks.push_back(CheckpointTaskFile{task_snapshot_file(0, 0), {"a"}, 0, 1, 1});
  m.tasks.push_back(CheckpointTaskFile{task_snapshot_file(1, 0), {"b"}, 0, 1, 1});
  REQUIRE(write_metadata(tmp.path, m));
  std::string text = read_text(tmp.path / kMetadataFile);
  CHECK_THAT(text, Catch::Contains("version = 2\n"));
  CHECK_THAT(text, Catch::Contains("chains = 2\n"));
  auto last = text.rfind('\n', text.size() - 2);
  REQUIRE(last != std::string::npos);
  CHECK_THAT(text.substr(last + 1), Catch::Matches("checksum = \"[0-9a-f]{16}\"\n"));
  auto r = read_metadata(tmp.path);
  REQUIRE(r);
  CHECK(r->chains == 2);
}
