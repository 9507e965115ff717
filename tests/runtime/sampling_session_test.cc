// A sampling session on the reference backend draws, step by step, what ref::sample_token draws
// from the same logits at the same position; greedy stays the default.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "ref/executor.h"
#include "ref/sampling.h"
#include "runtime/runtime.h"

namespace mpk::rt {
namespace {

TEST(SamplingSession, DrawsTheSamplersTokenEachStep) {
  const std::string dir = std::string(MPK_TEST_DATA) + "/qwen2-bf16";
  auto m = LoadedModel::load(RuntimeOptions{}, dir, Backend::Reference);
  const std::vector<int32_t> prompt = {11, 5, 300, 3};
  const ref::SamplingConfig c{.temperature = 1.3f, .top_k = 100, .top_p = 0.9f, .seed = 2026};
  SessionOptions o;
  o.kv_capacity = 64;
  Session s(m, o);
  s.set_sampling(c);
  s.prefill(prompt.data(), prompt.size());
  std::vector<int32_t> got;
  s.decode(16, got);
  ASSERT_EQ(got.size(), 16u);  // the fixture has no reachable EOS in 16 steps at this seed

  ref::Executor e(m->model(), m->graph(), 64);
  e.forward(prompt.data(), prompt.size());
  std::vector<int32_t> want;
  for (int i = 0; i < 16; ++i) {
    const int32_t t = ref::sample_token(e.logits(), c, e.position());
    want.push_back(t);
    e.forward(&t, 1);
  }
  EXPECT_EQ(got, want);

  Session g(m, o);  // greedy by default: the graph's argmax
  g.prefill(prompt.data(), prompt.size());
  std::vector<int32_t> greedy;
  g.decode(4, greedy);
  EXPECT_NE(greedy, std::vector<int32_t>(got.begin(), got.begin() + 4));
  try {
    s.set_sampling({.temperature = 1.0f, .top_p = 2.0f});
    ADD_FAILURE() << "accepted";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::InvalidArgument);
  }
  EXPECT_EQ(s.sampling().seed, 2026u);  // unchanged
}

}  // namespace
}  // namespace mpk::rt
