// What a linear tile's printed loop nests call (task kind linear; before them and linear.cuh):
// the weight loads and L2 prefetch of the dot products (ir::linear_dot_nest), and row r of the
// tile's concatenated slices, stored through its epilogue (ir::linear_fold_nest).

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

// A tile's output rows as an array a loop nest stores into (rows[r] = v): row r of the tile's
// concatenated slices, through its epilogue (mk_store_row).
struct MkTileRow {
  const MkTask& t;
  long long r;
  __device__ __forceinline__ void operator=(float v) const {
    int s, lr;
    mk_row_of(t, (int)r, s, lr);
    mk_store_row(t.slices[s], lr, v);
  }
};
struct MkTileRows {
  const MkTask& t;
  __device__ __forceinline__ MkTileRow operator[](long long r) const { return MkTileRow{t, r}; }
};
