// Writes small Hugging Face style model directories (config.json + safetensors) for tests.
// Tensor names and shapes are spelled out here independently of expected_tensors().
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"

namespace mpk::model::testing {

using Json = nlohmann::json;

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// One tensor to write: `values` are the exact values after rounding to `dtype`.
struct TensorData {
  std::string name;
  std::string dtype;  // safetensors spelling: "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

// Random non-zero values (|x| in [0.25, 2]) encoded as `dtype`.
TensorData random_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                         std::mt19937& rng);
float decode(DType dtype, const std::byte* p);  // element at p
const char* st_dtype(DType dtype);              // "F32", "F16", "BF16"

// The bytes of a safetensors file: length prefix, header (padded to 8 bytes), then `data`.
std::string safetensors_raw(const Json& header, const std::string& data);
// A valid safetensors file holding `tensors`, back to back in order.
std::string safetensors_bytes(const std::vector<TensorData>& tensors);
void write_file(const std::filesystem::path& path, const std::string& bytes);
std::string read_file(const std::filesystem::path& path);

// A small config of each family (2 layers, 4 heads).
Json qwen3_config();  // tied, 2 kv heads, head_dim 16 != hidden/heads
Json qwen2_config();  // untied, derived head_dim, eos list
Json llama_config();  // untied, 1 kv head, legacy llama3 rope_scaling

// All tensors that a model with config `cfg` has in transformers, with random values.
std::vector<TensorData> model_tensors(const Json& cfg, DType dtype, uint32_t seed = 1);

// Writes config.json and the tensors: one model.safetensors, or `num_shards` shards plus
// model.safetensors.index.json.
void write_model(const std::filesystem::path& dir, const Json& cfg,
                 const std::vector<TensorData>& tensors, int num_shards = 1);

// Succeeds when `f` throws mpk::Error of `kind` whose message contains `substr`.
::testing::AssertionResult throws_error(const std::function<void()>& f, ErrorKind kind,
                                        const std::string& substr);

}  // namespace mpk::model::testing
