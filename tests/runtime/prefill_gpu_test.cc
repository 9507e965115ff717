// The tensor-core prefill on the device, on the bf16 fixtures: the last position's logits
// against the fp32 CPU reference (and the decode-step prefill's, for scale); the KV cache and
// carried embedding it leaves, by decoding on from it in the megakernel; a prompt continued by a
// second prefill (attention over a cached prefix); non-finite logits; short prompts taking the
// decode step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "gpu_device.h"
#include "patch_fixture.h"
#include "ref/executor.h"
#include "runtime/gpu_backend.h"
#include "runtime/runtime.h"

namespace mpk::rt {
namespace {

// bf16-rounded tensor-core operands against the fp32 reference (the decode step is at ~1e-6).
constexpr double kTolerance = 2e-2;

using mpk::testing::have_device;

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / den);
}

int32_t argmax(const std::vector<float>& v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

RuntimeOptions test_options() {
  RuntimeOptions o;
  o.cache_dir = std::filesystem::temp_directory_path() / ("mpk-pf-test-" + std::to_string(getpid()));
  return o;
}

SessionOptions opts(size_t capacity, bool tensor_cores, size_t steps_per_launch = 1) {
  SessionOptions o;
  o.kv_capacity = capacity;
  o.steps_per_launch = steps_per_launch;
  o.tensor_core_prefill = tensor_cores;
  return o;
}

std::vector<int32_t> prompt_ids(size_t n, int64_t vocab, int seed) {
  std::vector<int32_t> p;
  for (size_t i = 0; i < n; ++i) p.push_back(int32_t((int64_t(i) * 7919 + 13 + seed * 104729) % vocab));
  return p;
}

class PrefillGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(PrefillGpu, MatchesTheReferenceAndHandsOffToDecode) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const std::string dir = std::string(MPK_TEST_DATA) + "/" + GetParam();
  auto m = LoadedModel::load(test_options(), dir, Backend::Gpu);
  ASSERT_NE(m->gpu()->prefill_kernels(), nullptr) << m->gpu()->prefill_why();
  auto rm = LoadedModel::load(test_options(), dir, Backend::Reference);
  const size_t capacity = 256;
  const std::vector<int32_t> prompt = prompt_ids(150, m->config().vocab_size, 1);  // 3 query blocks
  Session tc(m, opts(capacity, true)), steps(m, opts(capacity, false));
  ref::Executor r(rm->model(), rm->graph(), capacity);
  tc.prefill(prompt.data(), prompt.size());
  steps.prefill(prompt.data(), prompt.size());
  r.forward(prompt.data(), prompt.size());
  const double e_tc = rel_l2(tc.logits(), r.logits()), e_steps = rel_l2(steps.logits(), r.logits());
  std::printf("[prefill] %s: %zu tokens, relative L2 vs fp32 reference: tensor cores %.3e, decode steps %.3e; "
              "argmax %s\n", GetParam().c_str(), prompt.size(), e_tc, e_steps,
              argmax(tc.logits()) == argmax(r.logits()) ? "equal" : "differs");
  EXPECT_LE(e_tc, kTolerance);
  EXPECT_EQ(tc.position(), prompt.size());
  EXPECT_EQ(tc.step_ms().size(), 1u) << "one chunk";
  EXPECT_GT(tc.step_ms().at(0), 0.0);

  // Decoding on reads the KV cache and the next embedding the prefill left: the reference fed
  // the same tokens gives the same logits.
  const int32_t first = argmax(tc.logits());
  std::vector<int32_t> out;
  tc.decode(6, out);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0], first) << "the prefill's argmax is fed first";
  for (int32_t t : out) r.forward(&t, 1);
  const double e_dec = rel_l2(tc.logits(), r.logits());
  std::printf("[prefill] %s: after 6 decode steps relative L2 %.3e\n", GetParam().c_str(), e_dec);
  EXPECT_LE(e_dec, kTolerance);

  // A prompt in two prefills: the second attends to the first's cached keys.
  Session two(m, opts(capacity, true));
  two.prefill(prompt.data(), 100);
  two.prefill(prompt.data() + 100, prompt.size() - 100);
  ref::Executor r2(rm->model(), rm->graph(), capacity);
  r2.forward(prompt.data(), prompt.size());
  EXPECT_LE(rel_l2(two.logits(), r2.logits()), kTolerance);
  EXPECT_EQ(two.position(), prompt.size());

  // Prompts shorter than kPrefillMinTokens run as decode steps (exact arithmetic).
  Session shortp(m, opts(capacity, true));
  ref::Executor r3(rm->model(), rm->graph(), capacity);
  shortp.prefill(prompt.data(), GpuSession::kPrefillMinTokens - 1);
  r3.forward(prompt.data(), GpuSession::kPrefillMinTokens - 1);
  EXPECT_LE(rel_l2(shortp.logits(), r3.logits()), 1e-3);
  EXPECT_EQ(shortp.step_ms().size(), GpuSession::kPrefillMinTokens - 1);
}

INSTANTIATE_TEST_SUITE_P(Bf16Fixtures, PrefillGpu,
                         ::testing::Values("qwen3-bf16", "qwen2-bf16", "llama-bf16-sharded"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(PrefillGpuNumerics, NonFiniteLogitsFailThePrefill) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  testing::PatchedFixture p(std::string(MPK_TEST_DATA) + "/qwen2-bf16");
  p.set("model.norm.weight", NAN, 0, -1);
  auto m = LoadedModel::load(test_options(), p.dir(), Backend::Gpu);
  Session s(m, opts(64, true));
  const std::vector<int32_t> prompt = prompt_ids(20, m->config().vocab_size, 2);
  try {
    s.prefill(prompt.data(), prompt.size());
    ADD_FAILURE() << "no Numerics error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Numerics) << e.what();
  }
  std::vector<int32_t> out;
  EXPECT_THROW(s.decode(2, out), Error);
}

}  // namespace
}  // namespace mpk::rt
