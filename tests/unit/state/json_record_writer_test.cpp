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
  default: return Value::string(batch.copy_string(strings[rng() % strings.size()]));
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
    for (std::size_t k = 0; k < fields; ++k) {
      FieldId id = ids[rng() % ids.size()];
      if (rng() % 8 == 0) { // now and then an array or a map
        for (auto& e : elements[k]) e = random_scalar(rng, batch);
        members[k][0] = Field{ids[0], random_scalar(rng, batch)};
        members[k][1] = Field{ids[2], random_scalar(rng, batch)};
        builder.append(id, rng() % 2 ? Value::array_of(elements[k].data(), 3) : Value::map_of(members[k].data(), 2));
      } else {
        builder.append(id, random_scalar(rng, batch));
      }
    }
    builder.finish(batch);
    expected.clear();
    append_json(batch[0], names, expected);
    std::size_t before = from_writer.size();
    writer.append(batch[0], from_writer);
    REQUIRE(from_writer.substr(before) == expected);
  }
}
