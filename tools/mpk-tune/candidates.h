// mpk-tune candidates (see candidates.cc).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>

namespace mpk::tune {

// The search's first stages for a model directory's config.json, without a GPU: the candidate
// megakernel parameter sets (the model's defaults and every set one parameter away from them,
// in an order `seed` shuffles), each through the static filters (parameter ranges, the tasks
// its variants can run, shared memory against `arch`'s limit), the proofs of its plan (Z3) and
// NVRTC with ptxas's resource report (registers, spills). Candidates are checked in parallel;
// the table (or JSON) gives each one's figures and verdict. What remains is timing them on a
// GPU. `max` > 0 checks only the first `max` (the defaults first). Z3 ms is the solver time of
// the plan's proof records (each proved once per process). Returns 0 when the defaults pass,
// 1 otherwise.
int cmd_candidates(std::ostream& out, const std::filesystem::path& model_dir, int workers,
                   int64_t kv_capacity, const std::string& arch, uint64_t seed, size_t max,
                   bool json);

}  // namespace mpk::tune
