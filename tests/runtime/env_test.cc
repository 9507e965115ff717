// resolve_environment's switches: each moves its option only the documented way, and a value
// other than 0 or 1 is reported, not taken silently.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "log_capture.h"
#include "runtime/runtime.h"

namespace mpk::rt {
namespace {

RuntimeOptions with(const char* name, const char* value) {
  setenv(name, value, 1);
  RuntimeOptions o;
  o.cache_dir = "/nonexistent/mpk-env-test";  // no lookup of a default cache
  o = resolve_environment(o);
  unsetenv(name);
  return o;
}

TEST(Environment, SwitchesMoveTheirOptionOnlyTheDocumentedWay) {
  for (const char* n : {"MPK_SHARE_ACTIVATIONS", "MPK_PREFILL_OVERLAP", "MPK_PREFILL_FUSED_ROPE", "MPK_PREFILL_STREAMK"})
    unsetenv(n);
  const RuntimeOptions d;
  EXPECT_FALSE(d.share_activations);
  EXPECT_TRUE(d.prefill_overlap);
  EXPECT_TRUE(d.prefill_fused_rope);
  EXPECT_FALSE(d.prefill_streamk);
  LogCapture w;
  EXPECT_TRUE(with("MPK_SHARE_ACTIVATIONS", "1").share_activations);
  EXPECT_FALSE(with("MPK_SHARE_ACTIVATIONS", "0").share_activations);
  EXPECT_FALSE(with("MPK_PREFILL_OVERLAP", "0").prefill_overlap);
  EXPECT_TRUE(with("MPK_PREFILL_OVERLAP", "1").prefill_overlap);
  EXPECT_FALSE(with("MPK_PREFILL_FUSED_ROPE", "0").prefill_fused_rope);
  EXPECT_TRUE(with("MPK_PREFILL_FUSED_ROPE", "1").prefill_fused_rope);
  EXPECT_TRUE(with("MPK_PREFILL_STREAMK", "1").prefill_streamk);
  EXPECT_FALSE(with("MPK_PREFILL_STREAMK", "0").prefill_streamk);
  EXPECT_EQ(w.text(), "");
  // Misspelt values change nothing and are each reported by name.
  EXPECT_TRUE(with("MPK_PREFILL_FUSED_ROPE", "off").prefill_fused_rope);
  EXPECT_TRUE(with("MPK_PREFILL_OVERLAP", "false").prefill_overlap);
  EXPECT_FALSE(with("MPK_SHARE_ACTIVATIONS", "yes").share_activations);
  EXPECT_FALSE(with("MPK_PREFILL_STREAMK", "no").prefill_streamk);
  const std::string seen = w.text();
  EXPECT_EQ(std::count(seen.begin(), seen.end(), '\n'), 4) << seen;
  for (const char* v : {"MPK_PREFILL_FUSED_ROPE='off'", "MPK_PREFILL_OVERLAP='false'", "MPK_SHARE_ACTIVATIONS='yes'",
                        "MPK_PREFILL_STREAMK='no'"})
    EXPECT_NE(seen.find(v), std::string::npos) << v << " in\n" << seen;
}

}  // namespace
}  // namespace mpk::rt
