#include "pipeline/runtime/autoscaler.hpp"

#include <cstdio>
#include <ctime>

#include "pipeline/runtime/utc_clock.hpp"
#include "state/json_writer.hpp"

namespace streamctl::runtime {

namespace {

using namespace std::chrono_literals;

// The figures each sample holds are of the last heartbeat (about one second).
constexpr auto kSampleEvery = 1s;

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// {"time":..,"nodes":[{"node":"m","from":1,"to":2,"target_in":2000.0,"true_rate":1100.0,
//  "required":1.8},...],"outcome":"rescaling"}: the nodes DS2 had data for.
std::string decision_json(const Ds2Decision& d, const std::string& outcome) {
  using state::json_string;
  std::string nodes;
  for (const auto& row : d.nodes) {
    if (!row.decided) continue;
    nodes += (nodes.empty() ? "{" : ",{") + std::string("\"node\":") + json_string(row.node) +
             ",\"from\":" + std::to_string(row.current) + ",\"to\":" + std::to_string(row.optimal) +
             ",\"target_in\":" + (row.target_in ? number(*row.target_in) : "null") +
             ",\"true_rate\":" + number(row.true_in) +
             ",\"required\":" + (row.required ? number(*row.required) : "null") + "}";
  }
  return "{\"time\":" + json_string(utc_now()) + ",\"nodes\":[" + nodes +
         "],\"outcome\":" + json_string(outcome) + "}";
}

} // namespace

Autoscaler::Autoscaler(const LoadedJob& job, AutoscaleSettings settings, AutoscaleHooks hooks,
                       spdlog::logger& log)
    : job_(job), settings_(settings), hooks_(std::move(hooks)), log_(log) {}

void Autoscaler::attempt_flowing(Clock::time_point now) {
  samples_.clear();
  quiet_until_ = first_attempt_ ? now : now + settings_.cooldown;
  first_attempt_ = false;
  next_sample_ = quiet_until_;
  next_decision_ = quiet_until_ + settings_.interval;
}

void Autoscaler::tick(Clock::time_point now) {
  if (now < quiet_until_) return;
  if (now >= next_sample_) {
    JobMetrics metrics = hooks_.metrics();
    if (metrics.state == "running") sample(metrics);
    next_sample_ = now + kSampleEvery;
  }
  if (now < next_decision_) return;
  if (auto busy = hooks_.busy()) {
    // Retried at the next loop turn; a rescale or restart starts a new attempt anyway.
    log_.debug("autoscale: decision deferred: {}", *busy);
    return;
  }
  if (hooks_.checkpointing() && now < next_decision_ + settings_.interval) return;
  decide(now);
}

void Autoscaler::sample(const JobMetrics& metrics) {
  for (const auto& m : metrics.subtasks)
    samples_.push_back(observation_of(m));
}

void Autoscaler::decide(Clock::time_point now) {
  next_decision_ = now + settings_.interval;
  if (samples_.empty()) return;
  Ds2Decision decision = decide_ds2(job_.spec, job_.plan, samples_, settings_);
  samples_.clear();
  for (const auto& row : decision.nodes) {
    if (row.decided)
      log_.info("autoscale: {}", row.summary());
    else
      log_.debug("autoscale: {}", row.summary());
  }
  std::string changes = decision.rescale_request();
  std::string outcome = "no change";
  if (!changes.empty()) {
    std::string request = changes;
    for (auto& c : request)
      if (c == '\n') c = ' ';
    while (!request.empty() && request.back() == ' ')
      request.pop_back();
    if (auto why = hooks_.rescale(changes)) {
      log_.warn("autoscale: cannot rescale to {}: {}; the job goes on at its parallelism", request,
                *why);
      outcome = "refused: " + *why;
    } else {
      log_.info("autoscale: rescaling to {}", request);
      outcome = "rescaling to " + request;
    }
  } else {
    log_.info("autoscale: no change");
  }
  last_json_ = decision_json(decision, outcome);
}

} // namespace streamctl::runtime
