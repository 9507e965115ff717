#include <gtest/gtest.h>

#include <cstring>

#include "model/weights.h"
#include "test_model_writer.h"

namespace mpk::model {
namespace {

namespace fs = std::filesystem;
using testing::Json;
using testing::TensorData;
using testing::throws_error;

constexpr const char* kIndex = "model.safetensors.index.json";

std::vector<TensorData> tensors(int n) {
  std::mt19937 rng(11);
  std::vector<TensorData> t;
  for (int i = 0; i < n; ++i)
    t.push_back(testing::random_tensor(std::string(1, 't').append(std::to_string(i)), DType::BF16,
                                       {i + 1, 3}, rng));
  return t;
}

// Writes shard files by hand: shard name -> tensors, and an index with `weight_map`.
void write_shards(const fs::path& dir, const std::map<std::string, std::vector<TensorData>>& shards,
                  const Json& weight_map) {
  for (const auto& [name, ts] : shards) {
    fs::create_directories((dir / name).parent_path());
    testing::write_file(dir / name, testing::safetensors_bytes(ts));
  }
  testing::write_file(dir / kIndex, Json{{"weight_map", weight_map}}.dump());
}

::testing::AssertionResult open_fails(const fs::path& dir, ErrorKind kind, const std::string& s) {
  return throws_error([&] { Weights::open(dir); }, kind, s);
}

TEST(Sharded, OpensAllShardsAndReadsBackValues) {
  testing::TempDir dir;
  auto ts = tensors(7);
  write_shards(dir.path(), {{"a.safetensors", {ts[0], ts[1], ts[2]}}, {"b.safetensors", {ts[3], ts[4]}},
                            {"sub/c.safetensors", {ts[5], ts[6]}}},
               {{"t0", "a.safetensors"}, {"t1", "a.safetensors"}, {"t2", "a.safetensors"},
                {"t3", "b.safetensors"}, {"t4", "b.safetensors"}, {"t5", "sub/c.safetensors"},
                {"t6", "sub/c.safetensors"}});
  Weights w = Weights::open(dir.path());
  ASSERT_EQ(w.tensors().size(), 7u);
  for (const TensorData& t : ts) {
    const Tensor& got = w.at(t.name);
    EXPECT_EQ(got.shape, t.shape);
    ASSERT_EQ(got.nbytes, t.bytes.size());
    EXPECT_EQ(std::memcmp(got.data, t.bytes.data(), got.nbytes), 0) << t.name;
  }
}

TEST(Sharded, SingleFileWinsOverIndex) {
  testing::TempDir dir;
  auto ts = tensors(2);
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_bytes({ts[0]}));
  testing::write_file(dir.path() / kIndex, "not json: would fail if read");
  EXPECT_EQ(Weights::open(dir.path()).tensors().size(), 1u);
}

TEST(ShardedError, MissingShardIsNotFound) {
  testing::TempDir dir;
  auto ts = tensors(2);
  write_shards(dir.path(), {{"a.safetensors", {ts[0]}}},
               {{"t0", "a.safetensors"}, {"t1", "b.safetensors"}});
  EXPECT_TRUE(open_fails(dir.path(), ErrorKind::NotFound, "b.safetensors"));
}

TEST(ShardedError, IndexedTensorAbsentFromItsShard) {
  testing::TempDir dir;
  auto ts = tensors(2);
  write_shards(dir.path(), {{"a.safetensors", {ts[0]}}},
               {{"t0", "a.safetensors"}, {"t1", "a.safetensors"}});
  EXPECT_TRUE(open_fails(dir.path(), ErrorKind::InvalidModel,
                         "tensor 't1' is mapped to shard 'a.safetensors', which does not contain it"));
}

TEST(ShardedError, TensorNotListedInIndex) {
  testing::TempDir dir;
  auto ts = tensors(2);
  write_shards(dir.path(), {{"a.safetensors", {ts[0], ts[1]}}}, {{"t0", "a.safetensors"}});
  EXPECT_TRUE(open_fails(dir.path(), ErrorKind::InvalidModel, "tensor 't1' is not listed"));
}

TEST(ShardedError, TensorInShardMappedElsewhere) {
  testing::TempDir dir;
  auto ts = tensors(2);
  write_shards(dir.path(), {{"a.safetensors", {ts[0], ts[1]}}, {"b.safetensors", {}}},
               {{"t0", "a.safetensors"}, {"t1", "b.safetensors"}});
  EXPECT_TRUE(open_fails(dir.path(), ErrorKind::InvalidModel,
                         "tensor 't1' is in shard 'a.safetensors' but"));
}

TEST(ShardedError, TensorInTwoShards) {
  testing::TempDir dir;
  auto ts = tensors(2);
  write_shards(dir.path(), {{"a.safetensors", {ts[0], ts[1]}}, {"b.safetensors", {ts[1]}}},
               {{"t0", "a.safetensors"}, {"t1", "b.safetensors"}});
  EXPECT_TRUE(open_fails(dir.path(), ErrorKind::InvalidModel, "tensor 't1' is stored in two shards"));
}

TEST(ShardedError, ShardNameEscapingDirectory) {
  for (const char* name : {"../x.safetensors", "sub/../../x.safetensors", "/etc/passwd", ""}) {
    testing::TempDir dir;
    testing::write_file(dir.path() / kIndex, Json{{"weight_map", {{"t0", name}}}}.dump());
    EXPECT_TRUE(open_fails(dir.path(), ErrorKind::InvalidModel, "must be a relative path")) << name;
  }
}

TEST(ShardedError, BadIndex) {
  testing::TempDir dir;
  testing::write_file(dir.path() / kIndex, "{\"weight_map\": ");
  EXPECT_TRUE(open_fails(dir.path(), ErrorKind::InvalidModel, "not valid JSON"));
  testing::write_file(dir.path() / kIndex, R"({"metadata": {}})");
  EXPECT_TRUE(open_fails(dir.path(), ErrorKind::InvalidModel, "'weight_map' must be an object"));
  testing::write_file(dir.path() / kIndex, R"({"weight_map": {"t0": 3}})");
  EXPECT_TRUE(open_fails(dir.path(), ErrorKind::InvalidModel, "weight_map['t0'] must be a file name"));
}

TEST(ShardedError, BadShardFileNamesItsPath) {
  testing::TempDir dir;
  testing::write_file(dir.path() / "a.safetensors", "tiny");
  testing::write_file(dir.path() / kIndex, Json{{"weight_map", {{"t0", "a.safetensors"}}}}.dump());
  EXPECT_TRUE(open_fails(dir.path(), ErrorKind::InvalidModel, "a.safetensors: file is 4 bytes"));
}

}  // namespace
}  // namespace mpk::model
