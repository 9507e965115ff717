// Typed task specs: every fused task of the default plans gets one (the runtime prints
// descriptors from them); the staging of each linear stage is the one its fusion implies; an op
// list no spec describes says why.
#include "scheduler/specs.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "configs.h"
#include "scheduler/plan.h"

namespace mpk::sched {
namespace {

Plan plan_of(const model::Config& c, FuseOptions f = {}) {
  PlanOptions o;
  o.decompose.seq_len = 64;
  o.decompose.kv_splits = 4;
  o.fuse = f;
  o.schedule.num_workers = 16;
  o.dump = "";
  return plan(ir::build(c), o);
}

TEST(TaskSpecs, EveryFusedTaskOfTheDefaultPlansHasOne) {
  for (const model::Config& c : testing::tiny_configs()) {
    const Plan p = plan_of(c);
    ASSERT_EQ(p.specs.size(), p.tasks.tasks.size());
    std::map<std::string, int> staging;  // stage name without its layer -> staging
    for (const Task& t : p.tasks.tasks) {
      const TaskSpec& s = p.specs[size_t(t.id)];
      EXPECT_EQ(s.unsupported, "") << t.name;
      const std::string stage = t.name.substr(t.name.find('.') + 1, t.name.find('[') - t.name.find('.') - 1);
      if (t.kind == TaskKind::Linear) {
        staging[stage] = int(s.linear.staging);
        EXPECT_GE(s.linear.x, 0) << t.name;
        EXPECT_EQ(s.linear.residual.size(), t.weights.size()) << t.name;
      }
      if (t.kind == TaskKind::Attention) {
        EXPECT_GE(s.attention.q, 0) << t.name;
        EXPECT_GE(s.attention.k, 0) << t.name;
        EXPECT_GE(s.attention.v, 0) << t.name;
        EXPECT_GE(s.attention.q_rope, 0) << t.name;
        EXPECT_EQ(s.attention.partial >= 0, t.num_chunks > 1) << t.name;
      }
      if (t.kind == TaskKind::Vector) {
        EXPECT_GE(s.argmax.value, 0);
        EXPECT_GE(s.argmax.embedding, 0);
      }
    }
    EXPECT_EQ(staging["qkv"], int(InputStaging::RmsNorm));
    EXPECT_EQ(staging["gate_up"], int(InputStaging::RmsNorm));
    EXPECT_EQ(staging["attn_out"], int(InputStaging::Plain));
    EXPECT_EQ(staging["mlp_out"], int(InputStaging::SiluMul));
  }
}

TEST(TaskSpecs, TheLmHeadCarriesItsArgmaxSlot) {
  const Plan p = plan_of(testing::tiny_qwen3());
  std::map<int64_t, int> slots;
  for (const Task& t : p.tasks.tasks) {
    const LinearSpec& s = p.specs[size_t(t.id)].linear;
    if (t.kind != TaskKind::Linear || !s.argmax) continue;
    EXPECT_GE(s.argmax_value, 0);
    EXPECT_GE(s.argmax_index, 0);
    ++slots[s.argmax_slot];
  }
  ASSERT_FALSE(slots.empty());
  for (const auto& [slot, n] : slots) EXPECT_EQ(n, 1) << "slot " << slot << " shared";
}

// Without the norm fused into the linears, the norm is a vector task of its own: no spec.
TEST(TaskSpecs, AnOpListNoSpecDescribesSaysWhy) {
  FuseOptions f;
  f.norm_into_linear = false;
  const Plan p = plan_of(testing::tiny_qwen3(), f);
  int refused = 0;
  for (const Task& t : p.tasks.tasks) {
    const std::string& why = p.specs[size_t(t.id)].unsupported;
    if (why.empty()) continue;
    ++refused;
    EXPECT_EQ(t.kind, TaskKind::Vector) << t.name;
    EXPECT_NE(why.find("only the argmax"), std::string::npos) << why;
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace mpk::sched
