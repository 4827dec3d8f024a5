#include <catch2/catch.hpp>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "state/json_reader.hpp"
#include "state/json_writer.hpp"

using namespace streamctl::state;
using streamctl::Result;

namespace {

// Parses `text` as one record into `batch`, which retains a copy of the text.
Result<void> parse_into(std::string_view text, FieldNames& names, Batch& batch) {
  auto owned = std::make_shared<std::string>(text);
  batch.retain(owned);
  RecordBuilder b;
  auto r = parse_json_record(*owned, names, batch, b);
  if (r) b.finish(batch);
  return r;
}

std::string parse_error(std::string_view text) {
  FieldNames names;
  Batch batch;
  auto r = parse_into(text, names, batch);
  REQUIRE_FALSE(r.ok());
  return r.error();
}

Value parse_one(std::string_view text, FieldNames& names, Batch& batch) {
  auto owned = std::make_shared<std::string>(text);
  batch.retain(owned);
  auto r = parse_json_value(*owned, names, batch);
  INFO(text);
  REQUIRE(r.ok());
  return *r;
}

std::string to_json(const Value& v, const FieldNames& names) {
  std::string out;
  append_json_value(v, names, out);
  return out;
}

} // namespace

TEST_CASE("a flat record parses into typed fields in order", "[json]") {
  FieldNames names;
  Batch batch;
  REQUIRE(parse_into(R"( {"ts":1700000000000,"user":"u123","ok":true,"x":null,"f":1.5,"n":false} )",
                     names, batch));
  REQUIRE(batch.size() == 1);
  const Record& r = batch[0];
  REQUIRE(r.size == 6);
  CHECK(names.name(r.fields[0].name) == "ts");
  CHECK(r.fields[0].value.kind == Kind::Int);
  CHECK(r.fields[0].value.i == 1700000000000);
  CHECK(r.fields[1].value.str() == "u123");
  CHECK(r.fields[2].value.kind == Kind::Bool);
  CHECK(r.fields[2].value.b);
  CHECK(r.fields[3].value.is_null());
  CHECK(r.fields[4].value.kind == Kind::Float);
  CHECK(r.fields[4].value.f == 1.5);
  CHECK(r.fields[5].value.kind == Kind::Bool);
  CHECK_FALSE(r.fields[5].value.b);
}

TEST_CASE("strings without escapes point into the text, escaped ones into the arena", "[json]") {
  FieldNames names;
  Batch batch;
  std::string text = R"({"plain":"abc","esc":"a\nb"})";
  RecordBuilder b;
  REQUIRE(parse_json_record(text, names, batch, b));
  const Value& plain = b.fields()[0].value;
  const Value& esc = b.fields()[1].value;
  CHECK(plain.s >= text.data());
  CHECK(plain.s < text.data() + text.size());
  CHECK((esc.s < text.data() || esc.s >= text.data() + text.size()));
  std::fill(text.begin(), text.end(), 'z');
  CHECK(plain.str() == "zzz");
  CHECK(esc.str() == "a\nb");
}

// The reader marks a string json_plain when its text needs no escape, so that a JSON writer
// copies it without scanning it again; a wrong mark would write an unescaped quote or a raw
// control byte. Every byte value at every offset of short strings, and strings longer than the
// scanner's 16-byte step.
TEST_CASE("the reader marks plain exactly the strings with nothing to escape", "[json]") {
  std::vector<std::string> bodies = {"", "abc", "a b", "https://www.nexmark.com/item.htm?query=1",
                                     std::string(40, 'x'), "caf\xc3\xa9", "a\\nb", "a\\\"b",
                                     "\\u0041"};
  for (int c = 0; c < 256; ++c) {
    if (c == '"' || c == '\\') continue; // would end the string or start an escape
    for (std::size_t at : {0u, 7u, 15u, 16u, 30u}) {
      std::string body(31, 'k');
      body[at] = static_cast<char>(c);
      bodies.push_back(body);
    }
  }
  for (const std::string& body : bodies) {
    FieldNames names;
    Batch batch;
    auto owned = std::make_shared<std::string>("{\"s\":\"" + body + "\"}");
    batch.retain(owned);
    RecordBuilder b;
    auto r = parse_json_record(*owned, names, batch, b);
    if (!r) continue; // raw control bytes and bad UTF-8 are bad records: nothing to mark
    INFO("body " << body);
    const Value& v = b.fields()[0].value;
    const bool raw = body.find('\\') == std::string::npos;
    CHECK(v.is_json_plain() == (raw && Value::is_plain_text(v.str())));
    if (v.is_json_plain()) CHECK(Value::is_plain_text(v.str()));
  }
}

TEST_CASE("escapes decode, including \\u and surrogate pairs, to UTF-8", "[json]") {
  FieldNames names;
  Batch batch;
  CHECK(parse_one(R"("q\"b\\s\/\b\f\n\r\t")", names, batch).str() == "q\"b\\s/\b\f\n\r\t");
  CHECK(parse_one(R"("\u0041\u00e9\u20AC")", names, batch).str() == "A\xC3\xA9\xE2\x82\xAC");
  CHECK(parse_one(R"("\ud83d\ude00!")", names, batch).str() == "\xF0\x9F\x98\x80!");
  CHECK(parse_one(R"("\u0000")", names, batch).str() == std::string_view("\0", 1));
  // Lone surrogates become U+FFFD rather than failing the record.
  CHECK(parse_one(R"("\ud83dx")", names, batch).str() == "\xEF\xBF\xBDx");
  CHECK(parse_one(R"("\ude00")", names, batch).str() == "\xEF\xBF\xBD");
  CHECK(parse_one(R"("\ud83d\u0041")", names, batch).str() == "\xEF\xBF\xBD"
                                                                 "A");
}

TEST_CASE("escaped keys are decoded before interning", "[json]") {
  FieldNames names;
  Batch batch;
  REQUIRE(parse_into(R"({"a\u0062":1,"q\"":2})", names, batch));
  CHECK(batch[0].find(names.intern("ab"))->i == 1);
  CHECK(batch[0].find(names.intern("q\""))->i == 2);
}

TEST_CASE("the string scanner finds quotes and backslashes at every offset", "[json]") {
  // Guards the 16-byte scanning loop and its scalar tail: every length and escape position.
  FieldNames names;
  for (std::size_t len = 0; len < 40; ++len) {
    for (std::size_t at = 0; at <= len; ++at) {
      std::string raw(len, 'x');
      std::string expected = raw;
      if (at < len) {
        raw.replace(at, 1, "\\\"");
        expected[at] = '"';
      }
      std::string text = "\"" + raw + "\"" + std::string(at % 3, ' ');
      Batch batch;
      auto r = parse_json_value(text, names, batch);
      INFO(text);
      REQUIRE(r.ok());
      CHECK(r->str() == expected);
    }
  }
}

TEST_CASE("nested arrays and objects are built in the arena", "[json]") {
  FieldNames names;
  Batch batch;
  REQUIRE(parse_into(R"({"a":[1,[2,3],{"b":[]},{}],"m":{"x":{"y":"z"},"e":[{"k":1},{"k":2}]}})",
                     names, batch));
  const Record& r = batch[0];
  const Value& a = *r.find(names.intern("a"));
  REQUIRE(a.kind == Kind::Array);
  REQUIRE(a.size == 4);
  CHECK(a.array[0].i == 1);
  REQUIRE(a.array[1].kind == Kind::Array);
  CHECK(a.array[1].size == 2);
  CHECK(a.array[1].array[1].i == 3);
  REQUIRE(a.array[2].kind == Kind::Map);
  CHECK(a.array[2].map[0].value.kind == Kind::Array);
  CHECK(a.array[2].map[0].value.size == 0);
  CHECK(a.array[3].kind == Kind::Map);
  CHECK(a.array[3].size == 0);
  const Value& m = *r.find(names.intern("m"));
  REQUIRE(m.kind == Kind::Map);
  REQUIRE(m.size == 2);
  CHECK(names.name(m.map[0].name) == "x");
  CHECK(m.map[0].value.map[0].value.str() == "z");
  const Value& e = m.map[1].value;
  REQUIRE(e.size == 2);
  CHECK(e.array[1].map[0].value.i == 2);
  CHECK(to_json(m, names) == R"({"x":{"y":"z"},"e":[{"k":1},{"k":2}]})");
}

TEST_CASE("whitespace is allowed between every token", "[json]") {
  FieldNames names;
  Batch batch;
  REQUIRE(parse_into(" \t{ \"a\" : [ 1 , { \"b\" : null } ] , \"c\" : \"d\" }\r\n", names, batch));
  std::string out;
  append_json(batch[0], names, out);
  CHECK(out == R"({"a":[1,{"b":null}],"c":"d"})");
}

TEST_CASE("integers that fit int64 are ints, other numbers floats", "[json]") {
  FieldNames names;
  Batch batch;
  auto num = [&](std::string_view text) { return parse_one(text, names, batch); };
  Value max = num("9223372036854775807");
  CHECK(max.kind == Kind::Int);
  CHECK(max.i == std::numeric_limits<std::int64_t>::max());
  Value min = num("-9223372036854775808");
  CHECK(min.kind == Kind::Int);
  CHECK(min.i == std::numeric_limits<std::int64_t>::min());
  Value over = num("9223372036854775808");
  CHECK(over.kind == Kind::Float);
  CHECK(over.f == 9223372036854775808.0);
  Value under = num("-9223372036854775809");
  CHECK(under.kind == Kind::Float);
  CHECK(under.f == -9223372036854775808.0);
  Value huge = num("123456789012345678901234567890");
  CHECK(huge.kind == Kind::Float);
  CHECK(huge.f == 1.2345678901234568e29);
  CHECK(num("0").kind == Kind::Int);
  CHECK(num("-0").i == 0);
  CHECK(num("1234567890123456789").i == 1234567890123456789);
  CHECK(num("1.5").f == 1.5);
  CHECK(num("-0.25").f == -0.25);
  Value e = num("1e3");
  CHECK(e.kind == Kind::Float);
  CHECK(e.f == 1000.0);
  CHECK(num("2E-2").f == 0.02);
  CHECK(num("1.7976931348623157e308").f == std::numeric_limits<double>::max());
  CHECK(num("5e-324").f == std::numeric_limits<double>::denorm_min());
  Value tiny = num("1e-400");
  CHECK(tiny.kind == Kind::Float);
  CHECK(tiny.f == 0.0);
  CHECK(num("0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
             "00000000000000000000000000000000000000000000000000000000000000000000000000000000000"
             "00000000000000000000000000000000000000000000000000000000000000000000000000000000000"
             "00000000000000000000000000000000000000000000000000000000000000000000000000000000001")
            .f == 0.0);
}

// The reader takes the digits of a number eight bytes at a time where eight are left, the last
// few of a run too: every length of 1 to 20 digits, with each thing that may follow it, at
// every distance from the end of the text, must read as std::from_chars reads it.
TEST_CASE("integers of every length read alike at every distance from the end", "[json]") {
  std::mt19937_64 rng(20261207);
  for (int length = 1; length <= 20; ++length)
    for (const char* after : {"", ",\"b\":1", "}", ".5", "e2", "]"})
      for (int pad = 0; pad < 9; ++pad) {
        std::string digits(1, static_cast<char>('1' + rng() % 9));
        for (int k = 1; k < length; ++k) digits += static_cast<char>('0' + rng() % 10);
        const bool negative = rng() % 2 == 0;
        const std::string number = (negative ? "-" : "") + digits + after;
        // As a record's field (the object reader) and as a value alone (the end of the text
        // right after the digits, or `pad` bytes of a longer field after them).
        const std::string record =
            "{\"a\":" + (negative ? "-" : std::string()) + digits + ",\"p\":\"" + std::string(pad, 'x') + "\"}";
        FieldNames names;
        Batch batch;
        INFO(record);
        REQUIRE(parse_into(record, names, batch).ok());
        const Value& got = batch[0].fields[0].value;
        const std::string text = (negative ? "-" : "") + digits;
        std::int64_t as_int = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), as_int);
        if (ec == std::errc() && end == text.data() + text.size()) {
          REQUIRE(got.kind == Kind::Int);
          CHECK(got.i == as_int);
        } else {
          double as_float = 0;
          std::from_chars(text.data(), text.data() + text.size(), as_float);
          REQUIRE(got.kind == Kind::Float);
          CHECK(got.f == as_float);
        }
        if (std::string_view(after).empty() || after[0] == '.' || after[0] == 'e') {
          Value alone = parse_one(number, names, batch);
          double expected = 0;
          std::from_chars(number.data(), number.data() + number.size(), expected);
          CHECK((alone.kind == Kind::Int ? static_cast<double>(alone.i) : alone.f) == expected);
        }
      }
}

TEST_CASE("malformed numbers are errors with their column", "[json]") {
  CHECK(parse_error(R"({"a":01})") == "invalid number (leading zero) at column 6");
  CHECK(parse_error(R"({"a":1.})") == "invalid number at column 6");
  CHECK(parse_error(R"({"a":-})") == "invalid number at column 6");
  CHECK(parse_error(R"({"a":1e})") == "invalid number at column 6");
  CHECK(parse_error(R"({"a":1e+})") == "invalid number at column 6");
  CHECK(parse_error(R"({"a":.5})") == "unexpected character '.' at column 6");
  CHECK(parse_error(R"({"a":+1})") == "unexpected character '+' at column 6");
  CHECK(parse_error(R"({"a":1e400})") == "number out of range at column 6");
  CHECK(parse_error(R"({"a":-2e308})") == "number out of range at column 6");
  CHECK(parse_error(R"({"a":12abc})") == "expected ',' or '}' at column 8");
}

TEST_CASE("every syntax error names its reason and byte column", "[json]") {
  CHECK(parse_error(R"({"a" 1})") == "expected ':' at column 6");
  CHECK(parse_error(R"({"a":1 "b":2})") == "expected ',' or '}' at column 8");
  CHECK(parse_error(R"({"a":"abc)") == "unterminated string at column 6");
  CHECK(parse_error(R"({"a":"ab\"c)") == "unterminated string at column 6");
  CHECK(parse_error(R"({"a":"abc\)") == "unterminated string at column 6");
  CHECK(parse_error(R"({"abc)") == "unterminated string at column 2");
  CHECK(parse_error("[1,2]") == "expected a JSON object, got an array");
  CHECK(parse_error(R"("s")") == "expected a JSON object, got a string");
  CHECK(parse_error("42") == "expected a JSON object, got a number");
  CHECK(parse_error("null") == "expected a JSON object, got null");
  CHECK(parse_error("true") == "expected a JSON object, got a boolean");
  CHECK(parse_error("x") == "expected a JSON object: unexpected character 'x' at column 1");
  CHECK(parse_error("") == "expected a JSON object, got an empty line");
  CHECK(parse_error("   ") == "expected a JSON object, got an empty line");
  CHECK(parse_error(R"({"a":1} x)") == "trailing characters at column 9");
  CHECK(parse_error(R"({"a":1}})") == "trailing characters at column 8");
  CHECK(parse_error(R"({"a":tru})") == "unexpected character 't' at column 6");
  CHECK(parse_error(R"({"a":nul)") == "unexpected character 'n' at column 6");
  CHECK(parse_error(R"({"a":1,})") == "expected a string key at column 8");
  CHECK(parse_error(R"({a:1})") == "expected a string key at column 2");
  CHECK(parse_error(R"({"a":[1 2]})") == "expected ',' or ']' at column 9");
  CHECK(parse_error(R"({"a":[1,]})") == "unexpected character ']' at column 9");
  CHECK(parse_error(R"({"a":"\q"})") == "invalid escape '\\q' at column 7");
  CHECK(parse_error(R"({"a":"\u12G4"})") == "invalid \\u escape at column 7");
  CHECK(parse_error(R"({"a":"\u12"})") == "invalid \\u escape at column 7");
  CHECK(parse_error(R"({"a":)") == "unexpected end of input at column 6");
  CHECK(parse_error(R"({"a":1)") == "expected ',' or '}' at column 7");
  CHECK(parse_error("{") == "unexpected end of input at column 2");
  CHECK(parse_error("{\"a\":\x01}") == "unexpected byte 0x1 at column 6");
}

TEST_CASE("nesting is limited to 128 levels without overflowing the stack", "[json]") {
  FieldNames names;
  auto nested = [](int levels) {
    return "{\"a\":" + std::string(static_cast<std::size_t>(levels - 1), '[') +
           std::string(static_cast<std::size_t>(levels - 1), ']') + "}";
  };
  {
    Batch batch;
    CHECK(parse_into(nested(128), names, batch));
  }
  CHECK(parse_error(nested(129)) == "nesting deeper than 128 levels at column 133");
  // Far deeper input fails the same way: no recursion past the limit.
  CHECK(parse_error(nested(100000)).starts_with("nesting deeper than 128 levels"));
  std::string objects = "{";
  for (int k = 0; k < 5000; ++k) objects += "\"k\":{";
  CHECK(parse_error(objects).starts_with("nesting deeper than 128 levels"));
  Batch batch;
  CHECK(parse_json_value(std::string(128, '[') + std::string(128, ']'), names, batch).ok());
  CHECK_FALSE(parse_json_value(std::string(129, '[') + std::string(129, ']'), names, batch).ok());
}

TEST_CASE("duplicate keys: the last value wins, at the first position", "[json]") {
  FieldNames names;
  Batch batch;
  REQUIRE(parse_into(R"({"a":1,"b":2,"a":3})", names, batch));
  std::string out;
  append_json(batch[0], names, out);
  CHECK(out == R"({"a":3,"b":2})");

  // Nested objects between the duplicates must not hide them (their own keys overlap).
  REQUIRE(parse_into(R"({"a":1,"o":{"a":2,"a":5,"z":{"a":0}},"a":3})", names, batch));
  out.clear();
  append_json(batch[1], names, out);
  CHECK(out == R"({"a":3,"o":{"a":5,"z":{"a":0}}})");

  // Big objects take the table path.
  std::string text = "{";
  for (int k = 0; k < 40; ++k) text += "\"k" + std::to_string(k) + "\":" + std::to_string(k) + ",";
  for (int k = 0; k < 40; k += 2) text += "\"k" + std::to_string(k) + "\":-" + std::to_string(k) + ",";
  text += "\"m\":{";
  for (int k = 0; k < 20; ++k) text += "\"j" + std::to_string(k % 10) + "\":" + std::to_string(k) + ",";
  text += "\"j0\":99}}";
  REQUIRE(parse_into(text, names, batch));
  const Record& r = batch[2];
  REQUIRE(r.size == 41);
  for (int k = 0; k < 40; ++k) {
    CHECK(names.name(r.fields[k].name) == "k" + std::to_string(k));
    CHECK(r.fields[k].value.i == (k % 2 == 0 ? -k : k));
  }
  const Value& m = r.fields[40].value;
  REQUIRE(m.size == 10);
  CHECK(m.map[0].value.i == 99);
  CHECK(m.map[9].value.i == 19);
}

TEST_CASE("a reader serving several FieldNames never mixes their ids", "[json]") {
  // Regression guard for the key cache: it must be checked against the FieldNames in use.
  JsonReader reader;
  FieldNames first;
  FieldNames second;
  second.intern("other");
  second.intern("names");
  Batch batch;
  RecordBuilder b;
  std::string text = R"({"user":1,"page":2})";
  REQUIRE(reader.parse_record(text, first, batch, b));
  CHECK(first.name(b.fields()[0].name) == "user");
  b.reset();
  REQUIRE(reader.parse_record(text, second, batch, b));
  CHECK(second.name(b.fields()[0].name) == "user");
  CHECK(second.name(b.fields()[1].name) == "page");
  b.reset();
  REQUIRE(reader.parse_record(text, first, batch, b));
  CHECK(first.name(b.fields()[1].name) == "page");
}

TEST_CASE("writer escapes per RFC 8259 and keeps floats floats", "[json]") {
  FieldNames names;
  auto json = [&](Value v) { return to_json(v, names); };
  CHECK(json(Value::string("a\"b\\c/\n\r\t\b\f\x01\x1f\x7f\xc3\xa9")) ==
        "\"a\\\"b\\\\c/\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\xc3\xa9\"");
  CHECK(json(Value::floating(2.0)) == "2.0");
  CHECK(json(Value::floating(-0.0)) == "-0.0");
  CHECK(json(Value::floating(0.1)) == "0.1");
  CHECK(json(Value::floating(1e20)) == "1e+20");
  CHECK(json(Value::floating(123456.0)) == "123456.0");
  CHECK(json(Value::floating(1.5e-7)) == "1.5e-07");
  CHECK(json(Value::floating(std::nan(""))) == "null");
  CHECK(json(Value::floating(std::numeric_limits<double>::infinity())) == "null");
  CHECK(json(Value::floating(-std::numeric_limits<double>::infinity())) == "null");
  CHECK(json(Value::integer(std::numeric_limits<std::int64_t>::min())) == "-9223372036854775808");
  CHECK(json(Value::boolean(false)) == "false");
  CHECK(json(Value::null()) == "null");
  CHECK(json(Value::array_of(nullptr, 0)) == "[]");
  CHECK(json(Value::map_of(nullptr, 0)) == "{}");
}

TEST_CASE("append_json appends one compact object without a newline", "[json]") {
  FieldNames names;
  RecordBuilder b;
  b.append(names.intern("a"), Value::integer(1));
  b.append(names.intern("b\n"), Value::string("x"));
  Batch batch;
  b.finish(batch);
  std::string out = "prefix";
  append_json(batch[0], names, out);
  CHECK(out == "prefix{\"a\":1,\"b\\n\":\"x\"}");
}

TEST_CASE("parse, write, parse gives equal records and identical text", "[json]") {
  const char* lines[] = {
      R"({"ts":1700000000000,"user":"u123","page":"/p/42","status":200,"bytes":5123})",
      R"({"s":"tab\tquote\"back\\slash\u0001nl\n","u":"\u00e9\ud83d\ude00"})",
      R"({"n":[1,-2,3.5,1e+100,-9223372036854775808,9223372036854775807],"b":[true,false,null]})",
      R"({"deep":{"a":{"b":{"c":[[[{"d":"e"}]]]}}},"empty":{},"ea":[]})",
      R"({"f":0.30000000000000004,"g":5e-324,"h":2.0,"i":-0.0})",
      R"({})",
  };
  for (const char* line : lines) {
    FieldNames names;
    Batch batch;
    INFO(line);
    REQUIRE(parse_into(line, names, batch));
    std::string out;
    append_json(batch[0], names, out);
    REQUIRE(parse_into(out, names, batch));
    const Record& a = batch[0];
    const Record& b = batch[1];
    CHECK(values_equal(Value::map_of(a.fields, a.size), Value::map_of(b.fields, b.size)));
    std::string again;
    append_json(batch[1], names, again);
    CHECK(again == out);
  }
}

TEST_CASE("floats survive write and parse bit for bit", "[json]") {
  std::mt19937_64 rng(42);
  FieldNames names;
  Batch batch;
  for (int k = 0; k < 20000; ++k) {
    std::uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (!std::isfinite(d)) continue;
    std::string text = to_json(Value::floating(d), names);
    auto r = parse_json_value(text, names, batch);
    INFO(text);
    REQUIRE(r.ok());
    REQUIRE(r->kind == Kind::Float);
    CHECK(std::memcmp(&r->f, &d, sizeof d) == 0);
  }
}

TEST_CASE("parse_json_value reads any value and rejects trailing text", "[json]") {
  FieldNames names;
  Batch batch;
  CHECK(parse_one(" 42 ", names, batch).i == 42);
  CHECK(parse_one(R"("s")", names, batch).str() == "s");
  CHECK(parse_one("[1,2]", names, batch).size == 2);
  CHECK(parse_one("null", names, batch).is_null());
  auto r = parse_json_value("1 2", names, batch);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "trailing characters at column 3");
  auto empty = parse_json_value("", names, batch);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error() == "expected a JSON value, got an empty line");
}

TEST_CASE("canonical_json sorts keys and prints equal numbers alike", "[json]") {
  FieldNames names;
  Batch batch;
  Value a = parse_one(R"({"b":2,"a":{"z":1.0,"y":[3,-0.0,0.5]},"c":"x"})", names, batch);
  Value b = parse_one(R"({"c":"x","a":{"y":[3.0,0,0.5],"z":1},"b":2.0})", names, batch);
  CHECK(canonical_json(a, names) == R"({"a":{"y":[3,0,0.5],"z":1},"b":2,"c":"x"})");
  CHECK(canonical_json(a, names) == canonical_json(b, names));
  CHECK(canonical_json(Value::integer(2), names) == canonical_json(Value::floating(2.0), names));
  CHECK(canonical_json(Value::floating(2.5), names) == "2.5");
  CHECK(canonical_json(Value::floating(1e300), names) == "1e+300");
  CHECK(canonical_json(Value::floating(std::nan("")), names) == "null");
  CHECK(canonical_json(Value::integer(2), names) != canonical_json(Value::string("2"), names));
  CHECK(canonical_json(Value::integer(2), names) != canonical_json(Value::floating(2.5), names));

  RecordBuilder builder;
  builder.append(names.intern("zeta"), Value::floating(7.0));
  builder.append(names.intern("alpha"), Value::string("q\""));
  builder.finish(batch);
  CHECK(canonical_json(batch[0], names) == R"({"alpha":"q\"","zeta":7})");
}

// Finding 7 of issue 7: a string with bytes that are not UTF-8 was taken as bytes and written
// back out as they came, so the output was not JSON (Python's json module refused it).
TEST_CASE("invalid UTF-8 in a string or a key makes the record bad", "[json][utf8]") {
  CHECK(parse_error("{\"a\":\"\xC0\xAF\"}") == "invalid UTF-8 (byte 0xC0) at column 7");       // overlong
  CHECK(parse_error("{\"a\":\"x\xE0\x80\xAF\"}") == "invalid UTF-8 (byte 0xE0) at column 8");  // overlong
  CHECK(parse_error("{\"a\":\"\xF0\x80\x80\xAF\"}") == "invalid UTF-8 (byte 0xF0) at column 7");
  CHECK(parse_error("{\"a\":\"a\x80\"}") == "invalid UTF-8 (byte 0x80) at column 8");   // lone continuation
  CHECK(parse_error("{\"a\":\"\xED\xA0\x80\"}") == "invalid UTF-8 (byte 0xED) at column 7");   // surrogate
  CHECK(parse_error("{\"a\":\"\xE2\x82\"}") == "invalid UTF-8 (byte 0xE2) at column 7");   // truncated
  CHECK(parse_error("{\"a\":\"\xF0\x9F\x98\"}") == "invalid UTF-8 (byte 0xF0) at column 7");
  CHECK(parse_error("{\"a\":\"\xF5\"}") == "invalid UTF-8 (byte 0xF5) at column 7");
  CHECK(parse_error("{\"a\":\"\xFF\xFE\"}") == "invalid UTF-8 (byte 0xFF) at column 7");
  CHECK(parse_error("{\"\xFF\":1}") == "invalid UTF-8 (byte 0xFF) at column 3");          // in a key
  // After an escape, in the part that is decoded into the arena.
  CHECK(parse_error("{\"a\":\"\\n\xC3\"}") == "invalid UTF-8 (byte 0xC3) at column 9");
  CHECK(parse_error("{\"k\\n\xC3\":1}") == "invalid UTF-8 (byte 0xC3) at column 6");
  // Past the 16-byte steps of the scan, at every position.
  for (std::size_t at = 0; at < 40; ++at) {
    std::string s(40, 'a');
    s[at] = '\x80';
    CHECK(parse_error("{\"a\":\"" + s + "\"}") ==
          "invalid UTF-8 (byte 0x80) at column " + std::to_string(7 + at));
  }
  // Outside strings, a non-ASCII byte is not JSON at all.
  CHECK(parse_error("{\"a\":1\xFF}") == "expected ',' or '}' at column 7");
}

TEST_CASE("raw control characters, NUL included, make a string bad as RFC 8259 says", "[json][utf8]") {
  CHECK(parse_error(std::string("{\"a\":\"x\0y\"}", 11)) ==
        "raw control character 0x00 in a string (it must be escaped) at column 8");
  CHECK(parse_error("{\"a\":\"x\ty\"}") == "raw control character 0x09 in a string (it must be escaped) at column 8");
  CHECK(parse_error("{\"a\x1f\":1}") == "raw control character 0x1F in a string (it must be escaped) at column 4");
  CHECK(parse_error(std::string("\0{\"a\":1}", 8)) == "expected a JSON object: unexpected byte 0x0 at column 1");
  // Escaped, they are fine; DEL (0x7F) is not a control character for JSON.
  FieldNames names;
  Batch batch;
  CHECK(parse_one(R"("x\u0000y\t")", names, batch).str() == std::string("x\0y\t", 4));
  CHECK(parse_one("\"\x7f\"", names, batch).str() == "\x7f");
}

TEST_CASE("valid multi-byte and 4-byte UTF-8 is kept intact, through the scan and escapes", "[json][utf8]") {
  FieldNames names;
  Batch batch;
  std::string text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xE4\xB8\xAD \xF4\x8F\xBF\xBF \xEF\xBF\xBF";
  CHECK(parse_one("\"" + text + "\"", names, batch).str() == text);
  CHECK(parse_one("\"" + text + "\\n" + text + "\"", names, batch).str() == text + "\n" + text);
  std::string long_text;
  for (int k = 0; k < 20; ++k) long_text += "\xF0\x9F\x98\x80x\xC3\xA9";
  CHECK(parse_one("\"" + long_text + "\"", names, batch).str() == long_text);
  REQUIRE(parse_into("{\"" + text + "\":\"" + text + "\"}", names, batch));
  CHECK(names.name(batch[batch.size() - 1].fields[0].name) == text);
  CHECK(to_json(Value::string(text), names) == "\"" + text + "\"");
}

TEST_CASE("writer output is always UTF-8: a byte that is not becomes U+FFFD", "[json][utf8]") {
  FieldNames names;
  // Only an operator that cuts text by bytes (substr) can make such a string; the output must
  // still be JSON.
  CHECK(to_json(Value::string("a\xFF" "b"), names) == "\"a\xEF\xBF\xBD" "b\"");
  CHECK(to_json(Value::string("\xE2\x82"), names) == "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  CHECK(to_json(Value::string("\xED\xA0\x80"), names) == "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
  CHECK(to_json(Value::string("\xC0\xAF\n"), names) == "\"\xEF\xBF\xBD\xEF\xBF\xBD\\n\"");
  CHECK(to_json(Value::string("ok \xF0\x9F\x98\x80"), names) == "\"ok \xF0\x9F\x98\x80\"");
  CHECK(json_string("\x80\xC3\xA9") == "\"\xEF\xBF\xBD\xC3\xA9\"");
}
