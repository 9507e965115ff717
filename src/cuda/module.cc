#include <string>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "cuda/driver.h"

namespace mpk::cuda {

Module::Module(const Context& ctx, std::span<const std::uint8_t> image) : ctx_(ctx.handle()) {
  MPK_CHECK(!image.empty(), InvalidArgument) << "cannot load an empty module image";
  ScopedContext bind(ctx_);
  // The driver's own log says why an image is rejected (e.g. built for another arch).
  char error_log[4096] = {};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log, reinterpret_cast<void*>(sizeof(error_log) - 1)};
  CUresult r = driver_api().cuModuleLoadDataEx(&module_, image.data(), 2, opts, values);
  if (r != CUDA_SUCCESS) {
    module_ = nullptr;
    std::string msg = "cuModuleLoadDataEx failed: " + cu_error_text(r);
    if (error_log[0]) msg += "\n" + std::string(error_log);
    throw Error(r == CUDA_ERROR_OUT_OF_MEMORY ? ErrorKind::OutOfMemory : ErrorKind::Cuda, msg);
  }
}

Module::~Module() { reset(); }

Module::Module(Module&& o) noexcept : ctx_(o.ctx_), module_(std::exchange(o.module_, nullptr)) {}

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = o.ctx_;
    module_ = std::exchange(o.module_, nullptr);
  }
  return *this;
}

void Module::reset() noexcept {
  if (!module_) return;
  try {
    ScopedContext bind(ctx_);
    CUresult r = driver_api().cuModuleUnload(module_);
    if (r != CUDA_SUCCESS) log(LogLevel::Debug, "cuModuleUnload failed: {}", cu_error_text(r));
  } catch (...) {
  }
  module_ = nullptr;
}

Function Module::function(const std::string& name) const {
  MPK_CHECK(module_ != nullptr, BadState) << "Module was moved from";
  ScopedContext bind(ctx_);
  CUfunction fn = nullptr;
  CUresult r = driver_api().cuModuleGetFunction(&fn, module_, name.c_str());
  MPK_CHECK(r != CUDA_ERROR_NOT_FOUND, NotFound)
      << "kernel '" << name << "' is not in the module (is it extern \"C\"?)";
  check_cu(r, ("cuModuleGetFunction(" + name + ")").c_str());
  return Function(fn, ctx_, name);
}

std::pair<CUdeviceptr, std::size_t> Module::global(const std::string& name) const {
  MPK_CHECK(module_ != nullptr, BadState) << "Module was moved from";
  ScopedContext bind(ctx_);
  CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
  CUresult r = driver_api().cuModuleGetGlobal(&ptr, &bytes, module_, name.c_str());
  MPK_CHECK(r != CUDA_ERROR_NOT_FOUND, NotFound)
      << "device variable '" << name << "' is not in the module";
  check_cu(r, ("cuModuleGetGlobal(" + name + ")").c_str());
  return {ptr, bytes};
}

int Function::attribute(CUfunction_attribute attr) const {
  ScopedContext bind(ctx_);
  int v = 0;
  check_cu(driver_api().cuFuncGetAttribute(&v, attr, fn_), "cuFuncGetAttribute");
  return v;
}

void Function::set_max_dynamic_shared(int bytes) const {
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuFuncSetAttribute(fn_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           bytes),
           ("cuFuncSetAttribute(" + name_ + ", max dynamic shared " + std::to_string(bytes) +
            " bytes)")
               .c_str());
}

int Function::max_active_blocks_per_sm(int block_threads, std::size_t dynamic_shared) const {
  ScopedContext bind(ctx_);
  int blocks = 0;
  check_cu(driver_api().cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn_, block_threads,
                                                                     dynamic_shared),
           "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  return blocks;
}

CUtensorMap tensor_map_bf16(CUdeviceptr base, std::uint64_t rows, std::uint64_t cols, unsigned box_rows,
                            unsigned box_cols) {
  // The driver's limits for a 2-D bf16 map in the 128-byte swizzle: dimensions up to 2^32, row
  // strides multiples of 16 bytes below 2^40, boxes of 1..256 rows by 16-byte multiples up to
  // the swizzle's 128 bytes.
  const uint64_t box_bytes = uint64_t(box_cols) * 2;
  MPK_CHECK(base % 16 == 0 && rows >= 1 && rows <= (uint64_t(1) << 32) && cols >= 8 && cols <= (uint64_t(1) << 32) &&
                cols % 8 == 0 && cols * 2 < (uint64_t(1) << 40) && box_rows >= 1 && box_rows <= 256 &&
                box_bytes >= 16 && box_bytes <= 128 && box_bytes % 16 == 0,
            InvalidArgument)
      << "tensor map of " << rows << " x " << cols << " bf16 at 0x" << std::hex << base << std::dec << ", box "
      << box_rows << " x " << box_cols;
  CUtensorMap map;
  const cuuint64_t dims[2] = {cols, rows};        // innermost first
  const cuuint64_t strides[1] = {cols * 2};       // bytes between rows
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t step[2] = {1, 1};
  check_cu(driver_api().cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, reinterpret_cast<void*>(base),
                                               dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           "cuTensorMapEncodeTiled");
  return map;
}

void launch(const Function& fn, const LaunchConfig& config, const Stream& stream, void** params) {
  CUlaunchAttribute attrs[2] = {};
  CUlaunchConfig cfg = {};
  cfg.gridDimX = config.grid.x;
  cfg.gridDimY = config.grid.y;
  cfg.gridDimZ = config.grid.z;
  cfg.blockDimX = config.block.x;
  cfg.blockDimY = config.block.y;
  cfg.blockDimZ = config.block.z;
  cfg.sharedMemBytes = config.dynamic_shared;
  cfg.hStream = stream.handle();
  if (config.cooperative) {
    attrs[cfg.numAttrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[cfg.numAttrs++].value.cooperative = 1;
  }
  if (config.programmatic) {
    attrs[cfg.numAttrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[cfg.numAttrs++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (cfg.numAttrs) cfg.attrs = attrs;
  ScopedContext bind(fn.context());
  CUresult r = driver_api().cuLaunchKernelEx(&cfg, fn.handle(), params, nullptr);
  if (r == CUDA_SUCCESS) return;
  auto dims = [](const Dim3& d) {
    return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
  };
  std::string what = "cuLaunchKernelEx(" + fn.name() + ", grid " + dims(config.grid) +
                     ", block " + dims(config.block) + ", " +
                     std::to_string(config.dynamic_shared) + " bytes dynamic shared" +
                     (config.cooperative ? ", cooperative" : "") +
                     (config.programmatic ? ", programmatic" : "") + ")";
  check_cu(r, what.c_str());
}

}  // namespace mpk::cuda
