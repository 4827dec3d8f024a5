#include "pipeline/spec/autoscale_check.hpp"

#include <optional>
#include <sstream>
#include <string>

#include "pipeline/spec/units.hpp"

namespace streamctl::pipeline::detail {

namespace {

std::optional<std::int64_t> bound(Checker& c, const toml::table& table, const char* key) {
  auto v = table.get(key);
  if (!v || !v->is_integer()) return std::nullopt;
  return c.int_at_least(*v, std::string("autoscale.") + key, 1);
}

// A duration that must be above 0: "0" and 0 are valid durations elsewhere (interval = 0 turns
// checkpoints off) but would make the autoscaler decide in a busy loop.
void positive_duration(Checker& c, const toml::table& table, const char* key) {
  auto v = table.get(key);
  if (!v) return;
  std::optional<std::int64_t> ms;
  if (auto i = v->as_integer(); i && i->get() == 0) ms = 0;
  if (auto s = v->as_string()) ms = parse_duration_ms(s->get()); // a bad one was reported
  if (ms && *ms <= 0)
    c.error(c.pos(*v), std::string("'autoscale.") + key +
                           "' must be a positive duration, like \"30s\"; got " +
                           (v->is_string() ? "'" + v->as_string()->get() + "'" : "0"));
}

} // namespace

void check_autoscale(Checker& c, const toml::table& table, int job_max, bool job_max_valid) {
  auto min = bound(c, table, "min_parallelism");
  auto max = bound(c, table, "max_parallelism");
  if (max && job_max_valid && *max > job_max) {
    c.error(c.pos(*table.get("max_parallelism")),
            "'autoscale.max_parallelism' (" + std::to_string(*max) +
                ") is above the job's max_parallelism (" + std::to_string(job_max) +
                "): rescale cannot go past the number of key groups");
  } else if (min && !max && job_max_valid && *min > job_max) {
    // Without its own max, the autoscaler's bound is the job's.
    c.error(c.pos(*table.get("min_parallelism")),
            "'autoscale.min_parallelism' (" + std::to_string(*min) +
                ") is above the job's max_parallelism (" + std::to_string(job_max) + ")");
  }
  if (min && max && *min > *max)
    c.error(c.pos(*table.get("min_parallelism")),
            "'autoscale.min_parallelism' (" + std::to_string(*min) +
                ") is above 'autoscale.max_parallelism' (" + std::to_string(*max) + ")");

  if (auto v = table.get("target_utilization"); v && v->is_number()) {
    double u = v->value<double>().value_or(0);
    if (!(u > 0 && u <= 1)) {
      std::ostringstream text;
      text << u;
      c.error(c.pos(*v), "'autoscale.target_utilization' must be above 0 and at most 1 (the "
                         "busy fraction to size for, like 0.7), got " +
                             text.str());
    }
  }
  positive_duration(c, table, "interval");
  positive_duration(c, table, "cooldown");
}

} // namespace streamctl::pipeline::detail
