#include "operators/stdin_source.hpp"

#include <unistd.h>

#include "operators/line_source.hpp"
#include "operators/text_format_schema.hpp"

namespace streamctl::operators {

namespace {
class StdinSource final : public LineSource {
public:
  using LineSource::LineSource;

protected:
  int open_next_input() override { return consumed_ ? -1 : (consumed_ = true, STDIN_FILENO); }
  void close_input(int) override {}
  bool blocking_reads() const override { return false; }

private:
  bool consumed_ = false;
};
} // namespace

pipeline::NodeTypeSchema stdin_source_schema() {
  pipeline::NodeTypeSchema schema{"stdin", text_format_keys()};
  schema.single_instance = true;
  return schema;
}

std::unique_ptr<Source> make_stdin_source(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                                          state::FieldNames& names) {
  return std::make_unique<StdinSource>(spec, node, names);
}

} // namespace streamctl::operators
