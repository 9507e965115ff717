#include "tests/superopt/loop_nest_util.h"

#include "base/error.h"
#include "superopt/index_prover.h"
#include "superopt/loop_prover.h"

namespace mpk::superopt {
namespace {

using ir::IndexExpr;

// Every use of an access when the nest runs under `env`: the element and the iteration.
struct Hit {
  size_t access;
  std::pair<int64_t, int64_t> element;  // array, index
  std::vector<int64_t> iteration;
};

void run(const ir::LoopNest& n, const ir::Block& b, ir::IndexEnv env, const std::vector<int64_t>& it,
         std::vector<Hit>& hits) {
  for (const ir::Stmt& s : b) {
    switch (s.kind) {
      case ir::Stmt::Loop: {
        const int64_t end = ir::eval(s.expr, env), step = s.loop == ir::LoopKind::Threads ? 1 : ir::eval(s.step, env);
        const int64_t start = s.loop == ir::LoopKind::Threads ? 0 : ir::eval(s.start, env);
        MPK_CHECK(step >= 1, InvalidArgument) << "a loop that never ends";
        int64_t v = start;
        for (; v < end; v += step) {
          ir::IndexEnv inner = env;
          inner[s.var] = v;
          std::vector<int64_t> it2 = it;
          it2.push_back(v);
          run(n, s.body, inner, it2, hits);
        }
        if (s.kept) env[s.var] = v;  // the value that ended it, as the printed loop leaves it
        break;
      }
      case ir::Stmt::Let: env[s.var] = ir::eval(s.expr, env); break;
      case ir::Stmt::If:
        if (ir::eval(s.expr, env) < ir::eval(s.step, env)) run(n, s.body, env, it, hits);
        break;
      case ir::Stmt::Bind: break;
      case ir::Stmt::Thread: {  // the rest of the block in every thread
        const ir::Block rest(b.begin() + (&s - b.data()) + 1, b.end());
        for (int64_t tid = 0; tid < env.at(n.threads); ++tid) {
          ir::IndexEnv inner = env;
          inner[s.var] = tid;
          std::vector<int64_t> it2 = it;
          it2.push_back(tid);
          run(n, rest, inner, it2, hits);
        }
        return;
      }
      case ir::Stmt::Code:
        for (size_t a = 0; a < n.accesses.size(); ++a)
          if (s.code.find("{" + n.accesses[a].name + "}") != std::string::npos)
            hits.push_back({a, {ir::eval(n.accesses[a].array, env), ir::eval(n.accesses[a].index, env)}, it});
        break;
    }
  }
}

// Every index expression of a nest (loop ends and steps, lets, guards, accesses), as a way to
// reach it in a copy.
using Slot = std::function<IndexExpr&(ir::LoopNest&)>;
void slots(const ir::Block& b, std::function<ir::Block&(ir::LoopNest&)> at, std::vector<Slot>& out) {
  for (size_t i = 0; i < b.size(); ++i) {
    auto stmt = [at, i](ir::LoopNest& n) -> ir::Stmt& { return at(n)[i]; };
    switch (b[i].kind) {
      case ir::Stmt::Code:
      case ir::Stmt::Bind:
      case ir::Stmt::Thread: break;
      case ir::Stmt::Let: out.push_back([stmt](ir::LoopNest& n) -> IndexExpr& { return stmt(n).expr; }); break;
      case ir::Stmt::Loop:
      case ir::Stmt::If:
        out.push_back([stmt](ir::LoopNest& n) -> IndexExpr& { return stmt(n).expr; });
        if (b[i].kind == ir::Stmt::If || b[i].loop != ir::LoopKind::Threads)
          out.push_back([stmt](ir::LoopNest& n) -> IndexExpr& { return stmt(n).step; });
        if (b[i].kind == ir::Stmt::Loop && b[i].loop != ir::LoopKind::Threads && ir::to_string(b[i].start) != "0")
          out.push_back([stmt](ir::LoopNest& n) -> IndexExpr& { return stmt(n).start; });
        slots(b[i].body, [stmt](ir::LoopNest& n) -> ir::Block& { return stmt(n).body; }, out);
        break;
    }
  }
}

}  // namespace

bool brute_force(const ir::LoopNest& n, const ir::IndexEnv& fixed, const std::string& var, int64_t count) {
  try {
    for (int64_t x = 0; x < count; ++x) {
      ir::IndexEnv env = fixed;
      env[var] = x;
      std::vector<Hit> hits;
      run(n, n.body, env, {}, hits);
      for (size_t a = 0; a < n.accesses.size(); ++a) {
        const ir::Access& acc = n.accesses[a];
        int64_t lo = 0, hi = 0;
        for (const ir::Range& r : n.ranges)
          if (r.name == acc.range) lo = ir::eval(r.begin, env), hi = ir::eval(r.end, env);
        const int64_t arrays = ir::eval(acc.arrays, env);
        std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> seen;
        for (const Hit& h : hits) {
          if (h.access != a) continue;
          const auto [array, index] = h.element;
          if (index < lo || index >= hi || array < 0 || array >= arrays) return false;
          if (acc.once) {
            auto [it, fresh] = seen.emplace(h.element, h.iteration);
            if (!fresh && it->second != h.iteration) return false;
          } else {
            seen.emplace(h.element, h.iteration);
          }
        }
        for (const ir::Cover& c : acc.covers) {  // every point of the domain reached
          bool holds = true;
          for (const auto& [lhs, rhs] : c.when) holds = holds && ir::eval(lhs, env) < ir::eval(rhs, env);
          if (!holds) continue;
          std::function<bool(size_t, ir::IndexEnv)> all = [&](size_t k, ir::IndexEnv p) {
            if (k == c.vars.size()) return seen.count({ir::eval(c.expect_array, p), ir::eval(c.expect, p)}) > 0;
            for (int64_t v = 0; v < ir::eval(c.vars[k].second, p); ++v) {
              p[c.vars[k].first] = v;
              if (!all(k + 1, p)) return false;
            }
            return true;
          };
          if (!all(0, env)) return false;
        }
      }
    }
  } catch (const Error&) {
    return false;
  }
  return true;
}

std::string element(const ir::Access& a) {
  std::string base = a.base;
  const size_t at = base.find('@');
  if (at != std::string::npos) base.replace(at, 1, ir::to_c(a.array, ir::CType::Int));
  const bool placed = !(a.place.op() == ir::IndexOp::Const && a.place.node().value == 0);
  const IndexExpr where = placed ? ir::substitute(a.place, {{"array", a.array}, {"index", a.index}}) : a.index;
  return base + "[" + ir::to_c(where, a.type) + "]";
}

void judge_mutants(const ir::LoopNest& f, const std::map<std::string, int64_t>& fixed, size_t stride,
                   const std::function<bool(const ir::LoopNest&)>& runs_right, Tally& tally) {
  std::vector<Slot> where;
  slots(f.body, [](ir::LoopNest& n) -> ir::Block& { return n.body; }, where);
  for (size_t a = 0; a < f.accesses.size(); ++a) {
    where.push_back([a](ir::LoopNest& n) -> IndexExpr& { return n.accesses[a].index; });
    if (f.accesses[a].array.op() != ir::IndexOp::Const)
      where.push_back([a](ir::LoopNest& n) -> IndexExpr& { return n.accesses[a].array; });
  }
  for (const Slot& s : where) {
    ir::LoopNest copy = f;
    const IndexExpr original = s(copy);
    const std::vector<IndexExpr> all = mutants(original);
    for (size_t i = 0; i < all.size(); i += stride) {
      const IndexExpr& m = all[i];
      ir::LoopNest mut = f;
      s(mut) = m;
      bool proved = false;
      try {
        proved = prove_loop_nest(mut, "mutant", fixed, 300).proved();  // unknown is not proved
      } catch (const Error&) {  // a mutant naming a variable out of scope
      }
      tally.judge(proved, runs_right(mut), false, ir::to_string(original) + " -> " + ir::to_string(m));
    }
  }
}

void judge_mutants(const ir::LoopNest& f, const std::map<std::string, int64_t>& fixed, const std::string& var,
                   int64_t count, size_t stride, Tally& tally) {
  ir::IndexEnv env(fixed.begin(), fixed.end());
  env.emplace("threads", 32);
  judge_mutants(f, fixed, stride, [&](const ir::LoopNest& m) { return brute_force(m, env, var, count); }, tally);
}

}  // namespace mpk::superopt
