// Builds the graph IR of one forward step from a model config.
#pragma once

#include "base/dtype.h"
#include "ir/graph.h"
#include "model/config.h"

namespace mpk::ir {

// The decoder of config.family (Qwen3, Qwen2, Llama): embedding, num_layers pre-norm blocks
// (attention with optional q/k/v and o_proj biases and Qwen3's per-head QK norm, SiLU MLP),
// final norm on the last token, LM head (lm_head.weight, or the embedding when tied), argmax.
// Weights are declared with dtype `weight_dtype` (default: config.torch_dtype).
// Throws Error(InvalidArgument) for an inconsistent config. The result passes validate().
Graph build(const model::Config& config);
Graph build(const model::Config& config, DType weight_dtype);

}  // namespace mpk::ir
