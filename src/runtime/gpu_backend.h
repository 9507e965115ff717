// The GPU backend: the megakernel on one device. A GpuModel holds the context, the compiled
// megakernel (through the kernel cache) and the weights on the device; a GpuSession holds one
// sequence's plan, activations, KV cache, event counters and descriptor tables, and runs
// cooperative launches of one or more decode steps each.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "cuda/driver.h"
#include "ir/graph.h"
#include "model/model.h"
#include "runtime/megakernel.h"
#include "runtime/prefill.h"
#include "runtime/proofs.h"
#include "runtime/runtime.h"

namespace mpk::rt {


// Plans, proves and compiles the megakernel a GpuModel with `params` on a device of `arch` with
// `workers` SMs would run, into the kernel cache of `options`, without touching a device: the
// search does this for several candidates at once. Throws what GpuModel's constructor would
// (Unsupported for a task no variant runs, a failed proof, Compile). Returns what ptxas reported
// for the kernel (record_ptxas: -1s for a cached entry built without the figures).
cuda::PtxasInfo precompile_megakernel(const RuntimeOptions& options, const ir::Graph& graph, DType dtype,
                                      int workers, const std::string& arch, const MegakernelParams& params);

class GpuModel {
 public:
  // Throws NoDevice, Unsupported (a fused op the kernel lacks, a dtype), Cuda, Compile.
  GpuModel(const RuntimeOptions& options, const model::Model& model, const ir::Graph& graph,
           Stats& stats);
  ~GpuModel();

  const cuda::Context& context() const { return *ctx_; }
  const cuda::Function& function() const { return *fn_; }
  // The kernel that also makes the draws of `mode` (MPK_MK_SAMPLE_GUMBEL or _TOPK:
  // megakernel_source's `draws`), compiled through the cache when a session first draws that
  // way (thread-safe). Error(Unsupported) when it does not fit on an SM beside the launch's
  // shared memory `dynamic_smem`.
  const cuda::Function& draw_function(int mode, int dynamic_smem) const;
  const RuntimeOptions& options() const { return options_; }
  // The embedding row of `token` in fp32, read from the device copy of the weights (the host's
  // bytes are released after the upload).
  std::vector<float> embedding_row(int32_t token) const;
  const ir::Graph& graph() const { return graph_; }
  DType weight_dtype() const { return dtype_; }
  const std::string& arch() const { return arch_; }  // NVRTC's, e.g. "sm_90a"
  int num_workers() const { return num_workers_; }
  const MegakernelParams& params() const { return params_; }
  // The model's default parameters (default_params), which RuntimeOptions::mk_params amends.
  const MegakernelParams& default_params() const { return defaults_; }
  // Whether params() come from a tuning result (RuntimeOptions::tune_policy), and the
  // signature results are stored under (tuning_signature_text).
  bool tuned() const { return tuned_; }
  const std::string& tuning_signature() const { return signature_; }
  int block_threads() const { return launch_threads(params_); }
  int max_dynamic_smem() const { return max_dynamic_smem_; }
  uint64_t weights_ptr() const { return weights_.ptr(); }
  uint64_t consts_ptr() const { return consts_.ptr(); }
  // The tensor-core prefill's kernels; null when the model cannot use them (prefill_why says
  // why: its prompts then run through the decode step).
  const PrefillKernels* prefill_kernels() const { return prefill_.get(); }
  const std::string& prefill_why() const { return prefill_why_; }

 private:
  RuntimeOptions options_;
  const ir::Graph& graph_;
  int64_t embed_offset_ = -1;  // byte offset of the embedding table in weights_
  int64_t embed_cols_ = 0;
  DType dtype_ = DType::BF16;
  MegakernelParams defaults_;
  MegakernelParams params_;  // mk_params, else a tuning result, else the defaults
  bool tuned_ = false;
  std::string signature_;
  int num_workers_ = 0;
  int max_dynamic_smem_ = 48 * 1024;
  std::unique_ptr<cuda::Context> ctx_;
  std::unique_ptr<cuda::Module> module_;
  std::unique_ptr<cuda::Function> fn_;
  std::string arch_;
  std::vector<PlanProof> plan_proved_;  // the plan's proofs, recorded with each kernel
  int64_t num_logits_ = 0;               // the argmax task's logits (the top-k draw's proofs)
  struct DrawKernel {
    std::once_flag once;
    std::unique_ptr<cuda::Module> module;
    std::unique_ptr<cuda::Function> fn;
  };
  mutable DrawKernel draws_[MPK_MK_SAMPLE_TOPK + 1];  // by mode
  cuda::DeviceBuffer weights_;
  cuda::DeviceBuffer consts_;
  std::unique_ptr<PrefillKernels> prefill_;
  std::string prefill_why_;
};

class GpuSession {
 public:
  // Most steps one launch runs (a prefill through the decode step runs its prompt in launches
  // of this many steps).
  static constexpr size_t kMaxStepsPerLaunch = 4096;
  // The fewest tokens a prompt needs to take the tensor-core prefill (shorter ones run as
  // decode steps); it runs in chunks of up to kPrefillChunk (prefill.h).
  static constexpr size_t kPrefillMinTokens = 4;

  // options: kv_capacity, steps_per_launch (capped at kMaxStepsPerLaunch), profile,
  // share_activations (also turned on by MPK_SHARE_ACTIVATIONS=1).
  GpuSession(std::shared_ptr<const GpuModel> model, const SessionOptions& options, Stats& stats);
  ~GpuSession();

  // Feeds the prompt: through the tensor-core prefill in chunks of up to kPrefillChunk tokens
  // (bf16 models, prompts of kPrefillMinTokens or more, unless the session turned it off), or
  // one decode step per token in as few launches as possible (the device embeds each next
  // prompt token itself). Error(InvalidArgument) for an id outside the vocabulary,
  // Error(Capacity) when the cache cannot hold them (the session is then unchanged),
  // Error(Numerics) when the last position's logits hold NaN or Inf.
  void prefill(const int32_t* tokens, size_t n);
  // Feeds the chosen token (the argmax, or a draw under `sampling`: Error(InvalidArgument) where
  // ref::validate refuses it for the vocabulary), appends it to `out`, up to max_tokens times,
  // stopping after an id in `eos`; up to steps_per_launch steps per launch. Error(Capacity)
  // when the cache fills first, Error(Numerics) when a token would come from logits holding
  // NaN or Inf (the tokens fed so far stay in `out` either way).
  void decode(size_t max_tokens, const std::vector<int32_t>& eos, std::vector<int32_t>& out,
              const ref::SamplingConfig& sampling = {});
  int32_t next_token() const { return next_token_; }
  // Device-clock duration (ms) of each step of the last prefill or decode call (of each chunk
  // for a tensor-core prefill).
  const std::vector<double>& step_ms() const { return step_ms_; }
  // Host-clock duration (ms) of enqueuing each chunk of the last prefill call through the
  // tensor cores (none for one through the decode step): where it is as long as the chunk's
  // step_ms, the device waited on the host's launches.
  const std::vector<double>& prefill_enqueue_ms() const { return enqueue_ms_; }
  // Per-task timers of the last step, summed by task kind, as JSON (profile sessions only).
  std::string profile_json() const;
  // Profile sessions: device ms of the last tensor-core prefill by step label
  // (PrefillProgram::step_label), in first-seen order, summed over layers and chunks.
  const std::vector<std::pair<std::string, double>>& prefill_profile() const { return pf_profile_; }
  const std::vector<float>& logits() const;  // downloads on demand
  size_t position() const { return position_; }
  void reset();

  const MegakernelTables& tables() const { return tables_; }
  const sched::Plan& plan() const { return plan_; }
  uint32_t steps() const { return step_; }
  // Tests only: sets event `e`'s counter back to zero, so that its next wait never completes
  // and the launch must end through the abort path (Error(Timeout)).
  void reset_event_counter_for_test(int e);
  // Tests only: shrinks the weight ring (stage_weights) to at most `bytes`, so that tasks copy
  // at their own start (no room beside the running one) or stream (larger than the ring).
  void limit_stage_bytes_for_test(int64_t bytes);

 private:
  // Runs up to num_steps steps from the current position in one launch; returns the number
  // run (fewer when a fed token is an EOS id, see MkParams). forced: the fed tokens (prefill).
  size_t launch(size_t num_steps, const int32_t* forced, size_t num_forced,
                const std::vector<int32_t>& eos, const ref::SamplingConfig& sampling = {});
  // MPK_MK_SAMPLE_* for `c` (one ref::validate accepts).
  int sample_mode(const ref::SamplingConfig& c) const;
  [[noreturn]] void throw_timeout(const uint32_t* status) const;
  // After segment s's launch: the status words, the host tasks' inputs and their events'
  // counters in one round trip; the ops (timed into Stats::host_fallback_ns); the outputs and
  // counters back, stream-ordered before the next launch. Throws as launch does when the
  // segment's launch was aborted.
  void run_host_segment(int s);
  // The tensor-core prefill of `n` checked tokens.
  void prefill_chunks(const int32_t* tokens, size_t n);

  std::shared_ptr<const GpuModel> m_;
  Stats& stats_;
  size_t steps_per_launch_ = 1;  // decode steps one launch may run (1: host-controlled steps)
  bool profile_on_ = false;      // per-task device timers (profile_json)
  bool tensor_core_prefill_ = true;
  uint64_t device_bytes_ = 0;  // this session's allocations, counted in stats_.device_bytes
  size_t capacity_ = 0;
  sched::Plan plan_;
  MemoryPlan mem_;
  MegakernelTables tables_;
  cuda::Stream stream_;
  cuda::DeviceBuffer act_, kv_, counters_, control_, forced_, profile_;
  cuda::DeviceBuffer d_tasks_, d_queue_begin_, d_waits_, d_needs_;
  std::vector<HostSegment> host_segments_;  // per segment (host fallback only)
  cuda::HostBuffer host_io_;                // pinned: the status words, then a segment's copies
  std::unique_ptr<PrefillProgram> pf_;  // built by the first tensor-core prefill
  cuda::DeviceBuffer pf_scratch_, pf_tokens_, pf_result_;
  cuda::DeviceBuffer pf_kv16_;  // the KV cache's bf16 shadow, valid for positions [0, kv16_valid_)
  size_t kv16_valid_ = 0;
  std::vector<std::pair<std::string, double>> pf_profile_;
  int embed_buffer_ = -1;   // carried embedding buffer (host writes it during prefill)
  int logits_buffer_ = -1;
  uint32_t step_ = 0;  // steps run since the counters started (the last step's epoch)
  size_t position_ = 0;
  std::vector<double> step_ms_;
  std::vector<double> enqueue_ms_;
  std::vector<int32_t> step_tokens_;  // argmax of each step of the last launch
  std::vector<bool> step_nonfinite_;  // whether each step's logits held NaN or Inf
  bool next_nonfinite_ = false;       // the same for the last step (next_token_'s logits)
  std::vector<uint8_t> control_host_;
  int32_t next_token_ = -1;
  ref::SamplingConfig next_chosen_by_;  // how next_token_ was chosen (greedy after a prefill)
  bool has_logits_ = false;
  bool broken_ = false;
  bool profiled_ = false;  // profile_ holds a megakernel step of this sequence (not a prefill's)
  mutable bool logits_valid_ = false;
  mutable std::vector<float> logits_;
};

}  // namespace mpk::rt
