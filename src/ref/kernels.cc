#include "ref/kernels.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace mpk::ref {
namespace {

using Range = tbb::blocked_range<int64_t>;

// fp32 dot product over 16 independent lanes, so the compiler can vectorise it without
// reassociating (the order is fixed, so results do not depend on the thread count).
inline float dot(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

float sum_squares(const float* x, int64_t n) { return dot(x, x, n); }

// One row of RMSNorm in transformers' order: w * (x * rsqrt(mean(x^2) + eps)).
void rms_norm_row(const float* x, int64_t n, const float* w, float eps, float* out) {
  float variance = sum_squares(x, n) / float(n);
  float r = 1.0f / std::sqrt(variance + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * r);
}

// out[t, j] = x[t] . w[j] (+ b[j]) for a block of `nb` widened weight rows. Compiled for AVX2
// too and picked at run time: the lanes and the summation order are the same in both, so the
// results are identical (no FMA contraction: the ISO modes compile with -ffp-contract=off).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void linear_block(const float* x, int64_t rows, int64_t k, const float* w, int64_t nb,
                  const float* b, int64_t n_out, float* out) {
  for (int64_t t = 0; t < rows; ++t) {
    const float* xt = x + t * k;
    float* yt = out + t * n_out;
    for (int64_t j = 0; j < nb; ++j) {
      float acc = dot(xt, w + j * k, k);
      yt[j] = b ? acc + b[j] : acc;
    }
  }
}

}  // namespace

WeightView WeightView::of(const model::Tensor& t) {
  MPK_CHECK(t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16, Unsupported)
      << "weight '" << t.name << "' has dtype " << dtype_name(t.dtype)
      << "; the reference reads f32, f16 and bf16";
  WeightView v;
  v.data = t.data;
  v.dtype = t.dtype;
  v.rows = t.shape.size() >= 2 ? t.shape[0] : 1;
  v.cols = v.rows ? t.numel() / v.rows : 0;
  return v;
}

WeightView WeightView::of(const float* data, int64_t rows, int64_t cols) {
  return {reinterpret_cast<const std::byte*>(data), DType::F32, rows, cols};
}

void WeightView::load(int64_t offset, int64_t n, float* out) const {
  const std::byte* p = data + offset * int64_t(dtype_size(dtype));
  switch (dtype) {
    case DType::F32: std::memcpy(out, p, size_t(n) * 4); return;
    case DType::BF16: {
      // Chunks through an aligned buffer keep the widening loop vectorisable.
      constexpr int64_t kChunk = 256;
      uint16_t h[kChunk];
      for (int64_t i = 0; i < n; i += kChunk) {
        const int64_t m = std::min(kChunk, n - i);
        std::memcpy(h, p + 2 * i, size_t(m) * 2);
        for (int64_t j = 0; j < m; ++j) {
          uint32_t u = uint32_t(h[j]) << 16;
          std::memcpy(&out[i + j], &u, 4);
        }
      }
      return;
    }
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      return;
    case DType::I32: break;
  }
  MPK_THROW(Internal) << "WeightView::load of dtype " << dtype_name(dtype);
}

std::vector<float> WeightView::load_all() const {
  std::vector<float> v(size_t(rows * cols));
  load(0, rows * cols, v.data());
  return v;
}

void embedding(const int32_t* tokens, int64_t n, const WeightView& table, float* out) {
  const int64_t h = table.cols;
  tbb::parallel_for(Range(0, n), [&](const Range& r) {
    for (int64_t t = r.begin(); t < r.end(); ++t) table.load(tokens[t] * h, h, out + t * h);
  });
}

void rms_norm(const float* x, int64_t rows, int64_t dim, const WeightView& w, float eps,
              float* out) {
  MPK_ICHECK(w.rows * w.cols == dim) << "rms_norm weight size";
  const std::vector<float> wf = w.load_all();
  tbb::parallel_for(Range(0, rows), [&](const Range& r) {
    for (int64_t t = r.begin(); t < r.end(); ++t)
      rms_norm_row(x + t * dim, dim, wf.data(), eps, out + t * dim);
  });
}

void head_rms_norm(const float* x, int64_t rows, int heads, int head_dim, const WeightView& w,
                   float eps, float* out) {
  MPK_ICHECK(w.rows * w.cols == head_dim) << "head_rms_norm weight size";
  const std::vector<float> wf = w.load_all();
  const int64_t n = rows * heads;
  tbb::parallel_for(Range(0, n, 64), [&](const Range& r) {
    for (int64_t i = r.begin(); i < r.end(); ++i)
      rms_norm_row(x + i * head_dim, head_dim, wf.data(), eps, out + i * head_dim);
  });
}

void linear(const float* x, int64_t rows, const WeightView& w, const WeightView* bias,
            float* out) {
  // Tasks own blocks of output features: a block of W is widened once into a small buffer
  // and reused for every token row, so each weight is read once per call.
  constexpr int64_t kBlock = 16;
  const int64_t n_out = w.rows, k = w.cols;
  std::vector<float> b;
  if (bias) {
    MPK_ICHECK(bias->rows * bias->cols == n_out) << "linear bias size";
    b = bias->load_all();
  }
  const int64_t blocks = (n_out + kBlock - 1) / kBlock;
  tbb::parallel_for(Range(0, blocks), [&](const Range& r) {
    std::vector<float> wbuf(size_t(kBlock * k));
    for (int64_t blk = r.begin(); blk < r.end(); ++blk) {
      const int64_t n0 = blk * kBlock, nb = std::min(kBlock, n_out - n0);
      w.load(n0 * k, nb * k, wbuf.data());
      linear_block(x, rows, k, wbuf.data(), nb, bias ? b.data() + n0 : nullptr, n_out,
                   out + n0);
    }
  });
}

void rope(const float* x, const int32_t* positions, int64_t rows, int heads, int head_dim,
          const float* inv_freq, float* out) {
  const int half = head_dim / 2;
  const int64_t width = int64_t(heads) * head_dim;
  tbb::parallel_for(Range(0, rows), [&](const Range& r) {
    std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
    for (int64_t t = r.begin(); t < r.end(); ++t) {
      const float p = float(positions[t]);
      for (int i = 0; i < half; ++i) {
        float angle = p * inv_freq[i];
        cos_t[size_t(i)] = std::cos(angle);
        sin_t[size_t(i)] = std::sin(angle);
      }
      for (int h = 0; h < heads; ++h) {
        const float* xi = x + t * width + int64_t(h) * head_dim;
        float* yi = out + t * width + int64_t(h) * head_dim;
        for (int i = 0; i < half; ++i) {
          const float c = cos_t[size_t(i)], s = sin_t[size_t(i)];
          yi[i] = xi[i] * c + (-xi[i + half]) * s;
          yi[i + half] = xi[i + half] * c + xi[i] * s;
        }
      }
    }
  });
}

void attention(const float* q, const float* k, const float* v, const int32_t* positions,
               int64_t rows, int heads, float scale, const KvLayerView& cache, float* out) {
  const int kv_heads = cache.kv_heads, d = cache.head_dim;
  MPK_ICHECK(kv_heads > 0 && heads % kv_heads == 0) << "attention heads";
  const int group = heads / kv_heads;
  const int64_t kv_width = int64_t(kv_heads) * d, q_width = int64_t(heads) * d;
  auto slot = [&](float* base, int kvh, int64_t pos) {
    return base + (int64_t(kvh) * cache.capacity + pos) * d;
  };
  for (int64_t t = 0; t < rows; ++t) {
    MPK_ICHECK(positions[t] >= 0 && positions[t] < cache.capacity) << "attention position";
    for (int kvh = 0; kvh < kv_heads; ++kvh) {
      std::memcpy(slot(cache.k, kvh, positions[t]), k + t * kv_width + int64_t(kvh) * d,
                  size_t(d) * 4);
      std::memcpy(slot(cache.v, kvh, positions[t]), v + t * kv_width + int64_t(kvh) * d,
                  size_t(d) * 4);
    }
  }
  tbb::parallel_for(Range(0, rows * heads), [&](const Range& r) {
    std::vector<float> p;
    for (int64_t i = r.begin(); i < r.end(); ++i) {
      const int64_t t = i / heads;
      const int h = int(i % heads), kvh = h / group;
      const int64_t n = int64_t(positions[t]) + 1;
      const float* qh = q + t * q_width + int64_t(h) * d;
      p.resize(size_t(n));
      float m = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        p[size_t(j)] = dot(qh, slot(cache.k, kvh, j), d) * scale;
        m = std::max(m, p[size_t(j)]);
      }
      float sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += p[size_t(j)] = std::exp(p[size_t(j)] - m);
      float* oh = out + t * q_width + int64_t(h) * d;
      std::fill(oh, oh + d, 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float w = p[size_t(j)] / sum;
        const float* vj = slot(cache.v, kvh, j);
        for (int e = 0; e < d; ++e) oh[e] += w * vj[e];
      }
    }
  });
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  tbb::parallel_for(Range(0, n, 4096), [&](const Range& r) {
    for (int64_t i = r.begin(); i < r.end(); ++i)
      out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  });
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  // torch's tanh approximation: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
  // Chunks of 1,024: a tanh costs tens of adds, and the GPU's host fallback runs this on one
  // layer's row (3,072 elements on Qwen3-0.6B) between launches.
  tbb::parallel_for(Range(0, n, 1024), [&](const Range& r) {
    for (int64_t i = r.begin(); i < r.end(); ++i) {
      const float x = gate[i];
      out[i] = 0.5f * x * (1.0f + std::tanh(kBeta * (x + 0.044715f * x * x * x))) * up[i];
    }
  });
}

bool is_binary_elementwise(ir::OpKind kind) {
  return kind == ir::OpKind::SiluMul || kind == ir::OpKind::GeluTanhMul || kind == ir::OpKind::Add;
}

bool binary_elementwise(ir::OpKind kind, const float* a, const float* b, int64_t n, float* out) {
  switch (kind) {
    case ir::OpKind::SiluMul: silu_mul(a, b, n, out); return true;
    case ir::OpKind::GeluTanhMul: gelu_tanh_mul(a, b, n, out); return true;
    case ir::OpKind::Add: add(a, b, n, out); return true;
    default: return false;
  }
}

void add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return int32_t(i);
    if (x[i] > x[best]) best = i;
  }
  return int32_t(best);
}

}  // namespace mpk::ref
