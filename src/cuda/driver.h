// RAII wrappers over the CUDA Driver API (loaded at run time, see driver_api.h).
//
// Every type here is movable, not copyable, and binds its context around each driver call,
// so it works whichever context is current on the calling thread. Objects made from a
// Context must be destroyed before it. Failures throw mpk::Error: NoDevice (no driver or no
// GPU), Cuda (a driver call failed; the message names the call and the driver's error),
// OutOfMemory, InvalidArgument, NotFound, Unsupported.
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "base/error.h"
#include "cuda/driver_api.h"

namespace mpk::cuda {

// Number of CUDA devices. Throws NoDevice when there is no driver or no device.
int device_count();

// cuDriverGetVersion, e.g. 13000 for CUDA 13.0. Throws NoDevice.
int driver_version();

// Limits read off one device.
struct DeviceProps {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int warp_size = 0;
  int max_threads_per_block = 0;
  int max_threads_per_sm = 0;
  int max_registers_per_block = 0;
  int max_shared_per_block = 0;        // without opting in (48 KiB)
  int max_shared_per_block_optin = 0;  // with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  int max_shared_per_sm = 0;
  int l2_bytes = 0;
  bool cooperative_launch = false;
  std::size_t total_memory = 0;
  int driver_version = 0;

  // The NVRTC target for this device: "sm_90a" from compute capability 9.0 on (the
  // architecture-specific variant), "sm_86" before.
  std::string arch() const;
};

// Reads the properties of device `ordinal`. Throws NoDevice, InvalidArgument, Cuda.
DeviceProps device_props(int ordinal);

// The primary context of one device, retained for this object's lifetime.
class Context {
 public:
  // Retains device `ordinal`'s primary context and makes it current on the calling thread.
  explicit Context(int ordinal = 0);
  ~Context();
  Context(Context&& other) noexcept;
  Context& operator=(Context&& other) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  CUcontext handle() const { return ctx_; }
  CUdevice device() const { return device_; }
  int ordinal() const { return props_.ordinal; }
  const DeviceProps& props() const { return props_; }

  // Makes this context current on the calling thread.
  void make_current() const;
  // Waits for all work in the context.
  void synchronize() const;
  // Free and total device memory in bytes.
  std::pair<std::size_t, std::size_t> memory_info() const;

 private:
  void reset() noexcept;
  CUcontext ctx_ = nullptr;
  CUdevice device_ = 0;
  DeviceProps props_;
};

// Binds a context to the calling thread for a scope and restores the previous one.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

class Stream {
 public:
  // A stream that does not synchronise with the legacy default stream unless `blocking`.
  explicit Stream(const Context& ctx, bool blocking = false);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  CUstream handle() const { return stream_; }
  CUcontext context() const { return ctx_; }
  void synchronize() const;

 private:
  void reset() noexcept;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
};

class Event {
 public:
  explicit Event(const Context& ctx);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  CUevent handle() const { return event_; }
  void record(const Stream& stream);
  void synchronize() const;

 private:
  void reset() noexcept;
  CUcontext ctx_ = nullptr;
  CUevent event_ = nullptr;
};

// Milliseconds between two recorded events (after `end` completed).
float elapsed_ms(const Event& start, const Event& end);

// Linear device memory. A zero-byte buffer holds no allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const Context& ctx, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  std::size_t size() const { return bytes_; }

  // Copies `bytes` between host memory and [offset, offset + bytes) of the buffer; the
  // range must lie inside the buffer (InvalidArgument otherwise). Blocking: the bytes are on
  // the device when upload returns.
  void upload(const void* src, std::size_t bytes, std::size_t offset = 0);
  void download(void* dst, std::size_t bytes, std::size_t offset = 0) const;
  // Stream-ordered versions; host memory must stay valid until the stream reaches the copy.
  void upload_async(const void* src, std::size_t bytes, const Stream& stream,
                    std::size_t offset = 0);
  void download_async(void* dst, std::size_t bytes, const Stream& stream,
                      std::size_t offset = 0) const;
  // Copies from another buffer (same size or smaller).
  // Blocking: returns once the copy (or fill) has completed on the device.
  void copy_from(const DeviceBuffer& src);
  // Sets every byte (e.g. 0xff to poison outputs with NaNs).
  void fill_bytes(std::uint8_t value);
  void fill_bytes_async(std::uint8_t value, const Stream& stream);

  template <typename T>
  void upload(std::span<const T> src, std::size_t offset = 0) {
    upload(src.data(), src.size_bytes(), offset);
  }
  template <typename T>
  void download(std::span<T> dst, std::size_t offset = 0) const {
    download(dst.data(), dst.size_bytes(), offset);
  }

 private:
  void check_range(std::size_t bytes, std::size_t offset, const char* what) const;
  void reset() noexcept;
  CUcontext ctx_ = nullptr;
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

// Page-locked host memory of `ctx` (cuMemHostAlloc): the device copies it with DMA, so a copy
// from or to it is asynchronous (the host waits for the stream, not for each copy). It must
// stay untouched until the stream has passed the copies that use it.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(const Context& ctx, std::size_t bytes);
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  void reset() noexcept;
  CUcontext ctx_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A kernel of a loaded Module; valid while the Module lives.
class Function {
 public:
  Function(CUfunction fn, CUcontext ctx, std::string name)
      : fn_(fn), ctx_(ctx), name_(std::move(name)) {}

  CUfunction handle() const { return fn_; }
  CUcontext context() const { return ctx_; }
  const std::string& name() const { return name_; }

  int attribute(CUfunction_attribute attr) const;
  int num_registers() const { return attribute(CU_FUNC_ATTRIBUTE_NUM_REGS); }
  int static_shared_bytes() const { return attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES); }
  int max_threads_per_block() const { return attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK); }
  // Allows launches with up to `bytes` of dynamic shared memory (needed above 48 KiB).
  void set_max_dynamic_shared(int bytes) const;
  // How many blocks of this shape fit on one SM at once (bounds a cooperative grid).
  int max_active_blocks_per_sm(int block_threads, std::size_t dynamic_shared) const;

 private:
  CUfunction fn_;
  CUcontext ctx_;
  std::string name_;
};

// A cubin (or PTX, or fatbin) image loaded into a context.
class Module {
 public:
  Module(const Context& ctx, std::span<const std::uint8_t> image);
  ~Module();
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  CUmodule handle() const { return module_; }
  // The kernel `name` (an extern "C" or lowered name). Throws NotFound when it is absent.
  Function function(const std::string& name) const;
  // Address and size of the __device__ variable `name`. Throws NotFound when it is absent.
  std::pair<CUdeviceptr, std::size_t> global(const std::string& name) const;

 private:
  void reset() noexcept;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  unsigned dynamic_shared = 0;  // above 48 KiB needs Function::set_max_dynamic_shared first
  // All blocks co-resident (CU_LAUNCH_ATTRIBUTE_COOPERATIVE): the grid must fit on the device
  // at once, as grid-wide synchronisation needs.
  bool cooperative = false;
  // A programmatic dependent of the kernel before it on the stream
  // (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, compute capability 9.0 on): its
  // blocks may start once that kernel's have all run griddepcontrol.launch_dependents (or
  // ended), so the kernel must run griddepcontrol.wait before it touches memory the one before
  // reads or writes.
  bool programmatic = false;
};

// A TMA descriptor of a row-major bf16 matrix of `rows` x `cols` at `base` (16-byte aligned,
// cols a multiple of 8, both at most 2^32), read in boxes of `box_rows` (1..256) x `box_cols`
// (8, 16, ..., 64: up to 128 bytes) laid out with the 128-byte swizzle; elements past the
// matrix read as zeros. Error(InvalidArgument) for a shape outside these before the driver
// sees it. A kernel takes it as a `const __grid_constant__` parameter of 128 bytes. Host only:
// no device work.
CUtensorMap tensor_map_bf16(CUdeviceptr base, std::uint64_t rows, std::uint64_t cols, unsigned box_rows,
                            unsigned box_cols);

// Launches `fn` on `stream` through cuLaunchKernelEx. `params` holds one pointer per kernel
// parameter (cuLaunchKernel's kernelParams). Throws Cuda when the launch is rejected (the
// message gives the shape), e.g. a cooperative grid larger than the device holds at once.
void launch(const Function& fn, const LaunchConfig& config, const Stream& stream, void** params);

// Same with the kernel arguments themselves: launch_args(fn, cfg, stream, out.ptr(), n).
// Each argument must have the exact type of the kernel parameter.
template <typename... Args>
void launch_args(const Function& fn, const LaunchConfig& config, const Stream& stream,
                 const Args&... args) {
  std::array<void*, sizeof...(Args)> params{const_cast<void*>(static_cast<const void*>(&args))...};
  launch(fn, config, stream, params.data());
}

}  // namespace mpk::cuda
