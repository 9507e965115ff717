// simulate: a chain costs the sum of its parts, prefetch overlaps waits, more workers never
// hurt without a bandwidth limit, and the Qwen3-8B step lands near the bytes bound.
#include "scheduler/simulate.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>

#include "configs.h"
#include "scheduler/events.h"
#include "scheduler/schedule.h"

namespace mpk::sched {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// n tasks, each reading what the previous one wrote.
TaskGraph chain(int n, int64_t weight_bytes, double flops) {
  TaskGraph tg;
  for (int i = 0; i <= n; ++i) tg.buffers.push_back({fmt::format("b{}", i), DType::F32, 1, -1, false});
  tg.stages.push_back({"chain", TaskKind::Vector, -1, 1, 0, {}});
  for (int i = 0; i < n; ++i) {
    Task t;
    t.id = i, t.stage = 0, t.tile = i, t.name = fmt::format("c{}", i);
    t.weight_bytes = weight_bytes, t.flops = flops;
    t.reads = {{i, 0, 1}};
    t.writes = {{i + 1, 0, 1}};
    tg.stages[0].tasks.push_back(i);
    tg.tasks.push_back(t);
  }
  return build_events(std::move(tg));
}

CostModel simple_cost() {
  CostModel c;
  c.num_sms = 4;
  c.read_bytes_per_s = 4e9;  // 1 GB/s per SM
  c.l2_bytes_per_s = kInf;
  c.flops_per_s_per_sm = 1e9;
  c.task_overhead_s = 1e-6;
  c.event_latency_s = 0;
  c.post_event_latency_s = 0;
  c.prefetch_bytes = kInf;  // every byte may stream before the events
  return c;
}

TEST(Simulate, ChainIsTheSumOfItsCosts) {
  const TaskGraph tg = chain(5, 1000, 2000);  // 1 us overhead + 1 us bytes + 2 us flops
  const CostModel cost = simple_cost();
  for (int workers : {1, 2, 4}) {
    Schedule s;
    s.num_workers = workers;
    s.queues.assign(size_t(workers), {});
    for (int i = 0; i < 5; ++i) s.queues[size_t(i % workers)].push_back(i), s.order.push_back(i);
    const SimResult r = simulate(tg, s, cost);
    ASSERT_FALSE(r.deadlock);
    if (workers == 1) {
      EXPECT_NEAR(r.latency_s, 5 * 4e-6, 1e-12);
      EXPECT_NEAR(r.busy_fraction[0], 1.0, 1e-9);
    } else {
      // Every task but the first loads its weights while its predecessor computes.
      EXPECT_NEAR(r.latency_s, 2e-6 + 5 * 2e-6, 1e-12);
    }
    EXPECT_EQ(r.critical_path, (std::vector<int>{0, 1, 2, 3, 4}));
  }
  // On one worker the next task's weight loads hide the event latency; without weights and
  // overhead it adds up.
  CostModel late = cost;
  late.event_latency_s = 0.5e-6;
  Schedule one{1, {0, 1, 2, 3, 4}, {{0, 1, 2, 3, 4}}, {0, 0, 0, 0, 0}, 0};
  EXPECT_NEAR(simulate(tg, one, late).latency_s, 5 * 4e-6, 1e-12);
  late.task_overhead_s = 0;
  EXPECT_NEAR(simulate(chain(5, 0, 2000), one, late).latency_s, 5 * 2e-6 + 4 * 0.5e-6, 1e-12);
}

TEST(Simulate, TimingsAreConsistent) {
  const TaskGraph tg = testing::build_tasks(ir::build(testing::tiny_qwen3()), {.seq_len = 200, .kv_chunk = 64});
  const CostModel cost;
  const Schedule s = schedule(tg, {.num_workers = 5, .cost = cost});
  const SimResult r = simulate(tg, s, cost);
  ASSERT_FALSE(r.deadlock);
  for (const Task& t : tg.tasks) {
    const TaskTiming& tm = r.tasks[size_t(t.id)];
    const TaskCost c = task_cost(t, cost, 5);
    EXPECT_EQ(tm.worker, s.worker[size_t(t.id)]);
    EXPECT_NEAR(tm.compute_start, std::max(tm.start + c.prefetch_s, tm.ready), 1e-15);
    EXPECT_NEAR(tm.end, tm.compute_start + c.compute_s, 1e-15);
    for (int e : t.waits)
      for (int p : tg.events[size_t(e)].triggers)
        EXPECT_GE(tm.compute_start + 1e-15, r.tasks[size_t(p)].end + cost.event_latency_s);
  }
  for (const auto& q : s.queues)
    for (size_t i = 1; i < q.size(); ++i)
      EXPECT_GE(r.tasks[size_t(q[i])].start + 1e-15, r.tasks[size_t(q[i - 1])].end);
  // The critical path runs from time 0 to the end, each step bound by a worker or an event.
  ASSERT_FALSE(r.critical_path.empty());
  EXPECT_NEAR(r.tasks[size_t(r.critical_path.back())].end, r.latency_s, 1e-15);
  EXPECT_NEAR(r.tasks[size_t(r.critical_path.front())].start, 0.0, 1e-15);
  for (double b : r.busy_fraction) {
    EXPECT_GE(b, 0.0);
    EXPECT_LE(b, 1.0 + 1e-9);
  }
}

// One step: waits for the previous step are met at time 0, and the event the final task
// triggers for the next step (no waiter in this one) holds nothing up.
TEST(Simulate, PrevWaitsAreReadyAtTheStart) {
  const TaskGraph tg = testing::build_tasks(ir::build(testing::tiny_llama()), {.seq_len = 64});
  ASSERT_GE(tg.tasks.back().trigger, 0);
  const CostModel cost;
  const Schedule s = schedule(tg, {.num_workers = 4, .cost = cost});
  const SimResult r = simulate(tg, s, cost);
  ASSERT_FALSE(r.deadlock);
  EXPECT_NEAR(r.latency_s, s.predicted_s, 1e-12);
  EXPECT_EQ(r.critical_path.back(), tg.tasks.back().id);
  int gated = 0;
  for (const Task& t : tg.tasks) {
    if (t.waits_prev.empty()) continue;
    ++gated;
    if (t.waits.empty()) {
      EXPECT_EQ(r.tasks[size_t(t.id)].ready, 0.0) << t.name;
    }
  }
  EXPECT_GT(gated, 0);
}

TEST(Simulate, MoreWorkersNeverSlowerWithoutBandwidthLimit) {
  CostModel cost;
  cost.read_bytes_per_s = kInf, cost.l2_bytes_per_s = kInf;
  cost.num_sms = 1 << 20;  // no sharing of SMs either
  for (const model::Config& c : {testing::tiny_qwen3(), testing::tiny_llama(), testing::qwen3_0_6b()}) {
    const TaskGraph tg = testing::build_tasks(ir::build(c), {.seq_len = 300, .kv_chunk = 128});
    double previous = kInf;
    for (int workers : {1, 2, 3, 4, 7, 8, 16, 33, 64, 132, 200, 1000}) {
      const Schedule s = schedule(tg, {.num_workers = workers, .cost = cost});
      const double latency = simulate(tg, s, cost).latency_s;
      EXPECT_LE(latency, previous * (1 + 1e-12)) << c.architecture << " workers=" << workers;
      previous = latency;
    }
  }
}

TEST(Simulate, Qwen3_8BNearTheBytesBound) {
  const model::Config c = testing::qwen3_8b();
  // The megakernel's plan: attention in 16 KV chunks per head with the merge folded in.
  const TaskGraph tg = testing::build_tasks(ir::build(c), {.seq_len = 512, .kv_splits = 16});
  const CostModel cost;
  const Schedule s = schedule(tg, {.num_workers = 132, .cost = cost});
  const SimResult r = simulate(tg, s, cost);
  ASSERT_FALSE(r.deadlock);
  // Linears have 128 tiles for 132 SMs; the flops run after the activations arrive; every
  // dependent wave pays the task overhead, the event latency and the post-event latency once.
  const double waves = 5.0 * c.num_layers + 2;
  const double slack =
      waves * (cost.task_overhead_s + cost.event_latency_s + cost.post_event_latency_s);
  const double flops_s = tg.total_flops() / (cost.flops_per_s_per_sm * 132);
  EXPECT_GE(r.latency_s, r.bytes_bound_s);
  EXPECT_LE(r.latency_s, (r.bytes_bound_s + flops_s) * 132.0 / 128.0 + slack);
  EXPECT_LE(r.latency_s, 1.35 * r.bytes_bound_s);  // 1.32 with the default cost model
  std::printf("qwen3-8b @132: %.3f ms predicted, bytes bound %.3f ms, flops %.3f ms, %zu tasks, "
              "%zu events, critical path %zu tasks\n",
              r.latency_s * 1e3, r.bytes_bound_s * 1e3, flops_s * 1e3, tg.tasks.size(),
              tg.events.size(), r.critical_path.size());
}

TEST(Simulate, Qwen3_0_6BPrediction) {
  const TaskGraph tg =
      testing::build_tasks(ir::build(testing::qwen3_0_6b()), {.seq_len = 512, .kv_splits = 16});
  const CostModel cost;
  const SimResult r = simulate(tg, schedule(tg, {.num_workers = 132, .cost = cost}), cost);
  ASSERT_FALSE(r.deadlock);
  EXPECT_GE(r.latency_s, r.bytes_bound_s);
  std::printf("qwen3-0.6b @132: %.3f ms predicted, bytes bound %.3f ms, %zu tasks, %zu events\n",
              r.latency_s * 1e3, r.bytes_bound_s * 1e3, tg.tasks.size(), tg.events.size());
}

TEST(Simulate, DeadlockIsReported) {
  const TaskGraph tg = chain(3, 0, 1);
  Schedule s{2, {0, 1, 2}, {{2}, {1, 0}}, {1, 1, 0}, 0};  // worker 1 runs 1 before 0
  const SimResult r = simulate(tg, s, CostModel{});
  EXPECT_TRUE(r.deadlock);
  EXPECT_EQ(r.stuck, (std::vector<int>{2, 1}));
}

}  // namespace
}  // namespace mpk::sched
