// The op table, validate() on broken graphs, and the text / JSON dumps.
#include "ir/graph.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <set>

#include "base/error.h"
#include "ir/builder.h"

namespace mpk::ir {
namespace {

model::Config small_llama() {
  model::Config c;
  c.family = model::Family::Llama;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 50, c.hidden_size = 16, c.intermediate_size = 24, c.num_layers = 2;
  c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 6;
  c.rms_norm_eps = 1e-5, c.rope_theta = 5e5;
  c.rope_scaling = model::RopeScaling{"llama3", 8.0, 1.0, 4.0, 64};
  return c;
}

TEST(OpTable, NamesAreUniqueAndRoundTrip) {
  std::set<std::string> names;
  for (int i = 0; i < kNumOpKinds; ++i) {
    const OpInfo& info = op_info(OpKind(i));
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_EQ(op_kind_from_name(info.name), OpKind(i));
    EXPECT_GE(info.num_inputs, 1);
    EXPECT_NE(std::string(info.semantics), "");
  }
  EXPECT_EQ(op_kind_from_name("matmul"), std::nullopt);
  EXPECT_STREQ(op_name(OpKind::HeadRmsNorm), "head_rms_norm");
  EXPECT_EQ(op_info(OpKind::Attention).num_inputs, 4);
  EXPECT_EQ(op_info(OpKind::Linear).weights, 2);
}

TEST(Shape, TextAndElementCount) {
  EXPECT_EQ(shape_str({kTokens, 64}), "[T, 64]");
  EXPECT_EQ(shape_str({}), "[]");
  EXPECT_EQ(numel({kTokens, 64}, 7), 448);
  EXPECT_EQ(numel({1, 5}, 7), 5);
}

// Each mutation breaks the graph; validate() must say InvalidArgument.
TEST(Validate, RejectsBrokenGraphs) {
  const Graph good = build(small_llama());
  ASSERT_NO_THROW(validate(good));
  auto kind_after = [&](const std::function<void(Graph&)>& mutate) {
    Graph g = good;
    mutate(g);
    try {
      validate(g);
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Internal;  // accepted
  };
  auto find_op = [](Graph& g, OpKind kind) -> Op& {
    for (Op& op : g.ops)
      if (op.kind == kind) return op;
    throw std::runtime_error("no such op");
  };
  const std::vector<std::pair<std::string, std::function<void(Graph&)>>> cases = {
      {"use before definition", [](Graph& g) { std::swap(g.ops[1], g.ops[2]); }},
      {"written twice", [](Graph& g) { g.ops[2].output = g.ops[1].output; }},
      {"input id out of range", [](Graph& g) { g.ops[3].inputs[0] = 100000; }},
      {"writes an input", [](Graph& g) { g.ops[0].output = g.positions; }},
      {"missing input", [](Graph& g) { g.ops[1].inputs.clear(); }},
      {"linear weight shape",
       [&](Graph& g) { g.weights[size_t(find_op(g, OpKind::Linear).weight)].shape = {3, 3}; }},
      {"bias on a weightless op", [&](Graph& g) { find_op(g, OpKind::Add).bias = 0; }},
      {"weight index out of range", [&](Graph& g) { find_op(g, OpKind::RmsNorm).weight = 999; }},
      {"odd rope head_dim", [&](Graph& g) { find_op(g, OpKind::Rope).attrs.head_dim = 3; }},
      {"attention layer outside the cache",
       [&](Graph& g) { find_op(g, OpKind::Attention).layer = 2; }},
      {"attention kv heads", [&](Graph& g) { find_op(g, OpKind::Attention).attrs.num_kv_heads = 3; }},
      {"add shape mismatch",
       [&](Graph& g) { g.tensors[size_t(find_op(g, OpKind::Add).output)].shape = {kTokens, 5}; }},
      {"f32 tokens", [](Graph& g) { g.tensors[size_t(g.tokens)].dtype = DType::F32; }},
      {"logits never written", [](Graph& g) { g.ops.resize(g.ops.size() - 2); }},
      {"bad output id", [](Graph& g) { g.logits = -1; }},
  };
  for (const auto& [what, mutate] : cases)
    EXPECT_EQ(kind_after(mutate), ErrorKind::InvalidArgument) << what;
}

TEST(Dump, TextListsEveryOp) {
  const Graph g = build(small_llama());
  const std::string text = to_text(g);
  EXPECT_NE(text.find("graph llama (LlamaForCausalLM)"), std::string::npos) << text;
  EXPECT_NE(text.find("input %0 tokens: i32[T]"), std::string::npos) << text;
  EXPECT_NE(text.find("embed: f32[T, 16] = embedding(%0) w=model.embed_tokens.weight[50, 16]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rope("), std::string::npos);
  EXPECT_NE(text.find("rope_scaling="), std::string::npos);
  EXPECT_NE(text.find("w=lm_head.weight[50, 16]"), std::string::npos);
  EXPECT_NE(text.find("kv_cache: f32[2 layers][2 kv_heads][capacity][6]"), std::string::npos);
  size_t lines = size_t(std::count(text.begin(), text.end(), '\n'));
  EXPECT_EQ(lines, g.ops.size() + 2 /*inputs*/ + 3 /*header, kv, outputs*/);
}

TEST(Dump, JsonDescribesTheWholeGraph) {
  const Graph g = build(small_llama());
  const nlohmann::json j = nlohmann::json::parse(to_json(g));
  EXPECT_EQ(j.at("family"), "llama");
  EXPECT_EQ(j.at("ops").size(), g.ops.size());
  EXPECT_EQ(j.at("tensors").size(), g.tensors.size());
  EXPECT_EQ(j.at("weights").size(), g.weights.size());
  EXPECT_EQ(j.at("tensors").at(0).at("shape"), nlohmann::json::parse(R"(["T"])"));
  EXPECT_EQ(j.at("outputs").at("logits"), g.logits);
  EXPECT_EQ(j.at("kv_cache").at("head_dim"), 6);
  // Every op names its kind from the table and its weights by HF name.
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const auto& o = j.at("ops").at(i);
    EXPECT_EQ(op_kind_from_name(o.at("kind").get<std::string>()), g.ops[i].kind);
    if (g.ops[i].weight >= 0) {
      EXPECT_EQ(o.at("weight"), g.weight(g.ops[i].weight).name);
    }
  }
  bool saw_scaling = false;
  for (const auto& o : j.at("ops"))
    if (o.at("kind") == "rope") {
      EXPECT_EQ(o.at("attrs").at("rope_scaling").at("original_max_position_embeddings"), 64);
      saw_scaling = true;
    }
  EXPECT_TRUE(saw_scaling);
}

}  // namespace
}  // namespace mpk::ir
