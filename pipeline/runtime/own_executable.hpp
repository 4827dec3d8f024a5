#pragma once
// The path of the running streamctl binary (/proc/self/exe): what workers run on this host, and
// what `ship_binary` copies to others.

#include <string>

namespace streamctl::runtime {

// Throws Error(Internal) when /proc/self/exe cannot be read.
std::string own_executable();

} // namespace streamctl::runtime
