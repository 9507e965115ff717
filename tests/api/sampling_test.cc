// Sampling through the C API: a seed reproduces its tokens, another seed draws others, greedy
// stays the default, and bad configurations are refused without changing the session.
#include <vector>

#include "api_fixture.h"

namespace {

using mpk_test::fixture;
using mpk_test::Loaded;

std::vector<int32_t> run(Loaded& l, const mpk_sampling_config* c, size_t n) {
  mpk_session* s = l.session(64);
  if (c) {
    EXPECT_EQ(mpk_session_set_sampling(s, c), MPK_OK) << mpk_last_error();
  }
  const int32_t prompt[] = {11, 5, 300, 3};
  EXPECT_EQ(mpk_session_prefill(s, prompt, 4), MPK_OK);
  std::vector<int32_t> out(n);
  size_t got = 0;
  EXPECT_EQ(mpk_session_decode(s, n, out.data(), &got), MPK_OK) << mpk_last_error();
  out.resize(got);
  mpk_session_destroy(s);
  return out;
}

TEST(ApiSampling, SeedsReproduceAndGreedyIsTheDefault) {
  Loaded l(fixture("llama-f32"));
  ASSERT_NE(l.model, nullptr);
  mpk_sampling_config c;
  mpk_sampling_config_init(&c);
  EXPECT_EQ(c.temperature, 0.f);
  EXPECT_EQ(c.top_p, 1.f);
  EXPECT_EQ(run(l, &c, 12), run(l, nullptr, 12));  // the initialised config is greedy
  c.temperature = 1.0f;
  c.top_k = 50;
  c.seed = 1;
  const auto a = run(l, &c, 12), b = run(l, &c, 12);
  c.seed = 2;
  const auto d = run(l, &c, 12);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, d);
}

TEST(ApiSampling, BadConfigurationsAreRefused) {
  Loaded l(fixture("qwen3-f32"));
  ASSERT_NE(l.model, nullptr);
  mpk_session* s = l.session(16);
  mpk_sampling_config c;
  mpk_sampling_config_init(&c);
  EXPECT_EQ(mpk_session_set_sampling(nullptr, &c), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_session_set_sampling(s, nullptr), MPK_ERROR_INVALID_ARGUMENT);
  mpk_sampling_config bad = c;
  bad.struct_size = 4;
  EXPECT_EQ(mpk_session_set_sampling(s, &bad), MPK_ERROR_INVALID_ARGUMENT);
  for (int k = 0; k < 4; ++k) {
    bad = c;
    if (k == 0) bad.temperature = -0.5f;
    if (k == 1) bad.top_k = -2;
    if (k == 2) bad.top_p = 0.f;
    if (k == 3) bad.top_p = 1.01f;
    EXPECT_EQ(mpk_session_set_sampling(s, &bad), MPK_ERROR_INVALID_ARGUMENT) << k;
  }
  mpk_sampling_config_init(nullptr);  // no crash
  mpk_session_destroy(s);
}

}  // namespace
