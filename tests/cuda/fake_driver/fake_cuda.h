// What the fake libcuda.so.1 lets a test observe. It stands in for the driver on machines
// without one, so the loader and the RAII layer run in CI.
#pragma once

#include <cstddef>

struct MpkFakeCudaState {
  int primary_ctx_refs;
  int live_allocations;
  int live_modules;
  int live_streams;
  int live_events;
  int launches;
  // The last launch.
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  int cooperative;  // CU_LAUNCH_ATTRIBUTE_COOPERATIVE was set to 1
  int context_was_current;
  char function[64];
};

// Exported by the fake library; found with dlsym on the loaded libcuda.so.1.
extern "C" MpkFakeCudaState* mpk_fake_cuda_state();
using MpkFakeCudaStateFn = MpkFakeCudaState* (*)();
