// The megakernel's task descriptor table: plain data shared by the host (built from the
// TaskGraph, src/runtime/megakernel.cc) and the device (kernels/megakernel.cuh, which gets this
// file's text prepended by the code generator). Only fundamental types, so it compiles with
// NVRTC without any header. Addresses are device addresses (u64); 0 means "absent".
#ifndef MPK_RUNTIME_KERNELS_TASK_DESC_H_
#define MPK_RUNTIME_KERNELS_TASK_DESC_H_

#define MPK_MK_MAX_SLICES 4
#define MPK_MK_MAX_WARPS 32      // 1024-thread workers at most
#define MPK_MK_MAX_HEAD_DIM 256  // attention keeps a head row in registers, 32 dims per lane-slot

// Task kinds the kernel switches on.
#define MPK_MK_LINEAR 1
#define MPK_MK_ATTENTION 2
#define MPK_MK_ARGMAX 3

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

// Rows [row0, row0 + rows) of one weight matrix of K columns (dtype of the kernel), written
// to out[0 .. rows) (+ bias[row0 ..]) (+ res[0 .. rows): the residual epilogue).
struct MkSlice {
  unsigned long long w;     // address of weight row row0
  unsigned long long bias;  // f32 address of bias[row0], or 0
  unsigned long long out;   // f32 address of the first output element
  unsigned long long res;   // f32 address of the residual matching out[0], or 0
  int rows;
  int pad;
};

struct MkTask {
  int kind;
  int flags;
  int wait_begin;  // into the waits table
  int num_waits;
  int trigger;     // event id or -1
  int id;          // TaskGraph task id

  // Linear.
  int input_mode;
  int k;
  int num_slices;
  float eps;
  unsigned long long x;       // f32 input (gate for silu_mul)
  unsigned long long x2;      // f32 up for silu_mul
  unsigned long long norm_w;  // f32 rms_norm scale
  MkSlice slices[MPK_MK_MAX_SLICES];
  unsigned long long part_val;  // f32 argmax partial value slot (this tile's)
  unsigned long long part_idx;  // i32 argmax partial index slot
  long long out_index0;         // logits index of the first output row (for argmax)

  // Attention: one KV head and its query heads.
  int kv_head;
  int q_head0;
  int group;  // query heads
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
  unsigned long long scores;    // f32 scratch, capacity entries, private to this task
  unsigned long long out;       // f32 attention output (whole vector)

  // Argmax reduce (+ embedding of the chosen token).
  int n;  // partials
  int hidden;
  unsigned long long next_token;  // i32
  unsigned long long table;       // embedding table (kernel dtype), [vocab][hidden]
  unsigned long long embed_out;   // f32 hidden
  int vocab;
  int pad2;
};

// Kernel parameters, passed by value.
struct MkParams {
  unsigned long long tasks;         // MkTask[num_tasks]
  unsigned long long queue_begin;   // int[num_workers + 1] into queue
  unsigned long long queue;         // int task indices
  unsigned long long waits;         // int event ids
  unsigned long long needs;         // unsigned need per event
  unsigned long long counters;      // unsigned per event (monotonic)
  unsigned long long status;        // unsigned[4]: error flag, worker, task, event
  unsigned int step;                // 1-based launch count of the session
  int position;                     // the token's position
  long long timeout_ns;             // a wait longer than this aborts the step
};

#endif  // MPK_RUNTIME_KERNELS_TASK_DESC_H_
