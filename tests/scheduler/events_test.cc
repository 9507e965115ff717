// events: each task waits on exactly the producer tiles it reads (less those implied by
// another wait), events are shared by producers with the same consumers, need = triggers.
#include "scheduler/events.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
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
      EXPECT_FALSE(e.waiters.empty() && e.prev_waiters.empty()) << e.name;
      for (int w : e.prev_waiters) {
        const auto& p = tg.tasks[size_t(w)].waits_prev;
        EXPECT_TRUE(std::find(p.begin(), p.end(), e.id) != p.end()) << e.name;
      }
    }
    // Every task has a consumer: in the step, or (the final task) in the next one.
    for (const Task& t : tg.tasks) EXPECT_GE(t.trigger, 0) << t.name;
  }
}

// The final task writes the next step's embedding: it triggers an event of its own, and the
// embedding's readers (layer 0's qkv tiles and its residual epilogue) wait on it for the
// previous step, and on nothing else.
TEST(Events, CarriedEmbeddingWaitsForThePreviousStep) {
  for (const model::Config& c : testing::tiny_configs()) {
    SCOPED_TRACE(c.architecture);
    const ir::Graph g = ir::build(c);
    const TaskGraph tg = build_tasks(g, {.seq_len = 100, .kv_chunk = 30});
    const int embed = g.find_tensor("embed");
    ASSERT_TRUE(tg.buffers[size_t(embed)].carried);
    const Task& last = tg.tasks.back();
    ASSERT_GE(last.trigger, 0);
    const Event& e = tg.events[size_t(last.trigger)];
    EXPECT_EQ(e.triggers, std::vector<int>{last.id});
    EXPECT_EQ(e.need, 1);
    EXPECT_TRUE(e.waiters.empty());
    std::vector<int> readers;
    for (const Task& t : tg.tasks) {
      const bool reads = std::any_of(t.reads.begin(), t.reads.end(), [&](const Access& a) { return a.buffer == embed; });
      if (reads) readers.push_back(t.id);
      EXPECT_EQ(t.waits_prev, reads ? std::vector<int>{e.id} : std::vector<int>{}) << t.name;
    }
    EXPECT_EQ(e.prev_waiters, readers);
    std::vector<int> expected = stage_tasks(tg, "L0.qkv");
    for (int id : stage_tasks(tg, "L0.attn_out")) expected.push_back(id);
    EXPECT_EQ(readers, expected);
  }
  // Without the fusion nothing is carried: the host writes the token before each step.
  FuseOptions unfused;
  unfused.embedding_into_argmax = false;
  const TaskGraph tg = build_tasks(ir::build(testing::tiny_qwen3()), {}, unfused);
  for (const Task& t : tg.tasks) EXPECT_TRUE(t.waits_prev.empty()) << t.name;
  EXPECT_EQ(tg.tasks.back().trigger, -1);
}

// A writer of a carried buffer that already triggers an event keeps it (a task triggers one
// event); a writer without one gets a fresh event. Needs stay the number of triggering tasks.
TEST(Events, CarriedWritersReuseOrGetAnEvent) {
  TaskGraph tg;
  for (const char* name : {"carried", "x", "y", "z"}) tg.buffers.push_back({name, DType::F32, 4, -1, false});
  tg.buffers[0].carried = true;
  tg.stages.push_back({"s", TaskKind::Vector, -1, 4, 0, {}});
  auto add = [&](std::vector<Access> reads, std::vector<Access> writes) {
    Task t;
    t.id = int(tg.tasks.size()), t.stage = 0, t.tile = t.id, t.name = fmt::format("t{}", t.id);
    t.reads = std::move(reads), t.writes = std::move(writes);
    tg.stages[0].tasks.push_back(t.id);
    tg.tasks.push_back(std::move(t));
  };
  add({{0, 0, 4}}, {{1, 0, 4}});             // t0: carried -> x
  add({{0, 2, 4}, {1, 0, 4}}, {{2, 0, 4}});  // t1: carried[2, 4), x -> y
  add({{2, 0, 4}}, {{0, 0, 2}, {3, 0, 4}});  // t2: y -> carried[0, 2), z
  add({{3, 0, 4}}, {{0, 2, 4}});             // t3: z -> carried[2, 4)
  tg = build_events(std::move(tg));
  ASSERT_EQ(tg.events.size(), 4u);  // one per task: t0 -> t1 -> t2 -> t3 -> the next step
  const int reused = tg.tasks[2].trigger, fresh = tg.tasks[3].trigger;
  EXPECT_EQ(tg.events[size_t(reused)].waiters, std::vector<int>{3});
  EXPECT_TRUE(tg.events[size_t(fresh)].waiters.empty());
  for (const Event& e : tg.events) {
    EXPECT_EQ(e.need, 1) << e.name;
    EXPECT_EQ(e.triggers.size(), 1u) << e.name;
  }
  // A reader waits for every writer of the buffer, also those of the elements it does not read.
  const std::vector<int> both = {std::min(reused, fresh), std::max(reused, fresh)};
  EXPECT_EQ(tg.tasks[0].waits_prev, both);
  EXPECT_EQ(tg.tasks[1].waits_prev, both);
  EXPECT_TRUE(tg.tasks[2].waits_prev.empty());
  EXPECT_TRUE(tg.tasks[3].waits_prev.empty());
  EXPECT_EQ(tg.events[size_t(fresh)].prev_waiters, (std::vector<int>{0, 1}));
  EXPECT_EQ(tg.events[size_t(reused)].prev_waiters, (std::vector<int>{0, 1}));
  EXPECT_EQ(tg.tasks[1].waits, std::vector<int>{tg.tasks[0].trigger});  // carried reads: no same-step wait
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
  const TaskGraph tg =
      build_tasks(g, {.seq_len = 4096, .kv_chunk = 1024}, {.merge_into_attention = false});
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

// With the merge folded into the chunks, whichever chunk of a head finishes last writes the
// head's output: every o_proj tile waits on every chunk of every head, directly.
TEST(Events, FoldedMergeOProjWaitsOnEveryChunk) {
  const model::Config c = testing::qwen3_0_6b();
  const TaskGraph tg = build_tasks(ir::build(c), {.seq_len = 512, .kv_splits = 16});
  for (int l = 0; l < c.num_layers; ++l) {
    const auto attn = stage_tasks(tg, fmt::format("L{}.attn", l));
    ASSERT_EQ(attn.size(), 8u * 16);
    for (int id : stage_tasks(tg, fmt::format("L{}.attn_out", l))) {
      const Task& t = tg.tasks[size_t(id)];
      const std::vector<int> w = waited_triggers(tg, t);
      EXPECT_TRUE(std::includes(w.begin(), w.end(), attn.begin(), attn.end())) << t.name;
    }
  }
}

}  // namespace
}  // namespace mpk::sched
