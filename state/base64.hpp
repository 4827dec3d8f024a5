#pragma once
// Base64 (RFC 4648, the standard alphabet, with '=' padding): how a dead-letter record carries
// input bytes that are not text (operators/record_error_policy.hpp).

#include <string>
#include <string_view>

namespace streamctl::state {

void append_base64(std::string_view bytes, std::string& out);

} // namespace streamctl::state
