// Evaluation of compiled expressions: the rules, and the tree walker that applies them to the
// tree built by expression_parser.cpp. The walker folds constants at compile time and is the
// reference that the flat program (expression_program.cpp) is tested against; eval() runs
// the program.
//
// Per-record rules (SPEC §5), decided here:
//   - Arithmetic: int op int is an int (overflow is a per-record error, never a wrap);
//     any float makes a float (IEEE: x / 0.0 is inf); `+` also joins two strings;
//     int `/` and `%` by zero are per-record errors; `%` of floats is fmod.
//     A null operand makes the result null.
//   - Comparisons: false when either side is null, `==` and `!=` included. Numbers compare
//     exactly across int and float; strings byte-wise; bools, arrays and maps only with
//     `==`/`!=`. Any other mix (a string with an int) is a per-record error.
//   - Logic: `&&`, `||` short-circuit; null counts as false, so `!null` is true; any other
//     non-bool is a per-record error. `if(c, a, b)` evaluates only the branch taken.
//   - `??` yields its first non-null operand, evaluating no further.
//   - x[i]: arrays take an int (negative counts from the end), maps a string key; out of
//     range, a missing key or a null base give null.
// Evaluation never allocates on the heap for these; function results go into ctx.arena.

#include "pipeline/spec/expression.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "pipeline/spec/expression_functions.hpp"
#include "pipeline/spec/expression_parser.hpp"
#include "pipeline/spec/expression_program.hpp"

namespace streamctl::pipeline {

using state::Kind;
using state::Value;

namespace expr {
namespace {

std::string quoted(const Node& n) {
  if (n.text.size() > 120) return "'" + n.text.substr(0, 117) + "...'";
  return "'" + n.text + "'";
}

// "<operand>: expected a number, got string in '<where>'"
bool type_error(Env& env, const Node& operand, const std::string& fallback, KindMask expected,
                const Value& got, const Node& where) {
  return fail(env, describe_operand(operand, fallback) + ": expected " + describe_mask(expected) +
                       ", got " + state::kind_name(got.kind) + " in " + quoted(where));
}

std::string operand_name(const Node& n, std::size_t k) {
  const char* sides[] = {"left operand of '", "right operand of '"};
  const char* sym = "?";
  switch (n.op) {
  case Op::Add: sym = "+"; break;
  case Op::Sub: sym = "-"; break;
  case Op::Mul: sym = "*"; break;
  case Op::Div: sym = "/"; break;
  case Op::Mod: sym = "%"; break;
  case Op::Neg: return "operand of '-'";
  case Op::Not: return "operand of '!'";
  case Op::And: return "operand " + std::to_string(k + 1) + " of '&&'";
  case Op::Or: return "operand " + std::to_string(k + 1) + " of '||'";
  case Op::If: return "condition of if()";
  case Op::Index: return k == 0 ? "indexed value" : "index";
  default: break;
  }
  return std::string(sides[k > 0 ? 1 : 0]) + sym + "'";
}

} // namespace

const Value* lookup(const Node& n, const state::Record& r) {
  const state::FieldId id = n.path[0];
  const Value* v = nullptr;
  if (n.hint < r.size && r.fields[n.hint].name == id) {
    v = &r.fields[n.hint].value;
  } else {
    for (std::uint32_t k = 0; k < r.size; ++k)
      if (r.fields[k].name == id) {
        n.hint = k;
        v = &r.fields[k].value;
        break;
      }
  }
  for (std::size_t s = 1; v != nullptr && s < n.path.size(); ++s) {
    if (v->kind != Kind::Map) return nullptr; // a path through a non-map does not exist
    const Value* inner = nullptr;
    for (std::uint32_t k = 0; k < v->size; ++k)
      if (v->map[k].name == n.path[s]) {
        inner = &v->map[k].value;
        break;
      }
    v = inner;
  }
  return v;
}

bool truth_of(const Node& operand, const Node& parent, std::size_t k, const Value& v, Env& env,
              bool& out) {
  if (v.kind == Kind::Bool) {
    out = v.b;
    return true;
  }
  if (v.kind == Kind::Null) {
    out = false;
    return true;
  }
  return type_error(env, operand, operand_name(parent, k), bool_mask, v, parent);
}

namespace {

// Evaluates `operand` in a logical context: null is false, a non-bool is an error.
bool truth(const Node& operand, const Node& parent, std::size_t k, Env& env, bool& out) {
  Value v;
  if (!eval(operand, env, v)) return false;
  return truth_of(operand, parent, k, v, env, out);
}

bool int_arithmetic(const Node& n, std::int64_t a, std::int64_t b, Env& env, Value& out) {
  std::int64_t r = 0;
  bool overflow = false;
  switch (n.op) {
  case Op::Add: overflow = __builtin_add_overflow(a, b, &r); break;
  case Op::Sub: overflow = __builtin_sub_overflow(a, b, &r); break;
  case Op::Mul: overflow = __builtin_mul_overflow(a, b, &r); break;
  case Op::Div:
    if (b == 0) return fail(env, "division by zero in " + quoted(n));
    if (a == std::numeric_limits<std::int64_t>::min() && b == -1)
      overflow = true;
    else
      r = a / b;
    break;
  case Op::Mod:
    if (b == 0) return fail(env, "modulo by zero in " + quoted(n));
    r = b == -1 ? 0 : a % b;
    break;
  default: break;
  }
  if (overflow) return fail(env, "integer overflow in " + quoted(n));
  out = Value::integer(r);
  return true;
}

} // namespace

bool apply_arithmetic(const Node& n, const Value& a, const Value& b, Env& env, Value& out) {
  const Node& left = *n.args[0];
  const Node& right = *n.args[1];
  if (n.op == Op::Add) {
    if (a.kind == Kind::String && b.kind == Kind::String) {
      std::size_t size = std::size_t{a.size} + b.size;
      if (size > std::numeric_limits<std::uint32_t>::max())
        return fail(env, "string result longer than 4 GiB in " + quoted(n));
      char* p = allocate(env, size);
      if (p == nullptr) return false;
      if (a.size > 0) std::memcpy(p, a.s, a.size);
      if (b.size > 0) std::memcpy(p + a.size, b.s, b.size);
      out = Value::string(std::string_view(p, size));
      return true;
    }
    if (a.is_null() || b.is_null()) {
      out = Value::null();
      return true;
    }
    if (a.kind == Kind::String)
      return type_error(env, right, operand_name(n, 1), string_mask, b, n);
    if (!a.is_number())
      return type_error(env, left, operand_name(n, 0), number_mask | string_mask, a, n);
    if (!b.is_number()) return type_error(env, right, operand_name(n, 1), number_mask, b, n);
  } else {
    if (!a.is_number() && !a.is_null())
      return type_error(env, left, operand_name(n, 0), number_mask, a, n);
    if (!b.is_number() && !b.is_null())
      return type_error(env, right, operand_name(n, 1), number_mask, b, n);
    if (a.is_null() || b.is_null()) {
      out = Value::null();
      return true;
    }
  }
  if (a.kind == Kind::Int && b.kind == Kind::Int) return int_arithmetic(n, a.i, b.i, env, out);
  double x = a.as_double();
  double y = b.as_double();
  double r = 0;
  switch (n.op) {
  case Op::Add: r = x + y; break;
  case Op::Sub: r = x - y; break;
  case Op::Mul: r = x * y; break;
  case Op::Div: r = x / y; break;
  case Op::Mod: r = std::fmod(x, y); break;
  default: break;
  }
  out = Value::floating(r);
  return true;
}

namespace {

const char* comparison_symbol(Op op) {
  switch (op) {
  case Op::Eq: return "==";
  case Op::Ne: return "!=";
  case Op::Lt: return "<";
  case Op::Le: return "<=";
  case Op::Gt: return ">";
  default: return ">=";
  }
}

} // namespace

bool apply_compare(const Node& n, const Value& a, const Value& b, Env& env, Value& out) {
  if (a.is_null() || b.is_null()) {
    out = Value::boolean(false);
    return true;
  }
  bool equality = n.op == Op::Eq || n.op == Op::Ne;
  int c; // -1, 0, 1, or 2 for unordered (NaN)
  if (a.is_number() && b.is_number()) {
    c = compare_numbers(a, b);
  } else if (a.kind != b.kind) {
    return fail(env, std::string("cannot compare ") + state::kind_name(a.kind) + " with " +
                         state::kind_name(b.kind) + " in " + quoted(n));
  } else if (a.kind == Kind::String) {
    int s = a.str().compare(b.str());
    c = s < 0 ? -1 : (s > 0 ? 1 : 0);
  } else if (equality) {
    c = equal_values(a, b) ? 0 : 2;
  } else {
    return fail(env, std::string("cannot order ") + state::kind_name(a.kind) + " values with '" +
                         comparison_symbol(n.op) + "' in " + quoted(n));
  }
  bool r = false;
  switch (n.op) {
  case Op::Eq: r = c == 0; break;
  case Op::Ne: r = c != 0; break;
  case Op::Lt: r = c == -1; break;
  case Op::Le: r = c == -1 || c == 0; break;
  case Op::Gt: r = c == 1; break;
  default: r = c == 1 || c == 0; break;
  }
  out = Value::boolean(r);
  return true;
}

bool apply_index(const Node& n, const Value& base, const Value& key, Env& env, Value& out) {
  out = Value::null();
  if (base.is_null() || key.is_null()) return true;
  if (base.kind == Kind::Array) {
    if (key.kind != Kind::Int) return type_error(env, *n.args[1], "index", int_mask, key, n);
    std::int64_t k = key.i < 0 ? key.i + static_cast<std::int64_t>(base.size) : key.i;
    if (k >= 0 && k < static_cast<std::int64_t>(base.size)) out = base.array[k];
    return true;
  }
  if (base.kind == Kind::Map) {
    if (key.kind != Kind::String) return type_error(env, *n.args[1], "index", string_mask, key, n);
    if (env.names == nullptr) return true;
    auto id = env.names->find(key.str());
    if (!id) return true;
    for (std::uint32_t k = 0; k < base.size; ++k)
      if (base.map[k].name == *id) {
        out = base.map[k].value;
        break;
      }
    return true;
  }
  return type_error(env, *n.args[0], "indexed value", array_mask | map_mask, base, n);
}

bool apply_negate(const Node& n, const Value& v, Env& env, Value& out) {
  if (v.kind == Kind::Int) {
    if (v.i == std::numeric_limits<std::int64_t>::min())
      return fail(env, "integer overflow in " + quoted(n));
    out = Value::integer(-v.i);
  } else if (v.kind == Kind::Float) {
    out = Value::floating(-v.f);
  } else if (v.is_null()) {
    out = Value::null();
  } else {
    return type_error(env, *n.args[0], operand_name(n, 0), number_mask, v, n);
  }
  return true;
}

int check_argument(const Node& n, std::uint32_t k, const Value& arg, Env& env) {
  const FunctionInfo& fn = *n.fn;
  if (arg.is_null()) return fn.nulls_propagate ? 1 : 0;
  KindMask accepted = fn.param(k);
  if (!(mask_of(arg.kind) & accepted)) {
    type_error(env, *n.args[k],
               "argument " + std::to_string(k + 1) + " of " + std::string(fn.name) + "()",
               accepted, arg, n);
    return -1;
  }
  return 0;
}

namespace {

bool call(const Node& n, Env& env, Value& out) {
  auto count = static_cast<std::uint32_t>(n.args.size());
  Value inline_args[max_inline_args];
  Value* args = inline_args;
  if (count > max_inline_args) args = n.scratch.data(); // sized by the parser
  for (std::uint32_t k = 0; k < count; ++k) {
    const Node& arg = *n.args[k];
    if (!eval(arg, env, args[k])) return false;
    int checked = check_argument(n, k, args[k], env);
    if (checked < 0) return false;
    if (checked > 0) {
      out = Value::null();
      return true;
    }
  }
  return call_function(n, args, count, env, out);
}

} // namespace

Value copy_into(state::Arena& arena, const Value& v) {
  if (v.kind == Kind::String) return Value::string(arena.copy(v.str()));
  if (v.kind != Kind::Array) return v;
  Value* elements = arena.allocate_array<Value>(v.size == 0 ? 1 : v.size);
  for (std::uint32_t k = 0; k < v.size; ++k)
    elements[k] = copy_into(arena, v.array[k]);
  return Value::array_of(elements, v.size);
}

bool eval(const Node& n, Env& env, Value& out) {
  switch (n.op) {
  case Op::Literal: out = n.literal; return true;
  case Op::Field: {
    const Value* v = lookup(n, env.record);
    out = v != nullptr ? *v : Value::null();
    return true;
  }
  case Op::Neg: {
    Value v;
    if (!eval(*n.args[0], env, v)) return false;
    return apply_negate(n, v, env, out);
  }
  case Op::Not: {
    bool b;
    if (!truth(*n.args[0], n, 0, env, b)) return false;
    out = Value::boolean(!b);
    return true;
  }
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::Mod: {
    Value a, b;
    if (!eval(*n.args[0], env, a) || !eval(*n.args[1], env, b)) return false;
    return apply_arithmetic(n, a, b, env, out);
  }
  case Op::Eq:
  case Op::Ne:
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge: {
    Value a, b;
    if (!eval(*n.args[0], env, a) || !eval(*n.args[1], env, b)) return false;
    return apply_compare(n, a, b, env, out);
  }
  case Op::And:
  case Op::Or: {
    bool want = n.op == Op::Or; // the value that decides the result early
    for (std::size_t k = 0; k < n.args.size(); ++k) {
      bool b;
      if (!truth(*n.args[k], n, k, env, b)) return false;
      if (b == want) {
        out = Value::boolean(want);
        return true;
      }
    }
    out = Value::boolean(!want);
    return true;
  }
  case Op::Coalesce:
    for (const auto& arg : n.args) {
      if (!eval(*arg, env, out)) return false;
      if (!out.is_null()) return true;
    }
    return true;
  case Op::If: {
    bool c;
    if (!truth(*n.args[0], n, 0, env, c)) return false;
    return eval(*n.args[c ? 1 : 2], env, out);
  }
  case Op::Index: {
    Value base, key;
    if (!eval(*n.args[0], env, base) || !eval(*n.args[1], env, key)) return false;
    return apply_index(n, base, key, env, out);
  }
  case Op::Call: return call(n, env, out);
  }
  return fail(env, "internal: unknown expression node");
}

} // namespace expr

bool ExpressionNode::borrows(const Value& v, int depth) const {
  if (v.kind == Kind::Array && depth < 4) {
    for (std::uint32_t k = 0; k < v.size; ++k)
      if (borrows(v.array[k], depth + 1)) return true;
    return false;
  }
  if (v.kind != Kind::String || v.size == 0) return false;
  std::less<const char*> before;
  for (const auto& s : strings)
    if (!before(v.s, s.data()) && before(v.s, s.data() + s.size())) return true;
  return false;
}

Expression::Expression() = default;
Expression::Expression(Expression&&) noexcept = default;
Expression& Expression::operator=(Expression&&) noexcept = default;
Expression::~Expression() = default;

Expression Expression::compile(std::string_view text, state::FieldNames& names) {
  Expression e;
  e.text_ = std::string(text);
  e.root_ = std::make_unique<ExpressionNode>();
  expr::parse(text, names, *e.root_);
  e.fields_ = e.root_->fields;
  e.program_ = std::make_unique<expr::Program>(*e.root_);
  return e;
}

std::optional<std::vector<std::string>> Expression::fields_within(std::string_view top) const {
  std::vector<std::string> members;
  for (const auto& path : root_->field_paths) {
    if (path.front() != top) continue;
    if (path.size() == 1) return std::nullopt;
    if (std::find(members.begin(), members.end(), path[1]) == members.end())
      members.push_back(path[1]);
  }
  return members;
}

std::optional<Expression::FieldReference> Expression::field_reference() const {
  if (!root_ || !root_->root || root_->root->op != expr::Op::Field) return std::nullopt;
  return FieldReference{root_->root->name, root_->root->path.size() == 1};
}

std::optional<std::string> Expression::required_string(std::string_view field) const {
  if (!root_ || !root_->root) return std::nullopt;
  auto equality = [&](const expr::Node& n) -> std::optional<std::string> {
    if (n.op != expr::Op::Eq || n.args.size() != 2) return std::nullopt;
    for (std::size_t k = 0; k < 2; ++k) {
      const expr::Node& f = *n.args[k];
      const expr::Node& literal = *n.args[1 - k];
      if (f.op == expr::Op::Field && f.path.size() == 1 && f.name == field &&
          literal.op == expr::Op::Literal && literal.literal.kind == Kind::String)
        return std::string(literal.literal.str());
    }
    return std::nullopt;
  };
  const expr::Node& root = *root_->root;
  if (root.op == expr::Op::And && !root.args.empty()) return equality(*root.args.front());
  return equality(root);
}

bool Expression::eval(const state::Record& record, EvalContext& ctx, Value& out) const {
  if (!program_) { // compile() makes the tree and the program together
    ctx.error = "expression is empty (moved from)";
    return false;
  }
  try {
    if (!program_->run(record, ctx, out)) return false;
    if (out.kind == Kind::String || out.kind == Kind::Array) finish(ctx, out); // saves a call
    return true;
  } catch (const std::exception& e) {
    // Nothing above throws by design; this keeps a surprise (bad_alloc) a per-record error.
    ctx.error = std::string("internal error evaluating '") + text_ + "': " + e.what();
    return false;
  }
}

std::size_t Expression::eval_batch(std::span<const state::Record> records, EvalContext& ctx,
                                  Value* out) const {
  if (!program_) {
    ctx.error = "expression is empty (moved from)";
    return 0;
  }
  std::size_t finished = 0;
  try {
    std::size_t done = program_->run_batch(records, ctx, out);
    for (; finished < done; ++finished)
      if (out[finished].kind == Kind::String || out[finished].kind == Kind::Array)
        finish(ctx, out[finished]); // (the test here saves a call per int or bool)
    return done;
  } catch (const std::exception& e) {
    // As in eval(); when the program throws, which record of its chunk was running is not
    // known, so the first one not yet finished takes the blame (nothing throws by design).
    ctx.error = std::string("internal error evaluating '") + text_ + "': " + e.what();
    return finished;
  }
}

// A result that points into this Expression's literals gets a copy of its own; an empty
// string points to static storage.
void Expression::finish(EvalContext& ctx, Value& out) const {
  if (out.kind != Kind::String && out.kind != Kind::Array) return; // the common case
  if (out.kind == Kind::String && out.size == 0) {
    out = Value::string(std::string_view{""}); // static storage: no lifetime to track
  } else if (!root_->strings.empty() && ctx.arena != nullptr && root_->borrows(out)) {
    // A literal, or a piece of one: give the caller a copy that outlives this Expression.
    out = expr::copy_into(*ctx.arena, out);
  }
}

bool Expression::eval_predicate(const state::Record& record, EvalContext& ctx, bool& out) const {
  Value v;
  return eval(record, ctx, v) && as_predicate(v, ctx, out);
}

bool Expression::as_predicate(const Value& v, EvalContext& ctx, bool& out) {
  if (v.kind == Kind::Bool) {
    out = v.b;
    return true;
  }
  if (v.kind == Kind::Null) {
    out = false;
    return true;
  }
  ctx.error = std::string("where expression must be boolean, got ") + state::kind_name(v.kind);
  return false;
}

} // namespace streamctl::pipeline
