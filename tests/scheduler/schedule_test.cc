// schedule: every task placed once, on queues that follow one topological order, for any
// worker count; the validator accepts what the scheduler and plan() produce.
#include "scheduler/schedule.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "configs.h"
#include "scheduler/plan.h"
#include "scheduler/simulate.h"
#include "scheduler/validate.h"

namespace mpk::sched {
namespace {

void expect_valid(const TaskGraph& tg, const Schedule& s, int workers) {
  EXPECT_EQ(s.num_workers, workers);
  EXPECT_EQ(int(s.queues.size()), workers);
  EXPECT_EQ(s.order.size(), tg.tasks.size());
  const auto v = validate(tg, s);
  EXPECT_TRUE(v.empty()) << to_text(v);
  size_t placed = 0;
  for (size_t w = 0; w < s.queues.size(); ++w) {
    placed += s.queues[w].size();
    for (int id : s.queues[w]) EXPECT_EQ(s.worker[size_t(id)], int(w));
  }
  EXPECT_EQ(placed, tg.tasks.size());
}

TEST(Schedule, ValidForManyWorkerCounts) {
  std::vector<model::Config> configs = testing::tiny_configs();
  configs.push_back(testing::qwen3_0_6b());
  for (const model::Config& c : configs) {
    for (int64_t chunk : {0, 128}) {
      const TaskGraph tg = testing::build_tasks(ir::build(c), {.seq_len = 300, .kv_chunk = chunk});
      for (int workers : {1, 2, 7, 132, 133, int(tg.tasks.size()) + 5}) {
        SCOPED_TRACE(::testing::Message() << c.architecture << " chunk=" << chunk << " workers=" << workers);
        const Schedule s = schedule(tg, testing::with_workers(workers));
        expect_valid(tg, s, workers);
        // The list scheduler's estimate is the simulator's prediction for its queues.
        const SimResult sim = simulate(tg, s, CostModel{});
        EXPECT_FALSE(sim.deadlock);
        EXPECT_NEAR(sim.latency_s, s.predicted_s, 1e-12);
      }
    }
  }
}

// A wave of attention chunks that fits on the workers gets one chunk per worker: on the device
// each costs several microseconds after its events however little it reads, so two chunks on
// one worker put a second chunk's latency on the layer's critical path.
TEST(Schedule, AttentionChunksOfALayerOnDistinctWorkers) {
  for (const model::Config& c : {testing::qwen3_0_6b(), testing::qwen3_8b()}) {
    SCOPED_TRACE(c.architecture + " hidden " + std::to_string(c.hidden_size));
    const int workers = 132, splits = workers / c.num_kv_heads;
    const TaskGraph tg =
        testing::build_tasks(ir::build(c), {.seq_len = 512, .kv_splits = splits});
    const Schedule s = schedule(tg, testing::with_workers(workers));
    int doubled = 0;
    for (const Stage& st : tg.stages) {
      std::vector<int> per_worker(size_t(workers), 0);
      int chunks = 0;
      for (int id : st.tasks)
        if (tg.tasks[size_t(id)].kind == TaskKind::Attention) ++per_worker[size_t(s.worker[size_t(id)])], ++chunks;
      if (chunks == 0) continue;
      ASSERT_LE(chunks, workers);
      for (int n : per_worker) doubled += n > 1;
    }
    EXPECT_EQ(doubled, 0);
  }
}

TEST(Schedule, MoreWorkersThanTasksLeavesIdleWorkers) {
  const TaskGraph tg = testing::build_tasks(ir::build(testing::tiny_llama()), {.seq_len = 64});
  const int workers = int(tg.tasks.size()) + 5;
  const Schedule s = schedule(tg, testing::with_workers(workers));
  int empty = 0;
  for (const auto& q : s.queues) empty += q.empty();
  EXPECT_GE(empty, 5);
}

TEST(Schedule, UnfusedGraphAlsoSchedules) {
  const ir::Graph g = ir::build(testing::tiny_qwen3());
  const TaskGraph tg = testing::build_tasks(g, {.seq_len = 64}, testing::unfused());
  expect_valid(tg, schedule(tg, testing::with_workers(3)), 3);
}

TEST(Schedule, BadWorkerCount) {
  const TaskGraph tg = testing::build_tasks(ir::build(testing::tiny_qwen3()));
  EXPECT_THROW(schedule(tg, testing::with_workers(0)), Error);
}

TEST(Plan, Qwen3_8BAt132Workers) {
  const ir::Graph g = ir::build(testing::qwen3_8b());
  PlanOptions o;
  o.decompose.seq_len = 512;
  o.dump = "";
  const Plan p = plan(g, o);
  expect_valid(p.tasks, p.schedule, 132);
  EXPECT_EQ(p.tasks.total_weight_bytes(), testing::expected_weight_bytes(testing::qwen3_8b(), DType::BF16));
}

using testing::waited_triggers;

// With the merge as a stage of its own: merge h waits on head h's chunks, o_proj on the merges.
TEST(Plan, Qwen3_0_6BWithKvSplits) {
  const model::Config c = testing::qwen3_0_6b();
  PlanOptions o;
  o.decompose.seq_len = 512, o.decompose.kv_splits = 16;
  o.fuse.merge_into_attention = false;
  o.dump = "";
  const Plan p = plan(ir::build(c), o);
  expect_valid(p.tasks, p.schedule, 132);
  const TaskGraph& tg = p.tasks;
  int layers = 0;
  for (const Stage& s : tg.stages) {
    if (s.kind != TaskKind::AttentionMerge) continue;
    ++layers;
    const Stage& attn = tg.stages[size_t(&s - tg.stages.data() - 1)];
    const Stage& o_proj = tg.stages[size_t(&s - tg.stages.data() + 1)];
    ASSERT_EQ(attn.name, fmt::format("L{}.attn", s.layer));
    ASSERT_EQ(o_proj.name, fmt::format("L{}.attn_out", s.layer));
    ASSERT_EQ(attn.tasks.size(), 8u * 16);
    ASSERT_EQ(s.tasks.size(), 8u);
    for (int h = 0; h < 8; ++h) {
      const Task& m = tg.tasks[size_t(s.tasks[size_t(h)])];
      EXPECT_EQ(m.kv_head, h);
      std::vector<int> own;
      for (int a : attn.tasks)
        if (tg.tasks[size_t(a)].kv_head == h) own.push_back(a);
      ASSERT_EQ(own.size(), 16u);
      EXPECT_EQ(waited_triggers(tg, m), own) << m.name;
    }
    for (int id : o_proj.tasks) EXPECT_EQ(waited_triggers(tg, tg.tasks[size_t(id)]), s.tasks);
  }
  EXPECT_EQ(layers, c.num_layers);
}

// With the merges folded into the chunks (the default) the plan still validates, back-to-back
// steps included (the embedding is carried, so validate checks cross-step hazards).
TEST(Plan, Qwen3_0_6BWithMergesFolded) {
  const model::Config c = testing::qwen3_0_6b();
  PlanOptions o;
  o.decompose.seq_len = 512, o.decompose.kv_splits = 16;
  o.dump = "";
  const Plan p = plan(ir::build(c), o);
  expect_valid(p.tasks, p.schedule, 132);
  const auto& bufs = p.tasks.buffers;
  EXPECT_TRUE(std::any_of(bufs.begin(), bufs.end(), [](const Buffer& b) { return b.carried; }));
  int merging = 0;
  for (const Task& t : p.tasks.tasks) {
    EXPECT_NE(t.kind, TaskKind::AttentionMerge) << t.name;
    merging += t.merges;
  }
  EXPECT_EQ(merging, c.num_layers * 8 * 16);
}

TEST(Plan, WorkerCountsAndOptions) {
  const ir::Graph g = ir::build(testing::tiny_qwen2());
  for (int workers : {1, 7, 132}) {
    PlanOptions o;
    o.schedule.num_workers = workers;
    o.decompose.seq_len = 200, o.decompose.kv_chunk = 64;
    o.dump = "";
    const Plan p = plan(g, o);
    expect_valid(p.tasks, p.schedule, workers);
  }
  PlanOptions bad;
  bad.schedule.num_workers = -1;
  bad.dump = "";
  EXPECT_THROW(plan(g, bad), Error);
}

}  // namespace
}  // namespace mpk::sched
