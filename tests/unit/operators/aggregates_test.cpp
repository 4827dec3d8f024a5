#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <new>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "operators/aggregates.hpp"
#include "state/json_reader.hpp"
#include "state/json_writer.hpp"

using namespace streamctl;
using namespace streamctl::state;
using streamctl::operators::AggregateError;
using streamctl::operators::Aggregates;
using streamctl::pipeline::EvalContext;
using streamctl::pipeline::ExpressionError;

namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

// One row's state block, aligned as the Aggregates asks, init()ed and destroy()ed.
class Block {
public:
  explicit Block(const Aggregates& aggs)
      : aggs_(&aggs), align_(std::align_val_t{aggs.block_align()}),
        p_(static_cast<std::byte*>(
            ::operator new(std::max<std::size_t>(aggs.state_bytes(), 1), align_))) {
    aggs.init(p_);
  }
  ~Block() {
    aggs_->destroy(p_);
    ::operator delete(p_, align_);
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  std::byte* get() { return p_; }

private:
  const Aggregates* aggs_;
  std::align_val_t align_;
  std::byte* p_;
};

// An aggregates table with the names, scratch arena and context to drive it.
struct Table {
  FieldNames names;
  Aggregates aggs;
  Arena scratch;
  EvalContext ctx;

  explicit Table(const Entries& entries) : aggs(Aggregates::compile(entries, names)) {
    ctx.arena = &scratch;
  }

  // Adds one JSON record. The input batch dies right after, as input batches do: whatever the
  // state keeps must have been copied.
  bool add(Block& block, const std::string& json) {
    Batch in;
    RecordBuilder builder;
    auto parsed = parse_json_record(json, names, in, builder);
    REQUIRE(parsed.ok());
    builder.finish(in);
    ctx.error.clear();
    bool ok = aggs.add(block.get(), in[0], ctx);
    scratch.reset();
    return ok;
  }

  void add_all(Block& block, const std::vector<std::string>& records) {
    for (const auto& r : records)
      REQUIRE(add(block, r));
  }

  // The emitted record as JSON.
  std::string emit(Block& block) {
    Batch out;
    RecordBuilder builder;
    aggs.emit(block.get(), builder, out);
    builder.finish(out);
    std::string json;
    append_json(out[0], names, json);
    return json;
  }

  std::string result(const std::vector<std::string>& records) {
    Block block(aggs);
    add_all(block, records);
    return emit(block);
  }
};

std::string one(const std::string& call, const std::vector<std::string>& records) {
  Table t(Entries{{"r", call}});
  return t.result(records);
}

// The error of adding `bad` after `before`.
std::string error_of(const std::string& call, const std::vector<std::string>& before,
                     const std::string& bad) {
  Table t(Entries{{"r", call}});
  Block block(t.aggs);
  t.add_all(block, before);
  if (t.add(block, bad)) return "(no error)";
  return t.ctx.error;
}

std::vector<std::string> xs(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const auto& v : values)
    out.push_back("{\"x\":" + v + "}");
  return out;
}

// Where a compile error points.
struct CompileFailure {
  std::uint32_t offset = 0;
  std::string message;
};

CompileFailure compile_error(const std::string& call) {
  FieldNames names;
  try {
    operators::compile_aggregate(call, names);
  } catch (const ExpressionError& e) {
    return {e.offset(), e.what()};
  }
  FAIL("no error for " << call);
  return {};
}

} // namespace

TEST_CASE("count() counts records, count(x) counts non-null x", "[aggregates]") {
  CHECK(one("count()", {}) == R"({"r":0})");
  CHECK(one("count(x)", {}) == R"({"r":0})");
  auto records = xs({"1", "null", "2.5", "\"s\"", "[1]"});
  records.push_back(R"({"y":1})");
  CHECK(one("count()", records) == R"({"r":6})");
  CHECK(one("count(x)", records) == R"({"r":4})");
  CHECK(one(" count ( ) ", records) == R"({"r":6})");
}

TEST_CASE("sum: ints stay ints, any float makes a float, nulls are skipped", "[aggregates]") {
  CHECK(one("sum(x)", {}) == R"({"r":null})");
  CHECK(one("sum(x)", xs({"null"})) == R"({"r":null})");
  CHECK(one("sum(x)", xs({"1", "2", "null", "3"})) == R"({"r":6})");
  CHECK(one("sum(x)", xs({"1.5", "2.25"})) == R"({"r":3.75})");
  CHECK(one("sum(x)", xs({"1", "2.5", "3"})) == R"({"r":6.5})");
  CHECK(one("sum(x)", xs({"1", "2.0"})) == R"({"r":3.0})");
  CHECK(one("sum(x * 2)", xs({"1", "2"})) == R"({"r":6})");
}

TEST_CASE("sum of a string is a per-record error that adds nothing", "[aggregates]") {
  Table t(Entries{{"n", "count()"}, {"bytes", "sum(bytes)"}});
  Block block(t.aggs);
  REQUIRE(t.add(block, R"({"bytes":10})"));
  REQUIRE_FALSE(t.add(block, R"({"bytes":"ten"})"));
  CHECK(t.ctx.error == "sum(bytes): expected a number, got string");
  REQUIRE_FALSE(t.add(block, R"({"bytes":true})"));
  CHECK(t.ctx.error == "sum(bytes): expected a number, got bool");
  REQUIRE(t.add(block, R"({"bytes":5})"));
  // All or nothing: count() did not count the records that sum rejected.
  CHECK(t.emit(block) == R"({"n":2,"bytes":15})");
}

TEST_CASE("sum of ints that overflows is a per-record error, not a wraparound", "[aggregates]") {
  Table t(Entries{{"s", "sum(x)"}});
  Block block(t.aggs);
  REQUIRE(t.add(block, R"({"x":9223372036854775807})"));
  REQUIRE_FALSE(t.add(block, R"({"x":1})"));
  CHECK_THAT(t.ctx.error, Catch::StartsWith("sum(x): integer overflow"));
  CHECK(t.emit(block) == R"({"s":9223372036854775807})");
  REQUIRE(t.add(block, R"({"x":-7})"));
  CHECK(t.emit(block) == R"({"s":9223372036854775800})");
  REQUIRE(t.add(block, R"({"x":-9223372036854775807})"));
  REQUIRE(t.add(block, R"({"x":-9223372036854775801})"));
  CHECK(t.emit(block) == R"({"s":-9223372036854775808})");
  REQUIRE_FALSE(t.add(block, R"({"x":-1})"));
  CHECK(t.emit(block) == R"({"s":-9223372036854775808})");
  // A float makes the sum a float, which no longer overflows.
  REQUIRE(t.add(block, R"({"x":-1.0})"));
  CHECK(t.emit(block) == R"({"s":-9223372036854775808.0})");
}

TEST_CASE("avg: a float, null of nothing, numbers only", "[aggregates]") {
  CHECK(one("avg(x)", {}) == R"({"r":null})");
  CHECK(one("avg(x)", xs({"null", "null"})) == R"({"r":null})");
  CHECK(one("avg(x)", xs({"1", "2"})) == R"({"r":1.5})");
  CHECK(one("avg(x)", xs({"2", "null", "4"})) == R"({"r":3.0})");
  CHECK(one("avg(x)", xs({"1", "2.5"})) == R"({"r":1.75})");
  // An int sum that would overflow goes on as a float: avg is a float anyway.
  CHECK(one("avg(x)", xs({"9223372036854775807", "9223372036854775807"})) ==
        R"({"r":9223372036854775808.0})");
  CHECK(error_of("avg(x)", {}, R"({"x":"3"})") == "avg(x): expected a number, got string");
  CHECK(error_of("avg(x)", {}, R"({"x":[1]})") == "avg(x): expected a number, got array");
}

TEST_CASE("min and max over numbers", "[aggregates]") {
  CHECK(one("min(x)", {}) == R"({"r":null})");
  CHECK(one("max(x)", xs({"null"})) == R"({"r":null})");
  CHECK(one("min(x)", xs({"3", "1", "null", "2"})) == R"({"r":1})");
  CHECK(one("max(x)", xs({"3", "1", "null", "2"})) == R"({"r":3})");
  CHECK(one("min(x)", xs({"3", "1.5", "2"})) == R"({"r":1.5})");
  CHECK(one("max(x)", xs({"3", "3.5", "-2"})) == R"({"r":3.5})");
  // Large ints compare exactly with floats (2^63 - 1 as a double is 2^63).
  CHECK(one("max(x)", xs({"9223372036854775807", "9223372036854775000.0"})) ==
        R"({"r":9223372036854775807})");
  CHECK(one("min(x)", xs({"9007199254740993", "9007199254740992.0"})) ==
        R"({"r":9007199254740992.0})");
  // A tie keeps the earlier value.
  CHECK(one("min(x)", xs({"2", "2.0"})) == R"({"r":2})");
  CHECK(one("min(x)", xs({"2.0", "2"})) == R"({"r":2.0})");
}

TEST_CASE("min and max over strings compare bytes; kinds never mix", "[aggregates]") {
  CHECK(one("min(x)", xs({"\"pear\"", "\"apple\"", "null", "\"zoo\""})) == R"({"r":"apple"})");
  CHECK(one("max(x)", xs({"\"pear\"", "\"apple\"", "\"zoo\"", "\"Zz\""})) == R"({"r":"zoo"})");
  CHECK(one("max(x)", xs({"\"ab\"", "\"abc\"", "\"\""})) == R"({"r":"abc"})");
  CHECK(one("min(x)", xs({"\"ab\"", "\"\"", "\"abc\""})) == R"({"r":""})");
  // Long strings outlive their input batches.
  std::string long_a(300, 'a');
  std::string long_b(5000, 'b');
  CHECK(one("max(x)", xs({"\"" + long_a + "\"", "\"" + long_b + "\"", "\"b\""})) ==
        R"({"r":")" + long_b + R"("})");
  CHECK(error_of("min(x)", xs({"1"}), R"({"x":"a"})") ==
        "min(x): cannot compare a string with the numbers before it");
  CHECK(error_of("max(x)", xs({"\"a\""}), R"({"x":1.5})") ==
        "max(x): cannot compare a number with the strings before it");
  CHECK(error_of("max(x)", {}, R"({"x":true})") ==
        "max(x): expected a number or a string, got bool");
  CHECK(error_of("min(x)", {}, R"({"x":{"a":1}})") ==
        "min(x): expected a number or a string, got map");
}

TEST_CASE("first and last keep the first and last non-null value, copied", "[aggregates]") {
  CHECK(one("first(x)", {}) == R"({"r":null})");
  CHECK(one("last(x)", xs({"null"})) == R"({"r":null})");
  auto records =
      xs({"null", "\"one\"", "2", "null", "[1,{\"b\":2,\"a\":[true]}]", "\"five\"", "null"});
  CHECK(one("first(x)", records) == R"({"r":"one"})");
  CHECK(one("last(x)", records) == R"({"r":"five"})");
  CHECK(one("last(x)", xs({"\"s\"", "{\"b\":2,\"a\":[true,null]}"})) ==
        R"({"r":{"b":2,"a":[true,null]}})");
  CHECK(one("last(x)", xs({"{\"b\":1}", "2.5"})) == R"({"r":2.5})");
  CHECK(one("first(x)", xs({"false", "true"})) == R"({"r":false})");
  CHECK(one("last(x)", xs({"\"" + std::string(10000, 'x') + "\"", "\"short\""})) ==
        R"({"r":"short"})");
}

TEST_CASE("count_distinct is exact; equal values count once", "[aggregates]") {
  CHECK(one("count_distinct(x)", {}) == R"({"r":0})");
  CHECK(one("count_distinct(x)", xs({"null"})) == R"({"r":0})");
  CHECK(one("count_distinct(x)", xs({"1", "1.0", "2", "\"1\"", "null", "2"})) == R"({"r":3})");
  CHECK(one("count_distinct(x)", xs({"{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}", "{\"a\":1}", "[1,2]",
                                     "[2,1]"})) == R"({"r":4})");
  CHECK(one("count_distinct(x)", xs({"true", "false", "true", "\"\"", "[]", "{}"})) ==
        R"({"r":5})");
}

TEST_CASE("approx_count_distinct of small inputs", "[aggregates]") {
  CHECK(one("approx_count_distinct(x)", {}) == R"({"r":0})");
  CHECK(one("approx_count_distinct(x)", xs({"null"})) == R"({"r":0})");
  CHECK(one("approx_count_distinct(x)", xs({"1", "1.0", "\"a\"", "\"a\"", "null"})) ==
        R"({"r":2})");
  std::vector<std::string> records;
  for (int k = 0; k < 1000; ++k)
    records.push_back("{\"x\":\"user" + std::to_string(k % 500) + "\"}");
  Table t(Entries{{"r", "approx_count_distinct(x)"}});
  Block block(t.aggs);
  t.add_all(block, records);
  Batch out;
  Value v = t.aggs.function(0).result(block.get(), out);
  REQUIRE(v.kind == Kind::Int);
  CHECK(std::abs(static_cast<double>(v.i) - 500.0) / 500.0 < 0.02);
}

TEST_CASE("top_k orders by count, then by value", "[aggregates]") {
  CHECK(one("top_k(x, 3)", {}) == R"({"r":[]})");
  CHECK(one("top_k(x, 3)", xs({"null"})) == R"({"r":[]})");
  auto records =
      xs({"\"b\"", "\"a\"", "\"c\"", "\"b\"", "\"d\"", "\"a\"", "\"d\"", "\"a\"", "\"b\"", "null"});
  // a: 3, b: 3, d: 2, c: 1; a and b tie and are ordered by value.
  CHECK(one("top_k(x, 2)", records) ==
        R"({"r":[{"value":"a","count":3},{"value":"b","count":3}]})");
  CHECK(one("top_k(x, 3)", records) ==
        R"({"r":[{"value":"a","count":3},{"value":"b","count":3},{"value":"d","count":2}]})");
  CHECK(one("top_k(x, 10)", records) ==
        R"({"r":[{"value":"a","count":3},{"value":"b","count":3},{"value":"d","count":2},)"
        R"({"value":"c","count":1}]})");
  // Ties among numbers order by value, not by text (2 before 10); 2 and 2.0 are one value.
  CHECK(one("top_k(x, 5)", xs({"10", "2", "2.0", "10", "1.5", "-3"})) ==
        R"({"r":[{"value":2,"count":2},{"value":10,"count":2},{"value":-3,"count":1},)"
        R"({"value":1.5,"count":1}]})");
  // Across kinds: null < bool < number < string < array < map.
  CHECK(one("top_k(x, 6)", xs({"{\"a\":1}", "[1]", "\"s\"", "7", "true"})) ==
        R"({"r":[{"value":true,"count":1},{"value":7,"count":1},{"value":"s","count":1},)"
        R"({"value":[1],"count":1},{"value":{"a":1},"count":1}]})");
}

TEST_CASE("per-function state sizes stay small", "[aggregates]") {
  Table t(Entries{{"c", "count()"},
                  {"s", "sum(x)"},
                  {"a", "avg(x)"},
                  {"mn", "min(x)"},
                  {"mx", "max(x)"},
                  {"f", "first(x)"},
                  {"l", "last(x)"},
                  {"cd", "count_distinct(x)"},
                  {"acd", "approx_count_distinct(x)"},
                  {"t", "top_k(x, 3)"}});
  std::vector<std::size_t> sizes;
  for (std::size_t k = 0; k < t.aggs.size(); ++k)
    sizes.push_back(t.aggs.function(k).state_size());
  CHECK(sizes == std::vector<std::size_t>{8, 16, 24, 16, 16, 16, 16, 8, 8, 8});
  CHECK(t.aggs.state_bytes() == 136);
  CHECK(Table(Entries{{"c", "count()"}}).aggs.state_bytes() == 8);
  CHECK(Table(Entries{{"c", "count()"}, {"s", "sum(x)"}}).aggs.state_bytes() == 24);
  CHECK(t.aggs.output_fields().size() == 10);
  CHECK(t.names.name(t.aggs.output_fields()[3]) == "mn");
}

// ---- randomized: merge, snapshots, and a reference computation ----

namespace {

const Entries all_functions = {
    {"n", "count()"},
    {"ni", "count(i)"},
    {"si", "sum(i)"},
    {"sf", "sum(f)"},
    {"sm", "sum(m)"},
    {"ai", "avg(i)"},
    {"am", "avg(m)"},
    {"mni", "min(i)"},
    {"mxm", "max(m)"},
    {"mns", "min(s)"},
    {"mxs", "max(s)"},
    {"fs", "first(s)"},
    {"lm", "last(m)"},
    {"la", "last(arr)"},
    {"fa", "first(arr)"},
    {"cd", "count_distinct(m)"},
    {"cda", "count_distinct(arr)"},
    {"acd", "approx_count_distinct(s)"},
    {"tk", "top_k(s, 3)"},
    {"tkm", "top_k(m, 4)"},
};

// Random records with small ints (i), halves (f, so that float sums are exact in any order),
// a mix of int/float/null (m), strings (s, sometimes missing) and small arrays or maps (arr).
std::vector<std::string> random_records(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < n; ++k) {
    auto pick = [&](int bound) { return static_cast<int>(rng() % static_cast<unsigned>(bound)); };
    std::string r = "{\"i\":" + std::to_string(pick(200) - 100);
    r += ",\"f\":" + std::to_string(pick(40) - 20) + ".5";
    int m = pick(3);
    r += ",\"m\":" + (m == 0   ? std::string("null")
                      : m == 1 ? std::to_string(pick(10))
                               : std::to_string(pick(10)) + (pick(2) ? ".5" : ".0"));
    if (pick(4) != 0) r += ",\"s\":\"w" + std::to_string(pick(15)) + "\"";
    int a = pick(3);
    r += ",\"arr\":" + (a == 0   ? std::string("[" + std::to_string(pick(4)) + ",\"x\"]")
                        : a == 1 ? std::string("{\"k\":" + std::to_string(pick(3)) + ",\"j\":[]}")
                                 : std::string("null"));
    out.push_back(r + "}");
  }
  return out;
}

// Each JSON line of `records` parsed into one record of `in`.
void parse_all(const std::vector<std::string>& records, FieldNames& names, Batch& in) {
  RecordBuilder builder;
  for (const auto& r : records) {
    builder.reset();
    REQUIRE(parse_json_record(r, names, in, builder).ok());
    builder.finish(in);
  }
}

} // namespace

TEST_CASE("merge equals adding everything to one slot, for every function", "[aggregates]") {
  std::mt19937_64 rng(GENERATE(1, 2, 3, 4, 5, 6, 7, 8));
  Table t(all_functions);
  auto records = random_records(rng, 1 + rng() % 300);
  std::size_t cut = rng() % (records.size() + 1);
  std::vector<std::string> head(records.begin(), records.begin() + static_cast<long>(cut));
  std::vector<std::string> tail(records.begin() + static_cast<long>(cut), records.end());

  Block all(t.aggs);
  t.add_all(all, records);
  Block a(t.aggs);
  Block b(t.aggs);
  t.add_all(a, head);
  t.add_all(b, tail);
  t.aggs.merge(a.get(), b.get());
  CHECK(t.emit(a) == t.emit(all));
  CHECK(t.emit(b) == t.result(tail)); // `from` is unchanged

  // Merging into an empty block copies; merging an empty block changes nothing.
  Block empty(t.aggs);
  Block c(t.aggs);
  t.aggs.merge(c.get(), all.get());
  CHECK(t.emit(c) == t.emit(all));
  t.aggs.merge(c.get(), empty.get());
  CHECK(t.emit(c) == t.emit(all));
}

TEST_CASE("serialize then deserialize gives the same state", "[aggregates]") {
  std::mt19937_64 rng(GENERATE(11, 12, 13, 14));
  Table t(all_functions);
  std::size_t n = GENERATE(0, 1, 50, 3000); // 3000 makes the HyperLogLog dense
  auto records = random_records(rng, n);
  if (n == 3000)
    for (int k = 0; k < 3000; ++k)
      records.push_back("{\"s\":\"u" + std::to_string(k) + "\"}");
  Block block(t.aggs);
  t.add_all(block, records);
  std::string bytes;
  t.aggs.serialize(block.get(), bytes);

  Block restored(t.aggs);
  std::string_view in = bytes;
  auto ok = t.aggs.deserialize(restored.get(), in);
  REQUIRE(ok.ok());
  CHECK(in.empty());
  CHECK(t.emit(restored) == t.emit(block));
  std::string again;
  t.aggs.serialize(restored.get(), again);
  CHECK(again == bytes);

  // A restored state goes on aggregating like the original.
  auto more = random_records(rng, 20);
  t.add_all(block, more);
  t.add_all(restored, more);
  CHECK(t.emit(restored) == t.emit(block));
}

TEST_CASE("truncated or corrupt state bytes fail without crashing", "[aggregates]") {
  std::mt19937_64 rng(21);
  Table t(all_functions);
  Block block(t.aggs);
  t.add_all(block, random_records(rng, 40));
  std::string bytes;
  t.aggs.serialize(block.get(), bytes);

  for (std::size_t len = 0; len < bytes.size(); ++len) {
    Block restored(t.aggs);
    std::string_view in(bytes.data(), len);
    INFO("length " << len);
    CHECK_FALSE(t.aggs.deserialize(restored.get(), in).ok());
  }
  // Flipped bytes either fail or restore some state; the sanitizers watch for the rest.
  for (int k = 0; k < 2000; ++k) {
    std::string corrupt = bytes;
    corrupt[rng() % corrupt.size()] = static_cast<char>(rng());
    Block restored(t.aggs);
    std::string_view in = corrupt;
    if (t.aggs.deserialize(restored.get(), in).ok()) (void)t.emit(restored);
  }
  // State of another list of functions is refused.
  Table other(Entries{{"n", "count()"}, {"x", "avg(i)"}});
  Block wrong(other.aggs);
  std::string_view in = bytes;
  auto failed = other.aggs.deserialize(wrong.get(), in);
  REQUIRE_FALSE(failed.ok());
  CHECK_THAT(failed.error(), Catch::Contains("20 functions"));
  Table swapped(Entries{{"n", "count()"}, {"ni", "sum(i)"}});
  Block two(swapped.aggs);
  Table counts(Entries{{"n", "count()"}, {"ni", "count(i)"}});
  Block two_counts(counts.aggs);
  std::string count_bytes;
  counts.aggs.serialize(two_counts.get(), count_bytes);
  std::string_view in2 = count_bytes;
  auto refused = swapped.aggs.deserialize(two.get(), in2);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error(), Catch::Contains("is the state of count, not that of sum(i)"));
}

TEST_CASE("random records through Aggregates agree with a plain computation", "[aggregates]") {
  std::mt19937_64 rng(GENERATE(31, 32, 33));
  Table t(Entries{{"n", "count()"},
                  {"ns", "count(s)"},
                  {"si", "sum(i)"},
                  {"ai", "avg(i)"},
                  {"mn", "min(i)"},
                  {"mx", "max(s)"},
                  {"fs", "first(s)"},
                  {"ls", "last(s)"},
                  {"cd", "count_distinct(s)"},
                  {"tk", "top_k(s, 2)"}});
  auto records = random_records(rng, rng() % 500);
  Block block(t.aggs);
  t.add_all(block, records);

  // The same, computed from the records directly.
  Batch parsed;
  std::int64_t n = 0, ns = 0, si = 0, mn = 0;
  std::string mx, fs, ls;
  std::map<std::string, std::int64_t> counts;
  FieldId i_id = t.names.intern("i");
  FieldId s_id = t.names.intern("s");
  for (const auto& json : records) {
    RecordBuilder builder;
    REQUIRE(parse_json_record(json, t.names, parsed, builder).ok());
    builder.finish(parsed);
    const Record& r = parsed[parsed.size() - 1];
    ++n;
    std::int64_t i = r.find(i_id)->i;
    si += i;
    mn = n == 1 ? i : std::min(mn, i);
    if (const Value* s = r.find(s_id)) {
      std::string text(s->str());
      if (ns++ == 0) fs = text;
      ls = text;
      mx = std::max(mx, text);
      ++counts[text];
    }
  }
  auto quoted = [](const std::string& s) { return "\"" + s + "\""; };
  std::string expected = "{\"n\":" + std::to_string(n) + ",\"ns\":" + std::to_string(ns);
  if (n == 0) {
    expected += ",\"si\":null,\"ai\":null,\"mn\":null";
  } else {
    std::string avg;
    append_json_value(Value::floating(static_cast<double>(si) / static_cast<double>(n)), t.names,
                      avg);
    expected +=
        ",\"si\":" + std::to_string(si) + ",\"ai\":" + avg + ",\"mn\":" + std::to_string(mn);
  }
  if (ns == 0)
    expected += ",\"mx\":null,\"fs\":null,\"ls\":null";
  else
    expected += ",\"mx\":" + quoted(mx) + ",\"fs\":" + quoted(fs) + ",\"ls\":" + quoted(ls);
  expected += ",\"cd\":" + std::to_string(counts.size()) + ",\"tk\":[";
  std::vector<std::pair<std::int64_t, std::string>> ranked;
  for (const auto& [text, c] : counts)
    ranked.emplace_back(-c, text);
  std::sort(ranked.begin(), ranked.end());
  for (std::size_t k = 0; k < std::min<std::size_t>(2, ranked.size()); ++k)
    expected += std::string(k ? "," : "") + "{\"value\":" + quoted(ranked[k].second) +
                ",\"count\":" + std::to_string(-ranked[k].first) + "}";
  expected += "]}";
  CHECK(t.emit(block) == expected);
}

// ---- compiling ----

TEST_CASE("compile errors point at the problem", "[aggregates]") {
  auto e = compile_error("sum()");
  CHECK(e.offset == 4);
  CHECK(e.message == "sum needs 1 argument: sum(x)");

  e = compile_error("sm(x)");
  CHECK(e.offset == 0);
  CHECK(e.message == "unknown aggregate function 'sm'; did you mean 'sum'?");
  CHECK(compile_error("  cuont(x)").message ==
        "unknown aggregate function 'cuont'; did you mean 'count'?");
  CHECK(compile_error("  cuont(x)").offset == 2);
  CHECK_THAT(compile_error("approx(x)").message, Catch::Contains("'approx_count_distinct'"));
  CHECK_THAT(compile_error("lower(x)").message, Catch::Contains("aggregates are count()"));

  e = compile_error("top_k(x, 0)");
  CHECK(e.offset == 9);
  CHECK(e.message == "top_k: k must be a positive integer literal, got '0'");
  CHECK(compile_error("top_k(x, n)").offset == 9);
  CHECK(compile_error("top_k(x, -1)").offset == 9);
  CHECK(compile_error("top_k(x, 2.5)").offset == 9);
  CHECK(compile_error("top_k(x,  99999999999999999999)").offset == 10);
  CHECK(compile_error("top_k(x, 10001)").message == "top_k: k must be at most 10000");
  CHECK(compile_error("top_k(x)").message == "top_k needs 2 arguments: top_k(x, k)");
  CHECK(compile_error("top_k(x)").offset == 7);

  // An error in the argument points inside it.
  e = compile_error("count(1 +)");
  CHECK(e.offset >= 6);
  CHECK(e.offset <= 9);
  CHECK(compile_error("sum(  len(x, 1))").offset >= 6);
  CHECK(compile_error("sum(count())").offset == 4);
  CHECK_THAT(compile_error("sum(count())").message, Catch::Contains("aggregate function"));

  e = compile_error("sum(a, b)");
  CHECK(e.offset == 7);
  CHECK(e.message == "sum takes at most 1 argument: sum(x)");
  CHECK(compile_error("count(a, b)").offset == 9);
  CHECK_THAT(compile_error("min(a, b)").message,
             Catch::EndsWith("nest the scalar one: min(min(a, b))"));
  CHECK(compile_error("sum(a,)").offset == 6);
  CHECK(compile_error("sum(x) + 1").offset == 7);
  CHECK(compile_error("sum(x").offset == 3);
  CHECK(compile_error("bytes").offset == 0);
  CHECK(compile_error("").offset == 0);
  CHECK(compile_error("1 + sum(x)").offset == 0);
  CHECK(compile_error("count(*)").offset == 6);
}

TEST_CASE("arguments are expressions; commas inside them do not split", "[aggregates]") {
  CHECK(one("sum(if(x > 1, x, 0))", xs({"1", "2", "3"})) == R"({"r":5})");
  CHECK(one("count_distinct(concat(s, \",\", t))", {R"({"s":"a","t":"b"})", R"({"s":"a","t":"b"})",
                                                    R"({"s":"a","t":"c"})"}) == R"({"r":2})");
  CHECK(one("max(`odd, name`)", {R"({"odd, name":4})", R"({"odd, name":9})"}) == R"({"r":9})");
  CHECK(one("top_k(lower(s), 1)", {R"({"s":"A"})", R"({"s":"a"})", R"({"s":"b"})"}) ==
        R"({"r":[{"value":"a","count":2}]})");
  CHECK(one("first(s ?? \"none\")", {R"({"t":1})"}) == R"({"r":"none"})");
}

TEST_CASE("an error in an argument is a per-record error naming the call", "[aggregates]") {
  Table t(Entries{{"n", "count()"}, {"q", "sum(a / b)"}});
  Block block(t.aggs);
  REQUIRE(t.add(block, R"({"a":4,"b":2})"));
  REQUIRE_FALSE(t.add(block, R"({"a":4,"b":0})"));
  CHECK_THAT(t.ctx.error, Catch::StartsWith("sum(a / b): "));
  CHECK(t.emit(block) == R"({"n":1,"q":2})");
}

TEST_CASE("Aggregates::compile names the failing entry", "[aggregates]") {
  FieldNames names;
  try {
    Aggregates::compile({{"n", "count()"}, {"total", "sm(bytes)"}}, names);
    FAIL("no error");
  } catch (const AggregateError& e) {
    CHECK(e.entry() == 1);
    CHECK(e.offset() == 0);
    CHECK(std::string(e.what()) == "aggregate 'total': unknown aggregate function 'sm'; did you "
                                   "mean 'sum'?");
  }
  CHECK_THROWS_AS(Aggregates::compile({{"", "count()"}}, names), Error);
  CHECK_THROWS_AS(Aggregates::compile({{"a", "count()"}, {"a", "sum(x)"}}, names), Error);
  CHECK(Aggregates::compile({}, names).state_bytes() == 0);
}

TEST_CASE("functions with the same argument share one evaluation", "[aggregates]") {
  Table u(Entries{{"m", "max(len(x))"}, {"a", "avg(len(x))"}, {"n", "count(len(x))"}});
  CHECK(u.result({R"({"x":"ab"})", R"({"x":"abcd"})", R"({"y":1})"}) == R"({"m":4,"a":3.0,"n":2})");
}

// Windows and reduce evaluate the arguments over a whole batch (prepare, then add_at per
// record); that must equal add() record by record, including a record whose argument fails
// in the middle of a batch (the first failing function's error, nothing added), a record
// check() refuses (a string after numbers), and shared arguments. 600 records span several of
// the expression program's chunks.
TEST_CASE("add_at after prepare equals add record by record, failures included", "[aggregates]") {
  const Entries entries{{"n", "count()"},       {"s", "sum(x * 2)"},     {"a", "avg(x * 2)"},
                        {"m", "max(len(name))"}, {"f", "first(lower(name))"}, {"t", "top_k(name, 3)"}};
  std::vector<std::string> records;
  for (int k = 0; k < 600; ++k) {
    const std::string name = "\"N" + std::to_string(k % 7) + "\"";
    if (k % 89 == 3) records.push_back(R"({"x": "two", "name": )" + name + "}"); // x * 2 fails
    else if (k % 113 == 10) records.push_back(R"({"x": 1, "name": 5})"); // len(5) fails
    else if (k % 151 == 20) records.push_back(R"({"x": 1})"); // null name: skipped, not a failure
    else records.push_back("{\"x\": " + std::to_string(k % 50) + ", \"name\": " + name + "}");
  }
  records.back() = R"({"x": [], "name": "z"})"; // a failure on the last record

  Table single(entries);
  Block one(single.aggs);
  std::vector<std::string> single_errors;
  for (const auto& r : records)
    if (!single.add(one, r)) single_errors.push_back(single.ctx.error);

  Table batched(entries);
  Block block(batched.aggs);
  Batch in;
  parse_all(records, batched.names, in);
  std::vector<std::string> batch_errors;
  batched.aggs.prepare(std::span<const Record>(in.begin(), in.end()), batched.ctx);
  for (std::size_t row = 0; row < in.size(); ++row)
    if (!batched.aggs.add_at(block.get(), row, batched.ctx)) batch_errors.push_back(batched.ctx.error);

  CHECK(batched.emit(block) == single.emit(one));
  CHECK(batch_errors == single_errors);
  CHECK(batch_errors.size() > 8);
  CHECK_THAT(batch_errors.front(), Catch::StartsWith("sum(x * 2): "));
}

// A table of count() calls alone takes a fast path in add_at (no virtual calls): the same
// counts as add() record by record, and as the general path with an argument among them.
TEST_CASE("add_at of count() alone equals add record by record", "[aggregates]") {
  for (const Entries& entries : {Entries{{"n", "count()"}},
                                 Entries{{"n", "count()"}, {"m", "count()"}, {"k", "count()"}},
                                 Entries{{"n", "count()"}, {"c", "count(x)"}}}) {
    std::vector<std::string> records;
    for (int k = 0; k < 300; ++k)
      records.push_back(k % 3 == 0 ? R"({"y": 1})" : "{\"x\": " + std::to_string(k) + "}");
    Table single(entries);
    Block one(single.aggs);
    for (const auto& r : records) REQUIRE(single.add(one, r));
    Table batched(entries);
    Block block(batched.aggs);
    Batch in;
    parse_all(records, batched.names, in);
    batched.aggs.prepare(std::span<const Record>(in.begin(), in.end()), batched.ctx);
    for (std::size_t row = 0; row < in.size(); ++row) REQUIRE(batched.aggs.add_at(block.get(), row, batched.ctx));
    CHECK(batched.emit(block) == single.emit(one));
    CHECK_THAT(batched.emit(block), Catch::Contains("\"n\":300"));
  }
}
