// The tensor-core prefill on the device, on the bf16 fixtures: the last position's logits
// against the fp32 CPU reference (and the decode-step prefill's, for scale); the KV cache and
// carried embedding it leaves, by decoding on from it in the megakernel; a prompt continued by a
// second prefill (attention over a cached prefix); non-finite logits; short prompts taking the
// decode step; the prefill's launch options end to end. Its kernels alone:
// prefill_kernels_gpu_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <cstdlib>
#include <unistd.h>

#include "gpu_device.h"
#include "patch_fixture.h"
#include "test_model_writer.h"
#include "ir/prefill_nests.h"
#include "ref/executor.h"
#include "runtime/gpu_backend.h"
#include "runtime/runtime.h"

namespace mpk::rt {
namespace {

// bf16-rounded tensor-core operands against the fp32 reference (the decode step is at ~1e-6).
constexpr double kTolerance = 2e-2;

using mpk::testing::have_device;

using mpk::testing::rel_l2;

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
  // A second prompt after them attends to positions only the decode step wrote (the bf16
  // shadow is brought up to date first).
  const std::vector<int32_t> more = prompt_ids(20, m->config().vocab_size, 3);
  tc.prefill(more.data(), more.size());
  r.forward(more.data(), more.size());
  const double e_more = rel_l2(tc.logits(), r.logits());
  std::printf("[prefill] %s: second prompt after decoding relative L2 %.3e\n", GetParam().c_str(), e_more);
  EXPECT_LE(e_more, kTolerance);
  EXPECT_EQ(tc.position(), prompt.size() + 6 + more.size());

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

// A prefill option, end to end: the model at `dir` prefilled on the GPU with the option off and
// on (`set` sets it), `prompt` in prefills of `chunk` tokens, each against the fp32 reference;
// then four decode steps on from the option's prefill, against the reference too. `check` runs
// on each leg's model first; false skips the rest (no empty result: the caller skips). Returns
// the two legs' logits, off first. `what` names the option in the printed lines.
std::vector<std::vector<float>> prefill_off_and_on(const std::string& dir, const std::vector<int32_t>& prompt,
                                                   size_t chunk, size_t capacity, const char* what,
                                                   const std::function<void(RuntimeOptions&, bool)>& set,
                                                   const std::function<bool(LoadedModel&, bool)>& check) {
  auto rm = LoadedModel::load(test_options(), dir, Backend::Reference);
  ref::Executor r(rm->model(), rm->graph(), capacity);
  r.forward(prompt.data(), prompt.size());
  std::vector<std::vector<float>> logits;
  for (const bool on : {false, true}) {
    RuntimeOptions o = test_options();
    set(o, on);
    auto m = LoadedModel::load(o, dir, Backend::Gpu);
    if (!check(*m, on)) return {};
    Session tc(m, opts(capacity, true));
    for (size_t at = 0; at < prompt.size(); at += chunk)
      tc.prefill(prompt.data() + at, std::min(chunk, prompt.size() - at));
    const double e = rel_l2(tc.logits(), r.logits());
    std::printf("[prefill %s] %s: relative L2 vs fp32 reference %.3e, argmax %s\n", what, on ? "on" : "off", e,
                argmax(tc.logits()) == argmax(r.logits()) ? "equal" : "differs");
    EXPECT_LE(e, kTolerance) << what << (on ? " on" : " off");
    logits.push_back(tc.logits());
    if (!on) continue;
    std::vector<int32_t> out;
    tc.decode(4, out);
    EXPECT_EQ(out.size(), 4u);
    ref::Executor r2(rm->model(), rm->graph(), capacity);
    r2.forward(prompt.data(), prompt.size());
    for (int32_t t : out) r2.forward(&t, 1);
    const double e_dec = rel_l2(tc.logits(), r2.logits());
    std::printf("[prefill %s] after 4 decode steps relative L2 %.3e\n", what, e_dec);
    EXPECT_LE(e_dec, kTolerance) << what;
  }
  // Sums in another order: logits equal to the bit would mean the option changed nothing.
  const double d = rel_l2(logits[1], logits[0]);
  std::printf("[prefill %s] on vs off relative L2 %.3e\n", what, d);
  EXPECT_GT(d, 0.0) << what;
  EXPECT_LE(d, kTolerance) << what;
  return logits;
}

// The q and k head norm and RoPE in their projection's epilogue (RuntimeOptions::
// prefill_fused_rope), end to end: a random Qwen3 with heads of 128 (the fixtures' heads of 24
// never take that path), a prompt in two prefills each long enough for the wgmma tiles (the
// second at position 1,100: the tables' rows past the first), with and without the fusion
// (prefill_off_and_on).
TEST(PrefillGpuFusedRope, MatchesTheReferenceWithHeadsOf128) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  using namespace mpk::model::testing;
  unsetenv("MPK_PREFILL_FUSED_ROPE");  // each leg sets the option itself
  TempDir dir;
  Json cfg = qwen3_config();
  cfg["hidden_size"] = 512, cfg["num_attention_heads"] = 16, cfg["num_key_value_heads"] = 4;
  cfg["head_dim"] = kHeadRopeDim, cfg["intermediate_size"] = 1024, cfg["vocab_size"] = 512;
  cfg["max_position_embeddings"] = 4096;
  write_model(dir.path(), cfg, model_tensors(cfg, DType::BF16, 7));
  const size_t capacity = 2300, half = 1100;
  const auto logits = prefill_off_and_on(
      dir.path().string(), prompt_ids(2 * half, 512, 5), half, capacity, "fused rope",
      [](RuntimeOptions& o, bool on) { o.prefill_fused_rope = on; },
      [&](LoadedModel& m, bool fused) {
        const PrefillKernels* k = m.gpu()->prefill_kernels();
        EXPECT_NE(k, nullptr) << m.gpu()->prefill_why();
        if (!k || !k->rope()) return false;  // no wgmma here: the fused epilogue is sm_90a's
        // q, k and v in one grid of wgmma tiles (gemm_launch: three quarters of a wave or
        // more), and the planner hands q's and k's norms to it in every layer.
        EXPECT_TRUE(gemm_launch(int64_t(half), 16 * 128 + 2 * 4 * 128, 512, m.gpu()->num_workers(), true).large);
        MemoryPlan mem;
        mem.weight_dtype = DType::BF16;
        mem.kv_capacity = int64_t(capacity);
        int taken = 0;
        const PrefillProgram plan(m.graph(), mem, int64_t(half), m.gpu()->num_workers(), fused);
        for (const PrefillStep& s : plan.steps())
          for (int h : s.head_rope) taken += h >= 0;
        EXPECT_EQ(taken, fused ? 2 * m.config().num_layers : 0);
        return true;
      });
  if (logits.empty()) GTEST_SKIP() << "no wgmma on this device: the fused epilogue is sm_90a's";
}

// Stream-K end to end (RuntimeOptions::prefill_streamk): a random Qwen3 whose gate + up at a
// 39-token prompt makes about 5/8 of a wave of SwiGLU tiles on this device (the range that takes
// the stream-K entries), with and without them (prefill_off_and_on).
TEST(PrefillGpuStreamK, MatchesTheReferenceOnAShortPrompt) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  using namespace mpk::model::testing;
  unsetenv("MPK_PREFILL_STREAMK");  // each leg sets the option itself
  const int sms = cuda::Context(0).props().sm_count, tiles = (5 * sms + 7) / 8;
  TempDir dir;
  Json cfg = qwen3_config();
  // hidden 512: 8 K steps a tile, so runs of 4 or more steps split tiles across CTAs (with 4,
  // every CTA would take one whole tile and add in the same order as the unsplit tile).
  cfg["hidden_size"] = 512, cfg["num_attention_heads"] = 2, cfg["num_key_value_heads"] = 1;
  cfg["head_dim"] = kHeadRopeDim, cfg["intermediate_size"] = 128 * tiles, cfg["vocab_size"] = 512;
  write_model(dir.path(), cfg, model_tensors(cfg, DType::BF16, 11));
  const size_t rows = 39;
  const auto logits = prefill_off_and_on(
      dir.path().string(), prompt_ids(rows, 512, 3), rows, 64, "stream-K",
      [](RuntimeOptions& o, bool on) { o.prefill_streamk = on; },
      [&](LoadedModel& m, bool on) {
        const PrefillKernels* k = m.gpu()->prefill_kernels();
        EXPECT_NE(k, nullptr) << m.gpu()->prefill_why();
        if (!k || !k->rope()) return false;  // no wgmma here: stream-K is sm_90a's
        EXPECT_EQ(k->streamk() != nullptr, on);
        EXPECT_TRUE(prefill_streamk(int64_t(rows), tiles, m.gpu()->num_workers())) << tiles << " tiles";
        return true;
      });
  if (logits.empty()) GTEST_SKIP() << "no wgmma on this device: stream-K is sm_90a's";
}

// q + k + v as one grid with its K split (a short prompt on sm_90a: gemm_launch's wgmma rule),
// end to end: a random Qwen3 whose q, k and v at 39 rows make about an eighth of a wave of
// wgmma tiles on this device (each alone too few for the rule), against the fp32 reference,
// then four decode steps on from it.
TEST(PrefillGpuGroupSplit, MatchesTheReferenceOnAShortPrompt) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  using namespace mpk::model::testing;
  const int sms = cuda::Context(0).props().sm_count, tiles = (sms + 7) / 8;
  ASSERT_GE(tiles, 3) << sms << " SMs";
  TempDir dir;
  Json cfg = qwen3_config();
  // hidden 1024: 16 K steps, so up to four parts; q's heads of 128 in tiles of two, k and v one
  // tile each.
  const int q_heads = 2 * (tiles - 2);
  cfg["hidden_size"] = 1024, cfg["num_attention_heads"] = q_heads, cfg["num_key_value_heads"] = 2;
  cfg["head_dim"] = kHeadRopeDim, cfg["intermediate_size"] = 512, cfg["vocab_size"] = 512;
  write_model(dir.path(), cfg, model_tensors(cfg, DType::BF16, 13));
  const size_t rows = 39, capacity = 64;
  const std::vector<int32_t> prompt = prompt_ids(rows, 512, 9);
  auto m = LoadedModel::load(test_options(), dir.path().string(), Backend::Gpu);
  const PrefillKernels* k = m->gpu()->prefill_kernels();
  ASSERT_NE(k, nullptr) << m->gpu()->prefill_why();
  if (!k->rope()) GTEST_SKIP() << "no wgmma on this device: the split group is sm_90a's";
  const int64_t q_cols = int64_t(q_heads) * kHeadRopeDim, kv_cols = 2 * kHeadRopeDim;
  const GemmLaunch whole = gemm_launch(int64_t(rows), q_cols + 2 * kv_cols, 1024, m->gpu()->num_workers(), true);
  EXPECT_TRUE(whole.large && whole.splits > 1) << whole.splits;
  EXPECT_FALSE(gemm_launch(int64_t(rows), q_cols, 1024, m->gpu()->num_workers(), true).large);
  MemoryPlan mem;
  mem.weight_dtype = DType::BF16;
  mem.kv_capacity = int64_t(capacity);
  int groups = 0, normed = 0;  // q + k + v steps, and their members whose norm the reduce takes
  const PrefillProgram plan(m->graph(), mem, int64_t(rows), m->gpu()->num_workers(), true);
  for (const PrefillStep& s : plan.steps()) {
    if (s.member_ops().size() != 3) continue;
    ++groups;
    for (int h : s.head_rope) normed += h >= 0;
  }
  EXPECT_EQ(groups, m->config().num_layers) << "q, k and v as one step in every layer";
  EXPECT_EQ(normed, 2 * m->config().num_layers) << "q's and k's head norms folded into the split's reduce";
  auto rm = LoadedModel::load(test_options(), dir.path().string(), Backend::Reference);
  ref::Executor r(rm->model(), rm->graph(), capacity);
  r.forward(prompt.data(), prompt.size());
  Session tc(m, opts(capacity, true));
  tc.prefill(prompt.data(), prompt.size());
  const double e = rel_l2(tc.logits(), r.logits());
  std::printf("[prefill group split] %d SMs, q + k + v %lld columns in %d parts: relative L2 %.3e, argmax %s\n", sms,
              (long long)(q_cols + 2 * kv_cols), whole.splits, e,
              argmax(tc.logits()) == argmax(r.logits()) ? "equal" : "differs");
  EXPECT_LE(e, kTolerance);
  std::vector<int32_t> out;
  tc.decode(4, out);
  ASSERT_EQ(out.size(), 4u);
  for (int32_t t : out) r.forward(&t, 1);
  const double e_dec = rel_l2(tc.logits(), r.logits());
  std::printf("[prefill group split] after 4 decode steps relative L2 %.3e\n", e_dec);
  EXPECT_LE(e_dec, kTolerance);
}

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
