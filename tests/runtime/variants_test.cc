// Kernel variants: the list a build holds, the variant every task descriptor carries, and the
// generated dispatch (two linear variants side by side in one kernel).
#include "runtime/variants.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "ir/builder.h"
#include "model/model.h"
#include "model_configs.h"
#include "runtime/megakernel.h"

namespace mpk::rt {
namespace {

TEST(Variants, DefaultKernelHoldsOneVariantPerKind) {
  const std::vector<Variant> v = kernel_variants(MegakernelParams{});
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(variant_name(v[0]), "linear.r2");
  EXPECT_EQ(variant_name(v[1]), "attention");
  EXPECT_EQ(variant_name(v[2]), "merge");
  EXPECT_EQ(variant_name(v[3]), "argmax");
  // The down projection's setting adds a variant only when it differs.
  EXPECT_EQ(kernel_variants(MegakernelParams{.down_rows_per_warp = 2}).size(), 4u);
  const auto w = kernel_variants(MegakernelParams{.rows_per_warp = 3, .down_rows_per_warp = 1});
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(variant_name(w[0]), "linear.r3");
  EXPECT_EQ(variant_name(w[4]), "linear.r1");
  // The LM head's the same way, after the down projection's; one both share is listed once.
  const auto h = kernel_variants(MegakernelParams{.rows_per_warp = 3, .down_rows_per_warp = 1, .head_rows_per_warp = 4});
  ASSERT_EQ(h.size(), 6u);
  EXPECT_EQ(variant_name(h[5]), "linear.r4");
  EXPECT_EQ(kernel_variants(MegakernelParams{.rows_per_warp = 3, .down_rows_per_warp = 1, .head_rows_per_warp = 1}).size(),
            5u);
  EXPECT_EQ(kernel_variants(MegakernelParams{.head_rows_per_warp = 2}).size(), 4u);
}

TEST(Variants, AVariantTheKernelDoesNotHoldIsRefused) {
  try {
    (void)variant_id(kernel_variants(MegakernelParams{}), Variant{MPK_MK_LINEAR, 1});
    ADD_FAILURE() << "linear.r1 found in the default kernel";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal) << e.what();
    EXPECT_NE(std::string(e.what()).find("linear.r1"), std::string::npos) << e.what();
  }
}

// A variant says which tasks it can run; a task none of the kernel's variants runs is refused
// at build with every variant's reason.
TEST(Variants, CannotImplementSaysWhy) {
  const MegakernelParams p = params_for_head_dim(128);
  MkTask d{};
  d.kind = MPK_MK_ATTENTION;
  d.head_dim = 128;
  EXPECT_EQ(cannot_implement(Variant{MPK_MK_ATTENTION, 0}, d, p), "");
  EXPECT_EQ(cannot_implement(Variant{MPK_MK_LINEAR, 2}, d, p), "a task of another kind");
  d.head_dim = 192;
  EXPECT_EQ(cannot_implement(Variant{MPK_MK_ATTENTION, 0}, d, p), "head_dim 192 above max_head_dim 128");
  d.head_dim = 127;
  EXPECT_EQ(cannot_implement(Variant{MPK_MK_ATTENTION, 0}, d, p), "odd head_dim 127");
  MkTask l{};
  l.kind = MPK_MK_LINEAR;
  l.k = 64;
  l.num_slices = 1;
  EXPECT_EQ(cannot_implement(Variant{MPK_MK_LINEAR, 1}, l, p), "");
  l.num_slices = MPK_MK_MAX_SLICES + 1;
  EXPECT_NE(cannot_implement(Variant{MPK_MK_LINEAR, 1}, l, p), "");

  model::Config c = mpk::testing::qwen3_0_6b();  // head_dim 128; two layers are enough
  c.num_layers = 2;
  const ir::Graph g = ir::build(c);
  const sched::Plan plan = sched::plan(g, megakernel_plan_options(g, 16, 16));
  const MemoryPlan mem = plan_memory(g, plan.tasks, DType::BF16, 16);
  try {
    (void)build_tables(g, plan, mem, SegmentBases{}, MegakernelParams{.max_head_dim = 64});
    ADD_FAILURE() << "head_dim 128 accepted by a kernel for 64";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("attention: head_dim 128 above max_head_dim 64"),
              std::string::npos) << e.what();
  }
}

// Each task runs the variant of its kind; the down projection (input silu(gate) * up) its own.
TEST(Variants, TasksCarryTheirVariant) {
  const auto model = model::load(std::string(MPK_TEST_DATA) + "/qwen3-bf16");
  const ir::Graph g = ir::build(model->config);
  const sched::Plan plan = sched::plan(g, megakernel_plan_options(g, 16, 64));
  const MemoryPlan mem = plan_memory(g, plan.tasks, model->dtype, 64);
  const MegakernelParams p{.rows_per_warp = 3, .down_rows_per_warp = 1};
  const std::vector<Variant> vs = kernel_variants(p);
  const MegakernelTables t = build_tables(g, plan, mem, SegmentBases{}, p);
  int down = 0, other = 0;
  for (const MkTask& d : t.tasks) {
    ASSERT_GE(d.variant, 0);
    ASSERT_LT(d.variant, int(vs.size()));
    const Variant& v = vs[size_t(d.variant)];
    EXPECT_EQ(v.kind, d.kind) << "task " << d.id;
    if (d.kind != MPK_MK_LINEAR) continue;
    const bool silu = d.input_mode == MPK_MK_IN_SILUMUL;
    EXPECT_EQ(v.rows_per_warp, silu ? 1 : 3) << "task " << d.id;
    ++(silu ? down : other);
  }
  EXPECT_GT(down, 0);
  EXPECT_GT(other, 0);
  // The LM head's own variant: its tiles (those that take the argmax partials) and no other.
  const MegakernelParams hp{.rows_per_warp = 3, .down_rows_per_warp = 1, .head_rows_per_warp = 4};
  const std::vector<Variant> hvs = kernel_variants(hp);
  int head = 0;
  for (const MkTask& d : build_tables(g, plan, mem, SegmentBases{}, hp).tasks) {
    if (d.kind != MPK_MK_LINEAR) continue;
    const int rows = hvs[size_t(d.variant)].rows_per_warp;
    const int want = d.input_mode == MPK_MK_IN_SILUMUL ? 1 : (d.flags & MPK_MK_F_ARGMAX) ? 4 : 3;
    EXPECT_EQ(rows, want) << "task " << d.id;
    head += (d.flags & MPK_MK_F_ARGMAX) != 0;
  }
  EXPECT_GT(head, 0);
  // The default parameters: every linear runs variant 0.
  for (const MkTask& d : build_tables(g, plan, mem, SegmentBases{}).tasks) {
    if (d.kind == MPK_MK_LINEAR) {
      EXPECT_EQ(d.variant, 0) << "task " << d.id;
    }
  }
}

// The dispatch is generated from the list: one case per linear variant, the last without a
// compare; a kernel with two linear variants compiles.
TEST(Variants, DispatchHasOneCasePerLinearVariant) {
  const MegakernelParams p{.rows_per_warp = 2, .down_rows_per_warp = 4};
  const std::string src = megakernel_source(p, DType::BF16);
  EXPECT_NE(src.find("  if (t.variant == 0) return mk_linear<DT, 2>(t, xs, red, redi, part_sums, "
                     "prefetch_bytes, draw, st, wait);  // linear.r2\n"),
            std::string::npos);
  EXPECT_NE(src.find("  return mk_linear<DT, 4>(t, xs, red, redi, part_sums, prefetch_bytes, draw, st, wait);"
                     "  // linear.r4, variant 4\n"),
            std::string::npos);
  EXPECT_EQ(src.find("t.variant == 4"), std::string::npos);
  const std::string one = megakernel_source(MegakernelParams{}, DType::BF16);
  EXPECT_EQ(one.find("t.variant =="), std::string::npos);
  const cuda::CompileResult r = compile_megakernel("sm_90a", p, DType::BF16);
  EXPECT_FALSE(r.cubin.empty());
}

}  // namespace
}  // namespace mpk::rt
