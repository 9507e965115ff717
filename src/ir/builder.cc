#include "ir/builder.h"

#include <cmath>
#include <string>

#include "base/error.h"

namespace mpk::ir {
namespace {

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}

  int tensor(std::string name, Shape shape, TensorRole role = TensorRole::Activation,
             DType dtype = DType::F32) {
    g_.tensors.push_back({std::move(name), dtype, std::move(shape), role});
    return int(g_.tensors.size()) - 1;
  }

  // Declares a model tensor once; a tied LM head refers to the embedding's entry.
  int weight(const std::string& name, Shape shape) {
    if (int i = g_.find_weight(name); i >= 0) return i;
    g_.weights.push_back({name, std::move(shape)});
    return int(g_.weights.size()) - 1;
  }

  int op(OpKind kind, std::vector<int> inputs, int output, int weight = -1, int bias = -1,
         Attrs attrs = {}) {
    g_.ops.push_back({kind, std::move(inputs), output, weight, bias, layer_, std::move(attrs)});
    return output;
  }

  // A [rows, cols] f32 activation written by `kind`.
  int act(OpKind kind, std::vector<int> inputs, const std::string& name, int64_t rows,
          int64_t cols, int weight = -1, int bias = -1, Attrs attrs = {}) {
    return op(kind, std::move(inputs), tensor(name, {rows, cols}), weight, bias, std::move(attrs));
  }

  void set_layer(int layer) { layer_ = layer; }

 private:
  Graph& g_;
  int layer_ = -1;
};

void check_config(const model::Config& c) {
  auto positive = [](int v) { return v > 0; };
  MPK_CHECK(positive(c.vocab_size) && positive(c.hidden_size) && positive(c.intermediate_size) &&
                positive(c.num_layers) && positive(c.num_heads) && positive(c.num_kv_heads) &&
                positive(c.head_dim),
            InvalidArgument)
      << "graph build: vocab, hidden, intermediate, layers, heads, kv heads and head_dim must "
         "be positive";
  MPK_CHECK(c.num_heads % c.num_kv_heads == 0, InvalidArgument)
      << "graph build: num_heads (" << c.num_heads << ") must be a multiple of num_kv_heads ("
      << c.num_kv_heads << ")";
  MPK_CHECK(c.head_dim % 2 == 0, InvalidArgument)
      << "graph build: RoPE needs an even head_dim, got " << c.head_dim;
  MPK_CHECK(c.rms_norm_eps > 0 && c.rope_theta > 0, InvalidArgument)
      << "graph build: rms_norm_eps and rope_theta must be positive";
}

}  // namespace

Graph build(const model::Config& config) { return build(config, config.torch_dtype); }

Graph build(const model::Config& c, DType weight_dtype) {
  check_config(c);
  MPK_CHECK(weight_dtype == DType::F32 || weight_dtype == DType::F16 ||
                weight_dtype == DType::BF16,
            InvalidArgument)
      << "graph build: weights must be f32, f16 or bf16, got " << dtype_name(weight_dtype);
  Graph g;
  g.config = c;
  g.weight_dtype = weight_dtype;
  g.kv_cache = {c.num_layers, c.num_kv_heads, c.head_dim};
  Builder b(g);
  const int64_t T = kTokens, H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t q_dim = int64_t(c.num_heads) * D, kv_dim = int64_t(c.num_kv_heads) * D;
  Attrs norm;
  norm.eps = c.rms_norm_eps;

  g.tokens = b.tensor("tokens", {T}, TensorRole::Input, DType::I32);
  g.positions = b.tensor("positions", {T}, TensorRole::Input, DType::I32);
  const std::string embed_name = "model.embed_tokens.weight";
  int embed = b.weight(embed_name, {c.vocab_size, H});
  int x = b.act(OpKind::Embedding, {g.tokens}, "embed", T, H, embed);

  for (int l = 0; l < c.num_layers; ++l) {
    b.set_layer(l);
    const std::string w = "model.layers." + std::to_string(l) + ".";
    const std::string t = "layers." + std::to_string(l) + ".";
    auto proj = [&](const std::string& name, int input, int64_t rows_out, int64_t cols_in,
                    bool bias, const std::string& out_name) {
      int wi = b.weight(w + name + ".weight", {rows_out, cols_in});
      int bi = bias ? b.weight(w + name + ".bias", {rows_out}) : -1;
      return b.act(OpKind::Linear, {input}, t + out_name, T, rows_out, wi, bi);
    };

    int h = b.act(OpKind::RmsNorm, {x}, t + "attn_norm", T, H,
                  b.weight(w + "input_layernorm.weight", {H}), -1, norm);
    int q = proj("self_attn.q_proj", h, q_dim, H, c.attention_bias, "q");
    int k = proj("self_attn.k_proj", h, kv_dim, H, c.attention_bias, "k");
    int v = proj("self_attn.v_proj", h, kv_dim, H, c.attention_bias, "v");
    if (c.qk_norm) {
      Attrs qa = norm, ka = norm;
      qa.num_heads = c.num_heads, qa.head_dim = c.head_dim;
      ka.num_heads = c.num_kv_heads, ka.head_dim = c.head_dim;
      q = b.act(OpKind::HeadRmsNorm, {q}, t + "q_norm", T, q_dim,
                b.weight(w + "self_attn.q_norm.weight", {D}), -1, qa);
      k = b.act(OpKind::HeadRmsNorm, {k}, t + "k_norm", T, kv_dim,
                b.weight(w + "self_attn.k_norm.weight", {D}), -1, ka);
    }
    Attrs rope;
    rope.head_dim = c.head_dim;
    rope.rope_theta = c.rope_theta;
    rope.rope_scaling = c.rope_scaling;
    Attrs qr = rope, kr = rope;
    qr.num_heads = c.num_heads;
    kr.num_heads = c.num_kv_heads;
    q = b.act(OpKind::Rope, {q, g.positions}, t + "q_rope", T, q_dim, -1, -1, qr);
    k = b.act(OpKind::Rope, {k, g.positions}, t + "k_rope", T, kv_dim, -1, -1, kr);
    Attrs att;
    att.num_heads = c.num_heads;
    att.num_kv_heads = c.num_kv_heads;
    att.head_dim = c.head_dim;
    att.scale = std::pow(double(c.head_dim), -0.5);
    int a = b.act(OpKind::Attention, {q, k, v, g.positions}, t + "attn", T, q_dim, -1, -1, att);
    int o = proj("self_attn.o_proj", a, H, q_dim, c.o_proj_bias, "attn_out");
    x = b.act(OpKind::Add, {x, o}, t + "attn_residual", T, H);

    h = b.act(OpKind::RmsNorm, {x}, t + "mlp_norm", T, H,
              b.weight(w + "post_attention_layernorm.weight", {H}), -1, norm);
    int gate = proj("mlp.gate_proj", h, I, H, false, "gate");
    int up = proj("mlp.up_proj", h, I, H, false, "up");
    int act = c.hidden_act == model::Activation::Silu ? b.act(OpKind::SiluMul, {gate, up}, t + "silu_mul", T, I)
                                                      : b.act(OpKind::GeluTanhMul, {gate, up}, t + "gelu_tanh_mul", T, I);
    int down = proj("mlp.down_proj", act, H, I, false, "mlp_out");
    x = b.act(OpKind::Add, {x, down}, t + "out", T, H);
  }

  b.set_layer(-1);
  int last = b.act(OpKind::LastRow, {x}, "last", 1, H);
  int f = b.act(OpKind::RmsNorm, {last}, "final_norm", 1, H, b.weight("model.norm.weight", {H}),
                -1, norm);
  int head = c.tie_word_embeddings ? embed : b.weight("lm_head.weight", {c.vocab_size, H});
  g.logits = b.tensor("logits", {1, c.vocab_size}, TensorRole::Output);
  b.op(OpKind::Linear, {f}, g.logits, head);
  g.next_token = b.tensor("next_token", {1}, TensorRole::Output, DType::I32);
  b.op(OpKind::Argmax, {g.logits}, g.next_token);
  validate(g);
  return g;
}

}  // namespace mpk::ir
