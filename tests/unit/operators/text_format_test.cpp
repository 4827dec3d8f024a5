// Finding 7 of issue 7: csv and lines sources took any bytes, so a line that is not UTF-8 was
// written into JSON output as it was (not JSON). Every text format now has the same rule: a
// line that is not UTF-8 is a bad record.
#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <string>

#include "operators/registry.hpp"
#include "operators/text_format.hpp"
#include "pipeline/runtime/job_loader.hpp"
#include "state/json_writer.hpp"

using namespace streamctl;

namespace {

struct Decoded {
  std::vector<std::string> records; // as JSON
  std::vector<std::string> errors;  // by line, "" for a good one
};

Decoded decode_lines(const std::string& format_keys, const std::vector<std::string>& lines) {
  operators::Registry registry;
  operators::register_builtin_types(registry);
  std::string toml = "name = \"t\"\n[sources.in]\ntype = \"stdin\"\n" + format_keys +
                     "\n[sinks.out]\ntype = \"stdout\"\ninputs = [\"in\"]\n";
  auto job = runtime::load_job_text(toml, "t.toml", std::filesystem::current_path(), {}, registry);
  state::FieldNames names;
  operators::LineDecoder decoder(job.spec, *job.spec.find("in"), names);
  Decoded out;
  state::Batch batch;
  for (const auto& line : lines) {
    auto owned = std::make_shared<std::string>(line);
    batch.retain(owned);
    auto r = decoder.decode(*owned, batch);
    out.errors.push_back(r ? "" : r.error());
  }
  for (const auto& record : batch) {
    std::string json;
    state::append_json(record, names, json);
    out.records.push_back(json);
  }
  return out;
}

} // namespace

TEST_CASE("lines: a line that is not UTF-8 is a bad record; valid UTF-8 is kept", "[operators][utf8]") {
  auto d = decode_lines("format = \"lines\"", {"ok \xF0\x9F\x98\x80", "over\xC0\xAFlong", "sur\xED\xA0\x80",
                                               "cut \xE2\x82", std::string("nul\0in", 6)});
  CHECK(d.records == std::vector<std::string>{"{\"line\":\"ok \xF0\x9F\x98\x80\"}", "{\"line\":\"nul\\u0000in\"}"});
  CHECK(d.errors[0].empty());
  CHECK(d.errors[1] == "invalid UTF-8 (byte 0xC0) at column 5");
  CHECK(d.errors[2] == "invalid UTF-8 (byte 0xED) at column 4");
  CHECK(d.errors[3] == "invalid UTF-8 (byte 0xE2) at column 5");
  CHECK(d.errors[4].empty());
}

TEST_CASE("csv: a row or a header that is not UTF-8 is a bad record", "[operators][utf8]") {
  auto d = decode_lines("format = \"csv\"", {"name,n", "caf\xC3\xA9,1", "bad\xFF,2", "\"\xE2\x82\xAC, euro\",3",
                                             "lone\x80,4"});
  CHECK(d.records == std::vector<std::string>{"{\"name\":\"caf\xC3\xA9\",\"n\":\"1\"}",
                                              "{\"name\":\"\xE2\x82\xAC, euro\",\"n\":\"3\"}"});
  CHECK(d.errors[2] == "invalid UTF-8 (byte 0xFF) at column 4");
  CHECK(d.errors[4] == "invalid UTF-8 (byte 0x80) at column 5");
  auto h = decode_lines("format = \"csv\"", {"na\xFFme,n", "a,1"});
  // Without a header every row is bad; none is misread as the header.
  CHECK(h.errors[0] == "bad header: invalid UTF-8 (byte 0xFF) at column 3");
  CHECK(h.errors[1] == "bad header: invalid UTF-8 (byte 0xFF) at column 3");
  CHECK(h.records.empty());
}
