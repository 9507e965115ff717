#include "model_configs.h"

namespace mpk::testing {

model::Config tiny_qwen3() {
  model::Config c;
  c.family = model::Family::Qwen3;
  c.architecture = "Qwen3ForCausalLM";
  c.vocab_size = 1031, c.hidden_size = 64, c.intermediate_size = 176, c.num_layers = 2;
  c.num_heads = 4, c.num_kv_heads = 1, c.head_dim = 24;
  c.rope_theta = 1e6, c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = true, c.qk_norm = true;
  c.torch_dtype = DType::BF16;
  return c;
}

model::Config tiny_qwen2() {
  model::Config c;
  c.family = model::Family::Qwen2;
  c.architecture = "Qwen2ForCausalLM";
  c.vocab_size = 769, c.hidden_size = 48, c.intermediate_size = 112, c.num_layers = 3;
  c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 12;
  c.attention_bias = true;
  c.torch_dtype = DType::F32;
  return c;
}

model::Config tiny_llama() {
  model::Config c;
  c.family = model::Family::Llama;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 907, c.hidden_size = 48, c.intermediate_size = 128, c.num_layers = 2;
  c.num_heads = 6, c.num_kv_heads = 2, c.head_dim = 12;
  c.rms_norm_eps = 1e-5, c.rope_theta = 5e5;
  c.attention_bias = true, c.o_proj_bias = true;
  c.rope_scaling = model::RopeScaling{"llama3", 8.0, 1.0, 4.0, 128};
  return c;
}

std::vector<model::Config> tiny_configs() { return {tiny_qwen3(), tiny_qwen2(), tiny_llama()}; }

model::Config qwen3_0_6b() {
  model::Config c;
  c.family = model::Family::Qwen3;
  c.architecture = "Qwen3ForCausalLM";
  c.vocab_size = 151936, c.hidden_size = 1024, c.intermediate_size = 3072, c.num_layers = 28;
  c.num_heads = 16, c.num_kv_heads = 8, c.head_dim = 128;
  c.rope_theta = 1e6, c.tie_word_embeddings = true, c.qk_norm = true;
  return c;
}

model::Config qwen3_8b() {
  model::Config c = qwen3_0_6b();
  c.hidden_size = 4096, c.intermediate_size = 12288, c.num_layers = 36;
  c.num_heads = 32, c.num_kv_heads = 8, c.tie_word_embeddings = false;
  return c;
}

}  // namespace mpk::testing
