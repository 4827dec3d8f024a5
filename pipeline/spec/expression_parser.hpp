#pragma once
// Internal to the expression engine (expression.cpp, expression_parser.cpp,
// expression_functions.cpp); operators include expression.hpp only.
//
// The compiled form is a tree of Nodes. Each node knows the kinds of value it may produce
// (a KindMask), which is how compile() rejects `"a" * 2` without seeing data: a field may be
// anything, a literal is exactly its kind, and an operator's result follows from its operands.

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/spec/expression.hpp"
#include "state/batch.hpp"
#include "state/field_names.hpp"
#include "state/value.hpp"

namespace streamctl::pipeline {
namespace expr {

// A set of state::Kind, one bit per kind.
using KindMask = std::uint8_t;
constexpr KindMask mask_of(state::Kind k) {
  return static_cast<KindMask>(1u << static_cast<unsigned>(k));
}
constexpr KindMask null_mask = mask_of(state::Kind::Null);
constexpr KindMask bool_mask = mask_of(state::Kind::Bool);
constexpr KindMask int_mask = mask_of(state::Kind::Int);
constexpr KindMask float_mask = mask_of(state::Kind::Float);
constexpr KindMask string_mask = mask_of(state::Kind::String);
constexpr KindMask array_mask = mask_of(state::Kind::Array);
constexpr KindMask map_mask = mask_of(state::Kind::Map);
constexpr KindMask number_mask = int_mask | float_mask;
constexpr KindMask any_mask =
    null_mask | bool_mask | number_mask | string_mask | array_mask | map_mask;

// "a number", "a string or an array", ... (null is left out: it is never what is expected).
std::string describe_mask(KindMask mask);

// Limits that keep compile() and eval() within a bounded stack whatever the text.
constexpr int max_nesting = 256;             // parentheses, calls, brackets and unary operators
constexpr int max_tree_depth = 2048;         // also bounds long chains such as a + b + c + ...
constexpr std::uint32_t max_inline_args = 8; // call arguments evaluated on the stack

enum class Op : std::uint8_t {
  Literal,
  Field,
  Neg,
  Not,
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  And,      // n-ary, flattened so that a long `a || b || c ...` stays shallow
  Or,       // n-ary
  Coalesce, // n-ary: the first operand that is not null
  If,
  Index, // base[index]
  Call,
};

struct FunctionInfo; // expression_functions.hpp

struct Node {
  Op op = Op::Literal;
  KindMask type = any_mask; // kinds this node may produce
  std::uint32_t begin = 0;  // byte range of the node in the expression text
  std::uint32_t end = 0;
  std::uint32_t at = 0; // offset of the operator or function name, for messages
  int depth = 1;        // height of the subtree
  std::string text;     // the node's source text, quoted in per-record errors

  state::Value literal; // Op::Literal; strings point into ExpressionNode::strings

  // Op::Field: path[0] is looked up in the record, the rest in nested maps.
  std::vector<state::FieldId> path;
  std::string name; // as written, without backticks: "geo.city", "odd name"
  // Position of path[0] in the last record seen: records of one source usually share their
  // field order, so this skips the linear scan. Mutable and unsynchronised: an Expression is
  // evaluated by one task thread only (the same rule as FieldNames and Arena).
  mutable std::uint32_t hint = 0;

  const FunctionInfo* fn = nullptr;        // Op::Call
  std::vector<std::unique_ptr<Node>> args; // operands, in order
  // Evaluated arguments of a call with more than max_inline_args of them, so that eval does
  // not allocate (a node is never evaluated re-entrantly; same single-thread rule as `hint`).
  mutable std::vector<state::Value> scratch;

  // regex_match: the pattern compiled once when it is a literal; otherwise the last pattern
  // seen and its compiled form (same single-thread rule as `hint`).
  std::optional<std::regex> regex;
  mutable std::string cached_pattern;
  mutable std::optional<std::regex> cached_regex;
};

} // namespace expr

// The compiled expression that Expression owns (declared in expression.hpp).
struct ExpressionNode {
  std::unique_ptr<expr::Node> root;
  // Bytes of string literals and folded constants; Values in the tree point into these. A
  // deque never moves its elements, and the ExpressionNode itself lives on the heap.
  std::deque<std::string> strings;
  // Names are needed at run time to render and hash maps (keys are FieldIds). The FieldNames
  // given to compile() must outlive the Expression.
  const state::FieldNames* names = nullptr;
  std::vector<std::string> fields; // top-level fields read, in order of first use
  // Every field reference as written, segment by segment (`left.id` is {"left", "id"}): what
  // projection needs to tell which members of a map field are read.
  std::vector<std::vector<std::string>> field_paths;

  // True when `v` (or an element of it) points into `strings`: such a result is copied into
  // the caller's arena so that it does not depend on the Expression's lifetime.
  bool borrows(const state::Value& v, int depth = 0) const;
};

namespace expr {

// What eval needs besides the node: the record, the caller's context, and the names.
struct Env {
  const state::Record& record;
  EvalContext& ctx;
  const state::FieldNames* names;
};

// Evaluates one node (expression.cpp). Returns false with env.ctx.error set on a per-record
// error; never throws.
bool eval(const Node& node, Env& env, state::Value& out);

// The operators applied to operands already evaluated (expression.cpp): one definition of
// each rule and each message, shared by the tree walker above and the flat program of
// expression_program.hpp. `n` is the operator's node. Each returns false with env.ctx.error
// set on a per-record error.
bool apply_arithmetic(const Node& n, const state::Value& a, const state::Value& b, Env& env,
                      state::Value& out);
bool apply_compare(const Node& n, const state::Value& a, const state::Value& b, Env& env,
                   state::Value& out);
bool apply_index(const Node& n, const state::Value& base, const state::Value& key, Env& env,
                 state::Value& out);
bool apply_negate(const Node& n, const state::Value& v, Env& env, state::Value& out);
// `v`, operand `k` of `parent`, in a logical context: null is false, a non-bool is an error.
bool truth_of(const Node& operand, const Node& parent, std::size_t k, const state::Value& v,
              Env& env, bool& out);
// Argument `k` of call `n` against the function's table: 1 when it is null and nulls
// propagate (the call's result is null), 0 when it is acceptable, -1 (error set) when its
// kind is not.
int check_argument(const Node& n, std::uint32_t k, const state::Value& arg, Env& env);
// The value a field node names in `r` (path through nested maps), or nullptr when absent.
const state::Value* lookup(const Node& n, const state::Record& r);
// A deep copy of a string or array (of strings) into `arena`.
state::Value copy_into(state::Arena& arena, const state::Value& v);

// Parses, type-checks and constant-folds `text` (expression_parser.cpp). Throws
// ExpressionError.
void parse(std::string_view text, state::FieldNames& names, ExpressionNode& program);

// "field 'x'" for a field, else `fallback` ("left operand of '*'").
std::string describe_operand(const Node& node, const std::string& fallback);

} // namespace expr
} // namespace streamctl::pipeline
