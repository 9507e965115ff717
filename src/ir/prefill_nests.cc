// The prefill's row kernels' loop nests (ir/prefill_nests.h).
#include "ir/prefill_nests.h"

namespace mpk::ir {
namespace {

IndexExpr v(const char* name) { return IndexExpr::var(name); }

// One CTA per row (runtime/prefill.cc launches a grid of the rows).
Param row_param() { return {"row", "(int)blockIdx.x", 0, INT32_MAX}; }
// The block's threads: the kernels' launch bounds, the launches' block sizes (runtime/prefill.h).
Param row_threads() { return {"threads", "PF_ROW_THREADS", 256, 256}; }
Param argmax_threads() { return {"threads", "PF_ARGMAX_THREADS", 1024, 1024}; }

// Element i of a row walked once by the block's threads: each of [0, n) once, at i = ii.
Cover each_of(const IndexExpr& n, const IndexExpr& at) { return {{{"ii", n}}, at, {{"i", v("ii")}}}; }

}  // namespace

const LoopNest& prefill_embed_nest() {
  static const LoopNest n = [] {
    const IndexExpr H = v("H"), row = v("row"), tok = v("tok"), i = v("i"), ii = v("ii");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void pf_embed_row(const pf_bf16* __restrict__ table, "
                  "const int* __restrict__ tokens, float* __restrict__ out, int H_)";
    m.params = {{"H", "H_", 1, 1 << 20}, row_param(), {"tok", "tokens[blockIdx.x]", 0, (1 << 24) - 1},
                row_threads()};
    m.ranges = {{"token row", tok * H, tok * H + H}, {"out row", row * H, row * H + H}};
    m.accesses = {{"in", "table", "token row", tok * H + i, true, {each_of(H, tok * H + ii)}},
                  {"out", "out", "out row", row * H + i, true, {each_of(H, row * H + ii)}}};
    m.body = {loop("i", LoopKind::Threads, H, 1, {code("{out} = mk_bf16_to_f32({in});")})};
    return m;
  }();
  return n;
}

const LoopNest& prefill_rms_norm_nest() {
  static const LoopNest n = [] {
    const IndexExpr H = v("H"), row = v("row"), i = v("i"), ii = v("ii");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void pf_rms_norm_row(const float* __restrict__ x, "
                  "const float* __restrict__ w, void* __restrict__ out, int H_, float eps, int bf16)";
    m.params = {{"H", "H_", 1, 1 << 20}, row_param(), row_threads()};
    m.ranges = {{"row", row * H, row * H + H}, {"weight", 0, H}};
    const Cover elem = each_of(H, row * H + ii), weight = each_of(H, ii);
    m.accesses = {{"xs", "x", "row", row * H + i, true, {elem}},  // the sum's pass
                  {"x", "x", "row", row * H + i, true, {elem}},   // the scaling pass
                  {"w", "w", "weight", i, true, {weight}},
                  {"o32", "((float*)out)", "row", row * H + i, true, {elem}},
                  {"o16", "((pf_bf16*)out)", "row", row * H + i, true, {elem}}};
    m.body = {code("float ss = 0.f;"),
              loop("i", LoopKind::Threads, H, 1, {code("ss += {xs} * {xs};")}),
              code("const float r = 1.0f / sqrtf(pf_block_sum(ss) / float(H) + eps);"),
              loop("i", LoopKind::Threads, H, 1, {code("pf_put({o32}, {o16}, {w} * ({x} * r), bf16);")})};
    return m;
  }();
  return n;
}

const LoopNest& prefill_argmax_nest() {
  static const LoopNest n = [] {
    const IndexExpr V = v("V"), i = v("i"), ii = v("ii");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void pf_argmax_scan(const float* __restrict__ logits, int V_, "
                  "float& v, int& idx, int& nonfinite)";
    m.params = {{"V", "V_", 1, 1 << 24}, argmax_threads()};
    m.ranges = {{"logits", 0, V}};
    m.accesses = {{"first", "logits", "logits", 0, false, {}},
                  {"x", "logits", "logits", i, true, {each_of(V, ii)}}};
    m.body = {code("v = {first};"), code("idx = 0;"), code("nonfinite = 0;"),
              loop("i", LoopKind::Threads, V, 1,
                   {code("const float x = {x};"), code("nonfinite |= !(fabsf(x) <= 3.402823466e38f);"),
                    code("mk_better(v, idx, x, i);")})};
    return m;
  }();
  return n;
}

}  // namespace mpk::ir
