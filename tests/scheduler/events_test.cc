// events: each task waits on exactly the producer tiles it reads (less those implied by
// another wait), events are shared by producers with the same consumers, need = triggers.
#include "scheduler/events.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "configs.h"

namespace mpk::sched {
namespace {

using testing::build_tasks;

using testing::waited_triggers;

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

// Reads the same-step waits leave unordered, as "reader <- writer" lines. A task reading a
// range of a buffer that is not carried runs after every task writing an overlapping range
// (the writer is its ancestor); a task reading a carried buffer reads the previous step's
// value, so the writer runs after it (the reader is the writer's ancestor). The writes are the
// run-time ones: a chunk that merges (Task::merges) may be its head's last to arrive and then
// writes all of its head's output, so it counts as writing, in every buffer that a merging
// chunk of its head writes, the hull of those chunks' writes.
std::vector<std::string> unordered_reads(const TaskGraph& tg) {
  const testing::Ancestors anc(tg);
  std::map<std::pair<int, int>, std::map<int, Access>> hulls;  // (layer, KV head) -> buffer -> hull
  for (const Task& t : tg.tasks)
    if (t.merges)
      for (const Access& w : t.writes) {
        auto [it, fresh] = hulls[{t.layer, t.kv_head}].try_emplace(w.buffer, w);
        it->second.begin = std::min(it->second.begin, w.begin);
        it->second.end = std::max(it->second.end, w.end);
      }
  std::vector<std::vector<std::pair<int, Access>>> writers(tg.buffers.size());
  for (const Task& t : tg.tasks)
    if (t.merges) {
      for (const auto& [buffer, w] : hulls.at({t.layer, t.kv_head}))
        writers[size_t(buffer)].push_back({t.id, w});
    } else {
      for (const Access& w : t.writes) writers[size_t(w.buffer)].push_back({t.id, w});
    }
  std::vector<std::string> bad;
  for (const Task& r : tg.tasks)
    for (const Access& a : r.reads)
      for (const auto& [w, b] : writers[size_t(a.buffer)]) {
        if (!overlaps(a.begin, a.end, b.begin, b.end)) continue;
        const bool carried = tg.buffers[size_t(a.buffer)].carried;
        if (carried ? !anc(w, r.id) : !anc(r.id, w))
          bad.push_back(fmt::format("{} <- {} ({}{})", r.name, tg.tasks[size_t(w)].name,
                                    tg.buffers[size_t(a.buffer)].name, carried ? ", carried" : ""));
      }
  return bad;
}

// Every read of the step's plans is ordered after its writers: the tiny fixtures' shapes and
// Qwen3-0.6B, attention unsplit, in fixed chunks and in kv_splits = 16 chunks, the merges
// folded into the chunks (the default) or kept as tasks.
TEST(Events, EveryReadIsOrderedAfterItsWriter) {
  struct Variant {
    const char* name;
    DecomposeOptions d;
    bool fold;
  };
  std::vector<std::pair<model::Config, std::vector<Variant>>> plans;
  for (const model::Config& c : testing::tiny_configs())
    plans.push_back({c,
                     {{"unsplit", {.seq_len = 100, .kv_chunk = 0}, true},
                      {"kv_chunk 30", {.seq_len = 100, .kv_chunk = 30, .tile_rows = 16}, true},
                      {"kv_splits 16", {.seq_len = 100, .kv_splits = 16}, true},
                      {"kv_splits 16, merge tasks", {.seq_len = 100, .kv_splits = 16}, false}}});
  plans.push_back({testing::qwen3_0_6b(),
                   {{"unsplit", {.seq_len = 512, .kv_chunk = 0}, true},
                    {"kv_splits 16", {.seq_len = 512, .kv_splits = 16}, true}}});
  for (const auto& [c, variants] : plans)
    for (const Variant& v : variants) {
      SCOPED_TRACE(fmt::format("{} {}L, {}", c.architecture, c.num_layers, v.name));
      const TaskGraph tg = build_tasks(ir::build(c), v.d, {.merge_into_attention = v.fold});
      int merging = 0, merge_tasks = 0;
      for (const Task& t : tg.tasks) {
        merging += t.merges;
        merge_tasks += t.kind == TaskKind::AttentionMerge;
      }
      // The variant is what it says: kv_splits 16 folds every head's merge, or keeps them all.
      if (v.d.kv_splits == 16) {
        EXPECT_EQ(merging, v.fold ? c.num_layers * c.num_kv_heads * 16 : 0);
        EXPECT_EQ(merge_tasks, v.fold ? 0 : c.num_layers * c.num_kv_heads);
      }
      const std::vector<std::string> bad = unordered_reads(tg);
      EXPECT_TRUE(bad.empty()) << bad.size() << " unordered reads, first: " << bad.front();
    }
}

// The check above fails when an order is missing: a reader without its waits, and a reader of
// part of a folded head's output (which waits only for the chunks whose shares it overlaps,
// while any chunk of the head may write all of it).
TEST(Events, UnorderedReadsAreFound) {
  const ir::Graph g = ir::build(testing::tiny_qwen3());  // 1 KV head per layer
  TaskGraph tg = build_tasks(g, {.seq_len = 100, .kv_splits = 16});
  ASSERT_TRUE(unordered_reads(tg).empty());
  const int o = stage_tasks(tg, "L1.attn_out").front();
  tg.tasks[size_t(o)].waits.clear();
  const std::vector<std::string> bad = unordered_reads(tg);
  EXPECT_FALSE(bad.empty());
  for (const std::string& b : bad) EXPECT_TRUE(b.starts_with(tg.tasks[size_t(o)].name + " <- ")) << b;

  // The o_proj tiles of layer 0 read only chunk 0's share of the head's output.
  TaskGraph fused = fuse(g, decompose(g, {.seq_len = 100, .kv_splits = 16}), {});
  Access share;
  for (const Task& t : fused.tasks)
    if (t.merges && t.layer == 0 && t.chunk == 0)
      for (const Access& w : t.writes)
        if (fused.buffers[size_t(w.buffer)].graph_tensor >= 0) share = w;
  ASSERT_GE(share.buffer, 0);
  const std::vector<int> tiles = stage_tasks(fused, "L0.attn_out");
  for (int id : tiles)
    for (Access& r : fused.tasks[size_t(id)].reads)
      if (r.buffer == share.buffer) r = share;
  const TaskGraph partial = build_events(std::move(fused));
  std::set<std::string> readers;
  for (const std::string& b : unordered_reads(partial)) {
    readers.insert(b.substr(0, b.find(" <- ")));
    EXPECT_TRUE(b.find("L0.attn[") != std::string::npos) << b;
  }
  std::set<std::string> expected;
  for (int id : tiles) expected.insert(partial.tasks[size_t(id)].name);
  EXPECT_EQ(readers, expected);
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
