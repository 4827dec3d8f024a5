#pragma once
// A fresh directory under /tmp for one test, removed with everything in it when the test ends.

#include <catch2/catch.hpp>
#include <filesystem>
#include <stdlib.h>
#include <string>
#include <system_error>

namespace streamctl::testing {

struct TempDir {
  TempDir() {
    std::string name = "/tmp/streamctl-test-XXXXXX";
    REQUIRE(::mkdtemp(name.data()) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path path;
};

} // namespace streamctl::testing
