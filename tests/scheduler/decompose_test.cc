// decompose: tiles cover every output row once, weight bytes add up to the model's, attention
// splits by KV head and chunk.
#include "scheduler/decompose.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <tuple>

#include "base/error.h"
#include "configs.h"

namespace mpk::sched {
namespace {

using testing::build_tasks;
using testing::expected_weight_bytes;

// Every row of every linear weight is streamed by exactly one tile, and lands once in its
// output buffer.
void expect_rows_covered_once(const ir::Graph& g, const TaskGraph& tg) {
  std::map<int, std::vector<int>> rows;  // weight -> count per row
  for (const ir::Op& op : g.ops)
    if (op.kind == ir::OpKind::Linear) rows[op.weight].assign(size_t(g.weight(op.weight).shape[0]), 0);
  for (const Task& t : tg.tasks) {
    if (t.kind != TaskKind::Linear) continue;
    int64_t tile_rows = 0;
    for (const WeightSlice& s : t.weights) {
      ASSERT_TRUE(rows.count(s.weight)) << t.name;
      for (int64_t r = s.row_begin; r < s.row_end; ++r) ++rows[s.weight][size_t(r)];
      tile_rows += s.row_end - s.row_begin;
    }
    EXPECT_EQ(tile_rows, t.row_end - t.row_begin) << t.name;
  }
  for (const auto& [w, count] : rows)
    for (size_t r = 0; r < count.size(); ++r)
      ASSERT_EQ(count[r], 1) << g.weight(w).name << " row " << r;
}

TEST(Decompose, EveryLinearRowOnce) {
  std::vector<model::Config> configs = testing::tiny_configs();
  configs.push_back(testing::qwen3_0_6b());
  for (const model::Config& c : configs) {
    const ir::Graph g = ir::build(c);
    const bool tiny = c.hidden_size < 256;
    for (int64_t tile : {0, 1, 7, 16, 1000}) {
      if (!tiny && (tile == 1 || tile == 7)) continue;  // 10^5+ tasks: slow, nothing new
      for (bool merge : {true, false}) {
        DecomposeOptions o;
        o.tile_rows = tile, o.merge_sibling_linears = merge;
        SCOPED_TRACE(::testing::Message() << c.architecture << " tile=" << tile << " merge=" << merge);
        expect_rows_covered_once(g, decompose(g, o));
        expect_rows_covered_once(g, build_tasks(g, o));
      }
    }
  }
}

TEST(Decompose, TilesPerLinearAboutTheSmCount) {
  const ir::Graph g = ir::build(testing::qwen3_8b());
  const TaskGraph tg = decompose(g, {});
  int linears = 0;
  for (const Stage& s : tg.stages) {
    if (s.kind != TaskKind::Linear) continue;
    ++linears;
    EXPECT_LE(s.tasks.size(), 132u) << s.name;
    EXPECT_GE(s.tasks.size(), 120u) << s.name;
  }
  EXPECT_EQ(linears, 36 * 4 + 1);  // qkv, o, gate_up, down per layer + LM head
  EXPECT_EQ(tg.stages[2].name, "L0.qkv");  // after embed and attn_norm
  EXPECT_EQ(tg.stages[2].rows, 4096 + 2 * 1024);
  EXPECT_EQ(linear_tile_rows(6144, {}), 48);
  EXPECT_EQ(linear_tile_rows(151936, {}), 1152);
}

TEST(Decompose, MergedSiblingsKeepSlicesPerWeight) {
  const ir::Graph g = ir::build(testing::tiny_qwen3());  // q 96 rows, k 24, v 24
  DecomposeOptions o;
  o.tile_rows = 40;
  const TaskGraph tg = decompose(g, o);
  const Stage& qkv = tg.stages[2];
  ASSERT_EQ(qkv.name, "L0.qkv");
  ASSERT_EQ(qkv.tasks.size(), 4u);  // 144 rows / 40
  const Task& t = tg.tasks[size_t(qkv.tasks[2])];  // rows [80, 120): q 80..96, k 0..24
  ASSERT_EQ(t.weights.size(), 2u);
  EXPECT_EQ(t.weights[0].row_begin, 80);
  EXPECT_EQ(t.weights[0].row_end, 96);
  EXPECT_EQ(t.weights[1].row_begin, 0);
  EXPECT_EQ(t.weights[1].row_end, 24);
  EXPECT_EQ(g.weight(t.weights[1].weight).name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.weight_bytes, 40 * 64 * 2);
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * 40 * 64);
  const TaskGraph unmerged = decompose(g, {.merge_sibling_linears = false});
  EXPECT_EQ(unmerged.stages[2].name, "L0.q");
  EXPECT_EQ(unmerged.stages[3].name, "L0.k");
}

TEST(Decompose, WeightBytesAreTheModelsBytesPerStep) {
  std::vector<model::Config> configs = testing::tiny_configs();
  configs.push_back(testing::qwen3_0_6b());
  configs.push_back(testing::qwen3_8b());
  for (const model::Config& c : configs) {
    const ir::Graph g = ir::build(c);
    const int64_t expected = expected_weight_bytes(c, g.weight_dtype);
    EXPECT_EQ(decompose(g, {}).total_weight_bytes(), expected) << c.architecture;
    EXPECT_EQ(build_tasks(g).total_weight_bytes(), expected) << c.architecture;
  }
  // DESIGN.md's figures: ~1.19 GB (tied head) and ~15.1 GB.
  const int64_t small = expected_weight_bytes(testing::qwen3_0_6b(), DType::BF16);
  const int64_t large = expected_weight_bytes(testing::qwen3_8b(), DType::BF16);
  EXPECT_NEAR(double(small) / 1e9, 1.19, 0.01);
  EXPECT_NEAR(double(large) / 1e9, 15.1, 0.1);
}

TEST(Decompose, AttentionPerKvHead) {
  const model::Config c = testing::qwen3_8b();
  const ir::Graph g = ir::build(c);
  DecomposeOptions o;
  o.seq_len = 512, o.kv_chunk = 1024;
  const TaskGraph tg = decompose(g, o);
  int attention = 0;
  for (const Task& t : tg.tasks) {
    EXPECT_NE(t.kind, TaskKind::AttentionMerge);
    if (t.kind != TaskKind::Attention) continue;
    ++attention;
    EXPECT_EQ(t.q_head_end - t.q_head_begin, 4);
    EXPECT_EQ(t.q_head_begin, t.kv_head * 4);
    EXPECT_EQ(t.kv_begin, 0);
    EXPECT_EQ(t.kv_end, 512);
    EXPECT_EQ(t.kv_bytes, 512 * 2 * 128 * 2);
    ASSERT_EQ(t.writes.size(), 1u);
    EXPECT_EQ(t.writes[0].begin, t.kv_head * 4 * 128);
    EXPECT_EQ(t.writes[0].end, (t.kv_head + 1) * 4 * 128);
  }
  EXPECT_EQ(attention, 36 * 8);
}

TEST(Decompose, AttentionChunksAndMerge) {
  const ir::Graph g = ir::build(testing::qwen3_0_6b());
  DecomposeOptions o;
  o.seq_len = 2500, o.kv_chunk = 1000;  // 3 chunks of 834 (last 832)
  const TaskGraph tg = decompose(g, o);
  std::map<std::pair<int, int>, std::vector<int>> covered;  // (layer, kv head) -> count per position
  int merges = 0;
  int64_t kv_bytes = 0;
  for (const Task& t : tg.tasks) {
    if (t.kind == TaskKind::AttentionMerge) {
      ++merges;
      EXPECT_EQ(t.num_chunks, 3);
      continue;
    }
    if (t.kind != TaskKind::Attention) continue;
    EXPECT_EQ(t.num_chunks, 3);
    auto& c = covered[{t.layer, t.kv_head}];
    c.resize(2500);
    for (int64_t p = t.kv_begin; p < t.kv_end; ++p) ++c[size_t(p)];
    kv_bytes += t.kv_bytes;
  }
  EXPECT_EQ(merges, 28 * 8);
  EXPECT_EQ(covered.size(), size_t(28 * 8));
  for (const auto& [key, c] : covered)
    for (int n : c) ASSERT_EQ(n, 1);
  EXPECT_EQ(kv_bytes, int64_t(28) * 8 * 2500 * 128 * 2 * 2);
  // No split when the option is off.
  o.kv_chunk = 0;
  for (const Task& t : decompose(g, o).tasks) EXPECT_NE(t.kind, TaskKind::AttentionMerge);
}

// kv_splits: exactly that many chunks per KV head whatever seq_len, an even integer split of
// it, and precedence over kv_chunk.
TEST(Decompose, KvSplitsEvenChunks) {
  const ir::Graph g = ir::build(testing::qwen3_0_6b());
  using Case = std::tuple<int64_t, int, int64_t>;  // seq_len, kv_splits, kv_chunk
  for (auto [len, splits, chunk] : {Case{100, 16, 1024}, Case{5, 16, 1024}, Case{4096, 3, 1024},
                                    Case{4099, 7, 0}}) {
    SCOPED_TRACE(::testing::Message() << "seq_len=" << len << " kv_splits=" << splits);
    const TaskGraph tg = decompose(g, {.seq_len = len, .kv_chunk = chunk, .kv_splits = splits});
    std::map<std::pair<int, int>, std::vector<int>> chunks;  // (layer, kv head) -> chunk ids seen
    int merges = 0;
    for (const Task& t : tg.tasks) {
      if (t.kind == TaskKind::AttentionMerge) ++merges;
      if (t.kind != TaskKind::Attention && t.kind != TaskKind::AttentionMerge) continue;
      EXPECT_EQ(t.num_chunks, splits);
      if (t.kind == TaskKind::AttentionMerge) continue;
      chunks[{t.layer, t.kv_head}].push_back(t.chunk);
      EXPECT_EQ(t.kv_begin, t.chunk * len / splits);
      EXPECT_EQ(t.kv_end, (t.chunk + 1) * len / splits);
      EXPECT_EQ(t.kv_bytes, (t.kv_end - t.kv_begin) * 2 * 128 * 2);
    }
    EXPECT_EQ(merges, 28 * 8);
    ASSERT_EQ(chunks.size(), size_t(28 * 8));
    std::vector<int> all(size_t(splits), 0);
    std::iota(all.begin(), all.end(), 0);
    for (const auto& [key, ids] : chunks) ASSERT_EQ(ids, all);
  }
  // The last chunk holds the last position even when most chunks are empty.
  const TaskGraph tg = decompose(g, {.seq_len = 5, .kv_splits = 16});
  for (const Task& t : tg.tasks)
    if (t.kind == TaskKind::Attention && t.chunk == 15) {
      EXPECT_EQ(t.kv_begin, 4);
      EXPECT_EQ(t.kv_end, 5);
    }
}

// The partial of (kv head h, chunk c, query head g) starts at ((h*C + c)*group + g)*(D + 2):
// chunk task (h, c) writes its group's partials there, merge task h reads its C chunks.
TEST(Decompose, KvSplitsPartialLayout) {
  const ir::Graph g = ir::build(testing::tiny_llama());  // 6 query heads, 2 KV heads, D = 12
  const int64_t C = 4, group = 3, D = 12, partial = D + 2;
  const TaskGraph tg = decompose(g, {.seq_len = 50, .kv_splits = int(C)});
  const int out = g.find_tensor("layers.0.attn");
  ASSERT_GE(out, 0);
  int buffer = -1;
  for (size_t b = 0; b < tg.buffers.size(); ++b)
    if (tg.buffers[b].name == "layers.0.attn.partial") buffer = int(b);
  ASSERT_GE(buffer, 0);
  EXPECT_EQ(tg.buffers[size_t(buffer)].numel, 2 * C * group * partial);
  EXPECT_EQ(tg.buffers[size_t(buffer)].dtype, DType::F32);
  int chunks = 0, merges = 0;
  for (const Task& t : tg.tasks) {
    if (t.layer != 0) continue;
    const int64_t h = t.kv_head;
    if (t.kind == TaskKind::Attention) {
      ++chunks;
      const int64_t c = t.chunk, first = ((h * C + c) * group + 0) * partial;
      EXPECT_EQ(t.writes, (std::vector<Access>{{buffer, first, first + group * partial}})) << t.name;
    } else if (t.kind == TaskKind::AttentionMerge) {
      ++merges;
      EXPECT_EQ(t.reads, (std::vector<Access>{{buffer, h * C * group * partial, (h + 1) * C * group * partial}}));
      EXPECT_EQ(t.writes, (std::vector<Access>{{out, h * group * D, (h + 1) * group * D}}));
    }
  }
  EXPECT_EQ(chunks, 2 * C);
  EXPECT_EQ(merges, 2);
}

// kv_splits = 1 is no split at all, also where kv_chunk alone would split.
TEST(Decompose, OneKvSplitIsNoSplit) {
  const ir::Graph g = ir::build(testing::tiny_qwen2());
  const TaskGraph one = decompose(g, {.seq_len = 300, .kv_chunk = 64, .kv_splits = 1});
  const TaskGraph none = decompose(g, {.seq_len = 300, .kv_chunk = 0});
  ASSERT_EQ(one.tasks.size(), none.tasks.size());
  EXPECT_EQ(one.buffers.size(), g.tensors.size());  // no partials
  for (size_t i = 0; i < one.tasks.size(); ++i) {
    EXPECT_NE(one.tasks[i].kind, TaskKind::AttentionMerge);
    EXPECT_EQ(one.tasks[i].name, none.tasks[i].name);
    EXPECT_EQ(one.tasks[i].writes, none.tasks[i].writes);
    EXPECT_EQ(one.tasks[i].kv_end, none.tasks[i].kv_end);
  }
}

TEST(Decompose, BadOptions) {
  const ir::Graph g = ir::build(testing::tiny_qwen3());
  EXPECT_THROW(decompose(g, {.seq_len = 0}), Error);
  EXPECT_THROW(decompose(g, {.kv_chunk = -1}), Error);
  try {
    decompose(g, {.kv_splits = -2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("kv_splits must be >= 0, got -2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decompose(g, {.target_tiles = 0}), Error);
  try {
    decompose(g, {.row_align = 0});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  }
}

}  // namespace
}  // namespace mpk::sched
