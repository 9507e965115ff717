#include "scheduler/cost_model.h"

#include <algorithm>

namespace mpk::sched {

TaskCost task_cost(const Task& t, const CostModel& c, int num_workers) {
  const double share = double(std::max(c.num_sms, num_workers));
  const double sm_fraction = std::min(1.0, double(c.num_sms) / double(std::max(1, num_workers)));
  TaskCost r;
  const double stream = double(t.weight_bytes + t.kv_bytes);
  const double early = std::min(stream, c.prefetch_bytes);
  r.prefetch_s = c.task_overhead_s + early * share / c.read_bytes_per_s;
  r.compute_s = c.post_event_latency_s + (stream - early) * share / c.read_bytes_per_s +
                double(t.act_bytes) * share / c.l2_bytes_per_s +
                t.flops / (c.flops_per_s_per_sm * sm_fraction);
  return r;
}

double bytes_bound_s(const TaskGraph& tg, const CostModel& c) {
  return double(tg.total_weight_bytes() + tg.total_kv_bytes()) / c.read_bytes_per_s;
}

}  // namespace mpk::sched
