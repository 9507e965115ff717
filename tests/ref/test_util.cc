#include "test_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace mpk::ref::testing {

namespace fs = std::filesystem;

std::vector<float> random_nonzero(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(n);
  for (float& x : v) x = neg(rng) ? -mag(rng) : mag(rng);
  return v;
}

Encoded encode(const std::vector<float>& v, DType dtype) {
  Encoded e;
  e.values.resize(v.size());
  e.bytes.resize(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::F32) {
      e.values[i] = v[i];
      std::memcpy(&e.bytes[4 * i], &v[i], 4);
      continue;
    }
    uint16_t h = dtype == DType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
    e.values[i] = dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    std::memcpy(&e.bytes[2 * i], &h, 2);
  }
  return e;
}

double rel_l2(const std::vector<float>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  return rel_l2(a, std::vector<double>(b.begin(), b.end()));
}

TempDir::TempDir(const std::string& tag) {
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path p = fs::temp_directory_path() / ("mpk-" + tag + "-" + std::to_string(rd()));
    if (fs::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temp directory");
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

static const char* st_dtype(DType d) {
  switch (d) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
  }
  return "?";
}

void write_safetensors(const fs::path& file, const std::map<std::string, StTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", st_dtype(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::ofstream out(file, std::ios::binary);
  uint64_t len = h.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(h.data(), std::streamsize(h.size()));
  for (const auto& [name, t] : tensors)
    out.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

std::vector<fs::path> fixture_dirs() {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(MPK_TEST_DATA))
    if (e.is_directory() && fs::exists(e.path() / "expected.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

Fixture read_fixture(const fs::path& dir) {
  Fixture f;
  f.dir = dir;
  std::ifstream in(dir / "expected.json");
  nlohmann::json j = nlohmann::json::parse(in);
  f.prompt = j.at("prompt").get<std::vector<int32_t>>();
  f.tokens = j.at("tokens").get<std::vector<int32_t>>();
  f.vocab_size = j.at("vocab_size").get<int>();
  f.steps = j.at("steps").get<int>();
  std::ifstream bin(dir / "logits.f32", std::ios::binary);
  f.logits.resize(size_t(f.steps) * size_t(f.vocab_size));
  bin.read(reinterpret_cast<char*>(f.logits.data()), std::streamsize(f.logits.size() * 4));
  if (!bin || bin.peek() != EOF) throw std::runtime_error("bad logits.f32 in " + dir.string());
  return f;
}

}  // namespace mpk::ref::testing
