// The graph IR: one forward step of a decoder-only LLM (T tokens in, logits of the last one out)
// as a straight list of ops over named tensors, with weights referenced by their Hugging Face
// names. The scheduler decomposes it into tile tasks; src/ref executes it as the oracle.
//
// Numeric contract (the reference, the provers and every test follow it):
//  - Weights are stored f32, f16 or bf16 and widened to fp32 exactly (every f16 and bf16 value
//    is an fp32 value); they are never rounded again.
//  - Activations are fp32. In the reference every reduction (dot products, mean of squares,
//    softmax max and sum, attention-weighted sums of V) accumulates in fp32, in an unspecified
//    order; each op rounds its outputs to fp32 once. Positions are exact integers.
//  - Elementwise formulas follow transformers in fp32: rsqrt(v + eps) with eps rounded to fp32,
//    silu(g) = g / (1 + exp(-g)), softmax = exp(s - max) / sum, attention scale
//    fp32(head_dim^-0.5) applied to q.k. RoPE's inv_freq table is computed in fp32 exactly as
//    transformers does (ir/rope.h), angles are fp32(position * inv_freq), cos/sin in fp32.
//  - A device implementation may reorder reductions, split them (split-K, split-KV with an
//    online-softmax merge) and round activations to bf16 at op boundaries; each such rounding
//    point is a declared property of the implementation, never silent.
//  - Tolerance: the relative L2 error ||y - y_ref||_2 / ||y_ref||_2 of an op output (per-op
//    tests) or of a logits row (whole model), measured against the fp32 reference. NaN or Inf
//    never passes. The reference against transformers (fp32, eager, same weights) is held to
//    1e-4 per logits row with the same argmax (tests/ref/golden_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "model/config.h"

namespace mpk::ir {

enum class OpKind : uint8_t {
#define MPK_IR_OP(kind, name, inputs, weights, doc) kind,
#include "ir/ops.def"
#undef MPK_IR_OP
};

inline constexpr int kNumOpKinds = 0
#define MPK_IR_OP(kind, name, inputs, weights, doc) +1
#include "ir/ops.def"
#undef MPK_IR_OP
    ;

// One row of ops.def.
struct OpInfo {
  const char* name;
  int num_inputs;
  int weights;  // 0 none, 1 weight, 2 weight + optional bias
  const char* semantics;
};
const OpInfo& op_info(OpKind kind);
inline const char* op_name(OpKind kind) { return op_info(kind).name; }
std::optional<OpKind> op_kind_from_name(std::string_view name);

// The symbolic token count T of a step, as a dimension.
inline constexpr int64_t kTokens = -1;
using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);  // "[T, 64]"

enum class TensorRole : uint8_t { Input, Activation, Output };
const char* tensor_role_name(TensorRole role);

struct TensorDesc {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  TensorRole role = TensorRole::Activation;
};

// A model tensor, by its Hugging Face name. Graph::weight_dtype is the declared dtype of all
// weights; the reference reads each tensor in the dtype it is stored in.
struct WeightRef {
  std::string name;
  Shape shape;
};

// Attributes; each op kind reads only the ones its comment names.
struct Attrs {
  double eps = 0;         // rms_norm, head_rms_norm
  int num_heads = 0;      // head_rms_norm, rope, attention (query heads)
  int num_kv_heads = 0;   // attention
  int head_dim = 0;       // head_rms_norm, rope, attention
  double scale = 0;       // attention: head_dim^-0.5
  double rope_theta = 0;  // rope
  std::optional<model::RopeScaling> rope_scaling;  // rope: llama3 scaling of inv_freq
};

struct Op {
  OpKind kind = OpKind::Add;
  std::vector<int> inputs;  // tensor ids, in the order of ops.def
  int output = -1;          // tensor id, written by this op only
  int weight = -1;          // index into Graph::weights, or -1
  int bias = -1;            // index into Graph::weights, or -1
  int layer = -1;           // decoder layer (-1 outside); attention's KV cache layer
  Attrs attrs;
};

// The KV cache the attention ops share: fp32 [num_layers][num_kv_heads][capacity][head_dim]
// in the reference; the capacity is chosen by whoever executes the graph.
struct KvCacheDesc {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
};

struct Graph {
  model::Config config;
  DType weight_dtype = DType::BF16;
  std::vector<TensorDesc> tensors;
  std::vector<WeightRef> weights;
  std::vector<Op> ops;  // in execution order (a topological order)
  KvCacheDesc kv_cache;
  int tokens = -1;      // input i32[T]: token ids
  int positions = -1;   // input i32[T]: position of each token in the sequence
  int logits = -1;      // output f32[1, V]: logits of the last token
  int next_token = -1;  // output i32[1]: argmax of the logits

  const TensorDesc& tensor(int id) const { return tensors.at(size_t(id)); }
  const WeightRef& weight(int index) const { return weights.at(size_t(index)); }
  int find_tensor(std::string_view name) const;  // -1 if absent
  int find_weight(std::string_view name) const;  // -1 if absent
};

// Checks the graph's structure: ids in range, every input defined before use, each tensor
// written once, shapes and dtypes as ops.def says, attention attrs consistent with kv_cache.
// Throws Error(InvalidArgument) naming the first offending op.
void validate(const Graph& graph);

// Elements of a tensor for a step of `num_tokens` tokens.
int64_t numel(const Shape& shape, int64_t num_tokens);

// Human-readable listing, one op per line.
std::string to_text(const Graph& graph);
// The whole graph as a JSON document (mpk-run --dump-graph --json).
std::string to_json(const Graph& graph);

}  // namespace mpk::ir
