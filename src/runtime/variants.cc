#include "runtime/variants.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "runtime/kernels/task_desc.h"

namespace mpk::rt {

std::string variant_name(const Variant& v) {
  switch (v.kind) {
    case MPK_MK_LINEAR: return fmt::format("linear.r{}", v.rows_per_warp);
    case MPK_MK_ATTENTION: return "attention";
    case MPK_MK_ATTN_MERGE: return "merge";
    case MPK_MK_ARGMAX: return "argmax";
    default: break;
  }
  return fmt::format("kind{}", v.kind);
}

std::vector<Variant> kernel_variants(const MegakernelParams& p) {
  std::vector<Variant> out = {{MPK_MK_LINEAR, p.rows_per_warp},
                              {MPK_MK_ATTENTION, 0},
                              {MPK_MK_ATTN_MERGE, 0},
                              {MPK_MK_ARGMAX, 0}};
  for (const LinearRole role : {LinearRole::Down, LinearRole::LmHead}) {
    const Variant v = linear_variant(p, role);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

Variant linear_variant(const MegakernelParams& p, LinearRole role) {
  const int own = role == LinearRole::Down ? p.down_rows_per_warp : role == LinearRole::LmHead ? p.head_rows_per_warp : 0;
  return {MPK_MK_LINEAR, own > 0 ? own : p.rows_per_warp};
}

std::string cannot_implement(const Variant& v, const MkTask& d, const MegakernelParams& p) {
  if (v.kind != d.kind) return "a task of another kind";
  switch (d.kind) {
    case MPK_MK_LINEAR:
      if (d.k < 1) return "an empty K";
      if (d.num_slices < 1 || d.num_slices > MPK_MK_MAX_SLICES)
        return fmt::format("{} slices (at most {})", d.num_slices, MPK_MK_MAX_SLICES);
      return "";
    case MPK_MK_ATTENTION:
      // A head row lives in registers, rotated in halves.
      if (d.head_dim > p.max_head_dim)
        return fmt::format("head_dim {} above max_head_dim {}", d.head_dim, p.max_head_dim);
      if (d.head_dim % 2 != 0) return fmt::format("odd head_dim {}", d.head_dim);
      return "";
    case MPK_MK_ATTN_MERGE:
    case MPK_MK_ARGMAX: return "";
    default: break;
  }
  return fmt::format("unknown task kind {}", d.kind);
}

int variant_id(const std::vector<Variant>& variants, const Variant& v) {
  for (size_t i = 0; i < variants.size(); ++i)
    if (variants[i] == v) return int(i);
  MPK_THROW(Internal) << "the kernel holds no variant " << variant_name(v);
}

std::string dispatch_source(const std::vector<Variant>& variants) {
  // The other kinds have one variant each: the worker loop calls them directly. Compares, the
  // last variant without one: measured on Qwen3 (H200), a generated switch over every kind's
  // ids (an indirect branch per task) cost 0.6% of a 0.6B step, and compare chains over every
  // kind with a context struct 2.8% (0.6B) and 4.7% (8B), bit-identical results.
  std::vector<size_t> ids;
  for (size_t i = 0; i < variants.size(); ++i)
    if (variants[i].kind == MPK_MK_LINEAR) ids.push_back(i);
  MPK_ICHECK(!ids.empty()) << "a kernel without a linear variant";
  std::string s =
      "// Generated (runtime/variants.cc): the kernel's linear variants, by MkTask::variant.\n"
      "template <int DT, class Wait>\n"
      "__device__ __forceinline__ bool mk_linear_variant(const MkTask& t, float* xs, float* red, "
      "int* redi,\n    float* part_sums, long long prefetch_bytes, MkDraw draw, MkStaged st, Wait wait) {\n";
  for (size_t j = 0; j < ids.size(); ++j) {
    const Variant& v = variants[ids[j]];
    const std::string call = fmt::format(
        "return mk_linear<DT, {}>(t, xs, red, redi, part_sums, prefetch_bytes, draw, st, wait);", v.rows_per_warp);
    if (j + 1 < ids.size())
      s += fmt::format("  if (t.variant == {}) {}  // {}\n", ids[j], call, variant_name(v));
    else
      s += fmt::format("  {}  // {}, variant {}\n", call, variant_name(v), ids[j]);
  }
  return s + "}\n";
}

}  // namespace mpk::rt
