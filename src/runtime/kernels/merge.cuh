// Task kind attention merge: one KV head's chunk partials combined (online softmax), as a task
// of its own or by the last chunk of the head to finish (mk_attn_arrive).

// Combines one KV head's chunk partials (`part`: its first state row, ir::AttentionStates'
// partial_row(h, 0, 0); chunk c's query head g is row partial_row(0, c, g) from there): per query
// head g and dim e, with M the largest chunk max, out = sum_c o_c e^(m_c - M) / sum_c l_c e^(m_c - M).
// The partials of up to kBatch chunks are loaded at once (one round trip), a running state
// rescaled between batches (with at most kBatch chunks the sums are exactly the formula's).
// They were written by other workers in this step: read through L2 (__ldcg), never from a line
// this SM's L1 may hold from an earlier step.
__device__ void mk_attn_merge(const MkTask& t, const float* part) {
  constexpr int kBatch = MK_MERGE_BATCH;
  const int D = t.head_dim, G = t.group, C = t.num_chunks;
  for (int idx = threadIdx.x; idx < G * D; idx += MK_COMPUTE_THREADS) {
    const int g = mk_grid_row(idx, D), e = mk_grid_col(idx, D);
    float M = MK_NEG_INF, L = 0.f, O = 0.f;
    for (int c0 = 0; c0 < C; c0 += kBatch) {
      float mc[kBatch], lc[kBatch], oc[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const float* pc = part + mk_state_slot(mk_partial_row(0, c0 + j, g, C, G), 0, D);
        const bool in = c0 + j < C;
        mc[j] = in ? __ldcg(pc + D) : MK_NEG_INF;
        lc[j] = in ? __ldcg(pc + D + 1) : 0.f;
        oc[j] = in ? __ldcg(pc + e) : 0.f;
      }
      float Mb = M;
#pragma unroll
      for (int j = 0; j < kBatch; ++j) Mb = fmaxf(Mb, mc[j]);
      const float f0 = mk_rescale(M, Mb);
      L = L * f0;
      O = O * f0;
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (c0 + j >= C) continue;
        const float f = mk_rescale(mc[j], Mb);
        L = mk_os_update(L, 1.0f, lc[j], f);
        O = mk_os_update(O, 1.0f, oc[j], f);
      }
      M = Mb;
    }
    ((float*)t.out)[mk_head_elem(mk_q_head(t.kv_head, g, G), e, D)] = O / L;  // ir::AttentionRows
  }
}

// A chunk with the merge folded in arrives at its head's counter (cyclic, one round per step);
// the last to arrive merges everyone's partials.
__device__ void mk_attn_arrive(const MkTask& t, unsigned* arrivals) {
  __shared__ int last;
  if (threadIdx.x == 0) {
    // This block's partials (ordered by the caller's barrier) before arriving; the others'
    // before reading them: acquire-release fences around the arrival.
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    const unsigned old = atomicInc(arrivals + t.arrival, (unsigned)(t.num_chunks - 1));
    last = old == (unsigned)(t.num_chunks - 1);
    if (last) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  }
  mk_sync();
  if (last)
    mk_attn_merge(t, (const float*)t.partial -
                         mk_state_slot(mk_partial_row(0, t.chunk, 0, t.num_chunks, t.group), 0, t.head_dim));
}

