#include "ir/layouts.h"

namespace mpk::ir {

const EvenSplit& even_split_formula() {
  static const EvenSplit f = [] {
    const IndexExpr c = IndexExpr::var("c"), len = IndexExpr::var("len"), parts = IndexExpr::var("parts");
    return EvenSplit{c * len / parts, (c + 1) * len / parts};
  }();
  return f;
}

std::pair<int64_t, int64_t> even_split(int64_t len, int64_t parts, int64_t c) {
  const IndexEnv env = {{"c", c}, {"len", len}, {"parts", parts}};
  const EvenSplit& f = even_split_formula();
  return {eval(f.begin, env), eval(f.end, env)};
}

const LinearItems& linear_items_formula() {
  static const LinearItems f = [] {
    const IndexExpr it = IndexExpr::var("it"), ks = IndexExpr::var("ks"), rows = IndexExpr::var("rows");
    const IndexExpr p = IndexExpr::var("p"), total = IndexExpr::var("total"), r = IndexExpr::var("r");
    const IndexExpr g = IndexExpr::var("g");
    return LinearItems{it / ks * rows, it % ks, p * total + r, g * ks + p};
  }();
  return f;
}

const MmaTile& mma_tile_formula() {
  static const MmaTile f = [] {
    auto v = [](const char* n) { return IndexExpr::var(n); };
    const IndexExpr warp = v("warp"), mi = v("mi"), ni = v("ni"), lane = v("lane"), h = v("h"), e = v("e");
    const IndexExpr wn = v("wn"), wtm = v("wtm"), wtn = v("wtn"), row = v("row"), col = v("col");
    return MmaTile{warp / wn * wtm + mi * 16 + lane / 4 + h * 8,
                   warp % wn * wtn + ni * 8 + lane % 4 * 2 + e,
                   row / wtm * wn + col / wtn,
                   row % wtm / 16,
                   col % wtn / 8,
                   row % 8 * 4 + col % 8 / 2,
                   row % 16 / 8,
                   col % 2};
  }();
  return f;
}

namespace {

ChunkLoad chunk_load_of_width(int64_t width) {
  auto v = [](const char* n) { return IndexExpr::var(n); };
  const IndexExpr tid = v("tid"), i = v("i"), threads = v("threads"), ch = v("ch"), r = v("r"), c = v("c");
  return ChunkLoad{(tid + i * threads) / ch, (tid + i * threads) % ch * width, (r * ch + c / width) % threads,
                   (r * ch + c / width) / threads, width};
}

}  // namespace

const ChunkLoad& chunk_load_formula() {
  static const ChunkLoad f = chunk_load_of_width(8);
  return f;
}

const ChunkLoad& pair_load_formula() {
  static const ChunkLoad f = chunk_load_of_width(2);
  return f;
}

const Swizzle128& swizzle128_formula() {
  static const Swizzle128 f = [] {
    const IndexExpr r = IndexExpr::var("r"), c = IndexExpr::var("c"), st = IndexExpr::var("s");
    return Swizzle128{c ^ (r % 8), st ^ (r % 8)};
  }();
  return f;
}

const WgmmaOperands& wgmma_operand_formulas() {
  static const WgmmaOperands f = [] {
    const IndexExpr wg = IndexExpr::var("wg"), kk = IndexExpr::var("kk");
    return WgmmaOperands{wg * (64 * 128) + kk * 32, kk * 32};
  }();
  return f;
}

const WgmmaAttentionOperands& wgmma_attention_operand_formulas() {
  static const WgmmaAttentionOperands f = [] {
    const IndexExpr wg = IndexExpr::var("wg"), kk = IndexExpr::var("kk"), box = IndexExpr::var("box");
    const IndexExpr r = IndexExpr::var("r"), d = IndexExpr::var("d");
    return WgmmaAttentionOperands{wg * (2 * 64 * 128) + kk / 4 * (64 * 128) + kk % 4 * 32, kk / 4 * box + kk % 4 * 32,
                                  kk * (16 * 128), d / 64 * (64 * 128) + r * 128 + (d % 64 / 8 ^ r % 8) * 16 + d % 8 * 2};
  }();
  return f;
}

const TileOrder& tile_order_formula() {
  static const TileOrder f = [] {
    auto v = [](const char* n) { return IndexExpr::var(n); };
    const IndexExpr x = v("x"), y = v("y"), g = v("g"), m = v("m"), n = v("n");
    return TileOrder{y * g + x % g, x / g, n * g + m % g, m / g};
  }();
  return f;
}

const LdmatrixOperands& ldmatrix_formulas() {
  static const LdmatrixOperands f = [] {
    const IndexExpr lane = IndexExpr::var("lane");
    return LdmatrixOperands{{lane % 16, lane / 16 * 8},
                            {lane % 8 + lane / 16 * 8, lane / 8 % 2 * 8},
                            {lane % 8 + lane / 8 % 2 * 8, lane / 16 * 8}};
  }();
  return f;
}

const AccAsA& acc_as_a_formula() {
  static const AccAsA f = [] {
    const IndexExpr i = IndexExpr::var("i"), j = IndexExpr::var("j");
    return AccAsA{i / 2, i % 2 * 2 + j};
  }();
  return f;
}

const BitonicPair& bitonic_pair_formula() {
  static const BitonicPair f = [] {
    const IndexExpr j = IndexExpr::var("j"), s = IndexExpr::var("s"), x = IndexExpr::var("x");
    return BitonicPair{j / s * s * 2 + j % s, j / s * s * 2 + j % s + s, x / (s * 2) * s + x % s, x % (s * 2) / s};
  }();
  return f;
}

const StageRing& stage_ring_formula() {
  static const StageRing f = [] {
    const IndexExpr c = IndexExpr::var("c"), size = IndexExpr::var("size"), bytes = IndexExpr::var("bytes");
    const IndexExpr a = IndexExpr::var("a"), b = IndexExpr::var("b");
    return StageRing{c % 2 * ((size - bytes) / 128 * 128), (a + b + 254) / 128 * 128, (a + 127) / 128 * 128};
  }();
  return f;
}

const AttentionStates& attention_states_formula() {
  static const AttentionStates f = [] {
    auto v = [](const char* n) { return IndexExpr::var(n); };
    const IndexExpr D = v("D"), C = v("C"), G = v("G");
    return AttentionStates{v("row") * (D + 2) + v("e"), (v("h") * C + v("c")) * G + v("g"), v("w") * v("hp") + v("i")};
  }();
  return f;
}

const AttentionRows& attention_rows_formula() {
  static const AttentionRows f = [] {
    auto v = [](const char* n) { return IndexExpr::var(n); };
    const IndexExpr D = v("D");
    return AttentionRows{v("hd") * D + v("e"), v("h") * v("G") + v("g"), (v("h") * v("cap") + v("j")) * D + v("e")};
  }();
  return f;
}

const GridItems& grid_items_formula() {
  static const GridItems f = [] {
    const IndexExpr idx = IndexExpr::var("idx"), cols = IndexExpr::var("cols");
    return GridItems{idx / cols, idx % cols, IndexExpr::var("r") * cols + IndexExpr::var("c")};
  }();
  return f;
}

int64_t state_slot(int64_t row, int64_t e, int64_t D) {
  return eval(attention_states_formula().slot, {{"row", row}, {"e", e}, {"D", D}});
}

int64_t partial_row(int64_t h, int64_t c, int64_t g, int64_t C, int64_t G) {
  return eval(attention_states_formula().partial_row, {{"h", h}, {"c", c}, {"g", g}, {"C", C}, {"G", G}});
}

int64_t warp_state_row(int64_t w, int64_t i, int64_t hp) {
  return eval(attention_states_formula().warp_row, {{"w", w}, {"i", i}, {"hp", hp}});
}

int64_t head_elem(int64_t hd, int64_t e, int64_t D) {
  return eval(attention_rows_formula().head_elem, {{"hd", hd}, {"e", e}, {"D", D}});
}

int64_t q_head(int64_t h, int64_t g, int64_t G) {
  return eval(attention_rows_formula().q_head, {{"h", h}, {"g", g}, {"G", G}});
}

int64_t kv_elem(int64_t h, int64_t j, int64_t e, int64_t cap, int64_t D) {
  return eval(attention_rows_formula().kv_elem, {{"h", h}, {"j", j}, {"e", e}, {"cap", cap}, {"D", D}});
}

const FoldLanes& fold_lanes_formula() {
  static const FoldLanes f = [] {
    auto v = [](const char* n) { return IndexExpr::var(n); };
    const IndexExpr g0 = v("g0"), j = v("j"), lane = v("lane"), nw = v("nw"), vp2 = v("vp2"), u = v("u");
    const IndexExpr n = v("n"), vec = v("v");
    const IndexExpr g = n / (32 / vp2);  // the row group of row n
    return FoldLanes{(g0 + j * nw) * (32 / vp2) + lane / vp2, lane % vp2, g % nw, g / nw / u, g / nw % u,
                     n % (32 / vp2) * vp2 + vec};
  }();
  return f;
}

std::string prefill_layout_device_functions() {
  const EvenSplit& f = even_split_formula();
  const MmaTile& t = mma_tile_formula();
  const ChunkLoad& l = chunk_load_formula();
  std::string s = "// Printed from src/ir/layouts.cc (proved by superopt/): do not edit.\n";
  s += "__device__ __forceinline__ long long pf_even_split_begin(long long c, long long len, long long parts) "
       "{ return " + to_c(f.begin) + "; }\n";
  s += "__device__ __forceinline__ long long pf_even_split_end(long long c, long long len, long long parts) "
       "{ return " + to_c(f.end) + "; }\n";
  s += "template <int wn, int wtm> __device__ __forceinline__ int pf_frag_row(int warp, int mi, int lane, int h) "
       "{ return " + to_c(t.row, CType::Int) + "; }\n";
  s += "template <int wn, int wtn> __device__ __forceinline__ int pf_frag_col(int warp, int ni, int lane, int e) "
       "{ return " + to_c(t.col, CType::Int) + "; }\n";
  for (const auto& [name, load] : {std::pair{"chunk", &l}, std::pair{"pair", &pair_load_formula()}})
    for (const auto& [axis, e] : {std::pair{"row", &load->row}, std::pair{"col", &load->col}})
      s += std::string("template <int threads, int ch> __device__ __forceinline__ int pf_") + name + "_" + axis +
           "(int tid, int i) { return " + to_c(*e, CType::Int) + "; }\n";
  const WgmmaOperands& wo = wgmma_operand_formulas();
  s += "__device__ __forceinline__ int pf_wg_a_start(int wg, int kk) { return " + to_c(wo.a_start, CType::Int) +
       "; }\n";
  s += "__device__ __forceinline__ int pf_wg_b_start(int kk) { return " + to_c(wo.b_start, CType::Int) + "; }\n";
  s += "#define PF_WG_SBO " + std::to_string(kWgmmaSbo) + "\n";
  const WgmmaAttentionOperands& wa = wgmma_attention_operand_formulas();
  s += "__device__ __forceinline__ unsigned pf_wa_q_start(int wg, int kk) { return " + to_c(wa.q_start, CType::Int) +
       "; }\n";
  s += "__device__ __forceinline__ unsigned pf_wa_k_start(int kk, int box) { return " + to_c(wa.k_start, CType::Int) +
       "; }\n";
  s += "__device__ __forceinline__ unsigned pf_wa_v_start(int kk) { return " + to_c(wa.v_start, CType::Int) + "; }\n";
  s += "__device__ __forceinline__ unsigned pf_wa_q_store(int r, int d) { return " + to_c(wa.q_store, CType::Int) +
       "; }\n";
  const TileOrder& o = tile_order_formula();
  s += "__device__ __forceinline__ int pf_tile_m(int x, int y, int g) { return " + to_c(o.m, CType::Int) + "; }\n";
  s += "__device__ __forceinline__ int pf_tile_n(int x, int g) { return " + to_c(o.n, CType::Int) + "; }\n";
  const LdmatrixOperands& lm = ldmatrix_formulas();
  for (const auto& [name, f] : {std::pair{"a", &lm.a}, std::pair{"b", &lm.b}, std::pair{"bt", &lm.bt}}) {
    s += std::string("__device__ __forceinline__ int pf_ldsm_") + name + "_row(int lane) { return " +
         to_c(f->row, CType::Int) + "; }\n";
    s += std::string("__device__ __forceinline__ int pf_ldsm_") + name + "_col(int lane) { return " +
         to_c(f->col, CType::Int) + "; }\n";
  }
  const AccAsA& aa = acc_as_a_formula();
  s += "__device__ __forceinline__ int pf_acc_a_tile(int i) { return " + to_c(aa.tile, CType::Int) + "; }\n";
  s += "__device__ __forceinline__ int pf_acc_a_elem(int i, int j) { return " + to_c(aa.elem, CType::Int) + "; }\n";
  s += "__device__ __forceinline__ long long pf_kv_elem(long long h, long long j, long long e, long long cap, "
       "long long D) { return " + to_c(attention_rows_formula().kv_elem) + "; }\n";
  return s;
}

std::string layout_device_functions() {
  const EvenSplit& f = even_split_formula();
  std::string s = "// Printed from src/ir/layouts.cc (proved by superopt/): do not edit.\n";
  for (const auto& [name, e] : {std::pair{"begin", &f.begin}, std::pair{"end", &f.end}}) {
    s += "__device__ __forceinline__ long long mk_even_split_";
    s += name;
    s += "(long long c, long long len, long long parts) { return ";
    s += to_c(*e);
    s += "; }\n";
  }
  const LinearItems& li = linear_items_formula();
  s += "__device__ __forceinline__ int mk_lin_row0(int it, int ks, int rows) { return " +
       to_c(li.row0, CType::Int) + "; }\n";
  s += "__device__ __forceinline__ int mk_lin_part(int it, int ks) { return " +
       to_c(li.part, CType::Int) + "; }\n";
  s += "__device__ __forceinline__ long long mk_stage_at(long long c, long long size, long long bytes) { return " +
       to_c(stage_ring_formula().at) + "; }\n";
  const AttentionStates& as = attention_states_formula();
  s += "__device__ __forceinline__ long long mk_state_slot(long long row, long long e, long long D) { return " +
       to_c(as.slot) + "; }\n";
  s += "__device__ __forceinline__ long long mk_partial_row(long long h, long long c, long long g, long long C, "
       "long long G) { return " + to_c(as.partial_row) + "; }\n";
  s += "__device__ __forceinline__ int mk_smem_state(int row, int e, int D) { return " + to_c(as.slot, CType::Int) +
       "; }\n";
  s += "__device__ __forceinline__ int mk_warp_row(int w, int i, int hp) { return " + to_c(as.warp_row, CType::Int) +
       "; }\n";
  const AttentionRows& ar = attention_rows_formula();
  s += "__device__ __forceinline__ long long mk_head_elem(long long hd, long long e, long long D) { return " +
       to_c(ar.head_elem) + "; }\n";
  s += "__device__ __forceinline__ long long mk_q_head(long long h, long long g, long long G) { return " +
       to_c(ar.q_head) + "; }\n";
  s += "__device__ __forceinline__ long long mk_kv_elem(long long h, long long j, long long e, long long cap, "
       "long long D) { return " + to_c(ar.kv_elem) + "; }\n";
  return s;
}

}  // namespace mpk::ir
