// A linear tile's output rows (task kind linear, before linear.cuh and the fold printed from
// ir::linear_fold_nest): row r of the tile's concatenated slices, stored through its epilogue.

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
