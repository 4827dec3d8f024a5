#include "cli/value_checks.hpp"

#include <charconv>
#include <cstdlib>
#include <sstream>

#include "pipeline/spec/did_you_mean.hpp"
#include "pipeline/spec/units.hpp"

namespace streamctl::cli {

namespace {

std::string in_quotes(const std::string& value) {
  return "'" + value + "'";
}

// Whole numbers print without ".0", fractions as written ("0.1").
std::string plain(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

} // namespace

CLI::Validator at_least(long long min) {
  return CLI::Validator(
      [min](std::string& value) -> std::string {
        long long n = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec == std::errc::result_out_of_range) return "is too large: " + in_quotes(value);
        if (ec != std::errc() || end != value.data() + value.size())
          return "must be a whole number, got " + in_quotes(value);
        if (n < min) return "must be at least " + std::to_string(min);
        return {};
      },
      "", "at_least");
}

CLI::Validator number_between(double low, double high) {
  return CLI::Validator(
      [low, high](std::string& value) -> std::string {
        char* end = nullptr;
        double x = std::strtod(value.c_str(), &end);
        if (value.empty() || end != value.c_str() + value.size())
          return "must be a number, got " + in_quotes(value);
        if (!(x >= low && x <= high))
          return "must be between " + plain(low) + " and " + plain(high);
        return {};
      },
      "", "number_between");
}

CLI::Validator byte_size() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        auto bytes = pipeline::parse_size_bytes(value);
        if (!bytes) return "must be a size, got " + in_quotes(value) + ": " + pipeline::size_help;
        value = std::to_string(*bytes);
        return {};
      },
      "", "byte_size");
}

CLI::Validator name_equals_count() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        auto eq = value.find('=');
        long long n = 0;
        const char* digits = value.data() + (eq == std::string::npos ? value.size() : eq + 1);
        const char* end = value.data() + value.size();
        auto [stop, ec] = std::from_chars(digits, end, n);
        if (eq == std::string::npos || eq == 0 || digits == end || ec != std::errc() ||
            stop != end || n < 1)
          return "must be NAME=N with N a whole number at least 1, got " + in_quotes(value);
        return {};
      },
      "", "name_equals_count");
}

CLI::Validator one_of(std::vector<std::string> values) {
  return CLI::Validator(
      [values](std::string& value) -> std::string {
        for (const auto& v : values)
          if (v == value) return {};
        std::string listed;
        for (const auto& v : values)
          listed += (listed.empty() ? "" : ", ") + v;
        std::string hint = pipeline::did_you_mean(value, values);
        return "must be one of " + listed + "; got " + in_quotes(value) +
               (hint.empty() ? "" : "; " + hint);
      },
      "", "one_of");
}

} // namespace streamctl::cli
