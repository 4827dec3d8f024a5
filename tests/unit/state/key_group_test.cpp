// Key encoding (state/key_codec), key hashing and key-group assignment (state/key_group).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "state/byte_scratch.hpp"
#include "state/key_codec.hpp"
#include "state/key_group.hpp"

using namespace streamctl::state;

namespace {

std::string encoded(std::initializer_list<Value> values, const FieldNames& names = FieldNames()) {
  std::string out;
  encode_key(std::span<const Value>(values.begin(), values.size()), names, out);
  return out;
}

std::string hex(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

std::string unhex(std::string_view h) {
  std::string s;
  for (std::size_t k = 0; k + 1 < h.size(); k += 2)
    s += static_cast<char>(std::stoi(std::string(h.substr(k, 2)), nullptr, 16));
  return s;
}

// Decodes and re-encodes: the encoding is canonical, so the bytes must come back unchanged.
void check_round_trip(const std::string& bytes) {
  FieldNames names;
  Arena arena;
  auto decoded = decode_key(bytes, names, arena);
  REQUIRE(decoded.ok());
  std::string again;
  encode_key(*decoded, names, again);
  CHECK(hex(again) == hex(bytes));
}

} // namespace

TEST_CASE("XXH3-64 seed 0 gives the published values", "[state][key_group]") {
  // Published test vectors of XXH3_64bits (xxHash's own sanity tests and other
  // implementations): if these change, every snapshot's key groups would.
  CHECK(hash_key_bytes(std::string_view("")) == 0x2D06800538D394C2ULL);
  CHECK(hash_key_bytes(std::string_view("a")) == 0xE6C632B61E964E1FULL);
  CHECK(hash_key_bytes(std::string_view("ab")) == 0xA873719C24D5735CULL);
  CHECK(hash_key_bytes(std::string_view("abc")) == 0x78AF5F94892F3950ULL);
  // LLVM's xxhash test: bytes from a xorshift generator, lengths across XXH3's code paths.
  std::string a(2243, '\0');
  std::uint64_t x = 1;
  for (auto& c : a) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  auto h = [&](std::size_t n) { return hash_key_bytes(std::string_view(a).substr(0, n)); };
  CHECK(h(3) == 0x6EA2D59ACA5C3778ULL);
  CHECK(h(8) == 0xABC1413DA6CD0209ULL);
  CHECK(h(9) == 0x8BC89400BFED51F6ULL);
  CHECK(h(17) == 0xED4BE912BA5F836DULL);
  CHECK(h(33) == 0x9013FB74CA603E0CULL);
  CHECK(h(64) == 0xFA5271FCCE0DB1C3ULL);
  // Every length from 0 to 1000 (each of XXH3's paths and their edges), folded into one value
  // computed with the shared library (libxxhash 0.8.1): hash_key_bytes compiles xxHash in.
  std::string b(1000, '\0');
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(i * 7 + 3);
  std::uint64_t fold = 0;
  for (std::size_t n = 0; n <= b.size(); ++n) fold = fold * 31 + hash_key_bytes(std::string_view(b).substr(0, n));
  CHECK(fold == 0x234C374A00A6DE64ULL);
}

TEST_CASE("encoded keys, their hashes and key groups are pinned", "[state][key_group]") {
  // Written into snapshots: a change here moves keys to other key groups and subtasks.
  FieldNames names;
  Value fields[2] = {Value::integer(1), Value::string("x")};
  Field members[2] = {{names.intern("b"), Value::boolean(true)}, {names.intern("a"), Value()}};
  struct Pinned {
    std::string bytes;
    const char* hex;
    std::uint64_t hash;
    std::uint32_t group128;
  };
  const Pinned pinned[] = {
      {encoded({Value::string("u123456")}), "01040775313233343536", 0xEF881BD6BC4174C6ULL, 70},
      {encoded({Value::integer(2)}), "010204", 0x2581B379A7200E75ULL, 117},
      {encoded({Value::integer(-1)}), "010201", 0xEF7C7C7983DE9258ULL, 88},
      {encoded({Value::floating(2.5)}), "01030000000000000440", 0x0A41AE220335891CULL, 28},
      {encoded({Value()}), "0100", 0xAB94AC0ACE7276C0ULL, 64},
      {encoded({}), "00", 0xC44BDFF4074EECDBULL, 91},
      {encoded({Value::string("us"), Value::integer(1700000000000), Value::boolean(false)}),
       "03040275730280a0abfef9620100", 0x7AB68328D83060A8ULL, 40},
      {encoded({Value::array_of(fields, 2), Value::map_of(members, 2)}, names),
       "0205020202040178060201610001620101", 0x93F5D268114700ECULL, 108},
  };
  for (const auto& p : pinned) {
    INFO(p.hex);
    CHECK(hex(p.bytes) == p.hex);
    CHECK(hash_key_bytes(p.bytes) == p.hash);
    CHECK(key_group_of(hash_key_bytes(p.bytes), 128) == p.group128);
  }
}

TEST_CASE("an int and a float of the same integral value are one key", "[state][key_group]") {
  CHECK(encoded({Value::integer(2)}) == encoded({Value::floating(2.0)}));
  CHECK(encoded({Value::integer(0)}) == encoded({Value::floating(-0.0)}));
  CHECK(encoded({Value::integer(-7)}) == encoded({Value::floating(-7.0)}));
  CHECK(encoded({Value::integer(std::numeric_limits<std::int64_t>::min())}) ==
        encoded({Value::floating(-0x1p63)}));
  CHECK(encoded({Value::integer(std::int64_t{1} << 53)}) == encoded({Value::floating(0x1p53)}));
  // Exact, not via double rounding: 2^53 + 1 is not the float 2^53.
  CHECK(encoded({Value::integer((std::int64_t{1} << 53) + 1)}) !=
        encoded({Value::floating(0x1p53)}));
  CHECK(encoded({Value::integer(2)}) != encoded({Value::floating(2.5)}));
  // 2^63 is beyond int64: it stays a float, distinct from INT64_MAX.
  CHECK(encoded({Value::floating(0x1p63)})[1] == 3);
  CHECK(encoded({Value::integer(std::numeric_limits<std::int64_t>::max())}) !=
        encoded({Value::floating(0x1p63)}));
  CHECK(encoded({Value::floating(std::numeric_limits<double>::infinity())})[1] == 3);
  // Nested values follow the same rule.
  Value a[1] = {Value::integer(3)};
  Value b[1] = {Value::floating(3.0)};
  CHECK(encoded({Value::array_of(a, 1)}) == encoded({Value::array_of(b, 1)}));
}

TEST_CASE("key values of different kinds never collide", "[state][key_group]") {
  Value empty_array = Value::array_of(nullptr, 0);
  Value empty_map = Value::map_of(nullptr, 0);
  Value one[1] = {Value::integer(0)};
  std::vector<std::string> keys = {
      encoded({Value()}),
      encoded({Value::boolean(false)}),
      encoded({Value::boolean(true)}),
      encoded({Value::integer(0)}),
      encoded({Value::floating(0.5)}),
      encoded({Value::string("")}),
      encoded({Value::string("0")}),
      encoded({empty_array}),
      encoded({empty_map}),
      encoded({Value::array_of(one, 1)}),
      encoded({}),
      encoded({Value(), Value()}),
      // Self-delimiting: ("ab", "c") and ("a", "bc") differ.
      encoded({Value::string("ab"), Value::string("c")}),
      encoded({Value::string("a"), Value::string("bc")}),
  };
  for (std::size_t i = 0; i < keys.size(); ++i)
    for (std::size_t j = i + 1; j < keys.size(); ++j) {
      INFO(i << " " << j);
      CHECK(keys[i] != keys[j]);
    }
}

TEST_CASE("a key of one value appended on its own has the bytes of a key of a span of it",
          "[state][key_group]") {
  // The short way of KeyFields for `key = ["field"]` (append_key of one Value): any drift from
  // the general encoder would file a key's state under other bytes than a restore computes.
  FieldNames names;
  Field member[1] = {{names.intern("a"), Value::integer(1)}};
  Value one[1] = {Value::string("x")};
  const std::string long_string(300, 'y'); // a two-byte length varint
  std::vector<Value> values = {
      Value(), Value::boolean(true), Value::integer(0), Value::integer(-1),
      Value::integer(std::numeric_limits<std::int64_t>::min()), Value::floating(0.5),
      Value::floating(3.0), // as the int 3
      Value::floating(std::numeric_limits<double>::quiet_NaN()), Value::string(""),
      Value::string("u12345"), Value::string(long_string), Value::array_of(one, 1),
      Value::map_of(member, 1)};
  for (const Value& v : values) {
    ByteScratch scratch;
    scratch.grow(3); // after other keys, as a batch's keys are appended
    append_key(v, names, scratch);
    const std::string single(scratch.data() + 3, scratch.size() - 3);
    CHECK(hex(single) == hex(encoded({v}, names)));
  }
}

TEST_CASE("NaN keys are one key", "[state][key_group]") {
  double nan1 = std::numeric_limits<double>::quiet_NaN();
  double nan2;
  std::uint64_t bits = 0xFFF0000000000123ULL; // a negative signalling-pattern NaN
  std::memcpy(&nan2, &bits, 8);
  REQUIRE(std::isnan(nan2));
  CHECK(encoded({Value::floating(nan1)}) == encoded({Value::floating(nan2)}));
  CHECK(hex(encoded({Value::floating(nan2)})) == "0103000000000000f87f");
}

TEST_CASE("map keys are encoded by member name, in name order", "[state][key_group]") {
  FieldNames names;
  FieldId a = names.intern("a"), b = names.intern("b");
  Field ab[2] = {{a, Value::integer(1)}, {b, Value::integer(2)}};
  Field ba[2] = {{b, Value::integer(2)}, {a, Value::integer(1)}};
  std::string k1 = encoded({Value::map_of(ab, 2)}, names);
  CHECK(k1 == encoded({Value::map_of(ba, 2)}, names));
  // Another process interns the names in another order: the same key bytes.
  FieldNames other;
  FieldId b2 = other.intern("b"), a2 = other.intern("a");
  Field ab2[2] = {{a2, Value::integer(1)}, {b2, Value::floating(2.0)}};
  CHECK(k1 == encoded({Value::map_of(ab2, 2)}, other));
  // More members than the encoder's stack buffer.
  std::vector<Field> many;
  for (int k = 40; k > 0; --k)
    many.push_back({names.intern("m" + std::to_string(k)), Value::integer(k)});
  std::string forward = encoded({Value::map_of(many.data(), 40)}, names);
  std::reverse(many.begin(), many.end());
  CHECK(forward == encoded({Value::map_of(many.data(), 40)}, names));
  check_round_trip(forward);
}

TEST_CASE("decode_key gives back the key's values", "[state][key_group]") {
  FieldNames names;
  Value inner[3] = {Value::string("deep"), Value(), Value::floating(-1.25)};
  Field members[2] = {{names.intern("k"), Value::array_of(inner, 3)},
                      {names.intern("j"), Value::boolean(true)}};
  Value key[] = {Value::string("user-1"),
                 Value::integer(std::numeric_limits<std::int64_t>::min()),
                 Value::integer(std::numeric_limits<std::int64_t>::max()),
                 Value::floating(4.0),
                 Value::floating(1e300),
                 Value::map_of(members, 2),
                 Value::string(std::string_view("\0\xff", 2))};
  std::string bytes;
  encode_key(key, names, bytes);

  FieldNames fresh;
  Arena arena;
  auto decoded = decode_key(bytes, fresh, arena);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->size() == std::size(key));
  CHECK((*decoded)[0].str() == "user-1");
  CHECK((*decoded)[1].i == std::numeric_limits<std::int64_t>::min());
  CHECK((*decoded)[2].i == std::numeric_limits<std::int64_t>::max());
  CHECK((*decoded)[3].kind == Kind::Int); // integral floats come back as ints
  CHECK((*decoded)[3].i == 4);
  CHECK((*decoded)[4].f == 1e300);
  const Value& m = (*decoded)[5];
  REQUIRE(m.kind == Kind::Map);
  REQUIRE(m.size == 2);
  CHECK(fresh.name(m.map[0].name) == "j"); // in name order
  CHECK(fresh.name(m.map[1].name) == "k");
  CHECK(m.map[1].value.array[2].f == -1.25);
  CHECK((*decoded)[6].str() == std::string_view("\0\xff", 2));
  // The decoded values do not point into the key bytes.
  std::string copy = bytes;
  bytes.assign(bytes.size(), 'x');
  CHECK((*decoded)[0].str() == "user-1");
  check_round_trip(copy);
}

TEST_CASE("decode_key rejects malformed bytes", "[state][key_group]") {
  auto rejects = [](const std::string& bytes) {
    FieldNames names;
    Arena arena;
    auto r = decode_key(bytes, names, arena);
    INFO(hex(bytes));
    CHECK_FALSE(r.ok());
    return r.ok() ? std::string() : r.error();
  };
  rejects("");                                // no count
  rejects(unhex("01"));                       // missing value
  rejects(unhex("0107"));                     // unknown tag
  rejects(unhex("010102"));                   // bool 2
  rejects(unhex("0102"));                     // truncated int
  rejects(unhex("01028000"));                 // overlong varint
  rejects(unhex("0102ffffffffffffffffff02")); // varint beyond 64 bits
  rejects(unhex("0103000000000000"));         // truncated float
  rejects(unhex("01030000000000000040"));     // 2.0 as a float: must be an int
  rejects(unhex("0103010000000000f87f"));     // a NaN not in canonical form
  rejects(unhex("01040561"));                 // string longer than the bytes
  rejects(unhex("0105ffffffff0f"));           // huge array count
  rejects(unhex("010602016200016100"));       // map members out of order
  rejects(unhex("010400"
                "00"));     // a byte after the key
  rejects(unhex("020100")); // second value missing
  CHECK(rejects(unhex("0204")).find("key:") == 0);
  // Nesting beyond the limit.
  std::string deep = "\x01";
  for (int k = 0; k < key_codec_max_depth + 1; ++k)
    deep += "\x05\x01";
  deep += '\0';
  rejects(deep);
  // Every strict prefix of a valid key is rejected.
  FieldNames names;
  Field m[1] = {{names.intern("name"), Value::string("value")}};
  Value arr[2] = {Value::floating(0.5), Value::map_of(m, 1)};
  std::string full = encoded({Value::string("abc"), Value::array_of(arr, 2)}, names);
  for (std::size_t n = 0; n < full.size(); ++n)
    rejects(full.substr(0, n));
}

TEST_CASE("decode_key on random bytes never crashes and accepts only canonical keys",
          "[state][key_group]") {
  std::mt19937_64 rng(7);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string bytes(rng() % 24, '\0');
    for (auto& c : bytes) {
      // Mostly small bytes, so that tags and counts are often valid.
      std::uint64_t r = rng();
      c = static_cast<char>(r % 4 == 0 ? r >> 8 : (r >> 8) % 8);
    }
    FieldNames names;
    Arena arena;
    auto decoded = decode_key(bytes, names, arena);
    if (!decoded.ok()) continue;
    ++accepted;
    std::string again;
    encode_key(*decoded, names, again);
    INFO(hex(bytes));
    CHECK(again == bytes);
  }
  CHECK(accepted > 100);
}

TEST_CASE("key group ranges tile 0 to maxP and invert exactly", "[state][key_group]") {
  std::vector<std::uint32_t> max_ps;
  for (std::uint32_t m = 1; m <= 70; ++m)
    max_ps.push_back(m);
  for (std::uint32_t m :
       {100u, 127u, 128u, 129u, 255u, 256u, 333u, 500u, 720u, 1000u, 1023u, 1024u})
    max_ps.push_back(m);
  for (std::uint32_t m : max_ps) {
    for (int p = 1; p <= static_cast<int>(m); ++p) {
      std::uint32_t expected_first = 0;
      for (int i = 0; i < p; ++i) {
        KeyGroupRange r = key_group_range(i, p, m);
        // Contiguous, non-empty, in subtask order; the last one ends at maxP.
        if (r.first != expected_first || r.size() == 0) {
          FAIL("maxP " << m << " p " << p << " subtask " << i << ": [" << r.first << ", " << r.end
                       << ")");
        }
        expected_first = r.end;
        for (std::uint32_t kg = r.first; kg < r.end; ++kg) {
          if (subtask_for_key_group(kg, p, m) != i || !r.contains(kg))
            FAIL("maxP " << m << " p " << p << " kg " << kg << " owner "
                         << subtask_for_key_group(kg, p, m) << " expected " << i);
        }
      }
      if (expected_first != m) FAIL("maxP " << m << " p " << p << " ends at " << expected_first);
    }
  }
  // The formula of ARCHITECTURE.md, spelled out once.
  CHECK(key_group_range(0, 3, 128) == KeyGroupRange{0, 42});
  CHECK(key_group_range(1, 3, 128) == KeyGroupRange{42, 85});
  CHECK(key_group_range(2, 3, 128) == KeyGroupRange{85, 128});
  CHECK(key_group_range(0, 1, 128) == KeyGroupRange{0, 128});
  // The largest max_parallelism, where i * maxP needs more than 32 bits of headroom checks.
  for (int p : {1, 3, 7, 1000, 32767, 32768}) {
    std::uint32_t first = 0;
    for (int i = 0; i < p; i += (p > 100 ? 97 : 1)) {
      KeyGroupRange r = key_group_range(i, p, max_key_groups);
      CHECK(subtask_for_key_group(r.first, p, max_key_groups) == i);
      CHECK(subtask_for_key_group(r.end - 1, p, max_key_groups) == i);
      if (i == 0) CHECK(r.first == first);
    }
    CHECK(key_group_range(p - 1, p, max_key_groups).end == max_key_groups);
  }
}

TEST_CASE("key_group_of is the hash modulo maxP", "[state][key_group]") {
  CHECK(key_group_of(0, 128) == 0);
  CHECK(key_group_of(0xFFFFFFFFFFFFFFFFULL, 128) == 127);
  CHECK(key_group_of(0xFFFFFFFFFFFFFFFFULL, 1000) == 0xFFFFFFFFFFFFFFFFULL % 1000);
  CHECK(key_group_of(12345, 1) == 0);
  // Keys spread evenly over the key groups.
  std::vector<int> count(128);
  std::string k;
  FieldNames names;
  for (int i = 0; i < 128000; ++i) {
    Value v = Value::integer(i);
    encode_key(std::span<const Value>(&v, 1), names, k);
    ++count[key_group_of(hash_key_bytes(k), 128)];
  }
  for (int c : count)
    CHECK((c > 850 && c < 1150));
}

// Keyed maps and windows take the key group by KeyGroupOf, a mask for a power of two: it must
// give key_group_of's group for every hash and max_parallelism.
TEST_CASE("KeyGroupOf equals key_group_of", "[state][key_group]") {
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> hashes = {0, 1, 127, 128, 0xFFFFFFFFFFFFFFFFULL, 0x8000000000000000ULL};
  for (int k = 0; k < 2000; ++k) hashes.push_back(rng());
  for (std::uint32_t maxp : {1u, 2u, 3u, 7u, 64u, 100u, 128u, 1000u, 4096u, 32767u, 32768u}) {
    const KeyGroupOf group_of(maxp);
    CHECK(group_of.max_parallelism() == maxp);
    for (std::uint64_t h : hashes) {
      INFO(maxp << " " << h);
      REQUIRE(group_of(h) == key_group_of(h, maxp));
    }
  }
}

// Windows append the keys of a batch one after another into one buffer: append_key must add
// exactly encode_key's bytes, scalars and containers alike, and keep what was there.
TEST_CASE("append_key appends encode_key's bytes", "[state][key_group]") {
  FieldNames names;
  Value elements[2] = {Value::integer(1), Value::string("x")};
  Field members[2] = {{names.intern("b"), Value::boolean(true)}, {names.intern("a"), Value()}};
  const std::string long_text(300, 'q');
  const std::vector<std::vector<Value>> keys = {
      {},
      {Value::string("u123456")},
      {Value::string(long_text), Value::integer(-5)},
      {Value::floating(2.5), Value::floating(3.0), Value::boolean(false), Value()},
      {Value::array_of(elements, 2), Value::map_of(members, 2)},
  };
  std::string appended = "prefix";
  std::string expected = "prefix";
  // The ByteScratch overload too, through enough keys that its buffer moves as it grows.
  ByteScratch scratch;
  std::memcpy(scratch.grow(6), "prefix", 6);
  for (int round = 0; round < 20; ++round) {
    for (const auto& key : keys) {
      std::string one;
      encode_key(key, names, one);
      expected += one;
      append_key(key, names, appended);
      append_key(key, names, scratch);
      REQUIRE(hex(appended) == hex(expected));
      REQUIRE(hex(std::string(scratch.view())) == hex(expected));
    }
  }
  scratch.truncate(6);
  CHECK(scratch.view() == "prefix");
}
