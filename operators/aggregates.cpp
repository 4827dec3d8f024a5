#include "operators/aggregates.hpp"
#include "pipeline/spec/edit_distance.hpp"
#include "state/le_bytes.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>

namespace streamctl::operators {

namespace {

using pipeline::ExpressionError;

// The largest k of top_k: its result is one array of k maps in every emitted record.
constexpr std::uint32_t max_top_k = 10000;

struct FunctionSpec {
  std::string_view name;
  AggregateKind kind;
  std::size_t min_args;
  std::size_t max_args;
  std::string_view usage; // for arity messages
};

constexpr FunctionSpec functions[] = {
    {"count", AggregateKind::Count, 0, 1, "count() or count(x)"},
    {"sum", AggregateKind::Sum, 1, 1, "sum(x)"},
    {"avg", AggregateKind::Avg, 1, 1, "avg(x)"},
    {"min", AggregateKind::Min, 1, 1, "min(x)"},
    {"max", AggregateKind::Max, 1, 1, "max(x)"},
    {"first", AggregateKind::First, 1, 1, "first(x)"},
    {"last", AggregateKind::Last, 1, 1, "last(x)"},
    {"count_distinct", AggregateKind::CountDistinct, 1, 1, "count_distinct(x)"},
    {"approx_count_distinct", AggregateKind::ApproxCountDistinct, 1, 1, "approx_count_distinct(x)"},
    {"top_k", AggregateKind::TopK, 2, 2, "top_k(x, k)"},
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_ident_start(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_' || u >= 0x80;
}
bool is_ident_char(char c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// The aggregate function nearest to `name`, or "" when none is close.
std::string_view closest_function(std::string_view name) {
  std::string folded = lower(name);
  std::string_view best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const auto& f : functions) {
    std::size_t d = pipeline::edit_distance(folded, f.name);
    // A prefix ("approx" for "approx_count_distinct") is as good as a typo.
    if (folded.size() >= 3 && f.name.substr(0, folded.size()) == folded)
      d = std::min<std::size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = f.name;
    }
  }
  std::size_t limit = name.size() <= 3 ? 1 : name.size() <= 6 ? 2 : 3;
  return best_distance <= limit ? best : std::string_view();
}

std::string function_list() {
  std::string out;
  for (const auto& f : functions)
    out += (out.empty() ? "" : ", ") + std::string(f.usage);
  return out;
}

struct Span {
  std::uint32_t begin;
  std::uint32_t end;
};

// Trims spaces off both ends of a span of `text`.
Span trim(std::string_view text, Span s) {
  while (s.begin < s.end && is_space(text[s.begin]))
    ++s.begin;
  while (s.end > s.begin && is_space(text[s.end - 1]))
    --s.end;
  return s;
}

// Splits the arguments of a call whose '(' is at `open`, at the commas outside brackets,
// strings and `quoted names`; returns the argument spans and sets `close` to the ')'.
std::vector<Span> split_arguments(std::string_view text, std::uint32_t open, std::uint32_t& close) {
  std::vector<Span> args;
  std::uint32_t start = open + 1;
  int depth = 0;
  auto n = static_cast<std::uint32_t>(text.size());
  for (std::uint32_t k = open + 1; k < n; ++k) {
    char c = text[k];
    if (c == '"' || c == '\'' || c == '`') {
      // Skip to the closing quote; a string's backslash escapes its next character, and a
      // quoted name's `` is one backtick (two quotes in a row read the same way here). An
      // unterminated one is left for the expression compiler to report.
      for (++k; k < n && text[k] != c; ++k)
        if (c != '`' && text[k] == '\\') ++k;
      if (k >= n) break;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ']' || c == '}') && depth > 0) --depth;
    if (c == ')') {
      if (depth == 0) {
        args.push_back({start, k});
        close = k;
        return args;
      }
      --depth;
    }
    if (c == ',' && depth == 0) {
      args.push_back({start, k});
      start = k + 1;
    }
  }
  throw ExpressionError(open, "unclosed '(' of the aggregate call");
}

} // namespace

std::unique_ptr<AggregateFunction> compile_aggregate(std::string_view text,
                                                     state::FieldNames& names) {
  if (text.size() > (1u << 20)) throw ExpressionError(0, "aggregate longer than 1 MiB");
  auto n = static_cast<std::uint32_t>(text.size());
  Span whole = trim(text, {0, n});
  if (whole.begin == whole.end)
    throw ExpressionError(0, "empty aggregate; expected a call such as count() or sum(x)");
  std::uint32_t at = whole.begin;
  if (!is_ident_start(text[at]))
    throw ExpressionError(at, "expected an aggregate call such as sum(x); aggregates are " +
                                  function_list());
  std::uint32_t name_end = at;
  while (name_end < n && is_ident_char(text[name_end]))
    ++name_end;
  std::string_view name = text.substr(at, name_end - at);
  std::uint32_t open = name_end;
  while (open < n && is_space(text[open]))
    ++open;
  if (open == n || text[open] != '(')
    throw ExpressionError(at, "expected an aggregate call such as count() or sum(" +
                                  std::string(name) + "), not an expression");

  const FunctionSpec* spec = nullptr;
  for (const auto& f : functions)
    if (f.name == name) spec = &f;
  if (spec == nullptr) {
    std::string message = "unknown aggregate function '" + std::string(name) + "'";
    std::string_view close_name = closest_function(name);
    if (!close_name.empty())
      message += "; did you mean '" + std::string(close_name) + "'?";
    else
      message += "; aggregates are " + function_list();
    throw ExpressionError(at, message);
  }

  std::uint32_t close = open;
  std::vector<Span> args = split_arguments(text, open, close);
  for (auto& a : args)
    a = trim(text, a);
  if (args.size() == 1 && args[0].begin == args[0].end) args.clear(); // f()
  for (const auto& a : args)
    if (a.begin == a.end)
      throw ExpressionError(a.begin, "missing argument of " + std::string(name));
  std::uint32_t after = close + 1;
  while (after < n && is_space(text[after]))
    ++after;
  if (after < n)
    throw ExpressionError(after, "unexpected text after " + std::string(name) +
                                     "(...): an aggregate is one call; to compute with its "
                                     "argument, write the expression inside the call");
  if (args.size() < spec->min_args)
    throw ExpressionError(close, std::string(name) + " needs " + std::to_string(spec->min_args) +
                                     " argument" + (spec->min_args == 1 ? "" : "s") + ": " +
                                     std::string(spec->usage));
  if (args.size() > spec->max_args) {
    std::string message = std::string(name) + " takes at most " + std::to_string(spec->max_args) +
                          " argument" + (spec->max_args == 1 ? "" : "s") + ": " +
                          std::string(spec->usage);
    // min and max are also scalar functions of expressions, which take several arguments.
    if (spec->kind == AggregateKind::Min || spec->kind == AggregateKind::Max)
      message += "; for the " +
                 std::string(spec->kind == AggregateKind::Min ? "smallest" : "largest") +
                 " of several values of a record, nest the scalar one: " + std::string(name) + "(" +
                 std::string(name) + "(a, b))";
    throw ExpressionError(args[spec->max_args].begin, message);
  }

  AggregateCall call;
  call.kind = spec->kind;
  call.text = std::string(text.substr(whole.begin, whole.end - whole.begin));
  if (!args.empty()) {
    Span a = args[0];
    std::string_view arg = text.substr(a.begin, a.end - a.begin);
    if (spec->kind == AggregateKind::Count && arg == "*")
      throw ExpressionError(a.begin, "count(*) is SQL; write count() to count records");
    try {
      call.argument.emplace(pipeline::Expression::compile(arg, names));
    } catch (const ExpressionError& e) {
      throw ExpressionError(a.begin + e.offset(), e.what());
    }
  }
  if (spec->kind == AggregateKind::TopK) {
    Span a = args[1];
    std::string_view k_text = text.substr(a.begin, a.end - a.begin);
    std::uint64_t k = 0;
    auto [ptr, ec] = std::from_chars(k_text.data(), k_text.data() + k_text.size(), k);
    bool integer =
        ec == std::errc() && ptr == k_text.data() + k_text.size() &&
        std::all_of(k_text.begin(), k_text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!integer || k == 0)
      throw ExpressionError(a.begin, "top_k: k must be a positive integer literal, got '" +
                                         std::string(k_text) + "'");
    if (k > max_top_k)
      throw ExpressionError(a.begin, "top_k: k must be at most " + std::to_string(max_top_k));
    call.k = static_cast<std::uint32_t>(k);
  }
  return make_aggregate_function(std::move(call), names);
}

Aggregates Aggregates::compile(const std::vector<std::pair<std::string, std::string>>& entries,
                               state::FieldNames& names) {
  Aggregates out;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const auto& [name, text] = entries[k];
    if (name.empty()) throw Error(ErrorKind::Usage, "aggregates: an output name may not be empty");
    for (std::size_t j = 0; j < k; ++j)
      if (entries[j].first == name)
        throw Error(ErrorKind::Usage, "aggregates: '" + name + "' is given twice");
    try {
      out.functions_.push_back(compile_aggregate(text, names));
    } catch (const ExpressionError& e) {
      throw AggregateError(k, e.offset(), "aggregate '" + name + "': " + e.what());
    }
    out.fields_.push_back(names.intern(name));
  }

  std::size_t bytes = 0;
  for (std::size_t k = 0; k < out.functions_.size(); ++k) {
    const AggregateFunction& f = *out.functions_[k];
    std::size_t align = f.state_align();
    bytes = (bytes + align - 1) / align * align;
    out.offsets_.push_back(bytes);
    bytes += f.state_size();
    out.align_ = std::max(out.align_, align);

    std::size_t shared = k;
    for (std::size_t j = 0; j < k && f.argument() != nullptr && shared == k; ++j) {
      const auto* other = out.functions_[j]->argument();
      if (other != nullptr && other->text() == f.argument()->text()) shared = j;
    }
    out.shared_arg_.push_back(shared);
  }
  out.bytes_ = (bytes + out.align_ - 1) / out.align_ * out.align_;
  out.args_.resize(out.functions_.size());
  out.columns_.resize(out.functions_.size());
  for (const auto& f : out.functions_) out.has_arguments_ = out.has_arguments_ || f->argument() != nullptr;
  out.counts_only_ = std::all_of(out.functions_.begin(), out.functions_.end(), [](const auto& f) {
    return f->kind() == AggregateKind::Count && f->argument() == nullptr;
  });
  return out;
}

void Aggregates::init(std::byte* block) const {
  for (std::size_t k = 0; k < functions_.size(); ++k)
    functions_[k]->init(block + offsets_[k]);
}

void Aggregates::destroy(std::byte* block) const {
  for (std::size_t k = 0; k < functions_.size(); ++k)
    functions_[k]->destroy(block + offsets_[k]);
}

bool Aggregates::plain_bytes() const {
  return std::all_of(functions_.begin(), functions_.end(), [](const auto& f) { return f->plain_bytes(); });
}

bool Aggregates::add(std::byte* block, const state::Record& r, pipeline::EvalContext& ctx) const {
  // Evaluate and check everything first: a record is added to every function or to none.
  for (std::size_t k = 0; k < functions_.size(); ++k) {
    if (shared_arg_[k] != k)
      args_[k] = args_[shared_arg_[k]];
    else if (!functions_[k]->evaluate(r, ctx, args_[k]))
      return false;
  }
  for (std::size_t k = 0; k < functions_.size(); ++k)
    if (!functions_[k]->check(block + offsets_[k], args_[k], ctx.error)) return false;
  for (std::size_t k = 0; k < functions_.size(); ++k)
    functions_[k]->apply(block + offsets_[k], args_[k]);
  return true;
}

void Aggregates::prepare(std::span<const state::Record> records, pipeline::EvalContext& ctx) const {
  if (!has_arguments_) return;
  failed_.assign(records.size(), 0);
  errors_.resize(records.size());
  for (std::size_t k = 0; k < functions_.size(); ++k) {
    const pipeline::Expression* argument = functions_[k]->argument();
    if (shared_arg_[k] != k || argument == nullptr) continue;
    std::vector<state::Value>& column = columns_[k];
    column.resize(records.size());
    std::size_t at = 0;
    while (at < records.size()) {
      at += argument->eval_batch(records.subspan(at), ctx, column.data() + at);
      if (at == records.size()) break;
      if (!failed_[at]) { // add() stops at the first function whose argument fails
        failed_[at] = 1;
        errors_[at] = functions_[k]->text() + ": " + ctx.error;
      }
      ++at;
    }
  }
}

bool Aggregates::add_at(std::byte* block, std::size_t row, pipeline::EvalContext& ctx) const {
  if (counts_only_) {
    // count() never fails and its slot is a u64 count (aggregate_functions.hpp): the same as
    // check() and apply() below, without two virtual calls per function and record.
    for (const std::size_t offset : offsets_) {
      std::uint64_t n;
      std::memcpy(&n, block + offset, sizeof n);
      ++n;
      std::memcpy(block + offset, &n, sizeof n);
    }
    return true;
  }
  if (has_arguments_) {
    if (failed_[row]) {
      ctx.error = errors_[row];
      return false;
    }
    for (std::size_t k = 0; k < functions_.size(); ++k) {
      if (functions_[k]->argument() == nullptr)
        args_[k] = state::Value::null();
      else
        args_[k] = columns_[shared_arg_[k]][row];
    }
  } else {
    for (auto& arg : args_) arg = state::Value::null();
  }
  for (std::size_t k = 0; k < functions_.size(); ++k)
    if (!functions_[k]->check(block + offsets_[k], args_[k], ctx.error)) return false;
  for (std::size_t k = 0; k < functions_.size(); ++k)
    functions_[k]->apply(block + offsets_[k], args_[k]);
  return true;
}

void Aggregates::merge(std::byte* into, const std::byte* from) const {
  for (std::size_t k = 0; k < functions_.size(); ++k)
    functions_[k]->merge(into + offsets_[k], from + offsets_[k]);
}

bool Aggregates::merge_serialized(std::byte* into, std::string_view bytes, std::string& error) const {
  if (!decoded_)
    decoded_ = std::unique_ptr<std::byte, AlignedFree>(
        static_cast<std::byte*>(::operator new(bytes_ == 0 ? 1 : bytes_, std::align_val_t(align_))),
        AlignedFree{align_});
  std::byte* from = decoded_.get();
  init(from);
  bool ok = true;
  if (auto read = deserialize(from, bytes); !read) {
    error = "combined aggregate state: " + read.error();
    ok = false;
  } else if (!bytes.empty()) {
    error = "combined aggregate state: " + std::to_string(bytes.size()) + " bytes after its end";
    ok = false;
  }
  for (std::size_t k = 0; ok && k < functions_.size(); ++k)
    ok = functions_[k]->check_merge(into + offsets_[k], from + offsets_[k], error);
  if (ok) merge(into, from);
  destroy(from);
  return ok;
}

void Aggregates::emit(const std::byte* block, state::RecordBuilder& builder,
                      state::Batch& out) const {
  for (std::size_t k = 0; k < functions_.size(); ++k)
    builder.append(fields_[k], functions_[k]->result(block + offsets_[k], out));
}

void Aggregates::serialize(const std::byte* block, std::string& out) const {
  state::append_le(out, static_cast<std::uint32_t>(functions_.size()));
  for (std::size_t k = 0; k < functions_.size(); ++k) {
    out.push_back(static_cast<char>(functions_[k]->kind()));
    functions_[k]->serialize(block + offsets_[k], out);
  }
}

Result<void> Aggregates::deserialize(std::byte* block, std::string_view& in) const {
  if (in.size() < 4) return fail("aggregate state truncated");
  std::uint32_t n = 0;
  for (int b = 0; b < 4; ++b)
    n |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[static_cast<std::size_t>(b)]))
         << (8 * b);
  in.remove_prefix(4);
  if (n != functions_.size())
    return fail("aggregate state holds " + std::to_string(n) + " functions, the pipeline has " +
                std::to_string(functions_.size()));
  for (std::size_t k = 0; k < functions_.size(); ++k) {
    const AggregateFunction& f = *functions_[k];
    if (in.empty()) return fail("aggregate state truncated");
    auto tag = static_cast<std::uint8_t>(in[0]);
    in.remove_prefix(1);
    if (tag != static_cast<std::uint8_t>(f.kind())) {
      bool known = tag >= static_cast<std::uint8_t>(AggregateKind::Count) &&
                   tag <= static_cast<std::uint8_t>(AggregateKind::TopK);
      return fail("aggregate state #" + std::to_string(k + 1) + " is " +
                  (known ? std::string("the state of ") +
                               aggregate_kind_name(static_cast<AggregateKind>(tag))
                         : std::string("corrupt")) +
                  ", not that of " + f.text() + " (did the aggregates of the pipeline change?)");
    }
    auto ok = f.deserialize(block + offsets_[k], in);
    if (!ok) return fail(f.text() + ": " + ok.error());
  }
  return {};
}

} // namespace streamctl::operators
