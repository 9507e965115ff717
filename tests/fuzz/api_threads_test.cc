// Several sessions of one model on several threads, through the C API only: the header says a
// model is thread-safe and shared by sessions, a session is used by one thread at a time and
// mpk_last_error() is per thread. Built by every build; the sanitizer CI runs it under TSan
// (tools/ci/tsan.sh) and ASan.
#include <mpk/mpk.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Expected {
  std::vector<int32_t> prompt, tokens;
};

Expected read_expected(const std::string& dir) {
  std::ifstream f(dir + "/expected.json");
  auto j = nlohmann::json::parse(f);
  return {j["prompt"].get<std::vector<int32_t>>(), j["tokens"].get<std::vector<int32_t>>()};
}

class ApiThreads : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    dir_ = std::string(MPK_TEST_DATA) + "/qwen3-f32";
    mpk_runtime_config rc;
    mpk_runtime_config_init(&rc);
    rc.num_threads = GetParam();  // the reference backend's own worker threads, or all cores
    ASSERT_EQ(mpk_runtime_create(&rc, &rt_), MPK_OK) << mpk_last_error();
    mpk_model_config mc;
    mpk_model_config_init(&mc);
    mc.backend = MPK_BACKEND_REFERENCE;
    ASSERT_EQ(mpk_model_load(rt_, dir_.c_str(), &mc, &model_), MPK_OK) << mpk_last_error();
  }
  void TearDown() override {
    mpk_model_destroy(model_);
    mpk_runtime_destroy(rt_);
  }
  std::string dir_;
  mpk_runtime* rt_ = nullptr;
  mpk_model* model_ = nullptr;
};

TEST_P(ApiThreads, SessionsOnSeveralThreadsDecodeTheGoldenTokens) {
  const Expected want = read_expected(dir_);
  constexpr int kThreads = 4, kRounds = 3;
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        mpk_session_config sc;
        mpk_session_config_init(&sc);
        sc.kv_capacity = 64 + size_t(t);
        mpk_session* s = nullptr;
        if (mpk_session_create(model_, &sc, &s) != MPK_OK) {
          ++failures;
          return;
        }
        // Feed the prompt in chunks that differ by thread: the result must not depend on it.
        const size_t chunk = size_t(1 + t % 3);
        bool ok = true;
        for (size_t i = 0; ok && i < want.prompt.size(); i += chunk)
          ok = mpk_session_prefill(s, want.prompt.data() + i,
                                   std::min(chunk, want.prompt.size() - i)) == MPK_OK;
        std::vector<int32_t> got(want.tokens.size());
        size_t n = 0;
        ok = ok && mpk_session_decode(s, got.size(), got.data(), &n) == MPK_OK;
        got.resize(n);
        if (!ok || got != want.tokens) ++failures;
        // A failing call on this thread sets this thread's message only.
        if (mpk_session_prefill(s, nullptr, 1) != MPK_ERROR_INVALID_ARGUMENT ||
            std::strstr(mpk_last_error(), "tokens") == nullptr)
          ++failures;
        mpk_session_destroy(s);
      }
    });
  }
  // Readers of the shared model while the sessions run.
  std::thread reader([&] {
    while (!done.load()) {
      mpk_stats st;
      st.struct_size = sizeof st;
      mpk_model_info info;
      info.struct_size = sizeof info;
      if (mpk_model_stats(model_, &st) != MPK_OK || mpk_model_info_get(model_, &info) != MPK_OK ||
          std::strlen(mpk_last_error()) != 0)
        ++failures;
    }
  });
  for (auto& w : workers) w.join();
  done = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);

  mpk_stats st;
  st.struct_size = sizeof st;
  ASSERT_EQ(mpk_model_stats(model_, &st), MPK_OK);
  // Every prompt token and every decode step fed a token (the last decoded one is not fed).
  EXPECT_GE(st.tokens, uint64_t(kThreads * kRounds * want.prompt.size()));
}

INSTANTIATE_TEST_SUITE_P(HostThreads, ApiThreads, ::testing::Values(1, 0),
                         [](const auto& info) { return info.param ? "One" : "AllCores"; });

}  // namespace
