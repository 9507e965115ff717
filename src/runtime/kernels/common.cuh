// The megakernel's source is assembled by the code generator (runtime/megakernel.cc) from
// these files, in this order: the code parameters as #defines (MK_BLOCK_THREADS,
// MK_LOADS_IN_FLIGHT, MK_MAX_KSPLIT, MK_HEADS_PER_PASS, ...: runtime/kernel_params.h),
// task_desc.h, the layout formulas (ir/layouts.h), scalar.cuh (rules shared with the prefill's
// source), common.cuh, the sampler's arithmetic (ref/sampling_math.h),
// the online-softmax formulas (ir/online_softmax.h), the weight staging (stage.cuh), the draws
// (sample.cuh, then for the top-k kernel its printed loop nests and sample_topk.cuh), one file
// per task kind (linear, merge, attention, argmax) with the loop nests each calls printed
// before it (ir/task_nests.h), the generated dispatch over the linear variants the kernel is built with
// (runtime/variants.h), protocol.cuh (the worker loop), and the entry point of the model's
// weight dtype. No headers: NVRTC needs none.
//
// Numerics: weights widened exactly to fp32, fp32 activations and accumulation, fp32 KV cache;
// formulas as src/ref/kernels.cc (no fast math), two of them reassociated: attention sums in
// online-softmax order, and RMSNorm's 1/rms scales the projection's dot products instead of
// its input (w . (g * x * r) = r * (w . (g * x))).
//
// This file: device helpers every task kind uses.

#define MK_F32 0
#define MK_BF16 1
#define MK_F16 2

typedef unsigned long long u64;

// A worker is MK_BLOCK_THREADS compute threads, then with MK_CONTROLLER_WARP one controller
// warp (protocol.cuh) that takes part only in the barriers around a task's wait and its end.
// Task code counts and synchronises the compute threads alone: MK_COMPUTE_THREADS, mk_sync().
#define MK_LAUNCH_THREADS (MK_BLOCK_THREADS + 32 * MK_CONTROLLER_WARP)
#if MK_CONTROLLER_WARP
#define MK_COMPUTE_THREADS MK_BLOCK_THREADS
__device__ __forceinline__ void mk_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(MK_BLOCK_THREADS) : "memory");
}
// The barrier of all the worker's threads at a task's wait, which the controller warp and the
// compute warps reach at different instructions: barrier.sync without .aligned (bar.sync and
// __syncthreads are .aligned: every thread at the same instruction).
__device__ __forceinline__ void mk_sync_wait() { asm volatile("barrier.sync 0;" ::: "memory"); }
#else
#define MK_COMPUTE_THREADS blockDim.x
__device__ __forceinline__ void mk_sync() { __syncthreads(); }
__device__ __forceinline__ void mk_sync_wait() { __syncthreads(); }
#endif

__device__ __forceinline__ unsigned long long mk_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// MK_PHASE_TIMERS, profile sessions: the running task's timers (MPK_MK_T_*), set by the worker
// loop before the task's wait; null otherwise. In shared memory and read where used, so that no
// register holds it through the task's loops. (Without MK_PHASE_TIMERS there is no code: even
// the check measured 0.3-0.9% of a decode step.)
#if MK_PHASE_TIMERS
__shared__ u64* mk_task_timers;
__device__ __forceinline__ u64* mk_timers() { return *(u64* volatile*)&mk_task_timers; }
#else
__device__ __forceinline__ u64* mk_timers() { return nullptr; }
#endif
// Thread 0 records point k of the running task, in profile sessions.
__device__ __forceinline__ void mk_time(int k) {
  if (threadIdx.x == 0)
    if (u64* tp = mk_timers()) tp[k] = mk_globaltimer();
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
  typedef float T;                // an element, widened by cvt
  __device__ static float cvt(float x) { return x; }
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
  typedef unsigned short T;
  __device__ static float cvt(unsigned short h) { return mk_half_to_f32<DT>(h); }
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
  for (int o = 16; o > 0; o >>= 1) v = mk_dp_add(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ void mk_block_argmax(float& v, int& i, float* redv, int* redi) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = MK_COMPUTE_THREADS >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float v2 = __shfl_xor_sync(0xffffffffu, v, o);
    int i2 = __shfl_xor_sync(0xffffffffu, i, o);
    mk_better(v, i, v2, i2);
  }
  mk_sync();
  if (lane == 0) { redv[warp] = v; redi[warp] = i; }
  mk_sync();
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

// L2 prefetch of `bytes` from p, spread over the block.
__device__ __forceinline__ void mk_prefetch(u64 p, long long bytes) {
  for (long long off = (long long)threadIdx.x * 128; off < bytes; off += (long long)MK_COMPUTE_THREADS * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
}

// The max of an empty online-softmax state.
#define MK_NEG_INF (-__int_as_float(0x7f800000))

// What staging head h of an attention task needs besides the head itself, all known before the
// task's events: this lane's elements of the head-norm scale and the RoPE rotation at the step's
// position (lane + 32c; ir::attention_head_consts_nest).
struct MkHeadConsts {
  float w[MK_MAX_HEAD_DIM / 32];
  float cs[MK_MAX_HEAD_DIM / 64], sn[MK_MAX_HEAD_DIM / 64];
};
