// Pass 4: static assignment of every task to a worker CTA (one per SM) by list scheduling.
// Tasks are taken in one global topological order (a task becomes eligible once every trigger
// of every event it waits on has been placed; among eligible tasks the earliest-ready first,
// then the longest remaining path), and each goes to the worker on which it would finish
// first. A worker's queue is therefore a subsequence of that one order, which makes the
// schedule deadlock-free with blocking waits.
#pragma once

#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/task_graph.h"

namespace mpk::sched {

struct ScheduleOptions {
  int num_workers = 132;
  CostModel cost;
};

struct Schedule {
  int num_workers = 0;
  std::vector<int> order;                // the global topological order of all tasks
  std::vector<std::vector<int>> queues;  // per worker: task ids in execution order
  std::vector<int> worker;               // task id -> worker
  double predicted_s = 0;                // the list scheduler's step latency estimate
};

// Needs events (build_events). Throws Error(InvalidArgument) for num_workers < 1 and
// Error(Internal) if the events contain a cycle.
Schedule schedule(const TaskGraph& tasks, const ScheduleOptions& options);

}  // namespace mpk::sched
