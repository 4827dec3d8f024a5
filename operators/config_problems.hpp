#pragma once
// Collects every problem of a node's settings while its factory reads them, so that
// `validate` reports them all at once (STYLE: validation collects every error), each with
// the file position of the setting.

#include <string>
#include <string_view>

#include "pipeline/spec/pipeline_spec.hpp"
#include "state/error.hpp"

namespace streamctl::operators {

class ConfigProblems {
public:
  ConfigProblems(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node)
      : spec_(spec), node_(node) {}
  // A problem with setting `key` of the node: "file:line:col: operator 'name': message".
  void add(std::string_view key, const std::string& message) {
    add_line(pipeline::position_of(spec_, node_, key) + ": operator '" + node_.name + "': " +
             message);
  }
  void add_line(const std::string& line) {
    if (!text_.empty()) text_ += '\n';
    text_ += line;
  }
  bool empty() const { return text_.empty(); }
  // Throws Error(Usage) with every problem, one a line.
  void throw_if_any() const {
    if (!text_.empty()) throw Error(ErrorKind::Usage, text_);
  }

private:
  const pipeline::PipelineSpec& spec_;
  const pipeline::NodeSpec& node_;
  std::string text_;
};

} // namespace streamctl::operators
