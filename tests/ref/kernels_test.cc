// Each reference kernel against a naive double-precision implementation of its formula, on
// random non-zero inputs in every weight dtype, with outputs poisoned (NaN) before the run.
#include "ref/kernels.h"

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <limits>

#include "ir/rope.h"
#include "test_util.h"

namespace mpk {
void PrintTo(DType d, std::ostream* os) { *os << dtype_name(d); }
}  // namespace mpk

namespace mpk::ref {
namespace {

using testing::encode;
using testing::Encoded;
using testing::random_nonzero;
using testing::rel_l2;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// fp32 accumulation over at most a few hundred terms stays well inside this.
constexpr double kTol = 2e-6;

class Kernels : public ::testing::TestWithParam<DType> {
 protected:
  std::mt19937 rng{1234};

  // A weight of `dtype` with random values: the view and the exact values it holds.
  struct W {
    Encoded enc;
    WeightView view;
  };
  W weight(int64_t rows, int64_t cols, float lo = 0.05f, float hi = 1.5f) {
    W w{encode(random_nonzero(size_t(rows * cols), rng, lo, hi), GetParam()), {}};
    w.view = {reinterpret_cast<const std::byte*>(w.enc.bytes.data()), GetParam(), rows, cols};
    return w;
  }
  std::vector<float> poisoned(size_t n) { return std::vector<float>(n, kNaN); }
};

double naive_dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

std::vector<double> naive_rms_norm(const std::vector<float>& x, int64_t dim,
                                   const std::vector<float>& w, double eps) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / size_t(dim); ++r) {
    const float* xr = &x[r * size_t(dim)];
    double ms = naive_dot(xr, xr, dim) / double(dim);
    for (int64_t i = 0; i < dim; ++i)
      out[r * size_t(dim) + size_t(i)] = double(w[size_t(i)]) * xr[i] / std::sqrt(ms + eps);
  }
  return out;
}

TEST_P(Kernels, WeightViewWidensExactly) {
  W w = weight(3, 7);
  std::vector<float> got = w.view.load_all();
  EXPECT_EQ(got, w.enc.values);
  std::vector<float> part(4, kNaN);
  w.view.load(9, 4, part.data());
  EXPECT_EQ(part, std::vector<float>(w.enc.values.begin() + 9, w.enc.values.begin() + 13));
}

TEST_P(Kernels, Embedding) {
  W table = weight(11, 13);
  std::vector<int32_t> tokens = {10, 0, 3, 3, 7};
  std::vector<float> out = poisoned(tokens.size() * 13);
  embedding(tokens.data(), int64_t(tokens.size()), table.view, out.data());
  for (size_t t = 0; t < tokens.size(); ++t)
    for (size_t i = 0; i < 13; ++i)
      ASSERT_EQ(out[t * 13 + i], table.enc.values[size_t(tokens[t]) * 13 + i]);
}

TEST_P(Kernels, RmsNorm) {
  for (int64_t dim : {1, 17, 64, 301}) {
    const int64_t rows = 3;
    W w = weight(1, dim, 0.8f, 1.2f);
    std::vector<float> x = random_nonzero(size_t(rows * dim), rng, 0.01f, 4.0f);
    std::vector<float> out = poisoned(x.size());
    rms_norm(x.data(), rows, dim, w.view, 1e-6f, out.data());
    EXPECT_LE(rel_l2(out, naive_rms_norm(x, dim, w.enc.values, double(1e-6f))), kTol)
        << "dim " << dim;
  }
}

TEST_P(Kernels, RmsNormEpsMatters) {
  // Tiny inputs: eps dominates the mean square, so a missing or misplaced eps shows.
  W w = weight(1, 8, 0.8f, 1.2f);
  std::vector<float> x = random_nonzero(8, rng, 1e-4f, 2e-4f);
  std::vector<float> out = poisoned(8);
  rms_norm(x.data(), 1, 8, w.view, 1e-5f, out.data());
  EXPECT_LE(rel_l2(out, naive_rms_norm(x, 8, w.enc.values, double(1e-5f))), kTol);
}

TEST_P(Kernels, HeadRmsNorm) {
  const int rows = 4, heads = 3, hd = 24;
  W w = weight(1, hd, 0.8f, 1.2f);
  std::vector<float> x = random_nonzero(size_t(rows * heads * hd), rng, 0.01f, 4.0f);
  std::vector<float> out = poisoned(x.size());
  head_rms_norm(x.data(), rows, heads, hd, w.view, 1e-6f, out.data());
  // Each head slice is its own row.
  EXPECT_LE(rel_l2(out, naive_rms_norm(x, hd, w.enc.values, double(1e-6f))), kTol);
}

TEST_P(Kernels, Linear) {
  for (auto [rows, k, n] : {std::tuple{1, 37, 45}, {5, 64, 16}, {3, 130, 33}, {2, 8, 1}}) {
    for (bool with_bias : {false, true}) {
      W w = weight(n, k);
      W b = weight(1, n);
      std::vector<float> x = random_nonzero(size_t(rows * k), rng);
      std::vector<float> out = poisoned(size_t(rows * n));
      linear(x.data(), rows, w.view, with_bias ? &b.view : nullptr, out.data());
      std::vector<double> want(out.size());
      for (int t = 0; t < rows; ++t)
        for (int j = 0; j < n; ++j)
          want[size_t(t * n + j)] =
              naive_dot(&x[size_t(t * k)], &w.enc.values[size_t(j * k)], k) +
              (with_bias ? double(b.enc.values[size_t(j)]) : 0.0);
      EXPECT_LE(rel_l2(out, want), kTol) << rows << "x" << k << " -> " << n << " bias "
                                         << with_bias;
    }
  }
}

TEST_P(Kernels, LinearIsIndependentOfThreadCount) {
  W w = weight(77, 50);
  std::vector<float> x = random_nonzero(4 * 50, rng);
  std::vector<float> one = poisoned(4 * 77), all = poisoned(4 * 77);
  tbb::task_arena(1).execute([&] { linear(x.data(), 4, w.view, nullptr, one.data()); });
  linear(x.data(), 4, w.view, nullptr, all.data());
  EXPECT_EQ(one, all);
}

INSTANTIATE_TEST_SUITE_P(AllWeightDTypes, Kernels,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(KernelsF32, Rope) {
  std::mt19937 rng(7);
  const int rows = 5, heads = 3, hd = 12;
  std::vector<float> inv = ir::rope_inv_freq(hd, 10000.0, std::nullopt);
  std::vector<int32_t> pos = {0, 1, 17, 250, 4095};
  std::vector<float> x = random_nonzero(size_t(rows * heads * hd), rng);
  std::vector<float> out(x.size(), kNaN);
  rope(x.data(), pos.data(), rows, heads, hd, inv.data(), out.data());
  std::vector<double> want(x.size());
  for (int t = 0; t < rows; ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hd / 2; ++i) {
        // The contract rounds the angle to fp32; cos and sin are then exact here.
        double angle = float(float(pos[size_t(t)]) * inv[size_t(i)]);
        size_t base = size_t((t * heads + h) * hd);
        double a = x[base + size_t(i)], b = x[base + size_t(i + hd / 2)];
        want[base + size_t(i)] = a * std::cos(angle) - b * std::sin(angle);
        want[base + size_t(i + hd / 2)] = b * std::cos(angle) + a * std::sin(angle);
      }
  EXPECT_LE(rel_l2(out, want), kTol);
  // Position 0 is the identity.
  for (int i = 0; i < heads * hd; ++i) EXPECT_EQ(out[size_t(i)], x[size_t(i)]);
}

// Naive causal GQA attention of one query row over keys/values [0, n).
std::vector<double> naive_attention(const float* q, const std::vector<float>& keys,
                                    const std::vector<float>& values, int64_t n, int heads,
                                    int kv_heads, int hd, double scale) {
  std::vector<double> out(size_t(heads * hd), 0.0);
  for (int h = 0; h < heads; ++h) {
    int kvh = h / (heads / kv_heads);
    std::vector<double> s(static_cast<size_t>(n));
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      s[size_t(j)] = naive_dot(q + h * hd, &keys[size_t((j * kv_heads + kvh) * hd)], hd) * scale;
      m = std::max(m, s[size_t(j)]);
    }
    for (double& v : s) sum += v = std::exp(v - m);
    for (int64_t j = 0; j < n; ++j)
      for (int e = 0; e < hd; ++e)
        out[size_t(h * hd + e)] +=
            s[size_t(j)] / sum * values[size_t((j * kv_heads + kvh) * hd + e)];
  }
  return out;
}

TEST(KernelsF32, AttentionPrefillThenDecode) {
  std::mt19937 rng(11);
  const int heads = 6, kv_heads = 2, hd = 16, cap = 32, prefill = 9;
  const float scale = float(1.0 / std::sqrt(double(hd)));
  std::vector<float> kc(size_t(kv_heads * cap * hd), kNaN), vc(kc.size(), kNaN);
  KvLayerView cache{kc.data(), vc.data(), cap, kv_heads, hd};
  const int total = prefill + 1;
  std::vector<float> q = random_nonzero(size_t(total * heads * hd), rng, 0.05f, 3.0f);
  std::vector<float> k = random_nonzero(size_t(total * kv_heads * hd), rng, 0.05f, 3.0f);
  std::vector<float> v = random_nonzero(k.size(), rng);
  std::vector<int32_t> pos(total);
  for (int i = 0; i < total; ++i) pos[size_t(i)] = i;
  std::vector<float> out(size_t(total * heads * hd), kNaN);
  // Rows [0, prefill) in one call, then the last row alone reading the cached ones.
  attention(q.data(), k.data(), v.data(), pos.data(), prefill, heads, scale, cache, out.data());
  const size_t qw = size_t(heads * hd), kw = size_t(kv_heads * hd);
  attention(&q[prefill * qw], &k[prefill * kw], &v[prefill * kw], &pos[prefill], 1, heads, scale,
            cache, &out[prefill * qw]);
  for (int t = 0; t < total; ++t) {
    std::vector<double> want =
        naive_attention(&q[size_t(t) * qw], k, v, t + 1, heads, kv_heads, hd, double(scale));
    std::vector<float> got(out.begin() + long(size_t(t) * qw), out.begin() + long((t + 1) * qw));
    EXPECT_LE(rel_l2(got, want), kTol) << "row " << t;
  }
  // The cache holds k and v at their positions, head-major.
  for (int t = 0; t < total; ++t)
    for (int kvh = 0; kvh < kv_heads; ++kvh)
      for (int e = 0; e < hd; ++e) {
        ASSERT_EQ(kc[size_t((kvh * cap + t) * hd + e)], k[size_t(t) * kw + size_t(kvh * hd + e)]);
        ASSERT_EQ(vc[size_t((kvh * cap + t) * hd + e)], v[size_t(t) * kw + size_t(kvh * hd + e)]);
      }
}

TEST(KernelsF32, AttentionLargeScoresStayFinite) {
  // Scores that overflow exp() without the max subtraction. fp32 scores of ~1e2 carry ~1e-5
  // absolute error, hence the looser tolerance.
  std::mt19937 rng(5);
  const int hd = 8, n = 4;
  std::vector<float> kc(size_t(n * hd)), vc(kc.size());
  KvLayerView cache{kc.data(), vc.data(), n, 1, hd};
  std::vector<float> q = random_nonzero(size_t(n * hd), rng, 3.0f, 5.0f);
  std::vector<float> k = random_nonzero(q.size(), rng, 3.0f, 5.0f);
  for (float& x : q) x = std::fabs(x);  // q.k in [72, 200]: exp overflows fp32 beyond 88
  for (float& x : k) x = std::fabs(x);
  std::vector<float> v = random_nonzero(q.size(), rng);
  std::vector<int32_t> pos = {0, 1, 2, 3};
  std::vector<float> out(q.size(), kNaN);
  attention(q.data(), k.data(), v.data(), pos.data(), n, 1, 1.0f, cache, out.data());
  std::vector<float> last(out.end() - hd, out.end());
  EXPECT_LE(rel_l2(last, naive_attention(&q[size_t(3 * hd)], k, v, n, 1, 1, hd, 1.0)), 1e-4);
}

TEST(KernelsF32, SiluMulAndAdd) {
  std::mt19937 rng(3);
  const size_t n = 1000;
  std::vector<float> g = random_nonzero(n, rng, 0.01f, 8.0f), u = random_nonzero(n, rng);
  std::vector<float> out(n, kNaN), sum(n, kNaN);
  silu_mul(g.data(), u.data(), int64_t(n), out.data());
  add(g.data(), u.data(), int64_t(n), sum.data());
  std::vector<double> want(n), want_sum(n);
  for (size_t i = 0; i < n; ++i) {
    want[i] = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i];
    want_sum[i] = double(g[i]) + double(u[i]);
  }
  EXPECT_LE(rel_l2(out, want), kTol);
  EXPECT_LE(rel_l2(sum, want_sum), 1e-7);
}

// transformers' gelu_pytorch_tanh gating against the formula in double, and torch's values
// of F.gelu(x, approximate="tanh") at 1 and -1.
TEST(KernelsF32, GeluTanhMul) {
  const size_t n = 5000;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-6.0f, 6.0f);
  std::vector<float> g(n), u(n), out(n, kNaN);
  for (size_t i = 0; i < n; ++i) g[i] = d(rng), u[i] = d(rng);
  gelu_tanh_mul(g.data(), u.data(), int64_t(n), out.data());
  std::vector<double> want(n);
  for (size_t i = 0; i < n; ++i) {
    const double x = g[i];
    want[i] = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
  }
  EXPECT_LE(rel_l2(out, want), 1e-6);
  const float x[2] = {1.0f, -1.0f}, one[2] = {1.0f, 1.0f};
  float y[2];
  gelu_tanh_mul(x, one, 2, y);
  EXPECT_NEAR(y[0], 0.841192f, 1e-6f);
  EXPECT_NEAR(y[1], -0.158808f, 1e-6f);
}

TEST(KernelsF32, Argmax) {
  std::vector<float> x = {-3.0f, -1.0f, -2.0f, -1.0f};
  EXPECT_EQ(argmax(x.data(), 4), 1);  // first of equal maxima
  x = {1.0f, kNaN, 5.0f, kNaN};
  EXPECT_EQ(argmax(x.data(), 4), 1);  // NaN wins, like torch.argmax
  x = {2.0f, 7.0f, -INFINITY, 6.9f};
  EXPECT_EQ(argmax(x.data(), 4), 1);
  x = {-INFINITY};
  EXPECT_EQ(argmax(x.data(), 1), 0);
}

}  // namespace
}  // namespace mpk::ref
