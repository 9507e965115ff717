// Checks a schedule against its task graph and returns every violation found (empty: valid).
// The megakernel generator only consumes validated schedules.
//
// A valid schedule runs one step without races or deadlock, and, when the task graph has
// carried buffers, back-to-back steps in one launch too: step s + 1 starts only once all of
// step s has finished (CrossStepHazard). Deadlock freedom across steps then needs no check of
// its own: waits_prev edges run from step s to step s + 1, so queues that are subsequences of
// one topological order of a step stay subsequences of that order repeated step after step.
#pragma once

#include <string>
#include <vector>

#include "scheduler/schedule.h"
#include "scheduler/task_graph.h"

namespace mpk::sched {

enum class ViolationKind {
  WorkerCount,       // queues.size() != num_workers
  UnknownTask,       // a queue names a task id out of range
  MissingTask,       // a task is in no queue
  DuplicateTask,     // a task is queued more than once
  UnknownEvent,      // a task waits (also waits_prev) on or triggers an event id out of range
  NeedMismatch,      // an event's need differs from the number of tasks triggering it
  WaitCycle,         // a task waits on an event it (transitively) triggers
  OrderNotTopological,  // the global order is not a permutation that respects the events
  QueueNotInOrder,   // a queue is not a subsequence of the global order
  Deadlock,          // workers running their queues with blocking waits get stuck
  // For a carried buffer's writer event E, a task that (a) is not an ancestor (same-step
  // waits) of one of E's triggers, so step s may still run it when E is ready for step s, or
  // (b) neither lists E in waits_prev nor descends (same-step waits) from a task that does,
  // so it may start in step s + 1 before step s ends. One violation per task.
  CrossStepHazard,
};
const char* violation_kind_name(ViolationKind kind);

struct Violation {
  ViolationKind kind;
  int task = -1;
  int event = -1;
  int worker = -1;
  std::string message;
};

std::vector<Violation> validate(const TaskGraph& tasks, const Schedule& schedule);

// One line per violation.
std::string to_text(const std::vector<Violation>& violations);

}  // namespace mpk::sched
