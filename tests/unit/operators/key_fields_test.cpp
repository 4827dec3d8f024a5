#include <catch2/catch.hpp>

#include <span>
#include <string>
#include <vector>

#include "harness.hpp"
#include "operators/key_fields.hpp"
#include "operators/partition_key.hpp"

using namespace streamctl;
using streamctl::testing::Harness;
using streamctl::testing::single_operator_pipeline;

namespace {

state::Batch parse(Harness& h, const std::vector<std::string>& lines) {
  state::Batch batch;
  state::RecordBuilder b;
  for (const auto& line : lines) {
    b.reset();
    REQUIRE(state::parse_json_record(batch.copy_string(line), h.names(), batch, b).ok());
    b.finish(batch);
  }
  return batch;
}

// 700 records (several chunks of the expression program) with key expressions that fail on
// some of them, in the middle of the batch and on its last record.
std::vector<std::string> mixed_records() {
  std::vector<std::string> lines;
  for (int k = 0; k < 700; ++k) {
    const std::string n = std::to_string(k);
    if (k % 83 == 4) lines.push_back(R"({"a": "x", "b": "Q", "u": "k)" + n + "\"}"); // a % 7 fails
    else if (k % 101 == 9) lines.push_back(R"({"a": 3, "b": 4, "u": "k)" + n + "\"}"); // lower(4) fails
    else if (k % 127 == 11) lines.push_back(R"({"a": "x", "b": 4})"); // both fail: the last one's error
    else lines.push_back(R"({"a": )" + n + R"(, "b": "Bee)" + std::to_string(k % 5) + R"(", "u": "k)" + n + "\"}");
  }
  lines.back() = R"({"a": [], "b": "z"})";
  return lines;
}

} // namespace

// Keyed operators and the router encode the keys of a batch after prepare(), evaluating key
// expressions per batch; the bytes, the result and error() must be encode()'s, record by
// record, failing records included.
TEST_CASE("KeyFields::encode_at after prepare equals encode record by record", "[operators][key]") {
  Harness h(single_operator_pipeline("type = \"reduce\"\nkey = [\"u\", \"a % 7\", \"lower(b)\"]\n"
                                     "aggregates = { n = \"count()\" }\n"));
  auto single = operators::KeyFields::from_node(h.job().spec, h.node("op"), h.names());
  auto batched = operators::KeyFields::from_node(h.job().spec, h.node("op"), h.names());
  auto in = parse(h, mixed_records());
  batched.prepare(std::span<const state::Record>(in.begin(), in.end()));
  std::size_t failures = 0;
  for (std::size_t row = 0; row < in.size(); ++row) {
    std::string expected, got;
    const bool ok = single.encode(in[row], h.names(), expected);
    CHECK(batched.encode_at(row, in[row], h.names(), got) == ok);
    CHECK(got == expected);
    if (!ok) {
      ++failures;
      CHECK(batched.error() == single.error());
    }
    // The key fields of output rows are those of the record, too.
    state::RecordBuilder a, b;
    state::Batch out;
    single.append_fields(a, out);
    batched.append_fields(b, out);
    std::string ja, jb;
    a.finish(out);
    b.finish(out);
    state::append_json(out[out.size() - 2], h.names(), ja);
    state::append_json(out[out.size() - 1], h.names(), jb);
    CHECK(ja == jb);
  }
  CHECK(failures > 10);
}

// Windows append the keys of a batch into one buffer with append_at: the bytes each call adds,
// its result and error() must be encode_at's (failing records included). A key of one field
// takes a short way into a ByteScratch: ["u"] is missing from some records, ["a"] is an int, a
// string or an array.
TEST_CASE("KeyFields::append_at appends encode_at's bytes", "[operators][key]") {
  for (const char* key : {R"k(["u", "a % 7", "lower(b)"])k", R"(["u"])", R"(["a"])", R"(["u", "b"])"}) {
    INFO(key);
    Harness h(single_operator_pipeline(std::string("type = \"reduce\"\nkey = ") + key +
                                       "\naggregates = { n = \"count()\" }\n"));
    auto single = operators::KeyFields::from_node(h.job().spec, h.node("op"), h.names());
    auto batched = operators::KeyFields::from_node(h.job().spec, h.node("op"), h.names());
    auto in = parse(h, mixed_records());
    single.prepare(std::span<const state::Record>(in.begin(), in.end()));
    batched.prepare(std::span<const state::Record>(in.begin(), in.end()));
    std::string all = "x";
    state::ByteScratch scratch;
    scratch.grow(1);
    for (std::size_t row = 0; row < in.size(); ++row) {
      std::string expected;
      const bool ok = single.encode_at(row, in[row], h.names(), expected);
      const std::size_t before = all.size();
      CHECK(batched.append_at(row, in[row], h.names(), all) == ok);
      CHECK(all.substr(before) == expected);
      if (!ok) CHECK(batched.error() == single.error());
      const std::size_t scratch_before = scratch.size();
      CHECK(batched.append_at(row, in[row], h.names(), scratch) == ok);
      CHECK(std::string(scratch.data() + scratch_before, scratch.size() - scratch_before) == expected);
      if (!ok) CHECK(batched.error() == single.error());
    }
  }
}

TEST_CASE("PartitionKey::encode_at after prepare equals encode, for keys and join expressions",
          "[operators][key]") {
  Harness h("name = \"t\"\n[sources.l]\ntype = \"stdin\"\n[sources.r]\ntype = \"stdin\"\n"
            "[operators.j]\ntype = \"join\"\ninputs = [\"l\", \"r\"]\n"
            "on = { left = \"a % 7\", right = \"lower(b)\" }\nwindow = { kind = \"tumbling\", size = \"10s\" }\n"
            "[operators.op]\ntype = \"reduce\"\ninputs = [\"l\"]\nkey = [\"a % 7\", \"u\"]\n"
            "aggregates = { n = \"count()\" }\n"
            "[sinks.out]\ntype = \"stdout\"\ninputs = [\"j\", \"op\"]\n");
  auto in = parse(h, mixed_records());
  for (auto [node, input] : {std::pair{"j", 0}, std::pair{"j", 1}, std::pair{"op", 0}}) {
    auto single = operators::PartitionKey::for_input(h.job().spec, h.node(node), input, h.names());
    auto batched = operators::PartitionKey::for_input(h.job().spec, h.node(node), input, h.names());
    REQUIRE(single);
    REQUIRE(batched);
    batched->prepare(std::span<const state::Record>(in.begin(), in.end()));
    for (std::size_t row = 0; row < in.size(); ++row) {
      std::string expected, got;
      single->encode(in[row], h.names(), expected);
      batched->encode_at(row, in[row], h.names(), got);
      CHECK(got == expected);
    }
  }
}
