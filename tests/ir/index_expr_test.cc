// Index expressions: C semantics when evaluated, the C text the device compiles, and the layout
// formulas the scheduler, the megakernel and the prover share.
#include <gtest/gtest.h>

#include "base/error.h"
#include "ir/index_expr.h"
#include "ir/layouts.h"

namespace mpk::ir {
namespace {

const IndexExpr a = IndexExpr::var("a"), b = IndexExpr::var("b");

TEST(IndexExpr, EvaluatesWithCSemantics) {
  EXPECT_EQ(eval((a + 1) * b - 3, {{"a", 4}, {"b", 5}}), 22);
  // C truncates toward zero: -7 / 2 == -3, -7 % 2 == -1.
  EXPECT_EQ(eval(a / b, {{"a", -7}, {"b", 2}}), -3);
  EXPECT_EQ(eval(a % b, {{"a", -7}, {"b", 2}}), -1);
  EXPECT_EQ(eval(min(a, b) + max(a, b), {{"a", 9}, {"b", -2}}), 7);
  EXPECT_EQ(eval(a ^ (b % 8), {{"a", 5}, {"b", 11}}), 6);
  // A thread's warp and lane: 70 >> 5 == 2, 70 & 31 == 6.
  EXPECT_EQ(eval(a >> 5, {{"a", 70}}), 2);
  EXPECT_EQ(eval(a & 31, {{"a", 70}}), 6);
  EXPECT_EQ(eval(a & 0, {{"a", 70}}), 0);
}

TEST(IndexExpr, UndefinedBehaviourIsAnError) {
  EXPECT_THROW(eval(a / b, {{"a", 1}, {"b", 0}}), Error);
  EXPECT_THROW(eval(a * b, {{"a", INT64_MAX / 2 + 1}, {"b", 2}}), Error);
  EXPECT_THROW(eval(a / b, {{"a", INT64_MIN}, {"b", -1}}), Error);
  EXPECT_THROW(eval(a + 1, {}), Error);
  EXPECT_THROW(eval(a ^ b, {{"a", -1}, {"b", 3}}), Error);  // bitwise on values >= 0 only
  EXPECT_THROW(eval(a >> 5, {{"a", -1}}), Error);
  EXPECT_THROW(eval(a >> b, {{"a", 1}, {"b", 63}}), Error);
  EXPECT_THROW(eval(a & 31, {{"a", -1}}), Error);
  EXPECT_THROW(eval(a & 30, {{"a", 7}}), Error);  // a mask 2^k - 1 only
}

TEST(IndexExpr, PrintsCOverLongLong) {
  EXPECT_EQ(to_c((a + 1) * b / 2), "(((((long long)a) + (1LL)) * ((long long)b)) / (2LL))");
  EXPECT_EQ(to_string((a + 1) * b / 2), "(((a + 1) * b) / 2)");
  EXPECT_EQ(to_c(a ^ (b % 8), CType::Int), "(a ^ (b % 8))");
  // A shift (of a value >= 0) printed unsigned.
  EXPECT_EQ(to_c((a >> 5) + (a & 31), CType::Int), "(((int)((unsigned)a >> 5)) + (a & 31))");
  EXPECT_EQ(to_c(a >> 5), "((long long)((unsigned long long)((long long)a) >> (5LL)))");
  EXPECT_EQ(to_string(a >> 5), "(a >> 5)");
}

TEST(Layouts, EvenSplitIsTheFormulaUsedBefore) {
  for (int64_t len = 0; len <= 70; ++len)
    for (int64_t parts = 1; parts <= 9; ++parts)
      for (int64_t c = 0; c < parts; ++c)
        EXPECT_EQ(even_split(len, parts, c),
                  (std::pair<int64_t, int64_t>{c * len / parts, (c + 1) * len / parts}));
}

TEST(Layouts, DeviceFunctionsArePrintedFromTheFormula) {
  const std::string s = layout_device_functions();
  EXPECT_NE(s.find("mk_even_split_begin(long long c, long long len, long long parts) { return " +
                   to_c(even_split_formula().begin) + "; }"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("mk_even_split_end(long long c, long long len, long long parts) { return " +
                   to_c(even_split_formula().end) + "; }"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace mpk::ir
