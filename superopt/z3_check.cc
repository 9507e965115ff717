#include "superopt/z3_check.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "base/error.h"

namespace mpk::superopt {
namespace {

// The wall-clock limit of every query, by one thread of ours that interrupts a query's context at
// its deadline: Z3's own "timeout" runs its timer on a thread pool that can deadlock (scoped_timer,
// Z3 4.8.12 as Debian 12 ships it; a test hung in it), and a thread per query meant hundreds of
// thread starts per model load. Queries run on many threads at once (one context each).
class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog w;
    return w;
  }

  // Interrupts ctx at `deadline` unless disarmed first.
  uint64_t arm(z3::context& ctx, std::chrono::steady_clock::time_point deadline) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t id = next_++;
    armed_[id] = {&ctx, deadline, false};
    cv_.notify_one();
    return id;
  }

  // Whether the query was interrupted. The interrupt happens under the lock, so none comes after
  // this returns; one that came after the query returned stays on the context (check() clears
  // it).
  bool disarm(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = armed_.find(id);
    if (it == armed_.end()) return false;
    const bool fired = it->second.fired;
    armed_.erase(it);
    return fired;
  }

 private:
  struct Entry {
    z3::context* ctx;
    std::chrono::steady_clock::time_point deadline;
    bool fired;
  };

  Watchdog() : thread_([this] { run(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      auto next = std::chrono::steady_clock::time_point::max();
      const auto now = std::chrono::steady_clock::now();
      for (auto& entry : armed_) {
        Entry& e = entry.second;
        if (e.fired) continue;
        if (e.deadline <= now) {
          e.fired = true;
          e.ctx->interrupt();
        } else {
          next = std::min(next, e.deadline);
        }
      }
      if (next == std::chrono::steady_clock::time_point::max())
        cv_.wait(lock);
      else
        cv_.wait_until(lock, next);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> armed_;
  uint64_t next_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

// Z3's resource count on ctx so far (the solver reports its context's).
uint64_t work_done(const z3::solver& s) {
  const z3::stats st = s.statistics();
  for (unsigned i = 0; i < st.size(); ++i)
    if (st.key(i) == "rlimit count") return st.is_uint(i) ? st.uint_value(i) : uint64_t(st.double_value(i));
  return 0;
}

}  // namespace

Obligation check(z3::context& ctx, const std::string& name, const z3::expr& assumptions,
                 const z3::expr& goal, const std::vector<z3::expr>& shown, unsigned timeout_ms) {
  const uint64_t work = std::min<uint64_t>(uint64_t(timeout_ms) * kWorkPerMs, UINT32_MAX);
  const uint64_t wall = std::min<uint64_t>(uint64_t(timeout_ms) * kWallFactor, UINT32_MAX);
  return check_limits(ctx, name, assumptions, goal, shown, std::max<uint64_t>(work, 1), unsigned(wall));
}

Obligation check_limits(z3::context& ctx, const std::string& name, const z3::expr& assumptions,
                        const z3::expr& goal, const std::vector<z3::expr>& shown, uint64_t work_limit,
                        unsigned wall_ms) {
  MPK_CHECK(work_limit <= UINT32_MAX, InvalidArgument) << name << ": a work limit above 2^32 - 1";
  const auto t0 = std::chrono::steady_clock::now();
  Obligation o;
  o.name = name;
  z3::solver s(ctx);
  s.add(assumptions);
  s.add(!goal);
  // The count is the context's, and the limit counts from where the check starts.
  z3::params limit(ctx);
  limit.set("rlimit", unsigned(work_limit));
  s.set(limit);
  const uint64_t work0 = work_done(s);
  Watchdog& w = Watchdog::instance();
  // Armed just before the check (which clears a stale interrupt as it starts); disarmed on every
  // path, so that the watchdog never interrupts a context after it is gone.
  struct Armed {
    Watchdog& w;
    uint64_t id;
    bool fired = false, done = false;
    bool disarm() {
      if (!done) fired = w.disarm(id), done = true;
      return fired;
    }
    ~Armed() { disarm(); }
  } armed{w, w.arm(ctx, std::chrono::steady_clock::now() + std::chrono::milliseconds(wall_ms))};
  const std::string over = "over the wall-clock limit of " + std::to_string(wall_ms) + " ms";
  try {
    const z3::check_result result = s.check();
    const bool timed_out = armed.disarm();
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
        // The count, not Z3's wording of the reason, says whether the work limit stopped it.
        if (timed_out)
          o.counterexample = over;
        else if (work_limit > 0 && work_done(s) - work0 >= work_limit)  // 0: no limit
          o.counterexample = "over the work limit of " + std::to_string(work_limit) + " units";
        else
          o.counterexample = s.reason_unknown();
        break;
    }
  } catch (const z3::exception& e) {
    // An interrupt can also surface as "canceled" from the check or from reading the model:
    // unknown, like a time-out. Any other Z3 error is the prover's own.
    const bool timed_out = armed.disarm();
    MPK_CHECK(timed_out || std::string(e.msg()) == "canceled", Internal) << name << ": Z3: " << e.msg();
    o.result = "unknown";
    o.counterexample = timed_out ? over : "interrupted";
  }
  // An interrupt that came after the check returned stays on the context and would cancel the
  // next query at once: an empty check clears it.
  if (armed.fired) {
    try {
      z3::solver(ctx).check();
    } catch (const z3::exception&) {
    }
  }
  o.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  try {
    o.work = work_done(s) - work0;
  } catch (const z3::exception&) {  // a context interrupted as it returned; the work is unknown
  }
  return o;
}

}  // namespace mpk::superopt
