#pragma once
// A running job's metrics (metrics_view.hpp) as Prometheus text, exposition format 0.0.4, the
// body of `GET /metrics` ([metrics] listen, metrics_server.hpp).
//
// Every family has `# HELP` and `# TYPE` lines and the prefix `streamctl_`; a family with no
// sample (no watermark yet, latency markers off) is left out whole. Per node subtask the labels
// are job (the job id), job_name, node, subtask and host; job-level families carry job and
// job_name only. Counters end in `_total`; times are in seconds, as Prometheus has them.
// Samples carry no timestamp: the scrape's time is when the text was rendered, within a second.

#include <string>
#include <string_view>

#include "pipeline/runtime/metrics_view.hpp"

namespace streamctl::runtime {

std::string render_prometheus_text(const JobMetrics& metrics);

// A label value as the format wants it between quotes: backslash, double quote and newline
// escaped as \\, \" and \n.
std::string escape_label_value(std::string_view value);

} // namespace streamctl::runtime
