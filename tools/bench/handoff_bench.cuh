// Device side of handoff_bench: the cost of handing work from one SM to another through a
// counter in global memory, with the megakernel's release (fence.acq_rel + relaxed add) and
// several ways to wait. One worker CTA per SM (the host sizes shared memory so), launched
// cooperatively so that all are resident. Times are clock64 cycles, converted on the host
// with the globaltimer span of the same run.
typedef unsigned long long u64;

// How a waiter polls a counter until it reaches `need`.
enum WaitMode {
  kAcquire = 0,       // ld.acquire.gpu in a tight loop (the megakernel's wait)
  kRelaxedFence = 1,  // ld.relaxed.gpu in a loop, one fence.acq_rel after success
  kBackoff = 2,       // ld.acquire.gpu with __nanosleep(32) between polls
  kVolatile = 3,      // volatile load + __threadfence() after success
};

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned ld_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ u64 globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void wait_for(const unsigned* p, unsigned need, int mode) {
  switch (mode) {
    case kAcquire:
      while ((int)(ld_acquire(p) - need) < 0) {}
      break;
    case kRelaxedFence:
      while ((int)(ld_relaxed(p) - need) < 0) {}
      asm volatile("fence.acq_rel.gpu;" ::: "memory");
      break;
    case kBackoff:
      while ((int)(ld_acquire(p) - need) < 0) __nanosleep(32);
      break;
    default:
      while ((int)(*(volatile const unsigned*)p - need) < 0) {}
      __threadfence();
      break;
  }
}

// The megakernel's release: the block's writes (ordered before this thread by a barrier), then
// the counter.
__device__ __forceinline__ void release_add(unsigned* p) {
  asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory");
}

// Ping-pong between CTA 0 and CTA `peer`: CTA 0 releases ping, the peer sees it and releases
// pong, CTA 0 sees pong. samples[i] = the round trip of iteration i in cycles (two hand-offs).
// span[0..1] = globaltimer and clock64 over the whole loop (the host's cycles-to-ns rate).
extern "C" __global__ void pingpong(unsigned* flags, int iters, int mode, int peer, u64* samples,
                                    u64* span) {
  if (threadIdx.x != 0) return;
  unsigned* ping = flags;
  unsigned* pong = flags + 32;  // another 128-byte line
  if (blockIdx.x == 0) {
    const u64 g0 = globaltimer(), c0 = clock64();
    for (int i = 0; i < iters; ++i) {
      const u64 t = clock64();
      release_add(ping);
      wait_for(pong, (unsigned)(i + 1), mode);
      samples[i] = clock64() - t;
    }
    span[0] = globaltimer() - g0;
    span[1] = clock64() - c0;
  } else if ((int)blockIdx.x == peer) {
    for (int i = 0; i < iters; ++i) {
      wait_for(ping, (unsigned)(i + 1), mode);
      release_add(pong);
    }
  }
}

// A chain of `stages` dependent empty tasks dealt round-robin over all CTAs: stage s runs on
// CTA s % gridDim.x, waits for the counter to reach s and releases s + 1. samples[0] = the
// globaltimer span of the whole chain (ns).
extern "C" __global__ void chain(unsigned* counter, int stages, int mode, u64* samples) {
  const u64 t0 = globaltimer();
  for (int s = blockIdx.x; s < stages; s += gridDim.x) {
    if (threadIdx.x == 0) wait_for(counter, (unsigned)s, mode);
    __syncthreads();
    if (threadIdx.x == 0) release_add(counter);
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    wait_for(counter, (unsigned)stages, mode);
    samples[0] = globaltimer() - t0;
  }
}

// `stages` all-to-all stages (a layer's stage boundary): every CTA waits until all CTAs have
// released the previous stage (counter >= s * gridDim.x), then releases its part of stage s.
// samples[s] = the cycles CTA 0 spent from its release of stage s - 1 to seeing stage s - 1
// complete (the fan-in), for s >= 1; span as in pingpong.
extern "C" __global__ void fanin(unsigned* counter, int stages, int mode, u64* samples, u64* span) {
  const u64 g0 = globaltimer(), c0 = clock64();
  u64 t = clock64();
  for (int s = 0; s < stages; ++s) {
    if (threadIdx.x == 0) {
      if (s > 0) {
        wait_for(counter, (unsigned)(s * gridDim.x), mode);
        if (blockIdx.x == 0) samples[s] = clock64() - t;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      t = clock64();
      release_add(counter);
    }
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    wait_for(counter, (unsigned)(stages * gridDim.x), mode);
    span[0] = globaltimer() - g0;
    span[1] = clock64() - c0;
  }
}

// A poll queued behind the worker's own weight loads. Each round, the warps of every CTA
// (all: the memory system as loaded as in a decode step; or CTA 0 alone) issue `loads`
// 16-byte streaming loads per thread from `weights` (a buffer larger than L2, a new slice per
// round and CTA), then CTA 0's thread 0 polls a flag that is already set; samples[r] = cycles
// from issuing the poll to its value arriving. mode 0: the polling thread's warp issued loads
// too (today's worker); mode 1: warp 0 issues no loads and only polls (a controller warp);
// mode 2: as mode 0 with L2 prefetches (prefetch.global.L2) instead of loads.
// poll: the load that polls, 0 ld.acquire.gpu, 1 ld.relaxed.gpu, 2 volatile (ld.volatile).
// sink keeps the loads alive.
extern "C" __global__ void poll_behind_loads(const uint4* weights, unsigned long long words,
                                             const unsigned* flag, int rounds, int loads,
                                             int mode, int all_ctas, int poll, u64* samples,
                                             unsigned* sink) {
  if (blockIdx.x != 0 && !all_ctas) return;
  const int warp = threadIdx.x >> 5;
  const bool loader = mode == 0 || warp != 0;
  unsigned acc = 0;
  for (int r = 0; r < rounds; ++r) {
    __syncthreads();
    uint4 v[16];
    if (loader) {
      const unsigned long long base =
          (((unsigned long long)r * gridDim.x + blockIdx.x) * blockDim.x * 16 + threadIdx.x) %
          (words - 16 * blockDim.x);
#pragma unroll
      for (int k = 0; k < 16; ++k)
        if (k < loads) {
          const uint4* p = weights + base + (unsigned long long)k * blockDim.x;
          if (mode == 2) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
            v[k] = make_uint4(0, 0, 0, 0);
          } else {
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[k].x), "=r"(v[k].y), "=r"(v[k].z), "=r"(v[k].w) : "l"(p));
          }
        }
    }
    if (threadIdx.x == 0 && blockIdx.x == 0) {
      const u64 t = clock64();
      const unsigned f = poll == 0   ? ld_acquire(flag)
                         : poll == 1 ? ld_relaxed(flag)
                                     : *(volatile const unsigned*)flag;
      acc += f;
      samples[r] = clock64() - t;
    }
    if (loader) {
#pragma unroll
      for (int k = 0; k < 16; ++k)
        if (k < loads) acc += v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
    }
  }
  if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;
}
