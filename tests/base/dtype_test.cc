#include "base/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace mpk {
namespace {

TEST(DType, Bf16RoundTripsAndRoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), uint16_t(h)) << "h=" << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
}

TEST(DType, F16RoundingMatchesDouble) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-70000.f, 70000.f);
  for (int i = 0; i < 10000; ++i) {
    float f = d(rng) * std::ldexp(1.0f, -int(rng() % 30));
    float back = f16_to_f32(f32_to_f16(f));
    if (std::isinf(back)) continue;
    // The result is within half an f16 ulp of the input.
    int e;
    std::frexp(back == 0 ? f : back, &e);
    float ulp = std::ldexp(1.0f, std::max(e - 11, -24));
    EXPECT_LE(std::fabs(back - f), ulp / 2 + 1e-30f) << f;
  }
}

}  // namespace
}  // namespace mpk
