#pragma once
// `type = "file"` with `follow = true`: tails the files matching `path` as `tail -F` does, and
// never ends on its own (the job ends with `streamctl stop`, SIGINT or SIGTERM).
//
// Every `poll_interval` it looks at each file it follows for bytes appended since it last read
// to the end, and expands `path` again for new files, which it reads from their start. A file
// is known by its device and inode, not by its name, and kept open from the moment it is found:
// a file renamed within `path` is read on where it was; one renamed out of `path` or deleted
// (log rotation: two looks in a row do not find it) is read to its end, and let go once it has
// been quiet for a poll (found again later, it goes on where it was); a file truncated in place,
// or whose first bytes changed, is read again from its start, with a warning. An unterminated last line is left until its newline comes (a writer is still
// appending it), but for a file let go, whose last line is final.
//
// One subtask reads all the files (node_check.cpp makes the node one_subtask): ranges of a file
// that grows make no sense, and dealing files among subtasks by name would move a renamed file
// to another reader. Its position (file_position.hpp, version 3) lists each file it has read
// from, by identity; a restore matches them to the files there by identity, then by a whole
// fingerprint (a copy), as a `--resume` of a file source does (file_source.hpp).

#include <chrono>
#include <memory>
#include <string>

#include "operators/registry.hpp"

namespace streamctl::operators {

constexpr std::chrono::milliseconds kDefaultFollowPollInterval{250};

std::unique_ptr<Source> make_followed_file_source(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                                  state::FieldNames& names, std::chrono::milliseconds poll_interval);

} // namespace streamctl::operators
