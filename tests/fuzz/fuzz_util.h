// Helpers shared by the libFuzzer targets (see docs/FUZZING.md).
//
// A target feeds its input to one parse entry point. An mpk::Error is the expected answer to a
// bad input; anything else leaving the library (another exception type, a crash, a sanitizer
// report, a hang or a blow-up past libFuzzer's -rss_limit_mb) is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "base/error.h"

namespace mpk::fuzz {

namespace fs = std::filesystem;

// A private scratch folder for this process, removed when the process exits normally.
// On tmpfs (/dev/shm) when there is one: the cache target writes a database per input.
inline const fs::path& scratch_dir() {
  // Never destroyed: the exit handler below still needs it.
  static const fs::path* dir = [] {
    std::string base = "/tmp";
    if (const char* t = std::getenv("TMPDIR"); t && *t) base = t;
    else if (fs::is_directory("/dev/shm")) base = "/dev/shm";
    std::string tmpl = base + "/mpk-fuzz-XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    auto* p = new fs::path(tmpl);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(*dir, ec);
    });
    return p;
  }();
  return *dir;
}

inline void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// Test-data folder compiled in (tests/data), overridable with MPK_FUZZ_TEST_DATA so a binary
// built elsewhere still finds the fixtures.
inline fs::path test_data() {
  if (const char* d = std::getenv("MPK_FUZZ_TEST_DATA"); d && *d) return d;
  return MPK_TEST_DATA;
}

// Copies a fixture folder (regular files only) into the scratch folder once.
inline fs::path copy_fixture(const std::string& name) {
  fs::path dst = scratch_dir() / name;
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(test_data() / name))
    if (e.is_regular_file()) fs::copy_file(e.path(), dst / e.path().filename(),
                                           fs::copy_options::overwrite_existing);
  return dst;
}

// Runs `body`; mpk::Error is a valid outcome, any other exception aborts (a finding: the
// library promises mpk::Error for bad input).
template <typename F>
void expect_mpk_errors_only(F&& body) {
  try {
    body();
  } catch (const mpk::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: non-mpk exception escaped: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: unknown exception escaped\n");
    std::abort();
  }
}

// Reads the first and last byte of [p, p + n) so ASan checks the span really exists.
inline void touch(const void* p, size_t n) {
  if (n == 0) return;
  const volatile unsigned char* b = static_cast<const unsigned char*>(p);
  unsigned char x = b[0];
  x ^= b[n - 1];
  (void)x;
}

}  // namespace mpk::fuzz
