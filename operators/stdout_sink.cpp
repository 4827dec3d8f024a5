#include "operators/stdout_sink.hpp"

#include <cerrno>
#include <unistd.h>

#include "operators/fd_writer.hpp"
#include "operators/text_format.hpp"
#include "operators/text_format_schema.hpp"

namespace streamctl::operators {

namespace {
class StdoutSink final : public Sink {
public:
  StdoutSink(const pipeline::NodeSpec& node, state::FieldNames& names) : encoder_(node, names) {}

  void write(const state::Batch& in) override {
    buffer_.clear();
    encoder_.encode(in, buffer_);
    auto written = write_all(STDOUT_FILENO, buffer_);
    if (!written && errno == EPIPE)
      throw Error(ErrorKind::OutputClosed, "sink '" + ctx_.node->name + "': the reader of stdout has gone");
    if (!written)
      throw Error(ErrorKind::JobFailed, "sink '" + ctx_.node->name + "': cannot write to stdout: " + written.error());
  }

  void finish() override {}

private:
  LineEncoder encoder_;
  std::string buffer_;
};
} // namespace

pipeline::NodeTypeSchema stdout_sink_schema() {
  pipeline::NodeTypeSchema schema{"stdout", text_format_keys()};
  schema.single_instance = true;
  return schema;
}

std::unique_ptr<Sink> make_stdout_sink(const pipeline::PipelineSpec&, const pipeline::NodeSpec& node,
                                       state::FieldNames& names) {
  return std::make_unique<StdoutSink>(node, names);
}

} // namespace streamctl::operators
