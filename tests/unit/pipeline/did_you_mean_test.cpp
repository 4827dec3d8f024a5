#include <catch2/catch.hpp>

#include "pipeline/spec/did_you_mean.hpp"
#include "pipeline/spec/edit_distance.hpp"

using namespace streamctl::pipeline;

TEST_CASE("a swap of neighbours is one edit", "[did_you_mean]") {
  const std::vector<std::string> commands{"validate", "run", "test", "rescale"};
  CHECK(did_you_mean("rnu", commands) == "did you mean 'run'?");
  CHECK(closest_name("tset", commands) == "test");
}

TEST_CASE("longer words may be a third of their length away", "[did_you_mean]") {
  const std::vector<std::string> options{"--parallelism", "--set", "--resume"};
  CHECK(closest_name("--paralelism", options) == "--parallelism");
  CHECK(closest_name("--paralellizm", options) == "--parallelism");
  CHECK_FALSE(closest_name("--frobnicate", options));
}

TEST_CASE("short words get one edit, and a word never matches by replacing it", "[did_you_mean]") {
  CHECK(did_you_mean("xy", {"ab"}).empty());
  CHECK(did_you_mean("ab", {"a"}).empty()); // one edit, but that is all of it
  CHECK(did_you_mean("ab", {"abc"}) == "did you mean 'abc'?");
}

TEST_CASE("edit distance: a swap of neighbours is one edit, other edits one each", "[did_you_mean]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("run", "rnu") == 1);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("paralelism", "parallelism") == 1);
  CHECK(edit_distance("ca", "abc") == 3); // optimal string alignment, not Damerau
}
