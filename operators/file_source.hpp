#pragma once
// `type = "file"`: lines from the files matching `path` (a glob, relative to the pipeline
// file). With at least as many files as subtasks, files are dealt to subtasks round-robin in
// name order, each read whole. With fewer (one large file), each file is split into byte
// ranges of `range_bytes` (file_ranges.hpp) dealt to all subtasks, so that one file is read
// by every subtask. Whole files are the rule when they keep every subtask busy: a file read
// whole is read once, sequentially, while a range costs a seek, a scan for its first line
// start and a count of the lines before it (for bad-record line numbers).
//
// The rule is decided per file when nothing is recorded of it; a file a snapshot recorded
// keeps the way it was read then (whole, or its ranges' size), so that a restore at any
// parallelism deals the recorded ranges and never cuts one differently.
//
// The source reads no compressed input (a .gz file is read as bytes), so every file can be
// split.
//
// With `follow = true` the files are tailed instead (followed_file_source.hpp).

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema file_source_schema();
// Throws Error(Usage) naming the position of `path` when no file matches.
std::unique_ptr<Source> make_file_source(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                         state::FieldNames&);

// The files a `path` glob names, sorted; relative patterns resolve against `base_dir`.
std::vector<std::string> expand_glob(const std::filesystem::path& base_dir, const std::string& pattern);

// The name a position records for `file`, matched by `pattern`: relative to the pipeline
// file's directory when the pattern is relative (so a savepoint survives moving the pipeline
// with its data), else the path as matched.
std::string file_position_key(const pipeline::PipelineSpec& spec, const std::string& pattern, const std::string& file);

} // namespace streamctl::operators
