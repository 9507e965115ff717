// megakernel v0 without a device: for every fixture, the plan, the memory plan and the task
// descriptor tables are checked against the TaskGraph, and the kernel source compiles for
// sm_90a with NVRTC.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <nvrtc.h>
#include <regex>
#include <set>
#include <tuple>
#include <string>

#include "base/error.h"
#include "ir/builder.h"
#include "ir/dot_product.h"
#include "ir/layouts.h"
#include "model/model.h"
#include "model_configs.h"
#include "runtime/access_check.h"
#include "ir/task_nests.h"
#include "runtime/megakernel.h"
#include "runtime/proofs.h"
#include "cache/entry.h"
#include "scheduler/liveness.h"

namespace mpk::rt {
namespace {

const std::vector<std::string> kFixtures = {"qwen3-f32", "qwen3-bf16", "qwen2-f32",
                                 "qwen2-bf16", "llama-f32", "llama-bf16-sharded"};

constexpr uint64_t kAct = 1ull << 40, kWeights = 2ull << 40, kConsts = 3ull << 40,
                   kKv = 4ull << 40;

bool in_segment(uint64_t addr, uint64_t base, int64_t bytes) {
  return addr >= base && addr < base + uint64_t(bytes);
}

// A committed fixture, its graph and its megakernel plan.
struct Planned {
  std::unique_ptr<model::Model> model;
  ir::Graph g;
  sched::Plan plan;
};

Planned plan_fixture(const std::string& name, int workers, int64_t capacity) {
  Planned p;
  p.model = model::load(std::string(MPK_TEST_DATA) + "/" + name);
  p.g = ir::build(p.model->config);
  p.plan = sched::plan(p.g, megakernel_plan_options(p.g, workers, capacity));
  return p;
}

// Bytes a buffer takes in the activation segment (plan_memory's rule).
int64_t buffer_bytes(const sched::Buffer& b) { return std::max<int64_t>(b.numel, 1) * 4; }

class MegakernelTables : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(MegakernelTables, MatchTheTaskGraph) {
  const auto& [name, workers] = GetParam();
  const int64_t capacity = 64;
  const auto [model, g, plan] = plan_fixture(name, workers, capacity);
  const sched::TaskGraph& tg = plan.tasks;
  const MemoryPlan mem = plan_memory(g, tg, model->dtype, capacity);
  SegmentBases b{kAct, kWeights, kConsts, kKv};
  const rt::MegakernelTables t = build_tables(g, plan, mem, b);

  ASSERT_EQ(t.tasks.size(), tg.tasks.size());
  ASSERT_EQ(t.num_workers, workers);
  ASSERT_EQ(t.queue_begin.size(), size_t(workers) + 1);
  // Every task once, in the schedule's per-worker order.
  std::multiset<int> seen(t.queue.begin(), t.queue.end());
  ASSERT_EQ(seen.size(), tg.tasks.size());
  for (const auto& task : tg.tasks) EXPECT_EQ(seen.count(task.id), 1u) << task.name;
  for (int w = 0; w < workers; ++w) {
    std::vector<int> q(t.queue.begin() + t.queue_begin[size_t(w)],
                       t.queue.begin() + t.queue_begin[size_t(w) + 1]);
    EXPECT_EQ(q, plan.schedule.queues[size_t(w)]) << "worker " << w;
  }
  // The device's copy: worker w's tasks from queue_begin[w] on, descriptor for descriptor.
  const std::vector<MkTask> dev = t.device_tasks();
  ASSERT_EQ(dev.size(), t.queue.size());
  for (size_t i = 0; i < dev.size(); ++i)
    EXPECT_EQ(std::memcmp(&dev[i], &t.tasks[size_t(t.queue[i])], sizeof(MkTask)), 0) << i;
  // Events.
  ASSERT_EQ(t.needs.size(), tg.events.size());
  for (const auto& e : tg.events) EXPECT_EQ(t.needs[size_t(e.id)], uint32_t(e.need)) << e.name;
  std::set<int> kinds;
  int argmax_tasks = 0;
  for (const auto& task : tg.tasks) {
    const MkTask& d = t.tasks[size_t(task.id)];
    EXPECT_EQ(d.id, task.id);
    EXPECT_EQ(d.trigger, task.trigger) << task.name;
    std::vector<int> waits(t.waits.begin() + d.wait_begin, t.waits.begin() + d.wait_begin + d.num_waits);
    EXPECT_EQ(waits, task.waits) << task.name;
    kinds.insert(d.kind);
    switch (task.kind) {
      case sched::TaskKind::Linear: {
        ASSERT_EQ(d.kind, MPK_MK_LINEAR) << task.name;
        EXPECT_EQ(d.k, task.k);
        ASSERT_EQ(d.num_slices, int(task.weights.size()));
        int64_t rows = 0;
        for (int s = 0; s < d.num_slices; ++s) {
          const MkSlice& sl = d.slices[s];
          const auto& ws = task.weights[size_t(s)];
          rows += sl.rows;
          EXPECT_EQ(sl.rows, ws.row_end - ws.row_begin);
          EXPECT_EQ(sl.out, kAct + uint64_t(mem.buffer_offset[size_t(ws.out)] + ws.out_begin * 4)) << task.name;
          EXPECT_EQ(sl.w, kWeights + uint64_t(mem.weight_offset[size_t(ws.weight)] +
                                              ws.row_begin * task.k * int64_t(dtype_size(model->dtype))));
          EXPECT_TRUE(in_segment(sl.w, kWeights, mem.weight_bytes));
          if (ws.bias >= 0) {
            EXPECT_TRUE(in_segment(sl.bias, kConsts, mem.const_bytes));
          } else {
            EXPECT_EQ(sl.bias, 0u);
          }
          // Every write of the task is covered by one slice.
          bool covered = false;
          for (const auto& a : task.writes)
            covered |= a.buffer == ws.out && a.begin <= ws.out_begin && ws.out_begin + sl.rows <= a.end;
          EXPECT_TRUE(covered) << task.name;
          if (sl.res) {
            EXPECT_TRUE(in_segment(sl.res, kAct, mem.act_bytes));
          }
        }
        EXPECT_EQ(rows, task.row_end - task.row_begin) << task.name;
        EXPECT_TRUE(in_segment(d.x, kAct, mem.act_bytes)) << task.name;
        if (d.input_mode == MPK_MK_IN_RMSNORM) {
          EXPECT_TRUE(in_segment(d.norm_w, kConsts, mem.const_bytes));
        }
        break;
      }
      case sched::TaskKind::Attention:
        ASSERT_EQ(d.kind, MPK_MK_ATTENTION) << task.name;
        EXPECT_EQ(d.kv_head, task.kv_head);
        EXPECT_EQ(ir::q_head(d.kv_head, 0, d.group), task.q_head_begin);
        EXPECT_EQ(d.group, task.q_head_end - task.q_head_begin);
        EXPECT_EQ(d.head_dim, model->config.head_dim);
        EXPECT_EQ(d.capacity, capacity);
        EXPECT_TRUE(in_segment(d.k_cache, kKv, mem.kv_bytes));
        EXPECT_TRUE(in_segment(d.v_cache, kKv, mem.kv_bytes));
        EXPECT_EQ(d.chunk, task.chunk);
        EXPECT_EQ(d.num_chunks, megakernel_kv_splits(g, workers, capacity));
        EXPECT_EQ(d.num_chunks, task.num_chunks);
        if (d.num_chunks > 1) {
          EXPECT_TRUE(in_segment(d.partial, kAct, mem.act_bytes));
        }
        // Split attention merges in its chunks by default, unless a head's output has fewer
        // elements than there are chunks (then a merge task does it).
        EXPECT_EQ(bool(d.flags & MPK_MK_F_MERGE),
                  d.num_chunks > 1 && d.group * d.head_dim >= d.num_chunks) << task.name;
        if (d.flags & MPK_MK_F_MERGE) {
          EXPECT_GE(d.arrival, 0);
          EXPECT_LT(d.arrival, t.num_arrivals);
        }
        EXPECT_TRUE(in_segment(d.inv_freq, kConsts, mem.const_bytes));
        EXPECT_TRUE(d.flags & MPK_MK_F_ROPE_Q);
        EXPECT_TRUE(d.flags & MPK_MK_F_ROPE_K);
        EXPECT_EQ(bool(d.flags & MPK_MK_F_Q_NORM), model->config.family == model::Family::Qwen3);
        break;
      case sched::TaskKind::Vector:
        ASSERT_EQ(d.kind, MPK_MK_ARGMAX) << task.name;
        ++argmax_tasks;
        EXPECT_TRUE(d.flags & MPK_MK_F_EMBED);
        EXPECT_EQ(d.vocab, model->config.vocab_size);
        EXPECT_EQ(d.hidden, model->config.hidden_size);
        EXPECT_EQ(t.argmax_event, task.trigger);
        EXPECT_GE(task.trigger, 0);
        break;
      case sched::TaskKind::AttentionMerge:
        ASSERT_EQ(d.kind, MPK_MK_ATTN_MERGE) << task.name;
        EXPECT_EQ(d.num_chunks, task.num_chunks);
        EXPECT_GT(d.num_chunks, 1);
        EXPECT_TRUE(in_segment(d.partial, kAct, mem.act_bytes));
        EXPECT_TRUE(in_segment(d.out, kAct, mem.act_bytes));
        break;
    }
    // This step's waits, then the previous step's (the carried embedding).
    ASSERT_EQ(d.num_waits, int(task.waits.size()));
    ASSERT_EQ(d.num_waits_prev, int(task.waits_prev.size()));
    for (size_t i = 0; i < task.waits.size(); ++i)
      EXPECT_EQ(t.waits[size_t(d.wait_begin) + i], task.waits[i]);
    for (size_t i = 0; i < task.waits_prev.size(); ++i)
      EXPECT_EQ(t.waits[size_t(d.wait_begin + d.num_waits) + i], task.waits_prev[i]);
    // The first waits and their needs also travel in the descriptor.
    for (int i = 0; i < std::min(MPK_MK_INLINE_WAITS, d.num_waits + d.num_waits_prev); ++i) {
      EXPECT_EQ(d.wait_event[i], t.waits[size_t(d.wait_begin + i)]);
      EXPECT_EQ(d.wait_need[i], t.needs[size_t(d.wait_event[i])]);
    }
  }
  EXPECT_EQ(argmax_tasks, 1);
  // Chunk partials of one (kv head, chunk) never overlap another's, and the merge of a head
  // reads exactly its chunks' partials.
  std::set<uint64_t> partials;
  for (const auto& task : tg.tasks)
    if (task.kind == sched::TaskKind::Attention && task.num_chunks > 1) {
      EXPECT_TRUE(partials.insert(t.tasks[size_t(task.id)].partial).second) << task.name;
    }
  const int chunks = megakernel_kv_splits(g, workers, capacity);
  const auto& c = model->config;
  const bool fold = chunks > 1 && c.num_heads / c.num_kv_heads * c.head_dim >= chunks;
  std::set<int> want_kinds = {MPK_MK_LINEAR, MPK_MK_ATTENTION, MPK_MK_ARGMAX};
  if (chunks > 1 && !fold) want_kinds.insert(MPK_MK_ATTN_MERGE);
  EXPECT_EQ(kinds, want_kinds);
  // One arrival counter per (layer, KV head), shared by exactly that head's chunks.
  EXPECT_EQ(t.num_arrivals, fold ? c.num_layers * c.num_kv_heads : 0);
  std::map<int, std::set<std::pair<int, int>>> heads_of_counter;
  for (const auto& task : tg.tasks)
    if (t.tasks[size_t(task.id)].flags & MPK_MK_F_MERGE)
      heads_of_counter[t.tasks[size_t(task.id)].arrival].insert({task.layer, task.kv_head});
  for (const auto& [counter, heads] : heads_of_counter) EXPECT_EQ(heads.size(), 1u) << counter;
  EXPECT_GT(t.dynamic_smem, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MegakernelTables,
                         ::testing::Combine(::testing::ValuesIn(kFixtures), ::testing::Values(8, 132)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_w" +
                                           std::to_string(std::get<1>(info.param));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// With the merge kept as its own stage, merge tasks read their head's chunk partials.
TEST(Megakernel, SeparateMergeTasks) {
  auto model = model::load(std::string(MPK_TEST_DATA) + "/qwen3-bf16");
  const ir::Graph g = ir::build(model->config);
  sched::PlanOptions o = megakernel_plan_options(g, 16, 64);
  o.fuse.merge_into_attention = false;
  const sched::Plan plan = sched::plan(g, o);
  const MemoryPlan mem = plan_memory(g, plan.tasks, model->dtype, 64);
  const rt::MegakernelTables t = build_tables(g, plan, mem, SegmentBases{kAct, kWeights, kConsts, kKv});
  int merges = 0;
  for (const auto& task : plan.tasks.tasks) {
    const MkTask& d = t.tasks[size_t(task.id)];
    EXPECT_FALSE(d.flags & MPK_MK_F_MERGE);
    if (task.kind != sched::TaskKind::AttentionMerge) continue;
    ++merges;
    ASSERT_EQ(d.kind, MPK_MK_ATTN_MERGE);
    EXPECT_GT(d.num_chunks, 1);
    for (const auto& c : plan.tasks.tasks)
      if (c.kind == sched::TaskKind::Attention && c.layer == task.layer && c.kv_head == task.kv_head) {
        EXPECT_EQ(t.tasks[size_t(c.id)].partial,
                  d.partial + uint64_t(c.chunk) * uint64_t(d.group) * uint64_t(d.head_dim + 2) * 4)
            << c.name;
      }
  }
  EXPECT_EQ(merges, model->config.num_layers * model->config.num_kv_heads);
  EXPECT_EQ(t.num_arrivals, 0);
}

// Before a kernel runs, the plan's proofs: the even split over each attention task's chunk
// count and over every K split count a linear may choose, for every length a position or a
// row can give, the algebra of a linear's sums and the online-softmax algebra.
TEST(Megakernel, PlanProofsCoverEveryPartCount) {
  const Planned p = plan_fixture("qwen3-bf16", 16, 64);
  const MemoryPlan mem = plan_memory(p.g, p.plan.tasks, p.model->dtype, 64);
  const rt::MegakernelTables t = build_tables(p.g, p.plan, mem, SegmentBases{kAct, kWeights, kConsts, kKv});
  std::set<int> counts, dims;
  std::set<std::tuple<int, int, int>> partials;  // attention shapes with chunk partials
  std::set<std::tuple<int, int, int, int64_t>> shapes;  // attention shapes with their capacity
  std::set<std::tuple<int, int, int>> combines;         // attention shapes
  std::set<std::pair<int, int>> passes;                 // query heads, head dim
  std::set<std::pair<int, int>> embeddings;             // hidden, vocabulary
  std::set<std::pair<int, int>> staged;                 // linear inputs: units, floats a unit
  std::set<int> tiles;                                  // linear tiles' rows
  for (const MkTask& d : t.tasks) {
    if (d.kind == MPK_MK_LINEAR) {
      int total = 0;
      for (int i = 0; i < d.num_slices; ++i) total += d.slices[i].rows;
      tiles.insert(total);
      staged.insert({d.k, 1});
      if (d.k % 4 == 0) staged.insert({d.k / 4, 4});
    }
    if (d.kind == MPK_MK_ARGMAX && (d.flags & MPK_MK_F_EMBED)) embeddings.insert({d.hidden, d.vocab});
    if (d.kind == MPK_MK_ATTENTION) {
      counts.insert(d.num_chunks);
      dims.insert(d.head_dim);
      if (d.num_chunks > 1) partials.insert({d.num_chunks, d.group, d.head_dim});
      shapes.insert({d.num_chunks, d.group, d.head_dim, d.capacity});
      combines.insert({d.num_chunks, d.group, d.head_dim});
      passes.insert({d.group, d.head_dim});
    }
  }
  ASSERT_FALSE(counts.empty());
  ASSERT_FALSE(partials.empty());
  const int max_k_split = 3;
  for (int ks = 1; ks <= max_k_split; ++ks) counts.insert(ks);
  const auto verification =
      nlohmann::json::parse(prove_plan(t.device_tasks(), MegakernelParams{.max_k_split = max_k_split}));
  EXPECT_TRUE(cache::is_verified(verification.dump())) << verification.dump();
  const auto& records = verification.at("records");
  // The even splits, the default linear variant's work items per part count, the linear's sums,
  // attention's partials and the merge's nest, rows, the combine's nest, the pass's nest and
  // the heads' staging per (query heads, head dim), a head's constants and the first K/V row per
  // head dim, the warps' states per shape, the argmax's nests, the online softmax.
  ASSERT_EQ(embeddings.size(), 1u);
  const size_t states = 2 * partials.size() + shapes.size() + combines.size() + 2 * passes.size() + 3 * dims.size() +
                        2 + embeddings.size();
  // The linear variant's dot nests: two widths x first round or not, the first round's loads,
  // the unaligned loop; with one row (the tile's last rows): two widths, the unaligned loop.
  const size_t dots = 2 * 2 + 1 + 1 + 2 + 1;
  // The items' loops per tile shape and part count the slots hold.
  size_t tile_nests = 0;
  for (int total : tiles)
    for (int ks = 1; ks <= max_k_split; ++ks) tile_nests += ks == 1 || ks * total <= MPK_MK_KSPLIT_SLOTS;
  ASSERT_GT(tiles.size(), 1u);
  ASSERT_EQ(records.size(),
            counts.size() + max_k_split + dots + staged.size() + tile_nests + (max_k_split - 1) + 2 + states);
  int linear = 0, items = 0, folds = 0, dot_nests = 0, last_rows = 0, stagings = 0, pass_nests = 0, consts = 0,
      firsts = 0, heads = 0, lin_argmaxes = 0, item_nests = 0;
  for (const auto& r : records) {
    EXPECT_TRUE(r.at("proved").get<bool>()) << r.dump();
    const std::string use = r.at("use");
    const bool softmax = use.find("online softmax") != std::string::npos;
    const bool work = use.find("linear.r2: work items") != std::string::npos;
    const bool partial = use.find("attention: chunk partials") != std::string::npos;
    const bool warp = use.find("attention: the warps' states") != std::string::npos;
    const bool combine = use.find("attention: its passes and combine") != std::string::npos;
    const bool pass = use.find("attention: a pass over its chunk's positions") != std::string::npos;
    pass_nests += pass;
    const bool head_stage = use.find("attention: its heads staged and the new K/V rows appended") != std::string::npos;
    heads += head_stage;
    const bool head_consts = use.find("attention: a head's norm scale and RoPE rotation") != std::string::npos;
    const bool kv_first = use.find("attention: a warp's first K/V row before the events") != std::string::npos;
    consts += head_consts;
    firsts += kv_first;
    const bool partials_nest = use.find("argmax: the tiles' partials") != std::string::npos;
    const bool lin_argmax = use.find("linear: an LM-head tile's argmax partial") != std::string::npos;
    lin_argmaxes += lin_argmax;
    const bool embedding = use.find("argmax: the next token's embedding") != std::string::npos;
    const bool fold = use.find("linear: the split-K fold") != std::string::npos;
    const bool item_nest = use.find("linear.r2: a tile's work items over the warps") != std::string::npos;
    item_nests += item_nest;
    const bool dot = use.find("a warp's dot products over a K part") != std::string::npos;
    const bool scalar = use.find("a warp's dot products over unaligned rows") != std::string::npos;
    dot_nests += dot || scalar || use.find("linear.r2: the dot products' first round") != std::string::npos;
    last_rows += use.find("linear, a tile's last rows one at a time: ") == 0;
    folds += fold;
    const bool stage = use.find("linear: the input staged") != std::string::npos;
    stagings += stage;
    const bool rows = use.find("attention: rows") != std::string::npos;
    const bool nest = use.find("attention merge: its loop nest") != std::string::npos;
    items += work;
    if (!work) {
      const size_t expected = softmax || warp ? 4 : partial ? 6 : rows || kv_first ? 9 : nest || stage ? 12
                              : combine ? 17 : pass ? 26 : head_stage ? 36 : head_consts ? 10
                              : lin_argmax ? 4 : partials_nest || fold ? 7
                              : embedding || scalar || item_nest ? 8 : dot ? 10 : 5;
      EXPECT_EQ(r.at("obligations").size(), expected) << use;
    }
    for (const auto& o : r.at("obligations")) EXPECT_EQ(o.at("result"), "proved") << r.dump();
    linear += r.at("use").get<std::string>().find("linear: K over") != std::string::npos;
  }
  EXPECT_TRUE(records.back().at("use").get<std::string>().find("online softmax") != std::string::npos);
  EXPECT_TRUE(records[records.size() - 2 - states].at("use").get<std::string>().find("linear: the sums' algebra") !=
              std::string::npos);
  EXPECT_EQ(linear, max_k_split);
  EXPECT_EQ(items, max_k_split);
  EXPECT_EQ(folds, max_k_split - 1);
  EXPECT_EQ(dot_nests, int(dots));
  EXPECT_EQ(last_rows, 3);
  EXPECT_EQ(lin_argmaxes, 1);
  EXPECT_EQ(item_nests, int(tile_nests));
  EXPECT_EQ(stagings, int(staged.size()));
  EXPECT_EQ(pass_nests, int(passes.size()));
  EXPECT_EQ(consts, int(dims.size()));
  EXPECT_EQ(firsts, int(dims.size()));
  EXPECT_EQ(heads, int(passes.size()));
}

// What the kernel touches lies inside what the scheduler declared (the events and the
// validator rest on it): build_tables checks every plan; a descriptor or a declaration off by
// one row is caught.
TEST(Megakernel, AccessesStayInsideTheDeclaredRanges) {
  for (const char* name : {"qwen3-bf16", "llama-f32"}) {
    const Planned p = plan_fixture(name, 16, 64);
    const MemoryPlan mem = plan_memory(p.g, p.plan.tasks, p.model->dtype, 64);
    const SegmentBases b{kAct, kWeights, kConsts, kKv};
    const rt::MegakernelTables t = build_tables(p.g, p.plan, mem, b);
    check_access_ranges(p.plan, mem, b, t);
    auto refused = [&](const rt::MegakernelTables& bad, const sched::Plan& plan, const char* what) {
      try {
        check_access_ranges(plan, mem, b, bad);
        ADD_FAILURE() << name << ": " << what << " was not caught";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Internal) << e.what();
        EXPECT_NE(std::string(e.what()).find("outside its declared"), std::string::npos) << e.what();
      }
    };
    int linear = -1, attention = -1;
    for (size_t i = 0; i < t.tasks.size(); ++i) {
      if (t.tasks[i].kind == MPK_MK_LINEAR && t.tasks[i].slices[0].res && linear < 0) linear = int(i);
      if (t.tasks[i].kind == MPK_MK_ATTENTION && attention < 0) attention = int(i);
    }
    ASSERT_GE(linear, 0);
    ASSERT_GE(attention, 0);
    {
      rt::MegakernelTables bad = t;
      bad.tasks[size_t(linear)].slices[0].rows += 1;  // one row past the tile
      refused(bad, p.plan, "a slice one row longer");
    }
    {
      rt::MegakernelTables bad = t;
      bad.tasks[size_t(linear)].x += 4;  // the input one element on
      refused(bad, p.plan, "an input shifted by one");
    }
    {
      rt::MegakernelTables bad = t;
      bad.tasks[size_t(attention)].kv_head += 1;  // the next KV head's rows
      refused(bad, p.plan, "an attention task on the wrong query heads");
    }
    bool shifted = false;
    for (size_t i = 0; i < t.tasks.size() && !shifted; ++i)  // a second KV head's group one head short:
      if (t.tasks[i].kind == MPK_MK_ATTENTION && t.tasks[i].kv_head == 1 && t.tasks[i].group > 1) {
        rt::MegakernelTables bad = t;  // its rows start a head early, inside the queries
        bad.tasks[i].group -= 1;
        refused(bad, p.plan, "an attention task's rows shifted by one query head");
        shifted = true;
      }
    EXPECT_EQ(shifted, std::string(name) == "llama-f32") << name << ": KV heads with groups";
    {
      sched::Plan plan = p.plan;  // the residual's read undeclared
      auto& reads = plan.tasks.tasks[size_t(linear)].reads;
      const uint64_t res = t.tasks[size_t(linear)].slices[0].res;
      reads.erase(std::remove_if(reads.begin(), reads.end(), [&](const sched::Access& a) {
                    const uint64_t at = kAct + uint64_t(mem.buffer_offset[size_t(a.buffer)] + a.begin * 4);
                    return at <= res && res < at + uint64_t(a.end - a.begin) * 4;
                  }),
                  reads.end());
      refused(t, plan, "a read the plan does not declare");
    }
  }
}

TEST(Megakernel, UnfusedVectorOpIsUnsupportedAtBuild) {
  auto model = model::load(std::string(MPK_TEST_DATA) + "/qwen3-f32");
  const ir::Graph g = ir::build(model->config);
  sched::PlanOptions o = megakernel_plan_options(g, 8, 16);
  o.fuse.norm_into_linear = false;  // standalone rms_norm tasks: not in v0
  const sched::Plan plan = sched::plan(g, o);
  const MemoryPlan mem = plan_memory(g, plan.tasks, model->dtype, 16);
  try {
    build_tables(g, plan, mem, SegmentBases{});
    FAIL() << "expected Unsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("rms_norm"), std::string::npos) << e.what();
  }
}

// Tasks that transitively wait for task a within a step (ids), from the waits alone:
// independent of sched::HappensBefore.
std::vector<std::set<int>> descendants(const sched::TaskGraph& tg) {
  std::vector<std::vector<int>> waiters(tg.events.size());
  for (const auto& t : tg.tasks)
    for (int e : t.waits) waiters[size_t(e)].push_back(t.id);
  std::vector<std::set<int>> out(tg.tasks.size());
  for (size_t a = 0; a < tg.tasks.size(); ++a) {
    std::vector<int> stack{int(a)};
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      const int e = tg.tasks[size_t(x)].trigger;
      if (e < 0) continue;
      for (int w : waiters[size_t(e)])
        if (out[a].insert(w).second) stack.push_back(w);
    }
  }
  return out;
}

// Shared activation memory: smaller; what may hold a value from outside the step (the carried
// embedding, graph inputs and outputs, buffers read but not written) overlaps nothing; buffers
// whose memory overlaps have every access of one before every access of the other.
// Positions are ints on the device: a capacity past 2^31 - 1 is refused before anything is sized.
TEST(Megakernel, CapacityBeyondAnIntIsRefused) {
  const auto [model, g, plan] = plan_fixture("qwen3-f32", 8, 64);
  EXPECT_NO_THROW(plan_memory(g, plan.tasks, model->dtype, 64));
  try {
    plan_memory(g, plan.tasks, model->dtype, int64_t(INT32_MAX) + 1);
    ADD_FAILURE() << "a capacity of 2^31 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  }
  EXPECT_THROW(plan_memory(g, plan.tasks, model->dtype, 0), Error);
}

TEST(Megakernel, SharedActivationMemory) {
  for (const char* fixture : {"qwen3-f32", "llama-f32", "qwen2-bf16"}) {
    SCOPED_TRACE(fixture);
    const auto [model, g, plan] = plan_fixture(fixture, 8, 64);
    const MemoryPlan plain = plan_memory(g, plan.tasks, model->dtype, 64);
    const MemoryPlan shared = plan_memory(g, plan.tasks, model->dtype, 64, true);
    EXPECT_EQ(plain.act_bytes, plain.act_bytes_unshared);
    EXPECT_EQ(shared.act_bytes_unshared, plain.act_bytes);
    EXPECT_LT(shared.act_bytes, plain.act_bytes);
    const auto& tg = plan.tasks;
    const auto& bufs = tg.buffers;
    std::vector<std::set<int>> acc(bufs.size());
    std::vector<bool> written(bufs.size());
    for (const auto& t : tg.tasks) {
      for (const auto& a : t.reads) acc[size_t(a.buffer)].insert(t.id);
      for (const auto& a : t.writes) acc[size_t(a.buffer)].insert(t.id), written[size_t(a.buffer)] = true;
    }
    const auto desc = descendants(tg);
    const auto ordered = [&](size_t x, size_t y) {
      if (acc[x].empty() || acc[y].empty()) return false;
      for (int a : acc[x])
        for (int b : acc[y])
          if (!desc[size_t(a)].count(b)) return false;
      return true;
    };
    int overlaps = 0;
    for (size_t a = 0; a < bufs.size(); ++a) {
      const int64_t a0 = shared.buffer_offset[a], a1 = a0 + buffer_bytes(bufs[a]);
      EXPECT_LE(a1, shared.act_bytes) << bufs[a].name;
      for (size_t b = a + 1; b < bufs.size(); ++b) {
        const int64_t b0 = shared.buffer_offset[b], b1 = b0 + buffer_bytes(bufs[b]);
        if (a1 <= b0 || b1 <= a0) continue;
        ++overlaps;
        for (size_t x : {a, b}) {
          const bool outside = bufs[x].carried || !written[x] ||
                               (bufs[x].graph_tensor >= 0 &&
                                g.tensor(bufs[x].graph_tensor).role != ir::TensorRole::Activation);
          EXPECT_FALSE(outside) << bufs[x].name << " shares memory";
        }
        EXPECT_TRUE(ordered(a, b) || ordered(b, a)) << bufs[a].name << " overlaps " << bufs[b].name;
      }
    }
    EXPECT_GT(overlaps, 0);
    const auto t = build_tables(g, plan, shared, SegmentBases{});
    EXPECT_EQ(t.tasks.size(), tg.tasks.size());
  }
}

// Sharing rests on the kernel touching only the buffers a task declares: every activation
// address in a descriptor lies in a buffer the task reads or writes.
TEST(Megakernel, DescriptorsPointOnlyIntoDeclaredBuffers) {
  for (const char* fixture : {"qwen3-f32", "llama-f32", "qwen2-bf16"}) {
    SCOPED_TRACE(fixture);
    const auto [model, g, plan] = plan_fixture(fixture, 8, 64);
    const MemoryPlan mem = plan_memory(g, plan.tasks, model->dtype, 64);
    const auto t = build_tables(g, plan, mem, SegmentBases{kAct, kWeights, kConsts, kKv});
    const auto& bufs = plan.tasks.buffers;
    const auto buffer_at = [&](uint64_t p) {
      for (size_t b = 0; b < bufs.size(); ++b) {
        const uint64_t b0 = kAct + uint64_t(mem.buffer_offset[b]);
        if (p >= b0 && p < b0 + uint64_t(buffer_bytes(bufs[b]))) return int(b);
      }
      return -1;
    };
    int checked = 0;
    for (const auto& task : plan.tasks.tasks) {
      const MkTask& d = t.tasks[size_t(task.id)];
      std::set<int> declared;
      for (const auto& a : task.reads) declared.insert(a.buffer);
      for (const auto& a : task.writes) declared.insert(a.buffer);
      std::vector<uint64_t> ptrs = {d.x, d.x2, d.q, d.kx, d.vx, d.partial, d.part_val, d.part_idx,
                                    d.next_token, d.embed_out};
      for (int i = 0; i < d.num_slices; ++i) ptrs.insert(ptrs.end(), {d.slices[i].out, d.slices[i].res});
      // A chunk that neither merges nor is the only one never writes the head output.
      const bool writes_out = d.kind != MPK_MK_ATTENTION || d.num_chunks == 1 || (d.flags & MPK_MK_F_MERGE);
      if (writes_out) ptrs.push_back(d.out);
      for (uint64_t p : ptrs) {
        if (!in_segment(p, kAct, mem.act_bytes)) continue;
        const int b = buffer_at(p);
        ASSERT_GE(b, 0) << task.name;
        EXPECT_TRUE(declared.count(b)) << task.name << " points into " << bufs[size_t(b)].name;
        ++checked;
      }
    }
    EXPECT_GT(checked, int(plan.tasks.tasks.size()));
  }
}

// The kernel is generated from its parameter description: other values compile too, the
// source and the shared-memory plan follow them, and values out of range are refused.
TEST(Megakernel, ParametersShapeTheSource) {
  MegakernelParams p;
  EXPECT_NE(megakernel_source(p, DType::BF16).find("#define MK_ROWS_PER_WARP 2\n"), std::string::npos);
  p.block_threads = 256;
  p.rows_per_warp = 1;
  p.loads_in_flight = 2;
  p.max_k_split = 4;
  p.heads_per_pass = 2;
  p.prefetch_rounds = 0;
  p.merge_batch = 4;
  p.max_head_dim = 64;
  p.poll_warp_loads = 0;
  p.controller_warp = 1;
  const std::string src = megakernel_source(p, DType::BF16);
  for (const char* d : {"#define MK_BLOCK_THREADS 256\n", "#define MK_ROWS_PER_WARP 1\n",
                        "#define MK_LOADS_IN_FLIGHT 2\n", "#define MK_MAX_KSPLIT 4\n",
                        "#define MK_HEADS_PER_PASS 2\n", "#define MK_PREFETCH_ROUNDS 0\n",
                        "#define MK_MERGE_BATCH 4\n", "#define MK_MAX_HEAD_DIM 64\n",
                        "#define MK_POLL_WARP_LOADS 0\n", "#define MK_CONTROLLER_WARP 1\n"})
    EXPECT_NE(src.find(d), std::string::npos) << d;
  EXPECT_EQ(to_json(p),
            "{\"block_threads\":256,\"rows_per_warp\":1,\"down_rows_per_warp\":0,\"head_rows_per_warp\":0,\"loads_in_flight\":2,\"max_k_split\":4,"
            "\"heads_per_pass\":2,\"prefetch_rounds\":0,\"merge_batch\":4,\"max_head_dim\":64,"
            "\"poll_warp_loads\":0,\"controller_warp\":1,\"stage_weights\":0,\"stage_late\":0,"
            "\"fold_down\":0,\"prefetch_next\":0,\"phase_timers\":0,\"kv_splits\":0,\"merge_task\":0,\"tile_waves\":1}");
  EXPECT_EQ(launch_threads(p), 288);
  const cuda::CompileResult r = compile_megakernel("sm_90a", p, DType::BF16);
  EXPECT_FALSE(r.cubin.empty());
  // Attention's shared memory holds one state per warp and head of a pass.
  const auto [model, g, plan] = plan_fixture("qwen3-f32", 8, 16);
  const MemoryPlan mem = plan_memory(g, plan.tasks, model->dtype, 16);
  const auto a = build_tables(g, plan, mem, SegmentBases{}, MegakernelParams{});
  const auto b = build_tables(g, plan, mem, SegmentBases{}, p);
  EXPECT_GE(a.dynamic_smem, b.dynamic_smem);
  // A linear task's shared memory holds its input vector.
  EXPECT_GE(b.dynamic_smem, 4 * g.config.intermediate_size);
  for (auto bad : {MegakernelParams{.block_threads = 100}, MegakernelParams{.block_threads = 2048},
                   MegakernelParams{.rows_per_warp = 0}, MegakernelParams{.loads_in_flight = 9},
                   MegakernelParams{.max_k_split = 0}, MegakernelParams{.heads_per_pass = 9},
                   MegakernelParams{.prefetch_rounds = 9}, MegakernelParams{.merge_batch = 0},
                   MegakernelParams{.merge_batch = 17}, MegakernelParams{.max_head_dim = 96},
                   MegakernelParams{.max_head_dim = 512}, MegakernelParams{.down_rows_per_warp = -1},
                   MegakernelParams{.down_rows_per_warp = 5},
                   MegakernelParams{.controller_warp = 2},
                   MegakernelParams{.stage_weights = 2},
                   MegakernelParams{.phase_timers = 2},
                   MegakernelParams{.prefetch_next = -1}, MegakernelParams{.prefetch_next = 1025},
                   MegakernelParams{.block_threads = 1024, .controller_warp = 1}}) {
    try {
      (void)megakernel_source(bad, DType::BF16);
      ADD_FAILURE() << to_json(bad) << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
    }
  }
}

// A head row lives in registers: the kernel is generated for the model's head_dim, and a plan
// with larger heads than the kernel holds is refused.
TEST(Megakernel, HeadDimSizesTheKernel) {
  EXPECT_EQ(params_for_head_dim(16).max_head_dim, 64);
  EXPECT_EQ(params_for_head_dim(64).max_head_dim, 64);
  EXPECT_EQ(params_for_head_dim(80).max_head_dim, 128);
  EXPECT_EQ(params_for_head_dim(128).max_head_dim, 128);
  EXPECT_EQ(params_for_head_dim(256).max_head_dim, 256);
  EXPECT_EQ(params_for_head_dim(512).max_head_dim, 256);
  // The controller warp replaces a compute warp for models whose layers stream little per
  // worker: Qwen3-0.6B's 1.19 GB over 28 layers and 132 workers yes, Qwen3-8B's 15.1 GB over 36 no.
  const MegakernelParams small = default_params(128, 1'192'000'000, 28, 132);
  EXPECT_EQ(small.controller_warp, 1);
  EXPECT_EQ(small.block_threads, 480);
  EXPECT_EQ(launch_threads(small), 512);
  EXPECT_EQ(small.prefetch_next, kSmallModelPrefetchNextKiB);
  // The two-layer test models (1-3 KB per worker and layer) keep the controller, not the
  // prefetch: it cost them 1 us per step.
  const MegakernelParams tiny = default_params(128, 300'000, 2, 132);
  EXPECT_EQ(tiny.controller_warp, 1);
  EXPECT_EQ(tiny.prefetch_next, 0);
  const MegakernelParams large = default_params(128, 15'137'000'000, 36, 132);
  EXPECT_EQ(to_json(large), to_json(params_for_head_dim(128)));
  EXPECT_EQ(launch_threads(large), 512);
  model::Config c = mpk::testing::qwen3_0_6b();  // head_dim 128, two layers are enough
  c.num_layers = 2;
  const ir::Graph g = ir::build(c);
  const sched::Plan plan = sched::plan(g, megakernel_plan_options(g, 16, 16));
  const MemoryPlan mem = plan_memory(g, plan.tasks, DType::BF16, 16);
  (void)build_tables(g, plan, mem, SegmentBases{}, params_for_head_dim(int(c.head_dim)));
  EXPECT_TRUE(refused_tasks(g, plan, mem, params_for_head_dim(int(c.head_dim))).empty());
  // Every attention task is refused, each with its reason; build_tables throws on the first.
  int attention = 0;
  for (const sched::Task& t : plan.tasks.tasks) attention += t.kind == sched::TaskKind::Attention;
  const auto refused = refused_tasks(g, plan, mem, MegakernelParams{.max_head_dim = 64});
  EXPECT_EQ(int(refused.size()), attention);
  for (const auto& [id, why] : refused) {
    EXPECT_EQ(plan.tasks.tasks[size_t(id)].kind, sched::TaskKind::Attention);
    EXPECT_NE(why.find("head_dim 128 above max_head_dim 64"), std::string::npos) << why;
  }
  try {
    (void)build_tables(g, plan, mem, SegmentBases{}, MegakernelParams{.max_head_dim = 64});
    ADD_FAILURE() << "head_dim " << c.head_dim << " accepted by a kernel for 64";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  }
}

// Tuning runs set the parameters as text ($MPK_MK_PARAMS); anything malformed is refused.
TEST(Megakernel, ParametersParseFromText) {
  const MegakernelParams p = parse_params("rows_per_warp=1,loads_in_flight=8,");
  EXPECT_EQ(p.rows_per_warp, 1);
  EXPECT_EQ(p.loads_in_flight, 8);
  EXPECT_EQ(p.block_threads, MegakernelParams{}.block_threads);
  EXPECT_EQ(to_json(parse_params("")), to_json(MegakernelParams{}));
  for (const char* bad : {"rows_per_warp", "rows_per_warp=", "rows_per_warp=x", "rows_per_warp=2x",
                          "warps=4", "loads_in_flight=9", "block_threads=99999999999"}) {
    try {
      (void)parse_params(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
    }
  }
}

// The measured configuration (Qwen3: head_dim 128, the default parameters) keeps its bf16
// kernel in registers: a spill of the weight round loaded before the events would have to wait
// for the loads and lose the overlap it is for. ptxas reports spills per entry point.
// The same holds for the kernels that draw sampled tokens, and for the small-model layout
// (controller warp) with weight staging.
TEST(Megakernel, Bf16KernelForHeadDim128DoesNotSpill) {
  MegakernelParams staged = default_params(128, 1'192'000'000, 28, 132);
  staged.stage_weights = 1;
  MegakernelParams fold = default_params(128, 1'192'000'000, 28, 132);
  fold.fold_down = 1;
  MegakernelParams next = params_for_head_dim(128);
  next.prefetch_next = 64;
  MegakernelParams late = staged;
  late.stage_late = 1;
  for (const auto& [p, draws] : {std::pair{params_for_head_dim(128), MPK_MK_SAMPLE_GREEDY},
                                 std::pair{next, MPK_MK_SAMPLE_GREEDY},
                                 std::pair{default_params(128, 1'192'000'000, 28, 132), MPK_MK_SAMPLE_GREEDY},
                                 std::pair{params_for_head_dim(128), MPK_MK_SAMPLE_GUMBEL},
                                 std::pair{params_for_head_dim(128), MPK_MK_SAMPLE_TOPK},
                                 std::pair{staged, MPK_MK_SAMPLE_GREEDY},
                                 std::pair{fold, MPK_MK_SAMPLE_GREEDY},
                                 std::pair{late, MPK_MK_SAMPLE_GREEDY}}) {
    SCOPED_TRACE(to_json(p) + " draws " + std::to_string(draws));
    // The megakernel's own options ask ptxas for its figures (the cache records them).
    const std::string log = compile_megakernel("sm_90a", p, DType::BF16, draws).log;
    const cuda::PtxasInfo info = cuda::parse_ptxas_info(log, megakernel_entry(DType::BF16));
    EXPECT_GT(info.registers, 0) << log;
    EXPECT_EQ(info.spill_store_bytes, 0) << log;
    const std::string entry = "Function properties for " + megakernel_entry(DType::BF16);
    const size_t at = log.find(entry);
    ASSERT_NE(at, std::string::npos) << log;
    std::smatch m;
    const std::string after = log.substr(at, 400);
    ASSERT_TRUE(std::regex_search(after, m, std::regex("(\\d+) bytes spill stores, (\\d+) bytes spill loads")))
        << after;
    EXPECT_EQ(m[1].str(), "0") << after;
    EXPECT_EQ(m[2].str(), "0") << after;
  }
}

// The cache entry's record keeps ptxas's figures beside the proofs, and reads them back; a
// record without them (an entry built before) or one that is not JSON gives -1s.
TEST(Megakernel, RecordKeepsPtxasFigures) {
  cuda::PtxasInfo info;
  info.registers = 128;
  info.spill_store_bytes = 68;
  info.spill_load_bytes = 72;
  info.stack_bytes = 104;
  info.static_smem_bytes = 2048;
  const std::string record = record_with_ptxas(R"({"passed":true,"records":[]})", info);
  const nlohmann::json j = nlohmann::json::parse(record);
  EXPECT_TRUE(j.at("passed").get<bool>());
  EXPECT_EQ(j.at("ptxas").at("spill_store_bytes"), 68);
  const cuda::PtxasInfo back = record_ptxas(record);
  EXPECT_EQ(back.registers, 128);
  EXPECT_EQ(back.spill_store_bytes, 68);
  EXPECT_EQ(back.spill_load_bytes, 72);
  EXPECT_EQ(back.stack_bytes, 104);
  EXPECT_EQ(back.static_smem_bytes, 2048);
  for (const char* old : {R"({"passed":true})", "{}", "not json", R"({"ptxas":[1]})", R"({"ptxas":{"registers":"x"}})"}) {
    const cuda::PtxasInfo none = record_ptxas(old);
    EXPECT_EQ(none.registers, -1) << old;
    EXPECT_EQ(none.spill_store_bytes, -1) << old;
  }
}

// The kernels that draw sampled tokens compile for both thread layouts (with and without the
// controller warp); the greedy kernel's source holds none of the draw code.
TEST(Megakernel, KernelThatDrawsCompilesForSm90a) {
  const MegakernelParams with_controller = default_params(128, 1'192'000'000, 28, 132);
  ASSERT_EQ(with_controller.controller_warp, 1);
  for (const MegakernelParams& p : {params_for_head_dim(128), with_controller}) {
    for (int mode : {MPK_MK_SAMPLE_GUMBEL, MPK_MK_SAMPLE_TOPK}) {
      const std::string src = megakernel_source(p, DType::BF16, mode);
      EXPECT_NE(src.find("#define MK_DRAWS " + std::to_string(mode) + "\n"), std::string::npos);
      const cuda::CompileResult r = compile_megakernel("sm_90a", p, DType::BF16, mode);
      EXPECT_FALSE(r.cubin.empty());
    }
  }
  EXPECT_NE(megakernel_source(MegakernelParams{}, DType::BF16).find("#define MK_DRAWS 0\n"), std::string::npos);
}

// What the top-k draw's kernel rests on before it runs: its loop nests, the sort's stages among
// them (printed from the nest over the compare-pair formula), proved for every stage distance
// it uses.
TEST(Megakernel, TheTopKDrawsSortIsProved) {
  const std::vector<PlanProof> proofs = draw_proofs(MegakernelParams{}, 151936);
  // Eleven loop nests, the sort's padding and its stages of distance 1 .. MPK_MK_SAMPLE_GROUP / 2.
  ASSERT_EQ(proofs.size(), 24u);
  for (const PlanProof& p : proofs) EXPECT_TRUE(p.record.proved()) << p.use << ": " << p.record.subject;
  EXPECT_NE(verification_record(proofs).find("top-k draw: its sort's stage of distance 2048"), std::string::npos);
  EXPECT_EQ(proofs[0].record.obligations.size(), 8u) << proofs[0].use;
  EXPECT_EQ(proofs[1].record.obligations.size(), 8u) << proofs[1].use;  // the nucleus's passes
  EXPECT_EQ(proofs[2].record.obligations.size(), 6u) << proofs[2].use;
  EXPECT_EQ(proofs[3].record.obligations.size(), 4u) << proofs[3].use;  // the histogram
  EXPECT_EQ(proofs[4].record.obligations.size(), 4u) << proofs[4].use;  // the cut
  EXPECT_EQ(proofs[5].record.obligations.size(), 5u) << proofs[5].use;  // the total
  EXPECT_EQ(proofs[6].record.obligations.size(), 7u) << proofs[6].use;
  EXPECT_EQ(proofs[7].record.obligations.size(), 4u) << proofs[7].use;
  EXPECT_EQ(proofs[8].use, "top-k draw: the radix select's walk down its histogram by one thread, a loop nest");
  EXPECT_EQ(proofs[9].record.obligations.size(), 7u) << proofs[9].use;  // the bins' counts and masses
  EXPECT_EQ(proofs[10].use, "nucleus draw: the walk down its radix bins' masses by one thread, a loop nest");
  // A vocabulary the sort holds whole takes no sample.
  EXPECT_EQ(draw_proofs(MegakernelParams{}, 4096).size(), 23u);
  EXPECT_EQ(proofs[23].use, "top-k draw: its sort's stage of distance 2048, a loop nest (16 warps)");
  const std::string src = megakernel_source(MegakernelParams{}, DType::BF16, MPK_MK_SAMPLE_TOPK);
  EXPECT_NE(src.find(ir::print(ir::sample_sort_stage_nest())), std::string::npos);
  EXPECT_NE(src.find("mk_sample_sort_stage(keys, m, stride, size);"), std::string::npos);
  EXPECT_NE(src.find("mk_sample_sort_pad(keys, n, m);"), std::string::npos);
  EXPECT_NE(src.find(ir::print(ir::sample_walk_nest())), std::string::npos);
  EXPECT_NE(src.find("const int b = mk_sample_walk(hist, need, above);"), std::string::npos);
  EXPECT_NE(src.find(ir::print(ir::sample_mass_walk_nest())), std::string::npos);
  EXPECT_NE(src.find("const int b = mk_sample_mass_walk(mass, run, *target);"), std::string::npos);
  EXPECT_NE(src.find(ir::print(ir::sample_scan2_nest())), std::string::npos);
}

// The linear runs the sums that were proved: their device functions are printed from
// ir/dot_product into the source, and the dot product, the lanes' butterfly, the K fold, the
// RMSNorm staging and factor, and the epilogue call them.
TEST(Megakernel, LinearSumsAreThePrintedFormulas) {
  const std::string src = megakernel_source(MegakernelParams{}, DType::BF16);
  EXPECT_NE(src.find(ir::dot_product_device_functions()), std::string::npos);
  // The split-K fold's sum, printed from its loop nest with the slot's formula.
  const ir::Access& sums = ir::linear_fold_nest().accesses.at(0);
  ASSERT_EQ(sums.name, "sums");
  const std::string fold = "v = mk_dp_add(v, part_sums[" + ir::to_c(sums.index, sums.type) + "]);";
  // The dot products' step, printed from their loop nest with the input's index.
  const ir::Access& x = ir::linear_dot_nest().accesses.at(3);
  ASSERT_EQ(x.name, "x");
  const std::string step = "acc[r] = mk_dp_step(acc[r], f[e], xs[" + ir::to_c(x.index, x.type) + "]);";
  for (const std::string& use : {step,
                                 std::string("v = mk_dp_add(v, __shfl_xor_sync("), fold,
                                 std::string("o[e] = mk_dp_stage(bv[e], av[e]);"), std::string("mk_dp_scale(v, scale)"),
                                 std::string("v = mk_dp_add(v, bias);"), std::string("v = mk_dp_add(v, res);")})
    EXPECT_NE(src.find(use), std::string::npos) << use;
}

// Only the model's weight dtype is compiled: one entry point per build.
// The weight ring holds any two consecutive staged tasks of a queue (the wrap into the next step
// included) with the 127 bytes the top end's rounding may cost, or one task alone; no more.
TEST(Megakernel, TheWeightRingHoldsTwoConsecutiveStagedTasks) {
  mpk::rt::MegakernelTables t;
  auto task = [&](int rows, int k, bool staged) {
    MkTask d{};
    d.kind = MPK_MK_LINEAR;
    d.flags = staged ? MPK_MK_F_STAGE : 0;
    d.k = k;
    d.num_slices = 1;
    d.slices[0].rows = rows;
    t.tasks.push_back(d);
    return int(t.tasks.size()) - 1;
  };
  // Worker 0: 1,000 bytes staged, one not staged, 3,000, 500 (bf16).
  t.queue = {task(5, 100, true), task(64, 100, false), task(15, 100, true), task(5, 50, true)};
  t.queue_begin = {0, 4};
  EXPECT_EQ(stage_ring_need(t, DType::BF16), 3712);  // (3,000 + 500 + 254) / 128 * 128
  EXPECT_EQ(stage_ring_need(t, DType::F32), 7168);   // (6,000 + 1,000 + 254) / 128 * 128
  // Worker 1 runs one task of 8,000 bytes: its next step's copy is issued beside it.
  t.queue.push_back(task(40, 100, true));
  t.queue_begin.push_back(5);
  EXPECT_EQ(stage_ring_need(t, DType::BF16), 16128);  // (8,000 + 8,000 + 254) / 128 * 128
  t.tasks.back().flags = 0;
  EXPECT_EQ(stage_ring_need(t, DType::BF16), 3712);
}

// The megakernel's PTX for compute_90a (NVRTC without ptxas).
std::string megakernel_ptx(const MegakernelParams& p) {
  const std::string src = megakernel_source(p, DType::BF16);
  nvrtcProgram prog;
  EXPECT_EQ(nvrtcCreateProgram(&prog, src.c_str(), "mk.cu", 0, nullptr, nullptr), NVRTC_SUCCESS);
  std::vector<std::string> opts = megakernel_compile_options();
  opts.push_back("--gpu-architecture=compute_90a");
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  std::string ptx;
  if (nvrtcCompileProgram(prog, int(argv.size()), argv.data()) == NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetPTXSize(prog, &n);
    ptx.resize(n);
    nvrtcGetPTX(prog, ptx.data());
  }
  nvrtcDestroyProgram(&prog);
  return ptx;
}

size_t count_of(const std::string& text, const std::regex& re) {
  return size_t(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// The kernel's 16-byte shared-memory accesses stay 16-byte loads in every layout: with staging,
// task code's shared memory starts at a run-time offset, and a staged kernel once lost every
// vector shared load to an offset the compiler could not see to be aligned (and read its staged
// rows through generic loads), which made it slower for reasons that had nothing to do with
// staging. No generic 16-byte loads anywhere; at least as many vector shared loads as the
// kernel without staging.
TEST(Megakernel, SharedMemoryLoadsStayVectorised) {
  const std::regex vec_shared("ld\\.shared\\.v4\\.f32"), generic16("\\bld\\.v4\\.");
  const MegakernelParams plain = params_for_head_dim(128), small = default_params(128, 1'192'000'000, 28, 132);
  MegakernelParams staged = small;
  staged.stage_weights = 1;
  const std::string base = megakernel_ptx(plain);
  ASSERT_FALSE(base.empty());
  const size_t want = count_of(base, vec_shared);
  EXPECT_GT(want, 0u);
  EXPECT_EQ(count_of(base, generic16), 0u);
  for (const MegakernelParams& p : {small, staged}) {
    SCOPED_TRACE(to_json(p));
    const std::string ptx = megakernel_ptx(p);
    EXPECT_GE(count_of(ptx, vec_shared), want);
    EXPECT_EQ(count_of(ptx, generic16), 0u);
  }
}

// prefetch_next issues the next task's bulk L2 prefetches; without it the kernel has none (the
// code is compiled out, not skipped at run time).
TEST(Megakernel, PrefetchNextIsCompiledInOnlyWhenAsked) {
  const std::regex bulk("cp\\.async\\.bulk\\.prefetch\\.L2\\.global");
  MegakernelParams p = params_for_head_dim(128);
  EXPECT_EQ(count_of(megakernel_ptx(p), bulk), 0u);
  p.prefetch_next = 64;
  EXPECT_NE(megakernel_source(p, DType::BF16).find("#define MK_PREFETCH_NEXT 64\n"), std::string::npos);
  EXPECT_GT(count_of(megakernel_ptx(p), bulk), 0u);
}

// Weight staging marks the linear tasks whose rows a bulk copy can move (every one of the
// fixture but the LM head's tiles, which stream); without it none is marked.
TEST(Megakernel, StagingMarksTheLinearTasks) {
  const auto [model, g, plan] = plan_fixture("qwen3-bf16", 8, 16);
  const MemoryPlan mem = plan_memory(g, plan.tasks, model->dtype, 16);
  const MegakernelParams staged = parse_params("stage_weights=1");
  EXPECT_NE(megakernel_source(staged, DType::BF16).find("#define MK_STAGE_WEIGHTS 1\n"), std::string::npos);
  const auto on = build_tables(g, plan, mem, SegmentBases{}, staged);
  const auto off = build_tables(g, plan, mem, SegmentBases{}, MegakernelParams{});
  int linears = 0, marked = 0;
  for (size_t i = 0; i < on.tasks.size(); ++i) {
    const MkTask& d = on.tasks[i];
    EXPECT_FALSE(off.tasks[i].flags & MPK_MK_F_STAGE);
    if (d.kind != MPK_MK_LINEAR) {
      EXPECT_FALSE(d.flags & MPK_MK_F_STAGE);
      continue;
    }
    ++linears;
    const bool stage = d.flags & MPK_MK_F_STAGE;
    marked += stage;
    EXPECT_EQ(stage, !(d.flags & MPK_MK_F_ARGMAX)) << "task " << d.id;
  }
  EXPECT_GT(marked, 0);
  EXPECT_LT(marked, linears);
  EXPECT_EQ(on.stage_bytes, 0) << "the session sizes the ring";
  EXPECT_EQ(stage_ring_need(off, DType::BF16), 0);
  EXPECT_GT(stage_ring_need(on, DType::BF16), 0);
  // The ring's placement is printed from its proved formula, and proved where a task stages.
  const std::string src = megakernel_source(staged, DType::BF16);
  EXPECT_NE(src.find("__device__ __forceinline__ long long mk_stage_at(long long c, long long size, long long bytes) "
                     "{ return "),
            std::string::npos);
  EXPECT_NE(src.find("const long long at = mk_stage_at(s.copies, s.size, nb);"), std::string::npos);
  auto ring_proved = [](const std::vector<PlanProof>& proofs) {
    for (const PlanProof& p : proofs)
      if (p.use == "linear: the weight ring's placement (staged weights)") return p.record.proved();
    return false;
  };
  EXPECT_TRUE(ring_proved(plan_proofs(on.tasks, staged)));
  EXPECT_FALSE(ring_proved(plan_proofs(off.tasks, MegakernelParams{})));
  // Rows that are not whole 16-byte units stream: a hidden size of 1,004 bf16 (2,008 bytes)
  // leaves qkv and gate/up unmarked, o_proj (K 2,048) and down (K 3,072) marked.
  model::Config c = mpk::testing::qwen3_0_6b();
  c.num_layers = 1;
  c.hidden_size = 1004;
  const ir::Graph g2 = ir::build(c);
  const sched::Plan plan2 = sched::plan(g2, megakernel_plan_options(g2, 16, 16));
  const MemoryPlan mem2 = plan_memory(g2, plan2.tasks, DType::BF16, 16);
  int unmarked = 0;
  for (const MkTask& d : build_tables(g2, plan2, mem2, SegmentBases{}, staged).tasks) {
    if (d.kind != MPK_MK_LINEAR || (d.flags & MPK_MK_F_ARGMAX)) continue;
    EXPECT_EQ(bool(d.flags & MPK_MK_F_STAGE), d.k % 8 == 0) << "task " << d.id << " K " << d.k;
    unmarked += d.k % 8 != 0;
  }
  EXPECT_GT(unmarked, 0);
}

// The folded down projection's descriptors: every gate/up tile folds, o_proj's tiles write the
// sum's start, every activation a fold touches lies in its declared ranges (adds included), and
// a kernel without fold_down refuses such a plan.
TEST(Megakernel, FoldedDownProjectionTables) {
  for (const char* name : {"qwen3-bf16", "llama-f32", "qwen3-f32"}) {
    SCOPED_TRACE(name);
    const auto model = model::load(std::string(MPK_TEST_DATA) + "/" + name);
    const ir::Graph g = ir::build(model->config);
    const sched::Plan plan = sched::plan(g, megakernel_plan_options(g, 16, 64, parse_params("fold_down=1")));
    const MemoryPlan mem = plan_memory(g, plan.tasks, model->dtype, 64);
    const SegmentBases b{kAct, kWeights, kConsts, kKv};
    const rt::MegakernelTables t = build_tables(g, plan, mem, b, parse_params("fold_down=1"));
    check_access_ranges(plan, mem, b, t);
    int folds = 0, copies = 0, gate_up = 0;
    for (const sched::Task& task : plan.tasks.tasks)
      gate_up += plan.tasks.stages[size_t(task.stage)].name.ends_with(".gate_up");
    int fold = -1;
    for (const MkTask& d : t.tasks) {
      if (d.kind != MPK_MK_LINEAR) continue;
      if (d.flags & MPK_MK_F_FOLD) {
        ++folds;
        if (fold < 0) fold = d.id;
        EXPECT_EQ(d.fold_rows, int(model->config.hidden_size));
        EXPECT_EQ(d.fold_ld, int(model->config.intermediate_size));
      }
      for (int s = 0; s < d.num_slices; ++s) copies += d.slices[s].copy != 0;
    }
    EXPECT_EQ(folds, gate_up);
    EXPECT_GT(copies, 0);
    ASSERT_GE(fold, 0);
    // The plan's proofs include the folded tiles' lanes and their loop nests, proved.
    std::map<std::string, int> fold_proofs;  // by the use's first words
    for (const PlanProof& p : plan_proofs(t.device_tasks(), parse_params("fold_down=1")))
      if (p.use.starts_with("fold_down:")) {
        ++fold_proofs[p.use.substr(0, p.use.find_first_of(",(0123456789"))];
        EXPECT_TRUE(p.record.proved()) << p.use << ": " << p.record.to_json();
      }
    for (const char* use : {"fold_down: the down columns' lanes in groups of ", "fold_down: the activations",
                            "fold_down: the unaligned columns", "fold_down: the rows' reductions"})
      EXPECT_GE(fold_proofs[use], 1) << use;
    // The columns by lane groups where a vector width divides them.
    EXPECT_GE(fold_proofs["fold_down: the columns by lane groups"], 1);
    rt::MegakernelTables bad = t;
    bad.tasks[size_t(fold)].fold_rows += 1;
    try {
      check_access_ranges(plan, mem, b, bad);
      ADD_FAILURE() << "a fold one row past the output was not caught";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("outside its declared adds"), std::string::npos) << e.what();
    }
    try {
      (void)build_tables(g, plan, mem, b, MegakernelParams{});
      ADD_FAILURE() << "a kernel without fold_down took a folded plan";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    }
  }
}

// fold_down's kernel compiles below sm_90 too (scalar reductions there: the vector ones are
// sm_90's).
TEST(Megakernel, FoldKernelCompilesForSm80) {
  const cuda::CompileResult r = compile_megakernel("sm_80", parse_params("fold_down=1"), DType::BF16);
  EXPECT_FALSE(r.cubin.empty()) << r.log;
}

TEST(Megakernel, CompilesForSm90aPerDtype) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    const cuda::CompileResult r = compile_megakernel("sm_90a", MegakernelParams{}, d);
    ASSERT_FALSE(r.cubin.empty());
    const std::string bytes(r.cubin.begin(), r.cubin.end());
    for (DType e : {DType::F32, DType::BF16, DType::F16})
      EXPECT_EQ(bytes.find(megakernel_entry(e)) != std::string::npos, e == d) << megakernel_entry(e);
    // Nothing but ptxas's report of its figures ("ptxas info" and "ptxas ." lines).
    std::string warnings;
    for (size_t at = 0; at < r.log.size();) {
      const size_t end = std::min(r.log.find('\n', at), r.log.size());
      const std::string line = r.log.substr(at, end - at);
      if (!std::regex_match(line, std::regex(R"(ptxas +(info +:|\.).*|\s*)"))) warnings += line + "\n";
      at = end + 1;
    }
    EXPECT_TRUE(r.log.find("ptxas info") != std::string::npos && warnings.empty()) << "NVRTC warned:\n" << r.log;
  }
  EXPECT_NE(megakernel_source(MegakernelParams{}, DType::F16).find("struct MkTask"), std::string::npos);
  try {
    (void)megakernel_source(MegakernelParams{}, DType::I32);
    ADD_FAILURE() << "an i32 kernel was generated";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  }
}

}  // namespace
}  // namespace mpk::rt
