// Attention's nests before its events (ir/task_nests.h): a head's constants (norm scale, RoPE
// rotation) and the warp's first K/V row.
#include <map>
#include <string>

#include "ir/layouts.h"
#include "ir/task_nests.h"

namespace mpk::ir {
namespace {

IndexExpr v(const char* name) { return IndexExpr::var(name); }

// The registers of a row (DC: MK_MAX_HEAD_DIM / 32 per lane) and of half a row.
Param dims_param() { return {"DC", "MK_MAX_HEAD_DIM / 32", 1, 32}; }
Param half_dims_param() { return {"DH", "MK_MAX_HEAD_DIM / 64", 1, 16}; }

// Element e of KV head kvh's row at position j of the layer's cache (AttentionRows).
IndexExpr kv_at(const IndexExpr& j, const IndexExpr& e) {
  return substitute(attention_rows_formula().kv_elem, {{"h", v("kvh")}, {"j", j}, {"e", e}, {"cap", v("cap")}, {"D", v("D")}});
}

// A lane's registers of a row: elements e = lane + 32 c (c < DC) loaded, zero past D. The K
// row's loads, then the V row's (one loop for both made ptxas spill elsewhere in the kernel).
Stmt row(const std::string& reg, const std::string& load) {
  const IndexExpr c = v("c"), e = v("e");
  return loop("c", LoopKind::Unrolled, v("DC"), 1, {let("e", v("lane") + 32 * c), code(reg + " = 0.f;"), guard(e, v("D"), {code(load)})});
}

}  // namespace

IndexExpr attention_first_position() { return v("j0") + v("w"); }

const LoopNest& attention_head_consts_nest() {
  static const LoopNest n = [] {
    const IndexExpr D = v("D"), DC = v("DC"), DH = v("DH"), lane = v("lane"), c = v("c"), e = v("e"), i = v("i");
    const IndexExpr ee = v("ee"), ii = v("ii");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_head_consts(const MkTask& t, int h, int position, MkHeadConsts& hc)";
    m.params = {{"D", "t.head_dim", 1, 1024}, dims_param(), half_dims_param(), {"threads", "32", 32, 32}};
    m.ranges = {{"row", 0, D}, {"angles", 0, D / 2}, {"dims", 0, DC}, {"half dims", 0, DH}};
    m.accesses = {
        {"g", "gw", "row", e, true, {{{{"ee", D}}, ee, {{"lane", ee % 32}, {"c", ee / 32}}}}},
        {"f", "inv_freq", "angles", i, true, {{{{"ii", D / 2}}, ii, {{"lane", ii % 32}, {"c", ii / 32}}}}},
        {"hw", "hc.w", "dims", c, false, {}, CType::Int},
        {"cs", "hc.cs", "half dims", c, false, {}, CType::Int},
        {"sn", "hc.sn", "half dims", c, false, {}, CType::Int},
    };
    m.body = {thread("lane", "threadIdx.x & 31"),
              code("const bool is_k = h == t.group;"),
              code("const float* gw = (const float*)(is_k ? t.k_norm : t.q_norm);"),
              code("const bool norm = (t.flags & (is_k ? MPK_MK_F_K_NORM : MPK_MK_F_Q_NORM)) != 0;"),
              loop("c", LoopKind::Unrolled, DC, 1,
                   {let("e", lane + 32 * c), code("{hw} = 0.f;"), guard(e, D, {code("if (norm) {hw} = {g};")})}),
              code("const bool rope = (t.flags & (is_k ? MPK_MK_F_ROPE_K : MPK_MK_F_ROPE_Q)) != 0;"),
              code("const float* inv_freq = (const float*)t.inv_freq;"),
              code("const float p = (float)position;"),
              let("half", D / 2),
              loop("c", LoopKind::Unrolled, DH, 1,
                   {let("i", lane + 32 * c), code("float angle = 0.f;"),
                    guard(i, v("half"), {code("if (rope) angle = p * {f};")}),
                    code("{cs} = cosf(angle); {sn} = sinf(angle);")})};
    return m;
  }();
  return n;
}

const LoopNest& attention_kv_first_nest() {
  static const LoopNest n = [] {
    const IndexExpr D = v("D"), j0 = v("j0"), j1 = v("j1"), pos = v("pos"), nw = v("nw"), DC = v("DC");
    const IndexExpr tid = v("tid"), c = v("c"), e = v("e"), jf = v("jf"), ww = v("ww"), ee = v("ee");
    LoopNest m;
    m.signature = "__device__ __forceinline__ bool mk_attn_first(const float* kc, const float* vc, int head_dim, "
                  "int kv_head, int cap_, int j0_, int j1_, int position_, float (&kpre)[MK_MAX_HEAD_DIM / 32], "
                  "float (&vpre)[MK_MAX_HEAD_DIM / 32])";
    m.params = {{"D", "head_dim", 1, 1024},     {"kvh", "kv_head", 0, (1 << 16) - 1},
                {"cap", "cap_", 1, 1 << 24},    {"j0", "j0_", 0, 1 << 24},
                {"j1", "j1_", 0, 1 << 24},      {"pos", "position_", 0, 1 << 24},
                dims_param(),                   {"nw", "MK_COMPUTE_THREADS >> 5", 1, 32},
                {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    // The chunk's rows written by earlier steps (positions <= pos - 2): what a load before the
    // task's events may read.
    m.ranges = {{"history", kv_at(j0, 0), kv_at(max(j0, min(j1, pos - 1)), 0)}, {"dims", 0, DC}};
    // Every warp whose first position is in the chunk and at least two steps old: its row.
    const Cover first{{{"ww", min(nw, min(j1 - j0, pos - 1 - j0))}, {"ee", D}}, kv_at(j0 + ww, ee),
                      {{"tid", ww * 32 + ee % 32}, {"c", ee / 32}}};
    m.accesses = {
        {"k", "kc", "history", kv_at(jf, e), true, {first}},
        {"v", "vc", "history", kv_at(jf, e), true, {first}},
        {"kp", "kpre", "dims", c, false, {}, CType::Int},
        {"vp", "vpre", "dims", c, false, {}, CType::Int},
    };
    m.body = {thread("tid"), let("w", tid >> 5), let("lane", tid & 31), let("jf", attention_first_position()),
              code("bool have = false;"),
              guard(jf, j1,
                    {guard(jf, pos - 1,
                           {code("have = true;"), row("{kp}", "{kp} = __ldcg(&{k});"),
                            row("{vp}", "{vp} = __ldcg(&{v});")})}),
              code("return have;")};
    return m;
  }();
  return n;
}

}  // namespace mpk::ir
