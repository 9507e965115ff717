#include "scheduler/schedule.h"

#include <algorithm>
#include <queue>
#include <tuple>

#include "base/error.h"

namespace mpk::sched {

Schedule schedule(const TaskGraph& tg, const ScheduleOptions& o) {
  MPK_CHECK(o.num_workers >= 1, InvalidArgument)
      << "schedule: num_workers must be >= 1, got " << o.num_workers;
  const size_t n = tg.tasks.size();
  std::vector<TaskCost> cost(n);
  for (const Task& t : tg.tasks) cost[size_t(t.id)] = task_cost(t, o.cost, o.num_workers);

  // Longest path from each task to the end of the step (ids are topological).
  std::vector<double> level(n, 0), event_level(tg.events.size(), -1);
  for (size_t i = n; i-- > 0;) {
    const Task& t = tg.tasks[i];
    double after = 0;
    if (t.trigger >= 0) {
      double& e = event_level[size_t(t.trigger)];
      if (e < 0) {
        e = 0;
        for (int w : tg.events[size_t(t.trigger)].waiters) e = std::max(e, level[size_t(w)]);
      }
      after = e + o.cost.event_latency_s;
    }
    level[i] = cost[i].total() + after;
  }

  Schedule s;
  s.num_workers = o.num_workers;
  s.queues.assign(size_t(o.num_workers), {});
  s.worker.assign(n, -1);
  std::vector<int> pending(n, 0);
  std::vector<int> remaining(tg.events.size(), 0);
  std::vector<double> event_ready(tg.events.size(), 0), ready(n, 0), end(n, 0);
  std::vector<std::vector<int>> waiters(tg.events.size());
  for (const Task& t : tg.tasks) {
    if (t.trigger >= 0) ++remaining[size_t(t.trigger)];
    for (int e : t.waits) waiters[size_t(e)].push_back(t.id);
  }
  using Item = std::tuple<double, double, int>;  // ready, -level, id
  std::priority_queue<Item, std::vector<Item>, std::greater<>> eligible;
  for (const Task& t : tg.tasks) {
    for (int e : t.waits)
      if (remaining[size_t(e)] > 0) ++pending[size_t(t.id)];
    if (pending[size_t(t.id)] == 0) eligible.emplace(0.0, -level[size_t(t.id)], t.id);
  }

  std::vector<double> free_at(size_t(o.num_workers), 0);
  while (!eligible.empty()) {
    const int id = std::get<2>(eligible.top());
    eligible.pop();
    const TaskCost& c = cost[size_t(id)];
    // Earliest finish; among ties the worker that frees up last, keeping early ones for others.
    int best = 0;
    double best_end = 0;
    for (int w = 0; w < o.num_workers; ++w) {
      const double f = std::max(free_at[size_t(w)] + c.prefetch_s, ready[size_t(id)]) + c.compute_s;
      if (w == 0 || f < best_end || (f == best_end && free_at[size_t(w)] > free_at[size_t(best)]))
        best = w, best_end = f;
    }
    free_at[size_t(best)] = end[size_t(id)] = best_end;
    s.queues[size_t(best)].push_back(id);
    s.worker[size_t(id)] = best;
    s.order.push_back(id);
    s.predicted_s = std::max(s.predicted_s, best_end);
    const int e = tg.tasks[size_t(id)].trigger;
    if (e < 0) continue;
    event_ready[size_t(e)] = std::max(event_ready[size_t(e)], best_end + o.cost.event_latency_s);
    if (--remaining[size_t(e)] > 0) continue;
    for (int w : waiters[size_t(e)]) {
      ready[size_t(w)] = std::max(ready[size_t(w)], event_ready[size_t(e)]);
      if (--pending[size_t(w)] == 0) eligible.emplace(ready[size_t(w)], -level[size_t(w)], w);
    }
  }
  MPK_ICHECK(s.order.size() == n) << "schedule: the events form a cycle; placed " << s.order.size()
                                  << " of " << n << " tasks";
  return s;
}

}  // namespace mpk::sched
