// The flat program that Expression::eval runs (pipeline/spec/expression_program.hpp): what
// it is lowered to, each type-specialised path, and a randomized comparison with the tree
// walker, which is the reference for the rules of SPEC §5.

#include <catch2/catch.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "pipeline/spec/expression.hpp"
#include "pipeline/spec/expression_parser.hpp"
#include "pipeline/spec/expression_program.hpp"
#include "state/batch.hpp"

using namespace streamctl;
using namespace streamctl::state;
using streamctl::pipeline::EvalContext;
using streamctl::pipeline::Expression;
using streamctl::pipeline::ExpressionError;
using streamctl::pipeline::ExpressionNode;
namespace expr = streamctl::pipeline::expr;

namespace {

// The tree of `text` and its program, side by side.
struct Lowered {
  ExpressionNode tree;
  std::unique_ptr<expr::Program> program;
  Lowered(std::string_view text, FieldNames& names) {
    expr::parse(text, names, tree);
    program = std::make_unique<expr::Program>(tree);
  }
  std::string listing() const { return program->listing(); }
};

// A record of the given fields, kept alive by a Batch.
struct Records {
  FieldNames names;
  Batch batch;
  Arena arena;
  EvalContext ctx;

  Records() { ctx.arena = &arena; }

  Record make(std::vector<std::pair<std::string, Value>> fields) {
    RecordBuilder b;
    for (auto& [name, value] : fields)
      b.append(names.intern(name), value);
    b.finish(batch);
    return batch[batch.size() - 1];
  }
  Value str(std::string_view s) { return Value::string(batch.copy_string(s)); }

  // Evaluates through Expression (the program); requires success.
  Value eval(std::string_view text, const Record& r) {
    auto e = Expression::compile(text, names);
    Value out;
    ctx.error.clear();
    bool ok = e.eval(r, ctx, out);
    INFO(text << ": " << ctx.error);
    REQUIRE(ok);
    return out;
  }
  // Evaluates through Expression; requires a per-record error and returns its message.
  std::string error(std::string_view text, const Record& r) {
    auto e = Expression::compile(text, names);
    Value out;
    ctx.error.clear();
    INFO(text);
    REQUIRE_FALSE(e.eval(r, ctx, out));
    return ctx.error;
  }
};

bool same_value(const Value& a, const Value& b, int depth = 0) {
  if (a.kind != b.kind || depth > 8) return false;
  switch (a.kind) {
  case Kind::Null: return true;
  case Kind::Bool: return a.b == b.b;
  case Kind::Int: return a.i == b.i;
  case Kind::Float: return (std::isnan(a.f) && std::isnan(b.f)) || std::memcmp(&a.f, &b.f, 8) == 0;
  case Kind::String: return a.str() == b.str();
  case Kind::Array:
    if (a.size != b.size) return false;
    for (std::uint32_t k = 0; k < a.size; ++k)
      if (!same_value(a.array[k], b.array[k], depth + 1)) return false;
    return true;
  case Kind::Map:
    if (a.size != b.size) return false;
    for (std::uint32_t k = 0; k < a.size; ++k)
      if (a.map[k].name != b.map[k].name || !same_value(a.map[k].value, b.map[k].value, depth + 1))
        return false;
    return true;
  }
  return false;
}

std::string show(const Value& v) {
  switch (v.kind) {
  case Kind::Null: return "null";
  case Kind::Bool: return v.b ? "true" : "false";
  case Kind::Int: return std::to_string(v.i) + "i";
  case Kind::Float: return std::to_string(v.f) + "f";
  case Kind::String: return "\"" + std::string(v.str()) + "\"";
  case Kind::Array: return "array[" + std::to_string(v.size) + "]";
  case Kind::Map: return "map[" + std::to_string(v.size) + "]";
  }
  return "?";
}

} // namespace

TEST_CASE("program: constants are folded away before lowering", "[expression][program]") {
  FieldNames names;
  for (const char* text : {"1 + 2 * 3", "upper(\"a\") + lower(\"B\")", "if(true, 1, x)",
                           "hash(42) % 100", "null ?? 7", "!(1 < 2) || 3 == 3.0"}) {
    Lowered l(text, names);
    INFO(text << "\n" << l.listing());
    CHECK(l.program->code().empty());
  }
  Records rs;
  Record r = rs.make({});
  CHECK(rs.eval("1 + 2 * 3", r).i == 7);
  CHECK(rs.eval("hash(42) % 100", r).i == rs.eval("hash(x ?? 42) % 100", r).i);
  CHECK(rs.eval("upper(\"a\") + lower(\"B\")", r).str() == "Ab");
}

TEST_CASE("program: field operands are read in place and a constant divisor is specialised",
          "[expression][program]") {
  FieldNames names;
  Lowered hash("hash(seq) % 100000", names);
  // hash() of a key modulo a constant is one instruction (the bucket of a key).
  CHECK(hash.listing() == "0: r0 = hash.mod.const $seq, 100000\n"
                          "result r0\n");
  CHECK(Lowered("(hash(seq) + 0) % 7", names).listing() == "0: r0 = hash $seq\n"
                                                           "1: r2 = add r0, r1\n"
                                                           "2: r4 = mod.const r2, 7\n"
                                                           "result r4\n");
  Lowered filter("status == 200 && kb > 4 && user != \"bot\"", names);
  CHECK(filter.listing() == "0: r0 = decide eq $status, r1 -> 4\n"
                            "1: r0 = decide gt $kb, r2 -> 4\n"
                            "2: r0 = decide str.ne $user, \"bot\" -> 4\n"
                            "3: r0 = set.bool true\n"
                            "result r0\n");
  // A divisor that could fail or overflow (0, -1, a field) keeps the general instruction.
  CHECK(Lowered("seq % 0", names).listing().find("mod $seq") != std::string::npos);
  CHECK(Lowered("seq / -1", names).listing().find("div $seq") != std::string::npos);
  CHECK(Lowered("seq / n", names).listing().find("div $seq, $n") != std::string::npos);
  // Nested paths are loaded by an instruction of their own.
  CHECK(Lowered("geo.city", names).listing() == "0: r0 = load.path geo.city\nresult r0\n");
}

TEST_CASE("program: int, float and mixed arithmetic", "[expression][program]") {
  Records rs;
  Record r = rs.make({{"i", Value::integer(7)},
                      {"j", Value::integer(-2)},
                      {"f", Value::floating(2.5)},
                      {"g", Value::floating(-0.5)},
                      {"s", rs.str("ab")},
                      {"big", Value::integer(INT64_MAX)},
                      {"min", Value::integer(INT64_MIN)},
                      {"zero", Value::integer(0)}});
  CHECK(rs.eval("i + j", r).i == 5);
  CHECK(rs.eval("i - j", r).i == 9);
  CHECK(rs.eval("i * j", r).i == -14);
  CHECK(rs.eval("i / j", r).i == -3); // truncates toward zero
  CHECK(rs.eval("i % j", r).i == 1);
  CHECK(rs.eval("j % i", r).i == -2);
  CHECK(rs.eval("min % j", r).i == 0);
  CHECK(rs.eval("min % -1", r).i == 0);
  CHECK(rs.eval("f + g", r).f == 2.0);
  CHECK(rs.eval("f * g", r).f == -1.25);
  CHECK(rs.eval("f / g", r).f == -5.0);
  CHECK(rs.eval("f % 1", r).f == 0.5);
  Value mixed = rs.eval("i + f", r);
  CHECK(mixed.kind == Kind::Float);
  CHECK(mixed.f == 9.5);
  CHECK(rs.eval("f - i", r).f == -4.5);
  CHECK(std::isinf(rs.eval("f / 0.0", r).f));
  CHECK(rs.eval("s + \"c\"", r).str() == "abc");
  CHECK(rs.eval("-j", r).i == 2);
  CHECK(rs.eval("-g", r).f == 0.5);
  // Constant divisors, positive and negative, through the reciprocal.
  CHECK(rs.eval("i / 2", r).i == 3);
  CHECK(rs.eval("j / 2", r).i == -1);
  CHECK(rs.eval("i % -3", r).i == 1);
  CHECK(rs.eval("min / 7", r).i == INT64_MIN / 7);
  CHECK(rs.eval("big % 1000", r).i == INT64_MAX % 1000);
  CHECK(rs.eval("f / 2", r).f == 1.25); // a float dividend leaves the int path
  CHECK(rs.eval("f % 2", r).f == 0.5);
}

TEST_CASE("program: overflow, division by zero and bad operands are per-record errors",
          "[expression][program]") {
  Records rs;
  Record r = rs.make({{"big", Value::integer(INT64_MAX)},
                      {"min", Value::integer(INT64_MIN)},
                      {"zero", Value::integer(0)},
                      {"s", rs.str("x")},
                      {"b", Value::boolean(true)}});
  CHECK(rs.error("big + 1", r) == "integer overflow in 'big + 1'");
  CHECK(rs.error("min - 1", r) == "integer overflow in 'min - 1'");
  CHECK(rs.error("big * 2", r) == "integer overflow in 'big * 2'");
  CHECK(rs.error("min / -1", r) == "integer overflow in 'min / -1'");
  CHECK(rs.error("-min", r) == "integer overflow in '-min'");
  CHECK(rs.error("7 / zero", r) == "division by zero in '7 / zero'");
  CHECK(rs.error("7 % zero", r) == "modulo by zero in '7 % zero'");
  CHECK(rs.error("s % 10", r) == "field 's': expected a number, got string in 's % 10'");
  CHECK(rs.error("s * 2", r) == "field 's': expected a number, got string in 's * 2'");
  CHECK(rs.error("s < 2", r) == "cannot compare string with int in 's < 2'");
  CHECK(rs.error("b < b", r) == "cannot order bool values with '<' in 'b < b'");
  CHECK(rs.error("s && true", r) == "field 's': expected a bool, got string in 's && true'");
  CHECK(rs.error("true && s == 1", r) == "cannot compare string with int in 's == 1'");
  CHECK(rs.error("!s", r) == "field 's': expected a bool, got string in '!s'");
  CHECK(rs.error("if(s, 1, 2)", r) == "field 's': expected a bool, got string in 'if(s, 1, 2)'");
  CHECK(rs.error("substr(b, 1)", r) ==
        "field 'b': expected a string, got bool in 'substr(b, 1)'");
}

TEST_CASE("program: null propagates through arithmetic and calls, compares false",
          "[expression][program]") {
  Records rs;
  Record r = rs.make({{"n", Value::null()}, {"i", Value::integer(3)}, {"s", rs.str("ab")}});
  for (const char* text : {"n + 1", "i * n", "n % 10", "n / 3", "-n", "hash(n)", "hash(missing)",
                           "len(n)", "substr(n, 1)", "n[0]", "lower(missing)"}) {
    INFO(text);
    CHECK(rs.eval(text, r).kind == Kind::Null);
  }
  for (const char* text : {"n == n", "n != 1", "n < 1", "missing == null", "i > n", "n >= s",
                           "n && true", "n || false"}) {
    INFO(text);
    Value v = rs.eval(text, r);
    REQUIRE(v.kind == Kind::Bool);
    CHECK_FALSE(v.b);
  }
  // A null argument that propagates skips the arguments after it, as in the tree walker.
  CHECK(rs.eval("substr(n, 1 / (i - 3))", r).kind == Kind::Null);
  CHECK(rs.eval("!n", r).b);
  CHECK(rs.eval("n ?? missing ?? i", r).i == 3);
  CHECK(rs.eval("concat(s, n, \"-\", missing)", r).str() == "ab-");
  CHECK(rs.eval("concat(s, i, 1.5)", r).str() == "ab31.5");
}

TEST_CASE("program: comparisons of ints, floats, mixed numbers and strings",
          "[expression][program]") {
  Records rs;
  const std::int64_t p53 = std::int64_t{1} << 53;
  Record r = rs.make({{"i", Value::integer(4)},
                      {"f", Value::floating(4.0)},
                      {"h", Value::floating(4.5)},
                      {"nan", Value::floating(std::nan(""))},
                      {"p", Value::integer(p53 + 1)},
                      {"pf", Value::floating(static_cast<double>(p53))},
                      {"a", rs.str("abc")},
                      {"b", rs.str("abd")},
                      {"e", rs.str("")}});
  struct Case {
    const char* text;
    bool expected;
  } cases[] = {
      {"i == 4", true},  {"i != 4", false}, {"i < 5", true},     {"i <= 3", false},
      {"i > 3", true},   {"i >= 5", false}, {"i == f", true},    {"f == i", true},
      {"i < h", true},   {"h > i", true},   {"h >= 4", true},    {"f <= 3", false},
      {"nan == nan", false}, {"nan != nan", true}, {"nan < 1", false}, {"nan >= i", false},
      {"i != nan", true}, {"p > pf", true},  {"pf < p", true},   {"p == pf", false},
      {"a < b", true},   {"a == \"abc\"", true}, {"a != b", true}, {"b <= a", false},
      {"e < a", true},   {"e == \"\"", true}, {"a >= a", true},  {"\"abcd\" > a", true},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    Value v = rs.eval(c.text, r);
    REQUIRE(v.kind == Kind::Bool);
    CHECK(v.b == c.expected);
  }
}

TEST_CASE("program: equality with a string constant of every length is decided inline",
          "[expression][program]") {
  // StrEq and StrNe compare a constant of 1 to 16 bytes in two loads that may overlap, and a
  // longer one by memcmp: every length up to 40, against the same string, one differing at
  // each position, one a byte shorter and one a byte longer, with the constant on either side,
  // alone and as an operand of &&, one record at a time and in a batch.
  Records rs;
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH";
  for (std::size_t n = 0; n <= 40; ++n) {
    const std::string constant = alphabet.substr(0, n);
    std::vector<std::string> values = {constant, constant + "x"};
    if (n > 0) values.push_back(constant.substr(0, n - 1));
    for (std::size_t at = 0; at < n; ++at) {
      std::string differs = constant;
      differs[at] = static_cast<char>(differs[at] ^ 0x20);
      values.push_back(differs);
    }
    const std::string quoted = "\"" + constant + "\"";
    for (const std::string& value : values) {
      Record r = rs.make({{"s", rs.str(value)}, {"t", Value::boolean(true)}});
      const bool same = value == constant;
      INFO("constant \"" << constant << "\", value \"" << value << "\"");
      CHECK(rs.eval("s == " + quoted, r).b == same);
      CHECK(rs.eval(quoted + " == s", r).b == same);
      CHECK(rs.eval("s != " + quoted, r).b == !same);
      CHECK(rs.eval(quoted + " != s", r).b == !same);
      CHECK(rs.eval("t && s == " + quoted, r).b == same);
      CHECK(rs.eval("t && " + quoted + " != s", r).b == !same);
      auto e = Expression::compile("s == " + quoted + " || s == \"" + constant + "z\"", rs.names);
      std::vector<Record> batch(37, r);
      std::vector<Value> out(batch.size());
      REQUIRE(e.eval_batch(batch, rs.ctx, out.data()) == batch.size());
      for (const Value& v : out) CHECK(v.b == same);
    }
  }
  FieldNames names;
  CHECK(Lowered("s == \"bid\"", names).listing() == "0: r1 = str.eq $s, \"bid\"\nresult r1\n");
  CHECK(Lowered("\"bid\" != s", names).listing() == "0: r1 = str.ne $s, \"bid\"\nresult r1\n");
}

TEST_CASE("program: a string constant compared with another kind follows the general rules",
          "[expression][program]") {
  Records rs;
  Record r = rs.make({{"i", Value::integer(3)}, {"n", Value::null()}, {"s", rs.str("3")}});
  // null compares false both ways; a number with a string is a per-record error, its message
  // naming the kinds in the order written.
  CHECK_FALSE(rs.eval("n == \"3\"", r).b);
  CHECK_FALSE(rs.eval("missing != \"3\"", r).b);
  CHECK_FALSE(rs.eval("true && n == \"3\"", r).b);
  CHECK(rs.error("i == \"3\"", r).find("cannot compare int with string") != std::string::npos);
  CHECK(rs.error("\"3\" != i", r).find("cannot compare string with int") != std::string::npos);
  CHECK(rs.error("s == \"3\" && i == \"3\"", r).find("cannot compare int with string") !=
        std::string::npos);
}

TEST_CASE("program: hash of ints and strings matches the general hash", "[expression][program]") {
  Records rs;
  Record r = rs.make({{"i", Value::integer(-17)},
                      {"s", rs.str("key")},
                      {"f", Value::floating(-17.0)},
                      {"t", Value::boolean(true)}});
  // Known values (the format is a contract; expression_test.cpp pins more of them).
  CHECK(rs.eval("hash(i)", r).i == rs.eval("hash(f)", r).i);
  CHECK(rs.eval("hash(i)", r).i == rs.eval("hash(-17)", r).i); // folded by the tree walker
  CHECK(rs.eval("hash(s)", r).i == rs.eval("hash(\"key\")", r).i);
  CHECK(rs.eval("hash(t)", r).i == rs.eval("hash(true)", r).i);
}

TEST_CASE("program: hash(x) % k in one instruction agrees with hash and % apart",
          "[expression][program]") {
  Records rs;
  Value elements[] = {Value::integer(1), Value::null()};
  Record r = rs.make({{"i", Value::integer(-17)},
                      {"big", Value::integer(INT64_MIN)},
                      {"s", rs.str("key")},
                      {"e", rs.str("")},
                      {"f", Value::floating(2.5)},
                      {"t", Value::boolean(false)},
                      {"n", Value::null()},
                      {"a", Value::array_of(elements, 2)}});
  for (const char* x : {"i", "big", "s", "e", "f", "t", "n", "missing", "a"}) {
    for (const char* k : {"1", "2", "7", "100000", "-3", "-100000", "9223372036854775807"}) {
      std::string fused = std::string("hash(") + x + ") % " + k;
      std::string apart = std::string("(hash(") + x + ") ?? null) % " + k; // not fused
      INFO(fused);
      REQUIRE(Lowered(fused, rs.names).listing().find("hash.mod.const") != std::string::npos);
      REQUIRE(Lowered(apart, rs.names).listing().find("hash.mod.const") == std::string::npos);
      Value a = rs.eval(fused, r);
      Value b = rs.eval(apart, r);
      CHECK(same_value(a, b));
      CHECK(a.kind == (std::string(x) == "n" || std::string(x) == "missing" ? Kind::Null
                                                                              : Kind::Int));
    }
  }
  // The sign of the remainder follows the hash (C++ %), whatever the divisor's sign.
  std::int64_t h = rs.eval("hash(s)", r).i;
  CHECK(rs.eval("hash(s) % 1000", r).i == h % 1000);
  CHECK(rs.eval("hash(s) % -1000", r).i == h % -1000);
  // Divisors that can fail or overflow keep the general rules and messages.
  CHECK(rs.error("hash(s) % 0", r) == "modulo by zero in 'hash(s) % 0'");
  CHECK(rs.eval("hash(s) % -1", r).i == 0);
}

TEST_CASE("program: concat of strings goes into the arena and needs one",
          "[expression][program]") {
  Records rs;
  Record r = rs.make({{"u", rs.str("bob")}, {"p", rs.str("/home")}});
  CHECK(rs.eval("concat(u, \"-\", p)", r).str() == "bob-/home");
  CHECK(rs.eval("concat(u, missing)", r).str() == "bob");
  CHECK(rs.eval("concat(missing)", r).str().empty());
  rs.ctx.arena = nullptr;
  CHECK(rs.error("concat(u, p)", r) == "this expression makes strings and needs EvalContext::arena");
}

TEST_CASE("program: division by a constant matches / and % for every sign and size",
          "[expression][program]") {
  std::mt19937_64 rng(7);
  std::vector<std::int64_t> divisors = {1,         2,         3,        7,          10,
                                        100000,    -2,        -3,       -7,         -100000,
                                        INT64_MAX, INT64_MIN, 1LL << 32, -(1LL << 32), 641};
  for (int k = 0; k < 200; ++k) {
    auto d = static_cast<std::int64_t>(rng() >> (rng() % 64));
    if (rng() % 2) d = -d;
    if (d != 0 && d != -1) divisors.push_back(d);
  }
  std::vector<std::int64_t> dividends = {0, 1, -1, INT64_MAX, INT64_MIN, INT64_MIN + 1, 99999,
                                         100000, -100000, 100001};
  for (int k = 0; k < 300; ++k) {
    auto n = static_cast<std::int64_t>(rng() >> (rng() % 64));
    dividends.push_back(rng() % 2 ? n : -n);
  }
  for (std::int64_t d : divisors) {
    expr::ConstantDivisor divisor(d);
    for (std::int64_t n : dividends) {
      if (n == INT64_MIN && d == -1) continue;
      INFO(n << " / " << d);
      REQUIRE(divisor.quotient(n) == n / d);
      REQUIRE(divisor.remainder(n) == n % d);
    }
  }
}

namespace {

// Random expressions over the fields of random records: the program and the tree walker
// must agree on success, on the message of a failure, and on the value.
class RandomExpressions {
public:
  explicit RandomExpressions(std::uint64_t seed) : rng_(seed) {}

  std::string expression(int depth) {
    if (depth <= 0 || pick(4) == 0) return leaf();
    switch (pick(14)) {
    case 0: return "(" + expression(depth - 1) + " " + arith() + " " + expression(depth - 1) + ")";
    case 1: return "(" + expression(depth - 1) + " " + cmp() + " " + expression(depth - 1) + ")";
    case 2:
      return "(" + expression(depth - 1) + (pick(2) ? " && " : " || ") + expression(depth - 1) +
             (pick(2) ? " && " + expression(depth - 1) : "") + ")";
    case 3: return "(" + expression(depth - 1) + " ?? " + expression(depth - 1) + ")";
    case 4: return "if(" + expression(depth - 1) + ", " + expression(depth - 1) + ", " +
                   expression(depth - 1) + ")";
    case 5: return "hash(" + expression(depth - 1) + ")";
    case 6: return "concat(" + expression(depth - 1) + ", " + expression(depth - 1) + ")";
    case 7: return std::string(pick(2) ? "-" : "!") + "(" + expression(depth - 1) + ")";
    case 8: return "(" + expression(depth - 1) + " " + (pick(2) ? "%" : "/") + " " +
                   std::to_string(static_cast<int>(pick(9)) - 3) + ")";
    case 9: return "len(" + expression(depth - 1) + ")";
    case 10: return "substr(" + expression(depth - 1) + ", " + expression(depth - 1) + ")";
    case 11: return expression(depth - 1) + "[" + expression(depth - 1) + "]";
    case 12: return "to_string(" + expression(depth - 1) + ")";
    default: return "max(" + expression(depth - 1) + ", " + expression(depth - 1) + ")";
    }
  }

  Value value(Batch& batch, FieldNames& names, int depth = 0) {
    switch (pick(depth > 0 ? 6 : 8)) {
    case 0: return Value::null();
    case 1: return Value::boolean(pick(2) == 1);
    case 2: {
      static const std::int64_t ints[] = {0, 1, -1, 2, 3, 7, 100, -100000, INT64_MAX, INT64_MIN,
                                          (1LL << 53) + 1};
      return Value::integer(pick(3) ? static_cast<std::int64_t>(pick(21)) - 10 : ints[pick(11)]);
    }
    case 3: {
      static const double floats[] = {0.0, -0.0, 0.5, -2.5, 4.0, 1e300, std::nan(""),
                                      static_cast<double>(1LL << 53)};
      return Value::floating(floats[pick(8)]);
    }
    case 4:
    case 5: {
      static const char* strings[] = {"", "a", "b", "bot", "ab", "A-b", "3", "2.5",
                                      "abcdefgh", "abcdefgi", "abcdefghijklmnopq"};
      return Value::string(batch.copy_string(strings[pick(std::size(strings))]));
    }
    case 6: {
      Value* elements = batch.arena().allocate_array<Value>(3);
      for (int k = 0; k < 3; ++k)
        elements[k] = value(batch, names, depth + 1);
      return Value::array_of(elements, 3);
    }
    default: {
      Field* fields = batch.arena().allocate_array<Field>(2);
      fields[0] = Field{names.intern("x"), value(batch, names, depth + 1)};
      fields[1] = Field{names.intern("y"), value(batch, names, depth + 1)};
      return Value::map_of(fields, 2);
    }
    }
  }

  std::uint64_t pick(std::uint64_t n) { return rng_() % n; }

private:
  std::string leaf() {
    static const char* leaves[] = {"a",   "b",    "c",     "d",    "m.x", "m.y",   "missing",
                                   "0",   "1",    "-1",    "3",    "2.5", "0.0",   "\"a\"",
                                   "\"\"", "true", "false", "null", "a",   "b",     "c",
                                   "\"bot\"", "\"A-b\"", "\"abcdefgh\"", "\"abcdefghijklmnopq\""};
    return leaves[pick(std::size(leaves))];
  }
  std::string arith() {
    static const char* ops[] = {"+", "-", "*", "/", "%"};
    return ops[pick(5)];
  }
  std::string cmp() {
    static const char* ops[] = {"==", "!=", "<", "<=", ">", ">="};
    return ops[pick(6)];
  }
  std::mt19937_64 rng_;
};

} // namespace

namespace {

// One outcome of eval_batch() for a record: its value or its error.
struct Outcome {
  bool ok = false;
  Value value;
  std::string error;
};

// eval_batch() over all of `records`, continuing after each failing record as an operator
// does.
std::vector<Outcome> eval_all(const Expression& e, const std::vector<Record>& records,
                              EvalContext& ctx) {
  std::vector<Outcome> outcomes(records.size());
  std::vector<Value> column(records.size());
  std::size_t at = 0;
  while (at < records.size()) {
    std::span<const Record> rest(records.data() + at, records.size() - at);
    ctx.error.clear();
    std::size_t done = e.eval_batch(rest, ctx, column.data() + at);
    for (std::size_t k = at; k < at + done; ++k)
      outcomes[k] = Outcome{true, column[k], ""};
    at += done;
    if (at < records.size()) {
      outcomes[at] = Outcome{false, Value::null(), ctx.error};
      ++at;
    }
  }
  return outcomes;
}

} // namespace

TEST_CASE("program: a batch stops at the first failing record with that record's error",
          "[expression][program]") {
  Records rs;
  // Record 2 fails at the addition, record 3 earlier (at the multiplication): the batch
  // must report record 2, and the message eval() gives for it.
  std::vector<Record> records = {
      rs.make({{"a", Value::integer(1)}, {"b", Value::integer(2)}}),
      rs.make({{"a", Value::integer(3)}, {"b", Value::integer(4)}}),
      rs.make({{"a", Value::integer(5)}, {"b", rs.str("x")}}),
      rs.make({{"a", rs.str("y")}, {"b", Value::integer(6)}}),
      rs.make({{"a", Value::integer(7)}, {"b", Value::integer(8)}}),
  };
  auto e = Expression::compile("a * 2 + b", rs.names);
  std::vector<Value> out(records.size());
  CHECK(e.eval_batch(records, rs.ctx, out.data()) == 2);
  CHECK(out[0].i == 4);
  CHECK(out[1].i == 10);
  CHECK(rs.ctx.error == rs.error("a * 2 + b", records[2]));
  CHECK(rs.ctx.error == "field 'b': expected a number, got string in 'a * 2 + b'");
  std::span<const Record> rest(records.begin() + 3, records.end());
  CHECK(e.eval_batch(rest, rs.ctx, out.data()) == 0);
  CHECK(rs.ctx.error == "field 'a': expected a number, got string in 'a * 2'");
  CHECK(e.eval_batch(rest.subspan(1), rs.ctx, out.data()) == 1);
  CHECK(out[0].i == 22);
  CHECK(e.eval_batch(std::span<const Record>(), rs.ctx, out.data()) == 0);
}

TEST_CASE("program: in a batch a record skips what its jumps skip", "[expression][program]") {
  Records rs;
  std::vector<Record> records;
  for (std::int64_t a : {2, 0, 5, 0, -1})
    records.push_back(rs.make({{"a", Value::integer(a)}, {"s", rs.str("x")}}));
  // Each of these fails on a record with a == 0 if it evaluates what the record skips.
  for (const char* text : {"a != 0 && 10 / a > 1", "a == 0 || 10 % a == 0",
                           "if(a == 0, -1, 10 / a)", "if(a == 0, 1, null) ?? 10 / a",
                           "a > 0 && s * 2 > 1 || a <= 0"}) {
    INFO(text);
    auto e = Expression::compile(text, rs.names);
    auto outcomes = eval_all(e, records, rs.ctx);
    for (std::size_t k = 0; k < records.size(); ++k) {
      Value v;
      rs.ctx.error.clear();
      bool ok = e.eval(records[k], rs.ctx, v);
      INFO("record " << k << ": " << rs.ctx.error << " / " << outcomes[k].error);
      REQUIRE(outcomes[k].ok == ok);
      CHECK(outcomes[k].error == (ok ? "" : rs.ctx.error));
      if (ok) CHECK(same_value(outcomes[k].value, v));
    }
  }
  auto e = Expression::compile("if(a == 0, -1, 10 / a)", rs.names);
  auto outcomes = eval_all(e, records, rs.ctx);
  CHECK(outcomes[1].ok);
  CHECK(outcomes[1].value.i == -1);
  CHECK(outcomes[2].value.i == 2);
}

TEST_CASE("program: a batch longer than the register file agrees with eval()",
          "[expression][program]") {
  Records rs;
  std::vector<Record> records;
  for (std::int64_t k = 0; k < 1000; ++k)
    records.push_back(rs.make(
        {{"seq", k % 97 == 0 ? Value::null() : Value::integer(k * 7919 - 400000)},
         {"user", rs.str("u" + std::to_string(k % 13))}}));
  for (const char* text : {"hash(seq) % 100000", "hash(user) % 64", "seq * 3 - 1",
                           "concat(user, \"-\", to_string(seq))", "seq > 0 && user != \"u3\"",
                           "seq / 1000"}) {
    INFO(text);
    auto e = Expression::compile(text, rs.names);
    std::vector<Value> out(records.size());
    REQUIRE(e.eval_batch(records, rs.ctx, out.data()) == records.size());
    for (std::size_t k = 0; k < records.size(); ++k) {
      Value v;
      REQUIRE(e.eval(records[k], rs.ctx, v));
      INFO("record " << k << ": " << show(out[k]) << " / " << show(v));
      REQUIRE(same_value(out[k], v));
    }
  }
  // Overflow from some record on, in the first chunk or a later one (seq grows with k): the
  // first such record is reported.
  std::vector<std::size_t> stops;
  for (const char* text : {"seq * 10000000000000", "seq * seq * seq", "seq * 1000000000000"}) {
    INFO(text);
    auto e = Expression::compile(text, rs.names);
    std::size_t first = records.size();
    std::string message;
    for (std::size_t k = 0; k < records.size() && first == records.size(); ++k) {
      Value v;
      if (!e.eval(records[k], rs.ctx, v)) {
        first = k;
        message = rs.ctx.error;
      }
    }
    std::vector<Value> out(records.size());
    rs.ctx.error.clear();
    CHECK(e.eval_batch(records, rs.ctx, out.data()) == first);
    CHECK(rs.ctx.error == message);
    stops.push_back(first);
  }
  CHECK(stops == std::vector<std::size_t>{167, 316, records.size()});
}

TEST_CASE("program: agrees with the tree walker on random expressions and records",
          "[expression][program]") {
  RandomExpressions gen(20261201);
  FieldNames names;
  Batch batch;
  Arena arena;
  std::vector<Record> records;
  for (int k = 0; k < 24; ++k) {
    RecordBuilder b;
    // Field order varies so that the position hints miss as well as hit.
    std::vector<std::string> order = {"a", "b", "c", "d", "m"};
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(k)));
    for (const auto& name : order)
      if (gen.pick(6) != 0) b.append(names.intern(name), gen.value(batch, names));
    b.finish(batch);
    records.push_back(batch[batch.size() - 1]);
  }
  std::vector<Record> many;
  for (int k = 0; k < 300; ++k)
    many.push_back(records[static_cast<std::size_t>(k * 7) % records.size()]);
  int compiled = 0;
  int failures = 0;
  for (int n = 0; n < 3000; ++n) {
    std::string text = gen.expression(4);
    ExpressionNode tree;
    std::optional<Expression> e;
    try {
      e.emplace(Expression::compile(text, names));
      expr::parse(text, names, tree);
    } catch (const ExpressionError&) {
      continue; // refused at compile time: nothing to evaluate
    }
    ++compiled;
    for (const Record& r : records) {
      EvalContext program_ctx;
      program_ctx.arena = &arena;
      EvalContext tree_ctx;
      tree_ctx.arena = &arena;
      Value from_program;
      Value from_tree;
      bool program_ok = e->eval(r, program_ctx, from_program);
      expr::Env env{r, tree_ctx, tree.names};
      bool tree_ok = expr::eval(*tree.root, env, from_tree);
      INFO(text << "\nprogram: " << (program_ok ? show(from_program) : program_ctx.error)
                << "\ntree: " << (tree_ok ? show(from_tree) : tree_ctx.error));
      REQUIRE(program_ok == tree_ok);
      if (!program_ok) {
        ++failures;
        REQUIRE(program_ctx.error == tree_ctx.error);
      } else {
        REQUIRE(same_value(from_program, from_tree));
      }
    }
    // The same records, repeated past one chunk of the batch register file, by eval_batch().
    EvalContext batch_ctx;
    batch_ctx.arena = &arena;
    std::vector<Outcome> outcomes = eval_all(*e, many, batch_ctx);
    for (std::size_t k = 0; k < many.size(); ++k) {
      EvalContext ctx;
      ctx.arena = &arena;
      Value v;
      bool ok = e->eval(many[k], ctx, v);
      INFO(text << "\nrecord " << k << "\neval: " << (ok ? show(v) : ctx.error)
                << "\neval_batch: "
                << (outcomes[k].ok ? show(outcomes[k].value) : outcomes[k].error));
      REQUIRE(outcomes[k].ok == ok);
      if (ok)
        REQUIRE(same_value(outcomes[k].value, v));
      else
        REQUIRE(outcomes[k].error == ctx.error);
    }
    arena.reset();
  }
  // The generator must exercise both outcomes, or the comparison proves little.
  CHECK(compiled > 1000);
  CHECK(failures > 100);
}
