// A kernel compiled through the NVRTC service and published by one process is loaded back
// from the cache by a second process, launched, and its result checked.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cache/cache.h"
#include "cuda/driver.h"

extern char** environ;

namespace {

int run_peer(const std::string& role, const std::string& db) {
  std::string exe = std::filesystem::path(std::filesystem::read_symlink("/proc/self/exe"))
                        .parent_path() / "mpk_cache_peer";
  std::vector<char*> argv = {exe.data(), const_cast<char*>(role.c_str()),
                             const_cast<char*>(db.c_str()), nullptr};
  pid_t pid;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

TEST(CacheRoundTripGpu, SecondProcessLoadsAndLaunches) {
  if (!mpk::cuda::driver_available() || mpk::cuda::device_count() == 0)
    GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  auto dir = std::filesystem::temp_directory_path() / ("mpk-roundtrip-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string db = (dir / "kernels.db").string();
  EXPECT_EQ(run_peer("load", db), 3) << "an empty cache must miss";
  ASSERT_EQ(run_peer("publish", db), 0);
  ASSERT_EQ(run_peer("load", db), 0);
  {
    mpk::cache::CacheOptions o;
    o.path = db;
    o.read_only = true;
    mpk::cache::Cache c(o);
    EXPECT_EQ(c.stats().entries, 1u);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
