// Proofs about the online-softmax formulas (ir/online_softmax.h) over the reals with Z3. e^x is
// not encoded: each state's max m carries u = e^m > 0 (a positive real), e^(m - M) is u_m / u_M
// and a max of two maxima carries the u of the larger (e^x is increasing), so every query is
// quantifier-free nonlinear real arithmetic. An empty state is a flag (m = -inf, l = o = 0).
// Rounding is not modelled: a rewrite equal over the reals but not in floats (a max taken
// without the running max) passes here and is for the GPU differential test to catch.
#pragma once

#include "ir/dot_product.h"
#include "ir/online_softmax.h"
#include "superopt/index_prover.h"

namespace mpk::superopt {

// The obligations, for states standing for sums S = sum e^(s_j), SV = sum e^(s_j) v_j through
// the invariant l * e^m = S, o * e^m = SV (empty: l = o = S = SV = 0):
//   update     a state plus one finite score s with value v, at max(m, s): the invariant holds
//              for S + e^s, SV + e^s v (attention's per-position step; the empty state first);
//   combine    a running sum at a common max M plus a state's share weight(m, M) * (l, o)
//              gains that state's S and SV, for any M and an empty state too (the warps'
//              states in attention, the chunk partials in the merge: any number of them);
//   rescale    a state moved to another max by weight(M, Mb) keeps its sums (the merge's
//              running state between batches);
//   final      o / l = SV / S for a non-empty state (the output).
ProofRecord prove_online_softmax(const ir::OnlineSoftmax& f, unsigned timeout_ms = 10000);

// A prefill attention's softmax (ir::PrefillSoftmax): rescale's exponent is c (m - M) and
// weight's is c (s - M) (the scale in the exponent, c > 0), or m - M and s - M (scaled scores),
// so both are the online softmax's weight for the base 2^c or 2 (refuted when one is not a
// power of 2 at all); then prove_online_softmax's four obligations with that weight and
// f.update, over finite target maxima. Not modelled: an empty state or a masked score (-inf),
// whose weight 0 rests on 2^-inf = +0 (with c > 0, the host's condition, in the first form),
// and the kernels' invariant that a row's first key block holds key 0, so that its running
// maximum is finite after it (2^(-inf - -inf) would be NaN).
ProofRecord prove_prefill_softmax(const ir::PrefillSoftmax& f, unsigned timeout_ms = 10000);

// The obligations of a linear's sums (ir::DotProduct, or mutants), every variable a symbolic
// real; the reference written here as src/ref computes it (an RMSNorm input w_k (x_k r), the
// dot product sum_k W_k in_k, then the bias, then the residual):
//   step       step(a, w, y) = a + w y: each step adds its term, so a lane's running sum from 0
//              is the sum of its terms;
//   add        add(a, b) = a + b: lanes' sums and K parts' sums, combined in any grouping, give
//              the sum over all their terms (the butterfly, the split-K fold);
//   RMSNorm    with A = scale(T, r): A + W (g (x r)) = scale(step(T, W, stage(g, x)), r), and
//              scale(0, r) = 0: the factor r applied once after the dot product of staged
//              inputs g x equals the reference's dot product of normalised inputs;
//   fold       scale(add(a, b), s) = scale(a, s) + scale(b, s): the factor after the fold equals
//              it applied to every part; scale(v, 1) = v (inputs without a factor);
//   epilogue   add(add(scale(F, s), b), res) = (s F + b) + res: bias and residual added once, to
//              the folded sum.
ProofRecord prove_dot_product(const ir::DotProduct& f, unsigned timeout_ms = 10000);

// Mutants of a real expression: every constant +-1, every variable replaced by each other
// variable of the expression, + and * swapped, the weight's arguments swapped, a power of 2
// dropped.
std::vector<ir::RealExpr> real_mutants(const ir::RealExpr& e);

}  // namespace mpk::superopt
