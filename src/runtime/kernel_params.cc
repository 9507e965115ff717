#include "runtime/kernel_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "base/error.h"

namespace mpk::rt {
namespace {

void in_range(const char* name, int v, int lo, int hi) {
  MPK_CHECK(v >= lo && v <= hi, InvalidArgument)
      << "megakernel parameter " << name << " = " << v << " is outside [" << lo << ", " << hi << "]";
}

}  // namespace

void validate(const MegakernelParams& p) {
  in_range("block_threads", p.block_threads, 64, 1024);
  MPK_CHECK(p.block_threads % 32 == 0, InvalidArgument)
      << "megakernel parameter block_threads = " << p.block_threads << " is not a multiple of 32";
  in_range("rows_per_warp", p.rows_per_warp, 1, 4);
  in_range("loads_in_flight", p.loads_in_flight, 1, 8);
  in_range("max_k_split", p.max_k_split, 1, 8);
  in_range("heads_per_pass", p.heads_per_pass, 1, 8);
  in_range("prefetch_rounds", p.prefetch_rounds, 0, 8);
  in_range("merge_batch", p.merge_batch, 1, 16);
  in_range("max_head_dim", p.max_head_dim, 64, 256);
  MPK_CHECK(p.max_head_dim % 64 == 0, InvalidArgument)
      << "megakernel parameter max_head_dim = " << p.max_head_dim << " is not a multiple of 64";
}

MegakernelParams params_for_head_dim(int head_dim, MegakernelParams base) {
  base.max_head_dim = std::clamp((head_dim + 63) / 64 * 64, 64, 256);
  return base;
}

std::string to_defines(const MegakernelParams& p) {
  validate(p);
  return fmt::format(
      "#define MK_BLOCK_THREADS {}\n#define MK_ROWS_PER_WARP {}\n#define MK_LOADS_IN_FLIGHT {}\n"
      "#define MK_MAX_KSPLIT {}\n#define MK_HEADS_PER_PASS {}\n#define MK_PREFETCH_ROUNDS {}\n"
      "#define MK_MERGE_BATCH {}\n#define MK_MAX_HEAD_DIM {}\n",
      p.block_threads, p.rows_per_warp, p.loads_in_flight, p.max_k_split, p.heads_per_pass,
      p.prefetch_rounds, p.merge_batch, p.max_head_dim);
}

MegakernelParams parse_params(const std::string& text, MegakernelParams base) {
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    MPK_CHECK(eq != std::string::npos, InvalidArgument)
        << "megakernel parameter '" << item << "' is not name=value";
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    const long v = std::strtol(value.c_str(), &end, 10);
    MPK_CHECK(!value.empty() && *end == '\0' && v >= -(1L << 30) && v <= (1L << 30), InvalidArgument)
        << "megakernel parameter " << name << " = '" << value << "' is not an integer";
    int* field = name == "block_threads"    ? &base.block_threads
                 : name == "rows_per_warp"   ? &base.rows_per_warp
                 : name == "loads_in_flight" ? &base.loads_in_flight
                 : name == "max_k_split"     ? &base.max_k_split
                 : name == "heads_per_pass"  ? &base.heads_per_pass
                 : name == "prefetch_rounds" ? &base.prefetch_rounds
                 : name == "merge_batch"     ? &base.merge_batch
                 : name == "max_head_dim"    ? &base.max_head_dim
                                             : nullptr;
    MPK_CHECK(field != nullptr, InvalidArgument) << "unknown megakernel parameter '" << name << "'";
    *field = int(v);
  }
  validate(base);
  return base;
}

std::string to_json(const MegakernelParams& p) {
  return fmt::format(
      "{{\"block_threads\":{},\"rows_per_warp\":{},\"loads_in_flight\":{},\"max_k_split\":{},"
      "\"heads_per_pass\":{},\"prefetch_rounds\":{},\"merge_batch\":{},\"max_head_dim\":{}}}",
      p.block_threads, p.rows_per_warp, p.loads_in_flight, p.max_k_split, p.heads_per_pass,
      p.prefetch_rounds, p.merge_batch, p.max_head_dim);
}

}  // namespace mpk::rt
