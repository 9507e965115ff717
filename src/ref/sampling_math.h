// The sampler's arithmetic (ref/sampling.h), written to compile unchanged as host C++
// (ref/sampling.cc, built without FP contraction) and as CUDA device code, so that a device
// draw can share this text. Only IEEE operations in a fixed order and explicit fused
// multiply-adds, no library exp/log: the same inputs give the same bits on the CPU and the GPU.
#ifndef MPK_REF_SAMPLING_MATH_H_
#define MPK_REF_SAMPLING_MATH_H_

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define MPK_SM_FN __device__ __forceinline__
#define MPK_SM_FMA fmaf
#define MPK_SM_FREXP frexpf
#define MPK_SM_LDEXP ldexpf
#define MPK_SM_RINT rintf
#define MPK_SM_INF __int_as_float(0x7f800000)
typedef unsigned int mpk_u32;
typedef unsigned long long mpk_u64;
#else
#include <cmath>
#include <cstdint>
#define MPK_SM_FN inline
#define MPK_SM_FMA std::fma
#define MPK_SM_FREXP std::frexp
#define MPK_SM_LDEXP std::ldexp
#define MPK_SM_RINT std::nearbyint
#define MPK_SM_INF INFINITY
typedef uint32_t mpk_u32;
typedef uint64_t mpk_u64;
#endif

// Philox4x32-10 (Salmon et al., 2011) on c[0..3] in place, under key (k0, k1).
MPK_SM_FN void mpk_philox4x32_10(mpk_u32* c, mpk_u32 k0, mpk_u32 k1) {
  for (int r = 0; r < 10; ++r) {
    const mpk_u64 p0 = (mpk_u64)0xD2511F53u * c[0], p1 = (mpk_u64)0xCD9E8D57u * c[2];
    const mpk_u32 n0 = (mpk_u32)(p1 >> 32) ^ c[1] ^ k0, n2 = (mpk_u32)(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = (mpk_u32)p1;
    c[2] = n2;
    c[3] = (mpk_u32)p0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

// u in [2^-24, 1 - 2^-24] for (seed, position, id): word 0 of the block of counter
// {id, position low, position high, 0} under key {seed low, seed high}; 23 random bits and a
// half (never 0 or 1, exactly representable).
MPK_SM_FN float mpk_sampling_uniform(mpk_u64 seed, mpk_u64 position, mpk_u32 id) {
  mpk_u32 c[4] = {id, (mpk_u32)position, (mpk_u32)(position >> 32), 0u};
  mpk_philox4x32_10(c, (mpk_u32)seed, (mpk_u32)(seed >> 32));
  return ((float)(c[0] >> 9) + 0.5f) * 1.1920928955078125e-7f;  // 2^-23
}

// e^x: 2^n e^r with r = x - n ln2 (ln2 in two parts, n * hi exact), e^r by its Taylor
// polynomial to r^7 (relative error below 2e-8 on [-ln2/2, ln2/2]).
MPK_SM_FN float mpk_det_exp(float x) {
  if (x < -104.0f) return 0.0f;
  if (x > 88.7f) return MPK_SM_INF;
  const float n = MPK_SM_RINT(x * 1.44269504f);
  const float r = MPK_SM_FMA(-n, 1.42860677e-6f, MPK_SM_FMA(-n, 0.693145752f, x));
  const float c[7] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
  float p = 1.0f / 5040;
  for (int i = 0; i < 7; ++i) p = MPK_SM_FMA(p, r, c[i]);
  return MPK_SM_LDEXP(p, (int)n);
}

// ln x for a positive normal x: x = m 2^e with m in [sqrt(2)/2, sqrt(2)), ln m = 2 atanh(s),
// s = (m - 1) / (m + 1), by its series to s^9 (|s| < 0.172: relative error below 1e-8).
MPK_SM_FN float mpk_det_log(float x) {
  int e = 0;
  float m = MPK_SM_FREXP(x, &e);
  if (m < 0.70710678f) {
    m *= 2.0f;
    --e;
  }
  const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  const float c[4] = {1.0f / 7, 1.0f / 5, 1.0f / 3, 1.0f};
  float p = 1.0f / 9;
  for (int i = 0; i < 4; ++i) p = MPK_SM_FMA(p, s2, c[i]);
  const float ln_m = (2.0f * s) * p;
  return MPK_SM_FMA((float)e, 0.693145752f, MPK_SM_FMA((float)e, 1.42860677e-6f, ln_m));
}

// The nucleus's weights as integers, so that their sums are exact in any order (a device sums
// them in parallel): w = e^(z - z_max) in [0, 1] truncated to a multiple of 2^-32, counted in
// units of 2^-32 (at most 2^32 each; under 2^53 in all for up to 2^21 ids). A NaN (logits so
// large over the temperature that z_max is infinite) counts as none, the same on every
// backend (converting it would be undefined).
MPK_SM_FN mpk_u64 mpk_nucleus_mass(float w) {
  return w >= 1.0f ? (mpk_u64)1 << 32 : w > 0.0f ? (mpk_u64)(w * 4294967296.0f) : 0;
}
// The prefix of running mass `run` reaches top_p of `total`: compared in IEEE double.
MPK_SM_FN double mpk_nucleus_target(float top_p, mpk_u64 total) { return (double)top_p * (double)total; }
MPK_SM_FN bool mpk_nucleus_reached(mpk_u64 run, double target) { return (double)run >= target; }

// The key whose argmax over a set draws from its softmax: z plus Gumbel noise -ln(-ln u).
MPK_SM_FN float mpk_gumbel_key(float z, mpk_u64 seed, mpk_u64 position, mpk_u32 id) {
  return z - mpk_det_log(-mpk_det_log(mpk_sampling_uniform(seed, position, id)));
}

#endif  // MPK_REF_SAMPLING_MATH_H_
