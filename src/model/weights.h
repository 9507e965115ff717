// Safetensors weights of a model directory (one file or sharded).
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

// A tensor inside a loaded file. `data` stays valid while the owning Weights lives, until
// make_resident() moves it or release_data() drops it.
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

  // Reads every file into private memory (the tensors' data pointers move there): from then on
  // the weights no longer depend on the files, which may be truncated or rewritten without
  // effect. Error(Io) when a file has shrunk since open().
  void make_resident();
  // Drops the weight bytes: every tensor's data becomes nullptr (names, shapes and dtypes
  // stay). For a backend that copied the weights elsewhere (the GPU).
  void release_data();
  bool has_data() const { return has_data_; }

 private:
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, Tensor> tensors_;
  bool has_data_ = true;
};

// Error(InvalidModel) naming the first tensor and element that is NaN or infinite. Reads every
// byte of the weights (a load-time option: a few seconds for 16 GB).
void check_finite(const Weights& w);

// "[a, b, c]", for messages.
std::string shape_to_string(const std::vector<int64_t>& shape);

// The tensors a model of `cfg` must have: name -> shape (HF naming, e.g.
// "model.layers.0.self_attn.q_proj.weight"). lm_head.weight only when untied.
std::map<std::string, std::vector<int64_t>> expected_tensors(const Config& cfg);

}  // namespace mpk::model
