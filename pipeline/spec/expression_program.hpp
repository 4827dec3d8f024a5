#pragma once
// Internal to the expression engine: the form an Expression is evaluated in.
//
// compile() parses, type-checks and folds constants into a tree (expression_parser.cpp); the
// tree is then lowered once into a flat sequence of instructions over a register file of
// state::Values, so that eval() runs a loop over an array instead of walking pointers and
// recursing per node. Every tree node gets its own register (the tree is small), literals are
// registers filled once at lowering, and control flow (&&, ||, ??, if) is forward jumps.
//
// Instructions carry fast paths for the common kinds (int and float arithmetic and
// comparisons, string comparisons, hash of an int or a string, concat of strings) and fall
// back to the tree walker's rules (apply_* in expression_parser.hpp) for everything else, so
// that semantics and messages are defined once. Nothing here allocates on the heap; strings
// that functions make go into the caller's arena, as with the tree walker.
//
// run_batch() runs the same instructions over many records: each instruction is chosen once
// and then applied to every row of a chunk of records (a register file with one row per
// record), so the dispatch and the loop overhead are paid per batch, not per record, and
// the independent work of consecutive records (e.g. the multiply chains of hash()) overlaps
// in the CPU. Jumps are per row: a row that jumps skips the instructions before its target.
//
// Thread-safety: a Program, like the tree's field hints, is used by one task thread at a time
// (the register files are mutable state).

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/spec/expression_parser.hpp"

namespace streamctl::pipeline::expr {

enum class Code : std::uint8_t {
  LoadField, // r[dst] = a (a field operand)
  LoadPath,  // r[dst] = the value at node's path (through nested maps)
  Move,      // r[dst] = r[a]
  Add,       // r[dst] = r[a] op r[b]: int and float fast paths, then apply_arithmetic
  Sub,
  Mul,
  Div,
  Mod,
  DivConst, // r[dst] = r[a] op k, k an int constant that is neither 0 nor -1
  ModConst,
  Eq, // r[dst] = r[a] op r[b]: int, float and string fast paths, then apply_compare
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  StrEq,       // r[dst] = r[a] op a string constant (`text`; b holds it too): the string
  StrNe,       // case fused, length and bytes compared inline; other kinds as Eq and Ne
  Neg,         // r[dst] = -r[a]
  Not,         // r[dst] = !truth(r[a])
  Index,       // r[dst] = r[a][r[b]]
  Decide,      // && and ||: when truth(a) == k: r[dst] = k, jump to target; with `test` a
               // comparison (StrEq, StrNe among them), the operand is `a test b`, computed
               // here (one dispatch, not two)
  SetBool,     // r[dst] = k
  JumpUnless,  // if(): jump to target unless truth(r[a])
  Jump,        // jump to target
  TakeNonNull, // ??: r[dst] = r[a]; jump to target unless it is null
  CheckArg,    // argument b of call `node` in r[a]: null (propagating) makes r[dst] null and
               // jumps to target; a kind the function does not take is an error
  Hash,        // r[dst] = hash(r[a]) (null gives null)
  HashModConst, // r[dst] = hash(r[a]) % k, the bucket of a key: one instruction, no
                // intermediate register; `operand` is the hash() call
  Concat,      // r[dst] = concat(args): strings joined directly, other kinds rendered
  Call,        // r[dst] = node's function of args (arguments checked)
};

// Signed 64-bit division by a constant as a multiplication by a precomputed reciprocal
// (Granlund and Montgomery; Hacker's Delight 10-1): a hardware division takes tens of cycles,
// which is a large part of `hash(x) % n`. Valid for every divisor but 0 and -1 (which the
// general rules handle); quotients truncate toward zero, as C++ `/` does.
class ConstantDivisor {
public:
  ConstantDivisor() = default;
  explicit ConstantDivisor(std::int64_t d);
  std::int64_t quotient(std::int64_t n) const {
    if (one_) return d_ == 1 ? n : -n;
    __extension__ using i128 = __int128;
    auto q = static_cast<std::int64_t>((static_cast<i128>(magic_) * n) >> 64);
    if (d_ > 0 && magic_ < 0) q += n;
    if (d_ < 0 && magic_ > 0) q -= n;
    q >>= shift_;
    return q + static_cast<std::int64_t>(static_cast<std::uint64_t>(q) >> 63);
  }
  std::int64_t remainder(std::int64_t n) const {
    // n - q * d cannot overflow: it is the remainder, smaller than |d|; unsigned wraps anyway.
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(n) -
                                     static_cast<std::uint64_t>(quotient(n)) *
                                         static_cast<std::uint64_t>(d_));
  }

private:
  std::int64_t d_ = 1;
  std::int64_t magic_ = 0;
  int shift_ = 0;
  bool one_ = true; // d is 1 or -1 (no magic number exists for them)
};

// The string a StrEq or StrNe compares with, and its bytes as equals() loads them: a filter
// such as `event_type == "bid"` went through the general comparison and a memcmp call per
// record (~16 instructions more an event of Nexmark q0). A constant of 1 to 16 bytes is
// compared in at most two loads that may overlap (its first and last 3, 4 or 8 bytes), never
// reading past the value's end.
struct StringConstant {
  const char* s = nullptr;
  std::uint32_t size = 0;
  bool first = false; // the constant is the comparison's left operand (for messages)
  std::uint64_t head = 0;
  std::uint64_t tail = 0;

  static StringConstant of(std::string_view text, bool first);
  // Whether the string `p` of `n` bytes equals the constant.
  bool equals(const char* p, std::uint32_t n) const {
    if (n != size) return false;
    if (n >= 8) {
      if (n > 16) return std::memcmp(p, s, n) == 0;
      return load<std::uint64_t>(p) == head && load<std::uint64_t>(p + n - 8) == tail;
    }
    if (n >= 4) return load<std::uint32_t>(p) == head && load<std::uint32_t>(p + n - 4) == tail;
    return n == 0 || short_word(p, n) == head;
  }
  // Bytes 0, n/2 and n-1 of a string of 1 to 3 bytes, which together are all of them.
  static std::uint64_t short_word(const char* p, std::uint32_t n) {
    return std::uint64_t{static_cast<unsigned char>(p[0])} |
           std::uint64_t{static_cast<unsigned char>(p[n / 2])} << 8 |
           std::uint64_t{static_cast<unsigned char>(p[n - 1])} << 16;
  }
  template <typename T> static T load(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
};

// Where an instruction reads an operand: a register, or (to save a load instruction and a
// trip through the register file) a top-level field of the record, found through `hint`.
struct Operand {
  std::uint32_t reg = 0;
  state::FieldId id = 0;
  bool field = false;
  mutable std::uint32_t hint = 0; // position of the field in the last record seen
};

struct Instr {
  Code code = Code::Move;
  std::uint32_t dst = 0;
  Operand a;
  Operand b;
  Code test = Code::Move;        // Decide: the comparison fused into it, or Move for none
  std::uint32_t index = 0;       // Decide, CheckArg: which operand or argument this is
  std::uint32_t target = 0;      // jumps: index of the next instruction to run
  std::uint32_t args = 0;        // Call, Concat: first of `count` operands in args_
  std::uint32_t count = 0;
  std::int64_t k = 0;            // DivConst, ModConst, HashModConst: the divisor;
                                 // Decide, SetBool: the bool
  ConstantDivisor divisor;       // DivConst, ModConst, HashModConst
  const Node* node = nullptr;    // the operator: messages and the general rules
  const Node* operand = nullptr; // Decide, JumpUnless, Not: the operand, for messages
  StringConstant text;           // StrEq, StrNe, and Decide testing one of them
};

class Program {
public:
  // Lowers a parsed tree. The tree must outlive the Program (instructions point into it).
  explicit Program(const ExpressionNode& tree);

  // Evaluates on one record; the same contract as Expression::eval before its final copy.
  bool run(const state::Record& record, EvalContext& ctx, state::Value& out) const;

  // Evaluates records[0..n) in order into out[0..n) until the first per-record error, with
  // the results run() would give. Returns how many records succeeded before it (n when
  // none failed); records[returned] then failed and ctx.error says why, as run() would have
  // said. The first call allocates the batch register file; later calls allocate nothing.
  std::size_t run_batch(std::span<const state::Record> records, EvalContext& ctx,
                        state::Value* out) const;

  const std::vector<Instr>& code() const { return code_; }
  std::size_t registers() const { return registers_.size(); }
  // One line per instruction ("r2 = mod.const r1, 100000"), for tests and debugging.
  std::string listing() const;

private:
  std::uint32_t lower(const Node& n);
  // Sets `in` to compare the operands of comparison `n`: StrEq or StrNe (in `code`, or in
  // `test` when the comparison is a Decide's) when one is a string literal, else `code`/`test`.
  void lower_comparison(const Node& n, Instr& in, Code Instr::*field);
  Operand lower_operand(const Node& n);
  std::string operand_text(const Operand& o) const;
  static std::string constant_text(const StringConstant& c);
  std::uint32_t new_register(state::Value initial = state::Value::null());
  std::uint32_t emit(Instr instr);
  void lower_call(const Node& n, std::uint32_t dst);
  static bool is_hash_mod_const(const Node& n);
  std::uint32_t lower_hash_mod_const(const Node& n);
  void prepare_batch() const;
  template <bool Jumps>
  std::uint32_t run_rows(const state::Record* records, std::uint32_t n, EvalContext& ctx) const;

  std::vector<Instr> code_;
  std::vector<Operand> args_;
  mutable std::vector<state::Value> registers_;
  // run_batch(): batch_rows_ rows of registers_.size() registers (row k, register r at
  // k * registers_.size() + r), and per row the instruction it resumes at after a jump.
  mutable std::vector<state::Value> columns_;
  mutable std::vector<std::uint32_t> resume_;
  mutable std::uint32_t batch_rows_ = 0;
  mutable bool jumps_ = false; // whether any instruction can jump (else resume_ is unused)
  std::uint32_t result_ = 0;
  const state::FieldNames* names_ = nullptr;
};

} // namespace streamctl::pipeline::expr
