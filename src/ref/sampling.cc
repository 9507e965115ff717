// Built with -ffp-contract=off (CMakeLists.txt): a fused multiply-add the compiler chose would
// change the rounding from one build to another; the fused ones here are explicit (std::fma).
#include "ref/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/error.h"

namespace mpk::ref {

void validate(const SamplingConfig& c) {
  MPK_CHECK(std::isfinite(c.temperature) && c.temperature >= 0, InvalidArgument)
      << "sampling temperature " << c.temperature << " is not a finite value >= 0";
  MPK_CHECK(c.top_k >= 0, InvalidArgument) << "sampling top_k " << c.top_k << " < 0";
  MPK_CHECK(c.top_p > 0 && c.top_p <= 1, InvalidArgument)
      << "sampling top_p " << c.top_p << " is outside (0, 1]";
}

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t(kM0) * c[0], p1 = uint64_t(kM1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k = {k[0] + kW0, k[1] + kW1};
  }
  return c;
}

float sampling_uniform(uint64_t seed, uint64_t position, uint32_t id) {
  const auto b = philox4x32_10({id, uint32_t(position), uint32_t(position >> 32), 0u},
                               {uint32_t(seed), uint32_t(seed >> 32)});
  // 23 random bits and a half: never 0, never 1, exactly representable.
  return (float(b[0] >> 9) + 0.5f) * 0x1p-23f;
}

float det_exp(float x) {
  if (x < -104.0f) return 0.0f;
  if (x > 88.7f) return INFINITY;
  // e^x = 2^n e^r with r = x - n ln2 in [-ln2/2, ln2/2] (ln2 in two parts: the product n*hi is
  // exact), e^r by its Taylor polynomial to r^7 (relative error below 2e-8).
  const float n = std::nearbyint(x * 1.44269504f);
  const float r = std::fma(-n, 1.42860677e-6f, std::fma(-n, 0.693145752f, x));
  float p = 1.0f / 5040;
  for (const float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = std::fma(p, r, c);
  return std::ldexp(p, int(n));
}

float det_log(float x) {
  // x = m 2^e with m in [sqrt(2)/2, sqrt(2)); ln m = 2 atanh(s), s = (m - 1) / (m + 1), by its
  // series to s^9 (|s| < 0.172: relative error below 1e-8).
  int e = 0;
  float m = std::frexp(x, &e);
  if (m < 0.70710678f) {
    m *= 2;
    --e;
  }
  const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float p = 1.0f / 9;
  for (const float c : {1.0f / 7, 1.0f / 5, 1.0f / 3, 1.0f}) p = std::fma(p, s2, c);
  const float ln_m = 2.0f * s * p;
  return std::fma(float(e), 0.693145752f, std::fma(float(e), 1.42860677e-6f, ln_m));
}

int32_t sample_token(std::span<const float> logits, const SamplingConfig& c, uint64_t position) {
  validate(c);
  const size_t n = logits.size();
  MPK_CHECK(n > 0 && n <= size_t(INT32_MAX), InvalidArgument) << "sampling over " << n << " logits";
  auto before = [&](int32_t a, int32_t b) {  // a ranks before b: larger logit, then lower id
    return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
  };
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  if (is_greedy(c)) return *std::min_element(ids.begin(), ids.end(), before);
  // Dividing by the temperature keeps the order (and ties) of the logits.
  std::vector<float> z(n);
  for (size_t i = 0; i < n; ++i) z[i] = logits[i] / c.temperature;
  size_t keep = n;
  if (c.top_k > 0 && size_t(c.top_k) < n) {
    keep = size_t(c.top_k);
    std::nth_element(ids.begin(), ids.begin() + std::ptrdiff_t(keep) - 1, ids.end(), before);
    ids.resize(keep);
  }
  if (c.top_p < 1) {
    std::sort(ids.begin(), ids.end(), before);
    const float zmax = z[size_t(ids[0])];
    std::vector<float> w(ids.size());
    float total = 0;
    for (size_t j = 0; j < ids.size(); ++j) total += (w[j] = det_exp(z[size_t(ids[j])] - zmax));
    const float target = c.top_p * total;
    float run = 0;
    size_t cut = 0;
    while (cut < ids.size()) {
      run += w[cut++];
      if (run >= target) break;
    }
    ids.resize(cut);
  }
  int32_t best = -1;
  float best_v = 0;
  for (const int32_t id : ids) {
    const float u = sampling_uniform(c.seed, position, uint32_t(id));
    const float v = z[size_t(id)] - det_log(-det_log(u));
    if (best < 0 || v > best_v || (v == best_v && id < best)) {
      best = id;
      best_v = v;
    }
  }
  return best;
}

}  // namespace mpk::ref
