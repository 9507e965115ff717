// What each fused task computes, typed: derived once from its fused ops after fusion, so the
// runtime prints descriptors from fields instead of matching op lists again or looking buffers
// up by name. Graph tensors, weights and ops are ir::Graph indices; buffers are TaskGraph
// indices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "scheduler/task_graph.h"

namespace mpk::sched {

enum class InputStaging { Plain, RmsNorm, SiluMul };

// A linear tile: its input staged (plain, RMSNorm with its scale, or silu(gate) * up), the
// slices of Task::weights, each slice's residual (added to its output), an argmax partial.
struct LinearSpec {
  InputStaging staging = InputStaging::Plain;
  int x = -1;            // tensor: the input (the gate for SiluMul; last_row's input)
  int x2 = -1;           // tensor: up (SiluMul)
  int norm_weight = -1;  // weight: the RMSNorm scale
  double eps = 0;
  std::vector<int> residual;  // per slice: the tensor added to its output, or -1
  bool argmax = false;        // the tile's argmax partial of its outputs
  // The folded down projection (Task::columns): slices 0 and 1 are gate and up, and the tile
  // adds W . silu(gate) * up over its rows into columns[0].out.
  bool down_fold = false;
  int argmax_value = -1, argmax_index = -1;  // buffers of the partials
  int64_t argmax_slot = -1;                  // this tile's element in them
};

// An attention chunk (or a merge): q, k as they enter the fused head norms and RoPE.
struct AttentionSpec {
  int op = -1;                   // the attention op
  int q = -1, k = -1, v = -1;    // tensors
  int q_norm = -1, k_norm = -1;  // HeadRmsNorm ops, or -1
  int q_rope = -1, k_rope = -1;  // Rope ops, or -1
  int partial = -1;              // buffer of the chunk partials (several chunks, a merge), or -1
};

// The argmax over the LM-head tiles' partials, and the next token's embedding.
struct ArgmaxSpec {
  int op = -1;
  int value = -1, index = -1;  // buffers of the partials
  int logits = -1;             // the logits' buffer (a sampled draw ranks them)
  int embedding = -1;          // the Embedding op, or -1
};

struct TaskSpec {
  LinearSpec linear;        // TaskKind::Linear
  AttentionSpec attention;  // Attention, AttentionMerge
  ArgmaxSpec argmax;        // Vector
  std::string unsupported;  // non-empty: the fused ops match no spec, and why
};

// The spec of every task of `tg` (indexed by task id).
std::vector<TaskSpec> task_specs(const ir::Graph& g, const TaskGraph& tg);

}  // namespace mpk::sched
