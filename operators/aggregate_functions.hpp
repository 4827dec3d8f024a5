#pragma once
// The aggregate functions of SPEC §5, as used by `window` and `reduce` through Aggregates
// (operators/aggregates.hpp, which also parses `fn(args)`).
//
// Each function keeps its running state in a fixed-size slot of a row's state block, so that a
// keyed table of rows is one allocation per row; functions whose state grows (count_distinct,
// approx_count_distinct, top_k) keep a pointer in the slot and free it in destroy(). count,
// sum, avg, min, max, first and last are incremental: they never keep the records.
//
// Semantics (null inputs are skipped by every function except count(), which counts records):
//   function                state slot               of nothing   result
//   count()                 8  B  u64                0            int: records added
//   count(x)                8  B  u64                0            int: records with non-null x
//   sum(x)                  16 B  i64|f64 + kind     null         int while every x is an int
//                                                                 (overflow: per-record error),
//                                                                 float once any x is a float
//   avg(x)                  24 B  i64|f64, n, kind   null         float
//   min(x), max(x)          16 B  Value-like, owns   null         the extreme number, or string
//                                 a string copy                   (bytewise); numbers and strings
//                                                                 never mix (per-record error)
//   first(x), last(x)       16 B  Value-like, owns   null         the first / last non-null x in
//                                 string/array/map                arrival order
//                                 bytes
//   count_distinct(x)       8  B  pointer to a set   0            int, exact
//   approx_count_distinct   8  B  pointer to a       0            int, HyperLogLog p = 14
//                                 HyperLogLog
//   top_k(x, k)             8  B  pointer to a map   []           array of {"value", "count"}
//                                 value → count                   maps, count desc, then value
//
// Values compare as SPEC §4 says equal values do: an int and a float of the same number are the
// same distinct value (2 and 2.0), as are maps with the same members in another order. Such
// values are keyed by canonical bytes (see aggregate_functions.cpp), which name map fields by
// their text, never by FieldId, so that snapshots move between processes.
//
// merge() cannot fail, so the two cases that add() reports as errors resolve quietly there: two
// int sums whose total overflows become a float sum, and min/max of a numbers slot and a strings
// slot keep `into`.
//
// top_k counts exactly: its memory grows with the number of distinct values of x in a row (about
// 64 bytes plus the value's size for each). count_distinct likewise.
//
// Threading: a function object is used by the one task thread that owns its Aggregates; the
// const methods use mutable scratch buffers and are not safe to call concurrently.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pipeline/spec/expression.hpp"
#include "state/batch.hpp"
#include "state/error.hpp"
#include "state/field_names.hpp"
#include "state/value.hpp"

namespace streamctl::operators {

enum class AggregateKind : std::uint8_t {
  Count = 1, // the numbers are serialized as slot tags: never renumber
  Sum,
  Avg,
  Min,
  Max,
  First,
  Last,
  CountDistinct,
  ApproxCountDistinct,
  TopK,
};

const char* aggregate_kind_name(AggregateKind kind);

// One function of an aggregates table, e.g. bytes = "sum(bytes)".
//
// Slots: init() before any other call; destroy() exactly once afterwards. A slot may be moved
// to another address only while it is freshly init()ed or with memcpy of its bytes (every slot
// is trivially relocatable: heap state is held by plain pointers).
class AggregateFunction {
public:
  virtual ~AggregateFunction() = default;
  virtual std::size_t state_size() const = 0; // bytes of its fixed-size slot in a row's block
  virtual std::size_t state_align() const { return alignof(std::max_align_t); }
  virtual void init(std::byte* slot) const = 0;
  virtual void destroy(std::byte* /*slot*/) const {} // for slots that own heap memory
  // Whether the slot owns no heap memory, so that a memcpy of it is an independent copy (a
  // deferred snapshot copies such blocks: state/frozen_key_groups.hpp). False wherever
  // destroy() is overridden.
  virtual bool plain_bytes() const { return true; }

  // Adds one record; false with ctx.error set on a per-record error (the record is then not
  // added). ctx.arena may be a scratch arena: what the state keeps is copied into it.
  virtual bool add(std::byte* slot, const state::Record& r, pipeline::EvalContext& ctx) const;

  // add() in three steps, so that Aggregates can add a record to every function or to none:
  // evaluate the argument (null for count()); check() that apply() would succeed; apply().
  bool evaluate(const state::Record& r, pipeline::EvalContext& ctx, state::Value& arg) const;
  virtual bool check(const std::byte* slot, const state::Value& arg, std::string& error) const = 0;
  virtual void apply(std::byte* slot, const state::Value& arg) const = 0;

  // Merges `from` into `into` (session windows merge; both slots stay valid, `from` unchanged;
  // the caller destroys it). `from` counts as having arrived after `into` (for first/last).
  virtual void merge(std::byte* into, const std::byte* from) const = 0;
  // Whether merge(into, from) keeps everything `from` holds: false, with `error` saying why as
  // check() would for a record, where merge would resolve a conflict quietly (an int sum that
  // overflows; min/max of numbers and strings). A window merging what was combined before the
  // key exchange (window_combiner.hpp) reports such a merge rather than lose part of it.
  virtual bool check_merge(const std::byte* /*into*/, const std::byte* /*from*/,
                           std::string& /*error*/) const {
    return true;
  }
  // The current result; strings, arrays and maps are copied into out's arena.
  virtual state::Value result(const std::byte* slot, state::Batch& out) const = 0;

  // Binary form of a slot for snapshots, little-endian; each function's .cpp section draws
  // its layout. deserialize() reads into an init()ed slot, consuming its bytes; on a failure
  // (truncated or corrupt input) the slot may hold part of the state but stays destroyable.
  virtual void serialize(const std::byte* slot, std::string& out) const = 0;
  virtual Result<void> deserialize(std::byte* slot, std::string_view& in) const = 0;

  AggregateKind kind() const { return kind_; }
  // The call as written, trimmed ("sum(bytes)"), which starts every error message.
  const std::string& text() const { return text_; }
  // The argument expression, or null for count() (Aggregates evaluates a shared argument once).
  const pipeline::Expression* argument() const { return argument_ ? &*argument_ : nullptr; }

protected:
  AggregateFunction(AggregateKind kind, std::string text,
                    std::optional<pipeline::Expression> argument)
      : kind_(kind), text_(std::move(text)), argument_(std::move(argument)) {}

private:
  AggregateKind kind_;
  std::string text_;
  std::optional<pipeline::Expression> argument_;
};

// A parsed call, ready to be made into a function.
struct AggregateCall {
  AggregateKind kind = AggregateKind::Count;
  std::string text;                             // trimmed call text, for messages
  std::optional<pipeline::Expression> argument; // absent only for count()
  std::uint32_t k = 0;                          // top_k's k
};

// `names` must outlive the function: map values are encoded by field name and decoded by
// interning names, and top_k's output fields "value" and "count" are interned here.
std::unique_ptr<AggregateFunction> make_aggregate_function(AggregateCall call,
                                                           state::FieldNames& names);

} // namespace streamctl::operators
