#pragma once
// The [autoscale] table's checks beyond its keys' types (which top_level_schema.cpp's schema
// does): bounds that relate its values to each other and to the job. Internal to the pipeline
// spec; pipeline/runtime/autoscale_settings.hpp reads the checked table.

#include <toml++/toml.h>

#include "pipeline/spec/schema_check.hpp"

namespace streamctl::pipeline::detail {

// Reports, each at its value: min_parallelism or max_parallelism below 1, min above max, max
// above the job's max_parallelism (`job_max`; skipped when `job_max_valid` is false: it was
// reported already), target_utilization not in (0, 1], interval or cooldown not above 0.
// Values of the wrong type were reported by the schema and are skipped here.
void check_autoscale(Checker& c, const toml::table& table, int job_max, bool job_max_valid);

} // namespace streamctl::pipeline::detail
