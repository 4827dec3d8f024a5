#pragma once
// Splits a file descriptor's bytes into lines without copying them.
//
// Bytes are read into 1 MiB chunks held by shared pointers; a line is a view into the current
// chunk, and a batch that keeps values pointing into a line retains the chunk (chunk()). A
// line cut by the end of a chunk is moved to the front of the next chunk. The reader never
// blocks on an fd that is not readable when asked not to (stdin), so the task loop can keep
// answering its control socket.

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace streamctl::operators {

class LineReader {
public:
  enum class Fill { Read, WouldBlock, End };

  // Does not take ownership of `fd`. A reader resumed from a checkpoint starts with `fd`
  // already at byte `offset` of its input, `line_number` lines having been read before it.
  explicit LineReader(int fd, std::size_t chunk_bytes = 1 << 20, std::uint64_t offset = 0,
                      std::uint64_t line_number = 0);

  // The next complete line, without its "\n" (and "\r"), or nullopt when none is buffered.
  // After End, the last unterminated line is returned as a line too, unless held back.
  std::optional<std::string_view> next_line();
  // Reads once. With `wait` false, returns WouldBlock instead of blocking.
  Fill fill(bool wait);
  // Every line has been returned (or only a held-back unterminated one is left).
  bool at_end() const;
  // Do not return an unterminated last line at the end of input: it is not consumed, so
  // offset() stays at its start (a writer may still be appending to it; the next run that
  // resumes from offset() reads it once complete).
  void hold_unterminated_line() { hold_unterminated_ = true; }
  // Bytes of an unterminated last line left unconsumed at the end of input.
  std::size_t held_bytes() const { return at_end() ? end_ - begin_ : 0; }

  // The memory the views returned by next_line() point into.
  std::shared_ptr<const void> chunk() const { return chunk_; }
  // Which chunk that is, to tell when it changes without copying the shared pointer (two atomic
  // operations a line when done per line).
  const void* chunk_address() const { return chunk_.get(); }
  // 1-based number of the line last returned.
  std::uint64_t line_number() const { return line_number_; }
  // Bytes of the input consumed by the lines returned so far (the offset to resume from):
  // always the end of a line, never inside one, whatever the chunks hold.
  std::uint64_t offset() const { return start_offset_ + bytes_read_ - (end_ - begin_); }
  // While `growing` (a spool file another party appends to), a read of zero bytes means "not
  // yet" (WouldBlock), not the end of the input.
  void set_growing(bool growing) { growing_ = growing; }

private:
  int fd_;
  std::size_t chunk_bytes_;
  static std::shared_ptr<char[]> fresh_chunk(std::size_t bytes);
  std::shared_ptr<char[]> chunk_;
  std::size_t chunk_size_;
  std::size_t begin_ = 0; // first unconsumed byte
  std::size_t end_ = 0;   // one past the last byte read
  bool eof_ = false;
  bool growing_ = false;
  bool hold_unterminated_ = false;
  std::uint64_t line_number_ = 0;
  std::uint64_t start_offset_ = 0;
  std::uint64_t bytes_read_ = 0;
};

} // namespace streamctl::operators
