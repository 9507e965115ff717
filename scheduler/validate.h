// Checks a schedule against its task graph and returns every violation found (empty: valid).
// The megakernel generator only consumes validated schedules.
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
  UnknownEvent,      // a task waits on or triggers an event id out of range
  NeedMismatch,      // an event's need differs from the number of tasks triggering it
  WaitCycle,         // a task waits on an event it (transitively) triggers
  OrderNotTopological,  // the global order is not a permutation that respects the events
  QueueNotInOrder,   // a queue is not a subsequence of the global order
  Deadlock,          // workers running their queues with blocking waits get stuck
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
