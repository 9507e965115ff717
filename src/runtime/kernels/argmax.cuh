// Task kind argmax: the step's token from the LM-head tiles' partials (or a draw), and the
// next step's embedding row.

// The argmax over the LM-head tiles' partials (under MPK_MK_SAMPLE_GUMBEL their argmax of
// the Gumbel keys, which is the draw; under MPK_MK_SAMPLE_TOPK the draw follows from the
// logits: sample.cuh); writes the step's token, and the embedding of the token the next step
// is fed: the next forced (prompt) token while there is one, else the step's token. A NaN
// partial says a logit was not finite: no draw then.
template <int DT>
__device__ void mk_argmax(const MkTask& t, const MkParams& prm, int i, MkStepRecord* rec,
                          float* red, int* redi, float* smem) {
  const float* pv = (const float*)t.part_val;
  const int* pi = (const int*)t.part_idx;
  float best = MK_NEG_INF;
  int bi = 0x7fffffff;
  bool have = false;
  for (int j = threadIdx.x; j < t.n; j += MK_COMPUTE_THREADS) {
    if (!have) { best = pv[j]; bi = pi[j]; have = true; } else mk_better(best, bi, pv[j], pi[j]);
  }
  mk_block_argmax(best, bi, red, redi);
#if MK_DRAWS == MPK_MK_SAMPLE_TOPK
  if (prm.sample_mode == MPK_MK_SAMPLE_TOPK && best == best)
    bi = mk_sample_topk((const float*)t.x, t.num_logits, prm, (u64)(prm.position + i) + 1, smem, red, redi);
#endif
  if (threadIdx.x == 0) {
    *(int*)t.next_token = bi;
    rec[i].token = bi;
    rec[i].flags = best != best ? MPK_MK_STEP_NONFINITE : 0;
  }
  const int feed = i + 1 < prm.num_forced ? ((const int*)prm.forced)[i + 1] : bi;
  if ((t.flags & MPK_MK_F_EMBED) && feed >= 0 && feed < t.vocab) {
    const char* row = (const char*)t.table + (long long)feed * t.hidden * MkW<DT>::kSize;
    float* out = (float*)t.embed_out;
    // The row's loads all go out before the stores (a store could alias the next load).
    constexpr int U = 8;
    for (int j0 = threadIdx.x; j0 < t.hidden; j0 += MK_COMPUTE_THREADS * U) {
      float v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u * (int)MK_COMPUTE_THREADS;
        v[u] = j < t.hidden ? MkW<DT>::load(row, j) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (j0 + u * (int)MK_COMPUTE_THREADS < t.hidden) out[j0 + u * (int)MK_COMPUTE_THREADS] = v[u];
    }
  }
}

