#include "state/lz4_frame.hpp"

#include <lz4frame.h>

#include <new>

namespace streamctl::state {

namespace {

LZ4F_preferences_t frame_preferences(std::size_t raw_size) {
  LZ4F_preferences_t prefs = LZ4F_INIT_PREFERENCES;
  // 256 KiB linked blocks: the ratio of one big block (the 64 KiB window carries over) at a
  // bounded decoder buffer; the content checksum makes a frame self-checking on its own.
  prefs.frameInfo.blockSizeID = LZ4F_max256KB;
  prefs.frameInfo.blockMode = LZ4F_blockLinked;
  prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  prefs.frameInfo.contentSize = raw_size;
  prefs.compressionLevel = 0; // fast mode: ~500 MB/s a core (TOOLCHAIN.md)
  prefs.autoFlush = 1;        // the whole input comes at once: no internal buffering
  return prefs;
}

std::string lz4_error(std::size_t code) {
  return LZ4F_getErrorName(code);
}

} // namespace

Lz4FrameCompressor::Lz4FrameCompressor() {
  if (LZ4F_isError(LZ4F_createCompressionContext(&cctx_, LZ4F_VERSION))) throw std::bad_alloc();
}

Lz4FrameCompressor::~Lz4FrameCompressor() {
  LZ4F_freeCompressionContext(cctx_);
}

Result<void> Lz4FrameCompressor::compress(std::string_view raw, std::string& out) {
  LZ4F_preferences_t prefs = frame_preferences(raw.size());
  std::size_t start = out.size();
  std::size_t bound = LZ4F_HEADER_SIZE_MAX + LZ4F_compressBound(raw.size(), &prefs);
  out.resize(start + bound);
  char* dst = out.data() + start;
  std::size_t pos = 0;
  std::size_t n = LZ4F_compressBegin(cctx_, dst, bound, &prefs);
  if (LZ4F_isError(n)) {
    out.resize(start);
    return fail("LZ4 compression failed: " + lz4_error(n));
  }
  pos += n;
  n = LZ4F_compressUpdate(cctx_, dst + pos, bound - pos, raw.data(), raw.size(), nullptr);
  if (!LZ4F_isError(n)) {
    pos += n;
    n = LZ4F_compressEnd(cctx_, dst + pos, bound - pos, nullptr);
  }
  if (LZ4F_isError(n)) {
    out.resize(start);
    return fail("LZ4 compression failed: " + lz4_error(n));
  }
  pos += n;
  out.resize(start + pos);
  return {};
}

Lz4FrameDecompressor::Lz4FrameDecompressor() {
  if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx_, LZ4F_VERSION))) throw std::bad_alloc();
}

Lz4FrameDecompressor::~Lz4FrameDecompressor() {
  LZ4F_freeDecompressionContext(dctx_);
}

Result<void> Lz4FrameDecompressor::decompress(std::string_view frame, std::size_t raw_length,
                                              std::string& out) {
  out.resize(raw_length);
  char scratch = 0; // a valid pointer when the output is empty
  char* dst = raw_length > 0 ? out.data() : &scratch;
  const char* src = frame.data();
  std::size_t src_left = frame.size();
  std::size_t produced = 0;
  for (;;) {
    std::size_t dst_size = raw_length - produced;
    std::size_t src_size = src_left;
    std::size_t hint = LZ4F_decompress(dctx_, dst + produced, &dst_size, src, &src_size, nullptr);
    if (LZ4F_isError(hint)) {
      LZ4F_resetDecompressionContext(dctx_);
      return fail(std::string("LZ4 frame is corrupt: ") + lz4_error(hint));
    }
    produced += dst_size;
    src += src_size;
    src_left -= src_size;
    if (hint == 0) break; // the frame is complete (and its content checksum matched)
    if (src_size == 0 && dst_size == 0) {
      LZ4F_resetDecompressionContext(dctx_);
      if (src_left == 0) return fail("LZ4 frame ends early");
      return fail("LZ4 frame holds more than the " + std::to_string(raw_length) +
                  " bytes the index records");
    }
  }
  if (src_left != 0) return fail("bytes after the end of the LZ4 frame");
  if (produced != raw_length)
    return fail("LZ4 frame holds " + std::to_string(produced) + " bytes, the index records " +
                std::to_string(raw_length));
  return {};
}

} // namespace streamctl::state
