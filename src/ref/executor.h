// The CPU reference executor: runs an ir::Graph in fp32 over a model's weights, with a KV
// cache, parallel with oneTBB. The oracle of every test and the explicit host fallback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "model/model.h"

namespace mpk::ref {

struct Options {
  int num_threads = 0;  // 0: all cores
};

// One sequence at a time; not thread-safe (calls on one executor must not overlap).
class Executor {
 public:
  // `model` and `graph` must outlive the executor. kv_capacity: tokens the KV cache holds
  // (fp32 [layers][kv_heads][capacity][head_dim], allocated here). Error(InvalidModel) when a
  // weight's shape differs from the graph's, Error(InvalidArgument) for capacity 0 or a bad
  // graph, Error(OutOfMemory) when the cache cannot be allocated.
  Executor(const model::Model& model, const ir::Graph& graph, size_t kv_capacity,
           Options options = {});
  ~Executor();

  // Feeds tokens at positions [position(), position() + n) and computes the logits at the last
  // one. Error(InvalidArgument) for ids outside [0, vocab), n == 0 or null tokens,
  // Error(Capacity) when the cache cannot hold them; on error nothing changes.
  void forward(const int32_t* tokens, size_t n);
  const std::vector<float>& logits() const;  // vocab entries; empty before the first forward
  int32_t next_token() const;                // argmax of logits(); -1 before the first forward
  size_t position() const;
  size_t capacity() const;
  void reset();  // empties the KV cache

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mpk::ref
