#include "model/weights.h"

#include <gtest/gtest.h>

#include <cstring>

#include "model/safetensors.h"
#include "test_model_writer.h"

namespace mpk::model {
namespace {

using testing::Json;
using testing::TensorData;
using testing::throws_error;

// Expects `t` to hold exactly the values written for `want`.
void expect_same(const Tensor& t, const TensorData& want) {
  EXPECT_EQ(t.name, want.name);
  EXPECT_STREQ(testing::st_dtype(t.dtype), want.dtype.c_str());
  EXPECT_EQ(t.shape, want.shape);
  ASSERT_EQ(t.nbytes, want.bytes.size());
  ASSERT_EQ(size_t(t.numel()), want.values.size());
  ASSERT_NE(t.data, nullptr);
  EXPECT_EQ(std::memcmp(t.data, want.bytes.data(), t.nbytes), 0) << t.name;
  for (int64_t i = 0; i < t.numel(); ++i) {
    float x = testing::decode(t.dtype, t.data + i * dtype_size(t.dtype));
    ASSERT_EQ(x, want.values[i]) << t.name << "[" << i << "]";
    ASSERT_NE(x, 0.0f);
  }
}

std::vector<TensorData> three_tensors() {
  std::mt19937 rng(3);
  return {testing::random_tensor("a", DType::F32, {3, 5}, rng),
          testing::random_tensor("b.weight", DType::BF16, {7}, rng),
          testing::random_tensor("c", DType::F16, {2, 2, 3}, rng)};
}

// A header with one F32 tensor "x" of shape [2] over an 8-byte data section.
Json one_tensor_header() {
  return {{"x", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}};
}

::testing::AssertionResult open_fails(const std::string& file_bytes, ErrorKind kind,
                                      const std::string& substr) {
  testing::TempDir dir;
  testing::write_file(dir.path() / "model.safetensors", file_bytes);
  return throws_error([&] { Weights::open(dir.path()); }, kind, substr);
}

TEST(Weights, SingleFileReadsBackExactValues) {
  testing::TempDir dir;
  auto tensors = three_tensors();
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_bytes(tensors));
  Weights w = Weights::open(dir.path());
  ASSERT_EQ(w.tensors().size(), 3u);
  for (const TensorData& t : tensors) expect_same(w.at(t.name), t);
  EXPECT_EQ(w.find("missing"), nullptr);
  EXPECT_TRUE(throws_error([&] { w.at("missing"); }, ErrorKind::InvalidModel, "'missing'"));
}

TEST(Weights, PointersSurviveMove) {
  testing::TempDir dir;
  auto tensors = three_tensors();
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_bytes(tensors));
  Weights a = Weights::open(dir.path());
  const std::byte* p = a.at("c").data;
  Weights b = std::move(a);
  EXPECT_EQ(b.at("c").data, p);
  Weights c;
  c = std::move(b);
  expect_same(c.at("c"), tensors[2]);
}

TEST(Weights, MetadataAndEmptyTensorsAccepted) {
  Json h = one_tensor_header();
  h["__metadata__"] = {{"format", "pt"}};
  h["empty"] = {{"dtype", "BF16"}, {"shape", {0, 4}}, {"data_offsets", {4, 4}}};
  h["scalar"] = {{"dtype", "F32"}, {"shape", Json::array()}, {"data_offsets", {8, 12}}};
  std::string bytes = testing::safetensors_raw(h, std::string(12, '\x01'));
  auto ts = parse_safetensors(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "m");
  ASSERT_EQ(ts.size(), 3u);
  for (const Tensor& t : ts) {
    if (t.name == "empty") {
      EXPECT_EQ(t.numel(), 0);
    } else if (t.name == "scalar") {
      EXPECT_EQ(t.numel(), 1);
    }
  }
}

TEST(WeightsError, NoSafetensorsIsNotFound) {
  testing::TempDir dir;
  EXPECT_TRUE(throws_error([&] { Weights::open(dir.path()); }, ErrorKind::NotFound,
                           "no safetensors weights"));
  EXPECT_TRUE(throws_error([&] { Weights::open(dir.path() / "nope"); }, ErrorKind::NotFound,
                           "no safetensors weights"));
}

TEST(WeightsError, ShortAndEmptyFiles) {
  EXPECT_TRUE(open_fails("", ErrorKind::InvalidModel, "file is 0 bytes"));
  EXPECT_TRUE(open_fails("abc", ErrorKind::InvalidModel, "shorter than the 8-byte"));
}

TEST(WeightsError, HeaderLengthPastEnd) {
  std::string bytes = testing::safetensors_raw(one_tensor_header(), std::string(8, '\x01'));
  std::string cut = bytes.substr(0, 20);
  EXPECT_TRUE(open_fails(cut, ErrorKind::InvalidModel, "runs past the end"));
  std::string huge = bytes;
  std::memset(huge.data(), 0xff, 8);
  EXPECT_TRUE(open_fails(huge, ErrorKind::InvalidModel, "exceeds"));
}

TEST(WeightsError, HeaderNotJsonOrNotObject) {
  std::string bad = testing::safetensors_raw(one_tensor_header(), std::string(8, '\x01'));
  bad[9] = '#';
  EXPECT_TRUE(open_fails(bad, ErrorKind::InvalidModel, "not valid JSON"));
  EXPECT_TRUE(open_fails(testing::safetensors_raw(Json::array({1, 2}), ""),
                         ErrorKind::InvalidModel, "must be a JSON object"));
}

TEST(WeightsError, EntryMissingFields) {
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    Json h = one_tensor_header();
    h["x"].erase(key);
    EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(8, '\x01')),
                           ErrorKind::InvalidModel, std::string("missing '") + key + "'"));
  }
  Json h = {{"x", 3}};
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, ""), ErrorKind::InvalidModel,
                         "entry must be an object"));
}

TEST(WeightsError, Dtypes) {
  Json h = one_tensor_header();
  h["x"]["dtype"] = "F99";
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(8, '\x01')),
                         ErrorKind::InvalidModel, "unknown dtype 'F99'"));
  h["x"]["dtype"] = "I64";
  h["x"]["shape"] = {1};
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(8, '\x01')),
                         ErrorKind::Unsupported, "dtype I64 is not supported"));
  h["x"]["dtype"] = 4;
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(8, '\x01')),
                         ErrorKind::InvalidModel, "'dtype' must be a string"));
}

TEST(WeightsError, BadShapes) {
  Json h = one_tensor_header();
  h["x"]["shape"] = {-2};
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(8, '\x01')),
                         ErrorKind::InvalidModel, "shape dimension must be non-negative"));
  h["x"]["shape"] = "2";
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(8, '\x01')),
                         ErrorKind::InvalidModel, "'shape' must be a list"));
  h["x"]["shape"] = {1ull << 40, 1ull << 40};
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(8, '\x01')),
                         ErrorKind::InvalidModel, "too large"));
}

TEST(WeightsError, BadDataOffsets) {
  const std::string data(8, '\x01');
  for (Json offs : {Json::array({0}), Json::array({0, 8, 9}), Json("0-8"), Json::array({6, 2}),
                    Json::array({0, 16}), Json::array({-1, 7}), Json::array({0.0, 8.0})}) {
    Json h = one_tensor_header();
    h["x"]["data_offsets"] = offs;
    EXPECT_TRUE(open_fails(testing::safetensors_raw(h, data), ErrorKind::InvalidModel,
                           "tensor 'x'"))
        << offs.dump();
  }
  Json h = one_tensor_header();
  h["x"]["data_offsets"] = {0, 16};
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, data), ErrorKind::InvalidModel,
                         "not a range inside the 8-byte data section"));
}

TEST(WeightsError, ByteSizeMismatch) {
  Json h = one_tensor_header();
  h["x"]["shape"] = {3};
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(8, '\x01')),
                         ErrorKind::InvalidModel, "span 8 bytes but dtype f32 x shape [3] needs 12"));
}

TEST(WeightsError, OverlappingTensors) {
  Json h = one_tensor_header();
  h["y"] = {{"dtype", "F16"}, {"shape", {2}}, {"data_offsets", {6, 10}}};
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(12, '\x01')),
                         ErrorKind::InvalidModel, "overlap"));
}

// As the format's reference reader: the tensors cover the data section exactly, with no gap
// between them and nothing after the last (bytes no tensor names would be read and held).
TEST(WeightsError, BytesOfNoTensor) {
  Json h = one_tensor_header();  // x: f32 [2] at [0, 8)
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(9, '\x01')), ErrorKind::InvalidModel,
                         "the tensors hold bytes [0, 8) of a 9-byte data section"));
  h["x"]["data_offsets"] = {4, 12};
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(12, '\x01')), ErrorKind::InvalidModel,
                         "the tensors hold bytes [4, 12) of a 12-byte data section"));
  h = one_tensor_header();
  h["y"] = {{"dtype", "F16"}, {"shape", {2}}, {"data_offsets", {10, 14}}};
  EXPECT_TRUE(open_fails(testing::safetensors_raw(h, std::string(14, '\x01')), ErrorKind::InvalidModel,
                         "2 byte(s) between tensors 'x' and 'y' belong to no tensor"));
  // Back to back, an empty tensor anywhere: fine.
  h["y"]["data_offsets"] = {8, 12};
  h["z"] = {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {3, 3}}};
  testing::TempDir dir;
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_raw(h, std::string(12, '\x01')));
  EXPECT_NO_THROW(Weights::open(dir.path()));
}

TEST(WeightsError, SafetensorsPathIsADirectory) {
  testing::TempDir dir;
  std::filesystem::create_directory(dir.path() / "model.safetensors");
  EXPECT_TRUE(throws_error([&] { Weights::open(dir.path()); }, ErrorKind::InvalidModel,
                           "not a regular file"));
}

}  // namespace
}  // namespace mpk::model
