// Byte ranges of a file (operators/file_ranges.hpp, issue 9): where a range's first line
// starts, how many lines precede it, and the csv header every range needs.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <fstream>
#include <unistd.h>

#include "operators/file_ranges.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl::operators;
using streamctl::testing::TempDir;

namespace {

struct OpenFile {
  int fd;
  explicit OpenFile(const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  ~OpenFile() { ::close(fd); }
};

std::optional<std::uint64_t> start_at(int fd, std::uint64_t from) {
  auto start = first_line_start(fd, from);
  REQUIRE(start.ok());
  return *start;
}

} // namespace

TEST_CASE("a range starts at the first line start at or after its first byte", "[file_ranges]") {
  TempDir dir;
  //                          0123 4567 89
  OpenFile file(dir.path / "f", "ab\ncd\nefg");
  REQUIRE(file.fd >= 0);
  CHECK(start_at(file.fd, 1) == 3u); // inside "ab": the next line
  CHECK(start_at(file.fd, 3) == 3u); // byte 2 is a newline: 3 is a line start
  CHECK(start_at(file.fd, 4) == 6u);
  CHECK(start_at(file.fd, 6) == 6u);
  CHECK(start_at(file.fd, 7) == std::nullopt); // "efg" is unterminated: no line starts after 6
  CHECK(start_at(file.fd, 100) == std::nullopt);
}

TEST_CASE("lines before a range are counted, across read buffers", "[file_ranges]") {
  TempDir dir;
  std::string text;
  for (int k = 0; k < 300000; ++k) text += "line " + std::to_string(k) + "\n";
  OpenFile file(dir.path / "f", text);
  REQUIRE(file.fd >= 0);
  auto all = count_newlines(file.fd, 0, text.size());
  REQUIRE(all.ok());
  CHECK(*all == 300000u);
  std::uint64_t mid = text.find("line 200000\n");
  auto before = count_newlines(file.fd, 0, mid);
  REQUIRE(before.ok());
  CHECK(*before == 200000u);
  auto between = count_newlines(file.fd, mid, text.size());
  REQUIRE(between.ok());
  CHECK(*between == 100000u);
  CHECK_THAT(count_newlines(file.fd, 0, text.size() + 5).error(), Catch::Contains("the file ends at byte"));
}

TEST_CASE("the first non-blank line is a csv file's header", "[file_ranges]") {
  TempDir dir;
  OpenFile crlf(dir.path / "a", "\r\n\nx,y\r\n1,2\n");
  auto header = first_nonblank_line(crlf.fd);
  REQUIRE(header.ok());
  CHECK(*header == "x,y");
  OpenFile partial(dir.path / "b", "x,y");
  auto none = first_nonblank_line(partial.fd);
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("ranges are dealt by file and range, whole files as before", "[file_ranges]") {
  CHECK(range_owner(0, 0, 4) == 0u);
  CHECK(range_owner(0, 5, 4) == 1u);
  CHECK(range_owner(2, 3, 4) == 1u);
  CHECK(range_owner(6, 0, 4) == 2u); // a file read whole: file k to subtask k mod p
}
