// One proof obligation as one Z3 query (internal to superopt/): `goal` holds whenever
// `assumptions` do, i.e. assumptions && !goal is unsat, within a time limit (unknown or a
// timeout is not proved).
#pragma once

#include <z3++.h>

#include <string>
#include <vector>

#include "superopt/index_prover.h"

namespace mpk::superopt {

// The counterexample of a refuted obligation names `shown` with their values, or every
// constant of the model when `shown` is empty.
Obligation check(z3::context& ctx, const std::string& name, const z3::expr& assumptions,
                 const z3::expr& goal, const std::vector<z3::expr>& shown, unsigned timeout_ms);

}  // namespace mpk::superopt
