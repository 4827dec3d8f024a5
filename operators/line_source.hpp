#pragma once
// What the stdin and file sources share: lines from file descriptors, decoded per `format`,
// bad lines handed to `on_error` with their line number.

#include <memory>
#include <optional>
#include <string>

#include "operators/line_reader.hpp"
#include "operators/operator.hpp"
#include "operators/text_format.hpp"

namespace streamctl::operators {

class LineSource : public Source {
public:
  LineSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node, state::FieldNames& names);
  SourceStatus poll(state::Batch& out, std::size_t max_records) override;
  int readiness_fd() const override { return fd_; }

protected:
  // Opens the next input and returns its fd, or -1 when there are no more inputs.
  virtual int open_next_input() = 0;
  // Called when the current input is exhausted (close it).
  virtual void close_input(int fd) = 0;
  // Whether reads may block (false for stdin, which may be a terminal or a slow pipe).
  virtual bool blocking_reads() const = 0;

private:
  LineDecoder decoder_;
  std::optional<LineReader> reader_;
  int fd_ = -1;
  bool done_ = false;
};

} // namespace streamctl::operators
