// The prefill kernels' tile formulas (ir/layouts.h): the mma output tile and the chunked loads,
// proved for every tile shape the kernels use; every generated mutant of the printed formulas is
// judged like a brute-force enumeration of the tile (a mutant the prover accepts breaks nothing
// there; one it refutes does), so a wrong formula cannot pass.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <tuple>
#include <string>
#include <utility>

#include "base/error.h"
#include "superopt/index_prover.h"
#include "tests/superopt/test_util.h"

namespace mpk::superopt {
namespace {

using ir::IndexExpr;

// Every (a, b) with 0 <= a < na and 0 <= b < nb, as environments of the variables a and b.
std::vector<ir::IndexEnv> grid(const std::string& a, int64_t na, const std::string& b, int64_t nb) {
  std::vector<ir::IndexEnv> out;
  for (int64_t i = 0; i < na; ++i)
    for (int64_t j = 0; j < nb; ++j) out.push_back({{a, i}, {b, j}});
  return out;
}

// Every holder's element inside the tile and all of them distinct (with as many holders as
// elements: a bijection), and each holder's two columns a pair (e = 0 even, e = 1 the next).
// With one warp across and bn a multiple of `head`, prove_mma_tile's "heads" too: fragment ni
// in head ni / (head / 8), ni + head / 16 at the column head / 2 further in the row, and a row
// held by one (warp, mi, h, quad).
bool brute_force_tile(const ir::MmaTile& f, int64_t bm, int64_t bn, int64_t wm, int64_t wn, int64_t head = 128) {
  const int64_t wtm = bm / wm, wtn = bn / wn;
  const bool heads = wn == 1 && bn % head == 0;
  std::map<int64_t, std::tuple<int64_t, int64_t, int64_t, int64_t>> quad;  // row -> (warp, mi, h, lane / 4)
  std::set<std::pair<int64_t, int64_t>> seen;
  try {
    for (int64_t warp = 0; warp < wm * wn; ++warp)
      for (int64_t mi = 0; mi < wtm / 16; ++mi)
        for (int64_t ni = 0; ni < wtn / 8; ++ni)
          for (int64_t lane = 0; lane < 32; ++lane)
            for (int64_t h = 0; h < 2; ++h)
              for (int64_t e = 0; e < 2; ++e) {
                const ir::IndexEnv env = {{"warp", warp}, {"mi", mi}, {"ni", ni}, {"lane", lane}, {"h", h},
                                          {"e", e}, {"wn", wn}, {"wtm", wtm}, {"wtn", wtn}};
                const int64_t r = ir::eval(f.row, env), c = ir::eval(f.col, env);
                if (r < 0 || r >= bm || c < 0 || c >= bn || !seen.insert({r, c}).second) return false;
                if (e == 0) {  // the epilogues' pairs: e = 1 at the next column of the row
                  ir::IndexEnv next = env;
                  next["e"] = 1;
                  if (c % 2 != 0 || ir::eval(f.col, next) != c + 1 || ir::eval(f.row, next) != r) return false;
                }
                if (!heads) continue;
                if (c / head != ni / (head / 8)) return false;
                if (ni % (head / 8) < head / 16) {
                  ir::IndexEnv other = env;
                  other["ni"] = ni + head / 16;
                  if (ir::eval(f.col, other) != c + head / 2 || ir::eval(f.row, other) != r) return false;
                }
                const auto q = std::tuple{warp, mi, h, lane / 4};
                if (!quad.emplace(r, q).second && quad.at(r) != q) return false;
              }
  } catch (const Error&) {
    return false;
  }
  return int64_t(seen.size()) == bm * bn;
}

bool brute_force_load(const ir::ChunkLoad& f, int64_t rows, int64_t ch, int64_t threads, int64_t ld) {
  const int64_t width = f.width;
  std::set<std::pair<int64_t, int64_t>> seen;
  try {
    for (int64_t tid = 0; tid < threads; ++tid)
      for (int64_t i = 0; i < rows * ch / threads; ++i) {
        const ir::IndexEnv env = {{"tid", tid}, {"i", i}, {"threads", threads}, {"ch", ch}};
        const int64_t r = ir::eval(f.row, env), c = ir::eval(f.col, env);
        if (r < 0 || r >= rows || c < 0 || c % width != 0 || c + width > ch * width || r * ld + c + width > rows * ld ||
            !seen.insert({r, c}).second)
          return false;
      }
  } catch (const Error&) {
    return false;
  }
  return int64_t(seen.size()) == rows * ch;
}

TEST(TileProofs, TheKernelsTileShapesAreProved) {
  // GEMM 128 x 256 over 2 x 4 warps and 64 x 128 over 1 x 4, the wgmma tiles' 128 x 256 and
  // 128 x 128 over 8 x 1 (two warpgroups of 64 rows); attention's S and O tiles of 64 rows over
  // 4 x 1 warps (64 keys; head dims 16 .. 128).
  for (auto [bm, bn, wm, wn] : {std::tuple{128, 256, 2, 4}, {64, 128, 1, 4}, {128, 256, 8, 1}, {128, 128, 8, 1},
                                {64, 64, 4, 1}, {64, 16, 4, 1}, {64, 32, 4, 1}, {64, 128, 4, 1}}) {
    const ProofRecord r = prove_mma_tile(ir::mma_tile_formula(), bm, bn, wm, wn);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
  }
  // GEMM operands (K steps of 64 and 32) and attention's key/value blocks.
  for (auto [rows, ch, threads, ld] : {std::tuple{128, 8, 256, 72}, {256, 8, 256, 72}, {64, 4, 128, 40},
                                       {128, 4, 128, 40}, {64, 2, 128, 24}, {64, 16, 128, 136}}) {
    const ProofRecord r = prove_chunk_load(ir::chunk_load_formula(), rows, ch, threads, ld);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
  }
  // Attention's pairs (Q staged, keys and values of rows that are not whole chunks): 64 rows of
  // DP / 2 pairs by 128 threads into rows of DP + 8.
  for (int64_t dp : {16, 32, 64, 128}) {
    const ProofRecord r = prove_chunk_load(ir::pair_load_formula(), 64, dp / 2, 128, dp + 8);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    EXPECT_TRUE(brute_force_load(ir::pair_load_formula(), 64, dp / 2, 128, dp + 8));
  }
  EXPECT_TRUE(brute_force_tile(ir::mma_tile_formula(), 64, 128, 1, 4));
  EXPECT_TRUE(brute_force_tile(ir::mma_tile_formula(), 128, 256, 8, 1));  // the wgmma tile's heads
  EXPECT_TRUE(brute_force_load(ir::chunk_load_formula(), 64, 4, 128, 40));
  // A chunk layout's columns with another width are wrong: 16-byte columns as pairs leave pairs
  // unloaded, pair columns as 16-byte chunks overlap.
  ir::ChunkLoad as_pairs = ir::chunk_load_formula(), as_chunks = ir::pair_load_formula();
  as_pairs.width = 2, as_chunks.width = 8;
  EXPECT_FALSE(prove_chunk_load(as_pairs, 64, 8, 128, 24, 2000).proved());
  EXPECT_FALSE(prove_chunk_load(as_chunks, 64, 4, 128, 40, 2000).proved());
}

TEST(TileProofs, MutantsAgreeWithBruteForce) {
  const ir::MmaTile& t = ir::mma_tile_formula();
  std::vector<ir::MmaTile> tiles;
  for (const IndexExpr& m : mutants(t.row)) tiles.push_back({m, t.col, t.warp_of, t.mi_of, t.ni_of, t.lane_of, t.h_of, t.e_of});
  for (const IndexExpr& m : mutants(t.col)) tiles.push_back({t.row, m, t.warp_of, t.mi_of, t.ni_of, t.lane_of, t.h_of, t.e_of});
  {
    std::vector<ir::IndexEnv> holders;  // 32 x 32 over 2 x 1 warps: warp tiles of 16 x 32
    for (int64_t w = 0; w < 2; ++w)
      for (int64_t ni = 0; ni < 4; ++ni)
        for (int64_t lane = 0; lane < 32; ++lane)
          for (int64_t h = 0; h < 2; ++h)
            for (int64_t e = 0; e < 2; ++e)
              holders.push_back({{"warp", w}, {"mi", 0}, {"ni", ni}, {"lane", lane}, {"h", h}, {"e", e},
                                 {"wn", 1}, {"wtm", 16}, {"wtn", 32}});
    // Heads of 16 columns: the "heads" obligations judged too.
    Tally tally{"mma tile 32 x 32 over 2 x 1 warps, heads of 16"};
    for (const ir::MmaTile& m : tiles)
      tally.judge(prove_mma_tile(m, 32, 32, 2, 1, 2000, 16).proved(), brute_force_tile(m, 32, 32, 2, 1, 16),
                  same_values(m.row, t.row, holders) && same_values(m.col, t.col, holders),
                  "row " + ir::to_string(m.row) + ", col " + ir::to_string(m.col));
  }
  std::vector<ir::IndexEnv> threads;  // 16 rows x 4 chunks by 32 threads: 2 rounds
  for (int64_t tid = 0; tid < 32; ++tid)
    for (int64_t i = 0; i < 2; ++i) threads.push_back({{"tid", tid}, {"i", i}, {"threads", 32}, {"ch", 4}});
  // Each load layout's row and column mutants over 16 rows of 4 chunks, in rows of `ld`.
  auto load_suite = [&](const ir::ChunkLoad& l, const char* name, int64_t ld) {
    std::vector<ir::ChunkLoad> loads;
    for (const IndexExpr& m : mutants(l.row)) loads.push_back({m, l.col, l.tid_of, l.i_of, l.width});
    for (const IndexExpr& m : mutants(l.col)) loads.push_back({l.row, m, l.tid_of, l.i_of, l.width});
    Tally tally{name};
    for (const ir::ChunkLoad& m : loads)
      tally.judge(prove_chunk_load(m, 16, 4, 32, ld, 2000).proved(), brute_force_load(m, 16, 4, 32, ld),
                  same_values(m.row, l.row, threads) && same_values(m.col, l.col, threads),
                  "row " + ir::to_string(m.row) + ", col " + ir::to_string(m.col));
  };
  load_suite(ir::chunk_load_formula(), "chunk load of 16 x 4 chunks by 32 threads", 40);
  load_suite(ir::pair_load_formula(), "pair load of 16 x 4 pairs by 32 threads", 12);
}

// The 128-byte swizzle over `rows` rows: every chunk where the hardware's pattern puts it
// (address bits 4-6 XOR bits 7-9), hence inside its row and the eight chunks of a row on eight
// distinct slots.
bool brute_force_swizzle(const ir::Swizzle128& f, int64_t rows) {
  try {
    for (int64_t r = 0; r < rows; ++r) {
      std::set<int64_t> seen;
      for (int64_t c = 0; c < 8; ++c) {
        const int64_t s = ir::eval(f.chunk, {{"r", r}, {"c", c}});
        const int64_t addr = r * 128 + c * 16;
        if (s != (((addr >> 4) & 7) ^ ((addr >> 7) & 7)) || !seen.insert(s).second) return false;
      }
    }
  } catch (const Error&) {
    return false;
  }
  return true;
}

TEST(SwizzleProofs, TheWgmmaTilesSwizzleIsProvedAndMutantsAgreeWithBruteForce) {
  const ir::Swizzle128& f = ir::swizzle128_formula();
  for (int64_t rows : {128, 256}) {
    const ProofRecord r = prove_swizzle128(f, rows);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    EXPECT_TRUE(brute_force_swizzle(f, rows));
  }
  // Permutations of a row that are not the hardware's pattern: no swizzle, a shifted one.
  const IndexExpr r = IndexExpr::var("r"), c = IndexExpr::var("c");
  for (const IndexExpr& wrong : {c, c ^ ((r + 1) % 8), (c + r) % 8}) {
    EXPECT_FALSE(prove_swizzle128({wrong, f.c_of}, 64, 2000).proved()) << ir::to_string(wrong);
    EXPECT_FALSE(brute_force_swizzle({wrong, f.c_of}, 64)) << ir::to_string(wrong);
  }
  const std::vector<ir::IndexEnv> chunks = grid("r", 64, "c", 8);
  Tally tally{"128-byte swizzle of 64 rows"};
  for (const IndexExpr& m : mutants(f.chunk)) {
    const ir::Swizzle128 g{m, f.c_of};
    tally.judge(prove_swizzle128(g, 64, 2000).proved(), brute_force_swizzle(g, 64), same_values(m, f.chunk, chunks),
                ir::to_string(m));
  }
}

// A K-major operand over boxes by enumeration (WgmmaBoxedOperand's layout, restated), with the
// swizzle applied (the prover compares the addresses before it): for every warpgroup, K slice,
// operand row and element (the tile at a 1,024-byte aligned address, 3 KiB in), the byte the
// descriptor reads (start + (i / 8) sbo + (i % 8) 128 + 2 j) is the one the element was stored
// at, both swizzled (address bits 4-6 XOR bits 7-9), and inside the operand's region.
bool brute_force_boxed(const IndexExpr& start, const WgmmaBoxedOperand& sh) {
  auto swz = [](int64_t a) { return a ^ (((a >> 7) & 7) << 4); };
  const int64_t tile = 3 * 1024;
  try {
    for (int64_t wg = 0; wg < sh.wgs; ++wg)
      for (int64_t kk = 0; kk < sh.slices; ++kk) {
        const int64_t st = ir::eval(start, {{"wg", wg}, {"kk", kk}, {"box", sh.box_bytes}});
        if (st < 0 || st >= sh.bytes) return false;
        for (int64_t i = 0; i < sh.rows; ++i)
          for (int64_t j = 0; j < 16; ++j) {
            const int64_t off = st + i / 8 * sh.sbo + i % 8 * 128 + 2 * j;
            const int64_t want = wg * sh.wg_bytes + kk / 4 * sh.box_bytes + i * 128 + (16 * (kk % 4) + j) * 2;
            if (off >= sh.bytes || swz(tile + off) != swz(tile + want)) return false;
          }
      }
  } catch (const Error&) {
    return false;
  }
  return true;
}

// The GEMM tile's operands: one box, warpgroup wg's rows wg_rows rows on.
bool brute_force_wgmma(const IndexExpr& start, int64_t wgs, int64_t wg_rows, int64_t rows, int64_t tile_rows,
                       int64_t sbo) {
  return brute_force_boxed(start, WgmmaBoxedOperand{wgs, rows, 4, 0, wg_rows * 128, tile_rows * 128, sbo});
}

TEST(WgmmaProofs, TheDescriptorsReadWhatTheTmaStoredAndMutantsAgreeWithBruteForce) {
  const ir::WgmmaOperands& f = ir::wgmma_operand_formulas();
  struct Use {
    const char* what;
    const IndexExpr* start;
    int64_t wgs, wg_rows, rows, tile_rows;
  };
  for (const Use& u : {Use{"A", &f.a_start, 2, 64, 64, 128}, Use{"B", &f.b_start, 2, 0, 256, 256}}) {
    const ProofRecord r = prove_wgmma_operand(*u.start, u.what, u.wgs, u.wg_rows, u.rows, u.tile_rows, ir::kWgmmaSbo);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    EXPECT_TRUE(brute_force_wgmma(*u.start, u.wgs, u.wg_rows, u.rows, u.tile_rows, ir::kWgmmaSbo));
    // Row groups at another stride than the tile's 8 rows of 128 bytes: refuted.
    for (int64_t sbo : {512, 2048}) {
      EXPECT_FALSE(prove_wgmma_operand(*u.start, u.what, u.wgs, u.wg_rows, u.rows, u.tile_rows, sbo, 2000).proved());
      EXPECT_FALSE(brute_force_wgmma(*u.start, u.wgs, u.wg_rows, u.rows, u.tile_rows, sbo));
    }
    const std::vector<ir::IndexEnv> starts = grid("wg", u.wgs, "kk", 4);
    Tally tally{u.what};
    for (const IndexExpr& m : mutants(*u.start))
      tally.judge(prove_wgmma_operand(m, u.what, u.wgs, u.wg_rows, u.rows, u.tile_rows, ir::kWgmmaSbo, 2000).proved(),
                  brute_force_wgmma(m, u.wgs, u.wg_rows, u.rows, u.tile_rows, ir::kWgmmaSbo),
                  same_values(m, *u.start, starts), ir::to_string(m));
  }
}

// The wgmma attention's values by enumeration (ir::WgmmaAttentionOperands' layout, restated):
// every read of the MN-major values is the swizzled store.
bool brute_force_mn(const IndexExpr& start, int64_t slices, int64_t n, int64_t box, int64_t lbo, int64_t sbo) {
  auto swz = [](int64_t a) { return a ^ (((a >> 7) & 7) << 4); };
  const int64_t tile = 3 * 1024;
  try {
    for (int64_t kk = 0; kk < slices; ++kk) {
      const int64_t st = ir::eval(start, {{"kk", kk}, {"box", box}});
      if (st < 0 || st >= box * (n / 64)) return false;
      for (int64_t i = 0; i < 16; ++i)
        for (int64_t e = 0; e < n; ++e) {
          const int64_t off = st + e / 64 * lbo + e % 64 * 2 + i / 8 * sbo + i % 8 * 128;
          if (off >= box * (n / 64) || swz(tile + off) != swz(tile + e / 64 * box + (16 * kk + i) * 128 + e % 64 * 2))
            return false;
        }
    }
  } catch (const Error&) {
    return false;
  }
  return true;
}

TEST(WgmmaProofs, TheAttentionDescriptorsReadWhatWasStoredAndMutantsAgreeWithBruteForce) {
  const ir::WgmmaAttentionOperands& f = ir::wgmma_attention_operand_formulas();
  const int64_t keys = 64, box = keys * 128, sbo = ir::kWgmmaSbo;  // kWgmmaAttention's blocks
  const WgmmaBoxedOperand q{2, 64, 8, 64 * 128, 2 * 64 * 128, 2 * 2 * 64 * 128, sbo}, k{2, keys, 8, box, 0, 2 * box, sbo};
  for (const auto& [what, start, sh] : {std::tuple{"Q", &f.q_start, q}, std::tuple{"K", &f.k_start, k}}) {
    const ProofRecord r = prove_wgmma_operand(*start, what, sh);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    EXPECT_TRUE(brute_force_boxed(*start, sh)) << what;
    WgmmaBoxedOperand far = sh;  // Q's boxes at another distance than its start's (K's reads `box`)
    far.box_bytes *= 2, far.bytes *= 2;
    EXPECT_EQ(prove_wgmma_operand(*start, what, far, 2000).proved(), sh.wg_bytes == 0) << what;
    EXPECT_EQ(brute_force_boxed(*start, far), sh.wg_bytes == 0) << what;
    std::vector<ir::IndexEnv> starts;
    for (int64_t wg = 0; wg < sh.wgs; ++wg)
      for (int64_t kk = 0; kk < sh.slices; ++kk) starts.push_back({{"wg", wg}, {"kk", kk}, {"box", sh.box_bytes}});
    Tally tally{what};
    for (const IndexExpr& m : mutants(*start))
      tally.judge(prove_wgmma_operand(m, what, sh, 2000).proved(), brute_force_boxed(m, sh), same_values(m, *start, starts),
                  ir::to_string(m));
  }
  const ProofRecord v = prove_wgmma_operand_mn(f.v_start, "V", keys / 16, 128, box, box, sbo);
  EXPECT_TRUE(v.proved()) << v.subject << ": " << failed(v);
  EXPECT_TRUE(brute_force_mn(f.v_start, keys / 16, 128, box, box, sbo));
  // A leading offset other than the boxes' distance, or row groups at another stride: refuted.
  for (const auto& [lbo, g] : {std::pair{box / 2, sbo}, std::pair{box, 2 * sbo}}) {
    EXPECT_FALSE(prove_wgmma_operand_mn(f.v_start, "V", keys / 16, 128, box, lbo, g, 2000).proved()) << lbo << " " << g;
    EXPECT_FALSE(brute_force_mn(f.v_start, keys / 16, 128, box, lbo, g));
  }
  std::vector<ir::IndexEnv> slices;
  for (int64_t kk = 0; kk < keys / 16; ++kk) slices.push_back({{"kk", kk}, {"box", box}});
  Tally tally{"V"};
  for (const IndexExpr& m : mutants(f.v_start))
    tally.judge(prove_wgmma_operand_mn(m, "V", keys / 16, 128, box, box, sbo, 2000).proved(),
                brute_force_mn(m, keys / 16, 128, box, box, sbo), same_values(m, f.v_start, slices), ir::to_string(m));
}

// The wgmma attention's Q staging by enumeration: each thread's 4 elements land, inside the
// boxes, where the TMA's swizzled box layout has them (the hardware's pattern restated).
bool brute_force_q_store(const IndexExpr& store, int64_t box) {
  auto swz = [](int64_t a) { return a ^ (((a >> 7) & 7) << 4); };
  try {
    for (int64_t r = 0; r < 64; ++r)
      for (int64_t d = 0; d < 128; d += 4) {
        const int64_t at = ir::eval(store, {{"r", r}, {"d", d}});
        if (at < 0 || at + 8 > 2 * box) return false;
        for (int64_t k = 0; k < 4; ++k)
          if (at + 2 * k != swz((d + k) / 64 * box + r * 128 + (d + k) % 64 * 2)) return false;
      }
  } catch (const Error&) {
    return false;
  }
  return true;
}

TEST(WgmmaProofs, TheAttentionsQStagingStoresWhereTheTmaWouldAndMutantsAgreeWithBruteForce) {
  const IndexExpr& f = ir::wgmma_attention_operand_formulas().q_store;
  const ir::Swizzle128& swz = ir::swizzle128_formula();
  const int64_t box = 64 * 128;
  const ProofRecord r = prove_swizzled_store(f, swz, "Q", 64, 128, 4, box);
  EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
  EXPECT_TRUE(brute_force_q_store(f, box));
  // Stores of 16 elements cross a chunk; boxes twice as far apart: refuted.
  EXPECT_FALSE(prove_swizzled_store(f, swz, "Q", 64, 128, 16, box, 2000).proved());
  EXPECT_FALSE(prove_swizzled_store(f, swz, "Q", 64, 128, 4, 2 * box, 2000).proved());
  std::vector<ir::IndexEnv> at;
  for (int64_t row = 0; row < 64; ++row)
    for (int64_t d = 0; d < 128; d += 4) at.push_back({{"r", row}, {"d", d}});
  Tally tally{"Q staging"};
  for (const IndexExpr& m : mutants(f))
    tally.judge(prove_swizzled_store(m, swz, "Q", 64, 128, 4, box, 5000).proved(), brute_force_q_store(m, box),
                same_values(m, f, at), ir::to_string(m));
}

// ldmatrix.x4 by enumeration: every lane's address inside the 16 x 16 block, and every thread's
// register and half receiving the element mma.sync expects (the hardware's delivery as in the
// prover's comment, restated here).
bool brute_force_ldmatrix(const ir::LdmatrixAddr& f, LdmatrixUse use) {
  try {
    auto row = [&](int64_t l) { return ir::eval(f.row, {{"lane", l}}); };
    auto col = [&](int64_t l) { return ir::eval(f.col, {{"lane", l}}); };
    for (int64_t l = 0; l < 32; ++l)
      if (row(l) < 0 || row(l) >= 16 || (col(l) != 0 && col(l) != 8)) return false;
    for (int64_t t = 0; t < 32; ++t)
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t g = t / 4, c = t % 4;
          const bool trans = use == LdmatrixUse::Bt;
          const int64_t src = trans ? 8 * i + 2 * c + j : 8 * i + g;
          const int64_t r = row(src), k = col(src) + (trans ? g : 2 * c + j);
          const int64_t lo = 2 * c + j + 8 * (i % 2), hi = g + 8 * (i / 2);
          const std::pair<int64_t, int64_t> want = use == LdmatrixUse::A ? std::pair{g + 8 * (i % 2), 2 * c + j + 8 * (i / 2)}
                                                   : use == LdmatrixUse::B ? std::pair{hi, lo}
                                                                           : std::pair{lo, hi};
          if (std::pair{r, k} != want) return false;
        }
  } catch (const Error&) {
    return false;
  }
  return true;
}

TEST(LdmatrixProofs, TheOperandAddressesAreProvedAndMutantsAgreeWithBruteForce) {
  const ir::LdmatrixOperands& f = ir::ldmatrix_formulas();
  const std::pair<const ir::LdmatrixAddr*, LdmatrixUse> uses[] = {
      {&f.a, LdmatrixUse::A}, {&f.b, LdmatrixUse::B}, {&f.bt, LdmatrixUse::Bt}};
  std::vector<ir::IndexEnv> lanes;
  for (int64_t l = 0; l < 32; ++l) lanes.push_back({{"lane", l}});
  for (const auto& [addr, use] : uses) {
    const ProofRecord r = prove_ldmatrix(*addr, use);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    EXPECT_TRUE(brute_force_ldmatrix(*addr, use));
    // Another use's addresses are wrong here unless they are the same addresses (a's and bt's
    // are: the .trans load takes the same rows and transposes each matrix).
    for (const auto& [other, other_use] : uses)
      if (other_use != use && !(same_values(other->row, addr->row, lanes) && same_values(other->col, addr->col, lanes))) {
        EXPECT_FALSE(prove_ldmatrix(*other, use, 2000).proved()) << r.subject;
        EXPECT_FALSE(brute_force_ldmatrix(*other, use));
      }
    Tally tally{use == LdmatrixUse::A ? "ldmatrix A" : use == LdmatrixUse::B ? "ldmatrix B" : "ldmatrix B .trans"};
    for (const IndexExpr& m : mutants(addr->row)) {
      const ir::LdmatrixAddr g{m, addr->col};
      tally.judge(prove_ldmatrix(g, use, 2000).proved(), brute_force_ldmatrix(g, use), same_values(m, addr->row, lanes),
                  "row " + ir::to_string(m));
    }
    for (const IndexExpr& m : mutants(addr->col)) {
      const ir::LdmatrixAddr g{addr->row, m};
      tally.judge(prove_ldmatrix(g, use, 2000).proved(), brute_force_ldmatrix(g, use), same_values(m, addr->col, lanes),
                  "col " + ir::to_string(m));
    }
  }
}

// P's packing by enumeration: the accumulator element named (through the mma tile's order) is
// the A element expected, for every lane, register and half.
bool brute_force_acc_as_a(const ir::AccAsA& f) {
  const ir::MmaTile& m = ir::mma_tile_formula();
  try {
    for (int64_t t = 0; t < 32; ++t)
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t tile = ir::eval(f.tile, {{"i", i}}), elem = ir::eval(f.elem, {{"i", i}, {"j", j}});
          if (tile < 0 || tile > 1 || elem < 0 || elem > 3) return false;
          const ir::IndexEnv env = {{"warp", 0}, {"mi", 0}, {"ni", tile}, {"lane", t}, {"h", elem / 2},
                                    {"e", elem % 2}, {"wn", 1}, {"wtm", 16}, {"wtn", 16}};
          if (ir::eval(m.row, env) != t / 4 + 8 * (i % 2) || ir::eval(m.col, env) != 2 * (t % 4) + j + 8 * (i / 2))
            return false;
        }
  } catch (const Error&) {
    return false;
  }
  return true;
}

TEST(LdmatrixProofs, AttentionsPackingOfPIsProvedAndMutantsAgreeWithBruteForce) {
  const ir::AccAsA& f = ir::acc_as_a_formula();
  const ProofRecord r = prove_acc_as_a(f, ir::mma_tile_formula());
  EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
  EXPECT_TRUE(brute_force_acc_as_a(f));
  const std::vector<ir::IndexEnv> regs = grid("i", 4, "j", 2);
  Tally tally{"attention's P from its accumulators"};
  for (const IndexExpr& m : mutants(f.tile)) {
    const ir::AccAsA g{m, f.elem};
    tally.judge(prove_acc_as_a(g, ir::mma_tile_formula(), 2000).proved(), brute_force_acc_as_a(g),
                same_values(m, f.tile, regs), "tile " + ir::to_string(m));
  }
  for (const IndexExpr& m : mutants(f.elem)) {
    const ir::AccAsA g{f.tile, m};
    tally.judge(prove_acc_as_a(g, ir::mma_tile_formula(), 2000).proved(), brute_force_acc_as_a(g),
                same_values(m, f.elem, regs), "elem " + ir::to_string(m));
  }
}

// Every block of the launch grid of an nm x nn tile grid on a tile inside it (or past nm),
// every tile computed by exactly one block.
bool brute_force_order(const ir::TileOrder& f, int64_t g, int64_t nm, int64_t nn) {
  std::set<std::pair<int64_t, int64_t>> seen;
  try {
    for (int64_t y = 0; y < (nm + g - 1) / g; ++y)
      for (int64_t x = 0; x < g * nn; ++x) {
        const ir::IndexEnv env = {{"x", x}, {"y", y}, {"g", g}};
        const int64_t m = ir::eval(f.m, env), n = ir::eval(f.n, env);
        if (m < 0 || n < 0 || n >= nn || m >= (nm + g - 1) / g * g) return false;
        if (m < nm && !seen.insert({m, n}).second) return false;
      }
  } catch (const Error&) {
    return false;
  }
  return int64_t(seen.size()) == nm * nn;
}

TEST(TileOrderProofs, TheGemmGridOrderIsProvedAndMutantsAgreeWithBruteForce) {
  const ir::TileOrder& f = ir::tile_order_formula();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t g = 1; g <= 8; ++g) {
    const ProofRecord r = prove_tile_order(f, g, 4096, 4096);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    for (int64_t nm = 1; nm <= 19; ++nm)
      for (int64_t nn : {1, 3, 16, 24}) EXPECT_TRUE(brute_force_order(f, g, nm, nn)) << g << ": " << nm << " x " << nn;
  }
  std::printf("tile order proved for g 1..8 in %.0f ms\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  std::vector<ir::TileOrder> orders;
  for (const IndexExpr& m : mutants(f.m)) orders.push_back({m, f.n, f.x_of, f.y_of});
  for (const IndexExpr& m : mutants(f.n)) orders.push_back({f.m, m, f.x_of, f.y_of});
  std::vector<ir::IndexEnv> blocks;  // the largest grid: 3 block rows of 4 x 6
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 24; ++x) blocks.push_back({{"x", x}, {"y", y}, {"g", 4}});
  Tally tally{"tile order in groups of 4 over up to 12 x 6 tiles"};
  for (const ir::TileOrder& o : orders) {
    bool ok = true;
    for (int64_t nm = 1; nm <= 12 && ok; ++nm)
      for (int64_t nn = 1; nn <= 6 && ok; ++nn) ok = brute_force_order(o, 4, nm, nn);
    tally.judge(prove_tile_order(o, 4, 12, 6, 2000).proved(), ok,
                same_values(o.m, f.m, blocks) && same_values(o.n, f.n, blocks),
                "m " + ir::to_string(o.m) + ", n " + ir::to_string(o.n));
  }
}

// A bitonic stage of distance s over m keys: every item's two keys inside, lo < hi, and all
// keys distinct (m / 2 items, two keys each: a bijection).
bool brute_force_bitonic(const ir::BitonicPair& f, int64_t s, int64_t m) {
  std::set<int64_t> seen;
  try {
    for (int64_t j = 0; j < m / 2; ++j) {
      const ir::IndexEnv env = {{"j", j}, {"s", s}};
      const int64_t lo = ir::eval(f.lo, env), hi = ir::eval(f.hi, env);
      if (lo < 0 || lo >= hi || hi >= m || !seen.insert(lo).second || !seen.insert(hi).second) return false;
    }
  } catch (const Error&) {
    return false;
  }
  return int64_t(seen.size()) == m;
}

TEST(BitonicProofs, EveryStageOfTheDrawsSortIsProved) {
  for (int64_t s = 1; s <= 2048; s *= 2) {
    const ProofRecord r = prove_bitonic_stage(ir::bitonic_pair_formula(), s, 4096);
    EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
    for (int64_t m : {2 * s, 4 * s, int64_t(4096)})
      if (m <= 4096) {
        EXPECT_TRUE(brute_force_bitonic(ir::bitonic_pair_formula(), s, m)) << s << " " << m;
      }
  }
}

TEST(BitonicProofs, MutantsAgreeWithBruteForce) {
  const ir::BitonicPair& f = ir::bitonic_pair_formula();
  std::vector<ir::BitonicPair> pairs;
  for (const IndexExpr& m : mutants(f.lo)) pairs.push_back({m, f.hi, f.j_of, f.side_of});
  for (const IndexExpr& m : mutants(f.hi)) pairs.push_back({f.lo, m, f.j_of, f.side_of});
  std::vector<ir::IndexEnv> items;
  for (int64_t j = 0; j < 32; ++j) items.push_back({{"j", j}, {"s", 4}});
  Tally tally{"bitonic stage of distance 4 over up to 64 keys"};
  for (const ir::BitonicPair& p : pairs) {
    bool ok = true;
    for (int64_t m = 8; m <= 64; m += 8) ok = ok && brute_force_bitonic(p, 4, m);
    tally.judge(prove_bitonic_stage(p, 4, 64, 2000).proved(), ok,
                same_values(p.lo, f.lo, items) && same_values(p.hi, f.hi, items),
                "lo " + ir::to_string(p.lo) + ", hi " + ir::to_string(p.hi));
  }
}

// The fold's lanes over every tile of 1..max_rows rows whose rows hold vp2's vectors: every
// guarded holder's (row, vector) inside the tile, each (row, vector) held exactly once, and each
// butterfly partner on the same row.
bool brute_force_fold(const ir::FoldLanes& f, int64_t vp2, int64_t nw, int64_t u, int64_t max_rows) {
  const int64_t rpw = 32 / vp2;
  try {
    for (int64_t rows = 1; rows <= max_rows; ++rows)
      for (int64_t vpr = vp2 / 2 + 1; vpr <= vp2; ++vpr) {
        const int64_t groups = (rows + rpw - 1) / rpw;
        std::set<std::pair<int64_t, int64_t>> seen;
        for (int64_t w = 0; w < nw; ++w)
          for (int64_t g0 = w; g0 < groups; g0 += nw * u)
            for (int64_t j = 0; j < u; ++j) {
              if (g0 + j * nw >= groups) continue;
              auto at = [&](int64_t lane, const IndexExpr& e) {
                return ir::eval(e, {{"g0", g0}, {"j", j}, {"lane", lane}, {"nw", nw}, {"vp2", vp2}});
              };
              for (int64_t lane = 0; lane < 32; ++lane) {
                const int64_t n = at(lane, f.row), v = at(lane, f.vec);
                for (int64_t o = vp2 / 2; o >= 1; o /= 2)
                  if (at(lane ^ o, f.row) != n) return false;
                if (n >= rows || v >= vpr) continue;  // the kernel's guard
                if (n < 0 || v < 0 || !seen.insert({n, v}).second) return false;
              }
            }
        if (int64_t(seen.size()) != rows * vpr) return false;
      }
  } catch (const Error&) {
    return false;
  }
  return true;
}

TEST(FoldProofs, EveryLaneGroupAndWarpCountIsProved) {
  // Compute warps with and without the controller warp (16, 15; 12 at 384 threads), load slots
  // 1..8 (loads_in_flight), tiles of up to 2^20 rows.
  for (int64_t vp2 = 1; vp2 <= 32; vp2 *= 2)
    for (int64_t nw : {12, 15, 16})
      for (int64_t u : {1, 4, 8}) {
        const ProofRecord r = prove_fold_lanes(ir::fold_lanes_formula(), vp2, nw, u, int64_t(1) << 20);
        EXPECT_TRUE(r.proved()) << r.subject << ": " << failed(r);
      }
  for (int64_t vp2 : {1, 4, 32}) EXPECT_TRUE(brute_force_fold(ir::fold_lanes_formula(), vp2, 3, 2, 40)) << vp2;
}

TEST(FoldProofs, MutantsAgreeWithBruteForce) {
  const ir::FoldLanes& f = ir::fold_lanes_formula();
  std::vector<ir::FoldLanes> lanes;
  for (const IndexExpr& m : mutants(f.row)) lanes.push_back({m, f.vec, f.warp_of, f.round_of, f.j_of, f.lane_of});
  for (const IndexExpr& m : mutants(f.vec)) lanes.push_back({f.row, m, f.warp_of, f.round_of, f.j_of, f.lane_of});
  std::vector<ir::IndexEnv> holders;  // groups of 4 lanes, 2 warps, 2 slots, 3 rounds
  for (int64_t g0 = 0; g0 < 12; ++g0)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t lane = 0; lane < 32; ++lane)
        holders.push_back({{"g0", g0}, {"j", j}, {"lane", lane}, {"nw", 2}, {"vp2", 4}});
  Tally tally{"fold lanes, groups of 4 lanes, 2 warps, 2 slots, tiles of up to 40 rows"};
  for (const ir::FoldLanes& m : lanes)
    tally.judge(prove_fold_lanes(m, 4, 2, 2, 40, 2000).proved(), brute_force_fold(m, 4, 2, 2, 40),
                same_values(m.row, f.row, holders) && same_values(m.vec, f.vec, holders),
                "row " + ir::to_string(m.row) + ", vec " + ir::to_string(m.vec));
}

}  // namespace
}  // namespace mpk::superopt
