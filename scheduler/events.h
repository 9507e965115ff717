// Pass 3: events at tile granularity. A task depends on the tasks that write what it reads,
// less those already ordered before it through another dependency (a residual read in an
// epilogue is implied by the fused norm upstream that read the whole vector). Producers with
// the same set of consumers share one event, so each task triggers exactly one event and each
// consumer waits on events whose triggers are exactly its producers. Across steps: the writers
// of a carried buffer trigger an event even without consumers in the step, and the buffer's
// readers wait on it for the previous step (Task::waits_prev; see the step model).
#pragma once

#include "scheduler/task_graph.h"

namespace mpk::sched {

// Fills Task::waits, Task::waits_prev, Task::trigger and TaskGraph::events (replacing any).
// Throws Error(Internal) if two tasks write the same element or a task reads what a later task
// writes (other than a carried buffer).
TaskGraph build_events(TaskGraph tasks);

}  // namespace mpk::sched
