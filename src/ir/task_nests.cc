#include "ir/task_nests.h"

#include "ir/layouts.h"

namespace mpk::ir {
namespace {

// Element x of query head gg of KV head kvh's group in attention's output (AttentionRows).
IndexExpr output_elem(const IndexExpr& G, const IndexExpr& D, const IndexExpr& kvh, const IndexExpr& gg,
                      const IndexExpr& x) {
  const AttentionRows& ar = attention_rows_formula();
  const IndexExpr q = substitute(ar.q_head, {{"h", kvh}, {"g", gg}, {"G", G}});
  return substitute(ar.head_elem, {{"hd", q}, {"e", x}, {"D", D}});
}

}  // namespace

const LoopNest& attention_merge_nest() {
  static const LoopNest n = [] {
    auto v = [](const char* name) { return IndexExpr::var(name); };
    const IndexExpr G = v("G"), D = v("D"), C = v("C"), h = v("h"), B = v("B");
    const IndexExpr idx = v("idx"), g = v("g"), e = v("e"), c0 = v("c0"), j = v("j");
    const AttentionStates& as = attention_states_formula();
    const GridItems& gi = grid_items_formula();
    // Element x of state row `row`; the row of chunk c's query head gg from the head's base.
    auto slot = [&](IndexExpr row, IndexExpr x) { return substitute(as.slot, {{"row", row}, {"e", x}, {"D", D}}); };
    auto prow = [&](IndexExpr c, IndexExpr gg) {
      return substitute(as.partial_row, {{"h", 0}, {"c", c}, {"g", gg}, {"C", C}, {"G", G}});
    };
    auto out_at = [&](IndexExpr kvh, IndexExpr gg, IndexExpr x) { return output_elem(G, D, kvh, gg, x); };
    auto item_of = [&](IndexExpr gg, IndexExpr x) { return substitute(gi.idx_of, {{"r", gg}, {"c", x}, {"cols", D}}); };
    LoopNest m;
    m.signature = "__device__ void mk_attn_merge(const MkTask& t, const float* part)";
    m.params = {{"G", "t.group", 1, 1 << 16},   {"D", "t.head_dim", 1, 1024},
                {"C", "t.num_chunks", 1, 1 << 16}, {"h", "t.kv_head", 0, (1 << 16) - 1},
                {"B", "MK_MERGE_BATCH", 1, 64}, {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"partials", 0, slot(prow(C, 0), 0)},
                {"out", out_at(h, 0, 0), out_at(h + 1, 0, 0)},
                {"batch", 0, B}};  // the registers of a batch's states
    const IndexExpr cg = v("cg"), gg = v("gg"), ee = v("ee");
    const std::map<std::string, IndexExpr> chunk_of = {{"idx", item_of(gg, ee)}, {"c0", cg / B * B}, {"j", cg % B}};
    m.accesses = {
        {"mc", "mc", "batch", j, false, {}},
        {"lc", "lc", "batch", j, false, {}},
        {"oc", "oc", "batch", j, false, {}},
        {"max", "part", "partials", slot(prow(c0 + j, g), D), false, {}},
        {"sum", "part", "partials", slot(prow(c0 + j, g), D + 1), false, {}},
        {"sums", "part", "partials", slot(prow(c0 + j, g), e), true,
         {{{{"cg", C}, {"gg", G}, {"ee", D}}, slot(prow(cg, gg), ee), chunk_of}}},
        {"out", "((float*)t.out)", "out", out_at(h, g, e), true,
         {{{{"gg", G}, {"ee", D}}, out_at(h, gg, ee), {{"idx", item_of(gg, ee)}}}}},
    };
    // The batch's states loaded at once (one round trip), then a running state rescaled between
    // batches (with at most B chunks the sums are exactly the formula's): ir/online_softmax.h.
    // Written by other workers in this step: read through L2 (__ldcg), never this SM's L1.
    m.body = {loop("idx", LoopKind::Threads, G * D, 1,
                   {let("g", substitute(gi.row, {{"idx", idx}, {"cols", D}})),
                    let("e", substitute(gi.col, {{"idx", idx}, {"cols", D}})),
                    code("float M = MK_NEG_INF, L = 0.f, O = 0.f;"),
                    loop("c0", LoopKind::Serial, C, B,
                         {code("float mc[MK_MERGE_BATCH], lc[MK_MERGE_BATCH], oc[MK_MERGE_BATCH];"),
                          loop("j", LoopKind::Unrolled, B, 1,
                               {code("{mc} = MK_NEG_INF; {lc} = 0.f; {oc} = 0.f;"),
                                guard(c0 + j, C, {code("{mc} = __ldcg(&{max}); {lc} = __ldcg(&{sum}); "
                                                       "{oc} = __ldcg(&{sums});")})}),
                          code("float Mb = M;"),
                          loop("j", LoopKind::Unrolled, B, 1, {code("Mb = fmaxf(Mb, {mc});")}),
                          code("const float f0 = mk_rescale(M, Mb);"), code("L = L * f0;"), code("O = O * f0;"),
                          loop("j", LoopKind::Unrolled, B, 1,
                               {guard(c0 + j, C, {code("const float f = mk_rescale({mc}, Mb);"),
                                                  code("L = mk_os_update(L, 1.0f, {lc}, f);"),
                                                  code("O = mk_os_update(O, 1.0f, {oc}, f);")})}),
                          code("M = Mb;")}),
                    code("{out} = O / L;")})};
    return m;
  }();
  return n;
}

const LoopNest& attention_combine_nest() {
  static const LoopNest n = [] {
    auto v = [](const char* name) { return IndexExpr::var(name); };
    const IndexExpr G = v("G"), D = v("D"), C = v("C"), h = v("h"), HP = v("HP"), nw = v("nw");
    const IndexExpr g0 = v("g0"), idx = v("idx"), hh = v("hh"), g = v("g"), e = v("e"), w = v("w"), hn = v("hn");
    const AttentionStates& as = attention_states_formula();
    const GridItems& gi = grid_items_formula();
    auto slot = [&](IndexExpr row, IndexExpr x) { return substitute(as.slot, {{"row", row}, {"e", x}, {"D", D}}); };
    // Element x of warp ww's state of the pass's head i.
    auto wslot = [&](IndexExpr ww, IndexExpr i, IndexExpr x) {
      return slot(substitute(as.warp_row, {{"w", ww}, {"i", i}, {"hp", HP}}), x);
    };
    auto out_at = [&](IndexExpr kvh, IndexExpr gg, IndexExpr x) { return output_elem(G, D, kvh, gg, x); };
    auto item_of = [&](IndexExpr i, IndexExpr x) { return substitute(gi.idx_of, {{"r", i}, {"c", x}, {"cols", D}}); };
    LoopNest m;
    // The caller's group, head_dim and kv_head (t's, already in registers); the chunk count
    // read after the pass (bound before it, it would hold a register through the pass).
    m.signature = "template <class Pass>\n__device__ __forceinline__ void mk_attn_passes(const MkTask& t, "
                  "const float* wst, int group, int head_dim, int kv_head, Pass pass)";
    m.params = {{"G", "group", 1, 1 << 16},       {"D", "head_dim", 1, 1024},
                {"C", "t.num_chunks", 1, 1 << 16}, {"h", "kv_head", 0, (1 << 16) - 1},
                {"HP", "MK_HEADS_PER_PASS", 1, 64}, {"nw", "MK_COMPUTE_THREADS >> 5", 1, 32},
                {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"states", 0, slot(substitute(as.warp_row, {{"w", nw}, {"i", 0}, {"hp", HP}}), 0)},
                {"out", out_at(h, 0, 0), out_at(h + 1, 0, 0)},
                {"partial", 0, slot(G, 0)}};
    // Query head gg, element ee: its pass and item.
    const IndexExpr gg = v("gg"), ee = v("ee"), ww = v("ww");
    const std::map<std::string, IndexExpr> at = {{"g0", gg / HP * HP}, {"idx", item_of(gg % HP, ee)}};
    const std::map<std::string, IndexExpr> at0 = {{"g0", gg / HP * HP}, {"idx", item_of(gg % HP, 0)}};
    const std::vector<std::pair<IndexExpr, IndexExpr>> one = {{C, 2}}, several = {{1, C}};
    m.accesses = {
        {"wmax", "wst", "states", wslot(w, hh, D), false, {}, CType::Int},
        {"wsum", "wst", "states", wslot(w, hh, D + 1), false, {}, CType::Int},
        {"wsums", "wst", "states", wslot(w, hh, e), false,
         {{{{"gg", G}, {"ww", nw}, {"ee", D}}, wslot(ww, gg % HP, ee),
           {{"g0", gg / HP * HP}, {"idx", item_of(gg % HP, ee)}, {"w", ww}}}}, CType::Int},
        {"out", "((float*)t.out)", "out", out_at(h, g, e), true, {{{{"gg", G}, {"ee", D}}, out_at(h, gg, ee), at, one}}},
        {"pout", "((float*)t.partial)", "partial", slot(g, e), true, {{{{"gg", G}, {"ee", D}}, slot(gg, ee), at, several}}},
        {"pmax", "((float*)t.partial)", "partial", slot(g, D), true, {{{{"gg", G}}, slot(gg, D), at0, several}}},
        {"psum", "((float*)t.partial)", "partial", slot(g, D + 1), true, {{{{"gg", G}}, slot(gg, D + 1), at0, several}}},
    };
    // The warps' states moved to the largest max and added (ir/online_softmax.h); the output
    // normalised (one chunk) or the chunk's state kept for the merge (several).
    m.body = {loop("g0", LoopKind::Serial, G, HP,
                   {code("pass(g0);"), code("mk_sync();"), bind("C"), let("hn", min(G - g0, HP)),
                    loop("idx", LoopKind::Threads, hn * D, 1,
                         {let("hh", substitute(gi.row, {{"idx", idx}, {"cols", D}})),
                          let("e", substitute(gi.col, {{"idx", idx}, {"cols", D}})), let("g", g0 + hh),
                          code("float M = MK_NEG_INF;"),
                          loop("w", LoopKind::Serial, nw, 1, {code("M = fmaxf(M, {wmax});")}),
                          code("float L = 0.f, O = 0.f;"),
                          loop("w", LoopKind::Serial, nw, 1,
                               {code("const float f = mk_rescale({wmax}, M);"),
                                code("L = mk_os_update(L, 1.0f, {wsum}, f);"),
                                code("O = mk_os_update(O, 1.0f, {wsums}, f);")}),
                          guard(C, 2, {code("{out} = O / L;")}),
                          guard(1, C, {code("{pout} = O;"), guard(e, 1, {code("{pmax} = M;"), code("{psum} = L;")})})}),
                    code("mk_sync();")})};
    return m;
  }();
  return n;
}

const LoopNest& attention_pass_nest() {
  static const LoopNest n = [] {
    auto v = [](const char* name) { return IndexExpr::var(name); };
    const IndexExpr G = v("G"), D = v("D"), kvh = v("kvh"), cap = v("cap"), g0 = v("g0"), j0 = v("j0"), j1 = v("j1");
    const IndexExpr HP = v("HP"), DC = v("DC"), nw = v("nw");
    const IndexExpr tid = v("tid"), w = v("w"), lane = v("lane"), j = v("j"), h = v("h"), c = v("c"), e = v("e");
    const AttentionStates& as = attention_states_formula();
    const AttentionRows& ar = attention_rows_formula();
    auto kv_at = [&](IndexExpr pos, IndexExpr x) {
      return substitute(ar.kv_elem, {{"h", kvh}, {"j", pos}, {"e", x}, {"cap", cap}, {"D", D}});
    };
    auto query_at = [&](IndexExpr i, IndexExpr x) { return substitute(ar.head_elem, {{"hd", g0 + i}, {"e", x}, {"D", D}}); };
    // Warp ww's state row of the pass's head i; the slot of element `index` of row `array`
    // (prove_attention_warp_states proves distinct pairs distinct slots inside the warps' region).
    auto wrow = [&](IndexExpr ww, IndexExpr i) { return substitute(as.warp_row, {{"w", ww}, {"i", i}, {"hp", HP}}); };
    const IndexExpr slot = substitute(as.slot, {{"row", v("array")}, {"e", v("index")}, {"D", D}});
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_attn_pass(const MkTask& t, const float* qk, float* wst, "
                  "const float* kc, const float* vc, int group, int head_dim, int kv_head, int cap_, int g0_, "
                  "int j0_, int j1_, bool pre_, const float (&kpre)[MK_MAX_HEAD_DIM / 32], "
                  "const float (&vpre)[MK_MAX_HEAD_DIM / 32])";
    m.params = {{"G", "group", 1, 1 << 16},         {"D", "head_dim", 1, 1024},
                {"kvh", "kv_head", 0, (1 << 16) - 1}, {"cap", "cap_", 1, 1 << 24},
                {"g0", "g0_", 0, 1 << 16},          {"j0", "j0_", 0, 1 << 24},
                {"j1", "j1_", 0, 1 << 24},          {"HP", "MK_HEADS_PER_PASS", 1, 64},
                {"DC", "MK_MAX_HEAD_DIM / 32", 1, 32}, {"nw", "MK_COMPUTE_THREADS >> 5", 1, 32},
                {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"row", 0, D},
                {"queries", 0, G * D},
                // A state row's slots: from one row's first to the next's.
                {"state", 0, substitute(slot, {{"array", 1}, {"index", 0}}) - substitute(slot, {{"array", 0}, {"index", 0}})},
                {"dims", 0, DC},
                {"heads", 0, HP}};
    // Position jj of the chunk, element ee: the thread and loop values that read it.
    const IndexExpr jj = v("jj"), ee = v("ee"), hh = v("hh"), ww = v("ww");
    const IndexExpr hn = min(G - g0, HP), len = j1 - j0;
    const std::map<std::string, IndexExpr> row_at = {{"tid", jj % nw * 32 + ee % 32}, {"j", j0 + jj}, {"c", ee / 32}};
    std::map<std::string, IndexExpr> term_at = row_at;
    term_at.emplace("h", hh);
    const Cover rows{{{"jj", len}, {"ee", D}}, ee, row_at, {}, jj};
    const std::map<std::string, IndexExpr> state_at = {{"tid", ww * 32 + ee % 32}, {"h", hh}, {"c", ee / 32}};
    const std::map<std::string, IndexExpr> stat_at = {{"tid", ww * 32}, {"h", hh}};
    m.accesses = {
        // K and V as pairs (position - j0, element), printed at their place in the cache (that
        // distinct pairs are distinct places is the attention rows' proof; on the flat index Z3
        // took over 10 s on the once obligation with 3 warps).
        {"k", "kc", "row", e, true, {rows}, CType::LongLong, j - j0, max(0, len), kv_at(j0 + v("array"), v("index"))},
        {"v", "vc", "row", e, true, {rows}, CType::LongLong, j - j0, max(0, len), kv_at(j0 + v("array"), v("index"))},
        {"kp", "kpre", "dims", c, false, {}, CType::Int},
        {"vp", "vpre", "dims", c, false, {}, CType::Int},
        {"kr", "kr", "dims", c, false, {}, CType::Int},
        {"vr", "vr", "dims", c, false, {}, CType::Int},
        // The score's terms q[e] k_j[e]: the query element per position (its array), each once,
        // every one of the pass's heads.
        {"q", "qk", "queries", query_at(h, e), true,
         {{{{"jj", len}, {"hh", hn}, {"ee", D}}, query_at(hh, ee), term_at, {}, jj}}, CType::Int, j - j0, len},
        {"m", "m", "heads", h, false, {}, CType::Int},
        {"l", "l", "heads", h, false, {}, CType::Int},
        {"acc", "acc[@]", "dims", c, false, {}, CType::Int, h, HP},
        {"ws", "wst", "state", e, true, {{{{"ww", nw}, {"hh", hn}, {"ee", D}}, ee, state_at, {}, wrow(ww, hh)}},
         CType::Int, wrow(w, h), nw * HP, slot},
        {"wm", "wst", "state", D, true, {{{{"ww", nw}, {"hh", hn}}, D, stat_at, {}, wrow(ww, hh)}}, CType::Int,
         wrow(w, h), nw * HP, slot},
        {"wl", "wst", "state", D + 1, true, {{{{"ww", nw}, {"hh", hn}}, D + 1, stat_at, {}, wrow(ww, hh)}},
         CType::Int, wrow(w, h), nw * HP, slot},
    };
    // Lane `lane` of warp w holds elements lane + 32 c of a row. Per position: its K and V rows
    // (the warp's first from registers when `pre_`: loaded before the task's events, the same
    // elements), then each head's score and online-softmax update (ir/online_softmax.h; a finite
    // score: its weight needs no empty check); then the warp's states.
    auto dims = [&](Block body) { return loop("c", LoopKind::Unrolled, DC, 1, {let("e", lane + 32 * c), guard(e, D, body)}); };
    m.body = {thread("tid"), let("w", tid >> 5), let("lane", tid & 31),
              code("float m[HP], l[HP], acc[HP][DC];"),
              loop("h", LoopKind::Unrolled, HP, 1,
                   {code("{m} = MK_NEG_INF; {l} = 0.f;"), loop("c", LoopKind::Unrolled, DC, 1, {code("{acc} = 0.f;")})}),
              let("jf", attention_first_position()),
              loop_from("j", j0 + w, j1, nw,
                        {code("const bool pre = pre_ && j == jf;"), code("float kr[DC], vr[DC];"),
                         loop("c", LoopKind::Unrolled, DC, 1,
                              {let("e", lane + 32 * c), code("{kr} = 0.f; {vr} = 0.f;"),
                               guard(e, D, {code("{kr} = pre ? {kp} : {k}; {vr} = pre ? {vp} : {v};")})}),
                         loop("h", LoopKind::Unrolled, HP, 1,
                              {guard(g0 + h, G,
                                     {code("float s = 0.f;"), dims({code("s += {q} * {kr};")}),
                                      code("s = mk_warp_sum(s) * t.scale;"), code("const float mn = fmaxf({m}, s);"),
                                      code("const float corr = mk_rescale({m}, mn), pj = expf(s - mn);"),
                                      code("{l} = mk_os_update({l}, corr, pj, 1.0f);"),
                                      loop("c", LoopKind::Unrolled, DC, 1,
                                           {code("{acc} = mk_os_update({acc}, corr, pj, {vr});")}),
                                      code("{m} = mn;")})})}),
              loop("h", LoopKind::Unrolled, HP, 1,
                   {guard(g0 + h, G, {dims({code("{ws} = {acc};")}), guard(lane, 1, {code("{wm} = {m}; {wl} = {l};")})})})};
    return m;
  }();
  return n;
}

const LoopNest& argmax_partials_nest() {
  static const LoopNest n = [] {
    const IndexExpr N = IndexExpr::var("n"), j = IndexExpr::var("j"), jj = IndexExpr::var("jj");
    LoopNest m;
    m.signature = "__device__ __forceinline__ void mk_argmax_partials(const MkTask& t, float& best, int& bi)";
    m.params = {{"n", "t.n", 1, 1 << 24}, {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"partials", 0, N}};
    m.accesses = {{"pv", "((const float*)t.part_val)", "partials", j, true, {{{{"jj", N}}, jj, {{"j", jj}}}}},
                  {"pi", "((const int*)t.part_idx)", "partials", j, true, {{{{"jj", N}}, jj, {{"j", jj}}}}}};
    m.body = {code("bool have = false;"),
              loop("j", LoopKind::Threads, N, 1,
                   {code("if (!have) { best = {pv}; bi = {pi}; have = true; } else mk_better(best, bi, {pv}, {pi});")})};
    return m;
  }();
  return n;
}

const LoopNest& embedding_row_nest() {
  static const LoopNest n = [] {
    auto v = [](const char* name) { return IndexExpr::var(name); };
    const IndexExpr H = v("H"), V = v("V"), feed = v("feed"), U = v("U"), threads = v("threads");
    const IndexExpr tid = v("tid"), j0 = v("j0"), u = v("u"), j = v("j"), jj = v("jj");
    LoopNest m;
    m.signature = "template <int DT>\n__device__ __forceinline__ void mk_embed_row(const MkTask& t, int feed_)";
    m.params = {{"H", "t.hidden", 1, 1 << 20},
                {"V", "t.vocab", 1, 1 << 24},
                {"feed", "feed_", INT32_MIN, INT32_MAX},
                {"U", "8", 8, 8},
                {"threads", "MK_COMPUTE_THREADS", 32, 1024}};
    m.ranges = {{"table", 0, V * H}, {"hidden", 0, H}, {"round", 0, U}};
    // Element jj: its thread, round and slot in the round.
    const std::map<std::string, IndexExpr> at = {
        {"tid", jj % threads}, {"j0", jj / (threads * U) * (threads * U)}, {"u", jj % (threads * U) / threads}};
    m.accesses = {
        {"row", "((const typename MkW<DT>::T*)t.table)", "table", feed * H + j, true,
         {{{{"jj", H}}, feed * H + jj, at, {{-1, feed}, {feed, V}}}}},
        {"v", "v", "round", u, false, {}},
        {"out", "((float*)t.embed_out)", "hidden", j, true, {{{{"jj", H}}, jj, at, {{-1, feed}, {feed, V}}}}},
    };
    m.body = {thread("tid"),
              guard(-1, feed,
                    {guard(feed, V,
                           {loop("j0", LoopKind::Serial, H, threads * U,
                                 {code("float v[U];"),
                                  loop("u", LoopKind::Unrolled, U, 1,
                                       {let("j", j0 + u * threads + tid), code("{v} = 0.f;"),
                                        guard(j, H, {code("{v} = MkW<DT>::cvt({row});")})}),
                                  loop("u", LoopKind::Unrolled, U, 1,
                                       {let("j", j0 + u * threads + tid), guard(j, H, {code("{out} = {v};")})})})})})};
    return m;
  }();
  return n;
}

}  // namespace mpk::ir
