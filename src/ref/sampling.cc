// Built with -ffp-contract=off (CMakeLists.txt): a fused multiply-add the compiler chose would
// change the rounding from one build to another; the fused ones are explicit (sampling_math.h,
// which the megakernel compiles too).
#include "ref/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/error.h"
#include "ref/sampling_math.h"

namespace mpk::ref {

void validate(const SamplingConfig& c) {
  MPK_CHECK(std::isfinite(c.temperature) && c.temperature >= 0, InvalidArgument)
      << "sampling temperature " << c.temperature << " is not a finite value >= 0";
  MPK_CHECK(c.top_k >= 0, InvalidArgument) << "sampling top_k " << c.top_k << " < 0";
  MPK_CHECK(c.top_p > 0 && c.top_p <= 1, InvalidArgument)
      << "sampling top_p " << c.top_p << " is outside (0, 1]";
}

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  mpk_philox4x32_10(c.data(), k[0], k[1]);
  return c;
}

float sampling_uniform(uint64_t seed, uint64_t position, uint32_t id) {
  return mpk_sampling_uniform(seed, position, id);
}

float det_exp(float x) { return mpk_det_exp(x); }
float det_log(float x) { return mpk_det_log(x); }

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
    const float v = mpk_gumbel_key(z[size_t(id)], c.seed, position, uint32_t(id));
    if (best < 0 || v > best_v || (v == best_v && id < best)) {
      best = id;
      best_v = v;
    }
  }
  return best;
}

}  // namespace mpk::ref
