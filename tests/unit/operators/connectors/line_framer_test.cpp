// LineFramer: a byte stream cut anywhere comes out as the same whole lines; a line longer
// than max_line is reported once with its length and never held whole.
#include <catch2/catch.hpp>

#include <random>

#include "operators/connectors/line_framer.hpp"

using streamctl::connectors::LineFramer;

TEST_CASE("lines cut at random points come out whole, the unterminated last one at finish",
          "[framer]") {
  std::string input;
  for (int i = 0; i < 2000; ++i)
    input += "line " + std::to_string(i) + std::string(i % 37, 'x') + "\n";
  input += "tail without newline";
  auto seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  int reports = 0;
  LineFramer framer(1000, [&](std::string_view, std::size_t) { ++reports; });
  std::string out;
  for (std::size_t at = 0; at < input.size();) {
    std::size_t step = std::uniform_int_distribution<std::size_t>(1, 300)(rng);
    framer.feed(std::string_view(input).substr(at, step), out);
    at += step;
  }
  framer.finish(out);
  REQUIRE(out == input + "\n");
  REQUIRE(reports == 0);
}

TEST_CASE("a line over max_line is one report with its length, the lines around it pass",
          "[framer]") {
  std::vector<std::pair<std::string, std::size_t>> reports;
  LineFramer framer(
      10, [&](std::string_view head, std::size_t length) { reports.emplace_back(head, length); });
  std::string out;
  std::string big(5000, 'y');
  std::string input = "ok1\n" + big + "\nok2\n0123456789\n01234567890\nlast-is-long-too";
  for (std::size_t at = 0; at < input.size(); at += 7)
    framer.feed(std::string_view(input).substr(at, 7), out);
  REQUIRE(framer.held() <= 10);
  framer.finish(out);
  REQUIRE(out == "ok1\nok2\n0123456789\n");
  REQUIRE(reports.size() == 3);
  REQUIRE(reports[0].second == 5000);
  REQUIRE(reports[0].first == std::string(256, 'y').substr(0, reports[0].first.size()));
  REQUIRE(reports[1].second == 11);
  REQUIRE(reports[2].second == 16);
}
