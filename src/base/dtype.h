// Element types shared by the model loader, the IR and the kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace mpk {

enum class DType : uint8_t { F32, F16, BF16, I32 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
  }
  return 0;
}

// Lower-case short names: "f32", "f16", "bf16", "i32".
const char* dtype_name(DType t);

// Round-trip conversions used by the loader and the reference (round-to-nearest-even).
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_bf16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace mpk
