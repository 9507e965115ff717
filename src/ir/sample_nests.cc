// The top-k draw's loop nests (ir/task_nests.h; kernels/sample_topk.cuh): one CTA's pass over
// the step's logits, its radix histogram's reset, and its loops over the sorted candidates.
#include <map>
#include <string>
#include <vector>

#include "ir/layouts.h"
#include "ir/task_nests.h"

namespace mpk::ir {
namespace {

IndexExpr v(const char* name) { return IndexExpr::var(name); }

// The pass over the logits, `U` vectors in flight per thread, printed as `name`.
LoopNest scan_nest(const std::string& name, int64_t U_value) {
  // n4: the whole vectors (a let in the body; the ranges and covers are over the parameters).
  const IndexExpr N = v("n"), n4 = v("n4"), vecs = N / 4, U = v("U"), threads = v("threads"), tid = v("tid");
  const IndexExpr j0 = v("j0"), u = v("u"), j = v("j"), jj = v("jj");
  LoopNest m;
  m.signature = "template <class F>\n__device__ __forceinline__ void " + name + "(const float* logits, int n_, F f)";
  m.params = {{"n", "n_", 1, 1 << 24}, {"U", std::to_string(U_value), U_value, U_value},
              {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
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
}

}  // namespace

const LoopNest& sample_scan_nest() {
  static const LoopNest n = scan_nest("mk_sample_scan", 8);
  return n;
}

const LoopNest& sample_scan2_nest() {
  static const LoopNest n = scan_nest("mk_sample_scan2", 2);
  return n;
}

const LoopNest& sample_stride_nest() {
  static const LoopNest n = [] {
    const IndexExpr N = v("n"), S = v("S"), U = v("U"), threads = v("threads"), tid = v("tid");
    const IndexExpr j0 = v("j0"), u = v("u"), j = v("j"), jj = v("jj");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_sample_stride(const float* logits, int n_, u64* keys)";
    m.params = {{"n", "n_", 1, 1 << 24}, {"S", "MPK_MK_SAMPLE_GROUP / 2", 1, 1 << 11}, {"U", "8", 8, 8},
                {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"logits", 0, N}, {"sample", 0, S}, {"round", 0, U}};
    // floor(j n / S) without the product j n (past int for large vocabularies): with n = q S + r,
    // j n / S = j q + j r / S, and j r < S^2.
    const IndexExpr pos = j * (N / S) + j * (N % S) / S;
    const std::map<std::string, IndexExpr> at = {{"tid", jj % threads},
                                                 {"j0", jj % threads + jj / (threads * U) * (threads * U)},
                                                 {"u", jj % (threads * U) / threads}};
    m.accesses = {
        // Sample j: logit j n / S, inside the logits (that distinct samples read distinct logits
        // when n > S is not proved: Z3 went past 10 s on the product j n at 128 threads).
        {"x", "logits", "logits", pos, false, {}},
        {"v", "v", "round", u, false, {}, CType::Int},
        {"key", "keys", "sample", j, true, {{{{"jj", S}}, jj, at, {{S, N}}}}, CType::Int},
    };
    // Every load of a thread's round before any key is made.
    m.body = {guard(S, N,  // the caller's: more logits than the sort holds
                    {thread("tid"),
                     loop_from("j0", tid, S, threads * U,
                               {code("float v[U];"),
                                loop("u", LoopKind::Unrolled, U, 1,
                                     {let("j", j0 + u * threads), code("{v} = 0.f;"),
                                      guard(j, S, {code("{v} = __ldcg(&{x});")})}),
                                loop("u", LoopKind::Unrolled, U, 1,
                                     {let("j", j0 + u * threads),
                                      guard(j, S, {let("at", pos), code("{key} = mk_sample_key({v}, at);")})})})})};
    return m;
  }();
  return n;
}

const LoopNest& sample_hist_clear_nest() {
  static const LoopNest n = [] {
    const IndexExpr B = v("B"), b = v("b"), bb = v("bb");
    LoopNest m;
    // Not inlined: inlined, the loop's step bound in a register (blockDim.x without the
    // controller warp) cost the top-k kernel a spill. Once per radix pass, the draw's fallback.
    m.signature = "__device__ __noinline__ void mk_sample_hist_clear(unsigned* hist)";
    m.params = {{"B", "256", 256, 256}, {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"bins", 0, B}};
    m.accesses = {{"bin", "hist", "bins", b, true, {{{{"bb", B}}, bb, {{"b", bb}}}}, CType::Int}};
    m.body = {loop("b", LoopKind::Threads, B, 1, {code("{bin} = 0u;")})};
    return m;
  }();
  return n;
}

namespace {

// One thread's loop over k weights in rounds of U: each round's loads first, then `use` per
// weight in order ({x}: the weight); `access` names the weights' access.
Block weight_rounds(const IndexExpr& K, const char* access, Block use) {
  const IndexExpr U = v("U"), j0 = v("j0"), u = v("u"), j = v("j");
  return Block{code("float x[U];"),
               loop("u", LoopKind::Unrolled, U, 1,
                    {let("j", j0 + u), code("{x} = 0.f;"), guard(j, K, {code(std::string("{x} = {") + access + "};")})}),
               loop("u", LoopKind::Unrolled, U, 1, {let("j", j0 + u), guard(j, K, std::move(use))})};
}

LoopNest weights_nest(std::string signature) {
  const IndexExpr K = v("k");
  LoopNest m;
  m.signature = std::move(signature);
  m.params = {{"k", "k_", 1, 1 << 16}, {"U", "8", 8, 8}, {"threads", "1", 1, 1}};
  m.ranges = {{"weights", 0, K}, {"round", 0, v("U")}};
  m.accesses = {{"x", "x", "round", v("u"), false, {}, CType::Int}};
  return m;
}

}  // namespace

const LoopNest& sample_total_nest() {
  static const LoopNest n = [] {
    const IndexExpr K = v("k"), U = v("U"), jj = v("jj");
    LoopNest m = weights_nest("__device__ __forceinline__ u64 mk_sample_total(const float* w, int k_)");
    m.accesses.push_back(
        {"w", "w", "weights", v("j"), true, {{{{"jj", K}}, jj, {{"tid", 0}, {"j0", jj / U * U}, {"u", jj % U}}}}, CType::Int});
    // The nest's one thread (thread 0 of the block calls it); integer adds: any order.
    m.body = {thread("tid", "0"), code("u64 total = 0;"),
              loop("j0", LoopKind::Serial, K, U, weight_rounds(K, "w", {code("total += mpk_nucleus_mass({x});")})),
              code("return total;")};
    return m;
  }();
  return n;
}

const LoopNest& sample_cut_nest() {
  static const LoopNest n = [] {
    const IndexExpr K = v("k"), U = v("U");
    LoopNest m = weights_nest("__device__ __forceinline__ int mk_sample_cut(const float* w, int k_, u64 run, double target)");
    // The loop stops at the cut (break): its reads are a prefix, no cover.
    m.accesses.push_back({"w", "w", "weights", v("j"), true, {}, CType::Int});
    Block rounds = {code("if (c < k) break;  // the cut found")};
    for (Stmt& st : weight_rounds(K, "w", {code("if (c == k) {"), code("  run += mpk_nucleus_mass({x});"),
                                            code("  if (mpk_nucleus_reached(run, target)) c = j + 1;"), code("}")}))
      rounds.push_back(std::move(st));
    m.body = {thread("tid", "0"), code("int c = k;"), loop("j0", LoopKind::Serial, K, U, std::move(rounds)),
              code("return c;")};
    return m;
  }();
  return n;
}

namespace {

// One thread's walk down the B = 256 bins of `base` from the top to the first bin where
// `reached` holds of h, its value (`value` loads it): found, with `above` the sum of the bins
// before it. The walk stops there (break): its reads are a prefix from the top, no cover.
LoopNest walk_nest(std::string signature, const char* base, Block start, const char* value, const char* reached) {
  const IndexExpr B = v("B"), i = v("i"), b = v("b");
  LoopNest m;
  m.signature = std::move(signature);
  m.params = {{"B", "256", 256, 256}, {"threads", "1", 1, 1}};
  m.ranges = {{"bins", 0, B}};
  m.accesses = {{"bin", base, "bins", b, true, {}, CType::Int}};
  m.body = {code("int found = 0;")};
  for (Stmt& st : start) m.body.push_back(std::move(st));
  m.body.push_back(loop("i", LoopKind::Serial, B, 1,
                        {let("b", B - 1 - i), code("found = b;"), code(value),
                         code(std::string("if (") + reached + ") break;"), code("above += h;")}));
  m.body.push_back(code("return found;"));
  return m;
}

}  // namespace

const LoopNest& sample_walk_nest() {
  static const LoopNest n =
      walk_nest("__device__ __forceinline__ int mk_sample_walk(const unsigned* hist, int need, int& above)", "hist",
                {code("above = 0;")}, "const int h = (int){bin};", "above + h >= need");
  return n;
}

const LoopNest& sample_mass_clear_nest() {
  static const LoopNest n = [] {
    const IndexExpr B = v("B"), b = v("b"), bb = v("bb");
    LoopNest m;
    m.signature = "__device__ __noinline__ void mk_sample_mass_clear(unsigned* hist, u64* mass)";
    m.params = {{"B", "256", 256, 256}, {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"bins", 0, B}};
    const std::vector<Cover> every = {{{{"bb", B}}, bb, {{"b", bb}}}};
    m.accesses = {{"bin", "hist", "bins", b, true, every, CType::Int}, {"mass", "mass", "bins", b, true, every, CType::Int}};
    m.body = {loop("b", LoopKind::Threads, B, 1, {code("{bin} = 0u;"), code("{mass} = 0ull;")})};
    return m;
  }();
  return n;
}

const LoopNest& sample_mass_walk_nest() {
  static const LoopNest n =
      walk_nest("__device__ __forceinline__ int mk_sample_mass_walk(const u64* mass, u64& above, double target)",
                "mass", {}, "const u64 h = {bin};", "mpk_nucleus_reached(above + h, target)");
  return n;
}

const LoopNest& sample_sort_pad_nest() {
  static const LoopNest n = [] {
    const IndexExpr N = v("n"), M = v("m"), threads = v("threads"), tid = v("tid"), j = v("j"), jj = v("jj");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_sample_sort_pad(u64* keys, int n_, int m_)";
    m.params = {{"n", "n_", 1, 4096}, {"m", "m_", 1, 4096}, {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"padding", N, M}};
    m.accesses = {{"key", "keys", "padding", j, true, {{{{"jj", M - N}}, N + jj, {{"tid", jj % threads}, {"j", N + jj}}}},
                   CType::Int}};
    m.body = {thread("tid"), loop_from("j", N + tid, M, threads, {code("{key} = 0;")})};
    return m;
  }();
  return n;
}

const LoopNest& sample_sort_stage_nest() {
  static const LoopNest n = [] {
    const IndexExpr S = v("s"), Q = v("q"), j = v("j"), side = v("side"), a = v("a"), x = v("x"), xx = v("xx");
    const BitonicPair& f = bitonic_pair_formula();  // over j and s
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_sample_sort_stage(u64* keys, int m_, int s_, int size)";
    // m = q 2s keys (the sort's m is a power of two, at least 2s).
    m.params = {{"s", "s_", 1, 2048}, {"q", "m_ / (2 * s_)", 1, 2048}, {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"keys", 0, Q * S * 2}};
    // Side 0 of item j is key lo (the formula's), side 1 key hi = lo + s: each key read once,
    // every one, by the item and side the formula's inverse names; the stores of a swap are
    // conditional (in the body's C), so only once and inside are claimed for them.
    const std::map<std::string, IndexExpr> at = {{"j", substitute(f.j_of, {{"x", xx}})},
                                                 {"side", substitute(f.side_of, {{"x", xx}})}};
    m.accesses = {{"key", "keys", "keys", x, true, {{{{"xx", Q * S * 2}}, xx, at}}, CType::Int},
                  {"put", "keys", "keys", x, true, {}, CType::Int}};
    auto sides = [&](const char* body) {
      return loop("side", LoopKind::Unrolled, 2, 1, {let("x", a + side * S), code(body)});
    };
    m.body = {loop("j", LoopKind::Threads, Q * S, 1,
                   {let("a", f.lo), code("u64 k[2];"), sides("k[side] = {key};"),
                    code("const bool swap = (k[0] < k[1]) == ((a & size) == 0);"),
                    sides("if (swap) {put} = k[1 - side];")})};
    return m;
  }();
  return n;
}

namespace {

// A block-strided loop over the first n sorted candidate keys, `body` naming {key}: each read
// once, every one.
LoopNest candidates_nest(std::string signature, std::string body) {
  const IndexExpr N = v("n"), j = v("j"), jj = v("jj");
  LoopNest m;
  m.signature = std::move(signature);
  m.params = {{"n", "n_", 1, 1 << 16}, {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
  m.ranges = {{"candidates", 0, N}};
  m.accesses = {{"key", "keys", "candidates", j, true, {{{{"jj", N}}, jj, {{"j", jj}}}}, CType::Int}};
  m.body = {loop("j", LoopKind::Threads, N, 1, {code(std::move(body))})};
  return m;
}

}  // namespace

const LoopNest& sample_weights_nest() {
  static const LoopNest n = [] {
    LoopNest m = candidates_nest(
        "__device__ __forceinline__ void mk_sample_weights(const u64* keys, float* w, int n_, float temperature, "
        "float zmax)",
        "{weight} = mpk_det_exp(__fsub_rn(__fdiv_rn(mk_sample_logit({key}), temperature), zmax));");
    // The weights as the keys: each written once, every one.
    Access weight = m.accesses.at(0);
    weight.name = "weight";
    weight.base = "w";
    m.accesses.push_back(std::move(weight));
    return m;
  }();
  return n;
}

const LoopNest& sample_nucleus_draw_nest() {
  static const LoopNest n = candidates_nest(
      "__device__ __forceinline__ void mk_sample_nucleus_draw(const u64* keys, int n_, const MkParams& prm, "
      "u64 position, float& best, int& bi)",
      "const u64 key = {key}; const int id = mk_sample_id(key); "
      "mk_better(best, bi, mk_sample_gumbel(mk_sample_logit(key), prm.temperature, prm.seed, position, id), id);");
  return n;
}

}  // namespace mpk::ir
