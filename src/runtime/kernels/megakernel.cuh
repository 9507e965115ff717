// The megakernel: one persistent CTA per worker runs its static queue of tasks once per decode
// step, for params.num_steps steps back to back. The code generator prepends the code
// parameters as #defines (MK_BLOCK_THREADS, MK_ROWS_PER_WARP, MK_LOADS_IN_FLIGHT,
// MK_MAX_KSPLIT, MK_HEADS_PER_PASS, MK_PREFETCH_ROUNDS, MK_MERGE_BATCH, MK_MAX_HEAD_DIM,
// MK_RING_STAGES, MK_POLL_WARP_LOADS, and the derived MK_RING_BYTES: runtime/kernel_params.h) and
// kernels/task_desc.h. No headers: NVRTC needs none.
//
// Per task (its descriptor already copied to shared memory while the previous task ran): issue
// the start of the task's weight loads (a linear tile's first round of loads into registers, or
// its first rounds into the shared-memory ring, and an L2 prefetch of its first bytes;
// attention's KV history into L2: weights do not wait), wait
// on each event (thread 0 spins on acquire loads until counter >= need * epoch; the epoch is
// the step, or the step before for a read of what the previous step carried over), compute (a
// linear may keep MK_PREFETCH_ROUNDS rounds of L2 prefetch ahead of its loads), barrier, and
// thread 0 publishes with a release (fence.acq_rel and a relaxed add) on its trigger event. A
// wait longer than params.timeout_ns records the failure in the control block and every worker
// leaves the launch (no hang).
//
// Numerics: weights widened exactly to fp32, fp32 activations and accumulation, fp32 KV cache;
// formulas as src/ref/kernels.cc (no fast math), two of them reassociated: attention sums in
// online-softmax order, and RMSNorm's 1/rms scales the projection's dot products instead of
// its input (w . (g * x * r) = r * (w . (g * x))).

#define MK_F32 0
#define MK_BF16 1
#define MK_F16 2

typedef unsigned long long u64;

__device__ __forceinline__ unsigned long long mk_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ float mk_bf16_to_f32(unsigned short h) {
  return __uint_as_float(((unsigned)h) << 16);
}

__device__ __forceinline__ float mk_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

template <int DT>
struct MkW;
template <>
struct MkW<MK_F32> {
  static constexpr int kSize = 4;
  static constexpr int kVec = 4;  // elements per 16-byte load
  __device__ static float load(const void* p, long long i) { return ((const float*)p)[i]; }
  __device__ static void unpack(uint4 u, float* f) {
    f[0] = __uint_as_float(u.x); f[1] = __uint_as_float(u.y);
    f[2] = __uint_as_float(u.z); f[3] = __uint_as_float(u.w);
  }
};

// 16-bit weights: one widening rule per dtype, shared by the scalar and the vector loads.
template <int DT>
__device__ __forceinline__ float mk_half_to_f32(unsigned short h) {
  return DT == MK_BF16 ? mk_bf16_to_f32(h) : mk_f16_to_f32(h);
}
template <int DT>
struct MkHalfW {
  static constexpr int kSize = 2;
  static constexpr int kVec = 8;
  __device__ static float load(const void* p, long long i) {
    return mk_half_to_f32<DT>(((const unsigned short*)p)[i]);
  }
  __device__ static void unpack(uint4 u, float* f) {
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = mk_half_to_f32<DT>((unsigned short)(w[j] & 0xffffu));
      f[2 * j + 1] = mk_half_to_f32<DT>((unsigned short)(w[j] >> 16));
    }
  }
};
template <>
struct MkW<MK_BF16> : MkHalfW<MK_BF16> {};
template <>
struct MkW<MK_F16> : MkHalfW<MK_F16> {};

__device__ __forceinline__ float mk_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Argmax pairs: the first maximum wins; a NaN counts as the maximum (first NaN wins).
__device__ __forceinline__ void mk_better(float& v, int& i, float v2, int i2) {
  const bool n1 = v != v, n2 = v2 != v2;
  bool take;
  if (n1 || n2)
    take = (n1 && n2) ? i2 < i : n2;
  else
    take = v2 > v || (v2 == v && i2 < i);
  if (take) { v = v2; i = i2; }
}

__device__ void mk_block_argmax(float& v, int& i, float* redv, int* redi) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float v2 = __shfl_xor_sync(0xffffffffu, v, o);
    int i2 = __shfl_xor_sync(0xffffffffu, i, o);
    mk_better(v, i, v2, i2);
  }
  __syncthreads();
  if (lane == 0) { redv[warp] = v; redi[warp] = i; }
  __syncthreads();
  v = redv[0];
  i = redi[0];
  for (int w = 1; w < nw; ++w) mk_better(v, i, redv[w], redi[w]);
}

// Streaming 16-byte weight load: read once per step, so keep it out of L1.
__device__ __forceinline__ uint4 mk_ld_stream(const uint4* p) {
  uint4 u;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
               : "l"(p));
  return u;
}

// Adds round i of R rows (kUnroll 16-byte vectors per row and lane, 32 vectors apart) to acc;
// Partial: only the vectors below v1 (the row's last round).
template <int DT, int R, bool Partial = false>
__device__ __forceinline__ void mk_dot_round(const uint4 (&u)[R][MK_LOADS_IN_FLIGHT],
                                             const float* xs, int i, float (&acc)[R], int v1 = 0) {
  constexpr int V = MkW<DT>::kVec;
#pragma unroll
  for (int j = 0; j < MK_LOADS_IN_FLIGHT; ++j) {
    if (Partial && i + 32 * j >= v1) continue;
    const float* xv = xs + (i + 32 * j) * V;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float f[V];
      MkW<DT>::unpack(u[r][j], f);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[r] += f[e] * xv[e];
    }
  }
}

// Issues round i of R rows' loads (see mk_dot_round); Partial: only the vectors below v1.
template <int R, bool Partial = false>
__device__ __forceinline__ void mk_load_round(const char* const (&w)[R], int i,
                                              uint4 (&u)[R][MK_LOADS_IN_FLIGHT], int v1 = 0) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < MK_LOADS_IN_FLIGHT; ++j)
      u[r][j] = !Partial || i + 32 * j < v1 ? mk_ld_stream((const uint4*)w[r] + i + 32 * j)
                                            : make_uint4(0u, 0u, 0u, 0u);
}

// L2 prefetch of the round `ahead` rounds after the one starting at vector v0 (this lane's
// index less its lane) of R rows that end at vector v1: a round is 32 * kUnroll vectors (4 *
// kUnroll lines of 128 bytes) per row, and the lanes share its lines. Streaming loads keep only
// kUnroll * R vectors per lane in flight; the prefetch keeps DRAM busy while they are consumed.
template <int R>
__device__ __forceinline__ void mk_prefetch_round(const char* const (&w)[R], int v0, int v1, int ahead) {
  constexpr int kLines = 4 * MK_LOADS_IN_FLIGHT;  // per row and round
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int q = lane; q < kLines * R; q += 32) {
    const int r = q / kLines;
    const long long byte = ((long long)v0 + 32LL * MK_LOADS_IN_FLIGHT * ahead) * 16 + (q % kLines) * 128;
    if (byte < (long long)v1 * 16) asm volatile("prefetch.global.L2 [%0];" ::"l"(w[r] + byte));
  }
}

// x . w_r over the elements [k0, k1) for R rows by one warp; the results in every lane.
// Decode is bound by how many bytes are in flight: every lane issues R * kUnroll independent
// 16-byte loads before it uses any of them, the last (partial) round too. `aligned`: the rows
// are 16-byte aligned and k0, k1 are multiples of the vector width. `pre`: when non-null, the
// lane's first round (partial when the part is shorter), loaded by the caller before the
// task's events.
template <int DT, int R>
__device__ __forceinline__ void mk_dot_rows(const char* const (&w)[R], const float* xs, int k0,
                                            int k1, bool aligned,
                                            const uint4 (*pre)[MK_LOADS_IN_FLIGHT],
                                            float (&out)[R]) {
  const int lane = threadIdx.x & 31;
  constexpr int V = MkW<DT>::kVec;
  constexpr int kUnroll = MK_LOADS_IN_FLIGHT;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  if (aligned) {
    const int v1 = k1 / V;
    int i = k0 / V + lane;
    if (pre) {
      mk_dot_round<DT, R, true>(*(const uint4(*)[R][kUnroll])pre, xs, i, acc, v1);
      i += 32 * kUnroll;
    }
    for (; i + 32 * (kUnroll - 1) < v1; i += 32 * kUnroll) {
      uint4 u[R][kUnroll];
      mk_load_round<R>(w, i, u);
      if (MK_PREFETCH_ROUNDS > 0) mk_prefetch_round<R>(w, i - lane, v1, MK_PREFETCH_ROUNDS);
      mk_dot_round<DT, R>(u, xs, i, acc);
    }
    if (i < v1) {
      uint4 u[R][kUnroll];
      mk_load_round<R, true>(w, i, u, v1);
      mk_dot_round<DT, R, true>(u, xs, i, acc, v1);
    }
  } else {
    for (int i = k0 + lane; i < k1; i += 32)
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] += MkW<DT>::load(w[r], i) * xs[i];
  }
#pragma unroll
  for (int r = 0; r < R; ++r) out[r] = mk_warp_sum(acc[r]);
}

// L2 prefetch of `bytes` from p, spread over the block.
__device__ __forceinline__ void mk_prefetch(u64 p, long long bytes) {
  for (long long off = (long long)threadIdx.x * 128; off < bytes; off += (long long)blockDim.x * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
}

// Row r of a tile's concatenated slices -> (slice, row within the slice).
__device__ __forceinline__ void mk_row_of(const MkTask& t, int r, int& slice, int& local) {
  int s = 0;
  while (r >= t.slices[s].rows) { r -= t.slices[s].rows; ++s; }
  slice = s;
  local = r;
}

// Epilogue of one output row: bias, then residual, in fp32, as the reference (bias and res are
// the slice's values at the row, loaded by the caller).
__device__ __forceinline__ void mk_store_out(const MkSlice& sl, int lr, float v, float bias, float res) {
  if (sl.bias) v = v + bias;
  if (sl.res) v = v + res;
  ((float*)sl.out)[lr] = v;
}

__device__ __forceinline__ void mk_store_row(const MkSlice& sl, int lr, float v) {
  mk_store_out(sl, lr, v, sl.bias ? ((const float*)sl.bias)[lr] : 0.f,
               sl.res ? ((const float*)sl.res)[lr] : 0.f);
}

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

// The rows of a tile's row group r0 .. r0 + R - 1: their weight rows, slices and rows within them.
template <int DT, int R>
__device__ __forceinline__ void mk_group_rows(const MkTask& t, int r0, const char* (&w)[R],
                                              int (&slice)[R], int (&local)[R]) {
  const long long row_bytes = (long long)t.k * MkW<DT>::kSize;
#pragma unroll
  for (int j = 0; j < R; ++j) {
    mk_row_of(t, r0 + j, slice[j], local[j]);
    w[j] = (const char*)t.slices[slice[j]].w + (long long)local[j] * row_bytes;
  }
}

// Where a row group's sums go: its rows' slices and rows within them, and the epilogue's bias
// and residual, loaded by lane 0 before the dot products (not after them) when K is not split.
template <int R>
struct MkGroupOut {
  int slice[R], local[R];
  float bias[R], res[R];
};

template <int DT, int R>
__device__ __forceinline__ void mk_group_out(const MkTask& t, int r0, int ks, const char* (&w)[R],
                                             MkGroupOut<R>& o) {
  mk_group_rows<DT, R>(t, r0, w, o.slice, o.local);
  const bool lead = (threadIdx.x & 31) == 0 && ks == 1;
#pragma unroll
  for (int j = 0; j < R; ++j) {
    const MkSlice& sl = t.slices[o.slice[j]];
    o.bias[j] = lead && sl.bias ? ((const float*)sl.bias)[o.local[j]] : 0.f;
    o.res[j] = lead && sl.res ? ((const float*)sl.res)[o.local[j]] : 0.f;
  }
}

// Lane 0 writes a row group's sums of K part p: scaled to the output with its epilogue (one
// part), or to part_sums (several: added in part order afterwards, then scaled).
template <int R>
__device__ __forceinline__ void mk_group_store(const MkTask& t, const MkGroupOut<R>& o,
                                               const float (&acc)[R], float scale, int r0, int p,
                                               int ks, int total, float* part_sums) {
  if ((threadIdx.x & 31) != 0) return;
#pragma unroll
  for (int j = 0; j < R; ++j) {
    if (ks == 1)
      mk_store_out(t.slices[o.slice[j]], o.local[j], acc[j] * scale, o.bias[j], o.res[j]);
    else
      part_sums[p * total + r0 + j] = acc[j];
  }
}

// Output rows of a tile: rows r of the tile take scale * (x . w_r) over K part p, written
// straight to the output (one part) or to part_sums (several: added in part order afterwards,
// then scaled). `pre`: the lane's first round of loads, issued before the events.
template <int DT, int R>
__device__ __forceinline__ void mk_linear_item(const MkTask& t, const float* xs, float scale,
                                               int r0, int k0, int k1, bool aligned, int p,
                                               int ks, int total, float* part_sums,
                                               const uint4 (*pre)[MK_LOADS_IN_FLIGHT]) {
  const char* w[R];
  MkGroupOut<R> o;
  mk_group_out<DT, R>(t, r0, ks, w, o);
  float acc[R];
  mk_dot_rows<DT, R>(w, xs, k0, k1, aligned, pre, acc);
  mk_group_store<R>(t, o, acc, scale, r0, p, ks, total, part_sums);
}

// 16 bytes of an activation written in this step by other workers (visible after the task's
// acquire and barrier): an L2 load, never a stale L1 line.
__device__ __forceinline__ float4 mk_ld_act4(const float* p) { return __ldcg((const float4*)p); }

#define MK_IN_UNROLL 2

// The input vector of a linear, staged in shared memory as fp32 (after its prologue), and a
// block barrier. Returns the factor every dot product is scaled by: for RMSNorm,
// w . (g * x * r) = r * (w . (g * x)) with r = 1 / sqrt(mean(x^2) + eps), so the staged
// input is g * x and the sum of squares needs no block reduction before it (one barrier).
// Each thread issues MK_IN_UNROLL 16-byte loads of each operand before using any: the input
// comes from L2 right after the events, and one round trip per element (the compiler cannot
// move a load above the previous element's shared store) cost up to 24 round trips per task.
__device__ float mk_linear_input(const MkTask& t, float* xs, float* red) {
  const int k = t.k;
  const float* x = (const float*)t.x;
  const float* b = t.input_mode == MPK_MK_IN_SILUMUL ? (const float*)t.x2
                   : t.input_mode == MPK_MK_IN_RMSNORM ? (const float*)t.norm_w : nullptr;
  float ss = 0.f;
  const bool vec = k % 4 == 0 && ((t.x | (u64)b) & 15) == 0;
  const int n = vec ? k / 4 : k, step = blockDim.x * MK_IN_UNROLL;
  for (int i0 = threadIdx.x; i0 < n; i0 += step) {
    float4 a4[MK_IN_UNROLL] = {}, b4[MK_IN_UNROLL] = {};
#pragma unroll
    for (int u = 0; u < MK_IN_UNROLL; ++u) {
      const int i = i0 + u * (int)blockDim.x;
      if (i >= n) continue;
      if (vec) {
        a4[u] = mk_ld_act4(x + 4 * i);
        if (b) b4[u] = mk_ld_act4(b + 4 * i);
      } else {
        a4[u].x = x[i];
        if (b) b4[u].x = b[i];
      }
    }
#pragma unroll
    for (int u = 0; u < MK_IN_UNROLL; ++u) {
      const int i = i0 + u * (int)blockDim.x;
      if (i >= n) continue;
      float av[4] = {a4[u].x, a4[u].y, a4[u].z, a4[u].w}, bv[4] = {b4[u].x, b4[u].y, b4[u].z, b4[u].w};
      float o[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (t.input_mode == MPK_MK_IN_SILUMUL) {
          o[e] = av[e] / (1.0f + expf(-av[e])) * bv[e];
        } else if (t.input_mode == MPK_MK_IN_RMSNORM) {
          o[e] = bv[e] * av[e];
          if (vec || e == 0) ss += av[e] * av[e];
        } else {
          o[e] = av[e];
        }
      }
      if (vec)
        *(float4*)(xs + 4 * i) = make_float4(o[0], o[1], o[2], o[3]);
      else
        xs[i] = o[0];
    }
  }
  if (t.input_mode != MPK_MK_IN_RMSNORM) {
    __syncthreads();
    return 1.0f;
  }
  ss = mk_warp_sum(ss);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  float sum = 0.f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) sum += red[w];
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

// Weights do not wait: prefetches up to `bytes` of the task's rows into L2 before its events
// (bounded: the tiles of one wave together must stay well inside L2, or lines are evicted
// before their loads reach them). Staging whole tiles in shared memory with cp.async instead
// measured slower (the copy must complete before any row is used).
template <int DT>
__device__ void mk_prefetch_weights(const MkTask& t, long long bytes) {
  for (int s = 0; s < t.num_slices && bytes > 0; ++s) {
    const long long b = (long long)t.slices[s].rows * t.k * MkW<DT>::kSize;
    mk_prefetch(t.slices[s].w, b < bytes ? b : bytes);
    bytes -= b;
  }
}

// K part p of ks of a row of `units` vector units (unit elements each): elements [k0, k1).
__device__ __forceinline__ void mk_kpart(int p, int ks, int units, int unit, int& k0, int& k1) {
  k0 = (int)((long long)p * units / ks) * unit;
  k1 = (int)((long long)(p + 1) * units / ks) * unit;
}

// The shared-memory weight ring (MK_RING_STAGES > 0): each lane streams its own 16-byte vectors
// of the warp's rows into its own ring slots with cp.async (L2 only) and reads back only what it
// copied, so the per-thread cp.async.wait_group is the only synchronisation. A round is
// MK_LOADS_IN_FLIGHT vectors per row and lane (32 apart), one commit group; MK_RING_STAGES - 1
// rounds stay in flight while one is consumed (registers bound how many loads a lane keeps in
// flight, shared memory binds the ring: 2-4x more bytes per SM). The stream runs across the
// warp's work items, so it drains once per task, and its first rounds go out before the
// task's events. The ring takes MK_RING_BYTES (generated with the parameters: kernel_params.cc
// ring_bytes) at the start of dynamic shared memory.
#if MK_RING_STAGES > 0

// A warp's position in its stream of full row groups: item it (row group it / ks, K part
// it % ks), the vectors [v, v1) still to go, the group's rows.
template <int R>
struct MkCursor {
  int it, v, v1;
  const char* w[R];
};

// Moves c to item `it` (or past the end: c.it >= items).
template <int DT, int R>
__device__ __forceinline__ void mk_cursor_item(const MkTask& t, MkCursor<R>& c, int it, int items,
                                               int ks, int units) {
  c.it = it;
  if (it >= items) return;
  int k0, k1, slice[R], local[R];
  mk_kpart(it % ks, ks, units, MkW<DT>::kVec, k0, k1);
  c.v = k0 / MkW<DT>::kVec;
  c.v1 = k1 / MkW<DT>::kVec;
  mk_group_rows<DT, R>(t, (it / ks) * R, c.w, slice, local);
}

// This lane's slot for (stage, row, load): consecutive lanes take consecutive 16 bytes.
__device__ __forceinline__ unsigned mk_ring_slot(unsigned ring, int stage, int r, int l) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return ring + (unsigned)(((((stage * (MK_BLOCK_THREADS / 32) + warp) * MK_ROWS_PER_WARP + r) *
                             MK_LOADS_IN_FLIGHT + l) * 32 + lane) * 16);
}

// Issues the round at c into `stage` and commits it (an empty group past the end of the
// stream keeps the group count of every round equal); moves c on.
template <int DT, int R>
__device__ __forceinline__ void mk_ring_issue(const MkTask& t, unsigned ring, int stage,
                                              MkCursor<R>& c, int items, int ks, int units, int nw) {
  if (c.it < items) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int l = 0; l < MK_LOADS_IN_FLIGHT; ++l) {
        const int vec = c.v + lane + 32 * l;
        if (vec < c.v1)
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(mk_ring_slot(ring, stage, r, l)),
                       "l"((const uint4*)c.w[r] + vec) : "memory");
      }
    c.v += 32 * MK_LOADS_IN_FLIGHT;
    if (c.v >= c.v1) mk_cursor_item<DT, R>(t, c, c.it + nw, items, ks, units);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// The full row groups of a tile through the ring: `c` is the issue cursor, already
// MK_RING_STAGES - 1 rounds ahead (issued before the events); the items' results as
// mk_linear_item writes them.
template <int DT, int R>
__device__ __forceinline__ void mk_ring_rows(const MkTask& t, unsigned ring, MkCursor<R>& c,
                                             const float* xs, float scale, int items, int ks,
                                             int units, int total, float* part_sums) {
  const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5, lane = threadIdx.x & 31;
  constexpr int V = MkW<DT>::kVec;
  MkCursor<R> d;  // the consuming cursor
  mk_cursor_item<DT, R>(t, d, warp, items, ks, units);
  int stage = 0;
  float acc[R];
  MkGroupOut<R> o;
  bool fresh = true;
  while (d.it < items) {
    if (fresh) {  // the epilogue's operands, loaded while the item streams
      const char* w[R];
      mk_group_out<DT, R>(t, (d.it / ks) * R, ks, w, o);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = 0.f;
      fresh = false;
    }
    mk_ring_issue<DT, R>(t, ring, (stage + MK_RING_STAGES - 1) % MK_RING_STAGES, c, items, ks,
                         units, nw);
    asm volatile("cp.async.wait_group %0;" ::"n"(MK_RING_STAGES - 1) : "memory");
#pragma unroll
    for (int l = 0; l < MK_LOADS_IN_FLIGHT; ++l) {
      const int vec = d.v + lane + 32 * l;
      if (vec < d.v1) {
        const float* xv = xs + vec * V;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          uint4 u;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "r"(mk_ring_slot(ring, stage, r, l)));
          float f[V];
          MkW<DT>::unpack(u, f);
#pragma unroll
          for (int e = 0; e < V; ++e) acc[r] += f[e] * xv[e];
        }
      }
    }
    stage = stage + 1 == MK_RING_STAGES ? 0 : stage + 1;
    d.v += 32 * MK_LOADS_IN_FLIGHT;
    if (d.v < d.v1) continue;
    // The item's last round: its sums, as mk_linear_item.
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = mk_warp_sum(acc[r]);
    mk_group_store<R>(t, o, acc, scale, (d.it / ks) * R, d.it % ks, ks, total, part_sums);
    mk_cursor_item<DT, R>(t, d, d.it + nw, items, ks, units);
    fresh = true;
  }
}
#endif

// A linear tile. Before `wait` (the task's events): each warp issues the first rounds of its
// weight stream (MK_RING_STAGES - 1 rounds into the shared-memory ring, or without the ring the
// first round of its first work item into registers), then the L2 prefetch of the tile's
// start. Returns false when the wait aborted the launch.
template <int DT, class Wait>
__device__ bool mk_linear(const MkTask& t, float* xs, float* red, int* redi, float* part_sums,
                          long long prefetch_bytes, Wait wait) {
  const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int k = t.k;
  constexpr int V = MkW<DT>::kVec, kRows = MK_ROWS_PER_WARP;
  const int total = mk_linear_rows(t);
  const bool aligned = mk_linear_aligned<DT>(t);
  // Row groups of kRows (the last may be shorter) times K parts of whole vectors.
  const int groups = (total + kRows - 1) / kRows;
  const int unit = aligned ? V : 1, units = k / unit;
  const int ks = mk_ksplit(groups, total, nw, units);
  const int full_items = (total / kRows) * ks;  // the items of full row groups
  float scale = 1.0f;
#if MK_RING_STAGES > 0
  if (aligned) {
    const unsigned ring = (unsigned)__cvta_generic_to_shared(xs);
    xs += MK_RING_BYTES / 4;
    MkCursor<kRows> c;
    mk_cursor_item<DT, kRows>(t, c, warp, full_items, ks, units);
    for (int s = 0; s < MK_RING_STAGES - 1; ++s)
      mk_ring_issue<DT, kRows>(t, ring, s, c, full_items, ks, units, nw);
    mk_prefetch_weights<DT>(t, prefetch_bytes);
    if (!wait()) return false;
    scale = mk_linear_input(t, xs, red);
    mk_ring_rows<DT, kRows>(t, ring, c, xs, scale, full_items, ks, units, total, part_sums);
  } else
#endif
  {
    uint4 pre[kRows][MK_LOADS_IN_FLIGHT];
    bool have_pre = false;
    if (aligned && warp < full_items) {
      int k0, k1;
      mk_kpart(warp % ks, ks, units, unit, k0, k1);
      const char* w[kRows];
      int slice[kRows], local[kRows];
      mk_group_rows<DT, kRows>(t, (warp / ks) * kRows, w, slice, local);
      // Warp 0 holds the polling thread: without MK_POLL_WARP_LOADS its first round goes to L2
      // only, so that the wait's polls do not queue behind its own loads.
      if (MK_POLL_WARP_LOADS || warp != 0) {
        mk_load_round<kRows, true>(w, k0 / V + (threadIdx.x & 31), pre, k1 / V);
        have_pre = true;
      } else {
        mk_prefetch_round<kRows>(w, k0 / V, k1 / V, 0);
      }
      for (int a = 1; a <= MK_PREFETCH_ROUNDS; ++a) mk_prefetch_round<kRows>(w, k0 / V, k1 / V, a);
    }
    mk_prefetch_weights<DT>(t, prefetch_bytes);
    if (!wait()) return false;
    scale = mk_linear_input(t, xs, red);
    for (int it = warp; it < full_items; it += nw) {
      int k0, k1;
      mk_kpart(it % ks, ks, units, unit, k0, k1);
      mk_linear_item<DT, kRows>(t, xs, scale, (it / ks) * kRows, k0, k1, aligned, it % ks, ks, total,
                                part_sums, have_pre && it == warp ? pre : nullptr);
    }
  }
  // The last row group when kRows does not divide the rows, one row at a time; its items dealt
  // on round-robin like the others (item it to warp it % nw).
  for (int it = full_items + ((warp - full_items) % nw + nw) % nw; it < groups * ks; it += nw) {
    int k0, k1;
    mk_kpart(it % ks, ks, units, unit, k0, k1);
    for (int r = (it / ks) * kRows; r < total; ++r)
      mk_linear_item<DT, 1>(t, xs, scale, r, k0, k1, aligned, it % ks, ks, total, part_sums, nullptr);
  }
  if (ks > 1) {
    __syncthreads();
    for (int r = threadIdx.x; r < total; r += blockDim.x) {
      float v = 0.f;
      for (int p = 0; p < ks; ++p) v += part_sums[p * total + r];
      int s, lr;
      mk_row_of(t, r, s, lr);
      mk_store_row(t.slices[s], lr, v * scale);
    }
  }

  if (t.flags & MPK_MK_F_ARGMAX) {
    __syncthreads();
    float best = 0.f;
    int bi = 0x7fffffff;
    bool have = false;
    int base = 0;
    for (int s = 0; s < t.num_slices; ++s) {
      const float* out = (const float*)t.slices[s].out;
      for (int i = threadIdx.x; i < t.slices[s].rows; i += blockDim.x) {
        // A non-finite logit becomes NaN, which wins every comparison: the step's argmax value
        // then says whether any logit was non-finite, at no extra pass over the logits.
        const float v = isfinite(out[i]) ? out[i] : __int_as_float(0x7fffffff);
        const int gi = (int)(t.out_index0 + base + i);
        if (!have) { best = v; bi = gi; have = true; } else mk_better(best, bi, v, gi);
      }
      base += t.slices[s].rows;
    }
    if (!have) { best = -__int_as_float(0x7f800000); bi = 0x7fffffff; }
    mk_block_argmax(best, bi, red, redi);
    if (threadIdx.x == 0) {
      *(float*)t.part_val = best;
      *(int*)t.part_idx = bi;
    }
  }
  return true;
}

#define MK_NEG_INF (-__int_as_float(0x7f800000))

// Softmax weight of a state with max m against the combined max M (an empty state weighs 0).
__device__ __forceinline__ float mk_rescale(float m, float M) {
  return m == MK_NEG_INF ? 0.f : expf(m - M);
}

// What staging head h needs besides the head itself, all known before the task's events: this
// lane's elements of the head-norm scale and the RoPE rotation at `position` (lane + 32c).
struct MkHeadConsts {
  float w[MK_MAX_HEAD_DIM / 32];
  float cs[MK_MAX_HEAD_DIM / 64], sn[MK_MAX_HEAD_DIM / 64];
};

__device__ __forceinline__ void mk_head_consts(const MkTask& t, int h, int position, MkHeadConsts& hc) {
  const int D = t.head_dim, half = D / 2, lane = threadIdx.x & 31;
  const bool is_k = h == t.group;
  const float* w = (const float*)(is_k ? t.k_norm : t.q_norm);
  const bool norm = (t.flags & (is_k ? MPK_MK_F_K_NORM : MPK_MK_F_Q_NORM)) != 0;
#pragma unroll
  for (int c = 0; c < MK_MAX_HEAD_DIM / 32; ++c)
    hc.w[c] = norm && lane + 32 * c < D ? w[lane + 32 * c] : 0.f;
  const bool rope = (t.flags & (is_k ? MPK_MK_F_ROPE_K : MPK_MK_F_ROPE_Q)) != 0;
  const float* inv_freq = (const float*)t.inv_freq;
  const float p = (float)position;
#pragma unroll
  for (int c = 0; c < MK_MAX_HEAD_DIM / 64; ++c) {
    const int i = lane + 32 * c;
    const float angle = rope && i < half ? p * inv_freq[i] : 0.f;
    hc.cs[c] = cosf(angle);
    hc.sn[c] = sinf(angle);
  }
}

// This lane's elements (lane + 32c) of a row of D floats written by another worker, through L2
// (never a stale line of this SM's L1); 0 past D. All the loads go out before any is used.
__device__ __forceinline__ void mk_load_head_row(const float* src, int D, float (&v)[MK_MAX_HEAD_DIM / 32]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < MK_MAX_HEAD_DIM / 32; ++c) v[c] = lane + 32 * c < D ? __ldcg(src + lane + 32 * c) : 0.f;
}

// Stages head h of the task in qk + h * D, after its head RMSNorm (Qwen3 q_norm / k_norm) and
// RoPE (rotate half) with the constants of mk_head_consts: heads 0 .. G-1 are the query heads,
// head G the new key. One warp per head, so neither the norm nor the rotation needs a block
// barrier (only __syncwarp).
__device__ __forceinline__ void mk_stage_head(const MkTask& t, float* qk, int h, const MkHeadConsts& hc) {
  const int D = t.head_dim, G = t.group, half = D / 2, lane = threadIdx.x & 31;
  const bool is_k = h == G;
  const float* src = is_k ? (const float*)t.kx + (long long)t.kv_head * D
                          : (const float*)t.q + (long long)(t.q_head0 + h) * D;
  float* xh = qk + h * D;
  // Every load before any store (a store could alias the next load: one L2 round trip each).
  constexpr int DC = MK_MAX_HEAD_DIM / 32;
  float v[DC];
  mk_load_head_row(src, D, v);
  float r = 1.0f;
  const bool norm = t.flags & (is_k ? MPK_MK_F_K_NORM : MPK_MK_F_Q_NORM);
  if (norm) {
    float ss = 0.f;
#pragma unroll
    for (int c = 0; c < DC; ++c) ss += v[c] * v[c];
    ss = mk_warp_sum(ss);
    r = 1.0f / sqrtf(ss / (float)D + t.norm_eps);
  }
#pragma unroll
  for (int c = 0; c < DC; ++c)
    if (lane + 32 * c < D) xh[lane + 32 * c] = norm ? hc.w[c] * (v[c] * r) : v[c];
  __syncwarp();
  if (t.flags & (is_k ? MPK_MK_F_ROPE_K : MPK_MK_F_ROPE_Q)) {
#pragma unroll
    for (int c = 0; c < MK_MAX_HEAD_DIM / 64; ++c) {
      const int i = lane + 32 * c;
      if (i >= half) continue;
      const float a = xh[i], b = xh[i + half];
      xh[i] = a * hc.cs[c] + (-b) * hc.sn[c];
      xh[i + half] = b * hc.cs[c] + a * hc.sn[c];
    }
    __syncwarp();
  }
}

__device__ void mk_attn_arrive(const MkTask& t, unsigned* arrivals);

// One KV head's query heads over one chunk of the live KV length (see MkTask). Each warp runs
// an online softmax over its positions for up to MK_HEADS_PER_PASS query heads at once, so
// a K or V row is read once per pass, coalesced (lane owns dims lane + 32c); then the warps'
// (max, sum, output) states are combined through shared memory.

template <class Wait>
__device__ bool mk_attention(const MkTask& t, int position, float* sm, unsigned* arrivals, Wait wait) {
  const int D = t.head_dim, G = t.group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int n = position + 1;
  const int j0 = (int)mk_even_split_begin(t.chunk, n, t.num_chunks);
  const int j1 = (int)mk_even_split_end(t.chunk, n, t.num_chunks);
  const bool appends = t.chunk == t.num_chunks - 1;  // its range ends at the new position
  float* qk = sm;                // G query heads, then the new key head
  float* wst = sm + (G + 2) * D; // per warp and head of a pass: D output sums, max, sum
  float* kc = (float*)t.k_cache + (long long)t.kv_head * t.capacity * D;
  float* vc = (float*)t.v_cache + (long long)t.kv_head * t.capacity * D;
  // The appending chunk's last warp copies the new value row; the key is appended by the warp
  // that stages it. One barrier then publishes the heads and the new rows to the block.
  const int nh = appends ? G + 1 : G;
  // Before the events: the constants of the warp's first head (norm scale, RoPE rotation) and
  // the warp's first K/V row when it is history at least two steps old. A row is written once,
  // by the appending chunk of its step; every task of step s-1 waits (transitively) on step
  // s-2's argmax, which follows every task of step s-2, and this worker ran an acquire in step
  // s-1 (or the row comes from an earlier launch): rows <= position - 2 are visible without
  // this task's events. Read through L2 (__ldcg), never from this SM's L1.
  // (The validator's cross-step check makes every task a descendant of a reader of the carried
  // embedding, and KV rows are never rewritten within a sequence: a reset starts a new one in a
  // new launch.)
  MkHeadConsts first;
  if (warp < nh) mk_head_consts(t, warp, position, first);
  constexpr int DC = MK_MAX_HEAD_DIM / 32;
  const int jpre = j0 + warp;
  const bool have_kv = jpre < j1 && jpre <= position - 2;
  float kpre[DC], vpre[DC];
  if (have_kv) {
    mk_load_head_row(kc + (long long)jpre * D, D, kpre);
    mk_load_head_row(vc + (long long)jpre * D, D, vpre);
  }
  if (!wait()) return false;
  for (int h = warp; h < nh; h += nw) {
    if (h == warp) {
      mk_stage_head(t, qk, h, first);
    } else {
      MkHeadConsts hc;
      mk_head_consts(t, h, position, hc);
      mk_stage_head(t, qk, h, hc);
    }
    if (h == G)
      for (int i = lane; i < D; i += 32) kc[(long long)position * D + i] = qk[G * D + i];
  }
  if (appends && warp == nw - 1) {
    const float* vx = (const float*)t.vx + (long long)t.kv_head * D;
    float v[DC];
    mk_load_head_row(vx, D, v);
#pragma unroll
    for (int c = 0; c < DC; ++c)
      if (lane + 32 * c < D) vc[(long long)position * D + lane + 32 * c] = v[c];
  }
  __syncthreads();
  constexpr int HP = MK_HEADS_PER_PASS;
  for (int g0 = 0; g0 < G; g0 += HP) {
    float m[HP], l[HP], acc[HP][DC];
#pragma unroll
    for (int h = 0; h < HP; ++h) {
      m[h] = MK_NEG_INF;
      l[h] = 0.f;
#pragma unroll
      for (int c = 0; c < DC; ++c) acc[h][c] = 0.f;
    }
    for (int j = j0 + warp; j < j1; j += nw) {
      const float* kj = kc + (long long)j * D;
      const float* vj = vc + (long long)j * D;
      float kr[DC], vr[DC];
      const bool pre = have_kv && g0 == 0 && j == jpre;
#pragma unroll
      for (int c = 0; c < DC; ++c) {
        const int e = lane + 32 * c;
        kr[c] = pre ? kpre[c] : e < D ? kj[e] : 0.f;
        vr[c] = pre ? vpre[c] : e < D ? vj[e] : 0.f;
      }
#pragma unroll
      for (int h = 0; h < HP; ++h) {
        if (g0 + h >= G) continue;
        const float* qh = qk + (g0 + h) * D;
        float s = 0.f;
#pragma unroll
        for (int c = 0; c < DC; ++c)
          if (lane + 32 * c < D) s += qh[lane + 32 * c] * kr[c];
        s = mk_warp_sum(s) * t.scale;
        const float mn = fmaxf(m[h], s);
        const float corr = mk_rescale(m[h], mn), pj = expf(s - mn);
        l[h] = l[h] * corr + pj;
#pragma unroll
        for (int c = 0; c < DC; ++c) acc[h][c] = acc[h][c] * corr + pj * vr[c];
        m[h] = mn;
      }
    }
    // Every warp's states for this pass's heads, then one combine over (head, dim) pairs.
    const int hn = G - g0 < HP ? G - g0 : HP;
    float* ws = wst + warp * HP * (D + 2);
#pragma unroll
    for (int h = 0; h < HP; ++h) {
      if (h >= hn) continue;
#pragma unroll
      for (int c = 0; c < DC; ++c)
        if (lane + 32 * c < D) ws[h * (D + 2) + lane + 32 * c] = acc[h][c];
      if (lane == 0) { ws[h * (D + 2) + D] = m[h]; ws[h * (D + 2) + D + 1] = l[h]; }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < hn * D; idx += blockDim.x) {
      const int h = idx / D, e = idx % D, g = g0 + h;
      float M = MK_NEG_INF;
      for (int w = 0; w < nw; ++w) M = fmaxf(M, wst[(w * HP + h) * (D + 2) + D]);
      float L = 0.f, O = 0.f;
      for (int w = 0; w < nw; ++w) {
        const float* sw = wst + (w * HP + h) * (D + 2);
        const float f = mk_rescale(sw[D], M);
        L += sw[D + 1] * f;
        O += sw[e] * f;
      }
      if (t.num_chunks == 1) {
        ((float*)t.out)[(long long)(t.q_head0 + g) * D + e] = O / L;
      } else {
        float* pp = (float*)t.partial + (long long)g * (D + 2);
        pp[e] = O;
        if (e == 0) { pp[D] = M; pp[D + 1] = L; }
      }
    }
    __syncthreads();
  }
  if (t.flags & MPK_MK_F_MERGE) mk_attn_arrive(t, arrivals);
  return true;
}

// Combines one KV head's chunk partials (`part`: chunk 0's, then chunk 1's, ...): per query
// head g and dim e, with M the largest chunk max, out = sum_c o_c e^(m_c - M) / sum_c l_c e^(m_c - M).
// The partials of up to kBatch chunks are loaded at once (one round trip), a running state
// rescaled between batches (with at most kBatch chunks the sums are exactly the formula's).
// They were written by other workers in this step: read through L2 (__ldcg), never from a line
// this SM's L1 may hold from an earlier step.
__device__ void mk_attn_merge(const MkTask& t, const float* part) {
  constexpr int kBatch = MK_MERGE_BATCH;
  const int D = t.head_dim, G = t.group, C = t.num_chunks;
  float* out = (float*)t.out + (long long)t.q_head0 * D;
  for (int idx = threadIdx.x; idx < G * D; idx += blockDim.x) {
    const int g = idx / D, e = idx % D;
    float M = MK_NEG_INF, L = 0.f, O = 0.f;
    for (int c0 = 0; c0 < C; c0 += kBatch) {
      float mc[kBatch], lc[kBatch], oc[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const float* pc = part + ((long long)(c0 + j) * G + g) * (D + 2);
        const bool in = c0 + j < C;
        mc[j] = in ? __ldcg(pc + D) : MK_NEG_INF;
        lc[j] = in ? __ldcg(pc + D + 1) : 0.f;
        oc[j] = in ? __ldcg(pc + e) : 0.f;
      }
      float Mb = M;
#pragma unroll
      for (int j = 0; j < kBatch; ++j) Mb = fmaxf(Mb, mc[j]);
      const float f0 = mk_rescale(M, Mb);
      L = L * f0;
      O = O * f0;
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (c0 + j >= C) continue;
        const float f = mk_rescale(mc[j], Mb);
        L += lc[j] * f;
        O += oc[j] * f;
      }
      M = Mb;
    }
    out[(long long)g * D + e] = O / L;
  }
}

// A chunk with the merge folded in arrives at its head's counter (cyclic, one round per step);
// the last to arrive merges everyone's partials.
__device__ void mk_attn_arrive(const MkTask& t, unsigned* arrivals) {
  __shared__ int last;
  if (threadIdx.x == 0) {
    // This block's partials (ordered by the caller's barrier) before arriving; the others'
    // before reading them: acquire-release fences around the arrival.
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    const unsigned old = atomicInc(arrivals + t.arrival, (unsigned)(t.num_chunks - 1));
    last = old == (unsigned)(t.num_chunks - 1);
    if (last) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  }
  __syncthreads();
  if (last)
    mk_attn_merge(t, (const float*)t.partial - (long long)t.chunk * t.group * (t.head_dim + 2));
}

// The argmax over the LM-head tiles' partials; writes the step's token, and the embedding of
// the token the next step is fed: the next forced (prompt) token while there is one, else the
// argmax.
template <int DT>
__device__ void mk_argmax(const MkTask& t, const MkParams& prm, int i, MkStepRecord* rec,
                          float* red, int* redi) {
  const float* pv = (const float*)t.part_val;
  const int* pi = (const int*)t.part_idx;
  float best = MK_NEG_INF;
  int bi = 0x7fffffff;
  bool have = false;
  for (int j = threadIdx.x; j < t.n; j += blockDim.x) {
    if (!have) { best = pv[j]; bi = pi[j]; have = true; } else mk_better(best, bi, pv[j], pi[j]);
  }
  mk_block_argmax(best, bi, red, redi);
  if (threadIdx.x == 0) {
    *(int*)t.next_token = bi;
    rec[i].token = bi;
    rec[i].flags = best != best ? MPK_MK_STEP_NONFINITE : 0;
  }
  const int feed = i + 1 < prm.num_forced ? ((const int*)prm.forced)[i + 1] : bi;
  if ((t.flags & MPK_MK_F_EMBED) && feed >= 0 && feed < t.vocab) {
    const char* row = (const char*)t.table + (long long)feed * t.hidden * MkW<DT>::kSize;
    float* out = (float*)t.embed_out;
    // The row's loads all go out before the stores (a store could alias the next load).
    constexpr int U = 8;
    for (int j0 = threadIdx.x; j0 < t.hidden; j0 += blockDim.x * U) {
      float v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u * (int)blockDim.x;
        v[u] = j < t.hidden ? MkW<DT>::load(row, j) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (j0 + u * (int)blockDim.x < t.hidden) out[j0 + u * (int)blockDim.x] = v[u];
    }
  }
}

__device__ __forceinline__ unsigned mk_load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Thread 0: spins on acquire loads until counter e reaches target (wrap-safe: counters grow by
// need per step and may pass 2^32). The abort flag and the clock are checked every 32 spins
// only (each check is another round trip). A fence after a relaxed poll instead of the acquire
// load measured slower: the fence also waits for the task's weight loads issued before it.
// False when the launch is aborted: another worker failed, or this wait passed the timeout
// (then the failure is recorded in the status words).
__device__ bool mk_wait(const MkParams& prm, int e, unsigned target, int task) {
  const unsigned* counters = (const unsigned*)prm.counters;
  volatile unsigned* status = (volatile unsigned*)prm.control;
  const unsigned long long t0 = mk_globaltimer();
  unsigned spins = 0;
  while ((int)(mk_load_acquire(counters + e) - target) < 0) {
    if ((++spins & 31) == 0) {
      if (status[0] != 0) return false;
      if ((long long)(mk_globaltimer() - t0) > prm.timeout_ns) {
        if (atomicCAS((unsigned*)prm.control, 0u, 1u) == 0u) {
          status[1] = blockIdx.x;
          status[2] = (unsigned)task;
          status[3] = (unsigned)e;
        }
        return false;
      }
    }
    __nanosleep(32);
  }
  return true;
}

// Starts copying a descriptor to shared memory (8-byte cp.async by the first threads); the
// reader waits with cp.async.wait_all and a barrier.
__device__ __forceinline__ void mk_fetch_desc(const MkTask* src, MkTask* dst) {
  for (int w = threadIdx.x; w < (int)(sizeof(MkTask) / 8); w += blockDim.x) {
    const unsigned d = (unsigned)__cvta_generic_to_shared((char*)dst + 8 * w);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"((const char*)src + 8 * w)
                 : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// No descriptor copy is left in flight when a worker leaves (the last task always starts one,
// for a next step that may not run).
__device__ __forceinline__ void mk_drain_copies() { asm volatile("cp.async.wait_all;" ::: "memory"); }

__device__ __forceinline__ bool mk_is_eos(const MkParams& prm, int token) {
  for (int j = 0; j < prm.num_eos && j < MPK_MK_MAX_EOS; ++j)
    if (prm.eos[j] == token) return true;
  return false;
}

template <int DT>
__device__ void mk_run(const MkParams& prm) {
  extern __shared__ __align__(16) float mk_smem[];  // 16-byte vectors and cp.async
  __shared__ float red[32];
  __shared__ int redi[32];
  __shared__ float part_sums[MPK_MK_KSPLIT_SLOTS];
  __shared__ int abort_launch, stop;
  __shared__ MkTask desc[2];
  const MkTask* tasks = (const MkTask*)prm.tasks;  // in queue order
  const int* qb = (const int*)prm.queue_begin;
  const int* waits = (const int*)prm.waits;
  const unsigned* needs = (const unsigned*)prm.needs;
  unsigned* counters = (unsigned*)prm.counters;
  unsigned* status = (unsigned*)prm.control;
  u64* worker_start = (u64*)(prm.control + MPK_MK_STATUS_WORDS * 4);
  MkStepRecord* rec = (MkStepRecord*)(prm.control + MPK_MK_STATUS_WORDS * 4 + 8ull * prm.num_workers);
  u64* profile = (u64*)prm.profile;
  if (threadIdx.x == 0) {
    abort_launch = 0;
    stop = 0;
    worker_start[blockIdx.x] = mk_globaltimer();
  }
  __syncthreads();

  // Descriptors go to shared memory one task ahead, with cp.async (no registers, no stall):
  // after an acquire the L1 holds nothing, and a descriptor read from global memory would cost
  // a round trip (to DRAM when the weight stream has evicted it) on the critical path. Two
  // buffers used in turn (across steps too: a queue may have an odd length); the next task's
  // copy starts once every thread has passed this task's first barrier, when thread 0 has
  // published the previous task (the last reader of that buffer).
  const int q0 = qb[blockIdx.x], q1 = qb[blockIdx.x + 1];
  int slot = 0;  // descriptor buffer of the next task
  if (q1 > q0) mk_fetch_desc(tasks + q0, &desc[0]);
  for (int i = 0; i < prm.num_steps; ++i) {
    const unsigned step = prm.step + (unsigned)i;
    const int position = prm.position + i;
    // Step i is fed step i-1's argmax; the launch ends after a step that was fed an EOS id or
    // a token chosen from non-finite logits: before step i (i >= 2) every worker reads the
    // record of step i-2, whose argmax step i-1 was fed (step 0's fed token the host checked),
    // so all of them stop at the same step. Its event has fired already (step i-1 waited for
    // it); the acquire makes the record visible. Forced (prompt) steps never stop.
    if (i >= 2 && i - 1 >= prm.num_forced && prm.argmax_event >= 0) {
      if (threadIdx.x == 0) {
        const int e = prm.argmax_event;
        if (!mk_wait(prm, e, needs[e] * (step - 2u), -1)) {
          abort_launch = 1;
        } else {
          const volatile MkStepRecord& r = ((volatile MkStepRecord*)rec)[i - 2];
          if ((r.flags & MPK_MK_STEP_NONFINITE) || mk_is_eos(prm, r.token)) stop = 1;
        }
      }
      __syncthreads();
      if (abort_launch || stop) return mk_drain_copies();
    }
    for (int qi = q0; qi < q1; ++qi) {
      if (profile && threadIdx.x == 0) profile[3 * qi] = mk_globaltimer();
      MkTask& t = desc[slot];
      asm volatile("cp.async.wait_all;" ::: "memory");
      __syncthreads();
      // One look at the first event before this SM issues the task's weight loads: a poll
      // issued behind them waits for the memory pipeline to drain (measured: 3-5 us from a
      // task's start to seeing an event that had already fired).
      int seen = 0;  // thread 0: leading waits already satisfied
      if (threadIdx.x == 0 && t.num_waits + t.num_waits_prev > 0) {
        const unsigned epoch = t.num_waits > 0 ? step : step - 1u;
        if ((int)(mk_load_acquire(counters + t.wait_event[0]) - t.wait_need[0] * epoch) >= 0) seen = 1;
      }
      slot ^= 1;
      mk_fetch_desc(tasks + (qi + 1 < q1 ? qi + 1 : q0), &desc[slot]);
      // The task's events; false when the launch is aborted.
      auto wait = [&]() -> bool {
        if (threadIdx.x == 0) {
          for (int wi = seen; wi < t.num_waits + t.num_waits_prev && !abort_launch; ++wi) {
            const bool inl = wi < MPK_MK_INLINE_WAITS;
            const int e = inl ? t.wait_event[wi] : waits[t.wait_begin + wi];
            const unsigned need = inl ? t.wait_need[wi] : needs[e];
            const unsigned epoch = wi < t.num_waits ? step : step - 1u;
            if (!mk_wait(prm, e, need * epoch, t.id)) abort_launch = 1;
          }
          if (profile) profile[3 * qi + 1] = mk_globaltimer();
        }
        __syncthreads();
        return !abort_launch;
      };
      // Weights and the KV history do not wait: they start loading before the events (a
      // linear task issues its own loads, then waits).
      bool ok = true;
      if (t.kind == MPK_MK_LINEAR) {
        ok = mk_linear<DT>(t, mk_smem, red, redi, part_sums, prm.prefetch_bytes, wait);
      } else if (t.kind == MPK_MK_ATTENTION) {
        const int n = position + 1;
        const long long j0 = mk_even_split_begin(t.chunk, n, t.num_chunks);
        long long j1 = mk_even_split_end(t.chunk, n, t.num_chunks);
        if (j1 > position) j1 = position;  // the new row is written in this step
        if (j1 > j0) {
          const long long off = ((long long)t.kv_head * t.capacity + j0) * t.head_dim * 4;
          mk_prefetch(t.k_cache + off, (j1 - j0) * t.head_dim * 4);
          mk_prefetch(t.v_cache + off, (j1 - j0) * t.head_dim * 4);
        }
        ok = mk_attention(t, position, mk_smem, (unsigned*)prm.arrivals, wait);
      } else {
        ok = wait();
        if (ok) {
          switch (t.kind) {
            case MPK_MK_ATTN_MERGE: mk_attn_merge(t, (const float*)t.partial); break;
            case MPK_MK_ARGMAX: mk_argmax<DT>(t, prm, i, rec, red, redi); break;
            default: break;
          }
        }
      }
      if (!ok) return mk_drain_copies();
      __syncthreads();
      if (threadIdx.x == 0) {
        if (t.kind == MPK_MK_ARGMAX) {
          rec[i].end_ns = mk_globaltimer();
          status[4] = (unsigned)(i + 1);
        }
        if (profile) profile[3 * qi + 2] = mk_globaltimer();
        // The block's writes (ordered before this thread by the barrier), then the event:
        // a release (the fence.acq_rel + relaxed add pattern), not a full sequential fence.
        if (t.trigger >= 0) {
          asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u32 [%0], 1;"
                       ::"l"(counters + t.trigger) : "memory");
        }
      }
    }
  }
  mk_drain_copies();
}

extern "C" __global__ void __launch_bounds__(MK_BLOCK_THREADS) mpk_megakernel_f32(MkParams p) { mk_run<MK_F32>(p); }
extern "C" __global__ void __launch_bounds__(MK_BLOCK_THREADS) mpk_megakernel_bf16(MkParams p) { mk_run<MK_BF16>(p); }
extern "C" __global__ void __launch_bounds__(MK_BLOCK_THREADS) mpk_megakernel_f16(MkParams p) { mk_run<MK_F16>(p); }
