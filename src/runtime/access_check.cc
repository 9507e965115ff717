#include "runtime/access_check.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "ir/layouts.h"

namespace mpk::rt {
namespace {

struct Range {
  uint64_t begin = 0, end = 0;
};

// Sorted, merged intervals.
std::vector<Range> merged(std::vector<Range> r) {
  std::sort(r.begin(), r.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<Range> out;
  for (const Range& x : r) {
    if (x.begin == x.end) continue;
    if (!out.empty() && x.begin <= out.back().end)
      out.back().end = std::max(out.back().end, x.end);
    else
      out.push_back(x);
  }
  return out;
}

bool inside(const Range& r, const std::vector<Range>& u) {
  if (r.begin == r.end) return true;
  for (const Range& x : u)
    if (x.begin <= r.begin && r.end <= x.end) return true;
  return false;
}

class Checker {
 public:
  Checker(const sched::Plan& p, const MemoryPlan& m, const SegmentBases& b)
      : tg_(p.tasks), m_(m), b_(b) {}

  std::vector<Range> declared(const std::vector<sched::Access>& acc) const {
    std::vector<Range> r;
    for (const sched::Access& a : acc) {
      const uint64_t base = b_.act + uint64_t(m_.buffer_offset.at(size_t(a.buffer)));
      r.push_back({base + uint64_t(a.begin) * 4, base + uint64_t(a.end) * 4});
    }
    return merged(r);
  }

  // `n` floats (or ints) from `at`, when `at` is an activation address (weights, constants and
  // the KV cache are not the events' business).
  void expect(std::vector<Range>& to, uint64_t at, int64_t n) const {
    if (at < b_.act || at >= b_.act + uint64_t(m_.act_bytes)) return;
    to.push_back({at, at + uint64_t(n) * 4});
  }

  const sched::TaskGraph& tg_;
  const MemoryPlan& m_;
  const SegmentBases& b_;
};

// Bytes from an activation of heads x head_dim to query head g of d's group (ir::AttentionRows,
// as the kernels address it); a group's rows are consecutive (proved).
uint64_t heads_at(const MkTask& d, int64_t g) {
  return uint64_t(ir::head_elem(ir::q_head(d.kv_head, g, d.group), 0, d.head_dim)) * 4;
}

std::string text(const Range& r, const SegmentBases& b) {
  return "[" + std::to_string(r.begin - b.act) + ", " + std::to_string(r.end - b.act) + ")";
}

}  // namespace

void check_access_ranges(const sched::Plan& plan, const MemoryPlan& mem, const SegmentBases& bases,
                         const MegakernelTables& tables) {
  const Checker c(plan, mem, bases);
  const sched::TaskGraph& tg = plan.tasks;
  // A merging head's chunks: their declared writes together (its arrival counter names it).
  std::map<int, std::vector<sched::Access>> head_writes;
  for (const sched::Task& t : tg.tasks) {
    const MkTask& d = tables.tasks.at(size_t(t.id));
    if (d.kind == MPK_MK_ATTENTION && (d.flags & MPK_MK_F_MERGE))
      head_writes[d.arrival].insert(head_writes[d.arrival].end(), t.writes.begin(), t.writes.end());
  }
  for (const sched::Task& t : tg.tasks) {
    const MkTask& d = tables.tasks.at(size_t(t.id));
    std::vector<Range> reads, writes, adds, head;  // head: a merging chunk's whole-head accesses
    switch (d.kind) {
      case MPK_MK_LINEAR:
        c.expect(reads, d.x, d.k);
        if (d.input_mode == MPK_MK_IN_SILUMUL) c.expect(reads, d.x2, d.k);
        for (int s = 0; s < d.num_slices; ++s) {
          c.expect(writes, d.slices[s].out, d.slices[s].rows);
          if (d.slices[s].res) c.expect(reads, d.slices[s].res, d.slices[s].rows);
          if (d.slices[s].copy) c.expect(writes, d.slices[s].copy, d.slices[s].rows);
        }
        if (d.flags & MPK_MK_F_FOLD) {  // reads back its own gate and up outputs
          c.expect(writes, d.slices[0].out, d.slices[0].rows);
          c.expect(writes, d.slices[1].out, d.slices[1].rows);
          c.expect(adds, d.fold_out, d.fold_rows);
        }
        if (d.flags & MPK_MK_F_ARGMAX) {
          c.expect(writes, d.part_val, 1);
          c.expect(writes, d.part_idx, 1);
        }
        break;
      case MPK_MK_ATTENTION: {
        const int64_t D = d.head_dim, G = d.group, C = d.num_chunks;
        c.expect(reads, d.q + heads_at(d, 0), G * D);
        if (d.chunk == C - 1) {  // the appending chunk stages the new key and value
          c.expect(reads, d.kx + uint64_t(ir::head_elem(d.kv_head, 0, D)) * 4, D);
          c.expect(reads, d.vx + uint64_t(ir::head_elem(d.kv_head, 0, D)) * 4, D);
        }
        if (C == 1) {
          c.expect(writes, d.out + heads_at(d, 0), G * D);
        } else {  // state rows (ir::AttentionStates): the chunk's G from d.partial, the head's C G
          c.expect(writes, d.partial, ir::state_slot(G, 0, D));
          if (d.flags & MPK_MK_F_MERGE) {
            c.expect(head, d.out + heads_at(d, 0), G * D);
            c.expect(head, d.partial - uint64_t(ir::state_slot(ir::partial_row(0, d.chunk, 0, C, G), 0, D)) * 4,
                     ir::state_slot(ir::partial_row(0, C, 0, C, G), 0, D));
          }
        }
        break;
      }
      case MPK_MK_ATTN_MERGE: {
        const int64_t D = d.head_dim, G = d.group;
        c.expect(reads, d.partial, ir::state_slot(ir::partial_row(0, d.num_chunks, 0, d.num_chunks, G), 0, D));
        c.expect(writes, d.out + heads_at(d, 0), G * D);
        break;
      }
      case MPK_MK_ARGMAX:
        c.expect(reads, d.part_val, d.n);
        c.expect(reads, d.part_idx, d.n);
        c.expect(writes, d.next_token, 1);
        if (d.flags & MPK_MK_F_EMBED) c.expect(writes, d.embed_out, d.hidden);
        break;
      case MPK_MK_HOST: break;  // no descriptor: the host reads its inputs and writes its output whole
      default: MPK_THROW(Internal) << "task " << t.name << ": unknown kind " << d.kind;
    }
    const std::vector<Range> r = c.declared(t.reads), w = c.declared(t.writes), a = c.declared(t.adds);
    for (const Range& x : reads)
      MPK_CHECK(inside(x, r), Internal) << "task " << t.name << " reads activations " << text(x, bases)
                                         << " outside its declared reads";
    for (const Range& x : writes)
      MPK_CHECK(inside(x, w), Internal) << "task " << t.name << " writes activations " << text(x, bases)
                                          << " outside its declared writes";
    for (const Range& x : adds)
      MPK_CHECK(inside(x, a), Internal) << "task " << t.name << " adds into activations " << text(x, bases)
                                          << " outside its declared adds";
    if (!head.empty()) {
      const std::vector<Range> hw = c.declared(head_writes[d.arrival]);
      for (const Range& x : head)
        MPK_CHECK(inside(x, hw), Internal) << "task " << t.name << " merges over " << text(x, bases)
                                             << " outside its head's declared writes";
    }
  }
}

}  // namespace mpk::rt
