// A separate process for the kernel-cache round trip: `publish DB` compiles a kernel with NVRTC
// for this GPU and publishes it; `load DB` must find it in the cache (no compile), launches it
// and checks the result. Exit codes: 0 ok, 2 usage, 3 cache miss, 4 wrong result, 5 error.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "cache/cache.h"
#include "cuda/driver.h"
#include "cuda/nvrtc.h"

namespace {

const char* kSource = R"(
#include <cuda_bf16.h>
extern "C" __global__ void scale_add(const __nv_bfloat16* x, float a, float b, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * __bfloat162float(x[i]) + b;
}
)";

mpk::cache::CacheKey make_key(const std::string& arch) {
  auto [maj, min] = mpk::cuda::nvrtc_version();
  mpk::cache::CacheKey k;
  k.task.op_kind = "scale_add";
  k.task.shapes = {{4099}, {4099}};
  k.task.dtypes = {"bf16", "f32"};
  k.task.layout = "contiguous";
  k.arch = arch;
  k.nvrtc_version = std::to_string(maj) + "." + std::to_string(min);
  k.driver_version = std::to_string(mpk::cuda::driver_version());
  k.codegen_version = "test-1";
  k.compile_options = {"--std=c++17"};
  k.source_hash = std::to_string(std::hash<std::string>{}(kSource));
  return k;
}

int run(const std::string& role, const std::string& db) {
  mpk::cuda::Context ctx(0);
  std::string arch = ctx.props().arch();
  mpk::cache::CacheOptions opts;
  opts.path = db;
  mpk::cache::Cache cache(opts);
  auto key = make_key(arch);
  if (role == "publish") {
    mpk::cuda::CompileRequest req;
    req.source = kSource;
    req.arch = arch;
    req.options = {"--std=c++17"};
    auto res = mpk::cuda::compile(req);
    mpk::cache::Entry e;
    e.cubin = res.cubin;
    e.params_json = R"({"block":256})";
    e.verification_json = R"({"passed":true,"method":"cache round-trip test"})";
    cache.publish(key, e);
    std::printf("published %s for %s (%zu bytes)\n", mpk::cache::key_digest(key).c_str(),
                arch.c_str(), res.cubin.size());
    return 0;
  }
  auto entry = cache.load(key);
  if (!entry) {
    std::fprintf(stderr, "cache miss for %s\n", mpk::cache::key_digest(key).c_str());
    return 3;
  }
  const int n = 4099;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<uint16_t> x(n);
  for (auto& v : x) v = mpk::f32_to_bf16(d(rng) + 0.01f);
  std::vector<float> y(n, NAN);
  mpk::cuda::Module mod(ctx, entry->cubin);
  auto fn = mod.function("scale_add");
  mpk::cuda::DeviceBuffer dx(ctx, n * 2), dy(ctx, n * 4);
  dx.upload(x.data(), n * 2);
  dy.upload(y.data(), n * 4);  // poisoned with NaN
  mpk::cuda::Stream stream(ctx);
  CUdeviceptr px = dx.ptr(), py = dy.ptr();
  float a = 1.5f, b = -0.25f;
  int nn = n;
  void* params[] = {&px, &a, &b, &py, &nn};
  mpk::cuda::LaunchConfig cfg;
  cfg.grid.x = (n + 255) / 256;
  cfg.block.x = 256;
  mpk::cuda::launch(fn, cfg, stream, params);
  stream.synchronize();
  dy.download(y.data(), n * 4);
  for (int i = 0; i < n; ++i) {
    float want = a * mpk::bf16_to_f32(x[i]) + b;
    if (!(std::fabs(y[i] - want) <= 1e-6f * std::fabs(want) + 1e-6f)) {
      std::fprintf(stderr, "y[%d] = %g, want %g\n", i, y[i], want);
      return 4;
    }
  }
  std::printf("loaded from cache, launched, %d outputs correct\n", n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "publish") && std::strcmp(argv[1], "load"))) {
    std::fprintf(stderr, "usage: %s publish|load DB\n", argv[0]);
    return 2;
  }
  try {
    return run(argv[1], argv[2]);
  } catch (const mpk::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", mpk::error_kind_name(e.kind()), e.what());
    return 5;
  }
}
