// The search on the device: a short search over a fixture stores a result, a cache-only load
// runs its parameters and still matches the CPU reference, a defaults-only load ignores it,
// and TunePolicy::TuneOnMiss searches once and then hits; a stored result this build cannot
// run gives way to the defaults.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "cache/cache.h"

#include "gpu_device.h"
#include "log_capture.h"
#include "ir/builder.h"
#include "model/model.h"
#include "runtime/gpu_backend.h"
#include "runtime/tune.h"
#include "test_model_writer.h"

namespace mpk::rt {
namespace {

namespace fs = std::filesystem;
using mpk::testing::have_device;
using mpk::testing::rel_l2;

const std::string kFixture = std::string(MPK_TEST_DATA) + "/qwen3-bf16";

// A folder of its own per test: nothing a test before left can answer a lookup.
struct TempCache {
  static inline int count = 0;
  fs::path dir = fs::temp_directory_path() / ("mpk-tune-gpu-" + std::to_string(getpid()) + "-" + std::to_string(count++));
  TempCache() { fs::remove_all(dir); }
  ~TempCache() { fs::remove_all(dir); }
};

std::vector<float> prompt_logits(std::shared_ptr<const LoadedModel> m) {
  SessionOptions so;
  so.kv_capacity = 64;
  so.tensor_core_prefill = false;
  Session s(m, so);
  const std::vector<int32_t> prompt = {3, 17, 250, 9, 1021, 44, 5, 600};
  s.prefill(prompt.data(), prompt.size());
  return s.logits();
}

TEST(TuneGpu, SearchStoresAResultThatCacheOnlyLoadsRun) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  TempCache cache;
  RuntimeOptions o;
  o.cache_dir = cache.dir;
  o = resolve_environment(o);
  o.mk_params.clear();
  const auto model = model::load(kFixture);
  const ir::Graph graph = ir::build(model->config);
  TuneOptions t;
  // Room for the first axis's compiles on a loaded machine: with 30 s, a run beside other GPU
  // tests and a model being written spent it all before timing one candidate.
  t.budget_s = 90;
  t.steps = 16;
  t.launches = 3;
  t.seed = 7;
  int progress_calls = 0;
  t.progress = [&](const std::string&, double done, double eta) {
    ++progress_calls;
    EXPECT_GT(done, 0);
    EXPECT_LE(done, 1);
    EXPECT_GE(eta, 0);
  };
  const TuneResult r = tune(o, *model, graph, t);
  ASSERT_FALSE(r.trials.empty());
  EXPECT_EQ(progress_calls, int(r.trials.size()));
  EXPECT_GE(r.timed, 1);
  EXPECT_GT(r.default_us, 0);
  EXPECT_GT(r.chosen_us, 0);
  std::set<std::string> changes;
  for (const TuneTrial& tr : r.trials) {
    EXPECT_TRUE(changes.insert(tr.change).second) << tr.change << " tried twice";
    const bool timed = tr.verdict == "faster" || tr.verdict == "not faster";
    EXPECT_TRUE(timed || tr.verdict.rfind("rejected: ", 0) == 0 || tr.verdict.rfind("failed test: ", 0) == 0 ||
                tr.verdict == "skipped: budget")
        << tr.verdict;
    if (timed) {
      EXPECT_LE(tr.rel_l2, t.max_rel_l2) << tr.change;
    }
    if (tr.verdict == "faster") {
      EXPECT_LT(tr.us, tr.best_us) << tr.change;
    }
  }
  ASSERT_TRUE(store_tuning(o, tuning_record(r)));

  auto tuned = LoadedModel::load(o, kFixture, Backend::Gpu);
  EXPECT_TRUE(tuned->gpu()->tuned());
  EXPECT_TRUE(tuned->stats().tuned);
  EXPECT_EQ(to_json(tuned->gpu()->params()), to_json(r.chosen));
  EXPECT_EQ(tuned->stats().tune_changed_params, uint64_t(changed_params(r.chosen, r.defaults)));
  EXPECT_EQ(tuned->stats().cache_misses, 0u);  // the search compiled it

  RuntimeOptions d = o;
  d.tune_policy = TunePolicy::DefaultsOnly;
  auto defaults = LoadedModel::load(d, kFixture, Backend::Gpu);
  EXPECT_FALSE(defaults->gpu()->tuned());
  EXPECT_EQ(to_json(defaults->gpu()->params()), to_json(r.defaults));

  auto reference = LoadedModel::load(o, kFixture, Backend::Reference);
  const std::vector<float> want = prompt_logits(reference);
  EXPECT_LE(rel_l2(prompt_logits(tuned), want), 1e-3);
  EXPECT_LE(rel_l2(prompt_logits(defaults), want), 1e-3);
}

TEST(TuneGpu, TuneOnMissSearchesOnceThenHits) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  TempCache cache;
  auto load = [&](TunePolicy policy) {
    RuntimeOptions o;
    o.cache_dir = cache.dir;
    o.tune_policy = policy;
    o.tune_budget_s = 15;
    return LoadedModel::load(o, kFixture, Backend::Gpu);
  };
  auto cold = load(TunePolicy::TuneOnMiss);
  EXPECT_TRUE(cold->stats().tuned);
  EXPECT_TRUE(cold->gpu()->tuned());
  EXPECT_GT(cold->stats().tune_ms, 0);
  EXPECT_GE(cold->stats().tune_candidates, 1u);
  EXPECT_GE(cold->stats().load_ms, cold->stats().tune_ms);
  auto warm = load(TunePolicy::TuneOnMiss);  // the result is there now: no search
  EXPECT_TRUE(warm->stats().tuned);
  EXPECT_EQ(warm->stats().tune_ms, 0);
  EXPECT_EQ(warm->stats().tune_candidates, 0u);
  EXPECT_EQ(warm->stats().cache_misses, 0u);
  EXPECT_EQ(to_json(warm->gpu()->params()), to_json(cold->gpu()->params()));
  auto plain = load(TunePolicy::DefaultsOnly);
  EXPECT_FALSE(plain->stats().tuned);
  EXPECT_EQ(plain->stats().tune_changed_params, 0u);
  // The search's models are not counted: only the one that runs.
  EXPECT_EQ(cold->stats().num_kernels, plain->stats().num_kernels);
  EXPECT_LE(rel_l2(prompt_logits(warm), prompt_logits(plain)), 1e-4);
}

TEST(TuneGpu, PrecompileFillsTheCacheTheLoadThenHits) {
  // No device is touched, but the cache key holds the driver's version.
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  TempCache dir;
  RuntimeOptions o;
  o.cache_dir = dir.dir;
  const auto m = model::load(kFixture);
  const ir::Graph g = ir::build(m->config);
  const MegakernelParams p = parse_params("rows_per_warp=1", default_params(int(m->config.head_dim), 1 << 20, 3, 132));
  const cuda::PtxasInfo info = precompile_megakernel(o, g, DType::BF16, 132, "sm_90a", p);
  cache::CacheOptions co;
  co.path = o.cache_dir / "kernels.db";
  auto entries = [&] { return cache::Cache(co).list(); };
  ASSERT_EQ(entries().size(), 1u);
  const std::string record = entries()[0].verification_json;
  const size_t ptxas = record.find("\"ptxas\"");
  EXPECT_GT(info.registers, 0) << (ptxas == std::string::npos ? "no ptxas figures in " + record.substr(0, 200)
                                                              : record.substr(ptxas, 200));
  EXPECT_EQ(info.spill_store_bytes, 0);
  const nlohmann::json key = nlohmann::json::parse(entries()[0].key_text);
  EXPECT_EQ(key["arch"], "sm_90a");
  const std::string layout = key["task"]["layout"].get<std::string>();
  EXPECT_NE(layout.find("\"rows_per_warp\":1,"), std::string::npos) << layout;
  // The entry carries the plan's proof record.
  EXPECT_TRUE(entries()[0].verified) << entries()[0].verification_json.substr(0, 200);
  // A hit, with the figures the build recorded.
  EXPECT_EQ(precompile_megakernel(o, g, DType::BF16, 132, "sm_90a", p).registers, info.registers);
  EXPECT_EQ(entries().size(), 1u);
  // On this device, with its own arch and SM count, a load with the same parameters hits.
  o = resolve_environment(o);
  const auto on_device = LoadedModel::load(o, kFixture, Backend::Gpu);
  const GpuModel& gm = *on_device->gpu();
  RuntimeOptions o2 = o;
  o2.cache_dir = dir.dir / "second";
  precompile_megakernel(o2, g, gm.weight_dtype(), gm.num_workers(), gm.arch(), p);
  o2.mk_params = to_text(p);
  const auto hit = LoadedModel::load(o2, kFixture, Backend::Gpu);
  EXPECT_EQ(hit->stats().cache_misses + 1, hit->stats().num_kernels);  // the prefill's, not the megakernel
}

// A stored result whose parameters this build accepts but cannot run (here: an attention built
// for heads of at most 64 on a model with heads of 128, refused when the load builds its
// tables) does not fail the load: LoadedModel::load warns and runs the defaults, and says so.
TEST(TuneGpu, AResultThatFailsToBuildGivesWayToTheDefaults) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  namespace mt = mpk::model::testing;
  mt::TempDir model_dir;
  mt::Json cfg = mt::qwen3_config();
  cfg["head_dim"] = 128;
  cfg["vocab_size"] = 1100;  // prompt_logits' tokens
  mt::write_model(model_dir.path(), cfg, mt::model_tensors(cfg, DType::BF16, 17));
  TempCache cache;
  RuntimeOptions o;
  o.cache_dir = cache.dir;
  o = resolve_environment(o);
  o.mk_params.clear();
  o.tune_policy = TunePolicy::DefaultsOnly;
  auto plain = LoadedModel::load(o, model_dir.path(), Backend::Gpu);
  ASSERT_EQ(plain->backend(), Backend::Gpu);
  MegakernelParams narrow = plain->gpu()->default_params();
  ASSERT_EQ(narrow.max_head_dim, 128);
  narrow.max_head_dim = 64;
  cache::Tuning t;
  t.signature_text = plain->gpu()->tuning_signature();
  t.params_json = to_json(narrow);
  t.record_json = "{}";
  t.time_us = 90;
  t.default_time_us = 100;
  ASSERT_TRUE(store_tuning(o, t));
  o.tune_policy = TunePolicy::CacheOnly;
  LogCapture logs;
  auto loaded = LoadedModel::load(o, model_dir.path(), Backend::Gpu);
  ASSERT_EQ(loaded->backend(), Backend::Gpu);
  EXPECT_NE(logs.text().find("loading with the default parameters"), std::string::npos) << logs.text();
  EXPECT_NE(logs.text().find("max_head_dim 64"), std::string::npos) << logs.text();
  EXPECT_FALSE(loaded->gpu()->tuned());
  EXPECT_FALSE(loaded->stats().tuned);
  EXPECT_EQ(loaded->stats().tune_changed_params, 0u);
  EXPECT_EQ(to_json(loaded->gpu()->params()), to_json(plain->gpu()->default_params()));
  EXPECT_EQ(loaded->stats().cache_misses, 0u);  // the defaults' kernels, built by the first load
  EXPECT_LE(rel_l2(prompt_logits(loaded), prompt_logits(plain)), 1e-4);
}

}  // namespace
}  // namespace mpk::rt
