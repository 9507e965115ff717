// The index prover on the even split that the scheduler and the megakernel share: the real
// formula is proved; every generated mutant and the hand-made wrong ones are refuted with a
// counterexample.
#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

#include "superopt/index_prover.h"
#include "tests/superopt/test_util.h"
#include "superopt/z3_check.h"

namespace mpk::superopt {
namespace {

using ir::EvenSplit;
using ir::IndexExpr;

// KV lengths up to int32 positions; part counts as plans make them (chunks per head, merge
// parts), each proved on its own.
constexpr int64_t kMaxLen = int64_t(1) << 31;
constexpr int64_t kParts[] = {1, 2, 3, 7, 16, 32, 132, 1024};

TEST(IndexProver, EvenSplitIsProved) {
  for (int64_t parts : kParts) {
    const ProofRecord r = prove_even_split(ir::even_split_formula(), kMaxLen, parts);
    double ms = 0;
    for (const Obligation& o : r.obligations) {
      EXPECT_EQ(o.result, "proved") << o.name << ": " << o.counterexample;
      ms += o.ms;
    }
    EXPECT_TRUE(r.proved());
    EXPECT_EQ(r.obligations.size(), 5u);
    EXPECT_NE(r.to_json().find("\"proved\":true"), std::string::npos);
    std::printf("[prover] %s: %zu obligations proved in %.0f ms (Z3 %s)\n", r.subject.c_str(),
                r.obligations.size(), ms, r.z3_version.c_str());
  }
}

TEST(IndexProver, EveryMutantIsRefuted) {
  const EvenSplit& f = ir::even_split_formula();
  std::vector<EvenSplit> all;
  for (const IndexExpr& m : mutants(f.begin)) all.push_back({m, f.end});
  for (const IndexExpr& m : mutants(f.end)) all.push_back({f.begin, m});
  ASSERT_GE(all.size(), 20u);
  int refuted = 0;
  for (const EvenSplit& m : all) {
    const ProofRecord r = prove_even_split(m, kMaxLen, 7);
    const std::string why = failed(r);
    EXPECT_FALSE(r.proved()) << "mutant accepted: " << r.subject;
    bool witness = false;
    for (const Obligation& o : r.obligations) witness |= o.result == "refuted" && !o.counterexample.empty();
    EXPECT_TRUE(witness) << r.subject << ": no counterexample (" << why << ")";
    refuted += !r.proved();
  }
  std::printf("[prover] even split: %zu mutants generated, %d refuted\n", all.size(), refuted);
}

TEST(IndexProver, HandMadeWrongSplitsAreRefutedByTheRightObligation) {
  const IndexExpr c = IndexExpr::var("c"), len = IndexExpr::var("len"), parts = IndexExpr::var("parts");
  struct Case {
    const char* what;
    EvenSplit f;
    const char* obligation;
  } cases[] = {
      {"chunk end + 1 (overlaps the next chunk)", {c * len / parts, (c + 1) * len / parts + 1},
       "exactly once: each part ends where the next begins"},
      {"chunk end one short (an item uncovered)", {c * len / parts, (c + 1) * len / parts - 1},
       "exactly once: each part ends where the next begins"},
      {"stride of len / parts (the tail lost)", {c * (len / parts), (c + 1) * (len / parts)},
       "exactly once: the last part ends at len"},
      {"end past len", {c * len / parts, (c + 2) * len / parts}, "bounds"},
  };
  for (const Case& k : cases) {
    const ProofRecord r = prove_even_split(k.f, kMaxLen, 16);
    bool hit = false;
    for (const Obligation& o : r.obligations)
      if (o.name.rfind(k.obligation, 0) == 0) {
        hit = true;
        EXPECT_EQ(o.result, "refuted") << k.what;
        EXPECT_FALSE(o.counterexample.empty()) << k.what;
      }
    EXPECT_TRUE(hit) << k.what;
  }
}

TEST(IndexProver, SmallDomainsStillProve) {
  // The proof is per domain: a one-part, zero-length domain is trivially covered.
  EXPECT_TRUE(prove_even_split(ir::even_split_formula(), 0, 1).proved());
}

// A query Z3 cannot settle in time (no positive cubes x^3 + y^3 = z^3 with x, y < 2,000) ends
// at its limit as not proved, and the context answers the next query. The limit is on Z3's
// work: the same query stops after the same count in any context, whatever the machine's load.
TEST(IndexProver, AQueryPastItsWorkLimitIsUnknownAfterTheSameWork) {
  auto cubes = [](z3::context& ctx) {
    const z3::expr x = ctx.int_const("x"), y = ctx.int_const("y"), z = ctx.int_const("z");
    return check_limits(ctx, "cubes", x >= 1 && y >= 1 && z >= 1 && x < 2000 && y < 2000,
                        x * x * x + y * y * y != z * z * z, {x, y, z}, 1'000'000, 600'000);
  };
  z3::context ctx;
  const Obligation o = cubes(ctx);
  EXPECT_EQ(o.result, "unknown") << o.counterexample;
  EXPECT_EQ(o.counterexample, "over the work limit of 1000000 units");
  EXPECT_GE(o.work, 1'000'000u);
  EXPECT_LT(o.work, 1'010'000u);
  std::printf("stopped after %.0f ms and %llu units\n", o.ms, (unsigned long long)o.work);
  const z3::expr x = ctx.int_const("x");
  const Obligation trivial = check(ctx, "then a trivial one", x >= 1, x >= 0, {x}, 300);
  EXPECT_EQ(trivial.result, "proved");
  EXPECT_GT(trivial.work, 0u);
  EXPECT_LT(trivial.work, 300 * kWorkPerMs);
  z3::context other;
  EXPECT_EQ(cubes(other).work, o.work);
}

// The wall clock backs the work limit up: a watchdog's interrupt, not Z3's own timer.
TEST(IndexProver, AQueryPastItsWallClockIsUnknown) {
  z3::context ctx;
  const z3::expr x = ctx.int_const("x"), y = ctx.int_const("y"), z = ctx.int_const("z");
  const Obligation o = check_limits(ctx, "cubes", x >= 1 && y >= 1 && z >= 1, x * x * x + y * y * y != z * z * z,
                                    {x, y, z}, 0, 300);
  EXPECT_EQ(o.result, "unknown") << o.counterexample;
  EXPECT_EQ(o.counterexample, "over the wall-clock limit of 300 ms");
  std::printf("interrupted after %.0f ms (wall-clock limit 300)\n", o.ms);
  EXPECT_EQ(check(ctx, "then a trivial one", x >= 1, x >= 0, {x}, 300).result, "proved");
}

// Queries on several threads at once (a context each) share the one watchdog: each undecidable
// query ends at its own wall-clock limit, each decidable one is answered, interleaved in any
// order.
TEST(IndexProver, ConcurrentQueriesEachKeepTheirLimit) {
  std::vector<std::string> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&results, i] {
      z3::context ctx;
      const z3::expr x = ctx.int_const("x"), y = ctx.int_const("y"), z = ctx.int_const("z");
      results[size_t(2 * i)] = check_limits(ctx, "cubes", x >= 1 && y >= 1 && z >= 1,
                                            x * x * x + y * y * y != z * z * z, {}, 0, 100 + 50 * unsigned(i))
                                   .counterexample;
      results[size_t(2 * i + 1)] = check(ctx, "trivial", x >= 1, x >= 0, {}, 100).result;
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(results[size_t(2 * i)], "over the wall-clock limit of " + std::to_string(100 + 50 * i) + " ms") << i;
    EXPECT_EQ(results[size_t(2 * i + 1)], "proved") << i;
  }
}

}  // namespace
}  // namespace mpk::superopt
