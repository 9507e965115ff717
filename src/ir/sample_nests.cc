// The top-k draw's loop nest (ir/task_nests.h; kernels/sample.cuh): one CTA's pass over the
// step's logits.
#include <map>
#include <string>

#include "ir/task_nests.h"

namespace mpk::ir {

const LoopNest& sample_scan_nest() {
  static const LoopNest n = [] {
    auto v = [](const char* name) { return IndexExpr::var(name); };
    // n4: the whole vectors (a let in the body; the ranges and covers are over the parameters).
    const IndexExpr N = v("n"), n4 = v("n4"), vecs = N / 4, U = v("U"), threads = v("threads"), tid = v("tid");
    const IndexExpr j0 = v("j0"), u = v("u"), j = v("j"), jj = v("jj");
    LoopNest m;
    m.signature = "template <class F>\n__device__ __forceinline__ void mk_sample_scan(const float* logits, int n_, F f)";
    m.params = {{"n", "n_", 1, 1 << 24}, {"U", "8", 8, 8}, {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"vectors", 0, vecs}, {"tail", 4 * vecs, N}, {"round", 0, U}};
    m.accesses = {
        // The logits as 16-byte vectors (buffers are 256-byte aligned): vector jj's thread,
        // round and slot.
        {"l4", "((const float4*)logits)", "vectors", j, true,
         {{{{"jj", vecs}}, jj,
           {{"tid", jj % threads}, {"r", jj / (threads * U)}, {"u", jj % (threads * U) / threads}}}}},
        {"v", "v", "round", u, false, {}, CType::Int},
        {"x", "logits", "tail", j, true, {{{{"jj", N - 4 * vecs}}, 4 * vecs + jj, {{"tid", jj % threads}, {"j0", 4 * vecs + jj / threads * threads}}}}},
    };
    // Calls f(i, logits[i], true) for every i < n, in rounds that whole warps take together (f
    // may use warp collectives; a lane past the end calls f with false). Each thread's U loads
    // of a round go out before any is used: one CTA streams the logits from L2, so the loads'
    // latency, not their bytes, sets the pace.
    m.body = {thread("tid"), let("n4", N / 4),
              loop("r", LoopKind::Serial, (n4 + threads * U - 1) / (threads * U), 1,
                   {let("j0", v("r") * (threads * U)), code("float4 v[U];"),
                    loop("u", LoopKind::Unrolled, U, 1,
                         {let("j", j0 + u * threads + tid), code("{v} = make_float4(0.f, 0.f, 0.f, 0.f);"),
                          guard(j, n4, {code("{v} = __ldcg(&{l4});")})}),
                    loop("u", LoopKind::Unrolled, U, 1,
                         {let("j", j0 + u * threads + tid), code("bool in = false;"), guard(j, n4, {code("in = true;")}),
                          code("mk_sample_visit4(f, j, {v}, in);")})}),
              loop_from("j0", 4 * n4, N, threads,
                        {let("j", j0 + tid), code("float x = 0.f;"), code("bool in = false;"),
                         guard(j, N, {code("x = __ldcg(&{x});"), code("in = true;")}), code("f(j, x, in);")})};
    return m;
  }();
  return n;
}

}  // namespace mpk::ir
