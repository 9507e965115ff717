// Whether a CUDA device is usable here (the GPU tests skip without one), and the logits
// comparison the GPU tests share.
#pragma once

#include <cmath>
#include <vector>

#include "base/rel_l2.h"
#include "cuda/driver.h"

namespace mpk::testing {

inline bool have_device() {
  try {
    return cuda::driver_available() && cuda::device_count() > 0;
  } catch (...) {
    return false;
  }
}

// The logits comparison (base/rel_l2.h).
using mpk::rel_l2;

}  // namespace mpk::testing
