// The C API under damaged numbers and full caches: a documented status, the tokens produced
// before it, never a silent wrong answer. Reference backend (the GPU's twin is in
// tests/runtime/megakernel_gpu_test.cc).
#include <mpk/mpk.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "api_fixture.h"
#include "patch_fixture.h"

namespace {

using mpk_test::fixture;
using mpk_test::Loaded;

// qwen2-f32: untied, prompt and greedy tokens from tests/data/qwen2-f32/expected.json.
const std::vector<int32_t> kPrompt = {215, 354, 185, 91, 17, 611, 443};
const std::vector<int32_t> kTokens = {345, 601, 329, 722, 399, 746, 582, 722};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<int32_t> decode(mpk_session* s, size_t n, mpk_status want, size_t* got = nullptr) {
  std::vector<int32_t> out(n, -1);
  size_t k = 99;
  EXPECT_EQ(mpk_session_decode(s, n, out.data(), &k), want) << mpk_last_error();
  out.resize(std::min(k, n));
  if (got) *got = k;
  return out;
}

TEST(ApiHardening, KvFullReturnsTheTokensAndCapacity) {
  Loaded l(fixture("qwen2-f32"));
  mpk_session* s = l.session(kPrompt.size() + 3);
  ASSERT_EQ(mpk_session_prefill(s, kPrompt.data(), kPrompt.size()), MPK_OK);
  const std::vector<int32_t> got = decode(s, 8, MPK_ERROR_CAPACITY);
  EXPECT_EQ(got, std::vector<int32_t>(kTokens.begin(), kTokens.begin() + 3));
  EXPECT_NE(std::string(mpk_last_error()).find("KV cache full"), std::string::npos);
  mpk_session_destroy(s);
}

struct Damage {
  const char* tensor;
  float value;
  int64_t first, count;
};

TEST(ApiHardening, NonFiniteWeightsGiveNumericsNotTokens) {
  // A NaN in q_proj, an all-NaN final norm, an Inf in the first prompt token's embedding: each
  // once decoded "0,0,0,0" with exit status 0.
  const Damage cases[] = {{"model.layers.0.self_attn.q_proj.weight", kNaN, 0, 1},
                          {"model.norm.weight", kNaN, 0, -1},
                          {"model.embed_tokens.weight", kInf, 215 * 48, 1}};
  for (const Damage& d : cases) {
    SCOPED_TRACE(d.tensor);
    mpk::testing::PatchedFixture p(fixture("qwen2-f32"));
    p.set(d.tensor, d.value, d.first, d.count);
    Loaded l(p.dir().string());
    mpk_session* s = l.session(32);
    EXPECT_EQ(mpk_session_prefill(s, kPrompt.data(), kPrompt.size()), MPK_ERROR_NUMERICS);
    EXPECT_NE(std::string(mpk_last_error()).find("not finite"), std::string::npos) << mpk_last_error();
    const float* logits = nullptr;
    size_t vocab = 0;
    ASSERT_EQ(mpk_session_logits(s, &logits, &vocab), MPK_OK);  // still readable
    bool any_bad = false;
    for (size_t i = 0; i < vocab; ++i) any_bad |= !std::isfinite(logits[i]);
    EXPECT_TRUE(any_bad);
    size_t n = 99;
    EXPECT_TRUE(decode(s, 4, MPK_ERROR_BAD_STATE, &n).empty());
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(mpk_session_prefill(s, kPrompt.data(), 1), MPK_ERROR_BAD_STATE);
    EXPECT_EQ(mpk_session_reset(s), MPK_OK);
    EXPECT_EQ(mpk_session_prefill(s, kPrompt.data(), kPrompt.size()), MPK_ERROR_NUMERICS);
    mpk_session_destroy(s);

    // The load-time scan names the tensor.
    mpk_model_config mc;
    mpk_model_config_init(&mc);
    mc.backend = MPK_BACKEND_REFERENCE;
    mc.validate_weights = 1;
    mpk_model* m = nullptr;
    EXPECT_EQ(mpk_model_load(l.rt, p.dir().c_str(), &mc, &m), MPK_ERROR_INVALID_MODEL);
    EXPECT_EQ(m, nullptr);
    EXPECT_NE(std::string(mpk_last_error()).find(d.tensor), std::string::npos) << mpk_last_error();
  }
}

TEST(ApiHardening, DecodeStopsBeforeATokenFromNonFiniteLogits) {
  // The first greedy token's embedding is Inf: it is chosen from finite logits and returned;
  // the step it feeds makes non-finite logits, and no token is chosen from them.
  mpk::testing::PatchedFixture p(fixture("qwen2-f32"));
  p.set("model.embed_tokens.weight", kInf, int64_t(kTokens[0]) * 48, 1);
  Loaded l(p.dir().string());
  mpk_session* s = l.session(32);
  ASSERT_EQ(mpk_session_prefill(s, kPrompt.data(), kPrompt.size()), MPK_OK) << mpk_last_error();
  EXPECT_EQ(decode(s, 6, MPK_ERROR_NUMERICS), std::vector<int32_t>{kTokens[0]});
  EXPECT_EQ(decode(s, 1, MPK_ERROR_BAD_STATE), std::vector<int32_t>{});
  mpk_session_destroy(s);
}

TEST(ApiHardening, ValidationPassesOnAHealthyModel) {
  Loaded plain(fixture("qwen2-f32"));
  mpk_model_config mc;
  mpk_model_config_init(&mc);
  mc.backend = MPK_BACKEND_REFERENCE;
  mc.validate_weights = 1;
  mpk_model* m = nullptr;
  ASSERT_EQ(mpk_model_load(plain.rt, fixture("qwen2-f32").c_str(), &mc, &m), MPK_OK) << mpk_last_error();
  mpk_model_destroy(m);
}

TEST(ApiHardening, WeightsTruncatedAfterLoadChangeNothing) {
  // The reference backend holds its own copy: a truncated file once raised SIGBUS mid-step.
  mpk::testing::PatchedFixture p(fixture("qwen2-f32"));
  Loaded l(p.dir().string());
  std::filesystem::resize_file(p.weights(), 0);
  mpk_session* s = l.session(32);
  ASSERT_EQ(mpk_session_prefill(s, kPrompt.data(), kPrompt.size()), MPK_OK) << mpk_last_error();
  EXPECT_EQ(decode(s, kTokens.size(), MPK_OK), kTokens);
  mpk_session_destroy(s);
}

}  // namespace
