// The file source's position (operators/file_position.hpp): version 2 records each file's
// identity (device, inode, fingerprint of its first bytes) beside its offset, so that a
// `--resume` after log rotation can tell the file it read from another at the same path
// (issue 7, finding 3: an offset alone was applied to a replaced file, and its first records
// were lost). Version 3 adds byte ranges (a file read by several subtasks, issue 9). Version 1
// positions, without identity, and version 2 ones, without ranges, are still read.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "operators/file_position.hpp"
#include "operators/source_position.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl::operators;
using streamctl::testing::TempDir;

namespace {

std::vector<FilePositionEntry> sample() {
  FilePositionEntry a;
  a.name = "logs/app.log";
  a.identity = FileIdentity{0x0102030405060708ULL, 77, kFingerprintBytes, 0xdeadbeefcafef00dULL};
  a.offset = 5000;
  a.line = 40;
  a.done = true;
  FilePositionEntry b;
  b.name = "logs/b.csv";
  b.identity = FileIdentity{3, 4, 12, 99};
  b.offset = 12;
  b.line = 1;
  b.header = "x,y";
  FilePositionEntry c = b; // another range of b.csv
  c.range_bytes = 8;
  c.range = 2;
  c.offset = 17;
  c.line = 3;
  c.identity->fingerprint_bytes = 20; // fingerprinted later, when the file was longer
  b.range_bytes = 8;
  return {a, b, c};
}

// A version 1 position, as streamctl wrote it before identities.
std::string version1(const std::string& name, std::uint64_t offset, std::uint64_t line, bool done) {
  std::string out;
  PositionWriter w(out, 1, 'F');
  w.u32(1);
  w.str(name);
  w.u64(offset);
  w.u64(line);
  w.u8(done ? 1 : 0);
  w.str("");
  return out;
}

// A version 2 position, as streamctl wrote it before ranges.
std::string version2(const std::string& name, std::uint64_t offset, std::uint64_t line) {
  std::string out;
  PositionWriter w(out, 2, 'F');
  w.u32(1);
  w.str(name);
  w.u64(5);
  w.u64(6);
  w.u32(static_cast<std::uint32_t>(std::min<std::uint64_t>(offset, kFingerprintBytes)));
  w.u64(7);
  w.u64(offset);
  w.u64(line);
  w.u8(0);
  w.str("h");
  return out;
}

} // namespace

TEST_CASE("a file position round-trips with each file's identity", "[file_position]") {
  std::string bytes;
  write_file_position(bytes, sample());
  // Version byte, kind, count, then the first name: the layout drawn in the header.
  REQUIRE(bytes.size() > 10);
  CHECK(bytes[0] == 3);
  CHECK(bytes[1] == 'F');
  CHECK(bytes.substr(2, 4) == std::string("\x03\x00\x00\x00", 4));
  auto read = read_file_position(bytes, "test");
  INFO((read.ok() ? std::string() : read.error()));
  REQUIRE(read.ok());
  CHECK(*read == sample());

  std::string empty;
  write_file_position(empty, {});
  auto none = read_file_position(empty, "test");
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("a version 1 file position is still read, without identity", "[file_position]") {
  auto read = read_file_position(version1("a.jsonl", 17, 2, true), "test");
  INFO((read.ok() ? std::string() : read.error()));
  REQUIRE(read.ok());
  REQUIRE(read->size() == 1);
  CHECK((*read)[0].name == "a.jsonl");
  CHECK_FALSE((*read)[0].identity.has_value());
  CHECK((*read)[0].offset == 17);
  CHECK((*read)[0].line == 2);
  CHECK((*read)[0].done);
}

TEST_CASE("a version 2 file position is still read, each file one range", "[file_position]") {
  auto read = read_file_position(version2("a.jsonl", 2000, 30), "test");
  INFO((read.ok() ? std::string() : read.error()));
  REQUIRE(read.ok());
  REQUIRE(read->size() == 1);
  const auto& e = (*read)[0];
  CHECK(e.name == "a.jsonl");
  CHECK(e.identity == FileIdentity{5, 6, kFingerprintBytes, 7});
  CHECK(e.range_bytes == 0);
  CHECK(e.range == 0);
  CHECK(e.offset == 2000);
  CHECK(e.line == 30);
  CHECK(e.header == "h");
}

TEST_CASE("malformed file positions are refused, never trusted", "[file_position]") {
  std::string bytes;
  write_file_position(bytes, sample());
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    INFO("truncated to " << cut);
    CHECK_FALSE(read_file_position(bytes.substr(0, cut), "test").ok());
  }
  CHECK_THAT(read_file_position(bytes + "x", "test").error(), Catch::Contains("trailing"));
  auto version = bytes;
  version[0] = 4;
  CHECK_THAT(read_file_position(version, "test").error(), Catch::Contains("unknown version 4 (this build reads 1 to 3)"));
  auto kind = bytes;
  kind[1] = 'G';
  CHECK_FALSE(read_file_position(kind, "test").ok());
  auto count = bytes;
  count[5] = 0x7f; // billions of entries in a few bytes
  CHECK_THAT(read_file_position(count, "test").error(), Catch::Contains("exceeds the data"));

  auto entries = sample();
  auto encode = [](const std::vector<FilePositionEntry>& files) {
    std::string out;
    write_file_position(out, files);
    return read_file_position(out, "position of source 'in'");
  };
  auto twice = entries;
  twice[1].name = twice[0].name;
  CHECK_THAT(encode(twice).error(), Catch::Contains("recorded twice"));
  // Two ranges of a file are two entries; the same range twice is refused.
  auto range_twice = entries;
  range_twice[2].range = 0;
  range_twice[2].offset = 12;
  CHECK_THAT(encode(range_twice).error(), Catch::Contains("range 0 recorded twice"));
  auto before_start = entries;
  before_start[2].range = 3; // starts at byte 24, after offset 17
  CHECK_THAT(encode(before_start).error(), Catch::Contains("before the start of range 3"));
  auto whole = entries;
  whole[2].range_bytes = 0;
  CHECK_THAT(encode(whole).error(), Catch::Contains("range 2 of a file read whole"));
  auto lines = entries;
  lines[1].line = 13;
  CHECK_THAT(encode(lines).error(), Catch::Contains("more lines than bytes"));
  // A fingerprint must cover what was consumed (up to kFingerprintBytes), and no more than that.
  auto short_print = entries;
  short_print[1].identity->fingerprint_bytes = 11;
  CHECK_THAT(encode(short_print).error(), Catch::Contains("fewer than the 12 consumed"));
  auto long_print = entries;
  long_print[0].identity->fingerprint_bytes = kFingerprintBytes + 1;
  CHECK_THAT(encode(long_print).error(), Catch::Contains("more than"));
  CHECK_THAT(encode(long_print).error(), Catch::Contains("position of source 'in'"));
}

TEST_CASE("a file's identity is its device, inode and first bytes", "[file_position]") {
  TempDir dir;
  auto path = dir.path / "f";
  std::string text(3000, 'a');
  for (std::size_t k = 0; k < text.size(); ++k) text[k] = static_cast<char>('a' + k % 26);
  std::ofstream(path, std::ios::binary) << text;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  ::lseek(fd, 100, SEEK_SET);
  auto id = identify_file(fd);
  REQUIRE(id.ok());
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  CHECK(id->device == static_cast<std::uint64_t>(st.st_dev));
  CHECK(id->inode == static_cast<std::uint64_t>(st.st_ino));
  CHECK(id->fingerprint_bytes == kFingerprintBytes);
  CHECK(id->fingerprint == XXH64(text.data(), kFingerprintBytes, 0));
  CHECK(::lseek(fd, 0, SEEK_CUR) == 100); // pread: the reader's offset does not move
  auto shorter = fingerprint_file(fd, 10);
  REQUIRE(shorter.ok());
  CHECK(**shorter == XXH64(text.data(), 10, 0));
  ::close(fd);

  // A file shorter than the fingerprint length: all of it, and nothing for a longer ask.
  std::ofstream(dir.path / "small", std::ios::binary) << "hello\n";
  fd = ::open((dir.path / "small").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto small = identify_file(fd);
  REQUIRE(small.ok());
  CHECK(small->fingerprint_bytes == 6);
  CHECK(small->fingerprint == XXH64("hello\n", 6, 0));
  auto longer = fingerprint_file(fd, 7);
  REQUIRE(longer.ok());
  CHECK_FALSE(longer->has_value());
  ::close(fd);
}
