#include <catch2/catch.hpp>

#include "state/batch.hpp"

using namespace streamctl::state;

TEST_CASE("a batch keeps its records' strings alive after the builder is reused", "[state]") {
  FieldNames names;
  Batch batch;
  RecordBuilder b;
  for (int k = 0; k < 100; ++k) {
    b.reset();
    std::string text = "value-" + std::to_string(k);
    b.append(names.intern("s"), Value::string(batch.copy_string(text)));
    b.append(names.intern("n"), Value::integer(k));
    b.finish(batch);
  }
  REQUIRE(batch.size() == 100);
  CHECK(batch[42].find(names.intern("s"))->str() == "value-42");
  CHECK(batch[99].find(names.intern("n"))->i == 99);
  CHECK(batch[0].find(names.intern("missing")) == nullptr);
}

TEST_CASE("set replaces a field in place and remove drops it", "[state]") {
  FieldNames names;
  RecordBuilder b;
  b.append(names.intern("a"), Value::integer(1));
  b.append(names.intern("b"), Value::integer(2));
  b.set(names.intern("a"), Value::integer(3));
  b.remove(names.intern("b"));
  b.set(names.intern("c"), Value::boolean(true));
  REQUIRE(b.fields().size() == 2);
  CHECK(b.fields()[0].value.i == 3);
  CHECK(b.fields()[1].name == names.intern("c"));
}

TEST_CASE("copy_value deep-copies nested values and equality sees ints as floats", "[state]") {
  FieldNames names;
  Batch source;
  Value elements[2] = {Value::integer(1), Value::string("x")};
  Value array = Value::array_of(elements, 2);
  Batch target;
  Value copy = target.copy_value(array);
  elements[1] = Value::string("changed");
  CHECK(copy.array[1].str() == "x");
  CHECK(values_equal(Value::integer(2), Value::floating(2.0)));
  CHECK_FALSE(values_equal(Value::integer(2), Value::string("2")));
}
