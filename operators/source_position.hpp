#pragma once
// Little-endian encoding helpers for the positions of sources and the pending state of sinks
// (operator.hpp: snapshot_position, pre_commit). Every such blob starts with
//
//   u8 version   (the layout of the rest; readers refuse versions they do not know)
//   u8 kind      ('F' file source, 'G' generator, 'S' stdin, 'K' file sink, 'O' stdout sink)
//
// then fields in the writer's order: integers little-endian fixed width, strings as
// u32 LE length + bytes. A reader never trusts a length: every read checks what is left, so a
// truncated or corrupt blob yields a Failure, never a crash or a huge allocation.

#include <cstdint>
#include <string>
#include <string_view>

#include "state/error.hpp"

namespace streamctl::operators {

class PositionWriter {
public:
  PositionWriter(std::string& out, std::uint8_t version, char kind);
  void u8(std::uint8_t v);
  void u32(std::uint32_t v);
  void u64(std::uint64_t v);
  void str(std::string_view s);

private:
  std::string& out_;
};

class PositionReader {
public:
  // `what` names the blob in failures ("position of source 'in'").
  PositionReader(std::string_view data, std::string what);
  // Checks the version (must be `version`) and the kind byte.
  Result<void> header(std::uint8_t version, char kind);
  // The same for a blob with several versions, old readers kept beside new ones: the version
  // must be one of `oldest`..`newest`; returns it.
  Result<std::uint8_t> header(std::uint8_t oldest, std::uint8_t newest, char kind);
  Result<std::uint8_t> u8();
  Result<std::uint32_t> u32();
  Result<std::uint64_t> u64();
  Result<std::string> str(std::size_t max_size = 1 << 20);
  // Fails unless every byte was read.
  Result<void> end() const;
  Failure failure(const std::string& reason) const;
  std::size_t remaining() const { return data_.size() - at_; }

private:
  Result<void> need(std::size_t n) const;

  std::string_view data_;
  std::string what_;
  std::size_t at_ = 0;
};

} // namespace streamctl::operators
