// CUDA sources shared by the compile tests and the GPU tests.
#pragma once

namespace mpk::cuda::test {

// out = a * x + y over bf16 vectors, 16-byte vector loads (8 bf16) with a scalar tail,
// grid-stride so any grid covers n.
inline constexpr const char* kAxpyBf16 = R"(
#include <cuda_bf16.h>

__device__ __forceinline__ __nv_bfloat162 axpy2(float a, __nv_bfloat162 x, __nv_bfloat162 y) {
  float2 xf = __bfloat1622float2(x);
  float2 yf = __bfloat1622float2(y);
  return __floats2bfloat162_rn(a * xf.x + yf.x, a * xf.y + yf.y);
}

extern "C" __global__ void axpy_bf16(const __nv_bfloat16* __restrict__ x,
                                     const __nv_bfloat16* __restrict__ y,
                                     __nv_bfloat16* __restrict__ out, float a, int n) {
  const int vectors = n / 8;
  const int stride = gridDim.x * blockDim.x;
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    uint4 xv = reinterpret_cast<const uint4*>(x)[v];
    uint4 yv = reinterpret_cast<const uint4*>(y)[v];
    uint4 ov;
    const __nv_bfloat162* xs = reinterpret_cast<const __nv_bfloat162*>(&xv);
    const __nv_bfloat162* ys = reinterpret_cast<const __nv_bfloat162*>(&yv);
    __nv_bfloat162* os = reinterpret_cast<__nv_bfloat162*>(&ov);
#pragma unroll
    for (int k = 0; k < 4; ++k) os[k] = axpy2(a, xs[k], ys[k]);
    reinterpret_cast<uint4*>(out)[v] = ov;
  }
  for (int i = vectors * 8 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = __float2bfloat16_rn(a * __bfloat162float(x[i]) + __bfloat162float(y[i]));
  }
}
)";

// Needs every block resident at once: each block writes its share of `mid`, all blocks meet at
// a counter barrier, then each reads elements other blocks wrote: out[i] = 2 * mid[n - 1 - i].
inline constexpr const char* kGridExchange = R"(
__device__ void grid_barrier(unsigned int* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
    while (atomicAdd(counter, 0u) < gridDim.x) __nanosleep(64);
    __threadfence();
  }
  __syncthreads();
}

extern "C" __global__ void grid_exchange(const float* __restrict__ in, float* mid, float* out,
                                         unsigned int* counter, int n) {
  const int stride = gridDim.x * blockDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) mid[i] = in[i] + 1.0f;
  grid_barrier(counter);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = 2.0f * __ldcg(mid + (n - 1 - i));
}
)";

// Uses `bytes` of dynamic shared memory: out[i] = in[i] reversed within each block's tile.
inline constexpr const char* kSharedReverse = R"(
extern "C" __global__ void shared_reverse(const float* in, float* out, int tile) {
  extern __shared__ float buf[];
  const float* src = in + blockIdx.x * tile;
  float* dst = out + blockIdx.x * tile;
  for (int i = threadIdx.x; i < tile; i += blockDim.x) buf[i] = src[i];
  __syncthreads();
  for (int i = threadIdx.x; i < tile; i += blockDim.x) dst[i] = buf[tile - 1 - i];
}
)";

inline constexpr const char* kSyntaxError = R"(
extern "C" __global__ void broken(float* p) {
  p[0] = undeclared_identifier_mpk + 1.0f
}
)";

}  // namespace mpk::cuda::test
