// A host-only libcuda.so.1: one device (compute capability 9.0), memory in host RAM,
// modules that must be sm_90 ELF cubins, and launches that run a host version of the
// test kernel "fake_fill". Every entry point mpk resolves is defined here; the driver
// table is reached through cuGetProcAddress_v2 like the real driver.
#include <cuda.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/driver_api.h"
#include "fake_cuda.h"

namespace {

struct CUctx_st_fake {};
CUctx_st_fake g_ctx_object;
CUcontext const kCtx = reinterpret_cast<CUcontext>(&g_ctx_object);

struct FakeModule {
  std::vector<unsigned char> image;
  std::vector<std::string*> functions;
};

std::mutex g_mu;
MpkFakeCudaState g_state = {};
bool g_initialised = false;
thread_local CUcontext t_current = nullptr;

int device_count_from_env() {
  const char* e = std::getenv("MPK_FAKE_CUDA_DEVICES");
  return e ? std::atoi(e) : 1;
}

}  // namespace

extern "C" {

MpkFakeCudaState* mpk_fake_cuda_state() { return &g_state; }

CUresult CUDAAPI cuInit(unsigned int) {
  g_initialised = true;
  return CUDA_SUCCESS;
}

// NVRTC probes a loaded driver through this private entry point; having none is an answer
// it handles, a missing symbol is not.
CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid*) {
  *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult r, const char** s) {
  switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; return CUDA_SUCCESS;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return CUDA_SUCCESS;
    default: *s = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuGetErrorString(CUresult r, const char** s) {
  const char* name = nullptr;
  CUresult ok = cuGetErrorName(r, &name);
  *s = ok == CUDA_SUCCESS ? "fake driver error" : nullptr;
  return ok;
}

CUresult CUDAAPI cuDeviceGetCount(int* n) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  *n = device_count_from_env();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count_from_env()) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  std::strncpy(name, "mpk fake device", len);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute attr, CUdevice) {
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50331648; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *v = 1; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = std::size_t{141} << 30;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_state.primary_ctx_refs;
  *ctx = kCtx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_state.primary_ctx_refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  --g_state.primary_ctx_refs;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = t_current;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  t_current = ctx;
  return CUDA_SUCCESS;
}

#define FAKE_NEED_CONTEXT() \
  if (t_current != kCtx || g_state.primary_ctx_refs <= 0) return CUDA_ERROR_INVALID_CONTEXT

CUresult CUDAAPI cuCtxSynchronize() {
  FAKE_NEED_CONTEXT();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo(size_t* free, size_t* total) {
  FAKE_NEED_CONTEXT();
  *total = std::size_t{141} << 30;
  *free = *total / 2;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int n,
                                    CUjit_option* options, void** values) {
  FAKE_NEED_CONTEXT();
  const auto* bytes = static_cast<const unsigned char*>(image);
  const char* why = nullptr;
  CUresult result = CUDA_SUCCESS;
  std::size_t size = 0;
  if (std::memcmp(bytes, "\x7f" "ELF", 4) != 0 || bytes[4] != 2) {
    why = "fake driver: the image is not an ELF64 cubin";
    result = CUDA_ERROR_INVALID_IMAGE;
  } else {
    std::uint32_t flags;
    std::uint64_t phoff, shoff;
    std::uint16_t phentsize, phnum, shentsize, shnum;
    std::memcpy(&phoff, bytes + 32, 8);
    std::memcpy(&shoff, bytes + 40, 8);
    std::memcpy(&flags, bytes + 48, 4);
    std::memcpy(&phentsize, bytes + 54, 2);
    std::memcpy(&phnum, bytes + 56, 2);
    std::memcpy(&shentsize, bytes + 58, 2);
    std::memcpy(&shnum, bytes + 60, 2);
    if (((flags >> 8) & 0xff) != 90) {
      why = "fake driver: the cubin is not for sm_90";
      result = CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    // The header tables come after the section contents in a cubin.
    size = std::max(shoff + std::size_t{shentsize} * shnum, phoff + std::size_t{phentsize} * phnum);
  }
  if (result != CUDA_SUCCESS) {
    for (unsigned i = 0; i < n; ++i) {
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER) {
        std::size_t cap = 0;
        for (unsigned j = 0; j < n; ++j)
          if (options[j] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            cap = reinterpret_cast<std::size_t>(values[j]);
        if (cap) std::strncpy(static_cast<char*>(values[i]), why, cap - 1);
      }
    }
    return result;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  auto* m = new FakeModule;
  m->image.assign(bytes, bytes + size);
  *module = reinterpret_cast<CUmodule>(m);
  ++g_state.live_modules;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule module) {
  FAKE_NEED_CONTEXT();
  std::lock_guard<std::mutex> lock(g_mu);
  auto* m = reinterpret_cast<FakeModule*>(module);
  for (auto* f : m->functions) delete f;
  delete m;
  --g_state.live_modules;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  FAKE_NEED_CONTEXT();
  auto* m = reinterpret_cast<FakeModule*>(module);
  std::string needle = std::string(name) + '\0';  // a whole symbol in .strtab
  if (std::search(m->image.begin(), m->image.end(), needle.begin(), needle.end()) ==
      m->image.end())
    return CUDA_ERROR_NOT_FOUND;
  std::lock_guard<std::mutex> lock(g_mu);
  m->functions.push_back(new std::string(name));
  *fn = reinterpret_cast<CUfunction>(m->functions.back());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr*, size_t*, CUmodule, const char*) {
  FAKE_NEED_CONTEXT();
  return CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuFuncGetAttribute(int* v, CUfunction_attribute attr, CUfunction) {
  *v = attr == CU_FUNC_ATTRIBUTE_NUM_REGS ? 32 : 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute attr, int value) {
  if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && value > 232448)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction, int,
                                                             size_t) {
  FAKE_NEED_CONTEXT();
  *blocks = 2;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* ptr, size_t bytes) {
  FAKE_NEED_CONTEXT();
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > (std::size_t{1} << 40)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = std::malloc(bytes);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_state.live_allocations;
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr ptr) {
  FAKE_NEED_CONTEXT();
  std::free(reinterpret_cast<void*>(ptr));
  std::lock_guard<std::mutex> lock(g_mu);
  --g_state.live_allocations;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostAlloc(void** p, size_t bytes, unsigned int) {
  FAKE_NEED_CONTEXT();
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  *p = std::malloc(bytes);
  if (!*p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_state.live_allocations;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFreeHost(void* p) {
  FAKE_NEED_CONTEXT();
  std::free(p);
  std::lock_guard<std::mutex> lock(g_mu);
  --g_state.live_allocations;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  FAKE_NEED_CONTEXT();
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  FAKE_NEED_CONTEXT();
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  FAKE_NEED_CONTEXT();
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream) {
  return cuMemcpyHtoD(dst, src, bytes);
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream) {
  return cuMemcpyDtoH(dst, src, bytes);
}

CUresult CUDAAPI cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n) {
  FAKE_NEED_CONTEXT();
  std::memset(reinterpret_cast<void*>(dst), value, n);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream) {
  return cuMemsetD8(dst, value, n);
}

CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  FAKE_NEED_CONTEXT();
  std::lock_guard<std::mutex> lock(g_mu);
  *s = reinterpret_cast<CUstream>(new int(0));
  ++g_state.live_streams;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  FAKE_NEED_CONTEXT();
  std::lock_guard<std::mutex> lock(g_mu);
  delete reinterpret_cast<int*>(s);
  --g_state.live_streams;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream) {
  FAKE_NEED_CONTEXT();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) {
  FAKE_NEED_CONTEXT();
  std::lock_guard<std::mutex> lock(g_mu);
  *e = reinterpret_cast<CUevent>(new int(0));
  ++g_state.live_events;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent e) {
  FAKE_NEED_CONTEXT();
  std::lock_guard<std::mutex> lock(g_mu);
  delete reinterpret_cast<int*>(e);
  --g_state.live_events;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent e, CUstream) {
  FAKE_NEED_CONTEXT();
  ++*reinterpret_cast<int*>(e);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventSynchronize(CUevent) {
  FAKE_NEED_CONTEXT();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (!*reinterpret_cast<int*>(start) || !*reinterpret_cast<int*>(end))
    return CUDA_ERROR_INVALID_VALUE;  // not recorded
  *ms = 0.25f;
  return CUDA_SUCCESS;
}

// Runs "fake_fill(float* out, float value, int n)" on the host; other kernels only record.
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction fn, void** params,
                                  void**) {
  g_state.context_was_current = t_current == kCtx;
  FAKE_NEED_CONTEXT();
  if (config->blockDimX * config->blockDimY * config->blockDimZ > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  const std::string& name = *reinterpret_cast<std::string*>(fn);
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_state.launches;
  g_state.grid[0] = config->gridDimX;
  g_state.grid[1] = config->gridDimY;
  g_state.grid[2] = config->gridDimZ;
  g_state.block[0] = config->blockDimX;
  g_state.block[1] = config->blockDimY;
  g_state.block[2] = config->blockDimZ;
  g_state.shared_bytes = config->sharedMemBytes;
  g_state.cooperative = 0;
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
      g_state.cooperative = config->attrs[i].value.cooperative;
  std::strncpy(g_state.function, name.c_str(), sizeof(g_state.function) - 1);
  if (name == "fake_fill") {
    float* out = reinterpret_cast<float*>(*static_cast<CUdeviceptr*>(params[0]));
    float value = *static_cast<float*>(params[1]);
    int n = *static_cast<int*>(params[2]);
    for (int i = 0; i < n; ++i) out[i] = value + static_cast<float>(i);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType, cuuint32_t, void* base,
                                        const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                        const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                        CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  std::memset(map, 0, sizeof *map);
  std::memcpy(map, &base, sizeof base);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                  cuuint64_t, CUdriverProcAddressQueryResult* status) {
  static const std::map<std::string, void*> table = {
#define FAKE_ENTRY(name) {#name, reinterpret_cast<void*>(&::name)},
      MPK_CUDA_DRIVER_FUNCS(FAKE_ENTRY)
#undef FAKE_ENTRY
  };
  auto it = table.find(symbol);
  // mpk must ask for the ABI of the cuda.h it was built with.
  if (it == table.end() || cuda_version != CUDA_VERSION) {
    *pfn = nullptr;
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = it->second;
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // extern "C"
