#include "ref/executor.h"

#include <unistd.h>

#include <tbb/task_arena.h>

#include <limits>
#include <new>

#include "base/error.h"
#include "ir/rope.h"
#include "model/weights.h"
#include "ref/kernels.h"

namespace mpk::ref {

struct Executor::Impl {
  const model::Model& model;
  const ir::Graph& graph;
  size_t capacity;
  tbb::task_arena arena;
  std::vector<WeightView> weights;             // per graph weight
  std::vector<std::vector<float>> inv_freq;    // per op: RoPE table of rope ops
  std::vector<size_t> last_use;                // per tensor: last op reading it
  std::vector<float> k_cache, v_cache;         // [layers][kv_heads][capacity][head_dim]
  std::vector<float> logits;
  int32_t next_token = -1;
  size_t position = 0;

  Impl(const model::Model& m, const ir::Graph& g, size_t cap, const Options& o)
      : model(m),
        graph(g),
        capacity(cap),
        arena(o.num_threads > 0 ? o.num_threads : tbb::task_arena::automatic) {}

  void bind_weights();
  void allocate_cache();
  KvLayerView kv_layer(int layer);
  // Runs the graph for `n` tokens at positions [position, position + n). Writes only the
  // cache slots of those positions and the returned values: the caller commits them.
  void run(const int32_t* tokens, int64_t n, std::vector<float>& logits_out, int32_t& next_out);
};

void Executor::Impl::bind_weights() {
  for (const ir::WeightRef& ref : graph.weights) {
    const model::Tensor& t = model.weights.at(ref.name);
    MPK_CHECK(t.shape == ref.shape, InvalidModel)
        << "weight '" << ref.name << "' has shape " << model::shape_to_string(t.shape)
        << ", the graph expects " << ir::shape_str(ref.shape);
    weights.push_back(WeightView::of(t));
  }
  inv_freq.resize(graph.ops.size());
  last_use.assign(graph.tensors.size(), 0);
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const ir::Op& op = graph.ops[i];
    if (op.kind == ir::OpKind::Rope)
      inv_freq[i] = ir::rope_inv_freq(op.attrs.head_dim, op.attrs.rope_theta,
                                      op.attrs.rope_scaling);
    for (int id : op.inputs) last_use[size_t(id)] = i;
  }
}

void Executor::Impl::allocate_cache() {
  const ir::KvCacheDesc& kv = graph.kv_cache;
  const size_t per_token = size_t(kv.num_layers) * size_t(kv.num_kv_heads) * size_t(kv.head_dim);
  MPK_CHECK(capacity > 0, InvalidArgument) << "KV cache capacity must be at least 1 token";
  MPK_CHECK(per_token == 0 || capacity <= std::numeric_limits<size_t>::max() / 8 / per_token,
            OutOfMemory)
      << "a KV cache of " << capacity << " tokens does not fit in memory";
  // Filling more than the machine's RAM would end in the OOM killer, not in bad_alloc.
  const size_t bytes = 2 * per_token * capacity * sizeof(float);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  MPK_CHECK(pages <= 0 || page <= 0 || bytes <= size_t(pages) * size_t(page), OutOfMemory)
      << "a KV cache of " << capacity << " tokens needs " << bytes << " bytes, more than this "
      << "machine's " << size_t(pages) * size_t(page) << " bytes of memory";
  try {
    k_cache.assign(per_token * capacity, 0.0f);
    v_cache.assign(per_token * capacity, 0.0f);
  } catch (const std::bad_alloc&) {
    MPK_THROW(OutOfMemory) << "cannot allocate a KV cache of " << capacity << " tokens ("
                           << 2 * per_token * capacity * sizeof(float) << " bytes)";
  }
}

KvLayerView Executor::Impl::kv_layer(int layer) {
  const ir::KvCacheDesc& kv = graph.kv_cache;
  const size_t offset = size_t(layer) * size_t(kv.num_kv_heads) * capacity * size_t(kv.head_dim);
  return {k_cache.data() + offset, v_cache.data() + offset, int64_t(capacity), kv.num_kv_heads,
          kv.head_dim};
}

void Executor::Impl::run(const int32_t* tokens, int64_t n, std::vector<float>& logits_out,
                         int32_t& next_out) {
  const ir::Graph& g = graph;
  std::vector<std::vector<float>> f32(g.tensors.size());
  std::vector<std::vector<int32_t>> i32(g.tensors.size());
  i32[size_t(g.tokens)].assign(tokens, tokens + n);
  auto& positions = i32[size_t(g.positions)];
  positions.resize(size_t(n));
  for (int64_t t = 0; t < n; ++t) positions[size_t(t)] = int32_t(position + size_t(t));

  for (size_t k = 0; k < g.ops.size(); ++k) {
    const ir::Op& op = g.ops[k];
    const ir::Attrs& a = op.attrs;
    const ir::TensorDesc& out_desc = g.tensor(op.output);
    const int64_t out_n = ir::numel(out_desc.shape, n);
    auto in = [&](int i) { return f32[size_t(op.inputs[size_t(i)])].data(); };
    auto in_i32 = [&](int i) { return i32[size_t(op.inputs[size_t(i)])].data(); };
    auto rows = [&](int i) { return ir::numel({g.tensor(op.inputs[size_t(i)]).shape[0]}, n); };
    float* out = nullptr;
    if (out_desc.dtype == DType::F32) {
      f32[size_t(op.output)].resize(size_t(out_n));
      out = f32[size_t(op.output)].data();
    } else {
      i32[size_t(op.output)].resize(size_t(out_n));
    }
    const WeightView* w = op.weight >= 0 ? &weights[size_t(op.weight)] : nullptr;
    const WeightView* bias = op.bias >= 0 ? &weights[size_t(op.bias)] : nullptr;

    switch (op.kind) {
      case ir::OpKind::Embedding: embedding(in_i32(0), n, *w, out); break;
      case ir::OpKind::RmsNorm:
        rms_norm(in(0), rows(0), out_desc.shape[1], *w, float(a.eps), out);
        break;
      case ir::OpKind::Linear: linear(in(0), rows(0), *w, bias, out); break;
      case ir::OpKind::HeadRmsNorm:
        head_rms_norm(in(0), rows(0), a.num_heads, a.head_dim, *w, float(a.eps), out);
        break;
      case ir::OpKind::Rope:
        rope(in(0), in_i32(1), rows(0), a.num_heads, a.head_dim, inv_freq[k].data(), out);
        break;
      case ir::OpKind::Attention:
        attention(in(0), in(1), in(2), in_i32(3), rows(0), a.num_heads, float(a.scale),
                  kv_layer(op.layer), out);
        break;
      case ir::OpKind::SiluMul:
      case ir::OpKind::GeluTanhMul:
      case ir::OpKind::Add: binary_elementwise(op.kind, in(0), in(1), out_n, out); break;
      case ir::OpKind::LastRow: {
        const float* x = in(0);
        std::copy(x + (n - 1) * out_n, x + n * out_n, out);
        break;
      }
      case ir::OpKind::Argmax:
        i32[size_t(op.output)][0] = argmax(in(0), ir::numel(g.tensor(op.inputs[0]).shape, n));
        break;
    }
    // Activations die after their last reader: a long prefill keeps only a few alive.
    for (int id : op.inputs)
      if (last_use[size_t(id)] == k && id != g.logits) {
        std::vector<float>().swap(f32[size_t(id)]);
        std::vector<int32_t>().swap(i32[size_t(id)]);
      }
  }
  logits_out = std::move(f32[size_t(g.logits)]);
  next_out = i32[size_t(g.next_token)].at(0);
}

Executor::Executor(const model::Model& model, const ir::Graph& graph, size_t kv_capacity,
                   Options options)
    : impl_(std::make_unique<Impl>(model, graph, kv_capacity, options)) {
  ir::validate(graph);
  MPK_CHECK(model.weights.has_data(), BadState)
      << "the model's host weights were released (it runs on the GPU backend)";
  MPK_CHECK(options.num_threads >= 0, InvalidArgument)
      << "num_threads must be >= 0 (0: all cores), got " << options.num_threads;
  impl_->bind_weights();
  impl_->allocate_cache();
}

Executor::~Executor() = default;

void Executor::forward(const int32_t* tokens, size_t n) {
  Impl& s = *impl_;
  const int vocab = s.graph.config.vocab_size;
  MPK_CHECK(n > 0, InvalidArgument) << "forward needs at least one token";
  MPK_CHECK(tokens != nullptr, InvalidArgument) << "forward: tokens is null";
  for (size_t i = 0; i < n; ++i)
    MPK_CHECK(tokens[i] >= 0 && tokens[i] < vocab, InvalidArgument)
        << "token id " << tokens[i] << " at index " << i << " is outside [0, " << vocab << ")";
  MPK_CHECK(n <= s.capacity - s.position, Capacity)
      << "the KV cache holds " << s.capacity << " tokens: " << s.position << " are used and "
      << n << " more do not fit";
  std::vector<float> logits;
  int32_t next = -1;
  s.arena.execute([&] { s.run(tokens, int64_t(n), logits, next); });
  s.logits = std::move(logits);
  s.next_token = next;
  s.position += n;
}

const std::vector<float>& Executor::logits() const { return impl_->logits; }
int32_t Executor::next_token() const { return impl_->next_token; }
size_t Executor::position() const { return impl_->position; }
size_t Executor::capacity() const { return impl_->capacity; }

void Executor::reset() {
  impl_->position = 0;
  impl_->logits.clear();
  impl_->next_token = -1;
}

}  // namespace mpk::ref
