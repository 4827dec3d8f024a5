#include "operators/source_position.hpp"

#include "state/le_bytes.hpp"

namespace streamctl::operators {

PositionWriter::PositionWriter(std::string& out, std::uint8_t version, char kind) : out_(out) {
  u8(version);
  u8(static_cast<std::uint8_t>(kind));
}

void PositionWriter::u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }

void PositionWriter::u32(std::uint32_t v) { state::append_le(out_, v); }

void PositionWriter::u64(std::uint64_t v) { state::append_le(out_, v); }

void PositionWriter::str(std::string_view s) {
  u32(static_cast<std::uint32_t>(s.size()));
  out_.append(s);
}

PositionReader::PositionReader(std::string_view data, std::string what)
    : data_(data), what_(std::move(what)) {}

Failure PositionReader::failure(const std::string& reason) const {
  return fail(what_ + ": " + reason + " (at byte " + std::to_string(at_) + " of " +
              std::to_string(data_.size()) + ")");
}

Result<void> PositionReader::need(std::size_t n) const {
  if (data_.size() - at_ < n) return failure("truncated");
  return {};
}

Result<void> PositionReader::header(std::uint8_t version, char kind) {
  auto v = header(version, version, kind);
  if (!v) return Failure{v.error()};
  return {};
}

Result<std::uint8_t> PositionReader::header(std::uint8_t oldest, std::uint8_t newest, char kind) {
  auto v = u8();
  if (!v) return failure("empty");
  if (*v < oldest || *v > newest)
    return failure("unknown version " + std::to_string(*v) + " (this build reads " +
                   (oldest == newest ? std::to_string(newest)
                                     : std::to_string(oldest) + " to " + std::to_string(newest)) +
                   ")");
  auto k = u8();
  if (!k) return Failure{k.error()};
  if (*k != static_cast<std::uint8_t>(kind))
    return failure(std::string("written by another kind of node ('") + static_cast<char>(*k) + "', expected '" +
                   kind + "')");
  return *v;
}

Result<std::uint8_t> PositionReader::u8() {
  if (auto ok = need(1); !ok) return Failure{ok.error()};
  return static_cast<std::uint8_t>(data_[at_++]);
}

Result<std::uint32_t> PositionReader::u32() {
  if (auto ok = need(4); !ok) return Failure{ok.error()};
  std::uint32_t v = 0;
  for (int k = 0; k < 4; ++k) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(data_[at_++])) << (8 * k);
  return v;
}

Result<std::uint64_t> PositionReader::u64() {
  if (auto ok = need(8); !ok) return Failure{ok.error()};
  std::uint64_t v = 0;
  for (int k = 0; k < 8; ++k) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(data_[at_++])) << (8 * k);
  return v;
}

Result<std::string> PositionReader::str(std::size_t max_size) {
  auto n = u32();
  if (!n) return Failure{n.error()};
  if (*n > max_size) return failure("string of " + std::to_string(*n) + " bytes is too long");
  if (auto ok = need(*n); !ok) return Failure{ok.error()};
  std::string s(data_.substr(at_, *n));
  at_ += *n;
  return s;
}

Result<void> PositionReader::end() const {
  if (at_ != data_.size()) return failure(std::to_string(data_.size() - at_) + " unexpected trailing bytes");
  return {};
}

} // namespace streamctl::operators
