// Helpers shared by the cache tests: temporary folders, keys, entries, and raw SQLite access
// for tampering with a database behind the cache's back.
#pragma once

#include <grp.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/log.h"
#include "cache/cache.h"
#include "cache/key.h"
#include "tests/common/log_capture.h"

namespace mpk::cache::testing {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mpk-cache-test-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// A distinct, realistic key per index.
inline CacheKey make_key(int i, const std::string& arch = "sm_90a") {
  int64_t n = 1024 + i;
  return CacheKey{TaskSignature{"gemv", {"rmsnorm"}, {{4096, n}, {n}}, {"bf16", "bf16"}, "row_major"},
                  arch,
                  "13.0",
                  "13000",
                  "1",
                  {"-O3", "--std=c++17"},
                  "source-" + std::to_string(i)};
}

// Deterministic bytes from a seed, so a reader can recompute what a writer stored.
inline std::vector<uint8_t> make_blob(size_t size, uint64_t seed) {
  std::vector<uint8_t> b(size);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& v : b) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = uint8_t(x);
  }
  return b;
}

inline Entry make_entry(size_t size, uint64_t seed, std::optional<double> time_us = 10.0,
                        bool verified = true) {
  Entry e;
  e.cubin = make_blob(size, seed);
  e.params_json = R"({"tile":128,"seed":)" + std::to_string(seed) + "}";
  e.time_us = time_us;
  e.verification_json = verified ? R"({"passed":true,"rel_l2":1e-4})" : R"({"passed":false})";
  return e;
}

// A clock the test moves by hand.
struct FakeClock {
  std::shared_ptr<std::atomic<int64_t>> t = std::make_shared<std::atomic<int64_t>>(1700000000);
  std::function<int64_t()> fn() const {
    auto p = t;
    return [p] { return p->load(); };
  }
  void advance(int64_t s) { *t += s; }
};

inline CacheOptions options_at(const fs::path& path) {
  CacheOptions o;
  o.path = path;
  return o;
}

// Direct SQLite access, bypassing the cache.
class RawDb {
 public:
  explicit RawDb(const fs::path& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("sqlite3_open failed");
    sqlite3_busy_timeout(db_, 10000);
  }
  ~RawDb() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error("sqlite: " + msg + " in " + sql);
    }
  }
  int64_t query_int(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("sqlite: ") + sqlite3_errmsg(db_));
    int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return v;
  }
  sqlite3* handle() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

// The pages of a SQLite file that are b-tree pages (table or index, interior or leaf),
// 1-based, page 1 (the schema) left out.
inline std::vector<size_t> btree_pages(const std::string& bytes) {
  size_t page = (size_t(uint8_t(bytes[16])) << 8) | uint8_t(bytes[17]);
  if (page == 1) page = 65536;
  std::vector<size_t> out;
  for (size_t p = 2; p * page <= bytes.size(); ++p) {
    uint8_t type = uint8_t(bytes[(p - 1) * page]);
    if (type == 2 || type == 5 || type == 10 || type == 13) out.push_back(p);
  }
  return out;
}

// Flips one bit in the header or cell pointers (the first 16 bytes) of one b-tree page chosen
// by `seed`: damage SQLite meets when it reads that page, not when it opens the file.
inline std::string flip_btree_bit(std::string bytes, uint64_t seed) {
  size_t page = (size_t(uint8_t(bytes[16])) << 8) | uint8_t(bytes[17]);
  if (page == 1) page = 65536;
  std::vector<size_t> pages = btree_pages(bytes);
  if (pages.empty()) throw std::runtime_error("no b-tree page to damage");
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 7;
  size_t p = pages[x % pages.size()];
  x = x * 6364136223846793005ull + 1442695040888963407ull;
  size_t offset = (p - 1) * page + (x >> 33) % 16;
  bytes[offset] = char(uint8_t(bytes[offset]) ^ (1u << ((x >> 20) % 8)));
  return bytes;
}

inline std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Writes `bytes` as the database at `p`, without the companions of whatever was there.
inline void write_database(const fs::path& p, const std::string& bytes) {
  std::error_code ec;
  for (const char* suffix : {"-wal", "-shm", "-journal"}) fs::remove(p.string() + suffix, ec);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// Files moved aside in `dir` (without their -wal/-shm companions).
inline std::vector<fs::path> moved_aside_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    auto at = name.find(".corrupt-");
    if (at != std::string::npos && name.find_first_not_of("0123456789-", at + 9) == std::string::npos &&
        name.back() != '-')
      out.push_back(e.path());
  }
  return out;
}

// Makes this (child) process one that permission bits bind: when root, it becomes user
// nobody. Returns "" on success, else why not.
inline std::string drop_root() {
  if (geteuid() != 0) return "";
  constexpr uid_t kNobody = 65534;
  if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0)
    return std::string("cannot become user nobody: ") + std::strerror(errno);
  return "";
}

// Runs `fn` in a child process after drop_root(); returns what fn returned ("" for success)
// or what went wrong. Sets *skip instead when the child cannot drop root.
inline std::string in_unprivileged_child(const std::function<std::string()>& fn, std::string* skip) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    std::string out = drop_root();
    if (!out.empty()) {
      out = "SKIP:" + out;
    } else {
      try {
        out = fn();
      } catch (const std::exception& e) {
        out = std::string("exception: ") + e.what();
      }
    }
    ssize_t ignored = write(fds[1], out.data(), out.size());
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return "the child died (status " + std::to_string(status) + ")";
  if (out.rfind("SKIP:", 0) == 0) {
    *skip = out.substr(5);
    return "";
  }
  return out;
}

}  // namespace mpk::cache::testing

namespace mpk::cache::testing {

// What worker `w` publishes for key index `k` in the multi-process tests: the params name the
// writer, so a reader can tell a consistent row from one mixing two writers.
inline Entry worker_entry(int w, int k) {
  Entry e = make_entry(1000 + size_t(k % 7) * 1500 + size_t(w) * 13, uint64_t(w) * 100000 + uint64_t(k), 5.0);
  e.params_json = "{\"worker\":" + std::to_string(w) + ",\"k\":" + std::to_string(k) + "}";
  e.provenance.host = "worker-" + std::to_string(w);
  return e;
}

// The worker that wrote `e` for key index `k`, or -1 when the row is not exactly what some
// worker wrote.
inline int writer_of(const Entry& e, int k) {
  auto pos = e.params_json.find("\"worker\":");
  if (pos == std::string::npos) return -1;
  int w = std::atoi(e.params_json.c_str() + pos + 9);
  Entry expected = worker_entry(w, k);
  bool same = e.cubin == expected.cubin && e.params_json == expected.params_json &&
              e.provenance.host == expected.provenance.host;
  return same ? w : -1;
}

// The i-th cubin of the "forever" worker: 2 MiB, made once and stamped with i, so the worker
// spends its time inside publish transactions rather than generating data.
inline std::vector<uint8_t> forever_blob(int i) {
  static const std::vector<uint8_t> base = make_blob(size_t(2) << 20, 5000);
  std::vector<uint8_t> b = base;
  std::memcpy(b.data(), &i, sizeof(i));
  return b;
}

}  // namespace mpk::cache::testing
