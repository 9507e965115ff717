// Kernel cache benchmark: fills a cache with many entries, then times hits, misses and
// publishes. Prints the machine, the database and the latency percentiles.
//
//   cache_bench [--entries 100000] [--min-blob 16K] [--max-blob 64K] [--lookups 20000]
//               [--publishes 2000] [--db PATH] [--keep]
#include <sqlite3.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "cache/cache.h"
#include "cache/paths.h"

using namespace mpk::cache;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

CacheKey bench_key(int64_t i) {
  return CacheKey{TaskSignature{"gemv", {"rmsnorm"}, {{4096, 1024 + i}, {1024 + i}}, {"bf16", "bf16"}, "row_major"},
                  "sm_90a",
                  "13.0",
                  "13000",
                  "1",
                  {"-O3", "--std=c++17", "--gpu-architecture=sm_90a"},
                  fmt::format("{:016x}", uint64_t(i) * 0x9e3779b97f4a7c15ull)};
}

Entry bench_entry(std::mt19937_64& rng, size_t min_blob, size_t max_blob) {
  Entry e;
  size_t n = std::uniform_int_distribution<size_t>(min_blob, max_blob)(rng);
  e.cubin.resize(n);
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(e.cubin.data() + i, &v, 8);
  }
  e.params_json = R"({"tile_m":64,"tile_k":256,"split_k":2,"vec":8})";
  e.time_us = 1.0 + double(rng() % 1000) / 100;
  e.verification_json = R"({"passed":true,"index_proof":"unsat","algebraic_proof":"unsat","rel_l2":1.2e-4})";
  return e;
}

struct Percentiles {
  double p50, p95, p99, mean, max;
};

Percentiles percentiles(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, size_t(q * double(us.size())))]; };
  double sum = 0;
  for (double v : us) sum += v;
  return {at(0.50), at(0.95), at(0.99), sum / double(us.size()), us.back()};
}

void print_row(const std::string& name, size_t n, const Percentiles& p) {
  std::cout << fmt::format("{:<28} {:>7} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>10.1f}\n", name, n, p.p50, p.p95,
                           p.p99, p.mean, p.max);
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// A /proc/meminfo field, in GiB.
double meminfo_gib(const std::string& field) {
  std::ifstream f("/proc/meminfo");
  std::string name, unit;
  uint64_t kb = 0;
  while (f >> name >> kb >> unit)
    if (name == field + ":") return double(kb) / (1 << 20);
  return 0;
}

std::string fs_type(const fs::path& p) {
  struct statfs s {};
  if (statfs(p.c_str(), &s) != 0) return "?";
  switch (uint64_t(s.f_type)) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x01021994: return "tmpfs";
    case 0x9123683E: return "btrfs";
    case 0x794c7630: return "overlayfs";
    default: return fmt::format("{:#x}", uint64_t(s.f_type));
  }
}

template <typename F>
double time_us(F&& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Kernel cache benchmark", "cache_bench"};
  int64_t entries = 100000, lookups = 20000, publishes = 2000;
  std::string min_text = "16K", max_text = "64K", db_text = "/tmp/mpk-cache-bench/kernels.db";
  bool keep = false;
  app.add_option("--entries", entries, "Entries to fill")->check(CLI::PositiveNumber);
  app.add_option("--min-blob", min_text, "Smallest cubin");
  app.add_option("--max-blob", max_text, "Largest cubin");
  app.add_option("--lookups", lookups, "Timed hits (and misses)")->check(CLI::PositiveNumber);
  app.add_option("--publishes", publishes, "Timed publishes into the full cache")->check(CLI::PositiveNumber);
  app.add_option("--db", db_text, "Database file (removed first)");
  app.add_flag("--keep", keep, "Keep the database afterwards");
  CLI11_PARSE(app, argc, argv);
  auto min_blob = parse_byte_size(min_text), max_blob = parse_byte_size(max_text);
  if (!min_blob || !max_blob || *min_blob > *max_blob || *min_blob < 8) {
    std::cerr << "cache_bench: bad --min-blob/--max-blob\n";
    return 2;
  }
  fs::path db = db_text;
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix, ec);

  try {
    CacheOptions options;
    options.path = db;
    Cache cache(options);
    std::mt19937_64 rng(12345);

    // Fill: every entry is a normal publish (one transaction each).
    std::vector<double> fill_us;
    fill_us.reserve(size_t(entries));
    auto fill_start = Clock::now();
    for (int64_t i = 0; i < entries; ++i) {
      Entry e = bench_entry(rng, *min_blob, *max_blob);
      CacheKey key = bench_key(i);
      fill_us.push_back(time_us([&] { cache.publish(key, std::move(e)); }));
      if ((i + 1) % 10000 == 0) std::cerr << "filled " << (i + 1) << "/" << entries << "\n";
    }
    double fill_s = std::chrono::duration<double>(Clock::now() - fill_start).count();

    // Hits: random existing keys, key hashing and checksum check included.
    std::uniform_int_distribution<int64_t> pick(0, entries - 1);
    std::vector<double> hit_us, hit2_us, miss_us, publish_us;
    size_t hit_bytes = 0;
    auto hits = [&](std::vector<double>& out) {
      for (int64_t i = 0; i < lookups; ++i) {
        CacheKey key = bench_key(pick(rng));
        out.push_back(time_us([&] {
          auto e = cache.load(key);
          if (!e) throw std::runtime_error("expected a hit");
          hit_bytes += e->cubin.size();
        }));
      }
    };
    hits(hit_us);
    for (int64_t i = 0; i < lookups; ++i) {
      CacheKey key = bench_key(entries + 1000000 + i);
      miss_us.push_back(time_us([&] {
        if (cache.load(key)) throw std::runtime_error("expected a miss");
      }));
    }
    for (int64_t i = 0; i < publishes; ++i) {
      Entry e = bench_entry(rng, *min_blob, *max_blob);
      CacheKey key = bench_key(entries + i);
      publish_us.push_back(time_us([&] { cache.publish(key, std::move(e)); }));
    }
    hits(hit2_us);  // again, once the fill's write-back has had time to drain
    CacheStats st = cache.stats();

    struct utsname u {};
    uname(&u);
    std::cout << "== mpk kernel cache benchmark ==\n";
    std::cout << fmt::format("machine      {} ({} hw threads), {:.1f} GiB RAM, Linux {}\n", cpu_model(),
                             std::thread::hardware_concurrency(), meminfo_gib("MemTotal"), u.release);
    // Hits that miss the OS page cache read the disk: this bounds the tail latencies.
    std::cout << fmt::format("page cache   {:.1f} GiB cached at the end of the run\n", meminfo_gib("Cached"));
    std::cout << fmt::format("storage      {} on {}\n", db.string(), fs_type(db.parent_path()));
    std::cout << fmt::format("sqlite       {} (WAL, synchronous=NORMAL)\n", sqlite3_libversion());
    std::cout << fmt::format("entries      {} filled + {} published; cubins uniform in [{}, {}] bytes\n", entries,
                             publishes, *min_blob, *max_blob);
    std::cout << fmt::format("database     {:.2f} GiB file, {:.2f} GiB payload, {:.1f} MiB WAL\n",
                             double(st.file_bytes) / (1 << 30), double(st.payload_bytes) / (1 << 30),
                             double(st.wal_bytes) / (1 << 20));
    std::cout << fmt::format("fill         {:.1f} s ({:.0f} publishes/s, {:.0f} MiB/s of cubins)\n", fill_s,
                             double(entries) / fill_s, double(st.payload_bytes) / (1 << 20) / fill_s);
    std::cout << fmt::format("hits read    {:.1f} MiB of cubins; key hashing and checksum included\n\n",
                             double(hit_bytes) / (1 << 20));
    std::cout << fmt::format("{:<28} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10}\n", "operation (microseconds)", "n",
                             "p50", "p95", "p99", "mean", "max");
    print_row("hit  load(key), after fill", hit_us.size(), percentiles(hit_us));
    print_row("hit  load(key), later", hit2_us.size(), percentiles(hit2_us));
    print_row("miss load(key)", miss_us.size(), percentiles(miss_us));
    print_row("publish (full cache)", publish_us.size(), percentiles(publish_us));
    print_row("publish (during fill)", fill_us.size(), percentiles(fill_us));
  } catch (const std::exception& e) {
    std::cerr << "cache_bench: " << e.what() << "\n";
    return 1;
  }
  if (!keep)
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix, ec);
  return 0;
}
