#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "state/json_reader.hpp"
#include "state/json_scan.hpp"
#include "state/json_writer.hpp"

using namespace streamctl::state;

namespace {

// The scan by the table alone, byte by byte: what find_json_special must return.
const char* reference_special(const char* p, const char* end) {
  while (p < end && !json_special[static_cast<unsigned char>(*p)]) ++p;
  return p;
}

// Two pages, the second made inaccessible: a string placed to end at the first page's end
// faults if any load reads past it (the scan's promise that it needs no padded buffer).
class GuardedPage {
public:
  GuardedPage() {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* m = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    base_ = static_cast<char*>(m);
    REQUIRE(mprotect(base_ + page_, page_, PROT_NONE) == 0);
  }
  ~GuardedPage() { munmap(base_, 2 * page_); }
  GuardedPage(const GuardedPage&) = delete;
  GuardedPage& operator=(const GuardedPage&) = delete;
  // `s` copied so that its last byte is the last byte of the readable page.
  const char* place(const std::string& s) {
    char* at = base_ + page_ - s.size();
    std::memcpy(at, s.data(), s.size());
    return at;
  }

private:
  std::size_t page_ = 0;
  char* base_ = nullptr;
};

} // namespace

TEST_CASE("the 8-byte scan marks exactly the bytes the table marks", "[json]") {
  // Every byte value at every position of a word, among bytes that are not special and bytes
  // that share their low 7 bits with a special one ('"' | 0x80, '\\' | 0x80, 0x9F).
  for (int c = 0; c < 256; ++c) {
    for (int at = 0; at < 8; ++at) {
      for (char filler : {'x', ' ', '~', '!', '#', '[', ']'}) {
        char bytes[8];
        std::memset(bytes, filler, 8);
        bytes[at] = static_cast<char>(c);
        std::uint64_t w;
        std::memcpy(&w, bytes, 8);
        std::uint64_t expected = 0;
        for (int k = 0; k < 8; ++k)
          if (json_special[static_cast<unsigned char>(bytes[k])]) expected |= 0x80ULL << (8 * k);
        INFO("byte " << c << " at " << at << " among '" << filler << "'");
        CHECK(json_special_bytes(w) == expected);
      }
    }
  }
}

TEST_CASE("find_json_special agrees with the table on random text of every length", "[json]") {
  std::mt19937_64 rng(7);
  // Mostly plain bytes, so that the special ones fall at every offset of the 16- and 8-byte steps.
  const std::string alphabet = "abcxyz0189 /:{}[],\"\\\x01\x1f\x7f\x80\xa2\xdc\xff";
  for (int round = 0; round < 20000; ++round) {
    std::size_t len = rng() % 48;
    std::string s(len, 'a');
    for (auto& c : s)
      if (rng() % 6 == 0) c = alphabet[rng() % alphabet.size()];
    const char* end = s.data() + s.size();
    INFO(s);
    REQUIRE(find_json_special(s.data(), end) == reference_special(s.data(), end));
  }
}

TEST_CASE("strings of 7, 8, 15, 16 and 17 bytes with a quote, backslash or control byte at each "
          "position",
          "[json]") {
  FieldNames names;
  for (std::size_t len : {7, 8, 9, 15, 16, 17, 23, 24, 25}) {
    for (std::size_t at = 0; at < len; ++at) {
      for (char special : {'"', '\\', '\x01', '\x1f', '\x80'}) {
        std::string s(len, 'y');
        s[at] = special;
        const char* end = s.data() + s.size();
        INFO("length " << len << ", byte " << int(static_cast<unsigned char>(special)) << " at "
                       << at);
        CHECK(find_json_special(s.data(), end) == s.data() + at);
        // The same byte escaped in a JSON string that ends the line, so that the scan for its
        // closing quote runs through the tail.
        std::string raw(len, 'y');
        std::string expected = raw;
        if (special == '"' || special == '\\') {
          raw.replace(at, 1, std::string("\\") + special);
          expected[at] = special;
        } else {
          raw.replace(at, 1, "\\u0001");
          expected[at] = '\x01';
        }
        Batch batch;
        std::string text = "\"" + raw + "\"";
        auto r = parse_json_value(text, names, batch);
        REQUIRE(r.ok());
        CHECK(r->str() == expected);
        // Raw, a control byte is refused at its column and a quote ends the string early.
        if (special == '\x01' || special == '\x1f') {
          std::string bad = "\"" + s + "\"";
          auto e = parse_json_value(bad, names, batch);
          REQUIRE_FALSE(e.ok());
          CHECK(e.error().find("raw control character") != std::string::npos);
          CHECK(e.error().find("at column " + std::to_string(at + 2)) != std::string::npos);
        }
      }
    }
  }
}

TEST_CASE("the scan reads no byte past the end of its range (guard page)", "[json]") {
  GuardedPage page;
  for (std::size_t len = 0; len <= 40; ++len) {
    std::string plain(len, 'p');
    const char* at = page.place(plain);
    CHECK(find_json_special(at, at + len) == at + len);
    if (len > 0) {
      std::string last = plain;
      last[len - 1] = '"';
      at = page.place(last);
      CHECK(find_json_special(at, at + len) == at + len - 1);
    }
  }
  // A whole line that ends at the page's end, in a string, a key and a number, and a line
  // whose string is unterminated at the end: parsed without reading past the line.
  FieldNames names;
  for (std::size_t pad = 0; pad < 20; ++pad) {
    std::string name(pad, 'k');
    for (const std::string& line :
         {"{\"" + name + "\":\"" + std::string(pad, 'v') + "\"}",
          "{\"a\":1,\"" + name + "x\":" + std::to_string(pad * 1234567) + "}"}) {
      const char* at = page.place(line);
      Batch batch;
      RecordBuilder b;
      JsonReader reader;
      INFO(line);
      CHECK(reader.parse_record(std::string_view(at, line.size()), names, batch, b).ok());
    }
    std::string open = "{\"a\":\"" + std::string(pad, 'v');
    const char* at = page.place(open);
    Batch batch;
    RecordBuilder b;
    JsonReader reader;
    auto r = reader.parse_record(std::string_view(at, open.size()), names, batch, b);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == "unterminated string at column 6");
  }
}

TEST_CASE("equal_short compares like memcmp at every length up to 40", "[json]") {
  for (std::size_t n = 0; n <= 40; ++n) {
    std::string a(n, 'q');
    CHECK(equal_short(a.data(), a.data(), n));
    for (std::size_t at = 0; at < n; ++at) {
      std::string b = a;
      b[at] = 'r';
      INFO("length " << n << ", differing at " << at);
      CHECK_FALSE(equal_short(a.data(), b.data(), n));
    }
  }
}

TEST_CASE("a line's keys predicted from the line before compare every byte", "[json]") {
  // The prediction compares the previous line's key with the bytes at the same position; a key
  // that differs in one byte (of keys 1 to 17 bytes long) is a different field.
  for (std::size_t n = 1; n <= 17; ++n) {
    for (std::size_t at = 0; at < n; ++at) {
      FieldNames names;
      JsonReader reader;
      reader.expect_repeated_keys();
      std::string k1(n, 'k');
      std::string k2 = k1;
      k2[at] = 'j';
      std::string l1 = "{\"" + k1 + "\":1}";
      std::string l2 = "{\"" + k2 + "\":2}";
      Batch batch;
      RecordBuilder b;
      REQUIRE(reader.parse_record(l1, names, batch, b).ok());
      b.reset();
      REQUIRE(reader.parse_record(l2, names, batch, b).ok());
      b.finish(batch);
      REQUIRE(batch.size() == 1);
      INFO("length " << n << ", differing at " << at);
      CHECK(names.name(batch[0].fields[0].name) == k2);
    }
  }
}

TEST_CASE("write_int writes what std::to_chars writes", "[json]") {
  std::mt19937_64 rng(11);
  auto check = [](std::int64_t v) {
    char a[24];
    char b[24];
    std::memset(b, '#', sizeof b);
    auto ra = std::to_chars(a, a + sizeof a, v);
    char* rb = write_int(v, b);
    INFO(v);
    REQUIRE(std::string(a, ra.ptr) == std::string(b, rb));
    // Nothing past the text: generators size an arena allocation by it.
    REQUIRE(std::all_of(rb, b + sizeof b, [](char c) { return c == '#'; }));
  };
  check(0);
  check(std::numeric_limits<std::int64_t>::min());
  check(std::numeric_limits<std::int64_t>::max());
  // Every power of ten and its neighbours (where the digit count changes), both signs.
  // (10^18 is the last that int64 holds: p is multiplied only while another follows.)
  std::int64_t p = 1;
  for (int k = 0; k <= 18; ++k) {
    for (std::int64_t v : {p - 1, p, p + 1}) {
      check(v);
      check(-v);
    }
    if (k < 18) p *= 10;
  }
  // Every value of each 4-digit half of an eight-digit chunk beside a few of the other, in the
  // low chunk, the high one and alone; and every number below 100,000.
  for (std::int64_t half = 0; half < 10000; ++half) {
    for (std::int64_t other : {0, 1, 99, 100, 5050, 9999}) {
      check(half * 10000 + other);
      check(other * 10000 + half);
      check((half * 10000 + other) * 100000000 + 12345678);
      check(-((other * 10000 + half) * 100000000 + 99999999));
    }
  }
  for (std::int64_t v = 0; v < 100000; ++v) check(v);
  for (int k = 0; k < 100000; ++k) {
    auto v = static_cast<std::int64_t>(rng());
    check(v);
    check(v >> (rng() % 64)); // every magnitude
    // Runs of zeros inside and at the end of the 8-digit chunks that write_int writes at once.
    static constexpr std::int64_t tens[] = {10, 1000, 10000, 100000000, 1000000000, 10000000000000};
    const std::int64_t ten = tens[rng() % std::size(tens)];
    check((v >> (rng() % 64)) / ten * ten);
    check((v >> (rng() % 64)) / ten * ten + static_cast<std::int64_t>(rng() % 10));
  }
}

TEST_CASE("integers of every length read as the digit loop reads them, 8 digits at a time or not",
          "[json]") {
  // Guards the 8-digit step of number(): runs of 1 to 25 digits, followed by nothing, a
  // non-digit that is a digit's neighbour in ASCII ('/' and ':'), or more text, and ints at the
  // edges of int64 (20 digits and more are floats).
  FieldNames names;
  std::mt19937_64 rng(5);
  for (std::size_t n = 1; n <= 25; ++n) {
    for (int round = 0; round < 50; ++round) {
      std::string digits(n, '0');
      for (auto& c : digits) c = static_cast<char>('0' + rng() % 10);
      if (n > 1 && digits[0] == '0') digits[0] = '1' + static_cast<char>(rng() % 9);
      for (const char* after : {"", "]", ",0]", " "}) {
        bool in_array = after[0] == ']' || after[0] == ',';
        std::string text = (in_array ? "[" : "") + digits + after;
        Batch batch;
        auto r = parse_json_value(text, names, batch);
        INFO(text);
        REQUIRE(r.ok());
        const Value& v = in_array ? r->array[0] : *r;
        std::int64_t expected = 0;
        auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + n, expected);
        if (ec == std::errc()) {
          REQUIRE(v.kind == Kind::Int);
          CHECK(v.i == expected);
          Batch neg_batch;
          auto neg = parse_json_value("-" + digits, names, neg_batch);
          REQUIRE(neg.ok());
          REQUIRE(neg->kind == Kind::Int);
          CHECK(neg->i == -expected);
        } else {
          CHECK(v.kind == Kind::Float);
        }
      }
      for (const char* bad : {"/", ":"}) {
        Batch batch;
        std::string text = digits + bad + "1234567";
        INFO(text);
        auto r = parse_json_value(text, names, batch);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error() == "trailing characters at column " + std::to_string(n + 1));
      }
    }
  }
  for (const char* edge : {"9223372036854775807", "-9223372036854775808", "12345678",
                           "123456781234567812"}) {
    Batch batch;
    auto r = parse_json_value(edge, names, batch);
    REQUIRE(r.ok());
    REQUIRE(r->kind == Kind::Int);
    CHECK(std::to_string(r->i) == edge);
  }
  for (const char* big : {"9223372036854775808", "-9223372036854775809", "18446744073709551616",
                          "99999999999999999999"}) {
    Batch batch;
    auto r = parse_json_value(big, names, batch);
    REQUIRE(r.ok());
    CHECK(r->kind == Kind::Float);
  }
}
