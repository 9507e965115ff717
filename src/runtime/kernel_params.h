// The megakernel's code parameters: the explicit description its source is generated from
// (prepended as #defines, see kernels/common.cuh) and that the kernel-cache key includes.
// The superoptimizer will search these; the defaults are the ones measured in
// docs/PERFORMANCE.md.
#pragma once

#include <cstdint>
#include <string>

namespace mpk::rt {

struct MegakernelParams {
  int block_threads = 512;   // threads per worker CTA: a multiple of 32 in [64, 1024]
  int rows_per_warp = 2;     // linear: output rows a warp streams together (1..4)
  int down_rows_per_warp = 0;  // the same for the linears whose input is silu(gate) * up (the
                               // MLP down projection): their own variant (1..4), or 0 to use
                               // rows_per_warp (runtime/variants.h)
  int loads_in_flight = 4;   // linear: 16-byte loads per row and lane in one round (1..8)
  int max_k_split = 8;       // linear: most K parts a row group is cut into (1..8)
  int heads_per_pass = 4;    // attention: query heads one pass keeps in registers (1..8)
  int prefetch_rounds = 0;   // linear: L2 prefetch this many load rounds ahead of a warp (0..8;
                             // 1-4 measured 6-14% slower on Qwen3-8B, 2% faster on 0.6B)
  int merge_batch = 8;       // attention merge: chunk partials loaded at once (1..16)
  int max_head_dim = 256;    // attention: largest head_dim it runs (64..256, a multiple of 64;
                             // a head row lives in registers: set it from the model)
  int ring_stages = 0;       // linear: rounds of loads_in_flight vectors per row and lane in a
                             // shared-memory ring streamed with cp.async, ring_stages - 1 of them
                             // in flight (0: the rounds go to registers; up to 16)
  int poll_warp_loads = 1;   // linear: 1, the polling thread's warp loads its first round into
                             // registers before the wait like the others; 0, it prefetches that
                             // round to L2 instead, so the poll does not queue behind its loads
                             // (handoff_bench: 2 us vs 0.9 us with every SM streaming)
};

// The parameters for a model whose attention heads have head_dim elements (max_head_dim the
// smallest that holds them).
MegakernelParams params_for_head_dim(int head_dim, MegakernelParams base = {});

// Bytes of the linear tasks' weight ring in shared memory (0 without the ring), for the widest
// linear variant.
int64_t ring_bytes(const MegakernelParams& p);
// Error(InvalidArgument) naming the first parameter out of its range.
void validate(const MegakernelParams& p);
// "#define MK_BLOCK_THREADS 512\n..." for the kernel source: every field, then MK_RING_BYTES.
std::string to_defines(const MegakernelParams& p);
// Parses "name=value,name=value" (names as the fields, e.g. "rows_per_warp=1,loads_in_flight=8")
// over `base`; Error(InvalidArgument) on an unknown name, a non-integer or a value out of range.
MegakernelParams parse_params(const std::string& text, MegakernelParams base = {});
// {"block_threads":512,...}: the cache key's layout and the cache entry's parameters.
std::string to_json(const MegakernelParams& p);

}  // namespace mpk::rt
