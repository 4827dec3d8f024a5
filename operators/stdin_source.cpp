#include "operators/stdin_source.hpp"

#include <unistd.h>

#include "operators/spooled_line_source.hpp"
#include "operators/text_format_schema.hpp"

namespace streamctl::operators {

namespace {

// Lines of a file descriptor (fd 0), spooled when the job takes checkpoints; the position
// and spool files are SpooledLineSource's, kind 'S', prefix "stdin-NODE".
class StdinSource final : public SpooledLineSource {
public:
  StdinSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node, state::FieldNames& names,
              int fd)
      : SpooledLineSource(spec, node, names, "stdin", 'S'), in_fd_(fd) {}

protected:
  // From a pipe, splice(2) takes the bytes out of stdin and puts them in the spool in one
  // call, so a worker killed at any moment loses none.
  bool pump_input(std::size_t budget) override { return pump_from(in_fd_, budget); }
  int input_readiness_fd() const override { return in_fd_; }
  int direct_fd() const override { return in_fd_; }

private:
  int in_fd_;
};
} // namespace

pipeline::NodeTypeSchema stdin_source_schema() {
  pipeline::NodeTypeSchema schema{"stdin", text_format_keys()};
  schema.single_instance = true;
  return schema;
}

std::unique_ptr<Source> make_stdin_source(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                          state::FieldNames& names) {
  return make_stdin_source_reading(STDIN_FILENO, spec, node, names);
}

std::unique_ptr<Source> make_stdin_source_reading(int fd, const pipeline::PipelineSpec& spec,
                                                  const pipeline::NodeSpec& node, state::FieldNames& names) {
  return std::make_unique<StdinSource>(spec, node, names, fd);
}

} // namespace streamctl::operators
