// `streamctl tap JOB NODE`: prints copies of the records leaving NODE of a running job as JSON
// lines on stdout, until --limit records, the job's end, a closed stdout or SIGINT/SIGTERM.
// The copies travel beside the data (pipeline/runtime/tap_protocol.hpp): the job's output
// and its guarantees do not change.

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <poll.h>
#include <string_view>
#include <unistd.h>

#include "cli/context.hpp"
#include "cli/value_checks.hpp"
#include "pipeline/runtime/job_directory.hpp"
#include "pipeline/runtime/signal_channel.hpp"
#include "pipeline/runtime/tap_session.hpp"
#include "state/error.hpp"

namespace streamctl::cli {

namespace {

using namespace std::chrono_literals;

// The coordinator answers every lease renewal (each second); this long without a word, and
// with the job still registered as running, it is not answering.
constexpr auto kSilenceLimit = 10s;

// Writes all of `text` to stdout; false when stdout is closed (`tap ... | head`).
bool write_out(std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(STDOUT_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// The lines of `lines` that fit under `limit` printed in all (all of them when `limit` is 0),
// counted into `printed`.
std::string_view take_lines(std::string_view lines, std::uint64_t limit, std::uint64_t& printed) {
  if (limit == 0) return lines;
  std::size_t end = 0;
  while (end < lines.size() && printed < limit) {
    std::size_t nl = lines.find('\n', end);
    end = nl == std::string_view::npos ? lines.size() : nl + 1;
    ++printed;
  }
  return lines.substr(0, end);
}

// SIGINT or SIGTERM waiting, if one is (0 otherwise).
int pending_stop_signal(runtime::SignalChannel& signals) {
  pollfd fd{signals.fd(), POLLIN, 0};
  while (::poll(&fd, 1, 0) > 0) {
    int s = signals.next();
    if (s == SIGINT || s == SIGTERM) return s;
    if (s == 0) break;
  }
  return 0;
}

} // namespace

void add_tap_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("tap", "Print the records leaving a node of a running job, as JSON lines");
  auto job = std::make_shared<std::string>();
  auto node = std::make_shared<std::string>();
  auto limit = std::make_shared<std::uint64_t>(0);
  auto sample = std::make_shared<double>(1.0);
  cmd->add_option("JOB", *job, "a job id, or a job name (its running job, else the newest)")->required()->type_name("");
  cmd->add_option("NODE", *node, "the node (source, operator or sink) whose output to print")
      ->required()
      ->type_name("");
  cmd->add_option("--limit", *limit, "stop after this many records (default: until the job ends)")
      ->type_name("N")
      ->check(at_least(1));
  cmd->add_option("--sample", *sample, "print this share of the records, chosen at random (0 < P <= 1; default 1)")
      ->type_name("P");
  cmd->callback([&ctx, job, node, limit, sample] {
    ctx.configure_logging("streamctl");
    if (!(*sample > 0.0 && *sample <= 1.0))
      throw Error(ErrorKind::Usage, "--sample must be above 0 and at most 1 (a share of the records)");
    const auto state_dir = ctx.state_dir();
    runtime::JobEntry entry = runtime::find_job(state_dir, *job);
    // Signals are read between waits, so that an interrupted tap still closes itself.
    runtime::SignalChannel signals;
    runtime::TapSession session(entry, runtime::TapSession::Request{*node, *sample, *limit});

    std::uint64_t printed = 0;
    std::uint64_t skipped = 0;
    auto report_skipped = [&] {
      if (skipped > 0 && !ctx.global.quiet)
        std::cerr << "streamctl: tap: " << skipped << " records of '" << *node
                  << "' were not shown: the tap could not keep up with them\n";
    };
    for (;;) {
      if (int s = pending_stop_signal(signals)) {
        session.close();
        report_skipped();
        ctx.exit_code = 128 + s;
        return;
      }
      auto event = session.next(200ms);
      using Kind = runtime::TapSession::Event::Kind;
      switch (event.kind) {
      case Kind::Opened:
        if (!ctx.global.quiet)
          std::cerr << "streamctl: tapping '" << *node << "' of job " << entry.id << " (" << event.subtasks
                    << " subtask" << (event.subtasks == 1 ? "" : "s") << " now)\n";
        break;
      case Kind::Records:
        skipped += event.skipped;
        if (!write_out(take_lines(event.lines, *limit, printed))) {
          session.close(); // the reader has gone: a normal end (`| head`)
          ctx.exit_code = 0;
          return;
        }
        if (*limit > 0 && printed >= *limit) {
          session.close();
          report_skipped();
          ctx.exit_code = 0;
          return;
        }
        break;
      case Kind::Refused:
        throw Error(ErrorKind::Usage, "job " + entry.id + ": " + event.message);
      case Kind::Ended: {
        auto ended = runtime::find_job(state_dir, entry.id);
        report_skipped();
        if (!ctx.global.quiet) std::cerr << "streamctl: job " << entry.id << " has ended (" << ended.state << ")\n";
        ctx.exit_code = 0;
        return;
      }
      case Kind::Nothing:
        if (session.silent_for() > 3s) {
          // The job may have ended without a word to us (its coordinator was killed, or
          // exited before our renewal): its registration says.
          auto now = runtime::find_job(state_dir, entry.id);
          if (now.state != "running" && now.state != "restarting") {
            report_skipped();
            if (!ctx.global.quiet) std::cerr << "streamctl: job " << entry.id << " has ended (" << now.state << ")\n";
            ctx.exit_code = 0;
            return;
          }
          if (now.lost || session.silent_for() > kSilenceLimit)
            throw Error(ErrorKind::JobFailed, "job " + entry.id + " does not answer (coordinator pid " +
                                                  std::to_string(now.coordinator_pid) + ")");
        }
        break;
      }
    }
  });
}

} // namespace streamctl::cli
