// RoPE inverse frequencies: default and llama3 scaling against the formulas in double.
#include "ir/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "base/error.h"

namespace mpk::ir {
namespace {

double default_inv_freq(int i, int d, double theta) { return std::pow(theta, -2.0 * i / d); }

// transformers' _compute_llama3_parameters, in double.
double llama3_inv_freq(int i, int d, double theta, const model::RopeScaling& s) {
  double f = default_inv_freq(i, d, theta);
  double wavelen = 2 * std::numbers::pi / f;
  double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  if (wavelen < high_wavelen) return f;
  if (wavelen > low_wavelen) return f / s.factor;
  double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                  (s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * f / s.factor + smooth * f;
}

TEST(RopeInvFreq, DefaultMatchesFormula) {
  for (auto [d, theta] : {std::pair{24, 1e6}, {128, 1e4}, {12, 5e5}, {2, 10.0}}) {
    std::vector<float> inv = rope_inv_freq(d, theta, std::nullopt);
    ASSERT_EQ(inv.size(), size_t(d / 2));
    EXPECT_EQ(inv[0], 1.0f);
    for (int i = 0; i < d / 2; ++i) {
      double want = default_inv_freq(i, d, theta);
      EXPECT_NEAR(inv[size_t(i)], want, 1e-6 * want) << "d " << d << " i " << i;
    }
  }
}

TEST(RopeInvFreq, Llama3CoversAllThreeRegimes) {
  // The llama fixture's parameters: wavelengths 6.3 (kept), 56 (interpolated), 498+ (scaled).
  const model::RopeScaling s{"llama3", 8.0, 1.0, 4.0, 128};
  const int d = 12;
  const double theta = 5e5;
  std::vector<float> plain = rope_inv_freq(d, theta, std::nullopt);
  std::vector<float> inv = rope_inv_freq(d, theta, s);
  ASSERT_EQ(inv.size(), 6u);
  EXPECT_EQ(inv[0], plain[0]);
  EXPECT_LT(inv[1], plain[1]);
  EXPECT_GT(inv[1], plain[1] / 8.0f);
  for (int i = 2; i < 6; ++i) EXPECT_EQ(inv[size_t(i)], plain[size_t(i)] / 8.0f) << i;
  for (int i = 0; i < 6; ++i) {
    double want = llama3_inv_freq(i, d, theta, s);
    EXPECT_NEAR(inv[size_t(i)], want, 1e-6 * want) << i;
  }
}

TEST(RopeInvFreq, Llama31Shape) {
  // Llama 3.1 8B: head_dim 128, theta 5e5, factor 8, original context 8192.
  const model::RopeScaling s{"llama3", 8.0, 1.0, 4.0, 8192};
  std::vector<float> inv = rope_inv_freq(128, 5e5, s);
  int kept = 0, scaled = 0, medium = 0;
  for (int i = 0; i < 64; ++i) {
    double want = llama3_inv_freq(i, 128, 5e5, s);
    EXPECT_NEAR(inv[size_t(i)], want, 2e-6 * want) << i;
    double plain = default_inv_freq(i, 128, 5e5);
    if (std::abs(want - plain) < 1e-12 * plain) ++kept;
    else if (std::abs(want - plain / 8) < 1e-12 * plain) ++scaled;
    else ++medium;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(scaled, 0);
  EXPECT_GT(medium, 0);
}

TEST(RopeInvFreq, Errors) {
  auto kind = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Internal;
  };
  EXPECT_EQ(kind([] { rope_inv_freq(7, 1e4, std::nullopt); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind([] { rope_inv_freq(8, 0.0, std::nullopt); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind([] { rope_inv_freq(8, 1e4, model::RopeScaling{"yarn"}); }),
            ErrorKind::Unsupported);
}

}  // namespace
}  // namespace mpk::ir
