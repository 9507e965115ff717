// A kernel-cache file as `mpk-tune verify` opens it: the input is the database file. Each run
// starts from a clean folder holding only that file, opens it read-only and read-write (a
// damaged file is set aside: copied and started afresh), verifies, lists, reads an entry and the stats,
// then imports the file into a second cache.
#include <cstdint>
#include <string>

#include "cache/cache.h"
#include "fuzz_util.h"

namespace {

namespace fs = std::filesystem;
using namespace mpk;

void exercise(cache::Cache& c) {
  (void)c.verify();
  auto entries = c.list(8);
  if (!entries.empty()) (void)c.load(entries.front().key);
  (void)c.find_keys("0", 4);
  (void)c.stats();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path dir = fuzz::scratch_dir() / "cache";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  const fs::path file = dir / "kernels.db";
  fuzz::write_file(file, std::string_view(reinterpret_cast<const char*>(data), size));

  fuzz::expect_mpk_errors_only([&] {
    cache::CacheOptions o;
    o.path = file;
    o.read_only = true;
    cache::Cache c(o);
    exercise(c);
  });
  fuzz::expect_mpk_errors_only([&] {
    cache::CacheOptions o;
    o.path = file;
    o.busy_timeout_ms = 0;
    cache::Cache c(o);
    exercise(c);
  });
  // The input again, as the source of an import into a fresh cache.
  const fs::path source = dir / "import.db";
  fuzz::write_file(source, std::string_view(reinterpret_cast<const char*>(data), size));
  fuzz::expect_mpk_errors_only([&] {
    cache::CacheOptions o;
    o.path = dir / "target.db";
    o.busy_timeout_ms = 0;
    cache::Cache c(o);
    (void)c.import_from(source);
    exercise(c);
  });
  return 0;
}
