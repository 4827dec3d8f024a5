// Lowering of the expression tree into a flat program, and the loop that runs it (see the
// header). The fast paths below compute exactly what apply_* (expression.cpp) would for the
// same operands; whatever they do not handle (a null, a mix of kinds, an overflow, a division
// by zero) goes to apply_*, which also writes the message.

#include "pipeline/spec/expression_program.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "pipeline/spec/expression_functions.hpp"

namespace streamctl::pipeline::expr {

using state::Kind;
using state::Value;

ConstantDivisor::ConstantDivisor(std::int64_t d) : d_(d) {
  if (d == 1 || d == -1) return;
  one_ = false;
  // Hacker's Delight, figure 10-1, for 64 bits: the smallest p such that 2^p / |d| rounded up
  // is a multiplier exact for every dividend.
  constexpr std::uint64_t two63 = std::uint64_t{1} << 63;
  std::uint64_t ad = d < 0 ? 0 - static_cast<std::uint64_t>(d) : static_cast<std::uint64_t>(d);
  std::uint64_t t = two63 + (static_cast<std::uint64_t>(d) >> 63);
  std::uint64_t anc = t - 1 - t % ad; // |nc|
  int p = 63;
  std::uint64_t q1 = two63 / anc;
  std::uint64_t r1 = two63 - q1 * anc;
  std::uint64_t q2 = two63 / ad;
  std::uint64_t r2 = two63 - q2 * ad;
  std::uint64_t delta = 0;
  do {
    ++p;
    q1 *= 2;
    r1 *= 2;
    if (r1 >= anc) {
      ++q1;
      r1 -= anc;
    }
    q2 *= 2;
    r2 *= 2;
    if (r2 >= ad) {
      ++q2;
      r2 -= ad;
    }
    delta = ad - r2;
  } while (q1 < delta || (q1 == delta && r1 == 0));
  std::uint64_t magic = q2 + 1;
  magic_ = static_cast<std::int64_t>(d < 0 ? 0 - magic : magic);
  shift_ = p - 64;
}

namespace {

// Values are copied in the loop as two 8-byte words (kind and size; payload): a load right
// after a store is then served by one store from the store buffer. A 16-byte load of a value
// written as two words, or an 8-byte load of one written field by field, cannot be forwarded
// and waits for the stores to reach the cache.
inline void copy_value(Value& dst, const Value& src) {
  std::uint64_t head;
  std::uint64_t body;
  std::memcpy(&head, &src, sizeof head);
  std::memcpy(&body, &src.i, sizeof body);
  std::memcpy(static_cast<void*>(&dst), &head, sizeof head);
  std::memcpy(&dst.i, &body, sizeof body);
}

Code arithmetic_code(Op op) {
  switch (op) {
  case Op::Add: return Code::Add;
  case Op::Sub: return Code::Sub;
  case Op::Mul: return Code::Mul;
  case Op::Div: return Code::Div;
  default: return Code::Mod;
  }
}

Code comparison_code(Op op) {
  switch (op) {
  case Op::Eq: return Code::Eq;
  case Op::Ne: return Code::Ne;
  case Op::Lt: return Code::Lt;
  case Op::Le: return Code::Le;
  case Op::Gt: return Code::Gt;
  default: return Code::Ge;
  }
}

// Whether CheckArg can ever act on argument k: a null that propagates, or a kind that the
// function does not take.
bool needs_check(const Node& call, std::size_t k) {
  KindMask type = call.args[k]->type;
  if ((type & null_mask) && call.fn->nulls_propagate) return true;
  return (type & ~null_mask & ~call.fn->param(k)) != 0;
}

// A three-way result (-1, 0, 1) as the answer of comparison `c`.
bool decide(Code c, int order) {
  switch (c) {
  case Code::Eq: return order == 0;
  case Code::Ne: return order != 0;
  case Code::Lt: return order < 0;
  case Code::Le: return order <= 0;
  case Code::Gt: return order > 0;
  default: return order >= 0;
  }
}

template <typename T> int three_way(T x, T y) {
  return x < y ? -1 : (x > y ? 1 : 0);
}

// An int within ±2^53 is exactly a double, so comparing it as one with a float is exact
// (as compare_numbers is for every int).
constexpr std::int64_t exact_in_double = std::int64_t{1} << 53;

// `x c y` for doubles: IEEE comparisons treat NaN as apply_compare does (unordered, so only
// != holds).
inline bool compare_doubles(Code c, double x, double y) {
  switch (c) {
  case Code::Eq: return x == y;
  case Code::Ne: return x != y;
  case Code::Lt: return x < y;
  case Code::Le: return x <= y;
  case Code::Gt: return x > y;
  default: return x >= y;
  }
}

// Comparison fast paths; false when the operands need apply_compare. Not recursive, so that
// it inlines into the loops (a call per comparison was 40% of a filter's time).
[[gnu::always_inline]] inline bool compare_fast(Code c, const Value& a, const Value& b,
                                                Value& out) {
  if (a.kind != b.kind) {
    // An int and a float: exact as doubles when the int is within ±2^53.
    if (a.kind == Kind::Int && b.kind == Kind::Float && a.i >= -exact_in_double &&
        a.i <= exact_in_double) {
      copy_value(out, Value::boolean(compare_doubles(c, static_cast<double>(a.i), b.f)));
      return true;
    }
    if (a.kind == Kind::Float && b.kind == Kind::Int && b.i >= -exact_in_double &&
        b.i <= exact_in_double) {
      copy_value(out, Value::boolean(compare_doubles(c, a.f, static_cast<double>(b.i))));
      return true;
    }
    return false;
  }
  switch (a.kind) {
  case Kind::Int: copy_value(out, Value::boolean(decide(c, three_way(a.i, b.i)))); return true;
  case Kind::Float: copy_value(out, Value::boolean(compare_doubles(c, a.f, b.f))); return true;
  case Kind::String:
    if (c == Code::Eq || c == Code::Ne) {
      bool same = a.size == b.size && (a.size == 0 || std::memcmp(a.s, b.s, a.size) == 0);
      copy_value(out, Value::boolean(same == (c == Code::Eq)));
    } else {
      copy_value(out, Value::boolean(decide(c, three_way(a.str().compare(b.str()), 0))));
    }
    return true;
  default: return false;
  }
}

// Arithmetic fast paths on two numbers; false when apply_arithmetic must decide
// (other kinds, overflow, division by zero).
bool arithmetic_fast(Code c, const Value& a, const Value& b, Value& out) {
  if (a.kind == Kind::Int && b.kind == Kind::Int) {
    std::int64_t r = 0;
    switch (c) {
    case Code::Add:
      if (__builtin_add_overflow(a.i, b.i, &r)) return false;
      break;
    case Code::Sub:
      if (__builtin_sub_overflow(a.i, b.i, &r)) return false;
      break;
    case Code::Mul:
      if (__builtin_mul_overflow(a.i, b.i, &r)) return false;
      break;
    case Code::Div:
      if (b.i == 0 || b.i == -1) return false;
      r = a.i / b.i;
      break;
    default:
      if (b.i == 0 || b.i == -1) return false;
      r = a.i % b.i;
      break;
    }
    copy_value(out, Value::integer(r));
    return true;
  }
  if (a.is_number() && b.is_number()) { // one is a float: the result is a float
    double x = a.as_double();
    double y = b.as_double();
    double r = 0;
    switch (c) {
    case Code::Add: r = x + y; break;
    case Code::Sub: r = x - y; break;
    case Code::Mul: r = x * y; break;
    case Code::Div: r = x / y; break;
    default: r = std::fmod(x, y); break;
    }
    copy_value(out, Value::floating(r));
    return true;
  }
  return false;
}

// Logical value of an operand: null is false, a bool is itself, anything else an error.
bool truth(const Instr& in, std::uint32_t k, const Value& v, Env& env, bool& out) {
  if (v.kind == Kind::Bool) {
    out = v.b;
    return true;
  }
  if (v.kind == Kind::Null) {
    out = false;
    return true;
  }
  return truth_of(*in.operand, *in.node, k, v, env, out);
}

const char* code_name(Code c) {
  switch (c) {
  case Code::LoadField: return "load.field";
  case Code::LoadPath: return "load.path";
  case Code::Move: return "move";
  case Code::Add: return "add";
  case Code::Sub: return "sub";
  case Code::Mul: return "mul";
  case Code::Div: return "div";
  case Code::Mod: return "mod";
  case Code::DivConst: return "div.const";
  case Code::ModConst: return "mod.const";
  case Code::Eq: return "eq";
  case Code::Ne: return "ne";
  case Code::Lt: return "lt";
  case Code::Le: return "le";
  case Code::Gt: return "gt";
  case Code::Ge: return "ge";
  case Code::StrEq: return "str.eq";
  case Code::StrNe: return "str.ne";
  case Code::Neg: return "neg";
  case Code::Not: return "not";
  case Code::Index: return "index";
  case Code::Decide: return "decide";
  case Code::SetBool: return "set.bool";
  case Code::JumpUnless: return "jump.unless";
  case Code::Jump: return "jump";
  case Code::TakeNonNull: return "take.non_null";
  case Code::CheckArg: return "check.arg";
  case Code::Hash: return "hash";
  case Code::HashModConst: return "hash.mod.const";
  case Code::Concat: return "concat";
  case Code::Call: return "call";
  }
  return "?";
}

} // namespace

Program::Program(const ExpressionNode& tree) : names_(tree.names) {
  if (tree.root) result_ = lower(*tree.root);
  if (registers_.empty()) result_ = new_register(); // no tree: the result is null
}

std::uint32_t Program::new_register(Value initial) {
  registers_.push_back(initial);
  return static_cast<std::uint32_t>(registers_.size() - 1);
}

std::uint32_t Program::emit(Instr instr) {
  code_.push_back(instr);
  return static_cast<std::uint32_t>(code_.size() - 1);
}

Operand Program::lower_operand(const Node& n) {
  Operand o;
  if (n.op == Op::Field && n.path.size() == 1) {
    o.field = true;
    o.id = n.path[0];
  } else {
    o.reg = lower(n);
  }
  return o;
}

std::uint32_t Program::lower(const Node& n) {
  switch (n.op) {
  case Op::Literal: return new_register(n.literal); // filled once, never written
  case Op::Field: {
    Instr in{.code = Code::LoadPath, .node = &n};
    if (n.path.size() == 1) {
      in.code = Code::LoadField;
      in.a = lower_operand(n);
    }
    in.dst = new_register();
    emit(in);
    return in.dst;
  }
  case Op::Neg:
  case Op::Not: {
    Operand a = lower_operand(*n.args[0]);
    emit(Instr{.code = n.op == Op::Neg ? Code::Neg : Code::Not,
               .dst = new_register(),
               .a = a,
               .node = &n,
               .operand = n.args[0].get()});
    return code_.back().dst;
  }
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::Mod: {
    if (is_hash_mod_const(n)) return lower_hash_mod_const(n);
    Operand a = lower_operand(*n.args[0]);
    Operand b = lower_operand(*n.args[1]);
    Instr in{.code = arithmetic_code(n.op), .dst = new_register(), .a = a, .b = b, .node = &n};
    const Node& right = *n.args[1];
    // A constant divisor that is neither 0 nor -1 can neither fail nor overflow.
    if ((n.op == Op::Div || n.op == Op::Mod) && right.op == Op::Literal &&
        right.literal.kind == Kind::Int && right.literal.i != 0 && right.literal.i != -1) {
      in.code = n.op == Op::Div ? Code::DivConst : Code::ModConst;
      in.k = right.literal.i;
      in.divisor = ConstantDivisor(in.k);
    }
    emit(in);
    return in.dst;
  }
  case Op::Eq:
  case Op::Ne:
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge: {
    Instr in{.node = &n};
    lower_comparison(n, in, &Instr::code);
    in.dst = new_register();
    emit(in);
    return in.dst;
  }
  case Op::And:
  case Op::Or: {
    std::uint32_t dst = new_register();
    bool want = n.op == Op::Or; // the value that decides the result early
    std::vector<std::uint32_t> exits;
    for (std::size_t k = 0; k < n.args.size(); ++k) {
      const Node& arg = *n.args[k];
      Instr in{.code = Code::Decide,
               .dst = dst,
               .index = static_cast<std::uint32_t>(k),
               .k = want,
               .node = &n,
               .operand = &arg};
      if (arg.op >= Op::Eq && arg.op <= Op::Ge) {
        lower_comparison(arg, in, &Instr::test);
      } else {
        in.a = lower_operand(arg);
      }
      exits.push_back(emit(in));
    }
    emit(Instr{.code = Code::SetBool, .dst = dst, .k = !want, .node = &n});
    for (std::uint32_t at : exits)
      code_[at].target = static_cast<std::uint32_t>(code_.size());
    return dst;
  }
  case Op::Coalesce: {
    std::uint32_t dst = new_register();
    std::vector<std::uint32_t> exits;
    for (std::size_t k = 0; k < n.args.size(); ++k) {
      Operand a = lower_operand(*n.args[k]);
      bool last = k + 1 == n.args.size();
      std::uint32_t at =
          emit(Instr{.code = last ? Code::Move : Code::TakeNonNull, .dst = dst, .a = a, .node = &n});
      if (!last) exits.push_back(at);
    }
    for (std::uint32_t at : exits)
      code_[at].target = static_cast<std::uint32_t>(code_.size());
    return dst;
  }
  case Op::If: {
    std::uint32_t dst = new_register();
    Operand c = lower_operand(*n.args[0]);
    std::uint32_t to_else =
        emit(Instr{.code = Code::JumpUnless, .a = c, .node = &n, .operand = n.args[0].get()});
    Operand then = lower_operand(*n.args[1]);
    emit(Instr{.code = Code::Move, .dst = dst, .a = then, .node = &n});
    std::uint32_t to_end = emit(Instr{.code = Code::Jump, .node = &n});
    code_[to_else].target = static_cast<std::uint32_t>(code_.size());
    Operand otherwise = lower_operand(*n.args[2]);
    emit(Instr{.code = Code::Move, .dst = dst, .a = otherwise, .node = &n});
    code_[to_end].target = static_cast<std::uint32_t>(code_.size());
    return dst;
  }
  case Op::Index: {
    Operand a = lower_operand(*n.args[0]);
    Operand b = lower_operand(*n.args[1]);
    emit(Instr{.code = Code::Index, .dst = new_register(), .a = a, .b = b, .node = &n});
    return code_.back().dst;
  }
  case Op::Call: {
    std::uint32_t dst = new_register();
    lower_call(n, dst);
    return dst;
  }
  }
  return new_register();
}

void Program::lower_comparison(const Node& n, Instr& in, Code Instr::*field) {
  const Node& left = *n.args[0];
  const Node& right = *n.args[1];
  in.*field = comparison_code(n.op);
  in.a = lower_operand(left);
  in.b = lower_operand(right);
  if (n.op != Op::Eq && n.op != Op::Ne) return;
  const bool left_constant = left.op == Op::Literal && left.literal.kind == Kind::String;
  const bool right_constant = right.op == Op::Literal && right.literal.kind == Kind::String;
  if (left_constant == right_constant) return; // neither (two constants were folded away)
  in.*field = n.op == Op::Eq ? Code::StrEq : Code::StrNe;
  in.text = StringConstant::of((left_constant ? left : right).literal.str(), left_constant);
  if (left_constant) std::swap(in.a, in.b); // a: the value compared; b: the constant
}

// `hash(x) % k`, k an int constant that is neither 0 nor -1: how a key is put in a bucket.
bool Program::is_hash_mod_const(const Node& n) {
  const Node& left = *n.args[0];
  const Node& right = *n.args[1];
  return n.op == Op::Mod && left.op == Op::Call && left.fn->fn == Fn::Hash &&
         left.args.size() == 1 && right.op == Op::Literal && right.literal.kind == Kind::Int &&
         right.literal.i != 0 && right.literal.i != -1;
}

std::uint32_t Program::lower_hash_mod_const(const Node& n) {
  const Node& call = *n.args[0];
  Instr in{.code = Code::HashModConst, .a = lower_operand(*call.args[0]), .node = &n,
           .operand = &call};
  in.k = n.args[1]->literal.i;
  in.divisor = ConstantDivisor(in.k);
  in.args = static_cast<std::uint32_t>(args_.size()); // for hash() of other kinds
  in.count = 1;
  args_.push_back(in.a);
  in.dst = new_register();
  emit(in);
  return in.dst;
}

// Arguments in order, each checked right after it is evaluated (as the tree walker does, so a
// null that propagates skips the arguments after it); the call instruction checks them all.
void Program::lower_call(const Node& n, std::uint32_t dst) {
  std::vector<Operand> operands;
  std::vector<std::uint32_t> exits;
  for (std::size_t k = 0; k < n.args.size(); ++k) {
    operands.push_back(lower_operand(*n.args[k]));
    if (k + 1 < n.args.size() && needs_check(n, k))
      exits.push_back(emit(Instr{.code = Code::CheckArg,
                                 .dst = dst,
                                 .a = operands.back(),
                                 .index = static_cast<std::uint32_t>(k),
                                 .node = &n}));
  }
  Instr in{.code = Code::Call, .dst = dst, .node = &n};
  in.count = static_cast<std::uint32_t>(operands.size());
  in.args = static_cast<std::uint32_t>(args_.size());
  args_.insert(args_.end(), operands.begin(), operands.end());
  if (n.fn->fn == Fn::Hash && operands.size() == 1) {
    in.code = Code::Hash;
    in.a = operands[0];
  } else if (n.fn->fn == Fn::Concat) {
    in.code = Code::Concat;
  }
  emit(in);
  for (std::uint32_t at : exits)
    code_[at].target = static_cast<std::uint32_t>(code_.size());
}

namespace {

const Value null_value;

// The value an operand names: a register, or a field of the record (null when absent).
inline const Value& fetch(const Operand& o, const state::Record& record, const Value* r) {
  if (!o.field) return r[o.reg];
  const state::Field* f = record.fields;
  if (o.hint < record.size && f[o.hint].name == o.id) return f[o.hint].value;
  for (std::uint32_t k = 0; k < record.size; ++k)
    if (f[k].name == o.id) {
      o.hint = k;
      return f[k].value;
    }
  return null_value;
}

// A call's arguments gathered, checked and passed to the function; out of the main loop so
// that the loop keeps a small frame.
[[gnu::noinline]] bool run_call(const Node& call, const Operand* operands, std::uint32_t count,
                                const state::Record& record, const Value* r, Env& env,
                                Value& out) {
  Value inline_args[max_inline_args];
  Value* args = count > max_inline_args ? call.scratch.data() : inline_args;
  for (std::uint32_t k = 0; k < count; ++k) {
    args[k] = fetch(operands[k], record, r);
    int checked = check_argument(call, k, args[k], env);
    if (checked < 0) return false;
    if (checked > 0) {
      out = Value::null();
      return true;
    }
  }
  return call_function(call, args, count, env, out);
}

// concat(): strings and nulls (null is empty) joined here; any other kind is rendered by the
// function itself.
[[gnu::noinline]] bool run_concat(const Instr& in, const Operand* operands,
                                  const state::Record& record, const Value* r, Env& env,
                                  Value& out) {
  std::size_t total = 0;
  for (std::uint32_t k = 0; k < in.count; ++k) {
    const Value& v = fetch(operands[k], record, r);
    if (v.kind != Kind::String && v.kind != Kind::Null)
      return run_call(*in.node, operands, in.count, record, r, env, out);
    total += v.kind == Kind::String ? v.size : 0;
  }
  if (total > std::numeric_limits<std::uint32_t>::max())
    return run_call(*in.node, operands, in.count, record, r, env, out); // says it is too long
  char* p = allocate(env, total);
  if (p == nullptr) return false;
  std::size_t at = 0;
  for (std::uint32_t k = 0; k < in.count; ++k) {
    const Value& v = fetch(operands[k], record, r);
    if (v.kind != Kind::String || v.size == 0) continue;
    std::memcpy(p + at, v.s, v.size);
    at += v.size;
  }
  out = Value::string(std::string_view(p, total));
  return true;
}

// What an instruction asks of the loop that runs it: go on, go to its target, or stop (a
// per-record error, ctx.error set).
enum class Step : std::uint8_t { Next, Jump, Fail };

// One record as an instruction sees it: the record and its row of registers (the one row of
// run(), or row k of run_batch()'s register file).
struct Row {
  const state::Record& record;
  Value* r;
  EvalContext& ctx;
  const state::FieldNames* names;
  const Operand* args; // the program's call operands (Instr::args indexes them)
};

// StrEq or StrNe (or a Decide's test of one, `comparison` its node) of a value that is not a
// string: the general rules, with the operands in their written order.
[[gnu::noinline]] bool compare_constant_slow(const Node& comparison, const Instr& in,
                                             const Value& a, const Row& w, Value& out) {
  const Value& constant = w.r[in.b.reg];
  Env env{w.record, w.ctx, w.names};
  return in.text.first ? apply_compare(comparison, constant, a, env, out)
                       : apply_compare(comparison, a, constant, env, out);
}

// `a test constant`, test StrEq or StrNe, into `out`; false on a per-record error.
[[gnu::always_inline]] inline bool compare_with_constant(Code test, const Instr& in, const Instr& at,
                                                         const Node& comparison, const Value& a,
                                                         const Row& w, Value& out) {
  if (a.kind == Kind::String) [[likely]] {
    copy_value(out, Value::boolean(in.text.equals(a.s, a.size) == (test == Code::StrEq)));
    return true;
  }
  return compare_constant_slow(comparison, at, a, w, out);
}

// HashModConst of anything but an int or a string: hash() and then `%`, by the general rules.
[[gnu::noinline]] bool hash_mod_slow(const Instr& in, const Value& a, const Row& w);

inline Step step_if(bool ok) {
  return ok ? Step::Next : Step::Fail;
}

// Instruction `in` (whose code is C) on one record: the single definition of what each code
// does, shared by run() and run_batch(). A template on the code so that run_batch() can
// choose the code once per instruction and then run it over every row without a switch.
// `at` is the instruction as stored, `in` the same or a copy of it: the out-of-line slow
// paths get `at`, so that the address of a copy never escapes and the compiler may keep it
// in registers across the rows (stores to registers could otherwise alias it).
template <Code C>
[[gnu::always_inline]] inline Step exec(const Instr& in, const Instr& at, const Row& w) {
  Value* r = w.r;
  auto A = [&]() -> const Value& { return fetch(in.a, w.record, r); };
  auto B = [&]() -> const Value& { return fetch(in.b, w.record, r); };
  auto env = [&] { return Env{w.record, w.ctx, w.names}; };
  Value& dst = r[in.dst];
  if constexpr (C == Code::LoadField || C == Code::Move) {
    copy_value(dst, A());
    return Step::Next;
  } else if constexpr (C == Code::LoadPath) {
    const Value* v = lookup(*in.node, w.record);
    dst = v != nullptr ? *v : Value::null();
    return Step::Next;
  } else if constexpr (C == Code::Add || C == Code::Sub || C == Code::Mul || C == Code::Div ||
                       C == Code::Mod) {
    const Value& a = A();
    const Value& b = B();
    if (arithmetic_fast(C, a, b, dst)) return Step::Next;
    Env e = env();
    return step_if(apply_arithmetic(*in.node, a, b, e, dst));
  } else if constexpr (C == Code::DivConst || C == Code::ModConst) {
    const Value& a = A();
    if (a.kind == Kind::Int) {
      copy_value(dst, Value::integer(C == Code::DivConst ? in.divisor.quotient(a.i)
                                                         : in.divisor.remainder(a.i)));
      return Step::Next;
    }
    Env e = env();
    return step_if(apply_arithmetic(*in.node, a, B(), e, dst));
  } else if constexpr (C == Code::Eq || C == Code::Ne || C == Code::Lt || C == Code::Le ||
                       C == Code::Gt || C == Code::Ge) {
    const Value& a = A();
    const Value& b = B();
    if (compare_fast(C, a, b, dst)) return Step::Next;
    Env e = env();
    return step_if(apply_compare(*in.node, a, b, e, dst));
  } else if constexpr (C == Code::StrEq || C == Code::StrNe) {
    return step_if(compare_with_constant(C, in, at, *in.node, A(), w, dst));
  } else if constexpr (C == Code::Neg) {
    Env e = env();
    return step_if(apply_negate(*in.node, A(), e, dst));
  } else if constexpr (C == Code::Not) {
    Env e = env();
    bool t;
    if (!truth(at, 0, A(), e, t)) return Step::Fail;
    copy_value(dst, Value::boolean(!t));
    return Step::Next;
  } else if constexpr (C == Code::Index) {
    Env e = env();
    return step_if(apply_index(*in.node, A(), B(), e, dst));
  } else if constexpr (C == Code::Decide) {
    bool t = false; // set on every path below; GCC cannot always tell (unity builds)
    if (in.test == Code::StrEq || in.test == Code::StrNe) {
      Value v;
      if (!compare_with_constant(in.test, in, at, *in.operand, A(), w, v)) return Step::Fail;
      t = v.b; // a comparison is always a bool
    } else if (in.test != Code::Move) {
      const Value& a = A();
      const Value& b = B();
      Value v;
      if (!compare_fast(in.test, a, b, v)) {
        Env e = env();
        if (!apply_compare(*in.operand, a, b, e, v)) return Step::Fail;
      }
      t = v.b; // a comparison is always a bool
    } else {
      Env e = env();
      if (!truth(at, in.index, A(), e, t)) return Step::Fail;
    }
    if (t != (in.k != 0)) return Step::Next;
    copy_value(dst, Value::boolean(t));
    return Step::Jump;
  } else if constexpr (C == Code::SetBool) {
    copy_value(dst, Value::boolean(in.k != 0));
    return Step::Next;
  } else if constexpr (C == Code::JumpUnless) {
    Env e = env();
    bool t;
    if (!truth(at, 0, A(), e, t)) return Step::Fail;
    return t ? Step::Next : Step::Jump;
  } else if constexpr (C == Code::Jump) {
    return Step::Jump;
  } else if constexpr (C == Code::TakeNonNull) {
    copy_value(dst, A());
    return dst.is_null() ? Step::Next : Step::Jump;
  } else if constexpr (C == Code::CheckArg) {
    Env e = env();
    int checked = check_argument(*in.node, in.index, A(), e);
    if (checked < 0) return Step::Fail;
    if (checked == 0) return Step::Next;
    dst = Value::null();
    return Step::Jump;
  } else if constexpr (C == Code::Hash) {
    const Value& a = A();
    if (a.kind == Kind::Int) {
      copy_value(dst, Value::integer(static_cast<std::int64_t>(hash_int(a.i))));
    } else if (a.kind == Kind::String) {
      copy_value(dst, Value::integer(static_cast<std::int64_t>(hash_string(a.str()))));
    } else if (a.kind == Kind::Null) { // hash() propagates null
      copy_value(dst, Value::null());
    } else {
      Env e = env();
      return step_if(run_call(*in.node, w.args + in.args, in.count, w.record, r, e, dst));
    }
    return Step::Next;
  } else if constexpr (C == Code::HashModConst) {
    const Value& a = A();
    if (a.kind == Kind::Int) [[likely]] {
      copy_value(dst, Value::integer(in.divisor.remainder(static_cast<std::int64_t>(hash_int(a.i)))));
      return Step::Next;
    }
    if (a.kind == Kind::String) {
      auto h = static_cast<std::int64_t>(hash_string(a.str()));
      copy_value(dst, Value::integer(in.divisor.remainder(h)));
      return Step::Next;
    }
    return step_if(hash_mod_slow(at, a, w));
  } else if constexpr (C == Code::Concat) {
    Env e = env();
    return step_if(run_concat(at, w.args + in.args, w.record, r, e, dst));
  } else {
    static_assert(C == Code::Call);
    Env e = env();
    return step_if(run_call(*in.node, w.args + in.args, in.count, w.record, r, e, dst));
  }
}

bool hash_mod_slow(const Instr& in, const Value& a, const Row& w) {
  Env env{w.record, w.ctx, w.names};
  Value hashed;
  if (a.kind == Kind::Null) {
    hashed = Value::null(); // hash() propagates null
  } else if (!run_call(*in.operand, w.args + in.args, in.count, w.record, w.r, env, hashed)) {
    return false;
  }
  return apply_arithmetic(*in.node, hashed, in.node->args[1]->literal, env, w.r[in.dst]);
}

// Calls f(std::integral_constant<Code, c>) for the run-time code c: the one switch over
// codes, shared by both loops.
template <typename F> [[gnu::always_inline]] inline void dispatch(Code c, F&& f) {
  using enum Code;
  switch (c) {
#define STREAMCTL_EXPR_CASE(name)                                                              \
  case name: f(std::integral_constant<Code, name>{}); return;
    STREAMCTL_EXPR_CASE(LoadField)
    STREAMCTL_EXPR_CASE(LoadPath)
    STREAMCTL_EXPR_CASE(Move)
    STREAMCTL_EXPR_CASE(Add)
    STREAMCTL_EXPR_CASE(Sub)
    STREAMCTL_EXPR_CASE(Mul)
    STREAMCTL_EXPR_CASE(Div)
    STREAMCTL_EXPR_CASE(Mod)
    STREAMCTL_EXPR_CASE(DivConst)
    STREAMCTL_EXPR_CASE(ModConst)
    STREAMCTL_EXPR_CASE(Eq)
    STREAMCTL_EXPR_CASE(Ne)
    STREAMCTL_EXPR_CASE(Lt)
    STREAMCTL_EXPR_CASE(Le)
    STREAMCTL_EXPR_CASE(Gt)
    STREAMCTL_EXPR_CASE(Ge)
    STREAMCTL_EXPR_CASE(StrEq)
    STREAMCTL_EXPR_CASE(StrNe)
    STREAMCTL_EXPR_CASE(Neg)
    STREAMCTL_EXPR_CASE(Not)
    STREAMCTL_EXPR_CASE(Index)
    STREAMCTL_EXPR_CASE(Decide)
    STREAMCTL_EXPR_CASE(SetBool)
    STREAMCTL_EXPR_CASE(JumpUnless)
    STREAMCTL_EXPR_CASE(Jump)
    STREAMCTL_EXPR_CASE(TakeNonNull)
    STREAMCTL_EXPR_CASE(CheckArg)
    STREAMCTL_EXPR_CASE(Hash)
    STREAMCTL_EXPR_CASE(HashModConst)
    STREAMCTL_EXPR_CASE(Concat)
    STREAMCTL_EXPR_CASE(Call)
#undef STREAMCTL_EXPR_CASE
  }
}

bool is_jump(Code c) {
  return c == Code::Decide || c == Code::JumpUnless || c == Code::Jump ||
         c == Code::TakeNonNull || c == Code::CheckArg;
}

} // namespace

bool Program::run(const state::Record& record, EvalContext& ctx, Value& out) const {
  const Row w{record, registers_.data(), ctx, names_, args_.data()};
  const Instr* code = code_.data();
  const auto size = static_cast<std::uint32_t>(code_.size());
  std::uint32_t pc = 0;
  while (pc < size) {
    const Instr& in = code[pc++];
    Step s = Step::Next;
    dispatch(in.code, [&](auto c) { s = exec<decltype(c)::value>(in, in, w); });
    if (s == Step::Fail) return false;
    if (s == Step::Jump) pc = in.target;
  }
  copy_value(out, registers_[result_]);
  return true;
}

void Program::prepare_batch() const {
  // Rows per chunk: enough to pay for choosing each instruction once, few enough that the
  // register file (rows x registers Values) stays within the L1 and L2 caches.
  const std::size_t per_row = std::max<std::size_t>(registers_.size(), 1);
  const auto rows = static_cast<std::uint32_t>(std::clamp<std::size_t>(4096 / per_row, 16, 256));
  std::vector<Value> columns;
  columns.reserve(rows * per_row);
  for (std::uint32_t k = 0; k < rows; ++k) // literals filled once, never written
    columns.insert(columns.end(), registers_.begin(), registers_.end());
  resume_.assign(rows, 0);
  for (const Instr& in : code_)
    jumps_ = jumps_ || is_jump(in.code);
  columns_ = std::move(columns); // last: a throw above leaves the Program unprepared
  batch_rows_ = rows;
}

// Runs the program over rows [0, n) of `records`, instruction by instruction. Returns the rows
// that succeeded, a prefix: when row k fails, rows from k on take no further part, so a later
// instruction can only fail at an earlier row, and ctx.error ends up describing the first
// failing row and the first instruction that failed for it, as record-by-record evaluation
// would.
template <bool Jumps>
std::uint32_t Program::run_rows(const state::Record* records, std::uint32_t n,
                                EvalContext& ctx) const {
  const std::size_t width = registers_.size();
  Value* rows = columns_.data();
  std::uint32_t* resume = resume_.data();
  if constexpr (Jumps) std::fill(resume, resume + n, 0u);
  std::uint32_t end = n;
  const auto size = static_cast<std::uint32_t>(code_.size());
  for (std::uint32_t pc = 0; pc < size && end > 0; ++pc) {
    const Instr& in = code_[pc];
    Instr copy = in; // kept in registers across the rows (see exec)
    dispatch(in.code, [&](auto c) {
      for (std::uint32_t k = 0; k < end; ++k) {
        // A row that jumped past this instruction resumes at its target (jumps go forward).
        if constexpr (Jumps)
          if (resume[k] > pc) continue;
        Step s = exec<decltype(c)::value>(copy, in, Row{records[k], rows + k * width, ctx,
                                                        names_, args_.data()});
        if (s == Step::Next) [[likely]]
          continue;
        if (s == Step::Fail) {
          end = k;
          return;
        }
        resume[k] = in.target;
      }
    });
    in.a.hint = copy.a.hint; // field positions found on this chunk serve the next
    in.b.hint = copy.b.hint;
  }
  return end;
}

std::size_t Program::run_batch(std::span<const state::Record> records, EvalContext& ctx,
                               Value* out) const {
  if (columns_.empty()) prepare_batch();
  const std::size_t width = registers_.size();
  std::size_t done = 0;
  while (done < records.size()) {
    auto n = static_cast<std::uint32_t>(std::min<std::size_t>(batch_rows_, records.size() - done));
    std::uint32_t ok = jumps_ ? run_rows<true>(records.data() + done, n, ctx)
                              : run_rows<false>(records.data() + done, n, ctx);
    const Value* result = columns_.data() + result_;
    for (std::uint32_t k = 0; k < ok; ++k)
      copy_value(out[done + k], result[k * width]);
    done += ok;
    if (ok < n) break; // records[done] failed
  }
  return done;
}

std::string Program::constant_text(const StringConstant& c) {
  return '"' + std::string(c.s, c.size) + '"';
}

std::string Program::operand_text(const Operand& o) const {
  if (!o.field) return "r" + std::to_string(o.reg);
  if (names_ == nullptr) return "$" + std::to_string(o.id);
  return "$" + std::string(names_->name(o.id));
}

StringConstant StringConstant::of(std::string_view text, bool first) {
  StringConstant c;
  c.s = text.data();
  c.size = static_cast<std::uint32_t>(text.size());
  c.first = first;
  const char* p = text.data();
  const std::uint32_t n = c.size;
  if (n >= 8 && n <= 16) {
    c.head = load<std::uint64_t>(p);
    c.tail = load<std::uint64_t>(p + n - 8);
  } else if (n >= 4 && n < 8) {
    c.head = load<std::uint32_t>(p);
    c.tail = load<std::uint32_t>(p + n - 4);
  } else if (n >= 1 && n < 4) {
    c.head = short_word(p, n);
  }
  return c;
}

std::string Program::listing() const {
  std::string out;
  for (std::size_t pc = 0; pc < code_.size(); ++pc) {
    const Instr& in = code_[pc];
    out += std::to_string(pc) + ": ";
    if (in.code == Code::Jump) {
      out += "jump " + std::to_string(in.target) + '\n';
      continue;
    }
    if (in.code != Code::JumpUnless) out += "r" + std::to_string(in.dst) + " = ";
    out += code_name(in.code);
    switch (in.code) {
    case Code::LoadPath: out += " " + in.node->name; break;
    case Code::SetBool: out += in.k != 0 ? " true" : " false"; break;
    case Code::Call:
    case Code::Concat:
    case Code::Hash:
      if (in.code == Code::Call) out += " " + std::string(in.node->fn->name);
      for (std::uint32_t k = 0; k < in.count; ++k)
        out += (k == 0 ? " " : ", ") + operand_text(args_[in.args + k]);
      break;
    case Code::DivConst:
    case Code::ModConst:
    case Code::HashModConst:
      out += " " + operand_text(in.a) + ", " + std::to_string(in.k);
      break;
    case Code::Add:
    case Code::Sub:
    case Code::Mul:
    case Code::Div:
    case Code::Mod:
    case Code::Eq:
    case Code::Ne:
    case Code::Lt:
    case Code::Le:
    case Code::Gt:
    case Code::Ge:
    case Code::Index: out += " " + operand_text(in.a) + ", " + operand_text(in.b); break;
    case Code::StrEq:
    case Code::StrNe: out += " " + operand_text(in.a) + ", " + constant_text(in.text); break;
    case Code::Decide:
      if (in.test == Code::StrEq || in.test == Code::StrNe) {
        out += std::string(" ") + code_name(in.test) + " " + operand_text(in.a) + ", " +
               constant_text(in.text);
        break;
      }
      if (in.test != Code::Move) {
        out += std::string(" ") + code_name(in.test) + " " + operand_text(in.a) + ", " +
               operand_text(in.b);
        break;
      }
      out += " " + operand_text(in.a);
      break;
    default: out += " " + operand_text(in.a); break;
    }
    if (in.code == Code::Decide || in.code == Code::TakeNonNull || in.code == Code::CheckArg ||
        in.code == Code::JumpUnless)
      out += " -> " + std::to_string(in.target);
    out += '\n';
  }
  out += "result r" + std::to_string(result_) + '\n';
  return out;
}

} // namespace streamctl::pipeline::expr
