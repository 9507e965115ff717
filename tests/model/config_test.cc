#include "model/config.h"

#include <gtest/gtest.h>

#include "test_model_writer.h"

namespace mpk::model {
namespace {

using testing::Json;
using testing::throws_error;

Config parse(const Json& j) { return parse_config(j.dump(), "cfg.json"); }

::testing::AssertionResult parse_fails(const Json& j, ErrorKind kind, const std::string& substr) {
  return throws_error([&] { parse(j); }, kind, substr);
}

TEST(Config, Qwen3) {
  Config c = parse(testing::qwen3_config());
  EXPECT_EQ(c.family, Family::Qwen3);
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.vocab_size, 64);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.intermediate_size, 48);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);  // explicit, not hidden / heads = 8
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{3});
  EXPECT_EQ(c.torch_dtype, DType::BF16);
  EXPECT_STREQ(family_name(c.family), "qwen3");
}

TEST(Config, Qwen3AttentionBiasCoversQkvAndO) {
  Json j = testing::qwen3_config();
  j["attention_bias"] = true;
  Config c = parse(j);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.o_proj_bias);
}

TEST(Config, Qwen2AlwaysHasQkvBiasNeverOBias) {
  Json j = testing::qwen2_config();
  Config c = parse(j);
  EXPECT_EQ(c.family, Family::Qwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 8);  // hidden / heads
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, DType::F32);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{3, 4}));
  j["attention_bias"] = false;
  EXPECT_TRUE(parse(j).attention_bias);
}

TEST(Config, LlamaWithLegacyLlama3RopeScaling) {
  Config c = parse(testing::llama_config());
  EXPECT_EQ(c.family, Family::Llama);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
}

TEST(Config, LlamaRopeScalingOldTypeKey) {
  Json j = testing::llama_config();
  j["rope_scaling"].erase("rope_type");
  j["rope_scaling"]["type"] = "llama3";
  j["rope_scaling"]["factor"] = 32.0;
  Config c = parse(j);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 32.0);
}

TEST(Config, RopeParametersLayout) {
  Json j = testing::llama_config();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "llama3"},         {"rope_theta", 250000.0},
                          {"factor", 16.0},                {"low_freq_factor", 2.0},
                          {"high_freq_factor", 8.0},       {"original_max_position_embeddings", 4096}};
  Config c = parse(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 250000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 16.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->low_freq_factor, 2.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->high_freq_factor, 8.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 4096);

  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1234.0}};
  c = parse(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1234.0);
  EXPECT_FALSE(c.rope_scaling.has_value());
  j["rope_parameters"] = {{"rope_theta", 1234.0}};  // no type and nothing to scale: none
  EXPECT_FALSE(parse(j).rope_scaling.has_value());
}

// A scaling factor with no type saying how to apply it is an error, not "no scaling".
TEST(Config, RopeScalingFactorWithoutATypeIsRefused) {
  Json j = testing::llama_config();
  j["rope_scaling"].erase("rope_type");
  EXPECT_TRUE(testing::throws_error([&] { parse(j); }, ErrorKind::InvalidModel,
                                    "'rope_scaling.factor' is set but no 'rope_scaling.rope_type'"));
}

TEST(Config, DefaultRopeAndDefaultsWhenKeysAbsent) {
  Json j = testing::qwen3_config();
  for (const char* k : {"rope_theta", "rope_scaling", "tie_word_embeddings", "num_key_value_heads",
                        "rms_norm_eps", "max_position_embeddings", "attention_bias"})
    j.erase(k);
  j["rope_scaling"] = {{"rope_type", "default"}};
  Config c = parse(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_FALSE(c.attention_bias);
}

TEST(Config, DtypeKeys) {
  Json j = testing::qwen3_config();
  j.erase("torch_dtype");
  j["dtype"] = "float16";
  EXPECT_EQ(parse(j).torch_dtype, DType::F16);
  j["dtype"] = "float32";
  EXPECT_EQ(parse(j).torch_dtype, DType::F32);
  j.erase("dtype");
  j["torch_dtype"] = "bfloat16";
  EXPECT_EQ(parse(j).torch_dtype, DType::BF16);
}

TEST(Config, ArchitectureFromModelTypeWhenArchitecturesAbsent) {
  Json j = testing::qwen2_config();
  j.erase("architectures");
  Config c = parse(j);
  EXPECT_EQ(c.family, Family::Qwen2);
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
}

TEST(ConfigError, UnknownArchitecture) {
  Json j = testing::qwen3_config();
  j["architectures"] = {"MistralForCausalLM"};
  EXPECT_TRUE(parse_fails(j, ErrorKind::Unsupported, "MistralForCausalLM"));
  j.erase("architectures");
  j["model_type"] = "gemma3";
  EXPECT_TRUE(parse_fails(j, ErrorKind::Unsupported, "gemma3"));
  j.erase("model_type");
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "architectures"));
}

TEST(ConfigError, LlamaMlpBias) {
  Json j = testing::llama_config();
  j["mlp_bias"] = true;
  EXPECT_TRUE(parse_fails(j, ErrorKind::Unsupported, "mlp_bias"));
}

TEST(ConfigError, LlamaAttentionBias) {
  Json j = testing::llama_config();
  j["attention_bias"] = true;
  Config c = parse(j);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.o_proj_bias);
}

TEST(ConfigError, HeadDimMustDivide) {
  Json j = testing::qwen2_config();
  j["num_attention_heads"] = 5;
  j["num_key_value_heads"] = 5;
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "does not divide hidden_size"));
}

TEST(ConfigError, KvHeadsMustDivideHeads) {
  Json j = testing::qwen3_config();
  j["num_key_value_heads"] = 3;
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "num_key_value_heads (3)"));
}

TEST(ConfigError, UnsupportedRopeTypes) {
  for (const char* type : {"linear", "dynamic", "yarn", "longrope"}) {
    Json j = testing::llama_config();
    j["rope_scaling"] = {{"rope_type", type}, {"factor", 2.0}};
    EXPECT_TRUE(parse_fails(j, ErrorKind::Unsupported, type));
    j.erase("rope_scaling");
    j["rope_parameters"] = {{"rope_type", type}, {"rope_theta", 1e4}, {"factor", 2.0}};
    EXPECT_TRUE(parse_fails(j, ErrorKind::Unsupported, type));
  }
}

TEST(ConfigError, Llama3RopeMissingOrBadKeys) {
  Json j = testing::llama_config();
  j["rope_scaling"].erase("factor");
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "rope_scaling.factor"));
  j = testing::llama_config();
  j["rope_scaling"]["high_freq_factor"] = 1.0;
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "high_freq_factor"));
  j = testing::llama_config();
  j["rope_scaling"] = "llama3";
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "rope_scaling must be a JSON object"));
}

TEST(ConfigError, BadDtype) {
  Json j = testing::qwen3_config();
  j["torch_dtype"] = "float64";
  EXPECT_TRUE(parse_fails(j, ErrorKind::Unsupported, "float64"));
  j["torch_dtype"] = 16;
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "'torch_dtype' must be a string"));
}

TEST(ConfigError, SizesMustBePositiveIntegers) {
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "num_key_value_heads", "head_dim",
                          "max_position_embeddings"}) {
    for (Json bad : {Json(0), Json(-4), Json(3.5), Json("32"), Json(true), Json(1ull << 40)}) {
      Json j = testing::qwen3_config();
      j[key] = bad;
      EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, key)) << key << " = " << bad.dump();
    }
  }
  for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers"}) {
    Json j = testing::qwen3_config();
    j.erase(key);
    EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, std::string("missing required key '") + key));
  }
}

TEST(ConfigError, RmsNormEpsMustBePositive) {
  Json j = testing::qwen3_config();
  j["rms_norm_eps"] = 0.0;
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "rms_norm_eps"));
  j["rms_norm_eps"] = -1e-6;
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "rms_norm_eps"));
  j["rms_norm_eps"] = "1e-6";
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "'rms_norm_eps' must be a number"));
}

TEST(ConfigError, WrongJsonTypesNameTheKey) {
  Json j = testing::qwen3_config();
  j["tie_word_embeddings"] = "yes";
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "'tie_word_embeddings'"));
  j = testing::qwen3_config();
  j["eos_token_id"] = "</s>";
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "'eos_token_id'"));
  j = testing::qwen3_config();
  j["architectures"] = "Qwen3ForCausalLM";
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "'architectures'"));
  j = testing::qwen3_config();
  j["rope_theta"] = Json::array();
  EXPECT_TRUE(parse_fails(j, ErrorKind::InvalidModel, "'rope_theta'"));
}

TEST(ConfigError, OtherUnsupportedOptions) {
  Json j = testing::qwen3_config();
  j["hidden_act"] = "gelu";  // the exact (erf) GELU: not built
  EXPECT_TRUE(parse_fails(j, ErrorKind::Unsupported, "gelu"));
  for (const char* tanh_gelu : {"gelu_pytorch_tanh", "gelu_new"}) {
    j["hidden_act"] = tanh_gelu;
    EXPECT_EQ(parse_config(j.dump()).hidden_act, Activation::GeluTanh) << tanh_gelu;
  }
  j.erase("hidden_act");
  EXPECT_EQ(parse_config(j.dump()).hidden_act, Activation::Silu);
  j = testing::qwen3_config();
  j["use_sliding_window"] = true;
  EXPECT_TRUE(parse_fails(j, ErrorKind::Unsupported, "sliding-window"));
}

TEST(ConfigError, BadJsonText) {
  EXPECT_TRUE(throws_error([] { parse_config("{\"vocab_size\": 3,", "x/config.json"); },
                           ErrorKind::InvalidModel, "x/config.json: not valid JSON"));
  EXPECT_TRUE(throws_error([] { parse_config("", "config.json"); }, ErrorKind::InvalidModel,
                           "parse error"));
  EXPECT_TRUE(throws_error([] { parse_config("[1, 2]", "config.json"); },
                           ErrorKind::InvalidModel, "must be a JSON object"));
}

TEST(LoadConfig, MissingConfigIsNotFound) {
  testing::TempDir dir;
  EXPECT_TRUE(throws_error([&] { load_config(dir.path()); }, ErrorKind::NotFound, "config.json"));
}

TEST(LoadConfig, GenerationConfigEosUnion) {
  testing::TempDir dir;
  Json j = testing::llama_config();  // eos [5, 6]
  testing::write_file(dir.path() / "config.json", j.dump());
  EXPECT_EQ(load_config(dir.path()).eos_token_ids, (std::vector<int>{5, 6}));
  testing::write_file(dir.path() / "generation_config.json",
                      R"({"bos_token_id": 1, "eos_token_id": [6, 9, 5, 2]})");
  EXPECT_EQ(load_config(dir.path()).eos_token_ids, (std::vector<int>{5, 6, 9, 2}));
  testing::write_file(dir.path() / "generation_config.json", R"({"eos_token_id": 7})");
  EXPECT_EQ(load_config(dir.path()).eos_token_ids, (std::vector<int>{5, 6, 7}));
  testing::write_file(dir.path() / "generation_config.json", R"({"eos_token_id": 7)");
  EXPECT_TRUE(throws_error([&] { load_config(dir.path()); }, ErrorKind::InvalidModel,
                           "generation_config.json"));
}

TEST(ConfigRobustness, FlippedBytesGiveErrorsOnly) {
  std::string text = testing::llama_config().dump();
  std::mt19937 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string t = text;
    int flips = 1 + int(rng() % 3);
    for (int f = 0; f < flips; ++f) t[rng() % t.size()] ^= char(1 + rng() % 255);
    try {
      parse_config(t);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      FAIL() << "non-mpk exception: " << e.what() << " for " << t;
    }
  }
}

}  // namespace
}  // namespace mpk::model
