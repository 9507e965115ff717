// Task kind attention: one KV head's query heads over one chunk of the live KV length, with
// the head norms, RoPE and the KV append of the step's new row.

// A head's constants (mk_head_consts: its norm scale and RoPE rotation) and a warp's first K/V
// row before the task's events (mk_attn_first), and the heads' staging with the new rows'
// append (mk_attn_stage) are printed before this file from their loop nests (ir/task_nests.h:
// loops, guards and every address; proved).

// One KV head's query heads over one chunk of the live KV length (see MkTask). Each warp runs
// an online softmax over its positions for up to MK_HEADS_PER_PASS query heads at once, so
// a K or V row is read once per pass, coalesced (lane owns dims lane + 32c); then the warps'
// (max, sum, output) states are combined through shared memory.

template <class Wait>
__device__ bool mk_attention(const MkTask& t, int position, float* sm, unsigned* arrivals, Wait wait) {
  const int D = t.head_dim, G = t.group;
  const int warp = threadIdx.x >> 5;
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
  const int nh = appends ? G + 1 : G;  // the query heads, then the new key when it appends
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
  // Warp w stages heads w, w + nw, ...: its loads, the head norm and RoPE; the key's warp
  // appends the key row, the appending chunk's last warp the value row. One barrier then
  // publishes the heads and the new rows to the block.
  mk_attn_stage(t, qk, kc, vc, G, D, kvh, cap, position, appends, first);
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

