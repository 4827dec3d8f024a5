#include "operators/connectors/exec_source.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "operators/connectors/line_framer.hpp"
#include "operators/connectors/live_source_options.hpp"
#include "operators/spooled_line_source.hpp"
#include "operators/text_format_schema.hpp"

namespace streamctl::connectors {

namespace {

constexpr std::size_t kReadBytes = 256 << 10;

// The command's process: started with its stdout and stderr on pipes; terminated (SIGTERM,
// then SIGKILL) and reaped when destroyed before it exited. It dies with the worker too
// (PR_SET_PDEATHSIG), so a worker killed with -9 leaves no command behind.
class Child {
public:
  Child(const std::vector<std::string>& argv, const std::filesystem::path& dir,
        const std::string& where) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0)
      throw Error(ErrorKind::JobFailed, where + ": pipe: " + std::strerror(errno));
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      throw Error(ErrorKind::JobFailed, where + ": pipe: " + std::strerror(errno));
    }
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls from here to exec.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) ::dup2(null, STDIN_FILENO);
      if (!dir.empty() && ::chdir(dir.c_str()) != 0) ::_exit(126);
      ::execvp(args[0], args.data());
      const char msg[] = "exec failed: cannot run the command\n";
      (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
      ::_exit(127);
    }
    int saved = errno;
    ::close(out[1]);
    ::close(err[1]);
    if (pid_ < 0) {
      ::close(out[0]);
      ::close(err[0]);
      throw Error(ErrorKind::JobFailed, where + ": fork: " + std::strerror(saved));
    }
    stdout_fd_ = out[0];
    stderr_fd_ = err[0];
    (void)::fcntl(stdout_fd_, F_SETFL, O_NONBLOCK);
    (void)::fcntl(stderr_fd_, F_SETFL, O_NONBLOCK);
  }
  ~Child() {
    close_stdout();
    close_stderr();
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGTERM);
      for (int k = 0; k < 50 && !try_reap(); ++k)
        ::usleep(10000);
      if (!reaped_) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
      }
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  void close_stdout() {
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
    stdout_fd_ = -1;
  }
  void close_stderr() {
    if (stderr_fd_ >= 0) ::close(stderr_fd_);
    stderr_fd_ = -1;
  }
  // True once the child has exited (then status() holds its wait status).
  bool try_reap() {
    if (reaped_) return true;
    pid_t r;
    do
      r = ::waitpid(pid_, &status_, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == pid_) reaped_ = true;
    return reaped_;
  }
  int status() const { return status_; }

private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1, stderr_fd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

std::string joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv)
    out += (out.empty() ? "" : " ") + a;
  return out;
}

class ExecSource final : public operators::SpooledLineSource {
public:
  ExecSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
             state::FieldNames& names, std::vector<std::string> argv, std::string where,
             LiveSourceOptions options)
      : SpooledLineSource(spec, node, names, "exec", 'X'), argv_(std::move(argv)),
        dir_(spec.base_dir), where_(std::move(where)), options_(options), buffer_(kReadBytes),
        framer_(options.max_line, [this](std::string_view head, std::size_t length) {
          ctx_.errors->bad_record(head, 0, too_long_reason(length, options_.max_line));
        }) {}

  ~ExecSource() override {
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
  }

protected:
  bool pump_input(std::size_t budget) override {
    if (!child_) start();
    framed_.clear();
    std::size_t moved = 0;
    while (child_->stdout_fd() >= 0 && moved < budget) {
      ssize_t n = ::read(child_->stdout_fd(), buffer_.data(), buffer_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) { // the end of its stdout (or an error reading it: the same to us)
        framer_.finish(framed_);
        (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, child_->stdout_fd(), nullptr);
        child_->close_stdout();
        break;
      }
      framer_.feed(std::string_view(buffer_.data(), static_cast<std::size_t>(n)), framed_);
      moved += static_cast<std::size_t>(n);
    }
    if (!framed_.empty()) append(framed_);
    forward_stderr();
    if (child_->stdout_fd() >= 0 || !child_->try_reap()) return false;
    forward_stderr();
    int status = child_->status();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
    std::string how = WIFEXITED(status)
                          ? "exited with status " + std::to_string(WEXITSTATUS(status))
                          : "was killed by signal " + std::to_string(WTERMSIG(status));
    throw Error(ErrorKind::JobFailed, where_ + ": command '" + joined(argv_) + "' " + how);
  }
  // Once its stdout has closed, the command's exit is noticed at the next poll: the task
  // loop polls again within its timer interval.
  int input_readiness_fd() const override { return epoll_fd_; }

private:
  void start() {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0)
      throw Error(ErrorKind::JobFailed, where_ + ": epoll: " + std::strerror(errno));
    child_ = std::make_unique<Child>(argv_, dir_, where_);
    for (int fd : {child_->stdout_fd(), child_->stderr_fd()}) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    }
  }

  // The command's stderr, line by line, to the worker's stderr (the job's log).
  void forward_stderr() {
    while (child_->stderr_fd() >= 0) {
      char chunk[4096];
      ssize_t n = ::read(child_->stderr_fd(), chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) {
        (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, child_->stderr_fd(), nullptr);
        child_->close_stderr();
        if (!stderr_line_.empty()) log_stderr_line();
        break;
      }
      for (ssize_t k = 0; k < n; ++k) {
        if (chunk[k] == '\n')
          log_stderr_line();
        else if (stderr_line_.size() < 4096)
          stderr_line_.push_back(chunk[k]);
      }
    }
  }
  void log_stderr_line() {
    std::string line = "exec source '" + ctx_.node->name + "': " + stderr_line_ + "\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    stderr_line_.clear();
  }

  std::vector<std::string> argv_;
  std::filesystem::path dir_;
  std::string where_; // "FILE:LINE:COL: source 'NAME'" of `command`
  LiveSourceOptions options_;
  std::vector<char> buffer_;
  LineFramer framer_;
  std::string framed_;
  std::string stderr_line_;
  int epoll_fd_ = -1; // the command's stdout and stderr
  std::unique_ptr<Child> child_;
};
} // namespace

pipeline::NodeTypeSchema exec_source_schema() {
  pipeline::NodeTypeSchema schema{"exec", operators::text_format_keys()};
  schema.keys.insert(
      schema.keys.begin(),
      pipeline::KeySchema{"command",
                          pipeline::KeyType::StringArray,
                          true,
                          {},
                          {},
                          "program and arguments, run without a shell in the pipeline file's "
                          "directory, e.g. [\"python3\", \"gen.py\"]"});
  for (auto& key : live_source_keys(false))
    schema.keys.push_back(std::move(key));
  schema.one_subtask = true;
  return schema;
}

std::unique_ptr<operators::Source> make_exec_source(const pipeline::PipelineSpec& spec,
                                                    const pipeline::NodeSpec& node,
                                                    state::FieldNames& names) {
  std::string where = where_in(spec, node, "command");
  std::vector<std::string> argv;
  if (auto* array = node.config["command"].as_array())
    for (const auto& v : *array)
      if (auto s = v.value<std::string>()) argv.push_back(*s);
  if (argv.empty() || argv[0].empty())
    throw Error(ErrorKind::Usage,
                where + ": command must name a program, e.g. [\"python3\", \"gen.py\"]");
  return std::make_unique<ExecSource>(spec, node, names, std::move(argv), std::move(where),
                                      read_live_source_options(spec, node));
}

} // namespace streamctl::connectors
