// The host fallback without a device: a model whose MLP activation (gelu_pytorch_tanh) no
// megakernel variant implements gets its activation tasks run on the host, between launches
// over segments of the queues. Checked here: which tasks go to the host, that the segments
// hold every device task once in each worker's schedule order, that workers running each
// segment's queues with blocking waits (after the earlier segments and host tasks) never get
// stuck, the host's share of a step, and the host's op against the reference's kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <set>
#include <vector>

#include "base/error.h"
#include "ir/builder.h"
#include "model_configs.h"
#include "ref/kernels.h"
#include "runtime/host_ops.h"
#include "runtime/megakernel.h"

namespace mpk::rt {
namespace {

model::Config gelu_config(model::Config c) {
  c.hidden_act = model::Activation::GeluTanh;
  return c;
}

struct Built {
  ir::Graph g;
  sched::Plan plan;
  MemoryPlan mem;
  MegakernelTables t;
};

Built build(const model::Config& c, int workers) {
  Built b;
  b.g = ir::build(c, DType::BF16);
  b.plan = sched::plan(b.g, megakernel_plan_options(b.g, workers, 64));
  b.mem = plan_memory(b.g, b.plan.tasks, DType::BF16, 64);
  b.t = build_tables(b.g, b.plan, b.mem, SegmentBases{});
  return b;
}

// Runs the step as the device and the host would: segment by segment, every worker's queue
// with blocking waits (a task starts once every trigger of each event it waits on has run),
// then the host tasks that follow the segment. Returns the tasks in the order they ran, or
// an empty list when the workers get stuck or a host task's input is not ready.
std::vector<int> run_step(const sched::TaskGraph& tg, const MegakernelTables& t) {
  std::vector<bool> done(tg.tasks.size(), false);
  std::vector<int> ran;
  auto ready = [&](int id) {
    for (int e : tg.tasks[size_t(id)].waits)
      for (int p : tg.events[size_t(e)].triggers)
        if (!done[size_t(p)]) return false;
    return true;
  };
  const size_t w1 = size_t(t.num_workers) + 1;
  for (int s = 0; s < t.num_segments; ++s) {
    std::vector<std::deque<int>> q(size_t(t.num_workers));
    for (size_t w = 0; w < q.size(); ++w)
      for (int i = t.queue_begin[size_t(s) * w1 + w]; i < t.queue_begin[size_t(s) * w1 + w + 1]; ++i)
        q[w].push_back(t.queue[size_t(i)]);
    for (bool moved = true; moved;) {
      moved = false;
      for (auto& wq : q)
        while (!wq.empty() && ready(wq.front())) {
          done[size_t(wq.front())] = true;
          ran.push_back(wq.front());
          wq.pop_front();
          moved = true;
        }
    }
    for (const auto& wq : q)
      if (!wq.empty()) return {};  // stuck inside the segment
    for (size_t h = 0; h < t.host_tasks.size(); ++h) {
      if (t.host_after[h] != s) continue;
      if (!ready(t.host_tasks[h])) return {};
      done[size_t(t.host_tasks[h])] = true;
      ran.push_back(t.host_tasks[h]);
    }
  }
  return ran;
}

class HostFallbackTables : public ::testing::TestWithParam<int> {};

TEST_P(HostFallbackTables, TheActivationRunsOnTheHostBetweenSegments) {
  const int workers = GetParam();
  for (const model::Config& base : mpk::testing::tiny_configs()) {
    const model::Config c = gelu_config(base);
    SCOPED_TRACE(c.architecture);
    const Built b = build(c, workers);
    const sched::TaskGraph& tg = b.plan.tasks;
    const MegakernelTables& t = b.t;
    // One host task a layer, each the layer's gelu_tanh_mul alone.
    ASSERT_EQ(t.host_tasks.size(), size_t(c.num_layers));
    ASSERT_EQ(t.host_after.size(), t.host_tasks.size());
    for (int id : t.host_tasks) {
      const sched::Task& task = tg.tasks[size_t(id)];
      ASSERT_EQ(task.ops.size(), 1u) << task.name;
      EXPECT_EQ(task.ops[0].kind, ir::OpKind::GeluTanhMul) << task.name;
      EXPECT_EQ(t.tasks[size_t(id)].kind, MPK_MK_HOST);
      EXPECT_EQ(t.tasks[size_t(id)].variant, -1);
      EXPECT_GE(task.trigger, 0) << "the down projection waits on it";
    }
    // Each layer's activation cuts the step: layers + 1 launches, the host's ops in order.
    EXPECT_EQ(t.num_segments, c.num_layers + 1);
    for (size_t h = 0; h < t.host_after.size(); ++h) EXPECT_EQ(t.host_after[h], int(h));
    ASSERT_EQ(t.queue_begin.size(), size_t(t.num_segments) * size_t(workers + 1));
    EXPECT_GE(t.argmax_event, 0);
    // Every device task once; no host task in a queue; each worker's tasks of a segment in
    // the schedule's order.
    std::multiset<int> queued(t.queue.begin(), t.queue.end());
    const std::set<int> host(t.host_tasks.begin(), t.host_tasks.end());
    for (const sched::Task& task : tg.tasks)
      EXPECT_EQ(queued.count(task.id), host.count(task.id) ? 0u : 1u) << task.name;
    for (int s = 0; s < t.num_segments; ++s)
      for (int w = 0; w < workers; ++w) {
        const size_t k = size_t(s) * size_t(workers + 1) + size_t(w);
        const std::vector<int>& order = b.plan.schedule.queues[size_t(w)];
        size_t pos = 0;
        for (int i = t.queue_begin[k]; i < t.queue_begin[k + 1]; ++i) {
          while (pos < order.size() && order[pos] != t.queue[size_t(i)]) ++pos;
          ASSERT_LT(pos, order.size()) << "segment " << s << " worker " << w << ": out of schedule order";
        }
      }
    // The step runs to its end, every task once.
    const std::vector<int> ran = run_step(tg, t);
    ASSERT_EQ(ran.size(), tg.tasks.size()) << "stuck";
    // The descriptors the device gets: the queued tasks only.
    for (const MkTask& d : t.device_tasks()) EXPECT_NE(d.kind, MPK_MK_HOST);
    // Each segment but the last: gate and up down, the product and its event's counter back,
    // laid out after the first bytes, 16-byte aligned, apart.
    const std::vector<HostSegment> hs = host_segments(b.g, tg, b.mem, t, 32);
    ASSERT_EQ(hs.size(), size_t(t.num_segments));
    for (size_t s = 0; s < hs.size(); ++s) {
      const size_t n = s + 1 < hs.size() ? 1 : 0;
      ASSERT_EQ(hs[s].ops.size(), n) << s;
      ASSERT_EQ(hs[s].down.size(), 2 * n);
      ASSERT_EQ(hs[s].up.size(), n);
      ASSERT_EQ(hs[s].counters.size(), n);
      if (n == 0) continue;
      const ir::Op& op = b.g.ops[size_t(hs[s].ops[0])];
      EXPECT_EQ(hs[s].counters[0], (std::pair<int, uint32_t>{tg.tasks[size_t(t.host_tasks[s])].trigger, 1u}));
      size_t end = 32;
      for (const HostSegment::Copy* cp : {&hs[s].down[0], &hs[s].down[1], &hs[s].up[0]}) {
        EXPECT_EQ(cp->at, end);
        EXPECT_EQ(cp->bytes, size_t(c.intermediate_size) * 4);
        end += (cp->bytes + 15) / 16 * 16;
      }
      EXPECT_EQ(hs[s].down[0].offset, size_t(b.mem.buffer_offset[size_t(op.inputs[0])]));
      EXPECT_EQ(hs[s].up[0].offset, size_t(b.mem.buffer_offset[size_t(op.output)]));
      EXPECT_EQ(hs[s].counters_at, end);
      EXPECT_EQ(hs[s].end, end + 4);
    }
    // The host's share of a step: gate, up down and the product back, per layer.
    const HostFallback hf = host_fallback(hs);
    EXPECT_EQ(hf.ops, uint64_t(c.num_layers));
    EXPECT_EQ(hf.bytes, uint64_t(c.num_layers) * 3 * uint64_t(c.intermediate_size) * 4);
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, HostFallbackTables, ::testing::Values(8, 132));

// A model the kernel runs whole: one segment, nothing on the host, the layout as before.
TEST(HostFallback, SiluModelsKeepOneSegment) {
  for (const model::Config& c : mpk::testing::tiny_configs()) {
    const Built b = build(c, 16);
    EXPECT_EQ(b.t.num_segments, 1) << c.architecture;
    EXPECT_TRUE(b.t.host_tasks.empty());
    EXPECT_EQ(b.t.queue_begin.size(), 17u);
    EXPECT_EQ(b.t.queue.size(), b.plan.tasks.tasks.size());
    EXPECT_EQ(host_fallback(host_segments(b.g, b.plan.tasks, b.mem, b.t)).ops, 0u);
    EXPECT_EQ(run_step(b.plan.tasks, b.t).size(), b.plan.tasks.tasks.size());
  }
}

// The host's op is the reference's kernel; an op the fallback does not run is refused.
TEST(HostFallback, RunsTheReferencesKernels) {
  const ir::Graph g = ir::build(gelu_config(mpk::testing::tiny_qwen3()), DType::BF16);
  const ir::Op* gelu = nullptr;
  const ir::Op* norm = nullptr;
  for (const ir::Op& op : g.ops) {
    if (op.kind == ir::OpKind::GeluTanhMul && !gelu) gelu = &op;
    if (op.kind == ir::OpKind::RmsNorm && !norm) norm = &op;
  }
  ASSERT_TRUE(gelu && norm);
  const size_t n = 176;
  std::vector<std::vector<float>> in(2, std::vector<float>(n));
  for (size_t i = 0; i < n; ++i) in[0][i] = float(i) / 16 - 5.0f, in[1][i] = 1.5f - float(i) / 64;
  std::vector<float> out(n, std::nanf("")), want(n);
  const std::vector<const float*> ptrs = {in[0].data(), in[1].data()};
  run_host_op(*gelu, ptrs, int64_t(n), out.data());
  ref::gelu_tanh_mul(in[0].data(), in[1].data(), int64_t(n), want.data());
  EXPECT_EQ(out, want);
  EXPECT_FALSE(host_runs(ir::OpKind::RmsNorm));
  EXPECT_FALSE(host_runs(ir::OpKind::Attention));
  EXPECT_TRUE(host_runs(ir::OpKind::GeluTanhMul));
  EXPECT_THROW(run_host_op(*norm, ptrs, int64_t(n), out.data()), Error);
  EXPECT_THROW(run_host_op(*gelu, {ptrs[0]}, int64_t(n), out.data()), Error);
}

}  // namespace
}  // namespace mpk::rt
