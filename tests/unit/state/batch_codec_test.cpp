#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include "state/batch_codec.hpp"
#include "state/json_reader.hpp"
#include "state/json_writer.hpp"

using namespace streamctl::state;

namespace {

// A batch with every kind, nested values, int64 limits, >127 names (two-byte name indexes) and
// a long string (two-byte length).
Batch sample_batch(FieldNames& names) {
  Batch batch;
  const char* lines[] = {
      R"({"ts":1700000000000,"user":"u123","page":"/p/42","status":200,"bytes":5123})",
      R"({"min":-9223372036854775808,"max":9223372036854775807,"z":0,"neg":-1,"f":-1.5e-300})",
      R"({"s":"","e":[],"m":{},"n":null,"t":true,"fa":false,"u":"\u00e9\ud83d\ude00\n"})",
      R"({"nest":{"a":[1,{"b":[2.5,"x",null,{"c":{}}]}],"d":{"e":{"f":[[[]]]}}}})",
      R"({})",
  };
  RecordBuilder b;
  for (const char* line : lines) {
    b.reset();
    auto r = parse_json_record(line, names, batch, b); // string literals outlive the batch
    REQUIRE(r.ok());
    b.finish(batch);
  }
  b.reset();
  for (int k = 0; k < 200; ++k)
    b.append(names.intern("field_" + std::to_string(k)), Value::integer(k * 1000003LL));
  b.append(names.intern("long"), Value::string(batch.copy_string(std::string(300, 'L'))));
  b.finish(batch);
  return batch;
}

bool records_equal(const Record& a, const FieldNames& na, const Record& b, const FieldNames& nb) {
  if (a.size != b.size) return false;
  for (std::uint32_t k = 0; k < a.size; ++k) {
    if (na.name(a.fields[k].name) != nb.name(b.fields[k].name)) return false;
    // Through JSON text, so that nested maps compare by name across FieldNames.
    std::string x;
    std::string y;
    append_json_value(a.fields[k].value, na, x);
    append_json_value(b.fields[k].value, nb, y);
    if (x != y) return false;
  }
  return true;
}

// Reads every byte a decoded batch points to, so that ASan sees any out-of-bounds pointer.
std::size_t touch(const Value& v) {
  std::size_t sum = 0;
  switch (v.kind) {
  case Kind::String:
    for (char c : v.str()) sum += static_cast<unsigned char>(c);
    return sum;
  case Kind::Array:
    for (std::uint32_t k = 0; k < v.size; ++k) sum += touch(v.array[k]);
    return sum;
  case Kind::Map:
    for (std::uint32_t k = 0; k < v.size; ++k) sum += v.map[k].name + touch(v.map[k].value);
    return sum;
  default: return sum + static_cast<std::size_t>(v.kind);
  }
}

std::size_t touch(const Batch& batch, const FieldNames& names) {
  std::size_t sum = 0;
  for (const Record& r : batch)
    for (const Field& f : r) sum += names.name(f.name).size() + touch(f.value);
  return sum;
}

std::string encode(const Batch& batch, const FieldNames& names) {
  std::string out;
  encode_batch(batch, names, out);
  return out;
}

} // namespace

TEST_CASE("codec: the layout of a tiny batch, byte by byte", "[codec]") {
  // Guards the wire format: a change here needs a new version and a reader for the old one.
  FieldNames names;
  names.intern("unused");
  RecordBuilder b;
  Batch batch;
  b.append(names.intern("a"), Value::integer(-2));
  b.append(names.intern("bc"), Value::string("hi"));
  b.finish(batch);
  b.reset();
  b.append(names.intern("bc"), Value::floating(1.0));
  b.append(names.intern("a"), Value::boolean(true));
  b.finish(batch);
  const unsigned char expected[] = {
      'S', 'C', 'T', 'B', 1,           // magic, version
      2, 1, 'a', 2, 'b', 'c',          // name table: "a", "bc"
      2,                               // records
      2, 0, 2, 3, 1, 4, 2, 'h', 'i',   // {a: int zigzag(-2)=3, bc: string "hi"}
      2, 1, 3, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, // bc: float 1.0, little-endian
      0, 1, 1,                         // a: bool true
  };
  std::string out = encode(batch, names);
  CHECK(out == std::string(reinterpret_cast<const char*>(expected), sizeof expected));
}

TEST_CASE("codec: encode then decode gives equal records, across FieldNames", "[codec]") {
  FieldNames sender;
  Batch batch = sample_batch(sender);
  std::string bytes = encode(batch, sender);

  FieldNames receiver;
  receiver.intern("something"); // so that ids differ between the two sides
  auto decoded = decode_batch(bytes, nullptr, receiver);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->size() == batch.size());
  for (std::size_t k = 0; k < batch.size(); ++k) {
    INFO(k);
    CHECK(records_equal(batch[k], sender, (*decoded)[k], receiver));
  }
  // With the same FieldNames the values compare equal directly.
  auto same = decode_batch(bytes, nullptr, sender);
  REQUIRE(same.ok());
  for (std::size_t k = 0; k < batch.size(); ++k) {
    const Record& a = batch[k];
    const Record& b = (*same)[k];
    CHECK(values_equal(Value::map_of(a.fields, a.size), Value::map_of(b.fields, b.size)));
  }
  // Encoding the decoded batch reproduces the bytes.
  CHECK(encode(*same, sender) == bytes);
}

TEST_CASE("codec: floats keep their bits, NaN included", "[codec]") {
  FieldNames names;
  Batch batch;
  RecordBuilder b;
  double specials[] = {std::nan(""), -0.0, std::numeric_limits<double>::infinity(),
                       std::numeric_limits<double>::denorm_min(), 0.1};
  for (double d : specials) b.append(names.intern("f"), Value::floating(d));
  b.finish(batch);
  auto decoded = decode_batch(encode(batch, names), nullptr, names);
  REQUIRE(decoded.ok());
  for (std::size_t k = 0; k < std::size(specials); ++k)
    CHECK(std::memcmp(&(*decoded)[0].fields[k].value.f, &specials[k], sizeof(double)) == 0);
}

TEST_CASE("codec: decoded strings point into the bytes, which the owner keeps alive", "[codec]") {
  FieldNames names;
  Batch source = sample_batch(names);
  auto bytes = std::make_shared<std::string>(encode(source, names));
  std::string_view view = *bytes;
  auto decoded = decode_batch(view, bytes, names);
  REQUIRE(decoded.ok());
  const Value* user = (*decoded)[0].find(names.intern("user"));
  REQUIRE(user != nullptr);
  CHECK(user->s >= view.data());
  CHECK(user->s < view.data() + view.size());
  bytes.reset(); // the batch is now the only owner: ASan would catch a use after free
  Batch moved = std::move(*decoded);
  CHECK(moved[0].find(names.intern("user"))->str() == "u123");
  CHECK(touch(moved, names) > 0);
}

TEST_CASE("codec: encode appends to out and reuses it", "[codec]") {
  FieldNames names;
  Batch batch = sample_batch(names);
  std::string once = encode(batch, names);
  std::string out = "header";
  encode_batch(batch, names, out);
  CHECK(out == "header" + once);
  out.clear();
  encode_batch(batch, names, out);
  CHECK(out == once);
  Batch empty;
  std::string empty_bytes = encode(empty, names);
  CHECK(empty_bytes == std::string("SCTB\x01\x00\x00", 7));
  auto decoded = decode_batch(empty_bytes, nullptr, names);
  REQUIRE(decoded.ok());
  CHECK(decoded->empty());
}

TEST_CASE("codec: bad magic, version and trailing bytes are reported", "[codec]") {
  FieldNames names;
  std::string bytes = encode(sample_batch(names), names);
  {
    std::string bad = bytes;
    bad[0] = 'X';
    auto r = decode_batch(bad, nullptr, names);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == "corrupt batch at byte 0: not a streamctl batch (bad magic)");
  }
  {
    std::string bad = bytes;
    bad[4] = 9;
    auto r = decode_batch(bad, nullptr, names);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == "corrupt batch at byte 4: unsupported version 9 (this build reads version 1)");
  }
  {
    auto r = decode_batch(bytes + "x", nullptr, names);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == "corrupt batch at byte " + std::to_string(bytes.size()) +
                           ": trailing bytes after the last record");
  }
  {
    auto r = decode_batch("SCT", nullptr, names);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == "corrupt batch at byte 3: truncated header (3 bytes)");
  }
}

TEST_CASE("codec: every truncation fails cleanly", "[codec]") {
  FieldNames names;
  std::string bytes = encode(sample_batch(names), names);
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    // A copy of exactly n bytes, so that ASan catches a read past the end.
    auto prefix = std::make_unique<char[]>(n + 1);
    std::memcpy(prefix.get(), bytes.data(), n);
    auto r = decode_batch(std::string_view(prefix.get(), n), nullptr, names);
    INFO(n);
    CHECK_FALSE(r.ok());
  }
}

TEST_CASE("codec: random byte flips give a failure or a valid batch, never a crash", "[codec]") {
  FieldNames names;
  std::string bytes = encode(sample_batch(names), names);
  std::mt19937 rng(7);
  std::size_t failures = 0;
  std::size_t valid = 0;
  constexpr int rounds = 4000;
  for (int round = 0; round < rounds; ++round) {
    std::string corrupt = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      std::size_t at = 5 + rng() % (corrupt.size() - 5); // past magic and version
      corrupt[at] = static_cast<char>(rng() % 3 == 0 ? 0xFF : rng());
    }
    std::size_t cut = rng() % 4 == 0 ? rng() % corrupt.size() : corrupt.size();
    auto exact = std::make_unique<char[]>(cut + 1);
    std::memcpy(exact.get(), corrupt.data(), cut);
    FieldNames fresh;
    auto r = decode_batch(std::string_view(exact.get(), cut), nullptr, fresh);
    if (!r.ok()) {
      ++failures;
      CHECK(r.error().starts_with("corrupt batch at byte "));
    } else {
      ++valid;
      CHECK(touch(*r, fresh) < std::numeric_limits<std::size_t>::max());
    }
  }
  // Both outcomes occur: flips inside names and strings decode, structural ones fail.
  CHECK(failures > 0);
  CHECK(valid > 0);
}

TEST_CASE("codec: counts larger than the input are rejected before allocating", "[codec]") {
  FieldNames names;
  auto decode = [&](std::string bytes) { return decode_batch(bytes, nullptr, names); };
  std::string header("SCTB\x01", 5);
  // 2^63 names.
  auto r = decode(header + std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 10));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "corrupt batch at byte 5: name count 9223372036854775808 exceeds the "
                     "remaining bytes");
  // A varint running past 64 bits.
  r = decode(header + std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "corrupt batch at byte 5: varint overflows 64 bits");
  // One name "a", one record of one field: an array claiming 1000 elements in 3 bytes.
  r = decode(header + std::string("\x01\x01" "a" "\x01\x01\x00\x05\xe8\x07\x00\x00\x00", 12));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "corrupt batch at byte 12: array size 1000 exceeds the remaining bytes");
  // Nested arrays that each claim all the remaining bytes: the reservations of the outer ones
  // stop the inner ones, so the arena stays proportional to the input.
  std::string bomb = header + std::string("\x01\x01" "a" "\x01\x01\x00", 6);
  for (int k = 0; k < 200; ++k) bomb += std::string("\x05\xff\x07", 3); // 1023 elements
  bomb += std::string(1000, '\0');
  r = decode(bomb);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find("array size 1023 exceeds the remaining bytes") != std::string::npos);
  // A name index past the table.
  r = decode(header + std::string("\x01\x01" "a" "\x01\x01\x05\x00", 7));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "corrupt batch at byte 10: name index 5 out of range (1 names)");
  // An unknown tag and a bad bool.
  r = decode(header + std::string("\x01\x01" "a" "\x01\x01\x00\x09", 7));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "corrupt batch at byte 11: unknown kind tag 9");
  r = decode(header + std::string("\x01\x01" "a" "\x01\x01\x00\x01\x02", 8));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "corrupt batch at byte 12: bool byte is neither 0 nor 1");
}

TEST_CASE("codec: nesting deeper than the limit is rejected", "[codec]") {
  FieldNames names;
  auto nested_batch = [&](int levels, Batch& batch) {
    Value v = Value::integer(1);
    for (int k = 0; k < levels; ++k) {
      Value* one = batch.arena().allocate_array<Value>(1);
      one[0] = v;
      v = Value::array_of(one, 1);
    }
    RecordBuilder b;
    b.append(names.intern("deep"), v);
    b.finish(batch);
  };
  Batch ok_batch;
  nested_batch(batch_codec_max_depth, ok_batch);
  CHECK(decode_batch(encode(ok_batch, names), nullptr, names).ok());
  Batch deep_batch;
  nested_batch(batch_codec_max_depth + 1, deep_batch);
  auto r = decode_batch(encode(deep_batch, names), nullptr, names);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find("nesting too deep") != std::string::npos);
}

TEST_CASE("codec: a batch of 1024 generated records round-trips", "[codec]") {
  FieldNames names;
  FieldId ids[5] = {names.intern("ts"), names.intern("user"), names.intern("page"),
                    names.intern("status"), names.intern("bytes")};
  Batch batch;
  RecordBuilder b;
  std::mt19937_64 rng(1);
  for (int k = 0; k < 1024; ++k) {
    b.reset();
    b.append(ids[0], Value::integer(1700000000000 + k));
    b.append(ids[1], Value::string(batch.copy_string("u" + std::to_string(rng() % 1000))));
    b.append(ids[2], Value::string(batch.copy_string("/p/" + std::to_string(rng() % 100))));
    b.append(ids[3], Value::integer(static_cast<std::int64_t>(rng() % 600)));
    b.append(ids[4], Value::integer(static_cast<std::int64_t>(rng()) >> (rng() % 64)));
    b.finish(batch);
  }
  std::string bytes = encode(batch, names);
  CHECK(bytes.size() < 1024 * 40);
  auto decoded = decode_batch(bytes, nullptr, names);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->size() == 1024);
  for (std::size_t k = 0; k < 1024; ++k) {
    const Record& x = batch[k];
    const Record& y = (*decoded)[k];
    REQUIRE(values_equal(Value::map_of(x.fields, x.size), Value::map_of(y.fields, y.size)));
  }
}

TEST_CASE("codec: event timestamps travel as a delta column, and only when present", "[codec]") {
  FieldNames names;
  Batch batch;
  RecordBuilder b;
  const std::int64_t stamps[] = {1700000000000, 1700000000005, kNoTimestamp, 1699999999000, INT64_MAX};
  for (std::int64_t ts : stamps) {
    b.reset();
    b.append(names.intern("v"), Value::integer(1));
    b.set_timestamp(ts);
    b.finish(batch);
  }
  std::string bytes = encode(batch, names);
  auto decoded = decode_batch(bytes, nullptr, names);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->size() == 5);
  for (std::size_t k = 0; k < 5; ++k) CHECK((*decoded)[k].timestamp == stamps[k]);

  // Without event time the encoding has no timestamp section at all.
  Batch plain;
  b.reset();
  b.append(names.intern("v"), Value::integer(1));
  b.finish(plain);
  std::string plain_bytes = encode(plain, names);
  CHECK(plain_bytes.find('T', 5) == std::string::npos);
  CHECK((*decode_batch(plain_bytes, nullptr, names))[0].timestamp == kNoTimestamp);

  // A truncated timestamp column is corrupt, not a crash.
  auto cut = decode_batch(std::string_view(bytes).substr(0, bytes.size() - 1), nullptr, names);
  CHECK_FALSE(cut.ok());
}

TEST_CASE("codec: with a keep mask only the marked top-level fields travel", "[codec]") {
  FieldNames sender;
  Batch batch = sample_batch(sender);
  // Keep "user" and "nest" (whose nested names must still be in the table) and one id past
  // the mask's end, which is dropped.
  std::vector<bool> keep(sender.intern("nest") + 1, false);
  keep[sender.intern("user")] = true;
  keep[sender.intern("nest")] = true;
  std::string bytes;
  encode_batch(batch, sender, bytes, &keep);

  FieldNames receiver;
  auto decoded = decode_batch(bytes, nullptr, receiver);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->size() == batch.size()); // records stay, even when none of their fields do
  for (std::size_t k = 0; k < batch.size(); ++k) {
    const Record& original = batch[k];
    const Record& projected = (*decoded)[k];
    std::string expected;
    std::string actual;
    for (const Field& f : original)
      if (f.name < keep.size() && keep[f.name]) {
        expected += std::string(sender.name(f.name)) + "=";
        append_json_value(f.value, sender, expected);
        expected += ";";
      }
    for (const Field& f : projected) {
      actual += std::string(receiver.name(f.name)) + "=";
      append_json_value(f.value, receiver, actual);
      actual += ";";
    }
    INFO(k);
    CHECK(actual == expected);
  }
  CHECK((*decoded)[0].size == 1);
  CHECK((*decoded)[3].size == 1);
  CHECK(bytes.size() < encode(batch, sender).size() / 4);
}

TEST_CASE("codec: bound() then write() gives the bytes encode() gives, within the bound", "[codec]") {
  FieldNames names;
  Batch batch = sample_batch(names);
  batch.set_timestamp(1, 1700000000000);
  std::vector<bool> keep(names.intern("nest") + 1, false);
  keep[names.intern("user")] = true;
  keep[names.intern("nest")] = true;
  BatchEncoder encoder;
  const std::vector<bool>* masks[] = {nullptr, &keep};
  for (const std::vector<bool>* mask : masks) {
    std::string expected;
    encoder.encode(batch, names, expected, mask);
    // Twice: a bound() without its write() must not leave names behind for the next batch.
    (void)encoder.bound(batch, names, mask);
    const std::size_t bound = encoder.bound(batch, names, mask);
    REQUIRE(bound >= expected.size());
    std::string memory(bound + 1, '\x7f');
    const std::size_t written = encoder.write(batch, names, memory.data());
    CHECK(written == expected.size());
    CHECK(memory.substr(0, written) == expected);
    CHECK(memory[bound] == '\x7f'); // nothing written past the bound
    CHECK(decode_batch(std::string_view(memory).substr(0, written), nullptr, names).ok());
  }
}
