// The prefill kernels run a chunk of T prompt tokens through the graph one op at a time
// (runtime/prefill.h launches them). Their source is assembled (runtime/prefill.cc:
// prefill_source) from scalar.cuh (the bf16 widening and argmax order the megakernel uses
// too), the shapes as #defines, prefill_common.cuh, the printed layout formulas and row-kernel
// loop nests (ir/prefill_nests.h), prefill_rows.cuh, prefill_gemm.cuh and
// prefill_attention.cuh (and the wgmma files on sm_90a), without headers.
//
// Numerics: bf16 weights; fp32 activations, residuals, norms, RoPE, softmax statistics and KV
// cache, as the decode kernels. The tensor cores (mma.sync m16n8k16, fp32 accumulation) take
// their activation operands rounded to bf16: the projections' inputs, attention's Q, K and V,
// and the softmax weights P. Formulas otherwise as src/ref/kernels.cc (no fast math).
//
// This file: the bf16 conversions and stores, the grid index, the warp and block sums, and the
// tensor-core and async-copy instructions.

typedef unsigned short pf_bf16;  // the bits of a bf16 value

// Two fp32 values rounded to nearest-even bf16, `lo` at the lower address.
__device__ __forceinline__ unsigned pf_pack_bf16(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// One element of out as fp32 (f) or bf16 (h, rounded to nearest even), the two views of one
// place, as `bf16` says (bf16: the input of a projection only).
__device__ __forceinline__ void pf_put(float& f, pf_bf16& h, float v, int bf16) {
  if (bf16) {
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
    h = r;
  } else {
    f = v;
  }
}

// out[i] = v as fp32, or rounded to bf16 when `bf16`.
__device__ __forceinline__ void pf_store(void* out, long long i, float v, int bf16) {
  pf_put(((float*)out)[i], ((pf_bf16*)out)[i], v, bf16);
}

// Every entry's first statement. A launch the host makes a programmatic dependent of the kernel
// before it (PrefillKernels::overlap) may be resident before that kernel ends: it waits here for
// it to complete with its memory visible (which, as every kernel waits first, covers all before
// it), and then lets the next launch's blocks take the SMs this grid leaves. Without that launch
// attribute both are no-ops; before sm_90 there is no such launch.
__device__ __forceinline__ void pf_wait_prior() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// out[i] = lo and out[i + 1] = hi in one store: 8 bytes of fp32, or 4 of bf16 rounded as pf_put
// rounds (i even, out aligned to the pair).
__device__ __forceinline__ void pf_store2(void* out, long long i, float lo, float hi, int bf16) {
  if (bf16)
    *(unsigned*)((pf_bf16*)out + i) = pf_pack_bf16(lo, hi);
  else
    *(float2*)((float*)out + i) = make_float2(lo, hi);
}

// An attention grid's block (gridDim.x query blocks x gridDim.y heads): its query block and head,
// dealt so that blocks start longest first across all heads where the GPU starts blocks in
// linear order, x fastest (what it does in practice; CUDA promises no order, and any order is
// correct). Causal blocks grow with their query block; starting every head's longest first keeps
// the last wave short (list scheduling in decreasing length; measured in docs/PERFORMANCE.md).
__device__ __forceinline__ void pf_att_block(int& qb, int& h) {
  const int i = blockIdx.y * gridDim.x + blockIdx.x;  // < gridDim.x * gridDim.y, once each
  qb = gridDim.x - 1 - i / gridDim.y;
  h = i % gridDim.y;
}

__device__ __forceinline__ long long pf_gid() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ long long pf_gstride() { return (long long)gridDim.x * blockDim.x; }

// Sum over a warp by the butterfly; every lane gets it.
__device__ __forceinline__ float pf_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over a CTA of PF_ROW_THREADS threads; every thread gets it.
__device__ float pf_block_sum(float v) {
  __shared__ float part[PF_ROW_THREADS / 32];
  v = pf_warp_sum(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.f;
#pragma unroll
  for (int w = 0; w < PF_ROW_THREADS / 32; ++w) s += part[w];
  return s;
}

__device__ __forceinline__ unsigned pf_smem(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

// Four 8x8 bf16 matrices from shared memory; lane l gives the address of row l % 8 of matrix
// l / 8. .trans delivers each matrix transposed.
__device__ __forceinline__ void pf_ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(pf_smem(p)));
}
__device__ __forceinline__ void pf_ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(pf_smem(p)));
}

// d += a b: a 16x16 (row major, bf16), b 16x8 (column major, bf16), d 16x8 fp32. Fragments:
// a = {rows g, g+8} x {k 2c.., k 2c+8..}, b = k {2c.., 2c+8..} x column g, d = rows {g, g+8} x
// columns {2c, 2c+1}, with g = lane / 4 and c = lane % 4.
__device__ __forceinline__ void pf_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16 bytes global -> shared without registers; with ok false the destination is zero-filled
// and nothing is read (src must still be a valid address).
__device__ __forceinline__ void pf_cp_async16(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(pf_smem(dst)), "l"(src),
               "r"(ok ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void pf_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void pf_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// 2^x, flushing results below 2^-126 to zero (weights that small add nothing to the sums);
// 2^-inf = +0 (a masked score, an empty state).
__device__ __forceinline__ float pf_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The dynamic shared memory of every prefill kernel, declared once: declarations inside several
// functions make NVRTC warn that their linkage conflicts.
extern __shared__ __align__(16) unsigned char pf_smem_raw[];
