// The reference's per-op kernels: fp32 arithmetic as the IR's numeric contract says
// (ir/graph.h), parallel with oneTBB in the caller's task arena. Weights are read in place in
// their stored dtype and widened to fp32 as they are used, never copied whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "ir/graph.h"
#include "model/weights.h"

namespace mpk::ref {

// A weight tensor in its stored dtype (f32, f16 or bf16), seen as [rows, cols]
// (1-D tensors: one row). The data may be unaligned (safetensors offsets are arbitrary).
struct WeightView {
  const std::byte* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 1;
  int64_t cols = 0;

  static WeightView of(const model::Tensor& t);  // Error(Unsupported) for a non-float dtype
  static WeightView of(const float* data, int64_t rows, int64_t cols);
  // Elements [offset, offset + n) of the flattened tensor, widened to fp32 (exact).
  void load(int64_t offset, int64_t n, float* out) const;
  std::vector<float> load_all() const;  // for small tensors: norms, biases
};

// The KV cache of one layer: fp32 [kv_heads][capacity][head_dim] for keys and for values.
struct KvLayerView {
  float* k = nullptr;
  float* v = nullptr;
  int64_t capacity = 0;
  int kv_heads = 0;
  int head_dim = 0;
};

// out[t, :] = table[tokens[t], :]. Ids must be in range (the executor checks them).
void embedding(const int32_t* tokens, int64_t n, const WeightView& table, float* out);
// Per row of x[rows, dim]: out = w * (x * rsqrt(mean(x^2) + eps)).
void rms_norm(const float* x, int64_t rows, int64_t dim, const WeightView& w, float eps,
              float* out);
// rms_norm of each head_dim slice of x[rows, heads * head_dim], with w[head_dim].
void head_rms_norm(const float* x, int64_t rows, int heads, int head_dim, const WeightView& w,
                   float eps, float* out);
// out[rows, N] = x[rows, K] W[N, K]^T (+ bias[N]).
void linear(const float* x, int64_t rows, const WeightView& w, const WeightView* bias, float* out);
// Rotate-half RoPE of every head of x[rows, heads * head_dim] at positions[row];
// inv_freq has head_dim / 2 entries (ir::rope_inv_freq).
void rope(const float* x, const int32_t* positions, int64_t rows, int heads, int head_dim,
          const float* inv_freq, float* out);
// Writes k, v [rows, kv_heads * head_dim] into `cache` at positions[row], then for each row and
// query head h: out = softmax(q . K[0..position] * scale) V, with KV head h / (heads / kv_heads).
// Cache entries [0, position) must already hold earlier tokens.
void attention(const float* q, const float* k, const float* v, const int32_t* positions,
               int64_t rows, int heads, float scale, const KvLayerView& cache, float* out);
// out = gate / (1 + exp(-gate)) * up.
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
// out = gelu_tanh(gate) * up, transformers' "gelu_pytorch_tanh" (the formula in ir/ops.def).
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);
// out = a + b.
void add(const float* a, const float* b, int64_t n, float* out);
// Whether binary_elementwise runs ops of `kind` (silu_mul, gelu_tanh_mul, add).
bool is_binary_elementwise(ir::OpKind kind);
// The binary elementwise op of `kind` over n elements: the executor's and the GPU's host
// fallback's one dispatch. False, nothing written, for a kind is_binary_elementwise refuses.
bool binary_elementwise(ir::OpKind kind, const float* a, const float* b, int64_t n, float* out);
// Index of the first maximum; a NaN counts as the maximum (first NaN wins), like torch.argmax.
int32_t argmax(const float* x, int64_t n);

}  // namespace mpk::ref
