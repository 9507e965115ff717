// Prefill projections on the tensor cores: C[M, N] = A[M, K] W[N, K]^T (+ bias[N]) (+ R[M, N]).
// A bf16 row major (its producer rounded it: the operand the tensor cores take), W bf16 in the
// nn.Linear layout (the column-major B operand of mma.sync), R and C fp32. K % 8 == 0.
//
// A CTA computes a BM x BN tile with WARPS_M x WARPS_N warps over K in steps of 32, both
// operands streamed by cp.async through a ring of STAGES buffers: while step k is multiplied,
// steps k+1 .. k+STAGES-1 are in flight; one barrier per step separates the refill of a buffer
// from the reads of its previous use. Fragment, load and split indices come from the printed
// formulas of ir/layouts.h (proved at load). With gridDim.z > 1 the K steps are split among z; each
// writes its fp32 partial tile to `partial` ([z][M][N]) and pf_gemm_reduce adds them in order
// (deterministic), then the bias and the residual.


// Calls f(i, r, c) for accumulator i = (mi * NI + ni) * 4 + h * 2 + e of this thread, the
// element at row r = om + pf_frag_row<WN, WTM>(warp, mi, lane, h) and column c = on +
// pf_frag_col<WN, WTN>(warp, ni, lane, e) of the output (a warp's fragments of a tile).
template <int MI, int NI, int WN, int WTM, int WTN, typename F>
__device__ __forceinline__ void pf_tile_each(int om, int on, F&& f) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          f((mi * NI + ni) * 4 + h * 2 + e, om + pf_frag_row<WN, WTM>(warp, mi, lane, h),
            on + pf_frag_col<WN, WTN>(warp, ni, lane, e));
}

// pf_tile_each by pairs of columns: f(i, r, c) for accumulators i (e = 0) and i + 1 (e = 1) of
// this thread, the elements at row r and columns c (even) and c + 1.
template <int MI, int NI, int WN, int WTM, int WTN, typename F>
__device__ __forceinline__ void pf_tile_pairs(int om, int on, F&& f) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        f((mi * NI + ni) * 4 + h * 2, om + pf_frag_row<WN, WTM>(warp, mi, lane, h),
          on + pf_frag_col<WN, WTN>(warp, ni, lane, 0));
}

// Stores the accumulators of a BM x BN tile at (om, on) (pf_tile_each's order) into the M x N
// output `out`, those inside it; unless `split` (out: a K part's partial tile) with the bias and
// then the residual R added, the reference's order: (x . w + b) + residual. Each add is a pass of
// its own with no store and no branch, so that its loads are in flight together (one load per
// store would put a round trip to memory between every two stores): an element past M or N
// adds the value at its row and column clamped into the output, in this tile too, and is not
// stored. R is not C (the host never passes one buffer as both: a step's output never shares
// its inputs' memory). With PAIRS and N even, a thread's two adjacent columns (c even) are one
// 8-byte load of R and one 8-byte store: half the instructions and no sector written twice; R
// and out are then 8-byte aligned (the host's buffers and slots are 256-byte aligned, a
// partial's z offset M N floats). Both columns are inside the output or neither (c even, N
// even), and a pair past it adds R's last pair of its row.
template <int BM, int BN, int MI, int NI, int WN, int WTM, int WTN, bool PAIRS>
__device__ __forceinline__ void pf_tile_store(float* acc, int om, int on, int M, int N, const float* __restrict__ bias,
                                              const float* __restrict__ R, float* __restrict__ out, bool split) {
  if (!split && bias)
    pf_tile_each<MI, NI, WN, WTM, WTN>(om, on, [&](int i, int, int c) { acc[i] += bias[min(c, N - 1)]; });
  const bool whole = om + BM <= M && on + BN <= N;  // no bounds checks
  if (PAIRS && N % 2 == 0) {
    if (!split && R) {
      const float* __restrict__ rt = R + (long long)om * N + on;  // int offsets from the tile's corner
      pf_tile_pairs<MI, NI, WN, WTM, WTN>(om, on, [&](int i, int r, int c) {
        const float2 v = *(const float2*)&rt[(min(r, M - 1) - om) * N + (min(c, N - 2) - on)];
        acc[i] += v.x;
        acc[i + 1] += v.y;
      });
    }
    pf_tile_pairs<MI, NI, WN, WTM, WTN>(om, on, [&](int i, int r, int c) {
      if (whole || (r < M && c < N)) pf_store2(out, (long long)r * N + c, acc[i], acc[i + 1], 0);
    });
    return;
  }
  if (!split && R) {
    const float* __restrict__ rt = R + (long long)om * N + on;
    pf_tile_each<MI, NI, WN, WTM, WTN>(om, on, [&](int i, int r, int c) {
      acc[i] += rt[(min(r, M - 1) - om) * N + (min(c, N - 1) - on)];
    });
  }
  if (whole)
    pf_tile_each<MI, NI, WN, WTM, WTN>(om, on, [&](int i, int r, int c) { out[(long long)r * N + c] = acc[i]; });
  else
    pf_tile_each<MI, NI, WN, WTM, WTN>(om, on, [&](int i, int r, int c) {
      if (r < M && c < N) out[(long long)r * N + c] = acc[i];
    });
}

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES>
__device__ __forceinline__ void pf_gemm_tile(const pf_bf16* __restrict__ A, const pf_bf16* __restrict__ W,
                                             const float* __restrict__ bias, const float* R, float* C,
                                             float* __restrict__ partial, int M, int N, int K, int m_tile,
                                             int n_tile) {
  constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;  // warp tile
  constexpr int MI = WTM / 16, NI = WTN / 8;
  constexpr int PF_BK = BK, PF_LDS = BK + 8;  // row stride: (BK + 8) * 2 bytes puts ldmatrix's 8 rows on distinct banks
  constexpr int CH = BK / 8;                  // 16-byte chunks per row and step
  static_assert(MI >= 1 && NI % 2 == 0, "warp tile");
  pf_bf16* sa = (pf_bf16*)pf_smem_raw;               // [STAGES][BM * PF_LDS]
  pf_bf16* sb = sa + STAGES * BM * PF_LDS;           // [STAGES][BN * PF_LDS]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // The tile's origin lives in shared memory, read again after each barrier: kept in registers
  // across the mainloop it makes the 128 x 256 tile spill.
  __shared__ int origin[2];
  if (tid == 0) origin[0] = m_tile * BM, origin[1] = n_tile * BN;
  __syncthreads();
  const int wm = (warp / WARPS_N) * WTM, wn = (warp % WARPS_N) * WTN;
  const int ktiles = (K + BK - 1) / BK;
  // This CTA's part of the K steps: the even split (ir/layouts.h), none empty as the host keeps
  // gridDim.z <= ktiles.
  const int kt0 = int(pf_even_split_begin(blockIdx.z, ktiles, gridDim.z));
  const int kt1 = int(pf_even_split_end(blockIdx.z, ktiles, gridDim.z));

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  // Step kt into ring slot `slot`: rows of 4 chunks of 16 bytes; zeros outside [M|N, K).
  static_assert(BM * CH % THREADS == 0 && BN * CH % THREADS == 0, "whole rounds of chunks");
  auto load = [&](int kt, int slot) {
    pf_bf16* da = sa + slot * BM * PF_LDS;
    pf_bf16* db = sb + slot * BN * PF_LDS;
    const int m0 = origin[0], n0 = origin[1];
#pragma unroll
    for (int i = 0; i < BM * CH / THREADS; ++i) {
      const int r = pf_chunk_row<THREADS, CH>(tid, i), c = pf_chunk_col<THREADS, CH>(tid, i), k = kt * PF_BK + c;
      const bool ok = m0 + r < M && k < K;
      pf_cp_async16(da + r * PF_LDS + c, ok ? A + (long long)(m0 + r) * K + k : A, ok);
    }
#pragma unroll
    for (int i = 0; i < BN * CH / THREADS; ++i) {
      const int r = pf_chunk_row<THREADS, CH>(tid, i), c = pf_chunk_col<THREADS, CH>(tid, i), k = kt * PF_BK + c;
      const bool ok = n0 + r < N && k < K;
      pf_cp_async16(db + r * PF_LDS + c, ok ? W + (long long)(n0 + r) * K + k : W, ok);
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (kt0 + s < kt1) load(kt0 + s, s);
    pf_cp_async_commit();  // empty groups keep the count uniform
  }
  for (int kt = kt0; kt < kt1; ++kt) {
    const int slot = (kt - kt0) % STAGES;
    pf_cp_async_wait<STAGES - 2>();
    __syncthreads();  // step kt has landed for everyone; slot (kt - 1) % STAGES is free
    if (kt + STAGES - 1 < kt1) load(kt + STAGES - 1, (kt - kt0 + STAGES - 1) % STAGES);
    pf_cp_async_commit();
    const pf_bf16* ta = sa + slot * BM * PF_LDS;
    const pf_bf16* tb = sb + slot * BN * PF_LDS;
#pragma unroll
    for (int kk = 0; kk < PF_BK; kk += 16) {
      unsigned af[MI][4], bf[NI / 2][4];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        pf_ldmatrix_x4(af[mi], ta + (wm + mi * 16 + pf_ldsm_a_row(lane)) * PF_LDS + kk + pf_ldsm_a_col(lane));
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj)
        pf_ldmatrix_x4(bf[nj], tb + (wn + nj * 16 + pf_ldsm_b_row(lane)) * PF_LDS + kk + pf_ldsm_b_col(lane));
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
          pf_mma(acc[mi][ni], af[mi], bf[ni >> 1][(ni & 1) * 2], bf[ni >> 1][(ni & 1) * 2 + 1]);
    }
  }
  pf_cp_async_wait<0>();
  const int om = origin[0], on = origin[1];

  const bool split = gridDim.z > 1;
  // The 128 x 256 tile's 128 accumulators per thread and its fragments leave no registers for
  // the pairs' code: ptxas spills it (prefill_test compiles every entry for sm_90a and checks
  // for spills; builds for other archs are not checked).
  constexpr bool kPairs = MI * NI * 4 < 128;
  pf_tile_store<BM, BN, MI, NI, WARPS_N, WTM, WTN, kPairs>(&acc[0][0][0], om, on, M, N, bias, R,
                                                           split ? partial + (long long)blockIdx.z * M * N : C, split);
}

// Up to PF_GROUP_MAX projections of one input: weights, biases (or null), outputs, widths and
// column tiles of each (the host's PfGemmGroup has the same layout).
#define PF_GROUP_MAX 3
struct PfGemmGroup {
  const pf_bf16* w[PF_GROUP_MAX];
  const float* bias[PF_GROUP_MAX];
  float* c[PF_GROUP_MAX];
  int n[PF_GROUP_MAX];
  int tiles[PF_GROUP_MAX];
  int count;
};

// This block's tile (m_tile, n_tile) in the tile order with groups of g tile rows (ir/layouts.h:
// TileOrder); false for a block past the last tile row, which has nothing to do.
__device__ __forceinline__ bool pf_block_tile(int g, int bm, int M, int& m_tile, int& n_tile) {
  m_tile = pf_tile_m(blockIdx.x, blockIdx.y, g);
  n_tile = pf_tile_n(blockIdx.x, g);
  return m_tile * bm < M;
}
// The member of a group that column tile t falls in; t becomes the member's own column tile.
__device__ __forceinline__ int pf_group_member(const PfGemmGroup& grp, int& t) {
  int j = 0;
  while (j + 1 < grp.count && t >= grp.tiles[j]) t -= grp.tiles[j++];
  return j;
}

// A tile shape's entries: large for grids of a wave or more, small (with a K split) for short
// prompts and narrow outputs. g: the tile order's group (the host's tile_grid).
#define PF_GEMM_ENTRY(NAME, BM, BN, BK, WM, WN, STAGES)                                                    \
  extern "C" __global__ void __launch_bounds__(32 * WM * WN)                                               \
      NAME(const pf_bf16* A, const pf_bf16* W, const float* bias, const float* R, float* C, float* partial, \
           int M, int N, int K, int g) {                                                                   \
    pf_wait_prior();                                                                                       \
    int m, n;                                                                                              \
    if (pf_block_tile(g, BM, M, m, n))                                                                     \
      pf_gemm_tile<BM, BN, BK, WM, WN, STAGES>(A, W, bias, R, C, partial, M, N, K, m, n);                  \
  }                                                                                                        \
  /* Projections of one input in one grid (q, k, v; gate, up): the column tiles run over the */          \
  /* members' in order. No K split, no residual. */                                                       \
  extern "C" __global__ void __launch_bounds__(32 * WM * WN)                                               \
      NAME##_group(const pf_bf16* A, PfGemmGroup grp, int M, int K, int g) {                               \
    pf_wait_prior();                                                                                       \
    int m, t;                                                                                              \
    if (!pf_block_tile(g, BM, M, m, t)) return;                                                            \
    const int j = pf_group_member(grp, t);                                                                 \
    pf_gemm_tile<BM, BN, BK, WM, WN, STAGES>(A, grp.w[j], grp.bias[j], nullptr, grp.c[j], nullptr, M,       \
                                             grp.n[j], K, m, t);                                           \
  }
// The entries (PF_GEMM_ENTRY lines) are printed after these files from the host's tile table
// (runtime/prefill_gemm.cc: gemm_tile), which its launches and proofs read too.

// C = sum over z of partial[z] (in z order) (+ bias) (+ R) (ir::prefill_gemm_reduce_nest).
extern "C" __global__ void pf_gemm_reduce(const float* __restrict__ partial, int splits, const float* __restrict__ bias,
                                          const float* R, float* C, int M, int N) {
  pf_wait_prior();
  pf_gemm_reduce_all(partial, splits, bias, R, C, M, N);
}

// The head norms and RoPE pf_gemm_reduce_group applies to its members' rows (w[j] null: none):
// pf_head_norm_rope's arguments per member, the input the member's reduced output.
struct PfRowRope {
  const float* w[PF_GROUP_MAX];
  const float* inv_freq[PF_GROUP_MAX];
  float* out[PF_GROUP_MAX];
  int heads[PF_GROUP_MAX], D[PF_GROUP_MAX];
  float eps[PF_GROUP_MAX];
  int pos0;
};

// A group's K split, a block per row (blockIdx.x) of a member (blockIdx.y): the member's
// partials parts.c[j] ([splits][M][out.n[j]]) summed into out.c[j] with out.bias[j] as
// pf_gemm_reduce would (ir::prefill_gemm_reduce_row_nest); then, where rr names the member, the
// row's head norm and RoPE from there into rr.out[j], as pf_head_norm_rope. The block reads
// back only its own row, after a barrier.
extern "C" __global__ void __launch_bounds__(PF_ROW_THREADS)
pf_gemm_reduce_group(PfGemmGroup parts, int splits, PfGemmGroup out, int M, PfRowRope rr) {
  pf_wait_prior();
  __shared__ float cs[PF_ROPE_MAX_D / 2], sn[PF_ROPE_MAX_D / 2];
  __shared__ float buf[PF_ROW_THREADS / 32][PF_ROPE_MAX_D];
  const int j = blockIdx.y;
  if (j >= out.count) return;
  pf_gemm_reduce_row(parts.c[j], splits, out.bias[j], out.c[j], M, out.n[j]);
  if (!rr.w[j]) return;
  __syncthreads();
  pf_head_norm_rope_row(out.c[j], rr.w[j], rr.inv_freq[j], rr.out[j], cs, sn, &buf[0][0], rr.heads[j], rr.D[j],
                        rr.eps[j], rr.pos0);
}
