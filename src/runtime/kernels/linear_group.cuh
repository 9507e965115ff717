// A linear tile's row group (task kind linear; after the linear's printed loop nests, before
// ir::linear_items_nest, which calls it): the dot products of its rows over one K part and where
// their sums go.

// x . w_r over the elements [k0, k1) for R rows by one warp; the results in every lane. `aligned`:
// the rows are 16-byte aligned and k0, k1 are multiples of the vector width: 16-byte vectors in
// rounds (mk_dot_vecs), else one element per lane (mk_dot_scalar), printed from their loop nests
// (ir/task_nests.h, proved). `first`: `pre` holds the lane's first round, loaded by the caller
// before the task's events (mk_dot_first; an array, never a pointer that may be null: such an
// array stayed in local memory). Smem: the rows are in shared memory.
template <int DT, int R, bool Smem = false>
__device__ __forceinline__ void mk_dot_rows(const char* const (&w)[R], const float* xs, int k0,
                                            int k1, bool aligned, bool first,
                                            const uint4 (&pre)[R][MK_LOADS_IN_FLIGHT],
                                            float (&out)[R]) {
  constexpr int V = MkW<DT>::kVec;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  if (aligned)
    mk_dot_vecs<DT, R, Smem>(w, xs, k0 / V, k1 / V - k0 / V, first, pre, acc);
  else
    mk_dot_scalar<DT, R>(w, xs, k0, k1 - k0, acc);
#pragma unroll
  for (int r = 0; r < R; ++r) out[r] = mk_warp_sum(acc[r]);
}

// The rows of a tile's row group r0 .. r0 + R - 1: their weight rows, slices and rows within
// them. Staged: the tile's rows are in shared memory at ws (the slices' rows one after another;
// a compile-time choice, so that the compiler keeps the addresses in the shared space).
template <int DT, int R, bool Staged = false>
__device__ __forceinline__ void mk_group_rows(const MkTask& t, int r0, const char* (&w)[R],
                                              int (&slice)[R], int (&local)[R], const char* ws = nullptr) {
  const long long row_bytes = (long long)t.k * MkW<DT>::kSize;
#pragma unroll
  for (int j = 0; j < R; ++j) {
    mk_row_of(t, r0 + j, slice[j], local[j]);
    w[j] = Staged ? ws + (long long)(r0 + j) * row_bytes
                  : (const char*)t.slices[slice[j]].w + (long long)local[j] * row_bytes;
  }
}

// Where a row group's sums go: its rows' slices and rows within them, and the epilogue's bias
// and residual, loaded by lane 0 before the dot products (not after them) when K is not split.
// o[j] = v stores v as row j of the group through the epilogue (ir::linear_items_nest).
template <int R>
struct MkGroupOut;
template <int R>
struct MkGroupRow {
  const MkGroupOut<R>& o;
  int j;
  __device__ __forceinline__ void operator=(float v) const {
    mk_store_out(o.slices[o.slice[j]], o.local[j], v, o.bias[j], o.res[j]);
  }
};
template <int R>
struct MkGroupOut {
  const MkSlice* slices;
  int slice[R], local[R];
  float bias[R], res[R];
  __device__ __forceinline__ MkGroupRow<R> operator[](int j) const { return MkGroupRow<R>{*this, j}; }
};

template <int DT, int R, bool Staged = false>
__device__ __forceinline__ void mk_group_out(const MkTask& t, int r0, int ks, const char* (&w)[R],
                                             MkGroupOut<R>& o, const char* ws = nullptr) {
  o.slices = t.slices;
  mk_group_rows<DT, R, Staged>(t, r0, w, o.slice, o.local, ws);
  const bool lead = (threadIdx.x & 31) == 0 && ks == 1;
#pragma unroll
  for (int j = 0; j < R; ++j) {
    const MkSlice& sl = t.slices[o.slice[j]];
    o.bias[j] = lead && sl.bias ? ((const float*)sl.bias)[o.local[j]] : 0.f;
    o.res[j] = lead && sl.res ? ((const float*)sl.res)[o.local[j]] : 0.f;
  }
}

// A row group's rows r0 .. r0 + R - 1 over the K part's elements [k0, k1): where its sums go
// (o, with the epilogue's operands when K is not split) and the sums, in every lane (acc).
// `first`: `pre` holds the lane's first round of loads, issued before the events. Smem: the rows
// are staged at ws (mk_group_rows).
template <int DT, int R, bool Smem>
__device__ __forceinline__ void mk_lin_dots(const MkTask& t, const float* xs, int r0, int k0, int k1,
                                            bool aligned, int ks, bool first,
                                            const uint4 (&pre)[R][MK_LOADS_IN_FLIGHT], const char* ws,
                                            MkGroupOut<R>& o, float (&acc)[R]) {
  const char* w[R];
  mk_group_out<DT, R, Smem>(t, r0, ks, w, o, ws);
  mk_dot_rows<DT, R, Smem>(w, xs, k0, k1, aligned, first, pre, acc);
}

// K part p of ks of a row of `units` vector units (unit elements each): elements [k0, k1). The
// even split (ir/layouts.h), proved to cover every unit exactly once for each ks up to
// MK_MAX_KSPLIT (runtime/proofs.h).
__device__ __forceinline__ void mk_kpart(int p, int ks, int units, int unit, int& k0, int& k1) {
  k0 = (int)mk_even_split_begin(p, units, ks) * unit;
  k1 = (int)mk_even_split_end(p, units, ks) * unit;
}

