// Lexer and recursive-descent parser of SPEC §5 expressions.
//
// Precedence, lowest first (all binary operators associate to the left):
//   ||            n-ary node, short-circuit
//   &&            n-ary node, short-circuit
//   ??            n-ary node: the first operand that is not null
//   == !=         (a == b == c compares a bool with c)
//   < <= > >=     (a < b < c is rejected: a bool cannot be ordered)
//   + -
//   * / %
//   - !           unary, prefix
//   x[i]          postfix indexing of arrays (int, negative counts from the end) and maps
//   primaries     literals, fields, calls, (parentheses)
// `??` binds tighter than `&&` so that `a ?? false && b` reads as `(a ?? false) && b`, and
// looser than comparisons so that `x.y ?? 0 > 5` reads as `x.y ?? (0 > 5)`: write parentheses
// around `(x.y ?? 0) > 5` as in C#, Swift and JavaScript.

#include "pipeline/spec/expression_parser.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <utility>

#include "pipeline/spec/expression_functions.hpp"

namespace streamctl::pipeline::expr {

std::string describe_mask(KindMask mask) {
  std::vector<std::string> parts;
  if (mask & bool_mask) parts.emplace_back("a bool");
  if ((mask & number_mask) == number_mask)
    parts.emplace_back("a number");
  else if (mask & int_mask)
    parts.emplace_back("an int");
  else if (mask & float_mask)
    parts.emplace_back("a float");
  if (mask & string_mask) parts.emplace_back("a string");
  if (mask & array_mask) parts.emplace_back("an array");
  if (mask & map_mask) parts.emplace_back("a map");
  std::string out;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (k > 0) out += k + 1 == parts.size() ? " or " : ", ";
    out += parts[k];
  }
  return out.empty() ? "nothing" : out;
}

std::string describe_operand(const Node& node, const std::string& fallback) {
  if (node.op == Op::Field) return "field '" + node.name + "'";
  return fallback;
}

namespace {

// The kinds in `mask` by name: "string", "int or float".
std::string kinds_name(KindMask mask) {
  std::string out;
  for (unsigned k = 0; k <= static_cast<unsigned>(state::Kind::Map); ++k) {
    if (!(mask & (1u << k))) continue;
    if (!out.empty()) out += " or ";
    out += state::kind_name(static_cast<state::Kind>(k));
  }
  return out;
}

[[noreturn]] void error(std::uint32_t at, const std::string& message) {
  throw ExpressionError(at, message);
}

enum class Tok : std::uint8_t {
  End,
  Ident,
  Quoted, // `odd name`
  Int,
  Float,
  String,
  LParen,
  RParen,
  LBracket,
  RBracket,
  Comma,
  Dot,
  Plus,
  Minus,
  Star,
  Slash,
  Percent,
  Bang,
  EqEq,
  NotEq,
  Lt,
  Le,
  Gt,
  Ge,
  AndAnd,
  OrOr,
  Coalesce,
};

struct Token {
  Tok kind = Tok::End;
  std::uint32_t begin = 0;
  std::uint32_t end = 0;
  std::string value; // identifier, decoded string, or field name without backticks
  std::int64_t i = 0;
  double f = 0;
  bool min_int = false; // 9223372036854775808: only valid right after a unary minus
};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
// Non-ASCII bytes are allowed so that UTF-8 field names need no backticks.
bool is_ident_start(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_' || u >= 0x80;
}
bool is_ident_char(char c) {
  return is_ident_start(c) || is_digit(c);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
public:
  explicit Lexer(std::string_view text) : text_(text) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      while (k_ < text_.size() && is_space(text_[k_]))
        ++k_;
      Token t;
      t.begin = pos();
      if (k_ == text_.size()) {
        t.end = pos();
        out.push_back(std::move(t));
        return out;
      }
      char c = text_[k_];
      if (is_digit(c))
        number(t);
      else if (is_ident_start(c))
        identifier(t);
      else if (c == '"' || c == '\'')
        string(t);
      else if (c == '`')
        quoted(t);
      else
        punctuation(t);
      t.end = pos();
      out.push_back(std::move(t));
    }
  }

private:
  std::uint32_t pos() const { return static_cast<std::uint32_t>(k_); }
  bool at(char c, std::size_t ahead = 0) const {
    return k_ + ahead < text_.size() && text_[k_ + ahead] == c;
  }

  void number(Token& t) {
    std::size_t start = k_;
    bool is_float = false;
    while (k_ < text_.size() && is_digit(text_[k_]))
      ++k_;
    if (at('.') && k_ + 1 < text_.size() && is_digit(text_[k_ + 1])) {
      is_float = true;
      ++k_;
      while (k_ < text_.size() && is_digit(text_[k_]))
        ++k_;
    }
    if (at('e') || at('E')) {
      std::size_t m = k_ + 1;
      if (m < text_.size() && (text_[m] == '+' || text_[m] == '-')) ++m;
      if (m < text_.size() && is_digit(text_[m])) {
        is_float = true;
        k_ = m;
        while (k_ < text_.size() && is_digit(text_[k_]))
          ++k_;
      }
    }
    if (k_ < text_.size() && is_ident_char(text_[k_])) {
      while (k_ < text_.size() && is_ident_char(text_[k_]))
        ++k_;
      error(static_cast<std::uint32_t>(start),
            "malformed number '" + std::string(text_.substr(start, k_ - start)) + "'");
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + k_;
    if (is_float) {
      t.kind = Tok::Float;
      auto [ptr, ec] = std::from_chars(first, last, t.f);
      if (ec != std::errc() || ptr != last)
        error(static_cast<std::uint32_t>(start),
              "number out of range '" + std::string(first, last) + "'");
    } else {
      t.kind = Tok::Int;
      auto [ptr, ec] = std::from_chars(first, last, t.i);
      if (ec == std::errc::result_out_of_range &&
          std::string_view(first, last) == "9223372036854775808") {
        t.min_int = true;
      } else if (ec != std::errc() || ptr != last) {
        error(static_cast<std::uint32_t>(start),
              "integer out of range '" + std::string(first, last) + "'");
      }
    }
  }

  void identifier(Token& t) {
    std::size_t start = k_;
    while (k_ < text_.size() && is_ident_char(text_[k_]))
      ++k_;
    t.kind = Tok::Ident;
    t.value = std::string(text_.substr(start, k_ - start));
  }

  void string(Token& t) {
    char quote = text_[k_];
    std::uint32_t start = pos();
    ++k_;
    t.kind = Tok::String;
    for (;;) {
      if (k_ >= text_.size()) error(start, "unterminated string");
      char c = text_[k_];
      if (c == quote) {
        ++k_;
        return;
      }
      if (c != '\\') {
        t.value += c;
        ++k_;
        continue;
      }
      if (k_ + 1 >= text_.size()) error(start, "unterminated string");
      std::uint32_t escape_at = pos();
      char e = text_[k_ + 1];
      k_ += 2;
      switch (e) {
      case '"': t.value += '"'; break;
      case '\'': t.value += '\''; break;
      case '\\': t.value += '\\'; break;
      case '/': t.value += '/'; break;
      case 'n': t.value += '\n'; break;
      case 't': t.value += '\t'; break;
      case 'r': t.value += '\r'; break;
      case '0': t.value += '\0'; break;
      case 'u': {
        std::uint32_t cp = hex4(escape_at);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          // A UTF-16 surrogate pair, as JSON writes characters outside the BMP.
          if (!(at('\\') && at('u', 1))) error(escape_at, "unpaired surrogate in \\u escape");
          k_ += 2;
          std::uint32_t low = hex4(escape_at);
          if (low < 0xDC00 || low > 0xDFFF) error(escape_at, "unpaired surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          error(escape_at, "unpaired surrogate in \\u escape");
        }
        append_utf8(t.value, cp);
        break;
      }
      default:
        error(escape_at,
              std::string("unknown escape '\\") +
                  (static_cast<unsigned char>(e) >= 0x20 ? std::string(1, e) : std::string("?")) +
                  "'");
      }
    }
  }

  std::uint32_t hex4(std::uint32_t escape_at) {
    std::uint32_t cp = 0;
    for (int d = 0; d < 4; ++d) {
      int h = k_ < text_.size() ? hex_value(text_[k_]) : -1;
      if (h < 0) error(escape_at, "\\u needs four hex digits");
      cp = cp * 16 + static_cast<std::uint32_t>(h);
      ++k_;
    }
    return cp;
  }

  void quoted(Token& t) {
    std::uint32_t start = pos();
    ++k_;
    t.kind = Tok::Quoted;
    for (;;) {
      if (k_ >= text_.size()) error(start, "unterminated `field name`");
      if (text_[k_] == '`') {
        if (at('`', 1)) { // `` inside backticks is one backtick
          t.value += '`';
          k_ += 2;
          continue;
        }
        ++k_;
        break;
      }
      t.value += text_[k_++];
    }
    if (t.value.empty()) error(start, "empty field name ``");
  }

  void punctuation(Token& t) {
    char c = text_[k_];
    auto one = [&](Tok kind) {
      t.kind = kind;
      k_ += 1;
    };
    auto two = [&](Tok kind) {
      t.kind = kind;
      k_ += 2;
    };
    switch (c) {
    case '(': return one(Tok::LParen);
    case ')': return one(Tok::RParen);
    case '[': return one(Tok::LBracket);
    case ']': return one(Tok::RBracket);
    case ',': return one(Tok::Comma);
    case '.': return one(Tok::Dot);
    case '+': return one(Tok::Plus);
    case '-': return one(Tok::Minus);
    case '*': return one(Tok::Star);
    case '/': return one(Tok::Slash);
    case '%': return one(Tok::Percent);
    case '!': return at('=', 1) ? two(Tok::NotEq) : one(Tok::Bang);
    case '<': return at('=', 1) ? two(Tok::Le) : one(Tok::Lt);
    case '>': return at('=', 1) ? two(Tok::Ge) : one(Tok::Gt);
    case '=':
      if (at('=', 1)) return two(Tok::EqEq);
      error(pos(), "unexpected '='; use '==' to compare");
    case '&':
      if (at('&', 1)) return two(Tok::AndAnd);
      error(pos(), "unexpected '&'; use '&&'");
    case '|':
      if (at('|', 1)) return two(Tok::OrOr);
      error(pos(), "unexpected '|'; use '||'");
    case '?':
      if (at('?', 1)) return two(Tok::Coalesce);
      error(pos(), "unexpected '?'; use '?\?' or if(c, a, b)");
    default: break;
    }
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) error(pos(), std::string("unexpected character '") + c + "'");
    static const char hex[] = "0123456789abcdef";
    error(pos(), std::string("unexpected byte 0x") + hex[u >> 4] + hex[u & 15]);
  }

  std::string_view text_;
  std::size_t k_ = 0;
};

const char* op_symbol(Op op) {
  switch (op) {
  case Op::Neg: return "-";
  case Op::Not: return "!";
  case Op::Add: return "+";
  case Op::Sub: return "-";
  case Op::Mul: return "*";
  case Op::Div: return "/";
  case Op::Mod: return "%";
  case Op::Eq: return "==";
  case Op::Ne: return "!=";
  case Op::Lt: return "<";
  case Op::Le: return "<=";
  case Op::Gt: return ">";
  case Op::Ge: return ">=";
  case Op::And: return "&&";
  case Op::Or: return "||";
  case Op::Coalesce: return "??";
  default: return "?";
  }
}

// Aggregate functions live in `aggregates`, not in expressions; name them in the message.
bool is_aggregate(std::string_view name) {
  static constexpr std::string_view names[] = {
      "count", "sum", "avg", "first", "last", "count_distinct", "approx_count_distinct", "top_k"};
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

class Parser {
public:
  Parser(std::string_view text, state::FieldNames& names, ExpressionNode& program)
      : text_(text), names_(names), program_(program) {}

  std::unique_ptr<Node> run() {
    tokens_ = Lexer(text_).run();
    auto root = expression();
    const Token& t = peek();
    if (t.kind != Tok::End) error(t.begin, "unexpected " + token_text(t));
    return root;
  }

private:
  // Guards recursion for every construct that nests: parentheses, calls, brackets, unary.
  struct Nest {
    Nest(Parser& p, std::uint32_t at) : parser(p) {
      if (++parser.nesting_ > max_nesting)
        error(at, "expression nested too deeply (more than " + std::to_string(max_nesting) +
                      " levels)");
    }
    ~Nest() { --parser.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
    Parser& parser;
  };

  const Token& peek() const { return tokens_[pos_]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (t.kind != Tok::End) ++pos_;
    last_end_ = t.end;
    return t;
  }
  bool accept(Tok kind) {
    if (peek().kind != kind) return false;
    next();
    return true;
  }
  void expect(Tok kind, const char* message) {
    if (peek().kind == kind) {
      next();
      return;
    }
    const Token& t = peek();
    if (t.kind == Tok::End) error(t.begin, std::string(message) + " before the end of expression");
    error(t.begin, std::string(message) + ", found " + token_text(t));
  }

  std::string token_text(const Token& t) const {
    if (t.kind == Tok::End) return "end of expression";
    std::string_view s = text_.substr(t.begin, t.end - t.begin);
    if (s.size() > 24) return "'" + std::string(s.substr(0, 21)) + "...'";
    return "'" + std::string(s) + "'";
  }

  std::unique_ptr<Node> make(Op op, std::uint32_t begin, std::uint32_t at) {
    auto n = std::make_unique<Node>();
    n->op = op;
    n->begin = begin;
    n->at = at;
    return n;
  }

  // Sets the node's extent to what has been consumed, its text and its depth.
  void close(Node& n) {
    n.end = std::max(last_end_, n.begin);
    n.text = std::string(text_.substr(n.begin, n.end - n.begin));
    int depth = 0;
    for (auto& a : n.args)
      depth = std::max(depth, a->depth);
    n.depth = depth + 1;
    if (n.depth > max_tree_depth)
      error(n.at, "expression too deep (more than " + std::to_string(max_tree_depth) +
                      " levels of operators)");
  }

  state::Value keep_string(std::string_view s) {
    program_.strings.emplace_back(s);
    return state::Value::string(program_.strings.back());
  }

  std::unique_ptr<Node> literal(const Token& t, state::Value v) {
    auto n = make(Op::Literal, t.begin, t.begin);
    n->literal = v;
    n->type = mask_of(v.kind);
    close(*n);
    return n;
  }

  // ---- grammar, lowest precedence first ----

  std::unique_ptr<Node> expression() { return nary(Op::Or, 0); }

  // Levels 0..2: || && ?? as flattened n-ary nodes.
  std::unique_ptr<Node> nary(Op op, int level) {
    static constexpr Op ops[] = {Op::Or, Op::And, Op::Coalesce};
    static constexpr Tok toks[] = {Tok::OrOr, Tok::AndAnd, Tok::Coalesce};
    auto operand = [&]() { return level == 2 ? equality() : nary(ops[level + 1], level + 1); };
    auto first = operand();
    if (peek().kind != toks[level]) return first;
    auto n = make(op, first->begin, peek().begin);
    n->args.push_back(std::move(first));
    while (accept(toks[level]))
      n->args.push_back(operand());
    close(*n);
    check_nary(*n);
    return fold(std::move(n));
  }

  std::unique_ptr<Node> equality() {
    auto left = relational();
    for (;;) {
      Tok k = peek().kind;
      if (k != Tok::EqEq && k != Tok::NotEq) return left;
      std::uint32_t at = next().begin;
      left = binary(k == Tok::EqEq ? Op::Eq : Op::Ne, at, std::move(left), relational());
    }
  }

  std::unique_ptr<Node> relational() {
    auto left = additive();
    for (;;) {
      Op op;
      switch (peek().kind) {
      case Tok::Lt: op = Op::Lt; break;
      case Tok::Le: op = Op::Le; break;
      case Tok::Gt: op = Op::Gt; break;
      case Tok::Ge: op = Op::Ge; break;
      default: return left;
      }
      std::uint32_t at = next().begin;
      left = binary(op, at, std::move(left), additive());
    }
  }

  std::unique_ptr<Node> additive() {
    auto left = multiplicative();
    for (;;) {
      Tok k = peek().kind;
      if (k != Tok::Plus && k != Tok::Minus) return left;
      std::uint32_t at = next().begin;
      left = binary(k == Tok::Plus ? Op::Add : Op::Sub, at, std::move(left), multiplicative());
    }
  }

  std::unique_ptr<Node> multiplicative() {
    auto left = unary();
    for (;;) {
      Op op;
      switch (peek().kind) {
      case Tok::Star: op = Op::Mul; break;
      case Tok::Slash: op = Op::Div; break;
      case Tok::Percent: op = Op::Mod; break;
      default: return left;
      }
      std::uint32_t at = next().begin;
      left = binary(op, at, std::move(left), unary());
    }
  }

  std::unique_ptr<Node> unary() {
    Tok k = peek().kind;
    if (k != Tok::Minus && k != Tok::Bang) return postfix();
    const Token& op_token = next();
    std::uint32_t at = op_token.begin;
    Nest nest(*this, at);
    if (k == Tok::Minus && peek().kind == Tok::Int && peek().min_int) {
      // -9223372036854775808: the one int literal whose magnitude does not fit.
      const Token& t = next();
      auto n = make(Op::Literal, at, at);
      n->literal = state::Value::integer(INT64_MIN);
      n->type = int_mask;
      close(*n);
      (void)t;
      return n;
    }
    auto operand = unary();
    auto n = make(k == Tok::Minus ? Op::Neg : Op::Not, at, at);
    KindMask m = operand->type;
    if (k == Tok::Minus) {
      if (!(m & (number_mask | null_mask)))
        error(operand->begin, "operator '-' expects a number, got " + kinds_name(m));
      n->type = m & (number_mask | null_mask);
    } else {
      if (!(m & (bool_mask | null_mask)))
        error(operand->begin, "operator '!' expects a bool, got " + kinds_name(m));
      n->type = bool_mask;
    }
    n->args.push_back(std::move(operand));
    close(*n);
    return fold(std::move(n));
  }

  std::unique_ptr<Node> postfix() {
    auto base = primary();
    while (peek().kind == Tok::LBracket) {
      std::uint32_t at = next().begin;
      Nest nest(*this, at);
      auto index = expression();
      expect(Tok::RBracket, "expected ']'");
      if (!(base->type & (array_mask | map_mask | null_mask)))
        error(at, "cannot index " + kinds_name(base->type) + " (only arrays and maps)");
      if (!(index->type & (int_mask | string_mask | null_mask)))
        error(index->begin, "an index must be an int or a string, got " + kinds_name(index->type));
      auto n = make(Op::Index, base->begin, at);
      n->type = any_mask;
      n->args.push_back(std::move(base));
      n->args.push_back(std::move(index));
      close(*n);
      base = std::move(n);
    }
    return base;
  }

  std::unique_ptr<Node> primary() {
    const Token& t = next();
    switch (t.kind) {
    case Tok::Int:
      if (t.min_int) error(t.begin, "integer out of range '9223372036854775808'");
      return literal(t, state::Value::integer(t.i));
    case Tok::Float: return literal(t, state::Value::floating(t.f));
    case Tok::String: return literal(t, keep_string(t.value));
    case Tok::LParen: {
      Nest nest(*this, t.begin);
      auto inner = expression();
      expect(Tok::RParen, "expected ')'");
      // The parentheses belong to the node's text, so that messages quote `(a + b)`.
      inner->begin = t.begin;
      inner->end = last_end_;
      inner->text = std::string(text_.substr(inner->begin, inner->end - inner->begin));
      return inner;
    }
    case Tok::Ident:
      if (peek().kind == Tok::LParen) return call(t);
      if (t.value == "true") return literal(t, state::Value::boolean(true));
      if (t.value == "false") return literal(t, state::Value::boolean(false));
      if (t.value == "null") return literal(t, state::Value::null());
      return field(t);
    case Tok::Quoted: return field(t);
    case Tok::End: error(t.begin, "unexpected end of expression");
    default: error(t.begin, "unexpected " + token_text(t));
    }
  }

  std::unique_ptr<Node> field(const Token& first) {
    auto n = make(Op::Field, first.begin, first.begin);
    n->name = first.value;
    n->path.push_back(names_.intern(first.value));
    std::vector<std::string> segments{first.value};
    while (peek().kind == Tok::Dot) {
      next();
      const Token& seg = next();
      if (seg.kind != Tok::Ident && seg.kind != Tok::Quoted)
        error(seg.begin, "expected a field name after '.'");
      n->name += '.';
      n->name += seg.value;
      n->path.push_back(names_.intern(seg.value));
      segments.push_back(seg.value);
    }
    program_.field_paths.push_back(std::move(segments));
    n->type = any_mask;
    if (std::find(program_.fields.begin(), program_.fields.end(), first.value) ==
        program_.fields.end())
      program_.fields.push_back(first.value);
    close(*n);
    return n;
  }

  std::unique_ptr<Node> call(const Token& name_token) {
    const std::string& name = name_token.value;
    std::uint32_t at = name_token.begin;
    const FunctionInfo* fn = find_function(name);
    if (fn == nullptr) {
      if (is_aggregate(name))
        error(at, "'" + name + "' is an aggregate function; use it in `aggregates`");
      std::string close_name = closest_function(name);
      if (!close_name.empty())
        error(at, "unknown function '" + name + "'; did you mean '" + close_name + "'?");
      error(at, "unknown function '" + name + "'");
    }
    next(); // (
    Nest nest(*this, at);
    auto n = make(fn->fn == Fn::If ? Op::If : Op::Call, at, at);
    n->fn = fn;
    if (!accept(Tok::RParen)) {
      for (;;) {
        n->args.push_back(expression());
        if (accept(Tok::Comma)) continue;
        expect(Tok::RParen, "expected ')'");
        break;
      }
    }
    close(*n);
    check_arity(*n, *fn);
    if (fn->fn == Fn::If) {
      KindMask c = n->args[0]->type;
      if (!(c & (bool_mask | null_mask)))
        error(n->args[0]->begin, "if() condition must be a bool, got " + kinds_name(c));
      n->type = n->args[1]->type | n->args[2]->type;
      if (n->args[0]->op == Op::Literal) {
        // Decided at compile time: keep the branch that is taken (null counts as false).
        const state::Value& v = n->args[0]->literal;
        bool take = v.kind == state::Kind::Bool && v.b;
        return std::move(n->args[take ? 1 : 2]);
      }
      return n;
    }
    bool may_be_null = false;
    for (std::size_t k = 0; k < n->args.size(); ++k) {
      const Node& a = *n->args[k];
      KindMask accepted = fn->param(k) | null_mask;
      if (!(a.type & accepted))
        error(a.begin, "argument " + std::to_string(k + 1) + " of " + name + "() must be " +
                           describe_mask(fn->param(k)) + ", got " + kinds_name(a.type));
      if (a.type & null_mask) may_be_null = true;
    }
    n->type = fn->result;
    if (fn->nulls_propagate && may_be_null) n->type |= null_mask;
    if (n->args.size() > max_inline_args) n->scratch.resize(n->args.size());
    prepare_call(*n);
    return fold(std::move(n));
  }

  void check_arity(const Node& n, const FunctionInfo& fn) {
    std::size_t got = n.args.size();
    if (got >= fn.min_args && (fn.max_args == variadic || got <= fn.max_args)) return;
    std::string name(fn.name);
    std::string want;
    auto plural = [](unsigned k) { return k == 1 ? " argument" : " arguments"; };
    if (fn.max_args == variadic)
      want = "at least " + std::to_string(fn.min_args) + plural(fn.min_args);
    else if (fn.min_args == fn.max_args)
      want = std::to_string(fn.min_args) + plural(fn.min_args);
    else if (fn.max_args == fn.min_args + 1)
      want = std::to_string(fn.min_args) + " or " + std::to_string(fn.max_args) + " arguments";
    else
      want = std::to_string(fn.min_args) + " to " + std::to_string(fn.max_args) + " arguments";
    error(n.at, name + "() takes " + want + ", got " + std::to_string(got));
  }

  std::unique_ptr<Node> binary(Op op, std::uint32_t at, std::unique_ptr<Node> left,
                               std::unique_ptr<Node> right) {
    auto n = make(op, left->begin, at);
    KindMask l = left->type;
    KindMask r = right->type;
    bool any_null = (l & null_mask) || (r & null_mask);
    bool both_numbers = (l & number_mask) && (r & number_mask);
    std::string sym = op_symbol(op);
    auto operand_check = [&](const Node& side, KindMask accepted, const char* what) {
      if (!(side.type & (accepted | null_mask)))
        error(side.begin,
              "operator '" + sym + "' expects " + what + ", got " + kinds_name(side.type));
    };
    switch (op) {
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Mod:
      operand_check(*left, number_mask, "numbers");
      operand_check(*right, number_mask, "numbers");
      n->type = arithmetic_type(l, r);
      break;
    case Op::Add:
      operand_check(*left, number_mask | string_mask, "numbers or strings");
      operand_check(*right, number_mask | string_mask, "numbers or strings");
      if (!any_null && !both_numbers && !((l & string_mask) && (r & string_mask)))
        error(at, "operator '+' cannot add " + kinds_name(l) + " and " + kinds_name(r));
      n->type = arithmetic_type(l, r);
      if ((l & string_mask) && (r & string_mask)) n->type |= string_mask;
      break;
    case Op::Eq:
    case Op::Ne:
      if (!any_null && !both_numbers &&
          !(l & r & (bool_mask | string_mask | array_mask | map_mask)))
        error(at, "cannot compare " + kinds_name(l) + " with " + kinds_name(r));
      n->type = bool_mask;
      break;
    default: // < <= > >=
      operand_check(*left, number_mask | string_mask, "numbers or strings");
      operand_check(*right, number_mask | string_mask, "numbers or strings");
      if (!any_null && !both_numbers && !((l & string_mask) && (r & string_mask)))
        error(at, "cannot compare " + kinds_name(l) + " with " + kinds_name(r));
      n->type = bool_mask;
      break;
    }
    n->args.push_back(std::move(left));
    n->args.push_back(std::move(right));
    close(*n);
    return fold(std::move(n));
  }

  static KindMask arithmetic_type(KindMask l, KindMask r) {
    KindMask t = 0;
    if ((l & null_mask) || (r & null_mask)) t |= null_mask;
    if ((l & int_mask) && (r & int_mask)) t |= int_mask;
    if (((l & float_mask) && (r & number_mask)) || ((r & float_mask) && (l & number_mask)))
      t |= float_mask;
    return t;
  }

  void check_nary(Node& n) {
    if (n.op == Op::Coalesce) {
      KindMask t = 0;
      bool may_be_null = true;
      for (auto& a : n.args) {
        t |= a->type & ~null_mask;
        if (!(a->type & null_mask)) {
          may_be_null = false;
          break;
        }
      }
      n.type = may_be_null ? (t | null_mask) : t;
      return;
    }
    for (auto& a : n.args)
      if (!(a->type & (bool_mask | null_mask)))
        error(a->begin, std::string("operator '") + op_symbol(n.op) + "' expects bools, got " +
                            kinds_name(a->type));
    n.type = bool_mask;
  }

  // Replaces a node whose operands are all literals by its value, when that value is a
  // scalar or a string (arrays would need storage of their own). An error found this way is
  // a compile error: `1 / 0`, `to_int("x")`.
  std::unique_ptr<Node> fold(std::unique_ptr<Node> n) {
    if (n->op == Op::Literal || n->op == Op::Field) return n;
    if (n->op == Op::Call && !n->fn->pure) return n;
    for (auto& a : n->args)
      if (a->op != Op::Literal) return n;
    state::Record empty;
    EvalContext ctx;
    ctx.arena = &fold_arena_;
    Env env{empty, ctx, &names_};
    state::Value v;
    if (!eval(*n, env, v)) error(n->at, ctx.error);
    if (v.kind == state::Kind::Array || v.kind == state::Kind::Map) return n;
    if (v.kind == state::Kind::String) v = keep_string(v.str());
    n->op = Op::Literal;
    n->literal = v;
    n->type = mask_of(v.kind);
    n->args.clear();
    n->fn = nullptr;
    n->regex.reset();
    n->depth = 1;
    return n;
  }

  std::string_view text_;
  state::FieldNames& names_;
  ExpressionNode& program_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  std::uint32_t last_end_ = 0;
  int nesting_ = 0;
  state::Arena fold_arena_{256};
};

} // namespace

void parse(std::string_view text, state::FieldNames& names, ExpressionNode& program) {
  if (text.size() > (1u << 20)) throw ExpressionError(0, "expression longer than 1 MiB");
  program.names = &names;
  Parser parser(text, names, program);
  program.root = parser.run();
}

} // namespace streamctl::pipeline::expr
