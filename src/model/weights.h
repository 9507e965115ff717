// Memory-mapped safetensors weights of a model directory (one file or sharded).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "model/config.h"

namespace mpk::model {

// A tensor inside a mapped file. `data` stays valid while the owning Weights lives.
struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
};

class MappedFile;  // RAII mmap of one file (weights.cc)

class Weights {
 public:
  Weights();
  ~Weights();
  Weights(Weights&&) noexcept;
  Weights& operator=(Weights&&) noexcept;

  // Opens every safetensors file of `dir` (model.safetensors, or the shards listed by
  // model.safetensors.index.json) and validates each header: JSON well-formed, header length
  // inside the file, offsets inside the data section and not overlapping, byte sizes matching
  // dtype x shape, each tensor where the index says. Throws Error(NotFound / InvalidModel /
  // Unsupported / Io).
  static Weights open(const std::filesystem::path& dir);

  const Tensor* find(const std::string& name) const;  // nullptr if absent
  const Tensor& at(const std::string& name) const;    // Error(InvalidModel) if absent
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, Tensor> tensors_;
};

// "[a, b, c]", for messages.
std::string shape_to_string(const std::vector<int64_t>& shape);

// The tensors a model of `cfg` must have: name -> shape (HF naming, e.g.
// "model.layers.0.self_attn.q_proj.weight"). lm_head.weight only when untied.
std::map<std::string, std::vector<int64_t>> expected_tensors(const Config& cfg);

}  // namespace mpk::model
