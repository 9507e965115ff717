// resolve_environment's switches: each moves its option only the documented way, and a value
// other than 0 or 1 is reported, not taken silently.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/log.h"
#include "runtime/runtime.h"

namespace mpk::rt {
namespace {

struct Warnings {
  std::vector<std::string> seen;
  Warnings() {
    set_log_sink([this](LogLevel l, const std::string& m) { if (l == LogLevel::Warn) seen.push_back(m); }, this);
  }
  ~Warnings() { clear_log_sink(this); }
};

RuntimeOptions with(const char* name, const char* value) {
  setenv(name, value, 1);
  RuntimeOptions o;
  o.cache_dir = "/nonexistent/mpk-env-test";  // no lookup of a default cache
  o = resolve_environment(o);
  unsetenv(name);
  return o;
}

TEST(Environment, SwitchesMoveTheirOptionOnlyTheDocumentedWay) {
  for (const char* n : {"MPK_SHARE_ACTIVATIONS", "MPK_PREFILL_OVERLAP", "MPK_PREFILL_FUSED_ROPE"}) unsetenv(n);
  const RuntimeOptions d;
  EXPECT_FALSE(d.share_activations);
  EXPECT_TRUE(d.prefill_overlap);
  EXPECT_TRUE(d.prefill_fused_rope);
  Warnings w;
  EXPECT_TRUE(with("MPK_SHARE_ACTIVATIONS", "1").share_activations);
  EXPECT_FALSE(with("MPK_SHARE_ACTIVATIONS", "0").share_activations);
  EXPECT_FALSE(with("MPK_PREFILL_OVERLAP", "0").prefill_overlap);
  EXPECT_TRUE(with("MPK_PREFILL_OVERLAP", "1").prefill_overlap);
  EXPECT_FALSE(with("MPK_PREFILL_FUSED_ROPE", "0").prefill_fused_rope);
  EXPECT_TRUE(with("MPK_PREFILL_FUSED_ROPE", "1").prefill_fused_rope);
  EXPECT_TRUE(w.seen.empty());
  // Misspelt values change nothing and are each reported by name.
  EXPECT_TRUE(with("MPK_PREFILL_FUSED_ROPE", "off").prefill_fused_rope);
  EXPECT_TRUE(with("MPK_PREFILL_OVERLAP", "false").prefill_overlap);
  EXPECT_FALSE(with("MPK_SHARE_ACTIVATIONS", "yes").share_activations);
  ASSERT_EQ(w.seen.size(), 3u);
  EXPECT_NE(w.seen[0].find("MPK_PREFILL_FUSED_ROPE='off'"), std::string::npos) << w.seen[0];
  EXPECT_NE(w.seen[1].find("MPK_PREFILL_OVERLAP='false'"), std::string::npos) << w.seen[1];
  EXPECT_NE(w.seen[2].find("MPK_SHARE_ACTIVATIONS='yes'"), std::string::npos) << w.seen[2];
}

}  // namespace
}  // namespace mpk::rt
