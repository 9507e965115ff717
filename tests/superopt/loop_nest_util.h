// The loop-nest tests' interpreter and mutation suite (tests/superopt): a nest run for every
// iteration under fixed parameters, checked against the obligations prove_loop_nest states, and
// every generated mutant of a nest's expressions judged by the prover against that run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/loop_nest.h"
#include "tests/superopt/test_util.h"

namespace mpk::superopt {

// prove_loop_nest's obligations by running the nest for every value of `var` in [0, count)
// (the other parameters fixed).
bool brute_force(const ir::LoopNest& n, const ir::IndexEnv& fixed, const std::string& var, int64_t count);

// An access's element as print() writes it: base (its array for `@`), then [index] (or [place]
// over the array and index).
std::string element(const ir::Access& a);

// Every `stride`-th mutant of each of the nest's expressions (loop bounds and steps, lets,
// guards, addresses), proved with `fixed` and judged by `runs_right` (the nest run by the
// interpreter).
void judge_mutants(const ir::LoopNest& f, const std::map<std::string, int64_t>& fixed, size_t stride,
                   const std::function<bool(const ir::LoopNest&)>& runs_right, Tally& tally);

// The same, judged by running the nest for `var` in [0, count) with `fixed` (32 threads unless
// fixed says otherwise).
void judge_mutants(const ir::LoopNest& f, const std::map<std::string, int64_t>& fixed, const std::string& var,
                   int64_t count, size_t stride, Tally& tally);

}  // namespace mpk::superopt
