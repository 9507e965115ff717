// The runtime behind the C API: loaded models, backends, sessions.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "model/model.h"
#include "ref/executor.h"

namespace mpk::rt {

enum class Backend { Auto, Gpu, Reference };
const char* backend_name(Backend b);

struct RuntimeOptions {
  int device = 0;
  std::filesystem::path cache_dir;  // empty: $MPK_CACHE_DIR or ~/.cache/mpk
  int num_threads = 0;              // reference backend threads; 0: all cores
  std::string mk_params;            // megakernel code parameters for tuning runs, "name=value,..."
                                    // over the defaults (kernel_params.h); empty: $MPK_MK_PARAMS
};

// Default kernel-cache directory: $MPK_CACHE_DIR, else $HOME/.cache/mpk.
std::filesystem::path default_cache_dir();

// Counters shared by a model and its sessions (all of them), read by mpk_model_stats.
struct Stats {
  std::atomic<uint64_t> tokens{0};
  std::atomic<uint64_t> launches{0};  // megakernel launches (one per step, or per N steps)
  uint64_t host_fallback_ops = 0;  // ops of one step that run on the host
  double compile_ms = 0;           // NVRTC time spent at load (0 on a cache hit)
  uint64_t num_tasks = 0;          // tasks of one step (GPU backend)
  uint64_t num_workers = 0;        // worker CTAs of the megakernel (GPU backend)
  uint64_t cache_hits = 0;         // kernel-cache lookups at load
  uint64_t cache_misses = 0;
  std::atomic<uint64_t> device_bytes{0};  // GPU memory held: weights + every live session
};

class GpuModel;
class GpuSession;

// A loaded model with its graph and chosen backend. Immutable after load, except counters.
class LoadedModel {
 public:
  // Loads `dir` and picks the backend. Error(NoDevice) when the GPU backend is requested
  // and no device is usable.
  static std::shared_ptr<LoadedModel> load(const RuntimeOptions& rt,
                                           const std::filesystem::path& dir, Backend requested);

  const model::Model& model() const { return *model_; }
  const model::Config& config() const { return model_->config; }
  const ir::Graph& graph() const { return graph_; }
  Backend backend() const { return backend_; }
  const RuntimeOptions& options() const { return options_; }
  Stats& stats() const { return stats_; }
  // The GPU backend's state; null on the reference backend.
  const std::shared_ptr<const GpuModel>& gpu() const { return gpu_; }

 private:
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
};

// Whether `token` is one of the end-of-sequence ids.
bool is_eos(const std::vector<int32_t>& eos_ids, int32_t token);

// One sequence with its KV cache. Not thread-safe.
class Session {
 public:
  Session(std::shared_ptr<const LoadedModel> model, const SessionOptions& options);
  ~Session();

  void prefill(const int32_t* tokens, size_t n);
  // Greedy: appends up to max_tokens argmax tokens to `out`, stopping after an EOS id.
  // Error(Capacity) when the cache fills first (tokens produced so far stay in `out`).
  void decode(size_t max_tokens, std::vector<int32_t>& out);
  const std::vector<float>& logits() const;
  // GPU: device-clock ms of each step of the last prefill or decode call. Error(Unsupported)
  // on the reference backend.
  const std::vector<double>& step_ms() const;
  // GPU, profile sessions: per-task timers of the last step by task kind (JSON).
  std::string profile_json() const;
  size_t position() const;
  void reset();

 private:
  bool is_eos(int32_t token) const;

  std::shared_ptr<const LoadedModel> model_;
  std::unique_ptr<ref::Executor> exec_;  // reference backend
  std::unique_ptr<GpuSession> gpu_;      // GPU backend
};

}  // namespace mpk::rt
