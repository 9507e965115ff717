// Built with -ffp-contract=off (CMakeLists.txt): a fused multiply-add the compiler chose would
// change the rounding from one build to another; the fused ones are explicit (sampling_math.h,
// which the megakernel compiles too).
#include "ref/sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include "base/error.h"
#include "ref/sampling_math.h"

namespace mpk::ref {
namespace {

// Sorts `ids` by rank (larger logit first, then lower id; -0 ranks as +0), as a comparison
// sort with `before` would, by an LSD radix sort of 64-bit keys: the logit's bits made
// monotone, then the id's complement. A nucleus over the whole vocabulary sorts all of it for
// every token: with 151,936 logits and top-p 0.9 a draw took 25 ms with std::sort and the
// comparator, 10 ms with this and the parallel loops below (2 cores).
void sort_by_rank(std::vector<int32_t>& ids, std::span<const float> logits) {
  std::vector<uint64_t> keys(ids.size()), tmp(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const float v = logits[size_t(ids[i])];
    uint32_t u = std::bit_cast<uint32_t>(v == 0 ? 0.0f : v);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    // Ascending order of the complement is descending rank.
    keys[i] = ~((uint64_t(u) << 32) | uint64_t(0xffffffffu - uint32_t(ids[i])));
  }
  std::vector<size_t> count(size_t(1) << 16);
  for (int shift = 0; shift < 64; shift += 16) {
    std::fill(count.begin(), count.end(), 0);
    for (const uint64_t k : keys) ++count[size_t(k >> shift) & 0xffff];
    if (count[size_t(keys[0] >> shift) & 0xffff] == keys.size()) continue;  // one digit: nothing moves
    size_t sum = 0;
    for (size_t& c : count) sum += std::exchange(c, sum);
    for (const uint64_t k : keys) tmp[count[size_t(k >> shift) & 0xffff]++] = k;
    keys.swap(tmp);
  }
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(0xffffffffu - uint32_t(~keys[i]));
}

}  // namespace

void validate(const SamplingConfig& c) {
  MPK_CHECK(std::isfinite(c.temperature) && c.temperature >= 0, InvalidArgument)
      << "sampling temperature " << c.temperature << " is not a finite value >= 0";
  MPK_CHECK(c.top_k >= 0, InvalidArgument) << "sampling top_k " << c.top_k << " < 0";
  MPK_CHECK(c.top_p > 0 && c.top_p <= 1, InvalidArgument)
      << "sampling top_p " << c.top_p << " is outside (0, 1]";
}

void validate(const SamplingConfig& c, size_t vocab) {
  validate(c);
  const size_t candidates = c.top_k == 0 ? vocab : std::min(vocab, size_t(c.top_k));
  MPK_CHECK(is_greedy(c) || c.top_p == 1 || candidates <= kMaxSampledLogits, InvalidArgument)
      << "a nucleus over " << candidates << " candidates (at most " << kMaxSampledLogits
      << "): lower top_k or set top_p to 1";
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

namespace {
// The nucleus of `ids` (the candidates), in rank order: sorted, then cut after the shortest
// prefix whose integer masses reach top_p of their total.
void cut_nucleus(std::vector<int32_t>& ids, std::span<const float> logits, const std::vector<float>& z, float top_p) {
  // Up to 2^21 candidates, the nucleus's integer sums stay exact in double (sampling_math.h).
  MPK_CHECK(ids.size() <= kMaxSampledLogits, InvalidArgument)
      << "a nucleus over " << ids.size() << " candidates (at most " << kMaxSampledLogits << ")";
  sort_by_rank(ids, logits);
  const float zmax = z[size_t(ids[0])];
  std::vector<uint64_t> w(ids.size());
  tbb::parallel_for(tbb::blocked_range<size_t>(0, ids.size(), 4096), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t j = r.begin(); j < r.end(); ++j) w[j] = mpk_nucleus_mass(det_exp(z[size_t(ids[j])] - zmax));
  });
  const double target = mpk_nucleus_target(top_p, std::accumulate(w.begin(), w.end(), uint64_t(0)));
  uint64_t run = 0;
  size_t cut = 0;
  while (cut < ids.size()) {
    run += w[cut++];
    if (mpk_nucleus_reached(run, target)) break;
  }
  ids.resize(cut);
}

// Whether id a ranks before id b: the larger logit, then the lower id.
struct RanksBefore {
  std::span<const float> logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
  }
};

// The ids a draw under `c` (not greedy) chooses among: the top_k (the last of them at the back),
// cut to the nucleus (then in rank order); z: the logits over the temperature.
std::vector<int32_t> candidates(std::span<const float> logits, const SamplingConfig& c, const std::vector<float>& z) {
  const size_t n = logits.size();
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  if (c.top_k > 0 && size_t(c.top_k) < n) {
    const size_t keep = size_t(c.top_k);
    std::nth_element(ids.begin(), ids.begin() + std::ptrdiff_t(keep) - 1, ids.end(), RanksBefore{logits});
    ids.resize(keep);
  }
  if (c.top_p < 1) cut_nucleus(ids, logits, z, c.top_p);
  return ids;
}

// Dividing by the temperature keeps the order (and ties) of the logits.
std::vector<float> over_temperature(std::span<const float> logits, float temperature) {
  std::vector<float> z(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) z[i] = logits[i] / temperature;
  return z;
}
}  // namespace

int32_t nucleus_last(std::span<const float> logits, const SamplingConfig& c) {
  validate(c);
  const size_t n = logits.size();
  MPK_CHECK(!is_greedy(c) && n > 0 && n <= size_t(INT32_MAX) && (c.top_p < 1 || (c.top_k > 0 && size_t(c.top_k) < n)),
            InvalidArgument)
      << "the last candidate of a draw needs a temperature and a top_p < 1 or a top_k below the vocabulary";
  return candidates(logits, c, over_temperature(logits, c.temperature)).back();
}

int32_t sample_token(std::span<const float> logits, const SamplingConfig& c, uint64_t position) {
  validate(c);
  const size_t n = logits.size();
  MPK_CHECK(n > 0 && n <= size_t(INT32_MAX), InvalidArgument) << "sampling over " << n << " logits";
  if (is_greedy(c)) {
    std::vector<int32_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    return *std::min_element(ids.begin(), ids.end(), RanksBefore{logits});
  }
  const std::vector<float> z = over_temperature(logits, c.temperature);
  const std::vector<int32_t> ids = candidates(logits, c, z);
  // The largest key (ties: the lower id) over what is left, in parallel: that maximum is the
  // same in any order of comparisons (the keys are never NaN).
  struct Best {
    int32_t id = -1;
    float v = 0;
  };
  auto better = [](Best a, Best b) {
    if (a.id < 0) return b;
    if (b.id < 0) return a;
    return b.v > a.v || (b.v == a.v && b.id < a.id) ? b : a;
  };
  return tbb::parallel_reduce(
             tbb::blocked_range<size_t>(0, ids.size(), 4096), Best{},
             [&](const tbb::blocked_range<size_t>& r, Best acc) {
               for (size_t j = r.begin(); j < r.end(); ++j) {
                 const int32_t id = ids[j];
                 acc = better(acc, {id, mpk_gumbel_key(z[size_t(id)], c.seed, position, uint32_t(id))});
               }
               return acc;
             },
             better)
      .id;
}

}  // namespace mpk::ref
