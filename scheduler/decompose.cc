#include "scheduler/decompose.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "base/error.h"
#include "ir/layouts.h"

namespace mpk::sched {
namespace {

using ir::OpKind;

// "layers.3.q" -> "q"; names outside layers stay as they are.
std::string short_name(const std::string& tensor) {
  if (tensor.rfind("layers.", 0) == 0) {
    size_t dot = tensor.find('.', 7);
    if (dot != std::string::npos) return tensor.substr(dot + 1);
  }
  return tensor;
}

class Decomposer {
 public:
  Decomposer(const ir::Graph& g, const DecomposeOptions& o) : g_(g), o_(o) {
    tg_.seq_len = o.seq_len;
    tg_.weight_dtype = g.weight_dtype;
    for (size_t i = 0; i < g.tensors.size(); ++i) {
      const ir::TensorDesc& t = g.tensors[i];
      tg_.buffers.push_back({t.name, t.dtype, ir::numel(t.shape, 1), int(i), false});
    }
    wbytes_ = int64_t(dtype_size(g.weight_dtype));
  }

  TaskGraph run() {
    for (size_t i = 0; i < g_.ops.size();) {
      const ir::Op& op = g_.ops[i];
      switch (op.kind) {
        case OpKind::Linear: i += linear(i); continue;
        case OpKind::Attention: attention(int(i)); break;
        default: vector_op(int(i)); break;
      }
      ++i;
    }
    return std::move(tg_);
  }

 private:
  int64_t numel(int tensor) const { return tg_.buffers.at(size_t(tensor)).numel; }
  Access whole(int tensor) const { return {tensor, 0, numel(tensor)}; }
  int64_t weight_numel(int w) const { return w < 0 ? 0 : ir::numel(g_.weight(w).shape, 1); }

  int new_stage(std::string name, TaskKind kind, int layer, int64_t rows, int64_t k) {
    tg_.stages.push_back({std::move(name), kind, layer, rows, k, {}});
    return int(tg_.stages.size()) - 1;
  }

  Task& new_task(int stage) {
    Stage& s = tg_.stages[size_t(stage)];
    Task t;
    t.id = int(tg_.tasks.size());
    t.kind = s.kind;
    t.stage = stage;
    t.tile = int(s.tasks.size());
    t.layer = s.layer;
    t.name = fmt::format("{}[{}]", s.name, t.tile);
    s.tasks.push_back(t.id);
    tg_.tasks.push_back(std::move(t));
    return tg_.tasks.back();
  }

  void finish(Task& t) {
    t.reads = normalize(std::move(t.reads));
    t.writes = normalize(std::move(t.writes));
    t.act_bytes = access_bytes(tg_, t.reads);
  }

  // Consecutive linears from `first` that read the same input become one stage.
  int linear(size_t first) {
    const ir::Op& head = g_.ops[first];
    std::vector<int> members = {int(first)};
    for (size_t j = first + 1; o_.merge_sibling_linears && j < g_.ops.size(); ++j) {
      const ir::Op& op = g_.ops[j];
      if (op.kind != OpKind::Linear || op.inputs != head.inputs) break;
      members.push_back(int(j));
    }
    const int64_t k = numel(head.inputs[0]);
    int64_t rows = 0;
    std::string name;
    bool single_letters = true;
    for (int m : members) {
      const ir::Op& op = g_.ops[size_t(m)];
      MPK_CHECK(g_.weight(op.weight).shape.size() == 2 && g_.weight(op.weight).shape[1] == k,
                InvalidArgument)
          << "decompose: linear " << tg_.buffers[size_t(op.output)].name
          << " has a weight that is not [rows, " << k << "]";
      rows += numel(op.output);
      single_letters = single_letters && short_name(g_.tensor(op.output).name).size() == 1;
    }
    for (size_t i = 0; i < members.size(); ++i) {
      const ir::Op& op = g_.ops[size_t(members[i])];
      std::string part = op.output == g_.logits ? "lm_head" : short_name(g_.tensor(op.output).name);
      if (i && !single_letters) name += '_';
      name += part;
    }
    const int stage =
        new_stage(layer_prefix(head.layer) + name, TaskKind::Linear, head.layer, rows, k);
    if (o_.pair_siblings && members.size() == 2 &&
        numel(g_.ops[size_t(members[0])].output) == numel(g_.ops[size_t(members[1])].output)) {
      paired_tiles(stage, members, k);
      return 2;
    }
    const int64_t tile = linear_tile_rows(rows, o_);
    for (int64_t r0 = 0; r0 < rows; r0 += tile) {
      const int64_t r1 = std::min(rows, r0 + tile);
      Task& t = new_task(stage);
      t.row_begin = r0, t.row_end = r1, t.k = k;
      t.reads.push_back(whole(head.inputs[0]));
      int64_t base = 0;
      for (int m : members) {
        const ir::Op& op = g_.ops[size_t(m)];
        const int64_t n = numel(op.output);
        const int64_t b = std::max(r0, base) - base, e = std::min(r1, base + n) - base;
        base += n;
        if (b < e) add_rows(t, m, b, e, k);
      }
      finish(t);
    }
    return int(members.size());
  }

  // Rows [b, e) of linear op m (K = k) into tile t: its slice, output and costs.
  void add_rows(Task& t, int m, int64_t b, int64_t e, int64_t k) {
    const ir::Op& op = g_.ops[size_t(m)];
    t.ops.push_back({m, OpKind::Linear});
    t.weights.push_back({op.weight, op.bias, b, e, op.output, b});
    t.writes.push_back({op.output, b, e});
    t.weight_bytes += (e - b) * (k + (op.bias >= 0 ? 1 : 0)) * wbytes_;
    t.flops += 2.0 * double(e - b) * double(k) + (op.bias >= 0 ? double(e - b) : 0.0);
  }

  // Tile t of two sibling linears of n rows each: rows [a, b) of both, the stage's rows
  // [2a, 2b) (Task::row_begin: ordered tile by tile).
  void paired_tiles(int stage, const std::vector<int>& members, int64_t k) {
    const int64_t n = numel(g_.ops[size_t(members[0])].output);
    const int64_t tile = linear_tile_rows(n, o_);
    for (int64_t a = 0; a < n; a += tile) {
      const int64_t b = std::min(n, a + tile);
      Task& t = new_task(stage);
      t.row_begin = 2 * a, t.row_end = 2 * b, t.k = k;
      t.reads.push_back(whole(g_.ops[size_t(members[0])].inputs[0]));
      for (int m : members) add_rows(t, m, a, b, k);
      finish(t);
    }
  }

  void attention(int index) {
    const ir::Op& op = g_.ops[size_t(index)];
    const ir::Attrs& a = op.attrs;
    const int hq = a.num_heads, hkv = a.num_kv_heads, d = a.head_dim, group = hq / hkv;
    const int64_t len = o_.seq_len;
    const int chunks = num_chunks(len);
    const int q = op.inputs[0], k = op.inputs[1], v = op.inputs[2], pos = op.inputs[3];
    const std::string prefix = layer_prefix(op.layer);
    const int stage = new_stage(prefix + "attn", TaskKind::Attention, op.layer, hkv, 0);
    // Per chunk: for each query head of the group a state row, D partial sums, the running max
    // and the running sum (ir::AttentionStates, the layout Task documents).
    auto rows_at = [&](int64_t h, int64_t c) {  // the first slot of KV head h's chunk c
      return ir::state_slot(ir::partial_row(h, c, 0, chunks, group), 0, d);
    };
    const int64_t partial = ir::state_slot(group, 0, d);  // one chunk's states
    int partials = -1;
    if (chunks > 1) {
      tg_.buffers.push_back({g_.tensor(op.output).name + ".partial", DType::F32, rows_at(hkv, 0), -1, false});
      partials = int(tg_.buffers.size()) - 1;
    }
    const int64_t kv_elem = int64_t(dtype_size(o_.kv_dtype));
    // KV head h's query heads and their rows in q and the output, its rows in k and v
    // (ir::AttentionRows, as the kernels address them).
    auto q_heads = [&](int h) { return std::pair{int(ir::q_head(h, 0, group)), int(ir::q_head(h + 1, 0, group))}; };
    auto rows = [&](int first, int end) { return std::pair{ir::head_elem(first, 0, d), ir::head_elem(end, 0, d)}; };
    for (int h = 0; h < hkv; ++h) {
      const auto [q_begin, q_end] = q_heads(h);
      const auto [out_begin, out_end] = rows(q_begin, q_end);
      const auto [kv_begin, kv_end] = rows(h, h + 1);
      for (int c = 0; c < chunks; ++c) {
        Task& t = new_task(stage);
        t.kv_head = h;
        t.q_head_begin = q_begin, t.q_head_end = q_end;
        std::tie(t.kv_begin, t.kv_end) = chunk_range(len, chunks, c);
        t.chunk = c, t.num_chunks = chunks;
        t.ops.push_back({index, OpKind::Attention});
        t.reads = {{q, out_begin, out_end}, {k, kv_begin, kv_end}, {v, kv_begin, kv_end}, whole(pos)};
        if (chunks > 1) {
          t.writes = {{partials, rows_at(h, c), rows_at(h, c) + partial}};
        } else {
          t.writes = {{op.output, out_begin, out_end}};
        }
        const int64_t n = t.kv_end - t.kv_begin;
        t.kv_bytes = n * 2 * d * kv_elem;
        // q.k and p.v per query head, plus exp and sums of the softmax.
        t.flops = double(group) * double(n) * (4.0 * d + 5.0);
        finish(t);
      }
    }
    if (chunks == 1) return;
    const int merge = new_stage(prefix + "attn_merge", TaskKind::AttentionMerge, op.layer, hkv, 0);
    for (int h = 0; h < hkv; ++h) {
      Task& t = new_task(merge);
      t.kv_head = h;
      std::tie(t.q_head_begin, t.q_head_end) = q_heads(h);
      t.kv_begin = 0, t.kv_end = len, t.num_chunks = chunks;
      t.ops.push_back({index, OpKind::Attention});
      t.reads = {{partials, rows_at(h, 0), rows_at(h, chunks)}};
      const auto [out_begin, out_end] = rows(t.q_head_begin, t.q_head_end);
      t.writes = {{op.output, out_begin, out_end}};
      t.flops = double(chunks) * double(partial) * 3.0;
      finish(t);
    }
  }

  // Chunks per KV head: kv_splits when set, else enough kv_chunk-long chunks to cover len.
  int num_chunks(int64_t len) const {
    if (o_.kv_splits > 0) return o_.kv_splits;
    return o_.kv_chunk > 0 && len > o_.kv_chunk ? int((len + o_.kv_chunk - 1) / o_.kv_chunk) : 1;
  }

  // KV positions of chunk c: an even split with kv_splits (as at run time), else kv_chunk-long
  // chunks (the last one shorter).
  std::pair<int64_t, int64_t> chunk_range(int64_t len, int chunks, int c) const {
    if (o_.kv_splits > 0) return even_split(len, chunks, c);
    const int64_t chunk_len = (len + chunks - 1) / chunks;
    return {c * chunk_len, std::min(len, (c + 1) * chunk_len)};
  }

  // Any other op: one task over the whole vector.
  void vector_op(int index) {
    const ir::Op& op = g_.ops[size_t(index)];
    std::string name = short_name(g_.tensor(op.output).name);
    if (op.kind == OpKind::Argmax) name = "argmax";
    const int stage = new_stage(layer_prefix(op.layer) + name, TaskKind::Vector, op.layer,
                                numel(op.output), 0);
    Task& t = new_task(stage);
    t.ops.push_back({index, op.kind});
    for (int in : op.inputs) t.reads.push_back(whole(in));
    t.writes.push_back(whole(op.output));
    const double n = double(numel(op.output));
    switch (op.kind) {
      case OpKind::Embedding:
        // One row of the table: the row of the step's token.
        t.weight_bytes = numel(op.output) * wbytes_;
        break;
      case OpKind::RmsNorm:
      case OpKind::HeadRmsNorm:
        t.weight_bytes = weight_numel(op.weight) * wbytes_;
        t.flops = 4.0 * n;
        break;
      case OpKind::Rope: t.flops = 6.0 * n; break;
      case OpKind::SiluMul: t.flops = 5.0 * n; break;
      case OpKind::GeluTanhMul: t.flops = 9.0 * n; break;
      case OpKind::Argmax: t.flops = double(numel(op.inputs[0])); break;
      default: t.flops = n; break;
    }
    finish(t);
  }

  const ir::Graph& g_;
  const DecomposeOptions& o_;
  TaskGraph tg_;
  int64_t wbytes_ = 2;
};

}  // namespace

int64_t linear_tile_rows(int64_t rows, const DecomposeOptions& o) {
  if (o.tile_rows > 0) return std::min(rows, o.tile_rows);
  const int64_t per = (rows + o.target_tiles - 1) / o.target_tiles;
  return std::min(rows, (per + o.row_align - 1) / o.row_align * o.row_align);
}

TaskGraph decompose(const ir::Graph& graph, const DecomposeOptions& options) {
  MPK_CHECK(options.seq_len > 0, InvalidArgument)
      << "decompose: seq_len must be positive, got " << options.seq_len;
  MPK_CHECK(options.kv_chunk >= 0 && options.tile_rows >= 0, InvalidArgument)
      << "decompose: kv_chunk and tile_rows must be >= 0";
  MPK_CHECK(options.kv_splits >= 0, InvalidArgument)
      << "decompose: kv_splits must be >= 0, got " << options.kv_splits;
  MPK_CHECK(options.target_tiles > 0 && options.row_align > 0, InvalidArgument)
      << "decompose: target_tiles and row_align must be positive";
  ir::validate(graph);
  return Decomposer(graph, options).run();
}

}  // namespace mpk::sched
