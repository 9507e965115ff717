// A decoder model's hyper-parameters, parsed from a Hugging Face config.json.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace mpk::model {

enum class Family { Qwen3, Qwen2, Llama };
const char* family_name(Family f);

// hidden_act: the MLP's gate activation. GeluTanh is transformers' "gelu_pytorch_tanh" (and
// "gelu_new", the same formula).
enum class Activation { Silu, GeluTanh };

// rope_scaling of type "llama3" (Llama 3.1+): frequency-dependent scaling of inv_freq.
struct RopeScaling {
  std::string type;  // only "llama3" is supported
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

struct Config {
  Family family = Family::Qwen3;
  std::string architecture;  // architectures[0], e.g. "Qwen3ForCausalLM"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // num_key_value_heads; defaults to num_heads
  int head_dim = 0;      // explicit head_dim or hidden_size / num_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  int max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2: always)
  bool o_proj_bias = false;     // o_proj carries a bias (Llama/Qwen3 with attention_bias; not Qwen2)
  bool qk_norm = false;         // per-head RMSNorm on q and k before RoPE (Qwen3)
  Activation hidden_act = Activation::Silu;
  std::vector<int> eos_token_ids;  // from config.json and generation_config.json if present
  DType torch_dtype = DType::BF16;  // "dtype" or "torch_dtype"; BF16 when absent (a hint:
                                    // Model::dtype comes from the tensors)
};

// Parses and validates config.json text. Throws Error(InvalidModel) for bad JSON, missing or
// inconsistent fields, Error(Unsupported) for an unknown architecture or rope_scaling type.
Config parse_config(const std::string& json_text, const std::string& origin = "config.json");
// Reads <dir>/config.json (+ generation_config.json for EOS ids when present).
// Error(NotFound) when config.json is missing.
Config load_config(const std::filesystem::path& dir);

}  // namespace mpk::model
