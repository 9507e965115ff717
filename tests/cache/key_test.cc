#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "cache/paths.h"
#include "cache/sha256.h"
#include "cuda/nvrtc.h"
#include "test_util.h"

namespace mpk::cache {
namespace {

using testing::make_key;
using Options = std::vector<std::string>;

TEST(CacheKey, SpellingAndOrderOfIndependentOptionsDoNotMatter) {
  CacheKey a = make_key(0), b = make_key(0);
  a.compile_options = {"-O3", "--std=c++17", "--gpu-architecture=sm_90a", "-lineinfo"};
  b.compile_options = {" -lineinfo", "--gpu-architecture", "sm_90a", "--std=c++17\t", "-O3", "-O3"};
  EXPECT_EQ(key_digest(a), key_digest(b));
  EXPECT_EQ(canonical_key_text(a), canonical_key_text(b));
}

// The key holds the options exactly as NVRTC is given them, so what decides the compiled
// code decides the key.
TEST(CacheKey, OptionsAreTheFormTheCompilerIsGiven) {
  CacheKey k = make_key(0);
  k.compile_options = {"-I/b", "-DX=1", "-G", "-I /a", "-DX=2", "--std", "c++17"};
  auto text = nlohmann::json::parse(canonical_key_text(k));
  EXPECT_EQ(text["options"].get<Options>(), cuda::canonical_options(k.compile_options));
}

// Include paths are searched in order, so the first one holding a header wins: swapping
// them may compile other code and must not hit the other order's entry.
TEST(CacheKey, IncludePathOrderChangesTheKey) {
  CacheKey a = make_key(0), b = make_key(0);
  a.compile_options = {"--std=c++17", "-I/opt/a", "-I/opt/b"};
  b.compile_options = {"--std=c++17", "-I/opt/b", "-I/opt/a"};
  EXPECT_NE(key_digest(a), key_digest(b));
  b.compile_options = {"--include-path=/opt/a", "--std=c++17", "-I", "/opt/b"};
  EXPECT_EQ(key_digest(a), key_digest(b));  // same search order, other spelling
}

TEST(CacheKey, LastMacroDefinitionDecides) {
  CacheKey a = make_key(0), b = make_key(0);
  a.compile_options = {"-DTILE=64", "-DTILE=128"};
  b.compile_options = {"-DTILE=128", "-DTILE=64"};
  EXPECT_NE(key_digest(a), key_digest(b));
  b.compile_options = {"--define-macro=TILE=128"};
  EXPECT_EQ(key_digest(a), key_digest(b));
}

TEST(CacheKey, MalformedOptionsAreRejected) {
  CacheKey k = make_key(0);
  k.compile_options = {"-DX=1", "stray"};
  try {
    key_digest(k);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  }
}

TEST(CacheKey, EveryFieldChangesTheKey) {
  const std::vector<std::pair<const char*, std::function<void(CacheKey&)>>> edits = {
      {"op_kind", [](CacheKey& k) { k.task.op_kind = "gemm"; }},
      {"fused_ops added", [](CacheKey& k) { k.task.fused_ops.push_back("silu"); }},
      {"fused_ops order", [](CacheKey& k) { k.task.fused_ops = {"silu", "rmsnorm"}; }},
      {"fused_ops removed", [](CacheKey& k) { k.task.fused_ops.clear(); }},
      {"shape dim", [](CacheKey& k) { k.task.shapes[0][0] = 4097; }},
      {"shape rank", [](CacheKey& k) { k.task.shapes[1].push_back(1); }},
      {"dtype", [](CacheKey& k) { k.task.dtypes[0] = "f16"; }},
      {"layout", [](CacheKey& k) { k.task.layout = "col_major"; }},
      {"arch suffix", [](CacheKey& k) { k.arch = "sm_90"; }},
      {"arch", [](CacheKey& k) { k.arch = "sm_100a"; }},
      {"nvrtc", [](CacheKey& k) { k.nvrtc_version = "13.1"; }},
      {"driver", [](CacheKey& k) { k.driver_version = "13010"; }},
      {"codegen", [](CacheKey& k) { k.codegen_version = "2"; }},
      {"option added", [](CacheKey& k) { k.compile_options.push_back("-lineinfo"); }},
      {"option value", [](CacheKey& k) { k.compile_options[0] = "-O2"; }},
      {"source", [](CacheKey& k) { k.source_hash = "other"; }},
  };
  CacheKey base = make_key(0);
  base.task.fused_ops = {"rmsnorm", "silu"};
  const std::string base_digest = key_digest(base);
  std::set<std::string> seen{base_digest};
  for (const auto& [name, edit] : edits) {
    CacheKey k = base;
    edit(k);
    std::string d = key_digest(k);
    EXPECT_NE(d, base_digest) << name;
    EXPECT_TRUE(seen.insert(d).second) << name << " collides with another edit";
  }
}

TEST(CacheKey, ListBoundariesAreUnambiguous) {
  CacheKey a = make_key(0), b = make_key(0);
  a.task.shapes = {{1, 2}, {3}};
  b.task.shapes = {{1}, {2, 3}};
  EXPECT_NE(key_digest(a), key_digest(b));
  a.task.fused_ops = {"a,b"};
  b.task.fused_ops = {"a", "b"};
  EXPECT_NE(key_digest(a), key_digest(b));
}

// Pins the serialization: if this changes, every user's cache is invalidated, and kKeyFormat
// must be bumped on purpose.
TEST(CacheKey, CanonicalTextIsStable) {
  CacheKey k = make_key(0);
  EXPECT_EQ(canonical_key_text(k),
            R"({"arch":"sm_90a","codegen":"1","driver":"13000","format":"mpk-kernel-key/2",)"
            R"("nvrtc":"13.0","options":["-O3","--std=c++17"],"source":"source-0",)"
            R"("task":{"dtypes":["bf16","bf16"],"fused":["rmsnorm"],"layout":"row_major",)"
            R"("op":"gemv","shapes":[[4096,1024],[1024]]}})");
  std::string d = key_digest(k);
  EXPECT_TRUE(is_sha256_hex(d));
  EXPECT_EQ(d, sha256_hex(canonical_key_text(k)));
}

TEST(CacheKey, RejectsIncompleteOrInvalidKeys) {
  CacheKey k = make_key(0);
  k.arch.clear();
  EXPECT_THROW(key_digest(k), Error);
  k = make_key(0);
  k.task.op_kind.clear();
  try {
    key_digest(k);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  }
  k = make_key(0);
  k.source_hash = "\xff\xfe";
  try {
    key_digest(k);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  }
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_FALSE(is_sha256_hex("abc"));
}

TEST(EntryRules, VerifiedAndBetter) {
  EXPECT_TRUE(is_verified(R"({"passed":true})"));
  EXPECT_FALSE(is_verified(R"({"passed":false})"));
  EXPECT_FALSE(is_verified(R"({"passed":"yes"})"));
  EXPECT_FALSE(is_verified("{}"));
  EXPECT_FALSE(is_verified("not json"));
  EXPECT_TRUE(is_better(true, 20.0, false, 1.0));     // verified beats faster unverified
  EXPECT_TRUE(is_better(true, 1.0, true, 2.0));       // faster wins between verified
  EXPECT_FALSE(is_better(true, 2.0, true, 2.0));      // ties are not better
  EXPECT_TRUE(is_better(true, 5.0, true, std::nullopt));  // timed beats untimed
  EXPECT_FALSE(is_better(true, std::nullopt, true, 5.0));
  EXPECT_FALSE(is_better(false, 1.0, true, 9.0));
}

TEST(Paths, ParseByteSize) {
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("512K"), 512u << 10);
  EXPECT_EQ(parse_byte_size("64MiB"), uint64_t(64) << 20);
  EXPECT_EQ(parse_byte_size("2g"), uint64_t(2) << 30);
  EXPECT_EQ(parse_byte_size("1TB"), uint64_t(1) << 40);
  EXPECT_EQ(parse_byte_size(""), std::nullopt);
  EXPECT_EQ(parse_byte_size("-1"), std::nullopt);
  EXPECT_EQ(parse_byte_size("12X"), std::nullopt);
  EXPECT_EQ(parse_byte_size("99999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_byte_size("99999999999T"), std::nullopt);
}

// Sets (or with nullptr unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Paths, DefaultLocationFollowsEnvironment) {
  {
    ScopedEnv dir("MPK_CACHE_DIR", "/some/dir");
    EXPECT_EQ(default_cache_dir(), std::filesystem::path("/some/dir"));
    EXPECT_EQ(default_cache_path(), std::filesystem::path("/some/dir/kernels.db"));
  }
  ScopedEnv dir("MPK_CACHE_DIR", nullptr);
  {
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(default_cache_dir(), std::filesystem::path("/home/u/.cache/mpk"));
    EXPECT_EQ(default_cache_path(), std::filesystem::path("/home/u/.cache/mpk/kernels.db"));
  }
  ScopedEnv empty("MPK_CACHE_DIR", "");
  ScopedEnv home("HOME", "");
  EXPECT_EQ(default_cache_path(), default_cache_dir() / "kernels.db");
}

// Without HOME the account's home from the password database applies (one rule for every
// caller), never a shared folder.
TEST(Paths, WithoutHomeTheAccountHomeIsUsed) {
  ScopedEnv dir("MPK_CACHE_DIR", nullptr);
  ScopedEnv home("HOME", nullptr);
  passwd* pw = getpwuid(geteuid());
  if (!pw || !pw->pw_dir || pw->pw_dir[0] != '/') {
    try {
      default_cache_dir();
      FAIL() << "expected an error without any home";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Cache);
      EXPECT_NE(std::string(e.what()).find("MPK_CACHE_DIR"), std::string::npos) << e.what();
    }
    return;
  }
  EXPECT_EQ(default_cache_dir(), std::filesystem::path(pw->pw_dir) / ".cache" / "mpk");
}

}  // namespace
}  // namespace mpk::cache
