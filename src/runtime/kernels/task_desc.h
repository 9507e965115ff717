// The megakernel's task descriptor table: plain data shared by the host (built from the
// TaskGraph, src/runtime/megakernel.cc) and the device (kernels/*.cuh, assembled after this
// file by the code generator). Only fundamental types, so it compiles with
// NVRTC without any header. Addresses are device addresses (u64); 0 means "absent".
#ifndef MPK_RUNTIME_KERNELS_TASK_DESC_H_
#define MPK_RUNTIME_KERNELS_TASK_DESC_H_

#define MPK_MK_MAX_SLICES 4
#define MPK_MK_KSPLIT_SLOTS 256  // linear: shared partial sums when K is split
#define MPK_MK_MAX_EOS 8
#define MPK_MK_INLINE_WAITS 4    // a task's first waits (event, need) travel in its descriptor
#define MPK_MK_STATUS_WORDS 8    // control block: error, worker, task, event, steps done, pad

// Task kinds (the code of each comes in variants: runtime/variants.h).
#define MPK_MK_LINEAR 1
#define MPK_MK_ATTENTION 2
#define MPK_MK_ARGMAX 3
#define MPK_MK_ATTN_MERGE 4  // online-softmax merge of one KV head's chunk partials
#define MPK_MK_HOST 5        // the host runs it between launches (runtime/host_ops.h): in no queue

// Linear prologues (the input vector staged in shared memory as fp32).
#define MPK_MK_IN_PLAIN 0    // x
#define MPK_MK_IN_RMSNORM 1  // rms_norm(x) * norm_w (after last_row, which is the identity at T = 1)
#define MPK_MK_IN_SILUMUL 2  // silu(x) * x2

// Flags.
#define MPK_MK_F_ARGMAX 1     // linear: per-tile argmax partial of its outputs
#define MPK_MK_F_Q_NORM 2     // attention: head rms_norm of q
#define MPK_MK_F_K_NORM 4     // attention: head rms_norm of k
#define MPK_MK_F_ROPE_Q 8     // attention: RoPE of q
#define MPK_MK_F_ROPE_K 16    // attention: RoPE of k
#define MPK_MK_F_EMBED 32     // argmax: also writes the next token's embedding row
#define MPK_MK_F_MERGE 64     // attention chunk: the last of its head to finish merges the partials
#define MPK_MK_F_STAGE 128    // linear: its weights may be staged in shared memory (stage.cuh):
                              //   16-byte aligned slices of whole 16-byte units, no argmax
#define MPK_MK_F_FOLD 256     // linear: the folded down projection (MkTask::fold_*)
#define MPK_MK_FOLD_A(rows) (((rows) + 3) / 4 * 4)
#define MPK_MK_FOLD_SLOTS(rows, cols) (MPK_MK_FOLD_A(rows) + MPK_MK_FOLD_A(cols))

// Rows [row0, row0 + rows) of one weight matrix of K columns (dtype of the kernel), written
// to out[0 .. rows) (+ bias[row0 ..]) (+ res[0 .. rows): the residual epilogue), and to
// copy[0 .. rows) too when copy is set (the start of a folded down projection's sums).
struct MkSlice {
  unsigned long long w;     // address of weight row row0
  unsigned long long bias;  // f32 address of bias[row0], or 0
  unsigned long long out;   // f32 address of the first output element
  unsigned long long res;   // f32 address of the residual matching out[0], or 0
  unsigned long long copy;  // f32 address, or 0
  int rows;
  int pad;
};

struct MkTask {
  int kind;
  int flags;
  int wait_begin;  // into the waits table: num_waits events of this step, then
  int num_waits;   // num_waits_prev events that must have fired for the previous step
  int num_waits_prev;
  int variant;     // which code runs it: an index into the kernel's variants (runtime/variants.h)
  int trigger;     // event id or -1
  int id;          // TaskGraph task id
  // The first MPK_MK_INLINE_WAITS of those events and their needs, so that a task whose
  // descriptor is in shared memory starts waiting without a table lookup.
  int wait_event[MPK_MK_INLINE_WAITS];
  unsigned wait_need[MPK_MK_INLINE_WAITS];

  // Linear.
  int input_mode;
  int k;
  int num_slices;
  float eps;
  unsigned long long x;       // f32 input (gate for silu_mul; argmax: the logits)
  unsigned long long x2;      // f32 up for silu_mul
  unsigned long long norm_w;  // f32 rms_norm scale
  MkSlice slices[MPK_MK_MAX_SLICES];
  unsigned long long part_val;  // f32 argmax partial value slot (this tile's)
  unsigned long long part_idx;  // i32 argmax partial index slot
  long long out_index0;         // logits index of the first output row (for argmax)
  // MPK_MK_F_FOLD: a = silu(slice 0's outputs) * slice 1's outputs (slices[0].rows of them);
  // for each of fold_rows rows n, fold_out[n] += sum_i W[n][i] * a[i] over the row's
  // slices[0].rows columns at fold_w + n * fold_ld elements (red.global.add).
  // Its shared memory from the task's scratch: fold_rows sums, the a values at
  // MPK_MK_FOLD_A, then a 16-byte slot per compute thread and load in flight at
  // MPK_MK_FOLD_SLOTS (floats).
  unsigned long long fold_w;    // the down matrix's row 0 at the tile's first column
  unsigned long long fold_out;  // f32 fold_rows sums
  int fold_rows;
  int fold_ld;                  // the down matrix's row stride, elements

  // Attention: one KV head and its query heads, chunk `chunk` of `num_chunks` of the live KV
  // length n = position + 1: positions [chunk * n / num_chunks, (chunk + 1) * n / num_chunks).
  // The last chunk appends the new k, v. With one chunk the output is final; otherwise the
  // chunk writes partials (per query head: head_dim sums, max, sum) that a merge task combines,
  // or with MPK_MK_F_MERGE the last chunk of the head to arrive.
  int chunk;
  int num_chunks;
  int arrival;  // MPK_MK_F_MERGE: the head's arrival counter in params.arrivals
  int pad1;
  int kv_head;
  int group;  // query heads: kv_head's group (ir::AttentionRows' q_head)
  int head_dim;
  float scale;
  float norm_eps;
  long long capacity;
  unsigned long long q;       // f32 q (whole vector)
  unsigned long long kx;      // f32 k
  unsigned long long vx;      // f32 v
  unsigned long long q_norm;  // f32 head_dim
  unsigned long long k_norm;
  unsigned long long inv_freq;  // f32 head_dim / 2
  unsigned long long k_cache;   // f32 [kv_heads][capacity][head_dim] of this layer
  unsigned long long v_cache;
  unsigned long long partial;   // f32 partials of (kv_head, chunk) (merge: of (kv_head, 0)), or 0
  unsigned long long out;       // f32 attention output (whole vector)

  // Argmax reduce (+ embedding of the chosen token).
  int n;  // partials
  int hidden;
  unsigned long long next_token;  // i32
  unsigned long long table;       // embedding table (kernel dtype), [vocab][hidden]
  unsigned long long embed_out;   // f32 hidden
  int vocab;
  int num_logits;  // the logits (a draw reads them) are at x
};

// Profile sessions: globaltimer ns per task. With MK_PHASE_TIMERS a linear task also records
// when its input was staged, when its staged weights had landed (stage_weights) and when every
// warp had finished its dot products (before the split-K fold and the stores); 0 where a task
// has no such point.
#define MPK_MK_PROFILE_TIMERS 6
#define MPK_MK_T_START 0
#define MPK_MK_T_READY 1   // the task's events seen by the poller
#define MPK_MK_T_INPUT 2
#define MPK_MK_T_WEIGHTS 3
#define MPK_MK_T_DOTS 4
#define MPK_MK_T_END 5     // after the task's last barrier, just before its release

// Per step of a launch, in the control block after the status words and the worker starts.
#define MPK_MK_STEP_NONFINITE 1  // MkStepRecord::flags: a logit was NaN or infinite

// How a step chooses its token (MkParams::sample_mode; the draw is ref/sampling.h's).
#define MPK_MK_SAMPLE_GREEDY 0  // the argmax
#define MPK_MK_SAMPLE_GUMBEL 1  // every id: the LM-head tiles add the Gumbel noise
#define MPK_MK_SAMPLE_TOPK 2    // top_k (below the vocabulary) then top_p, or top_p over every id: the argmax task selects
#define MPK_MK_SAMPLE_KMAX 1024  // the top_k sorted whole; a larger one bounds the nucleus by radix select
#define MPK_MK_SAMPLE_GROUP 4096  // keys the draw sorts in shared memory (>= MPK_MK_SAMPLE_KMAX)
#define MPK_MK_SAMPLE_BRACKETS 4 // the nucleus's guessed thresholds (sample_topk.cuh)
// The argmax task's shared memory (for a draw): keys, nucleus weights, a histogram, scalars.
#define MPK_MK_SAMPLE_SMEM (MPK_MK_SAMPLE_GROUP * 8 + MPK_MK_SAMPLE_KMAX * 4 + 256 * 4 + 72)

struct MkStepRecord {
  int token;                 // the step's argmax
  int flags;                 // MPK_MK_STEP_*
  unsigned long long end_ns; // globaltimer when the step's argmax task finished
};

// Kernel parameters, passed by value. One launch runs num_steps decode steps back to back;
// step i has the 1-based event epoch step + i and the position position + i.
struct MkParams {
  unsigned long long tasks;         // MkTask per queue slot: worker w runs slots
  unsigned long long queue_begin;   //   [queue_begin[w], queue_begin[w + 1]) in order
  unsigned long long waits;         // int event ids
  unsigned long long needs;         // unsigned need per event
  unsigned long long counters;      // unsigned per event (monotonic)
  unsigned long long arrivals;      // unsigned per merging attention head (cyclic: 0 .. chunks - 1)
  unsigned long long control;       // status words, u64 start per worker, MkStepRecord per step
  unsigned long long profile;       // 0, or u64[queue length][MPK_MK_PROFILE_TIMERS] per task
  unsigned int step;                // 1-based epoch of the first step of this launch
  int position;                     // the first step's position
  int num_steps;                    // steps to run (fewer when a fed token is an EOS id)
  int num_workers;
  long long timeout_ns;             // a wait longer than this aborts the launch
  long long prefetch_bytes;         // L2 prefetch of a linear task's weights, at most this
  unsigned long long forced;        // i32 tokens: step i embeds forced[i + 1] while i + 1 < num_forced
  int num_forced;
  int argmax_event;                 // event the argmax task triggers (EOS checks), or -1
  int num_eos;
  int eos[MPK_MK_MAX_EOS];
  // Sampling (MPK_MK_SAMPLE_*): step i draws the token of position position + i + 1.
  int sample_mode;
  float temperature;
  int top_k;
  float top_p;
  unsigned long long seed;
  // Weight staging (MK_STAGE_WEIGHTS): the ring's bytes at the start of dynamic shared
  // memory (a multiple of 128); task code's shared memory follows it. 0 without staging.
  long long stage_bytes;
};

#endif  // MPK_RUNTIME_KERNELS_TASK_DESC_H_
