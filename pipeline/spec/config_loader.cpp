#include "pipeline/spec/config_loader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <system_error>
#include <tuple>
#include <unistd.h>

#include "pipeline/spec/env_expansion.hpp"
#include "pipeline/spec/schema_check.hpp"
#include "pipeline/spec/source_text.hpp"
#include "state/error.hpp"

namespace streamctl::pipeline {

namespace {

SourcePos pos_of(const toml::source_region& r, const std::string& fallback_file) {
  return SourcePos{r.path ? *r.path : fallback_file, r.begin.line, r.begin.column};
}

// `s` as a TOML basic string, quotes included.
std::string toml_quoted(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20 || u == 0x7f) {
      static const char hex[] = "0123456789abcdef";
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// The segments of `chain` when it is a dotted key alone (a.b.c = 0), else empty.
std::vector<std::string> dotted_segments(const toml::table& chain) {
  std::vector<std::string> segments;
  const toml::table* t = &chain;
  while (t) {
    if (t->size() != 1) return {};
    const toml::table* next = nullptr;
    for (const auto& [key, value] : *t) { // exactly one entry
      segments.emplace_back(key.str());
      if (value.is_integer()) return segments;
      next = value.as_table();
    }
    t = next;
  }
  return {};
}

// True when `doc` holds exactly the path `segments` and a value at its end.
bool is_single_assignment(const toml::table& doc, const std::vector<std::string>& segments) {
  const toml::table* t = &doc;
  for (std::size_t d = 0; d < segments.size(); ++d) {
    if (!t || t->size() != 1 || !t->contains(segments[d])) return false;
    if (d + 1 < segments.size()) t = t->get(segments[d])->as_table();
  }
  return true;
}

// Parses override `index` onto its own line of the virtual document "<--set>", so that
// positions of its nodes read "<--set>:N:COL" with COL counted in the override's text.
std::optional<toml::table> parse_override_line(std::size_t index, const std::string& line) {
  try {
    return toml::parse(std::string(index, '\n') + line, std::string_view(overrides_file));
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

void apply_override(toml::table& root, std::size_t index, const std::string& o, Diagnostics& out) {
  SourcePos where{overrides_file, static_cast<std::uint32_t>(index + 1), 1};
  auto eq = o.find('=');
  if (eq == std::string::npos) {
    out.add(where, "bad override '" + o + "': use KEY=VALUE, like sources.in.path=other.jsonl");
    return;
  }
  std::string key = o.substr(0, eq), value = o.substr(eq + 1);
  std::vector<std::string> segments;
  if (key.find_first_of("\r\n") == std::string::npos)
    if (auto probe = parse_override_line(index, key + "=0")) segments = dotted_segments(*probe);
  if (segments.empty()) {
    out.add(where,
            "bad override '" + o + "': '" + key + "' is not a dotted key like sources.in.path");
    return;
  }

  std::optional<toml::table> doc;
  if (value.find_first_of("\r\n") == std::string::npos) {
    doc = parse_override_line(index, o);
    if (doc && !is_single_assignment(*doc, segments)) doc.reset();
  }
  if (!doc) doc = parse_override_line(index, key + "=" + toml_quoted(value)); // a plain string
  if (!doc) {
    out.add(where, "bad override '" + o + "'");
    return;
  }

  // Walk down, creating what is missing; the moved nodes keep their "<--set>" positions.
  toml::table* dst = &root;
  toml::table* src = &*doc;
  for (std::size_t d = 0; d < segments.size(); ++d) {
    auto it = src->find(segments[d]);
    toml::key k = it->first;
    toml::node* existing = dst->get(segments[d]);
    if (d + 1 == segments.size() || !existing) {
      dst->insert_or_assign(std::move(k), std::move(it->second));
      return;
    }
    if (!existing->is_table()) {
      std::string prefix;
      for (std::size_t p = 0; p <= d; ++p) prefix += (p ? "." : "") + segments[p];
      out.add(where, "bad override '" + o + "': '" + prefix + "' is " +
                         detail::with_article(detail::toml_type_name(*existing)) + ", not a table");
      return;
    }
    dst = existing->as_table();
    src = it->second.as_table();
  }
}

// The file with its ${NAME} expanded, then the overrides (which the shell that gave them has
// expanded already); nullopt (and one diagnostic) on a TOML syntax error.
std::optional<toml::table> parse_document(std::string_view text, const std::string& display_name,
                                          const std::vector<std::string>& overrides,
                                          const VariableLookup& lookup, PipelineVariables& used,
                                          Diagnostics& out) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(display_name));
  } catch (const toml::parse_error& e) {
    out.add(pos_of(e.source(), display_name), std::string(e.description()));
    return std::nullopt;
  }
  expand_variables(root, text, display_name, lookup, used, out);
  for (std::size_t k = 0; k < overrides.size(); ++k) apply_override(root, k, overrides[k], out);
  return root;
}

// File order, then overrides in order; stable for problems at the same place.
Diagnostics sorted(const Diagnostics& in, const std::string& display_name) {
  std::vector<Diagnostic> items = in.items();
  std::stable_sort(items.begin(), items.end(), [&](const Diagnostic& a, const Diagnostic& b) {
    return std::make_tuple(a.where.file != display_name, a.where.file, a.where.line,
                           a.where.column) < std::make_tuple(b.where.file != display_name,
                                                             b.where.file, b.where.line,
                                                             b.where.column);
  });
  Diagnostics out;
  for (auto& d : items) out.add(std::move(d.where), std::move(d.message));
  return out;
}

VariableLookup recorded(const PipelineVariables& variables) {
  return [&variables](const std::string& name) -> std::optional<std::string> {
    auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

const char* group_key(NodeRole role) {
  switch (role) {
  case NodeRole::Source: return "sources";
  case NodeRole::Operator: return "operators";
  case NodeRole::Sink: return "sinks";
  }
  return "";
}

// `lookup` gives the variables' values; those used are in the result.
LoadResult load_text(std::string_view text, const std::string& display_name,
                     const std::filesystem::path& base_dir,
                     const std::vector<std::string>& overrides, const SchemaCatalog& catalog,
                     const VariableLookup& lookup) {
  LoadResult result;
  Diagnostics found;
  auto doc = parse_document(text, display_name, overrides, lookup, result.variables, found);
  if (!doc) {
    result.diagnostics = std::move(found);
    return result;
  }

  std::string override_lines;
  for (const auto& o : overrides) {
    std::string line = o;
    std::replace(line.begin(), line.end(), '\n', ' ');
    override_lines += line + "\n";
  }
  SourceTexts texts;
  texts.add(display_name, text);
  texts.add(overrides_file, override_lines);
  std::error_code ec;
  std::filesystem::path base = std::filesystem::absolute(base_dir, ec);
  ValidationContext ctx{display_name, display_name, (ec ? base_dir : base).lexically_normal(),
                        &catalog, &texts};
  auto spec = validate_pipeline(*doc, ctx, found);

  if (spec && found.empty()) {
    // Copies of toml++ nodes drop their source positions: take each node's table from a
    // second, identical parse, and the document itself as the root.
    // The same values again, from the record: the environment is not read twice.
    Diagnostics again;
    PipelineVariables same;
    auto second = parse_document(text, display_name, overrides, recorded(result.variables), same,
                                 again);
    for (auto& node : spec->nodes) {
      // Present: the second parse is of the same text and overrides as the first.
      auto group = second->get_as<toml::table>(group_key(node.role));
      auto table = group ? group->get_as<toml::table>(node.name) : nullptr;
      if (table) node.config = std::move(*table);
    }
    spec->root = std::move(*doc);
    result.spec = std::move(spec);
  }
  result.diagnostics = sorted(found, display_name);
  return result;
}

} // namespace

LoadResult load_pipeline_text(std::string_view text, const std::string& display_name,
                              const std::filesystem::path& base_dir,
                              const std::vector<std::string>& overrides,
                              const SchemaCatalog& catalog, const PipelineVariables& variables) {
  return load_text(text, display_name, base_dir, overrides, catalog, recorded(variables));
}

namespace {

// Closes the descriptor on every way out of read_bounded.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

// The file's text, read with at most `max_bytes` + 64 KiB in memory: a pipe or /dev/zero has
// no size to stat, so the read itself is bounded.
// "-" is standard input, read through a descriptor of its own (a socket has no /dev/stdin to
// open).
Result<std::string> read_bounded(const std::filesystem::path& file, std::size_t max_bytes) {
  bool from_stdin = file == kStdinPipeline;
  FileDescriptor in{from_stdin ? ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0)
                               : ::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0)
    return fail(std::string(from_stdin ? "cannot read the pipeline from standard input: "
                                       : "cannot read the pipeline file: ") +
                std::strerror(errno));
  struct stat st {};
  if (::fstat(in.fd, &st) == 0 && S_ISDIR(st.st_mode))
    return fail("cannot read the pipeline file: it is a directory");
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(in.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(std::string("cannot read the pipeline file: ") + std::strerror(errno));
    if (n == 0) return text;
    if (text.size() + static_cast<std::size_t>(n) > max_bytes)
      return fail("the pipeline file is larger than " + describe_bytes(max_bytes) +
                  ", the limit for a pipeline file (raise it with --max-pipeline-size BYTES)");
    text.append(buf, static_cast<std::size_t>(n));
  }
}

} // namespace

std::string describe_bytes(std::size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

LoadResult load_pipeline(const std::filesystem::path& file,
                         const std::vector<std::string>& overrides, const SchemaCatalog& catalog,
                         std::size_t max_bytes) {
  std::string name = file == kStdinPipeline ? std::string(kStdinDisplayName) : file.string();
  auto read = read_bounded(file, max_bytes);
  if (!read) {
    LoadResult r;
    r.diagnostics.add(SourcePos{name, 0, 0}, read.error());
    return r;
  }
  std::string text = std::move(*read);
  std::error_code ec;
  // Relative paths in a pipeline read from stdin resolve against the current directory.
  std::filesystem::path dir = file == kStdinPipeline
                                  ? std::filesystem::current_path(ec)
                                  : std::filesystem::absolute(file, ec).parent_path();
  // The one place where the environment is read: the values used travel in the result.
  LoadResult result = load_text(text, name, dir, overrides, catalog, process_environment);
  result.text = std::move(text);
  return result;
}

} // namespace streamctl::pipeline
