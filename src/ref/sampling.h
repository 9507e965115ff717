// Token sampling: temperature, top-k and top-p with a seed. The draw is a function of the
// logits, the configuration, the seed and the position the token will take, nothing else, so
// every backend that computes it this way draws the same token. Definition:
//   z_i = logit_i / temperature;
//   candidates: the top_k ids by (z desc, id asc), or all ids when top_k is 0;
//   top_p < 1: the candidates sorted by (z desc, id asc), their weights e^(z - z_max) as
//     integers (multiples of 2^-32, truncated: sampling_math.h), and the shortest prefix whose
//     sum reaches top_p times the total (compared in double); integer sums are the same in any
//     order, so a device may sum them in parallel;
//   the token: argmax over what is left of z_i + g_i (ties: the lower id), g_i Gumbel noise
//     -log(-log(u_i)) with u_i uniform in (0, 1) from Philox4x32-10 (key: the seed; counter:
//     the id and the position), which draws i with probability softmax(z) over the set.
// The exponential and logarithm are this file's own (IEEE operations in a fixed order, no
// library call), so the arithmetic is reproducible wherever IEEE single precision is.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace mpk::ref {

// Temperatures below this are greedy: logits / temperature would overflow float for logits
// above a few units at 1e-38, every key tie at infinity and the lowest id win, not the argmax
// (vLLM draws the same line).
constexpr float kGreedyTemperature = 1e-5f;

// The most candidates a top-p cut takes: the nucleus's integer sums stay exact in double
// below 2^53.
constexpr size_t kMaxSampledLogits = size_t(1) << 21;

struct SamplingConfig {
  float temperature = 0;  // below kGreedyTemperature: greedy (the argmax; ties: the lower id)
  int32_t top_k = 0;      // 0: every id
  float top_p = 1;        // 1: no nucleus cut
  uint64_t seed = 0;
};

// Error(InvalidArgument) for a temperature that is negative or not finite, a negative top_k, or
// top_p outside (0, 1].
void validate(const SamplingConfig& c);
// validate(c), and Error(InvalidArgument) for a nucleus (top_p < 1, not greedy) over more than
// kMaxSampledLogits of a `vocab`-id vocabulary's ids: sample_token would refuse every draw.
void validate(const SamplingConfig& c, size_t vocab);
inline bool is_greedy(const SamplingConfig& c) { return c.temperature < kGreedyTemperature; }

// Philox4x32-10 (Salmon et al., 2011): the block of `counter` under `key`.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
// u in [2^-24, 1 - 2^-24] for (seed, position, id): word 0 of the block of counter
// {id, position low, position high, 0} under key {seed low, seed high}.
float sampling_uniform(uint64_t seed, uint64_t position, uint32_t id);
// This file's e^x and ln x (x > 0), single precision, a few ulp from the true values.
float det_exp(float x);
float det_log(float x);

// The token for `logits` at `position` (see the top of the file). The logits must be finite.
int32_t sample_token(std::span<const float> logits, const SamplingConfig& c, uint64_t position);
// The id of the last key (in rank order) of the candidates sample_token draws from: its
// top-k, cut to the nucleus (a temperature, and top_p < 1 or a top_k below the vocabulary):
// what a device's selection must end on, checked apart from the draw.
int32_t nucleus_last(std::span<const float> logits, const SamplingConfig& c);

}  // namespace mpk::ref
