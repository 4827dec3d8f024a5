#include "operators/connectors/exec_operator.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <poll.h>
#include <unistd.h>

#include "operators/connectors/piped_child.hpp"
#include "operators/line_reader.hpp"
#include "state/error.hpp"
#include "state/json_reader.hpp"
#include "state/json_writer.hpp"

extern char** environ;

namespace streamctl::connectors {

namespace {

using Clock = std::chrono::steady_clock;

struct ExecSettings {
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env; // added to the worker's environment
  std::filesystem::path working_dir;
  std::chrono::milliseconds timeout{30'000};
};

class ExecOperator final : public operators::Operator {
public:
  ExecOperator(ExecSettings settings, state::FieldNames& names)
      : settings_(std::move(settings)), names_(names), writer_(names) {
    json_.expect_repeated_keys(); // one FieldNames, and a command prints similar records
  }

  void open(operators::OperatorContext& ctx) override {
    Operator::open(ctx);
    label_ =
        "operator '" + ctx.node->name + "' (exec, subtask " + std::to_string(ctx.subtask) + ")";
    log_prefix_ = "[exec " + ctx.node->name + "/" + std::to_string(ctx.subtask) + "] ";
    PipedChildSpec spec;
    spec.argv = settings_.command;
    spec.working_dir = settings_.working_dir;
    spec.env = environment(ctx);
    try {
      child_.emplace(spec);
    } catch (const Error& e) {
      throw Error(e.kind(), label_ + ": " + e.what());
    }
    stdout_.emplace(child_->stdout_fd());
    stderr_.emplace(child_->stderr_fd(), 64 << 10);
  }

  void process(const state::Batch& in, state::Batch& out) override {
    if (in.empty()) return;
    check_nothing_unasked();
    timestamp_ = state::kNoTimestamp;
    for (const auto& record : in) {
      writer_.append(record, pending_);
      pending_ += '\n';
      if (record.timestamp != state::kNoTimestamp)
        timestamp_ = timestamp_ == state::kNoTimestamp ? record.timestamp
                                                       : std::min(timestamp_, record.timestamp);
    }
    pending_ += '\n'; // the sync line
    ++syncs_owed_;
    exchange(out, /*until_eof=*/false);
  }

  void on_processing_time(std::int64_t /*now_ms*/, state::Batch& /*out*/) override {
    // Between batches the command owes nothing, but it may log, or die.
    drain_stderr();
    if (child_ && child_->exit_status()) command_gone("exited before the end of input");
  }

  void finish(state::Batch& out) override {
    if (!child_) return;
    // EOF on its stdin is the end of input; what it prints until it exits is output too.
    child_->close_stdin();
    timestamp_ = state::kNoTimestamp;
    exchange(out, /*until_eof=*/true);
    drain_stderr();
    // More empty lines than batches: answers were cut short and shifted (what
    // check_nothing_unasked catches when it has been read in time); the output is complete
    // but its batches were misaligned, so checkpoints did not cover what they claimed.
    if (unasked_syncs_ > 0)
      throw Error(ErrorKind::JobFailed,
                  label_ + ": command " + command_text(settings_.command) + " printed " +
                      std::to_string(unasked_syncs_) +
                      " empty line(s) more than the batches it was sent, after the empty line "
                      "that ended its answer to a batch; each answer ends at its first empty line");
    auto status = child_->exit_status(settings_.timeout);
    if (!status)
      throw Error(ErrorKind::JobFailed,
                  label_ + ": command " + command_text(settings_.command) +
                      " closed its stdout at the end of input but did not exit within " +
                      std::to_string(settings_.timeout.count()) + " ms");
    if (*status != 0)
      throw Error(ErrorKind::JobFailed, label_ + ": command " + command_text(settings_.command) +
                                            " " + PipedChild::describe(*status) +
                                            " at the end of input");
    child_.reset();
  }

private:
  std::vector<std::string> environment(const operators::OperatorContext& ctx) const {
    std::vector<std::pair<std::string, std::string>> vars;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      auto eq = entry.find('=');
      if (eq == std::string_view::npos) continue;
      vars.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }
    auto set = [&vars](const std::string& name, const std::string& value) {
      for (auto& v : vars)
        if (v.first == name) {
          v.second = value;
          return;
        }
      vars.emplace_back(name, value);
    };
    set("STREAMCTL_NODE", ctx.node->name);
    set("STREAMCTL_SUBTASK", std::to_string(ctx.subtask));
    set("STREAMCTL_PARALLELISM", std::to_string(ctx.parallelism));
    for (const auto& [name, value] : settings_.env)
      set(name, value);
    std::vector<std::string> out;
    out.reserve(vars.size());
    for (const auto& [name, value] : vars)
      out.push_back(name + "=" + value);
    return out;
  }

  // Writes what is pending and reads the answers until every sync line owed has come back
  // (or, at the end of input, until the command closes its stdout). Polls the three pipes
  // together, so the command is never blocked on a full pipe while we wait on another.
  void exchange(state::Batch& out, bool until_eof) {
    retained_ = nullptr;
    auto deadline = Clock::now() + settings_.timeout;
    for (;;) {
      decode_lines(out, until_eof);
      if (until_eof ? stdout_eof_ : syncs_owed_ == 0) break;
      if (stdout_eof_) command_gone("closed its stdout");
      pollfd fds[3];
      nfds_t n = 0;
      int in_at = -1, out_at = -1, err_at = -1;
      if (written_ < pending_.size() && child_->stdin_fd() >= 0) {
        in_at = static_cast<int>(n);
        fds[n++] = pollfd{child_->stdin_fd(), POLLOUT, 0};
      }
      out_at = static_cast<int>(n);
      fds[n++] = pollfd{child_->stdout_fd(), POLLIN, 0};
      if (!stderr_eof_) {
        err_at = static_cast<int>(n);
        fds[n++] = pollfd{child_->stderr_fd(), POLLIN, 0};
      }
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      int ready = ::poll(fds, n, static_cast<int>(std::clamp<long long>(left, 0, 1000)));
      if (ready < 0 && errno != EINTR)
        throw Error(ErrorKind::JobFailed, label_ + ": poll failed: " + std::strerror(errno));
      bool progress = false;
      if (ready > 0) {
        if (in_at >= 0 && fds[in_at].revents != 0) progress |= write_pending();
        if (fds[out_at].revents != 0) progress |= read_stdout();
        if (err_at >= 0 && fds[err_at].revents != 0) drain_stderr();
      }
      auto now = Clock::now();
      if (progress)
        deadline = now + settings_.timeout;
      else if (now >= deadline)
        timed_out();
    }
    if (written_ == pending_.size()) {
      pending_.clear();
      written_ = 0;
    }
  }

  // Between batches the command owes nothing: a line it printed after its last answer's
  // empty line (a second empty line, as `print(json.dumps(r) + "\n")` gives) would be taken as
  // the answer to the next batch and shift every answer after it, so it fails the job. Only
  // what was read already is checked: this costs no system call.
  void check_nothing_unasked() {
    auto line = stdout_->next_line();
    if (!line) return;
    std::string shown = line->empty() ? std::string("an empty line")
                                      : "\"" + std::string(line->substr(0, 80)) + "\"";
    throw Error(ErrorKind::JobFailed,
                label_ + ": command " + command_text(settings_.command) + " printed " + shown +
                    " (output line " + std::to_string(stdout_->line_number()) +
                    ") after the empty line that ended its answer to a batch; each answer ends at "
                    "its first "
                    "empty line, and nothing may follow it before the next batch");
  }

  // Returns whether the command took any bytes.
  bool write_pending() {
    bool wrote = false;
    while (written_ < pending_.size()) {
      ssize_t n =
          ::write(child_->stdin_fd(), pending_.data() + written_, pending_.size() - written_);
      if (n > 0) {
        written_ += static_cast<std::size_t>(n);
        wrote = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      command_gone("closed its stdin"); // EPIPE: SIGPIPE is ignored in workers
    }
    return wrote;
  }

  // Returns whether the command wrote any bytes (or closed its stdout).
  bool read_stdout() {
    // poll() said readable, and the fd is non-blocking: no second poll inside fill().
    switch (stdout_->fill(/*wait=*/true)) {
    case operators::LineReader::Fill::Read: return true;
    case operators::LineReader::Fill::End: stdout_eof_ = true; return true;
    case operators::LineReader::Fill::WouldBlock: return false;
    }
    return false;
  }

  // Turns the complete lines read so far into records, up to the last sync line owed (lines
  // after it belong to the next batch and stay buffered).
  void decode_lines(state::Batch& out, bool until_eof) {
    while (until_eof || syncs_owed_ > 0) {
      auto line = stdout_->next_line();
      if (!line) return;
      if (line->empty()) {
        if (syncs_owed_ > 0)
          --syncs_owed_;
        else
          ++unasked_syncs_;
        continue;
      }
      builder_.reset();
      auto parsed = json_.parse_record(*line, names_, out, builder_);
      if (!parsed) {
        // `line` counts the command's output lines (sync lines included).
        ctx_.errors->bad_record(*line, stdout_->line_number(),
                                "output of command " + command_text(settings_.command) +
                                    " is not a JSON object: " + parsed.error());
        continue;
      }
      // Strings without escapes point into the reader's chunk: the batch keeps it alive.
      if (stdout_->chunk_address() != retained_) {
        out.retain(stdout_->chunk());
        retained_ = stdout_->chunk_address();
      }
      builder_.set_timestamp(timestamp_);
      builder_.finish(out);
    }
  }

  // The command's stderr, line by line, to ours with the node's name before each line.
  void drain_stderr() {
    if (!stderr_ || stderr_eof_) return;
    for (int reads = 0; reads < 64; ++reads) {
      auto fill = stderr_->fill(/*wait=*/true); // non-blocking fd: WouldBlock, never a wait
      while (auto line = stderr_->next_line()) {
        std::string text = log_prefix_;
        text.append(*line);
        text += '\n';
        // One write per line, so lines of several subtasks do not interleave mid-line.
        [[maybe_unused]] auto n = ::write(STDERR_FILENO, text.data(), text.size());
      }
      if (fill == operators::LineReader::Fill::End) stderr_eof_ = true;
      if (fill != operators::LineReader::Fill::Read) return;
    }
  }

  [[noreturn]] void command_gone(const std::string& what) {
    // Its last words (a traceback) belong in the log before the failure that they explain.
    auto status = child_->exit_status(std::chrono::milliseconds(1000));
    for (int k = 0; k < 20 && !stderr_eof_; ++k) {
      drain_stderr();
      if (!stderr_eof_) ::poll(nullptr, 0, 10);
    }
    std::string how = status ? PipedChild::describe(*status) + " before the end of input" : what;
    throw Error(ErrorKind::JobFailed,
                label_ + ": command " + command_text(settings_.command) + " " + how);
  }

  [[noreturn]] void timed_out() {
    drain_stderr();
    throw Error(
        ErrorKind::JobFailed,
        label_ + ": command " + command_text(settings_.command) +
            " owes an answer but has neither read nor written for " +
            std::to_string(settings_.timeout.count()) +
            " ms (`timeout`); it must print an empty line after its output for each batch, an "
            "empty "
            "input line ending each batch, and flush its stdout (see streamctl-pipeline(5), exec)");
  }

  ExecSettings settings_;
  state::FieldNames& names_;
  std::string label_;      // "operator 'NAME' (exec, subtask K)", for errors
  std::string log_prefix_; // before each line of the command's stderr
  std::optional<PipedChild> child_;
  std::optional<operators::LineReader> stdout_, stderr_;
  bool stdout_eof_ = false, stderr_eof_ = false;
  std::string pending_;             // JSON lines and sync lines not yet written
  std::size_t written_ = 0;         // bytes of pending_ written
  std::uint64_t syncs_owed_ = 0;    // sync lines written or pending, not yet echoed
  std::uint64_t unasked_syncs_ = 0; // empty lines read at the end of input, when none was owed
  std::int64_t timestamp_ = state::kNoTimestamp; // of the outputs: the earliest input's
  const void* retained_ = nullptr;               // the chunk the current output batch retains
  state::JsonRecordWriter writer_;
  state::JsonReader json_;
  state::RecordBuilder builder_;
};

} // namespace

pipeline::NodeTypeSchema exec_operator_schema() {
  using pipeline::KeySchema;
  using pipeline::KeyType;
  return pipeline::NodeTypeSchema{
      "exec",
      {
          KeySchema{"command",
                    KeyType::StringArray,
                    true,
                    {},
                    {},
                    "program and arguments (no shell), run in the pipeline file's directory"},
          KeySchema{"key",
                    KeyType::StringArray,
                    false,
                    {},
                    {},
                    "fields that route records: all of a key go to one subtask, in order"},
          KeySchema{"env",
                    KeyType::StringMap,
                    false,
                    {},
                    {},
                    "environment variables to add: NAME = value"},
          KeySchema{"timeout",
                    KeyType::Duration,
                    false,
                    {},
                    {},
                    "fail when the command owes an answer and neither reads nor writes for this "
                    "long (30s)"},
      }};
}

std::unique_ptr<operators::Operator> make_exec_operator(const pipeline::PipelineSpec& spec,
                                                        const pipeline::NodeSpec& node,
                                                        state::FieldNames& names) {
  ExecSettings settings;
  if (const auto* command = node.config["command"].as_array())
    for (const auto& arg : *command)
      settings.command.push_back(arg.value_or(std::string()));
  if (settings.command.empty() || settings.command[0].empty())
    throw Error(ErrorKind::Usage,
                pipeline::position_of(spec, node, "command") + ": operator '" + node.name +
                    "' (exec): 'command' needs a program: command = [\"python3\", \"udf.py\"]");
  if (const auto* env = node.config["env"].as_table())
    for (const auto& [name, value] : *env)
      settings.env.emplace_back(std::string(name.str()), value.value_or(std::string()));
  settings.working_dir = spec.base_dir;
  settings.timeout =
      std::chrono::milliseconds(pipeline::duration_ms_or(node.config["timeout"].node(), 30'000));
  if (settings.timeout.count() <= 0)
    throw Error(ErrorKind::Usage, pipeline::position_of(spec, node, "timeout") + ": operator '" +
                                      node.name + "' (exec): timeout must be more than 0");
  return std::make_unique<ExecOperator>(std::move(settings), names);
}

} // namespace streamctl::connectors
