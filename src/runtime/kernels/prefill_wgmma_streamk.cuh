// Projections of one tile row (M <= PF_WG_BM: a short prompt) on the wgmma tile, stream-K.
//
// With one tile row a projection's tiles may make a short wave (Qwen3-8B's gate + up: 96 SwiGLU
// tiles on 132 SMs), and splitting each tile's K in equal parts leaves the same remainder. Here
// the grid's K steps, in the order (column tile, K step), are dealt to the CTAs (at most one per
// SM) in equal runs by the even split (ir/layouts.h), and each CTA's ring streams on across the
// tiles of its run, as the SwiGLU walk's does: every SM reads the same share of the weights,
// without a gap between tiles.
//
// A run holds some tiles whole and, at either end, part of a tile (a "segment"). A segment's
// fp32 partial goes to the workspace, M x PF_WG_BN floats at slot 2c (CTA c's first tile) or
// 2c + 1 (its last), and counts itself on the tile's counter; the segment that arrives last
// adds the tile's partials in the order of their CTAs (the same sum whichever arrives last),
// runs the epilogue, and sets the counter back to zero for the next launch (the host zeroes the
// counters once). No CTA waits for another. The host takes these entries only where the tiles
// make half a wave or more (runtime/prefill.h: prefill_streamk): the partials and their sum by
// one CTA cost more than the even deal gains when each tile spans many CTAs.

// The CTA whose run holds unit u of U: the last c with pf_even_split_begin(c, U, P) <= u.
__device__ __forceinline__ int pf_sk_cta(int u, int U, int P) {
  int c = int((long long)u * P / U);
  while (c > 0 && pf_even_split_begin(c, U, P) > u) --c;
  while (c + 1 < P && pf_even_split_begin(c + 1, U, P) <= u) ++c;
  return c;
}
// CTA c's partial of column tile t, which is its run's first or last tile (ks K steps a tile).
__device__ __forceinline__ int pf_sk_slot(int c, int t, int U, int P, int ks) {
  return 2 * c + (int(pf_even_split_begin(c, U, P)) / ks == t ? 0 : 1);
}
// The consumer warps' barrier (named barrier 1: the producer warp is not in it).
__device__ __forceinline__ void pf_sk_sync() { asm volatile("bar.sync 1, %0;" ::"n"(PF_WG_PRODUCER * 32) : "memory"); }

// The walk over `tiles` column tiles of K: load(dst, bar, t, kt) issues K step kt of tile t's
// bulk copies into the ring buffer at dst (completing on bar); finish(acc, t) stores tile t's
// sum from the accumulators, which it leaves as they are (ptxas serializes the wgmmas of a loop
// whose accumulators another instruction defines; a warpgroup's rows past M are not stored).
// The grid is 1-D, at most tiles * K steps CTAs (no run empty) and at most one per SM.
template <typename Load, typename Finish>
__device__ __forceinline__ void pf_wgmma_streamk(int M, int K, int tiles, float* __restrict__ ws, unsigned* counters,
                                                 Load load, Finish finish) {
  const PfWgRing rg = pf_wg_ring();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int ks = (K + PF_WG_BK - 1) / PF_WG_BK, P = int(gridDim.x), c = int(blockIdx.x);
  const int U = tiles * ks;  // below 2^31 (the host checks)
  const int u0 = int(pf_even_split_begin(c, U, P)), u1 = int(pf_even_split_end(c, U, P));
  unsigned it = 0;  // K steps so far: ring buffer it % PF_WG_STAGES, round it / PF_WG_STAGES
  if (warp == PF_WG_PRODUCER) {
    if (lane != 0) return;
    for (int u = u0; u < u1; ++u, ++it) {
      unsigned bar;
      const unsigned dst = pf_wg_refill<PF_WG_BN>(rg, it % PF_WG_STAGES, it / PF_WG_STAGES, bar);
      load(dst, bar, u / ks, u % ks);
    }
    return;
  }
  // A warpgroup whose 64 rows all lie past M multiplies nothing; it frees the buffers it passes.
  const bool idle = wg * 64 >= M;
  // The tiles whose last segment arrived here (at most the run's first and last), summed after
  // the loop.
  __shared__ int done[2];
  if (tid == 0) done[0] = done[1] = -1;
  for (int u = u0; u < u1;) {
    const int t = u / ks, kb = u - t * ks, n = min(ks - kb, u1 - u);
    const bool whole = n == ks;
    u += n;
    float acc[PF_WG_BN / 2];
    if (idle) {
      for (int j = 0; j < n; ++j, ++it) {
        pf_mbar_wait(rg.full + 8 * (it % PF_WG_STAGES), (it / PF_WG_STAGES) & 1);
        if (lane == 0) pf_mbar_arrive(rg.empty + 8 * (it % PF_WG_STAGES));
      }
    } else {
      for (int j = 0; j < n; ++j, ++it) {
        pf_wg_multiply<PF_WG_BN>(acc, rg, it % PF_WG_STAGES, it / PF_WG_STAGES, wg, j == 0);
        if (j > 0 && lane == 0) pf_mbar_arrive(rg.empty + 8 * ((it - 1) % PF_WG_STAGES));  // step it - 1 retired
      }
      pf_wg_wait<0>();
      pf_wg_pin(acc);
      if (lane == 0) pf_mbar_arrive(rg.empty + 8 * ((it - 1) % PF_WG_STAGES));  // the segment's last step
    }
    if (whole) {
      if (!idle) finish(acc, t);
      continue;
    }
    float* __restrict__ p = ws + (long long)pf_sk_slot(int(blockIdx.x), t, U, P, ks) * M * PF_WG_BN;
    if (!idle)
      pf_tile_pairs<1, PF_WG_BN / 8, 1, 16, PF_WG_BN>(0, 0, [&](int i, int r, int col) {
        if (r < M) *(float2*)(p + r * PF_WG_BN + col) = make_float2(acc[i], acc[i + 1]);
      });
    __threadfence();  // the partial before the count
    pf_sk_sync();
    if (tid == 0) {
      const int segments = pf_sk_cta(t * ks + ks - 1, U, P) - pf_sk_cta(t * ks, U, P) + 1;
      if (atomicAdd(counters + t, 1u) + 1 == unsigned(segments)) {
        counters[t] = 0;
        done[done[0] < 0 ? 0 : 1] = t;
      }
      __threadfence();  // the other segments' partials after their counts
    }
  }
  pf_sk_sync();  // done[]
  if (idle) return;
  for (int q = 0; q < 2 && done[q] >= 0; ++q) {  // each tile's partials added in the order of their CTAs
    const int t = done[q];
    const int c0 = pf_sk_cta(t * ks, U, P), c1 = pf_sk_cta(t * ks + ks - 1, U, P);
    float acc[PF_WG_BN / 2];
#pragma unroll
    for (int i = 0; i < PF_WG_BN / 2; ++i) acc[i] = 0.f;
    for (int cc = c0; cc <= c1; ++cc) {
      const float* p = ws + (long long)pf_sk_slot(cc, t, U, P, ks) * M * PF_WG_BN;
      pf_tile_pairs<1, PF_WG_BN / 8, 1, 16, PF_WG_BN>(0, 0, [&](int i, int r, int col) {
        if (r >= M) return;
        const float2 v = __ldcg((const float2*)(p + r * PF_WG_BN + col));
        acc[i] += v.x;
        acc[i + 1] += v.y;
      });
    }
    finish(acc, t);
  }
}

// A tile's C = acc (+ bias) (+ R) for rows below M, pf_tile_store's sums without changing acc.
__device__ __forceinline__ void pf_sk_store(const float (&acc)[PF_WG_BN / 2], int n0, int M, int N,
                                            const float* __restrict__ bias, const float* __restrict__ R,
                                            float* __restrict__ C) {
  if (N % 2 == 0) {
    pf_tile_pairs<1, PF_WG_BN / 8, 1, 16, PF_WG_BN>(0, n0, [&](int i, int r, int c) {
      if (r >= M || c >= N) return;
      float2 v = make_float2(acc[i], acc[i + 1]);
      if (bias) v.x += bias[c], v.y += bias[c + 1];
      if (R) {
        const float2 q = *(const float2*)(R + (long long)r * N + c);
        v.x += q.x, v.y += q.y;
      }
      *(float2*)(C + (long long)r * N + c) = v;
    });
    return;
  }
  pf_wg_each<PF_WG_BN / 8>(0, n0, M, N, [&](int i, int r, int c) {
    float v = acc[i];
    if (bias) v += bias[c];
    if (R) v += R[(long long)r * N + c];
    C[(long long)r * N + c] = v;
  });
}

// The members of a group (PfGemmGroup, column tiles of PF_WG_BN; one member alone with the
// residual R) over their tiles, each member's epilogue pf_wgmma_tile's: the head norm and RoPE
// where hr.w[j] is set, else bias and, for member 0, R.
#define PF_WGMMA_STREAMK_ENTRY(NAME)                                                                          \
  extern "C" __global__ void __launch_bounds__(PF_WG_THREADS, 1)                                              \
      NAME##_streamk(const __grid_constant__ PfTmaMap ma, const __grid_constant__ PfTmaMaps mws, PfGemmGroup grp, \
                     const float* R, float* ws, unsigned* counters, int M, int K, PfHeadRope hr) {             \
    pf_wait_prior();                                                                                          \
    int tiles = 0;                                                                                            \
    for (int j = 0; j < grp.count; ++j) tiles += grp.tiles[j];                                                \
    pf_wgmma_streamk(                                                                                         \
        M, K, tiles, ws, counters,                                                                            \
        [&](unsigned dst, unsigned bar, int t, int kt) {                                                      \
          const int j = pf_group_member(grp, t);                                                              \
          pf_tma_load(dst, ma, kt * PF_WG_BK, 0, bar);                                                        \
          pf_tma_load(dst + PF_WG_BM * 128, mws.w[j], kt * PF_WG_BK, t * PF_WG_BN, bar);                      \
        },                                                                                                    \
        [&](const float(&acc)[PF_WG_BN / 2], int t) {                                                         \
          const int j = pf_group_member(grp, t);                                                              \
          if (hr.w[j])                                                                                        \
            pf_wg_head_rope_store<PF_WG_BN>(acc, 0, t * PF_WG_BN, M, grp.n[j], grp.bias[j], hr.w[j], hr.cs[j], \
                                            hr.sn[j], hr.eps[j], hr.pos0, grp.c[j]);                          \
          else                                                                                                \
            pf_sk_store(acc, t * PF_WG_BN, M, grp.n[j], grp.bias[j], j == 0 ? R : nullptr, grp.c[j]);         \
        });                                                                                                   \
  }
// gate and up of one input, out = silu(gate) * up (the SwiGLU entry's tiles: PF_WG_BN / 2
// columns of each).
#define PF_WGMMA_STREAMK_SWIGLU_ENTRY(NAME)                                                                   \
  extern "C" __global__ void __launch_bounds__(PF_WG_THREADS, 1)                                              \
      NAME##_streamk_swiglu(const __grid_constant__ PfTmaMap ma, const __grid_constant__ PfTmaMap mg,         \
                            const __grid_constant__ PfTmaMap mu, void* out, float* ws, unsigned* counters,    \
                            int M, int N, int K, int bf16) {                                                  \
    pf_wait_prior();                                                                                          \
    pf_wgmma_streamk(                                                                                         \
        M, K, (N + PF_WG_BN / 2 - 1) / (PF_WG_BN / 2), ws, counters,                                          \
        [&](unsigned dst, unsigned bar, int t, int kt) {                                                      \
          pf_tma_load(dst, ma, kt * PF_WG_BK, 0, bar);                                                        \
          pf_tma_load(dst + PF_WG_BM * 128, mg, kt * PF_WG_BK, t * (PF_WG_BN / 2), bar);                      \
          pf_tma_load(dst + (PF_WG_BM + PF_WG_BN / 2) * 128, mu, kt * PF_WG_BK, t * (PF_WG_BN / 2), bar);     \
        },                                                                                                    \
        [&](const float(&acc)[PF_WG_BN / 2], int t) {                                                         \
          pf_wgmma_swiglu_store(acc, 0, t * (PF_WG_BN / 2), out, M, N, bf16);                                 \
        });                                                                                                   \
  }
