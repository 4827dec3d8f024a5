#pragma once
// Writes all of a buffer to a file descriptor, retrying short writes and EINTR.

#include <string_view>

#include "state/error.hpp"

namespace streamctl::operators {

// Returns a failure with the reason (strerror) when the write cannot complete.
Result<void> write_all(int fd, std::string_view bytes);

} // namespace streamctl::operators
