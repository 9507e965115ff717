// RoPE's inverse frequencies, computed step by step in fp32 the way transformers computes them
// (default and llama3 rope types), so the reference and device kernels share one exact table.
#pragma once

#include <optional>
#include <vector>

#include "model/config.h"

namespace mpk::ir {

// head_dim / 2 entries: 1 / theta^(2i / head_dim), then, for llama3 scaling, wavelengths
// 2*pi / f above original_max / low_freq_factor divided by `factor`, those below
// original_max / high_freq_factor kept, the ones between interpolated smoothly.
std::vector<float> rope_inv_freq(int head_dim, double theta,
                                 const std::optional<model::RopeScaling>& scaling);

}  // namespace mpk::ir
