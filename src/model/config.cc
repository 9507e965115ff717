#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "model/json_util.h"

namespace mpk::model {
namespace {

using detail::Json;
using detail::ObjectReader;

// Supported architectures with the defaults of their transformers config classes.
struct ArchInfo {
  const char* architecture;
  const char* model_type;
  Family family;
  int default_max_position_embeddings;
};
constexpr ArchInfo kArchs[] = {
    {"Qwen3ForCausalLM", "qwen3", Family::Qwen3, 32768},
    {"Qwen2ForCausalLM", "qwen2", Family::Qwen2, 32768},
    {"LlamaForCausalLM", "llama", Family::Llama, 2048},
};
constexpr double kDefaultRopeTheta = 10000.0;
constexpr double kDefaultRmsNormEps = 1e-6;

std::string supported_architectures() {
  std::string s;
  for (const ArchInfo& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.architecture);
  return s;
}

const ArchInfo& find_arch(const ObjectReader& r) {
  if (const Json* archs = r.get("architectures")) {
    MPK_CHECK(archs->is_array() && !archs->empty() && (*archs)[0].is_string(), InvalidModel)
        << r.origin() << ": 'architectures' must be a non-empty list of strings, got "
        << detail::describe(*archs);
    std::string name = (*archs)[0].get<std::string>();
    for (const ArchInfo& a : kArchs)
      if (name == a.architecture) return a;
    MPK_THROW(Unsupported) << r.origin() << ": architecture '" << name
                           << "' is not supported (supported: " << supported_architectures() << ")";
  }
  // Configs written without "architectures" still name their model_type.
  auto type = r.opt_string("model_type");
  MPK_CHECK(type.has_value(), InvalidModel)
      << r.origin() << ": neither 'architectures' nor 'model_type' is present";
  for (const ArchInfo& a : kArchs)
    if (*type == a.model_type) return a;
  MPK_THROW(Unsupported) << r.origin() << ": model_type '" << *type
                         << "' is not supported (supported: " << supported_architectures() << ")";
}

DType parse_dtype(const ObjectReader& r) {
  const char* key = r.has("dtype") ? "dtype" : "torch_dtype";
  auto name = r.opt_string(key);
  if (!name) return DType::BF16;
  std::string s = *name;
  if (s.rfind("torch.", 0) == 0) s = s.substr(6);
  if (s == "float32") return DType::F32;
  if (s == "float16") return DType::F16;
  if (s == "bfloat16") return DType::BF16;
  MPK_THROW(Unsupported) << r.origin() << ": '" << key << "' = \"" << *name
                         << "\" is not supported (expected float32, float16 or bfloat16)";
}

double positive_number(const ObjectReader& r, const char* key) {
  auto v = r.opt_number(key);
  MPK_CHECK(v.has_value(), InvalidModel)
      << r.origin() << ": missing required key '" << r.key_name(key) << "'";
  MPK_CHECK(std::isfinite(*v) && *v > 0, InvalidModel)
      << r.origin() << ": '" << r.key_name(key) << "' must be a positive number, got " << *v;
  return *v;
}

// Reads a rope scaling object (legacy rope_scaling or transformers 5 rope_parameters).
std::optional<RopeScaling> parse_rope_scaling(const ObjectReader& s) {
  auto type = s.opt_string("rope_type");
  if (!type) type = s.opt_string("type");
  // A scaling factor without a type would be dropped silently: the model would run unscaled.
  MPK_CHECK(type || !s.get("factor"), InvalidModel)
      << s.origin() << ": '" << s.key_name("factor") << "' is set but no '" << s.key_name("rope_type")
      << "' says how to scale";
  if (!type || *type == "default") return std::nullopt;
  MPK_CHECK(*type == "llama3", Unsupported)
      << s.origin() << ": rope type '" << *type << "' (" << s.key_name("rope_type")
      << ") is not supported (supported: default, llama3)";
  RopeScaling rs;
  rs.type = *type;
  rs.factor = positive_number(s, "factor");
  rs.low_freq_factor = positive_number(s, "low_freq_factor");
  rs.high_freq_factor = positive_number(s, "high_freq_factor");
  rs.original_max_position_embeddings = s.positive_int("original_max_position_embeddings");
  // The llama3 formula interpolates between the two wavelengths and divides by their gap.
  MPK_CHECK(rs.high_freq_factor > rs.low_freq_factor, InvalidModel)
      << s.origin() << ": '" << s.key_name("high_freq_factor") << "' (" << rs.high_freq_factor
      << ") must be greater than '" << s.key_name("low_freq_factor") << "' ("
      << rs.low_freq_factor << ")";
  return rs;
}

void check_full_rotary(const ObjectReader& r) {
  auto f = r.opt_number("partial_rotary_factor");
  MPK_CHECK(!f || *f == 1.0, Unsupported)
      << r.origin() << ": '" << r.key_name("partial_rotary_factor") << "' = " << *f
      << " is not supported (only full rotary embeddings)";
}

void parse_rope(const ObjectReader& r, Config& c) {
  check_full_rotary(r);
  std::optional<double> theta = r.opt_number("rope_theta");
  if (const Json* params = r.get("rope_parameters")) {
    ObjectReader p(*params, r.origin(), "rope_parameters.");
    check_full_rotary(p);
    if (auto t = p.opt_number("rope_theta")) theta = t;
    c.rope_scaling = parse_rope_scaling(p);
  } else if (const Json* scaling = r.get("rope_scaling")) {
    c.rope_scaling = parse_rope_scaling(ObjectReader(*scaling, r.origin(), "rope_scaling."));
  }
  c.rope_theta = theta.value_or(kDefaultRopeTheta);
  MPK_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 0, InvalidModel)
      << r.origin() << ": 'rope_theta' must be a positive number, got " << c.rope_theta;
}

// eos_token_id may be one id or a list; ids are appended once each, in order.
void append_eos(const ObjectReader& r, std::vector<int>& ids) {
  const Json* v = r.get("eos_token_id");
  if (!v) return;
  // Real configs list one to a few ids; the bound keeps the duplicate check below linear.
  constexpr size_t kMaxEosIds = 256;
  MPK_CHECK(!v->is_array() || v->size() <= kMaxEosIds, InvalidModel)
      << r.origin() << ": 'eos_token_id' lists " << v->size() << " ids, more than " << kMaxEosIds;
  auto add = [&](const Json& x) {
    int64_t id = detail::as_int64(x, r.origin(), "'eos_token_id'");
    MPK_CHECK(id >= 0 && id <= std::numeric_limits<int>::max(), InvalidModel)
        << r.origin() << ": 'eos_token_id' must be a non-negative token id, got " << id;
    if (std::find(ids.begin(), ids.end(), int(id)) == ids.end()) ids.push_back(int(id));
  };
  if (v->is_array()) {
    for (const Json& x : *v) add(x);
  } else {
    add(*v);
  }
}

void check_unsupported_options(const ObjectReader& r, Family family) {
  auto act = r.opt_string("hidden_act");
  MPK_CHECK(!act || *act == "silu" || *act == "gelu_pytorch_tanh" || *act == "gelu_new", Unsupported)
      << r.origin() << ": hidden_act '" << *act
      << "' is not supported (silu, gelu_pytorch_tanh and gelu_new are)";
  MPK_CHECK(!r.opt_bool("use_sliding_window").value_or(false), Unsupported)
      << r.origin() << ": sliding-window attention (use_sliding_window: true) is not supported";
  if (family == Family::Llama) {
    MPK_CHECK(!r.opt_bool("mlp_bias").value_or(false), Unsupported)
        << r.origin() << ": mlp_bias: true is not supported";
  }
}

}  // namespace

const char* family_name(Family f) {
  switch (f) {
    case Family::Qwen3: return "qwen3";
    case Family::Qwen2: return "qwen2";
    case Family::Llama: return "llama";
  }
  return "?";
}

Config parse_config(const std::string& json_text, const std::string& origin) {
  Json j = detail::parse_json(json_text, origin);
  ObjectReader r(j, origin);
  const ArchInfo& arch = find_arch(r);
  check_unsupported_options(r, arch.family);

  Config c;
  c.family = arch.family;
  c.architecture = r.has("architectures") ? (*r.get("architectures"))[0].get<std::string>()
                                          : std::string(arch.architecture);
  c.vocab_size = r.positive_int("vocab_size");
  c.hidden_size = r.positive_int("hidden_size");
  c.intermediate_size = r.positive_int("intermediate_size");
  c.num_layers = r.positive_int("num_hidden_layers");
  c.num_heads = r.positive_int("num_attention_heads");
  c.num_kv_heads = r.opt_positive_int("num_key_value_heads").value_or(c.num_heads);
  MPK_CHECK(c.num_heads % c.num_kv_heads == 0, InvalidModel)
      << origin << ": num_key_value_heads (" << c.num_kv_heads
      << ") must divide num_attention_heads (" << c.num_heads << ")";
  if (auto hd = r.opt_positive_int("head_dim")) {
    c.head_dim = *hd;
  } else {
    MPK_CHECK(c.hidden_size % c.num_heads == 0, InvalidModel)
        << origin << ": no 'head_dim', and num_attention_heads (" << c.num_heads
        << ") does not divide hidden_size (" << c.hidden_size << ")";
    c.head_dim = c.hidden_size / c.num_heads;
  }
  c.max_position_embeddings =
      r.opt_positive_int("max_position_embeddings").value_or(arch.default_max_position_embeddings);

  c.rms_norm_eps = r.opt_number("rms_norm_eps").value_or(kDefaultRmsNormEps);
  MPK_CHECK(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0, InvalidModel)
      << origin << ": 'rms_norm_eps' must be a positive number, got " << c.rms_norm_eps;
  parse_rope(r, c);

  c.tie_word_embeddings = r.opt_bool("tie_word_embeddings").value_or(false);
  c.hidden_act = r.opt_string("hidden_act").value_or("silu") == "silu" ? Activation::Silu : Activation::GeluTanh;
  bool attention_bias = r.opt_bool("attention_bias").value_or(false);
  switch (c.family) {
    case Family::Qwen3:
      c.qk_norm = true;
      c.attention_bias = c.o_proj_bias = attention_bias;
      break;
    case Family::Qwen2:  // q/k/v always carry a bias, o_proj never does
      c.attention_bias = true;
      c.o_proj_bias = false;
      break;
    case Family::Llama:
      c.attention_bias = c.o_proj_bias = attention_bias;
      break;
  }
  c.torch_dtype = parse_dtype(r);
  append_eos(r, c.eos_token_ids);
  return c;
}

Config load_config(const std::filesystem::path& dir) {
  std::filesystem::path path = dir / "config.json";
  // symlink_status: a dangling or looping link is opened, and the open says what is wrong.
  std::error_code ec;
  MPK_CHECK(std::filesystem::exists(std::filesystem::symlink_status(path, ec)), NotFound)
      << "config.json not found in model directory '" << dir.string() << "'";
  Config c = parse_config(detail::read_text_file(path, detail::kMaxJsonFileBytes), path.string());
  std::filesystem::path gen = dir / "generation_config.json";
  if (std::filesystem::exists(std::filesystem::symlink_status(gen, ec))) {
    Json g = detail::read_json_file(gen);
    append_eos(ObjectReader(g, gen.string()), c.eos_token_ids);
  }
  return c;
}

}  // namespace mpk::model
