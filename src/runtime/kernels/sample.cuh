// Draws in the megakernel: a kernel built with MK_DRAWS = MPK_MK_SAMPLE_GUMBEL or
// MPK_MK_SAMPLE_TOPK holds that draw's code, the greedy kernel (MK_DRAWS 0) none of it. An LM-head tile under MPK_MK_SAMPLE_GUMBEL adds the Gumbel noise to its
// logits (mk_sample_gumbel); under MPK_MK_SAMPLE_TOPK, the argmax task's draw follows, by one
// CTA over the step's logits (mk_sample_topk). The draw is ref/sampling.h's, bit for bit:
// the same candidates in the same order, the nucleus weights summed one after the other in
// that order, the same Gumbel keys (sampling_math.h).
//
// Candidates are ranked by a 64-bit key, larger first: the logit's bits made monotone, then
// the complement of the id (equal logits: the lower id first; -0 counts as +0, as the
// reference's comparison does). Up to MPK_MK_SAMPLE_KMAX top_k candidates are found and sorted
// in shared memory, and the rest is the reference's loop; a nucleus over more keys is found by
// radix select over the logits (sample_topk.cuh).

// What an LM-head tile needs for MPK_MK_SAMPLE_GUMBEL: its partial is then the argmax of the
// Gumbel keys of the token at `position`.
struct MkDraw {
  bool gumbel;
  float temperature;
  u64 seed;
  u64 position;
};

#if MK_DRAWS
// v / t, the division skipped at t = 1 (a common temperature), where its result is v exactly.
__device__ __forceinline__ float mk_sample_z(float v, float t) { return t == 1.f ? v : __fdiv_rn(v, t); }
// The Gumbel key of logit v of id `id` under temperature t. It divides at t = 1 too (the same
// value as mk_sample_z's): the branch through mk_sample_z made the top-k kernel spill 36 bytes.
__device__ __forceinline__ float mk_sample_gumbel(float v, float t, u64 seed, u64 position, int id) {
  return mpk_gumbel_key(__fdiv_rn(v, t), seed, position, (unsigned)id);
}
// A float's bits made monotone as an unsigned (larger float, larger unsigned), and back.
__device__ __forceinline__ unsigned mk_sample_ord(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float mk_sample_unord(unsigned u) {
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}
__device__ __forceinline__ u64 mk_sample_key(float v, int id) {
  return ((u64)mk_sample_ord(v == 0.f ? 0.f : v) << 32) | (u64)(0xffffffffu - (unsigned)id);
}
__device__ __forceinline__ int mk_sample_id(u64 key) { return (int)(0xffffffffu - (unsigned)key); }
// The logit a key holds (a -0 as +0: equal in every use below).
__device__ __forceinline__ float mk_sample_logit(u64 key) { return mk_sample_unord((unsigned)(key >> 32)); }

// Whether `key` agrees with `prefix` above bit `shift` (every key does when shift is 64).
__device__ __forceinline__ bool mk_sample_in(u64 key, u64 prefix, int shift) {
  return shift >= 64 || ((key ^ prefix) >> shift) == 0;
}

// f for the four logits of vector j of the step's logits (mk_sample_scan, printed from
// ir::sample_scan_nest: the pass over the logits that the functions below run).
template <class F>
__device__ __forceinline__ void mk_sample_visit4(F& f, int j, float4 v, bool in) {
  f(4 * j, v.x, in);
  f(4 * j + 1, v.y, in);
  f(4 * j + 2, v.z, in);
  f(4 * j + 3, v.w, in);
}
#endif  // MK_DRAWS
