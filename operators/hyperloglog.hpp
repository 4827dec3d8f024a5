#pragma once
// A HyperLogLog sketch of precision 14 (m = 16384 registers) for approx_count_distinct
// (SPEC §5): a standard error of 1.04 / sqrt(m) ≈ 0.81%, at most 16 KiB per sketch.
//
// Input is a 64-bit hash that the caller computes (XXH3-64 of a value's canonical bytes; see
// aggregate_functions.cpp), so that equal values from any process land in the same register.
// The top 14 bits of the hash pick the register; the register keeps the largest "rank" seen,
// the number of leading zeros of the remaining 50 bits plus one (51 when they are all zero).
//
// Representation: a sketch starts sparse, as a sorted list of (register, rank) pairs for the
// registers that are not zero, and turns dense (one byte per register) once the list would use
// more than half of the dense size. Both forms give the same estimate: the estimate depends only
// on the register values.
//
// Estimate: Otmar Ertl's "improved raw estimator" (New cardinality estimation algorithms for
// HyperLogLog sketches, 2017, as in Redis 5+). It needs no bias tables and no switch to linear
// counting: it is accurate from a handful of values to far beyond 2^32.
//
// Not thread-safe: a sketch belongs to the task thread that owns the state it lives in.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "state/error.hpp"

namespace streamctl::operators {

class HyperLogLog {
public:
  static constexpr int precision = 14;
  static constexpr std::uint32_t registers = 1u << precision; // m
  static constexpr int max_rank = 64 - precision + 1;         // 51
  // The sparse list turns dense when it holds more entries than this (4 bytes an entry:
  // 8 KiB of entries against 16 KiB of registers).
  static constexpr std::size_t sparse_limit = registers / 8;

  HyperLogLog() = default;
  HyperLogLog(const HyperLogLog& other);
  HyperLogLog& operator=(const HyperLogLog& other);
  HyperLogLog(HyperLogLog&&) noexcept = default;
  HyperLogLog& operator=(HyperLogLog&&) noexcept = default;

  // Adds one hashed value. Allocates only while the sparse list grows or when it turns dense.
  void add_hash(std::uint64_t hash);
  // Register-wise maximum: afterwards this sketch is the sketch of the union of both inputs.
  void merge(const HyperLogLog& other);
  // The estimated number of distinct hashes added (0 for an empty sketch).
  double estimate() const;

  bool empty() const { return !dense_ && sparse_.empty(); }
  bool is_sparse() const { return !dense_; }
  std::size_t memory_bytes() const;
  // The register values, for tests and merges (dense or not).
  std::uint8_t register_value(std::uint32_t index) const;

  // Binary form (little-endian):
  //   +0  u8   precision (14; other values are rejected)
  //   +1  u8   form: 0 = sparse, 1 = dense
  //   sparse:  u32 n (at most 16384), then n × u32 entries (register << 8 | rank), registers
  //            strictly ascending, 1 <= rank <= 51
  //   dense:   16384 × u8 rank (0 <= rank <= 51), register 0 first
  void serialize(std::string& out) const;
  // Replaces this sketch by the one read from the front of `in`, consuming its bytes. A failure
  // (truncated or corrupt bytes) leaves this sketch empty and `in` unspecified.
  Result<void> deserialize(std::string_view& in);

private:
  static std::uint32_t entry(std::uint32_t index, std::uint8_t rank) { return index << 8 | rank; }
  void set_max(std::uint32_t index, std::uint8_t rank);
  void make_dense();

  std::vector<std::uint32_t> sparse_;     // used while dense_ is null; sorted by register
  std::unique_ptr<std::uint8_t[]> dense_; // `registers` bytes, or null while sparse
};

} // namespace streamctl::operators
