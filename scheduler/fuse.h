// Pass 2: fuses cheap vector ops into the tile tasks around them, so a layer is five waves
// (qkv, attention, o_proj, gate_up, down) instead of a dozen. Each fusion appends the graph op
// to the task's `ops`, in execution order, and rewrites the task's reads and writes.
#pragma once

#include "ir/graph.h"
#include "scheduler/task_graph.h"

namespace mpk::sched {

struct FuseOptions {
  // RMSNorm (and last_row) into the following linear tiles as a prologue: each tile reads the
  // whole input vector and recomputes the norm (cheap at T = 1, and no wave of its own).
  bool norm_into_linear = true;
  // q/k head RMSNorm and RoPE into the attention tasks (the KV-cache append is part of them).
  bool qk_into_attention = true;
  // A residual add into the epilogue of the linear producing its other operand (o_proj, down).
  bool residual_into_linear = true;
  // silu(gate) * up into the prologue of the linear reading it (down_proj).
  bool silu_into_linear = true;
  // The MLP's down projection into the gate/up tiles (needs paired gate/up tiles,
  // DecomposeOptions::pair_siblings, and the SiLU and residual fusions): each tile computes
  // silu(gate) * up for its rows and adds that times the matching columns of down into the
  // output (Task::columns, Task::adds), which the residual's producers (o_proj's tiles) wrote
  // first (WeightSlice::copy). One wave less per layer; the sums' order varies from run to run.
  bool down_into_gate_up = false;
  // The merge of a KV head's chunk partials into its chunk tasks (the last to finish merges):
  // no merge wave of its own (see Task::merges).
  bool merge_into_attention = true;
  // argmax: a partial (value, index) per LM-head tile plus one reduce task.
  bool argmax_into_linear = true;
  // The next token's embedding into the argmax reduce; its output becomes a carried buffer.
  bool embedding_into_argmax = true;
};

// Runs before events; the result keeps task ids in a topological order.
TaskGraph fuse(const ir::Graph& graph, TaskGraph tasks, const FuseOptions& options);

}  // namespace mpk::sched
