#include "operators/connectors/live_source_options.hpp"

#include <chrono>

#include "pipeline/spec/units.hpp"
#include "state/error.hpp"

namespace streamctl::connectors {

std::vector<pipeline::KeySchema> live_source_keys(bool with_idle_end) {
  std::vector<pipeline::KeySchema> keys{
      {"max_line",
       pipeline::KeyType::Size,
       false,
       {},
       {},
       "longest line (message) taken, default 1MiB; a longer one is a bad record"}};
  if (with_idle_end)
    keys.push_back({"end_after_idle",
                    pipeline::KeyType::Duration,
                    false,
                    {},
                    {},
                    "end the input once nothing has arrived for this long, after something did "
                    "(default: never)"});
  return keys;
}

std::string where_in(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                     std::string_view key) {
  return pipeline::position_of(spec, node, key) + ": source '" + node.name + "'";
}

LiveSourceOptions read_live_source_options(const pipeline::PipelineSpec& spec,
                                           const pipeline::NodeSpec& node) {
  LiveSourceOptions options;
  if (auto i = node.config["max_line"].value<std::int64_t>()) {
    if (*i < 1)
      throw Error(ErrorKind::Usage,
                  where_in(spec, node, "max_line") + ": max_line must be at least 1 byte");
    options.max_line = static_cast<std::size_t>(*i);
  } else if (auto text = node.config["max_line"].value<std::string>()) {
    auto parsed = pipeline::parse_size_bytes(*text);
    if (!parsed || *parsed < 1)
      throw Error(ErrorKind::Usage,
                  where_in(spec, node, "max_line") + ": bad max_line '" + *text + "'");
    options.max_line = static_cast<std::size_t>(*parsed);
  }
  options.end_after_idle_ms = pipeline::duration_ms_or(node.config.get("end_after_idle"), 0);
  return options;
}

std::string too_long_reason(std::size_t length, std::size_t max_line) {
  return "line of " + std::to_string(length) + " bytes or more is longer than max_line (" +
         std::to_string(max_line) + " bytes)";
}

std::int64_t monotonic_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace streamctl::connectors
