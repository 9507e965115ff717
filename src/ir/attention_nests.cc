// Attention's staging nests (ir/task_nests.h): a head's constants (norm scale, RoPE rotation) and
// a warp's first K/V row, loaded before the task's events; the heads staged with the new rows
// appended to the cache.
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

// A lane's registers of a row: elements e = lane + 32 c (c < DC) set by `load`, zero past D
// (without the zero, and with one loop for a K and a V row, ptxas spilled elsewhere in the
// kernel).
Stmt row(const std::string& reg, Block load) {
  return loop("c", LoopKind::Unrolled, v("DC"), 1,
              {let("e", v("lane") + 32 * v("c")), code(reg + " = 0.f;"), guard(v("e"), v("D"), std::move(load))});
}
Stmt row(const std::string& reg, const std::string& load) { return row(reg, Block{code(load)}); }

// Element e of head hd of an activation of heads of D elements (AttentionRows).
IndexExpr head_at(const IndexExpr& hd, const IndexExpr& e) {
  return substitute(attention_rows_formula().head_elem, {{"hd", hd}, {"e", e}, {"D", v("D")}});
}
// Query head g of KV head kvh's group of G.
IndexExpr query_head(const IndexExpr& g) {
  return substitute(attention_rows_formula().q_head, {{"h", v("kvh")}, {"g", g}, {"G", v("G")}});
}
// A lane's elements e = lane + 32 c of a row (c < n) below `end`, running `body`.
Stmt lane_elems(const char* var, IndexExpr n, IndexExpr end, Block body) {
  return loop("c", LoopKind::Unrolled, std::move(n), 1,
              {let(var, v("lane") + 32 * v("c")), guard(v(var), std::move(end), std::move(body))});
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
              row("{hw}", "if (norm) {hw} = {g};"),
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
    // An element is the pair (position - j0, element of the row), printed at its place in the
    // cache (that distinct pairs are distinct places inside the cache is the attention rows'
    // proof; on the flat index, Z3 took up to 10 s on the once obligation with 2 or 3 warps).
    // The positions a load before the task's events may read: the chunk's, written by earlier
    // steps (at most pos - 2).
    const IndexExpr history = max(0, min(j1, pos - 1) - j0);
    const IndexExpr place = kv_at(j0 + v("array"), v("index"));
    m.ranges = {{"row", 0, D}, {"dims", 0, DC}};
    // Every warp whose first position is in the chunk and at least two steps old: its row.
    const Cover first{{{"ww", min(nw, min(j1 - j0, pos - 1 - j0))}, {"ee", D}}, ee,
                      {{"tid", ww * 32 + ee % 32}, {"c", ee / 32}}, {}, ww};
    m.accesses = {
        {"k", "kc", "row", e, true, {first}, CType::LongLong, jf - j0, history, place},
        {"v", "vc", "row", e, true, {first}, CType::LongLong, jf - j0, history, place},
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

const LoopNest& attention_stage_nest() {
  static const LoopNest n = [] {
    const IndexExpr G = v("G"), D = v("D"), kvh = v("kvh"), pos = v("pos"), A = v("A"), DC = v("DC"), DH = v("DH");
    const IndexExpr nw = v("nw"), tid = v("tid"), w = v("w"), h = v("h"), c = v("c"), e = v("e"), i = v("i");
    const IndexExpr hh = v("hh"), ee = v("ee"), ii = v("ii"), half = D / 2;
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_attn_stage(const MkTask& t, float* qk, float* kc, float* vc, "
                  "int group, int head_dim, int kv_head, int cap_, int position_, bool appends_, "
                  "const MkHeadConsts& first)";
    m.params = {{"G", "group", 1, 1 << 16},
                {"D", "head_dim", 1, 1024},
                {"kvh", "kv_head", 0, (1 << 16) - 1},
                {"cap", "cap_", 1, 1 << 24},
                {"pos", "position_", 0, 1 << 24},
                {"A", "appends_ ? 1 : 0", 0, 1},
                dims_param(),
                half_dims_param(),
                {"nw", "MK_COMPUTE_THREADS >> 5", 1, 32},
                {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"queries", head_at(query_head(0), 0), head_at(query_head(G), 0)},
                {"new kv", head_at(kvh, 0), head_at(kvh + 1, 0)},
                {"staged", 0, (G + 1) * D},
                {"new row", kv_at(pos, 0), kv_at(pos + 1, 0)},
                {"dims", 0, DC},
                {"half dims", 0, DH}};
    // Staged head hh's element x: its warp's lane, the head, the register.
    auto at = [&](const IndexExpr& head, const IndexExpr& x) -> std::map<std::string, IndexExpr> {
      return {{"tid", head % nw * 32 + x % 32}, {"h", head}, {"c", x / 32}};
    };
    const std::vector<std::pair<IndexExpr, IndexExpr>> appends = {{0, A}};
    const std::map<std::string, IndexExpr> value_at = {{"tid", (nw - 1) * 32 + ee % 32}, {"c", ee / 32}};
    m.accesses = {
        {"q", "((const float*)t.q)", "queries", head_at(query_head(h), e), true,
         {{{{"hh", G}, {"ee", D}}, head_at(query_head(hh), ee), at(hh, ee)}}},
        {"kx", "((const float*)t.kx)", "new kv", head_at(kvh, e), true,
         {{{{"ee", D}}, head_at(kvh, ee), at(G, ee), appends}}},
        {"v", "v", "dims", c, false, {}, CType::Int},
        {"xs", "qk", "staged", h * D + e, true, {{{{"hh", G + A}, {"ee", D}}, hh * D + ee, at(hh, ee)}}, CType::Int},
        // RoPE's pairs (i, i + D / 2), rotated in place: each element once, every one of a head
        // of even D.
        {"ra", "qk", "staged", h * D + i, true, {{{{"hh", G + A}, {"ii", half}}, hh * D + ii, at(hh, ii)}}, CType::Int},
        {"rb", "qk", "staged", h * D + i + v("half"), true,
         {{{{"hh", G + A}, {"ii", half}}, hh * D + half + ii, at(hh, ii)}}, CType::Int},
        // The constants' registers: the warp's first head's (`first`, before the events) or
        // another head's (hc).
        {"fw", "first.w", "dims", c, false, {}, CType::Int},
        {"fcs", "first.cs", "half dims", c, false, {}, CType::Int},
        {"fsn", "first.sn", "half dims", c, false, {}, CType::Int},
        {"hw", "hc.w", "dims", c, false, {}, CType::Int},
        {"hcs", "hc.cs", "half dims", c, false, {}, CType::Int},
        {"hsn", "hc.sn", "half dims", c, false, {}, CType::Int},
        {"xk", "qk", "staged", h * D + e, true, {{{{"ee", D}}, G * D + ee, at(G, ee), appends}}, CType::Int},
        {"kn", "kc", "new row", kv_at(pos, e), true, {{{{"ee", D}}, kv_at(pos, ee), at(G, ee), appends}}},
        {"vx", "((const float*)t.vx)", "new kv", head_at(kvh, e), true, {{{{"ee", D}}, head_at(kvh, ee), value_at, appends}}},
        {"vr", "vr", "dims", c, false, {}, CType::Int},
        {"vn", "vc", "new row", kv_at(pos, e), true, {{{{"ee", D}}, kv_at(pos, ee), value_at, appends}}},
    };
    // Head h with its constants' accesses (the weight, cos and sin registers): the lane's
    // elements, all loads before any use (zero past D); the head RMSNorm (the sum of squares
    // across the warp); the staged row; RoPE on it.
    auto head = [&](const std::string& cw, const std::string& ccs, const std::string& csn) -> Block {
      const std::string rotate = "if (rope) { const float a = {ra}, b = {rb}; {ra} = a * {" + ccs + "} + (-b) * {" + csn +
                                 "}; {rb} = b * {" + ccs + "} + a * {" + csn + "}; }";
      return {code("float v[DC];"),
              row("{v}", {guard(h, G, {code("{v} = __ldcg(&{q});")}), guard(G, h + 1, {code("{v} = __ldcg(&{kx});")})}),
              code("const bool norm = (t.flags & (h == G ? MPK_MK_F_K_NORM : MPK_MK_F_Q_NORM)) != 0;"),
              code("float ss = 0.f, r = 1.0f;"),
              loop("c", LoopKind::Unrolled, DC, 1, {code("ss += {v} * {v};")}),
              code("if (norm) r = 1.0f / sqrtf(mk_warp_sum(ss) / (float)D + t.norm_eps);"),
              lane_elems("e", DC, D, {code("{xs} = norm ? {" + cw + "} * ({v} * r) : {v};")}),
              code("__syncwarp();"),
              code("const bool rope = (t.flags & (h == G ? MPK_MK_F_ROPE_K : MPK_MK_F_ROPE_Q)) != 0;"),
              let("half", half),
              lane_elems("i", DH, v("half"), {code(rotate)}),
              code("if (rope) __syncwarp();")};
    };
    Block other = {code("MkHeadConsts hc;"), code("mk_head_consts(t, h, pos, hc);")};
    for (Stmt& st : head("hw", "hcs", "hsn")) other.push_back(std::move(st));
    // Warp w stages heads w, w + nw, ... < G + A (the query heads, then the new key when the
    // chunk appends), the first with the constants it loaded before the events; the key's row
    // then goes to the cache. The appending chunk's last warp copies the new value row.
    m.body = {thread("tid"), let("w", tid >> 5), let("lane", tid & 31),
              loop_from("h", w, G + A, nw,
                        {guard(h, w + 1, head("fw", "fcs", "fsn")), guard(w, h, other),
                         guard(G, h + 1, {lane_elems("e", DC, D, {code("{kn} = {xk};")})})}),
              guard(0, A,
                    {guard(nw - 2, w,
                           {code("float vr[DC];"), row("{vr}", "{vr} = __ldcg(&{vx});"),
                            lane_elems("e", DC, D, {code("{vn} = {vr};")})})})};
    return m;
  }();
  return n;
}

}  // namespace mpk::ir
