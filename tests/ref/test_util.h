// Helpers of the reference tests: random inputs, relative L2 error, fixtures, and a writer of
// small safetensors model directories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace mpk::ref::testing {

// Uniform magnitudes in [lo, hi] with random signs: never zero.
std::vector<float> random_nonzero(size_t n, std::mt19937& rng, float lo = 0.05f, float hi = 1.5f);
// The values rounded to `dtype` (f32 values unchanged), as stored bytes and as their exact fp32.
struct Encoded {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
Encoded encode(const std::vector<float>& v, DType dtype);

// ||a - b|| / ||b|| in double; +inf when either holds a NaN or Inf, or the sizes differ.
double rel_l2(const std::vector<float>& a, const std::vector<double>& b);
double rel_l2(const std::vector<float>& a, const std::vector<float>& b);

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct StTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
// Writes one safetensors file holding `tensors`.
void write_safetensors(const std::filesystem::path& file,
                       const std::map<std::string, StTensor>& tensors);

// A golden fixture of tests/data (tools/fixtures/make_fixtures.py).
struct Fixture {
  std::filesystem::path dir;
  std::vector<int32_t> prompt, tokens;
  int vocab_size = 0;
  int steps = 0;
  std::vector<float> logits;  // steps x vocab_size
};
std::vector<std::filesystem::path> fixture_dirs();  // sorted; those with expected.json
Fixture read_fixture(const std::filesystem::path& dir);

}  // namespace mpk::ref::testing
