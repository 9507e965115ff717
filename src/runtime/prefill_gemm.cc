// The prefill's GEMM launches: which tile a projection takes and how its K splits, the tile
// order's grid, the TMA descriptors the wgmma tiles read, the workspace of K-split partials and
// stream-K's rule (prefill.h declares them; the program in prefill.cc calls them).
#include <algorithm>
#include <set>
#include <span>
#include <utility>

#include "base/error.h"
#include "runtime/prefill.h"
#include "runtime/prefill_tiles.h"

namespace mpk::rt {

const GemmTile& gemm_tile(bool large, const std::string& arch) {
  if (!large) return kSmallTile;
  return prefill_wgmma(arch) ? kWgmmaTile : kLargeTile;
}

const GemmTile* gemm_narrow_tile(const std::string& arch) {
  return prefill_wgmma(arch) ? &kWgmmaNarrowTile : nullptr;
}

std::vector<const GemmTile*> gemm_tiles() { return {&kLargeTile, &kSmallTile, &kWgmmaTile, &kWgmmaNarrowTile}; }

bool wgmma_group_narrow(int64_t m, std::span<const int64_t> cols, int num_sms) {
  MPK_ICHECK(num_sms >= 1) << "a grid on " << num_sms << " SMs";
  // A narrow tile takes 0.64 of a wide one's time, not half: measured on an H100 (Qwen3-8B's q,
  // k and v at 1,024 rows, docs/PERFORMANCE.md), 3 waves of narrow tiles 4.02 ms over 36 layers
  // against 4.17 for 2 waves of wide ones. One CTA per SM: a grid's time is its waves times that.
  constexpr double kNarrowTileTime = 0.64;
  auto waves = [&](int64_t bn) {
    int64_t tiles = 0;
    for (int64_t n : cols) tiles += (n + bn - 1) / bn;
    tiles *= (m + kWgmmaTile.bm - 1) / kWgmmaTile.bm;
    return double((tiles + num_sms - 1) / num_sms);
  };
  return waves(kWgmmaNarrowTile.bn) * kNarrowTileTime < waves(kWgmmaTile.bn);
}

namespace {
CUtensorMap wgmma_map(uint64_t base, int64_t rows, int64_t k, int box_rows) {
  return cuda::tensor_map_bf16(base, uint64_t(rows), uint64_t(k), unsigned(box_rows), unsigned(kWgmmaTile.bk));
}
}  // namespace
CUtensorMap wgmma_activation_map(uint64_t base, int64_t rows, int64_t k) {
  return wgmma_map(base, rows, k, kWgmmaTile.bm);
}
CUtensorMap wgmma_weight_map(uint64_t base, int64_t rows, int64_t k, const GemmTile& tile) {
  MPK_ICHECK(tile.wgmma) << "a TMA weight map for the non-wgmma tile " << tile.entry;
  return wgmma_map(base, rows, k, tile.bn);
}
CUtensorMap wgmma_gate_up_map(uint64_t base, int64_t rows, int64_t k) {
  return wgmma_map(base, rows, k, kWgmmaTile.bn / 2);
}

// Measured on an H100 at 39 rows (Qwen3-8B's shapes, tools/bench/gemm_bench, programmatic
// launches, docs/PERFORMANCE.md): the wgmma tile with its K split in up to a wave of parts reads
// weights faster than the small tile's best split (o_proj 20.0 against 23.2-24.6 us, the down
// projection 44.5 against 57.9-62.8, gate + up's 96 tiles unsplit 84.9 against 127.7). Taken
// for one tile row only (a short prompt): longer chunks were not measured so.
GemmLaunch gemm_launch(int64_t m, int64_t n, int64_t k, int num_sms, bool wgmma) {
  GemmLaunch g;
  const GemmTile &lt = kLargeTile, &st = kSmallTile;
  const int64_t large = ceil_div(m, lt.bm) * ceil_div(n, lt.bn);
  const bool wave = large * 4 >= int64_t(num_sms) * 3;  // three quarters of a wave or more
  const int64_t large_splits =  // the wgmma tile's split: up to a wave, four K steps or more each
      std::clamp<int64_t>(num_sms / large, 1, std::max<int64_t>(ceil_div(k, lt.bk) / 4, 1));
  if (wave || (wgmma && m <= lt.bm && 2 * large * large_splits >= num_sms)) {
    g.large = true;
    g.grid_m = int(ceil_div(m, lt.bm));
    g.grid_n = int(ceil_div(n, lt.bn));
    g.splits = wave ? 1 : int(large_splits);
    return g;
  }
  g.grid_m = int(ceil_div(m, st.bm));
  g.grid_n = int(ceil_div(n, st.bn));
  const int64_t tiles = int64_t(g.grid_m) * g.grid_n;
  if (tiles < num_sms)  // up to two CTAs per SM (one wave), each with four K steps or more
    g.splits = int(std::clamp<int64_t>(2 * int64_t(num_sms) / tiles, 1, std::max<int64_t>(ceil_div(k, st.bk) / 4, 1)));
  return g;
}

TileGrid tile_grid(int64_t nm, int64_t nn) {
  MPK_ICHECK(nm >= 1 && nn >= 1 && nn <= kTileOrderMaxColumns) << "GEMM tile grid " << nm << " x " << nn;
  TileGrid t;
  const int64_t groups = (nm + kTileGroup - 1) / kTileGroup;
  t.g = int((nm + groups - 1) / groups);
  t.x = unsigned(t.g * nn);
  t.y = unsigned((nm + t.g - 1) / t.g);
  MPK_ICHECK(t.y <= 65535) << "GEMM tile grid " << nm << " x " << nn << ": " << t.y << " block rows";
  return t;
}

cuda::LaunchConfig wgmma_swiglu_config(const TileGrid& tg, int num_sms) {
  MPK_ICHECK(num_sms >= 1) << "wgmma launch on " << num_sms << " SMs";
  // Measured on an H200 (docs/PERFORMANCE.md): walking the grid (the next tile's loads under
  // this one's stores) takes Qwen3-8B's gate + up at 4,096 tokens (23 tiles per SM) from 48.9 to
  // 44.0 ms and at 1,024 (5.8 per SM) from 12.05 to 10.9 ms.
  constexpr int64_t kWalkWaves = 5;
  cuda::LaunchConfig c;
  if (int64_t(tg.x) * tg.y >= kWalkWaves * num_sms)
    c.grid.x = unsigned(num_sms);  // one CTA fits per SM
  else
    c.grid = {tg.x, tg.y, 1};
  c.block.x = unsigned(kWgmmaTile.threads());
  c.dynamic_shared = unsigned(kWgmmaTile.smem_bytes());
  return c;
}

std::vector<int64_t> prefill_split_counts(const ir::Graph& g, int64_t max_rows, int num_sms) {
  // Each projection and the groups PrefillProgram may form with it (the next one or two on its
  // input and K): the (n, k) of their columns together, one grid's K split; and stream-K's CTAs
  // over a step's K steps (the projection as a SwiGLU tile's gate, the group's tiles).
  std::set<std::pair<int64_t, int64_t>> shapes;
  std::set<int64_t> counts;
  auto streamk = [&](int64_t tiles, int64_t k) {
    counts.insert(streamk_ctas(tiles * ceil_div(k, kWgmmaTile.bk), num_sms));
  };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const ir::Op& op = g.ops[i];
    if (op.kind != ir::OpKind::Linear) continue;
    const int64_t k = g.weight(op.weight).shape.at(1);
    streamk(ceil_div(g.weight(op.weight).shape.at(0), kWgmmaTile.bn / 2), k);
    int64_t n = 0, tiles = 0;
    for (size_t j = i; j < std::min(g.ops.size(), i + kGroupMax); ++j) {
      const ir::Op& o = g.ops[j];
      if (o.kind != ir::OpKind::Linear || o.inputs[0] != op.inputs[0] || g.weight(o.weight).shape.at(1) != k) break;
      const int64_t cols = g.weight(o.weight).shape.at(0);
      shapes.insert({n += cols, k});
      streamk(tiles += ceil_div(cols, kWgmmaTile.bn), k);
    }
  }
  for (const auto& [n, k] : shapes)
    for (int64_t m = 1; m <= max_rows; ++m)
      for (const bool wgmma : {false, true}) counts.insert(gemm_launch(m, n, k, num_sms, wgmma).splits);
  return {counts.begin(), counts.end()};
}

int64_t lay_split_partials(PfGemmGroup& parts, int64_t splits, int64_t m, uint64_t base) {
  int64_t at = 0;
  for (int j = 0; j < parts.count; ++j) {
    parts.c[j] = base + uint64_t(at);
    // An odd size has a width short of its tiles', whose slack (splits m floats) holds the pad
    // within gemm_workspace_bytes.
    at += (splits * m * parts.n[j] * 4 + 7) / 8 * 8;
  }
  return at;
}

// A split's parts make at most a wave of large tiles or two of small ones (gemm_launch), whose
// partials' rows and columns are inside the tiles.
int64_t gemm_workspace_bytes(int num_sms) {
  static_assert(2 * kSmallTile.bm * kSmallTile.bn <= kLargeTile.bm * kLargeTile.bn, "a wave of large tiles bounds");
  return int64_t(num_sms) * kLargeTile.bm * kLargeTile.bn * 4;
}

// Measured on an H100 (Qwen3-8B and Qwen3-0.6B at 39 rows, docs/PERFORMANCE.md): with few
// tiles, each spread over many CTAs, the parts' partials and their sum by the last one cost more
// than the even deal gains (o_proj 28 -> 93 us, down 66 -> 120 us, q + k + v worse too); with
// 96 SwiGLU tiles on 132 SMs (8B's gate + up: 1.4 CTAs a tile) it takes 4.74 -> 3.56 ms over 36
// layers. Three quarters of a wave of tiles and more take the large tile (gemm_launch).
bool prefill_streamk(int64_t rows, int64_t tiles, int num_sms) {
  return rows <= kWgmmaTile.bm && 2 * tiles >= num_sms && 4 * tiles < 3 * int64_t(num_sms);
}

int streamk_ctas(int64_t units, int num_sms) {
  MPK_ICHECK(units >= 1 && num_sms >= 1) << "stream-K of " << units << " steps on " << num_sms << " SMs";
  return int(std::clamp<int64_t>(units / kStreamkMinSteps, 1, num_sms));
}

int64_t streamk_workspace_bytes(int num_sms, int64_t rows) {
  return 2LL * num_sms * std::min<int64_t>(rows, kWgmmaTile.bm) * kWgmmaTile.bn * 4;
}

}  // namespace mpk::rt
