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
  float best = MK_NEG_INF;
  int bi = 0x7fffffff;
  mk_argmax_partials(t, best, bi);  // printed from ir::argmax_partials_nest (proved)
  mk_block_argmax(best, bi, red, redi);
#if MK_DRAWS == MPK_MK_SAMPLE_TOPK
  if (prm.sample_mode == MPK_MK_SAMPLE_TOPK && best == best)
    bi = mk_sample_topk((const float*)t.x, t.num_logits, prm, (u64)(prm.position + i) + 1, best, smem, red, redi);
#endif
  if (threadIdx.x == 0) {
    *(int*)t.next_token = bi;
    rec[i].token = bi;
    rec[i].flags = best != best ? MPK_MK_STEP_NONFINITE : 0;
  }
  const int feed = i + 1 < prm.num_forced ? ((const int*)prm.forced)[i + 1] : bi;
  // The row of the token fed (checked against the vocabulary there): printed from
  // ir::embedding_row_nest (proved for every feed).
  if (t.flags & MPK_MK_F_EMBED) mk_embed_row<DT>(t, feed);
}

