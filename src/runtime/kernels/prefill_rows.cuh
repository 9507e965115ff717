// Prefill row and element kernels: embedding, RMSNorm, the head norms, RoPE, the KV append,
// SiLU-gating, residual adds, and the last position's argmax with the next embedding.

// out[t] = table[tokens[t]] widened to fp32; one CTA of PF_ROW_THREADS per row
// (ir::prefill_embed_nest).
extern "C" __global__ void __launch_bounds__(PF_ROW_THREADS)
pf_embed(const pf_bf16* __restrict__ table, const int* __restrict__ tokens, float* __restrict__ out, int H) {
  pf_wait_prior();
  pf_embed_row(table, tokens, out, H);
}

// out[t] = w * (x[t] * rsqrt(mean(x[t]^2) + eps)), one CTA of PF_ROW_THREADS per row; out in
// bf16 when `bf16`.
extern "C" __global__ void __launch_bounds__(PF_ROW_THREADS)
pf_rms_norm(const float* __restrict__ x, const float* __restrict__ w, void* __restrict__ out, int H, float eps,
            int bf16) {
  pf_wait_prior();
  pf_rms_norm_row(x, w, out, H, eps, bf16);  // ir::prefill_rms_norm_nest
}

// The same over each head's D-slice of row blockIdx.x (ir::prefill_head_rms_norm_nest), one CTA
// of PF_ROW_THREADS per row, a warp per head at a time.
extern "C" __global__ void __launch_bounds__(PF_ROW_THREADS)
pf_head_rms_norm(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out, int heads, int D,
                 float eps) {
  pf_wait_prior();
  pf_head_rms_norm_row(x, w, out, heads, D, eps);
}

// Rotate-half RoPE of every head of row blockIdx.x at position pos0 + blockIdx.x (inv_freq[D /
// 2]), after the head RMSNorm with weight w when w is not null: the two ops in one pass over
// the row, in pf_head_rms_norm's and the reference's formulas. One CTA of PF_ROW_THREADS per row:
// the row's cos and sin once, a warp per head at a time through its D floats in shared memory
// (D even and at most PF_ROPE_MAX_D, printed before this file; prefill_unsupported).
extern "C" __global__ void __launch_bounds__(PF_ROW_THREADS)
pf_head_norm_rope(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ inv_freq,
                  float* __restrict__ out, int heads, int D, float eps, int pos0) {
  pf_wait_prior();
  __shared__ float cs[PF_ROPE_MAX_D / 2], sn[PF_ROPE_MAX_D / 2];
  __shared__ float buf[PF_ROW_THREADS / 32][PF_ROPE_MAX_D];
  // ir::prefill_head_norm_rope_nest
  pf_head_norm_rope_row(x, w, inv_freq, out, cs, sn, &buf[0][0], heads, D, eps, pos0);
}

// Rows [0, T) of k and v ([T, Hkv * D]) into the caches [Hkv][cap][D] at positions pos0 + t,
// fp32 and the bf16 shadow attention reads (ir::prefill_kv_store_nest).
extern "C" __global__ void pf_kv_store(const float* __restrict__ k, const float* __restrict__ v,
                                       float* __restrict__ kc, float* __restrict__ vc, pf_bf16* __restrict__ kc16,
                                       pf_bf16* __restrict__ vc16, int T, int Hkv, int D, int cap, int pos0) {
  pf_wait_prior();
  pf_kv_store_all(k, v, kc, vc, kc16, vc16, T, Hkv, D, cap, pos0);
}

// The bf16 shadow of positions [from, from + len) of plane blockIdx.y ([cap][D] of one layer, KV
// head, and keys or values) from the fp32 cache: positions the decode step wrote since the last
// prefill (ir::prefill_kv_shadow_nest).
extern "C" __global__ void pf_kv_shadow(const float* __restrict__ kv, pf_bf16* __restrict__ kv16, int cap, int D,
                                        int from, int len) {
  pf_wait_prior();
  pf_kv_shadow_plane(kv, kv16, cap, D, from, len);
}

// ir::prefill_silu_mul_nest, ir::prefill_add_nest (n inside kPrefillMaxElements).
extern "C" __global__ void pf_silu_mul(const float* __restrict__ gate, const float* __restrict__ up,
                                       void* __restrict__ out, long long n, int bf16) {
  pf_wait_prior();
  pf_silu_mul_all(gate, up, out, n, bf16);
}

extern "C" __global__ void pf_add(const float* a, const float* b, float* out, long long n) {
  pf_wait_prior();
  pf_add_all(a, b, out, n);
}

// One CTA of PF_ARGMAX_THREADS (the decode kernels' order, mk_better): result[0] =
// argmax(logits[0, V)), result[1] = 1 when a logit is NaN or Inf, else 0.
extern "C" __global__ void __launch_bounds__(PF_ARGMAX_THREADS)
pf_argmax(const float* __restrict__ logits, int V, int* __restrict__ result) {
  pf_wait_prior();
  __shared__ float bv[32];
  __shared__ int bi[32], bad[32];
  float v;
  int idx, nonfinite;
  pf_argmax_scan(logits, V, v, idx, nonfinite);  // ir::prefill_argmax_nest
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    mk_better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
    nonfinite |= __shfl_xor_sync(0xffffffffu, nonfinite, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { bv[warp] = v; bi[warp] = idx; bad[warp] = nonfinite; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w) {
      mk_better(v, idx, bv[w], bi[w]);
      nonfinite |= bad[w];
    }
    result[0] = idx;
    result[1] = nonfinite;
  }
}
