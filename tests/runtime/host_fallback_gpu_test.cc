// The host fallback on the device: a Qwen3-shaped model with hidden_act gelu_pytorch_tanh,
// whose activation no megakernel variant implements, runs on the GPU with the activation on
// the host between launches of the megakernel's segments. Against the CPU reference: the
// logits of every teacher-forced step (activations poisoned with NaN at session start), greedy
// and sampled decode, the launch count, the host fallback's counters, shared activation
// memory, a profile session, and a lost host release ending in a timeout that a reset
// recovers from.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "gpu_device.h"
#include "ref/executor.h"
#include "runtime/gpu_backend.h"
#include "runtime/runtime.h"
#include "test_model_writer.h"

namespace mpk::rt {
namespace {

using mpk::testing::have_device;
using mpk::testing::rel_l2;
namespace mt = mpk::model::testing;

int32_t argmax(const std::vector<float>& v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

RuntimeOptions test_options() {
  RuntimeOptions o;
  o.cache_dir = std::filesystem::temp_directory_path() / ("mpk-host-test-" + std::to_string(getpid()));
  return o;
}

SessionOptions opts(size_t steps_per_launch) {
  SessionOptions o;
  o.kv_capacity = 64;
  o.steps_per_launch = steps_per_launch;
  return o;
}

TEST(HostFallbackGpu, GeluModelMatchesTheReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  mt::TempDir dir;
  mt::Json cfg = mt::qwen3_config();
  cfg["hidden_act"] = "gelu_pytorch_tanh";
  cfg["vocab_size"] = 300;
  cfg["num_hidden_layers"] = 3;
  mt::write_model(dir.path(), cfg, mt::model_tensors(cfg, DType::BF16, 21));
  auto m = LoadedModel::load(test_options(), dir.path(), Backend::Gpu);
  auto rm = LoadedModel::load(test_options(), dir.path(), Backend::Reference);
  ASSERT_EQ(m->backend(), Backend::Gpu);
  const int layers = 3, inter = cfg["intermediate_size"];
  EXPECT_EQ(m->stats().host_fallback_ops, uint64_t(layers));
  EXPECT_EQ(m->stats().host_fallback_bytes, uint64_t(layers) * 3 * uint64_t(inter) * 4);

  // Teacher-forced: the prompt (through the decode step: no tensor-core prefill for this
  // model), then one token at a time; a step is layers + 1 launches.
  const std::vector<int32_t> prompt = {17, 4, 250, 99, 3, 61, 140};
  const std::vector<int32_t> forced = {8, 212, 45, 7, 299, 0};
  Session s(m, opts(1));
  ref::Executor r(rm->model(), rm->graph(), 64);
  const uint64_t l0 = m->stats().launches;
  s.prefill(prompt.data(), prompt.size());
  r.forward(prompt.data(), prompt.size());
  EXPECT_EQ(m->stats().launches - l0, prompt.size() * (layers + 1));
  double worst = 0;
  for (size_t i = 0; i <= forced.size(); ++i) {
    const double e = rel_l2(s.logits(), r.logits());
    worst = std::max(worst, e);
    EXPECT_LE(e, 1e-3) << "step " << i;
    EXPECT_EQ(argmax(s.logits()), argmax(r.logits())) << "step " << i;
    if (i == forced.size()) break;
    s.prefill(&forced[i], 1);
    r.forward(&forced[i], 1);
  }
  std::printf("[host fallback] max relative L2 over %zu steps = %.3e\n", forced.size() + 1, worst);
  EXPECT_GT(m->stats().host_fallback_ns.load(), 0u);

  // Greedy decode, asked for in multi-step launches (a step of segments runs alone): the
  // reference's tokens.
  Session g(m, opts(4));
  ref::Executor r2(rm->model(), rm->graph(), 64);
  g.prefill(prompt.data(), prompt.size());
  r2.forward(prompt.data(), prompt.size());
  std::vector<int32_t> want;
  for (int i = 0; i < 10; ++i) {
    const int32_t next = r2.next_token();
    want.push_back(next);
    r2.forward(&next, 1);
  }
  std::vector<int32_t> got;
  const uint64_t l1 = m->stats().launches;
  g.decode(10, got);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + long(got.size())));
  EXPECT_EQ(m->stats().launches - l1, got.size() * (layers + 1));
  EXPECT_EQ(g.step_ms().size(), got.size());
  for (double ms : g.step_ms()) EXPECT_GT(ms, 0.0);

  // Sampled: the device's draw in the last segment, the reference's tokens.
  const ref::SamplingConfig sc{.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = 77};
  std::vector<int32_t> gpu, cpu;
  for (auto* out : {&gpu, &cpu}) {
    Session x(out == &cpu ? rm : m, opts(1));
    x.set_sampling(sc);
    x.prefill(prompt.data(), prompt.size());
    x.decode(12, *out);
  }
  EXPECT_EQ(gpu, cpu);

  // Shared activation memory (buffers the events prove dead reused, the host's reads and
  // writes among them): the same logits, bit for bit; and a profile session's timers cover
  // every queued task of the step's launches.
  SessionOptions so = opts(1), po = opts(1);
  so.share_activations = true;
  po.profile = true;
  Session shared(m, so), plain(m, opts(1));
  GpuSession prof(m->gpu(), po, m->stats());
  shared.prefill(prompt.data(), prompt.size());
  plain.prefill(prompt.data(), prompt.size());
  prof.prefill(prompt.data(), prompt.size());
  EXPECT_EQ(shared.logits(), plain.logits());
  EXPECT_EQ(prof.logits(), plain.logits());
  const auto rep = nlohmann::json::parse(prof.profile_json());
  EXPECT_EQ(rep.at("tasks").get<size_t>(), prof.plan().tasks.tasks.size() - size_t(layers));
  EXPECT_GT(rep.at("step_us").get<double>(), 0.0);

  // A lost release of a host task: the segment after it waits past the timeout, the launch
  // ends with Error(Timeout), and after a reset the session decodes as before.
  GpuSession lost(m->gpu(), opts(1), m->stats());
  lost.prefill(prompt.data(), prompt.size());
  const int host_event = lost.plan().tasks.tasks[size_t(lost.tables().host_tasks.at(1))].trigger;
  ASSERT_GE(host_event, 0);
  lost.reset_event_counter_for_test(host_event);
  std::vector<int32_t> none;
  try {
    lost.decode(2, {}, none);
    ADD_FAILURE() << "a lost host release must abort the step";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Timeout) << e.what();
  }
  lost.reset();
  lost.prefill(prompt.data(), prompt.size());
  std::vector<int32_t> again;
  lost.decode(10, {}, again);
  EXPECT_EQ(again, want);
}

}  // namespace
}  // namespace mpk::rt
