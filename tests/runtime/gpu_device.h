// Whether a CUDA device is usable here (the GPU tests skip without one), and the logits
// comparison the GPU tests share.
#pragma once

#include <cmath>
#include <vector>

#include "cuda/driver.h"

namespace mpk::testing {

inline bool have_device() {
  try {
    return cuda::driver_available() && cuda::device_count() > 0;
  } catch (...) {
    return false;
  }
}

// Relative L2 error of a against b in double; INFINITY when a value is not finite or the sizes
// differ (NaN never passes).
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / den);
}

}  // namespace mpk::testing
