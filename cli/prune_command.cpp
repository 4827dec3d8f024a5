#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <optional>
#include <system_error>

#include "cli/context.hpp"
#include "pipeline/runtime/job_directory.hpp"
#include "pipeline/spec/units.hpp"
#include "state/error.hpp"

namespace streamctl::cli {

namespace {

// The states a job does not leave by itself. A "running" job whose coordinator was killed
// reads as "failed" (list_jobs), so it ends here too.
bool has_ended(const runtime::JobEntry& j) {
  return j.state == "finished" || j.state == "failed" || j.state == "stopped" || j.state == "cancelled";
}

// job.json's "updated" ("2026-11-29T10:15:00Z", as JobRegistration writes it): for an ended
// job, when it ended. nullopt for any other text.
std::optional<std::time_t> parse_utc(const std::string& text) {
  std::tm tm{};
  char zone = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &zone, &consumed) != 7 ||
      zone != 'Z' || static_cast<std::size_t>(consumed) != text.size())
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return ::timegm(&tm);
}

} // namespace

// `prune` removes STATE_DIR/jobs/ID of ended jobs that ended long enough ago. Checkpoints,
// savepoints and spool files live under the checkpoint directory, not there, and stay: a
// savepoint is kept until a person deletes it.
void add_prune_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("prune", "Remove the directories of jobs that ended more than --older-than ago");
  auto older_than = std::make_shared<std::string>("7d");
  auto dry_run = std::make_shared<bool>(false);
  cmd->add_option("--older-than", *older_than,
                  "only jobs that ended longer ago than this: a number and a unit, s, m, h or d (default 7d)")
      ->type_name("DURATION");
  cmd->add_flag("--dry-run", *dry_run, "only list the jobs that would be removed");
  cmd->callback([&ctx, older_than, dry_run] {
    ctx.configure_logging("streamctl");
    const auto age_ms = pipeline::parse_duration_ms(*older_than);
    if (!age_ms)
      throw Error(ErrorKind::Usage,
                  "--older-than: bad duration '" + *older_than + "': " + pipeline::duration_help);
    const std::time_t cutoff = std::time(nullptr) - static_cast<std::time_t>(*age_ms / 1000);
    std::size_t removed = 0;
    int code = 0;
    for (const auto& job : runtime::list_jobs(ctx.state_dir())) {
      // A live coordinator may be a restart of this job that has not written job.json yet.
      if (!has_ended(job) || runtime::process_alive(job.coordinator_pid)) continue;
      const auto ended = parse_utc(job.updated);
      if (!ended) {
        ctx.log->warn("job {}: kept, its job.json has no end time I can read ('{}')", job.id, job.updated);
        continue;
      }
      if (*ended >= cutoff) continue;
      if (!*dry_run) {
        std::error_code ec;
        std::filesystem::remove_all(job.dir, ec);
        if (ec) {
          ctx.log->error("cannot remove {}: {}", job.dir.string(), ec.message());
          code = 1;
          continue;
        }
      }
      ++removed;
      if (!ctx.global.quiet)
        std::cerr << (*dry_run ? "would remove " : "removed ") << job.id << " (" << job.state << ", ended "
                  << job.updated << "): " << job.dir.string() << "\n";
    }
    if (!ctx.global.quiet)
      std::cerr << (*dry_run ? "would remove " : "removed ") << removed << " job" << (removed == 1 ? "" : "s")
                << " that ended more than " << *older_than << " ago\n";
    ctx.exit_code = code;
  });
}

} // namespace streamctl::cli
