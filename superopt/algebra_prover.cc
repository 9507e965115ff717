#include "superopt/algebra_prover.h"

#include <z3++.h>

#include <functional>
#include <map>
#include <set>

#include "base/error.h"
#include "superopt/z3_check.h"

namespace mpk::superopt {
namespace {

using ir::RealExpr;
using ir::RealOp;

// A real the formulas read: its value; for a state's max also u = e^value (> 0) and whether
// the state is empty (value = -inf).
struct Sym {
  z3::expr value, u, empty;
};

class Encoder {
 public:
  explicit Encoder(z3::context& ctx) : ctx_(ctx) {}

  z3::expr encode(const RealExpr& e, const std::map<std::string, Sym>& env) {
    const RealExpr::Node& n = e.node();
    switch (n.op) {
      case RealOp::Const:
        MPK_CHECK(n.value == double(int64_t(n.value)), InvalidArgument)
            << "real constant " << n.value << " is not an integer";
        return ctx_.real_val(std::to_string(int64_t(n.value)).c_str());
      case RealOp::Var: return lookup(n.name, env).value;
      case RealOp::Add: return encode(n.args[0], env) + encode(n.args[1], env);
      case RealOp::Mul: return encode(n.args[0], env) * encode(n.args[1], env);
      case RealOp::Weight: {
        MPK_CHECK(n.args[0].op() == RealOp::Var && n.args[1].op() == RealOp::Var, InvalidArgument)
            << "weight of something other than two maxima: " << ir::to_string(e);
        const Sym& m = lookup(n.args[0].node().name, env);
        const Sym& M = lookup(n.args[1].node().name, env);
        return z3::ite(m.empty, ctx_.real_val(0), m.u / M.u);
      }
      case RealOp::Exp2:
        // 2^x is not encoded: prove_prefill_softmax proves a weight's exponent is c (x - y)
        // and then reads the weight as weight(x, y).
        MPK_THROW(InvalidArgument) << "2^x outside a prefill softmax weight: " << ir::to_string(e);
    }
    MPK_ICHECK(false) << "unknown real op";
    return ctx_.real_val(0);
  }

 private:
  const Sym& lookup(const std::string& name, const std::map<std::string, Sym>& env) {
    auto it = env.find(name);
    MPK_CHECK(it != env.end(), InvalidArgument) << "real variable '" << name << "' is unbound";
    return it->second;
  }
  z3::context& ctx_;
};

// A state (m, l, o) and the sums it stands for.
struct State {
  Sym max;
  z3::expr l, o, S, SV;
};

State make_state(z3::context& ctx, const std::string& n) {
  return {{ctx.real_const((n + ".m").c_str()), ctx.real_const((n + ".u").c_str()),
           ctx.bool_const((n + ".empty").c_str())},
          ctx.real_const((n + ".l").c_str()), ctx.real_const((n + ".o").c_str()),
          ctx.real_const((n + ".S").c_str()), ctx.real_const((n + ".SV").c_str())};
}

// l * e^m = S, o * e^m = SV, l > 0; empty: l = o = S = SV = 0.
z3::expr invariant(z3::context& ctx, const State& s) {
  const z3::expr zero = ctx.real_val(0);
  return s.max.u > 0 && z3::ite(s.max.empty, s.l == zero && s.o == zero && s.S == zero && s.SV == zero,
                                s.l * s.max.u == s.S && s.o * s.max.u == s.SV && s.l > zero);
}


void collect(const RealExpr& e, const std::function<void(const RealExpr&)>& f) {
  f(e);
  for (const RealExpr& a : e.node().args) collect(a, f);
}

}  // namespace

ProofRecord prove_online_softmax(const ir::OnlineSoftmax& f, unsigned timeout_ms) {
  z3::context ctx;
  Encoder enc(ctx);
  const z3::expr zero = ctx.real_val(0), one = ctx.real_val(1);
  const z3::expr no = ctx.bool_val(false);
  auto weight = [&](const Sym& m, const Sym& M) { return enc.encode(f.weight, {{"m", m}, {"M", M}}); };
  auto update = [&](const z3::expr& a, const z3::expr& w, const z3::expr& p, const z3::expr& v) {
    auto plain = [&](const z3::expr& x) { return Sym{x, one, no}; };
    return enc.encode(f.update, {{"a", plain(a)}, {"w", plain(w)}, {"p", plain(p)}, {"v", plain(v)}});
  };

  ProofRecord r;
  r.subject = "online softmax: weight(m, M) = " + ir::to_string(f.weight) +
              ", update(a, w, p, v) = " + ir::to_string(f.update);
  r.z3_version = Z3_get_full_version();

  {  // update: state A plus a finite score s (value v), at max(m, s).
    const State a = make_state(ctx, "A");
    const Sym s{ctx.real_const("s"), ctx.real_const("s.u"), no};
    const z3::expr v = ctx.real_const("v");
    const z3::expr bigger = !a.max.empty && a.max.value >= s.value;
    const Sym mn{z3::ite(bigger, a.max.value, s.value), z3::ite(bigger, a.max.u, s.u), no};
    const z3::expr corr = weight(a.max, mn), p = weight(s, mn);
    const z3::expr l = update(a.l, corr, p, one), o = update(a.o, corr, p, v);
    r.obligations.push_back(check(ctx, "update: a score joins the state at the new max",
                                  invariant(ctx, a) && s.u > 0,
                                  l * mn.u == a.S + s.u && o * mn.u == a.SV + s.u * v && l > zero,
                                  {}, timeout_ms));
  }
  {  // combine: a running sum (L, O) at M plus state B's share.
    const State b = make_state(ctx, "B");
    const Sym M{ctx.real_const("M"), ctx.real_const("M.u"), no};
    const z3::expr L = ctx.real_const("L"), O = ctx.real_const("O"), T = ctx.real_const("T"),
                   TV = ctx.real_const("TV");
    const z3::expr w = weight(b.max, M);
    const z3::expr L2 = update(L, one, b.l, w), O2 = update(O, one, b.o, w);
    r.obligations.push_back(check(ctx, "combine: a state's share at a common max adds its sums",
                                  invariant(ctx, b) && M.u > 0 && L * M.u == T && O * M.u == TV,
                                  L2 * M.u == T + b.S && O2 * M.u == TV + b.SV, {}, timeout_ms));
  }
  {  // rescale: state A moved to the max Mb (the merge's running state: L * f0).
    const State a = make_state(ctx, "A");
    const Sym Mb{ctx.real_const("Mb"), ctx.real_const("Mb.u"), no};
    const z3::expr w = weight(a.max, Mb);
    const z3::expr L = update(a.l, w, zero, zero), O = update(a.o, w, zero, zero);
    r.obligations.push_back(check(ctx, "rescale: a state moved to another max keeps its sums",
                                  invariant(ctx, a) && Mb.u > 0,
                                  L * Mb.u == a.S && O * Mb.u == a.SV, {}, timeout_ms));
  }
  {  // final: the output of a non-empty state.
    const State a = make_state(ctx, "A");
    r.obligations.push_back(check(ctx, "final: o / l is the softmax average of the values",
                                  invariant(ctx, a) && !a.max.empty, a.o / a.l == a.SV / a.S,
                                  {}, timeout_ms));
  }
  return r;
}

ProofRecord prove_prefill_softmax(const ir::PrefillSoftmax& f, unsigned timeout_ms) {
  z3::context ctx;
  Encoder enc(ctx);
  const z3::expr one = ctx.real_val(1), no = ctx.bool_val(false);
  auto plain = [&](const z3::expr& x) { return Sym{x, one, no}; };
  const z3::expr x = ctx.real_const("x"), y = ctx.real_const("y"), c = ctx.real_const("c");
  ProofRecord r;
  const std::string args = f.scale_in_exponent ? ", c)" : ")";
  r.subject = "prefill softmax: rescale(m, M" + args + " = " + ir::to_string(f.rescale) + ", weight(s, M" + args +
              " = " + ir::to_string(f.weight) + ", update(a, w, p, v) = " + ir::to_string(f.update);
  r.z3_version = Z3_get_full_version();
  // Each weight is 2^E with E = c (x - y) (the scale in the exponent, c > 0), or E = x - y over
  // scaled scores: the online softmax's weight(x, y) for the base 2^c, or 2. c stays bound in
  // the second form so that a weight which uses it is refuted, not an error.
  auto exponent = [&](const std::string& name, const ir::RealExpr& e, const char* var) {
    if (e.op() != RealOp::Exp2) {
      r.obligations.push_back({name, "refuted", 0, "not a power of 2: " + ir::to_string(e)});
      return;
    }
    const z3::expr E = enc.encode(e.node().args[0], {{var, plain(x)}, {"M", plain(y)}, {"c", plain(c)}});
    r.obligations.push_back(f.scale_in_exponent
                                ? check(ctx, name, c > 0, E == c * (x - y), {x, y, c}, timeout_ms)
                                : check(ctx, name, ctx.bool_val(true), E == x - y, {x, y, c}, timeout_ms));
  };
  const std::string factor = f.scale_in_exponent ? "c (" : "(";
  exponent("rescale: the exponent is " + factor + "m - M)", f.rescale, "m");
  exponent("weight: the exponent is " + factor + "s - M)", f.weight, "s");
  // The states' algebra with those weights: the online softmax's (its proof reads weight(x, y)
  // as u_x / u_y with u = b^value > 0, for any base b > 0). Its states' maxima are finite
  // where they are targets; the -inf cases (below) are not modelled.
  const ir::RealExpr m = ir::RealExpr::var("m"), M = ir::RealExpr::var("M");
  for (const Obligation& o : prove_online_softmax({ir::weight(m, M), f.update}, timeout_ms).obligations)
    r.obligations.push_back(o);
  return r;
}

ProofRecord prove_dot_product(const ir::DotProduct& f, unsigned timeout_ms) {
  z3::context ctx;
  Encoder enc(ctx);
  const z3::expr no = ctx.bool_val(false), one = ctx.real_val(1), zero = ctx.real_val(0);
  auto plain = [&](const z3::expr& x) { return Sym{x, one, no}; };
  auto stage = [&](const z3::expr& g, const z3::expr& x) { return enc.encode(f.stage, {{"g", plain(g)}, {"x", plain(x)}}); };
  auto step = [&](const z3::expr& a, const z3::expr& w, const z3::expr& y) {
    return enc.encode(f.step, {{"a", plain(a)}, {"w", plain(w)}, {"y", plain(y)}});
  };
  auto add = [&](const z3::expr& a, const z3::expr& b) { return enc.encode(f.add, {{"a", plain(a)}, {"b", plain(b)}}); };
  auto scale = [&](const z3::expr& v, const z3::expr& s) { return enc.encode(f.scale, {{"v", plain(v)}, {"s", plain(s)}}); };
  auto real = [&](const char* n) { return ctx.real_const(n); };
  const z3::expr a = real("a"), b = real("b"), w = real("w"), y = real("y"), g = real("g"), x = real("x"),
                 r = real("r"), s = real("s"), A = real("A"), T = real("T"), F = real("F"), res = real("res");
  ProofRecord p;
  p.subject = "a linear's sums: stage(g, x) = " + ir::to_string(f.stage) + ", step(a, w, y) = " +
              ir::to_string(f.step) + ", add(a, b) = " + ir::to_string(f.add) + ", scale(v, s) = " +
              ir::to_string(f.scale);
  p.z3_version = Z3_get_full_version();
  const z3::expr always = ctx.bool_val(true);
  p.obligations.push_back(check(ctx, "step: each step adds its term to the running sum", always,
                                step(a, w, y) == a + w * y, {a, w, y}, timeout_ms));
  p.obligations.push_back(check(ctx, "add: partial sums (lanes, K parts) combine into their total", always,
                                add(a, b) == a + b, {a, b}, timeout_ms));
  p.obligations.push_back(check(ctx, "RMSNorm: the factor after the dot product of staged inputs",
                                A == scale(T, r),
                                A + w * (g * (x * r)) == scale(step(T, w, stage(g, x)), r) &&
                                    scale(zero, r) == zero,
                                {A, T, r, w, g, x}, timeout_ms));
  p.obligations.push_back(check(ctx, "fold: the factor after the fold is the factor on every part", always,
                                scale(add(a, b), s) == scale(a, s) + scale(b, s) && scale(a, one) == a, {a, b, s},
                                timeout_ms));
  p.obligations.push_back(check(ctx, "epilogue: bias and residual added once, to the folded sum", always,
                                add(add(scale(F, s), b), res) == (s * F + b) + res, {F, s, b, res},
                                timeout_ms));
  return p;
}

std::vector<RealExpr> real_mutants(const RealExpr& e) {
  std::set<std::string> names;
  collect(e, [&](const RealExpr& x) {
    if (x.op() == RealOp::Var) names.insert(x.node().name);
  });
  int count = 0;
  collect(e, [&](const RealExpr&) { ++count; });
  std::vector<RealExpr> out;
  for (int target = 0; target < count; ++target) {
    // Rebuilds e with the node at pre-order index `target` replaced by each of its mutants.
    std::function<std::vector<RealExpr>(const RealExpr&, int&)> rebuild =
        [&](const RealExpr& x, int& index) -> std::vector<RealExpr> {
      const RealExpr::Node& n = x.node();
      const int me = index++;
      if (me == target) {
        std::vector<RealExpr> r;
        if (n.op == RealOp::Const) {
          r.push_back(RealExpr(n.value + 1));
          r.push_back(RealExpr(n.value - 1));
        } else if (n.op == RealOp::Var) {
          for (const std::string& other : names)
            if (other != n.name) r.push_back(RealExpr::var(other));
        } else if (n.op == RealOp::Weight) {
          r.push_back(RealExpr::binary(RealOp::Weight, n.args[1], n.args[0]));
        } else if (n.op == RealOp::Exp2) {
          r.push_back(n.args[0]);  // the power dropped
        } else {
          r.push_back(RealExpr::binary(n.op == RealOp::Add ? RealOp::Mul : RealOp::Add, n.args[0], n.args[1]));
        }
        collect(x, [&](const RealExpr&) { ++index; });
        --index;
        return r;
      }
      if (n.args.empty()) return {};
      std::vector<RealExpr> r;
      if (n.op == RealOp::Exp2) {
        for (const RealExpr& a : rebuild(n.args[0], index)) r.push_back(RealExpr::exp2(a, n.fn));
        return r;
      }
      for (const RealExpr& a : rebuild(n.args[0], index)) r.push_back(RealExpr::binary(n.op, a, n.args[1]));
      for (const RealExpr& b : rebuild(n.args[1], index)) r.push_back(RealExpr::binary(n.op, n.args[0], b));
      return r;
    };
    int index = 0;
    for (const RealExpr& m : rebuild(e, index)) out.push_back(m);
  }
  return out;
}

}  // namespace mpk::superopt
