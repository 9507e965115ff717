#include "config_plan.h"

#include <algorithm>

#include "ir/builder.h"

namespace mpk::tune {

ConfigPlan plan_from_config(const std::filesystem::path& model_dir, int workers, int64_t kv_capacity,
                            const rt::MegakernelParams& decomposition) {
  ConfigPlan p;
  p.config = model::load_config(model_dir);
  p.graph = ir::build(p.config);
  p.kv_capacity = p.config.max_position_embeddings > 0
                      ? std::min<int64_t>(kv_capacity, p.config.max_position_embeddings)
                      : kv_capacity;
  sched::PlanOptions po = rt::megakernel_plan_options(p.graph, workers, p.kv_capacity, decomposition);
  po.dump = std::string();  // $MPK_DUMP is for the plans sessions run
  p.plan = sched::plan(p.graph, po);
  p.mem = rt::plan_memory(p.graph, p.plan.tasks, p.config.torch_dtype, p.kv_capacity);
  p.params = rt::default_params(int(p.config.head_dim), p.plan.tasks.total_weight_bytes(),
                               p.config.num_layers, workers);
  return p;
}

}  // namespace mpk::tune
