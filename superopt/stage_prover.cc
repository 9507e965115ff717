// The weight ring's placement (ir::StageRing; superopt/index_prover.h).
#include <z3++.h>

#include "base/error.h"
#include "superopt/encoder.h"
#include "superopt/index_prover.h"
#include "superopt/z3_check.h"

namespace mpk::superopt {

ProofRecord prove_stage_ring(const ir::StageRing& f, int64_t max_size, unsigned timeout_ms) {
  MPK_CHECK(max_size >= 128 && max_size <= (int64_t(1) << 40), InvalidArgument)
      << "weight ring of up to " << max_size << " bytes";
  z3::context ctx;
  Encoder enc(ctx, 64);
  const z3::expr c = ctx.int_const("c"), size = ctx.int_const("size"), bytes = ctx.int_const("bytes");
  const z3::expr a = ctx.int_const("a"), b = ctx.int_const("b"), max = ctx.int_val(max_size);
  auto at = [&](const z3::expr& copy, const z3::expr& ring, const z3::expr& n) {
    return enc.encode(f.at, {{"c", copy}, {"size", ring}, {"bytes", n}});
  };
  ProofRecord r;
  r.subject = "weight ring: at = " + ir::to_string(f.at) + ", need = " + ir::to_string(f.need) +
              ", alone = " + ir::to_string(f.alone) + ", rings up to " + std::to_string(max_size) + " bytes";
  r.z3_version = Z3_get_full_version();
  const z3::expr copy = c >= 0 && c <= ctx.int_val(int64_t(0xffffffff)) && size >= 128 && size <= max &&
                        size % 128 == 0 && bytes >= 16 && bytes <= size && bytes % 16 == 0;
  const Term t = at(c, size, bytes);
  r.obligations.push_back(check(ctx, "defined (long long: no division by zero or overflow)", copy, t.defined,
                                {c, size, bytes}, timeout_ms));
  r.obligations.push_back(check(ctx, "bounds (the copy inside the ring, 128-byte aligned)", copy && t.defined,
                                t.value >= 0 && t.value + bytes <= size && t.value % 128 == 0, {c, size, bytes},
                                timeout_ms));
  auto copy_of = [&](const z3::expr& n) { return n >= 16 && n <= max && n % 16 == 0; };
  const Term alone = enc.encode(f.alone, {{"a", a}});
  r.obligations.push_back(check(ctx, "the host's ring for one copy holds it", copy_of(a),
                                alone.defined && alone.value % 128 == 0 && alone.value >= a, {a}, timeout_ms));
  const Term need = enc.encode(f.need, {{"a", a}, {"b", b}});
  r.obligations.push_back(check(ctx, "the host's ring for two copies is whole 128-byte units", copy_of(a) && copy_of(b),
                                need.defined && need.value % 128 == 0, {a, b}, timeout_ms));
  // With the copy number symbolic the pairs below are products Z3 did not decide in 10 s: the
  // placement is shown to read c's parity alone, then the pairs are proved for c = 0 and 1.
  const Term parity = at(c % 2, size, bytes);
  r.obligations.push_back(check(ctx, "the placement reads the copy number's parity alone", copy && t.defined,
                                parity.defined && parity.value == t.value, {c, size, bytes}, timeout_ms));
  // Copy c of a bytes, then copy c + 1 of b bytes, in any ring of at least need bytes.
  z3::expr apart = ctx.bool_val(true);
  for (int64_t first_copy : {0, 1}) {
    const Term first = at(ctx.int_val(first_copy), size, a), next = at(ctx.int_val(first_copy + 1), size, b);
    apart = apart && first.defined && next.defined && (first.value + a <= next.value || next.value + b <= first.value);
  }
  r.obligations.push_back(check(ctx, "two consecutive copies apart in a ring of at least the host's size",
                                copy_of(a) && copy_of(b) && need.defined && size >= need.value && size <= max &&
                                    size % 128 == 0,
                                apart, {a, b, size}, timeout_ms));
  return r;
}

}  // namespace mpk::superopt
