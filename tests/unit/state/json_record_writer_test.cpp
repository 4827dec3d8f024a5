#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "state/json_writer.hpp"

using namespace streamctl::state;

namespace {

// A random scalar: the edges of ints and floats, and strings that need no escape as well as
// strings with quotes, control bytes, UTF-8 and bytes that are not UTF-8.
Value random_scalar(std::mt19937_64& rng, Batch& batch) {
  static const std::vector<std::string> strings = {
      "", "u123", "https://www.nexmark.com/abc/de_f/ghi/item.htm?query=1", "say \"hi\"", "back\\slash",
      "tab\there", "line\nbreak", std::string("nul\0byte", 8), "caf\xc3\xa9", "bad \xff byte",
      "\xe2\x82", std::string(300, 'x')};
  static const std::vector<double> floats = {0.0, -0.0, 1.5, 2.0, -3.0, 1e20, 1e-300, 0.1,
                                             std::numeric_limits<double>::max(),
                                             -std::numeric_limits<double>::denorm_min(),
                                             std::numeric_limits<double>::quiet_NaN(),
                                             std::numeric_limits<double>::infinity()};
  static const std::vector<std::int64_t> ints = {0, -1, 7, 1700000000000, std::numeric_limits<std::int64_t>::min(),
                                                 std::numeric_limits<std::int64_t>::max()};
  switch (rng() % 5) {
  case 0: return rng() % 2 ? Value::null() : Value::boolean(rng() % 2 == 0);
  case 1: return Value::integer(ints[rng() % ints.size()]);
  case 2: return Value::floating(floats[rng() % floats.size()]);
  default: {
    // Strings with nothing to escape, sometimes marked plain as the reader and the generators
    // mark them: the writer copies those without a scan, and must write the same text.
    Value v = Value::string(batch.copy_string(strings[rng() % strings.size()]));
    return Value::is_plain_text(v.str()) && rng() % 2 ? Value::plain_string(v.str()) : v;
  }
  }
}

} // namespace

// The writer takes a fast path for flat records whose strings need no escape and the general
// one otherwise; both must write exactly what append_json writes.
TEST_CASE("JsonRecordWriter writes what append_json writes, flat or nested, escaped or not", "[json]") {
  std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  FieldNames names;
  std::vector<FieldId> ids;
  for (const char* name : {"ts", "user", "a \"quoted\" name", "n", "x", "deep"}) ids.push_back(names.intern(name));
  JsonRecordWriter writer(names);
  std::string from_writer, expected;
  for (int round = 0; round < 2000; ++round) {
    Batch batch;
    RecordBuilder builder;
    std::size_t fields = rng() % 7;
    // Each field's array or map (they point at these): sized once, never moved.
    std::vector<std::vector<Value>> elements(fields, std::vector<Value>(3));
    std::vector<std::vector<Field>> members(fields, std::vector<Field>(2));
    // The same record with no string marked plain: the reference text is written from it, so
    // that a mark the writers trust is checked against the scan.
    std::vector<std::vector<Value>> unmarked_elements(fields, std::vector<Value>(3));
    std::vector<std::vector<Field>> unmarked_members(fields, std::vector<Field>(2));
    RecordBuilder unmarked;
    auto strip = [](Value v) {
      v.flags = 0;
      return v;
    };
    for (std::size_t k = 0; k < fields; ++k) {
      FieldId id = ids[rng() % ids.size()];
      if (rng() % 8 == 0) { // now and then an array or a map
        for (std::size_t e = 0; e < 3; ++e) {
          elements[k][e] = random_scalar(rng, batch);
          unmarked_elements[k][e] = strip(elements[k][e]);
        }
        members[k][0] = Field{ids[0], random_scalar(rng, batch)};
        members[k][1] = Field{ids[2], random_scalar(rng, batch)};
        for (std::size_t m = 0; m < 2; ++m)
          unmarked_members[k][m] = Field{members[k][m].name, strip(members[k][m].value)};
        const bool array = rng() % 2 != 0;
        builder.append(id, array ? Value::array_of(elements[k].data(), 3) : Value::map_of(members[k].data(), 2));
        unmarked.append(id, array ? Value::array_of(unmarked_elements[k].data(), 3)
                                  : Value::map_of(unmarked_members[k].data(), 2));
      } else {
        Value v = random_scalar(rng, batch);
        builder.append(id, v);
        unmarked.append(id, strip(v));
      }
    }
    builder.finish(batch);
    unmarked.finish(batch);
    expected.clear();
    append_json(batch[1], names, expected);
    std::size_t before = from_writer.size();
    writer.append(batch[0], from_writer);
    REQUIRE(from_writer.substr(before) == expected);
  }
}
