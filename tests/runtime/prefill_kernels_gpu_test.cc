// The tensor-core prefill's kernels alone on the device, against double-precision formulas on
// the same bf16 operands with their outputs poisoned first: the GEMM tiles with and without a K
// split, their groups, the SwiGLU, stream-K and head norm + RoPE entries, the attention, and the
// head norm row kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_device.h"
#include "ir/prefill_nests.h"
#include "runtime/prefill.h"

namespace mpk::rt {
namespace {

using mpk::testing::have_device;

// A float rounded to the nearest-even bf16 (its bits), and bf16 bits widened to float.
uint16_t bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
float widen(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Pseudo-random floats in [-1, 1): xorshift32 from `state` (test operands with no structure).
struct Uniform {
  uint32_t state;
  explicit Uniform(uint32_t seed) : state(seed) {}
  float operator()() {
    state ^= state << 13, state ^= state >> 17, state ^= state << 5;
    return float(state % 20000) / 10000.f - 1.f;
  }
};

// The prefill's source for `source_arch` compiled for the device's arch (on an H200, "sm_90a"
// has the wgmma entries and "sm_80" only the mma.sync ones); empty where the source needs wgmma
// and the device has none.
std::optional<PrefillKernels> kernels_for(const cuda::Context& ctx, const char* source_arch) {
  if (prefill_wgmma(source_arch) && !prefill_wgmma(ctx.props().arch())) return std::nullopt;
  cuda::CompileRequest req;
  req.source = prefill_source(source_arch);
  req.name = "mpk_prefill.cu";
  req.arch = ctx.props().arch();
  req.options = prefill_compile_options();
  const cuda::CompileResult cr = cuda::compile(req);
  // Programmatic launches and the stream-K entries, as the runtime has them when they are on.
  return std::optional<PrefillKernels>(std::in_place, ctx, cr.cubin, source_arch, true, true);
}

// Random GEMM operands from `seed` (xorshift, in [-1, 1): A [M][K] and W [N][K] rounded to bf16,
// then a bias [N] and a residual [M][N]) and the exact product A W^T in double ([M][N]).
struct GemmOperands {
  std::vector<uint16_t> a, w;
  std::vector<float> bias, res;
  std::vector<double> dot;
};
GemmOperands random_gemm(int M, int N, int K, uint32_t seed) {
  GemmOperands o{std::vector<uint16_t>(size_t(M) * K), std::vector<uint16_t>(size_t(N) * K), std::vector<float>(N),
                 std::vector<float>(size_t(M) * N), std::vector<double>(size_t(M) * N)};
  Uniform rnd(seed);
  for (auto& x : o.a) x = bf16(rnd());
  for (auto& x : o.w) x = bf16(rnd());
  for (auto& x : o.bias) x = rnd();
  for (auto& x : o.res) x = rnd();
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = 0;
      for (int t = 0; t < K; ++t) acc += double(widen(o.a[size_t(i) * K + t])) * widen(o.w[size_t(j) * K + t]);
      o.dot[size_t(i) * N + j] = acc;
    }
  return o;
}

// Every tile shape, with and without a K split, on shapes with partial tiles in M, N and K:
// against a double-precision sum of the same bf16 operands, plus bias and residual. The module
// is the prefill's source for `source_arch` compiled for the device: on an H200, "sm_90a" runs
// the wgmma large tile and "sm_80" the mma.sync one.
void check_gemm_tiles(const char* source_arch, int M, int N, int K) {
  cuda::Context ctx(0);
  const std::optional<PrefillKernels> kernels = kernels_for(ctx, source_arch);
  if (!kernels) return;  // no wgmma here
  const PrefillKernels& k = *kernels;
  cuda::Stream stream(ctx);
  std::printf("[prefill gemm] %s source, M %d N %d K %d\n", source_arch, M, N, K);
  const GemmOperands op = random_gemm(M, N, K, 12345);
  const auto& [a, w, bias, res, dot] = op;
  std::vector<double> want(size_t(M) * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const size_t e = size_t(i) * N + j;
      want[e] = dot[e] + bias[size_t(j)] + res[e];
    }
  cuda::DeviceBuffer da(ctx, a.size() * 2), dw(ctx, w.size() * 2), db(ctx, N * 4), dr(ctx, res.size() * 4),
      dc(ctx, res.size() * 4), ws(ctx, size_t(4) * M * N * 4);
  da.upload(a.data(), a.size() * 2);
  dw.upload(w.data(), w.size() * 2);
  db.upload(bias.data(), N * 4);
  dr.upload(res.data(), res.size() * 4);
  // The wgmma tile reads its operands through TMA descriptors.
  const bool wgmma = k.tile(true).wgmma;
  const CUtensorMap ma = wgmma ? wgmma_activation_map(da.ptr(), M, K) : CUtensorMap{};
  struct Case { PrefillKernels::Id id; int bm, bn, splits; };
  for (const Case c : {Case{PrefillKernels::GemmLarge, 128, 256, 1}, Case{PrefillKernels::GemmLarge, 128, 256, 2},
                       Case{PrefillKernels::GemmSmall, 64, 128, 1}, Case{PrefillKernels::GemmSmall, 64, 128, 3}}) {
    const bool large = c.id == PrefillKernels::GemmLarge;
    dc.fill_bytes(0xff);  // NaN: an element left unwritten fails
    cuda::LaunchConfig cfg;
    const TileGrid tg = tile_grid((M + c.bm - 1) / c.bm, (N + c.bn - 1) / c.bn);
    cfg.grid = {tg.x, tg.y, unsigned(c.splits)};
    cfg.block.x = unsigned(k.tile(large).threads());
    cfg.dynamic_shared = unsigned(k.gemm_smem(c.id));
    if (large && wgmma)
      cuda::launch_args(k[c.id], cfg, stream, ma, wgmma_weight_map(dw.ptr(), N, K, k.tile(true)), db.ptr(),
                        dr.ptr(), dc.ptr(), ws.ptr(), M, N, K, tg.g);
    else
      cuda::launch_args(k[c.id], cfg, stream, da.ptr(), dw.ptr(), db.ptr(), dr.ptr(), dc.ptr(), ws.ptr(), M, N, K,
                        tg.g);
    if (c.splits > 1) {
      cuda::LaunchConfig rc;
      rc.grid.x = 64;
      rc.block.x = 256;
      cuda::launch_args(k[PrefillKernels::GemmReduce], rc, stream, ws.ptr(), c.splits, db.ptr(), dr.ptr(), dc.ptr(), M, N);
    }
    stream.synchronize();
    std::vector<float> got(res.size());
    dc.download(got.data(), got.size() * 4);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "element " << i << " tile " << c.bm << "x" << c.bn;
      worst = std::max(worst, std::abs(double(got[i]) - want[i]));
    }
    // fp32 accumulation of K products of magnitude <= 1: far below 1e-3.
    EXPECT_LT(worst, 1e-3) << c.bm << "x" << c.bn << " splits " << c.splits;
    std::printf("[prefill gemm] %dx%d, %d split(s): max abs error %.2e\n", c.bm, c.bn, c.splits, worst);
  }
  // Grouped: the output columns as two projections of the same input ([0, 264) and [264, 520)
  // of W) in one grid, bias added, no residual.
  const int n0 = 264;
  cuda::DeviceBuffer c0(ctx, size_t(M) * n0 * 4), c1(ctx, size_t(M) * (N - n0) * 4);
  // The narrow wgmma tile's group entry too, where it is compiled (id unused for it), and the
  // wgmma group with its K split in three (each member's partials, pf_gemm_reduce_group).
  for (auto [id, bm, bn, large, splits] : {std::tuple{PrefillKernels::GemmLargeGroup, 128, 256, true, 1},
                                           std::tuple{PrefillKernels::GemmSmallGroup, 64, 128, false, 1},
                                           std::tuple{PrefillKernels::GemmLargeGroup, 128, 128, true, 1},
                                           std::tuple{PrefillKernels::GemmLargeGroup, 128, 256, true, 3}}) {
    const bool narrow = large && bn == 128;
    if (narrow && !k.narrow_group()) continue;
    if (splits > 1 && !wgmma) continue;  // the K-split group is the wgmma tile's
    c0.fill_bytes(0xff);
    c1.fill_bytes(0xff);
    PfGemmGroup g{};
    g.w[0] = dw.ptr(), g.w[1] = dw.ptr() + uint64_t(n0) * K * 2;
    g.bias[0] = db.ptr(), g.bias[1] = db.ptr() + uint64_t(n0) * 4;
    g.c[0] = c0.ptr(), g.c[1] = c1.ptr();
    g.n[0] = n0, g.n[1] = N - n0;
    g.tiles[0] = (n0 + bn - 1) / bn, g.tiles[1] = (N - n0 + bn - 1) / bn;
    g.count = 2;
    cuda::LaunchConfig cfg;
    const TileGrid tg = tile_grid((M + bm - 1) / bm, g.tiles[0] + g.tiles[1]);
    cfg.grid = {tg.x, tg.y, unsigned(splits)};
    cfg.block.x = unsigned(narrow ? k.narrow_tile()->threads() : k.tile(large).threads());
    cfg.dynamic_shared = unsigned(narrow ? k.narrow_tile()->smem_bytes() : k.gemm_smem(id));
    // With the split the tiles write member j's partials ([3][M][n[j]], after member 0's).
    PfGemmGroup parts = g;
    if (splits > 1) {
      ws.fill_bytes(0xff);
      parts.c[1] = ws.ptr() + uint64_t(splits) * M * n0 * 4;
      parts.c[0] = ws.ptr();
      ASSERT_LE(size_t(splits) * M * N * 4, ws.size());
    }
    if (large && wgmma) {
      PfTmaMaps maps{};
      for (int j = 0; j < 2; ++j)
        maps.w[j] = wgmma_weight_map(g.w[j], g.n[j], K, narrow ? *k.narrow_tile() : k.tile(large));
      cuda::launch_args(narrow ? *k.narrow_group() : k[id], cfg, stream, ma, maps, parts, M, K, tg.g);
    } else {
      cuda::launch_args(k[id], cfg, stream, da.ptr(), g, M, K, tg.g);
    }
    if (splits > 1) {  // a block per row of each member, no head norm
      cuda::LaunchConfig rc;
      rc.grid = {unsigned(M), 2, 1};
      rc.block.x = kRowThreads;
      cuda::launch_args(k[PrefillKernels::GemmReduceGroup], rc, stream, parts, splits, g, M, PfRowRope{});
    }
    stream.synchronize();
    std::vector<float> g0(size_t(M) * n0), g1(size_t(M) * (N - n0));
    c0.download(g0.data(), g0.size() * 4);
    c1.download(g1.data(), g1.size() * 4);
    double worst = 0;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        const float got = j < n0 ? g0[size_t(i) * n0 + j] : g1[size_t(i) * (N - n0) + j - n0];
        ASSERT_TRUE(std::isfinite(got)) << i << " " << j;
        worst = std::max(worst, std::abs(double(got) - (want[size_t(i) * N + j] - res[size_t(i) * N + j])));
      }
    EXPECT_LT(worst, 1e-3) << bm << "x" << bn << " group, splits " << splits;
    std::printf("[prefill gemm] %dx%d group of 2, %d split(s): max abs error %.2e\n", bm, bn, splits, worst);
  }
  if (!k.swiglu()) return;
  // The SwiGLU entry: W's rows [0, I) as gate, [I, 2 I) as up, no bias; out = silu(gate) * up in
  // fp32 and in bf16 (the down projection's operand).
  const int I = N / 2;
  for (int bf16_out : {0, 1}) {
    cuda::DeviceBuffer out(ctx, size_t(M) * I * 4);
    out.fill_bytes(0xff);
    const TileGrid tg = tile_grid((M + 127) / 128, (I + 127) / 128);
    // One CTA per tile with fp32 out; with bf16 out one CTA walks all tiles, the ring running on
    // across them (wgmma_swiglu_config walks from five waves; the kernel walks any grid it gets).
    cuda::LaunchConfig cfg = wgmma_swiglu_config(tg, int(tg.x * tg.y));
    if (bf16_out) cfg.grid = {1, 1, 1};
    cuda::launch_args(*k.swiglu(), cfg, stream, ma, wgmma_gate_up_map(dw.ptr(), I, K),
                      wgmma_gate_up_map(dw.ptr() + uint64_t(I) * K * 2, I, K), out.ptr(), M, I, K, tg.g, bf16_out,
                      int(tg.x), int(tg.y));
    stream.synchronize();
    std::vector<float> got(size_t(M) * I);
    std::vector<uint16_t> got16(size_t(M) * I);
    if (bf16_out) out.download(got16.data(), got16.size() * 2); else out.download(got.data(), got.size() * 4);
    double worst = 0;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < I; ++j) {
        const size_t o = size_t(i) * I + j;
        const double gate = want[size_t(i) * N + j] - bias[size_t(j)] - res[size_t(i) * N + j];
        const double up = want[size_t(i) * N + I + j] - bias[size_t(I + j)] - res[size_t(i) * N + I + j];
        const double ref = gate / (1 + std::exp(-gate)) * up;
        const double v = bf16_out ? double(widen(got16[o])) : double(got[o]);
        ASSERT_TRUE(std::isfinite(v)) << i << " " << j;
        worst = std::max(worst, std::abs(v - ref) / (1 + std::abs(ref)));
      }
    // fp32: the products' error (the GEMM's, below 1e-3) times the other factor; bf16: half an ulp
    // is 2^-9 of the value.
    EXPECT_LT(worst, bf16_out ? 8e-3 : 1e-3) << "swiglu, bf16 " << bf16_out;
    std::printf("[prefill gemm] swiglu (%s out): max relative error %.2e\n", bf16_out ? "bf16" : "fp32", worst);
  }
}

// The attention entry alone, on random data with no structure to hide behind: q in [-2, 2),
// keys and values bf16 in [-1, 1), a cached prefix of pos0 positions, T query rows (a partial
// last CTA), query heads sharing KV heads; against a double-precision causal softmax of the same
// operands (q rounded to bf16 as the kernel stages it). Cache slots past the last position and
// the output, with 4 KiB past its end, start as NaN: a read past the keys, an element left
// unwritten or a write past the output fails. `k`: the prefill's kernels for some source arch
// (enqueue_attention picks the entry).
void check_attention(const cuda::Context& ctx, const PrefillKernels& k, int T, int pos0, int Hq, int Hkv, int D,
                     bool bf16_out) {
  cuda::Stream stream(ctx);
  const int cap = pos0 + T + 40;
  Uniform rnd(777u + uint32_t(T * 31 + D));
  std::vector<float> q(size_t(T) * Hq * D);
  for (auto& x : q) x = 2 * rnd();
  std::vector<uint16_t> kc(size_t(Hkv) * cap * D, 0x7fc0), vc(kc.size(), 0x7fc0);  // NaN past the keys
  for (int h = 0; h < Hkv; ++h)
    for (int p = 0; p < pos0 + T; ++p)
      for (int d = 0; d < D; ++d) {
        const size_t i = (size_t(h) * cap + p) * D + d;
        kc[i] = bf16(rnd()), vc[i] = bf16(rnd());
      }
  const double scale = 1 / std::sqrt(double(D));
  // A write past T rows (or past the bf16 output's half) changes a poison byte of the margin.
  const size_t out_bytes = q.size() * (bf16_out ? 2 : 4), margin = 4096;
  cuda::DeviceBuffer dq(ctx, q.size() * 4), dk(ctx, kc.size() * 2), dv(ctx, vc.size() * 2),
      dout(ctx, q.size() * 4 + margin);
  dq.upload(q.data(), q.size() * 4);
  dk.upload(kc.data(), kc.size() * 2);
  dv.upload(vc.data(), vc.size() * 2);
  dout.fill_bytes(0xff);
  enqueue_attention(k, stream, {dq.ptr(), dk.ptr(), dv.ptr(), dout.ptr(), T, Hq, Hkv, D, cap, pos0, float(scale),
                                bf16_out});
  stream.synchronize();
  std::vector<float> got(q.size());
  std::vector<uint16_t> got16(q.size());
  if (bf16_out) dout.download(got16.data(), got16.size() * 2); else dout.download(got.data(), got.size() * 4);
  std::vector<uint8_t> past(dout.size() - out_bytes);
  dout.download(past.data(), past.size(), out_bytes);
  for (size_t i = 0; i < past.size(); ++i) ASSERT_EQ(past[i], 0xff) << "byte " << i << " past the output was written";
  double worst = 0;
  std::vector<double> w(size_t(pos0 + T));
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < Hq; ++h) {
      const int kvh = h / (Hq / Hkv), n = pos0 + t + 1;
      const float* qr = &q[(size_t(t) * Hq + h) * D];
      double mx = -INFINITY, l = 0;
      for (int p = 0; p < n; ++p) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += double(widen(bf16(qr[d]))) * widen(kc[(size_t(kvh) * cap + p) * D + d]);
        w[size_t(p)] = dot * scale;
        mx = std::max(mx, w[size_t(p)]);
      }
      for (int p = 0; p < n; ++p) l += (w[size_t(p)] = std::exp(w[size_t(p)] - mx));
      for (int d = 0; d < D; ++d) {
        double ref = 0;
        for (int p = 0; p < n; ++p) ref += w[size_t(p)] * widen(vc[(size_t(kvh) * cap + p) * D + d]);
        ref /= l;
        const size_t o = (size_t(t) * Hq + h) * D + d;
        const double v = bf16_out ? double(widen(got16[o])) : double(got[o]);
        ASSERT_TRUE(std::isfinite(v)) << "row " << t << " head " << h << " d " << d;
        worst = std::max(worst, std::abs(v - ref));
      }
    }
  // P rounded to bf16 (2^-9 relative) over values of magnitude <= 1, plus bf16 output rounding.
  EXPECT_LT(worst, bf16_out ? 1e-2 : 5e-3) << "T " << T << " pos0 " << pos0 << " D " << D;
  std::printf("[prefill attention] %s T %d pos0 %d heads %d/%d D %d%s: max abs error %.2e\n",
              k.attention_wgmma() && D == 128 ? "wgmma" : "mma.sync", T, pos0, Hq, Hkv, D, bf16_out ? " bf16 out" : "",
              worst);
}

// Both sources, compiled for the device: on an H200, "sm_90a" runs head dimension 128 on the
// wgmma entry and "sm_80" on the mma.sync one.
TEST(PrefillGpuAttention, MatchesACausalSoftmaxInDoublePrecision) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  cuda::Context ctx(0);
  for (const char* source_arch : {"sm_90a", "sm_80"}) {
    const std::optional<PrefillKernels> kernels = kernels_for(ctx, source_arch);
    if (!kernels) continue;  // no wgmma here
    const PrefillKernels& k = *kernels;
    check_attention(ctx, k, 300, 0, 8, 2, 128, false);    // partial last block of rows and keys
    check_attention(ctx, k, 200, 77, 4, 4, 128, true);    // a cached prefix, no grouping, bf16 out
    check_attention(ctx, k, 520, 130, 4, 1, 128, false);  // rounds of the ring past its stages
    check_attention(ctx, k, 40, 0, 2, 2, 128, false);     // one warpgroup's rows only
    check_attention(ctx, k, 129, 1000, 6, 2, 64, false);  // one row past a CTA, a long prefix
    check_attention(ctx, k, 70, 5, 2, 1, 80, false);      // D padded to 128
    check_attention(ctx, k, 50, 3, 4, 2, 36, false);      // rows of 36: pairs, not 16-byte chunks
    check_attention(ctx, k, 33, 0, 2, 2, 16, false);
  }
}

TEST(PrefillGpuGemm, TileShapesAndKSplitsMatchAnExactSum) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  // 2 x 3 large tiles, 4 x 5 small; K = 4.25 large steps; a long K with an odd tail; 9 large
  // tile rows (tile order: two groups of 5, the last block row idle), 18 small (three of 6); an
  // odd N (the GEMM epilogues' single columns; even N stores pairs) and an odd N / 2 (the SwiGLU
  // entry's width: its single columns).
  for (const char* arch : {"sm_90a", "sm_80"}) {
    check_gemm_tiles(arch, 200, 520, 136);
    check_gemm_tiles(arch, 130, 300, 1048);
    check_gemm_tiles(arch, 1100, 520, 136);
    check_gemm_tiles(arch, 70, 301, 136);
    check_gemm_tiles(arch, 70, 302, 136);
  }
}

// The stream-K entries (one tile row, the K steps dealt to `ctas` CTAs): W's rows as two group
// members ([0, 264) and the rest) with a bias, as one projection with the residual too, and
// as gate and up of the SwiGLU entry (bf16 out), against a double-precision sum of the same bf16
// operands; outputs poisoned first. Each launch runs three times: the counters the kernels set
// back to zero and the partials' fixed order give the same bits every time.
void check_streamk(const cuda::Context& ctx, const PrefillKernels& k, int M, int N, int K, int ctas) {
  cuda::Stream stream(ctx);
  const GemmOperands op = random_gemm(M, N, K, 999u + uint32_t(M * 7 + ctas));
  const auto& [a, w, bias, res, dot] = op;
  const GemmTile& tile = k.tile(true);
  const int ks = (K + tile.bk - 1) / tile.bk;
  cuda::DeviceBuffer da(ctx, a.size() * 2), dw(ctx, w.size() * 2), db(ctx, N * 4), dr(ctx, res.size() * 4),
      dc(ctx, res.size() * 4), ws(ctx, size_t(streamk_workspace_bytes(ctas, M))), counters(ctx, 4096 * 4);
  da.upload(a.data(), a.size() * 2);
  dw.upload(w.data(), w.size() * 2);
  db.upload(bias.data(), N * 4);
  dr.upload(res.data(), res.size() * 4);
  const std::vector<uint32_t> zeros(4096, 0u);
  counters.upload(zeros.data(), zeros.size() * 4);
  const CUtensorMap ma = wgmma_activation_map(da.ptr(), M, K);
  cuda::LaunchConfig cfg;
  cfg.block.x = unsigned(tile.threads());
  cfg.dynamic_shared = unsigned(tile.smem_bytes());
  auto run3 = [&](const std::function<void()>& launch, size_t bytes) {
    std::vector<uint8_t> first(bytes), again(bytes);
    for (int r = 0; r < 3; ++r) {
      dc.fill_bytes(0xff);  // NaN: an element left unwritten fails
      launch();
      stream.synchronize();
      dc.download(r ? again.data() : first.data(), bytes);
      if (r) {
        ASSERT_EQ(first, again) << "run " << r << " of M " << M << " N " << N << " K " << K << " on " << ctas;
      }
    }
  };
  // Two members in dc ([M][264] then [M][N - 264]), or one with the residual.
  for (const bool residual : {false, true}) {
    PfTmaMaps maps{};
    PfGemmGroup g{};
    const int n0 = residual ? N : 264;
    g.count = residual ? 1 : 2;
    for (int j = 0; j < g.count; ++j) {
      g.w[j] = dw.ptr() + uint64_t(j ? n0 : 0) * K * 2;
      g.bias[j] = db.ptr() + uint64_t(j ? n0 : 0) * 4;
      g.c[j] = dc.ptr() + uint64_t(j ? n0 : 0) * M * 4;
      g.n[j] = j ? N - n0 : n0;
      g.tiles[j] = (g.n[j] + tile.bn - 1) / tile.bn;
      maps.w[j] = wgmma_weight_map(g.w[j], g.n[j], K, tile);
    }
    ASSERT_LE(ctas, (g.tiles[0] + g.tiles[1]) * ks);
    cfg.grid = {unsigned(ctas), 1, 1};
    run3([&] {
      cuda::launch_args(*k.streamk(), cfg, stream, ma, maps, g, residual ? dr.ptr() : 0, ws.ptr(), counters.ptr(), M, K,
                        PfHeadRope{});
    }, res.size() * 4);
    std::vector<float> got(res.size());
    dc.download(got.data(), got.size() * 4);
    double worst = 0;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        const int m = j < n0 ? 0 : 1, nm = m ? N - n0 : n0, jm = m ? j - n0 : j;
        const float v = got[size_t(m ? n0 : 0) * M + size_t(i) * nm + jm];
        ASSERT_TRUE(std::isfinite(v)) << i << " " << j;
        const double want = dot[size_t(i) * N + j] + bias[size_t(j)] + (residual ? res[size_t(i) * N + j] : 0.0);
        worst = std::max(worst, std::abs(double(v) - want));
      }
    EXPECT_LT(worst, 1e-3) << "M " << M << " N " << N << " K " << K << " on " << ctas << " residual " << residual;
    std::printf("[prefill stream-K] M %d N %d K %d, %d CTAs%s: max abs error %.2e\n", M, N, K, ctas,
                residual ? ", one member + residual" : ", two members", worst);
  }
  // gate = W's rows [0, I), up = [I, 2 I); out bf16.
  const int I = N / 2;
  ASSERT_LE(ctas, (I + tile.bn / 2 - 1) / (tile.bn / 2) * ks);
  run3([&] {
    cuda::launch_args(*k.streamk_swiglu(), cfg, stream, ma, wgmma_gate_up_map(dw.ptr(), I, K),
                      wgmma_gate_up_map(dw.ptr() + uint64_t(I) * K * 2, I, K), dc.ptr(), ws.ptr(), counters.ptr(), M,
                      I, K, 1);
  }, size_t(M) * I * 2);
  std::vector<uint16_t> got16(size_t(M) * I);
  dc.download(got16.data(), got16.size() * 2);
  double worst = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < I; ++j) {
      const double gate = dot[size_t(i) * N + j], up = dot[size_t(i) * N + I + j];
      const double ref = gate / (1 + std::exp(-gate)) * up, v = widen(got16[size_t(i) * I + j]);
      ASSERT_TRUE(std::isfinite(v)) << i << " " << j;
      worst = std::max(worst, std::abs(v - ref) / (1 + std::abs(ref)));
    }
  // Rounded to bf16 (2^-8 relative at most), with the products' error: as check_gemm_tiles.
  EXPECT_LT(worst, 8e-3) << "swiglu M " << M << " I " << I << " K " << K << " on " << ctas;
  std::printf("[prefill stream-K] swiglu M %d I %d K %d, %d CTAs: max relative error %.2e\n", M, I, K, ctas, worst);
}

// Runs that hold whole tiles, runs inside one tile, tiles split over many CTAs; one row, a
// warpgroup's rows (the second idle), both warpgroups; K a partial step; odd widths.
TEST(PrefillGpuGemm, StreamKMatchesAnExactSumAndRepeatsItsBits) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  cuda::Context ctx(0);
  const std::optional<PrefillKernels> kernels = kernels_for(ctx, "sm_90a");
  if (!kernels) GTEST_SKIP() << "no wgmma on this device: stream-K is sm_90a's";
  check_streamk(ctx, *kernels, 39, 1040, 1000, 80);  // 16 steps a tile, 5 or 6 tiles: a step or so a CTA
  check_streamk(ctx, *kernels, 1, 1040, 1000, 7);
  check_streamk(ctx, *kernels, 64, 1300, 520, 3);     // runs of two tiles and more
  check_streamk(ctx, *kernels, 128, 774, 136, 5);
  check_streamk(ctx, *kernels, 70, 602, 4104, 1);     // one CTA: every tile whole
  check_streamk(ctx, *kernels, 39, 1041, 520, 9);     // an odd width: single columns
}

// pf_gemm_reduce_group on random partials of three members ([3][M][n] each, 8-byte aligned
// one after another), q and k (heads of kHeadRopeDim) with their head norm + RoPE folded in,
// against the launches the fold replaces: pf_gemm_reduce per member (the same bits) and then
// pf_head_norm_rope on its rows (the same nest). Outputs start as NaN.
TEST(PrefillGpuGemm, SplitGroupReduceFoldsTheNormsBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  cuda::Context ctx(0);
  const std::optional<PrefillKernels> kernels = kernels_for(ctx, "sm_80");  // every arch has them
  ASSERT_TRUE(kernels.has_value());
  const PrefillKernels& k = *kernels;
  cuda::Stream stream(ctx);
  constexpr int D = kHeadRopeDim, Z = 3;
  const int M = 37, pos0 = 5, n[3] = {4 * D, 2 * D, 2 * D + 2};
  Uniform rnd(31337);
  std::vector<float> bias(size_t(n[0] + n[1] + n[2])), norm_w(2 * D), inv_freq(D);
  for (auto& x : bias) x = 0.1f * rnd();
  for (auto& x : norm_w) x = 1.f + 0.1f * rnd();
  for (int j = 0; j < D; ++j) inv_freq[size_t(j)] = float(std::pow(1e4, -2.0 * (j % (D / 2)) / D));
  PfGemmGroup pg{}, out{};
  pg.count = out.count = 3;
  for (int j = 0; j < 3; ++j) pg.n[j] = n[j];
  const size_t ws_bytes = size_t(lay_split_partials(pg, Z, M, 0));  // as PrefillProgram lays them out
  std::vector<float> parts(ws_bytes / 4);
  for (auto& x : parts) x = 4 * rnd();
  cuda::DeviceBuffer dparts(ctx, ws_bytes), dbias(ctx, bias.size() * 4), dw(ctx, norm_w.size() * 4),
      dfreq(ctx, inv_freq.size() * 4);
  dparts.upload(parts.data(), ws_bytes);
  dbias.upload(bias.data(), bias.size() * 4);
  dw.upload(norm_w.data(), norm_w.size() * 4);
  dfreq.upload(inv_freq.data(), inv_freq.size() * 4);
  lay_split_partials(pg, Z, M, dparts.ptr());
  std::vector<cuda::DeviceBuffer> c, normed, c_ref, normed_ref;
  PfRowRope rr;
  for (int j = 0, off = 0; j < 3; off += n[j++]) {
    for (auto* v : {&c, &normed, &c_ref, &normed_ref}) {
      v->emplace_back(ctx, size_t(M) * n[j] * 4);
      v->back().fill_bytes(0xff);
    }
    out.c[j] = c.back().ptr();
    out.bias[j] = dbias.ptr() + uint64_t(off) * 4;
    out.n[j] = n[j];
    if (j == 2) continue;  // v: no norm
    rr.w[j] = dw.ptr() + uint64_t(j) * D * 4;
    rr.inv_freq[j] = dfreq.ptr() + uint64_t(j) * D / 2 * 4;
    rr.out[j] = normed.back().ptr();
    rr.heads[j] = n[j] / D;
    rr.d[j] = D;
    rr.eps[j] = 1e-6f;
  }
  rr.pos0 = pos0;
  cuda::LaunchConfig rc;
  rc.grid = {unsigned(M), 3, 1};
  rc.block.x = kRowThreads;
  cuda::launch_args(k[PrefillKernels::GemmReduceGroup], rc, stream, pg, Z, out, M, rr);
  cuda::LaunchConfig ec, hc;
  ec.grid.x = 64, ec.block.x = 256;
  hc.grid.x = unsigned(M), hc.block.x = kRowThreads;
  for (int j = 0; j < 3; ++j) {
    cuda::launch_args(k[PrefillKernels::GemmReduce], ec, stream, pg.c[j], Z, out.bias[j], uint64_t(0),
                      c_ref[size_t(j)].ptr(), M, n[j]);
    if (j < 2)
      cuda::launch_args(k[PrefillKernels::Rope], hc, stream, c_ref[size_t(j)].ptr(), rr.w[j], rr.inv_freq[j],
                        normed_ref[size_t(j)].ptr(), n[j] / D, D, rr.eps[j], pos0);
  }
  stream.synchronize();
  auto bits = [&](const cuda::DeviceBuffer& b, int j) {
    std::vector<uint32_t> v(size_t(M) * n[j]);
    b.download(v.data(), v.size() * 4);
    return v;
  };
  for (int j = 0; j < 3; ++j) {
    const std::vector<uint32_t> got = bits(c[size_t(j)], j), want = bits(c_ref[size_t(j)], j);
    for (uint32_t u : got) ASSERT_NE(u, 0xffffffffu) << "member " << j << ": an element left unwritten";
    EXPECT_EQ(got, want) << "member " << j << ": the reduced rows";
    if (j == 2) continue;
    // The same nest inlined in two kernels: equal up to the compiler's choice of contractions.
    const std::vector<uint32_t> gn = bits(normed[size_t(j)], j), wn = bits(normed_ref[size_t(j)], j);
    double worst = 0;
    for (size_t i = 0; i < gn.size(); ++i) {
      float a, b;
      std::memcpy(&a, &gn[i], 4);
      std::memcpy(&b, &wn[i], 4);
      ASSERT_TRUE(std::isfinite(a) && std::isfinite(b)) << "member " << j << " element " << i;
      worst = std::max(worst, std::abs(double(a) - b) / (1 + std::abs(double(b))));
    }
    EXPECT_LE(worst, 1e-6) << "member " << j << ": the normed and rotated rows";
    std::printf("[prefill split reduce] member %d: reduced rows equal to the bit, normed rows %s (max %.1e)\n", j,
                gn == wn ? "equal to the bit" : "differ", worst);
  }
  std::vector<uint32_t> v_normed = bits(normed[2], 2);
  for (uint32_t u : v_normed) ASSERT_EQ(u, 0xffffffffu) << "v has no norm: its buffer stays untouched";
}

// The _rope entries (head norm and RoPE in the wgmma epilogue, heads of kHeadRopeDim): q (4
// heads) and k (2) normed and rotated, v (2 heads' width) stored plainly, all with a bias, in
// one group grid of the wide and of the narrow tile, and q alone on the _rope entry; M with a
// partial tile, K a partial step, rows at positions pos0... Against the formulas in double
// precision on the same bf16 operands (the angle rounded to float as the kernel rounds it), the
// outputs poisoned first.
TEST(PrefillGpuGemm, HeadNormRopeEpiloguesMatchTheFormula) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  cuda::Context ctx(0);
  const std::optional<PrefillKernels> kernels = kernels_for(ctx, "sm_90a");
  if (!kernels) GTEST_SKIP() << "no wgmma on this device";
  const PrefillKernels& k = *kernels;
  ASSERT_TRUE(k.rope() && k.group_rope(false) && k.group_rope(true));
  cuda::Stream stream(ctx);
  constexpr int D = kHeadRopeDim;
  const int M = 200, K = 136, pos0 = 77, cols[3] = {4 * D, 2 * D, 2 * D}, N = 8 * D;
  const float eps = 4.f;  // beside the squares' mean (about 15): a misplaced eps shows
  Uniform rnd(4242);
  std::vector<uint16_t> a(size_t(M) * K), w(size_t(N) * K);
  std::vector<float> bias(N), norm_w(2 * D), inv_freq(2 * (D / 2));
  const int cap = pos0 + M + 3;  // the tables' positions (PrefillProgram::rope_tables' layout)
  for (auto& x : a) x = bf16(rnd());
  for (auto& x : w) x = bf16(rnd());
  for (auto& x : bias) x = 0.1f * rnd();
  for (auto& x : norm_w) x = 1.f + 0.1f * rnd();  // q's weight, then k's
  for (int m = 0; m < 2; ++m)  // q's frequencies (theta 1e6), then k's (theta 1e4)
    for (int j = 0; j < D / 2; ++j)
      inv_freq[size_t(m * D / 2 + j)] = float(std::pow(m == 0 ? 1e6 : 1e4, -2.0 * j / D));
  // want[member][row][col]: the projection plus bias, then for q and k the norm and rotation.
  std::vector<std::vector<double>> want(3);
  for (int mb = 0, off = 0; mb < 3; off += cols[mb++]) {
    want[size_t(mb)].assign(size_t(M) * cols[mb], 0);
    for (int i = 0; i < M; ++i) {
      std::vector<double> x(size_t(cols[mb]));
      for (int j = 0; j < cols[mb]; ++j) {
        double acc = bias[size_t(off + j)];
        for (int t = 0; t < K; ++t) acc += double(widen(a[size_t(i) * K + t])) * widen(w[size_t(off + j) * K + t]);
        x[size_t(j)] = acc;
      }
      for (int hd = 0; hd < cols[mb] / D; ++hd) {
        double* y = &want[size_t(mb)][size_t(i) * cols[mb] + size_t(hd) * D];
        const double* xh = &x[size_t(hd) * D];
        if (mb == 2) {
          std::copy(xh, xh + D, y);
          continue;
        }
        double ss = 0;
        for (int j = 0; j < D; ++j) ss += xh[j] * xh[j];
        const double r = 1 / std::sqrt(ss / D + eps);
        for (int j = 0; j < D / 2; ++j) {
          const double p = norm_w[size_t(mb * D + j)] * xh[j] * r, q = norm_w[size_t(mb * D + j + D / 2)] * xh[j + D / 2] * r;
          const double angle = double(float(pos0 + i) * inv_freq[size_t(mb * D / 2 + j)]);
          y[j] = p * std::cos(angle) - q * std::sin(angle);
          y[j + D / 2] = q * std::cos(angle) + p * std::sin(angle);
        }
      }
    }
  }
  // Per member: cos(float(p) * f[j]) for p < cap, then the sines, as the host's plan fills them.
  std::vector<float> tables;
  for (int mb = 0; mb < 2; ++mb)
    for (const bool sine : {false, true})
      for (int p = 0; p < cap; ++p)
        for (int j = 0; j < D / 2; ++j) {
          const float angle = float(p) * inv_freq[size_t(mb * D / 2 + j)];
          tables.push_back(sine ? std::sin(angle) : std::cos(angle));
        }
  cuda::DeviceBuffer da(ctx, a.size() * 2), dw(ctx, w.size() * 2), db(ctx, N * 4), dn(ctx, norm_w.size() * 4),
      dt(ctx, tables.size() * 4);
  da.upload(a.data(), a.size() * 2);
  dw.upload(w.data(), w.size() * 2);
  db.upload(bias.data(), N * 4);
  dn.upload(norm_w.data(), norm_w.size() * 4);
  dt.upload(tables.data(), tables.size() * 4);
  std::vector<cuda::DeviceBuffer> out;
  for (int mb = 0; mb < 3; ++mb) out.emplace_back(ctx, size_t(M) * cols[mb] * 4);
  PfHeadRope hr;
  for (int mb = 0; mb < 2; ++mb) {
    hr.w[mb] = dn.ptr() + uint64_t(mb) * D * 4;
    hr.cs[mb] = dt.ptr() + uint64_t(mb) * 2 * cap * (D / 2) * 4;
    hr.sn[mb] = hr.cs[mb] + uint64_t(cap) * (D / 2) * 4;
    hr.eps[mb] = eps;
  }
  hr.pos0 = pos0;
  const CUtensorMap ma = wgmma_activation_map(da.ptr(), M, K);
  auto check = [&](int members, const char* what) {
    for (int mb = 0; mb < members; ++mb) {
      std::vector<float> got(size_t(M) * cols[mb]);
      out[size_t(mb)].download(got.data(), got.size() * 4);
      double worst = 0;
      for (size_t e = 0; e < got.size(); ++e) {
        ASSERT_TRUE(std::isfinite(got[e])) << what << ": member " << mb << " element " << e;
        worst = std::max(worst, std::abs(got[e] - want[size_t(mb)][e]));
      }
      // Values of magnitude about 1 (about 10 for v): fp32 sums against double, the tables'
      // float cos and sin.
      EXPECT_LT(worst, 1e-4) << what << ": member " << mb;
      std::printf("[prefill head rope] %s, member %d: max abs error %.2e\n", what, mb, worst);
    }
  };
  for (const bool narrow : {false, true}) {
    const GemmTile& t = narrow ? *k.narrow_tile() : k.tile(true);
    PfGemmGroup g{};
    PfTmaMaps maps{};
    unsigned tiles = 0;
    for (int mb = 0, off = 0; mb < 3; off += cols[mb++]) {
      out[size_t(mb)].fill_bytes(0xff);
      g.w[mb] = dw.ptr() + uint64_t(off) * K * 2;
      g.bias[mb] = db.ptr() + uint64_t(off) * 4;
      g.c[mb] = out[size_t(mb)].ptr();
      g.n[mb] = cols[mb];
      g.tiles[mb] = cols[mb] / t.bn;
      tiles += unsigned(g.tiles[mb]);
      maps.w[mb] = wgmma_weight_map(g.w[mb], cols[mb], K, t);
    }
    g.count = 3;
    const TileGrid tg = tile_grid((M + t.bm - 1) / t.bm, tiles);
    cuda::LaunchConfig cfg;
    cfg.grid = {tg.x, tg.y, 1};
    cfg.block.x = unsigned(t.threads());
    cfg.dynamic_shared = unsigned(t.smem_bytes());
    cuda::launch_args(*k.group_rope(narrow), cfg, stream, ma, maps, g, M, K, tg.g, hr);
    stream.synchronize();
    check(3, narrow ? "narrow group" : "wide group");
  }
  out[0].fill_bytes(0xff);
  const TileGrid tg = tile_grid((M + 127) / 128, cols[0] / k.tile(true).bn);
  cuda::LaunchConfig cfg;
  cfg.grid = {tg.x, tg.y, 1};
  cfg.block.x = unsigned(k.tile(true).threads());
  cfg.dynamic_shared = unsigned(k.gemm_smem(PrefillKernels::GemmLarge));
  cuda::launch_args(*k.rope(), cfg, stream, ma, wgmma_weight_map(dw.ptr(), cols[0], K, k.tile(true)), db.ptr(),
                    out[0].ptr(), M, cols[0], K, tg.g, hr);
  stream.synchronize();
  check(1, "alone");
}

// The head RMSNorm without RoPE (a norm no model's graph leaves unfused, so no prefill of the
// fixtures runs it): rows of heads against the formula in double precision, the output poisoned
// first (an element left unwritten fails).
TEST(PrefillGpuRows, HeadNormWithoutRopeMatchesTheFormula) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  cuda::Context ctx(0);
  const std::optional<PrefillKernels> kernels = kernels_for(ctx, "sm_80");
  ASSERT_TRUE(kernels.has_value());
  cuda::Stream stream(ctx);
  Uniform rnd(777);
  const float eps = 1e-6f;
  // More heads than warps (the warps' second pass), a head dim under and over a warp's lanes.
  for (const auto& [rows, heads, D] : {std::tuple{5, 11, 40}, std::tuple{3, 2, 128}, std::tuple{2, 9, 6}}) {
    std::vector<float> x(size_t(rows) * heads * D), w(static_cast<size_t>(D));
    for (auto& v : x) v = rnd();
    for (auto& v : w) v = 1.f + 0.1f * rnd();
    cuda::DeviceBuffer dx(ctx, x.size() * 4), dw(ctx, w.size() * 4), dout(ctx, x.size() * 4);
    dx.upload(x.data(), x.size() * 4);
    dw.upload(w.data(), w.size() * 4);
    dout.fill_bytes(0xff);
    cuda::LaunchConfig c;
    c.grid.x = unsigned(rows);
    c.block.x = unsigned(ir::kPrefillRowThreads);
    cuda::launch_args((*kernels)[PrefillKernels::HeadRmsNorm], c, stream, dx.ptr(), dw.ptr(), dout.ptr(), heads, D, eps);
    stream.synchronize();
    std::vector<float> got(x.size());
    dout.download(got.data(), got.size() * 4);
    double worst = 0;
    for (int u = 0; u < rows * heads; ++u) {
      double ss = 0;
      for (int i = 0; i < D; ++i) ss += double(x[size_t(u) * D + i]) * x[size_t(u) * D + i];
      const double r = 1.0 / std::sqrt(ss / D + eps);
      for (int i = 0; i < D; ++i) {
        const size_t e = size_t(u) * D + size_t(i);
        ASSERT_TRUE(std::isfinite(got[e])) << "element " << e << " of " << rows << " x " << heads << " x " << D;
        worst = std::max(worst, std::abs(got[e] - w[size_t(i)] * (x[e] * r)) / (std::abs(w[size_t(i)] * x[e] * r) + 1e-3));
      }
    }
    EXPECT_LT(worst, 1e-5) << rows << " x " << heads << " x " << D;
    std::printf("[prefill head norm] %d rows x %d heads x %d: max relative error %.2e\n", rows, heads, D, worst);
  }
}

}  // namespace
}  // namespace mpk::rt
