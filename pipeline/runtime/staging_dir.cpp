#include "pipeline/runtime/staging_dir.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace streamctl::runtime {

namespace fs = std::filesystem;

namespace {

// Directories PREFIX-PID.* of processes that no longer run (kill -9, a host's OOM killer).
void remove_orphans(const fs::path& parent, const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix + "-", 0) != 0) continue;
    long pid = std::strtol(name.c_str() + prefix.size() + 1, nullptr, 10);
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    fs::remove_all(entry.path(), ec);
  }
}

} // namespace

Result<StagingDir> StagingDir::create(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  fs::path parent = tmp && *tmp ? fs::path(tmp) : fs::path("/tmp");
  remove_orphans(parent, prefix);
  std::string name = (parent / (prefix + "-" + std::to_string(::getpid()) + ".XXXXXX")).string();
  if (::mkdtemp(name.data()) == nullptr) // mode 0700
    return fail("cannot make a staging directory like '" + name + "': " + std::strerror(errno));
  return StagingDir(fs::path(name));
}

StagingDir& StagingDir::operator=(StagingDir&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

void StagingDir::remove() noexcept {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
  path_.clear();
}

} // namespace streamctl::runtime
