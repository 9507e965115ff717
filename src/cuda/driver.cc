#include "cuda/driver.h"

#include <utility>

#include "base/error.h"
#include "base/log.h"

namespace mpk::cuda {
namespace {

// Cleanup in destructors must not throw; a failure there (often a driver already torn down
// at process exit) is only worth a debug line.
void release_quietly(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) log(LogLevel::Debug, "{} failed during cleanup: {}", call, cu_error_text(r));
}

int attribute(CUdevice dev, CUdevice_attribute attr, const char* what) {
  int v = 0;
  CUresult r = driver_api().cuDeviceGetAttribute(&v, attr, dev);
  if (r != CUDA_SUCCESS) check_cu(r, (std::string("cuDeviceGetAttribute(") + what + ")").c_str());
  return v;
}

}  // namespace

int device_count() { return driver_api().device_count; }

int driver_version() { return driver_api().driver_version; }

std::string DeviceProps::arch() const {
  std::string s = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  return cc_major >= 9 ? s + "a" : s;
}

DeviceProps device_props(int ordinal) {
  const DriverApi& api = driver_api();
  MPK_CHECK(ordinal >= 0 && ordinal < api.device_count, InvalidArgument)
      << "CUDA device ordinal " << ordinal << " is out of range: " << api.device_count
      << " device(s) present";
  CUdevice dev = 0;
  check_cu(api.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  DeviceProps p;
  p.ordinal = ordinal;
  char name[256] = {};
  check_cu(api.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
  p.name = name;
#define MPK_ATTR(field, attr) p.field = attribute(dev, attr, #attr)
  MPK_ATTR(sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  MPK_ATTR(cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  MPK_ATTR(cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  MPK_ATTR(warp_size, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  MPK_ATTR(max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  MPK_ATTR(max_threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  MPK_ATTR(max_registers_per_block, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  MPK_ATTR(max_shared_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  MPK_ATTR(max_shared_per_block_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  MPK_ATTR(max_shared_per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  MPK_ATTR(l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
#undef MPK_ATTR
  p.cooperative_launch = attribute(dev, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH,
                                   "CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH") != 0;
  check_cu(api.cuDeviceTotalMem(&p.total_memory, dev), "cuDeviceTotalMem");
  p.driver_version = api.driver_version;
  return p;
}

// --- Context ---------------------------------------------------------------------------

Context::Context(int ordinal) : props_(device_props(ordinal)) {
  const DriverApi& api = driver_api();
  check_cu(api.cuDeviceGet(&device_, ordinal), "cuDeviceGet");
  check_cu(api.cuDevicePrimaryCtxRetain(&ctx_, device_), "cuDevicePrimaryCtxRetain");
  try {
    make_current();
  } catch (...) {
    reset();
    throw;
  }
}

Context::~Context() { reset(); }

Context::Context(Context&& o) noexcept
    : ctx_(std::exchange(o.ctx_, nullptr)), device_(o.device_), props_(std::move(o.props_)) {}

Context& Context::operator=(Context&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::exchange(o.ctx_, nullptr);
    device_ = o.device_;
    props_ = std::move(o.props_);
  }
  return *this;
}

void Context::reset() noexcept {
  if (!ctx_) return;
  const DriverApi& api = driver_api();
  // Do not leave a released context current on this thread.
  CUcontext current = nullptr;
  if (api.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx_) {
    release_quietly(api.cuCtxSetCurrent(nullptr), "cuCtxSetCurrent");
  }
  release_quietly(api.cuDevicePrimaryCtxRelease(device_), "cuDevicePrimaryCtxRelease");
  ctx_ = nullptr;
}

void Context::make_current() const {
  MPK_CHECK(ctx_ != nullptr, BadState) << "Context was moved from";
  check_cu(driver_api().cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
}

void Context::synchronize() const {
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuCtxSynchronize(), "cuCtxSynchronize");
}

std::pair<std::size_t, std::size_t> Context::memory_info() const {
  ScopedContext bind(ctx_);
  std::size_t free = 0, total = 0;
  check_cu(driver_api().cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return {free, total};
}

ScopedContext::ScopedContext(CUcontext ctx) {
  if (!ctx) return;
  const DriverApi& api = driver_api();
  check_cu(api.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
  if (previous_ != ctx) {
    check_cu(api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    switched_ = true;
  }
}

ScopedContext::~ScopedContext() {
  if (switched_) release_quietly(driver_api().cuCtxSetCurrent(previous_), "cuCtxSetCurrent");
}

// --- Stream and Event ----------------------------------------------------------------

Stream::Stream(const Context& ctx, bool blocking) : ctx_(ctx.handle()) {
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuStreamCreate(&stream_, blocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING),
           "cuStreamCreate");
}

Stream::~Stream() { reset(); }

Stream::Stream(Stream&& o) noexcept
    : ctx_(o.ctx_), stream_(std::exchange(o.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = o.ctx_;
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}

void Stream::reset() noexcept {
  if (!stream_) return;
  try {
    ScopedContext bind(ctx_);
    release_quietly(driver_api().cuStreamDestroy(stream_), "cuStreamDestroy");
  } catch (...) {
  }
  stream_ = nullptr;
}

void Stream::synchronize() const {
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

Event::Event(const Context& ctx) : ctx_(ctx.handle()) {
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuEventCreate(&event_, CU_EVENT_DEFAULT), "cuEventCreate");
}

Event::~Event() { reset(); }

Event::Event(Event&& o) noexcept : ctx_(o.ctx_), event_(std::exchange(o.event_, nullptr)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = o.ctx_;
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}

void Event::reset() noexcept {
  if (!event_) return;
  try {
    ScopedContext bind(ctx_);
    release_quietly(driver_api().cuEventDestroy(event_), "cuEventDestroy");
  } catch (...) {
  }
  event_ = nullptr;
}

void Event::record(const Stream& stream) {
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuEventRecord(event_, stream.handle()), "cuEventRecord");
}

void Event::synchronize() const {
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuEventSynchronize(event_), "cuEventSynchronize");
}

float elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  check_cu(driver_api().cuEventElapsedTime(&ms, start.handle(), end.handle()),
           "cuEventElapsedTime");
  return ms;
}

// --- DeviceBuffer ----------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(const Context& ctx, std::size_t bytes)
    : ctx_(ctx.handle()), bytes_(bytes) {
  if (bytes == 0) return;
  ScopedContext bind(ctx_);
  CUresult r = driver_api().cuMemAlloc(&ptr_, bytes);
  if (r != CUDA_SUCCESS) {
    check_cu(r, ("cuMemAlloc(" + std::to_string(bytes) + " bytes)").c_str());
  }
}

DeviceBuffer::~DeviceBuffer() { reset(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ctx_(o.ctx_), ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = o.ctx_;
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reset() noexcept {
  if (ptr_) {
    try {
      ScopedContext bind(ctx_);
      release_quietly(driver_api().cuMemFree(ptr_), "cuMemFree");
    } catch (...) {
    }
  }
  ptr_ = 0;
  bytes_ = 0;
}

HostBuffer::HostBuffer(const Context& ctx, std::size_t bytes) : ctx_(ctx.handle()), bytes_(bytes) {
  if (bytes == 0) return;
  ScopedContext bind(ctx_);
  void* p = nullptr;
  check_cu(driver_api().cuMemHostAlloc(&p, bytes, 0), ("cuMemHostAlloc(" + std::to_string(bytes) + " bytes)").c_str());
  data_ = static_cast<std::byte*>(p);
}

HostBuffer::~HostBuffer() { reset(); }

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : ctx_(o.ctx_), data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = o.ctx_;
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void HostBuffer::reset() noexcept {
  if (data_) {
    try {
      ScopedContext bind(ctx_);
      release_quietly(driver_api().cuMemFreeHost(data_), "cuMemFreeHost");
    } catch (...) {
    }
  }
  data_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::check_range(std::size_t bytes, std::size_t offset, const char* what) const {
  MPK_CHECK(offset <= bytes_ && bytes <= bytes_ - offset, InvalidArgument)
      << what << " of " << bytes << " bytes at offset " << offset << " overruns a buffer of "
      << bytes_ << " bytes";
}

void DeviceBuffer::upload(const void* src, std::size_t bytes, std::size_t offset) {
  check_range(bytes, offset, "upload");
  if (bytes == 0) return;
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuMemcpyHtoD(ptr_ + offset, src, bytes), "cuMemcpyHtoD");
  // From pageable memory the call may return once the bytes are staged, before they land, and
  // a kernel on mpk's non-blocking streams is not ordered after it: wait, as copy_from does.
  check_cu(driver_api().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

void DeviceBuffer::download(void* dst, std::size_t bytes, std::size_t offset) const {
  check_range(bytes, offset, "download");
  if (bytes == 0) return;
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuMemcpyDtoH(dst, ptr_ + offset, bytes), "cuMemcpyDtoH");
}

void DeviceBuffer::upload_async(const void* src, std::size_t bytes, const Stream& stream,
                                std::size_t offset) {
  check_range(bytes, offset, "upload");
  if (bytes == 0) return;
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuMemcpyHtoDAsync(ptr_ + offset, src, bytes, stream.handle()),
           "cuMemcpyHtoDAsync");
}

void DeviceBuffer::download_async(void* dst, std::size_t bytes, const Stream& stream,
                                  std::size_t offset) const {
  check_range(bytes, offset, "download");
  if (bytes == 0) return;
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuMemcpyDtoHAsync(dst, ptr_ + offset, bytes, stream.handle()),
           "cuMemcpyDtoHAsync");
}

void DeviceBuffer::copy_from(const DeviceBuffer& src) {
  check_range(src.size(), 0, "copy");
  if (src.size() == 0) return;
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuMemcpyDtoD(ptr_, src.ptr(), src.size()), "cuMemcpyDtoD");
  // Device-to-device copies and memsets return before they finish, and the non-blocking
  // streams mpk uses do not order after the legacy stream: wait, so "synchronous" means it.
  check_cu(driver_api().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

void DeviceBuffer::fill_bytes(std::uint8_t value) {
  if (bytes_ == 0) return;
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuMemsetD8(ptr_, value, bytes_), "cuMemsetD8");
  check_cu(driver_api().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

void DeviceBuffer::fill_bytes_async(std::uint8_t value, const Stream& stream) {
  if (bytes_ == 0) return;
  ScopedContext bind(ctx_);
  check_cu(driver_api().cuMemsetD8Async(ptr_, value, bytes_, stream.handle()), "cuMemsetD8Async");
}

}  // namespace mpk::cuda
