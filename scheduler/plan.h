// The scheduler driver: decompose -> fuse -> events -> schedule -> validate, in a straight line,
// then each task's typed spec (specs.h).
//
// Dumps: MPK_DUMP is a comma-separated list; "tasks" dumps the task graph after decompose, fuse
// and events, "schedule" the schedule (with its simulation). With MPK_DUMP_DIR set each dump
// is written there as sched.<n>.<stage>.json and sched.<n>.<stage>.dot (n counts the stages in
// order: 1 decompose, 2 fuse, 3 events, 4 schedule); without it the JSON goes to stderr.
// PlanOptions::dump and ::dump_dir override the environment.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "scheduler/decompose.h"
#include "scheduler/fuse.h"
#include "scheduler/schedule.h"
#include "scheduler/specs.h"
#include "scheduler/task_graph.h"

namespace mpk::sched {

struct PlanOptions {
  DecomposeOptions decompose;
  FuseOptions fuse;
  ScheduleOptions schedule;
  std::optional<std::string> dump;      // instead of $MPK_DUMP
  std::optional<std::string> dump_dir;  // instead of $MPK_DUMP_DIR ("" = stderr)
};

struct Plan {
  TaskGraph tasks;
  Schedule schedule;
  std::vector<TaskSpec> specs;  // per task id: what it computes, typed (specs.h)
};

// Throws Error(InvalidArgument) for bad options, Error(Io) when a dump file cannot be written,
// and Error(Internal) listing the violations if the schedule does not validate.
Plan plan(const ir::Graph& graph, const PlanOptions& options);

}  // namespace mpk::sched
