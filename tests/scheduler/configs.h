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
  static_assert(sizeof(FuseOptions) == 7, "a new FuseOptions flag: turn it off here too");
  FuseOptions f;
  f.norm_into_linear = false;
  f.qk_into_attention = false;
  f.residual_into_linear = false;
  f.silu_into_linear = false;
  f.merge_into_attention = false;
  f.argmax_into_linear = false;
  f.embedding_into_argmax = false;
  return f;
}

// decompose + fuse + build_events.
TaskGraph build_tasks(const ir::Graph& g, const DecomposeOptions& d = {}, const FuseOptions& f = {});

// Schedule options with the default cost model.
inline ScheduleOptions with_workers(int n) {
  ScheduleOptions o;
  o.num_workers = n;
  return o;
}

// Ancestors (through events) of every task, as a dense matrix; small graphs only.
std::vector<std::vector<bool>> ancestors(const TaskGraph& tg);

}  // namespace mpk::sched::testing
