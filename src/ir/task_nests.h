// The task kernels' loop nests (ir/loop_nest.h), built from the layout formulas (layouts.h): the
// megakernel prints them (print) and superopt/ proves them (prove_loop_nest).
#pragma once

#include "ir/loop_nest.h"

namespace mpk::ir {

// The attention merge (kernels/merge.cuh): one KV head's chunk partials combined per query head
// and dimension. A block's threads walk the G x D outputs (GridItems); each thread reads its
// element's C chunk states, `B` (MK_MERGE_BATCH) chunks a round, from `part`, the head's first
// state row (AttentionStates), and writes the output element (AttentionRows). Parameters: G, D,
// C, h (the KV head), B, threads. Ranges: the head's partials [0, slot(partial_row(0, C, 0), 0)),
// the output heads of h's group, a batch's registers [0, B). Accesses: the batch's registers
// (mc, lc, oc), the states' max, sum and sums (each chunk's term of each output read once, every
// one read), the output (each element written once, every one).
// Printed as mk_attn_merge(const MkTask& t, const float* part).
const LoopNest& attention_merge_nest();

}  // namespace mpk::ir
