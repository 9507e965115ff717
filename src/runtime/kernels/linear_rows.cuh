// What a linear tile's printed loop nests call (task kind linear; before them and linear.cuh):
// the input's loads and prologue (ir::linear_stage_nest), the weight loads and L2 prefetch of
// the dot products (ir::linear_dot_nest), and row r of the tile's concatenated slices, stored
// through its epilogue (ir::linear_fold_nest).

// A unit of the input staged in shared memory (ir::linear_stage_nest): a 16-byte vector when the
// operands are aligned (vec), else one float in .x (the other lanes zero). The vectors go through
// L2 (the activation was written in this step by other workers, visible after the task's acquire
// and barrier: never a stale L1 line); a single float is a plain load.
__device__ __forceinline__ float4 mk_ld_unit(bool vec, const float* p) {
  if (vec) return __ldcg((const float4*)p);
  float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
  r.x = *p;
  return r;
}
__device__ __forceinline__ void mk_st_unit(bool vec, float* p, float4 v) {
  if (vec)
    *(float4*)p = v;
  else
    *p = v.x;
}

// The prologue of a unit: silu(x) * up, g * x for RMSNorm (the factor comes after the dot
// products; x^2 added to ss, one element of a float), or x. b: up or g.
__device__ __forceinline__ float4 mk_stage_unit(int mode, bool vec, float4 a, float4 b, float& ss) {
  const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
  float o[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (mode == MPK_MK_IN_SILUMUL) {
      o[e] = mk_silu_mul(av[e], bv[e]);
    } else if (mode == MPK_MK_IN_RMSNORM) {
      o[e] = mk_dp_stage(bv[e], av[e]);
      if (vec || e == 0) ss += av[e] * av[e];
    } else {
      o[e] = av[e];
    }
  }
  return make_float4(o[0], o[1], o[2], o[3]);
}

// A 16-byte vector of weights: from shared memory (Smem: the staged rows, stage.cuh), else
// streamed from global memory without L1 allocation.
template <bool Smem>
__device__ __forceinline__ uint4 mk_ld_w(const uint4* p) {
  return Smem ? *p : mk_ld_stream(p);
}

// L2 prefetch of the round `ahead` rounds after the one starting at vector v0 (this lane's
// index less its lane) of R rows that end at vector v1: a round is 32 U vectors (4 U lines of 128
// bytes; U = MK_LOADS_IN_FLIGHT) per row, and the lanes share its lines. Streaming loads keep
// only U R vectors per lane in flight; the prefetch keeps DRAM busy while they are consumed.
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
  if (sl.bias) v = mk_dp_add(v, bias);
  if (sl.res) v = mk_dp_add(v, res);
  ((float*)sl.out)[lr] = v;
#if MK_FOLD_DOWN
  if (sl.copy) ((float*)sl.copy)[lr] = v;
#endif
}

__device__ __forceinline__ void mk_store_row(const MkSlice& sl, int lr, float v) {
  mk_store_out(sl, lr, v, sl.bias ? ((const float*)sl.bias)[lr] : 0.f,
               sl.res ? ((const float*)sl.res)[lr] : 0.f);
}

// A tile's output rows as an array a loop nest stores into (rows[r] = v: row r of the tile's
// concatenated slices, through its epilogue, mk_store_row) or reads back once stored.
struct MkTileRow {
  const MkTask& t;
  long long r;
  __device__ __forceinline__ void operator=(float v) const {
    int s, lr;
    mk_row_of(t, (int)r, s, lr);
    mk_store_row(t.slices[s], lr, v);
  }
  __device__ __forceinline__ operator float() const {
    int s, lr;
    mk_row_of(t, (int)r, s, lr);
    return ((const float*)t.slices[s].out)[lr];
  }
};
struct MkTileRows {
  const MkTask& t;
  __device__ __forceinline__ MkTileRow operator[](long long r) const { return MkTileRow{t, r}; }
};

#if MK_FOLD_DOWN
// The folded down projection's primitives (its loops: ir/task_nests.h fold_*_nest).
#if __CUDA_ARCH__ >= 900
#define MK_RED_V4 1  // vector reductions need sm_90
#else
#define MK_RED_V4 0
#endif
// 16 bytes from global memory into this thread's shared-memory slot (L2 only), and the wait for
// all of this thread's copies: its own slots, so no other synchronisation.
__device__ __forceinline__ void mk_cp_async16(uint4* slot, const uint4* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(slot)),
               "l"(src) : "memory");
}
__device__ __forceinline__ void mk_cp_async_wait_all() {
  asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
}
// The sum of a row's vp2 lanes (a power of two, aligned groups), by a shuffle butterfly.
__device__ __forceinline__ float mk_fold_lanes_sum(float sum, int vp2) {
  for (int o = vp2 / 2; o > 0; o /= 2) sum = mk_dp_add(sum, __shfl_xor_sync(0xffffffffu, sum, o));
  return sum;
}
__device__ __forceinline__ void mk_red_add(float* p, float v) {
  asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ void mk_red_add4(float4* p, float4 v) {
#if MK_RED_V4
  asm volatile("red.global.add.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
#else
  __trap();  // never called: mk_fold_out takes no quads without MK_RED_V4
#endif
}
#endif
