#include "scheduler/specs.h"

#include "base/error.h"

namespace mpk::sched {
namespace {

int buffer_named(const TaskGraph& tg, const std::string& name) {
  for (size_t i = 0; i < tg.buffers.size(); ++i)
    if (tg.buffers[i].name == name) return int(i);
  return -1;
}

// Thrown inside spec derivation, caught into TaskSpec::unsupported.
struct NoSpec {
  std::string why;
};

LinearSpec linear(const ir::Graph& g, const TaskGraph& tg, const Task& t) {
  LinearSpec s;
  size_t i = 0;
  std::vector<const ir::Op*> pro;
  for (; i < t.ops.size() && t.ops[i].kind != ir::OpKind::Linear; ++i) pro.push_back(&g.ops[size_t(t.ops[i].op)]);
  std::vector<int> lin;
  for (; i < t.ops.size() && t.ops[i].kind == ir::OpKind::Linear; ++i) lin.push_back(t.ops[i].op);
  if (!t.columns.empty()) {
    // silu_mul(gate, up), the down linear over it, the residual add into columns[0].out.
    if (t.columns.size() != 1 || lin.size() != 2 || t.weights.size() != 2 || i + 3 != t.ops.size() ||
        t.ops[i].kind != ir::OpKind::SiluMul || t.ops[i + 1].kind != ir::OpKind::Linear ||
        t.ops[i + 2].kind != ir::OpKind::Add)
      throw NoSpec{"folded down projection: unexpected ops"};
    const ir::Op& silu = g.ops[size_t(t.ops[i].op)];
    const ir::Op& down = g.ops[size_t(t.ops[i + 1].op)];
    const ir::Op& add = g.ops[size_t(t.ops[i + 2].op)];
    if (silu.inputs[0] != t.weights[0].out || silu.inputs[1] != t.weights[1].out ||
        down.inputs[0] != silu.output || down.weight != t.columns[0].weight ||
        add.output != t.columns[0].out ||
        (add.inputs[0] != down.output && add.inputs[1] != down.output))
      throw NoSpec{"folded down projection: operands"};
    s.down_fold = true;
    i = t.ops.size();
  }
  const ir::Op* add = nullptr;
  for (; i < t.ops.size(); ++i) {
    if (t.ops[i].kind == ir::OpKind::Add && !add && !s.argmax)
      add = &g.ops[size_t(t.ops[i].op)];
    else if (t.ops[i].kind == ir::OpKind::Argmax && !s.argmax)
      s.argmax = true;
    else
      throw NoSpec{"unexpected epilogue op"};
  }
  if (lin.empty()) throw NoSpec{"no linear op"};
  const int in = g.ops[size_t(lin[0])].inputs[0];
  for (int l : lin)
    if (g.ops[size_t(l)].inputs[0] != in) throw NoSpec{"merged linears with different inputs"};
  // The prologue: the chain producing `in`.
  if (pro.empty()) {
    s.x = in;
  } else if (pro.back()->kind == ir::OpKind::RmsNorm && pro.back()->output == in &&
             (pro.size() == 1 || (pro.size() == 2 && pro[0]->kind == ir::OpKind::LastRow &&
                                  pro[0]->output == pro[1]->inputs[0]))) {
    s.staging = InputStaging::RmsNorm;
    s.x = pro[0]->inputs[0];  // last_row is the identity at T = 1
    s.norm_weight = pro.back()->weight;
    s.eps = pro.back()->attrs.eps;
  } else if (pro.size() == 1 && pro[0]->kind == ir::OpKind::LastRow && pro[0]->output == in) {
    s.x = pro[0]->inputs[0];
  } else if (pro.size() == 1 && pro[0]->kind == ir::OpKind::SiluMul && pro[0]->output == in) {
    s.staging = InputStaging::SiluMul;
    s.x = pro[0]->inputs[0];
    s.x2 = pro[0]->inputs[1];
  } else {
    throw NoSpec{"unexpected prologue"};
  }
  for (const WeightSlice& ws : t.weights) {
    const ir::Op* op = nullptr;
    for (int l : lin)
      if (g.ops[size_t(l)].weight == ws.weight) op = &g.ops[size_t(l)];
    MPK_ICHECK(op) << "task " << t.name << ": slice weight not among its linears";
    MPK_ICHECK(op->bias == ws.bias) << "task " << t.name << ": slice bias";
    int res = -1;
    if (add) {
      res = add->inputs[0] == op->output ? add->inputs[1] : add->inputs[1] == op->output ? add->inputs[0] : -1;
      if (res < 0 || add->output != ws.out) throw NoSpec{"residual add not on the linear output"};
    } else {
      MPK_ICHECK(ws.out == op->output) << "task " << t.name << ": slice output";
    }
    s.residual.push_back(res);
  }
  if (s.argmax) {
    s.argmax_value = buffer_named(tg, "argmax.partial_value");
    s.argmax_index = buffer_named(tg, "argmax.partial_index");
    if (s.argmax_value < 0 || s.argmax_index < 0 || t.weights.size() != 1)
      throw NoSpec{"argmax partial layout"};
    for (const Access& a : t.writes)
      if (a.buffer == s.argmax_value) s.argmax_slot = a.begin;
    MPK_ICHECK(s.argmax_slot >= 0) << "task " << t.name << ": no argmax partial slot";
  }
  return s;
}

// Follows the fused chain [head_rms_norm] -> [rope] back from an attention input.
int trace(const ir::Graph& g, const Task& t, int tensor, int& norm, int& rope, int& used) {
  norm = rope = -1;
  for (;;) {
    int p = -1;
    for (const auto& f : t.ops)
      if (g.ops[size_t(f.op)].output == tensor) p = f.op;
    if (p < 0) return tensor;
    ++used;
    const ir::Op& op = g.ops[size_t(p)];
    if (op.kind == ir::OpKind::Rope && rope < 0 && norm < 0) rope = p;
    else if (op.kind == ir::OpKind::HeadRmsNorm && norm < 0) norm = p;
    else throw NoSpec{"unexpected op before attention"};
    tensor = op.inputs[0];
  }
}

AttentionSpec attention(const ir::Graph& g, const TaskGraph& tg, const Task& t) {
  AttentionSpec s;
  for (const auto& f : t.ops)
    if (f.kind == ir::OpKind::Attention) s.op = f.op;
  if (s.op < 0) throw NoSpec{t.kind == TaskKind::AttentionMerge ? "merge without its attention op" : "no attention op"};
  const ir::Op& a = g.ops[size_t(s.op)];
  if (t.num_chunks > 1 || t.kind == TaskKind::AttentionMerge) {
    s.partial = buffer_named(tg, g.tensor(a.output).name + ".partial");
    MPK_ICHECK(s.partial >= 0) << "task " << t.name << ": no attention partial buffer";
  }
  if (t.kind == TaskKind::AttentionMerge) {
    if (t.ops.size() != 1) throw NoSpec{"merge without its attention op"};
    return s;
  }
  int used = 1;
  s.q = trace(g, t, a.inputs[0], s.q_norm, s.q_rope, used);
  s.k = trace(g, t, a.inputs[1], s.k_norm, s.k_rope, used);
  if (used != int(t.ops.size())) throw NoSpec{"ops outside the q/k chains"};
  s.v = a.inputs[2];
  return s;
}

ArgmaxSpec argmax(const TaskGraph& tg, const Task& t) {
  if (t.ops.empty() || t.ops[0].kind != ir::OpKind::Argmax || t.ops.size() > 2 ||
      (t.ops.size() == 2 && t.ops[1].kind != ir::OpKind::Embedding))
    throw NoSpec{"only the argmax reduce (+ next-token embedding) runs as a vector task"};
  ArgmaxSpec s;
  s.op = t.ops[0].op;
  s.value = buffer_named(tg, "argmax.partial_value");
  s.index = buffer_named(tg, "argmax.partial_index");
  // The reads: the partials, and the logits (whole).
  int partials = 0;
  for (const auto& r : t.reads) {
    if (r.buffer == s.value || r.buffer == s.index) ++partials;
    else if (s.logits < 0 && r.begin == 0 && r.end == tg.buffers[size_t(r.buffer)].numel) s.logits = r.buffer;
    else s.logits = -2;
  }
  if (partials != 2 || s.logits < 0) throw NoSpec{"argmax without per-tile partials and the logits"};
  if (t.ops.size() == 2) s.embedding = t.ops[1].op;
  return s;
}

}  // namespace

std::vector<TaskSpec> task_specs(const ir::Graph& g, const TaskGraph& tg) {
  std::vector<TaskSpec> out(tg.tasks.size());
  for (const Task& t : tg.tasks) {
    MPK_ICHECK(t.id >= 0 && size_t(t.id) < out.size()) << "task ids must be indices";
    TaskSpec& s = out[size_t(t.id)];
    try {
      switch (t.kind) {
        case TaskKind::Linear: s.linear = linear(g, tg, t); break;
        case TaskKind::Attention:
        case TaskKind::AttentionMerge: s.attention = attention(g, tg, t); break;
        case TaskKind::Vector: s.argmax = argmax(tg, t); break;
      }
    } catch (const NoSpec& e) {
      s.unsupported = e.why;
    }
  }
  return out;
}

}  // namespace mpk::sched
