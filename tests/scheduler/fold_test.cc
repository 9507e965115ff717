// The MLP's down projection folded into paired gate/up tiles (FuseOptions::down_into_gate_up):
// the tiles' columns cover the down matrix once, the residual's producers write the sum's start,
// every add comes after that start and before every reader of the sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "configs.h"
#include "scheduler/decompose.h"
#include "scheduler/events.h"
#include "scheduler/fuse.h"
#include "scheduler/liveness.h"
#include "scheduler/plan.h"

namespace mpk::sched {
namespace {

using ir::OpKind;

TaskGraph folded(const ir::Graph& g, bool pair = true) {
  DecomposeOptions d{.seq_len = 100, .kv_chunk = 40};
  d.pair_siblings = pair;
  FuseOptions f;
  f.down_into_gate_up = true;
  return build_events(fuse(g, decompose(g, d), f));
}

bool has_stage(const TaskGraph& tg, const std::string& suffix) {
  return std::any_of(tg.stages.begin(), tg.stages.end(),
                     [&](const Stage& s) { return s.name.ends_with(suffix); });
}

TEST(FoldDown, MlpIsOneWave) {
  for (const model::Config& c : testing::tiny_configs()) {
    SCOPED_TRACE(c.architecture);
    const ir::Graph g = ir::build(c);
    const TaskGraph tg = folded(g);
    EXPECT_FALSE(has_stage(tg, ".mlp_out"));
    std::vector<int> seen(g.ops.size(), 0);
    for (const Task& t : tg.tasks)
      for (const FusedOp& f : t.ops) seen[size_t(f.op)] = 1;
    for (size_t i = 0; i < g.ops.size(); ++i) EXPECT_TRUE(seen[i]) << "op " << i << " implemented by no task";
    // Per layer: the gate/up tiles' columns cover [0, cols) once, in order.
    std::map<int, std::vector<const Task*>> by_layer;
    for (const Task& t : tg.tasks)
      if (tg.stages[size_t(t.stage)].name.ends_with(".gate_up")) by_layer[t.layer].push_back(&t);
    ASSERT_EQ(by_layer.size(), size_t(c.num_layers));
    for (auto& [layer, tiles] : by_layer) {
      int64_t at = 0;
      for (const Task* t : tiles) {
        SCOPED_TRACE(t->name);
        std::vector<OpKind> k;
        for (const FusedOp& f : t->ops) k.push_back(f.kind);
        EXPECT_EQ(k, (std::vector<OpKind>{OpKind::RmsNorm, OpKind::Linear, OpKind::Linear,
                                          OpKind::SiluMul, OpKind::Linear, OpKind::Add}));
        ASSERT_EQ(t->columns.size(), 1u);
        const WeightColumns& w = t->columns[0];
        ASSERT_EQ(t->weights.size(), 2u);
        EXPECT_EQ(t->weights[0].row_begin, t->weights[1].row_begin);
        EXPECT_EQ(t->weights[0].row_end, t->weights[1].row_end);
        EXPECT_EQ(w.col_begin, at);
        EXPECT_EQ(w.col_end, t->weights[0].row_end);
        EXPECT_EQ(t->adds, (std::vector<Access>{{w.out, 0, w.rows}}));
        at = w.col_end;
      }
      EXPECT_EQ(at, tiles[0]->columns[0].cols);
    }
  }
}

TEST(FoldDown, AddsComeAfterTheStartAndBeforeTheReaders) {
  for (const model::Config& c : testing::tiny_configs()) {
    SCOPED_TRACE(c.architecture);
    const ir::Graph g = ir::build(c);
    const TaskGraph tg = folded(g);
    const HappensBefore hb(tg);
    int checked = 0;
    for (const Task& adder : tg.tasks)
      for (const Access& a : adder.adds)
        for (const Task& t : tg.tasks) {
          const auto touches = [&](const std::vector<Access>& v) {
            return std::any_of(v.begin(), v.end(), [&](const Access& x) {
              return x.buffer == a.buffer && x.begin < a.end && a.begin < x.end;
            });
          };
          if (touches(t.writes)) {  // the sum's start: the residual's producers
            EXPECT_TRUE(hb.task_before(t.id, adder.id)) << t.name << " before " << adder.name;
            bool copies = false;
            for (const WeightSlice& s : t.weights) copies = copies || s.copy == a.buffer;
            EXPECT_TRUE(copies) << t.name;
            ++checked;
          }
          if (touches(t.reads)) {
            EXPECT_TRUE(hb.task_before(adder.id, t.id)) << adder.name << " before " << t.name;
            ++checked;
          }
        }
    EXPECT_GT(checked, 0);
  }
}

TEST(FoldDown, PlansValidateAndSpecsSayFolded) {
  for (const model::Config& c : testing::tiny_configs()) {
    SCOPED_TRACE(c.architecture);
    const ir::Graph g = ir::build(c);
    PlanOptions o;
    o.decompose.seq_len = 64;
    o.decompose.kv_splits = 2;
    o.decompose.pair_siblings = true;
    o.fuse.down_into_gate_up = true;
    o.schedule.num_workers = 8;
    const Plan p = plan(g, o);
    int folded_tiles = 0;
    for (const Task& t : p.tasks.tasks) {
      EXPECT_EQ(p.specs[size_t(t.id)].unsupported, "") << t.name;
      EXPECT_EQ(p.specs[size_t(t.id)].linear.down_fold, !t.columns.empty()) << t.name;
      folded_tiles += !t.columns.empty();
    }
    EXPECT_GT(folded_tiles, 0);
  }
}

TEST(FoldDown, NeedsPairedTiles) {
  const ir::Graph g = ir::build(testing::tiny_qwen3());
  const TaskGraph tg = folded(g, false);
  EXPECT_TRUE(has_stage(tg, ".mlp_out"));
  for (const Task& t : tg.tasks) EXPECT_TRUE(t.columns.empty() && t.adds.empty()) << t.name;
}

TEST(FoldDown, PairedTilesHoldBothSiblingsRows) {
  const ir::Graph g = ir::build(testing::qwen3_0_6b());
  DecomposeOptions d{.seq_len = 512};
  d.pair_siblings = true;
  const TaskGraph tg = decompose(g, d);
  int tiles = 0;
  for (const Task& t : tg.tasks) {
    if (!tg.stages[size_t(t.stage)].name.ends_with("L0.gate_up")) continue;
    ASSERT_EQ(t.weights.size(), 2u) << t.name;
    EXPECT_EQ(t.weights[0].row_end - t.weights[0].row_begin, 24) << t.name;  // 3072 rows / 132
    EXPECT_EQ(t.row_end - t.row_begin, 48) << t.name;
    ++tiles;
  }
  EXPECT_EQ(tiles, 128);
}

}  // namespace
}  // namespace mpk::sched
