// Activation buffers that may share memory. Within a step the tasks run concurrently, in any
// order the events allow, so "buffer A is dead before buffer B is born" must hold in the
// happens-before order the events give, not in any one schedule: B may take A's memory only
// when every task that accesses B waits (transitively, through this step's events) for every
// task that accesses A. Across steps nothing more is needed: every task of a step is a
// descendant of a reader of the carried buffer, which waits for the previous step's writer of
// it, and every task is an ancestor of that writer (validate's cross-step check), so a step's
// accesses all follow the previous step's. Buffers that may hold a value from outside the step
// keep memory of their own: the carried one, what no task of the step writes, and what the
// host reads or writes.
#pragma once

#include <vector>

#include "scheduler/task_graph.h"

namespace mpk::sched {

// Whether every task accessing `later` waits, through this step's events, for every task
// accessing `earlier` (false when either has no accessor, or a task accesses both).
class HappensBefore {
 public:
  explicit HappensBefore(const TaskGraph& tg);
  bool buffer_before(int earlier, int later) const;
  // Whether task b transitively waits for task a within a step.
  bool task_before(int a, int b) const;
  // The tasks that read or write a buffer, ascending.
  const std::vector<int>& accessors(int buffer) const { return accessors_[size_t(buffer)]; }

 private:
  std::vector<int> trigger_;  // per task
  size_t words_ = 0;
  std::vector<std::vector<uint64_t>> after_event_;  // tasks that wait for event e (transitively)
  std::vector<std::vector<int>> accessors_;         // per buffer
  std::vector<std::vector<uint64_t>> after_buffer_; // tasks after every accessor of a buffer
};

// A slot per buffer: buffers of one slot share memory. Each slot's buffers form a chain, every
// one after the previous in happens-before order; a slot of its own for the carried buffer,
// buffers no task writes, buffers without an accessor and the `host_visible` ones (the host
// uploads or reads them). Greedy in the order of the buffers' first accessors. The
// cross-step premise is checked, not assumed: when the graph carries a buffer, every task must
// come before one of its writers and after one of its readers (which wait for the previous
// step), or Error(Internal) is thrown.
std::vector<int> share_buffers(const TaskGraph& tg, const std::vector<bool>& host_visible);

}  // namespace mpk::sched
