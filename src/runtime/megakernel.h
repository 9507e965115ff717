// megakernel v0, host side without a device: the device memory plan, the task descriptor
// table built from a scheduler Plan (each task with its variant: variants.h), and the kernel
// source (kernels/*.cuh, embedded at build time) compiled with NVRTC. Everything here runs on a
// CPU-only machine; gpu_backend.h puts it on a device.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "cuda/nvrtc.h"
#include "ir/graph.h"
#include "runtime/kernel_params.h"
#include "runtime/kernels/task_desc.h"
#include "scheduler/plan.h"

namespace mpk::rt {

// Bumped whenever the generated source or the descriptor layout changes meaning.
inline constexpr const char* kMegakernelCodegenVersion = "mk-v0.19.0";

// KV chunks per attention head: about one wave of attention tasks over the workers.
int megakernel_kv_splits(const ir::Graph& graph, int num_workers, int64_t kv_capacity);
// Scheduler options for the megakernel: T = 1, one worker per SM, and the decomposition that
// `params` chooses: attention in params.kv_splits chunks per head (0: megakernel_kv_splits;
// never more than the KV capacity; divided over the live KV length at run time) merged by the
// last chunk or by a task of their own (merge_task), linears in about tile_waves tiles per
// worker, the MLP's down projection folded into the gate/up tiles (fold_down). $MPK_DUMP
// applies (each GPU session's plan is dumped when it asks for it).
sched::PlanOptions megakernel_plan_options(const ir::Graph& graph, int num_workers, int64_t kv_capacity,
                                           const MegakernelParams& params = MegakernelParams{});

// Where everything lives on the device, as byte offsets into segments:
//   activations: every TaskGraph buffer (4-byte elements), 256-byte aligned
//   weights:     matrices (linear and embedding weights) in the kernel dtype
//   consts:      fp32 norm scales, biases and RoPE inv_freq tables
//   kv:          fp32 keys then values, each [layers][kv_heads][capacity][head_dim]
struct MemoryPlan {
  DType weight_dtype = DType::BF16;  // of the weights segment
  std::vector<int64_t> buffer_offset;  // per TaskGraph buffer (shared slots may coincide)
  int64_t act_bytes = 0;
  int64_t act_bytes_unshared = 0;      // what a slot per buffer would take
  std::vector<int64_t> weight_offset;  // per graph weight: in weights, or -1
  int64_t weight_bytes = 0;
  std::vector<int64_t> const_offset;   // per graph weight: in consts, or -1
  std::vector<int64_t> rope_offset;    // per graph op: its inv_freq table in consts, or -1
  std::vector<float> rope_tables;      // consts contents at [rope_base, ...)
  int64_t rope_base = 0;
  int64_t const_bytes = 0;
  int64_t kv_capacity = 0;
  int64_t kv_layer_elems = 0;  // ir::kv_elem(kv_heads, 0, 0, capacity, head_dim)
  int64_t kv_bytes = 0;        // keys + values
};

// share_activations: buffers the events prove dead before another is touched share memory
// (scheduler/liveness.h).
MemoryPlan plan_memory(const ir::Graph& graph, const sched::TaskGraph& tasks, DType weight_dtype,
                       int64_t kv_capacity, bool share_activations = false);

// Device base addresses of the segments (fake ones in CPU tests).
struct SegmentBases {
  uint64_t act = 0, weights = 0, consts = 0, kv = 0;
};

// The descriptor tables of one plan, ready to upload.
//
// Host fallback (runtime/host_ops.h): a task whose ops the kernel does not implement but the
// host can run is in no queue. The queues are cut into segments: segment s holds the tasks
// whose inputs the host tasks of earlier segments produce, and a step is one launch per
// segment, each followed by the host tasks that wait only on it and earlier ones. Within a
// segment a worker keeps its schedule order, so a segment's queues are subsequences of the
// validated order and stay deadlock-free; every wait of a segment's task is met by a task of
// that segment or by an earlier launch or host task. Without host tasks there is one segment.
struct MegakernelTables {
  std::vector<MkTask> tasks;        // indexed by TaskGraph task id
  // Segment s's queues start at queue_begin[s * (num_workers + 1)]: num_workers + 1 entries
  // per segment, the last of one equal to the first of the next.
  std::vector<int> queue_begin;
  std::vector<int> queue;           // task ids, segment by segment, worker by worker in schedule order
  std::vector<int> waits;           // event ids
  std::vector<uint32_t> needs;      // per event
  int64_t dynamic_smem = 0;         // bytes of dynamic shared memory the tasks need (with the
                                    // weight ring, when the session sized one: stage_bytes)
  int64_t stage_bytes = 0;          // the weight ring (MkParams::stage_bytes)
  int num_workers = 0;
  int argmax_event = -1;            // the event the final argmax task triggers
  int num_arrivals = 0;             // arrival counters of attention heads that merge in-chunk
  int num_segments = 1;
  std::vector<int> host_tasks;      // task ids the host runs, in a topological order
  std::vector<int> host_after;      // per host task: the segment whose launch it follows

  // The descriptors as the device reads them: in queue order, so that a worker finds its next
  // one at the following address (MkParams::tasks).
  std::vector<MkTask> device_tasks() const;
};

// Builds the descriptors. Throws Error(Unsupported) for a task whose fused ops the kernel
// does not implement (never skipped) and Error(Internal) for an inconsistent plan.
// `params`: the code parameters the kernel is compiled with (shared-memory sizes depend on them).
MegakernelTables build_tables(const ir::Graph& graph, const sched::Plan& plan,
                              const MemoryPlan& mem, const SegmentBases& bases,
                              const MegakernelParams& params = {});

// The host fallback's work after one segment's launch (MegakernelTables): what its host tasks
// copy through a host buffer, and the ops they run.
struct HostSegment {
  struct Copy {
    size_t at = 0, bytes = 0, offset = 0;  // in the host buffer, bytes, in the activations
  };
  std::vector<Copy> down, up;              // the inputs no host op of the segment made; every output
  std::vector<std::pair<int, size_t>> at;  // tensor -> its values in the host buffer
  std::vector<int> ops;                    // graph ops, in order
  std::vector<std::pair<int, uint32_t>> counters;  // event, triggers the host adds
  size_t counters_at = 0;                  // their values in the host buffer, 4 bytes each
  size_t end = 0;                          // the host buffer's bytes the segment uses
  // Where `tensor`'s values lie in the host buffer, or nullptr when the segment has none.
  const size_t* find(int tensor) const {
    for (const auto& [t, a] : at)
      if (t == tensor) return &a;
    return nullptr;
  }
};
// Per segment of `tables`; the host buffer's first `first` bytes stay free (the GPU session's
// status words).
std::vector<HostSegment> host_segments(const ir::Graph& graph, const sched::TaskGraph& tasks, const MemoryPlan& mem,
                                       const MegakernelTables& tables, size_t first = 0);

// The host fallback's share of one step: its ops, and the bytes its copies move.
struct HostFallback {
  uint64_t ops = 0, bytes = 0;
};
HostFallback host_fallback(const std::vector<HostSegment>& segments);

// The bytes of a linear task's weight rows when the host marked them for staging
// (MPK_MK_F_STAGE), else 0 (the kernel's mk_stage_bytes before the ring's size).
int64_t staged_weight_bytes(const MkTask& task, DType weight_dtype);

// The weight ring staging needs (stage_weights, kernels/stage.cuh): copies alternate between the
// ring's two ends, so a task's copy is issued ahead when it and the running task's fit together
// with the 128-byte rounding of the top end's offset: the most that two consecutive tasks of a
// worker's queue stage (the queue wraps into the next step) or one task alone need
// (ir::StageRing need and alone, proved); 0 when no task stages. A larger ring only takes
// shared memory from the L1.
int64_t stage_ring_need(const MegakernelTables& tables, DType weight_dtype);

// The tasks of the plan the kernel does not run, each with why (build_tables refuses the
// first); `variants`, when given, gets every task's variant id (-1 for a refused one or a host
// task), and `segments` the launches a step takes (MegakernelTables::num_segments).
std::vector<std::pair<int, std::string>> refused_tasks(const ir::Graph& graph, const sched::Plan& plan,
                                                       const MemoryPlan& mem,
                                                       const MegakernelParams& params = {},
                                                       std::vector<int>* variants = nullptr,
                                                       int* segments = nullptr);

// The complete CUDA source for weights of `weight_dtype` (the parameters' #defines and the
// kernels/ files with the dispatch over kernel_variants(params): kernels/common.cuh) and its
// kernel's name. Error(InvalidArgument) for parameters out of range, Error(Unsupported) for a
// weight dtype the kernel does not read.
// `draws`: the MPK_MK_SAMPLE_* mode whose draw the kernel makes (kernels/sample.cuh; the
// launch's MkParams::sample_mode must be that mode). One kernel per mode: each draw's code
// costs the others' registers (greedy keeps the kernel it had without draws).
std::string megakernel_source(const MegakernelParams& params, DType weight_dtype,
                              int draws = MPK_MK_SAMPLE_GREEDY);
std::string megakernel_entry(DType weight_dtype);  // "mpk_megakernel_bf16", ...
// NVRTC options the megakernel is compiled with (ptxas reports its figures in the log).
std::vector<std::string> megakernel_compile_options();

// Compiles the megakernel for `arch` (e.g. "sm_90a").
cuda::CompileResult compile_megakernel(const std::string& arch, const MegakernelParams& params,
                                       DType weight_dtype, int draws = MPK_MK_SAMPLE_GREEDY);

// The kernel cache keeps ptxas's figures for a compiled megakernel (registers, spills, stack,
// static shared memory) in its entry's verification record, as the member "ptxas", so that a
// search can turn away a spilling candidate without a device, from a cached entry too.
std::string record_with_ptxas(const std::string& verification_json, const cuda::PtxasInfo& info);
// The figures such a record holds; all -1 when it holds none (an entry built before).
cuda::PtxasInfo record_ptxas(const std::string& verification_json);

}  // namespace mpk::rt
