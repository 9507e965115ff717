// Per-task device timers of one megakernel step, summed by task kind (the stage name without
// its layer: "qkv", "attn", "attn_merge", "o", "gate_up", "down", "lm_head", "argmax").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/megakernel.h"
#include "scheduler/plan.h"

namespace mpk::rt {

// times: per queue slot (tables.queue order) MPK_MK_PROFILE_TIMERS globaltimer ns: the task's
// start, when its events were ready, a linear's input staged, weights landed and dot products
// done (0 where a task has no such point or the kernel has no phase_timers), and its end. kv_len: the live KV length of the step
// (attention bytes). Returns JSON: {"timer", "step_us", "workers", "tasks", "kinds": [{"kind",
// "tasks", "stages", "bytes", "span_us", "busy_us_mean", "wait_us_mean", "gbps"}], "timeline":
// [[task name, worker, start, ready, end, input, weights, dots] per task, ns from the step's
// first start, null for a point the task does not have]} where a stage's span runs from its
// first task's ready time to its last task's end, and gbps = bytes / span.
std::string profile_report(const sched::Plan& plan, const MegakernelTables& tables,
                           const std::vector<uint64_t>& times, int64_t kv_len);

}  // namespace mpk::rt
