// The megakernel's parameters: the code parameters its source is generated from (prepended as
// #defines, see kernels/common.cuh) and the decomposition its plan is made with
// (megakernel_plan_options); the kernel-cache key includes both.
// The superoptimizer will search these; the defaults are the ones measured in
// docs/PERFORMANCE.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpk::rt {

struct MegakernelParams {
  int block_threads = 512;   // threads per worker CTA: a multiple of 32 in [64, 1024]
  int rows_per_warp = 2;     // linear: output rows a warp streams together (1..4)
  int down_rows_per_warp = 0;  // the same for the linears whose input is silu(gate) * up (the
                               // MLP down projection): their own variant (1..4), or 0 to use
                               // rows_per_warp (runtime/variants.h)
  int head_rows_per_warp = 0;  // the same for the LM head's tiles (the linears that also take
                               // the argmax partials): their own variant, or 0 for rows_per_warp
  int loads_in_flight = 4;   // linear: 16-byte loads per row and lane in one round (1..8)
  int max_k_split = 8;       // linear: most K parts a row group is cut into (1..8)
  int heads_per_pass = 4;    // attention: query heads one pass keeps in registers (1..8)
  int prefetch_rounds = 0;   // linear: L2 prefetch this many load rounds ahead of a warp (0..8;
                             // 1-4 measured 6-14% slower on Qwen3-8B, 2% faster on 0.6B)
  int merge_batch = 8;       // attention merge: chunk partials loaded at once (1..16)
  int max_head_dim = 256;    // attention: largest head_dim it runs (64..256, a multiple of 64;
                             // a head row lives in registers: set it from the model)
  int poll_warp_loads = 1;   // linear: 1, the polling thread's warp loads its first round into
                             // registers before the wait like the others; 0, it prefetches that
                             // round to L2 instead, so the poll does not queue behind its loads
                             // (handoff_bench: 2 us vs 0.9 us with every SM streaming)
  int controller_warp = 0;   // 1: one more warp per worker (block_threads + 32 threads) polls
                             // the task's events and publishes it while the block_threads
                             // compute warps issue their loads, so no poll queues behind them;
                             // 0: thread 0 of the compute warps polls
  int stage_weights = 0;     // 1: a linear task's weights are copied to a shared-memory ring
                             // (bulk copies, sm_90+) while the task before it runs, then read
                             // from there (kernels/stage.cuh); 0: streamed when the task runs
  int stage_late = 0;        // with stage_weights (only), 1: the next task's copy is issued once this
                             // task has its input (not at its start), so that the copy does
                             // not queue ahead of the input's reads (kernels/stage.cuh)
  int fold_down = 0;         // 1: the MLP's down projection is folded into the gate/up tiles
                             // (sched::FuseOptions::down_into_gate_up: one wave less per layer,
                             // sums added with red.add in an order that varies between runs)
  int prefetch_next = 0;     // worker: KiB of the next task's weight rows (an attention
                             // chunk's K and V rows, half each) that a worker prefetches into
                             // L2 (bulk prefetches, sm_90+) when a task starts, so they load
                             // during this task's wait and work (0: none; 1..1024: a wave of
                             // tasks must stay well inside L2)
  int phase_timers = 0;      // 1: profile sessions also time a linear task's phases (input,
                             // staged weights, dot products: MPK_MK_T_*), at the cost of a
                             // barrier per task while profiling and a few instructions always
  // The decomposition (megakernel_plan_options): the plan's shape, not the kernel's code.
  int kv_splits = 0;         // attention: KV chunks per head, each a task (1..64, at most the
                             // KV capacity), or 0 for about one wave (megakernel_kv_splits)
  int merge_task = 0;        // attention: 1, a head's chunks are merged by a task of its own
                             // (one more dependent wave); 0, by the last chunk to finish
  int tile_waves = 1;        // linear: tiles per stage about tile_waves times the workers (1..4):
                             // smaller tiles, several per worker and stage
};

// The parameters for a model whose attention heads have head_dim elements (max_head_dim the
// smallest that holds them).
MegakernelParams params_for_head_dim(int head_dim, MegakernelParams base = {});

// A model's defaults: params_for_head_dim, and two choices by the weight bytes a decoder layer
// streams per worker (`weight_bytes`: every weight read per step):
// - at most kControllerMaxLayerBytes: the controller warp, in the place of a compute warp
//   (registers allow 16 warps at 128 per thread). On an H200 Qwen3-0.6B (0.32 MB per worker
//   and layer) 5.5% faster with it, Qwen3-8B (3.2 MB) 7.8% slower: a stage that streams long
//   loses more to one warp fewer than its hand-offs gain.
// - from kPrefetchNextMinLayerBytes up to the same limit: prefetch_next, 128 KiB. On an H100
//   Qwen3-0.6B 2.3% faster (1.137 / 1.139 against 1.165 ms; 256 KiB 2.1%, 1 MiB 1.3%), the
//   two-layer test models (1-3 KB) 1 us per step slower (69 against 68 us).
// Rules from two shapes each until the search measures each model (docs/PERFORMANCE.md).
constexpr int64_t kControllerMaxLayerBytes = int64_t(1) << 20;
constexpr int64_t kPrefetchNextMinLayerBytes = int64_t(64) << 10;
constexpr int kSmallModelPrefetchNextKiB = 128;
MegakernelParams default_params(int head_dim, int64_t weight_bytes, int64_t layers, int workers);

// Threads per worker CTA as launched: the compute threads and the controller warp if any.
int launch_threads(const MegakernelParams& p);

// Error(InvalidArgument) naming the first parameter out of its range.
void validate(const MegakernelParams& p);
// "#define MK_BLOCK_THREADS 512\n..." for the kernel source: every code parameter.
std::string to_defines(const MegakernelParams& p);
// Parses "name=value,name=value" (names as the fields, e.g. "rows_per_warp=1,loads_in_flight=8")
// over `base`; Error(InvalidArgument) on an unknown name, a non-integer or a value out of range.
MegakernelParams parse_params(const std::string& text, MegakernelParams base = {});
// {"block_threads":512,...}: the cache key's layout and the cache entry's parameters.
std::string to_json(const MegakernelParams& p);
// How many fields of `a` differ from `b`.
int changed_params(const MegakernelParams& a, const MegakernelParams& b);
// Whether a and b surely make the same plan (megakernel_plan_options): the same decomposition
// fields (kv_splits, merge_task, tile_waves) and fold_down. Different fields may still give one
// plan (kv_splits=16 and the automatic 0 on 132 workers for 8 KV heads).
bool same_plan(const MegakernelParams& a, const MegakernelParams& b);
// "block_threads=512,...": every field, in parse_params' form.
std::string to_text(const MegakernelParams& p);
// A to_json object read over `base` (fields it lacks keep base's values); Error(InvalidArgument)
// for anything but an object of known names with integer values in range.
MegakernelParams params_from_json(const std::string& json, MegakernelParams base = {});

// One axis of the search: changes to try one at a time (parse_params' form), and the stage
// class of the decode step they act on ("linear" for every projection and the LM head, "down"
// and "LM head" for their own variants, "attention", "merge", "MLP", "worker" for the whole
// worker).
struct ParamAxis {
  const char* name;
  const char* stage;
  std::vector<std::string> changes;
};
// The search space around a parameter set: the values tried per parameter. The controller
// warp takes a compute warp's place, so it toggles together with block_threads.
const std::vector<ParamAxis>& search_axes();
// Error(InvalidArgument) unless every name is a search axis' (search_axes()).
void check_axis_names(const std::vector<std::string>& names);
// The parameters an axis sets: its own and any other its values name (the weight ring's axis
// also sets stage_late, the controller warp's block_threads), in the parameters' order.
std::vector<std::string> axis_fields(const ParamAxis& axis);
// The stage classes of the search axes with a parameter (axis_fields) that differs between a
// and b, in search_axes' order, each once.
std::vector<std::string> changed_stages(const MegakernelParams& a, const MegakernelParams& b);

}  // namespace mpk::rt
