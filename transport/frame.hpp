#pragma once
// The header in front of every data-plane message.
//
// A data-plane message is one ZeroMQ frame:
//
//   offset size  field
//   0      4     magic "SCF1" (0x53 0x43 0x46 0x31)
//   4      1     kind: 1 data, 2 watermark, 3 barrier, 4 end of input, 5 data then watermark,
//                6 latency marker
//   5      1     reserved, 0
//   6      2     input index at the receiving node, little-endian (which of its `inputs`)
//   8      4     channel id, little-endian (unique per upstream subtask -> downstream subtask)
//   12     4     reserved, 0
//   16     8     sequence number on this channel, little-endian, from 0
//   24     ...   payload: for data, a batch in the encoding of state/batch_codec.hpp;
//                for watermark, an 8-byte little-endian signed epoch-ms then 1 byte:
//                1 when the sender is idle (skip it until it sends again), else 0;
//                for data then watermark, an 8-byte little-endian signed epoch-ms, then a
//                batch: the receiver takes the batch, then that watermark (not idle), as if
//                a watermark frame had followed the data (it saves the message);
//                for barrier, an 8-byte little-endian checkpoint id, a 4-byte little-endian
//                length L and L bytes: the directory the checkpoint's files go to (UTF-8),
//                then optionally 1 byte of flags (bit 0: the checkpoint stops the job, as a
//                stop's or a rescale's: the sources emit nothing after it; other bits 0);
//                for latency marker, an 8-byte little-endian signed wall-clock time in
//                microseconds since the epoch: when a source made it ([metrics]
//                latency_interval; it follows the records sent before it, never passes them);
//                otherwise empty
//
// The header is fixed-size so a receiver can dispatch on it before touching the payload, and
// the payload starts 8-byte aligned.

#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace streamctl::transport {

enum class FrameKind : std::uint8_t {
  Data = 1,
  Watermark = 2,
  Barrier = 3,
  EndOfInput = 4,
  DataWithWatermark = 5,
  LatencyMarker = 6,
};

// A latency marker's payload: its creation time, wall-clock microseconds since the epoch.
void write_latency_marker_payload(std::int64_t created_us, std::string& out);
// nullopt when the payload is not 8 bytes.
std::optional<std::int64_t> read_latency_marker_payload(std::string_view payload);

// The watermark in front of the batch of a DataWithWatermark payload.
inline constexpr std::size_t kPiggybackWatermarkSize = 8;
void write_piggyback_watermark(std::int64_t watermark, std::string& out);
// Writes it into out[0, kPiggybackWatermarkSize).
void write_piggyback_watermark(std::int64_t watermark, char* out);
// nullopt when the payload is shorter than the watermark.
std::optional<std::int64_t> read_piggyback_watermark(std::string_view payload);

struct FrameHeader {
  FrameKind kind = FrameKind::Data;
  std::uint16_t input_index = 0;
  std::uint32_t channel = 0;
  std::uint64_t sequence = 0;
};

inline constexpr std::size_t kFrameHeaderSize = 24;

// Writes the header into the first kFrameHeaderSize bytes of `out` (resized if shorter).
void write_frame_header(const FrameHeader& header, std::string& out);
// Writes the header into out[0, kFrameHeaderSize) (for a message allocated by the caller).
void write_frame_header(const FrameHeader& header, char* out);

// Reads a header; nullopt when the message is too short, has a bad magic or an unknown kind.
std::optional<FrameHeader> read_frame_header(std::string_view message);

struct WatermarkPayload {
  std::int64_t watermark = INT64_MIN;
  bool idle = false;
};
void write_watermark_payload(std::int64_t watermark, bool idle, std::string& out);
// `payload` is what follows the header; nullopt when it is not 9 bytes.
std::optional<WatermarkPayload> read_watermark_payload(std::string_view payload);

struct BarrierPayload {
  std::uint64_t checkpoint_id = 0;
  std::string directory; // where every task writes its snapshot file for this checkpoint
  // The job halts after it (a stop, a rescale): no record follows the barrier, so a task's
  // state after its snapshot stays that of the checkpoint unless it fires timers.
  bool stops_job = false;
};
void write_barrier_payload(const BarrierPayload& barrier, std::string& out);
// nullopt when the payload is not exactly one barrier.
std::optional<BarrierPayload> read_barrier_payload(std::string_view payload);

} // namespace streamctl::transport
