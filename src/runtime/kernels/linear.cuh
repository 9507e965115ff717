// Task kind linear: a tile of output rows of one or more weight matrices over one input vector
// (staged in shared memory after its prologue: plain, RMSNorm, or silu(gate) * up), with its
// epilogues (bias, residual, a per-tile argmax partial for the LM head). Rows are dealt to warps
// in groups of kRows, each group's K cut into up to MK_MAX_KSPLIT parts (mk_ksplit); the items
// are dealt to the warps by mk_lin_items, printed from ir::linear_items_nest (proved). The entry
// point mk_linear<DT, kRows> is instantiated once per linear variant of the kernel.

// K parts per row group: a tile's work items are (row group, K part) pairs dealt to the warps
// round-robin; their sums go through shared memory. A small tile is latency-bound: the K split
// with the fewest load rounds one after another in the busiest warp (items per warp times
// rounds per item; a row of `units` vectors, 32 * kUnroll per round), then the one that keeps
// the most warps busy (a tile of 8 rows would otherwise run on 4 of 16 warps), then the fewest
// parts.
__device__ __forceinline__ int mk_ksplit(int groups, int rows, int nw, int units) {
  constexpr int kRound = 32 * MK_LOADS_IN_FLIGHT;
  int best = 1, best_rounds = 0x7fffffff;
  float best_use = 0.f;
  for (int ks = 1; ks <= MK_MAX_KSPLIT; ++ks) {
    if (ks > 1 && rows * ks > MPK_MK_KSPLIT_SLOTS) break;
    const int items = groups * ks;
    const int per_warp = (items + nw - 1) / nw;
    const int rounds = per_warp * (((units + ks - 1) / ks + kRound - 1) / kRound);
    const float use = (float)items / (float)(per_warp * nw);
    if (rounds < best_rounds || (rounds == best_rounds && use > best_use + 1e-6f)) {
      best = ks;
      best_rounds = rounds;
      best_use = use;
    }
  }
  return best;
}

// The input vector of a linear, staged in shared memory as fp32 (after its prologue), and a
// block barrier. Returns the factor every dot product is scaled by: for RMSNorm,
// w . (g * x * r) = r * (w . (g * x)) with r = 1 / sqrt(mean(x^2) + eps), so the staged
// input is g * x and the sum of squares needs no block reduction before it (one barrier).
// The staging loop is printed from its nest (ir::linear_stage_nest): each thread issues its
// round's loads of both operands before using any (the input comes from L2 right after the
// events; one round trip per element cost up to 24 round trips per task).
__device__ float mk_linear_input(const MkTask& t, float* xs, float* red) {
  const int k = t.k;
  const float* x = (const float*)t.x;
  const float* b = t.input_mode == MPK_MK_IN_SILUMUL ? (const float*)t.x2
                   : t.input_mode == MPK_MK_IN_RMSNORM ? (const float*)t.norm_w : nullptr;
  const bool vec = k % 4 == 0 && ((t.x | (u64)b) & 15) == 0;
  float ss = mk_lin_stage(t, x, b, xs, vec, vec ? k / 4 : k);
  if (t.input_mode != MPK_MK_IN_RMSNORM) {
    mk_sync();
    return 1.0f;
  }
  ss = mk_warp_sum(ss);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  mk_sync();
  float sum = 0.f;
  for (int w = 0; w < (int)(MK_COMPUTE_THREADS >> 5); ++w) sum += red[w];
  return 1.0f / sqrtf(sum / (float)k + t.eps);
}

// Whether a linear task's rows can be read with 16-byte vector loads.
template <int DT>
__device__ __forceinline__ bool mk_linear_aligned(const MkTask& t) {
  bool aligned = t.k % MkW<DT>::kVec == 0;
  for (int s = 0; s < t.num_slices; ++s) aligned = aligned && (t.slices[s].w & 15) == 0;
  return aligned;
}

__device__ __forceinline__ int mk_linear_rows(const MkTask& t) {
  int total = 0;
  for (int s = 0; s < t.num_slices; ++s) total += t.slices[s].rows;
  return total;
}

// f(address, bytes) for a linear task's weight rows, slice by slice, up to `bytes` in all.
template <int DT, class F>
__device__ __forceinline__ void mk_weight_rows(const MkTask& t, long long bytes, F f) {
  for (int s = 0; s < t.num_slices && bytes > 0; ++s) {
    const long long b = min((long long)t.slices[s].rows * t.k * MkW<DT>::kSize, bytes);
    f(t.slices[s].w, b);
    bytes -= b;
  }
}

// Weights do not wait: prefetches up to `bytes` of the task's rows into L2 before its events
// (bounded: the tiles of one wave together must stay well inside L2, or lines are evicted
// before their loads reach them). Staging whole tiles in shared memory with cp.async instead
// measured slower (the copy must complete before any row is used).
template <int DT>
__device__ void mk_prefetch_weights(const MkTask& t, long long bytes) {
  mk_weight_rows<DT>(t, bytes, [](u64 w, long long b) { mk_prefetch(w, b); });
}

#if MK_FOLD_DOWN
// The fold's first rows into L2 before the task's events (its columns are a short piece of
// each row, 16-byte pieces of rows far apart): up to MK_FOLD_PREFETCH bytes of rows.
#define MK_FOLD_PREFETCH 65536
template <int DT>
__device__ __forceinline__ void mk_fold_prefetch(const MkTask& t) {
  if (!(t.flags & MPK_MK_F_FOLD)) return;
  const long long seg = (long long)t.slices[0].rows * MkW<DT>::kSize;
  const long long ld = (long long)t.fold_ld * MkW<DT>::kSize;
  const int rows = (int)min((long long)t.fold_rows, MK_FOLD_PREFETCH / seg + 1);
  for (int n = threadIdx.x; n < rows; n += MK_COMPUTE_THREADS) {
    const u64 p = t.fold_w + n * ld;
    for (long long off = 0; off < seg; off += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + seg - 1));
  }
}

// The folded down projection (MPK_MK_F_FOLD), after the tile's outputs are stored: a =
// silu(gate) * up over the tile's rows (slices 0 and 1, as the SiluMul input staging computes
// it), then for every row n of the down matrix the sum over its columns of the tile, added into
// fold_out[n]. A row's vpr 16-byte vectors go to vpr lanes of a group of vp2 (vpr rounded up to
// a power of two), 32 / vp2 rows per warp and load; the group's sums meet by shuffles, so each
// row's sum is written once (acc). Each thread copies MK_LOADS_IN_FLIGHT loads at a time into
// its own shared-memory slots with cp.async (no registers held while they fly: loads into
// registers here made ptxas schedule the whole kernel's weight loops with fewer loads in
// flight) and reads back only its own slots, so its wait_group is the only synchronisation.
// Then one red.global.add per row (four rows per reduction where aligned). xs holds acc, a,
// then the slots (megakernel.cc sizes it). The loops are printed from ir::fold_act_nest,
// fold_rows_nest, fold_scalar_nest and fold_out_nest (proved).
template <int DT>
__device__ void mk_linear_fold(const MkTask& t, float* xs) {
  constexpr int V = MkW<DT>::kVec;
  const int cols = t.slices[0].rows, rows = t.fold_rows;
  float* acc = xs;
  float* a = xs + MPK_MK_FOLD_A(rows);
  mk_sync();  // the outputs stored (block-visible) and xs free
  mk_fold_act(t, a);
  const int vpr = cols / V;
  int vp2 = 1;
  while (vp2 < vpr) vp2 *= 2;
  if (cols % V == 0 && t.fold_ld % V == 0 && (t.fold_w & 15) == 0 && vp2 <= 32) {
    mk_sync();  // a
    mk_fold_rows<DT>(t, a, acc, (uint4*)(xs + MPK_MK_FOLD_SLOTS(rows, cols)), vpr, vp2);
  } else {
    mk_fold_scalar<DT>(t, a, acc);
  }
  mk_sync();
  mk_fold_out(t, acc);
}
#endif

// A linear tile, variant kRows (output rows a warp streams together). Before `wait` (the task's
// events): each warp loads the first round of its first work item into registers, then the
// L2 prefetch of the tile's start. With its weights staged (stage.cuh) it issues nothing: after
// the wait and its input, it waits for their copy and reads them from shared memory. Profile
// sessions: records its phases (mk_time). Returns false when the wait aborted the launch.
template <int DT, int kRows, class Wait>
__device__ bool mk_linear(const MkTask& t, float* xs, float* red, int* redi, float* part_sums,
                          long long prefetch_bytes, MkDraw draw, MkStaged st, Wait wait) {
  const int warp = threadIdx.x >> 5, nw = MK_COMPUTE_THREADS >> 5;
  const int k = t.k;
  constexpr int V = MkW<DT>::kVec;
  const int total = mk_linear_rows(t);
  const bool aligned = mk_linear_aligned<DT>(t);
  // Row groups of kRows (the last may be shorter) times K parts of whole vectors.
  const int groups = (total + kRows - 1) / kRows;
  const int unit = aligned ? V : 1, units = k / unit;
  const int ks = mk_ksplit(groups, total, nw, units);
  const int full_items = (total / kRows) * ks;  // the items of full row groups
  float scale = 1.0f;
#if MK_STAGE
  if (st.rec && mk_stage_bytes<DT>(t, st.size) > 0) {  // then aligned
    if (!wait()) return false;
    scale = mk_linear_input(t, xs, red);
    mk_stage_late<DT>();
    mk_time(MPK_MK_T_INPUT);
    const MkStageRec rec = *st.rec;
    const char* ws = st.ring + rec.off;  // the tile's rows in the staging ring
    mk_mbar_wait((unsigned)rec.bar, (unsigned)rec.parity);
    mk_time(MPK_MK_T_WEIGHTS);
    const uint4 none[kRows][MK_LOADS_IN_FLIGHT] = {};  // no first round: never read
    mk_lin_items<DT, kRows, true>(t, xs, scale, total, ks, units, unit, true, part_sums, false, none, ws);
  } else
#endif
  {
    uint4 pre[kRows][MK_LOADS_IN_FLIGHT];
    bool have_pre = false;
    if (aligned && warp < full_items) {
      int k0, k1;
      mk_kpart(mk_lin_part(warp, ks), ks, units, unit, k0, k1);
      const char* w[kRows];
      int slice[kRows], local[kRows];
      mk_group_rows<DT, kRows>(t, mk_lin_row0(warp, ks, kRows), w, slice, local);
      // Warp 0 holds the polling thread: without MK_POLL_WARP_LOADS its first round goes to L2
      // only, so that the wait's polls do not queue behind its own loads.
      if (MK_POLL_WARP_LOADS || warp != 0) {
        mk_dot_first<kRows>(w, k0 / V, k1 / V - k0 / V, pre);
        have_pre = true;
      } else {
        mk_prefetch_round<kRows>(w, k0 / V, k1 / V, 0);
      }
      for (int a = 1; a <= MK_PREFETCH_ROUNDS; ++a) mk_prefetch_round<kRows>(w, k0 / V, k1 / V, a);
    }
    mk_prefetch_weights<DT>(t, prefetch_bytes);
#if MK_FOLD_DOWN
    mk_fold_prefetch<DT>(t);
#endif
    if (!wait()) return false;
    scale = mk_linear_input(t, xs, red);
    mk_stage_late<DT>();
    mk_time(MPK_MK_T_INPUT);
    mk_lin_items<DT, kRows, false>(t, xs, scale, total, ks, units, unit, aligned, part_sums, have_pre, pre,
                                   nullptr);
  }
  if (mk_timers()) {  // profile sessions only: one more barrier, so that the timer sees every warp
    mk_sync();
    mk_time(MPK_MK_T_DOTS);
  }
  // Several K parts: their sums folded per row (printed from ir::linear_fold_nest, proved).
  mk_lin_fold(t, part_sums, total, ks, scale);

  // An LM-head tile: its argmax partial over the stored logits (printed from
  // ir::linear_argmax_nest, proved).
  if (t.flags & MPK_MK_F_ARGMAX) {
    mk_sync();
    float best = MK_NEG_INF;
    int bi = 0x7fffffff;
    mk_lin_argmax(t, total, draw, best, bi);
    mk_block_argmax(best, bi, red, redi);
    if (threadIdx.x == 0) {
      *(float*)t.part_val = best;
      *(int*)t.part_idx = bi;
    }
  }
#if MK_FOLD_DOWN
  if (t.flags & MPK_MK_F_FOLD) mk_linear_fold<DT>(t, xs);
#endif
  return true;
}
