#include "test_model_writer.h"


#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mpk::model::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "mpk-model-test-XXXXXX").string();
  char* p = ::mkdtemp(tmpl.data());
  if (!p) throw std::runtime_error("mkdtemp failed");
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

const char* st_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    default: return "?";
  }
}

TensorData random_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                         std::mt19937& rng) {
  TensorData t{name, st_dtype(dtype), shape, {}, {}};
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_real_distribution<float> mag(0.25f, 2.0f);
  std::bernoulli_distribution neg(0.5);
  for (int64_t i = 0; i < n; ++i) {
    float x = neg(rng) ? -mag(rng) : mag(rng);
    uint8_t b[4];
    if (dtype == DType::F32) {
      std::memcpy(b, &x, 4);
      t.bytes.insert(t.bytes.end(), b, b + 4);
    } else {
      uint16_t h = dtype == DType::F16 ? f32_to_f16(x) : f32_to_bf16(x);
      std::memcpy(b, &h, 2);
      t.bytes.insert(t.bytes.end(), b, b + 2);
    }
    t.values.push_back(decode(dtype, reinterpret_cast<const std::byte*>(t.bytes.data()) +
                                         t.bytes.size() - dtype_size(dtype)));
  }
  return t;
}

float decode(DType dtype, const std::byte* p) {
  if (dtype == DType::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

std::string safetensors_raw(const Json& header, const std::string& data) {
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned
  std::string out(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  return out + h + data;
}

std::string safetensors_bytes(const std::vector<TensorData>& tensors) {
  Json header = Json::object();
  std::string data;
  for (const TensorData& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  }
  header["__metadata__"] = {{"format", "pt"}};
  return safetensors_raw(header, data);
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Json qwen3_config() {
  return Json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000, "max_position_embeddings": 512,
    "tie_word_embeddings": true, "attention_bias": false, "hidden_act": "silu",
    "torch_dtype": "bfloat16", "eos_token_id": 3, "use_sliding_window": false,
    "sliding_window": null, "rope_scaling": null})");
}

Json qwen2_config() {
  return Json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "vocab_size": 80, "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 256,
    "tie_word_embeddings": false, "hidden_act": "silu", "torch_dtype": "float32",
    "eos_token_id": [3, 4]})");
}

Json llama_config() {
  return Json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 72, "hidden_size": 32, "intermediate_size": 56, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 1,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 1024,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    "tie_word_embeddings": false, "attention_bias": false, "mlp_bias": false,
    "hidden_act": "silu", "torch_dtype": "bfloat16", "eos_token_id": [5, 6]})");
}

std::vector<TensorData> model_tensors(const Json& cfg, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::string arch = cfg["architectures"][0];
  const int64_t v = cfg["vocab_size"], h = cfg["hidden_size"], inter = cfg["intermediate_size"];
  const int64_t heads = cfg["num_attention_heads"];
  const int64_t kv_heads = cfg.value("num_key_value_heads", heads);
  const int64_t hd = cfg.contains("head_dim") ? cfg["head_dim"].get<int64_t>() : h / heads;
  const bool bias_flag = cfg.value("attention_bias", false);
  const bool qkv_bias = arch == "Qwen2ForCausalLM" || bias_flag;
  const bool o_bias = arch != "Qwen2ForCausalLM" && bias_flag;
  const bool qk_norm = arch == "Qwen3ForCausalLM";
  std::vector<TensorData> t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    t.push_back(random_tensor(name, dtype, std::move(shape), rng));
  };
  add("model.embed_tokens.weight", {v, h});
  for (int i = 0; i < cfg["num_hidden_layers"].get<int>(); ++i) {
    std::string l = "model.layers." + std::to_string(i) + ".";
    add(l + "input_layernorm.weight", {h});
    add(l + "self_attn.q_proj.weight", {heads * hd, h});
    add(l + "self_attn.k_proj.weight", {kv_heads * hd, h});
    add(l + "self_attn.v_proj.weight", {kv_heads * hd, h});
    if (qkv_bias) {
      add(l + "self_attn.q_proj.bias", {heads * hd});
      add(l + "self_attn.k_proj.bias", {kv_heads * hd});
      add(l + "self_attn.v_proj.bias", {kv_heads * hd});
    }
    if (qk_norm) {
      add(l + "self_attn.q_norm.weight", {hd});
      add(l + "self_attn.k_norm.weight", {hd});
    }
    add(l + "self_attn.o_proj.weight", {h, heads * hd});
    if (o_bias) add(l + "self_attn.o_proj.bias", {h});
    add(l + "post_attention_layernorm.weight", {h});
    add(l + "mlp.gate_proj.weight", {inter, h});
    add(l + "mlp.up_proj.weight", {inter, h});
    add(l + "mlp.down_proj.weight", {h, inter});
  }
  add("model.norm.weight", {h});
  if (!cfg.value("tie_word_embeddings", false)) add("lm_head.weight", {v, h});
  return t;
}

void write_model(const fs::path& dir, const Json& cfg, const std::vector<TensorData>& tensors,
                 int num_shards) {
  write_file(dir / "config.json", cfg.dump(2));
  if (num_shards <= 1) {
    write_file(dir / "model.safetensors", safetensors_bytes(tensors));
    return;
  }
  std::vector<std::vector<TensorData>> shards(num_shards);
  for (size_t i = 0; i < tensors.size(); ++i) shards[i % num_shards].push_back(tensors[i]);
  Json weight_map = Json::object();
  size_t total = 0;
  for (int s = 0; s < num_shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, num_shards);
    for (const TensorData& t : shards[s]) {
      weight_map[t.name] = name;
      total += t.bytes.size();
    }
    write_file(dir / name, safetensors_bytes(shards[s]));
  }
  Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file(dir / "model.safetensors.index.json", index.dump(2));
}

::testing::AssertionResult throws_error(const std::function<void()>& f, ErrorKind kind,
                                        const std::string& substr) {
  try {
    f();
  } catch (const Error& e) {
    std::string msg = e.what();
    if (e.kind() != kind)
      return ::testing::AssertionFailure() << "got kind " << error_kind_name(e.kind())
                                           << ", expected " << error_kind_name(kind)
                                           << "; message: " << msg;
    if (msg.find(substr) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << substr << "\"";
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-mpk exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw; expected " << error_kind_name(kind)
                                       << " containing \"" << substr << "\"";
}

}  // namespace mpk::model::testing
