#include "runtime/variants.h"

#include <fmt/format.h>

#include "base/error.h"
#include "runtime/kernels/task_desc.h"

namespace mpk::rt {
namespace {

// The entry point of a variant, called with the descriptor, the context and the wait.
std::string entry_call(const Variant& v) {
  switch (v.kind) {
    case MPK_MK_LINEAR: return fmt::format("mk_task_linear<DT, {}>", v.rows_per_warp);
    case MPK_MK_ATTENTION: return "mk_task_attention";
    case MPK_MK_ATTN_MERGE: return "mk_task_merge";
    case MPK_MK_ARGMAX: return "mk_task_argmax<DT>";
    default: break;
  }
  MPK_THROW(Internal) << "no task kind " << v.kind;
}

}  // namespace

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
  const Variant down = linear_variant(p, true);
  if (!(down == out[0])) out.push_back(down);
  return out;
}

Variant linear_variant(const MegakernelParams& p, bool silu_input) {
  const int rows = silu_input && p.down_rows_per_warp > 0 ? p.down_rows_per_warp : p.rows_per_warp;
  return {MPK_MK_LINEAR, rows};
}

int variant_id(const std::vector<Variant>& variants, const Variant& v) {
  for (size_t i = 0; i < variants.size(); ++i)
    if (variants[i] == v) return int(i);
  MPK_THROW(Internal) << "the kernel holds no variant " << variant_name(v);
}

std::string dispatch_source(const std::vector<Variant>& variants) {
  std::string s =
      "// Generated (runtime/variants.cc): the kernel's variants, by MkTask::variant.\n"
      "template <int DT, class Wait>\n"
      "__device__ __forceinline__ bool mk_dispatch(const MkTask& t, const MkCtx& cx, Wait wait) {\n"
      "  switch (t.variant) {\n";
  for (size_t i = 0; i < variants.size(); ++i)
    s += fmt::format("    case {}: return {}(t, cx, wait);  // {}\n", i, entry_call(variants[i]),
                     variant_name(variants[i]));
  // Unreachable: the host assigns only these ids (variant_id).
  return s + "    default: __trap();\n  }\n  return false;\n}\n";
}

}  // namespace mpk::rt
