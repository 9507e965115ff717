// Kernel variants: the code one task kind can run with, instantiated once per megakernel build.
// A kernel holds the variants its parameters select (kernel_variants), each task descriptor
// names the one it runs (MkTask::variant, an index into that list), and the device dispatch
// over a kind's variants is generated from the list, so two variants of one kind run side by
// side in one launch. Only linear has more than one variant today.
#pragma once

#include <string>
#include <vector>

#include "runtime/kernel_params.h"
#include "runtime/kernels/task_desc.h"

namespace mpk::rt {

struct Variant {
  int kind = 0;           // MPK_MK_LINEAR, MPK_MK_ATTENTION, MPK_MK_ATTN_MERGE, MPK_MK_ARGMAX
  int rows_per_warp = 0;  // linear: output rows a warp streams together (1..4); else 0

  friend bool operator==(const Variant&, const Variant&) = default;
};

// "linear.r2", "attention", "merge", "argmax".
std::string variant_name(const Variant& v);

// The variants of a kernel built with `p`, in id order: one per kind (linear with
// p.rows_per_warp first), then the down projection's linear variant when
// p.down_rows_per_warp selects a different one, then the LM head's when p.head_rows_per_warp
// selects one not in the list yet.
std::vector<Variant> kernel_variants(const MegakernelParams& p);

// Which linears a task's variant is chosen for.
enum class LinearRole { Plain, Down, LmHead };  // Down: input silu(gate) * up; LmHead: argmax
// The linear variant of a task in `role`.
Variant linear_variant(const MegakernelParams& p, LinearRole role);

// v's index in `variants`; Error(Internal) when the kernel does not hold it.
int variant_id(const std::vector<Variant>& variants, const Variant& v);

// Whether variant v, compiled with `p`, runs the task `d` describes (its descriptor, filled from
// the plan): "" when it does, else why not (e.g. "head_dim 320 above max_head_dim 256").
std::string cannot_implement(const Variant& v, const MkTask& d, const MegakernelParams& p);

// The device dispatch over the linear variants among `variants`: mk_linear_variant<DT>(t, xs,
// red, redi, part_sums, prefetch_bytes, wait), which calls mk_linear<DT, rows_per_warp> of the
// task's variant.
std::string dispatch_source(const std::vector<Variant>& variants);

}  // namespace mpk::rt
