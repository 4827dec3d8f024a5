#pragma once
// Writing a small file so that after a crash it is either absent or whole: write a temporary
// file beside it, fsync, rename over the name, fsync the directory (the rename itself must
// survive). Used for checkpoint _metadata, which completes a checkpoint by existing.

#include <filesystem>
#include <string_view>

#include "state/error.hpp"

namespace streamctl::state {

// Fails with a message naming the file and the system's reason (ENOSPC, EACCES, ...).
Result<void> write_file_durably(const std::filesystem::path& path, std::string_view bytes);

// fsyncs a directory, so that the names created or renamed in it are durable.
Result<void> sync_directory(const std::filesystem::path& dir);

} // namespace streamctl::state
