#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "state/csv.hpp"
#include "state/json_writer.hpp"

using namespace streamctl::state;

namespace {

// Feeds lines to a reader (the first as header when it needs one); returns the first error.
struct CsvRun {
  FieldNames names;
  Batch batch;
  std::string error;

  bool run(CsvOptions options, const std::vector<std::string>& lines) {
    CsvReader reader(std::move(options), names);
    RecordBuilder b;
    for (const std::string& line : lines) {
      auto owned = std::make_shared<std::string>(line);
      batch.retain(owned);
      if (reader.needs_header()) {
        if (auto r = reader.read_header(*owned); !r) {
          error = r.error();
          return false;
        }
        continue;
      }
      b.reset();
      if (auto r = reader.parse_line(*owned, batch, b); !r) {
        error = r.error();
        return false;
      }
      b.finish(batch);
    }
    return true;
  }

  std::string json(std::size_t k) const {
    std::string out;
    append_json(batch[k], names, out);
    return out;
  }
};

} // namespace

TEST_CASE("csv: the header names the columns and every value is a string", "[csv]") {
  CsvRun t;
  REQUIRE(t.run({}, {"user,bytes,ok", "u1,42,true", "u2,,false"}));
  REQUIRE(t.batch.size() == 2);
  CHECK(t.json(0) == R"({"user":"u1","bytes":"42","ok":"true"})");
  CHECK(t.json(1) == R"({"user":"u2","bytes":"","ok":"false"})");
}

TEST_CASE("csv: unquoted cells point into the line", "[csv]") {
  FieldNames names;
  CsvOptions options;
  options.columns = {"a", "b"};
  options.header = false;
  CsvReader reader(options, names);
  Batch batch;
  RecordBuilder b;
  std::string line = "xyz,\"q\"\"r\"";
  REQUIRE(reader.parse_line(line, batch, b));
  const Value& a = b.fields()[0].value;
  const Value& q = b.fields()[1].value;
  CHECK(a.s == line.data());
  CHECK(q.str() == "q\"r");
  CHECK((q.s < line.data() || q.s >= line.data() + line.size()));
}

TEST_CASE("csv: quoted cells hold delimiters, quotes and spaces", "[csv]") {
  CsvRun t;
  REQUIRE(t.run({}, {"a,b,c,d", R"("x,y","say ""hi""",""," padded ")", R"(plain,"",",","""")"}));
  CHECK(t.json(0) == R"({"a":"x,y","b":"say \"hi\"","c":"","d":" padded "})");
  CHECK(t.json(1) == R"({"a":"plain","b":"","c":",","d":"\""})");
}

TEST_CASE("csv: a trailing CR and a byte order mark are ignored", "[csv]") {
  CsvRun t;
  REQUIRE(t.run({}, {"\xEF\xBB\xBFid,name\r", "1,ann\r", "2,\"bob\"\r\n"}));
  CHECK(t.json(0) == R"({"id":"1","name":"ann"})");
  CHECK(t.json(1) == R"({"id":"2","name":"bob"})");
}

TEST_CASE("csv: types convert columns and empty unquoted typed cells are null", "[csv]") {
  CsvRun t;
  CsvOptions options;
  options.types = {{"bytes", Kind::Int}, {"price", Kind::Float}, {"ok", Kind::Bool}};
  REQUIRE(t.run(options, {"user,bytes,price,ok", "u1,42,1.5,true", "u2,,,", "u3,-7,2,FALSE",
                          "u4, +3 ,1e3,1", "u5,\"12\",\"0.5\",0",
                          "u6,9223372036854775807,-0.25,True"}));
  CHECK(t.json(0) == R"({"user":"u1","bytes":42,"price":1.5,"ok":true})");
  CHECK(t.json(1) == R"({"user":"u2","bytes":null,"price":null,"ok":null})");
  CHECK(t.json(2) == R"({"user":"u3","bytes":-7,"price":2.0,"ok":false})");
  CHECK(t.json(3) == R"({"user":"u4","bytes":3,"price":1000.0,"ok":true})");
  CHECK(t.json(4) == R"({"user":"u5","bytes":12,"price":0.5,"ok":false})");
  CHECK(t.json(5) == R"({"user":"u6","bytes":9223372036854775807,"price":-0.25,"ok":true})");
}

TEST_CASE("csv: a cell that fails conversion names the column and the text", "[csv]") {
  CsvOptions options;
  options.types = {{"bytes", Kind::Int}, {"price", Kind::Float}, {"ok", Kind::Bool}};
  {
    CsvRun t;
    REQUIRE_FALSE(t.run(options, {"bytes,price,ok", "abc,1,true"}));
    CHECK(t.error == "column 'bytes': cannot convert 'abc' to int");
  }
  {
    CsvRun t;
    REQUIRE_FALSE(t.run(options, {"bytes,price,ok", "1.5,1,true"}));
    CHECK(t.error == "column 'bytes': cannot convert '1.5' to int");
  }
  {
    CsvRun t;
    REQUIRE_FALSE(t.run(options, {"bytes,price,ok", "9223372036854775808,1,true"}));
    CHECK(t.error == "column 'bytes': cannot convert '9223372036854775808' to int");
  }
  {
    CsvRun t;
    REQUIRE_FALSE(t.run(options, {"bytes,price,ok", "1,x1,true"}));
    CHECK(t.error == "column 'price': cannot convert 'x1' to float");
  }
  {
    CsvRun t;
    REQUIRE_FALSE(t.run(options, {"bytes,price,ok", "1,1,yes"}));
    CHECK(t.error == "column 'ok': cannot convert 'yes' to bool");
  }
  {
    // A quoted empty cell is an empty string, not a missing value.
    CsvRun t;
    REQUIRE_FALSE(t.run(options, {"bytes,price,ok", "\"\",1,true"}));
    CHECK(t.error == "column 'bytes': cannot convert '' to int");
  }
}

TEST_CASE("csv: a row with the wrong number of cells is an error", "[csv]") {
  {
    CsvRun t;
    REQUIRE_FALSE(t.run({}, {"a,b,c,d,e", "1,2,3,4"}));
    CHECK(t.error == "expected 5 columns, got 4");
  }
  {
    CsvRun t;
    REQUIRE_FALSE(t.run({}, {"a,b", "1,2,"}));
    CHECK(t.error == "expected 2 columns, got 3");
  }
  {
    // The count is checked before any conversion.
    CsvRun t;
    CsvOptions options;
    options.types = {{"a", Kind::Int}};
    REQUIRE_FALSE(t.run(options, {"a,b", "x,2,3"}));
    CHECK(t.error == "expected 2 columns, got 3");
  }
  {
    CsvRun t;
    REQUIRE_FALSE(t.run({}, {"a,b", ""}));
    CHECK(t.error == "expected 2 columns, got 1");
  }
}

TEST_CASE("csv: quoting errors, including a quote that spans lines", "[csv]") {
  {
    CsvRun t;
    REQUIRE_FALSE(t.run({}, {"a,b", "1,\"open"}));
    CHECK(t.error == "unterminated quoted field at column 3 (a quoted field cannot span lines)");
  }
  {
    CsvRun t;
    REQUIRE_FALSE(t.run({}, {"a,b", "\"x\"y,2"}));
    CHECK(t.error == "expected a delimiter after the closing quote at column 4");
  }
  {
    CsvRun t;
    REQUIRE_FALSE(t.run({}, {"a,\"b", "1,2"}));
    CHECK(t.error == "bad header: unterminated quoted field at column 3 (a quoted field cannot "
                     "span lines)");
  }
}

TEST_CASE("csv: given columns name the fields and the header line is skipped", "[csv]") {
  {
    CsvRun t;
    CsvOptions options;
    options.columns = {"x", "y"};
    REQUIRE(t.run(options, {"ignored,header", "1,2"}));
    REQUIRE(t.batch.size() == 1);
    CHECK(t.json(0) == R"({"x":"1","y":"2"})");
  }
  {
    CsvRun t;
    CsvOptions options;
    options.columns = {"x", "y"};
    options.header = false;
    options.types = {{"y", Kind::Int}};
    REQUIRE(t.run(options, {"a,2", "b,3"}));
    REQUIRE(t.batch.size() == 2);
    CHECK(t.json(0) == R"({"x":"a","y":2})");
  }
  {
    CsvRun t;
    CsvOptions options;
    options.header = false;
    REQUIRE_FALSE(t.run(options, {"a,2"}));
    CHECK(t.error == "csv without a header line needs `columns`");
  }
}

TEST_CASE("csv: bad column setups are reported", "[csv]") {
  {
    CsvRun t;
    CsvOptions options;
    options.types = {{"missing", Kind::Int}};
    REQUIRE_FALSE(t.run(options, {"a,b", "1,2"}));
    CHECK(t.error == "types name column 'missing', which is missing");
  }
  {
    CsvRun t;
    REQUIRE_FALSE(t.run({}, {"a,b,a", "1,2,3"}));
    CHECK(t.error == "duplicate column 'a'");
  }
  {
    FieldNames names;
    CsvOptions options;
    CsvReader reader(options, names);
    Batch batch;
    RecordBuilder b;
    auto r = reader.parse_line("1,2", batch, b);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == "the csv header line has not been read");
  }
}

TEST_CASE("csv: other delimiters", "[csv]") {
  CsvRun t;
  CsvOptions options;
  options.delimiter = '\t';
  REQUIRE(t.run(options, {"a\tb", "x,y\t\"t\tab\""}));
  CHECK(t.json(0) == R"({"a":"x,y","b":"t\tab"})");
}

TEST_CASE("csv writer quotes when needed, writes null empty and nested values as JSON", "[csv]") {
  FieldNames names;
  std::vector<FieldId> cols = {names.intern("s"), names.intern("i"), names.intern("f"),
                               names.intern("b"), names.intern("n"), names.intern("arr"),
                               names.intern("missing")};
  Value elements[2] = {Value::integer(1), Value::string("x")};
  RecordBuilder rb;
  rb.append(cols[0], Value::string("a,\"b\""));
  rb.append(cols[1], Value::integer(-5));
  rb.append(cols[2], Value::floating(2.0));
  rb.append(cols[3], Value::boolean(true));
  rb.append(cols[4], Value::null());
  rb.append(cols[5], Value::array_of(elements, 2));
  Batch batch;
  rb.finish(batch);
  CsvWriter writer;
  std::string out;
  std::vector<std::string> header = {"s", "i", "f,g", "b", "n", "arr", "missing"};
  writer.append_header(header, out);
  CHECK(out == "s,i,\"f,g\",b,n,arr,missing");
  out.clear();
  writer.append_row(batch[0], cols, names, out);
  CHECK(out == R"("a,""b""",-5,2.0,true,,"[1,""x""]",)");

  rb.reset();
  rb.append(cols[0], Value::string("line\nbreak"));
  rb.append(cols[2], Value::floating(std::nan("")));
  rb.finish(batch);
  out.clear();
  writer.append_row(batch[1], cols, names, out);
  CHECK(out == "\"line\nbreak\",,,,,,");

  CsvWriter semicolons(';');
  out.clear();
  semicolons.append_row(batch[0], std::span<const FieldId>(cols).first(2), names, out);
  CHECK(out == R"("a,""b""";-5)");
}

TEST_CASE("csv: what the writer writes, the reader reads back", "[csv]") {
  FieldNames names;
  std::vector<std::string> header = {"s", "n", "x"};
  std::vector<FieldId> cols = {names.intern("s"), names.intern("n"), names.intern("x")};
  const char* strings[] = {"plain", "with,comma", "with \"quotes\"", "", "\"", ",", " sp "};
  Batch source;
  RecordBuilder rb;
  std::int64_t k = 0;
  for (const char* s : strings) {
    rb.reset();
    rb.append(cols[0], Value::string(s));
    rb.append(cols[1], k % 2 == 0 ? Value::integer(k * 1000 - 3) : Value::null());
    rb.append(cols[2], Value::floating(static_cast<double>(k) / 4));
    rb.finish(source);
    ++k;
  }
  CsvWriter writer;
  std::vector<std::string> lines(1);
  writer.append_header(header, lines[0]);
  for (const Record& r : source) {
    lines.emplace_back();
    writer.append_row(r, cols, names, lines.back());
  }
  CsvRun t;
  CsvOptions options;
  options.types = {{"n", Kind::Int}, {"x", Kind::Float}};
  REQUIRE(t.run(options, lines));
  REQUIRE(t.batch.size() == source.size());
  for (std::size_t r = 0; r < source.size(); ++r) {
    INFO(lines[r + 1]);
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const Value* want = source[r].find(cols[c]);
      const Value* got = t.batch[r].find(t.names.intern(header[c]));
      REQUIRE(got != nullptr);
      CHECK(values_equal(*want, *got));
    }
  }
}
