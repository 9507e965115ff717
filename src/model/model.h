// A loaded model: config + validated weights.
#pragma once

#include <filesystem>
#include <memory>

#include "model/config.h"
#include "model/weights.h"

namespace mpk::model {

struct Model {
  std::filesystem::path dir;
  Config config;
  Weights weights;
  DType dtype = DType::BF16;    // the weights' dtype (all floating tensors share it)
  uint64_t num_parameters = 0;  // unique parameters
};

// Loads and validates `dir`: config, weights, and that the tensor set is exactly
// expected_tensors(config) with matching shapes and one floating dtype. Unexpected tensors
// are an error, except rotary inv_freq buffers, which are ignored. Throws Error.
std::unique_ptr<Model> load(const std::filesystem::path& dir);

}  // namespace mpk::model
