#pragma once
// The `on_error` handling of SPEC §4 for one node subtask: drop (count, and warn at most once
// a second), fail (throw, naming the node, the line and the reason), or dead_letter (append
// {"node", "line", "input", "error"} as a JSON line to the dead-letter file, and
// "input_base64" with the exact bytes when the input is not UTF-8, as `input` then holds
// U+FFFD in their place).
//
// Dead letters are written at least once: they are appended as bad records are met, not
// committed with checkpoints, so after a restart from a checkpoint the bad records read since
// that checkpoint are written again.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "operators/operator.hpp"

namespace streamctl::operators {

// Throws Error(Usage) when the node's dead-letter file can never be written: its path is a
// directory, or its nearest existing ancestor is not a writable directory. Creates nothing.
void check_dead_letter_path(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node);

class RecordErrorPolicy : public RecordErrors {
public:
  using Warn = std::function<void(const std::string&)>;
  RecordErrorPolicy(const pipeline::NodeSpec& node, Warn warn);
  ~RecordErrorPolicy() override;
  RecordErrorPolicy(const RecordErrorPolicy&) = delete;
  RecordErrorPolicy& operator=(const RecordErrorPolicy&) = delete;

  void bad_record(std::string_view raw, std::uint64_t line, std::string_view reason) override;
  std::uint64_t count() const override { return count_; }

private:
  // Appends scratch_ (one whole line) to the dead-letter file; throws Error(JobFailed) naming
  // the reason when it cannot.
  void write_dead_letter();

  std::string node_name_;
  pipeline::OnError mode_;
  std::string dead_letter_path_;
  int dead_letter_fd_ = -1;
  Warn warn_;
  std::uint64_t count_ = 0;
  std::uint64_t unreported_ = 0;
  std::chrono::steady_clock::time_point last_warning_{};
  std::string scratch_;
};

} // namespace streamctl::operators
