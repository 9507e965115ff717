#include "base/log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mpk {
namespace {

TEST(Log, ClearingAnOldOwnerKeepsTheCurrentSink) {
  std::vector<std::string> a, b;
  int owner_a = 0, owner_b = 0;
  set_log_sink([&](LogLevel, const std::string& m) { a.push_back(m); }, &owner_a);
  set_log_sink([&](LogLevel, const std::string& m) { b.push_back(m); }, &owner_b);
  clear_log_sink(&owner_a);  // no longer installed: nothing changes
  log_message(LogLevel::Error, "one");
  clear_log_sink(&owner_b);
  EXPECT_TRUE(a.empty());
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0], "one");
}

TEST(Log, SinkMayLogFromInsideTheCallback) {
  int calls = 0, owner = 0;
  set_log_sink(
      [&](LogLevel, const std::string& m) {
        if (++calls == 1) log_message(LogLevel::Error, m + " again");  // must not deadlock
      },
      &owner);
  log_message(LogLevel::Error, "x");
  clear_log_sink(&owner);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace mpk
