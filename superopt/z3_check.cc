#include "superopt/z3_check.h"

#include <chrono>

namespace mpk::superopt {

Obligation check(z3::context& ctx, const std::string& name, const z3::expr& assumptions,
                 const z3::expr& goal, const std::vector<z3::expr>& shown, unsigned timeout_ms) {
  const auto t0 = std::chrono::steady_clock::now();
  z3::solver s(ctx);
  z3::params p(ctx);
  p.set("timeout", timeout_ms);
  s.set(p);
  s.add(assumptions);
  s.add(!goal);
  Obligation o;
  o.name = name;
  switch (s.check()) {
    case z3::unsat: o.result = "proved"; break;
    case z3::sat: {
      o.result = "refuted";
      const z3::model m = s.get_model();
      auto add = [&](const std::string& n, const std::string& v) {
        o.counterexample += (o.counterexample.empty() ? "" : " ") + n + "=" + v;
      };
      for (const z3::expr& x : shown) add(x.to_string(), m.eval(x, true).to_string());
      if (shown.empty())
        for (unsigned i = 0; i < m.num_consts(); ++i)
          add(m.get_const_decl(i).name().str(), m.get_const_interp(m.get_const_decl(i)).to_string());
      break;
    }
    default: o.result = "unknown"; o.counterexample = s.reason_unknown(); break;
  }
  o.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

}  // namespace mpk::superopt
