#pragma once
// Expressions of SPEC §5, compiled once per operator and evaluated per record.
//
// compile() parses and type-checks the text, folds constants, resolves field names to
// FieldIds and lowers the result to a flat program of typed instructions, so that eval()
// neither re-parses, nor looks names up by string, nor walks a tree. eval() does not allocate for
// values that already exist in the record; strings a function makes (lower, concat, ...) go
// into the caller's arena. Null semantics: arithmetic on null is null, a comparison with null
// is false. A type error at run time (a string where a number is needed) is a per-record
// error: eval() returns false and sets ctx.error; it never throws and never crashes.
//
// Not thread-safe: eval() writes the program's registers and field-position hints, so an
// Expression belongs to one task thread (as FieldNames and Arena do).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "state/arena.hpp"
#include "state/batch.hpp"
#include "state/field_names.hpp"

namespace streamctl::pipeline {

// A compile-time problem; `offset` is the 0-based byte offset into the expression text.
class ExpressionError : public std::runtime_error {
public:
  ExpressionError(std::uint32_t offset, const std::string& message)
      : std::runtime_error(message), offset_(offset) {}
  std::uint32_t offset() const { return offset_; }

private:
  std::uint32_t offset_;
};

struct EvalContext {
  state::Arena* arena = nullptr; // where strings made by functions go; must outlive the values
  std::int64_t now_ms = 0;       // what now() returns (processing time, epoch ms)
  std::string error;             // set when eval() returns false
};

struct ExpressionNode; // the parsed tree, private to the expression engine
namespace expr {
class Program; // the tree lowered to instructions (expression_program.hpp)
}

class Expression {
public:
  // Throws ExpressionError on a syntax error, an unknown function, a wrong number of
  // arguments, or a type error that can be seen without data (`"a" * 2`).
  static Expression compile(std::string_view text, state::FieldNames& names);

  // Returns false on a per-record error (ctx.error says why); `out` may point into `record`
  // or into ctx.arena.
  bool eval(const state::Record& record, EvalContext& ctx, state::Value& out) const;

  // eval() of each record in order into out[0..records.size()), faster than a loop over
  // eval(): each instruction runs over many records at once. Stops at the first per-record
  // error and returns how many records succeeded before it (records.size() when none
  // failed); records[returned] then failed with ctx.error set, and the caller continues
  // after it. Results and messages are eval()'s.
  std::size_t eval_batch(std::span<const state::Record> records, EvalContext& ctx,
                         state::Value* out) const;

  // Convenience for filters: true only when the value is the boolean true (null is false).
  // Returns false with ctx.error set when evaluation fails or the result is not a bool/null.
  bool eval_predicate(const state::Record& record, EvalContext& ctx, bool& out) const;
  // The predicate rule of eval_predicate() for a value already evaluated (by eval_batch()).
  static bool as_predicate(const state::Value& v, EvalContext& ctx, bool& out);

  const std::string& text() const { return text_; }
  // When the whole expression is one field reference: its name as written, without
  // backticks ("user", "geo.city", "odd name"); `top_level` says whether it names a field of
  // the record itself rather than one in a nested map.
  struct FieldReference {
    std::string name;
    bool top_level = false;
  };
  std::optional<FieldReference> field_reference() const;
  // The string that the top-level field `field` must be for the expression to be true, when
  // it is `field == "S"` (either way round) or a `&&` whose first operand is: then every other
  // record makes it false, without an error (`&&` stops there). Planning uses it to tell a
  // source which records a filter keeps (Nexmark's filters on event_type).
  std::optional<std::string> required_string(std::string_view field) const;
  // Top-level field names the expression reads (for documentation and planning).
  const std::vector<std::string>& fields() const { return fields_; }
  // The members of the map field `top` that the expression reads (`left.id` reads "id" of
  // `left`); nullopt when it reads `top` whole (`left`, `len(left)`, `left["id"]`).
  std::optional<std::vector<std::string>> fields_within(std::string_view top) const;

  Expression(Expression&&) noexcept;
  Expression& operator=(Expression&&) noexcept;
  ~Expression();

private:
  Expression();
  void finish(EvalContext& ctx, state::Value& out) const;
  std::string text_;
  std::vector<std::string> fields_;
  std::unique_ptr<ExpressionNode> root_;
  std::unique_ptr<expr::Program> program_; // points into *root_
};

} // namespace streamctl::pipeline
