// A discrete-event model of one step: each worker runs its queue in order; a task's prefetch
// part (overhead, weights, KV history) starts as soon as its worker is free, its compute part
// once the prefetch is done and every event it waits on is ready (the events' triggers have
// finished, plus the event latency). Waits block the worker, so a schedule whose queues and
// events form a cycle deadlocks here, which is what the validator uses. Waits for the previous
// step (Task::waits_prev) are ready at time 0: the model is one step.
#pragma once

#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/schedule.h"
#include "scheduler/task_graph.h"

namespace mpk::sched {

struct TaskTiming {
  int worker = -1;
  double start = 0;          // prefetch starts
  double ready = 0;          // its events are ready
  double compute_start = 0;  // max(prefetch end, ready)
  double end = 0;
};

struct SimResult {
  bool deadlock = false;
  std::vector<int> stuck;  // per worker: the task it blocks on (-1 when it ran its queue)
  double latency_s = 0;    // the step: the last task's end
  double bytes_bound_s = 0;
  std::vector<TaskTiming> tasks;  // by task id (last run when a task is queued twice)
  // Tasks from the first to the last, each delayed by the previous one (its worker or the
  // trigger of the event it waited on last).
  std::vector<int> critical_path;
  std::vector<double> busy_fraction;  // per worker: prefetch + compute time over latency_s
};

// Works on any schedule (task ids out of range are skipped); event e is ready once e.need of
// its triggers have run (an event nobody triggers with need > 0 never is).
SimResult simulate(const TaskGraph& tasks, const Schedule& schedule, const CostModel& cost);

}  // namespace mpk::sched
