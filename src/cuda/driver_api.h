// The CUDA Driver API, loaded at run time from libcuda.so.1.
//
// Nothing links against libcuda: binaries start on machines without a GPU or a driver, and
// the first use of the driver loads it, calls cuInit and resolves every entry point below
// through cuGetProcAddress for the ABI of the cuda.h we compiled against (so cuMemAlloc is
// cuMemAlloc_v2, cuEventElapsedTime is cuEventElapsedTime_v2, ...). The table is process-wide,
// immutable after loading and safe to use from any thread.
#pragma once

#include <cuda.h>

#include <string>

namespace mpk::cuda {

// Every driver entry point mpk uses. A name here is the one cuda.h declares (the macro in
// cuda.h maps it to the versioned symbol); add one line to use another call.
#define MPK_CUDA_DRIVER_FUNCS(X)                  \
  X(cuInit)                                       \
  X(cuDriverGetVersion)                           \
  X(cuGetErrorName)                               \
  X(cuGetErrorString)                             \
  X(cuDeviceGetCount)                             \
  X(cuDeviceGet)                                  \
  X(cuDeviceGetName)                              \
  X(cuDeviceGetAttribute)                         \
  X(cuDeviceTotalMem)                             \
  X(cuDevicePrimaryCtxRetain)                     \
  X(cuDevicePrimaryCtxRelease)                    \
  X(cuCtxGetCurrent)                              \
  X(cuCtxSetCurrent)                              \
  X(cuCtxSynchronize)                             \
  X(cuMemGetInfo)                                 \
  X(cuModuleLoadDataEx)                           \
  X(cuModuleUnload)                               \
  X(cuModuleGetFunction)                          \
  X(cuModuleGetGlobal)                            \
  X(cuFuncGetAttribute)                           \
  X(cuFuncSetAttribute)                           \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)  \
  X(cuMemAlloc)                                   \
  X(cuMemFree)                                    \
  X(cuMemHostAlloc)                               \
  X(cuMemFreeHost)                                \
  X(cuMemcpyHtoD)                                 \
  X(cuMemcpyDtoH)                                 \
  X(cuMemcpyDtoD)                                 \
  X(cuMemcpyHtoDAsync)                            \
  X(cuMemcpyDtoHAsync)                            \
  X(cuMemsetD8)                                   \
  X(cuMemsetD8Async)                              \
  X(cuStreamCreate)                               \
  X(cuStreamDestroy)                              \
  X(cuStreamSynchronize)                          \
  X(cuEventCreate)                                \
  X(cuEventDestroy)                               \
  X(cuEventRecord)                                \
  X(cuEventSynchronize)                           \
  X(cuEventElapsedTime)                           \
  X(cuLaunchKernelEx)                             \
  X(cuTensorMapEncodeTiled)

struct DriverApi {
#define MPK_CUDA_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  MPK_CUDA_DRIVER_FUNCS(MPK_CUDA_DRIVER_MEMBER)
#undef MPK_CUDA_DRIVER_MEMBER
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000
  int device_count = 0;    // > 0 once loaded
};

// The loaded driver. Loads it on first use (once per process, thread-safe).
// Throws Error(NoDevice) when libcuda.so.1 is missing, an entry point cannot be resolved,
// cuInit fails or there is no device; every later call throws the same error.
const DriverApi& driver_api();

// True when driver_api() would succeed. Never throws.
bool driver_available() noexcept;

// Throws Error(Cuda) naming `call` and the driver's error name and text when `result` is not
// CUDA_SUCCESS (Error(OutOfMemory) for CUDA_ERROR_OUT_OF_MEMORY).
void check_cu(CUresult result, const char* call);

// "CUDA_ERROR_X (text)" for a result code, or the number when the driver is not loaded.
std::string cu_error_text(CUresult result);

}  // namespace mpk::cuda
