// The prefill's projection kernels alone, for a short prompt: C[M, N] = A[M, K] W[N, K]^T at M
// rows (default 39) on the Qwen3-8B shapes, the launch the prefill takes (gemm_launch,
// "chosen") and the others it could take, each timed back to back: the small mma.sync tile with
// its K split and reduce, the wgmma tile with its K split and reduce, and stream-K over the SMs.
// Weights rotate over enough copies that L2 (50-60 MB) holds none from one launch to the next;
// each row: p50/p95/p99 microseconds per launch (CUDA events around `--iters` launches, `--reps`
// times) and the weights' bytes per second at p50; every configuration with plain launches and
// again with each launch a programmatic dependent of the one before, as the prefill launches
// them ("pdl"). Operands hold a fixed non-zero pattern: the time is the subject, not the values.
//
//   gemm_bench [--rows 39] [--iters 40] [--reps 7] [--shapes qkv=6144x4096 ...]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "base/percentile.h"
#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "runtime/prefill.h"

using namespace mpk;
using namespace mpk::rt;

namespace {

struct Shape {
  std::string name;
  int n = 0, k = 0;
};

// Times `launch(i)` for i = 0 .. iters - 1, reps times: microseconds per launch.
std::vector<double> time_launches(const cuda::Context& ctx, const cuda::Stream& stream, int iters, int reps,
                                  const std::function<void(int)>& launch) {
  cuda::Event a(ctx), b(ctx);
  for (int i = 0; i < 4; ++i) launch(i);  // warm-up
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    a.record(stream);
    for (int i = 0; i < iters; ++i) launch(i);
    b.record(stream);
    b.synchronize();
    us.push_back(1e3 * double(cuda::elapsed_ms(a, b)) / iters);
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gemm_bench: the prefill's projection kernels at a short prompt's rows"};
  int rows = 39, iters = 40, reps = 7;
  std::vector<std::string> shape_args{"qkv=6144x4096", "o=4096x4096", "down=4096x12288", "gate_up=24576x4096"};
  app.add_option("--rows", rows, "M")->check(CLI::Range(1, 128));
  app.add_option("--iters", iters, "launches per timing")->check(CLI::Range(1, 10000));
  app.add_option("--reps", reps, "timings per configuration")->check(CLI::Range(1, 1000));
  app.add_option("--shapes", shape_args, "name=NxK (N output columns, K inputs)");
  CLI11_PARSE(app, argc, argv);
  std::vector<Shape> shapes;
  for (const std::string& s : shape_args) {
    Shape sh;
    const size_t eq = s.find('='), x = s.find('x', eq);
    if (eq == std::string::npos || x == std::string::npos) {
      std::fprintf(stderr, "gemm_bench: bad shape '%s' (want name=NxK)\n", s.c_str());
      return 2;
    }
    sh.name = s.substr(0, eq);
    sh.n = std::stoi(s.substr(eq + 1, x - eq - 1));
    sh.k = std::stoi(s.substr(x + 1));
    shapes.push_back(sh);
  }

  cuda::Context ctx(0);
  const std::string arch = ctx.props().arch();
  const int sms = ctx.props().sm_count;
  if (!prefill_wgmma(arch)) {
    std::fprintf(stderr, "gemm_bench: %s has no wgmma tile (sm_90a only)\n", arch.c_str());
    return 1;
  }
  const cuda::CompileResult cr = compile_prefill(arch);
  const PrefillKernels k(ctx, cr.cubin, arch, true, true);
  cuda::Stream stream(ctx);
  std::printf("gemm_bench: %s (%s, %d SMs), M %d, %d launches x %d timings per row\n", ctx.props().name.c_str(),
              arch.c_str(), sms, rows, iters, reps);
  std::printf("%-8s %-26s %6s %9s %9s %9s %8s\n", "shape", "config", "CTAs", "p50 us", "p95 us", "p99 us", "TB/s");

  const int M = rows;
  auto bench = [&](const Shape& sh, bool pdl) {
    const int N = sh.n, K = sh.k;
    const size_t wbytes = size_t(N) * K * 2;
    const int copies = int(std::max<size_t>(1, (size_t(256) << 20) / wbytes + 1));
    std::vector<cuda::DeviceBuffer> w;
    for (int i = 0; i < copies; ++i) {
      w.emplace_back(ctx, wbytes);
      w.back().fill_bytes(uint8_t(0x3c + i % 3));  // bf16 ~0.01
    }
    cuda::DeviceBuffer a(ctx, size_t(M) * K * 2), c(ctx, size_t(M) * N * 4), bias(ctx, size_t(N) * 4),
        ws(ctx, size_t(std::max<int64_t>(int64_t(16) * M * N * 4, streamk_workspace_bytes(sms, M)))),
        counters(ctx, size_t(N) * 4 + 4096);
    a.fill_bytes(0x3d);
    bias.fill_bytes(0x3c);
    counters.fill_bytes(0);
    auto report = [&](const std::string& config, int ctas, const std::vector<double>& us) {
      const double p50 = percentile(us, 50);
      const std::string label = config + (pdl ? " pdl" : "");
      std::printf("%-8s %-26s %6d %9.2f %9.2f %9.2f %8.3f\n", sh.name.c_str(), label.c_str(), ctas, p50,
                  percentile(us, 95), percentile(us, 99), double(wbytes) / (p50 * 1e-6) / 1e12);
    };
    auto reduce = [&](int splits) {
      cuda::LaunchConfig rc;
      rc.block.x = 256;
      rc.grid.x = unsigned(std::clamp<long long>((1LL * M * N + 255) / 256, 1, 65535));
      rc.programmatic = pdl;
      cuda::launch_args(k[PrefillKernels::GemmReduce], rc, stream, ws.ptr(), splits, bias.ptr(), uint64_t(0), c.ptr(),
                        M, N);
    };
    const GemmLaunch chosen = gemm_launch(M, N, K, sms, true);  // what the prefill takes here
    // Tile t's grid over the output with K split in `splits`, for entry `id`.
    auto split_launch = [&](const GemmTile& t, PrefillKernels::Id id, int splits, TileGrid& tg) {
      tg = tile_grid((M + t.bm - 1) / t.bm, (N + t.bn - 1) / t.bn);
      cuda::LaunchConfig cfg;
      cfg.grid = {tg.x, tg.y, unsigned(splits)};
      cfg.block.x = unsigned(t.threads());
      cfg.dynamic_shared = unsigned(k.gemm_smem(id));
      cfg.programmatic = pdl;
      return cfg;
    };
    // The small mma.sync tile with K split in `splits` (+ the reduce).
    const GemmTile& st = k.tile(false);
    for (int splits : {chosen.large ? 0 : chosen.splits, 1, 2, 4, 8, 16}) {
      if (splits < 1 || splits > (K / st.bk) / 4 || int64_t(splits) * M * N * 4 > int64_t(ws.size())) continue;
      TileGrid tg;
      const cuda::LaunchConfig cfg = split_launch(st, PrefillKernels::GemmSmall, splits, tg);
      const auto us = time_launches(ctx, stream, iters, reps, [&](int i) {
        cuda::launch_args(k[PrefillKernels::GemmSmall], cfg, stream, a.ptr(), w[size_t(i % copies)].ptr(), bias.ptr(),
                          uint64_t(0), c.ptr(), ws.ptr(), M, N, K, tg.g);
        if (splits > 1) reduce(splits);
      });
      report(std::string(splits == chosen.splits && !chosen.large ? "small (chosen) z=" : "small z=") +
                 std::to_string(splits),
             int(tg.x * tg.y) * splits, us);
    }
    // The wgmma tile with K split in `splits` (+ the reduce).
    const GemmTile& lt = k.tile(true);
    const CUtensorMap ma = wgmma_activation_map(a.ptr(), M, K);
    std::vector<CUtensorMap> mw;
    for (const auto& b : w) mw.push_back(wgmma_weight_map(b.ptr(), N, K, lt));
    for (int splits : {chosen.large ? chosen.splits : 0, 1, 2, 4, 8, 16}) {
      if (splits < 1) continue;
      TileGrid tg;
      const cuda::LaunchConfig cfg = split_launch(lt, PrefillKernels::GemmLarge, splits, tg);
      if (int64_t(tg.x) * tg.y * splits > 2 * sms || splits > K / lt.bk ||
          int64_t(splits) * M * N * 4 > int64_t(ws.size()))
        continue;
      const auto us = time_launches(ctx, stream, iters, reps, [&](int i) {
        cuda::launch_args(k[PrefillKernels::GemmLarge], cfg, stream, ma, mw[size_t(i % copies)], bias.ptr(),
                          uint64_t(0), c.ptr(), ws.ptr(), M, N, K, tg.g);
        if (splits > 1) reduce(splits);
      });
      report(std::string(chosen.large && splits == chosen.splits ? "wgmma (chosen) z=" : "wgmma z=") +
                 std::to_string(splits),
             int(tg.x * tg.y) * splits, us);
    }
    // Stream-K over `ctas` CTAs (at most one per SM), one member with its bias.
    const int tiles = (N + lt.bn - 1) / lt.bn, ks = (K + lt.bk - 1) / lt.bk;
    for (int ctas : {streamk_ctas(int64_t(tiles) * ks, sms), sms / 2, tiles}) {
      if (ctas < 1 || ctas > sms || ctas > tiles * ks) continue;
      std::vector<PfTmaMaps> maps(w.size());
      std::vector<PfGemmGroup> groups(w.size());
      for (size_t i = 0; i < w.size(); ++i) {
        maps[i].w[0] = mw[i];
        PfGemmGroup& g = groups[i];
        g.w[0] = w[i].ptr(), g.bias[0] = bias.ptr(), g.c[0] = c.ptr(), g.n[0] = N, g.tiles[0] = tiles, g.count = 1;
      }
      cuda::LaunchConfig cfg;
      cfg.grid.x = unsigned(ctas);
      cfg.block.x = unsigned(lt.threads());
      cfg.dynamic_shared = unsigned(lt.smem_bytes());
      cfg.programmatic = pdl;
      const auto us = time_launches(ctx, stream, iters, reps, [&](int i) {
        cuda::launch_args(*k.streamk(), cfg, stream, ma, maps[size_t(i % copies)], groups[size_t(i % copies)],
                          uint64_t(0), ws.ptr(), counters.ptr(), M, K, PfHeadRope{});
      });
      report("stream-K", ctas, us);
    }
  };
  for (const bool pdl : {false, true})
    for (const Shape& sh : shapes) bench(sh, pdl);
  return 0;
}
