#pragma once
// Internal to the expression engine: the table of functions of SPEC §5 and their
// implementations. The evaluator (expression.cpp) evaluates the arguments, applies the null
// rule and checks each argument's kind against the table, so an implementation sees only
// the kinds it declared.

#include <cstdint>
#include <string>
#include <string_view>

#include "pipeline/spec/expression_parser.hpp"

namespace streamctl::pipeline::expr {

enum class Fn : std::uint8_t {
  If, // lazy; evaluated by expression.cpp as Op::If
  Len,
  Lower,
  Upper,
  Trim,
  Substr,
  Contains,
  StartsWith,
  EndsWith,
  Split,
  Concat,
  ToInt,
  ToFloat,
  ToString,
  Abs,
  Floor,
  Ceil,
  Round,
  Min,
  Max,
  Hash,
  Now,
  ParseTime,
  FormatTime,
  RegexMatch,
  Burn, // testing aid: spins the CPU (see call_function)
};

constexpr std::uint8_t variadic = 255;

struct FunctionInfo {
  std::string_view name;
  Fn fn;
  std::uint8_t min_args;
  std::uint8_t max_args; // variadic: no limit
  KindMask params[3];    // kinds accepted by arguments 1..3 (null aside); a variadic
                         // function's arguments all use params[0]
  KindMask result;       // kinds of the result (null aside)
  bool nulls_propagate;  // a null argument makes the result null (concat: no)
  bool pure;             // may be folded at compile time (now(): no)

  KindMask param(std::size_t k) const { return max_args == variadic ? params[0] : params[k]; }
};

const FunctionInfo* find_function(std::string_view name);
// The known function nearest to `name` by edit distance, or "" when none is close.
std::string closest_function(std::string_view name);

// Called by the parser once a call's arguments are parsed: compiles a literal regex, checks a
// literal time format. Throws ExpressionError.
void prepare_call(Node& call);

// Runs the function on evaluated arguments (none null if nulls_propagate; kinds as declared).
bool call_function(const Node& call, const state::Value* args, std::uint32_t n, Env& env,
                   state::Value& out);

// burn(micros), for testing load handling: spins for `micros` microseconds of the calling
// thread's CPU time and returns `micros`. At most one second a call, so that a typo cannot
// stall a worker for hours.
inline constexpr std::int64_t max_burn_micros = 1'000'000;
void burn_cpu(std::int64_t micros);

// Sets env.ctx.error and returns false, so that `return fail(env, ...)` reads naturally.
bool fail(Env& env, std::string message);
// `n` bytes in the caller's arena; nullptr with an error when the context has no arena.
char* allocate(Env& env, std::size_t n);

// The two halves of hash() (format in the .cpp): FNV-1a 64 over canonical bytes, then the
// murmur3 fmix64 finalizer. Inline so that the program's hash of an int or a string (the
// common keys) is a handful of instructions with no call.
struct Fnv {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  void byte(std::uint8_t b) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  void u32(std::uint32_t v) {
    for (int k = 0; k < 4; ++k)
      byte(static_cast<std::uint8_t>(v >> (8 * k)));
  }
  void u64(std::uint64_t v) {
    for (int k = 0; k < 8; ++k)
      byte(static_cast<std::uint8_t>(v >> (8 * k)));
  }
  void bytes(std::string_view s) {
    for (char c : s)
      byte(static_cast<std::uint8_t>(c));
  }
};

inline std::uint64_t fmix64(std::uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// hash() of an int and of a string, exactly as hash_value computes them.
inline std::uint64_t hash_int(std::int64_t i) {
  Fnv h;
  h.byte('i');
  h.u64(static_cast<std::uint64_t>(i));
  return fmix64(h.h);
}
inline std::uint64_t hash_string(std::string_view s) {
  Fnv h;
  h.byte('s');
  h.u32(static_cast<std::uint32_t>(s.size()));
  h.bytes(s);
  return fmix64(h.h);
}

// Text of a value as to_string() renders it: strings as they are, arrays and maps as JSON.
bool render(const state::Value& v, Env& env, state::Value& out);
// Stable 64-bit hash of a value's canonical bytes (see the format in the .cpp).
bool hash_value(const state::Value& v, const state::FieldNames* names, std::uint64_t& out);

// RFC 3339 (`2024-01-02T03:04:05.123+02:00`) or, with a format, strftime-like directives.
// Both return false with `error` set when the text does not match.
bool parse_time(std::string_view text, std::string_view format, std::int64_t& ms,
                std::string& error);
// Checks a format for unknown directives; returns the offset of the bad one or -1.
long check_time_format(std::string_view format, std::string& error);

// Three-way comparison of numbers without losing precision for large ints (NaN: unordered,
// returned as 2).
int compare_numbers(const state::Value& a, const state::Value& b);
// Deep equality of two values of the same kind family (ints equal floats of the same value).
bool equal_values(const state::Value& a, const state::Value& b, int depth = 0);

} // namespace streamctl::pipeline::expr
