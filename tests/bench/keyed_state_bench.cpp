// Keyed state on one core: a count per key (KeyedMap<std::int64_t>) over keys like "u123456",
// at 100k and 1M distinct keys, uniformly random. Prints updates/s
//   full:     encode_key of the one-string key + hash_key_bytes + get_or_insert, +1
//   full with prefetch: the same per batch of 1024 keys: all encoded and hashed first, then
//             updated while prefetching (KeyedMap::prefetch) the slot of the key 8 ahead
//   map only: get_or_insert on keys encoded and hashed beforehand
//   std::unordered_map<std::string, int64_t> on the raw key, for comparison
// and the bytes per key (memory_bytes() / size()); then timers: register and fire 1M
// event-time timers. Best of five slices of each measurement. Not a pass/fail test.
//
//   keyed_state_bench [seconds_per_measurement=1]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "state/key_codec.hpp"
#include "state/key_group.hpp"
#include "state/keyed_map.hpp"
#include "state/timer_service.hpp"

using namespace streamctl::state;

namespace {

using Clock = std::chrono::steady_clock;

volatile std::int64_t sink = 0;

constexpr std::uint32_t max_parallelism = 128;
constexpr std::size_t key_width = 7; // "u" and six digits
constexpr std::size_t stream_length = 1 << 22;

// Runs `round` (which does `per_round` updates) for `seconds` in five slices; returns the best
// slice's updates per second (other processes on a shared machine only slow slices down).
template <typename F> double measure(double seconds, std::size_t per_round, F round) {
  double best = 0;
  for (int slice = 0; slice < 5; ++slice) {
    std::size_t done = 0;
    auto start = Clock::now();
    auto deadline = start + std::chrono::duration<double>(seconds / 5);
    do {
      round();
      done += per_round;
    } while (Clock::now() < deadline);
    double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (static_cast<double>(done) / s > best) best = static_cast<double>(done) / s;
  }
  return best;
}

// The keys of a stream of updates, 7 bytes each, one after another as they would sit in
// decoded records.
std::string make_stream(std::size_t distinct, std::mt19937_64& rng) {
  std::string stream(stream_length * key_width, '\0');
  char buf[16];
  for (std::size_t k = 0; k < stream_length; ++k) {
    std::snprintf(buf, sizeof buf, "u%06u", static_cast<unsigned>(rng() % distinct));
    stream.replace(k * key_width, key_width, buf, key_width);
  }
  return stream;
}

void run_counts(std::size_t distinct, double seconds) {
  std::mt19937_64 rng(42);
  std::string stream = make_stream(distinct, rng);
  FieldNames names;
  const KeyGroupRange all = key_group_range(0, 1, max_parallelism);

  // Every key once first, so that the measurement is of updates at `distinct` keys.
  KeyedMap<std::int64_t> counts(all, max_parallelism);
  std::string key;
  char buf[16];
  for (std::size_t k = 0; k < distinct; ++k) {
    std::snprintf(buf, sizeof buf, "u%06u", static_cast<unsigned>(k));
    Value v = Value::string(std::string_view(buf, key_width));
    encode_key(std::span<const Value>(&v, 1), names, key);
    counts.get_or_insert(key, hash_key_bytes(key)) = 0;
  }

  double full = measure(seconds, stream_length, [&] {
    for (std::size_t k = 0; k < stream_length; ++k) {
      Value v = Value::string(std::string_view(stream.data() + k * key_width, key_width));
      encode_key(std::span<const Value>(&v, 1), names, key);
      counts.get_or_insert(key, hash_key_bytes(key)) += 1;
    }
  });

  // As an operator can run over a batch of 1024 records: first encode and hash every key of
  // the batch, then update, prefetching the slot of the key `distance` records ahead.
  constexpr std::size_t batch = 1024, distance = 8;
  std::string batch_bytes;
  std::vector<std::uint32_t> batch_offsets(batch + 1);
  std::vector<std::uint64_t> batch_hashes(batch);
  double batched = measure(seconds, stream_length, [&] {
    for (std::size_t base = 0; base < stream_length; base += batch) {
      batch_bytes.clear();
      for (std::size_t j = 0; j < batch; ++j) {
        Value v =
            Value::string(std::string_view(stream.data() + (base + j) * key_width, key_width));
        encode_key(std::span<const Value>(&v, 1), names, key);
        batch_offsets[j] = static_cast<std::uint32_t>(batch_bytes.size());
        batch_bytes += key;
        batch_hashes[j] = hash_key_bytes(key);
      }
      batch_offsets[batch] = static_cast<std::uint32_t>(batch_bytes.size());
      for (std::size_t j = 0; j < batch; ++j) {
        if (j + distance < batch) counts.prefetch(batch_hashes[j + distance]);
        std::string_view k(batch_bytes.data() + batch_offsets[j],
                           batch_offsets[j + 1] - batch_offsets[j]);
        counts.get_or_insert(k, batch_hashes[j]) += 1;
      }
    }
  });

  // Encoded and hashed beforehand: the map alone.
  std::vector<std::pair<std::string, std::uint64_t>> encoded(stream_length);
  for (std::size_t k = 0; k < stream_length; ++k) {
    Value v = Value::string(std::string_view(stream.data() + k * key_width, key_width));
    encode_key(std::span<const Value>(&v, 1), names, encoded[k].first);
    encoded[k].second = hash_key_bytes(encoded[k].first);
  }
  double map_only = measure(seconds, stream_length, [&] {
    for (const auto& [bytes, hash] : encoded)
      counts.get_or_insert(bytes, hash) += 1;
  });

  std::unordered_map<std::string, std::int64_t> reference;
  std::string raw;
  double unordered = measure(seconds, stream_length, [&] {
    for (std::size_t k = 0; k < stream_length; ++k) {
      raw.assign(stream.data() + k * key_width, key_width);
      reference[raw] += 1;
    }
  });

  std::int64_t total = 0;
  counts.for_each([&](std::string_view, std::int64_t c) { total += c; });
  sink = total;
  std::printf("%7zu keys: full %6.2f M updates/s, full with prefetch %6.2f M/s, "
              "map only %6.2f M/s, std::unordered_map %5.2f M/s; %.1f bytes/key "
              "(%zu keys, %.1f MB)\n",
              distinct, full / 1e6, batched / 1e6, map_only / 1e6, unordered / 1e6,
              static_cast<double>(counts.memory_bytes()) / static_cast<double>(counts.size()),
              counts.size(), static_cast<double>(counts.memory_bytes()) / 1e6);
}

void run_timers(std::size_t n) {
  std::mt19937_64 rng(7);
  FieldNames names;
  TimerService timers(key_group_range(0, 1, max_parallelism), max_parallelism);
  std::vector<std::pair<std::string, std::uint64_t>> keys(n);
  char buf[16];
  for (std::size_t k = 0; k < n; ++k) {
    std::snprintf(buf, sizeof buf, "u%06u", static_cast<unsigned>(k));
    Value v = Value::string(std::string_view(buf, key_width));
    encode_key(std::span<const Value>(&v, 1), names, keys[k].first);
    keys[k].second = hash_key_bytes(keys[k].first);
  }
  std::vector<std::int64_t> when(n);
  for (auto& t : when)
    t = static_cast<std::int64_t>(rng() % 3600000);

  auto start = Clock::now();
  for (std::size_t k = 0; k < n; ++k)
    timers.register_event_time(keys[k].first, keys[k].second, when[k], when[k] / 60000);
  double registered = std::chrono::duration<double>(Clock::now() - start).count();
  std::size_t bytes = timers.memory_bytes();

  start = Clock::now();
  std::size_t fired = 0;
  for (std::int64_t w = 0; w <= 3600000; w += 1000)
    timers.advance_watermark(
        w, [&](std::string_view, std::uint64_t, std::int64_t, std::int64_t) { ++fired; });
  double firing = std::chrono::duration<double>(Clock::now() - start).count();
  sink = static_cast<std::int64_t>(fired);
  std::printf("timers: %zu registered at %.2f M/s, fired at %.2f M/s; %.1f bytes/timer\n", n,
              static_cast<double>(n) / registered / 1e6, static_cast<double>(fired) / firing / 1e6,
              static_cast<double>(bytes) / static_cast<double>(n));
}

} // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  std::printf("count per key, keys \"u123456\", uniform, max_parallelism %u, one subtask\n",
              max_parallelism);
  run_counts(100000, seconds);
  run_counts(1000000, seconds);
  run_timers(1000000);
  return 0;
}
