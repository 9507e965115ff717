// The linear tile's loop nests (ir/task_nests.h): the input staged in shared memory, a warp's dot
// products over a K part (their first round loaded before the task's events, then used from
// registers), the unaligned loop, the split-K fold and the LM head's argmax partial.
#include <map>
#include <string>

#include "ir/layouts.h"
#include "ir/task_nests.h"

namespace mpk::ir {
namespace {

IndexExpr v(const char* name) { return IndexExpr::var(name); }

// The parameters every warp nest of a linear has: R rows (the template's R_), the lanes.
Param rows_param() { return {"R", "R_", 1, 8}; }
Param lanes_param() { return {"threads", "32", 32, 32}; }

// One round of a warp's dot products (U vectors per row and lane, 32 apart, from the lane's
// vector i): the products from registers `src`, those at or past the part's end v1 skipped when
// `partial`; the round's registers from the weights, all R U loads before any is used (decode is
// bound by the bytes in flight), those past the part zero when `partial`.
struct DotRound {
  IndexExpr N, U, R, V, i = IndexExpr::var("i"), j = IndexExpr::var("j"), v1 = IndexExpr::var("v1");
  // Load j of the round.
  IndexExpr vec() const { return i + 32 * j; }
  Stmt dots(const char* src, bool partial) const {
    Block row = {loop("r", LoopKind::Unrolled, R, 1,
                      {code("float f[V];"), code(std::string("MkW<DT>::unpack({") + src + "}, f);"),
                       loop("e", LoopKind::Unrolled, V, 1, {code("{acc} = mk_dp_step({acc}, {f}, {x});")})})};
    return loop("j", LoopKind::Unrolled, U, 1, partial ? Block{guard(vec(), v1, row)} : row);
  }
  Stmt loads(bool partial) const {
    const Stmt load = code("{u} = mk_ld_w<Smem>(&{w});");
    return loop("r", LoopKind::Unrolled, R, 1,
                {loop("j", LoopKind::Unrolled, U, 1,
                      partial ? Block{code("{u} = make_uint4(0u, 0u, 0u, 0u);"), guard(vec(), v1, {load})}
                              : Block{load})});
  }
};

// The accesses of a round's dot products: the input, the accumulators, an unpacked vector. An
// input element is read per row (the term w_r[vec] x[vec]: the pair row r, element), so the
// input access carries the row as its array (not printed: its base has no `@`); `terms`, its
// cover: every row's every element of the part reached by a product. Not proved: that no term
// is taken twice (Z3 timed out on it across the three rounds), that a product's weight register
// is the one its load filled, and that acc[r] is row r's (the code both rounds print).
std::vector<Access> dot_accesses(const IndexExpr& vec, const IndexExpr& V, const IndexExpr& R, Cover terms) {
  const IndexExpr r = v("r"), e = v("e");
  // The input's index in long long, as pointer arithmetic: the compiler then sees a vector's V
  // elements at one aligned address and loads them as 16-byte vectors (in int, with the
  // staged kernel's run-time shared-memory offset, it loaded them one by one).
  return {{"x", "xs", "x", vec * V + e, false, {std::move(terms)}, CType::LongLong, r, R},
          {"acc", "acc", "rows", r, false, {}, CType::Int},
          {"f", "f", "vec", e, false, {}, CType::Int}};
}

}  // namespace

const LoopNest& linear_stage_nest() {
  static const LoopNest n = [] {
    const IndexExpr N = v("n"), W = v("W"), U = v("U"), threads = v("threads");
    const IndexExpr tid = v("tid"), i0 = v("i0"), u = v("u"), i = v("i"), jj = v("jj");
    LoopNest m;
    m.signature = "__device__ __forceinline__ float mk_lin_stage(const MkTask& t, const float* x, const float* b, "
                  "float* xs, bool vec_, int n_)";
    m.params = {{"n", "n_", 0, 1 << 22},
                {"W", "(vec_ ? 4 : 1)", 1, 4},
                {"U", "2", 2, 2},
                {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    // A unit's first float: its W floats inside the input when the first is at most W n - W.
    m.ranges = {{"in", 0, W * N - W + 1}, {"round", 0, U}};
    // Unit jj: its thread, round and slot in the round.
    const std::map<std::string, IndexExpr> at = {
        {"tid", jj % threads}, {"i0", jj / (threads * U) * (threads * U) + jj % threads}, {"u", jj % (threads * U) / threads}};
    const Cover each{{{"jj", N}}, W * jj, at};
    m.accesses = {
        {"x", "x", "in", W * i, true, {each}},
        {"b", "b", "in", W * i, true, {each}},
        {"xv", "xv", "round", u, false, {}, CType::Int},
        {"bv", "bv", "round", u, false, {}, CType::Int},
        {"xs", "xs", "in", W * i, true, {each}, CType::Int},
    };
    m.body = {thread("tid"), code("float ss = 0.f;"),
              loop_from("i0", tid, N, threads * U,
                   {code("float4 xv[U] = {}, bv[U] = {};"),
                    loop("u", LoopKind::Unrolled, U, 1,
                         {let("i", i0 + u * threads),
                          guard(i, N, {code("{xv} = mk_ld_unit(vec_, &{x});"),
                                       code("if (b) {bv} = mk_ld_unit(vec_, &{b});")})}),
                    loop("u", LoopKind::Unrolled, U, 1,
                         {let("i", i0 + u * threads),
                          guard(i, N, {code("mk_st_unit(vec_, &{xs}, mk_stage_unit(t.input_mode, vec_, {xv}, {bv}, ss));")})})}),
              code("return ss;")};
    return m;
  }();
  return n;
}

const LoopNest& linear_dot_nest() {
  static const LoopNest n = [] {
    const IndexExpr v0 = v("v0"), N = v("n"), F = v("F"), U = v("U"), R = v("R"), V = v("V");
    const IndexExpr lane = v("lane"), i = v("i"), v1 = v("v1"), j = v("j"), r = v("r");
    const IndexExpr rr = v("rr"), jj = v("jj");
    const IndexExpr round = 32 * U;  // vectors a round, per row
    const DotRound d{N, U, R, V};
    // The loop values that reach the part's vector at offset o of row rr.
    auto at_offset = [&](const IndexExpr& o) -> std::map<std::string, IndexExpr> {
      return {{"r", rr}, {"j", o % round / 32}, {"lane", o % 32}, {"i", v0 + o / round * round + o % 32}};
    };
    LoopNest m;
    m.signature = "template <int DT, int R_, bool Smem>\n__device__ __forceinline__ void mk_dot_vecs("
                  "const char* const (&w)[R_], const float* xs, int v0_, int n_, bool first_, "
                  "const uint4 (&pre)[R_][MK_LOADS_IN_FLIGHT], float (&acc)[R_])";
    m.params = {{"v0", "v0_", 0, 1 << 22},
                {"n", "n_", 0, 1 << 22},
                {"F", "first_ ? 32 * MK_LOADS_IN_FLIGHT : 0", 0, 256},
                {"U", "MK_LOADS_IN_FLIGHT", 1, 8},
                rows_param(),
                {"V", "MkW<DT>::kVec", 4, 8},
                lanes_param()};
    // The weights from F on: the first round's are in registers (read again, they would count
    // twice).
    m.ranges = {{"rest", v0 + F, v0 + N}, {"x", v0 * V, (v0 + N) * V}, {"round", 0, U}, {"rows", 0, R}, {"vec", 0, V}};
    m.accesses = {
        {"w", "((const uint4*)w[@])", "rest", d.vec(), true,
         {{{{"rr", R}, {"jj", N - F}}, v0 + F + jj, at_offset(F + jj), {}, rr}},
         CType::Int, r, R},
        {"u", "u[@]", "round", j, false, {}, CType::Int, r, R},
        {"pre", "pre[@]", "round", j, false, {}, CType::Int, r, R},
    };
    const IndexExpr ee = v("ee");
    std::map<std::string, IndexExpr> term_at = at_offset(jj);
    term_at.emplace("e", ee);
    const Cover terms{{{"rr", R}, {"jj", N}, {"ee", V}}, (v0 + jj) * V + ee, term_at, {}, rr};
    for (const Access& a : dot_accesses(d.vec(), V, R, terms)) m.accesses.push_back(a);
    m.body = {thread("lane", "threadIdx.x & 31"),
              let("v1", v0 + N),
              // The first round from registers: register (r, j) holds the vector v0 + 32 j + lane
              // of row r (linear_dot_first_nest).
              guard(0, F, {let("i", v0 + lane), d.dots("pre", true)}),
              // The whole rounds, then the lane's partial one where they stopped, if it has
              // vectors left.
              loop_kept("i", v0 + F + lane, v1 - 32 * (U - 1), round,
                        {code("uint4 u[R][U];"), d.loads(false), let("vr", i - lane), let("ve", v1),
                         code("if (MK_PREFETCH_ROUNDS > 0 && !Smem) mk_prefetch_round<R>(w, vr, ve, MK_PREFETCH_ROUNDS);"),
                         d.dots("u", false)}),
              guard(i, v1, {code("uint4 u[R][U];"), d.loads(true), d.dots("u", true)})};
    return m;
  }();
  return n;
}

const LoopNest& linear_dot_first_nest() {
  static const LoopNest n = [] {
    const IndexExpr v0 = v("v0"), N = v("n"), U = v("U"), R = v("R");
    const IndexExpr lane = v("lane"), j = v("j"), r = v("r"), rr = v("rr"), jj = v("jj");
    LoopNest m;
    m.signature = "template <int R_>\n__device__ __forceinline__ void mk_dot_first("
                  "const char* const (&w)[R_], int v0_, int n_, uint4 (&pre)[R_][MK_LOADS_IN_FLIGHT])";
    m.params = {{"v0", "v0_", 0, 1 << 22}, {"n", "n_", 0, 1 << 22}, {"U", "MK_LOADS_IN_FLIGHT", 1, 8},
                rows_param(), lanes_param()};
    m.ranges = {{"part", v0, v0 + N}, {"round", 0, U}};
    m.accesses = {
        {"w", "((const uint4*)w[@])", "part", v0 + 32 * j + lane, true,
         {{{{"rr", R}, {"jj", min(N, 32 * U)}}, v0 + jj, {{"r", rr}, {"j", jj / 32}, {"lane", jj % 32}}, {}, rr}},
         CType::Int, r, R},
        {"pre", "pre[@]", "round", j, false, {}, CType::Int, r, R},
    };
    m.body = {thread("lane", "threadIdx.x & 31"),
              loop("r", LoopKind::Unrolled, R, 1,
                   {loop("j", LoopKind::Unrolled, U, 1,
                         {code("{pre} = make_uint4(0u, 0u, 0u, 0u);"),
                          guard(32 * j + lane, N, {code("{pre} = mk_ld_stream(&{w});")})})})};
    return m;
  }();
  return n;
}

const LoopNest& linear_dot_scalar_nest() {
  static const LoopNest n = [] {
    const IndexExpr k0 = v("k0"), N = v("n"), R = v("R");
    const IndexExpr lane = v("lane"), c = v("c"), r = v("r"), rr = v("rr"), jj = v("jj");
    LoopNest m;
    m.signature = "template <int DT, int R_>\n__device__ __forceinline__ void mk_dot_scalar("
                  "const char* const (&w)[R_], const float* xs, int k0_, int n_, float (&acc)[R_])";
    m.params = {{"k0", "k0_", 0, 1 << 24}, {"n", "n_", 0, 1 << 24}, rows_param(), lanes_param()};
    m.ranges = {{"part", k0, k0 + N}, {"rows", 0, R}};
    // Row rr's element jj: one cover for the weight and the input (read per row, its array).
    const Cover each{{{"rr", R}, {"jj", N}}, k0 + jj, {{"r", rr}, {"c", jj / 32 * 32}, {"lane", jj % 32}}, {}, rr};
    m.accesses = {
        {"w", "((const typename MkW<DT>::T*)w[@])", "part", k0 + c + lane, true, {each}, CType::Int, r, R},
        {"x", "xs", "part", k0 + c + lane, true, {each}, CType::Int, r, R},
        {"acc", "acc", "rows", r, false, {}, CType::Int},
    };
    m.body = {thread("lane", "threadIdx.x & 31"),
              loop("c", LoopKind::Serial, N, 32,
                   {guard(c + lane, N,
                          {loop("r", LoopKind::Unrolled, R, 1,
                                {code("{acc} = mk_dp_step({acc}, MkW<DT>::cvt({w}), {x});")})})})};
    return m;
  }();
  return n;
}

const LoopNest& linear_fold_nest() {
  static const LoopNest n = [] {
    const IndexExpr total = v("total"), ks = v("ks"), S = v("S"), r = v("r"), p = v("p");
    const IndexExpr rr = v("rr"), pp = v("pp");
    const LinearItems& li = linear_items_formula();
    auto slot = [&](IndexExpr part, IndexExpr row) {
      return substitute(li.slot, {{"p", part}, {"total", total}, {"r", row}});
    };
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_lin_fold(const MkTask& t, const float* part_sums, "
                  "int total_, int ks_, float scale)";
    m.params = {{"total", "total_", 1, 1 << 20},
                {"ks", "ks_", 1, 64},
                {"S", "MPK_MK_KSPLIT_SLOTS", 1, 1 << 16},
                {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"slots", 0, S}, {"rows", 0, total}};
    const std::vector<std::pair<IndexExpr, IndexExpr>> folded = {{1, ks}, {ks * total, S + 1}};
    m.accesses = {
        {"sums", "part_sums", "slots", slot(p, r), true, {{{{"rr", total}, {"pp", ks}}, slot(pp, rr), {{"r", rr}, {"p", pp}}, folded}},
         CType::Int},
        {"row", "rows", "rows", r, true, {{{{"rr", total}}, rr, {{"r", rr}}, folded}}},
    };
    // The sum in part order, then the RMSNorm factor (ir/dot_product.h: the fold and the factor).
    m.body = {guard(1, ks,
                    {guard(ks * total, S + 1,
                           {code("mk_sync();  // every part's sums stored"), code("MkTileRows rows{t};"),
                            loop("r", LoopKind::Threads, total, 1,
                                 {code("float v = 0.f;"),
                                  loop("p", LoopKind::Serial, ks, 1, {code("v = mk_dp_add(v, {sums});")}),
                                  code("{row} = mk_dp_scale(v, scale);")})})})};
    return m;
  }();
  return n;
}

const LoopNest& linear_items_nest() {
  static const LoopNest n = [] {
    const IndexExpr total = v("total"), ks = v("ks"), R = v("R"), nw = v("nw"), S = v("S");
    const IndexExpr warp = v("warp"), it = v("it"), r0 = v("r0");
    const IndexExpr j = v("j"), r = v("r"), full = v("full"), G = v("G"), rr = v("rr"), pp = v("pp");
    const LinearItems& li = linear_items_formula();
    auto slot = [&](IndexExpr part, IndexExpr row) {
      return substitute(li.slot, {{"p", part}, {"total", total}, {"r", row}});
    };
    // Item it's row group's first row and K part (LinearItems). Written out again where a sum is
    // stored: a value kept across the dot products costs the kernel a register (it spilled).
    const IndexExpr row0 = substitute(li.row0, {{"it", it}, {"ks", ks}, {"rows", R}});
    const IndexExpr part = substitute(li.part, {{"it", it}, {"ks", ks}});
    LoopNest m;
    m.signature = "template <int DT, int R_, bool Smem>\n__device__ __forceinline__ void mk_lin_items("
                  "const MkTask& t, const float* xs, float scale, int total_, int ks_, int units, int unit, "
                  "bool aligned, float* part_sums, bool first_, const uint4 (&pre)[R_][MK_LOADS_IN_FLIGHT], "
                  "const char* ws)";
    m.params = {{"total", "total_", 1, 1 << 20},
                {"ks", "ks_", 1, 64},
                rows_param(),
                {"S", "MPK_MK_KSPLIT_SLOTS", 1, 1 << 16},
                {"nw", "(MK_COMPUTE_THREADS >> 5)", 1, 32}};
    m.threads = "nw";
    m.ranges = {{"rows", 0, total}, {"slots", 0, S}, {"group", 0, R}};
    // Item `it`: the part's elements [k0, k1) (the even split, proved on its own: mk_kpart), its
    // first row (in this order: the other one spilled a register).
    auto item = [&](Block rest) {
      Block b = {let("p", part), code("int k0, k1;"), code("mk_kpart(p, ks, units, unit, k0, k1);"), let("r0", row0)};
      b.insert(b.end(), rest.begin(), rest.end());
      return b;
    };
    // Row r's sum of part p (register j of the group): lane 0 stores it scaled through the
    // epilogue (one part) or into its slot (several: mk_lin_fold adds them).
    auto store = [&](const char* acc) {
      return Block{guard(ks, 2, {code(std::string("if ((threadIdx.x & 31) == 0) {out} = mk_dp_scale(") + acc +
                                      ", scale);")}),
                   guard(1, ks, {guard(ks * total, S + 1,
                                       {code(std::string("if ((threadIdx.x & 31) == 0) {sums} = ") + acc + ";")})})};
    };
    Block group = {code("MkGroupOut<R> o;"), code("float acc[R];"),
                   code("mk_lin_dots<DT, R, Smem>(t, xs, r0, k0, k1, aligned, ks, first_ && it == warp, pre, ws, o, acc);")};
    Block rows = store("{acc}");
    group.push_back(loop("j", LoopKind::Unrolled, R, 1, [&] {
      Block b = {let("r", row0 + j)};
      b.insert(b.end(), rows.begin(), rows.end());
      return b;
    }()));
    Block one = {let("j", 0), code("MkGroupOut<1> o;"), code("float acc[1];"),
                 code("const uint4 none[1][MK_LOADS_IN_FLIGHT] = {};  // no first round: never read"),
                 code("mk_lin_dots<DT, 1, Smem>(t, xs, r, k0, k1, aligned, ks, false, none, ws, o, acc);")};
    Block last = store("acc[0]");
    one.insert(one.end(), last.begin(), last.end());
    // The inverse: row rr's part pp is item (rr / R) ks + pp (the last group's too), dealt to warp
    // it % nw.
    auto inverse = [&](IndexExpr part) -> std::map<std::string, IndexExpr> {
      const IndexExpr i = rr / R * ks + part;
      return {{"warp", i % nw}, {"it", i}, {"j", rr % R}, {"r", rr}};
    };
    m.accesses = {
        {"out", "o", "rows", r, true, {{{{"rr", total}}, rr, inverse(0), {{ks, 2}}}}, CType::Int, 0, 1, j},
        {"sums", "part_sums", "slots", slot(part, r), true,
         {{{{"rr", total}, {"pp", ks}}, slot(pp, rr), inverse(pp), {{1, ks}, {ks * total, S + 1}}}}, CType::Int},
        {"acc", "acc", "group", j, false, {}, CType::Int},
    };
    m.body = {thread("warp", "(threadIdx.x >> 5)"),
              // The full row groups' items: warp, warp + nw, ...
              let("full", total / R * ks), loop_from("it", warp, full, nw, item(group)),
              // The last row group when R does not divide the rows: its items one row at a time,
              // dealt on round-robin like the others (the warp's first: the group's first item that
              // is its own, item it to warp it % nw).
              let("G", (total + R - 1) / R * ks),
              loop_from("it", full + (warp - full % nw + nw) % nw, G, nw, item({loop_from("r", r0, total, 1, one)}))};
    return m;
  }();
  return n;
}

const LoopNest& linear_argmax_nest() {
  static const LoopNest n = [] {
    const IndexExpr total = v("total"), o = v("o"), r = v("r"), rr = v("rr");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_lin_argmax(const MkTask& t, int total_, const MkDraw& draw, "
                  "float& best, int& bi)";
    m.params = {{"total", "total_", 1, 1 << 20},
                {"o", "(int)t.out_index0", 0, 1 << 24},
                {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"rows", 0, total}};
    m.accesses = {{"logit", "rows", "rows", r, true, {{{{"rr", total}}, rr, {{"r", rr}}}}}};
    // A non-finite logit becomes NaN, which wins every comparison: the step's argmax value then
    // says whether any logit was non-finite, at no extra pass over the logits. Sampling over
    // every id: the argmax of z + Gumbel noise draws the token at the next position
    // (ref/sampling.h).
    m.body = {code("MkTileRows rows{t};"),
              loop("r", LoopKind::Threads, total, 1,
                   {let("id", o + r), code("const float z = {logit};"),
                    code("float v = isfinite(z) ? z : __int_as_float(0x7fffffff);"),
                    code("#if MK_DRAWS == MPK_MK_SAMPLE_GUMBEL"),
                    code("if (draw.gumbel && v == v) v = mk_sample_gumbel(v, draw.temperature, draw.seed, draw.position, id);"),
                    code("#endif"),
                    code("mk_better(best, bi, v, id);")})};
    return m;
  }();
  return n;
}

}  // namespace mpk::ir
