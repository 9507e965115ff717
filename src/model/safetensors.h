// The safetensors container: an 8-byte little-endian header length N, N bytes of JSON
// ({name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}), then the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/weights.h"

namespace mpk::model {

// Largest header accepted; the reference implementation uses the same bound.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

// Validates the header of a safetensors image of `size` bytes and returns its tensors,
// pointing into `data`. Only F32/F16/BF16 tensors are accepted: other safetensors dtypes are
// Error(Unsupported), unknown ones and any structural fault Error(InvalidModel). `origin`
// (usually the file path) starts every message.
std::vector<Tensor> parse_safetensors(const std::byte* data, size_t size, const std::string& origin);

}  // namespace mpk::model
