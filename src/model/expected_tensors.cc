#include "model/weights.h"

namespace mpk::model {

std::map<std::string, std::vector<int64_t>> expected_tensors(const Config& cfg) {
  const int64_t h = cfg.hidden_size, v = cfg.vocab_size, inter = cfg.intermediate_size;
  const int64_t hd = cfg.head_dim, q = int64_t(cfg.num_heads) * hd;
  const int64_t kv = int64_t(cfg.num_kv_heads) * hd;
  std::map<std::string, std::vector<int64_t>> t;
  t["model.embed_tokens.weight"] = {v, h};
  t["model.norm.weight"] = {h};
  if (!cfg.tie_word_embeddings) t["lm_head.weight"] = {v, h};
  for (int i = 0; i < cfg.num_layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    t[l + "input_layernorm.weight"] = {h};
    t[l + "post_attention_layernorm.weight"] = {h};
    t[l + "self_attn.q_proj.weight"] = {q, h};
    t[l + "self_attn.k_proj.weight"] = {kv, h};
    t[l + "self_attn.v_proj.weight"] = {kv, h};
    t[l + "self_attn.o_proj.weight"] = {h, q};
    if (cfg.attention_bias) {
      t[l + "self_attn.q_proj.bias"] = {q};
      t[l + "self_attn.k_proj.bias"] = {kv};
      t[l + "self_attn.v_proj.bias"] = {kv};
    }
    if (cfg.o_proj_bias) t[l + "self_attn.o_proj.bias"] = {h};
    if (cfg.qk_norm) {
      t[l + "self_attn.q_norm.weight"] = {hd};
      t[l + "self_attn.k_norm.weight"] = {hd};
    }
    t[l + "mlp.gate_proj.weight"] = {inter, h};
    t[l + "mlp.up_proj.weight"] = {inter, h};
    t[l + "mlp.down_proj.weight"] = {h, inter};
  }
  return t;
}

}  // namespace mpk::model
