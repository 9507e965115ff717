// Helpers for C API tests: a runtime + model on a committed tiny fixture.
#pragma once

#include <mpk/mpk.h>

#include <gtest/gtest.h>

#include <string>

namespace mpk_test {

inline std::string fixture(const char* name) { return std::string(MPK_TEST_DATA) + "/" + name; }

struct Loaded {
  mpk_runtime* rt = nullptr;
  mpk_model* model = nullptr;
  mpk_model_info info{};
  Loaded(const std::string& dir, mpk_backend backend = MPK_BACKEND_REFERENCE) {
    mpk_runtime_config rc;
    mpk_runtime_config_init(&rc);
    EXPECT_EQ(mpk_runtime_create(&rc, &rt), MPK_OK) << mpk_last_error();
    mpk_model_config mc;
    mpk_model_config_init(&mc);
    mc.backend = backend;
    EXPECT_EQ(mpk_model_load(rt, dir.c_str(), &mc, &model), MPK_OK) << mpk_last_error();
    info.struct_size = sizeof(info);
    if (model) {
      EXPECT_EQ(mpk_model_info_get(model, &info), MPK_OK);
    }
  }
  ~Loaded() {
    mpk_model_destroy(model);
    mpk_runtime_destroy(rt);
  }
  mpk_session* session(size_t capacity) {
    mpk_session_config sc;
    mpk_session_config_init(&sc);
    sc.kv_capacity = capacity;
    mpk_session* s = nullptr;
    EXPECT_EQ(mpk_session_create(model, &sc, &s), MPK_OK) << mpk_last_error();
    return s;
  }
};

}  // namespace mpk_test
