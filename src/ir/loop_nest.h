// A task kernel's loop nest described once: its run-time parameters, loops, the names it binds,
// its guards and the index of every global or shared-memory access. print() writes the kernel's
// C from it (loops, guards and addresses around the body's own arithmetic, which holds no index
// arithmetic); superopt/loop_prover.h turns the same description into Z3 terms (every access
// inside the range the scheduler declared, each output element written once, each reduction
// term read once and at least once).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/index_expr.h"

namespace mpk::ir {

// A block-strided loop over [0, end): the thread's index, then steps of the block's threads
// (each value of [0, end) taken by exactly one thread and step); a serial or unrolled loop over
// 0, step, 2 step, ... < end in each thread.
enum class LoopKind { Threads, Serial, Unrolled };

struct Stmt {
  enum Kind { Loop, Let, If, Code, Bind, Thread } kind;
  std::string var;  // Loop: its variable; Let, Thread: the name bound (an int); Bind: a Param
  LoopKind loop = LoopKind::Serial;
  IndexExpr expr = 0;             // Loop: end; Let: value; If: lhs of lhs < rhs
  IndexExpr step = 1;             // Loop (Serial, Unrolled); If: rhs
  std::string code;               // Code: C statements ({name} is access `name`'s element);
                                  // Thread: the C of the thread's index
  std::vector<Stmt> body;         // Loop, If
  IndexExpr start = 0;            // Loop (Serial, Unrolled): the first value
  bool kept = false;              // Loop (Serial): its variable stays in scope after it (loop_kept)
};
using Block = std::vector<Stmt>;

inline Stmt loop(std::string var, LoopKind kind, IndexExpr end, IndexExpr step, Block body) {
  return Stmt{Stmt::Loop, std::move(var), kind, std::move(end), std::move(step), "", std::move(body)};
}
// A serial loop over start, start + step, ... < end (a thread's own values of a strided loop
// that starts at the thread: the compiler keeps one induction variable, where a loop from 0 plus
// the thread's offset cost registers).
inline Stmt loop_from(std::string var, IndexExpr start, IndexExpr end, IndexExpr step, Block body) {
  Stmt s = loop(std::move(var), LoopKind::Serial, std::move(end), std::move(step), std::move(body));
  s.start = std::move(start);
  return s;
}
// loop_from whose variable stays in scope after the loop, holding the value that ended it: start
// + ceil(max(end - start, 0) / step) step. A round after the loop then
// starts where the loop stopped, from the one register the loop counts in; a closed form of the
// same value keeps its terms live across the loop, and ptxas, short of registers, spread a
// round's loads among its uses.
inline Stmt loop_kept(std::string var, IndexExpr start, IndexExpr end, IndexExpr step, Block body) {
  Stmt s = loop_from(std::move(var), std::move(start), std::move(end), std::move(step), std::move(body));
  s.kept = true;
  return s;
}
inline Stmt let(std::string var, IndexExpr value) {
  return Stmt{Stmt::Let, std::move(var), LoopKind::Serial, std::move(value), 1, "", {}};
}
inline Stmt guard(IndexExpr lhs, IndexExpr rhs, Block body) {  // if (lhs < rhs)
  return Stmt{Stmt::If, "", LoopKind::Serial, std::move(lhs), std::move(rhs), "", std::move(body)};
}
inline Stmt code(std::string text) { return Stmt{Stmt::Code, "", LoopKind::Serial, 0, 1, std::move(text), {}}; }
// Parameter `param` read from its C expression here instead of at the top of the function: a
// value bound at the top stays in a register across everything before its use (the prover sees
// one value: the descriptor does not change while the task runs).
inline Stmt bind(std::string param) { return Stmt{Stmt::Bind, std::move(param), LoopKind::Serial, 0, 1, "", {}}; }
// `var` = the thread's index among the nest's `threads` (threadIdx.x in a block's nest; the lane,
// threadIdx.x & 31, in a warp's nest with threads = 32): a thread's own share of a loop that is
// not block-strided. At most one per nest.
inline Stmt thread(std::string var, std::string c = "threadIdx.x") {
  return Stmt{Stmt::Thread, std::move(var), LoopKind::Serial, 0, 1, std::move(c), {}};
}

// A run-time value the nest reads: bound from `c` (a C expression over the task descriptor or
// the function's arguments) at the top of the printed function or where the body binds it, in
// [lo, hi] for the prover unless a proof fixes it.
struct Param {
  std::string name, c;
  int64_t lo, hi;
};

// A declared range [begin, end) over the parameters: where an access must stay.
struct Range {
  std::string name;
  IndexExpr begin, end;
};

// Every term of a reduction (or element of an output) reached: for each point of `vars` (each
// in [0, its end), the end over the parameters and the variables before it), the loop values
// `inverse` names (over the point's variables and the parameters) satisfy the nest's loops and
// guards and access `expect` (of array `expect_array`) at one of the places the access is used.
// `when` (each lhs < rhs, over the parameters): where the cover holds, for an access a guard on
// the parameters picks (an output written in one mode only).
struct Cover {
  std::vector<std::pair<std::string, IndexExpr>> vars;
  IndexExpr expect;
  std::map<std::string, IndexExpr> inverse;
  std::vector<std::pair<IndexExpr, IndexExpr>> when = {};
  IndexExpr expect_array = 0;
};

struct Access {
  std::string name;   // {name} in Code
  std::string base;   // C expression of the pointer it indexes
  std::string range;  // the Range it must stay inside
  IndexExpr index;    // over the parameters, loop variables and lets in scope
  bool once = false;  // distinct iterations, distinct elements
  std::vector<Cover> covers;
  CType type = CType::LongLong;  // of the index: Int for shared memory (32-bit addresses)
  // One of `arrays` arrays (a tile's weight rows, a register array per row): `@` in base is
  // `array` (int, in [0, arrays)); an element is the pair (array, index).
  IndexExpr array = 0, arrays = 1;
  // Where a pair lives when the arrays share one buffer: printed as base[place] with `array` and
  // `index` there the access's (the proofs of the nest are about the pairs; that distinct pairs
  // have distinct places inside the buffer is the layout's own proof). 0: base[index].
  IndexExpr place = 0;
};

struct LoopNest {
  std::string signature;  // "__device__ void mk_attn_merge(const MkTask& t, const float* part)"
  std::vector<Param> params;
  std::vector<Range> ranges;
  std::vector<Access> accesses;
  Block body;
  std::string threads = "threads";  // the parameter a Threads loop steps by
  // Where a Threads loop starts: the thread's index among `threads` (a grid-strided nest: the
  // thread's index in the grid, with `threads` the grid's threads).
  std::string thread_index = "threadIdx.x";
};

// Whether the block binds `param` (Stmt::Bind) anywhere.
bool binds(const Block& b, const std::string& param);

// Whether `text` holds `name` as a C identifier.
bool names(const std::string& text, const std::string& name);

// The nest as a C function: the parameters the body names and does not bind (int), then the
// body; loops, lets and binds in int, guards as `if`, every {name} replaced by `base[index]` with
// the index in its type (`@` in base by the array).
std::string print(const LoopNest& nest);

}  // namespace mpk::ir
