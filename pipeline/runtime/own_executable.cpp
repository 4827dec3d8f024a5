#include "pipeline/runtime/own_executable.hpp"

#include <filesystem>
#include <system_error>

#include "state/error.hpp"

namespace streamctl::runtime {

std::string own_executable() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorKind::Internal, "cannot find this streamctl's own binary: " + ec.message());
  return path.string();
}

} // namespace streamctl::runtime
