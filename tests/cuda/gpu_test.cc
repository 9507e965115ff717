// Needs a CUDA device; every test skips with the reason when there is none.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "kernels.h"

namespace mpk::cuda {
namespace {

std::uint16_t to_bf16(float f) {  // round to nearest even; inputs here are finite
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16(std::uint16_t h) {
  std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Random values in ±[0.25, 4): never zero, both signs.
std::vector<float> random_nonzero(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.25f, 4.0f);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = neg(rng) ? -mag(rng) : mag(rng);
  return v;
}

// ||got - want|| / ||want||; infinite when any value is not finite.
double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      device_count();
    } catch (const Error& e) {
      GTEST_SKIP() << "no CUDA device: " << e.what();
    }
    ctx_.emplace(0);
  }

  Module load(const char* source, const std::string& name) {
    CompileRequest req;
    req.source = source;
    req.name = name;
    req.arch = ctx_->props().arch();
    return Module(*ctx_, compile(req).cubin);
  }

  std::optional<Context> ctx_;
};

TEST_F(Gpu, PropsReadOffTheDevice) {
  const DeviceProps& p = ctx_->props();
  std::printf("device %d: %s, %s, %d SMs, %zu MiB, L2 %d KiB, smem opt-in %d, driver %d\n",
              p.ordinal, p.name.c_str(), p.arch().c_str(), p.sm_count, p.total_memory >> 20,
              p.l2_bytes >> 10, p.max_shared_per_block_optin, p.driver_version);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.sm_count, 0);
  EXPECT_GE(p.cc_major, 7);
  EXPECT_EQ(p.warp_size, 32);
  EXPECT_GE(p.max_shared_per_block_optin, p.max_shared_per_block);
  EXPECT_GT(p.l2_bytes, 0);
  EXPECT_GT(p.total_memory, 0u);
  EXPECT_EQ(p.driver_version, driver_version());
  auto [free, total] = ctx_->memory_info();
  EXPECT_GT(free, 0u);
  EXPECT_LE(free, total);
}

// Runs axpy_bf16 with `config` and checks it against the host.
void run_axpy(const Context& ctx, const Function& fn, LaunchConfig config, int n) {
  const float a = 1.75f;
  std::vector<float> xf = random_nonzero(n, 1), yf = random_nonzero(n, 2);
  std::vector<std::uint16_t> x(n), y(n), out(n);
  std::vector<float> want(n), got(n);
  for (int i = 0; i < n; ++i) {
    x[i] = to_bf16(xf[i]);
    y[i] = to_bf16(yf[i]);
    want[i] = a * from_bf16(x[i]) + from_bf16(y[i]);
  }
  const std::size_t bytes = n * sizeof(std::uint16_t);
  DeviceBuffer dx(ctx, bytes), dy(ctx, bytes), dout(ctx, bytes);
  dx.upload(std::span<const std::uint16_t>(x));
  dy.upload(std::span<const std::uint16_t>(y));
  dout.fill_bytes(0xff);  // poison: bf16 0xffff is NaN
  Stream stream(ctx);
  launch_args(fn, config, stream, dx.ptr(), dy.ptr(), dout.ptr(), a, n);
  stream.synchronize();
  dout.download(std::span<std::uint16_t>(out));
  for (int i = 0; i < n; ++i) got[i] = from_bf16(out[i]);
  EXPECT_LT(relative_l2(got, want), 1e-2);
  int bad = 0;
  for (int i = 0; i < n && bad < 5; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= 1e-2f * std::fabs(want[i]) + 1e-2f)) {
      ADD_FAILURE() << "out[" << i << "] = " << got[i] << ", want " << want[i];
      ++bad;
    }
  }
}

TEST_F(Gpu, CompiledKernelMatchesHost) {
  Module mod = load(test::kAxpyBf16, "axpy_bf16.cu");
  Function fn = mod.function("axpy_bf16");
  EXPECT_GT(fn.num_registers(), 0);
  const int n = 8 * 1000 + 5;  // vector body and a scalar tail
  LaunchConfig config;
  config.grid.x = 7;
  config.block.x = 128;
  run_axpy(*ctx_, fn, config, n);
}

TEST_F(Gpu, CooperativeLaunch) {
  if (!ctx_->props().cooperative_launch) GTEST_SKIP() << "device lacks cooperative launch";
  Module mod = load(test::kAxpyBf16, "axpy_bf16.cu");
  Function fn = mod.function("axpy_bf16");
  LaunchConfig config;
  config.block.x = 256;
  config.grid.x = ctx_->props().sm_count;
  config.cooperative = true;
  ASSERT_GE(fn.max_active_blocks_per_sm(256, 0), 1);
  run_axpy(*ctx_, fn, config, 8 * 4096 + 3);
}

TEST_F(Gpu, CooperativeGridExchangesAcrossBlocks) {
  if (!ctx_->props().cooperative_launch) GTEST_SKIP() << "device lacks cooperative launch";
  Module mod = load(test::kGridExchange, "exchange.cu");
  Function fn = mod.function("grid_exchange");
  const int block = 256;
  const int per_sm = fn.max_active_blocks_per_sm(block, 0);
  ASSERT_GE(per_sm, 1);
  LaunchConfig config;
  config.block.x = block;
  config.grid.x = ctx_->props().sm_count * std::min(per_sm, 2);
  config.cooperative = true;
  const int n = 100003;
  std::vector<float> in = random_nonzero(n, 3), out(n);
  DeviceBuffer din(*ctx_, n * 4), dmid(*ctx_, n * 4), dout(*ctx_, n * 4), counter(*ctx_, 4);
  din.upload(std::span<const float>(in));
  dmid.fill_bytes(0xff);
  dout.fill_bytes(0xff);
  counter.fill_bytes(0);
  Stream stream(*ctx_);
  Event start(*ctx_), stop(*ctx_);
  start.record(stream);
  launch_args(fn, config, stream, din.ptr(), dmid.ptr(), dout.ptr(), counter.ptr(), n);
  stop.record(stream);
  stop.synchronize();
  EXPECT_GE(elapsed_ms(start, stop), 0.0f);
  dout.download(std::span<float>(out));
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = 2.0f * (in[n - 1 - i] + 1.0f);
  EXPECT_EQ(relative_l2(out, want), 0.0);
}

TEST_F(Gpu, LargeDynamicSharedMemory) {
  const int tile = 24 * 1024;  // 96 KiB of floats: above the 48 KiB default
  const int bytes = tile * 4;
  if (ctx_->props().max_shared_per_block_optin < bytes) GTEST_SKIP() << "not enough shared memory";
  Module mod = load(test::kSharedReverse, "reverse.cu");
  Function fn = mod.function("shared_reverse");
  fn.set_max_dynamic_shared(bytes);
  const int blocks = 3;
  std::vector<float> in = random_nonzero(tile * blocks, 4), out(tile * blocks);
  DeviceBuffer din(*ctx_, in.size() * 4), dout(*ctx_, in.size() * 4);
  din.upload(std::span<const float>(in));
  dout.fill_bytes(0xff);
  Stream stream(*ctx_);
  LaunchConfig config;
  config.grid.x = blocks;
  config.block.x = 256;
  config.dynamic_shared = bytes;
  launch_args(fn, config, stream, din.ptr(), dout.ptr(), tile);
  stream.synchronize();
  dout.download(std::span<float>(out));
  int mismatches = 0;
  for (int b = 0; b < blocks; ++b)
    for (int i = 0; i < tile; ++i)
      mismatches += out[b * tile + i] != in[b * tile + tile - 1 - i];
  EXPECT_EQ(mismatches, 0);
}

TEST_F(Gpu, AsyncAndDeviceToDeviceCopies) {
  const std::size_t n = 1 << 16;
  std::vector<float> in = random_nonzero(n, 5), back(n, 0.0f);
  DeviceBuffer a(*ctx_, n * 4), b(*ctx_, n * 4);
  Stream stream(*ctx_);
  a.upload_async(in.data(), n * 4, stream);
  stream.synchronize();
  b.copy_from(a);
  b.download_async(back.data(), n * 4, stream);
  stream.synchronize();
  EXPECT_EQ(back, in);
  EXPECT_THROW(a.upload(in.data(), 8, n * 4 - 4), Error);
}

TEST_F(Gpu, DeviceVariablesAreFound) {
  Module mod = load("__device__ int mpk_answer = 41;\n"
                    "extern \"C\" __global__ void bump() { mpk_answer += 1; }\n",
                    "global.cu");
  auto [ptr, bytes] = mod.global("mpk_answer");
  ASSERT_EQ(bytes, sizeof(int));
  Stream stream(*ctx_);
  launch_args(mod.function("bump"), LaunchConfig{}, stream);
  stream.synchronize();
  int value = 0;
  ctx_->make_current();
  check_cu(driver_api().cuMemcpyDtoH(&value, ptr, sizeof(int)), "cuMemcpyDtoH");
  EXPECT_EQ(value, 42);
  EXPECT_THROW(mod.global("mpk_question"), Error);
}

TEST_F(Gpu, MissingKernelIsNotFound) {
  Module mod = load(test::kAxpyBf16, "axpy_bf16.cu");
  try {
    mod.function("no_such_kernel");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
  }
}

TEST_F(Gpu, CubinForAnotherArchIsRejectedWithTheDriverError) {
  // SASS runs only on its own major version: an sm_80 cubin does not load on sm_90 and back.
  CompileRequest req;
  req.source = test::kAxpyBf16;
  req.arch = ctx_->props().cc_major == 8 ? "sm_90a" : "sm_80";
  auto cubin = compile(req).cubin;
  try {
    Module mod(*ctx_, cubin);
    FAIL() << "loaded an " << req.arch << " cubin on " << ctx_->props().arch();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cuda);
    EXPECT_NE(std::string(e.what()).find("cuModuleLoadDataEx"), std::string::npos) << e.what();
  }
}

TEST_F(Gpu, LaunchErrorDescribesTheShape) {
  Module mod = load(test::kAxpyBf16, "axpy_bf16.cu");
  Function fn = mod.function("axpy_bf16");
  LaunchConfig config;
  config.block.x = 4096;  // above every device's limit
  Stream stream(*ctx_);
  DeviceBuffer buf(*ctx_, 64);
  try {
    launch_args(fn, config, stream, buf.ptr(), buf.ptr(), buf.ptr(), 1.0f, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cuda);
    EXPECT_NE(std::string(e.what()).find("block 4096x1x1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpk::cuda
