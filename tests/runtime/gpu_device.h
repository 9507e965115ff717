// Whether a CUDA device is usable here (the GPU tests skip without one).
#pragma once

#include "cuda/driver.h"

namespace mpk::testing {

inline bool have_device() {
  try {
    return cuda::driver_available() && cuda::device_count() > 0;
  } catch (...) {
    return false;
  }
}

}  // namespace mpk::testing
