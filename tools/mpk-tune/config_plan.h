// The megakernel plan of a model directory's config.json alone (no weights, no GPU), as
// `mpk-tune prove` and `coverage` make it.
#pragma once

#include <cstdint>
#include <filesystem>

#include "ir/graph.h"
#include "model/config.h"
#include "runtime/megakernel.h"

namespace mpk::tune {

struct ConfigPlan {
  model::Config config;
  ir::Graph graph;
  int64_t kv_capacity = 0;  // the asked one, capped by max_position_embeddings
  sched::Plan plan;
  rt::MemoryPlan mem;
  rt::MegakernelParams params;  // the defaults for the model's head_dim
};

// The plan that `decomposition`'s plan fields make (rt::megakernel_plan_options: KV chunks, the
// merge's placement, tiles per stage, fold_down); the defaults stay the model's.
ConfigPlan plan_from_config(const std::filesystem::path& model_dir, int workers, int64_t kv_capacity,
                            const rt::MegakernelParams& decomposition = rt::MegakernelParams{});

}  // namespace mpk::tune
