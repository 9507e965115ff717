// Model shapes shared by the tests: the committed fixtures' shapes (tests/data) and the two
// real Qwen3 shapes the performance work targets.
#pragma once

#include <vector>

#include "model/config.h"

namespace mpk::testing {

model::Config tiny_qwen3();  // 1 KV head, head_dim != hidden / heads, tied (fixture qwen3-*)
model::Config tiny_qwen2();  // q/k/v biases, untied, f32 (fixture qwen2-*)
model::Config tiny_llama();  // q/k/v/o biases, llama3 RoPE scaling, untied (fixture llama-*)
std::vector<model::Config> tiny_configs();
model::Config qwen3_0_6b();
model::Config qwen3_8b();

}  // namespace mpk::testing
