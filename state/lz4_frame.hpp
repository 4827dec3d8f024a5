#pragma once
// A thin RAII wrapper over liblz4's frame API (lz4frame.h) as snapshots use it: one whole
// frame per call, the content size in the frame header and the content checksum on.
//
// Thread-compatible: each object owns its LZ4 context; use one per thread.

#include <cstddef>
#include <string>
#include <string_view>

#include "state/error.hpp"

struct LZ4F_cctx_s;
struct LZ4F_dctx_s;

namespace streamctl::state {

class Lz4FrameCompressor {
public:
  Lz4FrameCompressor();
  ~Lz4FrameCompressor();
  Lz4FrameCompressor(const Lz4FrameCompressor&) = delete;
  Lz4FrameCompressor& operator=(const Lz4FrameCompressor&) = delete;

  // Appends one LZ4 frame holding `raw` to `out` (reusing out's capacity).
  Result<void> compress(std::string_view raw, std::string& out);

private:
  LZ4F_cctx_s* cctx_ = nullptr;
};

class Lz4FrameDecompressor {
public:
  Lz4FrameDecompressor();
  ~Lz4FrameDecompressor();
  Lz4FrameDecompressor(const Lz4FrameDecompressor&) = delete;
  Lz4FrameDecompressor& operator=(const Lz4FrameDecompressor&) = delete;

  // Decompresses `frame`, which must be exactly one complete LZ4 frame of `raw_length`
  // bytes whose content checksum matches, into `out` (replacing its contents). Failures say
  // what is wrong ("content checksum mismatch", "frame ends early", ...).
  Result<void> decompress(std::string_view frame, std::size_t raw_length, std::string& out);

private:
  LZ4F_dctx_s* dctx_ = nullptr;
};

} // namespace streamctl::state
