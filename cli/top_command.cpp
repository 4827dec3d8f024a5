// `streamctl top JOB`: the job's status (cli/status_view.hpp) redrawn every interval, the most
// backpressured subtask first. Plain ANSI (cursor home, erase line, erase below) and termios,
// no curses: it works in any terminal, in tmux and over ssh.

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <iostream>
#include <poll.h>
#include <unistd.h>

#include "cli/context.hpp"
#include "cli/value_checks.hpp"
#include "cli/job_status_query.hpp"
#include "cli/keyboard_mode.hpp"
#include "cli/status_view.hpp"
#include "pipeline/runtime/job_directory.hpp"
#include "pipeline/runtime/signal_channel.hpp"
#include "state/error.hpp"

namespace streamctl::cli {

namespace {

// The job's status now. The job may end between reading its job.json and asking its
// coordinator (ask_job then fails): its job.json, read again, says how it ended.
StatusView current_status(const std::filesystem::path& state_dir, const std::string& id) {
  runtime::JobEntry entry = runtime::find_job(state_dir, id);
  std::string json;
  try {
    json = job_status_json(entry);
  } catch (const Error&) {
    entry = runtime::find_job(state_dir, id);
    if (entry.state == "running") throw; // it runs, and does not answer
    json = job_status_json(entry);
  }
  auto view = parse_status_view(json);
  if (!view) throw Error(ErrorKind::Internal, "job " + id + ": " + view.error());
  return std::move(*view);
}

// Hides the cursor while frames are drawn over each other; shows it again however top ends.
class HiddenCursor {
public:
  HiddenCursor() { std::cout << "\x1b[?25l" << std::flush; }
  ~HiddenCursor() { std::cout << "\x1b[?25h" << std::flush; }
  HiddenCursor(const HiddenCursor&) = delete;
  HiddenCursor& operator=(const HiddenCursor&) = delete;
};

// A frame drawn over the previous one: from the top left, each line erased to its end, the
// rest of the screen erased below, so that nothing flickers and no old line stays.
void draw_in_place(const std::string& frame, bool first) {
  std::string out = first ? "\x1b[H\x1b[2J" : "\x1b[H";
  for (char c : frame) {
    if (c == '\n') out += "\x1b[K";
    out += c;
  }
  out += "\x1b[J";
  std::cout << out << std::flush;
}

std::string clock_now() {
  std::time_t t = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&t, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

enum class Wake { Timeout, Quit, Signal };

// Waits up to `timeout` for "q" on the keyboard (when `keys`) or SIGINT/SIGTERM.
Wake wait_for(std::chrono::milliseconds timeout, bool keys, runtime::SignalChannel& signals,
              int& signal_number) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Wake::Timeout;
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    int n = ::poll(fds, keys ? 2 : 1, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) throw Error(ErrorKind::Internal, std::string("top: poll: ") + std::strerror(errno));
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) {
      int s = signals.next();
      if (s == SIGINT || s == SIGTERM) {
        signal_number = s;
        return Wake::Signal;
      }
    }
    if (keys && (fds[1].revents & (POLLIN | POLLHUP))) {
      char c = 0;
      ssize_t got = ::read(STDIN_FILENO, &c, 1);
      if (got == 1 && (c == 'q' || c == 'Q')) return Wake::Quit;
      if (got == 0) keys = false; // the terminal hung up: wait on the clock alone
    }
  }
}

} // namespace

void add_top_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("top", "Show a job's subtasks, refreshing: the most backpressured first");
  auto job = std::make_shared<std::string>();
  auto interval = std::make_shared<double>(1.0);
  auto once = std::make_shared<bool>(false);
  cmd->add_option("JOB", *job, "a job id, or a job name (its running job, else the newest)")->required()->type_name("");
  cmd->add_option("--interval", *interval, "seconds between refreshes (default 1)")
      ->type_name("SECONDS")
      ->check(number_between(0.1, 3600.0));
  cmd->add_flag("--once", *once, "print one frame, without terminal codes, and exit");
  cmd->callback([&ctx, job, interval, once] {
    ctx.configure_logging("streamctl");
    const std::filesystem::path state_dir = ctx.state_dir();
    // Unknown or ambiguous JOB: the same error and exit code as `status`.
    const std::string id = runtime::find_job(state_dir, *job).id;
    StatusView view = current_status(state_dir, id);
    bool ended = view.state && is_final_state(*view.state);
    if (*once || ended || !::isatty(STDOUT_FILENO)) {
      std::cout << format_top(view) << std::flush;
      ctx.exit_code = 0;
      return;
    }
    // Signals are read from a signalfd between frames, so that SIGINT and SIGTERM leave
    // through the destructors below (the terminal's settings, the cursor) like "q" does.
    runtime::SignalChannel signals;
    KeyboardMode keyboard;
    HiddenCursor cursor;
    auto period = std::chrono::milliseconds(static_cast<long>(*interval * 1000));
    char every[32];
    std::snprintf(every, sizeof every, "%g", *interval);
    int signal_number = 0;
    std::string trouble; // why the figures shown are not fresh
    for (bool first = true;; first = false) {
      ended = view.state && is_final_state(*view.state);
      std::string title = "streamctl top, every " + std::string(every) + "s" +
                          (ended ? "" : keyboard.active() ? " (q quits)" : "") + "  " + clock_now() + "\n";
      draw_in_place(title + trouble + format_top(view), first);
      if (ended) break;
      Wake wake = wait_for(period, keyboard.active(), signals, signal_number);
      if (wake != Wake::Timeout) break;
      // A coordinator that is shutting down may not answer while job.json still says
      // running: keep the last figures, say why, and ask again at the next refresh.
      try {
        view = current_status(state_dir, id);
        trouble.clear();
      } catch (const Error& e) {
        trouble = std::string("  (") + e.what() + ")\n";
      }
    }
    ctx.exit_code = signal_number ? 128 + signal_number : 0;
  });
}

} // namespace streamctl::cli
