// Prefill attention on Hopper's warpgroup tensor cores (sm_90a, head dimension 128; printed after
// prefill_wgmma.cuh, whose descriptors, mbarriers and bulk copies it uses). The contract of
// pf_attention (prefill_attention.cuh): query row t at position pos0 + t attends to keys [0,
// pos0 + t] of its KV head in the cache's bf16 shadow; q fp32 [T, Hq * 128]; out bf16 when `bf16`.
//
// A CTA takes 128 query rows of one head: two warpgroups of 64 rows each, and a ninth warp that
// only loads. The producer brings the keys and values in blocks of 64 by bulk tensor copies
// (TMA, 128-byte swizzle) into a ring of PF_WA_STAGES buffers, each with a "full" and an "empty"
// mbarrier, as the GEMM tile's ring does. Per block, each warpgroup computes S = Q K^T by
// wgmma (Q staged once in shared memory by its threads, swizzled as a TMA box would be), the
// online softmax in fp32 registers (base 2, the scale folded in), then O += P V by wgmma with P
// taken from S's accumulators as register A fragments (the accumulator order is the A
// fragment's: ir::AccAsA) and V read MN-major: the cache rows as they are, no transpose.
// The scale must be positive (enqueue_attention sends others to pf_attention).
//
// The keys and values past the last position of the CTA's last block are whatever the cache
// holds there (the map's rows run on into the next KV head): their scores are masked out by a
// select, and the values' rows are zeroed in shared memory before the multiply (a zero weight
// times a NaN left in the cache would still be NaN).

// PF_WA_ROWS, PF_WA_KEYS, PF_WA_STAGES, PF_WA_PRODUCER and PF_WA_THREADS are printed before this
// file from runtime/prefill.h's kWgmmaAttention. The code below is written for:
static_assert(PF_WA_ROWS == 128 && PF_WA_PRODUCER == 8 && PF_WA_THREADS == 288,
              "two warpgroups of 64 query rows, then the producer warp");
static_assert(PF_WA_KEYS == 64, "S: one m64n64k16 per warpgroup and 16-wide slice of d");
static_assert(PF_WA_STAGES >= 2, "a ring");
enum : unsigned {
  PF_WA_Q_BYTES = 64 * 256,            // a warpgroup's Q: two boxes (d 0..63, 64..127) of 64 rows x 128 bytes
  PF_WA_BOX_BYTES = PF_WA_KEYS * 128,  // a box of a block: its rows x 64 of d
  PF_WA_STAGE_BYTES = 4 * PF_WA_BOX_BYTES,  // K (two boxes), then V (two boxes)
};

// The descriptor of an MN-major operand in the 128-byte swizzle: rows of 64 elements of N (128
// bytes) along K, 8-row groups PF_WG_SBO bytes apart, and the next 64 elements of N `lbo` bytes
// on (the next box).
__device__ __forceinline__ unsigned long long pf_wg_desc_mn(unsigned smem_addr, unsigned lbo) {
  return (unsigned long long)((smem_addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(PF_WG_SBO >> 4) << 32) | (1ull << 62);
}

// pf_wgmma_64_ss(d, da, db, accumulate): d (+)= A B^T for a 64 x 16 slice of A and a 64 x 16
// slice of B, both K-major in shared memory (descriptors da, db); d starts from zero where
// `accumulate` is 0. d[i] sits where pf_wgmma_ss's does, in a 64 x 64 tile.
// pf_wgmma_128_rs(d, a, db): d += A B for A's 64 x 16 slice in registers (a: pf_wgmma_64_ss's
// accumulator order, bf16 pairs) and B's 16 x 128 slice MN-major in shared memory (descriptor
// db, imm-trans-b). Both printed before prefill_wgmma.cuh (runtime/wgmma_asm.h).

// Q's rows [r0, r0 + 64) of head h (fp32, row stride qstride; rows at or past T as zeros) to bf16
// at `dst` (1,024-byte aligned) in the layout a TMA box pair of 64 rows x 64 elements would
// leave (pf_wa_q_store, printed from ir::WgmmaAttentionOperands, proved). By the warpgroup's
// 128 threads, 4 elements each a store.
__device__ __forceinline__ void pf_wa_stage_q(unsigned dst, const float* __restrict__ q, long long qstride, int r0,
                                              int T, int h) {
  const int t = threadIdx.x & 127;
#pragma unroll 4
  for (int i = 0; i < 64 * 32 / 128; ++i) {
    const int idx = i * 128 + t, r = idx / 32, d = idx % 32 * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r0 + r < T) v = *(const float4*)(q + (long long)(r0 + r) * qstride + (long long)h * 128 + d);
    const unsigned at = dst + pf_wa_q_store(r, d);
    asm volatile("st.shared.v2.b32 [%0], {%1, %2};" ::"r"(at), "r"(pf_pack_bf16(v.x, v.y)),
                 "r"(pf_pack_bf16(v.z, v.w))
                 : "memory");
  }
}

extern "C" __global__ void __launch_bounds__(PF_WA_THREADS, 1)
    pf_attention_wgmma(const __grid_constant__ PfTmaMap mk, const __grid_constant__ PfTmaMap mv,
                       const float* __restrict__ q, void* __restrict__ out, int T, int Hq, int Hkv, int cap, int pos0,
                       float scale, int bf16) {
  pf_wait_prior();
  __shared__ __align__(8) unsigned long long bars[2 * PF_WA_STAGES];  // full[s], then empty[s]
  const unsigned base = (pf_smem(pf_smem_raw) + 1023u) & ~1023u;
  const unsigned ring = base + 2 * PF_WA_Q_BYTES, full = pf_smem(bars), empty = full + 8 * PF_WA_STAGES;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  int qb, h;
  pf_att_block(qb, h);  // the longest blocks start first
  const int q0 = qb * PF_WA_ROWS, kvh = h / (Hq / Hkv);
  const int nkv = pos0 + min(q0 + PF_WA_ROWS, T);  // keys [0, the block's last position]
  const int blocks = (nkv + PF_WA_KEYS - 1) / PF_WA_KEYS;
  if (tid == 0) {
    for (int s = 0; s < PF_WA_STAGES; ++s) {
      pf_mbar_init(full + 8 * s, 1);
      pf_mbar_init(empty + 8 * s, PF_WA_PRODUCER);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == PF_WA_PRODUCER) {
    if (lane != 0) return;
    for (int j = 0; j < blocks; ++j) {
      const unsigned s = unsigned(j) % PF_WA_STAGES, round = unsigned(j) / PF_WA_STAGES;
      pf_mbar_wait(empty + 8 * s, (round & 1) ^ 1);  // the first round finds it free
      const unsigned bar = full + 8 * s, dst = ring + s * PF_WA_STAGE_BYTES;
      pf_mbar_expect_tx(bar, PF_WA_STAGE_BYTES);
      const int row = kvh * cap + j * PF_WA_KEYS;
      pf_tma_load(dst, mk, 0, row, bar);
      pf_tma_load(dst + PF_WA_BOX_BYTES, mk, 64, row, bar);
      pf_tma_load(dst + 2 * PF_WA_BOX_BYTES, mv, 0, row, bar);
      pf_tma_load(dst + 3 * PF_WA_BOX_BYTES, mv, 64, row, bar);
    }
    return;
  }

  const long long qstride = (long long)Hq * 128;
  const int r0 = q0 + wg * 64;  // this warpgroup's first query row
  const unsigned sq = base + unsigned(wg) * PF_WA_Q_BYTES;
  pf_wa_stage_q(sq, q, qstride, r0, T, h);
  pf_fence_proxy_async();  // the generic proxy's stores, before wgmma reads them
  asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");

  const float kNegInf = -__int_as_float(0x7f800000);
  const float sl2 = scale * 1.4426950408889634f;  // softmax in base 2
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  float mrow[2] = {kNegInf, kNegInf}, lrow[2] = {0.f, 0.f};
  // This thread's two rows of S and O in the warpgroup's 64 (pf_wgmma_ss's order).
  const int qp0 = pos0 + r0 + pf_frag_row<1, 16>(warp % 4, 0, lane, 0);
  const int qp1 = pos0 + r0 + pf_frag_row<1, 16>(warp % 4, 0, lane, 1);

  for (int j = 0; j < blocks; ++j) {
    const unsigned s = unsigned(j) % PF_WA_STAGES, round = unsigned(j) / PF_WA_STAGES;
    const unsigned kb = ring + s * PF_WA_STAGE_BYTES, vb = kb + 2 * PF_WA_BOX_BYTES;
    const int k0 = j * PF_WA_KEYS;
    pf_mbar_wait(full + 8 * s, round & 1);
    if (nkv - k0 < PF_WA_KEYS) {  // the last block, partial: zero the values' rows past the keys
      const int valid = nkv - k0;
      for (int i = tid; i < 2 * PF_WA_KEYS * 8; i += 256) {
        const int box = i / (PF_WA_KEYS * 8), r = i / 8 % PF_WA_KEYS;
        if (r >= valid)
          asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(vb + unsigned(box) * PF_WA_BOX_BYTES +
                                                                         unsigned(r) * 128 + unsigned(i % 8) * 16),
                       "r"(0)
                       : "memory");
      }
      pf_fence_proxy_async();
      asm volatile("bar.sync 3, 256;" ::: "memory");  // both warpgroups
    }

    // S = Q K^T: 8 slices of 16 along d (ir::WgmmaAttentionOperands, proved to read Q in the
    // TMA box layout pf_wa_stage_q imitates, and the keys where the TMA stored them).
    float sc[32];
    pf_wg_fence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
      pf_wgmma_64_ss(sc, pf_wg_desc(base + pf_wa_q_start(wg, kk)), pf_wg_desc(kb + pf_wa_k_start(kk, PF_WA_BOX_BYTES)),
                     kk);
    pf_wg_commit();
    pf_wg_wait<0>();
    pf_wg_pin(sc);

    // Causal mask (only where the block reaches past this warpgroup's first row) and the
    // online-softmax update of each of the thread's two rows: the running maximum in raw scores
    // (the scale is positive, so it commutes), each weight then one FFMA and one ex2
    // (pf_os_*, printed from ir::PrefillSoftmax, proved).
    const bool diagonal = k0 + PF_WA_KEYS - 1 > pos0 + r0;
    unsigned p[4][4];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int qpos = hr ? qp1 : qp0;
      float mx = kNegInf;
#pragma unroll
      for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& v = sc[ni * 4 + hr * 2 + e];
          const int key = k0 + pf_frag_col<1, PF_WA_KEYS>(0, ni, lane, e);
          if (diagonal && key > qpos) v = kNegInf;
          mx = fmaxf(mx, v);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // Key 0 is in the first block for every row, so the running maximum is finite.
      const float mnew = fmaxf(mrow[hr], mx);
      const float corr = pf_os_rescale(mrow[hr], mnew, sl2);
      mrow[hr] = mnew;
      float sum = 0.f;
#pragma unroll
      for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& v = sc[ni * 4 + hr * 2 + e];
          v = pf_os_weight(v, mnew, sl2);
          sum += v;
        }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      lrow[hr] = pf_os_update(lrow[hr], corr, sum, 1.f);
      // O's rescale: the update with no new term (P V is added by the tensor cores below).
#pragma unroll
      for (int dn = 0; dn < 16; ++dn) {
        o[dn * 4 + hr * 2] *= corr;
        o[dn * 4 + hr * 2 + 1] *= corr;
      }
    }
    // P for keys 16 kk.. as the A fragment: S's accumulators of key tiles 2 kk, 2 kk + 1 (ir::AccAsA).
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float* acc = &sc[(2 * kk + pf_acc_a_tile(i)) * 4];
        p[kk][i] = pf_pack_bf16(acc[pf_acc_a_elem(i, 0)], acc[pf_acc_a_elem(i, 1)]);
      }

    // O += P V: V's rows of keys 16 kk.., MN-major, the second 64 of d one box on
    // (ir::WgmmaAttentionOperands, proved).
    pf_wg_pin(o);
    pf_wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) pf_wgmma_128_rs(o, p[kk], pf_wg_desc_mn(vb + pf_wa_v_start(kk), PF_WA_BOX_BYTES));
    pf_wg_commit();
    pf_wg_wait<0>();
    pf_wg_pin(o);
    if (lane == 0) pf_mbar_arrive(empty + 8 * s);  // the block's buffer is free
  }

#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = r0 + pf_frag_row<1, 16>(warp % 4, 0, lane, hr);
    if (r >= T) continue;
    const float inv = 1.f / lrow[hr];
    const long long row = (long long)r * qstride + (long long)h * 128;
#pragma unroll
    for (int dn = 0; dn < 16; ++dn)
#pragma unroll
      for (int e = 0; e < 2; ++e) pf_store(out, row + pf_frag_col<1, 128>(0, dn, lane, e), o[dn * 4 + hr * 2 + e] * inv, bf16);
  }
}
