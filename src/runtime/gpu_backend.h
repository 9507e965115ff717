// The GPU backend: megakernel v0 on one device. A GpuModel holds the context, the compiled
// megakernel (through the kernel cache) and the weights on the device; a GpuSession holds one
// sequence's plan, activations, KV cache, event counters and descriptor tables, and runs one
// cooperative launch per token.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cuda/driver.h"
#include "ir/graph.h"
#include "model/model.h"
#include "runtime/megakernel.h"

namespace mpk::rt {

struct RuntimeOptions;
struct Stats;

class GpuModel {
 public:
  // Throws NoDevice, Unsupported (a fused op the kernel lacks, a dtype), Cuda, Compile.
  GpuModel(const RuntimeOptions& options, const model::Model& model, const ir::Graph& graph,
           Stats& stats);
  ~GpuModel();

  const cuda::Context& context() const { return *ctx_; }
  const cuda::Function& function() const { return *fn_; }
  const model::Model& model() const { return model_; }
  const ir::Graph& graph() const { return graph_; }
  DType weight_dtype() const { return dtype_; }
  int num_workers() const { return num_workers_; }
  int block_threads() const { return 512; }
  int max_dynamic_smem() const { return max_dynamic_smem_; }
  uint64_t weights_ptr() const { return weights_.ptr(); }
  uint64_t consts_ptr() const { return consts_.ptr(); }

 private:
  const model::Model& model_;
  const ir::Graph& graph_;
  DType dtype_ = DType::BF16;
  int num_workers_ = 0;
  int max_dynamic_smem_ = 48 * 1024;
  std::unique_ptr<cuda::Context> ctx_;
  std::unique_ptr<cuda::Module> module_;
  std::unique_ptr<cuda::Function> fn_;
  cuda::DeviceBuffer weights_;
  cuda::DeviceBuffer consts_;
};

class GpuSession {
 public:
  GpuSession(std::shared_ptr<const GpuModel> model, size_t kv_capacity, Stats& stats);
  ~GpuSession();

  // Feeds tokens one step each (the host writes each token's embedding). Error(InvalidArgument)
  // for an id outside the vocabulary, Error(Capacity) when the cache cannot hold them.
  void prefill(const int32_t* tokens, size_t n);
  // One step on the token the previous step chose (its embedding is already on the device).
  void step_on_device_token();
  int32_t next_token() const { return next_token_; }
  bool has_logits() const { return has_logits_; }
  const std::vector<float>& logits() const;  // downloads on demand
  size_t position() const { return position_; }
  size_t capacity() const { return capacity_; }
  void reset();

  const MegakernelTables& tables() const { return tables_; }
  const sched::Plan& plan() const { return plan_; }
  uint32_t steps() const { return step_; }

 private:
  void launch_step();

  std::shared_ptr<const GpuModel> m_;
  Stats& stats_;
  uint64_t device_bytes_ = 0;  // this session's allocations, counted in stats_.device_bytes
  size_t capacity_ = 0;
  sched::Plan plan_;
  MemoryPlan mem_;
  MegakernelTables tables_;
  cuda::Stream stream_;
  cuda::DeviceBuffer act_, kv_, scores_, counters_, status_;
  cuda::DeviceBuffer d_tasks_, d_queue_begin_, d_queue_, d_waits_, d_needs_;
  int embed_buffer_ = -1;   // carried embedding buffer (host writes it during prefill)
  int embed_weight_ = -1;   // graph weight index of the embedding table
  int logits_buffer_ = -1;
  int next_token_buffer_ = -1;
  uint32_t step_ = 0;
  size_t position_ = 0;
  int32_t next_token_ = -1;
  bool has_logits_ = false;
  bool broken_ = false;
  mutable bool logits_valid_ = false;
  mutable std::vector<float> logits_;
};

}  // namespace mpk::rt
