// JSON and Graphviz dumps of task graphs and schedules (MPK_DUMP=tasks,schedule; see plan.h).
#pragma once

#include <string>

#include "ir/graph.h"
#include "scheduler/schedule.h"
#include "scheduler/simulate.h"
#include "scheduler/task_graph.h"

namespace mpk::sched {

// {"seq_len", "buffers": [...], "stages": [...], "tasks": [...], "events": [...]}; op names come
// from ops.def. Every field of Task, Stage, Buffer and Event is written.
std::string to_json(const TaskGraph& tasks);
// {"num_workers", "predicted_s", "order", "queues"}; with a simulation also "simulation":
// per-task timings, critical path and busy fractions.
std::string to_json(const Schedule& schedule, const SimResult* simulation = nullptr);

// Tasks as boxes and events as small circles (trigger -> event -> waiter), one cluster per
// stage; waits for the previous step (waits_prev) are dashed red edges.
std::string to_dot(const TaskGraph& tasks);
// One cluster per worker with its queue in order; event edges as in to_dot(TaskGraph).
std::string to_dot(const TaskGraph& tasks, const Schedule& schedule);

}  // namespace mpk::sched
