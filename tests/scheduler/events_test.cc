// events: each task waits on exactly the producer tiles it reads (less those implied by
// another wait), events are shared by producers with the same consumers, need = triggers.
#include "scheduler/events.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include "configs.h"

namespace mpk::sched {
namespace {

using testing::build_tasks;

std::vector<int> waited_triggers(const TaskGraph& tg, const Task& t) {
  std::set<int> s;
  for (int e : t.waits)
    for (int p : tg.events[size_t(e)].triggers) s.insert(p);
  return {s.begin(), s.end()};
}

std::vector<int> stage_tasks(const TaskGraph& tg, const std::string& name) {
  for (const Stage& s : tg.stages)
    if (s.name == name) return s.tasks;
  ADD_FAILURE() << "no stage " << name;
  return {};
}

bool overlaps(int64_t b0, int64_t e0, int64_t b1, int64_t e1) { return b0 < e1 && b1 < e0; }

TEST(Events, NeedsTriggersAndWaitersAgree) {
  for (const model::Config& c : testing::tiny_configs()) {
    const TaskGraph tg = build_tasks(ir::build(c), {.seq_len = 100, .kv_chunk = 30});
    std::vector<int> triggers(tg.events.size(), 0);
    for (const Task& t : tg.tasks) {
      if (t.trigger >= 0) ++triggers[size_t(t.trigger)];
      for (int e : t.waits) {
        const auto& w = tg.events[size_t(e)].waiters;
        EXPECT_TRUE(std::find(w.begin(), w.end(), t.id) != w.end());
        for (int p : tg.events[size_t(e)].triggers) EXPECT_LT(p, t.id);  // ids topological
      }
    }
    for (const Event& e : tg.events) {
      EXPECT_EQ(e.need, triggers[size_t(e.id)]) << e.name;
      EXPECT_EQ(e.need, int(e.triggers.size())) << e.name;
      EXPECT_FALSE(e.waiters.empty()) << e.name;
    }
    // Only the final task has no consumer in the step.
    for (const Task& t : tg.tasks) EXPECT_EQ(t.trigger < 0, t.id == int(tg.tasks.size()) - 1) << t.name;
  }
}

// Every element a task reads was written by an ancestor (through events), or is carried from
// the previous step and its writer is a descendant of the reader.
TEST(Events, EveryReadIsOrderedAfterItsWriter) {
  for (const model::Config& c : testing::tiny_configs())
    for (int64_t chunk : {0, 30}) {
      const TaskGraph tg = build_tasks(ir::build(c), {.seq_len = 100, .kv_chunk = chunk, .tile_rows = 16});
      const auto anc = testing::ancestors(tg);
      for (const Task& r : tg.tasks)
        for (const Access& a : r.reads)
          for (const Task& w : tg.tasks)
            for (const Access& b : w.writes) {
              if (a.buffer != b.buffer || !overlaps(a.begin, a.end, b.begin, b.end)) continue;
              if (tg.buffers[size_t(a.buffer)].carried)
                EXPECT_TRUE(anc[size_t(w.id)][size_t(r.id)]) << r.name << " / " << w.name;
              else
                EXPECT_TRUE(anc[size_t(r.id)][size_t(w.id)]) << r.name << " reads from " << w.name;
            }
    }
}

TEST(Events, Qwen3_8BWaits) {
  const model::Config c = testing::qwen3_8b();
  const ir::Graph g = ir::build(c);
  const TaskGraph tg = build_tasks(g, {.seq_len = 512});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("L{}.", l);
    const auto qkv = stage_tasks(tg, p + "qkv"), attn = stage_tasks(tg, p + "attn"),
               o = stage_tasks(tg, p + "attn_out"), gate_up = stage_tasks(tg, p + "gate_up"),
               down = stage_tasks(tg, p + "mlp_out");
    // qkv reads the whole residual stream: all down tiles of the previous layer, one event.
    for (int id : qkv) {
      const Task& t = tg.tasks[size_t(id)];
      if (l == 0) {
        EXPECT_TRUE(t.waits.empty());
      } else {
        EXPECT_EQ(waited_triggers(tg, t), stage_tasks(tg, fmt::format("L{}.mlp_out", l - 1)));
        EXPECT_EQ(t.waits.size(), 1u);
      }
    }
    // Attention for KV head h: the qkv tiles covering its 4 query heads and its k and v rows.
    for (int id : attn) {
      const Task& t = tg.tasks[size_t(id)];
      const int64_t h = t.kv_head, d = 128;
      std::vector<int> expected;
      for (int q : qkv) {
        const Task& tile = tg.tasks[size_t(q)];
        const int64_t b = tile.row_begin, e = tile.row_end;
        if (overlaps(b, e, h * 4 * d, (h + 1) * 4 * d) ||
            overlaps(b, e, 4096 + h * d, 4096 + (h + 1) * d) ||
            overlaps(b, e, 5120 + h * d, 5120 + (h + 1) * d))
          expected.push_back(q);
      }
      EXPECT_EQ(waited_triggers(tg, t), expected) << t.name;
      EXPECT_LE(expected.size(), 20u);  // 512 q rows + 2 x 128 rows in 48-row tiles
    }
    for (int id : o) EXPECT_EQ(waited_triggers(tg, tg.tasks[size_t(id)]), attn);
    for (int id : gate_up) EXPECT_EQ(waited_triggers(tg, tg.tasks[size_t(id)]), o);
    // down reads all of silu(gate) * up: every gate_up tile; its residual rows come from o_proj
    // tiles that every gate_up tile already waited for.
    for (int id : down) {
      EXPECT_EQ(waited_triggers(tg, tg.tasks[size_t(id)]), gate_up);
      EXPECT_EQ(tg.tasks[size_t(id)].waits.size(), 1u);
    }
  }
  const auto head = stage_tasks(tg, "lm_head");
  for (int id : head) EXPECT_EQ(waited_triggers(tg, tg.tasks[size_t(id)]), stage_tasks(tg, "L35.mlp_out"));
  EXPECT_EQ(waited_triggers(tg, tg.tasks.back()), head);
  EXPECT_EQ(tg.tasks.back().waits.size(), 1u);
  EXPECT_EQ(tg.events[size_t(tg.tasks.back().waits[0])].need, int(head.size()));
}

TEST(Events, ChunkedAttentionMergeWaitsOnItsChunks) {
  const ir::Graph g = ir::build(testing::qwen3_0_6b());
  const TaskGraph tg = build_tasks(g, {.seq_len = 4096, .kv_chunk = 1024});
  const auto attn = stage_tasks(tg, "L3.attn"), merge = stage_tasks(tg, "L3.attn_merge");
  ASSERT_EQ(attn.size(), 32u);
  ASSERT_EQ(merge.size(), 8u);
  for (int id : merge) {
    const Task& m = tg.tasks[size_t(id)];
    std::vector<int> expected;
    for (int a : attn)
      if (tg.tasks[size_t(a)].kv_head == m.kv_head) expected.push_back(a);
    EXPECT_EQ(waited_triggers(tg, m), expected);
  }
  for (int id : stage_tasks(tg, "L3.attn_out")) EXPECT_EQ(waited_triggers(tg, tg.tasks[size_t(id)]), merge);
}

}  // namespace
}  // namespace mpk::sched
