#pragma once
// Keys the live line sources (tcp, zmq, exec) share, and reading them from a validated node.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/spec/node_schema.hpp"
#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::connectors {

constexpr std::size_t kDefaultMaxLine = std::size_t{1} << 20;

struct LiveSourceOptions {
  std::size_t max_line = kDefaultMaxLine; // longer lines (messages) are bad records
  std::int64_t end_after_idle_ms = 0;     // 0: the input never ends by itself
};

// `max_line` and (when `with_idle_end`) `end_after_idle`, for a schema's key list.
std::vector<pipeline::KeySchema> live_source_keys(bool with_idle_end);
// Throws Error(Usage) at the key's FILE:LINE:COL for a value validation let through.
LiveSourceOptions read_live_source_options(const pipeline::PipelineSpec& spec,
                                           const pipeline::NodeSpec& node);
// The "FILE:LINE:COL: source 'NAME'" that starts an error about `key` of `node`.
std::string where_in(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                     std::string_view key);
// A bad-record reason for a line or message of `length` bytes over max_line.
std::string too_long_reason(std::size_t length, std::size_t max_line);
// The monotonic clock in milliseconds, for end_after_idle.
std::int64_t monotonic_ms();

} // namespace streamctl::connectors
