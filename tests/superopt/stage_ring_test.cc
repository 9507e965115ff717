// The weight ring's placement (ir::StageRing, kernels/stage.cuh): proved, evaluated by the host
// as the prover sees it, and its mutants judged against a brute force over the prover's domain.
#include <gtest/gtest.h>

#include "ir/layouts.h"
#include "superopt/index_prover.h"
#include "test_util.h"

namespace mpk::superopt {
namespace {

using ir::IndexExpr;

// Every ring of up to max_size bytes (multiples of 128), copy number and copy of 16-byte units:
// inside the ring and 128-byte aligned; the host's sizes for one copy hold it, and in rings of
// the size the host asks for two copies and a few 128-byte units more, copies c and c + 1 are
// apart (c < 4: the formula reads the copy number's parity; the prover takes any).
bool brute_force_stage(const ir::StageRing& f, int64_t max_size) {
  auto at = [&](int64_t c, int64_t size, int64_t bytes) {
    return ir::eval(f.at, {{"c", c}, {"size", size}, {"bytes", bytes}});
  };
  try {
    for (int64_t size = 128; size <= max_size; size += 128)
      for (int64_t c = 0; c < 4; ++c)
        for (int64_t bytes = 16; bytes <= size; bytes += 16) {
          const int64_t o = at(c, size, bytes);
          if (o < 0 || o + bytes > size || o % 128 != 0) return false;
        }
    for (int64_t a = 16; a <= max_size; a += 16) {
      const int64_t alone = ir::eval(f.alone, {{"a", a}});
      if (alone % 128 != 0 || alone < a) return false;
      for (int64_t b = 16; b <= max_size; b += 16) {
        const int64_t need = ir::eval(f.need, {{"a", a}, {"b", b}});
        if (need % 128 != 0) return false;
        for (int64_t size = need; size <= need + 384 && size <= max_size; size += 128)
          for (int64_t c = 0; c < 4; ++c) {
            const int64_t x = at(c, size, a), y = at(c + 1, size, b);
            if (!(x + a <= y || y + b <= x)) return false;
          }
      }
    }
  } catch (const Error&) {
    return false;
  }
  return true;
}

TEST(StageRingProofs, ThePlacementAndTheHostsSizesAreProved) {
  const ProofRecord r = prove_stage_ring(ir::stage_ring_formula(), int64_t(1) << 31);
  EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
  EXPECT_EQ(r.obligations.size(), 6u);
  EXPECT_TRUE(brute_force_stage(ir::stage_ring_formula(), 1024));
}

TEST(StageRingProofs, TheHostsRingHoldsTwoCopiesApart) {
  const ir::StageRing& f = ir::stage_ring_formula();
  // 1,008 + 2,000 bytes: 3,008 + 254 rounded down to 128 is 3,200; the odd copy of 2,000 bytes
  // at 1,152, above the even one's 1,008.
  EXPECT_EQ(ir::eval(f.need, {{"a", 1008}, {"b", 2000}}), 3200);
  EXPECT_EQ(ir::eval(f.at, {{"c", 1}, {"size", 3200}, {"bytes", 2000}}), 1152);
  EXPECT_EQ(ir::eval(f.at, {{"c", 6}, {"size", 3200}, {"bytes", 2000}}), 0);
  EXPECT_EQ(ir::eval(f.alone, {{"a", 1008}}), 1024);
  // Two copies of 16 bytes: a ring of their sum rounded up (128) puts the odd one at 0, over
  // the even one; the host's 256 at 128.
  EXPECT_EQ(ir::eval(f.at, {{"c", 1}, {"size", 128}, {"bytes", 16}}), 0);
  EXPECT_EQ(ir::eval(f.need, {{"a", 16}, {"b", 16}}), 256);
  EXPECT_EQ(ir::eval(f.at, {{"c", 1}, {"size", 256}, {"bytes", 16}}), 128);
}

TEST(StageRingProofs, MutantsAgreeWithBruteForce) {
  const ir::StageRing& f = ir::stage_ring_formula();
  std::vector<ir::StageRing> rings;
  for (const IndexExpr& m : mutants(f.at)) rings.push_back({m, f.need, f.alone});
  for (const IndexExpr& m : mutants(f.need)) rings.push_back({f.at, m, f.alone});
  for (const IndexExpr& m : mutants(f.alone)) rings.push_back({f.at, f.need, m});
  // Hand-made: the odd copy's offset not rounded (a copy's destination off 128-byte alignment),
  // rounded up (past the ring's end), the host's ring without the rounding's slack, and the even
  // copies moved up by up to 128 bytes (inside the ring, over the odd one in a tight ring).
  const IndexExpr c = IndexExpr::var("c"), size = IndexExpr::var("size"), bytes = IndexExpr::var("bytes");
  const IndexExpr a = IndexExpr::var("a"), b = IndexExpr::var("b");
  rings.push_back({c % 2 * (size - bytes), f.need, f.alone});
  rings.push_back({c % 2 * ((size - bytes + 127) / 128 * 128), f.need, f.alone});
  rings.push_back({f.at, (a + b + 127) / 128 * 128, f.alone});
  const IndexExpr top = (size - bytes) / 128 * 128;
  rings.push_back({c % 2 * top + (1 - c % 2) * min(128, top), f.need, f.alone});
  std::vector<ir::IndexEnv> points;
  for (int64_t size = 128; size <= 512; size += 128)
    for (int64_t n = 16; n <= size; n += 48)
      points.push_back({{"c", size / 128}, {"size", size}, {"bytes", n}, {"a", n}, {"b", size - n + 16}});
  Tally tally{"weight ring over rings of up to 512 bytes"};
  for (const ir::StageRing& m : rings)
    tally.judge(prove_stage_ring(m, 512, 2000).proved(), brute_force_stage(m, 512),
                same_values(m.at, f.at, points) && same_values(m.need, f.need, points) &&
                    same_values(m.alone, f.alone, points),
                "at " + ir::to_string(m.at) + ", need " + ir::to_string(m.need) + ", alone " + ir::to_string(m.alone));
}

}  // namespace
}  // namespace mpk::superopt
