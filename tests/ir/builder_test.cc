// The graph built for each family: op sequence, shapes, weights (exactly the model's tensors),
// attributes.
#include "ir/builder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "base/error.h"
#include "model/weights.h"
#include "model_configs.h"

namespace mpk::ir {
namespace {

using mpk::testing::tiny_llama;
using mpk::testing::tiny_qwen2;
using mpk::testing::tiny_qwen3;

}  // namespace
}  // namespace mpk::ir

namespace mpk::model {
void PrintTo(const Config& c, std::ostream* os) { *os << family_name(c.family); }
}  // namespace mpk::model

namespace mpk::ir {
namespace {

std::map<OpKind, int> count_ops(const Graph& g) {
  std::map<OpKind, int> n;
  for (const Op& op : g.ops) ++n[op.kind];
  return n;
}

class PerFamily : public ::testing::TestWithParam<model::Config> {};

TEST_P(PerFamily, OpCounts) {
  const model::Config c = GetParam();
  const Graph g = build(c);
  const int L = c.num_layers;
  std::map<OpKind, int> want = {
      {OpKind::Embedding, 1},   {OpKind::RmsNorm, 2 * L + 1}, {OpKind::Linear, 7 * L + 1},
      {OpKind::Rope, 2 * L},    {OpKind::Attention, L},       {OpKind::SiluMul, L},
      {OpKind::Add, 2 * L},     {OpKind::LastRow, 1},         {OpKind::Argmax, 1}};
  if (c.qk_norm) want[OpKind::HeadRmsNorm] = 2 * L;
  EXPECT_EQ(count_ops(g), want);
  EXPECT_EQ(g.ops.front().kind, OpKind::Embedding);
  EXPECT_EQ(g.ops.back().kind, OpKind::Argmax);
  EXPECT_NO_THROW(validate(g));
}

TEST_P(PerFamily, WeightsAreExactlyTheModelTensors) {
  const model::Config c = GetParam();
  const Graph g = build(c);
  std::map<std::string, std::vector<int64_t>> got;
  for (const WeightRef& w : g.weights) EXPECT_TRUE(got.emplace(w.name, w.shape).second) << w.name;
  EXPECT_EQ(got, model::expected_tensors(c));
  EXPECT_EQ(g.weight_dtype, c.torch_dtype);
  EXPECT_EQ(build(c, DType::F16).weight_dtype, DType::F16);
}

TEST_P(PerFamily, LayerStructureAndShapes) {
  const model::Config c = GetParam();
  const Graph g = build(c);
  const int64_t q = int64_t(c.num_heads) * c.head_dim, kv = int64_t(c.num_kv_heads) * c.head_dim;
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const std::string w = "model.layers." + std::to_string(l) + ".self_attn.";
    auto shape = [&](const std::string& name) {
      int id = g.find_tensor(p + name);
      EXPECT_GE(id, 0) << p + name;
      return id >= 0 ? g.tensor(id).shape : Shape{};
    };
    EXPECT_EQ(shape("q"), (Shape{kTokens, q}));
    EXPECT_EQ(shape("k"), (Shape{kTokens, kv}));
    EXPECT_EQ(shape("v"), (Shape{kTokens, kv}));
    EXPECT_EQ(shape("attn"), (Shape{kTokens, q}));
    EXPECT_EQ(shape("attn_out"), (Shape{kTokens, c.hidden_size}));
    EXPECT_EQ(shape("silu_mul"), (Shape{kTokens, c.intermediate_size}));
    EXPECT_EQ(shape("out"), (Shape{kTokens, c.hidden_size}));
    EXPECT_EQ(g.find_tensor(p + "q_norm") >= 0, c.qk_norm);
    // Biases as the family has them.
    auto op_of = [&](const std::string& tensor) -> const Op& {
      int id = g.find_tensor(p + tensor);
      for (const Op& op : g.ops)
        if (op.output == id) return op;
      ADD_FAILURE() << "no op writes " << p + tensor;
      return g.ops.front();
    };
    EXPECT_EQ(op_of("q").bias >= 0, c.attention_bias);
    EXPECT_EQ(op_of("v").bias >= 0, c.attention_bias);
    EXPECT_EQ(op_of("attn_out").bias >= 0, c.o_proj_bias);
    if (c.attention_bias) {
      EXPECT_EQ(g.weight(op_of("k").bias).name, w + "k_proj.bias");
    }
    // Attention reads the rotated q and k, the raw v, and owns KV layer l.
    const Op& att = op_of("attn");
    EXPECT_EQ(att.layer, l);
    EXPECT_EQ(g.tensor(att.inputs[0]).name, p + "q_rope");
    EXPECT_EQ(g.tensor(att.inputs[1]).name, p + "k_rope");
    EXPECT_EQ(g.tensor(att.inputs[2]).name, p + "v");
    EXPECT_EQ(att.inputs[3], g.positions);
    EXPECT_DOUBLE_EQ(att.attrs.scale, 1.0 / std::sqrt(double(c.head_dim)));
    EXPECT_EQ(att.attrs.num_heads, c.num_heads);
    EXPECT_EQ(att.attrs.num_kv_heads, c.num_kv_heads);
    const Op& kr = op_of("k_rope");
    EXPECT_EQ(kr.attrs.num_heads, c.num_kv_heads);
    EXPECT_EQ(kr.attrs.rope_theta, c.rope_theta);
    EXPECT_EQ(kr.attrs.rope_scaling.has_value(), c.rope_scaling.has_value());
    EXPECT_EQ(g.tensor(kr.inputs[0]).name, p + (c.qk_norm ? "k_norm" : "k"));
  }
  EXPECT_EQ(g.kv_cache.num_layers, c.num_layers);
  EXPECT_EQ(g.kv_cache.num_kv_heads, c.num_kv_heads);
  EXPECT_EQ(g.kv_cache.head_dim, c.head_dim);
  EXPECT_EQ(g.tensor(g.logits).shape, (Shape{1, c.vocab_size}));
  EXPECT_EQ(g.tensor(g.next_token).dtype, DType::I32);
  // The LM head: the embedding when tied, lm_head.weight otherwise.
  const Op& head = g.ops[g.ops.size() - 2];
  EXPECT_EQ(head.output, g.logits);
  EXPECT_EQ(g.weight(head.weight).name,
            c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  EXPECT_EQ(g.tensor(head.inputs[0]).shape, (Shape{1, c.hidden_size}));
}

INSTANTIATE_TEST_SUITE_P(Families, PerFamily,
                         ::testing::Values(tiny_qwen3(), tiny_qwen2(), tiny_llama()),
                         [](const auto& info) {
                           return std::string(model::family_name(info.param.family));
                         });

TEST(Builder, LargeModelShape) {
  const model::Config c = mpk::testing::qwen3_8b();
  const Graph g = build(c);
  EXPECT_EQ(g.ops.size(), size_t(1 + 36 * 17 + 4));
  EXPECT_EQ(g.weights.size(), model::expected_tensors(c).size());
}

TEST(Builder, RejectsInconsistentConfigs) {
  auto kind_of = [](const model::Config& c) {
    try {
      build(c);
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Internal;
  };
  model::Config c = tiny_qwen3();
  c.num_kv_heads = 3;  // 4 heads
  EXPECT_EQ(kind_of(c), ErrorKind::InvalidArgument);
  c = tiny_qwen3();
  c.head_dim = 23;
  EXPECT_EQ(kind_of(c), ErrorKind::InvalidArgument);
  c = tiny_qwen3();
  c.num_layers = 0;
  EXPECT_EQ(kind_of(c), ErrorKind::InvalidArgument);
  c = tiny_qwen3();
  c.rms_norm_eps = 0;
  EXPECT_EQ(kind_of(c), ErrorKind::InvalidArgument);
  EXPECT_THROW(build(tiny_qwen3(), DType::I32), Error);
}

}  // namespace
}  // namespace mpk::ir
