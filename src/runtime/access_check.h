// The scheduler's declared access ranges against what the kernel touches. The events
// (scheduler/events.h), the validator and the activation sharing (scheduler/liveness.h) rest on
// each task's declared reads and writes; here every
// activation range a task's descriptor makes the kernel read or write (the extents the proved
// formulas give: a linear's rows [0, rows) of each slice and K [0, k), an attention head's
// rows, a partial's group * (head_dim + 2) elements, ...) must lie inside the union of the
// task's declared ranges of that kind. A merging attention chunk writes its head's whole output
// and reads every chunk's partials: inside the union of its head's chunks' declared writes.
#pragma once

#include "runtime/megakernel.h"

namespace mpk::rt {

// Throws Error(Internal) naming the task, the range and what it should lie in.
void check_access_ranges(const sched::Plan& plan, const MemoryPlan& mem, const SegmentBases& bases,
                         const MegakernelTables& tables);

}  // namespace mpk::rt
