#include "scheduler/fuse.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "base/error.h"

namespace mpk::sched {
namespace {

using ir::OpKind;

class Fuser {
 public:
  Fuser(const ir::Graph& g, TaskGraph tg, const FuseOptions& o)
      : g_(g), tg_(std::move(tg)), o_(o), dead_(tg_.tasks.size(), false),
        reread_(tg_.tasks.size(), 0) {
    for (const Task& t : tg_.tasks) reread_[size_t(t.id)] = t.act_bytes - access_bytes(tg_, t.reads);
  }

  TaskGraph run() {
    if (o_.residual_into_linear)
      for (size_t s = 0; s < tg_.stages.size(); ++s)
        if (Task* a = single_op(int(s), OpKind::Add)) residual(*a);
    // Consumers first, so a chain (rope after head norm) folds into the same tasks in order.
    for (size_t s = tg_.stages.size(); s-- > 0;) prologue(int(s));
    if (o_.down_into_gate_up)
      for (size_t s = 0; s < tg_.stages.size(); ++s) fold_down(int(s));
    if (o_.merge_into_attention) fold_merges();
    if (o_.argmax_into_linear) argmax();
    if (o_.embedding_into_argmax) embedding();
    return compact();
  }

 private:
  // The stage's task when it is one unfused vector task of `kind`.
  Task* single_op(int stage, std::optional<OpKind> kind = std::nullopt) {
    const Stage& s = tg_.stages[size_t(stage)];
    if (s.kind != TaskKind::Vector || s.tasks.size() != 1) return nullptr;
    Task& t = tg_.tasks[size_t(s.tasks[0])];
    if (dead_[size_t(t.id)] || t.ops.size() != 1 || (kind && t.ops[0].kind != *kind)) return nullptr;
    return &t;
  }

  std::vector<int> readers(int buffer) const { return touching(buffer, &Task::reads); }
  std::vector<int> writers(int buffer) const { return touching(buffer, &Task::writes); }

  // Live tasks whose `accesses` (reads or writes) include `buffer`.
  std::vector<int> touching(int buffer, std::vector<Access> Task::*accesses) const {
    std::vector<int> r;
    for (const Task& t : tg_.tasks) {
      const auto& a = t.*accesses;
      if (!dead_[size_t(t.id)] &&
          std::any_of(a.begin(), a.end(), [&](const Access& x) { return x.buffer == buffer; }))
        r.push_back(t.id);
    }
    return r;
  }

  bool graph_output(int buffer) const {
    const int t = tg_.buffers[size_t(buffer)].graph_tensor;
    return t >= 0 && g_.tensor(t).role == ir::TensorRole::Output;
  }

  // Writers that are all tiles of one linear stage (non-empty).
  bool one_linear_stage(const std::vector<int>& tasks) const {
    if (tasks.empty()) return false;
    const int stage = tg_.tasks[size_t(tasks[0])].stage;
    return std::all_of(tasks.begin(), tasks.end(), [&](int t) {
      return tg_.tasks[size_t(t)].kind == TaskKind::Linear && tg_.tasks[size_t(t)].stage == stage;
    });
  }

  // out = x + o, o written only for this add by linear tiles: each tile adds the matching rows
  // of x in its epilogue and writes out directly.
  void residual(Task& add) {
    const std::vector<int>& in = g_.ops[size_t(add.ops[0].op)].inputs;
    const int out = add.writes[0].buffer;
    for (int side : {1, 0}) {
      const int o = in[size_t(side)], other = in[size_t(1 - side)];
      const std::vector<int> w = writers(o);
      if (o == other || !one_linear_stage(w) || readers(o) != std::vector<int>{add.id}) continue;
      for (int id : w) {
        Task& t = tg_.tasks[size_t(id)];
        for (Access& a : t.writes)
          if (a.buffer == o) {
            a.buffer = out;
            t.reads.push_back({other, a.begin, a.end});
            t.flops += double(a.end - a.begin);
          }
        for (WeightSlice& s : t.weights)
          if (s.out == o) s.out = out;
        t.ops.push_back(add.ops[0]);
        t.reads = normalize(std::move(t.reads));
        t.writes = normalize(std::move(t.writes));
      }
      dead_[size_t(add.id)] = true;
      return;
    }
  }

  // A vector op whose readers are all of the kind it fuses into: each reader recomputes it.
  void prologue(int stage) {
    Task* p = single_op(stage);
    if (!p) return;
    const OpKind kind = p->ops[0].kind;
    TaskKind into;
    if ((kind == OpKind::RmsNorm || kind == OpKind::LastRow) && o_.norm_into_linear)
      into = TaskKind::Linear;
    else if ((kind == OpKind::HeadRmsNorm || kind == OpKind::Rope) && o_.qk_into_attention)
      into = TaskKind::Attention;
    else if (kind == OpKind::SiluMul && o_.silu_into_linear)
      into = TaskKind::Linear;
    else
      return;
    if (p->writes.size() != 1) return;
    const int out = p->writes[0].buffer;
    const int64_t n = tg_.buffers[size_t(out)].numel;
    if (graph_output(out) || tg_.buffers[size_t(out)].carried) return;
    const std::vector<int> consumers = readers(out);
    if (consumers.empty() || !std::all_of(consumers.begin(), consumers.end(), [&](int c) {
          return tg_.tasks[size_t(c)].kind == into;
        }))
      return;
    // RMSNorm needs the whole row; the others map element ranges one to one (a head-local op
    // sees whole heads because its readers read whole heads).
    const bool row_local = kind != OpKind::RmsNorm;
    bool first = true;
    for (int id : consumers) {
      Task& c = tg_.tasks[size_t(id)];
      std::vector<Access> reads;
      double fraction = 0;
      for (const Access& r : c.reads) {
        if (r.buffer != out) {
          reads.push_back(r);
          continue;
        }
        fraction += double(r.end - r.begin) / double(n);
        for (const Access& pr : p->reads)
          if (row_local && tg_.buffers[size_t(pr.buffer)].numel == n)
            reads.push_back({pr.buffer, r.begin, r.end});
          else
            reads.push_back(pr);
      }
      c.reads = normalize(std::move(reads));
      c.ops.insert(c.ops.begin(), p->ops.begin(), p->ops.end());
      c.flops += row_local ? p->flops * fraction : p->flops;
      // Small weights (norm scales) come from DRAM once; the other tiles hit L2.
      (first ? c.weight_bytes : reread_[size_t(id)]) += p->weight_bytes;
      first = false;
    }
    dead_[size_t(p->id)] = true;
  }

  // Live tasks of a stage.
  std::vector<int> live(int stage) const {
    std::vector<int> r;
    for (int id : tg_.stages[size_t(stage)].tasks)
      if (!dead_[size_t(id)]) r.push_back(id);
    return r;
  }

  // The down projection's tiles (ops silu_mul, linear, add: out = res + W . silu(g) * u, after
  // the prologue and residual fusions) into the tiles of the gate/up stage when those are paired
  // (rows [a, b) of g and of u each) and nothing else reads g and u: tile [a, b) multiplies its
  // silu(g) * u by columns [a, b) of W and adds the sums into out, which res's producers (one
  // linear stage) also write when they write res (WeightSlice::copy), before any tile adds.
  void fold_down(int stage) {
    const std::vector<int> down = live(stage);
    if (down.empty() || tg_.stages[size_t(stage)].kind != TaskKind::Linear) return;
    const Task& d0 = tg_.tasks[size_t(down[0])];
    if (d0.ops.size() != 3 || d0.ops[0].kind != OpKind::SiluMul || d0.ops[1].kind != OpKind::Linear ||
        d0.ops[2].kind != OpKind::Add || d0.weights.size() != 1)
      return;
    const ir::Op& silu = g_.ops[size_t(d0.ops[0].op)];
    const ir::Op& lin = g_.ops[size_t(d0.ops[1].op)];
    const ir::Op& add = g_.ops[size_t(d0.ops[2].op)];
    const int gate = silu.inputs[0], up = silu.inputs[1], out = add.output;
    if (add.inputs[0] != lin.output && add.inputs[1] != lin.output) return;
    const int res = add.inputs[0] == lin.output ? add.inputs[1] : add.inputs[0];
    if (lin.bias >= 0 || gate == up || res == lin.output || graph_output(out) ||
        tg_.buffers[size_t(out)].carried)
      return;
    for (int id : down) {
      const Task& d = tg_.tasks[size_t(id)];
      if (d.ops.size() != 3 || d.ops[1].op != d0.ops[1].op || d.weights.size() != 1 ||
          d.weights[0].out != out)
        return;
    }
    // The gate/up tiles: paired, read only by the down tiles.
    const std::vector<int> tiles = writers(gate);
    if (!one_linear_stage(tiles) || writers(up) != tiles || readers(gate) != down ||
        readers(up) != down)
      return;
    for (int id : tiles) {
      const Task& t = tg_.tasks[size_t(id)];
      if (t.weights.size() != 2 || t.weights[0].out != gate || t.weights[1].out != up ||
          t.weights[0].row_begin != t.weights[1].row_begin || t.weights[0].row_end != t.weights[1].row_end ||
          t.weights[0].out_begin != t.weights[0].row_begin || t.weights[1].out_begin != t.weights[1].row_begin)
        return;
    }
    // res's producers: linear tiles writing it from their slices.
    const std::vector<int> inits = writers(res);
    if (!one_linear_stage(inits)) return;
    for (int id : inits)
      for (const WeightSlice& s : tg_.tasks[size_t(id)].weights)
        if (s.out != res) return;
    const int64_t n = tg_.buffers[size_t(out)].numel, cols = tg_.buffers[size_t(gate)].numel;
    const ir::WeightRef& w = g_.weight(lin.weight);
    if (w.shape.size() != 2 || w.shape[0] != n || w.shape[1] != cols || n != tg_.buffers[size_t(res)].numel)
      return;
    for (int id : inits) {
      Task& t = tg_.tasks[size_t(id)];
      for (WeightSlice& s : t.weights) {
        s.copy = out;
        t.writes.push_back({out, s.out_begin, s.out_begin + (s.row_end - s.row_begin)});
      }
      t.writes = normalize(std::move(t.writes));
    }
    const int64_t wbytes = int64_t(dtype_size(g_.weight_dtype));
    for (int id : tiles) {
      Task& t = tg_.tasks[size_t(id)];
      const int64_t a = t.weights[0].row_begin, b = t.weights[0].row_end;
      t.columns.push_back({lin.weight, n, cols, a, b, out});
      t.adds.push_back({out, 0, n});
      for (size_t i = 0; i < 3; ++i) t.ops.push_back(d0.ops[i]);
      t.weight_bytes += n * (b - a) * wbytes;
      t.flops += 2.0 * double(n) * double(b - a) + 5.0 * double(b - a) + double(n);
    }
    for (int id : down) dead_[size_t(id)] = true;
  }

  // Whether every read in `reads` (the live tasks' reads of out.buffer) that overlaps `out`
  // reads all of `out` (it may read more). Accesses are normalized, so a read split into
  // adjacent pieces counts as one.
  static bool read_whole(const Access& out, const std::vector<const Access*>& reads) {
    for (const Access* r : reads)
      if (r->begin < out.end && out.begin < r->end && (r->begin > out.begin || r->end < out.end))
        return false;
    return true;
  }

  // Each merge task into its KV head's chunk tasks: every chunk is given an equal share of the
  // head's output range (see Task::merges) and the merge's flops. At run time the last chunk
  // to arrive writes the whole range, which only a reader waiting for every chunk may read, so
  // the merge stays a task:
  //  - when a task reads part of the range (it would wait only for the chunks whose shares it
  //    overlaps);
  //  - when the range has fewer elements than there are chunks (a chunk with an empty share
  //    would be waited for by nobody, yet it may be the one that merges).
  void fold_merges() {
    // One pass: the chunks of each (layer, KV head, split) and the live reads of each buffer
    // (folding adds writes only, so neither changes while merges are folded).
    std::map<std::tuple<int, int, int>, std::vector<Task*>> chunks_of;
    std::vector<std::vector<const Access*>> reads_of(tg_.buffers.size());
    for (Task& c : tg_.tasks) {
      if (dead_[size_t(c.id)]) continue;
      if (c.kind == TaskKind::Attention) chunks_of[{c.layer, c.kv_head, c.num_chunks}].push_back(&c);
      for (const Access& r : c.reads) reads_of[size_t(r.buffer)].push_back(&r);
    }
    for (Task& m : tg_.tasks) {
      if (dead_[size_t(m.id)] || m.kind != TaskKind::AttentionMerge || m.writes.size() != 1) continue;
      const auto it = chunks_of.find({m.layer, m.kv_head, m.num_chunks});
      if (it == chunks_of.end() || int(it->second.size()) != m.num_chunks) continue;
      const std::vector<Task*>& chunks = it->second;
      const Access out = m.writes[0];
      const int64_t len = out.end - out.begin, n = int64_t(chunks.size());
      if (len < n || !read_whole(out, reads_of[size_t(out.buffer)])) continue;
      for (Task* c : chunks) {
        const auto [b, e] = even_split(len, int(n), c->chunk);  // the merge's elements, evenly
        c->writes.push_back({out.buffer, out.begin + b, out.begin + e});
        c->writes = normalize(std::move(c->writes));
        c->merges = true;
        c->flops += m.flops / double(n);
        reread_[size_t(c->id)] += m.act_bytes / n;  // the merge's partial reads (one chunk does them)
      }
      dead_[size_t(m.id)] = true;
    }
  }

  Task* find_single(OpKind kind) {
    for (size_t s = 0; s < tg_.stages.size(); ++s)
      if (Task* t = single_op(int(s), kind)) return t;
    return nullptr;
  }

  // Each LM-head tile writes its (max, index) pair; the argmax task reduces the pairs.
  void argmax() {
    Task* a = find_single(OpKind::Argmax);
    if (!a || a->reads.size() != 1) return;
    const int logits = a->reads[0].buffer;
    const std::vector<int> tiles = writers(logits);
    if (!one_linear_stage(tiles)) return;
    const int64_t n = int64_t(tiles.size());
    tg_.buffers.push_back({"argmax.partial_value", DType::F32, n, -1, false});
    tg_.buffers.push_back({"argmax.partial_index", DType::I32, n, -1, false});
    const int value = int(tg_.buffers.size()) - 2, index = value + 1;
    for (int64_t i = 0; i < n; ++i) {
      Task& t = tg_.tasks[size_t(tiles[size_t(i)])];
      t.writes.push_back({value, i, i + 1});
      t.writes.push_back({index, i, i + 1});
      t.writes = normalize(std::move(t.writes));
      t.ops.push_back(a->ops[0]);
      t.flops += double(t.row_end - t.row_begin);
    }
    // The logits stay a read: a sampled draw ranks them (the same tiles write both).
    a->reads = normalize({{value, 0, n}, {index, 0, n}, a->reads[0]});
    a->flops = double(n);
  }

  // The reduce also looks up the next token's embedding row, for the next step.
  void embedding() {
    Task* e = find_single(OpKind::Embedding);
    Task* a = nullptr;
    for (Task& t : tg_.tasks)
      if (!dead_[size_t(t.id)] && t.kind == TaskKind::Vector && !t.ops.empty() &&
          t.ops[0].kind == OpKind::Argmax)
        a = &t;
    if (!e || !a || e->writes.size() != 1) return;
    a->ops.push_back(e->ops[0]);
    a->writes.push_back(e->writes[0]);
    a->writes = normalize(std::move(a->writes));
    a->weight_bytes += e->weight_bytes;
    tg_.buffers[size_t(e->writes[0].buffer)].carried = true;
    dead_[size_t(e->id)] = true;
  }

  TaskGraph compact() {
    std::vector<int> new_id(tg_.tasks.size(), -1);
    std::vector<Task> tasks;
    for (Task& t : tg_.tasks) {
      if (dead_[size_t(t.id)]) continue;
      t.act_bytes = access_bytes(tg_, t.reads) + reread_[size_t(t.id)];
      new_id[size_t(t.id)] = int(tasks.size());
      t.id = int(tasks.size());
      tasks.push_back(std::move(t));
    }
    std::vector<Stage> stages;
    std::vector<int> new_stage(tg_.stages.size(), -1);
    for (size_t s = 0; s < tg_.stages.size(); ++s) {
      Stage st = std::move(tg_.stages[s]);
      std::vector<int> live;
      for (int id : st.tasks)
        if (new_id[size_t(id)] >= 0) live.push_back(new_id[size_t(id)]);
      if (live.empty()) continue;
      st.tasks = std::move(live);
      new_stage[s] = int(stages.size());
      stages.push_back(std::move(st));
    }
    for (Task& t : tasks) t.stage = new_stage[size_t(t.stage)];
    tg_.tasks = std::move(tasks);
    tg_.stages = std::move(stages);
    return std::move(tg_);
  }

  const ir::Graph& g_;
  TaskGraph tg_;
  const FuseOptions& o_;
  std::vector<bool> dead_;
  std::vector<int64_t> reread_;
};

}  // namespace

TaskGraph fuse(const ir::Graph& graph, TaskGraph tasks, const FuseOptions& options) {
  MPK_CHECK(tasks.events.empty(), InvalidArgument) << "fuse: runs before events";
  return Fuser(graph, std::move(tasks), options).run();
}

}  // namespace mpk::sched
