// Text and JSON dumps of a graph (mpk-run --dump-graph, MPK_DUMP).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace mpk::ir {
namespace {

using Json = nlohmann::json;

// The attributes an op kind reads (the others are unset).
Json attrs_json(const Op& op) {
  const Attrs& a = op.attrs;
  switch (op.kind) {
    case OpKind::RmsNorm: return {{"eps", a.eps}};
    case OpKind::HeadRmsNorm:
      return {{"eps", a.eps}, {"num_heads", a.num_heads}, {"head_dim", a.head_dim}};
    case OpKind::Rope: {
      Json j = {{"num_heads", a.num_heads}, {"head_dim", a.head_dim}, {"rope_theta", a.rope_theta}};
      if (a.rope_scaling) {
        const model::RopeScaling& s = *a.rope_scaling;
        j["rope_scaling"] = {{"type", s.type},
                             {"factor", s.factor},
                             {"low_freq_factor", s.low_freq_factor},
                             {"high_freq_factor", s.high_freq_factor},
                             {"original_max_position_embeddings",
                              s.original_max_position_embeddings}};
      }
      return j;
    }
    case OpKind::Attention:
      return {{"num_heads", a.num_heads},
              {"num_kv_heads", a.num_kv_heads},
              {"head_dim", a.head_dim},
              {"scale", a.scale}};
    default: return Json::object();
  }
}

std::string tensor_type(const TensorDesc& t) {
  return std::string(dtype_name(t.dtype)) + shape_str(t.shape);
}

Json shape_json(const Shape& s) {
  Json j = Json::array();
  for (int64_t d : s) j.push_back(d == kTokens ? Json("T") : Json(d));
  return j;
}

}  // namespace

std::string to_text(const Graph& g) {
  const model::Config& c = g.config;
  std::string s = fmt::format(
      "graph {} ({}): vocab={} hidden={} intermediate={} layers={} heads={} kv_heads={} "
      "head_dim={} weights={}\n",
      model::family_name(c.family), c.architecture, c.vocab_size, c.hidden_size,
      c.intermediate_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim,
      dtype_name(g.weight_dtype));
  s += fmt::format("kv_cache: f32[{} layers][{} kv_heads][capacity][{}]\n", g.kv_cache.num_layers,
                   g.kv_cache.num_kv_heads, g.kv_cache.head_dim);
  for (size_t i = 0; i < g.tensors.size(); ++i)
    if (g.tensors[i].role == TensorRole::Input)
      s += fmt::format("input %{} {}: {}\n", i, g.tensors[i].name, tensor_type(g.tensors[i]));
  for (const Op& op : g.ops) {
    const TensorDesc& out = g.tensor(op.output);
    s += fmt::format("%{} {}: {} = {}(", op.output, out.name, tensor_type(out), op_name(op.kind));
    for (size_t i = 0; i < op.inputs.size(); ++i)
      s += fmt::format("{}%{}", i ? ", " : "", op.inputs[i]);
    s += ")";
    if (op.weight >= 0)
      s += fmt::format(" w={}{}", g.weight(op.weight).name, shape_str(g.weight(op.weight).shape));
    if (op.bias >= 0)
      s += fmt::format(" b={}{}", g.weight(op.bias).name, shape_str(g.weight(op.bias).shape));
    const Json attrs = attrs_json(op);
    for (const auto& [k, v] : attrs.items())
      s += fmt::format(" {}={}", k, v.is_string() ? v.get<std::string>() : v.dump());
    s += "\n";
  }
  s += fmt::format("outputs: %{} {}, %{} {}\n", g.logits, g.tensor(g.logits).name, g.next_token,
                   g.tensor(g.next_token).name);
  return s;
}

std::string to_json(const Graph& g) {
  const model::Config& c = g.config;
  Json j;
  j["family"] = model::family_name(c.family);
  j["architecture"] = c.architecture;
  j["config"] = {{"vocab_size", c.vocab_size},
                 {"hidden_size", c.hidden_size},
                 {"intermediate_size", c.intermediate_size},
                 {"num_layers", c.num_layers},
                 {"num_heads", c.num_heads},
                 {"num_kv_heads", c.num_kv_heads},
                 {"head_dim", c.head_dim},
                 {"rms_norm_eps", c.rms_norm_eps},
                 {"rope_theta", c.rope_theta},
                 {"tie_word_embeddings", c.tie_word_embeddings},
                 {"attention_bias", c.attention_bias},
                 {"o_proj_bias", c.o_proj_bias},
                 {"qk_norm", c.qk_norm}};
  j["weight_dtype"] = dtype_name(g.weight_dtype);
  j["kv_cache"] = {{"dtype", "f32"},
                   {"num_layers", g.kv_cache.num_layers},
                   {"num_kv_heads", g.kv_cache.num_kv_heads},
                   {"head_dim", g.kv_cache.head_dim}};
  Json tensors = Json::array();
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const TensorDesc& t = g.tensors[i];
    tensors.push_back({{"id", i},
                       {"name", t.name},
                       {"dtype", dtype_name(t.dtype)},
                       {"shape", shape_json(t.shape)},
                       {"role", tensor_role_name(t.role)}});
  }
  j["tensors"] = std::move(tensors);
  Json weights = Json::array();
  for (const WeightRef& w : g.weights)
    weights.push_back({{"name", w.name}, {"shape", shape_json(w.shape)}});
  j["weights"] = std::move(weights);
  Json ops = Json::array();
  for (const Op& op : g.ops) {
    Json o = {{"kind", op_name(op.kind)}, {"inputs", op.inputs}, {"output", op.output}};
    if (op.weight >= 0) o["weight"] = g.weight(op.weight).name;
    if (op.bias >= 0) o["bias"] = g.weight(op.bias).name;
    if (op.layer >= 0) o["layer"] = op.layer;
    Json attrs = attrs_json(op);
    if (!attrs.empty()) o["attrs"] = std::move(attrs);
    ops.push_back(std::move(o));
  }
  j["ops"] = std::move(ops);
  j["inputs"] = {{"tokens", g.tokens}, {"positions", g.positions}};
  j["outputs"] = {{"logits", g.logits}, {"next_token", g.next_token}};
  return j.dump(1);
}

}  // namespace mpk::ir
