#include <catch2/catch.hpp>

#include <string>
#include <unistd.h>

#include "operators/line_reader.hpp"

using streamctl::operators::LineReader;

namespace {
// Reads every line of `text` through a pipe, with a tiny chunk size to force lines across
// chunk boundaries.
std::vector<std::string> read_all(const std::string& text, std::size_t chunk) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  LineReader reader(fds[0], chunk);
  std::vector<std::string> lines;
  std::vector<std::shared_ptr<const void>> kept; // as batches retain chunks
  for (;;) {
    auto line = reader.next_line();
    if (line) {
      kept.push_back(reader.chunk());
      lines.emplace_back(*line);
      continue;
    }
    if (reader.fill(true) == LineReader::Fill::End && reader.at_end()) break;
  }
  ::close(fds[0]);
  return lines;
}
} // namespace

TEST_CASE("lines survive chunk boundaries, CRLF and a last line without newline", "[operators][lines]") {
  std::string text = "first\r\nsecond line that is longer than a chunk\n\nlast";
  for (std::size_t chunk : {4, 7, 16, 1 << 20}) {
    auto lines = read_all(text, chunk);
    REQUIRE(lines == std::vector<std::string>{"first", "second line that is longer than a chunk", "", "last"});
  }
}

TEST_CASE("line numbers count every line, blank ones included", "[operators][lines]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::string text = "a\n\nb\n";
  REQUIRE(::write(fds[1], text.data(), text.size()) == 5);
  ::close(fds[1]);
  LineReader reader(fds[0]);
  REQUIRE(reader.fill(true) == LineReader::Fill::Read);
  CHECK(*reader.next_line() == "a");
  CHECK(*reader.next_line() == "");
  CHECK(*reader.next_line() == "b");
  CHECK(reader.line_number() == 3);
  ::close(fds[0]);
}
