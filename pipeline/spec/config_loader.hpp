#pragma once
// Loading a pipeline file (SPEC §3) into a validated PipelineSpec: parse the TOML, apply the
// `--set` overrides, check everything (validation.hpp), and build the spec. Problems come
// back as diagnostics, all of them, never as exceptions.
//
//   pipeline.toml:12:1: unknown key 'wher' in operator 'ok'; did you mean 'where'?
//   pipeline.toml:3:15: 'parallelism' must be an integer, got string
//   <--set>:1:13: 'parallelism' must be at least 1, got 0     (line N is the Nth --set)
//
// Overrides are "dotted.path=VALUE". The path is a TOML dotted key (quoted segments allowed)
// and creates the tables it goes through; VALUE is a TOML value (4, "x", true, ["a"], {a=1})
// or, when it does not parse as one, a plain string (`path=other.jsonl`). An override replaces
// the value at its path; it cannot go into an array.
//
// The spec's `root` and each node's `config` keep toml++ source positions (file and line, or
// "<--set>" and the override's number), so that later checks can point at the text.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/spec/diagnostics.hpp"
#include "pipeline/spec/env_expansion.hpp"
#include "pipeline/spec/pipeline_spec.hpp"
#include "pipeline/spec/validation.hpp" // SchemaCatalog

namespace streamctl::pipeline {

struct LoadResult {
  std::optional<PipelineSpec> spec; // set only when diagnostics is empty
  Diagnostics diagnostics;          // in file order, then those of overrides
  std::string text;                 // the file as read (load_pipeline), for the workers
  // The environment variables its ${NAME} used that were set (env_expansion.hpp): whatever
  // loads `text` again must be given these, never read its own environment.
  PipelineVariables variables;
};

// The largest pipeline file read by default (--max-pipeline-size raises it). A pipeline is a
// few KiB; the bound is there so that `validate /dev/zero` or a mistyped data file ends at once
// with a message instead of filling memory.
inline constexpr std::size_t kDefaultMaxPipelineBytes = std::size_t{16} << 20;

// "-" as the file: the pipeline is read from standard input, diagnostics name it "<stdin>"
// and its relative paths resolve against the current directory.
inline constexpr const char* kStdinPipeline = "-";
inline constexpr const char* kStdinDisplayName = "<stdin>";

// Reads `file` (diagnostics name it as given), expands its ${NAME} from this process's
// environment, applies `overrides`, validates and builds.
// Any readable file that is not a directory, pipes and /dev/stdin included, is read once, and
// never more than `max_bytes` of it: a larger one is a diagnostic naming the limit.
LoadResult load_pipeline(const std::filesystem::path& file,
                         const std::vector<std::string>& overrides, const SchemaCatalog& catalog,
                         std::size_t max_bytes = kDefaultMaxPipelineBytes);

// "16 MiB", "512 KiB", "1000 bytes".
std::string describe_bytes(std::size_t bytes);

// The same from text (for tests and `streamctl test`); `display_name` is the file in
// diagnostics and in PipelineSpec::file; relative paths resolve against `base_dir`. ${NAME}
// takes its value from `variables` alone (a name absent is unset), the record that came with
// the text: the environment is not read.
LoadResult load_pipeline_text(std::string_view text, const std::string& display_name,
                              const std::filesystem::path& base_dir,
                              const std::vector<std::string>& overrides,
                              const SchemaCatalog& catalog,
                              const PipelineVariables& variables = {});

// The file name diagnostics of overrides carry.
inline constexpr const char* overrides_file = "<--set>";

} // namespace streamctl::pipeline
