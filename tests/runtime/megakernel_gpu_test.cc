// The megakernel on the device against the CPU reference, on every fixture: prefill the
// fixture's prompt, teacher-force its tokens comparing logits each step (relative L2, argmax,
// no NaN/Inf; activations are poisoned with NaN when a session starts), greedy decode in
// single-step and multi-step mode (EOS stop on the device), two sessions on one model, the
// launch counts, and a long prompt that spreads attention over many KV chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/paths.h"
#include "cuda/driver.h"
#include "gpu_device.h"
#include "ref/executor.h"
#include "runtime/gpu_backend.h"
#include "runtime/kernel_params.h"
#include "patch_fixture.h"
#include "runtime/runtime.h"

namespace mpk::rt {
namespace {

const std::vector<std::string> kFixtures = {"qwen3-f32", "qwen3-bf16", "qwen2-f32",
                                 "qwen2-bf16", "llama-f32", "llama-bf16-sharded"};
constexpr double kTolerance = 1e-3;

using mpk::testing::have_device;

using mpk::testing::rel_l2;

int32_t argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

struct Expected {
  std::vector<int32_t> prompt, tokens;
};

Expected read_expected(const std::string& dir) {
  std::ifstream f(dir + "/expected.json");
  const auto j = nlohmann::json::parse(f);
  return {j.at("prompt").get<std::vector<int32_t>>(), j.at("tokens").get<std::vector<int32_t>>()};
}

// Feeds the fixture's prompt, then its tokens one at a time, to the session `s` (Session or
// GpuSession) and the reference `r`, comparing their logits before every token and after the
// last (relative L2, argmax).
template <class S>
void expect_teacher_forced(S& s, ref::Executor& r, const Expected& ex) {
  s.prefill(ex.prompt.data(), ex.prompt.size());
  r.forward(ex.prompt.data(), ex.prompt.size());
  for (size_t i = 0; i <= ex.tokens.size(); ++i) {
    EXPECT_LE(rel_l2(s.logits(), r.logits()), kTolerance) << "step " << i;
    EXPECT_EQ(argmax(s.logits()), argmax(r.logits())) << "step " << i;
    if (i == ex.tokens.size()) break;
    s.prefill(&ex.tokens[i], 1);
    r.forward(&ex.tokens[i], 1);
  }
}

RuntimeOptions test_options() {
  RuntimeOptions o;
  o.cache_dir = std::filesystem::temp_directory_path() / ("mpk-mk-test-" + std::to_string(getpid()));
  return o;
}

SessionOptions opts(size_t capacity, size_t steps_per_launch = 1) {
  SessionOptions o;
  o.kv_capacity = capacity;
  o.steps_per_launch = steps_per_launch;
  // The decode step's exact fp32 arithmetic is under test here (prefill_gpu_test.cc has the
  // tensor-core prefill).
  o.tensor_core_prefill = false;
  return o;
}

// A fixture's expected prompt and tokens, its GPU load under `params` (mpk_runtime_config's
// megakernel parameters) and its reference load.
struct Fixture {
  Expected ex;
  std::shared_ptr<LoadedModel> gpu, ref;
};
Fixture load_fixture(const char* fixture, const char* params, bool share_activations = false) {
  const std::string dir = std::string(MPK_TEST_DATA) + "/" + fixture;
  RuntimeOptions o = test_options();
  o.mk_params = params;
  o.share_activations = share_activations;
  return {read_expected(dir), LoadedModel::load(o, dir, Backend::Gpu),
          LoadedModel::load(test_options(), dir, Backend::Reference)};
}

class MegakernelGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(MegakernelGpu, MatchesReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const std::string dir = std::string(MPK_TEST_DATA) + "/" + GetParam();
  const Expected ex = read_expected(dir);
  auto m = LoadedModel::load(test_options(), dir, Backend::Gpu);
  ASSERT_EQ(m->backend(), Backend::Gpu);
  EXPECT_EQ(m->stats().host_fallback_ops, 0u);
  EXPECT_GT(m->stats().num_tasks, 0u);
  const size_t capacity = 64;
  Session s(m, opts(capacity));
  auto rm = LoadedModel::load(test_options(), dir, Backend::Reference);
  ref::Executor r(rm->model(), rm->graph(), capacity);

  double worst = 0;
  const uint64_t launches0 = m->stats().launches;
  s.prefill(ex.prompt.data(), ex.prompt.size());
  r.forward(ex.prompt.data(), ex.prompt.size());
  EXPECT_EQ(m->stats().launches - launches0, 1u) << "the prompt in one launch";
  for (size_t i = 0; i <= ex.tokens.size(); ++i) {
    const std::vector<float>& got = s.logits();
    const std::vector<float>& want = r.logits();
    const double e = rel_l2(got, want);
    worst = std::max(worst, e);
    EXPECT_LE(e, kTolerance) << GetParam() << " step " << i;
    EXPECT_EQ(argmax(got), argmax(want)) << GetParam() << " step " << i;
    if (i == ex.tokens.size()) break;
    const uint64_t before = m->stats().launches;
    s.prefill(&ex.tokens[i], 1);
    r.forward(&ex.tokens[i], 1);
    EXPECT_EQ(m->stats().launches - before, 1u);
  }
  std::printf("[megakernel] %s: max relative L2 over %zu steps = %.3e\n", GetParam().c_str(),
              ex.tokens.size() + 1, worst);
  EXPECT_EQ(s.position(), ex.prompt.size() + ex.tokens.size());

  // Greedy decode: the device chooses and embeds the next token itself.
  Session g1(m, opts(capacity)), g2(m, opts(capacity)), g3(m, opts(capacity, 3));
  ref::Executor r2(rm->model(), rm->graph(), capacity);
  g1.prefill(ex.prompt.data(), ex.prompt.size());
  g2.prefill(ex.prompt.data(), ex.prompt.size());
  g3.prefill(ex.prompt.data(), ex.prompt.size());
  r2.forward(ex.prompt.data(), ex.prompt.size());
  std::vector<int32_t> want;
  for (int i = 0; i < 8; ++i) {
    int32_t next = r2.next_token();
    want.push_back(next);
    r2.forward(&next, 1);
  }
  std::vector<int32_t> out1, out2;
  const uint64_t before = m->stats().launches;
  g1.decode(8, out1);
  EXPECT_EQ(m->stats().launches - before, out1.size()) << "one launch per decoded token";
  g2.decode(8, out2);
  std::vector<int32_t> out3;
  const uint64_t before3 = m->stats().launches;
  g3.decode(8, out3);
  EXPECT_EQ(m->stats().launches - before3, (out3.size() + 2) / 3) << "3 steps per launch";
  // decode stops after an EOS; compare the common prefix length the reference would produce.
  ASSERT_FALSE(out1.empty());
  EXPECT_EQ(out1, std::vector<int32_t>(want.begin(), want.begin() + long(out1.size())));
  EXPECT_EQ(out1, out2) << "two sessions on one model";
  EXPECT_EQ(g1.logits(), g2.logits()) << "two sessions on one model";
  EXPECT_EQ(out1, out3) << "multi-step mode";
  EXPECT_EQ(g1.logits(), g3.logits()) << "multi-step mode: the same arithmetic per step";
  EXPECT_EQ(g3.step_ms().size(), out3.size());
  for (double ms : g3.step_ms()) EXPECT_GT(ms, 0.0);
  const double e = rel_l2(g1.logits(), r2.logits());
  if (out1.size() == want.size()) {
    EXPECT_LE(e, kTolerance) << "after greedy decode";
  }

  // reset: the same prompt again gives the same logits.
  g1.reset();
  g1.prefill(ex.prompt.data(), ex.prompt.size());
  Session fresh(m, opts(capacity));
  fresh.prefill(ex.prompt.data(), ex.prompt.size());
  EXPECT_EQ(g1.logits(), fresh.logits()) << "after reset";
}

// Activation buffers sharing memory (plan_memory with share_activations): the same logits as
// the unshared plan, bit for bit, teacher-forced and in multi-step greedy decode.
TEST_P(MegakernelGpu, SharedActivationsGiveTheSameResults) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  unsetenv("MPK_SHARE_ACTIVATIONS");  // it would turn sharing on in the plain session too
  const std::string dir = std::string(MPK_TEST_DATA) + "/" + GetParam();
  const Expected ex = read_expected(dir);
  auto m = LoadedModel::load(test_options(), dir, Backend::Gpu);
  const size_t capacity = 64;
  SessionOptions shared_opts = opts(capacity, 3);
  shared_opts.share_activations = true;
  Session plain(m, opts(capacity, 3)), shared(m, shared_opts);
  plain.prefill(ex.prompt.data(), ex.prompt.size());
  shared.prefill(ex.prompt.data(), ex.prompt.size());
  EXPECT_EQ(plain.logits(), shared.logits()) << "after the prompt";
  for (size_t i = 0; i < ex.tokens.size(); ++i) {
    plain.prefill(&ex.tokens[i], 1);
    shared.prefill(&ex.tokens[i], 1);
    EXPECT_EQ(plain.logits(), shared.logits()) << "step " << i;
  }
  std::vector<int32_t> a, b;
  plain.decode(9, a);
  shared.decode(9, b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(plain.logits(), shared.logits()) << "after multi-step greedy decode";
}

// Sampling: the same seed draws the same tokens on the GPU as on the reference (the draw is a
// function of the logits, which agree to fp32 rounding, the seed and the position), and a
// different seed other tokens. Every kind of draw: the LM-head tiles' Gumbel keys (no top-k),
// the argmax task's top-k (then top-p) selection, its nucleus over every id and above a top-k
// past its sort (MPK_MK_SAMPLE_KMAX), inside multi-step launches.
TEST_P(MegakernelGpu, SamplingDrawsWhatTheReferenceDraws) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const std::string dir = std::string(MPK_TEST_DATA) + "/" + GetParam();
  const Expected ex = read_expected(dir);
  auto m = LoadedModel::load(test_options(), dir, Backend::Gpu);
  auto rm = LoadedModel::load(test_options(), dir, Backend::Reference);
  struct Case { ref::SamplingConfig c; bool on_device; };
  const int64_t vocab = m->config().vocab_size;
  const std::vector<Case> cases = {
      {{.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = 77}, true},
      {{.temperature = 1.1f, .top_k = 0, .top_p = 1.f, .seed = 5}, true},
      {{.temperature = 0.6f, .top_k = 7, .top_p = 1.f, .seed = 6}, true},
      {{.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .seed = 8}, true},
      {{.temperature = 0.7f, .top_k = 100000, .top_p = 0.5f, .seed = 11}, true},
      {{.temperature = 1.0f, .top_k = 1025, .top_p = 0.9f, .seed = 12}, true},
      // top_k at or above the vocabulary: every id, as with no top-k.
      {{.temperature = 0.8f, .top_k = 100000, .top_p = 1.f, .seed = 9}, true},
      // Above MPK_MK_SAMPLE_KMAX (below the qwen3 fixtures' 1,031 ids): the top_k-th key,
      // found by radix select, bounds the draw.
      {{.temperature = 0.8f, .top_k = 1025, .top_p = 1.f, .seed = 10}, true},
      {{.temperature = 1.2f, .top_k = int32_t(vocab) - 1, .top_p = 0.95f, .seed = 13}, true},
  };
  const size_t n = 20, per_launch = 8;
  for (const Case& k : cases) {
    SCOPED_TRACE("top_k " + std::to_string(k.c.top_k) + " top_p " + std::to_string(k.c.top_p));
    std::vector<int32_t> gpu, cpu, other;
    for (auto* out : {&gpu, &cpu, &other}) {
      Session s(out == &cpu ? rm : m, opts(64, per_launch));
      ref::SamplingConfig sc = k.c;
      if (out == &other) sc.seed += 1000;
      s.set_sampling(sc);
      s.prefill(ex.prompt.data(), ex.prompt.size());
      const uint64_t launches = m->stats().launches;
      s.decode(n, *out);
      if (out == &gpu) {
        // The device draws feed the next step inside a launch; the host's take one each (an
        // EOS may end the decode early).
        const uint64_t used = m->stats().launches - launches, got = out->size();
        ASSERT_GE(got, 1u);
        if (k.on_device) EXPECT_LE(used, (got + per_launch - 1) / per_launch);
        else EXPECT_EQ(used, got);
      }
    }
    EXPECT_EQ(gpu, cpu);
    EXPECT_NE(gpu, other);
  }
}

// Changing the draw between decode calls: the token chosen under the old configuration (or
// by the prefill's argmax) is drawn again under the new one, as the reference does.
TEST_P(MegakernelGpu, SamplingChangesBetweenDecodeCalls) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const std::string dir = std::string(MPK_TEST_DATA) + "/" + GetParam();
  const Expected ex = read_expected(dir);
  auto m = LoadedModel::load(test_options(), dir, Backend::Gpu);
  auto rm = LoadedModel::load(test_options(), dir, Backend::Reference);
  const std::vector<ref::SamplingConfig> seq = {
      {.temperature = 0.8f, .top_k = 0, .top_p = 1.f, .seed = 1},
      {},
      {.temperature = 0.7f, .top_k = 30, .top_p = 0.8f, .seed = 2},
      {.temperature = 0.7f, .top_k = 30, .top_p = 0.8f, .seed = 3},
  };
  std::vector<int32_t> gpu, cpu;
  for (auto* out : {&gpu, &cpu}) {
    Session s(out == &cpu ? rm : m, opts(64, 4));
    s.prefill(ex.prompt.data(), ex.prompt.size());
    for (const ref::SamplingConfig& c : seq) {
      s.set_sampling(c);
      s.decode(6, *out);
    }
  }
  EXPECT_EQ(gpu, cpu);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MegakernelGpu, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// A prompt of 200 tokens: attention spreads every KV head over many chunks with several
// positions each; then the device stops a multi-step launch at an EOS id.
TEST(MegakernelGpuLong, ChunkedAttentionAndEosStop) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const std::string dir = std::string(MPK_TEST_DATA) + "/qwen3-bf16";
  auto m = LoadedModel::load(test_options(), dir, Backend::Gpu);
  const size_t capacity = 256;
  const int64_t vocab = m->config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back(int32_t((int64_t(i) * 7919 + 13) % vocab));
  GpuSession s(m->gpu(), opts(capacity, 16), m->stats());
  auto rm = LoadedModel::load(test_options(), dir, Backend::Reference);
  ref::Executor r(rm->model(), rm->graph(), capacity);
  s.prefill(prompt.data(), prompt.size());
  r.forward(prompt.data(), prompt.size());
  EXPECT_LE(rel_l2(s.logits(), r.logits()), kTolerance);
  EXPECT_EQ(s.step_ms().size(), prompt.size());
  std::vector<int32_t> want;
  for (int i = 0; i < 12; ++i) {
    const int32_t next = r.next_token();
    want.push_back(next);
    r.forward(&next, 1);
  }
  // As the only EOS id, a token first produced at step 2 or later: the device itself (not the
  // host's check of the first fed token) ends the launch right after feeding it.
  size_t stop = want.size();
  for (size_t k = 2; k < want.size() && stop == want.size(); ++k)
    if (std::find(want.begin(), want.begin() + long(k), want[k]) == want.begin() + long(k)) stop = k;
  ASSERT_LT(stop, want.size()) << "no token first appears at step 2 or later";
  const std::vector<int32_t> eos = {want[stop]};
  std::vector<int32_t> out;
  const uint64_t launches = m->stats().launches;
  s.decode(12, eos, out);
  EXPECT_EQ(m->stats().launches - launches, 1u) << "one launch, stopped on the device";
  EXPECT_EQ(out, std::vector<int32_t>(want.begin(), want.begin() + long(stop) + 1));
  EXPECT_EQ(s.position(), prompt.size() + stop + 1);
  // Without EOS ids the rest follows the reference.
  std::vector<int32_t> rest;
  s.decode(12 - (stop + 1), {}, rest);
  out.insert(out.end(), rest.begin(), rest.end());
  EXPECT_EQ(out, want);
  EXPECT_LE(rel_l2(s.logits(), r.logits()), kTolerance);
}

// The linear tiles' weight paths under other code parameters (RuntimeOptions::mk_params), each
// teacher-forced against the reference on three fixtures (bf16 and f32 weights): three rows per
// warp (tiles whose rows do not divide by three end in a two-row group, computed one row at a
// time); one and two loads per round; one load per round without a K split, so that
// qwen3-f32's rows of 176 (44 vectors) take a full round and then a partial one (the
// fixtures' other rows fit in one round).
// A session under `params` (mpk_runtime_config's megakernel parameters) decodes fixture by
// fixture teacher-forced against the reference.
void expect_params_match_reference(const char* params, std::initializer_list<const char*> fixtures) {
  for (const char* fixture : fixtures) {
    SCOPED_TRACE(std::string(params) + " on " + fixture);
    const auto [ex, m, rm] = load_fixture(fixture, params);
    const MegakernelParams want = parse_params(params, m->gpu()->default_params());
    EXPECT_EQ(to_json(m->gpu()->params()), to_json(want));
    Session s(m, opts(64));
    ref::Executor r(rm->model(), rm->graph(), 64);
    expect_teacher_forced(s, r, ex);
  }
}

// A parameter set's name as a test name: "rows_per_warp=3,loads_in_flight=2" ->
// "rows_per_warp_3_loads_in_flight_2". One test per set, so that ctest runs them side by side.
std::string params_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class MegakernelGpuWeightPaths : public ::testing::TestWithParam<const char*> {};

TEST_P(MegakernelGpuWeightPaths, MatchTheReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  expect_params_match_reference(GetParam(), {"qwen3-bf16", "llama-f32", "qwen3-f32"});
}

INSTANTIATE_TEST_SUITE_P(Params, MegakernelGpuWeightPaths,
                         ::testing::Values("rows_per_warp=3", "loads_in_flight=1", "rows_per_warp=3,loads_in_flight=2",
                                         "loads_in_flight=1,max_k_split=1", "poll_warp_loads=0",
                                         "poll_warp_loads=0,rows_per_warp=3",
                                         // Two linear variants in one launch: the down projection's own.
                                         "down_rows_per_warp=1", "loads_in_flight=2,rows_per_warp=1,down_rows_per_warp=4",
                                         "loads_in_flight=2,rows_per_warp=3,down_rows_per_warp=1",
                                         // Three: the LM head's too.
                                         "rows_per_warp=3,down_rows_per_warp=1,head_rows_per_warp=4",
                                         // The controller warp polls and publishes (15 and 16 compute warps).
                                         "controller_warp=1,block_threads=480", "controller_warp=1",
                                         "controller_warp=1,loads_in_flight=2",
                                         // The next task's rows prefetched into L2 (the fixtures' defaults have the
                                         // controller warp but no prefetch): Qwen3-0.6B's 128 KiB, without the
                                         // controller warp, 1 KiB (whole small tasks, cut K and V rows), beside the weight ring.
                                         "prefetch_next=128", "prefetch_next=64,controller_warp=0,block_threads=512",
                                         "prefetch_next=1", "prefetch_next=1024,stage_weights=1"),
                         params_name);

// Fewer warps than an attention task's heads: a warp stages more heads with constants of its
// own (qwen3: 4 query heads and the key on 2 or 4 warps, the key a warp's third or second head;
// llama: 3 and the key on 2 warps, the key with the value row's warp, or on 4).
TEST(MegakernelGpuParams, AWarpStagingSeveralHeadsMatchesTheReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  for (const char* params : {"block_threads=64", "block_threads=128"})
    expect_params_match_reference(params, {"qwen3-bf16", "qwen3-f32", "llama-f32"});
}

TEST(MegakernelGpuCache, SecondLoadHitsTheCache) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const std::string dir = std::string(MPK_TEST_DATA) + "/qwen3-bf16";
  RuntimeOptions o = test_options();
  auto a = LoadedModel::load(o, dir, Backend::Gpu);
  auto b = LoadedModel::load(o, dir, Backend::Gpu);
  EXPECT_EQ(b->stats().cache_hits, 2u) << "the megakernel and the prefill kernels";
  EXPECT_EQ(b->stats().cache_misses, 0u);
  EXPECT_EQ(b->stats().compile_ms, 0.0);
  // The entry carries its proofs: a verified entry (cache/entry.h).
  cache::CacheOptions co;
  co.path = o.cache_dir / cache::kCacheFileName;
  cache::Cache kc(co);
  EXPECT_GE(kc.stats().verified_entries, 1u);
}


// Non-finite logits end a call with Error(Numerics) and the tokens chosen before them, in the
// single-step and the multi-step modes (the device stops one step after the bad one), as the
// reference backend does (tests/api/hardening_test.cc).
TEST(MegakernelGpuNumerics, NoTokenFromNonFiniteLogits) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  for (const char* fx : {"qwen2-f32", "qwen2-bf16"}) {
    const std::string fixture = std::string(MPK_TEST_DATA) + "/" + fx;
    const Expected ex = read_expected(fixture);
    const int64_t hidden = 48;
    {  // an all-NaN final norm: the prompt's logits
      testing::PatchedFixture p(fixture);
      p.set("model.norm.weight", NAN, 0, -1);
      auto m = LoadedModel::load(test_options(), p.dir(), Backend::Gpu);
      Session s(m, opts(32));
      EXPECT_THROW(s.prefill(ex.prompt.data(), ex.prompt.size()), Error) << fx;
      std::vector<int32_t> out;
      try {
        s.decode(4, out);
        ADD_FAILURE() << "decode after Numerics must fail";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::BadState) << e.what();
      }
    }
    for (size_t spl : {size_t(1), size_t(4)}) {  // the first greedy token's embedding is Inf
      testing::PatchedFixture p(fixture);
      p.set("model.embed_tokens.weight", INFINITY, int64_t(ex.tokens[0]) * hidden, 1);
      auto m = LoadedModel::load(test_options(), p.dir(), Backend::Gpu);
      Session s(m, opts(32, spl));
      s.prefill(ex.prompt.data(), ex.prompt.size());
      std::vector<int32_t> out;
      try {
        s.decode(6, out);
        ADD_FAILURE() << fx << " steps_per_launch " << spl << ": no Numerics error";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Numerics) << e.what();
      }
      EXPECT_EQ(out, std::vector<int32_t>{ex.tokens[0]}) << fx << " steps_per_launch " << spl;
    }
    {  // drawn by the nucleus over every id: every embedding row but the prompt's is Inf
      testing::PatchedFixture p(fixture);
      std::vector<int32_t> prompt_ids(ex.prompt.begin(), ex.prompt.end());
      std::sort(prompt_ids.begin(), prompt_ids.end());
      prompt_ids.erase(std::unique(prompt_ids.begin(), prompt_ids.end()), prompt_ids.end());
      int64_t row = 0;
      for (const int32_t id : prompt_ids) {
        if (id > row) p.set("model.embed_tokens.weight", INFINITY, row * hidden, (id - row) * hidden);
        row = id + 1;
      }
      p.set("model.embed_tokens.weight", INFINITY, row * hidden, -1);
      auto m = LoadedModel::load(test_options(), p.dir(), Backend::Gpu);
      Session s(m, opts(32));
      s.set_sampling({.temperature = 1.f, .top_k = 0, .top_p = 0.9f, .seed = 5});
      s.prefill(ex.prompt.data(), ex.prompt.size());
      std::vector<int32_t> out;
      try {
        s.decode(16, out);
        ADD_FAILURE() << fx << " nucleus draw: no Numerics error";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Numerics) << e.what();
      }
      // The token that fed the bad step is returned and counted, as on the reference.
      ASSERT_FALSE(out.empty()) << fx;
      EXPECT_FALSE(std::binary_search(prompt_ids.begin(), prompt_ids.end(), out.back())) << fx;
      EXPECT_EQ(s.position(), ex.prompt.size() + out.size()) << fx;
    }
  }
}

// The profile is of the last megakernel step: none before one, after a reset, or after a
// prefill on the tensor cores (which runs none). Step times cover every step of a sampled
// decode (a top-k past the draw's sort).
TEST(MegakernelGpuProfile, ProfileAndStepTimesAreOfTheLastCall) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const std::string dir = std::string(MPK_TEST_DATA) + "/qwen3-bf16";
  const Expected ex = read_expected(dir);
  std::vector<int32_t> prompt;
  while (prompt.size() < 8) prompt.insert(prompt.end(), ex.prompt.begin(), ex.prompt.end());
  auto m = LoadedModel::load(test_options(), dir, Backend::Gpu);
  SessionOptions so = opts(64);
  so.profile = true;
  so.tensor_core_prefill = true;
  Session s(m, so);
  auto expect_no_profile = [&](const char* when) {
    try {
      (void)s.profile_json();
      ADD_FAILURE() << "a profile " << when;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadState) << when << ": " << e.what();
    }
  };
  expect_no_profile("before any step");
  s.prefill(prompt.data(), prompt.size());
  expect_no_profile("after a prefill on the tensor cores");
  std::vector<int32_t> out;
  s.decode(1, out);
  EXPECT_NO_THROW((void)s.profile_json());
  s.reset();
  expect_no_profile("after a reset");
  s.prefill(prompt.data(), prompt.size());
  s.set_sampling({.temperature = 1.f, .top_k = 1025, .top_p = 0.9f, .seed = 7});
  out.clear();
  s.decode(5, out);
  EXPECT_EQ(s.step_ms().size(), out.size());
}

// A session of `m` teacher-forced against the reference model `rm` (capacity 64), then reset
// and greedy from the prompt to the fixture's tokens.
void expect_forced_then_greedy(GpuSession& s, const LoadedModel& rm, const LoadedModel& m, const Expected& ex) {
  ref::Executor r(rm.model(), rm.graph(), 64);
  expect_teacher_forced(s, r, ex);
  s.reset();
  s.prefill(ex.prompt.data(), ex.prompt.size());
  std::vector<int32_t> out;
  s.decode(ex.tokens.size(), m.config().eos_token_ids, out);
  EXPECT_EQ(out, ex.tokens);
}

// Weight staging (kernels/stage.cuh): every linear task reads its rows from the shared-memory
// ring its bulk copy filled while the task before it ran, teacher-forced against the reference
// on three fixtures, then greedy multi-step decode (copies issued ahead across steps, an EOS
// stop with a copy in flight). Also with the ring limited to the largest task (a copy that
// finds no room beside the running task's is issued at its own task's start) and to half of
// it (the larger tasks stream from global memory as without staging). With stage_late the same,
// the next task's copy issued later in the running task.
class MegakernelGpuStage : public ::testing::TestWithParam<const char*> {};

TEST_P(MegakernelGpuStage, StagedWeightsMatchTheReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const char* params = GetParam();
  for (const char* fixture : {"qwen3-bf16", "llama-f32", "qwen3-f32"}) {
    const auto [ex, m, rm] = load_fixture(fixture, params);
    for (int limit : {0, 1, 2}) {
      SCOPED_TRACE(std::string(params) + " on " + fixture + " ring limit " + std::to_string(limit));
      GpuSession s(m->gpu(), opts(64, 8), m->stats());
      int64_t largest = 0, staged = 0;
      for (const MkTask& d : s.tables().tasks) {
        const int64_t b = staged_weight_bytes(d, m->gpu()->weight_dtype());
        largest = std::max(largest, b);
        staged += b > 0;
      }
      ASSERT_GT(staged, 0) << "no linear task stages its weights";
      ASSERT_EQ(s.tables().stage_bytes, stage_ring_need(s.tables(), m->gpu()->weight_dtype()))
          << "the ring holds what two consecutive tasks stage";
      if (limit > 0) s.limit_stage_bytes_for_test(((largest + 127) / 128 * 128) / limit);
      expect_forced_then_greedy(s, *rm, *m, ex);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Params, MegakernelGpuStage,
                         ::testing::Values("stage_weights=1", "stage_weights=1,controller_warp=1,block_threads=480",
                                         "stage_weights=1,rows_per_warp=3,loads_in_flight=1,max_k_split=1",
                                         "stage_weights=1,down_rows_per_warp=1",
                                         // The next task's copy once the running task has its input.
                                         "stage_weights=1,stage_late=1",
                                         "stage_weights=1,stage_late=1,controller_warp=0,block_threads=512"),
                         params_name);

// The MLP's down projection folded into the gate/up tiles (fold_down): teacher-forced against
// the reference and greedy to the fixture's tokens, on the default weight path, with the
// controller warp, two loads per round, staged weights, one load per round (qwen3-f32's 176
// columns as a full round and a partial one) and shared activation memory.
class MegakernelGpuFold : public ::testing::TestWithParam<const char*> {};

TEST_P(MegakernelGpuFold, FoldedDownMatchesTheReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const char* params = GetParam();
  for (const char* fixture : {"qwen3-bf16", "llama-f32", "qwen3-f32", "qwen2-bf16"}) {
    SCOPED_TRACE(std::string(params) + " on " + fixture);
    const auto [ex, m, rm] = load_fixture(fixture, params, std::string(fixture) == "qwen3-bf16");
    GpuSession s(m->gpu(), opts(64, 8), m->stats());
    int folds = 0;
    for (const MkTask& d : s.tables().tasks) folds += (d.flags & MPK_MK_F_FOLD) != 0;
    ASSERT_GT(folds, 0) << "no task folds the down projection";
    expect_forced_then_greedy(s, *rm, *m, ex);
  }
}

INSTANTIATE_TEST_SUITE_P(Params, MegakernelGpuFold,
                         ::testing::Values("fold_down=1", "fold_down=1,controller_warp=1,block_threads=480",
                                         "fold_down=1,loads_in_flight=2", "fold_down=1,stage_weights=1",
                                         "fold_down=1,loads_in_flight=1,max_k_split=1"),
                         params_name);

// The decomposition parameters (kv_splits, merge_task, tile_waves): the session's plan has
// the KV chunks and merge tasks they name, and it matches the reference teacher-forced, then
// decodes the fixture's tokens greedily in multi-step launches.
class MegakernelGpuDecomposition : public ::testing::TestWithParam<const char*> {};

TEST_P(MegakernelGpuDecomposition, PlansMatchTheReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const char* params = GetParam();
  for (const char* fixture : {"qwen3-bf16", "llama-f32", "qwen2-bf16"}) {
    SCOPED_TRACE(std::string(params) + " on " + fixture);
    const auto [ex, m, rm] = load_fixture(fixture, params);
    const MegakernelParams p = m->gpu()->params();
    GpuSession s(m->gpu(), opts(64, 8), m->stats());
    std::map<std::pair<int, int>, int> chunks;  // per (layer, KV head)
    int merges = 0;
    for (const sched::Task& t : s.plan().tasks.tasks) {
      if (t.kind == sched::TaskKind::Attention) ++chunks[{t.layer, t.kv_head}];
      merges += t.kind == sched::TaskKind::AttentionMerge;
    }
    ASSERT_FALSE(chunks.empty());
    for (const auto& [head, n] : chunks) EXPECT_EQ(n, p.kv_splits > 0 ? p.kv_splits : chunks.begin()->second);
    if (chunks.begin()->second == 1) {
      EXPECT_EQ(merges, 0);
    } else if (p.merge_task) {
      EXPECT_EQ(merges, int(chunks.size()));
    }
    expect_forced_then_greedy(s, *rm, *m, ex);
  }
}

INSTANTIATE_TEST_SUITE_P(Params, MegakernelGpuDecomposition,
                         ::testing::Values("kv_splits=1", "kv_splits=3", "merge_task=1", "kv_splits=5,merge_task=1",
                                           "tile_waves=2", "tile_waves=3,kv_splits=2",
                                           "tile_waves=2,fold_down=1,controller_warp=1,block_threads=480"),
                         params_name);

// A profile session's timers, in order for every task: start <= ready <= end; with
// phase_timers a linear task's input, staged weights (stage_weights only) and dot products in
// between (ready <= input <= weights <= dots <= end), other tasks without them; without
// phase_timers no task has them.
TEST(MegakernelGpuProfile, PhaseTimersAreInOrder) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const std::string dir = std::string(MPK_TEST_DATA) + "/qwen3-bf16";
  const Expected ex = read_expected(dir);
  for (const char* params : {"", "phase_timers=1", "phase_timers=1,stage_weights=1"}) {
    SCOPED_TRACE(params);
    RuntimeOptions o = test_options();
    o.mk_params = params;
    auto m = LoadedModel::load(o, dir, Backend::Gpu);
    SessionOptions so = opts(64);
    so.profile = true;
    GpuSession s(m->gpu(), so, m->stats());
    s.prefill(ex.prompt.data(), ex.prompt.size());
    std::vector<int32_t> out;
    s.decode(2, {}, out);
    const nlohmann::json r = nlohmann::json::parse(s.profile_json());
    const nlohmann::json& tl = r.at("timeline");
    ASSERT_EQ(tl.size(), s.tables().queue.size());
    const bool phases = m->gpu()->params().phase_timers, staged = m->gpu()->params().stage_weights;
    for (size_t qi = 0; qi < tl.size(); ++qi) {
      const nlohmann::json& e = tl[qi];
      const MkTask& d = s.tables().tasks[size_t(s.tables().queue[qi])];
      SCOPED_TRACE(e.at(0).get<std::string>());
      ASSERT_EQ(e.size(), 8u);
      const auto at = [&](int i) { return e.at(size_t(i)).get<uint64_t>(); };
      EXPECT_LE(at(2), at(3));
      EXPECT_LE(at(3), at(4));
      const bool linear = d.kind == MPK_MK_LINEAR && phases;
      EXPECT_EQ(!e.at(5).is_null(), linear);
      EXPECT_EQ(!e.at(7).is_null(), linear);
      EXPECT_EQ(!e.at(6).is_null(), linear && staged && (d.flags & MPK_MK_F_STAGE));
      if (!linear) continue;
      EXPECT_LE(at(3), at(5));
      const uint64_t w = e.at(6).is_null() ? at(5) : at(6);
      EXPECT_LE(at(5), w);
      EXPECT_LE(w, at(7));
      EXPECT_LE(at(7), at(4));
    }
  }
}

// An input that never arrives ends the launch through the abort path with Error(Timeout)
// (never a hang), and reset() makes the session usable again.
TEST(MegakernelGpuAbort, LostEventEndsInTimeoutThenResetRecovers) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const std::string dir = std::string(MPK_TEST_DATA) + "/qwen3-f32";
  const Expected ex = read_expected(dir);
  auto m = LoadedModel::load(test_options(), dir, Backend::Gpu);
  GpuSession s(m->gpu(), opts(64), m->stats());
  s.prefill(ex.prompt.data(), ex.prompt.size());
  s.reset_event_counter_for_test(s.plan().tasks.events.size() > 1 ? 1 : 0);
  std::vector<int32_t> out;
  try {
    s.decode(2, m->config().eos_token_ids, out);
    ADD_FAILURE() << "a lost event must abort the launch";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("waited more than"), std::string::npos) << e.what();
  }
  try {
    s.prefill(ex.prompt.data(), 1);
    ADD_FAILURE() << "a session after an aborted launch must refuse work until reset";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadState);
  }
  s.reset();
  s.prefill(ex.prompt.data(), ex.prompt.size());
  out.clear();
  s.decode(ex.tokens.size(), m->config().eos_token_ids, out);
  EXPECT_EQ(out, ex.tokens);
}

}  // namespace
}  // namespace mpk::rt
