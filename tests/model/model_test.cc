#include "model/model.h"

#include <gtest/gtest.h>

#include <cstring>

#include "test_model_writer.h"

namespace mpk::model {
namespace {

namespace fs = std::filesystem;
using testing::Json;
using testing::TensorData;
using testing::throws_error;

uint64_t count_params(const std::vector<TensorData>& ts, bool skip_lm_head = false) {
  uint64_t n = 0;
  for (const TensorData& t : ts)
    if (!(skip_lm_head && t.name == "lm_head.weight")) n += t.values.size();
  return n;
}

// Loads `dir` and checks every tensor against what was written.
std::unique_ptr<Model> load_and_compare(const fs::path& dir, const std::vector<TensorData>& ts,
                                        DType dtype) {
  auto m = load(dir);
  EXPECT_EQ(m->dir, dir);
  EXPECT_EQ(m->dtype, dtype);
  EXPECT_EQ(m->weights.tensors().size(), ts.size());
  for (const TensorData& t : ts) {
    const Tensor& got = m->weights.at(t.name);
    EXPECT_EQ(got.shape, t.shape) << t.name;
    EXPECT_EQ(got.dtype, dtype) << t.name;
    EXPECT_EQ(got.nbytes, t.bytes.size()) << t.name;
    for (size_t i = 0; i < t.values.size(); ++i) {
      float x = testing::decode(dtype, got.data + i * dtype_size(dtype));
      if (x != t.values[i]) {
        ADD_FAILURE() << t.name << "[" << i << "] = " << x << ", wrote " << t.values[i];
        break;
      }
    }
  }
  return m;
}

TEST(Load, Qwen3TiedBf16) {
  testing::TempDir dir;
  Json cfg = testing::qwen3_config();
  auto ts = testing::model_tensors(cfg, DType::BF16);
  testing::write_model(dir.path(), cfg, ts);
  auto m = load_and_compare(dir.path(), ts, DType::BF16);
  EXPECT_EQ(m->config.family, Family::Qwen3);
  EXPECT_EQ(m->config.head_dim, 16);
  EXPECT_EQ(m->weights.find("lm_head.weight"), nullptr);
  EXPECT_NE(m->weights.find("model.layers.1.self_attn.k_norm.weight"), nullptr);
  EXPECT_EQ(m->num_parameters, count_params(ts));
}

TEST(Load, Qwen3UntiedF16OneKvHeadWithBias) {
  testing::TempDir dir;
  Json cfg = testing::qwen3_config();
  cfg["tie_word_embeddings"] = false;
  cfg["num_key_value_heads"] = 1;
  cfg["head_dim"] = 24;
  cfg["attention_bias"] = true;
  cfg["torch_dtype"] = "float16";
  auto ts = testing::model_tensors(cfg, DType::F16, 5);
  testing::write_model(dir.path(), cfg, ts);
  auto m = load_and_compare(dir.path(), ts, DType::F16);
  EXPECT_EQ(m->weights.at("model.layers.0.self_attn.k_proj.weight").shape,
            (std::vector<int64_t>{24, 32}));
  EXPECT_EQ(m->weights.at("model.layers.0.self_attn.o_proj.weight").shape,
            (std::vector<int64_t>{32, 96}));
  EXPECT_NE(m->weights.find("model.layers.1.self_attn.o_proj.bias"), nullptr);
  EXPECT_NE(m->weights.find("lm_head.weight"), nullptr);
  EXPECT_EQ(m->num_parameters, count_params(ts));
}

TEST(Load, Qwen2F32WithQkvBias) {
  testing::TempDir dir;
  Json cfg = testing::qwen2_config();
  auto ts = testing::model_tensors(cfg, DType::F32, 9);
  testing::write_model(dir.path(), cfg, ts);
  auto m = load_and_compare(dir.path(), ts, DType::F32);
  EXPECT_EQ(m->config.family, Family::Qwen2);
  EXPECT_NE(m->weights.find("model.layers.0.self_attn.q_proj.bias"), nullptr);
  EXPECT_EQ(m->weights.find("model.layers.0.self_attn.o_proj.bias"), nullptr);
  EXPECT_EQ(m->num_parameters, count_params(ts));
}

TEST(Load, LlamaShardedLegacyRope) {
  testing::TempDir dir;
  Json cfg = testing::llama_config();
  auto ts = testing::model_tensors(cfg, DType::BF16, 13);
  testing::write_model(dir.path(), cfg, ts, 3);
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors"));
  auto m = load_and_compare(dir.path(), ts, DType::BF16);
  EXPECT_EQ(m->config.family, Family::Llama);
  ASSERT_TRUE(m->config.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(m->config.rope_scaling->factor, 8.0);
  EXPECT_EQ(m->num_parameters, count_params(ts));
}

TEST(Load, LlamaRopeParametersF16WithBias) {
  testing::TempDir dir;
  Json cfg = testing::llama_config();
  cfg.erase("rope_scaling");
  cfg.erase("rope_theta");
  cfg.erase("torch_dtype");
  cfg["dtype"] = "float16";
  cfg["attention_bias"] = true;
  cfg["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0},
                            {"factor", 32.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  auto ts = testing::model_tensors(cfg, DType::F16, 17);
  testing::write_model(dir.path(), cfg, ts, 2);
  auto m = load_and_compare(dir.path(), ts, DType::F16);
  EXPECT_DOUBLE_EQ(m->config.rope_theta, 500000.0);
  ASSERT_TRUE(m->config.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(m->config.rope_scaling->factor, 32.0);
  EXPECT_NE(m->weights.find("model.layers.1.self_attn.o_proj.bias"), nullptr);
}

TEST(Load, InvFreqIgnoredAndTiedLmHeadAccepted) {
  testing::TempDir dir;
  Json cfg = testing::qwen3_config();  // tied
  auto ts = testing::model_tensors(cfg, DType::BF16);
  const uint64_t params = count_params(ts);
  std::mt19937 rng(1);
  ts.push_back(testing::random_tensor("model.layers.0.self_attn.rotary_emb.inv_freq", DType::F32,
                                      {8}, rng));
  ts.push_back(testing::random_tensor("lm_head.weight", DType::BF16, {64, 32}, rng));
  testing::write_model(dir.path(), cfg, ts);
  auto m = load(dir.path());
  EXPECT_EQ(m->dtype, DType::BF16);
  EXPECT_EQ(m->num_parameters, params);
}

TEST(ExpectedTensors, Qwen3NamesAndShapes) {
  Config c = parse_config(testing::qwen3_config().dump());
  auto e = expected_tensors(c);
  EXPECT_EQ(e.size(), 2u + 2 * 11);  // embed + norm, 11 per layer, tied head
  EXPECT_EQ(e.at("model.embed_tokens.weight"), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(e.at("model.norm.weight"), (std::vector<int64_t>{32}));
  EXPECT_EQ(e.count("lm_head.weight"), 0u);
  EXPECT_EQ(e.at("model.layers.1.self_attn.q_proj.weight"), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(e.at("model.layers.1.self_attn.k_proj.weight"), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(e.at("model.layers.1.self_attn.o_proj.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(e.at("model.layers.1.self_attn.q_norm.weight"), (std::vector<int64_t>{16}));
  EXPECT_EQ(e.at("model.layers.0.mlp.down_proj.weight"), (std::vector<int64_t>{32, 48}));
  c.tie_word_embeddings = false;
  EXPECT_EQ(expected_tensors(c).at("lm_head.weight"), (std::vector<int64_t>{64, 32}));
}

// A valid Qwen2 model directory whose tensors a test then edits.
struct Fixture {
  testing::TempDir dir;
  Json cfg = testing::qwen2_config();
  std::vector<TensorData> ts = testing::model_tensors(cfg, DType::BF16, 21);
  void write() { testing::write_model(dir.path(), cfg, ts); }
  ::testing::AssertionResult fails(ErrorKind kind, const std::string& substr) {
    write();
    return throws_error([&] { load(dir.path()); }, kind, substr);
  }
  TensorData& get(const std::string& name) {
    for (TensorData& t : ts)
      if (t.name == name) return t;
    throw std::runtime_error("no tensor " + name);
  }
};

TEST(LoadError, MissingDirectory) {
  testing::TempDir dir;
  EXPECT_TRUE(throws_error([&] { load(dir.path() / "absent"); }, ErrorKind::NotFound,
                           "does not exist"));
  testing::write_file(dir.path() / "file", "x");
  EXPECT_TRUE(throws_error([&] { load(dir.path() / "file"); }, ErrorKind::NotFound,
                           "not a directory"));
}

TEST(LoadError, MissingConfig) {
  Fixture f;
  f.write();
  fs::remove(f.dir.path() / "config.json");
  EXPECT_TRUE(throws_error([&] { load(f.dir.path()); }, ErrorKind::NotFound, "config.json"));
}

TEST(LoadError, MissingTensor) {
  Fixture f;
  std::erase_if(f.ts, [](const TensorData& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
  EXPECT_TRUE(f.fails(ErrorKind::InvalidModel, "missing: 'model.layers.1.mlp.up_proj.weight'"));
}

TEST(LoadError, UntiedModelWithoutLmHead) {
  Fixture f;
  std::erase_if(f.ts, [](const TensorData& t) { return t.name == "lm_head.weight"; });
  EXPECT_TRUE(f.fails(ErrorKind::InvalidModel, "'lm_head.weight'"));
}

TEST(LoadError, UnexpectedTensor) {
  Fixture f;
  std::mt19937 rng(2);
  f.ts.push_back(testing::random_tensor("model.layers.0.self_attn.o_proj.bias", DType::BF16, {32}, rng));
  EXPECT_TRUE(f.fails(ErrorKind::InvalidModel, "not used by the Qwen2ForCausalLM config: "
                                               "'model.layers.0.self_attn.o_proj.bias'"));
}

TEST(LoadError, ExtraLayer) {
  Fixture f;
  f.cfg["num_hidden_layers"] = 1;
  EXPECT_TRUE(f.fails(ErrorKind::InvalidModel, "model.layers.1."));
}

TEST(LoadError, ShapeMismatchNamesBothShapes) {
  Fixture f;
  std::mt19937 rng(3);
  f.get("model.layers.0.mlp.gate_proj.weight") =
      testing::random_tensor("model.layers.0.mlp.gate_proj.weight", DType::BF16, {32, 40}, rng);
  EXPECT_TRUE(f.fails(ErrorKind::InvalidModel,
                      "'model.layers.0.mlp.gate_proj.weight' has shape [32, 40], expected [40, 32]"));
}

TEST(LoadError, TiedLmHeadWithWrongShape) {
  Fixture f;
  f.cfg["tie_word_embeddings"] = true;
  std::mt19937 rng(4);
  f.get("lm_head.weight") = testing::random_tensor("lm_head.weight", DType::BF16, {80, 16}, rng);
  EXPECT_TRUE(f.fails(ErrorKind::InvalidModel, "'lm_head.weight' has shape [80, 16], expected [80, 32]"));
}

TEST(LoadError, MixedDtypes) {
  Fixture f;
  std::mt19937 rng(5);
  f.get("model.norm.weight") = testing::random_tensor("model.norm.weight", DType::F32, {32}, rng);
  EXPECT_TRUE(f.fails(ErrorKind::Unsupported, "mixed weight dtypes"));
}

TEST(LoadError, BadConfigStopsLoad) {
  Fixture f;
  f.cfg["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_TRUE(f.fails(ErrorKind::Unsupported, "GPT2LMHeadModel"));
}

TEST(LoadError, NoWeights) {
  Fixture f;
  f.write();
  fs::remove(f.dir.path() / "model.safetensors");
  EXPECT_TRUE(throws_error([&] { load(f.dir.path()); }, ErrorKind::NotFound, "no safetensors"));
}

}  // namespace
}  // namespace mpk::model
