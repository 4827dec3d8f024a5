#pragma once
// The compiled `aggregates = { name = "fn(args)", ... }` table of a window or reduce node.
//
// Each entry is one call of an aggregate function of SPEC §5 (count() sum(x) min(x) max(x)
// avg(x) first(x) last(x) count_distinct(x) approx_count_distinct(x) top_k(x, k)); its
// arguments are expressions (pipeline/spec/expression.hpp), except top_k's k, a positive
// integer literal. The outer call is parsed here because Expression::compile rejects
// aggregate calls.
//
// A row (one key, one window) keeps the state of every function in one block of
// state_bytes(), aligned to block_align(): the slots of the functions, in table order, each at
// its own alignment (see aggregate_functions.hpp for each slot's size and meaning). A block
// must be init()ed before use and destroy()ed once; blocks are trivially relocatable (memcpy
// moves a block; the old copy must then be neither used nor destroyed).
//
// Threading: an Aggregates belongs to one task thread (its const methods use scratch space).

#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <span>
#include <vector>

#include "operators/aggregate_functions.hpp"
#include "pipeline/spec/expression.hpp"
#include "state/batch.hpp"
#include "state/error.hpp"
#include "state/field_names.hpp"

namespace streamctl::operators {

// A problem in one entry of the table. offset() is a byte offset into that entry's string (the
// call text), entry() its index in the table; what() names the entry:
//   aggregate 'total': unknown aggregate function 'sm'; did you mean 'sum'?
class AggregateError : public pipeline::ExpressionError {
public:
  AggregateError(std::size_t entry, std::uint32_t offset, const std::string& message)
      : ExpressionError(offset, message), entry_(entry) {}
  std::size_t entry() const { return entry_; }

private:
  std::size_t entry_;
};

// Parses one call, such as "sum(bytes)" or "top_k(user, 10)", and compiles its argument.
// Throws pipeline::ExpressionError with an offset into `text`: not a call, unknown function
// (with a did-you-mean), wrong number of arguments, a bad argument expression (the offset
// points inside the argument), k not a positive integer literal. `names` must outlive the
// function.
std::unique_ptr<AggregateFunction> compile_aggregate(std::string_view text,
                                                     state::FieldNames& names);

class Aggregates {
public:
  // `entries` is the node's aggregates table in file order: (output field name, call text).
  // Names are interned into `names`, which must outlive the Aggregates. Throws
  // AggregateError (an ExpressionError) for a bad call, Error(Usage) for an empty output name.
  static Aggregates compile(const std::vector<std::pair<std::string, std::string>>& entries,
                            state::FieldNames& names);

  Aggregates(Aggregates&&) noexcept = default;
  Aggregates& operator=(Aggregates&&) noexcept = default;

  std::size_t size() const { return functions_.size(); }
  const AggregateFunction& function(std::size_t k) const { return *functions_[k]; }

  // Bytes of one row's block (a multiple of block_align()), and the block's alignment.
  std::size_t state_bytes() const { return bytes_; }
  std::size_t block_align() const { return align_; }

  void init(std::byte* block) const;
  void destroy(std::byte* block) const;
  // Whether a block owns no heap memory (every function's plain_bytes()): a memcpy copies it.
  bool plain_bytes() const;
  // Adds a record to every function or, on a per-record error (ctx.error says why, starting
  // with the call: "sum(bytes): expected a number, got string"), to none. Arguments that are
  // the same text are evaluated once. Does not allocate for count, sum, avg, min and max on
  // numbers.
  bool add(std::byte* block, const state::Record& r, pipeline::EvalContext& ctx) const;
  // The arguments over a whole batch at once, for add_at(): faster than add() record by
  // record. Strings the arguments make go into ctx.arena, which must keep them until the
  // last add_at() of the batch. Nothing to do when no function has an argument (count()).
  void prepare(std::span<const state::Record> records, pipeline::EvalContext& ctx) const;
  // add() of records[row] of the batch last given to prepare(): the same result, the same
  // ctx.error on failure, the same change to the block.
  bool add_at(std::byte* block, std::size_t row, pipeline::EvalContext& ctx) const;
  // Merges `from` into `into` function by function; `from` stays valid (the caller destroys
  // it) and counts as the later of the two (first/last).
  void merge(std::byte* into, const std::byte* from) const;
  // Merges a block given in its binary form (serialize()) into `into`, as merge() would: what
  // a window gets from a sender that combined records before the key exchange
  // (window_combiner.hpp). False, with `into` unchanged and `error` saying why, when `bytes`
  // are not such a block (with nothing after it) or a function's check_merge() refuses.
  bool merge_serialized(std::byte* into, std::string_view bytes, std::string& error) const;
  // Appends name = result for every aggregate, in order; strings, arrays and maps go into
  // out's arena.
  void emit(const std::byte* block, state::RecordBuilder& builder, state::Batch& out) const;

  // Binary form of a block (little-endian):
  //   u32       number of functions (must equal size() when read back)
  //   per function, in table order:
  //     u8      AggregateKind of the function (count = 1, sum, avg, min, max, first, last,
  //             count_distinct, approx_count_distinct, top_k = 10; must match when read back)
  //     ...     the function's slot, as its section of aggregate_functions.cpp draws it
  // The format has no magic or version of its own: it is a part of a snapshot, whose header
  // carries them.
  void serialize(const std::byte* block, std::string& out) const;
  // Reads a block into an init()ed `block`, consuming its bytes. Truncated or corrupt input,
  // or state of a different list of functions, gives a failure; the block then stays valid
  // for destroy().
  Result<void> deserialize(std::byte* block, std::string_view& in) const;

  const std::vector<state::FieldId>& output_fields() const { return fields_; }

private:
  Aggregates() = default;

  std::vector<std::unique_ptr<AggregateFunction>> functions_;
  std::vector<std::size_t> offsets_;    // of each slot in a block
  std::vector<std::size_t> shared_arg_; // index of the first function with the same argument
  std::vector<state::FieldId> fields_;  // output names, in table order
  std::size_t bytes_ = 0;
  std::size_t align_ = 1;
  mutable std::vector<state::Value> args_; // scratch: each function's evaluated argument
  // Scratch for merge_serialized(): one block, aligned to align_, allocated on first use.
  struct AlignedFree {
    std::size_t align;
    void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t(align)); }
  };
  mutable std::unique_ptr<std::byte, AlignedFree> decoded_{nullptr, AlignedFree{1}};
  bool has_arguments_ = false;
  bool counts_only_ = false; // every function is count(): add_at() takes a fast path
  // Of the batch given to prepare(): [function][row] arguments of the functions that
  // evaluate their own (shared_arg_[k] == k, with an argument), and per row the error of the
  // first function whose argument failed, as add() would stop at it.
  mutable std::vector<std::vector<state::Value>> columns_;
  mutable std::vector<std::uint8_t> failed_;
  mutable std::vector<std::string> errors_;
};

} // namespace streamctl::operators
