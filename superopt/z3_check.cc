#include "superopt/z3_check.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace mpk::superopt {

Obligation check(z3::context& ctx, const std::string& name, const z3::expr& assumptions,
                 const z3::expr& goal, const std::vector<z3::expr>& shown, unsigned timeout_ms) {
  const auto t0 = std::chrono::steady_clock::now();
  z3::solver s(ctx);
  s.add(assumptions);
  s.add(!goal);
  Obligation o;
  o.name = name;
  // The time limit by a watchdog of ours that interrupts the query: Z3's own "timeout" runs its
  // timer on a thread pool that can deadlock (scoped_timer, Z3 4.8.12 as Debian 12 ships it; a
  // test hung in it). An interrupt that comes after the query has returned does nothing.
  z3::check_result result;
  bool timed_out = false;
  {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return done; })) {
        timed_out = true;
        ctx.interrupt();
      }
    });
    result = s.check();
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_one();
    watchdog.join();
  }
  switch (result) {
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
    default:
      o.result = "unknown";
      o.counterexample = timed_out ? "over the time limit of " + std::to_string(timeout_ms) + " ms" : s.reason_unknown();
      break;
  }
  o.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

}  // namespace mpk::superopt
