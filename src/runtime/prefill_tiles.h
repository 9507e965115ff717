// The prefill GEMM's tile table, read by the source it prints and the program's launches
// (prefill.cc) and by the launch rules (prefill_gemm.cc). Internal to the runtime.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/prefill.h"

namespace mpk::rt {

inline constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Measured on an H200 (Qwen3-8B shapes, 1,024 and 4,096 rows): the mma.sync large tile with K
// steps of 64 in 3 stages 300-310 TFLOP/s, of 32 in 5 stages about 250, and a 128 x 128 tile of
// 4 warps with steps of 64 about 250. The wgmma tile: docs/PERFORMANCE.md.
inline constexpr GemmTile kLargeTile{"pf_gemm_128x256", 128, 256, 64, 2, 4, 3, false};
inline constexpr GemmTile kSmallTile{"pf_gemm_64x128", 64, 128, 32, 1, 4, 6, false};
inline constexpr GemmTile kWgmmaTile{"pf_wgmma_128x256", 128, 256, 64, 8, 1, 4, true, 1};  // printed as PF_WG_*
static_assert(kWgmmaTile.bm == kLargeTile.bm && kWgmmaTile.bn == kLargeTile.bn, "gemm_launch sizes either");
// The same tile 128 columns wide, for grids whose last wave of 256-column tiles is short
// (wgmma_group_narrow; only its group entry is printed); its ring has the wide tile's stages
// (PF_WG_STAGES).
inline constexpr GemmTile kWgmmaNarrowTile{"pf_wgmma_128x128", 128, 128, 64, 8, 1, 4, true, 1};
static_assert(kWgmmaNarrowTile.bm == kWgmmaTile.bm && kWgmmaNarrowTile.bk == kWgmmaTile.bk &&
                  kWgmmaNarrowTile.stages == kWgmmaTile.stages && kWgmmaNarrowTile.threads() == kWgmmaTile.threads(),
              "printed with the wide tile's PF_WG_* but for its width");

}  // namespace mpk::rt
