// The prefill's row kernels' loop nests (ir/loop_nest.h; kernels/prefill_rows.cuh): the
// prefill prints them (runtime/prefill.cc: prefill_source) and proves them (runtime/proofs.cc:
// prefill_proofs), as the megakernel does its task nests (task_nests.h). Each prints a device
// function the kernel's entry calls; the entries hold no index arithmetic of their own.
#pragma once

#include "ir/loop_nest.h"

namespace mpk::ir {

// pf_embed: row `row` (blockIdx.x) of the output is row `tok` (tokens[row]) of the table,
// widened to fp32; the block's threads walk the H elements. Ranges: the token's table row, the
// output row. Accesses: the table (each element of the token's row read once, every one) and
// the output (each element written once, every one). The token itself is inside the table by
// the caller's contract (the session refuses an id past the vocabulary before any launch).
// Printed as pf_embed_row(table, tokens, out, H).
const LoopNest& prefill_embed_nest();

// pf_rms_norm: row `row` of x scaled by its RMS and by w, stored in fp32 or bf16 (the `bf16`
// argument picks the view of out). Two block-strided passes over the H elements (the squares'
// sum, then the scaled row) with the block's sum between them. Accesses: x in each pass (each
// element once, every one), w (each once, every one), out as fp32 and as bf16 (the same
// element; each once, every one). Printed as pf_rms_norm_row(x, w, out, H, eps, bf16).
const LoopNest& prefill_rms_norm_nest();

// pf_argmax's scan: each thread's best of the logits it takes (the block's threads walk the V
// logits) after the first logit, and whether one was not finite. Accesses: logit 0 (every
// thread's start), the logits (each once, every one). Printed as pf_argmax_scan(logits, V, v,
// idx, nonfinite).
const LoopNest& prefill_argmax_nest();

}  // namespace mpk::ir
