// The task graph of one decode step (T = 1): tile tasks over buffers, linked by event counters.
// It is what the megakernel generator consumes, so everything a worker needs is explicit:
// which rows of which weights a task streams, which buffer ranges it reads and writes, which
// graph ops it implements in order, the events it waits on and the one it triggers.
//
// Step model:
//  - A step runs every task exactly once. Buffers are written once per step (the graph has no
//    in-place ops), so inside a step only read-after-write order matters, and events carry it.
//  - Events are monotonic counters, never reset: a task triggers its event once per step
//    (atomic add after its writes are visible); a waiter of event e in step s (s = 1, 2, ...)
//    proceeds when counter(e) >= e.need * s.
//  - A buffer marked `carried` is written for the next step (the next token's embedding is
//    written by the final argmax task); readers in a step read the value of the previous step
//    (or what the host wrote before the first step). Every reader of a carried buffer is an
//    ancestor of its writer, so the overwrite never races a read in the same step.
//  - Cross-step waits, for a megakernel that runs several steps in one launch: the writer of a
//    carried buffer triggers an event, and its readers list it in `waits_prev`, which is ready
//    in step s when counter >= need * (s - 1) (always ready in step 1, the host wrote the
//    value). With separate launches per step these waits are trivially met. validate() checks
//    that they make back-to-back steps race-free (ViolationKind::CrossStepHazard).
//  - Weights and the KV cache history do not depend on the step's events: a task may stream
//    them before its events fire; only activation reads wait.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "ir/graph.h"
#include "ir/layouts.h"

namespace mpk::sched {

enum class TaskKind : uint8_t {
  Linear,          // output-row tile of a linear (or of sibling linears merged by rows)
  Attention,       // one KV head (all its query heads), optionally one chunk of the KV length
  AttentionMerge,  // online-softmax merge of one KV head's chunk partials
  Vector,          // a whole-vector op (norm, rope, add, silu_mul, embedding, argmax, ...)
};
const char* task_kind_name(TaskKind kind);

// A buffer the tasks read or write: a graph tensor at T = 1, or a scratch buffer the scheduler
// introduced (attention chunk partials, per-tile argmax partials).
struct Buffer {
  std::string name;
  DType dtype = DType::F32;
  int64_t numel = 0;
  int graph_tensor = -1;  // tensor id in the graph, -1 for scratch
  bool carried = false;   // written for the next step (see the step model above)
};

// Elements [begin, end) of a buffer.
struct Access {
  int buffer = -1;
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const Access&) const = default;
};

// Rows [row_begin, row_end) of a weight matrix (and of its bias, when present) that a linear
// tile streams; its outputs land in `out` starting at element out_begin.
struct WeightSlice {
  int weight = -1;  // ir::Graph::weights index
  int bias = -1;    // ir::Graph::weights index or -1
  int64_t row_begin = 0;
  int64_t row_end = 0;
  int out = -1;  // buffer id
  int64_t out_begin = 0;
  // A buffer its outputs are also written to, from out_begin, or -1: the start of a sum that
  // other tasks add into (Task::adds), the residual of the MLP's folded down projection.
  int copy = -1;
};

// Columns [col_begin, col_end) of every row of a weight matrix of `rows` rows and `cols`
// columns: a linear over a tile's own outputs, its reduction split across the stage's tiles
// (each tile one K part), every tile adding its `rows` sums into `out` (Task::adds).
struct WeightColumns {
  int weight = -1;  // ir::Graph::weights index
  int64_t rows = 0, cols = 0;
  int64_t col_begin = 0, col_end = 0;
  int out = -1;  // buffer id
};

// A graph op a task implements. In a Linear task an argmax is the per-tile partial; in a
// Vector task it is the reduce over those partials.
struct FusedOp {
  int op = -1;  // index into ir::Graph::ops
  ir::OpKind kind = ir::OpKind::Add;
};

// The tiles of one graph op (or of merged sibling linears) as produced by decompose; fusion
// keeps a stage's name and appends to its tasks' op lists.
struct Stage {
  std::string name;  // "L3.qkv", "L3.attn", "lm_head", ...
  TaskKind kind = TaskKind::Vector;
  int layer = -1;
  int64_t rows = 0;   // Linear: output rows (sum over merged linears); Attention: KV heads
  int64_t k = 0;      // Linear: reduction length
  std::vector<int> tasks;
};

struct Task {
  int id = -1;
  TaskKind kind = TaskKind::Vector;
  std::string name;  // "L3.qkv[5]"
  int stage = -1;
  int tile = 0;  // index within the stage
  int layer = -1;
  std::vector<FusedOp> ops;  // in execution order

  // Linear: rows [row_begin, row_end) of the stage's (concatenated) output rows, K = k. With
  // paired siblings (DecomposeOptions::pair_siblings) the stage's rows are ordered tile by
  // tile: a tile's rows of the first linear, then the same rows of the second.
  int64_t row_begin = 0;
  int64_t row_end = 0;
  int64_t k = 0;
  std::vector<WeightSlice> weights;
  // Linear: the folded down projection (FuseOptions::down_into_gate_up): silu(gate) * up of
  // the tile's rows times those columns of the down matrix, added into columns.out.
  std::vector<WeightColumns> columns;

  // Attention / AttentionMerge: KV head, its query heads [q_head_begin, q_head_end), and the
  // KV positions [kv_begin, kv_end) of this chunk (chunk of num_chunks; 0 of 1 when unsplit),
  // as planned for seq_len (costs only).
  // At run time, with fixed chunks (DecomposeOptions::kv_chunk) a chunk covers only its
  // positions <= the step's position; with DecomposeOptions::kv_splits = C the live KV length
  // n (position + 1) is divided evenly: chunk c covers [c*n/C, (c+1)*n/C) (integer division;
  // while n < C some chunks are empty and write l = 0). Either way the chunk holding the
  // position (with kv_splits: the last one) appends the new k, v to the cache.
  // Chunk partials (F32, the merge's input; C = num_chunks, group = query heads per KV head):
  // the state of (kv head h, chunk c, query head g within the group) is state row
  // (h*C + c)*group + g, head_dim unnormalised output sums, then the running max m, then the
  // running sum l (ir::AttentionStates, proved). Chunk task (h, c) writes its group's rows;
  // merge task h reads its C chunks' rows.
  int kv_head = -1;
  int q_head_begin = 0;
  int q_head_end = 0;
  int64_t kv_begin = 0;
  int64_t kv_end = 0;
  int chunk = 0;
  int num_chunks = 1;
  // Attention chunk with the merge folded in (FuseOptions::merge_into_attention): the last chunk
  // of its KV head to finish (an arrival counter at run time, not an event) merges every
  // chunk's partials into the head's output, writing the head's whole output range [b, e),
  // although each chunk's writes name only its equal, non-empty share of it (chunk c of C:
  // [b + c*(e-b)/C, b + (c+1)*(e-b)/C)). fuse folds a head only when every task that reads the
  // output buffer over a range overlapping [b, e) reads all of [b, e): such a reader overlaps
  // every share, so it waits for all of the head's chunks, the merging one included. A head
  // with a partial reader, or with e - b < C, keeps its AttentionMerge task.
  bool merges = false;

  // Per-step traffic and work, planned for DecomposeOptions::seq_len.
  int64_t weight_bytes = 0;  // weights first read from DRAM by this task
  int64_t kv_bytes = 0;      // KV cache history (does not wait for events either)
  int64_t act_bytes = 0;     // activations and re-read small weights (L2-resident)
  double flops = 0;

  std::vector<Access> reads;   // activation reads (what events order)
  std::vector<Access> writes;
  // Ranges the task adds into (red.global.add) instead of writing: ordered after the range's
  // writers (which write its start) and before its readers; the adds of several tasks to one
  // range commute, so they are not ordered among themselves.
  std::vector<Access> adds;

  std::vector<int> waits;       // event ids, ascending
  std::vector<int> waits_prev;  // event ids, ascending, to be ready for the previous step
  int trigger = -1;  // event id, -1 when nothing reads its outputs (in this or the next step)
};

// A monotonic counter: ready in step s when counter >= need * s.
struct Event {
  int id = -1;
  std::string name;
  int need = 0;               // triggers per step = triggers.size()
  std::vector<int> triggers;  // task ids
  std::vector<int> waiters;   // task ids (Task::waits)
  std::vector<int> prev_waiters;  // task ids (Task::waits_prev): they wait for the last step
};

struct TaskGraph {
  std::vector<Buffer> buffers;  // the first graph.tensors.size() mirror graph tensors by id
  std::vector<Stage> stages;
  std::vector<Task> tasks;  // ids are indices; the order is a topological order
  std::vector<Event> events;
  int64_t seq_len = 0;  // KV length the costs are planned for
  DType weight_dtype = DType::BF16;

  int64_t total_weight_bytes() const;
  int64_t total_kv_bytes() const;
  double total_flops() const;
};

// "L3." for layer 3, the start of its stages' names; "" for a stage outside the layers (-1).
std::string layer_prefix(int layer);

// Sorts accesses by buffer and merges overlapping or adjacent ranges of the same buffer.
std::vector<Access> normalize(std::vector<Access> accesses);

// Part c of `chunks` when `len` items are split evenly, [begin, end): KV positions by the
// kv_splits rule above, and a merge's output elements over its chunks. The formula is
// ir::even_split_formula, which the megakernel prints for the device and superopt/ proves.
inline std::pair<int64_t, int64_t> even_split(int64_t len, int chunks, int c) {
  return ir::even_split(len, chunks, c);
}
// Bytes of the accesses (buffer dtype size times elements).
int64_t access_bytes(const TaskGraph& tg, const std::vector<Access>& accesses);

}  // namespace mpk::sched
