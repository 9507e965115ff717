// The proofs a megakernel plan rests on (superopt/), checked before its kernel runs: today the
// even split of the live KV length over each attention task's chunk count.
#pragma once

#include <string>
#include <vector>

#include "runtime/megakernel.h"
#include "superopt/index_prover.h"

namespace mpk::rt {

// The proof records of every chunk count among `tasks`, in increasing count, whatever their
// results (memoised per process).
std::vector<superopt::ProofRecord> plan_proofs(const std::vector<MkTask>& tasks);

// Proves the even split for every chunk count among `tasks` (memoised per process: a count is
// proved once for every length up to 2^31). Returns the proof records as a JSON array. Throws
// Error(Internal) naming the obligation, its result and the counterexample when one fails.
std::string prove_plan(const std::vector<MkTask>& tasks);

}  // namespace mpk::rt
