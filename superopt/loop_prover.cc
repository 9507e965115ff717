#include "superopt/loop_prover.h"

#include <z3++.h>

#include <vector>

#include "base/error.h"
#include "superopt/encoder.h"
#include "superopt/z3_check.h"

namespace mpk::superopt {
namespace {

using Env = std::map<std::string, z3::expr>;

// One place an access is used: the variables in scope, the loops' and guards' condition, what
// must be defined to get there, and the iteration (the loop variables on the way; outside every
// Threads loop also the thread, as every thread runs it).
struct Use {
  size_t access;
  Env env;
  z3::expr cond, defined;
  std::vector<z3::expr> iteration;
};

// Whether C code holds a barrier of the whole block: __syncthreads, or the kernels' helpers
// around one (mk_sync, mk_sync_wait, mk_block_argmax, pf_block_sum).
bool block_barrier(const std::string& code) {
  for (const char* b : {"mk_sync", "mk_sync_wait", "__syncthreads", "mk_block_argmax", "pf_block_sum"})
    if (ir::names(code, b)) return true;
  return false;
}

class Walker {
 public:
  // closed_exits: a kept loop's exit value as a term (a cover's inverse must name every value);
  // else a constant the path condition pins (see Stmt::Loop below).
  Walker(z3::context& ctx, const ir::LoopNest& n, std::string suffix, const Env& forced, bool closed_exits = false)
      : ctx_(ctx), n_(n), suffix_(std::move(suffix)), forced_(forced), closed_exits_(closed_exits), e32_(ctx, 32),
        e64_(ctx, 64) {}

  std::vector<Use> walk(const Env& params) {
    params_ = &params;
    auto t = params.find(n_.threads);
    MPK_CHECK(t != params.end(), InvalidArgument) << "loop nest: no parameter '" << n_.threads << "' (the threads)";
    threads_ = t->second;
    std::vector<Use> out;
    std::vector<z3::expr> it;
    Env env = params;  // a parameter the body binds is in scope from its bind on, as in the C
    for (const ir::Param& p : n_.params)
      if (ir::binds(n_.body, p.name)) env.erase(p.name);
    block(n_.body, env, ctx_.bool_val(true), ctx_.bool_val(true), it, out);
    return out;
  }

  // Every loop, let and guard, used or not: where it runs (cond) and what it needs (defined, a
  // loop's step >= 1).
  const std::vector<std::pair<z3::expr, z3::expr>>& structure() const { return structure_; }

 private:
  void block(const ir::Block& b, Env env, z3::expr cond, z3::expr defined, std::vector<z3::expr> it,
             std::vector<Use>& out, bool threaded = false) {
    for (const ir::Stmt& s : b) {
      if (s.kind == ir::Stmt::Loop || s.kind == ir::Stmt::Let || s.kind == ir::Stmt::Thread) {
        MPK_CHECK(!params_->count(s.var), InvalidArgument) << "loop nest: '" << s.var << "' hides a parameter";
      }
      switch (s.kind) {
        case ir::Stmt::Loop: {
          // A block-strided loop's value is modelled without its thread (v = tid mod threads):
          // sound only where no thread is named and no other such loop encloses it.
          MPK_CHECK(s.loop != ir::LoopKind::Threads || (!threaded && !thread_bound_), InvalidArgument)
              << "loop nest: block-strided loop '" << s.var << "' inside another or after the thread binding";
          const Term end = e32_.encode(s.expr, env);
          z3::expr in = ctx_.bool_val(true), def = defined && end.defined;
          auto f = forced_.find(s.var);
          // A Z3 constant of its own per loop: a loop inside another of the same name hides it.
          const std::string name = s.var + "#" + std::to_string(loops_++) + suffix_;
          z3::expr v = f != forced_.end() ? f->second : ctx_.int_const(name.c_str());
          // The increment stays inside int (the last value plus the step).
          const z3::expr imax = ctx_.int_val(INT32_MAX);
          // A serial loop's first value and step (a block-strided loop's are the thread and the
          // block, below).
          const Term step = e32_.encode(s.step, env), start = e32_.encode(s.start, env);
          if (s.loop == ir::LoopKind::Threads) {
            in = v >= 0 && v < end.value;
            def = def && end.value - 1 + threads_ <= imax;
          } else {
            def = def && step.defined && start.defined && step.value >= 1 && end.value - 1 + step.value <= imax;
            if (s.kept && f == forced_.end()) {  // v = start + k step: no modulo (Z3 timed out on it)
              const z3::expr k = ctx_.int_const((name + "k").c_str());
              v = start.value + k * step.value;
              in = k >= 0 && v < end.value;
            } else {
              in = v >= start.value && v < end.value && z3::mod(v - start.value, step.value) == 0;
            }
          }
          structure_.push_back({cond, def});
          Env inner = env;
          inner.insert_or_assign(s.var, v);
          std::vector<z3::expr> it2 = it;
          it2.push_back(v);
          block(s.body, inner, cond && in, def, it2, out, threaded || s.loop == ir::LoopKind::Threads);
          if (s.kept) {
            // From here on the variable holds the value that ended the loop: start when the loop
            // never ran, else the first start + k step at or past the end. As a constant pinned
            // by the path condition where every value is quantified alike (the closed form's
            // division made Z3 time out on a nest's `once`); as the closed form where a cover
            // must reach a point.
            if (closed_exits_) {
              const Term t = e32_.encode(s.start + (ir::max(s.expr - s.start, 0) + s.step - 1) / s.step * s.step, env);
              structure_.push_back({cond, def && t.defined});
              defined = def && t.defined;
              env.insert_or_assign(s.var, t.value);
            } else {
              const std::string xname = s.var + "#exit" + std::to_string(loops_++) + suffix_;
              const z3::expr k = ctx_.int_const(xname.c_str()), x = start.value + k * step.value;
              cond = cond && k >= 0 &&
                     ((end.value <= start.value && k == 0) ||
                      (end.value > start.value && x >= end.value && x - step.value < end.value));
              defined = def;
              env.insert_or_assign(s.var, x);
            }
          }
          break;
        }
        case ir::Stmt::Let: {
          const Term t = e32_.encode(s.expr, env);
          structure_.push_back({cond, defined && t.defined});
          defined = defined && t.defined;
          env.insert_or_assign(s.var, t.value);
          break;
        }
        case ir::Stmt::If: {
          const Term a = e32_.encode(s.expr, env), b2 = e32_.encode(s.step, env);
          structure_.push_back({cond, defined && a.defined && b2.defined});
          block(s.body, env, cond && a.value < b2.value, defined && a.defined && b2.defined, it, out, threaded);
          break;
        }
        case ir::Stmt::Thread: {  // the thread every use outside a Threads loop is part of
          MPK_CHECK(!thread_bound_, InvalidArgument) << "loop nest: two thread bindings";
          MPK_CHECK(!threaded, InvalidArgument) << "loop nest: a thread binding inside a block-strided loop";
          thread_bound_ = true;
          auto f = forced_.find(s.var);
          if (f != forced_.end()) thread_ = f->second;
          cond = cond && thread_ >= 0 && thread_ < threads_;  // for the rest of the block
          structure_.push_back({cond, defined});
          env.insert_or_assign(s.var, thread_);
          break;
        }
        case ir::Stmt::Bind:  // the parameter's one value, read here
          MPK_CHECK(params_->count(s.var), InvalidArgument) << "loop nest: bind of '" << s.var << "', not a parameter";
          env.insert_or_assign(s.var, params_->at(s.var));
          break;
        case ir::Stmt::Code:
          // Every thread must reach a barrier: none where threads take different paths.
          MPK_CHECK(!block_barrier(s.code) || (!threaded && !thread_bound_), InvalidArgument)
              << "loop nest: a barrier inside a block-strided loop or after the thread binding";
          for (size_t i = 0; i < n_.accesses.size(); ++i)
            if (s.code.find("{" + n_.accesses[i].name + "}") != std::string::npos) {
              if (threaded) {
                out.push_back({i, env, cond, defined, it});
              } else {  // every thread runs it: the thread is part of the iteration
                std::vector<z3::expr> it2 = it;
                it2.push_back(thread_);
                out.push_back({i, env, cond && thread_ >= 0 && thread_ < threads_, defined, it2});
              }
            }
          break;
      }
    }
  }

 public:
  Term index(const Use& u) {
    const ir::Access& a = n_.accesses[u.access];
    return (a.type == ir::CType::Int ? e32_ : e64_).encode(a.index, u.env);
  }
  Term array(const Use& u) { return e32_.encode(n_.accesses[u.access].array, u.env); }
  Term wide(const ir::IndexExpr& e, const Env& env) { return e64_.encode(e, env); }

 private:
  z3::context& ctx_;
  const ir::LoopNest& n_;
  std::string suffix_;
  const Env& forced_;
  const bool closed_exits_;
  Encoder e32_, e64_;
  std::vector<std::pair<z3::expr, z3::expr>> structure_;
  const Env* params_ = nullptr;
  z3::expr threads_{ctx_};
  z3::expr thread_ = ctx_.int_const(("thread#" + suffix_).c_str());  // no IndexExpr name has '#'
  bool thread_bound_ = false;
  int loops_ = 0;
};

// The worst of several queries' results as one obligation (their times summed).
void fold(Obligation& into, const Obligation& o) {
  into.ms += o.ms;
  if (into.result == "proved" && o.result != "proved") {
    into.result = o.result;
    into.counterexample = o.counterexample;
  }
}

}  // namespace

ProofRecord prove_loop_nest(const ir::LoopNest& nest, const std::string& what,
                            const std::map<std::string, int64_t>& fixed, unsigned timeout_ms) {
  z3::context ctx;
  Env params;
  z3::expr domain = ctx.bool_val(true);
  std::vector<z3::expr> shown;
  std::string bound;
  for (const ir::Param& p : nest.params) {
    auto f = fixed.find(p.name);
    if (f != fixed.end()) {
      params.insert_or_assign(p.name, ctx.int_val(f->second));
      bound += (bound.empty() ? "" : ", ") + p.name + " = " + std::to_string(f->second);
    } else {
      const z3::expr v = ctx.int_const(p.name.c_str());
      params.insert_or_assign(p.name, v);
      domain = domain && v >= ctx.int_val(p.lo) && v <= ctx.int_val(p.hi);
      shown.push_back(v);
    }
  }
  for (const auto& [name, value] : fixed)
    MPK_CHECK(params.count(name), InvalidArgument) << what << ": no parameter '" << name << "'";
  for (size_t i = 0; i < nest.accesses.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      MPK_CHECK(nest.accesses[i].name != nest.accesses[j].name, InvalidArgument)
          << what << ": two accesses named " << nest.accesses[i].name;
  ProofRecord r;
  r.subject = "loop nest " + what + " (" + bound + ")";
  r.z3_version = Z3_get_full_version();
  const Env none;
  Walker one(ctx, nest, "", none), two(ctx, nest, "'", none);
  const std::vector<Use> uses = one.walk(params), uses2 = two.walk(params);
  Obligation loops{"loops, lets and guards defined (int), every step >= 1", "proved", 0, ""};
  for (const auto& [cond, defined] : one.structure())
    fold(loops, check(ctx, loops.name, domain && cond, defined, shown, timeout_ms));
  r.obligations.push_back(loops);
  for (size_t a = 0; a < nest.accesses.size(); ++a) {
    const ir::Access& acc = nest.accesses[a];
    const ir::Range* range = nullptr;
    for (const ir::Range& x : nest.ranges)
      if (x.name == acc.range) range = &x;
    MPK_CHECK(range, InvalidArgument) << what << ": access " << acc.name << " names no range '" << acc.range << "'";
    const Term lo = one.wide(range->begin, params), hi = one.wide(range->end, params);
    Obligation inside{acc.name + " inside " + acc.range, "proved", 0, ""};
    Obligation once{acc.name + " once (distinct iterations, distinct elements)", "proved", 0, ""};
    bool used = false;
    for (size_t i = 0; i < uses.size(); ++i) {
      const Use& u = uses[i];
      if (u.access != a) continue;
      used = true;
      const Term x = one.index(u), ax = one.array(u), na = one.wide(acc.arrays, u.env);
      fold(inside, check(ctx, inside.name, domain && u.cond,
                         u.defined && x.defined && lo.defined && hi.defined && x.value >= lo.value &&
                             x.value < hi.value && ax.defined && na.defined && ax.value >= 0 &&
                             ax.value < na.value,
                         shown, timeout_ms));
      if (!acc.once) continue;
      for (size_t j = 0; j < uses2.size(); ++j) {
        const Use& w = uses2[j];
        if (w.access != a) continue;
        const Term y = two.index(w), ay = two.array(w);
        z3::expr distinct = ctx.bool_val(i != j);
        for (size_t k = 0; i == j && k < u.iteration.size(); ++k) distinct = distinct || u.iteration[k] != w.iteration[k];
        fold(once, check(ctx, once.name,
                         domain && u.cond && w.cond && u.defined && w.defined && x.defined && y.defined &&
                             ax.defined && ay.defined && distinct,
                         x.value != y.value || ax.value != ay.value, {}, timeout_ms));
      }
    }
    MPK_CHECK(used, InvalidArgument) << what << ": access " << acc.name << " is not used by the body";
    r.obligations.push_back(inside);
    if (acc.once) r.obligations.push_back(once);
    for (size_t k = 0; k < acc.covers.size(); ++k) {
      const ir::Cover& c = acc.covers[k];
      Env point = params;
      z3::expr in = domain, ends = ctx.bool_val(true), holds = ctx.bool_val(true);
      std::vector<z3::expr> cshown = shown;
      for (const auto& [lhs, rhs] : c.when) {
        const Term l = one.wide(lhs, params), h = one.wide(rhs, params);
        ends = ends && l.defined && h.defined;
        holds = holds && l.value < h.value;
      }
      in = in && holds;
      for (const auto& [name, end] : c.vars) {
        const z3::expr v = ctx.int_const(name.c_str());
        const Term e = one.wide(end, point);
        MPK_CHECK(!params.count(name), InvalidArgument) << what << ": cover variable '" << name << "' hides a parameter";
        ends = ends && e.defined;
        in = in && v >= 0 && v < e.value;
        point.insert_or_assign(name, v);
        cshown.push_back(v);
      }
      Env forced;
      z3::expr def = ctx.bool_val(true);
      for (const auto& [var, value] : c.inverse) {
        const Term t = one.wide(value, point);
        forced.insert_or_assign(var, t.value);
        def = def && t.defined;
      }
      Walker inv(ctx, nest, "", forced, true);
      const Term expect = inv.wide(c.expect, point), expect_array = inv.wide(c.expect_array, point);
      Obligation cover{acc.name + " cover " + std::to_string(k) + " (every point reached through the inverse)",
                       "proved", 0, ""};
      // At one of the access's places (a loop's whole rounds or its last, partial one): the
      // inverse names the loop values on every path, a place off the point's path fails its
      // loops or guards.
      z3::expr reached = ctx.bool_val(false);
      for (const Use& u : inv.walk(params)) {
        if (u.access != a) continue;
        const Term x = inv.index(u), ax = inv.array(u);
        reached = reached || (u.cond && u.defined && x.defined && ax.defined && x.value == expect.value &&
                              ax.value == expect_array.value);
      }
      fold(cover, check(ctx, cover.name, in, ends && expect.defined && expect_array.defined && def && reached, cshown,
                        timeout_ms));
      // Never vacuous where the access runs: wherever a use is reached, the `when` holds.
      if (!c.when.empty())
        for (const Use& u : uses)
          if (u.access == a)
            fold(cover, check(ctx, cover.name, domain && u.cond && u.defined, ends && holds, shown, timeout_ms));
      r.obligations.push_back(cover);
    }
  }
  return r;
}

}  // namespace mpk::superopt
