#include "operators/window_assigner.hpp"

#include <string>

#include "state/error.hpp"

namespace streamctl::operators {

namespace {

const char* kind_name(WindowKind kind) {
  switch (kind) {
  case WindowKind::Tumbling: return "tumbling";
  case WindowKind::Sliding: return "sliding";
  case WindowKind::Session: return "session";
  }
  return "?";
}

// Reads the window table of one node and reports problems at the key they concern.
class WindowTable {
public:
  WindowTable(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node)
      : spec_(spec), node_(node), table_(node.config["window"].as_table()) {}

  const toml::node* get(std::string_view key) const { return table_ ? table_->get(key) : nullptr; }

  // "FILE:LINE:COL" of window.KEY, else of `window`.
  std::string position(std::string_view key) const {
    if (const toml::node* value = get(key)) {
      const auto& begin = value->source().begin;
      if (begin.line > 0)
        return spec_.file.string() + ":" + std::to_string(begin.line) + ":" +
               std::to_string(begin.column);
    }
    return pipeline::position_of(spec_, node_, "window");
  }

  [[noreturn]] void fail(std::string_view key, const std::string& message) const {
    throw Error(ErrorKind::Usage, position(key) + ": operator '" + node_.name + "': " + message);
  }

  // A duration the kind needs: present and above 0.
  std::int64_t positive(std::string_view key, WindowKind kind) const {
    const toml::node* value = get(key);
    std::string what = "window kind \"" + std::string(kind_name(kind)) + "\" needs '" +
                       std::string(key) + "', a duration above 0 (such as \"1m\")";
    if (value == nullptr) fail(key, what);
    std::int64_t ms = pipeline::duration_ms_or(value, 0);
    if (ms <= 0) fail(key, what);
    if (ms > max_window_time / 4) fail(key, "'window." + std::string(key) + "' is too large");
    return ms;
  }

  void absent(std::string_view key, WindowKind kind, const char* instead) const {
    if (get(key) != nullptr)
      fail(key, "'window." + std::string(key) + "' does not apply to kind \"" + kind_name(kind) +
                    "\", which takes " + instead);
  }

private:
  const pipeline::PipelineSpec& spec_;
  const pipeline::NodeSpec& node_;
  const toml::table* table_;
};

} // namespace

WindowSpec WindowSpec::from_node(const pipeline::PipelineSpec& spec,
                                 const pipeline::NodeSpec& node) {
  WindowTable table(spec, node);
  WindowSpec w;
  std::string kind;
  if (const toml::node* k = table.get("kind")) kind = k->value_or(std::string());
  if (kind == "tumbling") {
    w.kind = WindowKind::Tumbling;
    w.size = table.positive("size", w.kind);
    table.absent("slide", w.kind, "only 'size'");
    table.absent("gap", w.kind, "only 'size'");
    w.slide = w.size;
  } else if (kind == "sliding") {
    w.kind = WindowKind::Sliding;
    w.size = table.positive("size", w.kind);
    w.slide = table.positive("slide", w.kind);
    table.absent("gap", w.kind, "'size' and 'slide'");
    if (w.slide > w.size)
      table.fail("slide", "'window.slide' must not exceed 'window.size': records between windows "
                          "would belong to none");
  } else if (kind == "session") {
    w.kind = WindowKind::Session;
    w.gap = table.positive("gap", w.kind);
    table.absent("size", w.kind, "only 'gap'");
    table.absent("slide", w.kind, "only 'gap'");
  } else {
    table.fail("kind", "'window.kind' must be one of \"tumbling\", \"sliding\", \"session\"");
  }
  const toml::node* lateness = node.config.get("allowed_lateness");
  w.allowed_lateness = pipeline::duration_ms_or(lateness, 0);
  if (w.allowed_lateness < 0 || w.allowed_lateness > max_window_time / 2)
    throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "allowed_lateness") +
                                      ": operator '" + node.name +
                                      "': 'allowed_lateness' is out of range");
  return w;
}

bool WindowSpec::last_aligned_start(std::int64_t t, std::int64_t& start) const {
  // The earliest window starts after t - size, the latest ends at most at t + size.
  if (t < min_window_time + size || t > max_window_time - size) return false;
  start = t - floor_mod(t, slide);
  return true;
}

} // namespace streamctl::operators
