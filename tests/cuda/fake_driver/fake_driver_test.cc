// The driver layer against the fake libcuda.so.1 (tests/cuda/fake_driver): loading through
// cuGetProcAddress, contexts, memory, modules and launches, without a GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <thread>
#include <vector>

#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "fake_cuda.h"

namespace mpk::cuda {
namespace {

constexpr const char* kFill = R"(
extern "C" __global__ void fake_fill(float* out, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value + i;
}
)";

class FakeDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    bool available = driver_available();
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    auto fn = lib ? reinterpret_cast<MpkFakeCudaStateFn>(dlsym(lib, "mpk_fake_cuda_state"))
                  : nullptr;
    if (lib && !fn) GTEST_SKIP() << "a real libcuda.so.1 was loaded instead of the fake one";
    ASSERT_TRUE(available && fn) << "the fake driver did not load";
    state_ = fn();
  }
  MpkFakeCudaState* state_ = nullptr;
};

std::vector<std::uint8_t> fill_cubin(const std::string& arch = "sm_90a") {
  CompileRequest req;
  req.source = kFill;
  req.name = "fill.cu";
  req.arch = arch;
  return compile(req).cubin;
}

TEST_F(FakeDriver, PropsComeFromTheDriver) {
  EXPECT_EQ(device_count(), 1);
  EXPECT_EQ(driver_version(), 13000);
  DeviceProps p = device_props(0);
  EXPECT_EQ(p.name, "mpk fake device");
  EXPECT_EQ(p.sm_count, 132);
  EXPECT_EQ(p.arch(), "sm_90a");
  EXPECT_EQ(p.max_shared_per_block_optin, 232448);
  EXPECT_EQ(p.l2_bytes, 50331648);
  EXPECT_TRUE(p.cooperative_launch);
  EXPECT_EQ(p.total_memory, std::size_t{141} << 30);
  try {
    device_props(1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos);
  }
}

TEST_F(FakeDriver, ContextRetainsAndReleasesThePrimaryContext) {
  int before = state_->primary_ctx_refs;
  {
    Context a(0);
    EXPECT_EQ(state_->primary_ctx_refs, before + 1);
    Context b = std::move(a);
    EXPECT_EQ(state_->primary_ctx_refs, before + 1);
    CUcontext current = nullptr;
    driver_api().cuCtxGetCurrent(&current);
    EXPECT_EQ(current, b.handle());
  }
  EXPECT_EQ(state_->primary_ctx_refs, before);
  CUcontext current = reinterpret_cast<CUcontext>(1);
  driver_api().cuCtxGetCurrent(&current);
  EXPECT_EQ(current, nullptr) << "a released context was left current";
}

TEST_F(FakeDriver, ObjectsBindTheirContextOnAnyThread) {
  Context ctx(0);
  DeviceBuffer buf(ctx, 64);
  std::vector<float> in(16, 3.0f), out(16, 0.0f);
  std::thread t([&] {
    // Nothing is current on this thread; the buffer binds its own context.
    buf.upload(std::span<const float>(in));
    buf.download(std::span<float>(out));
    CUcontext current = reinterpret_cast<CUcontext>(1);
    driver_api().cuCtxGetCurrent(&current);
    EXPECT_EQ(current, nullptr) << "the previous (empty) binding was not restored";
  });
  t.join();
  EXPECT_EQ(out, in);
}

TEST_F(FakeDriver, BuffersAreFreedAndRangeChecked) {
  Context ctx(0);
  int before = state_->live_allocations;
  {
    DeviceBuffer a(ctx, 1024);
    DeviceBuffer b(ctx, 1024);
    DeviceBuffer empty(ctx, 0);
    EXPECT_EQ(state_->live_allocations, before + 2);
    std::vector<std::uint8_t> bytes(1024, 7), back(1024, 0);
    a.upload(bytes.data(), bytes.size());
    b.copy_from(a);
    b.fill_bytes(0xab);
    b.download(back.data(), 8, 1016);
    EXPECT_EQ(back[0], 0xab);
    EXPECT_THROW(a.upload(bytes.data(), 8, 1020), Error);
    EXPECT_THROW(a.download(back.data(), 1025), Error);
    DeviceBuffer moved = std::move(a);
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(moved.size(), 1024u);
  }
  EXPECT_EQ(state_->live_allocations, before);
}

TEST_F(FakeDriver, PinnedHostBuffersAreFreed) {
  Context ctx(0);
  const int before = state_->live_allocations;
  {
    HostBuffer a(ctx, 4096);
    HostBuffer empty(ctx, 0);
    EXPECT_EQ(state_->live_allocations, before + 1);
    ASSERT_NE(a.data(), nullptr);
    EXPECT_EQ(empty.data(), nullptr);
    a.data()[4095] = std::byte{1};
    HostBuffer moved = std::move(a);
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(moved.size(), 4096u);
    HostBuffer other(ctx, 16);
    other = std::move(moved);  // frees other's
    EXPECT_EQ(state_->live_allocations, before + 1);
  }
  EXPECT_EQ(state_->live_allocations, before);
}

TEST_F(FakeDriver, OutOfMemoryHasItsOwnKind) {
  Context ctx(0);
  try {
    DeviceBuffer huge(ctx, std::size_t{1} << 41);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("cuMemAlloc(2199023255552 bytes) failed: "
                                         "CUDA_ERROR_OUT_OF_MEMORY"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(FakeDriver, LaunchPassesArgumentsShapeAndCooperativeAttribute) {
  Context ctx(0);
  Module mod(ctx, fill_cubin());
  Function fn = mod.function("fake_fill");
  EXPECT_EQ(fn.name(), "fake_fill");
  EXPECT_EQ(fn.num_registers(), 32);
  const int n = 100;
  DeviceBuffer out(ctx, n * sizeof(float));
  out.fill_bytes(0xff);
  Stream stream(ctx);
  Event start(ctx), stop(ctx);
  LaunchConfig config;
  config.grid = {4, 2, 1};
  config.block = {32, 1, 1};
  config.dynamic_shared = 128;
  start.record(stream);
  launch_args(fn, config, stream, out.ptr(), 0.5f, n);
  stop.record(stream);
  stop.synchronize();
  EXPECT_EQ(elapsed_ms(start, stop), 0.25f);
  EXPECT_EQ(state_->grid[0], 4u);
  EXPECT_EQ(state_->grid[1], 2u);
  EXPECT_EQ(state_->block[0], 32u);
  EXPECT_EQ(state_->shared_bytes, 128u);
  EXPECT_EQ(state_->cooperative, 0);
  EXPECT_EQ(std::string(state_->function), "fake_fill");
  std::vector<float> got(n);
  out.download(std::span<float>(got));
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[i], 0.5f + i) << i;

  config.cooperative = true;
  launch_args(fn, config, stream, out.ptr(), 1.0f, n);
  EXPECT_EQ(state_->cooperative, 1);
  EXPECT_EQ(fn.max_active_blocks_per_sm(256, 0), 2);
}

TEST_F(FakeDriver, LaunchBindsTheContextFromAnotherThread) {
  Context ctx(0);
  Module mod(ctx, fill_cubin());
  Function fn = mod.function("fake_fill");
  DeviceBuffer out(ctx, 16);
  Stream stream(ctx);
  std::thread t([&] {
    LaunchConfig config;
    launch_args(fn, config, stream, out.ptr(), 1.0f, 4);
  });
  t.join();
  EXPECT_EQ(state_->context_was_current, 1);
}

TEST_F(FakeDriver, LaunchFailureNamesTheShape) {
  Context ctx(0);
  Module mod(ctx, fill_cubin());
  Function fn = mod.function("fake_fill");
  Stream stream(ctx);
  LaunchConfig config;
  config.grid = {3, 1, 1};
  config.block = {2048, 1, 1};
  config.cooperative = true;
  try {
    launch_args(fn, config, stream, CUdeviceptr{0}, 1.0f, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cuda);
    std::string msg = e.what();
    EXPECT_NE(msg.find("cuLaunchKernelEx(fake_fill, grid 3x1x1, block 2048x1x1, 0 bytes dynamic "
                       "shared, cooperative) failed: CUDA_ERROR_INVALID_VALUE"),
              std::string::npos)
        << msg;
  }
}

// A TMA descriptor is made by the driver for a shape the wgmma tiles can read, and refused
// before the driver for one they cannot.
TEST_F(FakeDriver, TensorMapsCheckTheirShapeFirst) {
  const CUdeviceptr base = 0x10000;
  const CUtensorMap map = tensor_map_bf16(base, 200, 136, 128, 64);
  CUdeviceptr seen = 0;
  std::memcpy(&seen, &map, sizeof seen);  // the fake driver records the base address
  EXPECT_EQ(seen, base);
  for (auto [b, rows, cols, box_rows, box_cols] :
       {std::tuple{base + 8, 200LL, 136LL, 128u, 64u}, std::tuple{base, 200LL, 130LL, 128u, 64u},
        std::tuple{base, 200LL, 136LL, 512u, 64u}, std::tuple{base, 200LL, 136LL, 128u, 128u},
        std::tuple{base, 0LL, 136LL, 128u, 64u}, std::tuple{base, 200LL, 0LL, 128u, 64u},
        std::tuple{base, 200LL, 136LL, 0u, 64u}, std::tuple{base, 200LL, 136LL, 128u, 0u},
        std::tuple{base, 200LL, 136LL, 128u, 4u}, std::tuple{base, 200LL, 136LL, 128u, 0x80000008u},
        std::tuple{base, 1LL << 33, 136LL, 128u, 64u}, std::tuple{base, 200LL, 1LL << 40, 128u, 64u}}) {
    try {
      tensor_map_bf16(b, uint64_t(rows), uint64_t(cols), box_rows, box_cols);
      ADD_FAILURE() << rows << " x " << cols << " box " << box_rows << " x " << box_cols;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
    }
  }
}

TEST_F(FakeDriver, ModulesAreUnloadedAndCheckNames) {
  Context ctx(0);
  int before = state_->live_modules;
  {
    Module mod(ctx, fill_cubin());
    EXPECT_EQ(state_->live_modules, before + 1);
    try {
      mod.function("fake_fil");
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::NotFound);
      EXPECT_NE(std::string(e.what()).find("fake_fil"), std::string::npos);
    }
    EXPECT_THROW(mod.global("nothing"), Error);
  }
  EXPECT_EQ(state_->live_modules, before);
}

TEST_F(FakeDriver, RejectedImageCarriesTheDriverLog) {
  Context ctx(0);
  try {
    Module mod(ctx, fill_cubin("sm_80"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cuda);
    std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA_ERROR_NO_BINARY_FOR_GPU"), std::string::npos) << msg;
    EXPECT_NE(msg.find("not for sm_90"), std::string::npos) << msg;
  }
  std::vector<std::uint8_t> junk(64, 1);
  EXPECT_THROW(Module(ctx, junk), Error);
  EXPECT_THROW(Module(ctx, std::vector<std::uint8_t>{}), Error);
}

TEST_F(FakeDriver, StreamsAndEventsAreDestroyed) {
  Context ctx(0);
  int streams = state_->live_streams, events = state_->live_events;
  {
    Stream s(ctx);
    Stream moved = std::move(s);
    Event e(ctx);
    EXPECT_EQ(state_->live_streams, streams + 1);
    EXPECT_EQ(state_->live_events, events + 1);
    moved.synchronize();
    ctx.synchronize();
  }
  EXPECT_EQ(state_->live_streams, streams);
  EXPECT_EQ(state_->live_events, events);
  auto [free, total] = ctx.memory_info();
  EXPECT_LT(free, total);
}

TEST_F(FakeDriver, UnrecordedEventsAreAnError) {
  Context ctx(0);
  Event a(ctx), b(ctx);
  EXPECT_THROW(elapsed_ms(a, b), Error);
}

}  // namespace
}  // namespace mpk::cuda
