#include "cuda/driver_api.h"

#include <dlfcn.h>

#include <string>

#include "base/error.h"
#include "base/log.h"

namespace mpk::cuda {
namespace {

#define MPK_CUDA_STR2(x) #x
#define MPK_CUDA_STR(x) MPK_CUDA_STR2(x)

constexpr const char* kDriverLibrary = "libcuda.so.1";

Error no_device(const std::string& why) { return Error(ErrorKind::NoDevice, why); }

std::string result_text(const DriverApi& api, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &text);
  std::string s = name ? name : "CUresult " + std::to_string(static_cast<int>(r));
  if (text) s += std::string(" (") + text + ")";
  return s;
}

// Resolves one entry point. With cuGetProcAddress the driver hands out the version matching
// the cuda.h ABI we were built with (CUDA_VERSION); without it (drivers before 12.0) the
// versioned symbol that cuda.h's macros name is looked up directly.
template <typename Fn>
void resolve(void* lib, decltype(&::cuGetProcAddress) get_proc, const char* base_name,
             const char* versioned_name, Fn& out) {
  void* p = nullptr;
  if (get_proc) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = get_proc(base_name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) p = nullptr;
  } else {
    p = dlsym(lib, versioned_name);
  }
  if (!p) {
    throw no_device(std::string("the CUDA driver (") + kDriverLibrary + ") has no entry point " +
                    versioned_name + "; a driver for CUDA " + std::to_string(CUDA_VERSION / 1000) +
                    "." + std::to_string(CUDA_VERSION % 1000 / 10) + " or newer is needed");
  }
  out = reinterpret_cast<Fn>(p);
}

DriverApi load_driver() {
  // The handle is never closed: the table lives for the whole process.
  void* lib = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    throw no_device(std::string("no CUDA driver (") + kDriverLibrary +
                    " not found): " + (why ? why : "dlopen failed"));
  }
  DriverApi api;
  // cuInit comes first so cuGetProcAddress runs on an initialised driver.
  resolve(lib, nullptr, "cuInit", "cuInit", api.cuInit);
  auto get_proc =
      reinterpret_cast<decltype(&::cuGetProcAddress)>(dlsym(lib, "cuGetProcAddress_v2"));
  // Error names are wanted for cuInit's message, so resolve the table before checking it.
  CUresult init = api.cuInit(0);
#define MPK_CUDA_RESOLVE(name) resolve(lib, get_proc, #name, MPK_CUDA_STR(name), api.name);
  MPK_CUDA_DRIVER_FUNCS(MPK_CUDA_RESOLVE)
#undef MPK_CUDA_RESOLVE
  if (init != CUDA_SUCCESS) {
    throw no_device("the CUDA driver failed to initialise: cuInit returned " +
                    result_text(api, init));
  }
  if (CUresult r = api.cuDriverGetVersion(&api.driver_version); r != CUDA_SUCCESS) {
    throw no_device("cuDriverGetVersion failed: " + result_text(api, r));
  }
  if (CUresult r = api.cuDeviceGetCount(&api.device_count); r != CUDA_SUCCESS) {
    throw no_device("cuDeviceGetCount failed: " + result_text(api, r));
  }
  if (api.device_count <= 0) {
    throw no_device("no CUDA device found (driver " + std::to_string(api.driver_version / 1000) +
                    "." + std::to_string(api.driver_version % 1000 / 10) + " is loaded)");
  }
  log(LogLevel::Debug, "loaded CUDA driver {}.{} with {} device(s)", api.driver_version / 1000,
      api.driver_version % 1000 / 10, api.device_count);
  return api;
}

const Expected<DriverApi>& loaded() {
  // Function-local static: loaded exactly once, concurrent first callers wait.
  static const Expected<DriverApi> api = []() -> Expected<DriverApi> {
    try {
      return load_driver();
    } catch (const Error& e) {
      return e;
    } catch (const std::exception& e) {
      return no_device(std::string("loading the CUDA driver failed: ") + e.what());
    }
  }();
  return api;
}

}  // namespace

const DriverApi& driver_api() { return loaded().value(); }

bool driver_available() noexcept {
  try {
    return loaded().ok();
  } catch (...) {
    return false;
  }
}

std::string cu_error_text(CUresult result) {
  if (!loaded().ok()) return "CUresult " + std::to_string(static_cast<int>(result));
  return result_text(loaded().value(), result);
}

void check_cu(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  ErrorKind kind = result == CUDA_ERROR_OUT_OF_MEMORY ? ErrorKind::OutOfMemory : ErrorKind::Cuda;
  throw Error(kind, std::string(call) + " failed: " + cu_error_text(result));
}

}  // namespace mpk::cuda
