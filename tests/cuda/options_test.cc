#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/nvrtc.h"

namespace mpk::cuda {
namespace {

using Options = std::vector<std::string>;

TEST(CanonicalOptions, SpellingsOfOneOptionAgree) {
  const Options want = {"--std=c++20"};
  for (const Options& in : {Options{"--std=c++20"}, Options{"-std=c++20"}, Options{"-std c++20"},
                            Options{"--std c++20"}, Options{"  --std=c++20\t"},
                            Options{"-std", "c++20"}, Options{"--std", " c++20 "}}) {
    EXPECT_EQ(canonical_options(in), want) << ::testing::PrintToString(in);
  }
}

TEST(CanonicalOptions, ShortAliasesBecomeLongNames) {
  EXPECT_EQ(canonical_options({"-G"}), Options{"--device-debug"});
  EXPECT_EQ(canonical_options({"-lineinfo"}), Options{"--generate-line-info"});
  EXPECT_EQ(canonical_options({"-use_fast_math"}), Options{"--use_fast_math"});
  EXPECT_EQ(canonical_options({"-arch=sm_80"}), Options{"--gpu-architecture=sm_80"});
  EXPECT_EQ(canonical_options({"-Xptxas", "-v"}), Options{"--ptxas-options=-v"});
  EXPECT_EQ(canonical_options({"-rdc", "true"}), Options{"--relocatable-device-code=true"});
  EXPECT_EQ(canonical_options({"-ftz=true"}), Options{"--ftz=true"});
}

TEST(CanonicalOptions, AttachedShortForms) {
  EXPECT_EQ(canonical_options({"-DX=1"}), Options{"--define-macro=X=1"});
  EXPECT_EQ(canonical_options({"-D X=1"}), Options{"--define-macro=X=1"});
  EXPECT_EQ(canonical_options({"-D", "X=1"}), Options{"--define-macro=X=1"});
  EXPECT_EQ(canonical_options({"-I/opt/inc"}), Options{"--include-path=/opt/inc"});
  EXPECT_EQ(canonical_options({"-I /opt/inc"}), Options{"--include-path=/opt/inc"});
  EXPECT_EQ(canonical_options({"-UX"}), Options{"--undefine-macro=X"});
}

TEST(CanonicalOptions, WhitespaceAndEmptyEntries) {
  EXPECT_EQ(canonical_options({"", "   ", " -G "}), Options{"--device-debug"});
  EXPECT_TRUE(canonical_options({}).empty());
}

TEST(CanonicalOptions, OrderIsDefinedByTheFunction) {
  Options a = {"-G", "--std=c++17", "-DX=1", "-lineinfo", "--maxrregcount=64"};
  Options want = canonical_options(a);
  std::sort(a.begin(), a.end());
  do {
    EXPECT_EQ(canonical_options(a), want) << ::testing::PrintToString(a);
  } while (std::next_permutation(a.begin(), a.end()));
  EXPECT_EQ(want, (Options{"--define-macro=X=1", "--device-debug", "--generate-line-info",
                           "--maxrregcount=64", "--std=c++17"}));
}

TEST(CanonicalOptions, RepeatsAreDropped) {
  EXPECT_EQ(canonical_options({"-G", "--device-debug", "-G"}), Options{"--device-debug"});
  EXPECT_EQ(canonical_options({"-std=c++17", "--std c++17"}), Options{"--std=c++17"});
}

TEST(CanonicalOptions, RepeatedOptionWithOtherValuesKeepsItsOrder) {
  // NVRTC takes the last --std; the relative order is what it sees.
  EXPECT_EQ(canonical_options({"-std=c++20", "-G", "-std=c++17"}),
            (Options{"--device-debug", "--std=c++20", "--std=c++17"}));
}

TEST(CanonicalOptions, IncludePathsKeepSearchOrder) {
  EXPECT_EQ(canonical_options({"-I/b", "-G", "-I/a", "--include-path=/b"}),
            (Options{"--device-debug", "--include-path=/b", "--include-path=/a"}));
}

TEST(CanonicalOptions, MacrosFoldToTheirFinalState) {
  EXPECT_EQ(canonical_options({"-DX=1", "-DX=2"}), Options{"--define-macro=X=2"});
  EXPECT_EQ(canonical_options({"-DX=2", "-UX"}), Options{"--undefine-macro=X"});
  EXPECT_EQ(canonical_options({"-UX", "-DX=2"}), Options{"--define-macro=X=2"});
  EXPECT_EQ(canonical_options({"-DB", "-DA=3", "-UC", "-DF(x)=x"}),
            (Options{"--define-macro=A=3", "--define-macro=B", "--define-macro=F(x)=x",
                     "--undefine-macro=C"}));
}

TEST(CanonicalOptions, UnknownOptionsKeptAsWritten) {
  EXPECT_EQ(canonical_options({"-fancy"}), Options{"-fancy"});
  EXPECT_EQ(canonical_options({"--fancy value"}), Options{"--fancy=value"});
  EXPECT_EQ(canonical_options({"--fancy", "value"}), Options{"--fancy=value"});
  EXPECT_EQ(canonical_options({"--fancy", "-G"}), (Options{"--device-debug", "--fancy"}));
}

TEST(CanonicalOptions, Idempotent) {
  Options in = {"-I/x", "-DZ", "-Xptxas -v", "-G", "-std c++17", "-UQ", "--fancy=1"};
  Options once = canonical_options(in);
  EXPECT_EQ(canonical_options(once), once);
}

TEST(CanonicalOptions, Errors) {
  for (const Options& bad : {Options{"value"}, Options{"-G", "stray"}, Options{"-std"},
                             Options{"-D"}, Options{"--"}, Options{"-"}}) {
    try {
      canonical_options(bad);
      FAIL() << ::testing::PrintToString(bad);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
    }
  }
}

}  // namespace
}  // namespace mpk::cuda
