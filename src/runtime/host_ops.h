// The explicit host fallback: an op no megakernel variant implements runs on the host with the
// reference's kernels (src/ref) between launches of the megakernel over segments of its queues
// (MegakernelTables::num_segments). Only ops without weights and without the KV cache qualify:
// the host reads their inputs from the device's activations and writes their output back.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace mpk::rt {

// Whether the host fallback can run an op of `kind` (elementwise, no weights, no KV cache).
bool host_runs(ir::OpKind kind);

// Runs `op` on `inputs` (its input tensors' values at T = 1, in the op's order, `n` elements
// each) into `out` (n elements). Error(Internal) for an op host_runs refuses.
void run_host_op(const ir::Op& op, const std::vector<const float*>& inputs, int64_t n, float* out);

}  // namespace mpk::rt
