#include "pipeline/runtime/slurm_allocation.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "pipeline/runtime/parallel_commands.hpp"
#include "pipeline/spec/placement.hpp"

namespace streamctl::runtime {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Run by salloc here once the allocation is granted; $0 is unused. `exec cat` holds the
// allocation until the coordinator closes salloc's stdin (or dies, which closes it too).
constexpr const char* kHoldScript =
    R"sh(printf "%s %s %s\n" "$SLURM_JOB_ID" "$SLURM_JOB_NODELIST" "$SLURM_JOB_CPUS_PER_NODE"; exec cat >/dev/null)sh";

constexpr auto kReleaseWait = 30s; // for salloc to end after the pipe closed and scancel

std::string trim(std::string_view text) {
  auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  auto end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

// salloc's messages on one line: "salloc: error: ...; salloc: error: ...".
std::string one_line(const std::string& text) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t eol = text.find('\n', at);
    std::string line = trim(
        std::string_view(text).substr(at, eol == std::string::npos ? std::string::npos : eol - at));
    if (!line.empty()) out += (out.empty() ? "" : "; ") + line;
    at = eol == std::string::npos ? text.size() : eol + 1;
  }
  return out;
}

// The job id salloc names in "salloc: Pending job allocation 12" / "Granted job allocation 12".
std::string job_id_in(const std::string& text) {
  const std::string marker = "job allocation ";
  auto at = text.rfind(marker);
  if (at == std::string::npos) return {};
  at += marker.size();
  std::size_t end = at;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])))
    ++end;
  return text.substr(at, end - at);
}

std::string joined_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (a == "--") break; // the holding command says nothing to the user
    out += (out.empty() ? "" : " ") + a;
  }
  return out;
}

} // namespace

Result<AllocationLine> parse_allocation_line(std::string_view text) {
  std::vector<std::string> fields;
  std::size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])))
      ++at;
    std::size_t end = at;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])))
      ++end;
    if (end > at) fields.emplace_back(text.substr(at, end - at));
    at = end;
  }
  auto bad = [&](const std::string& why) {
    return Failure{"the allocation's command printed '" + trim(text) + "', " + why};
  };
  if (fields.size() < 2 || fields.size() > 3)
    return bad("not 'JOB_ID NODELIST [CPUS_PER_NODE]' (is SLURM_JOB_ID set in salloc's command?)");
  if (!std::all_of(fields[0].begin(), fields[0].end(),
                   [](unsigned char c) { return std::isdigit(c); }))
    return bad("whose job id '" + fields[0] + "' is not a number");
  AllocationLine line{fields[0], fields[1], fields.size() == 3 ? fields[2] : std::string()};
  return line;
}

std::vector<std::string> salloc_command(const SlurmAllocationRequest& request) {
  std::vector<std::string> argv = {request.salloc_program};
  if (request.nodes)
    argv.push_back("--nodes=" + std::to_string(*request.nodes));
  else
    argv.push_back("--ntasks=" + std::to_string(std::max(1, request.ntasks)));
  argv.insert(argv.end(), request.options.begin(), request.options.end());
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", kHoldScript});
  return argv;
}

int tasks_on_nodes(const pipeline::PipelineSpec& spec, const pipeline::PhysicalPlan& plan) {
  auto placement = pipeline::place(spec, plan, {{"any-node", INT_MAX / 2}});
  if (!placement) return std::max<int>(1, static_cast<int>(plan.tasks.size()));
  int n = static_cast<int>(std::count_if(placement->task_hosts.begin(), placement->task_hosts.end(),
                                         [](const std::string& h) { return !h.empty(); }));
  return std::max(1, n);
}

SlurmAllocation::SlurmAllocation(SlurmAllocationRequest request) : request_(std::move(request)) {
  std::vector<std::string> args = salloc_command(request_);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  // All close on exec, so that no worker inherits the holding pipe (and holds the allocation
  // after the coordinator is gone); the child's dup2 onto 0, 1, 2 clears the flag there.
  int in[2], out[2], err[2], exec_error[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(exec_error, O_CLOEXEC) != 0)
    throw Error(ErrorKind::Internal,
                std::string("cannot run salloc: pipe: ") + std::strerror(errno));
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0)
    throw Error(ErrorKind::Internal,
                std::string("cannot run salloc: fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec (the parent has ZeroMQ threads).
    // SIGHUP: salloc relinquishes its allocation on it (it ignores SIGTERM once granted).
    ::prctl(PR_SET_PDEATHSIG, SIGHUP);
    if (::getppid() != parent) ::_exit(1);
    ::setpgid(0, 0); // not in the terminal's foreground group: Ctrl-C is the coordinator's
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Once the coordinator is gone, salloc's "Relinquishing job allocation" goes to a pipe
    // without a reader: EPIPE, not death by SIGPIPE before it has relinquished.
    ::signal(SIGPIPE, SIG_IGN);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    // Nothing else of the coordinator's: an inherited descriptor (a lock, a pipe a test
    // waits on) would be held by salloc. Not exec_error[1], which closes on exec.
    unsigned keep = static_cast<unsigned>(exec_error[1]);
    if (keep > 3) ::close_range(3, keep - 1, 0);
    ::close_range(keep + 1, ~0U, 0);
    ::execvp(argv[0], argv.data());
    int e = errno;
    [[maybe_unused]] auto n = ::write(exec_error[1], &e, sizeof e);
    ::_exit(127);
  }
  pid_ = pid;
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  ::close(exec_error[1]);
  holder_ = in[1];
  out_ = out[0];
  err_ = err[0];

  int exec_errno = 0;
  ssize_t got;
  while ((got = ::read(exec_error[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  ::close(exec_error[0]);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    wait_for_salloc(5s);
    release();
    throw Error(ErrorKind::Usage, "[cluster] launcher = \"slurm\" outside an allocation makes one "
                                  "with '" +
                                      request_.salloc_program +
                                      "', which cannot run: " + std::strerror(exec_errno) +
                                      " (Debian: apt install slurm-client)");
  }

  // salloc's stdout carries the line; its stderr what it says meanwhile ("Pending job
  // allocation 12", "error: invalid partition specified"), kept for the messages.
  std::string out_text;
  auto deadline = Clock::now() + request_.timeout;
  bool out_open = true, err_open = true;
  while (out_text.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      fail("salloc was granted no allocation within " + std::to_string(request_.timeout.count()) +
           " s (its request was cancelled): the nodes are busy, or fewer than asked for");
    if (!out_open && !err_open) break;
    pollfd fds[2] = {{out_open ? out_ : -1, POLLIN, 0}, {err_open ? err_ : -1, POLLIN, 0}};
    int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) fail(std::string("poll: ") + std::strerror(errno));
    if (ready <= 0) continue;
    char buffer[4096];
    for (int k = 0; k < 2; ++k) {
      if (!fds[k].revents) continue;
      ssize_t n = ::read(fds[k].fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      bool& open = k == 0 ? out_open : err_open;
      if (n <= 0) {
        open = false;
        continue;
      }
      (k == 0 ? out_text : stderr_text_).append(buffer, static_cast<std::size_t>(n));
    }
  }
  if (out_text.find('\n') == std::string::npos) {
    wait_for_salloc(5s);
    fail("salloc ended without an allocation");
  }
  auto line = parse_allocation_line(out_text.substr(0, out_text.find('\n')));
  if (!line) fail(line.error());
  line_ = *line;
  // Read from now on only at release(); salloc says little while the allocation is held.
  ::fcntl(err_, F_SETFL, ::fcntl(err_, F_GETFL) | O_NONBLOCK);
  if (request_.note)
    request_.note(
        "slurm: allocated job " + line_.job_id + " on nodes " + line_.nodelist +
        (line_.cpus_per_node.empty() ? "" : " (CPUs per node " + line_.cpus_per_node + ")") +
        " with `" + joined_command(salloc_command(request_)) + "`");
}

SlurmAllocation::~SlurmAllocation() {
  release();
}

void SlurmAllocation::fail(const std::string& what) {
  // A request still pending: SIGTERM makes salloc withdraw it. The job id it named, if any,
  // is cancelled besides, for a salloc that did not get to.
  if (!reaped_) {
    ::kill(pid_, SIGTERM);
    if (!wait_for_salloc(10s)) {
      ::kill(pid_, SIGKILL);
      wait_for_salloc(5s);
    }
  }
  std::string said = one_line(stderr_text_ + drain_stderr());
  std::string id = line_.job_id.empty() ? job_id_in(stderr_text_) : line_.job_id;
  if (!id.empty()) line_.job_id = id;
  release();
  throw Error(ErrorKind::Usage, "cannot get a Slurm allocation with `" +
                                    joined_command(salloc_command(request_)) + "`: " + what +
                                    (said.empty() ? "" : " (" + said + ")"));
}

std::string SlurmAllocation::drain_stderr() {
  std::string text;
  if (err_ < 0) return text;
  ::fcntl(err_, F_SETFL, ::fcntl(err_, F_GETFL) | O_NONBLOCK);
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(err_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

bool SlurmAllocation::wait_for_salloc(std::chrono::milliseconds bound) {
  if (reaped_ || pid_ < 0) return true;
  auto deadline = Clock::now() + bound;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    // ECHILD: reaped already by the worker pool's waitpid(-1).
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      reaped_ = true;
      return true;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

void SlurmAllocation::release() {
  if (pid_ < 0) return;
  // EOF on salloc's stdin: its command ends, and salloc relinquishes the allocation.
  if (holder_ >= 0) ::close(holder_);
  holder_ = -1;
  if (!line_.job_id.empty()) {
    // Sure to end it, also when salloc is stuck. Its errors ("already completing") are moot.
    run_in_parallel({{{request_.scancel_program, line_.job_id}, ""}}, 10s);
  }
  if (!wait_for_salloc(kReleaseWait)) {
    ::kill(pid_, SIGKILL);
    wait_for_salloc(5s);
  }
  std::string said = one_line(drain_stderr());
  if (request_.note && !line_.job_id.empty())
    request_.note("slurm: released job " + line_.job_id + (said.empty() ? "" : " (" + said + ")"));
  for (int* fd : {&out_, &err_})
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
  pid_ = -1;
}

} // namespace streamctl::runtime
