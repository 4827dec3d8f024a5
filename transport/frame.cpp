#include "transport/frame.hpp"

namespace streamctl::transport {

namespace {
constexpr char kMagic[4] = {'S', 'C', 'F', '1'};

template <typename T> void put_le(char* at, T v) {
  for (std::size_t k = 0; k < sizeof(T); ++k) at[k] = static_cast<char>((v >> (8 * k)) & 0xff);
}

template <typename T> T get_le(const char* at) {
  T v = 0;
  for (std::size_t k = 0; k < sizeof(T); ++k)
    v |= static_cast<T>(static_cast<T>(static_cast<unsigned char>(at[k])) << (8 * k));
  return v;
}
} // namespace

void write_frame_header(const FrameHeader& header, std::string& out) {
  if (out.size() < kFrameHeaderSize) out.resize(kFrameHeaderSize);
  write_frame_header(header, out.data());
}

void write_frame_header(const FrameHeader& header, char* p) {
  std::memcpy(p, kMagic, 4);
  p[4] = static_cast<char>(header.kind);
  p[5] = 0;
  put_le<std::uint16_t>(p + 6, header.input_index);
  put_le<std::uint32_t>(p + 8, header.channel);
  put_le<std::uint32_t>(p + 12, 0);
  put_le<std::uint64_t>(p + 16, header.sequence);
}

std::optional<FrameHeader> read_frame_header(std::string_view message) {
  if (message.size() < kFrameHeaderSize || std::memcmp(message.data(), kMagic, 4) != 0)
    return std::nullopt;
  auto kind = static_cast<std::uint8_t>(message[4]);
  if (kind < 1 || kind > 6) return std::nullopt;
  FrameHeader h;
  h.kind = static_cast<FrameKind>(kind);
  h.input_index = get_le<std::uint16_t>(message.data() + 6);
  h.channel = get_le<std::uint32_t>(message.data() + 8);
  h.sequence = get_le<std::uint64_t>(message.data() + 16);
  return h;
}

void write_watermark_payload(std::int64_t watermark, bool idle, std::string& out) {
  char bytes[9];
  put_le<std::uint64_t>(bytes, static_cast<std::uint64_t>(watermark));
  bytes[8] = idle ? 1 : 0;
  out.append(bytes, sizeof bytes);
}

std::optional<WatermarkPayload> read_watermark_payload(std::string_view payload) {
  if (payload.size() != 9 || static_cast<unsigned char>(payload[8]) > 1) return std::nullopt;
  WatermarkPayload p;
  p.watermark = static_cast<std::int64_t>(get_le<std::uint64_t>(payload.data()));
  p.idle = payload[8] == 1;
  return p;
}

void write_piggyback_watermark(std::int64_t watermark, std::string& out) {
  char bytes[kPiggybackWatermarkSize];
  write_piggyback_watermark(watermark, bytes);
  out.append(bytes, sizeof bytes);
}

void write_piggyback_watermark(std::int64_t watermark, char* out) {
  put_le<std::uint64_t>(out, static_cast<std::uint64_t>(watermark));
}

std::optional<std::int64_t> read_piggyback_watermark(std::string_view payload) {
  if (payload.size() < kPiggybackWatermarkSize) return std::nullopt;
  return static_cast<std::int64_t>(get_le<std::uint64_t>(payload.data()));
}

void write_barrier_payload(const BarrierPayload& barrier, std::string& out) {
  char bytes[12];
  put_le<std::uint64_t>(bytes, barrier.checkpoint_id);
  put_le<std::uint32_t>(bytes + 8, static_cast<std::uint32_t>(barrier.directory.size()));
  out.append(bytes, sizeof bytes);
  out.append(barrier.directory);
  if (barrier.stops_job) out.push_back(static_cast<char>(1)); // the flags byte
}

std::optional<BarrierPayload> read_barrier_payload(std::string_view payload) {
  if (payload.size() < 12) return std::nullopt;
  auto length = get_le<std::uint32_t>(payload.data() + 8);
  const std::size_t end = 12 + static_cast<std::size_t>(length);
  if (payload.size() != end && payload.size() != end + 1) return std::nullopt;
  BarrierPayload b;
  b.checkpoint_id = get_le<std::uint64_t>(payload.data());
  b.directory.assign(payload.substr(12, length));
  if (payload.size() == end + 1) {
    auto flags = static_cast<std::uint8_t>(payload[end]);
    if ((flags & ~1u) != 0) return std::nullopt;
    b.stops_job = (flags & 1u) != 0;
  }
  return b;
}

void write_latency_marker_payload(std::int64_t created_us, std::string& out) {
  write_piggyback_watermark(created_us, out); // the same 8 bytes: little-endian int64
}

std::optional<std::int64_t> read_latency_marker_payload(std::string_view payload) {
  if (payload.size() != kPiggybackWatermarkSize) return std::nullopt;
  return read_piggyback_watermark(payload);
}

} // namespace streamctl::transport
