// mpk-tune coverage (see coverage.cc).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>

namespace mpk::tune {

// The operator coverage of the model directory's config.json (no weights, no GPU needed): for
// each op kind of its graph, how many ops, the weight dtype, the arch, and what runs them in
// the megakernel planned for `workers` workers (the task kinds and kernel variants), the host
// fallback between the megakernel's segments (runtime/host_ops.h), or why nothing does. With
// `compile`, the kernel is also compiled for `arch` with NVRTC. Returns 0 when every op runs
// (on the device or the host), 1 otherwise (an op nothing runs makes the GPU load fail).
int cmd_coverage(std::ostream& out, const std::filesystem::path& model_dir, int workers,
                 int64_t kv_capacity, const std::string& arch, bool compile, bool json);

}  // namespace mpk::tune
