// fuse: a layer becomes qkv, attention, o_proj, gate_up, down; each fusion is recorded in order.
#include "scheduler/fuse.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "configs.h"
#include "scheduler/decompose.h"
#include "scheduler/events.h"

namespace mpk::ir {
void PrintTo(OpKind k, std::ostream* os) { *os << op_name(k); }
}  // namespace mpk::ir

namespace mpk::sched {
namespace {

using ir::OpKind;
using K = std::vector<OpKind>;

K kinds(const Task& t) {
  K k;
  for (const FusedOp& f : t.ops) k.push_back(f.kind);
  return k;
}

const Stage* find_stage(const TaskGraph& tg, const std::string& name) {
  for (const Stage& s : tg.stages)
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> stage_names(const TaskGraph& tg) {
  std::vector<std::string> names;
  for (const Stage& s : tg.stages) names.push_back(s.name);
  return names;
}

TEST(Fuse, Qwen3LayerIsFiveWaves) {
  const ir::Graph g = ir::build(testing::tiny_qwen3());
  const TaskGraph tg = fuse(g, decompose(g, {.seq_len = 512}), {});
  EXPECT_EQ(stage_names(tg),
            (std::vector<std::string>{"L0.qkv", "L0.attn", "L0.attn_out", "L0.gate_up", "L0.mlp_out",
                                      "L1.qkv", "L1.attn", "L1.attn_out", "L1.gate_up", "L1.mlp_out",
                                      "lm_head", "argmax"}));
  for (const Task& t : tg.tasks) {
    const std::string& s = tg.stages[size_t(t.stage)].name;
    SCOPED_TRACE(t.name);
    if (s.ends_with(".qkv")) {
      ASSERT_GE(t.ops.size(), 2u);
      EXPECT_EQ(t.ops[0].kind, OpKind::RmsNorm);
      for (size_t i = 1; i < t.ops.size(); ++i) EXPECT_EQ(t.ops[i].kind, OpKind::Linear);
    } else if (s.ends_with(".attn")) {
      EXPECT_EQ(kinds(t), (K{OpKind::HeadRmsNorm, OpKind::HeadRmsNorm, OpKind::Rope, OpKind::Rope,
                             OpKind::Attention}));
    } else if (s.ends_with(".attn_out") || s.ends_with(".mlp_out")) {
      const bool down = s.ends_with(".mlp_out");
      const K expected = down ? K{OpKind::SiluMul, OpKind::Linear, OpKind::Add}
                              : K{OpKind::Linear, OpKind::Add};
      EXPECT_EQ(kinds(t), expected);
    } else if (s.ends_with(".gate_up")) {
      ASSERT_GE(t.ops.size(), 2u);
      EXPECT_EQ(t.ops[0].kind, OpKind::RmsNorm);
    } else if (s == "lm_head") {
      EXPECT_EQ(kinds(t), (K{OpKind::LastRow, OpKind::RmsNorm, OpKind::Linear, OpKind::Argmax}));
    } else {
      EXPECT_EQ(s, "argmax");
      EXPECT_EQ(kinds(t), (K{OpKind::Argmax, OpKind::Embedding}));
    }
  }
  // The graph ops each task lists are in graph order.
  for (const Task& t : tg.tasks)
    for (size_t i = 1; i < t.ops.size(); ++i)
      if (t.ops[i].kind != OpKind::Embedding) {
        EXPECT_LT(t.ops[i - 1].op, t.ops[i].op) << t.name;
      }
}

TEST(Fuse, EveryGraphOpImplemented) {
  for (const model::Config& c : testing::tiny_configs()) {
    const ir::Graph g = ir::build(c);
    const TaskGraph tg = fuse(g, decompose(g, {.seq_len = 100, .kv_chunk = 40}), {});
    std::vector<int> seen(g.ops.size(), 0);
    for (const Task& t : tg.tasks)
      for (const FusedOp& f : t.ops) {
        EXPECT_EQ(g.ops[size_t(f.op)].kind, f.kind);
        seen[size_t(f.op)] = 1;
      }
    for (size_t i = 0; i < g.ops.size(); ++i) EXPECT_TRUE(seen[i]) << c.architecture << " op " << i;
  }
}

TEST(Fuse, LlamaAttentionHasRopeOnly) {
  const ir::Graph g = ir::build(testing::tiny_llama());
  // The merge kept as a task of its own, to check that it gets no prologue.
  const TaskGraph tg =
      fuse(g, decompose(g, {.seq_len = 100, .kv_chunk = 40}), {.merge_into_attention = false});
  for (const Task& t : tg.tasks) {
    if (t.kind == TaskKind::Attention) {
      EXPECT_EQ(kinds(t), (K{OpKind::Rope, OpKind::Rope, OpKind::Attention})) << t.name;
    }
    if (t.kind == TaskKind::AttentionMerge) {
      EXPECT_EQ(kinds(t), (K{OpKind::Attention})) << t.name;
    }
  }
}

// With kv_splits every chunk of a KV head recomputes its q/k norm and RoPE (and only the last
// appends to the cache); the merge, a task or folded into the chunks, only merges. The norm
// scales still count once per step.
TEST(Fuse, Qwen3ChunksEachGetTheQkPrologue) {
  const model::Config c = testing::tiny_qwen3();
  const ir::Graph g = ir::build(c);
  for (bool fold : {false, true}) {
    SCOPED_TRACE(fold ? "merge folded" : "merge task");
    const TaskGraph tg =
        fuse(g, decompose(g, {.seq_len = 512, .kv_splits = 16}), {.merge_into_attention = fold});
    int chunks = 0, merges = 0;
    for (const Task& t : tg.tasks) {
      if (t.kind == TaskKind::Attention) {
        ++chunks;
        EXPECT_EQ(kinds(t), (K{OpKind::HeadRmsNorm, OpKind::HeadRmsNorm, OpKind::Rope, OpKind::Rope,
                               OpKind::Attention})) << t.name;
        // It reads the prologue's inputs (the projections), not the normed or roped q and k.
        for (const Access& r : t.reads) {
          const std::string& b = tg.buffers[size_t(r.buffer)].name;
          EXPECT_FALSE(b.ends_with("_rope") || b.ends_with("_norm")) << t.name << " reads " << b;
        }
      }
      if (t.kind == TaskKind::AttentionMerge) {
        ++merges;
        EXPECT_EQ(kinds(t), (K{OpKind::Attention})) << t.name;
      }
    }
    EXPECT_EQ(chunks, 2 * 16);
    EXPECT_EQ(merges, fold ? 0 : 2);
    EXPECT_EQ(find_stage(tg, "L0.q_norm"), nullptr);
    EXPECT_EQ(tg.total_weight_bytes(), testing::expected_weight_bytes(c, g.weight_dtype));
  }
}

TEST(Fuse, ReadsAndWritesAfterFusion) {
  const model::Config c = testing::tiny_qwen3();
  const ir::Graph g = ir::build(c);
  const TaskGraph tg = fuse(g, decompose(g, {.tile_rows = 16}), {});
  const int gate = g.find_tensor("layers.0.gate"), up = g.find_tensor("layers.0.up");
  const int mid = g.find_tensor("layers.0.attn_residual"), out = g.find_tensor("layers.0.out");
  const int embed = g.find_tensor("embed");
  const Stage* down = find_stage(tg, "L0.mlp_out");
  ASSERT_NE(down, nullptr);
  for (int id : down->tasks) {
    const Task& t = tg.tasks[size_t(id)];
    // silu(gate) * up over the whole intermediate vector, the residual rows of its own tile.
    EXPECT_EQ(t.reads, (std::vector<Access>{{mid, t.row_begin, t.row_end}, {gate, 0, 176}, {up, 0, 176}}));
    EXPECT_EQ(t.writes, (std::vector<Access>{{out, t.row_begin, t.row_end}}));
    ASSERT_EQ(t.weights.size(), 1u);
    EXPECT_EQ(t.weights[0].out, out);
  }
  // Layer 0 reads the embedding, which the final task writes for the next step.
  EXPECT_TRUE(tg.buffers[size_t(embed)].carried);
  const Task& last = tg.tasks.back();
  bool writes_embed = false;
  for (const Access& a : last.writes) writes_embed |= a.buffer == embed;
  EXPECT_TRUE(writes_embed);
  // The argmax reduce reads one partial per LM-head tile (value and index), and the whole
  // logits (which a sampled draw ranks).
  const Stage* head = find_stage(tg, "lm_head");
  ASSERT_NE(head, nullptr);
  ASSERT_EQ(last.reads.size(), 3u);
  std::vector<DType> partials;
  for (const Access& a : last.reads) {
    if (a.buffer == g.logits) {
      EXPECT_EQ(a.begin, 0);
      EXPECT_EQ(a.end, tg.buffers[size_t(a.buffer)].numel);
      continue;
    }
    EXPECT_EQ(a.begin, 0);
    EXPECT_EQ(a.end, int64_t(head->tasks.size()));
    partials.push_back(tg.buffers[size_t(a.buffer)].dtype);
  }
  EXPECT_EQ(partials, (std::vector<DType>{DType::F32, DType::I32}));
}

TEST(Fuse, NormWeightReadFromDramOnce) {
  const ir::Graph g = ir::build(testing::tiny_qwen3());
  const TaskGraph tg = fuse(g, decompose(g, {.tile_rows = 16}), {});
  const Stage* qkv = find_stage(tg, "L0.qkv");
  const Task& first = tg.tasks[size_t(qkv->tasks[0])];
  const Task& second = tg.tasks[size_t(qkv->tasks[1])];
  EXPECT_EQ(first.weight_bytes, 16 * 64 * 2 + 64 * 2);
  EXPECT_EQ(second.weight_bytes, 16 * 64 * 2);
  EXPECT_EQ(second.act_bytes, 64 * 4 + 64 * 2);  // the input vector and the norm scale from L2
}

TEST(Fuse, EachFusionCanBeTurnedOff) {
  const ir::Graph g = ir::build(testing::tiny_qwen3());
  const TaskGraph plain = decompose(g, {});  // seq_len 4096: KV chunks and a merge per layer
  ASSERT_NE(find_stage(plain, "L0.attn_merge"), nullptr);
  EXPECT_EQ(stage_names(fuse(g, plain, testing::unfused())), stage_names(plain));
  FuseOptions no_residual;
  no_residual.residual_into_linear = false;
  const TaskGraph tg = fuse(g, decompose(g, {}), no_residual);
  EXPECT_NE(find_stage(tg, "L0.attn_residual"), nullptr);
  EXPECT_NE(find_stage(tg, "L0.out"), nullptr);
  EXPECT_EQ(find_stage(tg, "L0.attn_norm"), nullptr);
  FuseOptions no_embed;
  no_embed.embedding_into_argmax = false;
  const TaskGraph te = fuse(g, decompose(g, {}), no_embed);
  EXPECT_EQ(te.stages.front().name, "embed");
  EXPECT_EQ(kinds(te.tasks.back()), K{OpKind::Argmax});
  FuseOptions no_merge;
  no_merge.merge_into_attention = false;
  EXPECT_NE(find_stage(fuse(g, plain, no_merge), "L0.attn_merge"), nullptr);
  EXPECT_EQ(find_stage(fuse(g, plain, {}), "L0.attn_merge"), nullptr);
}

// Qwen3-0.6B (8 KV heads of 2 query heads, head_dim 128) at seq_len 512, attention split into
// kv_splits chunks per KV head.
TaskGraph split_qwen3_0_6b(const ir::Graph& g, int kv_splits, const FuseOptions& f = {}) {
  return fuse(g, decompose(g, {.seq_len = 512, .kv_splits = kv_splits}), f);
}

// The merge of a KV head folds into its chunk tasks: no merge task is left, every chunk merges,
// and chunk c writes share c of the head's output, so a head's shares are disjoint and cover
// its output range exactly (a reader of any part of it waits for all the head's chunks).
TEST(Fuse, MergeFoldsIntoTheChunks) {
  const model::Config c = testing::qwen3_0_6b();
  const ir::Graph g = ir::build(c);
  const TaskGraph tg = split_qwen3_0_6b(g, 16);
  const int64_t head_out = int64_t(c.num_heads / c.num_kv_heads) * c.head_dim;  // 256
  std::map<std::pair<int, int>, std::vector<Access>> shares;  // (layer, KV head): per chunk
  for (const Task& t : tg.tasks) {
    EXPECT_NE(t.kind, TaskKind::AttentionMerge) << t.name;
    EXPECT_EQ(t.merges, t.kind == TaskKind::Attention) << t.name;
    if (t.kind != TaskKind::Attention) continue;
    ASSERT_EQ(t.num_chunks, 16) << t.name;
    const int out = g.ops[size_t(t.ops.back().op)].output;  // the attention output
    std::vector<Access>& head = shares[{t.layer, t.kv_head}];
    head.resize(16);
    for (const Access& w : t.writes)
      if (w.buffer == out) {
        EXPECT_EQ(head[size_t(t.chunk)].buffer, -1) << t.name << " writes two shares";
        head[size_t(t.chunk)] = w;
      }
  }
  ASSERT_EQ(shares.size(), size_t(c.num_layers * c.num_kv_heads));
  for (const auto& [key, head] : shares) {
    SCOPED_TRACE(fmt::format("L{} head {}", key.first, key.second));
    int64_t next = key.second * head_out;  // chunk c's share starts where chunk c - 1's ends
    for (const Access& a : head) {
      EXPECT_EQ(a.begin, next);
      EXPECT_GT(a.end, a.begin);
      next = a.end;
    }
    EXPECT_EQ(next, (key.second + 1) * head_out);
  }
}

TEST(Fuse, MergeKeptWhenNotFolded) {
  const ir::Graph g = ir::build(testing::qwen3_0_6b());
  const TaskGraph kept = split_qwen3_0_6b(g, 16, {.merge_into_attention = false});
  int merges = 0;
  for (const Task& t : kept.tasks) {
    EXPECT_FALSE(t.merges) << t.name;
    merges += t.kind == TaskKind::AttentionMerge;
  }
  EXPECT_EQ(merges, 28 * 8);
  EXPECT_NE(find_stage(kept, "L0.attn_merge"), nullptr);
  // Folding moves the merges' flops to the chunks; the step's total stays.
  EXPECT_NEAR(split_qwen3_0_6b(g, 16).total_flops(), kept.total_flops(), 1e-9 * kept.total_flops());
}

// A chunk with an empty share of its head's output would be waited for by nobody, yet it may
// be the one that merges: with more chunks than output elements per head the merge stays.
TEST(Fuse, MergeKeptWhenChunksOutnumberTheHeadsOutput) {
  const ir::Graph g = ir::build(testing::tiny_qwen2());  // 3 layers, 2 KV heads of 2 x 12 outputs
  for (int splits : {24, 25}) {
    SCOPED_TRACE(fmt::format("kv_splits {}", splits));
    const TaskGraph tg = fuse(g, decompose(g, {.seq_len = 512, .kv_splits = splits}), {});
    int merges = 0, merging = 0;
    for (const Task& t : tg.tasks) {
      merges += t.kind == TaskKind::AttentionMerge;
      merging += t.merges;
    }
    EXPECT_EQ(merges, splits == 24 ? 0 : 3 * 2);
    EXPECT_EQ(merging, splits == 24 ? 3 * 2 * 24 : 0);
  }
}

// The chunk that merges writes its head's whole output, though it declares only its share: a
// task reading part of a head's output would wait only for the chunks whose shares it overlaps,
// so that head keeps its merge task. Here layer 0's o_proj tiles skip the first output element
// (part of head 0) and read all of head 1: only L0 head 0 keeps its merge.
TEST(Fuse, MergeKeptWhenAReaderReadsPartOfTheHead) {
  const model::Config c = testing::tiny_llama();  // 2 layers, 2 KV heads of 3 x 12 outputs
  const ir::Graph g = ir::build(c);
  TaskGraph plain = decompose(g, {.seq_len = 512, .kv_splits = 4});
  const int64_t head_out = int64_t(c.num_heads / c.num_kv_heads) * c.head_dim;  // 36
  int out = -1;
  for (const Task& t : plain.tasks)
    if (t.kind == TaskKind::AttentionMerge && t.layer == 0 && t.kv_head == 0) {
      ASSERT_EQ(t.writes.size(), 1u);
      EXPECT_EQ(t.writes[0].begin, 0);
      EXPECT_EQ(t.writes[0].end, head_out);
      out = t.writes[0].buffer;
    }
  ASSERT_GE(out, 0);
  int partial = 0;
  for (Task& t : plain.tasks)
    for (Access& r : t.reads)
      if (r.buffer == out) {
        ASSERT_EQ(r.begin, 0) << t.name;
        ASSERT_GE(r.end, 2 * head_out) << t.name;
        r.begin = 1;
        ++partial;
      }
  ASSERT_GT(partial, 0);
  const TaskGraph tg = fuse(g, std::move(plain), {});
  std::set<std::pair<int, int>> kept;  // (layer, KV head) of the merge tasks left
  for (const Task& t : tg.tasks) {
    if (t.kind == TaskKind::AttentionMerge) kept.insert({t.layer, t.kv_head});
    if (t.kind != TaskKind::Attention) continue;
    const bool head0 = t.layer == 0 && t.kv_head == 0;
    EXPECT_EQ(t.merges, !head0) << t.name;
    // A chunk that does not merge writes only its partials, never the head's output.
    if (head0) {
      for (const Access& w : t.writes) EXPECT_NE(w.buffer, out) << t.name;
    }
  }
  EXPECT_EQ(kept, (std::set<std::pair<int, int>>{{0, 0}}));
  // With events, the kept merge waits for its head's four chunks.
  const TaskGraph with_events = build_events(TaskGraph(tg));
  for (const Task& t : with_events.tasks)
    if (t.kind == TaskKind::AttentionMerge) {
      int chunks = 0;
      for (int p : testing::waited_triggers(with_events, t)) {
        const Task& w = with_events.tasks[size_t(p)];
        chunks += w.kind == TaskKind::Attention && w.layer == 0 && w.kv_head == 0;
      }
      EXPECT_EQ(chunks, 4) << t.name;
    }
}

// A reader of more than the head's range (here o_proj reading every head) lets the head fold.
TEST(Fuse, MergeFoldsWhenEveryReaderReadsTheWholeHead) {
  const ir::Graph g = ir::build(testing::tiny_llama());
  const TaskGraph tg = fuse(g, decompose(g, {.seq_len = 512, .kv_splits = 4}), {});
  int merging = 0;
  for (const Task& t : tg.tasks) {
    EXPECT_NE(t.kind, TaskKind::AttentionMerge) << t.name;
    merging += t.merges;
  }
  EXPECT_EQ(merging, 2 * 2 * 4);
}

TEST(Fuse, NothingToFoldWithOneSplit) {
  const ir::Graph g = ir::build(testing::qwen3_0_6b());
  int attention = 0;
  for (const Task& t : split_qwen3_0_6b(g, 1).tasks) {
    EXPECT_FALSE(t.merges) << t.name;
    EXPECT_NE(t.kind, TaskKind::AttentionMerge) << t.name;
    attention += t.kind == TaskKind::Attention;
  }
  EXPECT_EQ(attention, 28 * 8);
}

}  // namespace
}  // namespace mpk::sched
