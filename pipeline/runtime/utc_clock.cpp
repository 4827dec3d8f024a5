#include "pipeline/runtime/utc_clock.hpp"

#include <ctime>

namespace streamctl::runtime {

std::string utc_now(const char* format) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[64];
  std::size_t n = std::strftime(text, sizeof text, format, &tm);
  return std::string(text, n);
}

} // namespace streamctl::runtime
