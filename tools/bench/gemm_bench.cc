// The prefill's projection kernels alone, for a short prompt: C[M, N] = A[M, K] W[N, K]^T at M
// rows (default 39) on the Qwen3-8B shapes, the launch the prefill takes (gemm_launch,
// "chosen") and the others it could take, each timed back to back: the small mma.sync tile with
// its K split and reduce, the wgmma tile with its K split and reduce, and stream-K over the SMs.
// Weights rotate over enough copies that L2 (50-60 MB) holds none from one launch to the next;
// each row: p50/p95/p99 microseconds per launch (CUDA events around `--iters` launches, `--reps`
// times) and the weights' bytes per second at p50; every configuration with plain launches and
// again with each launch a programmatic dependent of the one before, as the prefill launches
// them ("pdl"). Operands hold a fixed non-zero pattern: the time is the subject, not the values.
// Then a group of projections of one input (`--group`, Qwen3-8B's q, k, v by default), the
// first two feeding a head norm + RoPE of heads of 128 (q's and k's): the members' own launches
// as the prefill takes them alone (each with its reduce), then the two norm launches; and the
// group as one grid of the wgmma tile with its K split, reduced by pf_gemm_reduce_group with and
// without the norms folded in.
//
//   gemm_bench [--rows 39] [--iters 40] [--reps 7] [--shapes qkv=6144x4096 ...]
//              [--group 4096+1024+1024x4096]
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

// The group `ns` (columns of each member) over K at M rows, programmatic launches: members 0
// and 1 feed a head norm + RoPE (heads of kHeadRopeDim, position 0 on). Rows: the members' own
// launches (gemm_launch each, its reduce), then with the two norm launches; the group as one
// wgmma grid of z parts with pf_gemm_reduce_group, without and with the norms folded in.
void bench_group(const cuda::Context& ctx, const PrefillKernels& k, const cuda::Stream& stream, int M,
                 const std::vector<int>& ns, int K, int iters, int reps) {
  const int sms = ctx.props().sm_count, count = int(ns.size());
  int n_total = 0;
  for (int n : ns) n_total += n;
  const size_t set_bytes = size_t(n_total) * K * 2;
  const int copies = int(std::max<size_t>(1, (size_t(256) << 20) / set_bytes + 1));
  std::vector<std::vector<cuda::DeviceBuffer>> w(static_cast<size_t>(copies));
  for (int i = 0; i < copies; ++i)
    for (int n : ns) {
      w[size_t(i)].emplace_back(ctx, size_t(n) * K * 2);
      w[size_t(i)].back().fill_bytes(uint8_t(0x3c + i % 3));
    }
  std::vector<cuda::DeviceBuffer> c, normed;
  for (int n : ns) {
    c.emplace_back(ctx, size_t(M) * n * 4);
    normed.emplace_back(ctx, size_t(M) * n * 4);
  }
  cuda::DeviceBuffer a(ctx, size_t(M) * K * 2), bias(ctx, size_t(n_total) * 4), norm_w(ctx, kHeadRopeDim * 4),
      inv_freq(ctx, kHeadRopeDim / 2 * 4), ws(ctx, size_t(gemm_workspace_bytes(sms)) + 64);  // + the pads
  a.fill_bytes(0x3d);
  bias.fill_bytes(0x3c);
  norm_w.fill_bytes(0x3f);
  inv_freq.fill_bytes(0x3a);
  const CUtensorMap ma = wgmma_activation_map(a.ptr(), M, K);
  const GemmTile& lt = k.tile(true);
  std::vector<PfTmaMaps> maps(static_cast<size_t>(copies));
  for (int i = 0; i < copies; ++i)
    for (int j = 0; j < count; ++j)
      maps[size_t(i)].w[j] = wgmma_weight_map(w[size_t(i)][size_t(j)].ptr(), ns[size_t(j)], K, lt);
  std::string name;
  for (int n : ns) name += (name.empty() ? "" : "+") + std::to_string(n);
  auto report = [&](const std::string& config, int ctas, const std::vector<double>& us) {
    const double p50 = percentile(us, 50);
    std::printf("%-8s %-26s %6d %9.2f %9.2f %9.2f %8.3f\n", "group", config.c_str(), ctas, p50, percentile(us, 95),
                percentile(us, 99), double(set_bytes) / (p50 * 1e-6) / 1e12);
  };
  std::printf("group %s x %d (members 0 and 1 normed), programmatic launches:\n", name.c_str(), K);
  auto elementwise = [](long long n) {  // as the prefill launches its element-wise kernels
    cuda::LaunchConfig c = prefill_elementwise(n);
    c.programmatic = true;
    return c;
  };
  auto norms = [&] {  // pf_head_norm_rope on members 0 and 1, as the prefill's own norm steps
    cuda::LaunchConfig lc;
    lc.grid.x = unsigned(M);
    lc.block.x = kRowThreads;
    lc.programmatic = true;
    for (int j = 0; j < 2; ++j)
      cuda::launch_args(k[PrefillKernels::Rope], lc, stream, c[size_t(j)].ptr(), norm_w.ptr(), inv_freq.ptr(),
                        normed[size_t(j)].ptr(), ns[size_t(j)] / kHeadRopeDim, kHeadRopeDim, 1e-6f, 0);
  };
  // The members' own launches (the small or the wgmma tile, split or not, and the reduce).
  int own_ctas = 0;
  auto own = [&](int i) {
    own_ctas = 0;
    for (int j = 0; j < count; ++j) {
      const int n = ns[size_t(j)];
      const GemmLaunch gl = gemm_launch(M, n, K, sms, true);
      const GemmTile& t = k.tile(gl.large);
      const TileGrid tg = tile_grid(gl.grid_m, gl.grid_n);
      cuda::LaunchConfig cfg;
      cfg.grid = {tg.x, tg.y, unsigned(gl.splits)};
      cfg.block.x = unsigned(t.threads());
      cfg.dynamic_shared = unsigned(k.gemm_smem(gl.large ? PrefillKernels::GemmLarge : PrefillKernels::GemmSmall));
      cfg.programmatic = true;
      own_ctas += int(tg.x * tg.y) * gl.splits;
      const uint64_t wj = w[size_t(i % copies)][size_t(j)].ptr(), bj = bias.ptr();
      if (gl.large)
        cuda::launch_args(k[PrefillKernels::GemmLarge], cfg, stream, ma, maps[size_t(i % copies)].w[j], bj, uint64_t(0),
                          c[size_t(j)].ptr(), ws.ptr(), M, n, K, tg.g);
      else
        cuda::launch_args(k[PrefillKernels::GemmSmall], cfg, stream, a.ptr(), wj, bj, uint64_t(0), c[size_t(j)].ptr(),
                          ws.ptr(), M, n, K, tg.g);
      if (gl.splits > 1)
        cuda::launch_args(k[PrefillKernels::GemmReduce], elementwise(1LL * M * n), stream, ws.ptr(), gl.splits, bj,
                          uint64_t(0), c[size_t(j)].ptr(), M, n);
    }
  };
  const std::vector<double> own_us = time_launches(ctx, stream, iters, reps, own);
  report("members, own launches", own_ctas, own_us);
  report("members + 2 norm launches", own_ctas, time_launches(ctx, stream, iters, reps, [&](int i) {
           own(i);
           norms();
         }));
  // The group as one grid with K in z parts.
  const GemmLaunch whole = gemm_launch(M, n_total, K, sms, true);
  int tiles = 0;
  for (int n : ns) tiles += (n + lt.bn - 1) / lt.bn;
  const int chosen = whole.large ? whole.splits : 0;  // first, then the others once each
  std::vector<int> zs{chosen};
  for (int z : {2, 3, 4, 5, 6, 8})
    if (z != chosen) zs.push_back(z);
  for (int z : zs) {
    if (z < 2 || z > K / lt.bk || int64_t(z) * M * n_total * 4 > gemm_workspace_bytes(sms) ||
        (z != chosen && tiles * z > 2 * sms))
      continue;
    PfGemmGroup grp{}, parts{};
    grp.count = count;
    for (int j = 0; j < count; ++j) {
      grp.bias[j] = bias.ptr();
      grp.c[j] = c[size_t(j)].ptr();
      grp.n[j] = ns[size_t(j)];
      grp.tiles[j] = (ns[size_t(j)] + lt.bn - 1) / lt.bn;
    }
    parts = grp;
    lay_split_partials(parts, z, M, ws.ptr());  // as PrefillProgram lays them out
    const TileGrid tg = tile_grid((M + lt.bm - 1) / lt.bm, tiles);
    cuda::LaunchConfig cfg;
    cfg.grid = {tg.x, tg.y, unsigned(z)};
    cfg.block.x = unsigned(lt.threads());
    cfg.dynamic_shared = unsigned(k.gemm_smem(PrefillKernels::GemmLargeGroup));
    cfg.programmatic = true;
    cuda::LaunchConfig rc;
    rc.grid = {unsigned(M), unsigned(count), 1};
    rc.block.x = kRowThreads;
    rc.programmatic = true;
    PfRowRope rr;
    for (int j = 0; j < 2; ++j) {
      rr.w[j] = norm_w.ptr();
      rr.inv_freq[j] = inv_freq.ptr();
      rr.out[j] = normed[size_t(j)].ptr();
      rr.heads[j] = ns[size_t(j)] / kHeadRopeDim;
      rr.d[j] = kHeadRopeDim;
      rr.eps[j] = 1e-6f;
    }
    for (const bool fold : {false, true}) {
      const auto us = time_launches(ctx, stream, iters, reps, [&](int i) {
        cuda::launch_args(k[PrefillKernels::GemmLargeGroup], cfg, stream, ma, maps[size_t(i % copies)], parts, M, K,
                          tg.g);
        cuda::launch_args(k[PrefillKernels::GemmReduceGroup], rc, stream, parts, z, grp, M, fold ? rr : PfRowRope{});
        if (!fold) norms();
      });
      report(std::string(z == chosen ? "group (chosen) z=" : "group z=") + std::to_string(z) +
                 (fold ? " norms in" : " + 2 norms"),
             int(tg.x * tg.y) * z, us);
    }
  }
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
  std::string group_arg = "4096+1024+1024x4096";
  app.add_option("--group", group_arg, "N0+N1+...xK: a group's members' columns (2 or 3, heads of 128), empty: none");
  CLI11_PARSE(app, argc, argv);
  std::vector<int> group_n;
  int group_k = 0;
  if (!group_arg.empty()) {
    const size_t x = group_arg.find('x');
    for (size_t at = 0; x != std::string::npos && at < x;) {
      const size_t plus = std::min(group_arg.find('+', at), x);
      group_n.push_back(std::atoi(group_arg.substr(at, plus - at).c_str()));
      at = plus + 1;
    }
    group_k = x == std::string::npos ? 0 : std::atoi(group_arg.substr(x + 1).c_str());
    const bool heads =
        std::all_of(group_n.begin(), group_n.end(), [](int n) { return n > 0 && n % kHeadRopeDim == 0; });
    if (group_n.size() < 2 || group_n.size() > size_t(kGroupMax) || !heads || group_k < 1) {
      std::fprintf(stderr, "gemm_bench: bad group '%s' (want N0+N1[+N2]xK, N multiples of %d)\n", group_arg.c_str(),
                   kHeadRopeDim);
      return 2;
    }
  }
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

  try {  // no device, no driver: a message, not an abort
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
        cuda::LaunchConfig rc = prefill_elementwise(1LL * M * N);
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
    if (!group_n.empty()) bench_group(ctx, k, stream, M, group_n, group_k, iters, reps);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_bench: %s\n", e.what());
    return 1;
  }
}
