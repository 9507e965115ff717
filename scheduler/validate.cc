#include "scheduler/validate.h"

#include <fmt/format.h>

#include <algorithm>

#include "scheduler/simulate.h"

namespace mpk::sched {
namespace {

using Lists = std::vector<std::vector<int>>;

// Tasks reachable from `from` (included) through `next`.
std::vector<bool> reach(int n, const std::vector<int>& from, const auto& next) {
  std::vector<bool> seen(size_t(n), false);
  std::vector<int> stack;
  auto visit = [&](int id) {
    if (!seen[size_t(id)]) seen[size_t(id)] = true, stack.push_back(id);
  };
  for (int id : from) visit(id);
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    next(id, visit);
  }
  return seen;
}

// CrossStepHazard (see validate.h): for each event triggered by a writer of a carried buffer,
// every task must end before it in the step and start after it in the previous step. Needs
// event ids in range; `waiters` are the same-step waiters of each event.
void cross_step(const TaskGraph& tg, const Lists& waiters, std::vector<Violation>& v) {
  const int n = int(tg.tasks.size());
  Lists triggers(tg.events.size());
  for (const Task& t : tg.tasks)
    if (t.trigger >= 0) triggers[size_t(t.trigger)].push_back(t.id);
  std::vector<bool> reported(size_t(n), false);
  auto report = [&](int task, int event, std::string msg) {
    if (reported[size_t(task)]) return;
    reported[size_t(task)] = true;
    v.push_back({ViolationKind::CrossStepHazard, task, event, -1, std::move(msg)});
  };
  std::vector<int> carried;  // writer events
  for (const Task& t : tg.tasks)
    for (const Access& a : t.writes) {
      if (!tg.buffers.at(size_t(a.buffer)).carried) continue;
      if (t.trigger < 0)
        report(t.id, -1, fmt::format("task {} writes carried {} but triggers no event", t.name,
                                     tg.buffers[size_t(a.buffer)].name));
      else
        carried.push_back(t.trigger);
    }
  std::sort(carried.begin(), carried.end());
  carried.erase(std::unique(carried.begin(), carried.end()), carried.end());
  for (int e : carried) {
    const std::vector<bool> before = reach(n, triggers[size_t(e)], [&](int id, auto visit) {
      for (int w : tg.tasks[size_t(id)].waits)
        for (int p : triggers[size_t(w)]) visit(p);
    });
    std::vector<int> gated;  // tasks that wait on e for the previous step
    for (const Task& t : tg.tasks)
      if (std::find(t.waits_prev.begin(), t.waits_prev.end(), e) != t.waits_prev.end())
        gated.push_back(t.id);
    const std::vector<bool> after = reach(n, gated, [&](int id, auto visit) {
      const int trigger = tg.tasks[size_t(id)].trigger;
      if (trigger >= 0)
        for (int w : waiters[size_t(trigger)]) visit(w);
    });
    const std::string& event = tg.events[size_t(e)].name;
    for (const Task& t : tg.tasks)
      if (!before[size_t(t.id)])
        report(t.id, e, fmt::format("task {} may still run when carried-writer event {} is ready: "
                                    "it is no ancestor of its triggers", t.name, event));
      else if (!after[size_t(t.id)])
        report(t.id, e, fmt::format("task {} may start before the previous step's event {}: it "
                                    "neither waits_prev on it nor descends from a task that does",
                                    t.name, event));
  }
}

}  // namespace

const char* violation_kind_name(ViolationKind kind) {
  switch (kind) {
    case ViolationKind::WorkerCount: return "worker_count";
    case ViolationKind::UnknownTask: return "unknown_task";
    case ViolationKind::MissingTask: return "missing_task";
    case ViolationKind::DuplicateTask: return "duplicate_task";
    case ViolationKind::UnknownEvent: return "unknown_event";
    case ViolationKind::NeedMismatch: return "need_mismatch";
    case ViolationKind::WaitCycle: return "wait_cycle";
    case ViolationKind::OrderNotTopological: return "order_not_topological";
    case ViolationKind::QueueNotInOrder: return "queue_not_in_order";
    case ViolationKind::Deadlock: return "deadlock";
    case ViolationKind::CrossStepHazard: return "cross_step_hazard";
  }
  return "?";
}

std::vector<Violation> validate(const TaskGraph& tg, const Schedule& s) {
  std::vector<Violation> v;
  auto add = [&](ViolationKind k, int task, int event, int worker, std::string msg) {
    v.push_back({k, task, event, worker, std::move(msg)});
  };
  const int n = int(tg.tasks.size());
  const int num_events = int(tg.events.size());
  auto name = [&](int id) { return tg.tasks[size_t(id)].name; };

  if (int(s.queues.size()) != s.num_workers)
    add(ViolationKind::WorkerCount, -1, -1, -1,
        fmt::format("{} queues for {} workers", s.queues.size(), s.num_workers));

  // Every task exactly once.
  std::vector<int> count(size_t(n), 0);
  for (size_t w = 0; w < s.queues.size(); ++w)
    for (int id : s.queues[w]) {
      if (id < 0 || id >= n) {
        add(ViolationKind::UnknownTask, id, -1, int(w), fmt::format("worker {} queues unknown task {}", w, id));
        continue;
      }
      if (++count[size_t(id)] == 2)
        add(ViolationKind::DuplicateTask, id, -1, int(w), fmt::format("task {} is queued more than once", name(id)));
    }
  for (int id = 0; id < n; ++id)
    if (count[size_t(id)] == 0)
      add(ViolationKind::MissingTask, id, -1, -1, fmt::format("task {} is in no queue", name(id)));

  // Events: ids in range, need = number of triggering tasks.
  bool events_ok = true;
  std::vector<int> triggers(size_t(num_events), 0);
  auto waiters = std::vector<std::vector<int>>(size_t(num_events));
  for (const Task& t : tg.tasks) {
    auto bad = [&](int e) {
      events_ok = false;
      add(ViolationKind::UnknownEvent, t.id, e, -1, fmt::format("task {} names unknown event {}", t.name, e));
    };
    if (t.trigger >= num_events) bad(t.trigger);
    else if (t.trigger >= 0) ++triggers[size_t(t.trigger)];
    for (int e : t.waits)
      if (e < 0 || e >= num_events) bad(e);
      else waiters[size_t(e)].push_back(t.id);
    for (int e : t.waits_prev)
      if (e < 0 || e >= num_events) bad(e);
  }
  for (int e = 0; e < num_events; ++e)
    if (tg.events[size_t(e)].need != triggers[size_t(e)])
      add(ViolationKind::NeedMismatch, -1, e, -1,
          fmt::format("event {} has need {} but {} triggering tasks", tg.events[size_t(e)].name,
                      tg.events[size_t(e)].need, triggers[size_t(e)]));
  if (!events_ok) return v;

  // Cycles through events: peel tasks with no pending producers, then tasks with no pending
  // consumers; what is left lies on a cycle or between two.
  {
    std::vector<int> indeg(size_t(n), 0), outdeg(size_t(n), 0);
    std::vector<bool> gone(size_t(n), false);
    for (const Task& t : tg.tasks)
      if (t.trigger >= 0)
        for (int w : waiters[size_t(t.trigger)]) ++indeg[size_t(w)], ++outdeg[size_t(t.id)];
    std::vector<int> stack;
    for (int id = 0; id < n; ++id)
      if (indeg[size_t(id)] == 0) stack.push_back(id);
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      gone[size_t(id)] = true;
      const int e = tg.tasks[size_t(id)].trigger;
      if (e < 0) continue;
      for (int w : waiters[size_t(e)])
        if (--indeg[size_t(w)] == 0) stack.push_back(w);
    }
    // Producers of each task among the remaining ones, for the reverse peel.
    auto producers = std::vector<std::vector<int>>(size_t(n));
    for (const Task& t : tg.tasks)
      if (!gone[size_t(t.id)] && t.trigger >= 0)
        for (int w : waiters[size_t(t.trigger)])
          if (!gone[size_t(w)]) producers[size_t(w)].push_back(t.id);
    std::fill(outdeg.begin(), outdeg.end(), 0);
    for (int id = 0; id < n; ++id)
      for (int p : producers[size_t(id)]) ++outdeg[size_t(p)];
    for (int id = 0; id < n; ++id)
      if (!gone[size_t(id)] && outdeg[size_t(id)] == 0) stack.push_back(id);
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      gone[size_t(id)] = true;
      for (int p : producers[size_t(id)])
        if (--outdeg[size_t(p)] == 0) stack.push_back(p);
    }
    for (int id = 0; id < n; ++id)
      if (!gone[size_t(id)])
        add(ViolationKind::WaitCycle, id, tg.tasks[size_t(id)].trigger, -1,
            fmt::format("task {} waits on an event it transitively triggers", name(id)));
  }

  // The global order: a permutation of the tasks in which every trigger precedes its waiters.
  std::vector<int> pos(size_t(n), -1);
  bool order_ok = int(s.order.size()) == n;
  for (size_t i = 0; i < s.order.size() && order_ok; ++i) {
    const int id = s.order[i];
    if (id < 0 || id >= n || pos[size_t(id)] >= 0) order_ok = false;
    else pos[size_t(id)] = int(i);
  }
  if (!order_ok) {
    add(ViolationKind::OrderNotTopological, -1, -1, -1, "the global order is not a permutation of the tasks");
  } else {
    std::vector<int> last_trigger(size_t(num_events), -1);
    for (const Task& t : tg.tasks)
      if (t.trigger >= 0) last_trigger[size_t(t.trigger)] = std::max(last_trigger[size_t(t.trigger)], pos[size_t(t.id)]);
    for (const Task& t : tg.tasks)
      for (int e : t.waits)
        if (last_trigger[size_t(e)] > pos[size_t(t.id)])
          add(ViolationKind::OrderNotTopological, t.id, e, -1,
              fmt::format("task {} comes before a trigger of event {} it waits on", t.name,
                          tg.events[size_t(e)].name));
    for (size_t w = 0; w < s.queues.size(); ++w) {
      int at = -1;
      for (int id : s.queues[w]) {
        if (id < 0 || id >= n) continue;
        if (pos[size_t(id)] <= at) {
          add(ViolationKind::QueueNotInOrder, id, -1, int(w),
              fmt::format("worker {} runs {} out of the global order", w, name(id)));
          break;
        }
        at = pos[size_t(id)];
      }
    }
  }

  cross_step(tg, waiters, v);

  // Blocking execution of the queues as they are.
  const SimResult sim = simulate(tg, s, CostModel{});
  for (size_t w = 0; w < sim.stuck.size(); ++w)
    if (sim.stuck[w] >= 0)
      add(ViolationKind::Deadlock, sim.stuck[w], -1, int(w),
          fmt::format("worker {} blocks forever before {}", w, name(sim.stuck[w])));
  return v;
}

std::string to_text(const std::vector<Violation>& violations) {
  std::string s;
  for (const Violation& v : violations)
    s += fmt::format("{}: {}\n", violation_kind_name(v.kind), v.message);
  return s;
}

}  // namespace mpk::sched
