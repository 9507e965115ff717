// Copies of the committed fixtures with chosen weight elements overwritten (NaN, Inf...), for
// tests of damaged numbers. Header-only: C API tests use it without the internal libraries.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace mpk::testing {

// A copy of a fixture directory (single-file safetensors) in a fresh temp dir, removed on
// destruction.
class PatchedFixture {
 public:
  explicit PatchedFixture(const std::filesystem::path& fixture) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mpk-patched-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    std::filesystem::copy(fixture, dir_, std::filesystem::copy_options::recursive);
  }
  ~PatchedFixture() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PatchedFixture(const PatchedFixture&) = delete;
  PatchedFixture& operator=(const PatchedFixture&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path weights() const { return dir_ / "model.safetensors"; }

  // Sets elements [first, first + count) of `tensor` (count < 0: to its end) to `value`,
  // rounded to the tensor's dtype (F32 or BF16; BF16 by truncation, exact for NaN and Inf).
  void set(const std::string& tensor, float value, int64_t first = 0, int64_t count = 1) {
    std::fstream f(weights(), std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
    const auto header = nlohmann::json::parse(bytes.substr(8, n));
    ASSERT_TRUE(header.contains(tensor)) << tensor;
    const auto& e = header[tensor];
    const std::string dtype = e["dtype"];
    const size_t es = dtype == "F32" ? 4 : 2;
    ASSERT_TRUE(dtype == "F32" || dtype == "BF16") << dtype;
    const size_t begin = 8 + n + size_t(e["data_offsets"][0]), end = 8 + n + size_t(e["data_offsets"][1]);
    const int64_t numel = int64_t((end - begin) / es);
    if (count < 0) count = numel - first;
    ASSERT_LE(first + count, numel);
    uint32_t u;
    std::memcpy(&u, &value, 4);
    for (int64_t i = first; i < first + count; ++i) {
      const size_t at = begin + size_t(i) * es;
      if (es == 4) {
        std::memcpy(&bytes[at], &u, 4);
      } else {
        const uint16_t h = uint16_t(u >> 16);
        std::memcpy(&bytes[at], &h, 2);
      }
    }
    f.seekp(0);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    ASSERT_TRUE(f.good());
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace mpk::testing
