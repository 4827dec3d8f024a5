#pragma once
// splitmix64 (Steele, Lea and Flood): a fast, well-mixed bijection of 64-bit values, stable
// across builds and machines. The generator, the nexmark events and shed draw their
// pseudo-random numbers from it, so changing it changes every stream users have recorded.

#include <cstdint>

namespace streamctl::operators {

// The step of a splitmix64 stream: draw k of a stream seeded s is splitmix64(s + k * gamma).
inline constexpr std::uint64_t kSplitmixGamma = 0x9e3779b97f4a7c15ULL;

constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += kSplitmixGamma;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace streamctl::operators
