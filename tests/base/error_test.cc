#include "base/error.h"

#include <gtest/gtest.h>

namespace mpk {
namespace {

TEST(Error, CheckStreamsMessageAndKind) {
  int vocab = 10;
  try {
    MPK_CHECK(vocab > 20, InvalidArgument) << "vocab " << vocab << " too small";
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_STREQ(e.what(), "vocab 10 too small");
  }
}

TEST(Error, PassingCheckDoesNotEvaluateMessage) {
  int evaluated = 0;
  auto side = [&] { return ++evaluated; };
  MPK_CHECK(true, Internal) << side();
  EXPECT_EQ(evaluated, 0);
}

TEST(Error, InternalCheckNamesCondition) {
  try {
    MPK_ICHECK(1 + 1 == 3) << "math";
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_NE(std::string(e.what()).find("1 + 1 == 3"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("error_test.cc"), std::string::npos);
  }
}

TEST(Error, ExpectedHoldsValueOrError) {
  Expected<int> good(3);
  EXPECT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  Expected<int> bad(Error(ErrorKind::Compile, "nope"));
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::Compile);
  EXPECT_THROW(bad.value(), Error);
}

}  // namespace
}  // namespace mpk
