// Spool::append: whole lines that a source framed itself (tcp, zmq) go after what the file
// holds, at the size it reports, and survive reopening; pump and append mix in one file.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <unistd.h>

#include "operators/spool.hpp"
#include "unit/temp_dir.hpp"

using streamctl::operators::Spool;
using streamctl::testing::TempDir;

namespace {
std::string contents(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
} // namespace

TEST_CASE("Spool::append writes after what the file holds, and reopening appends after it",
          "[spool]") {
  TempDir dir;
  {
    auto spool = Spool::open(dir.path, "tcp-in.run.spool");
    spool->append("a\n");
    spool->append("bb\n");
    spool->append("");
    REQUIRE(spool->size() == 5);
    spool->sync();
  }
  auto again = Spool::open(dir.path, "tcp-in.run.spool");
  REQUIRE(again->size() == 5);
  again->append("ccc\n");
  REQUIRE(contents(dir.path / "tcp-in.run.spool") == "a\nbb\nccc\n");
}

TEST_CASE("Spool::append and Spool::pump share one end of file", "[spool]") {
  TempDir dir;
  auto spool = Spool::open(dir.path, "x.run.spool");
  int ends[2];
  REQUIRE(::pipe(ends) == 0);
  REQUIRE(::write(ends[1], "piped\n", 6) == 6);
  ::close(ends[1]);
  spool->append("first\n");
  while (spool->pump(ends[0], 1 << 20) != Spool::Pump::End) {
  }
  ::close(ends[0]);
  spool->append("last\n");
  REQUIRE(spool->size() == 17);
  REQUIRE(contents(spool->path()) == "first\npiped\nlast\n");
}
