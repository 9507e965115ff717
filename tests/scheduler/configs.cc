#include "configs.h"

#include "scheduler/events.h"

namespace mpk::sched::testing {

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

model::Config tiny_qwen3() {
  model::Config c;
  c.family = model::Family::Qwen3;
  c.architecture = "Qwen3ForCausalLM";
  c.vocab_size = 1031, c.hidden_size = 64, c.intermediate_size = 176, c.num_layers = 2;
  c.num_heads = 4, c.num_kv_heads = 1, c.head_dim = 24;
  c.tie_word_embeddings = true, c.qk_norm = true;
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

int64_t expected_weight_bytes(const model::Config& c, DType dt) {
  const int64_t h = c.hidden_size, i = c.intermediate_size, d = c.head_dim;
  const int64_t q = int64_t(c.num_heads) * d, kv = int64_t(c.num_kv_heads) * d;
  int64_t layer = 2 * h;                         // input and post-attention norms
  layer += (q + 2 * kv) * h + h * q + 3 * i * h;  // q, k, v, o, gate, up, down
  if (c.attention_bias) layer += q + 2 * kv;
  if (c.o_proj_bias) layer += h;
  if (c.qk_norm) layer += 2 * d;
  const int64_t elements = c.num_layers * layer + h /* final norm */ + h /* embedding row */ +
                           int64_t(c.vocab_size) * h /* LM head */;
  return elements * int64_t(dtype_size(dt));
}

TaskGraph build_tasks(const ir::Graph& g, const DecomposeOptions& d, const FuseOptions& f) {
  return build_events(fuse(g, decompose(g, d), f));
}

std::vector<std::vector<bool>> ancestors(const TaskGraph& tg) {
  const size_t n = tg.tasks.size();
  std::vector<std::vector<bool>> a(n, std::vector<bool>(n, false));
  for (const Task& t : tg.tasks)  // ids are topological
    for (int e : t.waits)
      for (int p : tg.events[size_t(e)].triggers) {
        a[size_t(t.id)][size_t(p)] = true;
        for (size_t k = 0; k < n; ++k)
          if (a[size_t(p)][k]) a[size_t(t.id)][k] = true;
      }
  return a;
}

}  // namespace mpk::sched::testing
