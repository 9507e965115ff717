// The decomposition parameters (MegakernelParams::kv_splits, merge_task, tile_waves) without a
// device: each makes the plan it names (KV chunks per head, merge tasks of their own, tiles per
// linear stage), the plan validates, its descriptors stay inside their declared ranges
// (build_tables checks), and its proofs hold. The search (runtime/tune.h) times them on a GPU.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/error.h"
#include "ir/builder.h"
#include "model_configs.h"
#include "runtime/megakernel.h"
#include "runtime/proofs.h"
#include "scheduler/decompose.h"
#include "scheduler/validate.h"

namespace mpk::rt {
namespace {

constexpr int64_t kCapacity = 64;

struct Shape {
  int chunks = 0;       // attention tasks per (layer, KV head)
  int merge_tasks = 0;  // merge tasks of their own
  int merging_chunks = 0;  // chunk tasks that merge when last (MPK_MK_F_MERGE)
  std::map<std::string, int> linear_tiles;  // by stage name
};

Shape shape_of(const sched::Plan& plan, const MegakernelTables& t) {
  Shape s;
  std::map<std::pair<int, int>, int> per_head;
  for (const sched::Task& task : plan.tasks.tasks) {
    const MkTask& d = t.tasks[size_t(task.id)];
    if (task.kind == sched::TaskKind::Attention) ++per_head[{task.layer, task.kv_head}];
    s.merge_tasks += d.kind == MPK_MK_ATTN_MERGE;
    s.merging_chunks += d.kind == MPK_MK_ATTENTION && (d.flags & MPK_MK_F_MERGE) != 0;
    if (task.kind == sched::TaskKind::Linear) ++s.linear_tiles[plan.tasks.stages[size_t(task.stage)].name];
  }
  for (const auto& [head, n] : per_head) {
    if (s.chunks == 0) s.chunks = n;
    EXPECT_EQ(n, s.chunks) << "layer " << head.first << " KV head " << head.second;
  }
  return s;
}

struct Built {
  sched::Plan plan;
  MegakernelTables t;
};

Built build(const ir::Graph& g, int workers, const MegakernelParams& p) {
  Built b;
  b.plan = sched::plan(g, megakernel_plan_options(g, workers, kCapacity, p));
  const MemoryPlan mem = plan_memory(g, b.plan.tasks, DType::BF16, kCapacity);
  b.t = build_tables(g, b.plan, mem, SegmentBases{}, p);  // checks the access ranges
  return b;
}

class Decomposition : public ::testing::TestWithParam<int> {};

TEST_P(Decomposition, ParametersShapeThePlan) {
  const int workers = GetParam();
  for (const model::Config& c : mpk::testing::tiny_configs()) {
    SCOPED_TRACE(c.architecture);
    const ir::Graph g = ir::build(c, DType::BF16);
    const Built def = build(g, workers, MegakernelParams{});
    const Shape d = shape_of(def.plan, def.t);
    EXPECT_EQ(d.chunks, megakernel_kv_splits(g, workers, kCapacity));
    for (const char* text : {"kv_splits=1", "kv_splits=3", "kv_splits=64", "merge_task=1", "kv_splits=4,merge_task=1",
                             "tile_waves=2", "tile_waves=4,kv_splits=2", "tile_waves=2,fold_down=1"}) {
      SCOPED_TRACE(text);
      const MegakernelParams p = parse_params(text);
      EXPECT_FALSE(same_plan(p, MegakernelParams{}));
      const Built b = build(g, workers, p);
      EXPECT_TRUE(sched::validate(b.plan.tasks, b.plan.schedule).empty());
      const Shape s = shape_of(b.plan, b.t);
      const int chunks = p.kv_splits > 0 ? p.kv_splits : d.chunks;
      EXPECT_EQ(s.chunks, chunks);
      // Several chunks are merged: by a task per head with merge_task, else by the last chunk
      // to finish where the chunks fit the merge's lanes (a head group's outputs at least the
      // chunks), else by a task.
      const int heads = c.num_layers * c.num_kv_heads;
      const bool fold = !p.merge_task && c.num_heads / c.num_kv_heads * c.head_dim >= chunks;
      if (chunks == 1) {
        EXPECT_EQ(s.merge_tasks + s.merging_chunks, 0);
      } else if (fold) {
        EXPECT_EQ(s.merge_tasks, 0);
        EXPECT_EQ(s.merging_chunks, heads * chunks);
      } else {
        EXPECT_EQ(s.merge_tasks, heads);
        EXPECT_EQ(s.merging_chunks, 0);
      }
      // Tiles: what decompose makes for tile_waves times the workers.
      sched::DecomposeOptions o;
      o.target_tiles = workers * p.tile_waves;
      for (const auto& [stage, n] : s.linear_tiles) {
        if (p.fold_down && stage.ends_with("gate_up")) continue;  // tiled by pairs
        const sched::Stage* st = nullptr;
        for (const sched::Stage& x : b.plan.tasks.stages)
          if (x.name == stage) st = &x;
        ASSERT_NE(st, nullptr);
        const int64_t tile = sched::linear_tile_rows(st->rows, o);
        EXPECT_EQ(n, (st->rows + tile - 1) / tile) << stage;
        if (p.tile_waves > 1 && st->rows >= 8 * workers * p.tile_waves) {
          EXPECT_GT(n, d.linear_tiles.at(stage)) << stage;
        }
      }
      // Every formula the descriptors use, proved.
      for (const PlanProof& pr : plan_proofs(b.t.device_tasks(), p))
        EXPECT_TRUE(pr.record.proved()) << pr.use << ": " << pr.record.to_json();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, Decomposition, ::testing::Values(8, 132));

// Qwen3-0.6B's shape on 132 workers: two waves halve its tiles' rows; a KV split above the
// capacity is cut to it.
TEST(Decomposition, RealShapeTilesAndChunks) {
  const ir::Graph g = ir::build(mpk::testing::qwen3_0_6b(), DType::BF16);
  const Built one = build(g, 132, MegakernelParams{});
  const Built two = build(g, 132, parse_params("tile_waves=2"));
  const Shape a = shape_of(one.plan, one.t), b = shape_of(two.plan, two.t);
  EXPECT_EQ(a.chunks, 16);  // 132 workers over 8 KV heads
  EXPECT_EQ(a.linear_tiles.at("L0.qkv"), 128);  // 4,096 rows in tiles of 32
  EXPECT_EQ(b.linear_tiles.at("L0.qkv"), 256);  // in tiles of 16
  EXPECT_EQ(b.linear_tiles.at("lm_head"), 264);
  const sched::Plan capped = sched::plan(g, megakernel_plan_options(g, 132, 3, parse_params("kv_splits=8")));
  int per_head = 0;
  for (const sched::Task& t : capped.tasks.tasks) per_head += t.kind == sched::TaskKind::Attention && t.layer == 0 && t.kv_head == 0;
  EXPECT_EQ(per_head, 3);
}

TEST(Decomposition, ParametersOutOfRangeAreRefused) {
  for (const char* text : {"kv_splits=-1", "kv_splits=65", "merge_task=2", "tile_waves=0", "tile_waves=5"}) {
    try {
      parse_params(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
    }
  }
  // Code parameters leave the plan as it is.
  EXPECT_TRUE(same_plan(parse_params("rows_per_warp=3,controller_warp=1,block_threads=480"), MegakernelParams{}));
}

// The kernel's source does not see the decomposition: one kernel serves every plan.
TEST(Decomposition, TheKernelSourceDoesNotSeeIt) {
  const std::string plain = megakernel_source(MegakernelParams{}, DType::BF16);
  EXPECT_EQ(megakernel_source(parse_params("kv_splits=4,merge_task=1,tile_waves=2"), DType::BF16), plain);
  EXPECT_NE(megakernel_source(parse_params("fold_down=1"), DType::BF16), plain);  // code and plan
}

}  // namespace
}  // namespace mpk::rt
