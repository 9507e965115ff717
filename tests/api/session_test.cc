// Sessions through the C API: greedy decoding is deterministic, chunking does not change it,
// reset starts over, and the stats count tokens.
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "api_fixture.h"

namespace {

using mpk_test::fixture;
using mpk_test::Loaded;

std::vector<int32_t> greedy(Loaded& l, const std::vector<int32_t>& prompt, size_t n,
                            size_t chunk) {
  mpk_session* s = l.session(prompt.size() + n + 1);
  EXPECT_EQ(mpk_session_prefill(s, prompt.data(), prompt.size()), MPK_OK) << mpk_last_error();
  std::vector<int32_t> out;
  while (out.size() < n) {
    int32_t buf[16];
    size_t got = 0;
    EXPECT_EQ(mpk_session_decode(s, std::min(chunk, n - out.size()), buf, &got), MPK_OK);
    out.insert(out.end(), buf, buf + got);
    if (got < chunk) break;  // end of sequence
  }
  mpk_session_destroy(s);
  return out;
}

TEST(ApiSession, GreedyIsDeterministicAndChunkIndependent) {
  for (const char* name : {"qwen3-f32", "qwen2-bf16", "llama-f32"}) {
    Loaded l(fixture(name));
    ASSERT_NE(l.model, nullptr) << name;
    std::vector<int32_t> prompt = {11, 5, 700 % l.info.vocab_size, 3};
    auto a = greedy(l, prompt, 12, 12);
    auto b = greedy(l, prompt, 12, 1);
    auto c = greedy(l, prompt, 12, 5);
    ASSERT_FALSE(a.empty()) << name;
    EXPECT_EQ(a, b) << name;
    EXPECT_EQ(a, c) << name;
    for (int32_t t : a) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, l.info.vocab_size);
    }
  }
}

TEST(ApiSession, LogitsAreFiniteAndArgmaxIsTheNextToken) {
  Loaded l(fixture("qwen3-bf16"));
  mpk_session* s = l.session(32);
  int32_t p[3] = {9, 8, 7};
  ASSERT_EQ(mpk_session_prefill(s, p, 3), MPK_OK);
  const float* logits = nullptr;
  size_t vocab = 0;
  ASSERT_EQ(mpk_session_logits(s, &logits, &vocab), MPK_OK);
  ASSERT_EQ(vocab, size_t(l.info.vocab_size));
  size_t best = 0;
  for (size_t i = 0; i < vocab; ++i) {
    ASSERT_TRUE(std::isfinite(logits[i])) << i;
    if (logits[i] > logits[best]) best = i;
  }
  int32_t tok = -1;
  size_t n = 0;
  ASSERT_EQ(mpk_session_decode(s, 1, &tok, &n), MPK_OK);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(size_t(tok), best);
  mpk_session_destroy(s);
}

TEST(ApiSession, ResetStartsOverAndStatsCountTokens) {
  Loaded l(fixture("llama-bf16-sharded"));
  mpk_session* s = l.session(32);
  int32_t p[4] = {1, 2, 3, 4};
  int32_t a[6], b[6];
  size_t na = 0, nb = 0;
  ASSERT_EQ(mpk_session_prefill(s, p, 4), MPK_OK);
  ASSERT_EQ(mpk_session_decode(s, 6, a, &na), MPK_OK);
  ASSERT_EQ(mpk_session_reset(s), MPK_OK);
  ASSERT_EQ(mpk_session_prefill(s, p, 4), MPK_OK);
  ASSERT_EQ(mpk_session_decode(s, 6, b, &nb), MPK_OK);
  ASSERT_EQ(na, nb);
  EXPECT_EQ(std::vector<int32_t>(a, a + na), std::vector<int32_t>(b, b + nb));
  mpk_stats st{};
  st.struct_size = sizeof(st);
  ASSERT_EQ(mpk_model_stats(l.model, &st), MPK_OK);
  EXPECT_EQ(st.tokens, 8 + na + nb);
  EXPECT_EQ(st.launches, 0u);
  mpk_session_destroy(s);
}

}  // namespace

namespace {

// The GPU-only session options and reports through the C API on the reference backend:
// steps_per_launch is validated, step times and profiles are refused with UNSUPPORTED.
TEST(ApiSession, MultiStepOptionsAndGpuReportsOnTheReference) {
  Loaded l(fixture("qwen3-f32"));
  ASSERT_NE(l.model, nullptr);
  mpk_session_config sc;
  mpk_session_config_init(&sc);
  EXPECT_EQ(sc.steps_per_launch, 1u);
  EXPECT_EQ(sc.profile, 0);
  EXPECT_EQ(sc.exact_prefill, 0);  // the tensor-core prefill where the model takes it
  sc.kv_capacity = 32;
  sc.steps_per_launch = 0;
  mpk_session* s = reinterpret_cast<mpk_session*>(1);
  EXPECT_EQ(mpk_session_create(l.model, &sc, &s), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(mpk_last_error()).find("steps_per_launch"), std::string::npos);

  sc.steps_per_launch = 8;  // ignored by the reference: same tokens as one step at a time
  sc.profile = 1;
  sc.exact_prefill = 1;     // the reference is exact either way
  ASSERT_EQ(mpk_session_create(l.model, &sc, &s), MPK_OK) << mpk_last_error();
  const int32_t prompt[] = {11, 5, 3};
  ASSERT_EQ(mpk_session_prefill(s, prompt, 3), MPK_OK);
  int32_t out[8];
  size_t n = 0;
  EXPECT_EQ(mpk_session_decode(s, 8, out, &n), MPK_OK);
  EXPECT_GE(n, 1u);
  const double* ms = nullptr;
  size_t steps = 0;
  EXPECT_EQ(mpk_session_step_times(s, &ms, &steps), MPK_ERROR_UNSUPPORTED);
  EXPECT_EQ(mpk_session_step_times(s, nullptr, &steps), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_session_step_times(nullptr, &ms, &steps), MPK_ERROR_INVALID_ARGUMENT);
  const char* json = nullptr;
  EXPECT_EQ(mpk_session_profile(s, &json), MPK_ERROR_UNSUPPORTED);
  EXPECT_EQ(mpk_session_profile(s, nullptr), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_session_profile(nullptr, &json), MPK_ERROR_INVALID_ARGUMENT);
  mpk_session_destroy(s);
}

// A caller built against the 0.1 header (struct_size, kv_capacity) still creates sessions, with
// the defaults for the newer fields; a struct_size shorter than that is refused.
TEST(ApiSession, OlderSessionConfigLayout) {
  Loaded l(fixture("qwen3-f32"));
  ASSERT_NE(l.model, nullptr);
  mpk_session_config sc;
  mpk_session_config_init(&sc);
  sc.kv_capacity = 16;
  sc.steps_per_launch = 0;  // past the old struct_size: never read
  sc.struct_size = offsetof(mpk_session_config, steps_per_launch);
  mpk_session* s = nullptr;
  ASSERT_EQ(mpk_session_create(l.model, &sc, &s), MPK_OK) << mpk_last_error();
  const int32_t prompt[] = {1, 2};
  EXPECT_EQ(mpk_session_prefill(s, prompt, 2), MPK_OK);
  mpk_session_destroy(s);
  sc.struct_size = sizeof(size_t);
  s = reinterpret_cast<mpk_session*>(1);
  EXPECT_EQ(mpk_session_create(l.model, &sc, &s), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(mpk_last_error()).find("struct_size"), std::string::npos);
}

}  // namespace

namespace {

struct Seen {
  std::vector<std::string> starts, ends;
};

void record(const char* phase, uint64_t done, uint64_t total, void* user) {
  auto* s = static_cast<Seen*>(user);
  if (done == 0) s->starts.push_back(phase);
  if (total > 0 && done == total) s->ends.push_back(phase);
}

// The long phases are reported to the progress callback and timed in the stats; a caller built
// before the callback existed (a smaller mpk_runtime_config) still creates a runtime.
TEST(ApiSession, ProgressAndPhaseTimes) {
  Seen seen;
  mpk_runtime_config rc;
  mpk_runtime_config_init(&rc);
  rc.progress_callback = record;
  rc.progress_user_data = &seen;
  mpk_runtime* rt = nullptr;
  ASSERT_EQ(mpk_runtime_create(&rc, &rt), MPK_OK);
  mpk_model_config mc;
  mpk_model_config_init(&mc);
  mc.backend = MPK_BACKEND_REFERENCE;
  mpk_model* m = nullptr;
  ASSERT_EQ(mpk_model_load(rt, mpk_test::fixture("qwen2-f32").c_str(), &mc, &m), MPK_OK) << mpk_last_error();
  mpk_session_config sc;
  mpk_session_config_init(&sc);
  sc.kv_capacity = 16;
  mpk_session* s = nullptr;
  ASSERT_EQ(mpk_session_create(m, &sc, &s), MPK_OK);
  const int32_t prompt[] = {3, 4, 5};
  ASSERT_EQ(mpk_session_prefill(s, prompt, 3), MPK_OK);
  EXPECT_EQ(seen.starts, (std::vector<std::string>{"read", "prefill"}));
  EXPECT_EQ(seen.ends, (std::vector<std::string>{"read", "prefill"}));
  mpk_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(mpk_model_stats(m, &st), MPK_OK);
  EXPECT_GT(st.read_ms, 0.0);
  EXPECT_GE(st.load_ms, st.read_ms);
  EXPECT_EQ(st.prove_ms, 0.0);  // the reference backend proves and compiles nothing
  mpk_session_destroy(s);
  mpk_model_destroy(m);
  mpk_runtime_destroy(rt);

  mpk_runtime_config old;
  mpk_runtime_config_init(&old);
  old.struct_size = offsetof(mpk_runtime_config, progress_callback);
  ASSERT_EQ(mpk_runtime_create(&old, &rt), MPK_OK) << mpk_last_error();
  mpk_runtime_destroy(rt);
}

}  // namespace
