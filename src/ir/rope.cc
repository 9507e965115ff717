#include "ir/rope.h"

#include <cmath>
#include <numbers>

#include "base/error.h"

namespace mpk::ir {

// Every step mirrors a float32 tensor op of transformers' _compute_default_rope_parameters and
// _compute_llama3_parameters: Python scalars are rounded to fp32 where torch rounds them, and
// `scalar / tensor` is torch's reciprocal(tensor) * scalar.
std::vector<float> rope_inv_freq(int head_dim, double theta,
                                 const std::optional<model::RopeScaling>& scaling) {
  MPK_CHECK(head_dim > 0 && head_dim % 2 == 0, InvalidArgument)
      << "rope needs a positive even head_dim, got " << head_dim;
  MPK_CHECK(theta > 0, InvalidArgument) << "rope_theta must be positive, got " << theta;
  const int half = head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    float exponent = float(2 * i) / float(head_dim);
    inv[size_t(i)] = 1.0f / std::pow(float(theta), exponent);
  }
  if (!scaling) return inv;
  MPK_CHECK(scaling->type == "llama3", Unsupported)
      << "rope scaling '" << scaling->type << "' is not supported (only llama3)";
  const model::RopeScaling& s = *scaling;
  MPK_CHECK(s.high_freq_factor > s.low_freq_factor && s.factor > 0, InvalidArgument)
      << "llama3 rope scaling needs high_freq_factor > low_freq_factor and factor > 0";
  const double old_len = s.original_max_position_embeddings;
  const float low_wavelen = float(old_len / s.low_freq_factor);
  const float high_wavelen = float(old_len / s.high_freq_factor);
  const float factor = float(s.factor);
  const float two_pi = float(2 * std::numbers::pi);
  const float low = float(s.low_freq_factor);
  const float span = float(s.high_freq_factor - s.low_freq_factor);
  for (float& f : inv) {
    float wavelen = (1.0f / f) * two_pi;
    float scaled = wavelen > low_wavelen ? f / factor : f;
    float smooth = ((1.0f / wavelen) * float(old_len) - low) / span;
    float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? smoothed : scaled;
  }
  return inv;
}

}  // namespace mpk::ir
