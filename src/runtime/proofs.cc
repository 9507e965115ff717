#include "runtime/proofs.h"

#include <tbb/parallel_for.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "base/error.h"
#include "base/log.h"
#include "ir/layouts.h"
#include "ir/online_softmax.h"
#include "ir/task_nests.h"
#include "ir/prefill_nests.h"
#include "runtime/prefill.h"
#include "runtime/variants.h"
#include "superopt/algebra_prover.h"
#include "superopt/index_prover.h"
#include "superopt/loop_prover.h"

namespace mpk::rt {
namespace {

// Every run-time length a KV position (an int) can give.
constexpr int64_t kMaxLen = int64_t(1) << 31;
// Up to 2^16 KV heads in a layer's attention partials.
constexpr int64_t kMaxHeads = int64_t(1) << 16;
// Tiles of up to 2^20 rows (a tile is a slice of one stage's output rows).
constexpr int64_t kMaxTileRows = int64_t(1) << 20;
// The weight ring: far above any GPU's shared memory per block.
constexpr int64_t kMaxStageRing = int64_t(1) << 31;

// A proof the plan needs: what it is for, a key naming it within the process, how to prove it.
struct Needed {
  std::string use, key;
  std::function<superopt::ProofRecord()> prove;
};

// The records of `needed`, each key proved once per process (two uses of one key in a call,
// e.g. two tiles' swizzle of 128 rows, share one proof); the missing ones in parallel (one Z3
// context per proof).
std::vector<superopt::ProofRecord> proved(const std::vector<Needed>& needed) {
  static std::mutex mu;
  static std::map<std::string, superopt::ProofRecord> done;
  std::vector<superopt::ProofRecord> out(needed.size());
  std::vector<size_t> missing;
  std::map<std::string, size_t> first;  // a missing key's first use in `needed`
  std::vector<std::pair<size_t, size_t>> repeats;  // (a later use, its key's first)
  {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < needed.size(); ++i) {
      auto it = done.find(needed[i].key);
      if (it != done.end()) {
        out[i] = it->second;
      } else if (auto [f, fresh] = first.emplace(needed[i].key, i); fresh) {
        missing.push_back(i);
      } else {
        repeats.emplace_back(i, f->second);
      }
    }
  }
  tbb::parallel_for(size_t{0}, missing.size(), [&](size_t j) {
    const size_t i = missing[j];
    out[i] = needed[i].prove();
    double ms = 0;
    for (const superopt::Obligation& o : out[i].obligations) ms += o.ms;
    log(LogLevel::Debug, "{} in {:.0f} ms: {}", out[i].subject, ms, out[i].proved() ? "proved" : "NOT proved");
  });
  for (auto [i, f] : repeats) out[i] = out[f];
  std::lock_guard<std::mutex> lock(mu);
  for (size_t i : missing) done.emplace(needed[i].key, out[i]);
  return out;
}

}  // namespace

std::vector<PlanProof> plan_proofs(const std::vector<MkTask>& tasks, const MegakernelParams& params) {
  const int max_k_split = params.max_k_split;
  std::map<int, std::pair<bool, bool>> uses;  // parts -> (attention chunks, linear K parts)
  std::set<int> rows_per_warp;                // of the linear variants in use
  bool attention = false;
  const std::vector<Variant> variants = kernel_variants(params);
  std::set<int> fold_groups;  // lane group widths of the folded tiles' rows
  std::set<std::pair<int, int>> folds;  // the folded tiles' down rows and columns
  std::set<std::tuple<int, int, int>> partials;  // attention chunks, query heads, head dim
  std::set<int> head_dims;                       // of the attention tasks
  std::set<std::tuple<int, int, int, int64_t>> rows;  // chunks, query heads, head dim, capacity
  bool argmax = false, lm_head = false;  // an argmax task; a linear tile with an argmax partial
  bool ring = false;                     // a linear task's weights staged (stage_weights)
  std::set<std::pair<int, int>> embeddings;  // hidden, vocabulary
  std::set<std::pair<int, int>> staged;      // the linears' inputs: units, floats a unit
  std::set<std::pair<int, int>> tiles;       // the linear tiles: rows per warp, rows
  for (const MkTask& t : tasks) {
    if (t.kind == MPK_MK_LINEAR && (t.flags & MPK_MK_F_FOLD)) folds.insert({t.fold_rows, t.slices[0].rows});
    if (t.kind == MPK_MK_LINEAR && (t.flags & MPK_MK_F_FOLD))
      for (const int vec : {4, 8}) {  // elements per 16-byte vector: fp32; bf16 and fp16
        const int cols = t.slices[0].rows;
        int vp2 = 1;
        while (vp2 < cols / vec) vp2 *= 2;
        if (cols % vec == 0 && vp2 <= 32) fold_groups.insert(vp2);  // else the kernel's scalar path
      }
    if (t.kind == MPK_MK_ATTENTION) {
      // The attention proofs hold for up to kMaxHeads KV heads and query heads a group.
      MPK_CHECK(t.kv_head < kMaxHeads && t.group <= kMaxHeads, Unsupported)
          << "attention with KV head " << t.kv_head << " and " << t.group << " query heads a group";
      uses[t.num_chunks].first = true;
      attention = true;
      if (t.num_chunks > 1) partials.insert({t.num_chunks, t.group, t.head_dim});
      head_dims.insert(t.head_dim);
      rows.insert({t.num_chunks, t.group, t.head_dim, t.capacity});
    }
    if (t.kind == MPK_MK_ARGMAX) {
      argmax = true;
      if (t.flags & MPK_MK_F_EMBED) embeddings.insert({t.hidden, t.vocab});
    }
    if (t.kind == MPK_MK_LINEAR) {
      staged.insert({t.k, 1});  // one float at a time, or 16-byte vectors when aligned
      if (t.k % 4 == 0) staged.insert({t.k / 4, 4});
      for (int ks = 1; ks <= max_k_split; ++ks) uses[ks].second = true;
      rows_per_warp.insert(variants.at(size_t(t.variant)).rows_per_warp);
      int total = 0;
      for (int i = 0; i < t.num_slices; ++i) total += t.slices[i].rows;
      tiles.insert({variants.at(size_t(t.variant)).rows_per_warp, total});
      lm_head = lm_head || (t.flags & MPK_MK_F_ARGMAX) != 0;
      ring = ring || (t.flags & MPK_MK_F_STAGE) != 0;
    }
  }
  std::vector<Needed> needed;
  for (const auto& [parts, u] : uses) {
    const std::string n = std::to_string(parts), s = parts == 1 ? "" : "s";
    std::string use;
    if (u.first) use = "attention: KV length over " + n + " chunk" + s;
    if (u.second) use += std::string(use.empty() ? "" : "; ") + "linear: K over " + n + " part" + s;
    needed.push_back({use, "even split " + n, [parts = parts] {
                        return superopt::prove_even_split(ir::even_split_formula(), kMaxLen, parts);
                      }});
  }
  for (int r : rows_per_warp)
    for (int ks = 1; ks <= max_k_split; ++ks)
      needed.push_back({"linear.r" + std::to_string(r) + ": work items over " + std::to_string(ks) +
                            " K part" + (ks == 1 ? "" : "s"),
                        "linear items " + std::to_string(r) + " " + std::to_string(ks), [r, ks] {
                          return superopt::prove_linear_items(ir::linear_items_formula(), ks, r,
                                                              kMaxTileRows, MPK_MK_KSPLIT_SLOTS);
                        }});
  const int warps = params.block_threads / 32, slots = params.loads_in_flight;
  // A warp's dot products (both vector widths: the tasks do not name the dtype), with and
  // without the first round loaded before the events, that first round, the unaligned loop; and
  // the same with one row, which a tile's last rows take when the variant's rows do not divide
  // its rows (never with the first round in registers).
  std::set<int> dot_rows = rows_per_warp;
  if (!rows_per_warp.empty()) dot_rows.insert(1);
  for (int r : dot_rows) {
    const bool variant = rows_per_warp.count(r) > 0;
    const std::string rows = std::to_string(r) + " row" + (r == 1 ? "" : "s");
    const std::string use = variant ? "linear.r" + std::to_string(r) : "linear, a tile's last rows one at a time";
    const int64_t U = params.loads_in_flight;
    for (int64_t V : {4, 8})
      for (int64_t F : {int64_t(0), 32 * U}) {
        if (F && !variant) continue;
        needed.push_back({use + ": a warp's dot products over a K part, a loop nest (" + rows + ", " +
                              std::to_string(U) + " loads in flight, " + std::to_string(V) + "-element vectors" +
                              (F ? ", the first round loaded before the events)" : ")"),
                          "linear dot nest " + std::to_string(r) + " " + std::to_string(U) + " " +
                              std::to_string(V) + " " + std::to_string(F),
                          [r, U, V, F] {
                            return superopt::prove_loop_nest(ir::linear_dot_nest(), "linear dot",
                                                             {{"R", r}, {"U", U}, {"V", V}, {"F", F}});
                          }});
      }
    if (variant)
      needed.push_back({use + ": the dot products' first round, loaded before the events (" + rows + ", " +
                            std::to_string(U) + " loads in flight)",
                        "linear dot first nest " + std::to_string(r) + " " + std::to_string(U), [r, U] {
                          return superopt::prove_loop_nest(ir::linear_dot_first_nest(), "linear dot first",
                                                           {{"R", r}, {"U", U}});
                        }});
    needed.push_back({use + ": a warp's dot products over unaligned rows (" + rows + ")",
                      "linear dot scalar nest " + std::to_string(r), [r] {
                        return superopt::prove_loop_nest(ir::linear_dot_scalar_nest(), "linear dot scalar",
                                                         {{"R", r}});
                      }});
  }
  for (const auto& [n, W] : staged)
    needed.push_back({"linear: the input staged in shared memory, a loop nest (" + std::to_string(n) + " units of " +
                          std::to_string(W) + " float" + (W == 1 ? "" : "s") + ", " + std::to_string(warps) +
                          " warps)",
                      "linear stage nest " + std::to_string(n) + " " + std::to_string(W) + " " + std::to_string(warps),
                      [n = n, W = W, warps] {
                        return superopt::prove_loop_nest(ir::linear_stage_nest(), "linear stage",
                                                         {{"n", n}, {"W", W}, {"threads", 32 * warps}});
                      }});
  if (!rows_per_warp.empty())
    for (int ks = 2; ks <= max_k_split; ++ks)
      needed.push_back({"linear: the split-K fold over " + std::to_string(ks) + " parts, a loop nest (" +
                            std::to_string(warps) + " warps)",
                        "linear fold nest " + std::to_string(ks) + " " + std::to_string(warps), [ks, warps] {
                          return superopt::prove_loop_nest(ir::linear_fold_nest(), "linear fold",
                                                           {{"ks", ks}, {"S", MPK_MK_KSPLIT_SLOTS},
                                                            {"threads", 32 * warps}});
                        }});
  // The items' loops per tile shape (a symbolic row count made the slots p * total + r a
  // product Z3 did not decide in seconds), for each part count the slots take (mk_ksplit picks
  // no other; the nest's guard stores nothing past them).
  for (const auto& [r, total] : tiles)
    for (int ks = 1; ks <= max_k_split && (ks == 1 || ks * total <= MPK_MK_KSPLIT_SLOTS); ++ks)
      needed.push_back({"linear.r" + std::to_string(r) + ": a tile's work items over the warps, a loop nest (" +
                            std::to_string(total) + " rows, " + std::to_string(ks) + " K part" +
                            (ks == 1 ? "" : "s") + ", " + std::to_string(warps) + " warps)",
                        "linear items nest " + std::to_string(r) + " " + std::to_string(total) + " " +
                            std::to_string(ks) + " " + std::to_string(warps),
                        [r = r, total = total, ks, warps] {
                          return superopt::prove_loop_nest(ir::linear_items_nest(), "linear items",
                                                           {{"R", r}, {"total", total}, {"ks", ks},
                                                            {"S", MPK_MK_KSPLIT_SLOTS}, {"nw", warps}});
                        }});
  if (!rows_per_warp.empty())
    needed.push_back({"linear: the sums' algebra (RMSNorm factor after the dot product, split-K fold, bias and "
                      "residual once)",
                      "dot product", [] { return superopt::prove_dot_product(ir::dot_product_formulas()); }});
  if (ring)
    needed.push_back({"linear: the weight ring's placement (staged weights)", "stage ring",
                      [] { return superopt::prove_stage_ring(ir::stage_ring_formula(), kMaxStageRing); }});
  for (int vp2 : fold_groups)
    needed.push_back({"fold_down: the down columns' lanes in groups of " + std::to_string(vp2),
                      "fold lanes " + std::to_string(vp2) + " " + std::to_string(warps) + " " + std::to_string(slots),
                      [vp2, warps, slots] {
                        return superopt::prove_fold_lanes(ir::fold_lanes_formula(), vp2, warps, slots, kMaxTileRows);
                      }});
  // The fold's loops per shape: the activations, the columns by lane groups (each vector width
  // the shape allows), the unaligned loop, the rows' reductions.
  for (const auto& [rows, cols] : folds) {
    const std::string shape = std::to_string(rows) + " rows x " + std::to_string(cols) + " columns, " +
                              std::to_string(warps) + " warps";
    const std::string key = std::to_string(rows) + " " + std::to_string(cols) + " " + std::to_string(warps);
    needed.push_back({"fold_down: the activations, a loop nest (" + shape + ")", "fold act nest " + key,
                      [cols = cols, warps] {
                        return superopt::prove_loop_nest(ir::fold_act_nest(), "fold act",
                                                         {{"cols", cols}, {"threads", 32 * warps}});
                      }});
    for (const int vec : {4, 8}) {
      int vp2 = 1;
      while (vp2 < cols / vec) vp2 *= 2;
      if (cols % vec != 0 || vp2 > 32) continue;
      needed.push_back({"fold_down: the columns by lane groups, a loop nest (" + shape + ", " + std::to_string(vec) +
                            " a vector)",
                        "fold rows nest " + key + " " + std::to_string(vec) + " " + std::to_string(slots),
                        [rows = rows, cols = cols, vec, vp2, warps, slots] {
                          return superopt::prove_loop_nest(ir::fold_rows_nest(), "fold rows",
                                                           {{"rows", rows}, {"vpr", cols / vec}, {"vp2", vp2},
                                                            {"V", vec}, {"U", slots}, {"nw", warps},
                                                            {"threads", 32 * warps}});
                        }});
    }
    needed.push_back({"fold_down: the unaligned columns, a loop nest (" + shape + ")", "fold scalar nest " + key,
                      [rows = rows, cols = cols, warps] {
                        return superopt::prove_loop_nest(ir::fold_scalar_nest(), "fold scalar",
                                                         {{"rows", rows}, {"cols", cols}, {"threads", 32 * warps}});
                      }});
    needed.push_back({"fold_down: the rows' reductions, a loop nest (" + shape + ")", "fold out nest " + key,
                      [rows = rows, warps] {
                        return superopt::prove_loop_nest(ir::fold_out_nest(), "fold out",
                                                         {{"rows", rows}, {"threads", 32 * warps}});
                      }});
  }
  for (const auto& [C, G, D] : partials)
    needed.push_back({"attention: chunk partials of " + std::to_string(C) + " chunks, " + std::to_string(G) +
                          " query heads, head dim " + std::to_string(D) + " (writes, merge reads)",
                      "attention partials " + std::to_string(C) + " " + std::to_string(G) + " " + std::to_string(D),
                      [C = C, G = G, D = D] {
                        return superopt::prove_attention_partials(ir::attention_states_formula(), C, G, D, kMaxHeads);
                      }});
  for (const auto& [C, G, D] : partials)
    needed.push_back({"attention merge: its loop nest (" + std::to_string(C) + " chunks, " + std::to_string(G) +
                          " query heads, head dim " + std::to_string(D) + ", " + std::to_string(params.merge_batch) +
                          " chunks a batch)",
                      "merge nest " + std::to_string(C) + " " + std::to_string(G) + " " + std::to_string(D) + " " +
                          std::to_string(params.merge_batch),
                      [C = C, G = G, D = D, B = params.merge_batch] {
                        return superopt::prove_loop_nest(ir::attention_merge_nest(), "attention merge",
                                                         {{"C", C}, {"G", G}, {"D", D}, {"B", B}});
                      }});
  for (const auto& [C, G, D, cap] : rows) {
    const std::string shape = std::to_string(C) + " " + std::to_string(G) + " " + std::to_string(D) + " " +
                              std::to_string(cap);
    needed.push_back({"attention: rows of the queries, new key and value, output and KV cache (" +
                          std::to_string(C) + " chunk" + (C == 1 ? "" : "s") + ", " + std::to_string(G) +
                          " query heads, head dim " + std::to_string(D) + ", capacity " + std::to_string(cap) + ")",
                      "attention rows " + shape, [C = C, G = G, D = D, cap = cap] {
                        return superopt::prove_attention_rows(ir::attention_rows_formula(), ir::even_split_formula(),
                                                              C, G, D, cap, kMaxHeads);
                      }});
  }
  std::set<std::tuple<int, int, int>> shapes;  // chunks, query heads, head dim
  for (const auto& [C, G, D, cap] : rows) shapes.insert({C, G, D});
  for (const auto& [C, G, D] : shapes)
    needed.push_back({"attention: its passes and combine, a loop nest (" + std::to_string(C) + " chunk" +
                          (C == 1 ? "" : "s") + ", " + std::to_string(G) + " query heads, head dim " +
                          std::to_string(D) + ", " + std::to_string(warps) + " warps, " +
                          std::to_string(params.heads_per_pass) + " heads a pass)",
                      "combine nest " + std::to_string(C) + " " + std::to_string(G) + " " + std::to_string(D) + " " +
                          std::to_string(warps) + " " + std::to_string(params.heads_per_pass),
                      [C = C, G = G, D = D, warps, hp = params.heads_per_pass] {
                        return superopt::prove_loop_nest(ir::attention_combine_nest(), "attention combine",
                                                         {{"C", C}, {"G", G}, {"D", D}, {"nw", warps},
                                                          {"HP", hp}, {"threads", 32 * warps}});
                      }});
  std::set<std::pair<int, int>> groups;  // query heads, head dim
  for (const auto& [C, G, D] : shapes) groups.insert({G, D});
  for (const auto& [G, D] : groups)
    needed.push_back({"attention: a pass over its chunk's positions, a loop nest (" + std::to_string(G) +
                          " query heads, head dim " + std::to_string(D) + " of at most " +
                          std::to_string(params.max_head_dim) + ", " + std::to_string(warps) + " warps, " +
                          std::to_string(params.heads_per_pass) + " heads a pass)",
                      "pass nest " + std::to_string(G) + " " + std::to_string(D) + " " +
                          std::to_string(params.max_head_dim) + " " + std::to_string(warps) + " " +
                          std::to_string(params.heads_per_pass),
                      [G = G, D = D, warps, hp = params.heads_per_pass, dc = params.max_head_dim / 32] {
                        return superopt::prove_loop_nest(ir::attention_pass_nest(), "attention pass",
                                                         {{"G", G}, {"D", D}, {"DC", dc}, {"nw", warps},
                                                          {"HP", hp}, {"threads", 32 * warps}});
                      }});
  for (const auto& [G, D] : groups)
    needed.push_back({"attention: its heads staged and the new K/V rows appended, a loop nest (" + std::to_string(G) +
                          " query heads, head dim " + std::to_string(D) + " of at most " +
                          std::to_string(params.max_head_dim) + ", " + std::to_string(warps) + " warps)",
                      "stage nest " + std::to_string(G) + " " + std::to_string(D) + " " +
                          std::to_string(params.max_head_dim) + " " + std::to_string(warps),
                      [G = G, D = D, warps, dc = params.max_head_dim / 32] {
                        return superopt::prove_loop_nest(ir::attention_stage_nest(), "attention stage",
                                                         {{"G", G}, {"D", D}, {"DC", dc}, {"DH", dc / 2},
                                                          {"nw", warps}, {"threads", 32 * warps}});
                      }});
  for (int D : head_dims) {
    const std::string shape = "head dim " + std::to_string(D) + " of at most " + std::to_string(params.max_head_dim);
    const std::string key = std::to_string(D) + " " + std::to_string(params.max_head_dim);
    needed.push_back({"attention: a head's norm scale and RoPE rotation, a loop nest (" + shape + ")",
                      "head consts nest " + key, [D, dc = params.max_head_dim / 32] {
                        return superopt::prove_loop_nest(ir::attention_head_consts_nest(), "attention head consts",
                                                         {{"D", D}, {"DC", dc}, {"DH", dc / 2}});
                      }});
    needed.push_back({"attention: a warp's first K/V row before the events, a loop nest (" + shape + ", " +
                          std::to_string(warps) + " warps)",
                      "kv first nest " + key + " " + std::to_string(warps), [D, warps, dc = params.max_head_dim / 32] {
                        return superopt::prove_loop_nest(ir::attention_kv_first_nest(), "attention kv first",
                                                         {{"D", D}, {"DC", dc}, {"nw", warps}, {"threads", 32 * warps}});
                      }});
  }
  for (int D : head_dims)
    needed.push_back({"attention: the warps' states in shared memory, " + std::to_string(warps) + " warps, " +
                          std::to_string(params.heads_per_pass) + " heads a pass, head dim " + std::to_string(D),
                      "attention warp states " + std::to_string(warps) + " " + std::to_string(params.heads_per_pass) +
                          " " + std::to_string(D),
                      [warps, hp = params.heads_per_pass, D] {
                        return superopt::prove_attention_warp_states(ir::attention_states_formula(), warps, hp, D);
                      }});
  if (lm_head)
    needed.push_back({"linear: an LM-head tile's argmax partial, a loop nest (" + std::to_string(warps) + " warps)",
                      "linear argmax nest " + std::to_string(warps), [warps] {
                        return superopt::prove_loop_nest(ir::linear_argmax_nest(), "linear argmax",
                                                         {{"threads", 32 * warps}});
                      }});
  if (argmax)
    needed.push_back({"argmax: the tiles' partials, a loop nest (" + std::to_string(warps) + " warps)",
                      "argmax partials nest " + std::to_string(warps), [warps] {
                        return superopt::prove_loop_nest(ir::argmax_partials_nest(), "argmax partials",
                                                         {{"threads", 32 * warps}});
                      }});
  for (const auto& [H, V] : embeddings)
    needed.push_back({"argmax: the next token's embedding row, a loop nest (hidden " + std::to_string(H) +
                          ", vocabulary " + std::to_string(V) + ", " + std::to_string(warps) + " warps, every token id)",
                      "embedding nest " + std::to_string(H) + " " + std::to_string(V) + " " + std::to_string(warps),
                      [H = H, V = V, warps] {
                        return superopt::prove_loop_nest(ir::embedding_row_nest(), "embedding row",
                                                         {{"H", H}, {"V", V}, {"threads", 32 * warps}});
                      }});
  if (attention)
    needed.push_back({"attention: online softmax (per-position update, warp combine, chunk merge)",
                      "online softmax",
                      [] { return superopt::prove_online_softmax(ir::online_softmax_formulas()); }});
  const std::vector<superopt::ProofRecord> records = proved(needed);
  std::vector<PlanProof> out;
  for (size_t i = 0; i < needed.size(); ++i) out.push_back({needed[i].use, records[i]});
  return out;
}

std::vector<PlanProof> prefill_proofs(const std::vector<int64_t>& split_counts, int dp,
                                      const std::vector<std::pair<int64_t, int64_t>>& head_shapes,
                                      std::pair<int64_t, int64_t> kv_shape) {
  std::vector<Needed> needed;
  for (int64_t parts : split_counts)
    needed.push_back({"prefill GEMM: K steps over " + std::to_string(parts) + " part" + (parts == 1 ? "" : "s"),
                      "even split " + std::to_string(parts), [parts] {
                        return superopt::prove_even_split(ir::even_split_formula(), kMaxLen, parts);
                      }});
  // Tiles (rows, cols, warps down, warps across) and chunked loads (rows, chunks per row,
  // threads, shared row stride; 16-byte chunks or element pairs) as kernels/prefill_gemm.cuh
  // and prefill_attention.cuh use them.
  struct Tile { std::string use; int64_t bm, bn, wm, wn; };
  struct Load {
    std::string use;
    int64_t rows, ch, threads, ld;
    const char* kind = "chunk load";
    const ir::ChunkLoad* f = &ir::chunk_load_formula();
  };
  std::vector<Tile> tiles;
  std::vector<Load> loads;
  for (const GemmTile* t : gemm_tiles()) {  // the table the kernels are printed from
    const std::string name = std::string("prefill ") + (t->entry + 3);  // "prefill gemm_128x256"
    const int64_t ld = t->wgmma ? t->bk : t->bk + 8;  // swizzled rows are not padded
    tiles.push_back({name + ": output tile", t->bm, t->bn, t->warps_m, t->warps_n});
    if (!t->wgmma) {
      loads.push_back({name + ": activation chunks", t->bm, t->bk / 8, t->threads(), ld});
      loads.push_back({name + ": weight chunks", t->bn, t->bk / 8, t->threads(), ld});
    } else {  // operands by TMA, in the 128-byte swizzle; two warpgroups of 64 rows read A, both all of W
      const ir::WgmmaOperands& wo = ir::wgmma_operand_formulas();
      const int64_t wgs = t->warps_m * t->warps_n / 4, bm = t->bm, bn = t->bn;
      const std::string shape = " " + std::to_string(wgs) + " " + std::to_string(bm) + " " + std::to_string(bn) + " " +
                                std::to_string(ir::kWgmmaSbo);
      needed.push_back({name + ": wgmma descriptors read A where the TMA stored it", "wgmma a" + shape,
                        [&wo, wgs, bm] {
                          return superopt::prove_wgmma_operand(wo.a_start, "A", wgs, bm / wgs, bm / wgs, bm,
                                                               ir::kWgmmaSbo);
                        }});
      needed.push_back({name + ": wgmma descriptors read W where the TMA stored it", "wgmma b" + shape,
                        [&wo, wgs, bn] {
                          return superopt::prove_wgmma_operand(wo.b_start, "B", wgs, 0, bn, bn, ir::kWgmmaSbo);
                        }});
      for (int64_t rows : {bm, bn})
        needed.push_back({name + ": 128-byte swizzle of " + std::to_string(rows) + " rows",
                          "swizzle128 " + std::to_string(rows),
                          [rows] { return superopt::prove_swizzle128(ir::swizzle128_formula(), rows); }});
    }
  }
  for (int64_t g = 1; g <= kTileGroup; ++g)  // tile_grid's groups, any grid of a chunk's GEMMs
    needed.push_back({"prefill GEMM grids: tile order in groups of " + std::to_string(g) + " rows",
                      "tile order " + std::to_string(g), [g] {
                        return superopt::prove_tile_order(ir::tile_order_formula(), g, int64_t(kPrefillChunk),
                                                          kTileOrderMaxColumns);
                      }});
  // The mma.sync operands' ldmatrix addresses (the mma.sync GEMM tiles, Q, K and V) and
  // attention's P taken from its score accumulators.
  struct Ldsm {
    const char *what, *key;
    const ir::LdmatrixAddr* f;
    superopt::LdmatrixUse use;
  };
  for (const Ldsm& l : {Ldsm{"A operands (activations, Q)", "a", &ir::ldmatrix_formulas().a, superopt::LdmatrixUse::A},
                        Ldsm{"B operands (weights, K)", "b", &ir::ldmatrix_formulas().b, superopt::LdmatrixUse::B},
                        Ldsm{"B operands by .trans (V)", "bt", &ir::ldmatrix_formulas().bt, superopt::LdmatrixUse::Bt}})
    needed.push_back({std::string("prefill mma.sync tiles: ldmatrix lane addresses of ") + l.what,
                      std::string("ldmatrix ") + l.key, [l] { return superopt::prove_ldmatrix(*l.f, l.use); }});
  needed.push_back({"prefill attention: P as the A operand from the score accumulators", "acc as a",
                    [] { return superopt::prove_acc_as_a(ir::acc_as_a_formula(), ir::mma_tile_formula()); }});
  if (dp == 128) {  // the wgmma attention's operands (sm_90a, head dim 128; cheap for dims padded to it too)
    const WgmmaAttentionShape& wa = kWgmmaAttention;
    const ir::WgmmaAttentionOperands& f = ir::wgmma_attention_operand_formulas();
    const int64_t wgs = wa.rows / 64, box = int64_t(wa.keys) * 128, sbo = ir::kWgmmaSbo;
    const std::string shape = " " + std::to_string(wgs) + " " + std::to_string(wa.keys) + " " + std::to_string(sbo);
    const superopt::WgmmaBoxedOperand q{wgs, 64, 8, 64 * 128, 2 * 64 * 128, wgs * 2 * 64 * 128, sbo};
    const superopt::WgmmaBoxedOperand k{wgs, wa.keys, 8, box, 0, 2 * box, sbo};
    needed.push_back({"prefill wgmma attention: S's descriptors read Q where its staging stored it", "wa q" + shape,
                      [&f, q] { return superopt::prove_wgmma_operand(f.q_start, "Q", q); }});
    needed.push_back({"prefill wgmma attention: S's descriptors read the keys where the TMA stored them",
                      "wa k" + shape, [&f, k] { return superopt::prove_wgmma_operand(f.k_start, "K", k); }});
    needed.push_back({"prefill wgmma attention: P V's descriptors read the values (MN-major) where the TMA stored them",
                      "wa v" + shape, [&f, kb = wa.keys / 16, box = box, sbo = sbo] {
                        return superopt::prove_wgmma_operand_mn(f.v_start, "V", kb, 128, box, box, sbo);
                      }});
    needed.push_back({"prefill wgmma attention: 128-byte swizzle of " + std::to_string(wa.keys) + " rows",
                      "swizzle128 " + std::to_string(wa.keys),
                      [keys = wa.keys] { return superopt::prove_swizzle128(ir::swizzle128_formula(), keys); }});
    needed.push_back({"prefill wgmma attention: its threads store Q where the TMA would have", "wa q store",
                      [&f] { return superopt::prove_swizzled_store(f.q_store, ir::swizzle128_formula(), "Q", 64, 128, 4, 64 * 128); }});
    needed.push_back({"prefill wgmma attention: its weights, rescale and update (pf_os_*)", "prefill softmax",
                      [] { return superopt::prove_prefill_softmax(ir::prefill_softmax_formulas()); }});
  }
  needed.push_back({"prefill attention: its weights, rescale and update over scaled scores (pf_ss_*)",
                    "prefill scaled softmax",
                    [] { return superopt::prove_prefill_softmax(ir::prefill_scaled_softmax_formulas()); }});
  // The row kernels' loop nests (ir/prefill_nests.h), proved for every shape: their block sizes
  // are the launches' constants, the rest symbolic; the head norm and RoPE per shape (its
  // products of heads and head dim make the symbolic proof take a minute).
  for (const auto& [nest, what] : {std::pair{&ir::prefill_embed_nest(), "embedding"},
                                   std::pair{&ir::prefill_rms_norm_nest(), "RMSNorm"},
                                   std::pair{&ir::prefill_argmax_nest(), "argmax scan"},
                                   std::pair{&ir::prefill_silu_mul_nest(), "SiLU-gating"},
                                   std::pair{&ir::prefill_add_nest(), "add"},
                                   std::pair{&ir::prefill_gemm_reduce_nest(), "split-K reduce"},
                                   std::pair{&ir::prefill_gemm_reduce_row_nest(), "split-K row reduce"}})
    needed.push_back({std::string("prefill ") + what + ": its loop nest", std::string("prefill nest ") + what,
                      [nest = nest, what = what] { return superopt::prove_loop_nest(*nest, what, {}); }});
  if (kv_shape.first > 0) {  // the KV append, per (KV heads, head dim): every capacity and position
    const auto [hkv, d] = kv_shape;
    const std::string shape = std::to_string(hkv) + " KV heads of " + std::to_string(d);
    needed.push_back({"prefill KV append: its loop nest, " + shape, "prefill nest kv store " + shape, [hkv = hkv, d = d] {
                        return superopt::prove_loop_nest(ir::prefill_kv_store_nest(), "KV append",
                                                         {{"Hkv", hkv}, {"half", d / 2}});
                      }});
    needed.push_back({"prefill KV shadow: its loop nest, head dim " + std::to_string(d),
                      "prefill nest kv shadow " + std::to_string(d), [d = d] {
                        return superopt::prove_loop_nest(ir::prefill_kv_shadow_nest(), "KV shadow", {{"half", d / 2}});
                      }});
  }
  for (const auto& [heads, d] : head_shapes) {
    const std::string shape = std::to_string(heads) + " heads of " + std::to_string(d);
    needed.push_back({"prefill head norm and RoPE: its loop nest, " + shape, "prefill nest rope " + shape,
                      [heads = heads, d = d] {
                        return superopt::prove_loop_nest(ir::prefill_head_norm_rope_nest(), "head norm and RoPE",
                                                         {{"heads", heads}, {"half", d / 2}});
                      }});
    needed.push_back({"prefill head norm: its loop nest, " + shape, "prefill nest head norm " + shape,
                      [heads = heads, d = d] {
                        return superopt::prove_loop_nest(ir::prefill_head_rms_norm_nest(), "head norm",
                                                         {{"heads", heads}, {"half", d / 2}});
                      }});
  }
  const AttentionShape& at = kAttention;
  const int64_t att_warps = at.threads / 32;
  tiles.push_back({"prefill attention: scores of " + std::to_string(at.rows) + " queries x " +
                       std::to_string(at.keys) + " keys",
                   at.rows, at.keys, att_warps, 1});
  tiles.push_back({"prefill attention: output of " + std::to_string(at.rows) + " queries", at.rows, dp, att_warps, 1});
  loads.push_back({"prefill attention: key and value chunks", at.keys, dp / 8, at.threads, at.ld(dp)});
  loads.push_back({"prefill attention: Q staged in pairs, key and value pairs of rows not whole chunks", at.rows,
                   dp / 2, at.threads, at.ld(dp), "pair load", &ir::pair_load_formula()});
  for (const Tile& t : tiles)
    needed.push_back({t.use, "mma tile " + std::to_string(t.bm) + " " + std::to_string(t.bn) + " " +
                                 std::to_string(t.wm) + " " + std::to_string(t.wn),
                      [t] { return superopt::prove_mma_tile(ir::mma_tile_formula(), t.bm, t.bn, t.wm, t.wn); }});
  for (const Load& l : loads)
    needed.push_back({l.use, std::string(l.kind) + " " + std::to_string(l.rows) + " " + std::to_string(l.ch) + " " +
                                 std::to_string(l.threads) + " " + std::to_string(l.ld),
                      [l] { return superopt::prove_chunk_load(*l.f, l.rows, l.ch, l.threads, l.ld); }});
  const std::vector<superopt::ProofRecord> records = proved(needed);
  std::vector<PlanProof> out;
  for (size_t i = 0; i < needed.size(); ++i) out.push_back({needed[i].use, records[i]});
  return out;
}

std::vector<PlanProof> draw_proofs(const MegakernelParams& params, int64_t num_logits) {
  std::vector<Needed> needed;
  const int threads = params.block_threads;
  needed.push_back({"top-k draw: its passes over the logits, a loop nest (" + std::to_string(threads / 32) + " warps)",
                    "sample scan nest " + std::to_string(threads), [threads] {
                      return superopt::prove_loop_nest(ir::sample_scan_nest(), "sample scan", {{"threads", threads}});
                    }});
  needed.push_back({"nucleus draw: its passes over the logits, a loop nest (" + std::to_string(threads / 32) + " warps)",
                    "sample scan2 nest " + std::to_string(threads), [threads] {
                      return superopt::prove_loop_nest(ir::sample_scan2_nest(), "sample scan2", {{"threads", threads}});
                    }});
  if (num_logits > MPK_MK_SAMPLE_GROUP)  // else the draw sorts every logit, no sample
    needed.push_back({"top-k draw: its strided sample of " + std::to_string(num_logits) + " logits, a loop nest (" +
                          std::to_string(threads / 32) + " warps)",
                      "sample stride nest " + std::to_string(num_logits) + " " + std::to_string(threads),
                      [num_logits, threads] {
                        return superopt::prove_loop_nest(ir::sample_stride_nest(), "sample stride",
                                                         {{"n", num_logits}, {"S", MPK_MK_SAMPLE_GROUP / 2},
                                                          {"threads", threads}});
                      }});
  needed.push_back({"top-k draw: its radix histogram cleared, a loop nest (" + std::to_string(threads / 32) + " warps)",
                    "sample hist clear nest " + std::to_string(threads), [threads] {
                      return superopt::prove_loop_nest(ir::sample_hist_clear_nest(), "sample hist clear",
                                                       {{"threads", threads}});
                    }});
  needed.push_back({"top-k draw: the nucleus's cut, summed in order by one thread, a loop nest", "sample cut nest",
                    [] { return superopt::prove_loop_nest(ir::sample_cut_nest(), "sample cut", {}); }});
  needed.push_back({"top-k draw: the nucleus's total, summed by one thread, a loop nest", "sample total nest",
                    [] { return superopt::prove_loop_nest(ir::sample_total_nest(), "sample total", {}); }});
  for (const auto& [nest, what] : {std::pair{&ir::sample_weights_nest(), "the nucleus weights"},
                                   std::pair{&ir::sample_nucleus_draw_nest(), "the draw over the nucleus"}})
    needed.push_back({std::string("top-k draw: ") + what + ", a loop nest (" + std::to_string(threads / 32) + " warps)",
                      std::string("sample ") + what + " " + std::to_string(threads), [nest = nest, threads] {
                        return superopt::prove_loop_nest(*nest, "sample candidates", {{"threads", threads}});
                      }});
  needed.push_back({"top-k draw: the radix select's walk down its histogram by one thread, a loop nest",
                    "sample walk nest",
                    [] { return superopt::prove_loop_nest(ir::sample_walk_nest(), "sample walk", {}); }});
  needed.push_back({"nucleus draw: its radix bins' counts and masses cleared, a loop nest (" +
                        std::to_string(threads / 32) + " warps)",
                    "sample mass clear nest " + std::to_string(threads), [threads] {
                      return superopt::prove_loop_nest(ir::sample_mass_clear_nest(), "sample mass clear",
                                                       {{"threads", threads}});
                    }});
  needed.push_back({"nucleus draw: the walk down its radix bins' masses by one thread, a loop nest",
                    "sample mass walk nest",
                    [] { return superopt::prove_loop_nest(ir::sample_mass_walk_nest(), "sample mass walk", {}); }});
  needed.push_back({"top-k draw: its sort's padding, a loop nest (" + std::to_string(threads / 32) + " warps)",
                    "sample sort pad nest " + std::to_string(threads), [threads] {
                      return superopt::prove_loop_nest(ir::sample_sort_pad_nest(), "sample sort pad",
                                                       {{"threads", threads}});
                    }});
  for (int64_t s = 1; s <= MPK_MK_SAMPLE_GROUP / 2; s *= 2)
    needed.push_back({"top-k draw: its sort's stage of distance " + std::to_string(s) + ", a loop nest (" +
                          std::to_string(threads / 32) + " warps)",
                      "sample sort stage nest " + std::to_string(s) + " " + std::to_string(threads), [s, threads] {
                        return superopt::prove_loop_nest(ir::sample_sort_stage_nest(), "sample sort stage",
                                                         {{"s", s}, {"threads", threads}});
                      }});
  const std::vector<superopt::ProofRecord> records = proved(needed);
  std::vector<PlanProof> out;
  for (size_t i = 0; i < needed.size(); ++i) out.push_back({needed[i].use, records[i]});
  return out;
}

std::vector<PlanProof> prefill_proofs(const ir::Graph& graph, int num_sms) {
  return prefill_proofs(prefill_split_counts(graph, int64_t(kPrefillChunk), num_sms),
                        prefill_padded_head_dim(graph), prefill_head_shapes(graph),
                        {graph.kv_cache.num_kv_heads, graph.kv_cache.head_dim});
}

std::string verification_record(const std::vector<PlanProof>& proofs) {
  nlohmann::json j = {{"passed", true}, {"method", "Z3 proofs of the plan's formulas"},
                      {"records", nlohmann::json::array()}};
  for (const PlanProof& p : proofs) {
    for (const superopt::Obligation& o : p.record.obligations)
      MPK_CHECK(o.result == "proved", Internal)
          << "megakernel: " << p.use << ": " << p.record.subject << ": obligation '" << o.name
          << "' " << o.result << (o.counterexample.empty() ? "" : " (" + o.counterexample + ")")
          << "; the kernel is not run";
    nlohmann::json r = nlohmann::json::parse(p.record.to_json());
    r["use"] = p.use;
    j["records"].push_back(std::move(r));
  }
  return j.dump();
}

std::string prove_plan(const std::vector<MkTask>& tasks, const MegakernelParams& params) {
  return verification_record(plan_proofs(tasks, params));
}

}  // namespace mpk::rt
