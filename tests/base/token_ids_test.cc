#include "base/token_ids.h"

#include <gtest/gtest.h>

namespace mpk {
namespace {

using Ids = std::vector<int32_t>;

TEST(TokenIds, TakesCommaSeparatedDigits) {
  EXPECT_EQ(parse_token_ids("0"), Ids{0});
  EXPECT_EQ(parse_token_ids("5,17,300"), (Ids{5, 17, 300}));
  EXPECT_EQ(parse_token_ids("007"), Ids{7});
  EXPECT_EQ(parse_token_ids("2147483647"), Ids{INT32_MAX});
}

TEST(TokenIds, RefusesAnythingElse) {
  for (const char* bad : {"", ",", "1,", ",1", "1,,2", " 1", "1 ", "+1", "-1", "1.0", "0x10", "a", "2147483648",
                          "99999999999999999999999", "1;2", "１"})
    EXPECT_EQ(parse_token_ids(bad), std::nullopt) << "'" << bad << "'";
}

}  // namespace
}  // namespace mpk
