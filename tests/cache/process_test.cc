// Several processes on one cache file, and writers killed mid-transaction.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cstdio>
#include <set>

#include "cache/cache.h"
#include "test_util.h"

extern char** environ;

namespace mpk::cache {
namespace {

using namespace testing;

// A spawned cache_test_worker; its stdin and stdout are pipes.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int fds[2], in[2];
    if (pipe2(fds, O_CLOEXEC) != 0 || pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    std::vector<std::string> argv_s = {MPK_CACHE_WORKER};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    close(in[0]);
    in_ = in[1];
    if (rc != 0) throw std::runtime_error("posix_spawn failed");
    out_ = fdopen(fds[0], "r");
  }
  // Writes one line to the child's stdin.
  void send(const std::string& line) {
    std::string s = line + "\n";
    if (write(in_, s.data(), s.size()) != ssize_t(s.size())) throw std::runtime_error("write to child failed");
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      wait();
    }
    if (out_) fclose(out_);
    if (in_ >= 0) close(in_);
  }
  // Next line of output without the newline; nullopt at end of output.
  std::optional<std::string> line() {
    char buf[256];
    if (!fgets(buf, sizeof(buf), out_)) return std::nullopt;
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  void kill_now() { kill(pid_, SIGKILL); }
  // The raw wait status.
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  int in_ = -1;
};

TEST(CacheProcesses, ConcurrentWritersAndReadersLoseAndMixNothing) {
  TempDir dir;
  // The file does not exist yet: the processes also race to create it.
  std::string db = (dir / "kernels.db").string();
  constexpr int kWorkers = 10, kPerWorker = 40, kShared = 8;
  std::vector<std::unique_ptr<Child>> children;
  for (int w = 0; w < kWorkers; ++w)
    children.push_back(std::make_unique<Child>(std::vector<std::string>{
        "mixed", db, std::to_string(w), std::to_string(kPerWorker), std::to_string(kShared)}));
  // Everyone has started (and opened its connection) before anyone writes.
  for (auto& c : children) ASSERT_EQ(c->line(), std::optional<std::string>("ready"));
  for (auto& c : children) c->send("go");
  for (int w = 0; w < kWorkers; ++w) {
    int status = children[w]->wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker " << w << " status " << status;
  }

  Cache cache(options_at(db));
  EXPECT_EQ(cache.stats().entries, uint64_t(kWorkers * kPerWorker + kShared));
  for (int w = 0; w < kWorkers; ++w)
    for (int j = 0; j < kPerWorker; ++j) {
      int k = 100000 + w * 1000 + j;
      auto e = cache.load(make_key(k));
      ASSERT_TRUE(e) << "lost entry of worker " << w << " #" << j;
      EXPECT_EQ(writer_of(*e, k), w) << "mixed entry of worker " << w << " #" << j;
    }
  for (int s = 0; s < kShared; ++s) {
    auto e = cache.load(make_key(s));
    ASSERT_TRUE(e) << "lost shared entry " << s;
    EXPECT_GE(writer_of(*e, s), 0) << "mixed shared entry " << s;
  }
  RawDb raw(db);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM blobs"), raw.query_int("SELECT count(*) FROM kernels"));
  EXPECT_EQ(raw.query_int("SELECT count(DISTINCT key) FROM kernels"), raw.query_int("SELECT count(*) FROM kernels"));
  EXPECT_EQ(raw.query_int("SELECT value FROM meta WHERE name = 'total_bytes'"),
            raw.query_int("SELECT sum(bytes) FROM kernels"));
  VerifyResult v = cache.verify();
  EXPECT_TRUE(v.bad_keys.empty());
  EXPECT_TRUE(v.integrity_ok) << v.integrity_message;
}

TEST(CacheProcesses, ProcessesOpeningOneDamagedFileReplaceItOnce) {
  TempDir dir;
  std::string db = (dir / "kernels.db").string();
  {
    std::FILE* f = std::fopen(db.c_str(), "wb");
    ASSERT_TRUE(f);
    std::string junk(20000, '\x7f');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  constexpr int kWorkers = 8;
  std::vector<std::unique_ptr<Child>> children;
  for (int w = 0; w < kWorkers; ++w)
    children.push_back(std::make_unique<Child>(std::vector<std::string>{"mixed", db, std::to_string(w), "5", "2"}));
  for (auto& c : children) ASSERT_EQ(c->line(), std::optional<std::string>("ready"));
  for (auto& c : children) c->send("go");
  for (auto& c : children) {
    int status = c->wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  int aside = 0;
  for (const auto& e : fs::directory_iterator(dir.path()))
    aside += e.path().filename().string().find(".corrupt-") != std::string::npos;
  EXPECT_EQ(aside, 1);
  Cache cache(options_at(db));
  EXPECT_EQ(cache.stats().entries, uint64_t(kWorkers * 5 + 2));
}

TEST(CacheProcesses, WriterKilledDuringPublishesLeavesAUsableCache) {
  TempDir dir;
  std::string db = (dir / "kernels.db").string();
  {
    Cache cache(options_at(db));
    for (int i = 0; i < 5; ++i) cache.publish(make_key(i), make_entry(4000, i));
  }
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    std::set<int> committed;
    {
      Child child({"forever", db});
      // Kill while it is writing its next 2 MB entry: most of its time is spent inside a
      // publish transaction.
      while (committed.size() < size_t(3 + round)) {
        auto l = child.line();
        ASSERT_TRUE(l) << "worker died early";
        committed.insert(std::stoi(*l));
      }
      child.kill_now();
      int status = child.wait();
      EXPECT_TRUE(WIFSIGNALED(status)) << status;
    }
    Cache cache(options_at(db));
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(cache.load(make_key(i))) << i;
    for (int i : committed) {
      auto e = cache.load(make_key(5000 + i));
      ASSERT_TRUE(e) << "committed entry " << i << " lost";
      EXPECT_EQ(e->cubin, forever_blob(i));
    }
    VerifyResult v = cache.verify();
    EXPECT_TRUE(v.bad_keys.empty());
    EXPECT_TRUE(v.integrity_ok) << v.integrity_message;
    EXPECT_TRUE(cache.publish(make_key(900 + round), make_entry(100, 900)));
  }
}

TEST(CacheProcesses, WriterKilledHoldingTheWriteLockLeavesAUsableCache) {
  TempDir dir;
  std::string db = (dir / "kernels.db").string();
  {
    Cache cache(options_at(db));
    for (int i = 0; i < 5; ++i) cache.publish(make_key(i), make_entry(4000, i));
  }
  {
    Child child({"hold", db});
    ASSERT_EQ(child.line(), std::optional<std::string>("in-transaction"));
    child.kill_now();
    EXPECT_TRUE(WIFSIGNALED(child.wait()));
  }
  Cache cache(options_at(db));
  EXPECT_EQ(cache.stats().entries, 5u);  // the uncommitted row is gone
  EXPECT_FALSE(cache.info(std::string(64, 'e')));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(cache.load(make_key(i)));
  EXPECT_TRUE(cache.publish(make_key(6), make_entry(100, 6)));  // the lock was released
  EXPECT_TRUE(cache.verify().integrity_ok);
}

}  // namespace
}  // namespace mpk::cache
