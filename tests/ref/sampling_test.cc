// The sampler: Philox's published test vectors, its own exp/log against the C library, and the
// distributions it draws (chi-square on a small vocabulary) for temperature, top-k and top-p.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <cmath>
#include <map>
#include <vector>

#include <fstream>
#include <sstream>

#include "base/error.h"
#include "cuda/nvrtc.h"
#include "ref/sampling.h"
#include "ref/sampling_math.h"

namespace mpk::ref {
namespace {

TEST(Sampling, PhiloxMatchesItsKnownAnswers) {
  // Random123's known-answer vectors for philox4x32-10.
  using B = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (B{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (B{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (B{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Sampling, OwnExpAndLogAreAccurate) {
  for (float x = -30.f; x <= 30.f; x += 0.0137f)
    EXPECT_NEAR(det_exp(x) / std::exp(x), 1.0, 2e-6) << x;
  EXPECT_EQ(det_exp(-200.f), 0.f);
  for (float x = 1e-7f; x < 100.f; x *= 1.013f) EXPECT_NEAR(det_log(x), std::log(x), 2e-6 * std::fabs(std::log(x)) + 1e-6) << x;
  for (uint32_t id = 0; id < 10000; ++id) {
    const float u = sampling_uniform(7, 3, id);
    ASSERT_GT(u, 0.f);
    ASSERT_LT(u, 1.f);
  }
}

// Draws at positions 0..n-1 with one seed; the counts per id.
std::map<int32_t, int> draw(const std::vector<float>& logits, SamplingConfig c, int n) {
  std::map<int32_t, int> counts;
  for (int p = 0; p < n; ++p) ++counts[sample_token(logits, c, uint64_t(p))];
  return counts;
}

// Chi-square of the counts against probabilities `prob` (ids with probability 0 must not
// appear); at 8 degrees of freedom or fewer, 26.1 is the 0.001 tail.
void expect_distribution(const std::map<int32_t, int>& counts, const std::vector<double>& prob, int n) {
  double chi2 = 0;
  for (size_t i = 0; i < prob.size(); ++i) {
    const int got = counts.count(int32_t(i)) ? counts.at(int32_t(i)) : 0;
    if (prob[i] == 0) {
      EXPECT_EQ(got, 0) << "id " << i << " is outside the set";
      continue;
    }
    const double want = prob[i] * n;
    chi2 += (got - want) * (got - want) / want;
  }
  EXPECT_LT(chi2, 26.1);
}

std::vector<double> softmax(const std::vector<float>& l, float t, const std::vector<bool>& keep) {
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = keep[i] ? std::exp(double(l[i]) / t) : 0;
  for (double& x : p) x /= s;
  return p;
}

const std::vector<float> kLogits = {1.0f, 2.5f, -0.5f, 0.3f, 2.0f, -2.0f, 1.7f, 0.0f, 3.0f};

TEST(Sampling, TemperatureDrawsTheSoftmax) {
  const int n = 30000;
  for (const float t : {0.5f, 1.0f, 2.0f}) {
    SCOPED_TRACE(t);
    SamplingConfig c{.temperature = t, .seed = 42};
    expect_distribution(draw(kLogits, c, n), softmax(kLogits, t, std::vector<bool>(kLogits.size(), true)), n);
  }
}

// A tiny positive temperature is greedy: logits / 1e-38 overflowed to infinity for every logit
// above about 3.4, all keys tied, and the lowest id won instead of the argmax.
TEST(Sampling, TinyTemperatureIsGreedy) {
  const std::vector<float> logits = {4, 5, -3};
  for (float t : {1e-38f, 1e-20f, 9.9e-6f}) {
    SamplingConfig c{.temperature = t, .top_k = 0, .top_p = 0.9f, .seed = 3};
    EXPECT_TRUE(is_greedy(c)) << t;
    for (uint64_t pos = 0; pos < 16; ++pos) EXPECT_EQ(sample_token(logits, c, pos), 1) << t;
  }
  EXPECT_FALSE(is_greedy({.temperature = 1e-5f}));
}

TEST(Sampling, TopKKeepsTheKLargest) {
  const int n = 30000;
  SamplingConfig c{.temperature = 1.0f, .top_k = 3, .seed = 5};
  std::vector<bool> keep(kLogits.size(), false);
  keep[8] = keep[1] = keep[4] = true;  // 3.0, 2.5, 2.0
  expect_distribution(draw(kLogits, c, n), softmax(kLogits, 1.0f, keep), n);
}

TEST(Sampling, TopPKeepsTheNucleus) {
  const int n = 30000;
  // Probabilities at t = 1, sorted: 3.0 -> .369, 2.5 -> .224, 2.0 -> .136, 1.7 -> .101, ...:
  // top_p 0.7 keeps the first four (0.593 < 0.7 <= 0.729 + ...); top_p 0.3 only the first.
  SamplingConfig c{.temperature = 1.0f, .top_p = 0.7f, .seed = 9};
  const auto p = softmax(kLogits, 1.0f, std::vector<bool>(kLogits.size(), true));
  std::vector<bool> keep(kLogits.size(), false);
  keep[8] = keep[1] = keep[4] = true;
  ASSERT_LT(p[8] + p[1], 0.7);
  ASSERT_GE(p[8] + p[1] + p[4], 0.7);
  expect_distribution(draw(kLogits, c, n), softmax(kLogits, 1.0f, keep), n);
  c.top_p = 0.3f;
  const auto only = draw(kLogits, c, 200);
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only.begin()->first, 8);
  // Top-k first, then top-p within it.
  c = {.temperature = 1.0f, .top_k = 2, .top_p = 0.99f, .seed = 3};
  keep.assign(kLogits.size(), false);
  keep[8] = keep[1] = true;
  expect_distribution(draw(kLogits, c, n), softmax(kLogits, 1.0f, keep), n);
}

// The nucleus's last key: the ids sample_token draws from end there.
TEST(Sampling, NucleusLastIsWhereTheDrawsStop) {
  SamplingConfig c{.temperature = 1.0f, .top_p = 0.7f, .seed = 9};
  EXPECT_EQ(nucleus_last(kLogits, c), 4);  // 8, 1, 4: as in TopPKeepsTheNucleus
  c.top_p = 0.3f;
  EXPECT_EQ(nucleus_last(kLogits, c), 8);
  // Equal logits rank by id: of two equal top logits (each just under half the mass), a top_p
  // of 0.49 keeps the lower id alone, 0.5 both.
  const std::vector<float> tied = {1.f, 5.f, 5.f, -2.f};
  c.top_p = 0.49f;
  EXPECT_EQ(nucleus_last(tied, c), 1);
  c.top_p = 0.5f;
  EXPECT_EQ(nucleus_last(tied, c), 2);
  // Draws stay at or above it in rank.
  std::vector<float> logits(3000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i) * 0.37)) * 4;
  c = {.temperature = 0.8f, .top_p = 0.6f, .seed = 4};
  const float last = logits[size_t(nucleus_last(logits, c))];
  for (uint64_t pos = 0; pos < 200; ++pos) EXPECT_GE(logits[size_t(sample_token(logits, c, pos))], last);
  // Under a top-k: the top_k-th key with top_p 1, the nucleus's last key inside the top-k
  // otherwise; neither a top-k nor a nucleus: refused.
  c = {.temperature = 1.0f, .top_k = 3, .top_p = 1.f, .seed = 9};
  EXPECT_EQ(nucleus_last(kLogits, c), 4);  // 8, 1, 4
  c.top_p = 0.3f;
  EXPECT_EQ(nucleus_last(kLogits, c), 8);
  c = {.temperature = 0.8f, .top_k = 700, .top_p = 1.f, .seed = 4};
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  EXPECT_EQ(logits[size_t(nucleus_last(logits, c))], sorted[699]);
  for (uint64_t pos = 0; pos < 200; ++pos) EXPECT_GE(logits[size_t(sample_token(logits, c, pos))], sorted[699]);
  c.top_k = 0;
  EXPECT_THROW(nucleus_last(logits, c), Error);
  c.top_k = int32_t(logits.size());
  EXPECT_THROW(nucleus_last(logits, c), Error);
}

TEST(Sampling, DeterministicPerSeedAndPosition) {
  std::vector<float> logits(5000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i) * 0.37)) * 4;
  SamplingConfig c{.temperature = 0.8f, .top_k = 50, .top_p = 0.9f, .seed = 1234};
  std::vector<int32_t> a, b, d;
  for (uint64_t p = 0; p < 64; ++p) {
    a.push_back(sample_token(logits, c, p));
    b.push_back(sample_token(logits, c, p));
  }
  c.seed = 1235;
  for (uint64_t p = 0; p < 64; ++p) d.push_back(sample_token(logits, c, p));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, d);
}

// The definition of ref/sampling.h written the plain way (a comparison sort, sequential loops),
// against which the sampler's faster one (a radix sort by key, a parallel argmax) must agree.
int32_t plain_sample(const std::vector<float>& logits, const SamplingConfig& c, uint64_t position) {
  auto before = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
  };
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::sort(ids.begin(), ids.end(), before);
  if (c.top_k > 0 && size_t(c.top_k) < ids.size()) ids.resize(size_t(c.top_k));
  auto z = [&](int32_t id) { return logits[size_t(id)] / c.temperature; };
  if (c.top_p < 1) {
    // Weights in units of 2^-32, truncated; the cut compared in double.
    std::vector<uint64_t> w;
    uint64_t total = 0;
    for (int32_t id : ids) total += w.emplace_back(uint64_t(std::ldexp(det_exp(z(id) - z(ids[0])), 32)));
    const double target = double(c.top_p) * double(total);
    uint64_t run = 0;
    size_t cut = 0;
    while (cut < ids.size()) {
      run += w[cut++];
      if (double(run) >= target) break;
    }
    ids.resize(cut);
  }
  int32_t best = -1;
  float best_v = 0;
  for (int32_t id : ids) {
    const float v = z(id) - det_log(-det_log(sampling_uniform(c.seed, position, uint32_t(id))));
    if (best < 0 || v > best_v || (v == best_v && id < best)) best = id, best_v = v;
  }
  return best;
}

// Ties, signed zeros, a vocabulary of Qwen's size: the same token as the plain definition.
TEST(Sampling, AgreesWithThePlainDefinition) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 2.f);
  for (const int n : {5, 1000, 151936}) {
    for (const int kind : {0, 1, 2}) {
      std::vector<float> l(static_cast<size_t>(n));
      for (float& v : l) {
        const float x = nd(rng);
        // kind 2: the largest logits are zeros of both signs, which rank as equals (by id).
        v = kind == 0 ? x : kind == 1 ? std::round(x) : (x > 0 ? (x > 1.f ? 0.f : -0.f) : x - 1.f);
      }
      for (const SamplingConfig& c : {SamplingConfig{.temperature = 1.f, .top_p = 0.9f, .seed = 3},
                                      SamplingConfig{.temperature = 0.5f, .top_k = 40, .top_p = 0.7f, .seed = 4},
                                      SamplingConfig{.temperature = 2.f, .seed = 5},
                                      SamplingConfig{.temperature = 0.8f, .top_k = 3, .seed = 6}})
        for (uint64_t pos : {0u, 17u, 4099u})
          EXPECT_EQ(sample_token(l, c, pos), plain_sample(l, c, pos))
              << "n " << n << " kind " << kind << " top_k " << c.top_k << " top_p " << c.top_p << " pos " << pos;
    }
  }
}

TEST(Sampling, GreedyIsTheArgmaxAndBadConfigsAreRefused) {
  const std::vector<float> tie = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(sample_token(tie, SamplingConfig{}, 0), 1);
  EXPECT_EQ(sample_token(tie, SamplingConfig{.temperature = 1.0f, .top_k = 1}, 0), 1);
  for (const SamplingConfig& bad :
       {SamplingConfig{.temperature = -1.0f}, SamplingConfig{.temperature = NAN},
        SamplingConfig{.temperature = INFINITY}, SamplingConfig{.top_k = -1},
        SamplingConfig{.top_p = 0.0f}, SamplingConfig{.top_p = 1.5f}, SamplingConfig{.top_p = NAN}}) {
    try {
      validate(bad);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    }
  }
  // Past 2^21 candidates the nucleus's integer sums could leave double's exact range: refused;
  // draws without the cut take them.
  const std::vector<float> huge(kMaxSampledLogits + 1, 0.5f);
  try {
    (void)sample_token(huge, SamplingConfig{.temperature = 1.0f, .top_p = 0.9f}, 0);
    ADD_FAILURE() << "accepted " << huge.size() << " logits";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  }
  EXPECT_GE(sample_token(huge, SamplingConfig{.temperature = 1.0f, .top_k = 5, .top_p = 0.9f}, 0), 0);
  EXPECT_GE(sample_token(huge, SamplingConfig{.temperature = 1.0f}, 0), 0);
  // The same limit, before any draw: given the vocabulary, a session refuses it when it is set.
  const size_t vocab = kMaxSampledLogits + 1;
  for (const SamplingConfig& bad : {SamplingConfig{.temperature = 1.0f, .top_p = 0.9f},
                                    SamplingConfig{.temperature = 1.0f, .top_k = int32_t(vocab), .top_p = 0.9f}}) {
    try {
      validate(bad, vocab);
      ADD_FAILURE() << "accepted top_k " << bad.top_k;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    }
  }
  EXPECT_NO_THROW(validate(SamplingConfig{.temperature = 1.0f, .top_p = 0.9f}, kMaxSampledLogits));
  for (const SamplingConfig& ok : {SamplingConfig{.temperature = 1.0f, .top_k = 1 << 21, .top_p = 0.9f},
                                   SamplingConfig{.temperature = 1.0f}, SamplingConfig{.top_p = 0.9f}})
    EXPECT_NO_THROW(validate(ok, vocab)) << "top_k " << ok.top_k << " top_p " << ok.top_p;
}

// The nucleus's weights are integers: the cut is the same whatever order they are added in, and
// a weight under 2^-32 of the largest counts as none.
TEST(Sampling, NucleusWeightsAreIntegerUnits) {
  EXPECT_EQ(mpk_nucleus_mass(1.0f), uint64_t(1) << 32);
  EXPECT_EQ(mpk_nucleus_mass(0.5f), uint64_t(1) << 31);
  EXPECT_EQ(mpk_nucleus_mass(std::ldexp(1.0f, -33)), 0u);
  EXPECT_EQ(mpk_nucleus_mass(std::nextafter(1.0f, 0.0f)), (uint64_t(1) << 32) - 256);
  EXPECT_EQ(mpk_nucleus_mass(NAN), 0u);
  EXPECT_EQ(mpk_nucleus_mass(INFINITY), uint64_t(1) << 32);
  EXPECT_TRUE(mpk_nucleus_reached(9, mpk_nucleus_target(0.9f, 10)));
  EXPECT_FALSE(mpk_nucleus_reached(8, mpk_nucleus_target(0.9f, 10)));
}

// The arithmetic's header compiles as device code too (NVRTC, no GPU needed), so a draw in a
// kernel can share it.
TEST(Sampling, ItsArithmeticCompilesForTheGpu) {
  std::ifstream in(std::string(MPK_SOURCE_DIR) + "/src/ref/sampling_math.h");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  cuda::CompileRequest r;
  r.source = text.str() +
             "extern \"C\" __global__ void draw(float* o, unsigned long long seed) {\n"
             "  o[threadIdx.x] = mpk_gumbel_key(o[threadIdx.x], seed, 7, threadIdx.x) + mpk_det_exp(o[0]);\n"
             "}\n";
  r.name = "sampling_math.cu";
  r.arch = "sm_90a";
  EXPECT_FALSE(cuda::compile(r).cubin.empty());
}

}  // namespace
}  // namespace mpk::ref
