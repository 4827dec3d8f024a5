#include "operators/connectors/exec_sink.hpp"

#include <optional>
#include <sys/wait.h>

#include "operators/connectors/output_lines.hpp"
#include "operators/connectors/sink_command.hpp"

namespace streamctl::connectors {

namespace {

// "sh -c 'cat > out'" as it appears in messages, cut to a readable length.
std::string command_label(const std::vector<std::string>& argv) {
  std::string label;
  for (const auto& a : argv) {
    if (!label.empty()) label += ' ';
    label += a.find_first_of(" \t'\"") == std::string::npos ? a : "'" + a + "'";
  }
  if (label.size() > 80) label = label.substr(0, 77) + "...";
  return label;
}

// What pre_commit appends: the sequence count (sequence_numbers.cpp), or nothing without
// `sequence_field`. The lines are not kept: they are in the command's pipe, and a restore
// replays what came after the checkpoint.
//
// Not thread-safe: every method is called from the task thread that owns the sink.
class ExecSink final : public operators::Sink {
public:
  ExecSink(const pipeline::NodeSpec& node, state::FieldNames& names, std::vector<std::string> argv)
      : lines_(node, names), argv_(std::move(argv)), label_(command_label(argv_)) {}

  void open(operators::OperatorContext& ctx) override {
    Sink::open(ctx);
    lines_.open(ctx.subtask);
    who_ = "sink '" + ctx.node->name + "'";
    std::string prefix = "[" + ctx.node->name;
    if (ctx.parallelism > 1) prefix += "#" + std::to_string(ctx.subtask);
    command_.emplace(argv_, who_, prefix + "] ");
  }

  void write(const state::Batch& in) override {
    buffer_.clear();
    lines_.encode(in, buffer_);
    if (buffer_.empty()) return;
    if (auto ok = command_->write(buffer_); !ok) {
      // EPIPE: the command closed its stdin or died; its exit status says which.
      int status = command_->close_and_wait();
      command_.reset();
      throw Error(ErrorKind::JobFailed, who_ + ": the command (" + label_ +
                                            ") stopped reading its input (" + ok.error() +
                                            "): it " + SinkCommand::describe(status));
    }
  }

  void pre_commit(std::uint64_t, std::string& out) override { lines_.snapshot(out); }

  Result<void> restore_pending(const std::vector<std::string_view>& old_subtasks) override {
    return lines_.restore(old_subtasks, ctx_.parallelism, ctx_.node->name);
  }

  void finish() override {
    if (!command_) return; // failed already (write threw)
    int status = command_->close_and_wait();
    command_.reset();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw Error(ErrorKind::JobFailed,
                  who_ + ": the command (" + label_ + ") " + SinkCommand::describe(status));
  }

  // The command gets EOF and a grace period to exit, then is killed (sink_command.hpp).
  void abort() override { command_.reset(); }

private:
  OutputLines lines_;
  std::vector<std::string> argv_;
  std::string label_;
  std::string who_;
  std::optional<SinkCommand> command_;
  std::string buffer_;
};

} // namespace

pipeline::NodeTypeSchema exec_sink_schema() {
  pipeline::NodeTypeSchema schema{"exec", output_line_keys()};
  schema.keys.insert(
      schema.keys.begin(),
      pipeline::KeySchema{"command",
                          pipeline::KeyType::StringArray,
                          true,
                          {},
                          {},
                          "argv of the command that reads the records on its stdin (no shell)"});
  return schema;
}

std::unique_ptr<operators::Sink> make_exec_sink(const pipeline::PipelineSpec& spec,
                                                const pipeline::NodeSpec& node,
                                                state::FieldNames& names) {
  std::vector<std::string> argv;
  if (const auto* command = node.config["command"].as_array())
    for (const auto& a : *command)
      argv.push_back(a.value_or(std::string()));
  if (argv.empty() || argv[0].empty())
    throw Error(
        ErrorKind::Usage,
        pipeline::position_of(spec, node, "command") + ": sink '" + node.name +
            "': `command` needs at least the program to run, e.g. [\"sh\", \"-c\", \"cat > out\"]");
  return std::make_unique<ExecSink>(node, names, std::move(argv));
}

} // namespace streamctl::connectors
