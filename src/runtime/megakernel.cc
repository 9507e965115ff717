#include "runtime/megakernel.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "base/error.h"
#include "ir/dot_product.h"
#include "ir/layouts.h"
#include "ir/task_nests.h"
#include "ir/online_softmax.h"
#include "ir/rope.h"
#include "runtime/access_check.h"
#include "runtime/host_ops.h"
#include "runtime/embedded_kernels.h"
#include "runtime/variants.h"
#include "scheduler/liveness.h"

namespace mpk::rt {

namespace {

constexpr int64_t kAlign = 256;
int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

int64_t shape_numel(const ir::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string ops_text(const ir::Graph& g, const sched::Task& t) {
  std::string s;
  for (const auto& f : t.ops) {
    if (!s.empty()) s += ", ";
    s += ir::op_name(f.kind);
  }
  (void)g;
  return "[" + s + "]";
}

}  // namespace

int megakernel_kv_splits(const ir::Graph& graph, int num_workers, int64_t kv_capacity) {
  // About one wave of attention tasks: the chunks of every KV head together fill the workers.
  const int heads = std::max(1, graph.kv_cache.num_kv_heads);
  return int(std::clamp<int64_t>(num_workers / heads, 1, std::min<int64_t>(kv_capacity, 64)));
}

sched::PlanOptions megakernel_plan_options(const ir::Graph& graph, int num_workers, int64_t kv_capacity,
                                           const MegakernelParams& params) {
  validate(params);
  const bool fold_down = params.fold_down != 0;
  sched::PlanOptions o;
  o.decompose.pair_siblings = fold_down;
  o.fuse.down_into_gate_up = fold_down;
  o.fuse.merge_into_attention = params.merge_task == 0;
  o.decompose.seq_len = kv_capacity;
  o.decompose.kv_chunk = 0;
  o.decompose.kv_splits = params.kv_splits > 0 ? int(std::min<int64_t>(params.kv_splits, std::max<int64_t>(kv_capacity, 1)))
                                               : megakernel_kv_splits(graph, num_workers, kv_capacity);
  o.decompose.kv_dtype = DType::F32;
  o.decompose.target_tiles = num_workers * params.tile_waves;
  o.schedule.num_workers = num_workers;
  return o;
}

MemoryPlan plan_memory(const ir::Graph& g, const sched::TaskGraph& tg, DType weight_dtype,
                       int64_t kv_capacity, bool share_activations) {
  MPK_CHECK(weight_dtype == DType::F32 || weight_dtype == DType::BF16 || weight_dtype == DType::F16,
            Unsupported)
      << "megakernel: weight dtype " << dtype_name(weight_dtype) << " is not supported";
  MPK_CHECK(kv_capacity >= 1, InvalidArgument) << "megakernel: kv capacity must be >= 1";
  // Positions are ints on the device (and in the proofs of attention's rows).
  MPK_CHECK(kv_capacity <= INT32_MAX, Unsupported)
      << "megakernel: kv capacity " << kv_capacity << " is more positions than an int holds";
  MemoryPlan m;
  m.weight_dtype = weight_dtype;
  // Activations: a slot per buffer, or shared slots (sched::share_buffers) where the events
  // prove one buffer dead before the other is touched. What may hold a value from outside the
  // step keeps its own: the carried embedding, the graph's inputs and outputs (the host may
  // upload or read them), and anything a task reads that no task of the step writes.
  const size_t nb = tg.buffers.size();
  std::vector<int> slot(nb);
  std::iota(slot.begin(), slot.end(), 0);
  if (share_activations) {
    std::vector<bool> io(nb);
    for (size_t b = 0; b < nb; ++b) {
      const sched::Buffer& buf = tg.buffers[b];
      io[b] = buf.graph_tensor >= 0 && g.tensor(buf.graph_tensor).role != ir::TensorRole::Activation;
    }
    slot = sched::share_buffers(tg, io);
  }
  std::vector<int64_t> slot_bytes(nb, 0);
  for (size_t b = 0; b < nb; ++b) {
    const sched::Buffer& buf = tg.buffers[b];
    MPK_CHECK(dtype_size(buf.dtype) == 4, Unsupported)
        << "megakernel: buffer '" << buf.name << "' has dtype " << dtype_name(buf.dtype);
    const int64_t bytes = std::max<int64_t>(buf.numel, 1) * 4;
    slot_bytes[size_t(slot[b])] = std::max(slot_bytes[size_t(slot[b])], bytes);
    m.act_bytes_unshared = align_up(m.act_bytes_unshared + bytes);
  }
  std::vector<int64_t> slot_offset(nb, 0);
  for (size_t s = 0; s < nb; ++s) {
    slot_offset[s] = m.act_bytes;
    if (slot_bytes[s] > 0) m.act_bytes = align_up(m.act_bytes + slot_bytes[s]);
  }
  for (size_t b = 0; b < nb; ++b) m.buffer_offset.push_back(slot_offset[size_t(slot[b])]);
  const size_t nw = g.weights.size();
  std::vector<int> matrix(nw, 0), small(nw, 0);
  for (const ir::Op& op : g.ops) {
    switch (op.kind) {
      case ir::OpKind::Linear:
        if (op.weight >= 0) matrix[size_t(op.weight)] = 1;
        if (op.bias >= 0) small[size_t(op.bias)] = 1;
        break;
      case ir::OpKind::Embedding:
        if (op.weight >= 0) matrix[size_t(op.weight)] = 1;
        break;
      default:
        if (op.weight >= 0) small[size_t(op.weight)] = 1;
        if (op.bias >= 0) small[size_t(op.bias)] = 1;
        break;
    }
  }
  m.weight_offset.assign(nw, -1);
  m.const_offset.assign(nw, -1);
  const int64_t es = int64_t(dtype_size(weight_dtype));
  for (size_t i = 0; i < nw; ++i) {
    const int64_t n = shape_numel(g.weights[i].shape);
    if (matrix[i]) {
      m.weight_offset[i] = m.weight_bytes;
      m.weight_bytes = align_up(m.weight_bytes + n * es);
    }
    if (small[i]) {
      m.const_offset[i] = m.const_bytes;
      m.const_bytes = align_up(m.const_bytes + n * 4);
    }
  }
  m.rope_base = m.const_bytes;
  m.rope_offset.assign(g.ops.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const ir::Op& op = g.ops[i];
    if (op.kind != ir::OpKind::Rope) continue;
    std::vector<float> f = ir::rope_inv_freq(op.attrs.head_dim, op.attrs.rope_theta,
                                             op.attrs.rope_scaling);
    m.rope_offset[i] = m.rope_base + int64_t(m.rope_tables.size()) * 4;
    m.rope_tables.insert(m.rope_tables.end(), f.begin(), f.end());
    while (m.rope_tables.size() % (kAlign / 4)) m.rope_tables.push_back(0.f);
  }
  m.const_bytes = align_up(m.rope_base + int64_t(m.rope_tables.size()) * 4);
  m.kv_capacity = kv_capacity;
  m.kv_layer_elems = ir::kv_elem(g.kv_cache.num_kv_heads, 0, 0, kv_capacity, g.kv_cache.head_dim);  // proved
  m.kv_bytes = 2 * int64_t(g.kv_cache.num_layers) * m.kv_layer_elems * 4;
  return m;
}

namespace {

class TableBuilder {
 public:
  TableBuilder(const ir::Graph& g, const sched::Plan& p, const MemoryPlan& m, const SegmentBases& b,
               const MegakernelParams& params)
      : g_(g), tg_(p.tasks), p_(p), m_(m), b_(b), params_(params), variants_(kernel_variants(params)) {}

  // `refused`: when given, a task the kernel does not run is listed there (task id, why) and
  // the others are still built; otherwise the first one throws Error(Unsupported).
  MegakernelTables run(std::vector<std::pair<int, std::string>>* refused = nullptr) {
    MegakernelTables out;
    out.num_workers = p_.schedule.num_workers;
    for (const sched::Event& e : tg_.events) out.needs.push_back(uint32_t(e.need));
    for (const sched::Task& t : tg_.tasks) {
      MPK_ICHECK(t.id == int(out.tasks.size())) << "task ids must be indices";
      MkTask d{};
      d.id = t.id;
      d.trigger = t.trigger;
      d.wait_begin = int(out.waits.size());
      d.num_waits = int(t.waits.size());
      d.num_waits_prev = int(t.waits_prev.size());
      out.waits.insert(out.waits.end(), t.waits.begin(), t.waits.end());
      out.waits.insert(out.waits.end(), t.waits_prev.begin(), t.waits_prev.end());
      for (int i = 0; i < MPK_MK_INLINE_WAITS && d.wait_begin + i < int(out.waits.size()); ++i) {
        d.wait_event[i] = out.waits[size_t(d.wait_begin + i)];
        d.wait_need[i] = out.needs[size_t(d.wait_event[i])];
      }
      int64_t smem = 0;
      try {
        switch (t.kind) {
          case sched::TaskKind::Linear: smem = linear(t, d); break;
          case sched::TaskKind::Attention: smem = attention(t, d); break;
          case sched::TaskKind::AttentionMerge: merge(t, d); break;
          case sched::TaskKind::Vector:
            if (on_host(t)) {
              d.kind = MPK_MK_HOST;
              out.host_tasks.push_back(t.id);
              break;
            }
            vector(t, d);
            smem = MPK_MK_SAMPLE_SMEM;
            out.argmax_event = t.trigger;
            break;
        }
        d.variant = d.kind == MPK_MK_HOST ? -1 : choose_variant(t, d);
      } catch (const Error& e) {
        if (!refused || e.kind() != ErrorKind::Unsupported) throw;
        refused->push_back({t.id, e.what()});
        d.variant = -1;
      }
      out.dynamic_smem = std::max(out.dynamic_smem, smem);
      out.tasks.push_back(d);
    }
    segment_queues(out);
    out.num_arrivals = int(arrival_.size());
    return out;
  }

 private:
  // A vector task the host fallback runs: one whose ops match no device spec (the argmax's)
  // and are all ops the host runs.
  bool on_host(const sched::Task& t) const {
    MPK_ICHECK(p_.specs.size() == tg_.tasks.size()) << "a plan without its task specs";
    if (p_.specs[size_t(t.id)].unsupported.empty() || t.ops.empty()) return false;
    for (const sched::FusedOp& f : t.ops)
      if (!host_runs(f.kind)) return false;
    // The host reads each op's inputs and writes its output whole (a buffer of a graph tensor
    // has the tensor's id): inside the task's declared accesses, as access_check.h asks of the
    // descriptors, or an earlier op of the task made the input.
    std::vector<int> made;
    for (const sched::FusedOp& f : t.ops) {
      const ir::Op& op = g_.ops[size_t(f.op)];
      for (int in : op.inputs)
        MPK_ICHECK(std::find(made.begin(), made.end(), in) != made.end() || declares(t.reads, in))
            << "host task " << t.name << " reads " << g_.tensor(in).name << " outside its declared reads";
      MPK_ICHECK(declares(t.writes, op.output))
          << "host task " << t.name << " writes " << g_.tensor(op.output).name << " outside its declared writes";
      made.push_back(op.output);
    }
    return true;
  }

  // Whether `accesses` cover buffer b whole.
  bool declares(const std::vector<sched::Access>& accesses, int b) const {
    for (const sched::Access& a : accesses)
      if (a.buffer == b && a.begin == 0 && a.end == tg_.buffers[size_t(b)].numel) return true;
    return false;
  }

  // The segments (MegakernelTables): a device task's segment is one past that of a host task
  // it waits on, else that of its latest producer; a host task follows the launch of its
  // latest producer's segment. Task ids are a topological order.
  void segment_queues(MegakernelTables& out) const {
    const size_t n = tg_.tasks.size();
    std::vector<int> seg(n, 0);
    std::vector<bool> host(n, false);
    for (int id : out.host_tasks) host[size_t(id)] = true;
    for (const sched::Task& t : tg_.tasks)
      for (int e : t.waits)
        for (int p : tg_.events[size_t(e)].triggers) {
          MPK_ICHECK(p < t.id) << "task " << t.name << " waits on a later task";
          seg[size_t(t.id)] = std::max(seg[size_t(t.id)], seg[size_t(p)] + (host[size_t(p)] && !host[size_t(t.id)]));
        }
    out.num_segments = 1;
    for (size_t i = 0; i < n; ++i)
      if (!host[i]) out.num_segments = std::max(out.num_segments, seg[i] + 1);
    // A host task may follow the last launch too (nothing of the step waits on it then).
    for (int id : out.host_tasks) out.host_after.push_back(seg[size_t(id)]);
    const int workers = out.num_workers;
    MPK_ICHECK(int(p_.schedule.queues.size()) == workers) << "queue count";
    for (int s = 0; s < out.num_segments; ++s) {
      for (const auto& q : p_.schedule.queues) {
        out.queue_begin.push_back(int(out.queue.size()));
        for (int id : q)
          if (!host[size_t(id)] && seg[size_t(id)] == s) out.queue.push_back(id);
      }
      out.queue_begin.push_back(int(out.queue.size()));
    }
  }

  uint64_t act(int buffer, int64_t elem = 0) const {
    MPK_ICHECK(buffer >= 0 && size_t(buffer) < m_.buffer_offset.size()) << "buffer id " << buffer;
    return b_.act + uint64_t(m_.buffer_offset[size_t(buffer)] + elem * 4);
  }
  uint64_t cst(int weight, int64_t elem = 0) const {
    MPK_ICHECK(weight >= 0 && m_.const_offset[size_t(weight)] >= 0) << "const weight " << weight;
    return b_.consts + uint64_t(m_.const_offset[size_t(weight)] + elem * 4);
  }
  uint64_t mat(int weight, int64_t elem = 0) const {
    MPK_ICHECK(weight >= 0 && m_.weight_offset[size_t(weight)] >= 0) << "matrix weight " << weight;
    return b_.weights +
           uint64_t(m_.weight_offset[size_t(weight)] + elem * int64_t(dtype_size(m_.weight_dtype)));
  }
  // The variant the parameters select for the task when it can run it, else the first of its
  // kind that can; Error(Unsupported) with every variant's reason when none can.
  int choose_variant(const sched::Task& t, const MkTask& d) const {
    const LinearRole role = d.input_mode == MPK_MK_IN_SILUMUL ? LinearRole::Down
                            : (d.flags & MPK_MK_F_ARGMAX)      ? LinearRole::LmHead
                                                               : LinearRole::Plain;
    const Variant preferred = d.kind == MPK_MK_LINEAR ? linear_variant(params_, role) : Variant{d.kind, 0};
    const int id = variant_id(variants_, preferred);
    if (cannot_implement(preferred, d, params_).empty()) return id;
    std::string why;
    for (size_t i = 0; i < variants_.size(); ++i) {
      if (variants_[i].kind != d.kind) continue;
      const std::string no = cannot_implement(variants_[i], d, params_);
      if (no.empty()) return int(i);
      why += (why.empty() ? "" : "; ") + variant_name(variants_[i]) + ": " + no;
    }
    unsupported(t, "no variant of the kernel runs it (" + why + ")");
  }

  [[noreturn]] void unsupported(const sched::Task& t, const std::string& why) const {
    MPK_THROW(Unsupported) << "megakernel v0: task " << t.name << " with fused ops "
                           << ops_text(g_, t) << " is not implemented: " << why;
  }

  const sched::TaskSpec& spec(const sched::Task& t) const {
    MPK_ICHECK(p_.specs.size() == tg_.tasks.size()) << "a plan without its task specs";
    const sched::TaskSpec& s = p_.specs[size_t(t.id)];
    if (!s.unsupported.empty()) unsupported(t, s.unsupported);
    return s;
  }

  int64_t linear(const sched::Task& t, MkTask& d) {
    const sched::LinearSpec& s = spec(t).linear;
    d.kind = MPK_MK_LINEAR;
    d.k = int(t.k);
    d.x = act(s.x);
    switch (s.staging) {
      case sched::InputStaging::Plain: d.input_mode = MPK_MK_IN_PLAIN; break;
      case sched::InputStaging::RmsNorm:
        d.input_mode = MPK_MK_IN_RMSNORM;
        d.norm_w = cst(s.norm_weight);
        d.eps = float(s.eps);
        break;
      case sched::InputStaging::SiluMul:
        d.input_mode = MPK_MK_IN_SILUMUL;
        d.x2 = act(s.x2);
        break;
    }
    if (t.weights.empty() || t.weights.size() > MPK_MK_MAX_SLICES)
      unsupported(t, "slice count " + std::to_string(t.weights.size()));
    MPK_ICHECK(s.residual.size() == t.weights.size()) << "task " << t.name << ": slice specs";
    d.num_slices = int(t.weights.size());
    int64_t rows = 0;
    for (size_t i = 0; i < t.weights.size(); ++i) {
      const sched::WeightSlice& ws = t.weights[i];
      MkSlice& sl = d.slices[i];
      sl.rows = int(ws.row_end - ws.row_begin);
      rows += sl.rows;
      sl.w = mat(ws.weight, ws.row_begin * t.k);
      sl.bias = ws.bias >= 0 ? cst(ws.bias, ws.row_begin) : 0;
      sl.out = act(ws.out, ws.out_begin);
      sl.res = s.residual[i] >= 0 ? act(s.residual[i], ws.out_begin) : 0;
      sl.copy = ws.copy >= 0 ? act(ws.copy, ws.out_begin) : 0;
    }
    if (s.down_fold) {
      const sched::WeightColumns& c = t.columns[0];
      if (!params_.fold_down) unsupported(t, "a folded down projection in a kernel without fold_down");
      if (d.slices[0].rows != d.slices[1].rows || c.col_end - c.col_begin != d.slices[0].rows)
        unsupported(t, "folded down projection: gate, up and columns of different lengths");
      d.flags |= MPK_MK_F_FOLD;
      d.fold_w = mat(c.weight, c.col_begin);
      d.fold_out = act(c.out);
      d.fold_rows = int(c.rows);
      d.fold_ld = int(c.cols);
    }
    MPK_ICHECK(rows == t.row_end - t.row_begin) << "task " << t.name << ": slice rows " << rows;
    // Bulk copies move 16-byte aligned rows of whole 16-byte units (the rows the tile reads
    // with vector loads; the kernel checks the same); the LM head's tiles stream.
    const int64_t es = int64_t(dtype_size(m_.weight_dtype));
    bool stage = params_.stage_weights && !s.argmax && (t.k * es) % 16 == 0;
    for (int i = 0; i < d.num_slices; ++i) stage = stage && d.slices[i].w % 16 == 0;
    if (stage) d.flags |= MPK_MK_F_STAGE;
    if (s.argmax) {
      d.flags |= MPK_MK_F_ARGMAX;
      d.part_val = act(s.argmax_value, s.argmax_slot);
      d.part_idx = act(s.argmax_index, s.argmax_slot);
      d.out_index0 = t.weights[0].out_begin;
    }
    // The input vector; or the fold's sums, its silu(gate) * up and a 16-byte slot
    // per thread and load in flight (linear.cuh mk_linear_fold).
    const int64_t fold = s.down_fold ? int64_t(MPK_MK_FOLD_SLOTS(d.fold_rows, d.slices[0].rows)) * 4 +
                                           int64_t(params_.block_threads) * params_.loads_in_flight * 16
                                     : 0;
    return std::max<int64_t>(int64_t(t.k) * 4, fold);
  }

  // The chunk partials of (t's kv head, chunk): where they start in the partial buffer (its
  // first state row, ir::AttentionStates).
  uint64_t partial(const sched::Task& t, int buffer, int head_dim, int chunk) const {
    const int group = t.q_head_end - t.q_head_begin;
    const int64_t row = ir::partial_row(t.kv_head, chunk, 0, t.num_chunks, group);
    MPK_ICHECK(ir::state_slot(row + group, 0, head_dim) <= tg_.buffers[size_t(buffer)].numel)
        << "task " << t.name << ": partial out of range";
    return act(buffer, ir::state_slot(row, 0, head_dim));
  }

  void merge(const sched::Task& t, MkTask& d) {
    const sched::AttentionSpec& s = spec(t).attention;
    const ir::Op& a = g_.ops[size_t(s.op)];
    d.kind = MPK_MK_ATTN_MERGE;
    d.kv_head = t.kv_head;
    d.group = t.q_head_end - t.q_head_begin;
    d.head_dim = a.attrs.head_dim;
    d.num_chunks = t.num_chunks;
    d.partial = partial(t, s.partial, d.head_dim, 0);
    d.out = act(a.output);
  }

  int64_t attention(const sched::Task& t, MkTask& d) {
    const sched::AttentionSpec& s = spec(t).attention;
    const ir::Op& a = g_.ops[size_t(s.op)];
    auto op = [&](int i) { return i >= 0 ? &g_.ops[size_t(i)] : nullptr; };
    const ir::Op *qn = op(s.q_norm), *kn = op(s.k_norm), *qr = op(s.q_rope), *kr = op(s.k_rope);
    d.kind = MPK_MK_ATTENTION;
    d.kv_head = t.kv_head;
    d.group = t.q_head_end - t.q_head_begin;
    d.head_dim = a.attrs.head_dim;
    d.chunk = t.chunk;
    d.num_chunks = t.num_chunks;
    if (t.num_chunks > 1) d.partial = partial(t, s.partial, d.head_dim, t.chunk);
    if (t.merges) {
      d.flags |= MPK_MK_F_MERGE;
      d.arrival = arrival_.emplace(std::pair{t.layer, t.kv_head}, int(arrival_.size())).first->second;
    }
    d.scale = float(a.attrs.scale);
    d.capacity = m_.kv_capacity;
    d.q = act(s.q);
    d.kx = act(s.k);
    d.vx = act(s.v);
    d.out = act(a.output);
    if (qn) { d.flags |= MPK_MK_F_Q_NORM; d.q_norm = cst(qn->weight); d.norm_eps = float(qn->attrs.eps); }
    if (kn) { d.flags |= MPK_MK_F_K_NORM; d.k_norm = cst(kn->weight); d.norm_eps = float(kn->attrs.eps); }
    // One descriptor holds one eps and one RoPE table.
    if (qn && kn && qn->attrs.eps != kn->attrs.eps) unsupported(t, "q and k norms with different eps");
    const ir::Op* rope = qr ? qr : kr;
    if (qr) d.flags |= MPK_MK_F_ROPE_Q;
    if (kr) d.flags |= MPK_MK_F_ROPE_K;
    if (rope) {
      const int64_t off = m_.rope_offset[size_t(rope - g_.ops.data())];
      d.inv_freq = b_.consts + uint64_t(off);
      if (qr && kr && (qr->attrs.head_dim != kr->attrs.head_dim ||
                       qr->attrs.rope_theta != kr->attrs.rope_theta))
        unsupported(t, "different RoPE tables for q and k");
    }
    MPK_ICHECK(a.layer >= 0 && a.layer < g_.kv_cache.num_layers) << "attention layer";
    const int64_t layer_bytes = m_.kv_layer_elems * 4;
    d.k_cache = b_.kv + uint64_t(a.layer * layer_bytes);
    d.v_cache = b_.kv + uint64_t((g_.kv_cache.num_layers + a.layer) * layer_bytes);
    // q heads + k head + v head + one state row per warp and head of a pass.
    return (int64_t(d.group + 2) * d.head_dim +
            ir::state_slot(ir::warp_state_row(params_.block_threads / 32, 0, params_.heads_per_pass), 0, d.head_dim)) *
           4;
  }

  void vector(const sched::Task& t, MkTask& d) {
    const sched::ArgmaxSpec& s = spec(t).argmax;
    const ir::Op& am = g_.ops[size_t(s.op)];
    d.kind = MPK_MK_ARGMAX;
    d.part_val = act(s.value);
    d.part_idx = act(s.index);
    d.n = int(tg_.buffers[size_t(s.value)].numel);
    d.next_token = act(am.output);
    d.x = act(s.logits);
    d.num_logits = int(tg_.buffers[size_t(s.logits)].numel);
    if (s.embedding >= 0) {
      const ir::Op& e = g_.ops[size_t(s.embedding)];
      d.flags |= MPK_MK_F_EMBED;
      d.table = mat(e.weight);
      d.embed_out = act(e.output);
      d.vocab = int(g_.weights[size_t(e.weight)].shape.at(0));
      d.hidden = int(g_.weights[size_t(e.weight)].shape.at(1));
    }
  }

  const ir::Graph& g_;
  const sched::TaskGraph& tg_;
  const sched::Plan& p_;
  const MemoryPlan& m_;
  const SegmentBases& b_;
  const MegakernelParams& params_;
  const std::vector<Variant> variants_;  // the kernel's, by id
  std::map<std::pair<int, int>, int> arrival_;  // (layer, kv head) -> counter, numbered as first seen
};

}  // namespace

static_assert(sizeof(MkTask) % 8 == 0, "the kernel copies descriptors in 8-byte words");

MegakernelTables build_tables(const ir::Graph& graph, const sched::Plan& plan,
                              const MemoryPlan& mem, const SegmentBases& bases,
                              const MegakernelParams& params) {
  validate(params);
  MegakernelTables t = TableBuilder(graph, plan, mem, bases, params).run();
  check_access_ranges(plan, mem, bases, t);
  return t;
}

std::vector<HostSegment> host_segments(const ir::Graph& graph, const sched::TaskGraph& tasks, const MemoryPlan& mem,
                                       const MegakernelTables& tables, size_t first) {
  std::vector<HostSegment> out(size_t(tables.num_segments));
  for (int s = 0; s < tables.num_segments; ++s) {
    HostSegment& hs = out[size_t(s)];
    size_t at = first;
    auto place = [&](int tensor) {  // a graph tensor's buffer has the tensor's id
      const size_t bytes = size_t(tasks.buffers[size_t(tensor)].numel) * 4;
      hs.at.push_back({tensor, at});
      at += (bytes + 15) / 16 * 16;
      return HostSegment::Copy{hs.at.back().second, bytes, size_t(mem.buffer_offset[size_t(tensor)])};
    };
    for (size_t h = 0; h < tables.host_tasks.size(); ++h) {
      if (tables.host_after[h] != s) continue;
      const sched::Task& t = tasks.tasks[size_t(tables.host_tasks[h])];
      // An input a host op of this segment made is read where it was written (ids are a
      // topological order); the others come from the device. Every output goes back.
      for (const sched::FusedOp& f : t.ops) {
        const ir::Op& op = graph.ops[size_t(f.op)];
        for (int in : op.inputs)
          if (!hs.find(in)) hs.down.push_back(place(in));
        MPK_ICHECK(!hs.find(op.output)) << "host fallback: " << graph.tensor(op.output).name << " written twice";
        hs.up.push_back(place(op.output));
        hs.ops.push_back(f.op);
      }
      if (t.trigger >= 0) {
        auto it = std::find_if(hs.counters.begin(), hs.counters.end(), [&](const auto& c) { return c.first == t.trigger; });
        if (it == hs.counters.end()) hs.counters.push_back({t.trigger, 1u});
        else ++it->second;
      }
    }
    hs.counters_at = at;
    hs.end = at + 4 * hs.counters.size();
  }
  return out;
}

HostFallback host_fallback(const std::vector<HostSegment>& segments) {
  HostFallback h;
  for (const HostSegment& s : segments) {
    h.ops += s.ops.size();
    for (const auto* copies : {&s.down, &s.up})
      for (const HostSegment::Copy& c : *copies) h.bytes += c.bytes;
  }
  return h;
}

int64_t staged_weight_bytes(const MkTask& d, DType weight_dtype) {
  if (!(d.flags & MPK_MK_F_STAGE)) return 0;
  int64_t b = 0;
  for (int s = 0; s < d.num_slices; ++s) b += int64_t(d.slices[s].rows) * d.k;
  return b * int64_t(dtype_size(weight_dtype));
}

int64_t stage_ring_need(const MegakernelTables& tables, DType weight_dtype) {
  auto bytes = [&](int id) { return staged_weight_bytes(tables.tasks[size_t(id)], weight_dtype); };
  const ir::StageRing& ring = ir::stage_ring_formula();  // proved (superopt::prove_stage_ring)
  int64_t need = 0;
  for (size_t w = 0; w + 1 < tables.queue_begin.size(); ++w) {
    const int q0 = tables.queue_begin[w], n = tables.queue_begin[w + 1] - q0;
    for (int i = 0; i < n; ++i) {
      const int64_t cur = bytes(tables.queue[size_t(q0 + i)]);
      const int64_t next = bytes(tables.queue[size_t(q0 + (i + 1) % n)]);
      if (cur > 0)
        need = std::max(need, next > 0 ? ir::eval(ring.need, {{"a", cur}, {"b", next}})
                                        : ir::eval(ring.alone, {{"a", cur}}));
    }
  }
  return need;
}

std::vector<std::pair<int, std::string>> refused_tasks(const ir::Graph& graph, const sched::Plan& plan,
                                                       const MemoryPlan& mem, const MegakernelParams& params,
                                                       std::vector<int>* variants, int* segments) {
  validate(params);
  std::vector<std::pair<int, std::string>> refused;
  const MegakernelTables t = TableBuilder(graph, plan, mem, SegmentBases{}, params).run(&refused);
  if (segments) *segments = t.num_segments;
  if (variants) {
    variants->clear();
    for (const MkTask& d : t.tasks) variants->push_back(d.variant);
  }
  return refused;
}

std::vector<MkTask> MegakernelTables::device_tasks() const {
  std::vector<MkTask> out;
  out.reserve(queue.size());
  for (int id : queue) out.push_back(tasks[size_t(id)]);
  return out;
}

namespace {

// The entry point's suffix and the kernel source's name of a weight dtype.
struct DtypeNames {
  const char* suffix;
  const char* macro;
};

DtypeNames dtype_names(DType weight_dtype) {
  switch (weight_dtype) {
    case DType::F32: return {"f32", "MK_F32"};
    case DType::BF16: return {"bf16", "MK_BF16"};
    case DType::F16: return {"f16", "MK_F16"};
    default: break;
  }
  MPK_THROW(Unsupported) << "megakernel: weight dtype " << dtype_name(weight_dtype);
}

}  // namespace

std::string megakernel_source(const MegakernelParams& params, DType weight_dtype, int draws) {
  MPK_CHECK(draws >= MPK_MK_SAMPLE_GREEDY && draws <= MPK_MK_SAMPLE_TOPK, InvalidArgument)
      << "megakernel: no draw mode " << draws;
  std::string s = to_defines(params) + "#define MK_DRAWS " + std::to_string(draws) + "\n" +
                  embedded_kernel("task_desc.h") + "\n" + ir::layout_device_functions() +
                  ir::dot_product_device_functions();
  s += embedded_kernel("scalar.cuh") + embedded_kernel("common.cuh") + embedded_kernel("sampling_math.h") +
       ir::online_softmax_device_functions();
  // Loops printed from their loop nests (ir/task_nests.h: loops, guards, addresses; proved),
  // each group before the kernel file that calls it.
  auto printed = [](std::initializer_list<const ir::LoopNest*> nests) {
    std::string out = "// Printed from src/ir/task_nests.cc (proved by superopt/): do not edit.\n";
    for (const ir::LoopNest* n : nests) out += ir::print(*n);
    return out;
  };
  s += embedded_kernel("stage.cuh") + embedded_kernel("sample.cuh");
  if (draws == MPK_MK_SAMPLE_TOPK)
    s += printed({&ir::sample_scan_nest(), &ir::sample_scan2_nest(), &ir::sample_stride_nest(), &ir::sample_hist_clear_nest(),
                  &ir::sample_weights_nest(), &ir::sample_total_nest(), &ir::sample_cut_nest(),
                  &ir::sample_nucleus_draw_nest(), &ir::sample_walk_nest(), &ir::sample_mass_clear_nest(),
                  &ir::sample_mass_walk_nest(), &ir::sample_sort_pad_nest(), &ir::sample_sort_stage_nest()});
  s += embedded_kernel("sample_topk.cuh") + embedded_kernel("linear_rows.cuh");
  s += printed({&ir::linear_stage_nest(), &ir::linear_dot_nest(), &ir::linear_dot_first_nest(), &ir::linear_dot_scalar_nest(),
                &ir::linear_fold_nest(), &ir::linear_argmax_nest()});
  s += embedded_kernel("linear_group.cuh") + printed({&ir::linear_items_nest()});
  if (params.fold_down)
    s += printed({&ir::fold_act_nest(), &ir::fold_rows_nest(), &ir::fold_scalar_nest(), &ir::fold_out_nest()});
  s += embedded_kernel("linear.cuh");
  s += printed({&ir::attention_merge_nest(), &ir::attention_combine_nest(), &ir::attention_pass_nest(),
                &ir::attention_head_consts_nest(), &ir::attention_kv_first_nest(), &ir::attention_stage_nest(),
                &ir::argmax_partials_nest(), &ir::embedding_row_nest()});
  for (const char* f : {"merge.cuh", "attention.cuh", "argmax.cuh"}) s += embedded_kernel(f);
  s += dispatch_source(kernel_variants(params)) + embedded_kernel("protocol.cuh");
  return s + "\n// Only the model's weight dtype is compiled.\nextern \"C\" __global__ void "
             "__launch_bounds__(MK_LAUNCH_THREADS) " + megakernel_entry(weight_dtype) +
         "(MkParams p) { mk_run<" + dtype_names(weight_dtype).macro + ">(p); }\n";
}

std::string megakernel_entry(DType weight_dtype) {
  return std::string("mpk_megakernel_") + dtype_names(weight_dtype).suffix;
}

std::vector<std::string> megakernel_compile_options() { return {"--std=c++17", "--ptxas-options=-v"}; }

cuda::CompileResult compile_megakernel(const std::string& arch, const MegakernelParams& params,
                                       DType weight_dtype, int draws) {
  cuda::CompileRequest r;
  r.source = megakernel_source(params, weight_dtype, draws);
  r.name = "mpk_megakernel.cu";
  r.arch = arch;
  r.options = megakernel_compile_options();
  return cuda::compile(r);
}

namespace {

// The record's "ptxas" member: field name and PtxasInfo member.
constexpr std::pair<const char*, int cuda::PtxasInfo::*> kPtxasFields[] = {
    {"registers", &cuda::PtxasInfo::registers},
    {"spill_store_bytes", &cuda::PtxasInfo::spill_store_bytes},
    {"spill_load_bytes", &cuda::PtxasInfo::spill_load_bytes},
    {"stack_bytes", &cuda::PtxasInfo::stack_bytes},
    {"static_smem_bytes", &cuda::PtxasInfo::static_smem_bytes}};

}  // namespace

std::string record_with_ptxas(const std::string& verification_json, const cuda::PtxasInfo& info) {
  nlohmann::json j = nlohmann::json::parse(verification_json);
  MPK_ICHECK(j.is_object()) << "a verification record is a JSON object";
  nlohmann::json p = nlohmann::json::object();
  for (const auto& [name, member] : kPtxasFields) p[name] = info.*member;
  j["ptxas"] = std::move(p);
  return j.dump();
}

cuda::PtxasInfo record_ptxas(const std::string& verification_json) {
  cuda::PtxasInfo info;
  const nlohmann::json j = nlohmann::json::parse(verification_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("ptxas") || !j["ptxas"].is_object()) return info;
  for (const auto& [name, member] : kPtxasFields) {
    const auto it = j["ptxas"].find(name);
    if (it != j["ptxas"].end() && it->is_number_integer()) info.*member = it->get<int>();
  }
  return info;
}

}  // namespace mpk::rt
