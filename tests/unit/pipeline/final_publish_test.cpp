// The record that a run publishes its final output (issue 7, chaos kill seed 9100: a
// coordinator killed after the sinks had published everything was restarted from a checkpoint
// and published it twice). `restart` decides from finish_state whether the job may run again.

#include <catch2/catch.hpp>

#include <fstream>

#include "pipeline/runtime/final_publish.hpp"
#include "unit/temp_dir.hpp"

using namespace streamctl::runtime;

TEST_CASE("final publish: no record means the job may run again", "[final_publish]") {
  streamctl::testing::TempDir dir;
  auto state = finish_state(dir.path);
  CHECK_FALSE(state.finishing);
  CHECK(state.unfinished.empty());
}

TEST_CASE("final publish: the tasks that did not record their output as published", "[final_publish]") {
  streamctl::testing::TempDir dir;
  REQUIRE(mark_finishing(dir.path, 3));
  auto state = finish_state(dir.path);
  CHECK(state.finishing);
  CHECK(state.unfinished == std::vector<std::size_t>{0, 1, 2});
  REQUIRE(mark_task_published(dir.path, 0));
  REQUIRE(mark_task_published(dir.path, 2));
  CHECK(finish_state(dir.path).unfinished == std::vector<std::size_t>{1});
  REQUIRE(mark_task_published(dir.path, 1));
  state = finish_state(dir.path);
  CHECK(state.finishing);
  CHECK(state.unfinished.empty());
}

TEST_CASE("final publish: an unreadable record counts as unfinished", "[final_publish]") {
  streamctl::testing::TempDir dir;
  std::ofstream(dir.path / "finishing") << "garbage\n";
  auto state = finish_state(dir.path);
  CHECK(state.finishing);
  CHECK_FALSE(state.unfinished.empty());
}

TEST_CASE("final publish: a new run clears an earlier run's records", "[final_publish]") {
  streamctl::testing::TempDir dir;
  REQUIRE(mark_finishing(dir.path, 1));
  REQUIRE(mark_task_published(dir.path, 0));
  clear_final_publish(dir.path);
  CHECK_FALSE(finish_state(dir.path).finishing);
  CHECK_FALSE(std::filesystem::exists(dir.path / "published-0"));
}
