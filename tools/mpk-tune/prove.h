// mpk-tune prove (see prove.cc).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>

namespace mpk::tune {

// Plans the megakernel for the model directory's config.json (no weights, no GPU) at `workers`
// workers and the KV capacity (capped by max_position_embeddings), proves every layout formula
// the plan uses and prints a table (or JSON): subject, obligation, result, milliseconds, and
// the total. Returns 0 when everything is proved, 1 otherwise.
int cmd_prove(std::ostream& out, const std::filesystem::path& model_dir, int workers,
              int64_t kv_capacity, bool json);

}  // namespace mpk::tune
