#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "operators/record_error_policy.hpp"
#include "state/error.hpp"

using namespace streamctl;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "record-error-policy-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

pipeline::NodeSpec dead_lettering(const fs::path& file) {
  pipeline::NodeSpec node;
  node.name = "in";
  node.role = pipeline::NodeRole::Source;
  node.on_error = pipeline::OnError::DeadLetter;
  node.dead_letter = file;
  return node;
}

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

// Finding 7 of issue 7: the dead letter's `input` held the raw bytes of a line that was not
// UTF-8, so the dead-letter file was not JSON. Now `input` holds U+FFFD for such bytes and
// `input_base64` the exact bytes.
TEST_CASE("dead letters are JSON for any input bytes, and keep the exact bytes", "[operators][utf8]") {
  TempDir dir;
  auto file = dir.path / "dead.jsonl";
  {
    operators::RecordErrorPolicy policy(dead_lettering(file), nullptr);
    policy.bad_record("not json \xC3\xA9", 3, "why");
    policy.bad_record("bin\xFF", 4, "invalid UTF-8 (byte 0xFF) at column 4");
    policy.bad_record(std::string("nul\0", 4), 5, "x");
  }
  CHECK(read(file) == "{\"node\":\"in\",\"line\":3,\"input\":\"not json \xC3\xA9\",\"error\":\"why\"}\n"
                      "{\"node\":\"in\",\"line\":4,\"input\":\"bin\xEF\xBF\xBD\",\"input_base64\":\"Ymlu/w==\","
                      "\"error\":\"invalid UTF-8 (byte 0xFF) at column 4\"}\n"
                      "{\"node\":\"in\",\"line\":5,\"input\":\"nul\\u0000\",\"error\":\"x\"}\n");
}

// Finding 9 of issue 7: a dead_letter path in a missing directory passed validate, then every
// worker start failed to open it and the job restarted for 31 s. The directory is created now,
// as file sinks create theirs; a path that can never work is refused by validate.
TEST_CASE("the dead-letter file's directory is created; an impossible path is a usage error", "[operators]") {
  TempDir dir;
  auto file = dir.path / "new" / "sub" / "dead.jsonl";
  pipeline::PipelineSpec spec;
  spec.file = "p.toml";
  CHECK_NOTHROW(operators::check_dead_letter_path(spec, dead_lettering(file)));
  CHECK_FALSE(fs::exists(dir.path / "new")); // validate creates nothing
  {
    operators::RecordErrorPolicy policy(dead_lettering(file), nullptr);
    policy.bad_record("x", 1, "y");
  }
  CHECK(fs::is_regular_file(file));

  std::ofstream(dir.path / "a-file") << "x";
  auto impossible = dead_lettering(dir.path / "a-file" / "dead.jsonl");
  try {
    operators::check_dead_letter_path(spec, impossible);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Usage);
    CHECK_THAT(e.what(), Catch::Contains("'" + (dir.path / "a-file").string() + "' is not a directory"));
  }
  CHECK_THROWS_AS(operators::RecordErrorPolicy(impossible, nullptr), Error);
  auto a_directory = dead_lettering(dir.path / "new");
  CHECK_THROWS_WITH(operators::check_dead_letter_path(spec, a_directory), Catch::Contains("is a directory"));
}
