#pragma once
// `type = "file"`: lines from the files matching `path` (a glob, relative to the pipeline
// file). Files are dealt to subtasks round-robin in name order, so a single file is read by
// one subtask whatever the parallelism.

#include "operators/registry.hpp"

namespace streamctl::operators {

pipeline::NodeTypeSchema file_source_schema();
// Throws Error(Usage) naming the position of `path` when no file matches.
std::unique_ptr<Source> make_file_source(const pipeline::PipelineSpec&, const pipeline::NodeSpec&,
                                         state::FieldNames&);

// The files a `path` glob names, sorted; relative patterns resolve against `base_dir`.
std::vector<std::string> expand_glob(const std::filesystem::path& base_dir, const std::string& pattern);

} // namespace streamctl::operators
