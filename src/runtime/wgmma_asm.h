// The prefill's wgmma.mma_async wrappers (sm_90a), printed: each names every fp32 accumulator
// register of its shape in the inline assembly (32 to 128 operands), which is written once here
// instead of by hand per shape.
#pragma once

#include <string>

namespace mpk::rt {

// One m64nNk16 bf16 multiply with fp32 accumulators d[N / 2] (a warpgroup's 64 x N tile, d[i]
// in the mma.sync fragment order of pf_frag_row / pf_frag_col with one warp across):
//  - A from shared memory (`a_in_registers` false): `name`(d, da, db, accumulate), both
//    operands K-major by descriptor; d starts from zero where `accumulate` is 0;
//  - A from registers (true): `name`(d, a, db), a[4] the A fragment (bf16 pairs), B MN-major by
//    descriptor (imm-trans-b 1); d always accumulates.
std::string wgmma_function(const std::string& name, int n, bool a_in_registers);

}  // namespace mpk::rt
