#include "superopt/index_prover.h"

#include <z3++.h>

#include <algorithm>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "base/error.h"
#include "superopt/encoder.h"
#include "superopt/z3_check.h"

namespace mpk::superopt {
namespace {

using ir::IndexExpr;
using ir::IndexOp;

void collect(const IndexExpr& e, std::function<void(const IndexExpr&)> f) {
  f(e);
  for (const IndexExpr& a : e.node().args) collect(a, f);
}

}  // namespace

bool ProofRecord::proved() const {
  if (obligations.empty()) return false;
  for (const Obligation& o : obligations)
    if (o.result != "proved") return false;
  return true;
}

std::string ProofRecord::to_json() const {
  nlohmann::json j;
  j["subject"] = subject;
  j["z3"] = z3_version;
  j["proved"] = proved();
  j["obligations"] = nlohmann::json::array();
  for (const Obligation& o : obligations) {
    nlohmann::json x = {{"name", o.name}, {"result", o.result}, {"ms", o.ms}, {"work", o.work}};
    if (!o.counterexample.empty()) x["counterexample"] = o.counterexample;
    j["obligations"].push_back(x);
  }
  return j.dump();
}

ProofRecord prove_even_split(const ir::EvenSplit& f, int64_t max_len, int64_t num_parts,
                             unsigned timeout_ms) {
  MPK_CHECK(max_len >= 0 && num_parts >= 1, InvalidArgument) << "empty proof domain";
  z3::context ctx;
  Encoder enc(ctx);
  // The part count is the plan's constant: divisions by it stay linear.
  const z3::expr len = ctx.int_const("len"), parts = ctx.int_val(num_parts);
  const z3::expr c1 = ctx.int_const("c");
  const z3::expr domain = len >= 0 && len <= ctx.int_val(max_len);
  auto part = [&](const z3::expr& c) {
    const std::map<std::string, z3::expr> vars = {{"c", c}, {"len", len}, {"parts", parts}};
    return std::pair{enc.encode(f.begin, vars), enc.encode(f.end, vars)};
  };
  const auto [b1, e1] = part(c1);
  const z3::expr in1 = c1 >= 0 && c1 < parts;
  const z3::expr defined1 = b1.defined && e1.defined;

  ProofRecord r;
  r.subject = "even split: part c of parts over len items = [" + ir::to_string(f.begin) + ", " +
              ir::to_string(f.end) + "), len <= " + std::to_string(max_len) +
              ", parts = " + std::to_string(num_parts);
  r.z3_version = Z3_get_full_version();
  r.obligations.push_back(check(ctx, "defined (no division by zero or overflow)", domain && in1,
                                defined1, {c1, len}, timeout_ms));
  r.obligations.push_back(check(ctx, "bounds (0 <= begin <= end <= len)", domain && in1 && defined1,
                                0 <= b1.value && b1.value <= e1.value && e1.value <= len,
                                {c1, len}, timeout_ms));
  // Exactly once, through contiguity: part 0 starts at 0, the last part ends at len, and each
  // part ends where the next begins; with begin <= end (above) the parts tile [0, len) with no
  // gap and no overlap. (Two symbolic parts and an item, the general at-most-once form, made
  // Z3's nonlinear solver time out at 32 parts; these are equalities it decides in milliseconds.)
  const auto [b0, e0] = part(ctx.int_val(0));
  const auto [bl, el] = part(ctx.int_val(num_parts - 1));
  const auto [bn, en] = part(c1 + 1);
  r.obligations.push_back(check(ctx, "exactly once: part 0 begins at 0", domain,
                                b0.defined && b0.value == 0, {len}, timeout_ms));
  r.obligations.push_back(check(ctx, "exactly once: the last part ends at len", domain,
                                el.defined && el.value == len, {len}, timeout_ms));
  r.obligations.push_back(check(ctx, "exactly once: each part ends where the next begins",
                                domain && c1 >= 0 && c1 + 1 < parts && defined1,
                                bn.defined && e1.value == bn.value, {c1, len}, timeout_ms));
  return r;
}

ProofRecord prove_attention_partials(const ir::AttentionStates& f, int64_t C, int64_t G, int64_t D,
                                     int64_t max_heads, unsigned timeout_ms) {
  MPK_CHECK(C >= 2 && G >= 1 && D >= 1 && max_heads >= 1, InvalidArgument)
      << "attention partials of " << C << " chunks, " << G << " heads, dim " << D;
  z3::context ctx;
  Encoder enc(ctx, 64);
  auto k = [&](int64_t x) { return ctx.int_val(x); };
  const z3::expr Cv = k(C), Gv = k(G), Dv = k(D), zero = k(0);
  auto prow = [&](const z3::expr& h, const z3::expr& c, const z3::expr& g) {
    return enc.encode(f.partial_row, {{"h", h}, {"c", c}, {"g", g}, {"C", Cv}, {"G", Gv}});
  };
  auto slot = [&](const Term& row, const z3::expr& e) {
    const Term t = enc.encode(f.slot, {{"row", row.value}, {"e", e}, {"D", Dv}});
    return Term{t.value, row.defined && t.defined};
  };
  auto base = [&](const z3::expr& h, const z3::expr& c) { return slot(prow(h, c, zero), zero); };
  const z3::expr hkv = ctx.int_const("Hkv"), h = ctx.int_const("h"), c = ctx.int_const("c"),
                 g = ctx.int_const("g"), e = ctx.int_const("e"), kk = ctx.int_const("k");
  const z3::expr h2 = ctx.int_const("h2"), c2 = ctx.int_const("c2"), g2 = ctx.int_const("g2"),
                 e2 = ctx.int_const("e2");
  auto in = [&](const z3::expr& h, const z3::expr& c, const z3::expr& g, const z3::expr& e) {
    return h >= 0 && h < hkv && c >= 0 && c < Cv && g >= 0 && g < Gv && e >= 0 && e < Dv + 2;
  };
  const z3::expr dom = hkv >= 1 && hkv <= k(max_heads) && in(h, c, g, e) && kk >= 0 && kk < Cv;
  const Term S = slot(prow(h, c, g), e), size = slot(prow(hkv, zero, zero), zero);
  const Term b = base(h, c), chunk = slot(Term{Gv, ctx.bool_val(true)}, zero);
  const Term rel = slot(Term{g, ctx.bool_val(true)}, zero);
  const Term head = base(h, kk), shift = slot(prow(zero, kk, zero), zero), mrel = slot(prow(zero, c, g), zero);
  const Term h0 = base(h, zero), hC = base(h, Cv);
  const z3::expr defined = S.defined && size.defined && b.defined && chunk.defined && rel.defined &&
                           head.defined && shift.defined && mrel.defined && h0.defined && hC.defined;
  ProofRecord p;
  p.subject = "attention partials: slot = " + ir::to_string(f.slot) + ", partial_row = " +
              ir::to_string(f.partial_row) + "; C = " + std::to_string(C) + ", G = " + std::to_string(G) +
              ", D = " + std::to_string(D) + ", KV heads <= " + std::to_string(max_heads);
  p.z3_version = Z3_get_full_version();
  const std::vector<z3::expr> shown = {hkv, h, c, g, e};
  p.obligations.push_back(check(ctx, "defined (long long: no overflow)", dom, defined, shown, timeout_ms));
  const z3::expr ok = dom && defined;
  p.obligations.push_back(check(ctx, "bounds (inside the partials buffer)", ok,
                                S.value >= 0 && S.value < size.value, shown, timeout_ms));
  p.obligations.push_back(check(ctx, "chunk range (inside the chunk task's declared write)", ok,
                                S.value >= b.value && S.value < b.value + chunk.value, shown, timeout_ms));
  p.obligations.push_back(check(ctx, "chunk write (the chunk task writes the element at its slot)", ok,
                                b.value + rel.value + e == S.value, shown, timeout_ms));
  // A chunk folding the merge in finds the head's base from its own; a merge task is given it.
  const z3::expr merged = head.value - shift.value + mrel.value + e;
  p.obligations.push_back(check(ctx, "merge read (from any chunk's base, the element at its slot, in the head's read)",
                                ok, merged == S.value && h0.value + mrel.value + e == S.value && S.value >= h0.value &&
                                        S.value < hC.value,
                                {hkv, h, c, g, e, kk}, timeout_ms));
  const Term S2 = slot(prow(h2, c2, g2), e2);
  p.obligations.push_back(check(ctx, "exactly once (distinct elements, distinct slots)",
                                ok && in(h2, c2, g2, e2) && S2.defined &&
                                    (h != h2 || c != c2 || g != g2 || e != e2),
                                S.value != S2.value, {h, c, g, e, h2, c2, g2, e2}, timeout_ms));
  return p;
}

ProofRecord prove_attention_warp_states(const ir::AttentionStates& f, int64_t nw, int64_t hp, int64_t D,
                                        unsigned timeout_ms) {
  MPK_CHECK(nw >= 1 && hp >= 1 && D >= 1, InvalidArgument)
      << "attention warp states of " << nw << " warps, " << hp << " heads, dim " << D;
  z3::context ctx;
  Encoder enc(ctx, 32);
  auto k = [&](int64_t x) { return ctx.int_val(x); };
  const z3::expr NW = k(nw), HP = k(hp), Dv = k(D), zero = k(0);
  // Slot e of warp w's row for head i: slot(warp_row(w, i), e).
  auto slot_at = [&](const z3::expr& w, const z3::expr& i, const z3::expr& e) {
    const Term r = enc.encode(f.warp_row, {{"w", w}, {"i", i}, {"hp", HP}});
    const Term t = enc.encode(f.slot, {{"row", r.value}, {"e", e}, {"D", Dv}});
    return Term{t.value, r.defined && t.defined};
  };
  auto row_at = [&](const z3::expr& w, const z3::expr& i) { return slot_at(w, i, zero); };
  const z3::expr w = ctx.int_const("w"), i = ctx.int_const("i"), e = ctx.int_const("e");
  const z3::expr w2 = ctx.int_const("w2"), i2 = ctx.int_const("i2"), e2 = ctx.int_const("e2");
  auto in = [&](const z3::expr& w, const z3::expr& i, const z3::expr& e) {
    return w >= 0 && w < NW && i >= 0 && i < HP && e >= 0 && e < Dv + 2;
  };
  const Term a = row_at(w, i), a2 = row_at(w2, i2), region = row_at(NW, zero);
  // The address the kernel forms: the row's first slot plus e, in int.
  const z3::expr at = a.value + e, at2 = a2.value + e2;
  const z3::expr fits = at >= k(INT32_MIN) && at <= k(INT32_MAX);
  ProofRecord p;
  p.subject = "attention warp states: slot = " + ir::to_string(f.slot) + ", warp_row = " + ir::to_string(f.warp_row) +
              "; " + std::to_string(nw) + " warps, " + std::to_string(hp) + " heads a pass, D = " + std::to_string(D);
  p.z3_version = Z3_get_full_version();
  p.obligations.push_back(check(ctx, "defined (int: no overflow)", in(w, i, e),
                                a.defined && region.defined && fits, {w, i, e}, timeout_ms));
  const z3::expr ok = in(w, i, e) && a.defined && region.defined;
  p.obligations.push_back(check(ctx, "bounds (inside the region the host reserves)", ok,
                                at >= 0 && at < region.value, {w, i, e}, timeout_ms));
  p.obligations.push_back(check(ctx, "exactly once (no two warps' or heads' elements share a slot)",
                                ok && in(w2, i2, e2) && a2.defined && (w != w2 || i != i2 || e != e2),
                                at != at2, {w, i, e, w2, i2, e2}, timeout_ms));
  // The kernel also reads a state's max by its slot directly: the same address.
  const Term direct = slot_at(w, i, e);
  p.obligations.push_back(check(ctx, "slots of a row consecutive (slot(row, e) = slot(row, 0) + e)", ok,
                                direct.defined && direct.value == at, {w, i, e}, timeout_ms));
  return p;
}

ProofRecord prove_attention_rows(const ir::AttentionRows& f, const ir::EvenSplit& split, int64_t C, int64_t G,
                                 int64_t D, int64_t capacity, int64_t max_heads, unsigned timeout_ms) {
  MPK_CHECK(C >= 1 && G >= 1 && D >= 1 && max_heads >= 1 && capacity >= 1, InvalidArgument)
      << "attention rows of " << C << " chunks, " << G << " heads, dim " << D;
  z3::context ctx;
  Encoder enc(ctx, 64);
  auto k = [&](int64_t x) { return ctx.int_val(x); };
  const z3::expr Cv = k(C), Gv = k(G), Dv = k(D), zero = k(0);
  // The capacity a constant (the plan's): with KV heads symbolic, the cache's addresses stay
  // linear (symbolic heads times a symbolic capacity made Z3 time out).
  const z3::expr hkv = ctx.int_const("Hkv"), cap = k(capacity), pos = ctx.int_const("position");
  const z3::expr h = ctx.int_const("h"), g = ctx.int_const("g"), c = ctx.int_const("c"), e = ctx.int_const("e"),
                 j = ctx.int_const("j"), hd = ctx.int_const("hd");
  const z3::expr h2 = ctx.int_const("h2"), g2 = ctx.int_const("g2"), e2 = ctx.int_const("e2"), j2 = ctx.int_const("j2");
  auto both = [](const Term& a, const Term& b) { return a.defined && b.defined; };
  auto elem = [&](const z3::expr& head, const z3::expr& x) {
    return enc.encode(f.head_elem, {{"hd", head}, {"e", x}, {"D", Dv}});
  };
  auto qh = [&](const z3::expr& kvh, const z3::expr& gg) {
    return enc.encode(f.q_head, {{"h", kvh}, {"g", gg}, {"G", Gv}});
  };
  auto qelem = [&](const z3::expr& kvh, const z3::expr& gg, const z3::expr& x) {  // element x of query head (kvh, gg)
    const Term q = qh(kvh, gg), t = elem(q.value, x);
    return Term{t.value, q.defined && t.defined};
  };
  auto kv = [&](const z3::expr& kvh, const z3::expr& pj, const z3::expr& x) {
    return enc.encode(f.kv_elem, {{"h", kvh}, {"j", pj}, {"e", x}, {"cap", cap}, {"D", Dv}});
  };
  auto part = [&](const z3::expr& cc) {  // chunk cc's range of the live length position + 1
    const std::map<std::string, z3::expr> v = {{"c", cc}, {"len", pos + 1}, {"parts", Cv}};
    return std::pair{enc.encode(split.begin, v), enc.encode(split.end, v)};
  };
  const z3::expr run = hkv >= 1 && hkv <= k(max_heads) && pos >= 0 && pos < cap;
  // With one chunk, c = 0 said outright (implied by 0 <= c < 1): left to Z3, the product
  // c * (position + 1) in the split ran over its work limit.
  const z3::expr in = run && h >= 0 && h < hkv && g >= 0 && g < Gv && e >= 0 && e < Dv && c >= 0 && c < Cv &&
                      (C == 1 ? c == 0 : ctx.bool_val(true));
  ProofRecord p;
  p.subject = "attention rows: head_elem = " + ir::to_string(f.head_elem) + ", q_head = " + ir::to_string(f.q_head) +
              ", kv_elem = " + ir::to_string(f.kv_elem) + ", chunks [" + ir::to_string(split.begin) + ", " +
              ir::to_string(split.end) + "); C = " + std::to_string(C) + ", G = " + std::to_string(G) +
              ", D = " + std::to_string(D) + ", capacity " + std::to_string(capacity) + ", KV heads <= " +
              std::to_string(max_heads);
  p.z3_version = Z3_get_full_version();
  // Query rows: the element, KV head h's declared range, the activation.
  const Term q = qelem(h, g, e), qlo = qelem(h, zero, zero), qhi = qelem(h + 1, zero, zero),
             qall = qelem(hkv, zero, zero);
  // The new rows and the cache: KV head h's row element, its range, the activation and the cache.
  const Term r = elem(h, e), rlo = elem(h, zero), rhi = elem(h + 1, zero), rall = elem(hkv, zero);
  const auto [j0, j1] = part(c);
  const Term read = kv(h, j, e), append = kv(h, pos, e), klo = kv(h, zero, zero), khi = kv(h + 1, zero, zero),
             kall = kv(hkv, zero, zero);
  const z3::expr defined = both(q, qlo) && both(qhi, qall) && both(r, rlo) && both(rhi, rall) && both(j0, j1) &&
                           both(append, klo) && both(khi, kall);
  const std::vector<z3::expr> shown = {hkv, pos, h, g, c, e};
  p.obligations.push_back(check(ctx, "defined (long long: no overflow)", in, defined, shown, timeout_ms));
  const z3::expr ok = in && defined;
  p.obligations.push_back(check(ctx, "query rows (inside KV head h's declared range and the activation)", ok,
                                q.value >= qlo.value && q.value < qhi.value && q.value >= 0 &&
                                    q.value < qall.value,
                                shown, timeout_ms));
  const Term q2 = qelem(h2, g2, e2);
  p.obligations.push_back(check(ctx, "query rows once (distinct query elements, distinct addresses)",
                                run && h >= 0 && h < hkv && g >= 0 && g < Gv && e >= 0 && e < Dv && q.defined &&
                                    h2 >= 0 && h2 < hkv && g2 >= 0 && g2 < Gv && e2 >= 0 && e2 < Dv && q2.defined &&
                                    (h != h2 || g != g2 || e != e2),
                                q.value != q2.value, {hkv, h, g, e, h2, g2, e2}, timeout_ms));
  p.obligations.push_back(check(ctx, "new rows (inside KV head h's declared range and the activation)", ok,
                                r.value >= rlo.value && r.value < rhi.value && r.value >= 0 && r.value < rall.value,
                                shown, timeout_ms));
  // Any head of the activations (hd < Hq or Hkv) and any position of the cache.
  const Term row0 = elem(hd, zero), rowe = elem(hd, e), kv0 = kv(h, j, zero);
  p.obligations.push_back(check(ctx, "consecutive (a row's elements follow its first)",
                                run && hd >= 0 && hd < hkv * Gv && h >= 0 && h < hkv && j >= 0 && j < cap && e >= 0 &&
                                    e < Dv,
                                both(row0, rowe) && both(kv0, read) && rowe.value == row0.value + e &&
                                    read.value == kv0.value + e,
                                {hkv, hd, h, j, e}, timeout_ms));
  auto in_cache = [&](const z3::expr& x) {
    return x >= 0 && x < kall.value && x >= klo.value && x < khi.value;
  };
  // Two queries, each far quicker than their conjunction (which took over 10 s in some shapes):
  // a chunk reads live positions only, and every position below the capacity lies in the cache.
  p.obligations.push_back(check(ctx, "chunk positions (inside the live positions [0, position])", ok,
                                0 <= j0.value && j0.value <= j1.value && j1.value <= pos + 1, {pos, c}, timeout_ms));
  p.obligations.push_back(check(ctx, "cache bounds (every position below the capacity, in head h's rows)",
                                run && h >= 0 && h < hkv && j >= 0 && j < cap && e >= 0 && e < Dv,
                                read.defined && in_cache(read.value), {hkv, h, j, e}, timeout_ms));
  const Term other = kv(h2, j2, e2);
  p.obligations.push_back(check(ctx, "cache once (distinct elements, distinct addresses)",
                                run && h >= 0 && h < hkv && j >= 0 && j < cap && e >= 0 && e < Dv && h2 >= 0 &&
                                    h2 < hkv && j2 >= 0 && j2 < cap && e2 >= 0 && e2 < Dv && read.defined &&
                                    other.defined && (h != h2 || j != j2 || e != e2),
                                read.value != other.value, {hkv, h, j, e, h2, j2, e2}, timeout_ms));
  p.obligations.push_back(check(ctx, "new row (only the last chunk's range holds position, the appended row)", ok,
                                z3::ite(c == Cv - 1, j0.value <= pos && pos < j1.value, j1.value <= pos),
                                {pos, c}, timeout_ms));
  return p;
}

ProofRecord prove_linear_items(const ir::LinearItems& f, int64_t num_parts, int64_t rows,
                               int64_t max_total, int64_t slots, unsigned timeout_ms) {
  MPK_CHECK(num_parts >= 1 && rows >= 1 && max_total >= 1, InvalidArgument) << "empty proof domain";
  z3::context ctx;
  Encoder enc(ctx, 32);
  const z3::expr ks = ctx.int_val(num_parts), R = ctx.int_val(rows);
  const z3::expr total = ctx.int_const("total"), groups = ctx.int_const("groups");
  // A tile of `total` rows in `groups` row groups of R (the last may be shorter).
  const z3::expr tile = total >= 1 && total <= ctx.int_val(max_total) && groups * R >= total &&
                        (groups - 1) * R < total;
  auto item = [&](const z3::expr& it) {
    const std::map<std::string, z3::expr> v = {{"it", it}, {"ks", ks}, {"rows", R}};
    return std::pair{enc.encode(f.row0, v), enc.encode(f.part, v)};
  };
  auto slot = [&](const z3::expr& p, const z3::expr& r) {
    return enc.encode(f.slot, {{"p", p}, {"total", total}, {"r", r}});
  };
  const z3::expr it = ctx.int_const("it"), g = ctx.int_const("g"), p = ctx.int_const("p"),
                 r = ctx.int_const("r"), p2 = ctx.int_const("p2"), r2 = ctx.int_const("r2");
  const z3::expr it_in = it >= 0 && it < groups * ks;
  const auto [row0, part] = item(it);

  ProofRecord rec;
  rec.subject = "linear items: row0 = " + ir::to_string(f.row0) + ", part = " + ir::to_string(f.part) +
                ", slot = " + ir::to_string(f.slot) + "; rows = " + std::to_string(rows) +
                ", ks = " + std::to_string(num_parts) + ", total <= " + std::to_string(max_total);
  rec.z3_version = Z3_get_full_version();
  rec.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow)",
                                  tile && it_in, row0.defined && part.defined, {it, total}, timeout_ms));
  rec.obligations.push_back(check(ctx, "items: a row group's first row and a K part",
                                  tile && it_in && row0.defined && part.defined,
                                  part.value >= 0 && part.value < ks && row0.value >= 0 &&
                                      row0.value < groups * R && row0.value % R == 0,
                                  {it, total}, timeout_ms));
  // With the bounds above, a map from groups * ks items onto groups * ks pairs: exactly once,
  // through the description's inverse (a wrong inverse can only make this fail).
  const Term inv = enc.encode(f.item, {{"g", g}, {"p", p}, {"ks", ks}});
  const auto [grow0, gpart] = item(inv.value);
  rec.obligations.push_back(check(ctx, "items: each (row group, K part) pair from one item",
                                  tile && g >= 0 && g < groups && p >= 0 && p < ks,
                                  inv.defined && inv.value >= 0 && inv.value < groups * ks &&
                                      grow0.defined && gpart.defined && grow0.value == g * R &&
                                      gpart.value == p,
                                  {g, p, total}, timeout_ms));
  const auto [rrow0, rpart] = item((r / R) * ks);
  rec.obligations.push_back(check(ctx, "rows: each tile row in the rows of one group",
                                  tile && r >= 0 && r < total,
                                  rrow0.defined && rrow0.value <= r && r < rrow0.value + R &&
                                      r / R < groups,
                                  {r, total}, timeout_ms));
  if (num_parts > 1) {  // one part writes the output directly: no slots
    const z3::expr guard = tile && ks * total <= ctx.int_val(slots);
    const z3::expr in1 = p >= 0 && p < ks && r >= 0 && r < total;
    const z3::expr in2 = p2 >= 0 && p2 < ks && r2 >= 0 && r2 < total;
    const Term s1 = slot(p, r), s2 = slot(p2, r2);
    // One query per part (a constant p keeps p * total linear: 10x faster than one query).
    Obligation inside{"slots: inside part_sums", "proved", 0, ""};
    for (int64_t pc = 0; pc < num_parts && inside.result == "proved"; ++pc) {
      const Term sc = slot(ctx.int_val(pc), r);
      const Obligation o = check(ctx, inside.name, guard && r >= 0 && r < total,
                                 sc.defined && sc.value >= 0 && sc.value < ctx.int_val(slots),
                                 {r, total}, timeout_ms);
      inside.ms += o.ms;
      if (o.result != "proved") {
        inside.result = o.result;
        inside.counterexample = "p=" + std::to_string(pc) + " " + o.counterexample;
      }
    }
    rec.obligations.push_back(inside);
    rec.obligations.push_back(check(ctx, "slots: one per (K part, row)",
                                    guard && in1 && in2 && (p != p2 || r != r2) && s1.defined && s2.defined,
                                    s1.value != s2.value, {p, r, p2, r2, total}, timeout_ms));
  }
  return rec;
}

ProofRecord prove_mma_tile(const ir::MmaTile& f, int64_t bm, int64_t bn, int64_t warps_m, int64_t warps_n,
                           unsigned timeout_ms, int64_t head) {
  MPK_CHECK(warps_m >= 1 && warps_n >= 1 && bm % (16 * warps_m) == 0 && bn % (8 * warps_n) == 0 && head >= 16 &&
                head % 16 == 0,
            InvalidArgument)
      << "mma tile " << bm << " x " << bn << " over " << warps_m << " x " << warps_n << " warps, heads of " << head;
  const int64_t wtm = bm / warps_m, wtn = bn / warps_n;
  z3::context ctx;
  Encoder enc(ctx, 32);
  const std::map<std::string, z3::expr> consts = {
      {"wn", ctx.int_val(warps_n)}, {"wtm", ctx.int_val(wtm)}, {"wtn", ctx.int_val(wtn)}};
  auto bind = [&](std::map<std::string, z3::expr> v) {
    v.insert(consts.begin(), consts.end());
    return v;
  };
  const z3::expr warp = ctx.int_const("warp"), mi = ctx.int_const("mi"), ni = ctx.int_const("ni"),
                 lane = ctx.int_const("lane"), h = ctx.int_const("h"), e = ctx.int_const("e");
  const z3::expr holder = warp >= 0 && warp < ctx.int_val(warps_m * warps_n) && mi >= 0 &&
                          mi < ctx.int_val(wtm / 16) && ni >= 0 && ni < ctx.int_val(wtn / 8) && lane >= 0 &&
                          lane < 32 && h >= 0 && h < 2 && e >= 0 && e < 2;
  auto element = [&](const z3::expr& w, const z3::expr& m, const z3::expr& n, const z3::expr& l,
                     const z3::expr& hh, const z3::expr& ee) {
    return std::pair{enc.encode(f.row, bind({{"warp", w}, {"mi", m}, {"lane", l}, {"h", hh}})),
                     enc.encode(f.col, bind({{"warp", w}, {"ni", n}, {"lane", l}, {"e", ee}}))};
  };
  const auto [row, col] = element(warp, mi, ni, lane, h, e);
  ProofRecord r;
  r.subject = "mma tile " + std::to_string(bm) + " x " + std::to_string(bn) + " over " + std::to_string(warps_m) +
              " x " + std::to_string(warps_n) + " warps: row = " + ir::to_string(f.row) +
              ", col = " + ir::to_string(f.col);
  r.z3_version = Z3_get_full_version();
  const std::vector<z3::expr> shown = {warp, mi, ni, lane, h, e};
  r.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow)", holder,
                                row.defined && col.defined, shown, timeout_ms));
  r.obligations.push_back(check(ctx, "bounds (inside the tile)", holder && row.defined && col.defined,
                                row.value >= 0 && row.value < ctx.int_val(bm) && col.value >= 0 &&
                                    col.value < ctx.int_val(bn),
                                shown, timeout_ms));
  // The epilogues store a holder's e = 0 and e = 1 as one 8-byte pair (kernels/prefill_gemm.cuh:
  // pf_tile_pairs): e = 0 at an even column, e = 1 at the next, in the same row.
  const auto [row1, col1] = element(warp, mi, ni, lane, h, ctx.int_val(1));
  r.obligations.push_back(check(ctx, "pairs: e = 0 at an even column, e = 1 the next in its row",
                                holder && e == 0 && row.defined && col.defined && row1.defined && col1.defined,
                                z3::mod(col.value, 2) == 0 && col1.value == col.value + 1 && row1.value == row.value,
                                shown, timeout_ms));
  if (warps_n == 1 && bn % head == 0) {  // pf_wg_head_rope_store's premises
    const z3::expr H = ctx.int_val(head), G = ctx.int_val(head / 8);
    r.obligations.push_back(check(ctx, "heads: fragment ni holds columns of head ni / (head / 8)",
                                  holder && row.defined && col.defined, col.value / H == ni / G,
                                  shown, timeout_ms));
    const auto [row2, col2] = element(warp, mi, ni + ctx.int_val(head / 16), lane, h, e);
    r.obligations.push_back(check(ctx, "heads: fragment ni + head / 16 holds column + head / 2 of the row",
                                  holder && z3::mod(ni, G) < ctx.int_val(head / 16) && row.defined && col.defined &&
                                      row2.defined && col2.defined,
                                  row2.value == row.value && col2.value == col.value + ctx.int_val(head / 2), shown, timeout_ms));
    const z3::expr warp2 = ctx.int_const("warp2"), mi2 = ctx.int_const("mi2"), ni2 = ctx.int_const("ni2"),
                   lane2 = ctx.int_const("lane2"), h2 = ctx.int_const("h2"), e2 = ctx.int_const("e2");
    const z3::expr holder2 = warp2 >= 0 && warp2 < ctx.int_val(warps_m) && mi2 >= 0 && mi2 < ctx.int_val(wtm / 16) &&
                             ni2 >= 0 && ni2 < ctx.int_val(wtn / 8) && lane2 >= 0 && lane2 < 32 && h2 >= 0 &&
                             h2 < 2 && e2 >= 0 && e2 < 2;
    const auto [row3, col3] = element(warp2, mi2, ni2, lane2, h2, e2);
    r.obligations.push_back(check(ctx, "heads: a row's holders are one quad of one warp",
                                  holder && holder2 && row.defined && row3.defined && row.value == row3.value,
                                  warp == warp2 && mi == mi2 && h == h2 && lane / 4 == lane2 / 4,
                                  {warp, mi, ni, lane, h, e, warp2, mi2, ni2, lane2, h2, e2}, timeout_ms));
  }
  const bool counts = warps_m * warps_n * (wtm / 16) * (wtn / 8) * 32 * 4 == bm * bn;
  r.obligations.push_back({"exactly once: as many holders as elements", counts ? "proved" : "refuted", 0,
                           counts ? "" : "holders != elements"});
  const z3::expr rr = ctx.int_const("row"), cc = ctx.int_const("col");
  const std::map<std::string, z3::expr> at = bind({{"row", rr}, {"col", cc}});
  const Term iw = enc.encode(f.warp_of, at), im = enc.encode(f.mi_of, at), in = enc.encode(f.ni_of, at),
             il = enc.encode(f.lane_of, at), ih = enc.encode(f.h_of, at), ie = enc.encode(f.e_of, at);
  const auto [back_row, back_col] = element(iw.value, im.value, in.value, il.value, ih.value, ie.value);
  const z3::expr inv_defined = iw.defined && im.defined && in.defined && il.defined && ih.defined && ie.defined;
  const z3::expr in_range = iw.value >= 0 && iw.value < ctx.int_val(warps_m * warps_n) && im.value >= 0 &&
                            im.value < ctx.int_val(wtm / 16) && in.value >= 0 && in.value < ctx.int_val(wtn / 8) &&
                            il.value >= 0 && il.value < 32 && ih.value >= 0 && ih.value < 2 && ie.value >= 0 &&
                            ie.value < 2;
  r.obligations.push_back(check(ctx, "exactly once: each element from the holder the inverse names",
                                rr >= 0 && rr < ctx.int_val(bm) && cc >= 0 && cc < ctx.int_val(bn),
                                inv_defined && in_range && back_row.defined && back_col.defined &&
                                    back_row.value == rr && back_col.value == cc,
                                {rr, cc}, timeout_ms));
  return r;
}

ProofRecord prove_chunk_load(const ir::ChunkLoad& f, int64_t rows, int64_t ch, int64_t threads, int64_t ld,
                             unsigned timeout_ms) {
  const int64_t width = f.width;
  MPK_CHECK(rows >= 1 && ch >= 1 && threads >= 1 && width >= 1 && (rows * ch) % threads == 0 && ld >= ch * width,
            InvalidArgument)
      << "chunk load of " << rows << " x " << ch << " chunks of " << width << " by " << threads << " threads";
  z3::context ctx;
  Encoder enc(ctx, 32);
  const std::map<std::string, z3::expr> consts = {{"threads", ctx.int_val(threads)}, {"ch", ctx.int_val(ch)}};
  auto bind = [&](std::map<std::string, z3::expr> v) {
    v.insert(consts.begin(), consts.end());
    return v;
  };
  const int64_t rounds = rows * ch / threads;
  const z3::expr W = ctx.int_val(width);
  const z3::expr tid = ctx.int_const("tid"), i = ctx.int_const("i");
  const z3::expr holder = tid >= 0 && tid < ctx.int_val(threads) && i >= 0 && i < ctx.int_val(rounds);
  auto chunk = [&](const z3::expr& t, const z3::expr& k) {
    const auto v = bind({{"tid", t}, {"i", k}});
    return std::pair{enc.encode(f.row, v), enc.encode(f.col, v)};
  };
  const auto [row, col] = chunk(tid, i);
  ProofRecord r;
  r.subject = "chunk load of " + std::to_string(rows) + " rows x " + std::to_string(ch) + " chunks of " +
              std::to_string(width) + " by " +
              std::to_string(threads) + " threads into rows of " + std::to_string(ld) +
              " elements: row = " + ir::to_string(f.row) + ", col = " + ir::to_string(f.col);
  r.z3_version = Z3_get_full_version();
  r.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow)", holder,
                                row.defined && col.defined, {tid, i}, timeout_ms));
  r.obligations.push_back(check(ctx, "bounds (whole chunks inside the tile's shared rows)",
                                holder && row.defined && col.defined,
                                row.value >= 0 && row.value < ctx.int_val(rows) && col.value >= 0 &&
                                    col.value % W == 0 && col.value + W <= ctx.int_val(ch * width) &&
                                    row.value * ctx.int_val(ld) + col.value + W <= ctx.int_val(rows * ld),
                                {tid, i}, timeout_ms));
  const z3::expr rr = ctx.int_const("r"), cc = ctx.int_const("c");
  const auto at = bind({{"r", rr}, {"c", cc}});
  const Term it = enc.encode(f.tid_of, at), ii = enc.encode(f.i_of, at);
  const auto [back_row, back_col] = chunk(it.value, ii.value);
  r.obligations.push_back(check(ctx, "exactly once: each chunk from the thread and round the inverse names",
                                rr >= 0 && rr < ctx.int_val(rows) && cc >= 0 && cc < ctx.int_val(ch * width) &&
                                    cc % W == 0,
                                it.defined && ii.defined && it.value >= 0 && it.value < ctx.int_val(threads) &&
                                    ii.value >= 0 && ii.value < ctx.int_val(rounds) && back_row.defined &&
                                    back_col.defined && back_row.value == rr && back_col.value == cc,
                                {rr, cc}, timeout_ms));
  return r;
}

ProofRecord prove_swizzle128(const ir::Swizzle128& f, int64_t rows, unsigned timeout_ms) {
  MPK_CHECK(rows >= 1, InvalidArgument) << "swizzled tile of " << rows << " rows";
  z3::context ctx;
  Encoder enc(ctx, 32);
  const z3::expr r = ctx.int_const("r"), c = ctx.int_const("c"), c2 = ctx.int_const("c2"), st = ctx.int_const("s");
  auto chunk = [&](const z3::expr& cc) { return enc.encode(f.chunk, {{"r", r}, {"c", cc}}); };
  const z3::expr row = r >= 0 && r < ctx.int_val(rows);
  auto in_row = [&](const z3::expr& x) { return x >= 0 && x < ctx.int_val(8); };
  const Term a = chunk(c), b = chunk(c2);
  ProofRecord p;
  p.subject = "128-byte swizzle of " + std::to_string(rows) + " rows: chunk = " + ir::to_string(f.chunk);
  p.z3_version = Z3_get_full_version();
  p.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow, xor of values >= 0)",
                                row && in_row(c), a.defined, {r, c}, timeout_ms));
  p.obligations.push_back(check(ctx, "bounds (the chunk stays in its 128-byte row of the tile)",
                                row && in_row(c) && a.defined,
                                in_row(a.value) && r * 128 + a.value * 16 + 16 <= ctx.int_val(rows * 128), {r, c},
                                timeout_ms));
  // The hardware's 128-byte swizzle (PTX: the shared-memory matrix layouts), written here
  // independently of the formula: bits [4, 7) of the byte address r * 128 + c * 16 are XORed
  // with bits [7, 10). Row and chunk as 32-bit vectors (values below 2^16), the formula over
  // their integer values.
  {
    const z3::expr rb = ctx.bv_const("rb", 32), cb = ctx.bv_const("cb", 32);
    const z3::expr ri = z3::bv2int(rb, false), ci = z3::bv2int(cb, false);
    const Term v = enc.encode(f.chunk, {{"r", ri}, {"c", ci}});
    const z3::expr addr = rb * ctx.bv_val(128, 32) + cb * ctx.bv_val(16, 32);
    const z3::expr seven = ctx.bv_val(7, 32);
    const z3::expr hw = z3::bv2int((z3::lshr(addr, 4) & seven) ^ (z3::lshr(addr, 7) & seven), false);
    p.obligations.push_back(check(ctx, "the hardware's pattern (address bits 4-6 XOR bits 7-9)",
                                  z3::ult(rb, ctx.bv_val(rows, 32)) && z3::ult(cb, ctx.bv_val(8, 32)) && v.defined,
                                  v.value == hw, {rb, cb}, timeout_ms));
  }
  p.obligations.push_back(check(ctx, "at most once (two chunks of a row never share a slot)",
                                row && in_row(c) && in_row(c2) && c != c2 && a.defined && b.defined,
                                a.value != b.value, {r, c, c2}, timeout_ms));
  const Term back = enc.encode(f.c_of, {{"r", r}, {"s", st}});
  const Term there = chunk(back.value);
  p.obligations.push_back(check(ctx, "at least once (the inverse names the chunk stored in each slot)",
                                row && in_row(st),
                                back.defined && in_row(back.value) && there.defined && there.value == st,
                                {r, st}, timeout_ms));
  return p;
}

ProofRecord prove_wgmma_operand(const IndexExpr& start, const std::string& what, int64_t wgs, int64_t wg_rows,
                                int64_t rows, int64_t tile_rows, int64_t sbo, unsigned timeout_ms) {
  MPK_CHECK(wgs >= 1 && wg_rows >= 0 && rows >= 1 && tile_rows >= 1 && tile_rows <= 2048 &&
                (wgs - 1) * wg_rows + rows <= tile_rows,
            InvalidArgument)
      << "wgmma operand of " << wgs << " warpgroups x " << rows << " rows in a tile of " << tile_rows;
  // One box of four slices; warpgroup wg's rows start wg_rows rows (128 bytes each) on.
  return prove_wgmma_operand(start, what, WgmmaBoxedOperand{wgs, rows, 4, 0, wg_rows * 128, tile_rows * 128, sbo},
                             timeout_ms);
}

ProofRecord prove_wgmma_operand(const IndexExpr& start, const std::string& what, const WgmmaBoxedOperand& sh,
                                unsigned timeout_ms) {
  MPK_CHECK(sh.wgs >= 1 && sh.rows >= 1 && sh.slices >= 1 && sh.box_bytes >= 0 && sh.wg_bytes >= 0 &&
                sh.bytes >= 1 && sh.bytes <= 1 << 20 && sh.box_bytes <= sh.bytes && sh.sbo >= 0 && sh.sbo <= 1 << 18,
            InvalidArgument)
      << "wgmma operand of " << sh.wgs << " warpgroups x " << sh.rows << " rows, " << sh.slices << " slices";
  z3::context ctx;
  Encoder enc(ctx, 32);
  auto v = [&](const char* n) { return ctx.int_const(n); };
  auto k = [&](int64_t x) { return ctx.int_val(x); };
  const z3::expr wg = v("wg"), kk = v("kk"), i = v("i"), j = v("j");
  const z3::expr dom =
      wg >= 0 && wg < k(sh.wgs) && kk >= 0 && kk < k(sh.slices) && i >= 0 && i < k(sh.rows) && j >= 0 && j < k(16);
  const Term st = enc.encode(start, {{"wg", wg}, {"kk", kk}, {"box", k(sh.box_bytes)}});
  // Offsets before the swizzle, as in the overload above (kk >= 0, i >= 0: Z3's / and % are C's).
  const z3::expr read = st.value + i / 8 * k(sh.sbo) + i % 8 * 128 + j * 2;
  const z3::expr stored = wg * k(sh.wg_bytes) + kk / 4 * k(sh.box_bytes) + i * 128 + (kk % 4 * 16 + j) * 2;
  ProofRecord p;
  p.subject = "wgmma " + what + ": descriptor start " + ir::to_string(start) + ", " + std::to_string(sh.sbo) +
              "-byte row groups, " + std::to_string(sh.wgs) + " warpgroup(s) x " + std::to_string(sh.rows) +
              " rows, " + std::to_string(sh.slices) + " K slices over boxes " + std::to_string(sh.box_bytes) +
              " bytes apart, regions " + std::to_string(sh.wg_bytes) + " bytes apart";
  p.z3_version = Z3_get_full_version();
  p.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow)", dom, st.defined, {wg, kk},
                                timeout_ms));
  p.obligations.push_back(check(ctx, "bounds (the start and the byte read lie in the operand's region)",
                                dom && st.defined, st.value >= 0 && read >= 0 && read < k(sh.bytes), {wg, kk, i, j},
                                timeout_ms));
  p.obligations.push_back(check(ctx, "element (the descriptor reads where row i, K 16 kk + j was stored)",
                                dom && st.defined, read == stored, {wg, kk, i, j}, timeout_ms));
  return p;
}

ProofRecord prove_swizzled_store(const IndexExpr& store, const ir::Swizzle128& swizzle, const std::string& what,
                                 int64_t rows, int64_t cols, int64_t vec, int64_t box_bytes, unsigned timeout_ms) {
  MPK_CHECK(rows >= 1 && rows * 128 <= box_bytes && cols >= 64 && cols % 64 == 0 && vec >= 1 && 64 % vec == 0 &&
                box_bytes % 1024 == 0 && box_bytes * (cols / 64) <= 1 << 20,
            InvalidArgument)
      << "swizzled store of " << rows << " x " << cols << " by " << vec << ", boxes of " << box_bytes << " bytes";
  z3::context ctx;
  Encoder enc(ctx, 32);
  auto k = [&](int64_t x) { return ctx.int_val(x); };
  const z3::expr r = ctx.int_const("r"), d = ctx.int_const("d"), j = ctx.int_const("k");
  const z3::expr dom = r >= 0 && r < k(rows) && d >= 0 && d < k(cols) && d % k(vec) == 0 && j >= 0 && j < k(vec);
  const Term at = enc.encode(store, {{"r", r}, {"d", d}});
  // The TMA's byte of element e = d + k of row r: chunk (e % 64) / 8 of the row moved by the
  // swizzle (Z3's / and % are C's for e >= 0).
  const z3::expr e = d + j;
  enc.bound("c", 7);
  const Term chunk = enc.encode(swizzle.chunk, {{"r", r}, {"c", e % 64 / 8}});
  const z3::expr tma = e / 64 * k(box_bytes) + r * 128 + chunk.value * 16 + e % 8 * 2;
  ProofRecord p;
  p.subject = what + " stored by threads: byte " + ir::to_string(store) + " of element (r, d), " + std::to_string(rows) +
              " rows x " + std::to_string(cols) + ", " + std::to_string(vec) + " elements a store, boxes " +
              std::to_string(box_bytes) + " bytes apart, chunk " + ir::to_string(swizzle.chunk);
  p.z3_version = Z3_get_full_version();
  p.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow, xor of values >= 0)", dom,
                                at.defined, {r, d}, timeout_ms));
  p.obligations.push_back(check(ctx, "bounds (a store's elements lie in the boxes)", dom && at.defined,
                                at.value >= 0 && at.value + k(2 * vec) <= k(box_bytes * (cols / 64)), {r, d},
                                timeout_ms));
  // The chunk the TMA's layout names is defined and its index in 0..7 (the bound the xor's
  // encoding above was given).
  p.obligations.push_back(check(ctx, "the TMA's chunk (defined, its index in 0..7)", dom,
                                chunk.defined && e % 64 / 8 >= 0 && e % 64 / 8 <= 7, {r, d, j}, timeout_ms));
  p.obligations.push_back(check(ctx, "element (element d + k lands where the TMA puts (r, d + k))",
                                dom && at.defined && chunk.defined, at.value + 2 * j == tma, {r, d, j}, timeout_ms));
  return p;
}

ProofRecord prove_wgmma_operand_mn(const IndexExpr& start, const std::string& what, int64_t slices, int64_t n,
                                   int64_t box_bytes, int64_t lbo, int64_t sbo, unsigned timeout_ms) {
  MPK_CHECK(slices >= 1 && n >= 1 && n % 64 == 0 && box_bytes >= 128 && box_bytes % 128 == 0 &&
                box_bytes * (n / 64) <= 1 << 20 && lbo >= 0 && lbo <= 1 << 18 && sbo >= 0 && sbo <= 1 << 18,
            InvalidArgument)
      << "MN-major wgmma operand of " << slices << " slices x " << n << ", boxes of " << box_bytes << " bytes";
  z3::context ctx;
  Encoder enc(ctx, 32);
  auto v = [&](const char* nm) { return ctx.int_const(nm); };
  auto k = [&](int64_t x) { return ctx.int_val(x); };
  const z3::expr kk = v("kk"), i = v("i"), e = v("n");
  const z3::expr dom = kk >= 0 && kk < k(slices) && i >= 0 && i < k(16) && e >= 0 && e < k(n);
  const Term st = enc.encode(start, {{"kk", kk}, {"box", k(box_bytes)}});
  const z3::expr read = st.value + e / 64 * k(lbo) + e % 64 * 2 + i / 8 * k(sbo) + i % 8 * 128;
  const z3::expr stored = e / 64 * k(box_bytes) + (kk * 16 + i) * 128 + e % 64 * 2;
  ProofRecord p;
  p.subject = "wgmma " + what + " (MN-major): descriptor start " + ir::to_string(start) + ", leading offset " +
              std::to_string(lbo) + ", " + std::to_string(sbo) + "-byte row groups, " + std::to_string(slices) +
              " slices of 16 K rows x " + std::to_string(n) + ", boxes of " + std::to_string(box_bytes) + " bytes";
  p.z3_version = Z3_get_full_version();
  p.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow)", dom, st.defined, {kk},
                                timeout_ms));
  p.obligations.push_back(check(ctx, "bounds (the start and the byte read lie in the boxes)", dom && st.defined,
                                st.value >= 0 && read >= 0 && read < k(box_bytes * (n / 64)), {kk, i, e},
                                timeout_ms));
  p.obligations.push_back(check(ctx, "element (the descriptor reads where K row 16 kk + i, N element n was stored)",
                                dom && st.defined, read == stored, {kk, i, e}, timeout_ms));
  return p;
}

ProofRecord prove_tile_order(const ir::TileOrder& f, int64_t g, int64_t max_m, int64_t max_n, unsigned timeout_ms) {
  MPK_CHECK(g >= 1 && max_m >= 1 && max_n >= 1 && g * max_n <= INT32_MAX && max_m + g <= INT32_MAX, InvalidArgument)
      << "tile order of group " << g << " over up to " << max_m << " x " << max_n << " tiles";
  z3::context ctx;
  Encoder enc(ctx, 32);
  const z3::expr nm = ctx.int_const("nm"), nn = ctx.int_const("nn"), x = ctx.int_const("x"), y = ctx.int_const("y");
  const z3::expr G = ctx.int_val(g);
  const z3::expr groups = (nm + G - 1) / G;  // nm >= 1: Z3's division is C's here
  const z3::expr grid = nm >= 1 && nm <= ctx.int_val(max_m) && nn >= 1 && nn <= ctx.int_val(max_n);
  auto tile = [&](const z3::expr& bx, const z3::expr& by) {
    return std::pair{enc.encode(f.m, {{"x", bx}, {"y", by}, {"g", G}}), enc.encode(f.n, {{"x", bx}, {"g", G}})};
  };
  const auto [m, n] = tile(x, y);
  const z3::expr block = grid && x >= 0 && x < G * nn && y >= 0 && y < groups;
  ProofRecord r;
  r.subject = "tile order in groups of " + std::to_string(g) + " rows over up to " + std::to_string(max_m) + " x " +
              std::to_string(max_n) + " tiles: m = " + ir::to_string(f.m) + ", n = " + ir::to_string(f.n);
  r.z3_version = Z3_get_full_version();
  r.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow)", block,
                                m.defined && n.defined, {nm, nn, x, y}, timeout_ms));
  r.obligations.push_back(check(ctx, "bounds (a tile of the grid, or a row past nm the block skips)",
                                block && m.defined && n.defined,
                                m.value >= 0 && m.value < groups * G && n.value >= 0 && n.value < nn,
                                {nm, nn, x, y}, timeout_ms));
  const z3::expr x2 = ctx.int_const("x2"), y2 = ctx.int_const("y2");
  const auto [m2, n2] = tile(x2, y2);
  r.obligations.push_back(check(ctx, "at most once: two blocks never compute the same tile",
                                block && x2 >= 0 && x2 < G * nn && y2 >= 0 && y2 < groups && (x != x2 || y != y2) &&
                                    m.defined && n.defined && m2.defined && n2.defined && m.value < nm,
                                m.value != m2.value || n.value != n2.value, {nm, nn, x, y, x2, y2}, timeout_ms));
  const z3::expr tm = ctx.int_const("m"), tn = ctx.int_const("n");
  const std::map<std::string, z3::expr> at = {{"m", tm}, {"n", tn}, {"g", G}};
  const Term bx = enc.encode(f.x_of, at), by = enc.encode(f.y_of, at);
  const auto [back_m, back_n] = tile(bx.value, by.value);
  r.obligations.push_back(check(ctx, "at least once: each tile from the block the inverse names",
                                grid && tm >= 0 && tm < nm && tn >= 0 && tn < nn,
                                bx.defined && by.defined && bx.value >= 0 && bx.value < G * nn && by.value >= 0 &&
                                    by.value < groups && back_m.defined && back_n.defined && back_m.value == tm &&
                                    back_n.value == tn,
                                {nm, nn, tm, tn}, timeout_ms));
  return r;
}

// mma.sync m16n8k16's A fragment (PTX ISA, .bf16): thread t's register i, half j holds row
// t / 4 + 8 (i % 2), column 2 (t % 4) + j + 8 (i / 2) of the 16 x 16 block (t >= 0: C's division).
static std::pair<z3::expr, z3::expr> mma_a_element(const z3::expr& t, const z3::expr& i, const z3::expr& j) {
  return {t / 4 + 8 * (i % 2), 2 * (t % 4) + j + 8 * (i / 2)};
}

ProofRecord prove_ldmatrix(const ir::LdmatrixAddr& f, LdmatrixUse use, unsigned timeout_ms) {
  z3::context ctx;
  Encoder enc(ctx, 32);
  const z3::expr lane = ctx.int_const("lane"), t = ctx.int_const("t"), i = ctx.int_const("i"), j = ctx.int_const("j");
  auto addr = [&](const z3::expr& l) {
    return std::pair{enc.encode(f.row, {{"lane", l}}), enc.encode(f.col, {{"lane", l}})};
  };
  const char* what = use == LdmatrixUse::A ? "A from rows m, columns k"
                     : use == LdmatrixUse::B ? "B of two n8 tiles from rows n, columns k"
                                             : "B of two n8 tiles from rows k, columns n (.trans)";
  ProofRecord r;
  r.subject = std::string("ldmatrix.x4 lane addresses, ") + what + ": row = " + ir::to_string(f.row) +
              ", col = " + ir::to_string(f.col);
  r.z3_version = Z3_get_full_version();
  const auto [row, col] = addr(lane);
  const z3::expr lanes = lane >= 0 && lane < 32;
  r.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow)", lanes,
                                row.defined && col.defined, {lane}, timeout_ms));
  r.obligations.push_back(check(ctx, "bounds (a lane's 8 bf16 inside the 16 x 16 block)",
                                lanes && row.defined && col.defined,
                                row.value >= 0 && row.value < 16 && (col.value == 0 || col.value == 8), {lane},
                                timeout_ms));
  // The hardware (PTX ISA, ldmatrix): thread t = 4 g + c gets, in register i, row g elements 2c
  // and 2c + 1 of matrix i, whose row q starts at the address of lane 8 i + q; with .trans, row g
  // of the transposed matrix: element g of rows 2c and 2c + 1.
  const z3::expr g = t / 4, c = t % 4;  // t >= 0: C's division
  const bool trans = use == LdmatrixUse::Bt;
  const z3::expr src = trans ? 8 * i + 2 * c + j : 8 * i + g;
  const auto [srow, scol] = addr(src);
  const z3::expr got_row = srow.value, got_col = scol.value + (trans ? g : 2 * c + j);
  // mma.sync m16n8k16 (PTX ISA, the fragments of .bf16 A and B): A register i, half j holds row
  // g + 8 (i % 2), column 2c + j + 8 (i / 2); B register r (of n8 tile i / 2, r = i % 2), half j
  // holds k = 2c + j + 8 r, n = g (+ 8 for the second tile).
  const z3::expr lo = 2 * c + j + 8 * (i % 2), hi = g + 8 * (i / 2);
  z3::expr want_row = lo, want_col = hi;  // Bt: rows k, columns n
  if (use == LdmatrixUse::A) std::tie(want_row, want_col) = mma_a_element(t, i, j);
  if (use == LdmatrixUse::B) want_row = hi, want_col = lo;
  r.obligations.push_back(check(ctx, "the fragment (what ldmatrix delivers is what mma.sync expects)",
                                t >= 0 && t < 32 && i >= 0 && i < 4 && j >= 0 && j < 2 && srow.defined && scol.defined,
                                got_row == want_row && got_col == want_col, {t, i, j}, timeout_ms));
  return r;
}

ProofRecord prove_acc_as_a(const ir::AccAsA& f, const ir::MmaTile& tile, unsigned timeout_ms) {
  z3::context ctx;
  Encoder enc(ctx, 32);
  const z3::expr t = ctx.int_const("t"), i = ctx.int_const("i"), j = ctx.int_const("j");
  const Term tl = enc.encode(f.tile, {{"i", i}}), el = enc.encode(f.elem, {{"i", i}, {"j", j}});
  ProofRecord r;
  r.subject = "attention's P from its accumulators: tile = " + ir::to_string(f.tile) + ", elem = " +
              ir::to_string(f.elem);
  r.z3_version = Z3_get_full_version();
  const z3::expr holder = t >= 0 && t < 32 && i >= 0 && i < 4 && j >= 0 && j < 2;
  r.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow)", holder,
                                tl.defined && el.defined, {t, i, j}, timeout_ms));
  r.obligations.push_back(check(ctx, "bounds (one of the two key tiles, one of its 4 elements)",
                                holder && tl.defined && el.defined,
                                tl.value >= 0 && tl.value < 2 && el.value >= 0 && el.value < 4, {t, i, j}, timeout_ms));
  // The accumulator element's place in the 16 x 16 block (warp 0 of one across, mi 0).
  const std::map<std::string, z3::expr> at = {{"warp", ctx.int_val(0)}, {"mi", ctx.int_val(0)}, {"ni", tl.value},
                                              {"lane", t}, {"h", el.value / 2}, {"e", el.value % 2},
                                              {"wn", ctx.int_val(1)}, {"wtm", ctx.int_val(16)}, {"wtn", ctx.int_val(16)}};
  const Term row = enc.encode(tile.row, at), col = enc.encode(tile.col, at);
  r.obligations.push_back(check(ctx, "the fragment (the accumulator packed is the A element mma.sync expects)",
                                holder && tl.defined && el.defined && tl.value >= 0 && el.value >= 0 && row.defined &&
                                    col.defined,
                                row.value == mma_a_element(t, i, j).first && col.value == mma_a_element(t, i, j).second,
                                {t, i, j}, timeout_ms));
  return r;
}

ProofRecord prove_bitonic_stage(const ir::BitonicPair& f, int64_t s, int64_t max_m, unsigned timeout_ms) {
  MPK_CHECK(s >= 1 && (s & (s - 1)) == 0 && 2 * s <= max_m, InvalidArgument)
      << "bitonic stage of distance " << s << " over at most " << max_m << " keys";
  z3::context ctx;
  Encoder enc(ctx, 32);
  const z3::expr m = ctx.int_const("m"), j = ctx.int_const("j"), x = ctx.int_const("x");
  const z3::expr sizes = m >= ctx.int_val(2 * s) && m <= ctx.int_val(max_m) && m % ctx.int_val(2 * s) == 0;
  auto pair = [&](const z3::expr& item) {
    const std::map<std::string, z3::expr> v = {{"j", item}, {"s", ctx.int_val(s)}};
    return std::pair{enc.encode(f.lo, v), enc.encode(f.hi, v)};
  };
  const auto [lo, hi] = pair(j);
  const z3::expr item = sizes && j >= 0 && j * 2 < m;
  ProofRecord r;
  r.subject = "bitonic stage of distance " + std::to_string(s) + " over up to " + std::to_string(max_m) +
              " keys: lo = " + ir::to_string(f.lo) + ", hi = " + ir::to_string(f.hi);
  r.z3_version = Z3_get_full_version();
  r.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow)", item,
                                lo.defined && hi.defined, {m, j}, timeout_ms));
  r.obligations.push_back(check(ctx, "bounds (two keys inside the m keys)", item && lo.defined && hi.defined,
                                lo.value >= 0 && lo.value < hi.value && hi.value < m, {m, j}, timeout_ms));
  const std::map<std::string, z3::expr> at = {{"x", x}, {"s", ctx.int_val(s)}};
  const Term ij = enc.encode(f.j_of, at), is = enc.encode(f.side_of, at);
  const auto [back_lo, back_hi] = pair(ij.value);
  r.obligations.push_back(check(ctx, "exactly once: each key compared by the item and side the inverse names",
                                sizes && x >= 0 && x < m,
                                ij.defined && is.defined && ij.value >= 0 && ij.value * 2 < m &&
                                    (is.value == 0 || is.value == 1) && back_lo.defined && back_hi.defined &&
                                    z3::ite(is.value == 0, back_lo.value, back_hi.value) == x,
                                {m, x}, timeout_ms));
  return r;
}

ProofRecord prove_fold_lanes(const ir::FoldLanes& f, int64_t vp2, int64_t nw, int64_t u, int64_t max_rows,
                             unsigned timeout_ms) {
  MPK_CHECK(vp2 >= 1 && vp2 <= 32 && (vp2 & (vp2 - 1)) == 0 && nw >= 1 && u >= 1 && max_rows >= 1,
            InvalidArgument)
      << "fold lanes of groups of " << vp2 << " lanes, " << nw << " warps, " << u << " slots";
  z3::context ctx;
  Encoder enc(ctx, 32);
  const int64_t rpw = 32 / vp2;  // rows per warp and slot
  const z3::expr NW = ctx.int_val(nw), U = ctx.int_val(u), RPW = ctx.int_val(rpw), VP2 = ctx.int_val(vp2);
  const z3::expr rows = ctx.int_const("rows"), vpr = ctx.int_const("vpr"), groups = ctx.int_const("groups");
  // A tile of `rows` rows of vpr vectors (vp2 the least power of two holding them), in `groups`
  // row groups of rpw rows.
  const z3::expr tile = rows >= 1 && rows <= ctx.int_val(max_rows) && vpr >= 1 && vpr <= VP2 &&
                        (vp2 == 1 ? vpr == 1 : vpr * 2 > VP2) && groups * RPW >= rows && (groups - 1) * RPW < rows;
  const std::map<std::string, z3::expr> consts = {{"nw", NW}, {"vp2", VP2}, {"u", U}};
  auto bind = [&](std::map<std::string, z3::expr> v) {
    v.insert(consts.begin(), consts.end());
    return v;
  };
  struct Holder {
    z3::expr warp, round, j, lane, g0, in;
  };
  auto holder = [&](const char* tag) {
    auto var = [&](const char* n) { return ctx.int_const((std::string(n) + tag).c_str()); };
    const z3::expr w = var("warp"), k = var("round"), j = var("j"), lane = var("lane");
    const z3::expr g0 = w + k * NW * U;  // the kernel's loop: g0 = warp, warp + nw u, ...
    return Holder{w, k, j, lane, g0, w >= 0 && w < NW && k >= 0 && j >= 0 && j < U && lane >= 0 && lane < 32};
  };
  auto held = [&](const Holder& h) {
    const auto v = bind({{"g0", h.g0}, {"j", h.j}, {"lane", h.lane}});
    return std::pair{enc.encode(f.row, v), enc.encode(f.vec, v)};
  };
  // The kernel's guard: the slot's group exists, and the row and vector are the tile's.
  auto guard = [&](const Holder& h, const Term& row, const Term& vec) {
    return h.g0 + h.j * NW < groups && row.value < rows && vec.value < vpr;
  };
  const Holder a = holder(""), b = holder("2");
  const auto [row, vec] = held(a);
  const auto [row2, vec2] = held(b);
  ProofRecord r;
  r.subject = "fold lanes, groups of " + std::to_string(vp2) + " lanes, " + std::to_string(nw) + " warps, " +
              std::to_string(u) + " slots, tiles of up to " + std::to_string(max_rows) +
              " rows: row = " + ir::to_string(f.row) + ", vec = " + ir::to_string(f.vec);
  r.z3_version = Z3_get_full_version();
  const std::vector<z3::expr> shown = {rows, vpr, a.warp, a.round, a.j, a.lane};
  r.obligations.push_back(check(ctx, "defined (int: no division by zero or overflow)",
                                tile && a.in && a.g0 + a.j * NW < groups, row.defined && vec.defined, shown,
                                timeout_ms));
  const z3::expr ok = tile && a.in && row.defined && vec.defined && guard(a, row, vec);
  r.obligations.push_back(check(ctx, "bounds (under the guard, a row of the tile and a vector of it)", ok,
                                row.value >= 0 && vec.value >= 0, shown, timeout_ms));
  r.obligations.push_back(check(ctx, "at most once: one holder per (row, vector)",
                                ok && b.in && row2.defined && vec2.defined && guard(b, row2, vec2) &&
                                    row.value == row2.value && vec.value == vec2.value,
                                a.warp == b.warp && a.round == b.round && a.j == b.j && a.lane == b.lane,
                                {rows, vpr, a.warp, a.round, a.j, a.lane, b.warp, b.round, b.j, b.lane},
                                timeout_ms));
  const z3::expr n = ctx.int_const("n"), v = ctx.int_const("v");
  const auto at = bind({{"n", n}, {"v", v}});
  const Term iw = enc.encode(f.warp_of, at), ik = enc.encode(f.round_of, at), ij = enc.encode(f.j_of, at),
             il = enc.encode(f.lane_of, at);
  const Holder back{iw.value, ik.value, ij.value, il.value, iw.value + ik.value * NW * U,
                    iw.value >= 0 && iw.value < NW && ik.value >= 0 && ij.value >= 0 && ij.value < U &&
                        il.value >= 0 && il.value < 32};
  const auto [brow, bvec] = held(back);
  r.obligations.push_back(check(ctx, "at least once: each (row, vector) held by the holder the inverse names",
                                tile && n >= 0 && n < rows && v >= 0 && v < vpr,
                                iw.defined && ik.defined && ij.defined && il.defined && back.in && brow.defined &&
                                    bvec.defined && guard(back, brow, bvec) && brow.value == n && bvec.value == v,
                                {rows, vpr, n, v}, timeout_ms));
  // Each butterfly step's partner, lane ^ o, reads the same row.
  Obligation shuffles{"shuffles: the butterfly's partners hold the same row", "proved", 0, ""};
  for (int64_t o = vp2 / 2; o >= 1 && shuffles.result == "proved"; o /= 2) {
    const Term partner = enc.encode(IndexExpr::var("lane") ^ IndexExpr(o), {{"lane", a.lane}});
    const Term prow = enc.encode(f.row, bind({{"g0", a.g0}, {"j", a.j}, {"lane", partner.value}}));
    const Obligation ob = check(ctx, shuffles.name, tile && a.in && row.defined,
                                partner.defined && prow.defined && prow.value == row.value, shown, timeout_ms);
    shuffles.ms += ob.ms;
    if (ob.result != "proved") {
      shuffles.result = ob.result;
      shuffles.counterexample = "o=" + std::to_string(o) + " " + ob.counterexample;
    }
  }
  r.obligations.push_back(shuffles);
  return r;
}

std::vector<IndexExpr> mutants(const IndexExpr& e) {
  std::set<std::string> names;
  collect(e, [&](const IndexExpr& x) {
    if (x.op() == IndexOp::Var) names.insert(x.node().name);
  });
  // Rebuilds e with the node at pre-order index `target` replaced by each of `repl(node)`.
  std::vector<IndexExpr> out;
  int count = 0;
  collect(e, [&](const IndexExpr&) { ++count; });
  for (int target = 0; target < count; ++target) {
    std::function<std::vector<IndexExpr>(const IndexExpr&, int&)> rebuild =
        [&](const IndexExpr& x, int& index) -> std::vector<IndexExpr> {
      const IndexExpr::Node& n = x.node();
      const int me = index++;
      if (me == target) {
        std::vector<IndexExpr> r;
        if (n.op == IndexOp::Const) {
          r.push_back(IndexExpr(n.value + 1));
          r.push_back(IndexExpr(n.value - 1));
        } else if (n.op == IndexOp::Var) {
          for (const std::string& other : names)
            if (other != n.name) r.push_back(IndexExpr::var(other));
        } else {
          for (IndexOp op : {IndexOp::Add, IndexOp::Sub, IndexOp::Mul, IndexOp::Div})
            if (op != n.op) r.push_back(IndexExpr::binary(op, n.args[0], n.args[1]));
        }
        // The subtree below a replaced node is skipped: count it.
        collect(x, [&](const IndexExpr&) { ++index; });
        --index;
        return r;
      }
      if (n.args.empty()) return {};
      std::vector<IndexExpr> r;
      for (const IndexExpr& a : rebuild(n.args[0], index)) r.push_back(IndexExpr::binary(n.op, a, n.args[1]));
      for (const IndexExpr& b : rebuild(n.args[1], index)) r.push_back(IndexExpr::binary(n.op, n.args[0], b));
      return r;
    };
    int index = 0;
    for (const IndexExpr& m : rebuild(e, index)) out.push_back(m);
  }
  return out;
}

}  // namespace mpk::superopt
