// The runtime behind the C API: loaded models, backends, sessions.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "model/model.h"
#include "ref/executor.h"
#include "ref/sampling.h"

namespace mpk::rt {

enum class Backend { Auto, Gpu, Reference };
const char* backend_name(Backend b);

// Prefetch of a linear task's weights into L2 before its waits, beyond the first round of loads
// each warp issues into registers: small, because everything an SM issues before its wait is
// queued ahead of its event polls (measured with mk-v0.13: 32 KB 1.196 / 4.899 ms per token on
// Qwen3-0.6B / 8B, 128 KB 1.205 / 4.966, none 1.220 / 4.915), and whole tiles of a large model
// would evict lines before their loads reach them.
inline constexpr long long kDefaultPrefetchBytes = 32LL * 1024;

// What a runtime was asked for. Unset fields are filled from the environment by
// resolve_environment, the only reader of these variables.
// Progress of a long phase: "read" (the model's files), "plan", "prove", "kernel" (the cache,
// or NVRTC on a miss), "upload" (weights to the GPU) while a model loads, "prefill" while a
// prompt runs; `done` of `total` units (bytes, tokens), reported at the start (done 0; total
// 0 when unknown) and the end (done == total > 0; 1 of 1 without units) at least. Called on
// the thread doing the work.
using ProgressFn = std::function<void(const char* phase, uint64_t done, uint64_t total)>;

// Where a GPU model's megakernel parameters come from when mk_params does not set them.
enum class TunePolicy {
  CacheOnly,     // a tuning result for the model's signature in the cache, else the defaults
  DefaultsOnly,  // the model's defaults (kernel_params.h)
  TuneOnMiss,    // as CacheOnly; without a result, search (runtime/tune.h) within tune_budget_s
                 // and store what it finds
};

struct RuntimeOptions {
  int device = 0;
  std::filesystem::path cache_dir;  // empty: the cache's default ($MPK_CACHE_DIR, ~/.cache/mpk)
  int num_threads = 0;              // reference backend threads; 0: all cores
  std::string mk_params;            // megakernel code parameters for tuning runs, "name=value,..."
                                    // over the defaults (kernel_params.h); empty: $MPK_MK_PARAMS
  long long prefetch_bytes = -1;    // -1: $MPK_PREFETCH_BYTES, else kDefaultPrefetchBytes
  bool share_activations = false;   // every GPU session shares activation memory (also
                                    // $MPK_SHARE_ACTIVATIONS=1); see SessionOptions
  bool prefill_overlap = true;      // each prefill kernel's blocks start as the one before ends
                                    // (programmatic dependent launch; measured: faster on short
                                    // prompts, 2% slower on Qwen3-8B at 4,096 tokens, see
                                    // docs/PERFORMANCE.md); false also by $MPK_PREFILL_OVERLAP=0
  bool prefill_fused_rope = true;   // the q and k head norm and RoPE in their projection's wgmma
                                    // epilogue (heads of 128, sm_90a; measured faster, see
                                    // docs/PERFORMANCE.md); false also by $MPK_PREFILL_FUSED_ROPE=0
  bool prefill_streamk = false;     // prefill projections of a short chunk (one wgmma tile row)
                                    // whose tiles make half to three quarters of a wave: stream-K,
                                    // the K steps dealt evenly to the SMs (sm_90a; measured slower
                                    // than the wgmma tile with its K split, see
                                    // docs/PERFORMANCE.md); true also by $MPK_PREFILL_STREAMK=1
  ProgressFn progress;              // empty: none
  TunePolicy tune_policy = TunePolicy::CacheOnly;
  double tune_budget_s = 120;       // TuneOnMiss: the search's wall-time budget
};

// Calls o.progress when there is one.
void report(const RuntimeOptions& o, const char* phase, uint64_t done, uint64_t total);

// `o` with its unset fields taken from the environment (MPK_CACHE_DIR and HOME through
// cache::default_cache_path, MPK_MK_PARAMS, MPK_PREFETCH_BYTES), and the switches
// MPK_SHARE_ACTIVATIONS=1, MPK_PREFILL_OVERLAP=0 and MPK_PREFILL_FUSED_ROPE=0 applied. Called
// once per model load. A bad value is logged and replaced by the default (a switch's: logged and
// ignored), except MPK_MK_PARAMS, which the GPU load refuses (InvalidArgument): a tuning run
// must not time the defaults unawares.
RuntimeOptions resolve_environment(RuntimeOptions o);

// Counters shared by a model and its sessions (all of them), read by mpk_model_stats.
struct Stats {
  std::atomic<uint64_t> tokens{0};
  std::atomic<uint64_t> launches{0};  // megakernel launches (one per step, or per N steps; with
                                      // host-fallback ops, one per segment of a step)
  uint64_t host_fallback_ops = 0;    // ops of one step that run on the host
  uint64_t host_fallback_bytes = 0;  // GPU: bytes one step copies for them (megakernel.h HostFallback)
  std::atomic<uint64_t> host_fallback_ns{0};  // GPU: host time running those ops so far
  double compile_ms = 0;           // NVRTC time spent at load (0 on a cache hit)
  uint64_t num_tasks = 0;          // tasks of one step (GPU backend)
  uint64_t num_workers = 0;        // worker CTAs of the megakernel (GPU backend)
  uint64_t cache_hits = 0;         // kernel-cache lookups at load
  uint64_t cache_misses = 0;
  uint64_t num_kernels = 0;        // compiled kernel modules (GPU: the megakernel, the prefill's)
  uint64_t proved = 0;             // of them, those whose proofs all hold
  uint64_t proof_obligations = 0;  // obligations proved for them
  std::atomic<uint64_t> device_bytes{0};  // GPU memory held: weights + every live session
  bool tuned = false;               // the parameters come from a tuning result
  uint64_t tune_candidates = 0;     // parameter sets the load's search timed (TuneOnMiss)
  uint64_t tune_changed_params = 0; // parameters the result changed from the defaults
  uint64_t tune_stages_changed = 0; // stage classes those parameters act on (changed_stages)
  uint64_t tune_stages_searched = 0;  // stage classes the load's search timed a candidate of
  double tune_ms = 0;               // the load's search
  // Wall time of the load's phases (see ProgressFn), ms; load_ms is all of mpk_model_load.
  double read_ms = 0, plan_ms = 0, prove_ms = 0, kernel_ms = 0, upload_ms = 0, load_ms = 0;

  // Zeroes what a GpuModel's construction counts (a load that builds it again, or gives up
  // on the GPU); the read time, tokens and launches stay.
  void reset_load_counters();
};

class GpuModel;
class GpuSession;

// A loaded model with its graph and chosen backend. Immutable after load, except counters.
class LoadedModel {
 public:
  // Loads `dir` and picks the backend. Error(NoDevice) when the GPU backend is requested
  // and no device is usable. validate_weights: every weight is scanned for NaN/Inf first
  // (Error(InvalidModel) naming the first). The model keeps no file mapped: the reference
  // backend reads the weights into memory, the GPU backend drops them after the upload.
  static std::shared_ptr<LoadedModel> load(const RuntimeOptions& rt,
                                           const std::filesystem::path& dir, Backend requested,
                                           bool validate_weights = false);

  const model::Model& model() const { return *model_; }
  const model::Config& config() const { return model_->config; }
  const ir::Graph& graph() const { return graph_; }
  Backend backend() const { return backend_; }
  const RuntimeOptions& options() const { return options_; }
  Stats& stats() const { return stats_; }
  // The GPU backend's state; null on the reference backend.
  const std::shared_ptr<const GpuModel>& gpu() const { return gpu_; }

 private:
  // TunePolicy::TuneOnMiss without a result: searches, stores the result, and loads the
  // model again with it.
  void tune_on_miss();

  RuntimeOptions options_;
  std::unique_ptr<model::Model> model_;
  ir::Graph graph_;
  Backend backend_ = Backend::Reference;
  mutable Stats stats_;
  std::shared_ptr<const GpuModel> gpu_;
};

struct SessionOptions {
  size_t kv_capacity = 4096;
  size_t steps_per_launch = 1;  // GPU: decode steps per megakernel launch (1: host-controlled)
  bool profile = false;         // GPU: per-task device timers (profile_json)
  // GPU: activation buffers share memory where the events prove it safe (plan_memory); off
  // by default until measured on the GPU.
  bool share_activations = false;
  // GPU, bf16 models: prompts go through the tensor-core prefill (gpu_backend.h); false runs
  // them one decode step per token (exact fp32 activations, much slower).
  bool tensor_core_prefill = true;
};

// Whether `token` is one of the end-of-sequence ids.
bool is_eos(const std::vector<int32_t>& eos_ids, int32_t token);

// One sequence with its KV cache. Not thread-safe.
class Session {
 public:
  Session(std::shared_ptr<const LoadedModel> model, const SessionOptions& options);
  ~Session();

  void prefill(const int32_t* tokens, size_t n);
  // Appends up to max_tokens tokens to `out`, stopping after an EOS id: the argmax (greedy,
  // the default), or a draw under set_sampling's configuration (ref/sampling.h). On the GPU
  // the megakernel draws inside its multi-step launches.
  // Error(Capacity) when the cache fills first, Error(Numerics) when a token would be chosen
  // from logits holding NaN or Inf (tokens produced so far stay in `out`). After Numerics
  // (here or from prefill) the logits stay readable and prefill/decode give Error(BadState)
  // until reset().
  void decode(size_t max_tokens, std::vector<int32_t>& out);
  const std::vector<float>& logits() const;
  // Error(InvalidArgument) for a configuration ref::validate refuses, given the vocabulary (a
  // nucleus over more than ref::kMaxSampledLogits candidates among them).
  void set_sampling(const ref::SamplingConfig& c);
  const ref::SamplingConfig& sampling() const { return sampling_; }
  // GPU: device-clock ms of each step of the last prefill or decode call. Error(Unsupported)
  // on the reference backend.
  const std::vector<double>& step_ms() const;
  // GPU: host-clock ms of enqueuing each chunk of the last prefill through the tensor cores
  // (GpuSession::prefill_enqueue_ms). Error(Unsupported) on the reference backend.
  const std::vector<double>& prefill_enqueue_ms() const;
  // GPU, profile sessions: per-task timers of the last step by task kind (JSON).
  std::string profile_json() const;
  size_t position() const;
  void reset();

 private:
  bool is_eos(int32_t token) const;
  void decode_steps(size_t max_tokens, std::vector<int32_t>& out);

  static constexpr const char* kNeedsReset =
      "the session's logits were not finite (NaN or Inf): reset it before the next prompt";
  bool numerics_failed_ = false;  // the last prefill/decode failed with Error(Numerics)
  ref::SamplingConfig sampling_;

  std::shared_ptr<const LoadedModel> model_;
  std::unique_ptr<ref::Executor> exec_;  // reference backend
  std::unique_ptr<GpuSession> gpu_;      // GPU backend
};

}  // namespace mpk::rt
