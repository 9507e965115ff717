// The prefill's row kernels' loop nests (ir/prefill_nests.h).
#include "ir/prefill_nests.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/layouts.h"

namespace mpk::ir {
namespace {

IndexExpr v(const char* name) { return IndexExpr::var(name); }

// One CTA per row (runtime/prefill.cc launches a grid of the rows).
Param row_param() { return {"row", "(int)blockIdx.x", 0, INT32_MAX}; }
// The block's threads: the kernels' launch bounds, the launches' block sizes (runtime/prefill.h).
Param row_threads() { return {"threads", "PF_ROW_THREADS", kPrefillRowThreads, kPrefillRowThreads}; }
Param argmax_threads() { return {"threads", "PF_ARGMAX_THREADS", kPrefillArgmaxThreads, kPrefillArgmaxThreads}; }

// Element `var` of a row walked once by the block's threads: each of [0, n) once, at var = ii.
Cover each_of(const IndexExpr& n, const IndexExpr& at, const char* var = "i") {
  return {{{"ii", n}}, at, {{var, v("ii")}}};
}

// A nest whose Threads loops walk the whole grid: n elements (as the launches' `n`, long long,
// inside kPrefillMaxElements) by the grid's threads.
void grid_strided(LoopNest& m) {
  m.params = {{"n", "(int)n_", 1, kPrefillMaxElements},
              {"stride", "(int)(gridDim.x * blockDim.x)", 1, kPrefillMaxGridThreads}};
  m.threads = "stride";
  m.thread_index = "(int)(blockIdx.x * blockDim.x + threadIdx.x)";
  m.ranges = {{"all", 0, v("n")}};
}

// A warp's RMSNorm of one head into access `out` (`{out} = ...`): its lanes' strided sum of the
// squares of {xn}, the warp's butterfly, then each element {xs} scaled by the weight {wn}.
// The head norm with RoPE and without share it (the same sum order).
Block head_norm_stmts(const std::string& out) {
  const IndexExpr lane = v("lane"), D = v("D");
  return {code("float ss = 0.f;"), loop_from("i", lane, D, 32, {code("ss += {xn} * {xn};")}),
          code("const float r = 1.0f / sqrtf(pf_warp_sum(ss) / float(D) + eps);"),
          loop_from("i", lane, D, 32, {code("{" + out + "} = {wn} * ({xs} * r);")})};
}

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

const LoopNest& prefill_head_norm_rope_nest() {
  static const LoopNest n = [] {
    const IndexExpr heads = v("heads"), half = v("half"), row = v("row"), nw = v("nw"), MD = v("MD"), norm = v("norm");
    const IndexExpr D = v("D"), h = v("h"), i = v("i"), j = v("j"), tid = v("tid"), warp = v("warp");
    const IndexExpr hh = v("hh"), ii = v("ii"), jj = v("jj");
    const IndexExpr D2 = half * 2, first = row * heads * D2;  // D over the parameters; the row's first
    // Element e of head `head` of the row: printed over the let D, covered over the parameters.
    auto at = [&](const IndexExpr& head, const IndexExpr& e) { return (row * heads + head) * D + e; };
    auto at_p = [&](const IndexExpr& head, const IndexExpr& e) { return (row * heads + head) * D2 + e; };
    LoopNest m;
    m.signature = "__device__ __forceinline__ void pf_head_norm_rope_row(const float* __restrict__ x, "
                  "const float* __restrict__ w, const float* __restrict__ inv_freq, float* __restrict__ out, "
                  "float* cs, float* sn, float* buf, int heads_, int D_, float eps, int pos0)";
    m.params = {{"heads", "heads_", 1, 1 << 10},
                {"half", "D_ / 2", 1, kRopeMaxHeadDim / 2},
                row_param(),
                {"norm", "(w != nullptr)", 0, 1},
                {"MD", "PF_ROPE_MAX_D", kRopeMaxHeadDim, kRopeMaxHeadDim},
                {"nw", "(PF_ROW_THREADS / 32)", kPrefillRowThreads / 32, kPrefillRowThreads / 32},
                row_threads()};
    m.ranges = {{"row", first, first + heads * D2},
                {"weight", 0, D2},
                {"half", 0, half},
                {"buffer", 0, MD}};
    // Head hh's element e: its warp's lane e % 32 (heads by warp, elements by lane).
    auto by = [&](const IndexExpr& e, const char* var) -> std::map<std::string, IndexExpr> {
      return {{"tid", hh % nw * 32 + e % 32}, {"h", hh}, {var, e}};
    };
    const Cover each_half = each_of(half, v("ii"), "j");
    const std::vector<std::pair<IndexExpr, IndexExpr>> normed = {{0, norm}}, copied = {{norm, 1}};
    const Cover elem_n{{{"hh", heads}, {"ii", D2}}, at_p(hh, ii), by(ii, "i"), normed};
    const Cover elem_c{{{"hh", heads}, {"ii", D2}}, at_p(hh, ii), by(ii, "i"), copied};
    const IndexExpr in_buf = v("array") * MD + v("index");  // slot `index` of warp `array`'s
    m.accesses = {
        {"f", "inv_freq", "half", j, true, {each_half}},
        {"cw", "cs", "half", j, true, {each_half}, CType::Int},
        {"sw", "sn", "half", j, true, {each_half}, CType::Int},
        {"xn", "x", "row", at(h, i), true, {elem_n}},  // the norm's sum
        {"xs", "x", "row", at(h, i), true, {elem_n}},  // the norm's scaling
        {"xc", "x", "row", at(h, i), true, {elem_c}},  // the copy
        {"wn", "w", "weight", i, false, {}},
        // The staging buffer as pairs (warp, slot): each warp inside its own MD slots.
        {"hw", "buf", "buffer", i, false, {}, CType::Int, warp, nw, in_buf},
        {"ha", "buf", "buffer", j, false, {}, CType::Int, warp, nw, in_buf},
        {"hb", "buf", "buffer", j + half, false, {}, CType::Int, warp, nw, in_buf},
        {"cr", "cs", "half", j, false, {}, CType::Int},
        {"sr", "sn", "half", j, false, {}, CType::Int},
        {"y1", "out", "row", at(h, j), true, {{{{"hh", heads}, {"jj", half}}, at_p(hh, jj), by(jj, "j")}}},
        {"y2", "out", "row", at(h, j + half), true,
         {{{{"hh", heads}, {"jj", half}}, at_p(hh, jj + half), by(jj, "j")}}},
    };
    const IndexExpr lane = v("lane");
    m.body = {
        let("D", D2),
        loop("j", LoopKind::Threads, half, 1,
             {code("const float angle = float(pos0 + row) * {f};"), code("{cw} = cosf(angle);"),
              code("{sw} = sinf(angle);")}),
        code("__syncthreads();  // cs, sn"),
        thread("tid"),
        let("warp", tid >> 5),
        let("lane", tid & 31),
        loop_from("h", warp, heads, nw,
                  {guard(0, norm, head_norm_stmts("hw")),
                   guard(norm, 1, {loop_from("i", lane, D, 32, {code("{hw} = {xc};")})}),
                   code("__syncwarp();"),
                   loop_from("j", lane, half, 32,
                             {code("const float a = {ha}, b = {hb}, c = {cr}, s = {sr};"),
                              code("{y1} = a * c + (-b) * s;"), code("{y2} = b * c + a * s;")}),
                   code("__syncwarp();  // the buffer is refilled for the next head")})};
    return m;
  }();
  return n;
}

const LoopNest& prefill_head_rms_norm_nest() {
  static const LoopNest n = [] {
    const IndexExpr heads = v("heads"), half = v("half"), row = v("row"), nw = v("nw");
    const IndexExpr D = v("D"), h = v("h"), i = v("i"), tid = v("tid"), warp = v("warp"), lane = v("lane");
    const IndexExpr hh = v("hh"), ii = v("ii");
    const IndexExpr D2 = half * 2, first = row * heads * D2;
    LoopNest m;
    m.signature = "__device__ __forceinline__ void pf_head_rms_norm_row(const float* __restrict__ x, "
                  "const float* __restrict__ w, float* __restrict__ out, int heads_, int D_, float eps)";
    m.params = {{"heads", "heads_", 1, 1 << 10},
                {"half", "D_ / 2", 1, kRopeMaxHeadDim / 2},
                row_param(),
                {"nw", "(PF_ROW_THREADS / 32)", kPrefillRowThreads / 32, kPrefillRowThreads / 32},
                row_threads()};
    m.ranges = {{"row", first, first + heads * D2}, {"weight", 0, D2}};
    // Head hh's element e: its warp's lane e % 32 (heads by warp, elements by lane).
    const Cover each{{{"hh", heads}, {"ii", D2}}, first + hh * D2 + ii, {{"tid", hh % nw * 32 + ii % 32}, {"h", hh}, {"i", ii}}};
    const IndexExpr at = (row * heads + h) * D + i;
    m.accesses = {{"xn", "x", "row", at, true, {each}},  // the sum
                  {"xs", "x", "row", at, true, {each}},  // the scaling
                  {"wn", "w", "weight", i, false, {}},
                  {"y", "out", "row", at, true, {each}}};
    m.body = {let("D", D2), thread("tid"), let("warp", tid >> 5), let("lane", tid & 31),
              loop_from("h", warp, heads, nw, head_norm_stmts("y"))};
    return m;
  }();
  return n;
}

const LoopNest& prefill_silu_mul_nest() {
  static const LoopNest n = [] {
    const IndexExpr N = v("n"), i = v("i"), ii = v("ii");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void pf_silu_mul_all(const float* __restrict__ gate, "
                  "const float* __restrict__ up, void* __restrict__ out, long long n_, int bf16)";
    grid_strided(m);
    const Cover all = each_of(N, ii);
    m.accesses = {{"g", "gate", "all", i, true, {all}},
                  {"u", "up", "all", i, true, {all}},
                  {"o32", "((float*)out)", "all", i, true, {all}},
                  {"o16", "((pf_bf16*)out)", "all", i, true, {all}}};
    m.body = {loop("i", LoopKind::Threads, N, 1, {code("pf_put({o32}, {o16}, mk_silu_mul({g}, {u}), bf16);")})};
    return m;
  }();
  return n;
}

const LoopNest& prefill_kv_store_nest() {
  static const LoopNest n = [] {
    const IndexExpr T = v("T"), Hkv = v("Hkv"), half = v("half"), cap = v("cap"), pos0 = v("pos0");
    const IndexExpr N = v("n"), i = v("i"), e = v("e"), d = v("d"), th = v("th"), D = v("D");
    const IndexExpr rr = v("rr"), ee = v("ee"), ii = v("ii");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void pf_kv_store_all(const float* __restrict__ k, "
                  "const float* __restrict__ v, float* __restrict__ kc, float* __restrict__ vc, "
                  "pf_bf16* __restrict__ kc16, pf_bf16* __restrict__ vc16, int T_, int Hkv_, int D_, int cap_, "
                  "int pos0_)";
    grid_strided(m);
    m.params = {{"T", "T_", 1, kPrefillMaxChunkRows},  {"Hkv", "Hkv_", 1, 1 << 10},
                {"half", "D_ / 2", 1, kRopeMaxHeadDim / 2}, {"cap", "cap_", 1, INT32_MAX},
                {"pos0", "pos0_", 0, INT32_MAX - kPrefillMaxChunkRows},  m.params[1]};  // the grid's stride
    m.ranges = {{"pairs", 0, T * Hkv * half}, {"row", 0, half * 2}};
    const std::vector<std::pair<IndexExpr, IndexExpr>> fits = {{pos0 + T - 1, cap}};
    // A cache element is the pair (chunk row th = t Hkv + hk, element d of the row), printed at
    // its place kv_elem(hk, pos0 + t, d): distinct pairs are distinct places inside the cache
    // for positions below the capacity (the attention rows' proof): a chunk past the capacity
    // writes nothing (the guard; the session never asks for one).
    const IndexExpr place = substitute(attention_rows_formula().kv_elem, {{"h", v("array") % Hkv},
                                                                          {"j", pos0 + v("array") / Hkv},
                                                                          {"e", v("index")},
                                                                          {"cap", cap},
                                                                          {"D", D}});
    const Cover pair{{{"ii", T * Hkv * half}}, ii, {{"i", ii}}, fits};
    const Cover row{{{"rr", T * Hkv}, {"ee", half}}, ee * 2, {{"i", rr * half + ee}}, fits, rr};
    auto cache = [&](const char* name, const char* base) {
      return Access{name, base, "row", d, true, {row}, CType::LongLong, th, T * Hkv, place};
    };
    m.accesses = {{"k2", "((const float2*)k)", "pairs", i, true, {pair}},
                  {"v2", "((const float2*)v)", "pairs", i, true, {pair}},
                  cache("kc", "kc"), cache("vc", "vc"), cache("kh", "kc16"), cache("vh", "vc16")};
    m.body = {let("D", half * 2), let("n", T * Hkv * half),
              guard(pos0 + T - 1, cap,
                    {loop("i", LoopKind::Threads, N, 1,
                          {let("e", i * 2), let("d", e % D), let("th", e / D),
                           code("const float2 kv = {k2}, vv = {v2};"), code("*(float2*)&{kc} = kv;"),
                           code("*(float2*)&{vc} = vv;"), code("*(unsigned*)&{kh} = pf_pack_bf16(kv.x, kv.y);"),
                           code("*(unsigned*)&{vh} = pf_pack_bf16(vv.x, vv.y);")})})};
    return m;
  }();
  return n;
}

const LoopNest& prefill_kv_shadow_nest() {
  static const LoopNest n = [] {
    const IndexExpr half = v("half"), cap = v("cap"), from = v("from"), len = v("len"), p = v("p");
    const IndexExpr N = v("n"), i = v("i"), j = v("j"), d = v("d"), jj = v("jj"), ee = v("ee");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void pf_kv_shadow_plane(const float* __restrict__ kv, "
                  "pf_bf16* __restrict__ kv16, int cap_, int D_, int from_, int len_)";
    grid_strided(m);
    m.params = {{"p", "(int)blockIdx.y", 0, kPrefillMaxPlanes - 1},
                {"half", "D_ / 2", 1, kRopeMaxHeadDim / 2},
                {"cap", "cap_", 1, INT32_MAX},
                {"from", "from_", 0, INT32_MAX},
                {"len", "len_", 1, kPrefillMaxShadowPositions},
                m.params[1]};  // the grid's stride
    // Plane p is KV head p of ir::AttentionRows (the planes follow each other as heads).
    auto elem = [&](const IndexExpr& pos, const IndexExpr& e) {
      return substitute(attention_rows_formula().kv_elem,
                        {{"h", p}, {"j", pos}, {"e", e}, {"cap", cap}, {"D", half * 2}});
    };
    m.ranges = {{"plane", elem(0, 0), elem(cap, 0)}};
    // Each pair (position from + jj, element 2 ee) of the plane's positions once and every one,
    // where the range lies inside the capacity (the session's always does).
    const Cover pair{{{"jj", len}, {"ee", half}}, elem(from + jj, ee * 2), {{"i", jj * half + ee}},
                     {{len - 1, cap - from}}};
    m.accesses = {{"x", "kv", "plane", elem(j, d), true, {pair}}, {"h", "kv16", "plane", elem(j, d), true, {pair}}};
    m.body = {let("n", len * half),
              guard(len - 1, cap - from,  // from + len - 1 < cap, in int for any from
                    {loop("i", LoopKind::Threads, N, 1,
                          {let("j", from + i / half), let("d", i % half * 2),
                           code("const float2 x = *(const float2*)&{x};"),
                           code("*(unsigned*)&{h} = pf_pack_bf16(x.x, x.y);")})})};
    return m;
  }();
  return n;
}

const LoopNest& prefill_gemm_reduce_nest() {
  static const LoopNest n = [] {
    const IndexExpr N = v("n"), cols = v("N"), splits = v("splits"), i = v("i"), z = v("z");
    const IndexExpr ii = v("ii"), zz = v("zz");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void pf_gemm_reduce_all(const float* __restrict__ partial, int splits_, "
                  "const float* __restrict__ bias, const float* R, float* C, int M_, int N_)";
    grid_strided(m);  // n: M N, which the launch checks against kPrefillMaxElements
    m.params = {{"n", "(int)((long long)M_ * N_)", 1, kPrefillMaxElements},
                {"N", "N_", 1, 1 << 24},
                {"splits", "splits_", 2, 1 << 10},
                m.params[1]};  // the grid's stride
    m.ranges = {{"all", 0, N}, {"partials", 0, splits * N}, {"bias", 0, cols}};
    const Cover all = each_of(N, ii);
    m.accesses = {{"p0", "partial", "partials", i, true, {all}},
                  {"pz", "partial", "partials", z * N + i, true,
                   {{{{"zz", splits - 1}, {"ii", N}}, (zz + 1) * N + ii, {{"z", zz + 1}, {"i", ii}}}}},
                  {"b", "bias", "bias", i % cols, false, {}},
                  {"r", "R", "all", i, true, {all}},
                  {"c", "C", "all", i, true, {all}}};
    m.body = {loop("i", LoopKind::Threads, N, 1,
                   {code("float v = {p0};"), loop_from("z", 1, splits, 1, {code("v += {pz};")}),
                    code("if (bias) v += {b};"), code("if (R) v += {r};"), code("{c} = v;")})};
    return m;
  }();
  return n;
}

const LoopNest& prefill_gemm_reduce_row_nest() {
  static const LoopNest n = [] {
    const IndexExpr N = v("N"), gap = v("gap"), splits = v("splits"), row = v("row"), i = v("i"), z = v("z");
    const IndexExpr ii = v("ii"), zz = v("zz"), first = row * N, plane = N + gap;
    LoopNest m;
    m.signature = "__device__ __forceinline__ void pf_gemm_reduce_row(const float* __restrict__ partial, int splits_, "
                  "const float* __restrict__ bias, float* __restrict__ C, int M_, int N_)";
    m.params = {{"N", "N_", 1, 1 << 20},
                {"gap", "(M_ - 1) * N_", 0, kPrefillMaxElements},
                {"splits", "splits_", 2, 1 << 10},
                row_param(),
                row_threads()};
    m.ranges = {{"out row", first, first + N},
                {"partials", first, first + N + (splits - 1) * plane},
                {"bias", 0, N}};
    m.accesses = {{"p0", "partial", "partials", first + i, true, {each_of(N, first + ii)}},
                  {"pz", "partial", "partials", z * plane + first + i, true,
                   {{{{"zz", splits - 1}, {"ii", N}}, (zz + 1) * plane + first + ii, {{"z", zz + 1}, {"i", ii}}}}},
                  {"b", "bias", "bias", i, false, {}},
                  {"c", "C", "out row", first + i, true, {each_of(N, first + ii)}}};
    m.body = {loop("i", LoopKind::Threads, N, 1,
                   {code("float v = {p0};"), loop_from("z", 1, splits, 1, {code("v += {pz};")}),
                    code("if (bias) v += {b};"), code("{c} = v;")})};
    return m;
  }();
  return n;
}

const LoopNest& prefill_add_nest() {
  static const LoopNest n = [] {
    const IndexExpr N = v("n"), i = v("i"), ii = v("ii");
    LoopNest m;
    m.signature =
        "__device__ __forceinline__ void pf_add_all(const float* a, const float* b, float* out, long long n_)";
    grid_strided(m);
    const Cover all = each_of(N, ii);
    m.accesses = {{"a", "a", "all", i, true, {all}}, {"b", "b", "all", i, true, {all}},
                  {"out", "out", "all", i, true, {all}}};
    m.body = {loop("i", LoopKind::Threads, N, 1, {code("{out} = {a} + {b};")})};
    return m;
  }();
  return n;
}

}  // namespace mpk::ir
