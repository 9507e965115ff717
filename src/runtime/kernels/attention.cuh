// Task kind attention: one KV head's query heads over one chunk of the live KV length, with
// the head norms, RoPE and the KV append of the step's new row.

// A head's constants (mk_head_consts: its norm scale and RoPE rotation) and a warp's first K/V
// row before the task's events (mk_attn_first) are printed before this file from their loop
// nests (ir/task_nests.h: loops, guards and every address; proved).

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
  // Rows of ir::AttentionRows (printed and proved): the new key row, or query head h of the group.
  const float* src = is_k ? (const float*)t.kx + mk_head_elem(t.kv_head, 0, D)
                          : (const float*)t.q + mk_head_elem(mk_q_head(t.kv_head, h, G), 0, D);
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

// One KV head's query heads over one chunk of the live KV length (see MkTask). Each warp runs
// an online softmax over its positions for up to MK_HEADS_PER_PASS query heads at once, so
// a K or V row is read once per pass, coalesced (lane owns dims lane + 32c); then the warps'
// (max, sum, output) states are combined through shared memory.

template <class Wait>
__device__ bool mk_attention(const MkTask& t, int position, float* sm, unsigned* arrivals, Wait wait) {
  const int D = t.head_dim, G = t.group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = MK_COMPUTE_THREADS >> 5;
  const int n = position + 1;
  const int j0 = (int)mk_even_split_begin(t.chunk, n, t.num_chunks);
  const int j1 = (int)mk_even_split_end(t.chunk, n, t.num_chunks);
  const bool appends = t.chunk == t.num_chunks - 1;  // its range ends at the new position
  float* qk = sm;                // G query heads, then the new key head
  float* wst = sm + (G + 2) * D; // per warp and head of a pass: D output sums, max, sum
  // The layer's caches: position j of the KV head at mk_kv_elem(h, j, 0, capacity, D) (ir::AttentionRows).
  float* kc = (float*)t.k_cache;
  float* vc = (float*)t.v_cache;
  const int kvh = t.kv_head, cap = (int)t.capacity;  // positions are ints on the device
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
  float kpre[DC], vpre[DC];
  const bool have_kv = mk_attn_first(kc, vc, D, kvh, cap, j0, j1, position, kpre, vpre);
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
      for (int i = lane; i < D; i += 32) kc[mk_kv_elem(kvh, position, i, cap, D)] = qk[G * D + i];
  }
  if (appends && warp == nw - 1) {
    const float* vx = (const float*)t.vx + mk_head_elem(kvh, 0, D);
    float v[DC];
    mk_load_head_row(vx, D, v);
#pragma unroll
    for (int c = 0; c < DC; ++c)
      if (lane + 32 * c < D) vc[mk_kv_elem(kvh, position, lane + 32 * c, cap, D)] = v[c];
  }
  mk_sync();
  // The passes over the query heads and their combine: mk_attn_passes, printed from its loop
  // nest (ir::attention_combine_nest: loops, guards, every address of the combine; proved).
  // A pass: each warp's states of heads g0 .. g0 + HP - 1 over its positions (mk_attn_pass,
  // printed from ir::attention_pass_nest: loops, guards and addresses; proved), the warp's
  // first position's rows from kpre, vpre in the first pass when they were loaded early.
  mk_attn_passes(t, wst, G, D, kvh, [&](int g0) {
    mk_attn_pass(t, qk, wst, kc, vc, G, D, kvh, cap, g0, j0, j1, have_kv && g0 == 0, kpre, vpre);
  });
  if (t.flags & MPK_MK_F_MERGE) mk_attn_arrive(t, arrivals);
  return true;
}

