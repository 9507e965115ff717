#include "runtime/kernel_params.h"

#include <fmt/format.h>

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
}

std::string to_defines(const MegakernelParams& p) {
  validate(p);
  return fmt::format(
      "#define MK_BLOCK_THREADS {}\n#define MK_ROWS_PER_WARP {}\n#define MK_LOADS_IN_FLIGHT {}\n"
      "#define MK_MAX_KSPLIT {}\n#define MK_HEADS_PER_PASS {}\n",
      p.block_threads, p.rows_per_warp, p.loads_in_flight, p.max_k_split, p.heads_per_pass);
}

std::string to_json(const MegakernelParams& p) {
  return fmt::format(
      "{{\"block_threads\":{},\"rows_per_warp\":{},\"loads_in_flight\":{},\"max_k_split\":{},"
      "\"heads_per_pass\":{}}}",
      p.block_threads, p.rows_per_warp, p.loads_in_flight, p.max_k_split, p.heads_per_pass);
}

}  // namespace mpk::rt
