// Prompt prefill on the tensor cores. A chunk of up to max_rows prompt tokens goes through the
// graph's ops in order, one kernel per op (kernels/prefill_*.cuh): projections as bf16
// tensor-core GEMMs, a linear and the residual add it feeds as one kernel, causal attention over
// the KV cache (the prefix and the chunk), which it leaves filled for the decode megakernel.
// The prompt's last chunk also runs the ops after last_row: the logits land in the decode
// step's logits buffer and the argmax's embedding in its carried embedding buffer, so decoding
// continues exactly as after a decode step. The host part here needs no device.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "ir/graph.h"
#include "runtime/megakernel.h"

namespace mpk::rt {

inline constexpr const char* kPrefillCodegenVersion = "pf-v0.1.0";

// Empty when the prefill kernels run `graph` with weights of `dtype`; otherwise why not (such
// a model prefills through the decode step, one token at a time).
std::string prefill_unsupported(const ir::Graph& graph, DType weight_dtype);

std::string prefill_source();
std::vector<std::string> prefill_compile_options();
cuda::CompileResult compile_prefill(const std::string& arch);

// The kernels of the compiled prefill module.
class PrefillKernels {
 public:
  enum Id { Embed, RmsNorm, HeadRmsNorm, Rope, KvStore, SiluMul, Add, Argmax, Gemm,
            Attention16, Attention32, Attention64, Attention128, kCount };
  PrefillKernels(const cuda::Context& ctx, std::span<const std::uint8_t> cubin);
  const cuda::Function& operator[](Id id) const { return fns_[size_t(id)]; }

 private:
  cuda::Module module_;
  std::vector<cuda::Function> fns_;
};

// Where a prefill reads and writes on the device.
struct PrefillBases {
  uint64_t scratch = 0;    // PrefillProgram::scratch_bytes() of activations
  uint64_t tokens = 0;     // the chunk's token ids, int32
  uint64_t weights = 0, consts = 0, kv = 0;  // the decode kernels' segments (MemoryPlan)
  uint64_t logits = 0;     // last chunk: the logits, fp32 [V]
  uint64_t embed_out = 0;  // last chunk: the argmax token's embedding, fp32 [H]
  uint64_t result = 0;     // last chunk: int32 {argmax, 1 if a logit is NaN or Inf}
};

// One kernel launch of the program, before the chunk's sizes are known.
struct PrefillStep {
  ir::OpKind kind;
  int op = -1;              // graph op
  std::vector<int> inputs;  // tensor ids
  int output = -1;          // tensor id (the add's output for a fused linear)
  int residual = -1;        // linear: the tensor its fused add adds
  bool tail = false;        // after last_row: the prompt's last chunk only
};

class PrefillProgram {
 public:
  // `graph` must pass prefill_unsupported; `mem` is the decode kernels' memory plan (weights,
  // consts, RoPE tables and the KV cache are shared).
  PrefillProgram(const ir::Graph& graph, const MemoryPlan& mem, int64_t max_rows);

  int64_t max_rows() const { return max_rows_; }
  int64_t scratch_bytes() const { return scratch_bytes_; }
  const std::vector<PrefillStep>& steps() const { return steps_; }
  // Byte offset of tensor `id`'s slot in the scratch (-1: not in the scratch).
  int64_t slot_offset(int id) const { return slot_[size_t(id)]; }

  // Enqueues tokens [pos0, pos0 + rows) of a prompt (their ids already at bases.tokens) on
  // `stream`; `last`: also the ops after last_row.
  void enqueue(const PrefillKernels& k, const cuda::Stream& stream, const PrefillBases& bases,
               int pos0, int rows, bool last) const;

 private:
  const ir::Graph& g_;
  const MemoryPlan& mem_;
  int64_t max_rows_;
  std::vector<PrefillStep> steps_;
  std::vector<int64_t> slot_;  // per tensor
  int64_t scratch_bytes_ = 0;
};

}  // namespace mpk::rt
