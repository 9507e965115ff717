// Prefill projections on Hopper's warpgroup tensor cores (sm_90a only: printed into the source
// when the prefill is compiled for it). The same contract as pf_gemm_tile (prefill_gemm.cuh): C
// = A W^T (+ bias) (+ R), the K split through `partial`; the operands come as TMA descriptors.
//
// A CTA computes a 128 x BN tile (BN 256, or 128 where that fills the SMs' waves better) with two
// warpgroups, each 64 rows x BN columns by wgmma.mma_async m64nBNk16 (fp32 accumulators: BN / 2
// registers per thread) reading both operands from shared memory, and a ninth warp that only loads.
// K steps of 64 bf16 (128 bytes per row) fill a ring of PF_WG_STAGES buffers by bulk tensor copies
// (TMA) in the 128-byte swizzle: chunk c of row r lands in chunk c ^ (r % 8) of its row
// (ir::Swizzle128, proved to be that pattern), which the descriptors' 128-byte swizzle mode reads
// (ir::WgmmaOperands, proved to read each element where the TMA stored it).
//
// The SwiGLU entry (_swiglu, of the 256-column tile) multiplies gate and up in one tile, 128
// columns of each, and writes silu(gate) * up: the MLP's two projections and their product in
// one kernel.

// PF_WG_BM, PF_WG_BN, PF_WG_BK, PF_WG_STAGES, PF_WG_PRODUCER (the loading warp's index: the
// consumer warps before it) and PF_WG_THREADS are printed before this file from the host's tile
// table (runtime/prefill_tiles.h: kWgmmaTile), which sizes the launches and the shared memory. The
// code below is written for one shape of them, PF_WG_BN the SwiGLU tile's width and the widest;
// a tile of BN columns (a template argument) takes one m64nBNk16 per warpgroup and K slice.
static_assert(PF_WG_BM == 128 && PF_WG_PRODUCER == 8 && PF_WG_THREADS == 288,
              "two warpgroups of 64 rows, then the producer warp");
static_assert(PF_WG_BN == 256, "the SwiGLU tile: 128 columns of gate and of up in one m64n256k16");
static_assert(PF_WG_BK == 64, "a K step is one 128-byte swizzled row");
static_assert(PF_WG_STAGES >= 2, "a ring");
// A ring buffer: a K step of A's PF_WG_BM rows, then W's BN rows, 128 bytes each (the bytes
// each step's copies complete on its "full" mbarrier).
template <int BN>
__device__ constexpr unsigned pf_wg_stage_bytes() {
  // wgmma's n, and buffers that keep the 1,024-byte alignment of the swizzle's period.
  static_assert(BN % 8 == 0 && BN <= 256, "m64nBNk16 takes BN = 8, 16, ..., 256");
  return (PF_WG_BM + BN) * 128;
}

// Shared-memory matrix descriptor of a K-major tile whose rows are 128 bytes, 128-byte swizzled,
// 8-row groups PF_WG_SBO bytes apart (the tile 1,024-byte aligned). Its start: the tile plus
// pf_wg_a_start or pf_wg_b_start (ir::WgmmaOperands, proved to read what the TMA stored).
__device__ __forceinline__ unsigned long long pf_wg_desc(unsigned smem_addr) {
  return (unsigned long long)((smem_addr & 0x3FFFF) >> 4)  // start address, 16-byte units
         | (1ull << 16)                                    // leading offset: unused by this mode
         | ((unsigned long long)(PF_WG_SBO >> 4) << 32)    // stride between 8-row groups
         | (1ull << 62);                                   // 128-byte swizzle
}

__device__ __forceinline__ void pf_wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void pf_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void pf_wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Threads' shared-memory stores (st.shared, cp.async) go through the generic proxy; wgmma reads
// through the async proxy.
__device__ __forceinline__ void pf_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Keeps the accumulators in their registers across the asynchronous multiply (no code).
template <int N>
__device__ __forceinline__ void pf_wg_pin(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// pf_wgmma_ss(d, da, db, accumulate): d (+)= A B for a 64 x 16 slice of A and a BN x 16 slice
// of W (both K-major in shared memory), d[BN / 2] selecting the width; d starts from zero where
// `accumulate` is 0. d[i] sits at row 16 * (warp % 4) + lane / 4 + 8 * (i / 2 % 2), column 8 *
// (i / 4) + 2 * (lane % 4) + i % 2 of the warpgroup's 64 x BN tile: the mma.sync fragment order
// of pf_frag_row and pf_frag_col with one warp across (i = ni * 4 + h * 2 + e). Printed before
// this file (runtime/wgmma_asm.h), one overload per tile width, as are the attention's
// pf_wgmma_64_ss and pf_wgmma_128_rs.

// A TMA descriptor (CUtensorMap, made by the host's cuda::tensor_map_bf16): a kernel parameter
// declared `const __grid_constant__`, whose address the bulk tensor copies take.
struct __align__(64) PfTmaMap {
  unsigned long long v[16];
};
struct PfTmaMaps {  // the members of a group (PfGemmGroup's w)
  PfTmaMap w[PF_GROUP_MAX];
};

__device__ __forceinline__ void pf_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Waits until the phase of parity `parity` of the mbarrier at `bar` has completed.
__device__ __forceinline__ void pf_mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void pf_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void pf_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// The box of `map` at element (x along K, y along rows) to shared memory at `dst`, completing
// on the mbarrier at `bar` (its bytes counted against the barrier's expected transaction).
__device__ __forceinline__ void pf_tma_load(unsigned dst, const PfTmaMap& map, int x, int y, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(dst), "l"(&map), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// The ring: PF_WG_STAGES buffers of one K step (A's 128 rows, then W's BN) from a 1,024-byte
// boundary (the swizzle pattern repeats every 1,024 bytes; the host adds 1,024 bytes of slack),
// and a "full" and an "empty" mbarrier per buffer, initialised (the block's first barrier).
struct PfWgRing {
  unsigned ring, full, empty;
};
__device__ __forceinline__ PfWgRing pf_wg_ring() {
  __shared__ __align__(8) unsigned long long bars[2 * PF_WG_STAGES];  // full[s], then empty[s]
  PfWgRing r;
  r.ring = (pf_smem(pf_smem_raw) + 1023u) & ~1023u;
  r.full = pf_smem(bars);
  r.empty = r.full + 8 * PF_WG_STAGES;
  if (threadIdx.x == 0) {
    for (int s = 0; s < PF_WG_STAGES; ++s) {
      pf_mbar_init(r.full + 8 * s, 1);
      pf_mbar_init(r.empty + 8 * s, PF_WG_PRODUCER);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  return r;
}

// The producer's step: waits until ring buffer s is free (its consumers' arrivals of round
// `round`'s parity complete the phase before; the first round finds it free) and arms its
// "full" mbarrier with a step's bytes (a box's bytes count whole, zero-filled parts included).
// Returns the buffer's address; `bar` is the mbarrier its copies complete on.
template <int BN>
__device__ __forceinline__ unsigned pf_wg_refill(const PfWgRing& rg, unsigned s, unsigned round, unsigned& bar) {
  pf_mbar_wait(rg.empty + 8 * s, (round & 1) ^ 1);
  bar = rg.full + 8 * s;
  pf_mbar_expect_tx(bar, pf_wg_stage_bytes<BN>());
  return rg.ring + s * pf_wg_stage_bytes<BN>();
}

// A consumer's step: waits for ring buffer s of round `round` to be full, adds its product to
// acc as one wgmma group (this warpgroup's 64 rows; the tile's first step, `first`, overwrites
// acc instead), and waits for all but that group: the step before it has retired from this warp.
template <int BN>
__device__ __forceinline__ void pf_wg_multiply(float (&acc)[BN / 2], const PfWgRing& rg, unsigned s, unsigned round,
                                               int wg, bool first) {
  pf_mbar_wait(rg.full + 8 * s, round & 1);
  const unsigned sa = rg.ring + s * pf_wg_stage_bytes<BN>(), sb = sa + PF_WG_BM * 128;
  pf_wg_pin(acc);
  pf_wg_fence();
#pragma unroll
  for (int kk = 0; kk < PF_WG_BK / 16; ++kk)  // 32 bytes along K: the swizzle is on absolute addresses
    pf_wgmma_ss(acc, pf_wg_desc(sa + pf_wg_a_start(wg, kk)), pf_wg_desc(sb + pf_wg_b_start(kk)), !first || kk > 0);
  pf_wg_commit();
  pf_wg_wait<1>();
  pf_wg_pin(acc);
}

// The mainloop of one tile: acc = the 128 x BN product of A's rows [m0, m0 + 128) and W's rows
// [n0, n0 + BN) over this block's part of K (blockIdx.z of gridDim.z, the even split: at least
// one K step, as gridDim.z <= K's steps). Rows past M or N and columns past K read as zeros (the
// descriptors' bounds). The first step's multiply overwrites acc: zeroing it first would be a
// non-wgmma definition of the accumulators inside the pipeline, for which ptxas serializes every
// wgmma of the kernel (warning C7515).
//
// Warp-specialised: the last warp (PF_WG_PRODUCER) is the producer, one lane of which issues
// each K step's bulk tensor copies into a free ring buffer and arms the buffer's "full" mbarrier
// with their bytes; the two warpgroups before it wait on "full", multiply, and once a step's
// wgmma group has retired (each warp waits for all but its newest group) each warp arrives on
// that buffer's "empty" mbarrier, which the producer waits for before refilling it. No thread
// issues a load between its multiplies and no block-wide barrier sits in the loop. Returns
// false on the producer warp, which has no accumulators.
template <int BN>
__device__ __forceinline__ bool pf_wgmma_mainloop(float (&acc)[BN / 2], const PfTmaMap& ma, const PfTmaMap& mw, int K,
                                                  int m0, int n0) {
  const PfWgRing rg = pf_wg_ring();
  const int tid = threadIdx.x, warp = tid >> 5, wg = warp >> 2;
  const int ktiles = (K + PF_WG_BK - 1) / PF_WG_BK;
  const int kt0 = int(pf_even_split_begin(blockIdx.z, ktiles, gridDim.z));
  const int kt1 = int(pf_even_split_end(blockIdx.z, ktiles, gridDim.z));

  if (warp == PF_WG_PRODUCER) {
    if ((tid & 31) == 0)
      for (int kt = kt0; kt < kt1; ++kt) {
        const int it = kt - kt0;
        unsigned bar;
        const unsigned dst = pf_wg_refill<BN>(rg, it % PF_WG_STAGES, it / PF_WG_STAGES, bar);
        pf_tma_load(dst, ma, kt * PF_WG_BK, m0, bar);
        pf_tma_load(dst + PF_WG_BM * 128, mw, kt * PF_WG_BK, n0, bar);
      }
    return false;
  }

  for (int kt = kt0; kt < kt1; ++kt) {
    const int it = kt - kt0;
    pf_wg_multiply<BN>(acc, rg, it % PF_WG_STAGES, it / PF_WG_STAGES, wg, it == 0);
    if (it > 0 && (tid & 31) == 0) pf_mbar_arrive(rg.empty + 8 * ((it - 1) % PF_WG_STAGES));  // step it - 1 retired
  }
  pf_wg_wait<0>();
  pf_wg_pin(acc);
  return true;
}

// Block v of the grid X x Y (tile_grid's), as pf_block_tile reads a real block: its tile row m
// and column n.
__device__ __forceinline__ void pf_wg_unit(int v, int X, int g, int& m, int& n) {
  m = pf_tile_m(v % X, v / X, g);
  n = pf_tile_n(v % X, g);
}

// The SwiGLU tile's loop, persistent: the blocks v = this CTA's linear index, + the grid's
// size, ... of the grid X x Y (a grid of X x Y blocks takes one each), each the product of A's
// rows [m0, m0 + 128) with rows [n0, n0 + 128) of Wg and of Wu (the tile order's row m and
// column n, m0 = 128 m, n0 = 128 n), over all of K, handed to epilogue(acc, m0, n0). The same
// producer and consumers as pf_wgmma_mainloop, but the ring runs on across tiles (`it` counts
// K steps from the CTA's start on both sides), so the next tile's first steps load while the
// consumers store this one's.
template <typename Epilogue>
__device__ __forceinline__ void pf_wgmma_swiglu_walk(const PfTmaMap& ma, const PfTmaMap& mg, const PfTmaMap& mu,
                                                     int M, int K, int g, int X, int Y, Epilogue epilogue) {
  const PfWgRing rg = pf_wg_ring();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int ktiles = (K + PF_WG_BK - 1) / PF_WG_BK, units = X * Y;

  unsigned it = 0;  // K steps so far: ring buffer it % PF_WG_STAGES, round it / PF_WG_STAGES
  const int v0 = int(blockIdx.x + gridDim.x * blockIdx.y), stride = int(gridDim.x * gridDim.y);
  if (warp == PF_WG_PRODUCER) {
    if (lane != 0) return;
    for (int v = v0; v < units; v += stride) {
      int m, n;
      pf_wg_unit(v, X, g, m, n);
      if (m * PF_WG_BM >= M) continue;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        unsigned bar;
        const unsigned dst = pf_wg_refill<PF_WG_BN>(rg, it % PF_WG_STAGES, it / PF_WG_STAGES, bar);
        pf_tma_load(dst, ma, kt * PF_WG_BK, m * PF_WG_BM, bar);
        pf_tma_load(dst + PF_WG_BM * 128, mg, kt * PF_WG_BK, n * (PF_WG_BN / 2), bar);
        pf_tma_load(dst + (PF_WG_BM + PF_WG_BN / 2) * 128, mu, kt * PF_WG_BK, n * (PF_WG_BN / 2), bar);
      }
    }
    return;
  }

  for (int v = v0; v < units; v += stride) {
    int m, n;
    pf_wg_unit(v, X, g, m, n);
    if (m * PF_WG_BM >= M) continue;
    float acc[128];
    for (int kt = 0; kt < ktiles; ++kt, ++it) {
      pf_wg_multiply<PF_WG_BN>(acc, rg, it % PF_WG_STAGES, it / PF_WG_STAGES, wg, kt == 0);
      if (kt > 0 && lane == 0) pf_mbar_arrive(rg.empty + 8 * ((it - 1) % PF_WG_STAGES));  // step it - 1 retired
    }
    pf_wg_wait<0>();
    pf_wg_pin(acc);
    if (ktiles > 0 && lane == 0) pf_mbar_arrive(rg.empty + 8 * ((it - 1) % PF_WG_STAGES));  // the tile's last step
    epilogue(acc, m * PF_WG_BM, n * (PF_WG_BN / 2));
  }
}

// Calls f(i, r, c) for each accumulator i of this thread among the first NI * 8 columns of the
// tile whose element, at row r and column c of the output (m0 and n0 added), lies inside M x N.
template <int NI, typename F>
__device__ __forceinline__ void pf_wg_each(int m0, int n0, int M, int N, F&& f) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int ni = 0; ni < NI; ++ni)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = m0 + pf_frag_row<1, 16>(warp, 0, lane, h);
      if (r >= M) continue;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n0 + pf_frag_col<1, PF_WG_BN>(warp, ni, lane, e);
        if (c >= N) continue;
        f(ni * 4 + h * 2 + e, r, c);
      }
    }
}

// The head RMSNorm and the RoPE after a projection (q or k), in its epilogue: the _rope entries'
// argument, per group member (the plain _rope entry reads member 0). w[j] null: member j's tile
// stores as pf_tile_store does (v). The host's PfHeadRope has the same layout.
#define PF_HR_D 128  // the head dimension the epilogue takes
struct PfHeadRope {
  const float* w[PF_GROUP_MAX];   // the head norm's weight, PF_HR_D elements
  const float* cs[PF_GROUP_MAX];  // cos of position p's angle j at [p * PF_HR_D / 2 + j]
  const float* sn[PF_GROUP_MAX];  // and its sin (PrefillProgram::rope_tables)
  float eps[PF_GROUP_MAX];
  int pos0;  // the position of row 0
};

// The tile's heads (whole heads of PF_HR_D columns from n0, N a multiple of PF_HR_D, no K split,
// no residual) RMS-normed by w and rotated by RoPE at position pos0 + row, stored to C:
// pf_head_norm_rope's formulas (the norm, the rotation) on the accumulators plus the bias, the
// squares' sum in another order, the angles' cos and sin from the tables (computed on the host:
// a cosf and a sinf per element here made the GEMM three times slower). What the code relies on is proved of
// the fragment layout (superopt/index_prover.cc: prove_mma_tile, "heads"): accumulators of
// n8-groups 16 hd .. 16 hd + 15 are head hd's columns, a row's columns of a head are held by
// the four lanes of one quad (the sum is two shuffles), and n8-group ni + 8 holds column
// c + 64 of the same row as ni's c (a thread rotates its own pairs).
template <int BN>
__device__ __forceinline__ void pf_wg_head_rope_store(const float (&acc)[BN / 2], int m0, int n0, int M, int N,
                                                      const float* __restrict__ bias, const float* __restrict__ w,
                                                      const float* __restrict__ cs, const float* __restrict__ sn,
                                                      float eps, int pos0, float* __restrict__ C) {
  static_assert(BN % PF_HR_D == 0, "whole heads per tile");
  constexpr int kNi = PF_HR_D / 8;  // a head's n8 groups
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int hd = 0; hd < BN / PF_HR_D; ++hd) {
    const int c0 = n0 + hd * PF_HR_D;  // the head's first column
    if (c0 >= N) break;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = m0 + pf_frag_row<1, 16>(warp, 0, lane, h);
      float x[2 * kNi];
      float ss = 0.f;
#pragma unroll
      for (int ni = 0; ni < kNi; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int i = (hd * kNi + ni) * 4 + h * 2 + e;
          x[ni * 2 + e] = bias ? acc[i] + bias[n0 + pf_frag_col<1, BN>(warp, hd * kNi + ni, lane, e)] : acc[i];
          ss += x[ni * 2 + e] * x[ni * 2 + e];
        }
      ss += __shfl_xor_sync(0xffffffffu, ss, 1);  // the quad: the row's other columns of the head
      ss += __shfl_xor_sync(0xffffffffu, ss, 2);
      const float rs = 1.0f / sqrtf(ss / float(PF_HR_D) + eps);
      if (r >= M) continue;
      const long long at = (long long)(pos0 + r) * (PF_HR_D / 2);  // the row's angles
      float* out = C + (long long)r * N + c0;
#pragma unroll
      for (int ni = 0; ni < kNi / 2; ++ni) {
        const int j = pf_frag_col<1, BN>(warp, hd * kNi + ni, lane, 0) - hd * PF_HR_D;  // even, < 64
        float y1[2], y2[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float a = w[j + e] * (x[ni * 2 + e] * rs);
          const float b = w[j + e + PF_HR_D / 2] * (x[(ni + kNi / 2) * 2 + e] * rs);
          const float c = cs[at + j + e], s = sn[at + j + e];
          y1[e] = a * c + (-b) * s;
          y2[e] = b * c + a * s;
        }
        *(float2*)(out + j) = make_float2(y1[0], y1[1]);
        *(float2*)(out + j + PF_HR_D / 2) = make_float2(y2[0], y2[1]);
      }
    }
  }
}

// One tile; `hw` (not null: the _rope entries) the head norm's weight, with the RoPE's cos and
// sin tables, eps and first position: pf_wg_head_rope_store's epilogue.
template <int BN>
__device__ __forceinline__ void pf_wgmma_tile(const PfTmaMap& ma, const PfTmaMap& mw, const float* __restrict__ bias,
                                              const float* R, float* C, float* __restrict__ partial, int M, int N,
                                              int K, int m_tile, int n_tile, const float* hw = nullptr,
                                              const float* cs = nullptr, const float* sn = nullptr, float eps = 0.f,
                                              int pos0 = 0) {
  const int m0 = m_tile * PF_WG_BM, n0 = n_tile * BN;
  float acc[BN / 2];
  if (!pf_wgmma_mainloop<BN>(acc, ma, mw, K, m0, n0)) return;
  if (hw) {
    pf_wg_head_rope_store<BN>(acc, m0, n0, M, N, bias, hw, cs, sn, eps, pos0, C);
    return;
  }
  const bool split = gridDim.z > 1;
  pf_tile_store<PF_WG_BM, BN, 1, BN / 8, 1, 16, BN, true>(
      acc, m0, n0, M, N, bias, R, split ? partial + (long long)blockIdx.z * M * N : C, split);
}

// The SwiGLU tile's epilogue: columns [n0, n0 + 128) of gate = A Wg^T and of up = A Wu^T in one
// accumulator (gate in columns 0..127, up in 128..255: a thread holds both of a pair), out =
// silu(gate) * up with pf_silu_mul's arithmetic, rounded to bf16 when `bf16`. No K split. With
// N even, a thread's two adjacent columns are one store (pf_tile_store's pairs).
__device__ __forceinline__ void pf_wgmma_swiglu_store(const float (&acc)[128], int m0, int n0, void* out, int M, int N,
                                                      int bf16) {
  constexpr int kUp = PF_WG_BN / 16 * 4;  // gate's accumulator i, up's i + kUp (column c + 128)
  if (N % 2 == 0) {
    pf_tile_pairs<1, PF_WG_BN / 16, 1, 16, PF_WG_BN>(m0, n0, [&](int i, int r, int c) {
      if (r < M && c < N)
        pf_store2(out, (long long)r * N + c, mk_silu_mul(acc[i], acc[i + kUp]),
                  mk_silu_mul(acc[i + 1], acc[i + 1 + kUp]), bf16);
    });
    return;
  }
  pf_wg_each<PF_WG_BN / 16>(m0, n0, M, N, [&](int i, int r, int c) {
    pf_store(out, (long long)r * N + c, mk_silu_mul(acc[i], acc[i + kUp]), bf16);
  });
}

// The entries, as PF_GEMM_ENTRY's but for the operands, which come as descriptors: A's (rows of
// M, boxes of 128 rows) and W's (rows of N, boxes of BN rows; the group's members too).
#define PF_WGMMA_ENTRY(NAME, BN)                                                                              \
  extern "C" __global__ void __launch_bounds__(PF_WG_THREADS, 1)                                              \
      NAME(const __grid_constant__ PfTmaMap ma, const __grid_constant__ PfTmaMap mw, const float* bias,       \
           const float* R, float* C, float* partial, int M, int N, int K, int g) {                            \
    pf_wait_prior();                                                                                          \
    int m, n;                                                                                                 \
    if (pf_block_tile(g, PF_WG_BM, M, m, n)) pf_wgmma_tile<BN>(ma, mw, bias, R, C, partial, M, N, K, m, n);   \
  }
// The members of a group (PfGemmGroup) in one grid, the tiles of each one after another. With
// a K split (gridDim.z > 1) c[j] is member j's partials ([z][M][n[j]], pf_gemm_reduce_group).
#define PF_WGMMA_GROUP_ENTRY(NAME, BN)                                                                        \
  extern "C" __global__ void __launch_bounds__(PF_WG_THREADS, 1)                                              \
      NAME##_group(const __grid_constant__ PfTmaMap ma, const __grid_constant__ PfTmaMaps mws, PfGemmGroup grp, \
                   int M, int K, int g) {                                                                     \
    pf_wait_prior();                                                                                          \
    int m, t;                                                                                                 \
    if (!pf_block_tile(g, PF_WG_BM, M, m, t)) return;                                                         \
    const int j = pf_group_member(grp, t);                                                                    \
    pf_wgmma_tile<BN>(ma, mws.w[j], grp.bias[j], nullptr, grp.c[j], grp.c[j], M, grp.n[j], K, m, t);         \
  }
// The entries above with the head norm and RoPE in the epilogue (PfHeadRope): a projection
// alone (member 0 of hr; no K split, no residual), and a group whose members hr names.
#define PF_WGMMA_ROPE_ENTRY(NAME, BN)                                                                         \
  extern "C" __global__ void __launch_bounds__(PF_WG_THREADS, 1)                                              \
      NAME##_rope(const __grid_constant__ PfTmaMap ma, const __grid_constant__ PfTmaMap mw, const float* bias,  \
                  float* C, int M, int N, int K, int g, PfHeadRope hr) {                                      \
    pf_wait_prior();                                                                                          \
    int m, n;                                                                                                 \
    if (pf_block_tile(g, PF_WG_BM, M, m, n))                                                                  \
      pf_wgmma_tile<BN>(ma, mw, bias, nullptr, C, nullptr, M, N, K, m, n, hr.w[0], hr.cs[0], hr.sn[0],       \
                        hr.eps[0], hr.pos0);                                                                  \
  }
#define PF_WGMMA_GROUP_ROPE_ENTRY(NAME, BN)                                                                   \
  extern "C" __global__ void __launch_bounds__(PF_WG_THREADS, 1)                                              \
      NAME##_group_rope(const __grid_constant__ PfTmaMap ma, const __grid_constant__ PfTmaMaps mws,           \
                        PfGemmGroup grp, int M, int K, int g, PfHeadRope hr) {                                \
    pf_wait_prior();                                                                                          \
    int m, t;                                                                                                 \
    if (!pf_block_tile(g, PF_WG_BM, M, m, t)) return;                                                         \
    const int j = pf_group_member(grp, t);                                                                    \
    pf_wgmma_tile<BN>(ma, mws.w[j], grp.bias[j], nullptr, grp.c[j], nullptr, M, grp.n[j], K, m, t, hr.w[j],   \
                      hr.cs[j], hr.sn[j], hr.eps[j], hr.pos0);                                                \
  }
// gate and up of one input, out = silu(gate) * up: column tiles of PF_WG_BN / 2 of each (W's
// boxes of that many rows each); X, Y: the tile grid the CTAs walk (wgmma_swiglu_config).
#define PF_WGMMA_SWIGLU_ENTRY(NAME)                                                                           \
  extern "C" __global__ void __launch_bounds__(PF_WG_THREADS, 1)                                              \
      NAME##_swiglu(const __grid_constant__ PfTmaMap ma, const __grid_constant__ PfTmaMap mg,                 \
                    const __grid_constant__ PfTmaMap mu, void* out, int M, int N, int K, int g, int bf16, int X, \
                    int Y) {                                                                                  \
    pf_wait_prior();                                                                                          \
    pf_wgmma_swiglu_walk(ma, mg, mu, M, K, g, X, Y, [&](const float(&acc)[128], int m0, int n0) {             \
      pf_wgmma_swiglu_store(acc, m0, n0, out, M, N, bf16);                                                    \
    });                                                                                                       \
  }
