#include "scheduler/simulate.h"

#include <algorithm>
#include <deque>

namespace mpk::sched {

SimResult simulate(const TaskGraph& tg, const Schedule& s, const CostModel& cost) {
  const int workers = int(s.queues.size());
  const int n = int(tg.tasks.size());
  const int num_events = int(tg.events.size());
  auto valid_task = [&](int id) { return id >= 0 && id < n; };
  auto valid_event = [&](int e) { return e >= 0 && e < num_events; };

  SimResult r;
  r.tasks.assign(size_t(n), {});
  r.stuck.assign(size_t(workers), -1);
  r.busy_fraction.assign(size_t(workers), 0);
  r.bytes_bound_s = bytes_bound_s(tg, cost);

  // Event state: triggers run so far, ready time, and the trigger that made it ready.
  std::vector<int> fired(size_t(num_events), 0);
  std::vector<bool> is_ready(size_t(num_events), false);
  std::vector<double> latest(size_t(num_events), 0);
  std::vector<int> latest_task(size_t(num_events), -1);
  for (int e = 0; e < num_events; ++e) is_ready[size_t(e)] = tg.events[size_t(e)].need <= 0;

  std::vector<size_t> next(size_t(workers), 0);
  std::vector<double> free_at(size_t(workers), 0);
  std::vector<int> prev(size_t(workers), -1);
  std::vector<int> pred(size_t(n), -1);  // what delayed each task's run
  auto blocked = std::vector<std::vector<int>>(size_t(num_events));  // workers waiting on an event
  std::deque<int> runnable;
  for (int w = 0; w < workers; ++w) runnable.push_back(w);

  // Runs worker w's queue until it ends or blocks on an event that is not ready.
  while (!runnable.empty()) {
    const int w = runnable.front();
    runnable.pop_front();
    const auto& q = s.queues[size_t(w)];
    while (next[size_t(w)] < q.size()) {
      const int id = q[next[size_t(w)]];
      if (!valid_task(id)) {
        ++next[size_t(w)];
        continue;
      }
      const Task& t = tg.tasks[size_t(id)];
      int waiting = -1;
      for (int e : t.waits)
        if (valid_event(e) && !is_ready[size_t(e)]) waiting = e;
      if (waiting >= 0) {
        blocked[size_t(waiting)].push_back(w);
        break;
      }
      const TaskCost c = task_cost(t, cost, s.num_workers > 0 ? s.num_workers : workers);
      TaskTiming& tm = r.tasks[size_t(id)];
      tm.worker = w;
      tm.start = free_at[size_t(w)];
      tm.ready = 0;
      int ready_by = -1;
      for (int e : t.waits)
        if (valid_event(e) && latest_task[size_t(e)] >= 0) {
          const double at = latest[size_t(e)] + cost.event_latency_s;
          if (at > tm.ready) tm.ready = at, ready_by = latest_task[size_t(e)];
        }
      const double prefetched = tm.start + c.prefetch_s;
      tm.compute_start = std::max(prefetched, tm.ready);
      tm.end = tm.compute_start + c.compute_s;
      pred[size_t(id)] = ready_by >= 0 && tm.ready >= prefetched ? ready_by : prev[size_t(w)];
      r.busy_fraction[size_t(w)] += c.total();
      free_at[size_t(w)] = tm.end;
      prev[size_t(w)] = id;
      r.latency_s = std::max(r.latency_s, tm.end);
      ++next[size_t(w)];
      if (valid_event(t.trigger)) {
        const int e = t.trigger;
        if (tm.end >= latest[size_t(e)]) latest[size_t(e)] = tm.end, latest_task[size_t(e)] = id;
        if (++fired[size_t(e)] >= tg.events[size_t(e)].need && !is_ready[size_t(e)]) {
          is_ready[size_t(e)] = true;
          for (int b : blocked[size_t(e)]) runnable.push_back(b);
          blocked[size_t(e)].clear();
        }
      }
    }
  }

  for (int w = 0; w < workers; ++w) {
    const auto& q = s.queues[size_t(w)];
    if (next[size_t(w)] < q.size()) {
      r.deadlock = true;
      r.stuck[size_t(w)] = q[next[size_t(w)]];
    }
    if (r.latency_s > 0) r.busy_fraction[size_t(w)] /= r.latency_s;
  }
  if (r.deadlock) return r;

  int last = -1;
  for (int id = 0; id < n; ++id)
    if (r.tasks[size_t(id)].worker >= 0 && (last < 0 || r.tasks[size_t(id)].end > r.tasks[size_t(last)].end))
      last = id;
  for (int id = last; id >= 0; id = pred[size_t(id)]) r.critical_path.push_back(id);
  std::reverse(r.critical_path.begin(), r.critical_path.end());
  return r;
}

}  // namespace mpk::sched
