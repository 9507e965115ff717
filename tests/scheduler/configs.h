// Model shapes the scheduler tests run on, and helpers computed from the shapes alone.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/builder.h"
#include "model/config.h"
#include "model_configs.h"
#include "scheduler/decompose.h"
#include "scheduler/fuse.h"
#include "scheduler/schedule.h"
#include "scheduler/task_graph.h"

namespace mpk::sched::testing {

using mpk::testing::qwen3_0_6b;
using mpk::testing::qwen3_8b;
using mpk::testing::tiny_configs;
using mpk::testing::tiny_llama;
using mpk::testing::tiny_qwen2;
using mpk::testing::tiny_qwen3;

// Weight bytes one decode step reads, from the config: every matrix, bias and norm once, one
// embedding row, and the LM head (the embedding table again when tied).
int64_t expected_weight_bytes(const model::Config& c, DType weight_dtype);

// Fuse options with every fusion off.
inline FuseOptions unfused() {
  static_assert(sizeof(FuseOptions) == 8, "a new FuseOptions flag: turn it off here too");
  FuseOptions f;
  f.norm_into_linear = false;
  f.qk_into_attention = false;
  f.residual_into_linear = false;
  f.silu_into_linear = false;
  f.merge_into_attention = false;
  f.argmax_into_linear = false;
  f.embedding_into_argmax = false;
  f.down_into_gate_up = false;
  return f;
}

// decompose + fuse + build_events.
TaskGraph build_tasks(const ir::Graph& g, const DecomposeOptions& d = {}, const FuseOptions& f = {});

// The tasks that trigger the events a task waits on (this step's), ascending.
std::vector<int> waited_triggers(const TaskGraph& tg, const Task& t);

// Schedule options with the default cost model.
inline ScheduleOptions with_workers(int n) {
  ScheduleOptions o;
  o.num_workers = n;
  return o;
}

// The ancestor relation of the tasks through same-step waits (Task::waits and the triggers of
// the waited events; waits_prev are not edges), as a transitive closure computed here from
// those edges alone, whatever order the ids are in. One bit per task pair: fine up to tens of
// thousands of tasks. Throws std::logic_error when the edges form a cycle.
class Ancestors {
 public:
  explicit Ancestors(const TaskGraph& tg);
  // Whether `ancestor` finishes before `task` starts in every step.
  bool operator()(int task, int ancestor) const {
    return (bits_[size_t(task) * words_ + size_t(ancestor) / 64] >> (ancestor % 64)) & 1;
  }

 private:
  size_t words_ = 0;
  std::vector<uint64_t> bits_;  // row per task
};

}  // namespace mpk::sched::testing
