#pragma once
// The `window = {...}` table and `allowed_lateness` of a window node, and the arithmetic of
// window intervals (SPEC §7): every window is [start, end) in epoch milliseconds, aligned to
// the epoch, so that tumbling and sliding windows start at multiples of their slide (negative
// times included: floor, not truncation).
//
//   tumbling  size > 0:              the one window [t - floor_mod(t, size), that + size)
//   sliding   size >= slide > 0:     every [s, s + size) with s a multiple of slide in
//                                    (t - size, t]: ceil(size / slide) windows at most
//   session   gap > 0:               [t, t + gap), merged per key with every session it
//                                    overlaps or touches (session_windows.hpp)
//
// Times are kept within ±2^62 ms (about ±146 million years) so that no sum of a time and a
// size, slide, gap or lateness can overflow; a record whose windows would leave that range is
// a bad record.

#include <cstdint>

#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::operators {

enum class WindowKind { Tumbling, Sliding, Session };

inline constexpr std::int64_t min_window_time = -(std::int64_t{1} << 62);
inline constexpr std::int64_t max_window_time = std::int64_t{1} << 62;

struct WindowSpec {
  WindowKind kind = WindowKind::Tumbling;
  std::int64_t size = 0;  // tumbling, sliding
  std::int64_t slide = 0; // sliding; equal to size for tumbling
  std::int64_t gap = 0;   // session
  std::int64_t allowed_lateness = 0;

  // Reads `window` and `allowed_lateness` of a node that validation has accepted (types are
  // right), and checks what the schema cannot: the durations a kind needs, and no key of
  // another kind. Throws Error(Usage) "FILE:LINE:COL: operator 'NAME': ...".
  static WindowSpec from_node(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node);

  bool aligned() const { return kind != WindowKind::Session; }

  // The start of the latest aligned window that contains `t`, or false when some window of
  // `t` would leave [min_window_time, max_window_time]. Aligned kinds only.
  bool last_aligned_start(std::int64_t t, std::int64_t& start) const;
  // Whether the session window [t, t + gap) stays within range.
  bool session_in_range(std::int64_t t) const {
    return t >= min_window_time && t <= max_window_time - gap;
  }
};

// t mod d in [0, d) for d > 0, for negative t too.
inline std::int64_t floor_mod(std::int64_t t, std::int64_t d) {
  std::int64_t m = t % d;
  return m < 0 ? m + d : m;
}

// a + b for b >= 0, INT64_MAX instead of overflowing.
inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

} // namespace streamctl::operators
