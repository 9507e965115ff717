// The folded down projection's loop nests (ir/task_nests.h; fold_down, kernels/linear.cuh
// mk_linear_fold): the tile's activations, its columns of W_down by lane groups (FoldLanes) or
// one element per thread, and the rows' reductions into the output.
#include <map>
#include <string>

#include "ir/layouts.h"
#include "ir/task_nests.h"

namespace mpk::ir {
namespace {

IndexExpr v(const char* name) { return IndexExpr::var(name); }

Param threads_param() { return {"threads", "MK_COMPUTE_THREADS", 32, 1024}; }
Param rows_param() { return {"rows", "t.fold_rows", 1, 1 << 20}; }

}  // namespace

const LoopNest& fold_act_nest() {
  static const LoopNest n = [] {
    const IndexExpr cols = v("cols"), i = v("i"), ii = v("ii");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_fold_act(const MkTask& t, float* a)";
    m.params = {{"cols", "t.slices[0].rows", 1, 1 << 20}, threads_param()};
    m.ranges = {{"cols", 0, cols}};
    const Cover each{{{"ii", cols}}, ii, {{"i", ii}}};
    m.accesses = {{"g", "((const float*)t.slices[0].out)", "cols", i, true, {each}},
                  {"u", "((const float*)t.slices[1].out)", "cols", i, true, {each}},
                  {"a", "a", "cols", i, true, {each}, CType::Int}};
    m.body = {loop("i", LoopKind::Threads, cols, 1, {code("{a} = mk_silu_mul(__ldcg(&{g}), __ldcg(&{u}));")})};
    return m;
  }();
  return n;
}

const LoopNest& fold_rows_nest() {
  static const LoopNest n = [] {
    const IndexExpr rows = v("rows"), vpr = v("vpr"), vp2 = v("vp2"), V = v("V"), U = v("U"), nw = v("nw");
    const IndexExpr threads = v("threads"), tid = v("tid"), w = v("w"), lane = v("lane"), g0 = v("g0"), j = v("j");
    const IndexExpr e = v("e"), vec = v("vec"), row = v("n"), groups = v("groups");
    const FoldLanes& fl = fold_lanes_formula();
    const std::map<std::string, IndexExpr> lanes = {{"g0", g0}, {"j", j}, {"lane", lane}, {"nw", nw}, {"vp2", vp2}};
    LoopNest m;
    m.signature = "template <int DT>\n__device__ __forceinline__ void mk_fold_rows(const MkTask& t, const float* a, "
                  "float* acc, uint4* sl, int vpr_, int vp2_)";
    m.params = {rows_param(),
                {"vpr", "vpr_", 1, 32},
                {"vp2", "vp2_", 1, 32},
                {"LD", "(int)(t.fold_ld / MkW<DT>::kVec)", 1, 1 << 24},
                {"V", "MkW<DT>::kVec", 4, 8},
                {"U", "MK_LOADS_IN_FLIGHT", 1, 8},
                {"nw", "MK_COMPUTE_THREADS >> 5", 1, 32},
                threads_param()};
    m.ranges = {{"row", 0, vpr}, {"a", 0, vpr * V}, {"slots", 0, U * threads}, {"rows", 0, rows},
                {"vec", 0, V}};
    // Row nn's vector vv: its warp, round, slot and lane (FoldLanes' inverse).
    auto at = [&](const IndexExpr& nn, const IndexExpr& vv) -> std::map<std::string, IndexExpr> {
      const std::map<std::string, IndexExpr> s = {{"n", nn}, {"v", vv}, {"nw", nw}, {"vp2", vp2}, {"u", U}};
      const IndexExpr warp = substitute(fl.warp_of, s);
      return {{"tid", warp * 32 + substitute(fl.lane_of, s)},
              {"k", substitute(fl.round_of, s)},
              {"j", substitute(fl.j_of, s)}};
    };
    const IndexExpr nn = v("nn"), vv = v("vv");
    const std::vector<std::pair<IndexExpr, IndexExpr>> fits = {{vpr, vp2 + 1}};
    m.accesses = {
        // W_down's rows as pairs (row, vector), at row * LD + vector of the tile's columns.
        {"w", "((const uint4*)t.fold_w)", "row", vec, true, {{{{"nn", rows}, {"vv", vpr}}, vv, at(nn, vv), fits, nn}},
         CType::LongLong, row, rows, v("array") * v("LD") + v("index")},
        {"a", "a", "a", vec * V + e, false, {}, CType::Int},
        {"av", "av", "vec", e, false, {}, CType::Int},
        {"f", "f", "vec", e, false, {}, CType::Int},
        {"sl", "sl", "slots", tid + j * threads, false, {}, CType::Int},
        {"acc", "acc", "rows", row, true, {{{{"nn", rows}}, nn, at(nn, 0), fits}}, CType::Int},
    };
    const Stmt row_at = let("n", substitute(fl.row, lanes));
    // Every load of a round before any is used: each thread's own shared-memory slots (no
    // registers held while they fly), then its group's sums met by shuffles.
    Block load = {row_at, guard(row, rows, {guard(vec, vpr, {code("mk_cp_async16(&{sl}, &{w});")})})};
    Block use = {row_at, code("float sum = 0.f;"),
                 guard(row, rows,
                       {guard(vec, vpr,
                              {code("float f[V];"), code("MkW<DT>::unpack({sl}, f);"),
                               loop("e", LoopKind::Unrolled, V, 1, {code("sum = mk_dp_step(sum, {f}, {av});")})})}),
                 code("sum = mk_fold_lanes_sum(sum, vp2);"), guard(vec, 1, {guard(row, rows, {code("{acc} = sum;")})})};
    m.body = {guard(vpr, vp2 + 1,  // the kernel's vp2: the power of two from vpr
                    {thread("tid"), let("w", tid >> 5), let("lane", tid & 31), let("vec", substitute(fl.vec, lanes)),
                     let("groups", (rows + 32 / vp2 - 1) / (32 / vp2)), code("float av[V];"),
                     loop("e", LoopKind::Unrolled, V, 1,
                          {code("{av} = 0.f;"), guard(vec, vpr, {code("{av} = {a};")})}),
                     loop("k", LoopKind::Serial, (groups - w + nw * U - 1) / (nw * U), 1,
                          {let("g0", w + v("k") * (nw * U)),
                           loop("j", LoopKind::Unrolled, U, 1, {guard(g0 + j * nw, groups, load)}),
                           code("mk_cp_async_wait_all();"),
                           loop("j", LoopKind::Unrolled, U, 1, {guard(g0 + j * nw, groups, use)})})})};
    return m;
  }();
  return n;
}

const LoopNest& fold_scalar_nest() {
  static const LoopNest n = [] {
    const IndexExpr rows = v("rows"), cols = v("cols"), i = v("i"), row = v("n"), c = v("c");
    const IndexExpr nn = v("nn"), cc = v("cc");
    LoopNest m;
    m.signature = "template <int DT>\n__device__ __forceinline__ void mk_fold_scalar(const MkTask& t, const float* a, "
                  "float* acc)";
    m.params = {rows_param(), {"cols", "t.slices[0].rows", 1, 1 << 20}, {"LD", "(int)t.fold_ld", 1, 1 << 24},
                threads_param()};
    m.ranges = {{"rows", 0, rows}, {"cols", 0, cols}};
    m.accesses = {
        {"zero", "acc", "rows", row, true, {{{{"nn", rows}}, nn, {{"n", nn}}}}, CType::Int},
        {"w", "((const typename MkW<DT>::T*)t.fold_w)", "cols", c, true,
         {{{{"nn", rows}, {"cc", cols}}, cc, {{"i", nn * cols + cc}}, {}, nn}}, CType::LongLong, row, rows,
         v("array") * v("LD") + v("index")},
        {"a", "a", "cols", c, false, {}, CType::Int},
        {"acc", "acc", "rows", row, false, {}, CType::Int},
    };
    m.body = {loop("n", LoopKind::Threads, rows, 1, {code("{zero} = 0.f;")}), code("mk_sync();  // a, acc"),
              loop("i", LoopKind::Threads, rows * cols, 1,
                   {let("n", i / cols), let("c", i % cols), code("atomicAdd(&{acc}, MkW<DT>::cvt({w}) * {a});")})};
    return m;
  }();
  return n;
}

const LoopNest& fold_out_nest() {
  static const LoopNest n = [] {
    const IndexExpr rows = v("rows"), Q = v("Q"), q = v("q"), i = v("i"), row = v("n"), qq = v("qq"), nn = v("nn");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_fold_out(const MkTask& t, const float* acc)";
    m.params = {rows_param(),
                {"Q", "MK_RED_V4 && t.fold_rows % 4 == 0 && (t.fold_out & 15) == 0 ? t.fold_rows / 4 : 0", 0,
                 1 << 18},
                threads_param()};
    m.ranges = {{"quads", 0, Q}, {"rows", 0, rows}};
    const std::vector<std::pair<IndexExpr, IndexExpr>> fits = {{4 * Q, rows + 1}};
    const Cover quads{{{"qq", Q}}, qq, {{"q", qq}}, fits}, rest{{{"nn", rows - 4 * Q}}, 4 * Q + nn, {{"i", nn}}, fits};
    m.accesses = {
        {"out4", "((float4*)t.fold_out)", "quads", q, true, {quads}},
        {"acc4", "((const float4*)acc)", "quads", q, true, {quads}, CType::Int},
        {"out", "((float*)t.fold_out)", "rows", row, true, {rest}},
        {"acc", "acc", "rows", row, true, {rest}, CType::Int},
    };
    // Four rows a reduction where aligned: a quarter of the atomics the L2 must serialise (every
    // tile of the stage adds into the same rows).
    m.body = {guard(4 * Q, rows + 1,  // the kernel's Q: rows / 4 or none
                    {loop("q", LoopKind::Threads, Q, 1, {code("mk_red_add4(&{out4}, {acc4});")}),
                     loop("i", LoopKind::Threads, rows - 4 * Q, 1,
                          {let("n", 4 * Q + i), code("mk_red_add(&{out}, {acc});")})})};
    return m;
  }();
  return n;
}

}  // namespace mpk::ir
