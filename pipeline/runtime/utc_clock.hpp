#pragma once
// The wall clock as text in UTC, for job.json, ids, decisions and failure causes.

#include <string>

namespace streamctl::runtime {

// RFC 3339 to the second: "2026-12-02T08:00:31Z".
inline constexpr const char* kRfc3339Seconds = "%Y-%m-%dT%H:%M:%SZ";
// For names (job ids, savepoint directories): "20261202-080031".
inline constexpr const char* kCompactUtc = "%Y%m%d-%H%M%S";

// Now, in UTC, formatted by strftime(3) `format`.
std::string utc_now(const char* format = kRfc3339Seconds);

} // namespace streamctl::runtime
