// Proofs about a task kernel's loop nest (ir/loop_nest.h) with Z3, generated from the
// description the kernel is printed from. Encoding as index_prover.h: integers with C truncating
// division and remainder; the loops, lets and guards in int, the accesses' indices in their
// type (Access::type), every intermediate inside its type as a side condition; quantifier-free;
// a work limit per query (z3_check.h). A Threads loop's variable
// ranges over [0, end), each value taken once (thread t takes t, t + threads, ...: the values
// of [0, end) and each by one thread and step, when the nest runs on `threads` threads whose
// thread_index takes 0 .. threads - 1: the caller's contract); a Serial or Unrolled one's over the multiples of its
// step below its end. Code outside every Threads loop runs in every thread (a thread binding
// names that thread; a cover's inverse may name it). A loop, let or thread binding may not hide
// a parameter; a loop may hide an enclosing loop of the same name, as in C. A parameter the
// body binds is in scope from its bind on. Refused (InvalidArgument), as the model does not
// cover them: a block-strided loop inside another or after the thread binding (its values'
// threads are not modelled), a thread binding inside a block-strided loop, a block barrier
// (__syncthreads and the kernels' helpers around one) inside a block-strided loop or after the
// thread binding. Warp barriers and shuffles are not checked.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/loop_nest.h"
#include "superopt/index_prover.h"

namespace mpk::superopt {

// `nest` with the parameters in `fixed` as those constants (one proof per task class) and the
// others symbolic in their [lo, hi]. First, every loop, let and guard where it runs: its
// expressions defined (int), a loop's step >= 1 (it ends) and its last increment inside int.
// Then per access, over every place the body uses it:
//   inside <range>  under its loops and guards, the loops' ends, lets and guards are defined
//                   (int), its index is defined (in its type) and lies in its declared range,
//                   its array in [0, arrays);
//   once            (when the access says so) two distinct iterations (any loop values; any
//                   thread where the use is outside every Threads loop) use distinct elements
//                   (array and index);
//   cover <k>       where its `when` holds, every point of the cover's domain is reached: at
//                   one of the access's places, the loop values its inverse names satisfy the
//                   loops and guards, and the element there is the expected one; and wherever
//                   the access is used, the `when` holds (never vacuous where its access runs).
ProofRecord prove_loop_nest(const ir::LoopNest& nest, const std::string& what,
                            const std::map<std::string, int64_t>& fixed, unsigned timeout_ms = 10000);

}  // namespace mpk::superopt
