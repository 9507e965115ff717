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

// Device functions printed from the formulas, for the megakernel's source:
// mk_even_split_begin(c, len, parts) and mk_even_split_end(c, len, parts), long long.
std::string layout_device_functions();

}  // namespace mpk::ir
