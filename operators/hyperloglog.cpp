#include "operators/hyperloglog.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "state/le_bytes.hpp"

namespace streamctl::operators {

namespace {

constexpr int q = 64 - HyperLogLog::precision; // bits of a hash left for the rank

// σ(x) and τ(x) of Ertl's estimator: series summed until they stop changing in doubles.
double sigma(double x) {
  if (x == 1.0) return std::numeric_limits<double>::infinity();
  double y = 1.0;
  double z = x;
  for (;;) {
    x *= x;
    double previous = z;
    z += x * y;
    y += y;
    if (z == previous) return z;
  }
}

double tau(double x) {
  if (x == 0.0 || x == 1.0) return 0.0;
  double y = 1.0;
  double z = 1.0 - x;
  for (;;) {
    x = std::sqrt(x);
    double previous = z;
    y *= 0.5;
    z -= (1.0 - x) * (1.0 - x) * y;
    if (z == previous) return z / 3.0;
  }
}

void put_u32(std::string& out, std::uint32_t v) {
  state::append_le(out, v);
}

bool get_u32(std::string_view& in, std::uint32_t& v) {
  if (in.size() < 4) return false;
  v = 0;
  for (int k = 0; k < 4; ++k)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[k])) << (8 * k);
  in.remove_prefix(4);
  return true;
}

} // namespace

HyperLogLog::HyperLogLog(const HyperLogLog& other) : sparse_(other.sparse_) {
  if (other.dense_) {
    dense_ = std::make_unique<std::uint8_t[]>(registers);
    std::memcpy(dense_.get(), other.dense_.get(), registers);
  }
}

HyperLogLog& HyperLogLog::operator=(const HyperLogLog& other) {
  if (this != &other) {
    HyperLogLog copy(other);
    *this = std::move(copy);
  }
  return *this;
}

void HyperLogLog::add_hash(std::uint64_t hash) {
  auto index = static_cast<std::uint32_t>(hash >> q);
  std::uint64_t rest = hash << precision; // the low q bits, moved to the top
  auto rank = static_cast<std::uint8_t>(rest == 0 ? max_rank : std::countl_zero(rest) + 1);
  set_max(index, rank);
}

void HyperLogLog::set_max(std::uint32_t index, std::uint8_t rank) {
  if (dense_) {
    if (dense_[index] < rank) dense_[index] = rank;
    return;
  }
  auto it = std::lower_bound(sparse_.begin(), sparse_.end(), entry(index, 0));
  if (it != sparse_.end() && (*it >> 8) == index) {
    if ((*it & 0xff) < rank) *it = entry(index, rank);
    return;
  }
  if (sparse_.size() >= sparse_limit) {
    make_dense();
    dense_[index] = rank;
    return;
  }
  sparse_.insert(it, entry(index, rank));
}

void HyperLogLog::make_dense() {
  auto dense = std::make_unique<std::uint8_t[]>(registers); // zero-filled
  for (std::uint32_t e : sparse_)
    dense[e >> 8] = static_cast<std::uint8_t>(e & 0xff);
  dense_ = std::move(dense);
  std::vector<std::uint32_t>().swap(sparse_);
}

void HyperLogLog::merge(const HyperLogLog& other) {
  if (other.dense_) {
    if (!dense_) make_dense();
    for (std::uint32_t k = 0; k < registers; ++k)
      dense_[k] = std::max(dense_[k], other.dense_[k]);
    return;
  }
  for (std::uint32_t e : other.sparse_)
    set_max(e >> 8, static_cast<std::uint8_t>(e & 0xff));
}

std::uint8_t HyperLogLog::register_value(std::uint32_t index) const {
  if (dense_) return dense_[index];
  auto it = std::lower_bound(sparse_.begin(), sparse_.end(), entry(index, 0));
  return it != sparse_.end() && (*it >> 8) == index ? static_cast<std::uint8_t>(*it & 0xff) : 0;
}

double HyperLogLog::estimate() const {
  // Histogram of register values: c[k] registers hold rank k.
  std::array<double, max_rank + 1> c{};
  if (dense_) {
    for (std::uint32_t k = 0; k < registers; ++k)
      c[dense_[k]] += 1;
  } else {
    c[0] = static_cast<double>(registers - sparse_.size());
    for (std::uint32_t e : sparse_)
      c[e & 0xff] += 1;
  }
  const double m = registers;
  double z = m * tau(1.0 - c[q + 1] / m);
  for (int k = q; k >= 1; --k)
    z = 0.5 * (z + c[static_cast<std::size_t>(k)]);
  z += m * sigma(c[0] / m);
  const double alpha_inf = 0.5 / std::log(2.0);
  return alpha_inf * m * m / z; // an empty sketch: z = ∞, estimate 0
}

std::size_t HyperLogLog::memory_bytes() const {
  return sizeof(*this) + (dense_ ? registers : sparse_.capacity() * sizeof(std::uint32_t));
}

void HyperLogLog::serialize(std::string& out) const {
  out.push_back(static_cast<char>(precision));
  if (dense_) {
    out.push_back(1);
    out.append(reinterpret_cast<const char*>(dense_.get()), registers);
    return;
  }
  out.push_back(0);
  put_u32(out, static_cast<std::uint32_t>(sparse_.size()));
  for (std::uint32_t e : sparse_)
    put_u32(out, e);
}

Result<void> HyperLogLog::deserialize(std::string_view& in) {
  sparse_.clear();
  dense_.reset();
  if (in.size() < 2) return fail("HyperLogLog state truncated");
  if (static_cast<unsigned char>(in[0]) != precision)
    return fail("HyperLogLog state has precision " +
                std::to_string(static_cast<unsigned char>(in[0])) + ", expected " +
                std::to_string(precision));
  auto form = static_cast<unsigned char>(in[1]);
  in.remove_prefix(2);
  if (form == 1) {
    if (in.size() < registers) return fail("HyperLogLog state truncated");
    auto dense = std::make_unique<std::uint8_t[]>(registers);
    std::memcpy(dense.get(), in.data(), registers);
    for (std::uint32_t k = 0; k < registers; ++k)
      if (dense[k] > max_rank) return fail("HyperLogLog state corrupt: rank out of range");
    in.remove_prefix(registers);
    dense_ = std::move(dense);
    return {};
  }
  if (form != 0) return fail("HyperLogLog state corrupt: unknown form");
  std::uint32_t n = 0;
  if (!get_u32(in, n)) return fail("HyperLogLog state truncated");
  if (n > registers) return fail("HyperLogLog state corrupt: too many sparse entries");
  if (in.size() / 4 < n) return fail("HyperLogLog state truncated");
  std::vector<std::uint32_t> entries(n);
  for (std::uint32_t k = 0; k < n; ++k) {
    get_u32(in, entries[k]);
    std::uint32_t index = entries[k] >> 8;
    std::uint32_t rank = entries[k] & 0xff;
    if (index >= registers || rank == 0 || rank > max_rank ||
        (k > 0 && index <= (entries[k - 1] >> 8)))
      return fail("HyperLogLog state corrupt: bad sparse entry");
  }
  sparse_ = std::move(entries);
  if (sparse_.size() > sparse_limit) make_dense();
  return {};
}

} // namespace streamctl::operators
