// Task kind attention merge: one KV head's chunk partials combined (online softmax), as a task
// of its own or by the last chunk of the head to finish (mk_attn_arrive).

// mk_attn_merge(t, part) combines one KV head's chunk partials (`part`: its first state row,
// ir::AttentionStates' partial_row(h, 0, 0)): per query head g and dim e, with M the largest
// chunk max, out = sum_c o_c e^(m_c - M) / sum_c l_c e^(m_c - M). Printed before this file from
// its loop nest (ir::attention_merge_nest: the loops, guards and every address, proved by
// superopt/prove_loop_nest), with the batches of MK_MERGE_BATCH chunks loaded at once.

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

