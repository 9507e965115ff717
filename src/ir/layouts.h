// Layout formulas written once as index expressions (index_expr.h): the scheduler evaluates
// them, the megakernel's source prints them (layout_device_functions) and superopt/ proves
// them (bounds, each item covered exactly once).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "ir/index_expr.h"

namespace mpk::ir {

// Part c of `parts` when `len` items are split evenly: [c * len / parts, (c + 1) * len / parts).
// Used for the KV positions of an attention chunk (len = the live length, position + 1) and a
// merge's output elements over its chunks. Variables: c, len, parts.
struct EvenSplit {
  IndexExpr begin, end;
};
const EvenSplit& even_split_formula();

// The formula evaluated: {begin, end}.
std::pair<int64_t, int64_t> even_split(int64_t len, int64_t parts, int64_t c);

// A linear tile's work items (int arithmetic on the device): item `it` of a tile whose rows
// are grouped by `rows` and whose K is split in `ks` parts (the even split) is row group
// it / ks, first row row0 = (it / ks) * rows, K part part = it % ks; with ks > 1 the sum of
// part p for tile row r goes to shared slot p * total + r of part_sums (total: the tile's
// rows). Variables: it, ks, rows; p, total, r. `item` is the inverse the prover checks (not
// printed): the item of row group g and K part p. Variables: g, p, ks.
struct LinearItems {
  IndexExpr row0, part, slot, item;
};
const LinearItems& linear_items_formula();

// Device functions printed from the formulas, for the megakernel's source:
// mk_even_split_begin(c, len, parts) and mk_even_split_end(c, len, parts), long long;
// mk_lin_row0(it, ks, rows), mk_lin_part(it, ks) and mk_lin_slot(p, total, r), int.
std::string layout_device_functions();

}  // namespace mpk::ir
