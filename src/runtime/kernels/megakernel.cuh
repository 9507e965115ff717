// megakernel v0: one persistent CTA per worker runs its static queue of tasks for one decode
// step. The code generator prepends kernels/task_desc.h. No headers: NVRTC needs none.
//
// Per task: prefetch the task's weight rows into L2 (weights do not wait), wait on each event
// (thread 0 spins on an acquire load until counter >= need * step), compute, barrier, and
// thread 0 publishes with a fence and a release add on its trigger event. A wait longer than
// params.timeout_ns sets params.status and every worker leaves the step (no hang).
//
// Numerics: weights widened exactly to fp32, fp32 activations and accumulation, fp32 KV cache;
// formulas as src/ref/kernels.cc (no fast math).

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
template <>
struct MkW<MK_BF16> {
  static constexpr int kSize = 2;
  static constexpr int kVec = 8;
  __device__ static float load(const void* p, long long i) {
    return mk_bf16_to_f32(((const unsigned short*)p)[i]);
  }
  __device__ static void unpack(uint4 u, float* f) {
    unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = __uint_as_float(w[j] << 16);
      f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  }
};
template <>
struct MkW<MK_F16> {
  static constexpr int kSize = 2;
  static constexpr int kVec = 8;
  __device__ static float load(const void* p, long long i) {
    return mk_f16_to_f32(((const unsigned short*)p)[i]);
  }
  __device__ static void unpack(uint4 u, float* f) {
    unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = mk_f16_to_f32((unsigned short)(w[j] & 0xffffu));
      f[2 * j + 1] = mk_f16_to_f32((unsigned short)(w[j] >> 16));
    }
  }
};

__device__ __forceinline__ float mk_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float mk_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum / max; `red` holds >= 32 floats. Safe to call back to back.
__device__ float mk_block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = mk_warp_sum(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = 0;
  for (int i = 0; i < nw; ++i) r += red[i];
  return r;
}

__device__ float mk_block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = mk_warp_max(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int i = 1; i < nw; ++i) r = fmaxf(r, red[i]);
  return r;
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

// x . w_r for R rows by one warp; the results in every lane. Decode is bound by how many
// bytes are in flight: every lane issues R * kUnroll independent 16-byte loads before it
// uses any of them, instead of one load per dependent iteration.
template <int DT, int R>
__device__ void mk_dot_rows(const char* const (&w)[R], const float* xs, int k, float (&out)[R]) {
  const int lane = threadIdx.x & 31;
  constexpr int V = MkW<DT>::kVec;
  constexpr int kUnroll = 4;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  bool aligned = k % V == 0;
#pragma unroll
  for (int r = 0; r < R; ++r) aligned = aligned && (((u64)w[r]) & 15) == 0;
  if (aligned) {
    const int nv = k / V;
    int i = lane;
    for (; i + 32 * (kUnroll - 1) < nv; i += 32 * kUnroll) {
      uint4 u[R][kUnroll];
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < kUnroll; ++j) u[r][j] = mk_ld_stream((const uint4*)w[r] + i + 32 * j);
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
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
    for (; i < nv; i += 32) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float f[V];
        MkW<DT>::unpack(mk_ld_stream((const uint4*)w[r] + i), f);
#pragma unroll
        for (int e = 0; e < V; ++e) acc[r] += f[e] * xs[i * V + e];
      }
    }
  } else {
    for (int i = lane; i < k; i += 32)
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

// Epilogue of one output row: bias and residual in fp32, as the reference.
__device__ __forceinline__ void mk_store_row(const MkSlice& sl, int lr, float acc) {
  float v = acc;
  if (sl.bias) v = v + ((const float*)sl.bias)[lr];
  if (sl.res) v = v + ((const float*)sl.res)[lr];
  ((float*)sl.out)[lr] = v;
}

template <int DT>
__device__ void mk_linear(const MkTask& t, float* xs, float* red, int* redi) {
  const int k = t.k;
  const float* x = (const float*)t.x;
  if (t.input_mode == MPK_MK_IN_SILUMUL) {
    const float* up = (const float*)t.x2;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
      const float g = x[i];
      xs[i] = g / (1.0f + expf(-g)) * up[i];
    }
  } else {
    float ss = 0.f;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
      const float v = x[i];
      xs[i] = v;
      ss += v * v;
    }
    if (t.input_mode == MPK_MK_IN_RMSNORM) {
      ss = mk_block_sum(ss, red);
      const float r = 1.0f / sqrtf(ss / (float)k + t.eps);
      const float* nw = (const float*)t.norm_w;
      for (int i = threadIdx.x; i < k; i += blockDim.x) xs[i] = nw[i] * (xs[i] * r);
    }
  }
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int total = 0;
  for (int s = 0; s < t.num_slices; ++s) total += t.slices[s].rows;
  // Rows are dealt to warps in groups of kRows (one group per warp per round); the last,
  // partial group goes row by row.
  constexpr int kRows = 2;
  const int full = total / kRows;
  for (int g = warp; g < full; g += nw) {
    const char* w[kRows];
    int slice[kRows], local[kRows];
#pragma unroll
    for (int j = 0; j < kRows; ++j) mk_row_of(t, g * kRows + j, slice[j], local[j]);
#pragma unroll
    for (int j = 0; j < kRows; ++j)
      w[j] = (const char*)t.slices[slice[j]].w + (long long)local[j] * k * MkW<DT>::kSize;
    float acc[kRows];
    mk_dot_rows<DT, kRows>(w, xs, k, acc);
    if (lane == 0)
#pragma unroll
      for (int j = 0; j < kRows; ++j) mk_store_row(t.slices[slice[j]], local[j], acc[j]);
  }
  for (int r = full * kRows + warp; r < total; r += nw) {
    int s, lr;
    mk_row_of(t, r, s, lr);
    const char* w[1] = {(const char*)t.slices[s].w + (long long)lr * k * MkW<DT>::kSize};
    float acc[1];
    mk_dot_rows<DT, 1>(w, xs, k, acc);
    if (lane == 0) mk_store_row(t.slices[s], lr, acc[0]);
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
        const float v = out[i];
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
}

__device__ void mk_attention(const MkTask& t, int position, float* sm, float* red) {
  const int D = t.head_dim, G = t.group, half = D / 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  float* qk = sm;                   // (G + 1) heads: G query heads, then the key head
  float* vs = sm + (G + 1) * D;     // the value head
  const float* q = (const float*)t.q + (long long)t.q_head0 * D;
  const float* kx = (const float*)t.kx + (long long)t.kv_head * D;
  const float* vx = (const float*)t.vx + (long long)t.kv_head * D;
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) qk[i] = q[i];
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    qk[G * D + i] = kx[i];
    vs[i] = vx[i];
  }
  __syncthreads();
  // Head RMSNorm (Qwen3 q_norm / k_norm): one warp per head.
  for (int h = warp; h <= G; h += nw) {
    const bool is_k = h == G;
    if (!(t.flags & (is_k ? MPK_MK_F_K_NORM : MPK_MK_F_Q_NORM))) continue;
    const float* w = (const float*)(is_k ? t.k_norm : t.q_norm);
    float* xh = qk + h * D;
    float ss = 0.f;
    for (int i = lane; i < D; i += 32) ss += xh[i] * xh[i];
    ss = mk_warp_sum(ss);
    const float r = 1.0f / sqrtf(ss / (float)D + t.norm_eps);
    for (int i = lane; i < D; i += 32) xh[i] = w[i] * (xh[i] * r);
  }
  __syncthreads();
  // RoPE (rotate half) at `position`.
  const float* inv_freq = (const float*)t.inv_freq;
  const float p = (float)position;
  for (int idx = threadIdx.x; idx < (G + 1) * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    if (!(t.flags & (h == G ? MPK_MK_F_ROPE_K : MPK_MK_F_ROPE_Q))) continue;
    const float angle = p * inv_freq[i];
    const float c = cosf(angle), s = sinf(angle);
    float* xh = qk + h * D;
    const float a = xh[i], b = xh[i + half];
    xh[i] = a * c + (-b) * s;
    xh[i + half] = b * c + a * s;
  }
  __syncthreads();
  // Append k, v at `position`.
  float* kc = (float*)t.k_cache + (long long)t.kv_head * t.capacity * D;
  float* vc = (float*)t.v_cache + (long long)t.kv_head * t.capacity * D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    kc[(long long)position * D + i] = qk[G * D + i];
    vc[(long long)position * D + i] = vs[i];
  }
  __syncthreads();
  float* scores = (float*)t.scores;
  const int n = position + 1;
  for (int g = 0; g < G; ++g) {
    const float* qh = qk + g * D;
    // q.k: one thread per position, so every key row's loads are in flight at once (q is a
    // shared-memory broadcast).
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
      const float* kj = kc + (long long)j * D;
      float acc = 0.f;
      if (D % 4 == 0) {
        const float4* k4 = (const float4*)kj;
        for (int i = 0; i < D / 4; ++i) {
          const float4 kv = k4[i];
          acc += qh[4 * i] * kv.x;
          acc += qh[4 * i + 1] * kv.y;
          acc += qh[4 * i + 2] * kv.z;
          acc += qh[4 * i + 3] * kv.w;
        }
      } else {
        for (int i = 0; i < D; ++i) acc += qh[i] * kj[i];
      }
      scores[j] = acc * t.scale;
    }
    __syncthreads();
    float m = -__int_as_float(0x7f800000);
    for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, scores[j]);
    m = mk_block_max(m, red);
    float sum = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
      const float e = expf(scores[j] - m);
      scores[j] = e;
      sum += e;
    }
    sum = mk_block_sum(sum, red);  // its barriers also order the scores writes
    // P.V: the warps split the positions (a serial loop over positions is latency-bound);
    // lane owns dims lane + 32c; per-warp partials are summed through shared memory.
    float* part = vs + D;  // MPK_MK_MAX_WARPS * D floats
    float accv[MPK_MK_MAX_HEAD_DIM / 32];
#pragma unroll
    for (int c = 0; c < MPK_MK_MAX_HEAD_DIM / 32; ++c) accv[c] = 0.f;
    for (int j = warp; j < n; j += nw) {
      const float pj = scores[j] / sum;
      const float* vj = vc + (long long)j * D;
#pragma unroll
      for (int c = 0; c < MPK_MK_MAX_HEAD_DIM / 32; ++c) {
        const int e = lane + 32 * c;
        if (e < D) accv[c] += pj * vj[e];
      }
    }
#pragma unroll
    for (int c = 0; c < MPK_MK_MAX_HEAD_DIM / 32; ++c) {
      const int e = lane + 32 * c;
      if (e < D) part[warp * D + e] = accv[c];
    }
    __syncthreads();
    float* out = (float*)t.out + (long long)(t.q_head0 + g) * D;
    for (int e = threadIdx.x; e < D; e += blockDim.x) {
      float acc = 0.f;
      for (int w = 0; w < nw; ++w) acc += part[w * D + e];
      out[e] = acc;
    }
    __syncthreads();
  }
}

template <int DT>
__device__ void mk_argmax(const MkTask& t, float* red, int* redi) {
  const float* pv = (const float*)t.part_val;
  const int* pi = (const int*)t.part_idx;
  float best = -__int_as_float(0x7f800000);
  int bi = 0x7fffffff;
  bool have = false;
  for (int i = threadIdx.x; i < t.n; i += blockDim.x) {
    if (!have) { best = pv[i]; bi = pi[i]; have = true; } else mk_better(best, bi, pv[i], pi[i]);
  }
  mk_block_argmax(best, bi, red, redi);
  if (threadIdx.x == 0) *(int*)t.next_token = bi;
  if ((t.flags & MPK_MK_F_EMBED) && bi >= 0 && bi < t.vocab) {
    const char* row = (const char*)t.table + (long long)bi * t.hidden * MkW<DT>::kSize;
    float* out = (float*)t.embed_out;
    for (int i = threadIdx.x; i < t.hidden; i += blockDim.x) out[i] = MkW<DT>::load(row, i);
  }
}

__device__ __forceinline__ unsigned mk_load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <int DT>
__device__ void mk_run(const MkParams& prm) {
  extern __shared__ float mk_smem[];
  __shared__ float red[32];
  __shared__ int redi[32];
  __shared__ int abort_step;
  const MkTask* tasks = (const MkTask*)prm.tasks;
  const int* qb = (const int*)prm.queue_begin;
  const int* queue = (const int*)prm.queue;
  const int* waits = (const int*)prm.waits;
  const unsigned* needs = (const unsigned*)prm.needs;
  unsigned* counters = (unsigned*)prm.counters;
  volatile unsigned* status = (volatile unsigned*)prm.status;
  if (threadIdx.x == 0) abort_step = 0;
  __syncthreads();

  for (int qi = qb[blockIdx.x]; qi < qb[blockIdx.x + 1]; ++qi) {
    const MkTask& t = tasks[queue[qi]];
    // Weights do not wait: stream this task's rows towards L2 before the events.
    if (t.kind == MPK_MK_LINEAR)
      for (int s = 0; s < t.num_slices; ++s)
        mk_prefetch(t.slices[s].w, (long long)t.slices[s].rows * t.k * MkW<DT>::kSize);
    for (int wi = 0; wi < t.num_waits; ++wi) {
      const int e = waits[t.wait_begin + wi];
      if (threadIdx.x == 0) {
        const unsigned target = needs[e] * prm.step;
        const unsigned long long t0 = mk_globaltimer();
        unsigned spins = 0;
        // Wrap-safe: counters and targets grow by need per step and may pass 2^32.
        while ((int)(mk_load_acquire(counters + e) - target) < 0) {
          if (status[0] != 0) { abort_step = 1; break; }
          if ((++spins & 1023) == 0 && (long long)(mk_globaltimer() - t0) > prm.timeout_ns) {
            if (atomicCAS((unsigned*)prm.status, 0u, 1u) == 0u) {
              status[1] = blockIdx.x;
              status[2] = (unsigned)t.id;
              status[3] = (unsigned)e;
            }
            abort_step = 1;
            break;
          }
          __nanosleep(64);
        }
      }
      __syncthreads();
      if (abort_step) return;
    }
    switch (t.kind) {
      case MPK_MK_LINEAR: mk_linear<DT>(t, mk_smem, red, redi); break;
      case MPK_MK_ATTENTION: mk_attention(t, prm.position, mk_smem, red); break;
      case MPK_MK_ARGMAX: mk_argmax<DT>(t, red, redi); break;
      default: break;
    }
    __syncthreads();
    if (threadIdx.x == 0 && t.trigger >= 0) {
      __threadfence();
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counters + t.trigger)
                   : "memory");
    }
  }
}

extern "C" __global__ void __launch_bounds__(512) mpk_megakernel_f32(MkParams p) { mk_run<MK_F32>(p); }
extern "C" __global__ void __launch_bounds__(512) mpk_megakernel_bf16(MkParams p) { mk_run<MK_BF16>(p); }
extern "C" __global__ void __launch_bounds__(512) mpk_megakernel_f16(MkParams p) { mk_run<MK_F16>(p); }
