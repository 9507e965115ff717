// Each misuse of the C API returns its documented status and a message; nothing crashes.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "api_fixture.h"
#include "patch_fixture.h"

namespace {

using mpk_test::fixture;
using mpk_test::Loaded;

const char* kModel = "qwen3-f32";

TEST(ApiMisuse, StatusNames) {
  EXPECT_STREQ(mpk_status_name(MPK_OK), "MPK_OK");
  EXPECT_STREQ(mpk_status_name(MPK_ERROR_CAPACITY), "MPK_ERROR_CAPACITY");
  EXPECT_STREQ(mpk_status_name(static_cast<mpk_status>(12345)), "MPK_STATUS_UNKNOWN");
  EXPECT_STREQ(mpk_version(), "0.8.0");
}

TEST(ApiMisuse, RuntimeCreateArguments) {
  mpk_runtime* rt = reinterpret_cast<mpk_runtime*>(0x1);
  EXPECT_EQ(mpk_runtime_create(nullptr, &rt), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(std::string(mpk_last_error()).find("cfg is NULL"), std::string::npos);
  mpk_runtime_config rc;
  mpk_runtime_config_init(&rc);
  EXPECT_EQ(mpk_runtime_create(&rc, nullptr), MPK_ERROR_INVALID_ARGUMENT);
  rc.struct_size = 8;
  EXPECT_EQ(mpk_runtime_create(&rc, &rt), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mpk_last_error()).find("struct_size"), std::string::npos);
  mpk_runtime_config_init(&rc);
  rc.device = -1;
  EXPECT_EQ(mpk_runtime_create(&rc, &rt), MPK_ERROR_INVALID_ARGUMENT);
  mpk_runtime_config_init(&rc);
  EXPECT_EQ(rc.tune_policy, MPK_TUNE_CACHE_ONLY);
  EXPECT_GT(rc.tune_budget_s, 0);
  rc.tune_policy = static_cast<mpk_tune_policy>(3);
  EXPECT_EQ(mpk_runtime_create(&rc, &rt), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mpk_last_error()).find("tune_policy"), std::string::npos) << mpk_last_error();
  for (double budget : {0.0, -1.0, std::nan(""), double(INFINITY)}) {
    mpk_runtime_config_init(&rc);
    rc.tune_budget_s = budget;
    EXPECT_EQ(mpk_runtime_create(&rc, &rt), MPK_ERROR_INVALID_ARGUMENT) << budget;
    EXPECT_NE(std::string(mpk_last_error()).find("tune_budget_s"), std::string::npos) << mpk_last_error();
  }
  // A caller built before the tuning fields: they take their defaults, whatever follows.
  mpk_runtime_config_init(&rc);
  rc.struct_size = offsetof(mpk_runtime_config, tune_policy);
  rc.tune_policy = static_cast<mpk_tune_policy>(99);
  rc.tune_budget_s = -5;
  ASSERT_EQ(mpk_runtime_create(&rc, &rt), MPK_OK);
  mpk_runtime_destroy(rt);
  mpk_runtime_config_init(&rc);
  rc.tune_policy = MPK_TUNE_ON_MISS;
  ASSERT_EQ(mpk_runtime_create(&rc, &rt), MPK_OK);
  mpk_runtime_destroy(rt);
  mpk_runtime_config_init(&rc);
  ASSERT_EQ(mpk_runtime_create(&rc, &rt), MPK_OK);
  EXPECT_STREQ(mpk_last_error(), "");  // cleared by a successful call
  mpk_runtime_destroy(rt);
}

TEST(ApiMisuse, ModelLoadArgumentsAndMissingDirectory) {
  mpk_runtime_config rc;
  mpk_runtime_config_init(&rc);
  mpk_runtime* rt = nullptr;
  ASSERT_EQ(mpk_runtime_create(&rc, &rt), MPK_OK);
  mpk_model_config mc;
  mpk_model_config_init(&mc);
  mpk_model* m = reinterpret_cast<mpk_model*>(0x1);
  EXPECT_EQ(mpk_model_load(nullptr, fixture(kModel).c_str(), &mc, &m), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(mpk_model_load(rt, nullptr, &mc, &m), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_model_load(rt, fixture(kModel).c_str(), nullptr, &m), MPK_ERROR_INVALID_ARGUMENT);
  mc.backend = static_cast<mpk_backend>(7);
  EXPECT_EQ(mpk_model_load(rt, fixture(kModel).c_str(), &mc, &m), MPK_ERROR_INVALID_ARGUMENT);
  mpk_model_config_init(&mc);
  EXPECT_EQ(mpk_model_load(rt, "/nonexistent/model/dir", &mc, &m), MPK_ERROR_NOT_FOUND);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(mpk_last_error()).find("/nonexistent/model/dir"), std::string::npos)
      << mpk_last_error();
  // Use after a failed load: the NULL handle is rejected everywhere.
  mpk_session_config sc;
  mpk_session_config_init(&sc);
  mpk_session* s = nullptr;
  EXPECT_EQ(mpk_session_create(m, &sc, &s), MPK_ERROR_INVALID_ARGUMENT);
  mpk_model_info info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(mpk_model_info_get(m, &info), MPK_ERROR_INVALID_ARGUMENT);
  mpk_stats st{};
  st.struct_size = sizeof(st);
  EXPECT_EQ(mpk_model_stats(m, &st), MPK_ERROR_INVALID_ARGUMENT);
  mpk_model_destroy(m);
  mpk_runtime_destroy(rt);
}

TEST(ApiMisuse, GpuBackendFailsClearlyWithoutDevice) {
  mpk_runtime_config rc;
  mpk_runtime_config_init(&rc);
  mpk_runtime* rt = nullptr;
  ASSERT_EQ(mpk_runtime_create(&rc, &rt), MPK_OK);
  mpk_model_config mc;
  mpk_model_config_init(&mc);
  mc.backend = MPK_BACKEND_GPU;
  mpk_model* m = nullptr;
  mpk_status s = mpk_model_load(rt, fixture(kModel).c_str(), &mc, &m);
  if (s == MPK_OK) {
    // A GPU machine: the model runs on the megakernel, one worker per SM.
    mpk_stats st{};
    st.struct_size = sizeof(st);
    ASSERT_EQ(mpk_model_stats(m, &st), MPK_OK);
    EXPECT_EQ(st.backend, MPK_BACKEND_GPU);
    EXPECT_EQ(st.host_fallback_ops, 0u);
    EXPECT_GT(st.num_tasks, 0u);
    EXPECT_GT(st.num_workers, 0u);
    EXPECT_EQ(st.num_kernels, 1u);
    EXPECT_EQ(st.proved, 1u);
    EXPECT_GE(st.proof_obligations, 5u);  // at least one even split: five obligations
    EXPECT_GT(st.device_bytes, 0u);
  } else {
    EXPECT_EQ(s, MPK_ERROR_NO_DEVICE) << mpk_status_name(s) << ": " << mpk_last_error();
    EXPECT_EQ(m, nullptr);
    EXPECT_NE(std::string(mpk_last_error()).find("gpu"), std::string::npos) << mpk_last_error();
  }
  mpk_model_destroy(m);
  mpk_runtime_destroy(rt);
}

// The info holds the first 8 end-of-sequence ids; mpk_model_eos_token_ids gives every one.
TEST(ApiMisuse, EveryEosIdIsReadable) {
  mpk::testing::PatchedFixture fx(fixture(kModel));
  std::filesystem::remove(fx.dir() / "generation_config.json");  // only config.json's ids
  nlohmann::json config = nlohmann::json::parse(std::ifstream(fx.dir() / "config.json"));
  config["eos_token_id"] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  std::ofstream(fx.dir() / "config.json") << config.dump();
  {
    Loaded l(fx.dir().string());
    ASSERT_NE(l.model, nullptr);
    EXPECT_EQ(l.info.num_eos_token_ids, 10);
    EXPECT_EQ(l.info.eos_token_ids[7], 17);
    size_t count = 0;
    EXPECT_EQ(mpk_model_eos_token_ids(l.model, nullptr, 0, &count), MPK_OK);
    EXPECT_EQ(count, 10u);
    int32_t ids[12];
    std::fill(std::begin(ids), std::end(ids), -7);
    EXPECT_EQ(mpk_model_eos_token_ids(l.model, ids, 3, &count), MPK_OK);  // the first 3 of 10
    EXPECT_EQ(count, 10u);
    EXPECT_EQ(ids[2], 12);
    EXPECT_EQ(ids[3], -7);
    EXPECT_EQ(mpk_model_eos_token_ids(l.model, ids, 12, &count), MPK_OK);
    EXPECT_EQ(ids[9], 19);
    EXPECT_EQ(ids[10], -7);
    EXPECT_EQ(mpk_model_eos_token_ids(l.model, nullptr, 1, &count), MPK_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(mpk_model_eos_token_ids(l.model, ids, 12, nullptr), MPK_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(mpk_model_eos_token_ids(nullptr, ids, 12, &count), MPK_ERROR_INVALID_ARGUMENT);
  }
}

TEST(ApiMisuse, InfoAndStatsNeedStructSize) {
  Loaded l(fixture(kModel));
  mpk_model_info info{};
  EXPECT_EQ(mpk_model_info_get(l.model, &info), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_model_info_get(l.model, nullptr), MPK_ERROR_INVALID_ARGUMENT);
  mpk_stats st{};
  EXPECT_EQ(mpk_model_stats(l.model, &st), MPK_ERROR_INVALID_ARGUMENT);
  st.struct_size = sizeof(st);
  EXPECT_EQ(mpk_model_stats(l.model, &st), MPK_OK);
  EXPECT_EQ(st.backend, MPK_BACKEND_REFERENCE);
  EXPECT_GT(st.host_fallback_ops, 0u);
  EXPECT_EQ(st.proved, 0u);  // nothing compiled, nothing proved
  EXPECT_EQ(st.proof_obligations, 0u);
  EXPECT_EQ(st.tuned, 0);  // the reference has no parameters to tune
  EXPECT_EQ(st.tune_candidates, 0u);
  EXPECT_EQ(st.host_fallback_bytes, 0u);  // the reference copies nothing
  EXPECT_EQ(st.host_fallback_ms, 0.0);
  // A caller built before 0.8 passes the struct without host_fallback_ms: untouched.
  mpk_stats v7{};
  v7.struct_size = offsetof(mpk_stats, host_fallback_ms);
  v7.host_fallback_ms = -1;
  EXPECT_EQ(mpk_model_stats(l.model, &v7), MPK_OK);
  EXPECT_EQ(v7.tune_stages_searched, st.tune_stages_searched);
  EXPECT_EQ(v7.host_fallback_ms, -1.0);
  // A caller built before device_bytes existed: its fields are filled, nothing past them.
  mpk_stats old{};
  old.struct_size = offsetof(mpk_stats, device_bytes);
  old.device_bytes = 12345;
  EXPECT_EQ(mpk_model_stats(l.model, &old), MPK_OK);
  EXPECT_EQ(old.backend, MPK_BACKEND_REFERENCE);
  EXPECT_EQ(old.host_fallback_ops, st.host_fallback_ops);
  EXPECT_EQ(old.device_bytes, 12345u);
  old.struct_size = offsetof(mpk_stats, device_bytes) - 1;
  EXPECT_EQ(mpk_model_stats(l.model, &old), MPK_ERROR_INVALID_ARGUMENT);
}

TEST(ApiMisuse, SessionArguments) {
  Loaded l(fixture(kModel));
  mpk_session_config sc;
  mpk_session_config_init(&sc);
  mpk_session* s = nullptr;
  EXPECT_EQ(mpk_session_create(l.model, nullptr, &s), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_session_create(l.model, &sc, nullptr), MPK_ERROR_INVALID_ARGUMENT);
  sc.kv_capacity = 0;
  EXPECT_EQ(mpk_session_create(l.model, &sc, &s), MPK_ERROR_INVALID_ARGUMENT);
  sc.kv_capacity = size_t(l.info.max_position_embeddings) + 1;
  EXPECT_EQ(mpk_session_create(l.model, &sc, &s), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mpk_last_error()).find("max_position_embeddings"), std::string::npos);
  EXPECT_EQ(s, nullptr);
}

TEST(ApiMisuse, BadTokensAndStateLeaveSessionUnchanged) {
  Loaded l(fixture(kModel));
  mpk_session* s = l.session(32);
  ASSERT_NE(s, nullptr);
  const float* logits = nullptr;
  size_t vocab = 0, n = 99, pos = 99;
  int32_t out[4];
  EXPECT_EQ(mpk_session_decode(s, 4, out, &n), MPK_ERROR_BAD_STATE);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(mpk_session_logits(s, &logits, &vocab), MPK_ERROR_BAD_STATE);
  int32_t bad_high[2] = {1, l.info.vocab_size};
  EXPECT_EQ(mpk_session_prefill(s, bad_high, 2), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mpk_last_error()).find(std::to_string(l.info.vocab_size)),
            std::string::npos)
      << mpk_last_error();
  int32_t bad_neg[1] = {-3};
  EXPECT_EQ(mpk_session_prefill(s, bad_neg, 1), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_session_prefill(s, nullptr, 1), MPK_ERROR_INVALID_ARGUMENT);
  int32_t ok[2] = {3, 4};
  EXPECT_EQ(mpk_session_prefill(s, ok, 0), MPK_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(mpk_session_position(s, &pos), MPK_OK);
  EXPECT_EQ(pos, 0u);
  ASSERT_EQ(mpk_session_prefill(s, ok, 2), MPK_OK);
  EXPECT_EQ(mpk_session_decode(s, 4, nullptr, &n), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_session_decode(s, 4, out, nullptr), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_session_decode(nullptr, 4, out, &n), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_session_logits(s, nullptr, &vocab), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_session_position(nullptr, &pos), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_session_reset(nullptr), MPK_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(mpk_session_position(s, &pos), MPK_OK);
  EXPECT_EQ(pos, 2u);
  mpk_session_destroy(s);
}

TEST(ApiMisuse, KvCapacityExceeded) {
  Loaded l(fixture(kModel));
  mpk_session* s = l.session(6);
  ASSERT_NE(s, nullptr);
  int32_t seven[7] = {1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(mpk_session_prefill(s, seven, 7), MPK_ERROR_CAPACITY);
  size_t pos = 99;
  ASSERT_EQ(mpk_session_position(s, &pos), MPK_OK);
  EXPECT_EQ(pos, 0u);
  ASSERT_EQ(mpk_session_prefill(s, seven, 4), MPK_OK);
  int32_t out[8];
  size_t n = 0;
  mpk_status st = mpk_session_decode(s, 8, out, &n);
  if (st == MPK_OK) {
    // Only an end-of-sequence token may stop decoding before the cache is full.
    ASSERT_GE(n, 1u);
    bool eos = false;
    for (int i = 0; i < l.info.num_eos_token_ids && i < 8; ++i) eos |= out[n - 1] == l.info.eos_token_ids[i];
    EXPECT_TRUE(eos);
  } else {
    EXPECT_EQ(st, MPK_ERROR_CAPACITY);
    EXPECT_EQ(n, 2u);  // positions 4 and 5 filled, then the cache is full
    ASSERT_EQ(mpk_session_position(s, &pos), MPK_OK);
    EXPECT_EQ(pos, 6u);
  }
  ASSERT_EQ(mpk_session_reset(s), MPK_OK);
  ASSERT_EQ(mpk_session_position(s, &pos), MPK_OK);
  EXPECT_EQ(pos, 0u);
  EXPECT_EQ(mpk_session_prefill(s, seven, 6), MPK_OK);
  mpk_session_destroy(s);
}

TEST(ApiMisuse, LastErrorIsThreadLocal) {
  mpk_runtime* rt = nullptr;
  EXPECT_EQ(mpk_runtime_create(nullptr, &rt), MPK_ERROR_INVALID_ARGUMENT);
  std::string other = "unset";
  std::thread t([&] { other = mpk_last_error(); });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(mpk_last_error()), "");
}

TEST(ApiMisuse, SessionOutlivesModelHandle) {
  auto* l = new Loaded(fixture(kModel));
  mpk_session* s = l->session(16);
  delete l;  // model and runtime handles destroyed first
  int32_t p[2] = {7, 8};
  EXPECT_EQ(mpk_session_prefill(s, p, 2), MPK_OK);
  mpk_session_destroy(s);
}

}  // namespace
