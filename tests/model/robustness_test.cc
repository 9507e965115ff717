// Damaged files must produce mpk::Error, never a crash or another exception type.
#include <gtest/gtest.h>

#include "model/model.h"
#include "model/safetensors.h"
#include "test_model_writer.h"

namespace mpk::model {
namespace {

using testing::Json;

// Runs `f`; a success or an mpk::Error is fine, anything else fails the test.
template <typename F>
void expect_no_foreign_exception(F&& f, const std::string& what) {
  try {
    f();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": non-mpk exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << what << ": unknown exception";
  }
}

struct ValidModel {
  testing::TempDir dir;
  std::string bytes;  // model.safetensors
  size_t header_end = 0;
  ValidModel() {
    Json cfg = testing::qwen3_config();
    cfg["num_hidden_layers"] = 1;
    testing::write_model(dir.path(), cfg, testing::model_tensors(cfg, DType::F16));
    bytes = testing::read_file(dir.path() / "model.safetensors");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[i]);
    header_end = 8 + size_t(n);
  }
  void write(const std::string& b) { testing::write_file(dir.path() / "model.safetensors", b); }
};

TEST(Robustness, TruncatedFilesFailWithError) {
  ValidModel m;
  ASSERT_NO_THROW(load(m.dir.path()));
  std::vector<size_t> cuts;
  for (size_t n = 0; n < m.header_end + 64; ++n) cuts.push_back(n);
  for (size_t n = m.header_end + 64; n < m.bytes.size(); n += 61) cuts.push_back(n);
  cuts.push_back(m.bytes.size() - 1);
  for (size_t n : cuts) {
    m.write(m.bytes.substr(0, n));
    try {
      load(m.dir.path());
      ADD_FAILURE() << "truncation at " << n << " of " << m.bytes.size() << " loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidModel) << "cut " << n << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "cut " << n << ": non-mpk exception: " << e.what();
    }
  }
}

TEST(Robustness, FlippedHeaderBytesInMemory) {
  ValidModel m;
  std::mt19937 rng(99);
  for (int iter = 0; iter < 5000; ++iter) {
    std::string b = m.bytes;
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % m.header_end] ^= char(1 + rng() % 255);
    expect_no_foreign_exception(
        [&] { parse_safetensors(reinterpret_cast<const std::byte*>(b.data()), b.size(), "m"); },
        "iteration " + std::to_string(iter));
  }
}

TEST(Robustness, FlippedHeaderBytesThroughLoad) {
  ValidModel m;
  std::mt19937 rng(5);
  for (int iter = 0; iter < 300; ++iter) {
    std::string b = m.bytes;
    b[rng() % m.header_end] ^= char(1 + rng() % 255);
    m.write(b);
    expect_no_foreign_exception([&] { load(m.dir.path()); }, "iteration " + std::to_string(iter));
  }
}

}  // namespace
}  // namespace mpk::model
