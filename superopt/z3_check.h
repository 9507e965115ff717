// One proof obligation as one Z3 query (internal to superopt/): `goal` holds whenever
// `assumptions` do, i.e. assumptions && !goal is unsat, within the query's limits (unknown or a
// limit reached is not proved).
//
// A query's limit `timeout_ms` is on Z3's work, not on time, so that it gets the same verdict
// on any machine, under any load and under the sanitizers: Z3's resource count (rlimit; the
// same for one query and one Z3 version), kWorkPerMs units per millisecond. That is above the
// most work Z3 4.8.12 was seen to do in a millisecond on a 2-core host (7,900 units, over the
// 70,000 queries of the test suite; of those over 100 ms, the median did 900), so a query that
// finished within its time limit there finishes within its work limit. A wall clock of
// kWallFactor * timeout_ms backs it up: a query whose time Z3 counts little of (nonlinear
// ones; a few of the suite's did 50 units a millisecond) meets it first on a machine slower or
// busier than that one.
#pragma once

#include <z3++.h>

#include <cstdint>
#include <string>
#include <vector>

#include "superopt/index_prover.h"

namespace mpk::superopt {

inline constexpr uint64_t kWorkPerMs = 10000;
inline constexpr unsigned kWallFactor = 6;

// The counterexample of a refuted obligation names `shown` with their values, or every
// constant of the model when `shown` is empty.
Obligation check(z3::context& ctx, const std::string& name, const z3::expr& assumptions,
                 const z3::expr& goal, const std::vector<z3::expr>& shown, unsigned timeout_ms);

// The same with the two limits given apart (work_limit 0: none; at most 2^32 - 1 units).
Obligation check_limits(z3::context& ctx, const std::string& name, const z3::expr& assumptions,
                        const z3::expr& goal, const std::vector<z3::expr>& shown, uint64_t work_limit,
                        unsigned wall_ms);

}  // namespace mpk::superopt
