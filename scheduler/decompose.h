// Pass 1: Graph -> TaskGraph of tile tasks for one decode step (T = 1), before fusion. Every
// graph op becomes tasks of its own stage: linears are split into output-row tiles, attention
// into one task per KV head (optionally per KV chunk plus a merge), every other op is one
// whole-vector task. The result is already a valid task graph (events can be built on it).
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "ir/graph.h"
#include "scheduler/task_graph.h"

namespace mpk::sched {

struct DecomposeOptions {
  // KV length (largest position + 1) the step is planned for: the KV chunks cover it and the
  // KV bytes and attention flops of every task assume it (the worst case up to that length).
  int64_t seq_len = 4096;
  // Split attention into chunks of this many KV positions (plus a merge task per KV head) when
  // seq_len exceeds it; 0 never splits.
  int64_t kv_chunk = 1024;
  // When > 0, split every attention into exactly this many chunks per KV head whatever
  // seq_len (plus the merge; 1 does not split); takes precedence over kv_chunk. The chunks
  // divide the live KV length evenly at run time (see Task), so one plan keeps every chunk
  // busy at any position. Negative: InvalidArgument.
  int kv_splits = 0;
  // Output rows per linear tile; 0 picks ceil(rows / target_tiles) rounded up to row_align,
  // so that each linear has about target_tiles tiles (one wave over the SMs).
  int64_t tile_rows = 0;
  int target_tiles = 132;
  int64_t row_align = 8;
  // Consecutive linears reading the same input (q/k/v, gate/up) become one stage over their
  // concatenated output rows: one wave of tiles instead of three (two) smaller ones.
  bool merge_sibling_linears = true;
  // Two merged siblings of equal rows (gate/up) are tiled by pairs: a tile takes rows [a, b)
  // of both (tile_rows / target_tiles apply to one linear's rows), so that it holds every
  // input of silu(gate) * up for [a, b) (what FuseOptions::down_into_gate_up needs).
  bool pair_siblings = false;
  DType kv_dtype = DType::BF16;  // KV cache element type on the device
};

// Throws Error(InvalidArgument) for bad options or a graph with T != 1 semantics it cannot
// tile (the graph itself is checked by ir::validate).
TaskGraph decompose(const ir::Graph& graph, const DecomposeOptions& options);

// Rows per tile decompose uses for a linear of `rows` output rows.
int64_t linear_tile_rows(int64_t rows, const DecomposeOptions& options);

}  // namespace mpk::sched
