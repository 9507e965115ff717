// The search's pieces that need no GPU: parameters as JSON and text, the search axes, the
// signature results are stored under, the record of a search, and storing and finding results
// in a kernel cache (tune_gpu_test.cc runs the search itself).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cache/sha256.h"
#include "cuda/driver.h"
#include "ir/builder.h"
#include "model/model.h"
#include "runtime/kernel_params.h"
#include "runtime/tune.h"

namespace mpk::rt {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("mpk-tune-test-" + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST(TuneParams, JsonAndTextRoundTrip) {
  MegakernelParams p = default_params(128, 1'192'000'000, 28, 132);
  p.rows_per_warp = 3;
  p.merge_batch = 16;
  EXPECT_EQ(to_json(params_from_json(to_json(p))), to_json(p));
  EXPECT_EQ(to_json(parse_params(to_text(p))), to_json(p));
  EXPECT_EQ(changed_params(p, p), 0);
  EXPECT_EQ(changed_params(p, default_params(128, 1'192'000'000, 28, 132)), 2);
  // rows_per_warp and merge_batch act on the linear and merge stage classes.
  EXPECT_EQ(changed_stages(p, default_params(128, 1'192'000'000, 28, 132)),
            (std::vector<std::string>{"linear", "merge"}));
  EXPECT_TRUE(changed_stages(p, p).empty());
  // The controller warp and block_threads both act on the worker: counted once.
  MegakernelParams w = p;
  w.controller_warp = !p.controller_warp;
  w.block_threads = p.block_threads == 512 ? 480 : 512;
  EXPECT_EQ(changed_stages(w, p), std::vector<std::string>{"worker"});
  // A field an axis's values set besides its own: stage_late on the weight ring's axis.
  MegakernelParams late = p;
  late.stage_late = 1;
  late.stage_weights = 1;
  p.stage_weights = 1;
  EXPECT_EQ(changed_stages(late, p), std::vector<std::string>{"linear"});
  const auto ring = std::find_if(search_axes().begin(), search_axes().end(),
                                 [](const ParamAxis& a) { return std::string(a.name) == "stage_weights"; });
  ASSERT_NE(ring, search_axes().end());
  EXPECT_EQ(axis_fields(*ring), (std::vector<std::string>{"stage_weights", "stage_late"}));
  // stage_late times the ring's copies: without the ring it is refused.
  EXPECT_THROW(parse_params("stage_late=1"), Error);
  // Fields a result lacks keep the base's values.
  EXPECT_EQ(params_from_json(R"({"rows_per_warp":1})", p).merge_batch, 16);
  EXPECT_EQ(params_from_json(R"({"rows_per_warp":1})", p).rows_per_warp, 1);
  for (const char* bad : {"", "[]", "{", R"({"rows_per_warp":9})", R"({"rows_per_warp":"2"})",
                          R"({"rows_per_warp":2.5})", R"({"no_such":1})", R"({"rows_per_warp":null})"}) {
    try {
      (void)params_from_json(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << bad;
    }
  }
}

TEST(TuneParams, EveryAxisChangeIsValidAroundBothDefaults) {
  for (const MegakernelParams& base :
       {default_params(128, 1'192'000'000, 28, 132), default_params(128, 16'000'000'000, 36, 132)}) {
    for (const ParamAxis& a : search_axes()) {
      EXPECT_GE(a.changes.size(), 2u) << a.name;
      for (const std::string& c : a.changes) {
        EXPECT_EQ(c.rfind(std::string(a.name) + "=", 0) == 0 || c.find(std::string(",") + a.name + "=") != std::string::npos,
                  true)
            << c;
        MegakernelParams p;
        ASSERT_NO_THROW(p = parse_params(c, base)) << c;
        EXPECT_LE(changed_params(p, base), 2) << c;
      }
    }
  }
}

TEST(TuneSignature, CanonicalAndSpecific) {
  const auto m = model::load(std::string(MPK_TEST_DATA) + "/qwen3-bf16");
  const ir::Graph g = ir::build(m->config);
  const std::string a = tuning_signature_text(g, DType::BF16, 132, "NVIDIA H200", "sm_90a");
  EXPECT_EQ(a, tuning_signature_text(g, DType::BF16, 132, "NVIDIA H200", "sm_90a"));
  const nlohmann::json j = nlohmann::json::parse(a);
  EXPECT_EQ(j["workers"], 132);
  EXPECT_EQ(j["device"], "NVIDIA H200");
  EXPECT_EQ(j["shape"][3], m->config.num_layers);
  EXPECT_NE(a, tuning_signature_text(g, DType::BF16, 114, "NVIDIA H200", "sm_90a"));
  EXPECT_NE(a, tuning_signature_text(g, DType::BF16, 132, "NVIDIA H100", "sm_90a"));
  EXPECT_NE(a, tuning_signature_text(g, DType::F16, 132, "NVIDIA H200", "sm_90a"));
}

TuneResult sample_result() {
  TuneResult r;
  r.signature_text = R"({"model":"x"})";
  r.defaults = default_params(128, 1'192'000'000, 28, 132);
  r.chosen = parse_params("rows_per_warp=1", r.defaults);
  r.default_us = 1000;
  r.chosen_us = 950;
  r.seed = 3;
  r.axes = {"rows_per_warp", "heads_per_pass", "merge_batch", "block_threads", "fold_down"};
  r.first_position = 39;
  r.steps = 300;
  r.trials = {{"rows_per_warp", "linear", "rows_per_warp=1", "faster", 950, 1001, 1e-6, 5000},
              {"merge_batch", "merge", "merge_batch=4", "not faster", 948, 951, 1e-6, 5000},
              {"heads_per_pass", "attention", "heads_per_pass=8", "not faster", 960, 950, 1e-6, 5000},
              {"fold_down", "MLP", "fold_down=1", "failed test: logits", 0, 0, 1, 3000},
              {"block_threads", "worker", "block_threads=512", "rejected: shared memory", 0, 0, 0, 100}};
  r.timed = 3;
  r.failed = 1;
  r.rejected = 1;
  return r;
}

TEST(TuneRecord, HoldsTheSearch) {
  const cache::Tuning t = tuning_record(sample_result());
  EXPECT_EQ(nlohmann::json::parse(t.params_json)["rows_per_warp"], 1);
  EXPECT_DOUBLE_EQ(t.time_us, 950);
  EXPECT_DOUBLE_EQ(t.default_time_us, 1000);
  const nlohmann::json rec = nlohmann::json::parse(t.record_json);
  EXPECT_EQ(rec["counts"]["tried"], 5);
  EXPECT_EQ(rec["counts"]["timed"], 3);
  EXPECT_EQ(rec["counts"]["rejected"], 1);
  EXPECT_EQ(rec["counts"]["failed_test"], 1);
  EXPECT_EQ(rec["trials"].size(), 5u);
  EXPECT_EQ(rec["seed"], 3);
  EXPECT_EQ(rec["axes"].size(), 5u);
  EXPECT_EQ(rec["axes"][0], "rows_per_warp");
  EXPECT_EQ(rec["timed_positions"], nlohmann::json::array({39, 338}));
  // The closest loser relative to the best of its own comparison.
  EXPECT_EQ(rec["runner_up"]["change"], "merge_batch=4");
  EXPECT_NEAR(rec["runner_up"]["margin"].get<double>(), 948.0 / 951 - 1, 1e-12);
  // The stats' stage classes searched: those with a timed candidate (MLP's failed its test).
  EXPECT_EQ(timed_stages(sample_result()), (std::vector<std::string>{"linear", "merge", "attention"}));
}

TEST(TuneRecord, StoredAndFoundThroughTheCache) {
  TempDir dir;
  RuntimeOptions o;
  o.cache_dir = dir.path / "cache";
  const cache::Tuning t = tuning_record(sample_result());
  EXPECT_FALSE(find_tuning(o, t.signature_text));
  ASSERT_TRUE(store_tuning(o, t));
  const auto got = find_tuning(o, t.signature_text);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->params_json, t.params_json);
  EXPECT_EQ(got->signature, cache::sha256_hex(t.signature_text));
  EXPECT_FALSE(find_tuning(o, R"({"model":"y"})"));
}

TEST(TuneRecord, NoUsableCacheIsNotAnError) {
  TempDir dir;
  RuntimeOptions o;
  std::ofstream(dir.path / "file") << "x";
  o.cache_dir = dir.path / "file";  // a file where the folder should be
  const cache::Tuning t = tuning_record(sample_result());
  EXPECT_FALSE(store_tuning(o, t));
  EXPECT_FALSE(find_tuning(o, t.signature_text));
  o.cache_dir.clear();
  EXPECT_FALSE(store_tuning(o, t));
}

TEST(TuneSearch, RefusesBadOptionsAndNeedsADevice) {
  const auto m = model::load(std::string(MPK_TEST_DATA) + "/qwen3-bf16");
  const ir::Graph g = ir::build(m->config);
  RuntimeOptions o;
  // Each refused before anything runs: InvalidArgument naming `what`.
  auto refused = [&](const TuneOptions& t, const std::string& what) {
    try {
      (void)tune(o, *m, g, t);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  TuneOptions t;
  t.steps = 0;
  refused(t, "steps");
  t = TuneOptions{};
  t.prompt_tokens = int(m->config.max_position_embeddings);  // past the model's positions
  refused(t, "positions");
  t = TuneOptions{};
  t.axes = {"kv_splits", "no_such_axis"};
  refused(t, "no_such_axis");
  bool device = false;
  try {
    device = cuda::driver_available() && cuda::device_count() > 0;
  } catch (const Error&) {
  }
  if (device) GTEST_SKIP() << "a device is present: tune_gpu_test.cc runs the search";
  try {
    (void)tune(resolve_environment(o), *m, g, TuneOptions{});
    ADD_FAILURE() << "searched without a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NoDevice) << e.what();
  }
}

}  // namespace
}  // namespace mpk::rt
