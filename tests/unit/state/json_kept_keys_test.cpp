#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "state/json_reader.hpp"
#include "state/json_writer.hpp"

using namespace streamctl::state;

namespace {

// The outcome of parsing `text`: the record as JSON, or "error: <reason>".
std::string outcome(JsonReader& reader, const std::string& text, FieldNames& names,
                    const KeptKeys* kept, const std::vector<bool>* drop_after) {
  Batch batch;
  RecordBuilder b;
  auto r = reader.parse_record(text, names, batch, b, kept);
  if (!r) return "error: " + r.error();
  if (drop_after != nullptr)
    std::erase_if(b.mutable_fields(), [&](const Field& f) {
      return f.name >= drop_after->size() || !(*drop_after)[f.name];
    });
  b.finish(batch);
  std::string out;
  append_json(batch[0], names, out);
  return out;
}

// Parses `text` twice, whole and then dropping the unkept fields, and with the keys skipped
// while parsing; both must give the same record or the same error.
void check_same(const std::string& text, const std::vector<std::string>& kept_names) {
  FieldNames names;
  std::vector<bool> mask;
  for (const auto& n : kept_names) {
    FieldId id = names.intern(n);
    if (id >= mask.size()) mask.resize(id + 1, false);
    mask[id] = true;
  }
  KeptKeys kept(mask, names);
  JsonReader reader;
  INFO(text);
  CHECK(outcome(reader, text, names, &kept, nullptr) == outcome(reader, text, names, nullptr, &mask));
}

// The keys of `left_out_names` left out (KeptKeys with left_out), interned into `names`.
KeptKeys left_out_keys(FieldNames& names, const std::vector<std::string>& left_out_names, std::vector<bool>& mask) {
  for (const auto& n : left_out_names) {
    FieldId id = names.intern(n);
    if (id >= mask.size()) mask.resize(id + 1, false);
    mask[id] = true;
  }
  return KeptKeys(mask, names, true);
}

// Parsing `text` with the left-out keys skipped gives the whole record with those fields
// dropped after, or the same error.
void check_same_left_out(JsonReader& reader, const std::string& text, FieldNames& names, const KeptKeys& kept,
                         const std::vector<bool>& left_out) {
  JsonReader whole;
  Batch batch;
  RecordBuilder b;
  std::string expected;
  if (auto r = whole.parse_record(text, names, batch, b, nullptr); !r) {
    expected = "error: " + r.error();
  } else {
    std::erase_if(b.mutable_fields(), [&](const Field& f) { return f.name < left_out.size() && left_out[f.name]; });
    b.finish(batch);
    append_json(batch[0], names, expected);
  }
  INFO(text);
  CHECK(outcome(reader, text, names, &kept, nullptr) == expected);
}

const std::vector<std::string> corpus = {
    R"({"ts":1700000000000,"user":"u123","ok":true,"x":null,"f":1.5,"n":false})",
    R"({"a":{"b":[1,2,{"c":"d\n"}],"e":{}},"user":"x","z":[]})",
    R"({ "a" : [ 1 , 2 ] , "user" : "q\"\\\/\b\f\n\r\t\u0041\ud83d\ude00\ud83dx" })",
    R"({"a":1,"user":2,"a":3,"user":4})",
    R"({"a\u0062":1,"u\u0073er":2})",
    R"({"big":123456789012345678901234567890,"f":-1.5e-300,"tiny":1e-400,"user":0})",
    R"({"a":01})", R"({"a":1.})", R"({"a":-})", R"({"a":1e})", R"({"a":1e+})", R"({"a":.5})",
    R"({"a":+1})", R"({"a":1e400})", R"({"a":-2e308})", R"({"a":12abc})", R"({"a" 1})",
    R"({"a":1 "b":2})", R"({"a":"abc)", R"({"a":"ab\"c)", R"({"a":"abc\)", R"({"abc)",
    R"({"a":1} x)", R"({"a":tru})", R"({"a":nul)", R"({"a":1,})", R"({a:1})", R"({"a":[1 2]})",
    R"({"a":[1,]})", R"({"a":"\q"})", R"({"a":"\u12G4"})", R"({"a":"\u12"})", R"({"a":)",
    R"({"a":1)", "{\"a\":\x01}", "{\"a\":\"\xC0\xAF\"}", "{\"a\":\"\\n\xC3\"}",
    "{\"a\":{\"k\\n\xC3\":1}}", "{\"a\":\"x\ty\"}", "{\"a\":[\"\\ud83d\\u12\"]}",
    R"({"a":{"b" 1}})", R"({"a":{"b":1 "c":2}})", R"({"a":{1:2}})", R"({"a":[1,{"b":]}]})",
    "{\"a\":" + std::string(200, '9') + "}", "{\"a\":" + std::string(400, '9') + "}",
    "{\"a\":" + std::string(400, '9') + ".5}",
    "{\"a\":" + std::string(127, '[') + std::string(127, ']') + "}",
    "{\"a\":" + std::string(128, '[') + std::string(128, ']') + "}",
    "{\"a\":" + std::string(300, '[') + "}",
    // Digits skipped eight at a time: runs of 7, 8, 9 and 16, a non-digit right after 8, a
    // fraction of 8 digits and more, and a number that ends the text.
    R"({"a":1234567,"b":12345678,"c":123456789,"d":1234567812345678})",
    R"({"a":12345678x})", R"({"a":12345678.12345678e5})", R"({"a":0.123456789,"user":1})",
    R"({"a":-12345678901234567890123})", R"({"a":012345678})", R"({"a":12345678.})",
    "{\"a\":12345678",
};

} // namespace

TEST_CASE("kept keys: only the named top-level fields are built, in order", "[json]") {
  FieldNames names;
  std::vector<bool> mask(names.intern("user") + 1, false);
  mask[names.intern("user")] = true;
  mask.resize(names.intern("ts") + 1, false);
  mask[names.intern("ts")] = true;
  KeptKeys kept(mask, names);
  JsonReader reader;
  std::size_t known = names.size();
  CHECK(outcome(reader, R"({"ts":1,"page":"p\n","user":"u","nested":{"ts":2},"ts":3})", names, &kept,
                nullptr) == R"({"ts":3,"user":"u"})");
  // A skipped key is not interned: a source of wide records only names what it reads.
  CHECK(names.size() == known);
}

TEST_CASE("kept keys: a skipped value fails exactly as a built one would", "[json]") {
  // The dead-letter content (reason and column) of a bad line must not depend on which fields
  // downstream operators read.
  for (const auto& text : corpus) {
    check_same(text, {"user"});
    check_same(text, {"a"});
    check_same(text, {"zz", "b"});
  }
}

TEST_CASE("kept keys: random damage to valid lines fails alike, kept or skipped", "[json]") {
  std::mt19937 rng(9);
  // Also through a reader that expects the keys of the line before (the damage is often there).
  FieldNames names;
  std::vector<bool> mask(names.intern("user") + 1, false);
  mask[names.intern("user")] = true;
  KeptKeys kept(mask, names);
  JsonReader repeating;
  repeating.expect_repeated_keys();
  const std::string specials = "\"\\{}[]:,.-+eE0u \x01\x80\xC3\xED\xF0tfn";
  for (int round = 0; round < 20000; ++round) {
    std::string text = corpus[rng() % 6];
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits && !text.empty(); ++k) {
      std::size_t at = rng() % text.size();
      switch (rng() % 3) {
      case 0: text[at] = specials[rng() % specials.size()]; break;
      case 1: text.erase(at, 1 + rng() % 3); break;
      default: text.insert(at, 1, specials[rng() % specials.size()]); break;
      }
    }
    check_same(text, {"user"});
    check_same(text, {"a", "ts"});
    JsonReader fresh;
    INFO(text);
    CHECK(outcome(repeating, text, names, &kept, nullptr) == outcome(fresh, text, names, &kept, nullptr));
    if (round % 3 == 0) {
      // An undamaged line now and then, so that the expected keys are those of a good line.
      std::string good = corpus[rng() % 6];
      CHECK(outcome(repeating, good, names, &kept, nullptr) == outcome(fresh, good, names, &kept, nullptr));
    }
  }
}

TEST_CASE("repeated keys: a reader that expects the last record's keys reads any line alike", "[json]") {
  // Keys that change position, prefixes of the expected key ("user" then "use", "users"), an
  // escaped spelling of an expected key, a key cut by the end of the line, and bad lines.
  const std::vector<std::string> lines = {
      R"({"ts":1,"user":"a","page":"p"})",  R"({"ts":2,"user":"b","page":"q"})",
      R"({"user":"c","ts":3})",             R"({"ts":4,"use":"d","users":5})",
      R"({"ts":5,"u\u0073er":"e"})",        R"({"ts":6,"user":"f","page":"r","x":[1]})",
      R"({"ts":7,"user)",                   R"({"ts":8,"user":"g","page":"s\q"})",
      R"({"":1,"ts":9})",                   R"({"ts":10,"user":"h","page":"t"})",
      "{\"ts\":11,\"user\":\"\xC3\xA9\",\"p\xC3\xA9\":1}", "{\"ts\":12,\"user\":\"i\",\"p\xC3\":1}",
      R"({"ts":13,"user":"j","page":"u","ts":14})",
      // A line of duplicates learnt as the expected keys, then lines whose keys are all
      // predicted from it (duplicates or not), then distinct ones again: dedup is skipped
      // only where the predicted keys are distinct.
      R"({"a":1,"a":2,"b":3})", R"({"a":4,"a":5,"b":6})", R"({"a":7,"a":8})", R"({"a":9})",
      R"({"a":1,"b":2,"c":3})", R"({"a":4,"b":5,"c":6})", R"({"a":7,"b":8,"c":9,"a":10})",
      R"({"a":1,"b":2})", R"({"a":1,"b":2,"c":3,"b":4})",
  };
  for (bool with_kept : {false, true}) {
    FieldNames names;
    std::vector<bool> mask(names.intern("user") + 1, false);
    mask[names.intern("user")] = true;
    KeptKeys kept(mask, names);
    const KeptKeys* k = with_kept ? &kept : nullptr;
    JsonReader repeating;
    repeating.expect_repeated_keys();
    for (int pass = 0; pass < 2; ++pass)
      for (const auto& line : lines) {
        JsonReader fresh;
        INFO(line);
        CHECK(outcome(repeating, line, names, k, nullptr) == outcome(fresh, line, names, k, nullptr));
      }
  }
}

// A source behind a map that removes fields before a sink of whole records builds every field
// but those (projection's "every field but"): the same records and the same errors as
// building all and dropping them after, also for a reader that expects the last line's keys.
TEST_CASE("left-out keys: every other field is built, the left-out ones skipped alike", "[json]") {
  for (const std::vector<std::string>& list : {std::vector<std::string>{"ts"}, {"a", "user"}}) {
    FieldNames names;
    std::vector<bool> mask;
    KeptKeys kept = left_out_keys(names, list, mask);
    JsonReader repeating;
    repeating.expect_repeated_keys();
    for (const auto& text : corpus) {
      JsonReader fresh;
      check_same_left_out(fresh, text, names, kept, mask);
      check_same_left_out(repeating, text, names, kept, mask);
    }
  }
  FieldNames names;
  std::vector<bool> mask;
  KeptKeys kept = left_out_keys(names, {"ts"}, mask);
  JsonReader repeating;
  repeating.expect_repeated_keys();
  CHECK(outcome(repeating, R"({"ts":1,"page":"p","user":"u","ts":3,"n":{"ts":2}})", names, &kept, nullptr) ==
        R"({"page":"p","user":"u","n":{"ts":2}})");
  CHECK(outcome(repeating, R"({"ts":2,"page":"q","user":"v","ts":4,"n":{"ts":5}})", names, &kept, nullptr) ==
        R"({"page":"q","user":"v","n":{"ts":5}})");
}
