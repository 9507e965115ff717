// Inputs that once crashed, hung or exhausted memory: each must now fail fast with a clear
// mpk::Error (the kind and the words a user needs).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "model/json_util.h"
#include "model/mapped_file.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "test_model_writer.h"

namespace mpk::model {
namespace {

namespace fs = std::filesystem;
using testing::Json;
using testing::throws_error;

std::string nested_array(size_t depth, const std::string& leaf) {
  return std::string(depth, '[') + leaf + std::string(depth, ']');
}

struct SmallModel {
  testing::TempDir dir;
  Json cfg = testing::qwen3_config();
  SmallModel() { testing::write_model(dir.path(), cfg, testing::model_tensors(cfg, DType::F32)); }
  fs::path path(const char* name) const { return dir.path() / name; }
};

TEST(Hardening, DeeplyNestedJsonIsRefusedBeforeParsing) {
  // 100,000 levels: printing the value recursively overflowed the stack; 50 million (100 MB,
  // inside the header limit) built gigabytes of tree before any check.
  const std::string plain = testing::qwen3_config().dump();
  const std::string key = "\"vocab_size\":";
  const size_t at = plain.find(key);
  ASSERT_NE(at, std::string::npos);
  const size_t end = plain.find_first_of(",}", at + key.size());
  auto nested_vocab = [&](size_t depth) {
    return plain.substr(0, at + key.size()) + nested_array(depth, "1") + plain.substr(end);
  };
  EXPECT_TRUE(throws_error([&] { parse_config(nested_vocab(100000)); }, ErrorKind::InvalidModel,
                           "JSON nested more than 128 levels"));
  // Brackets inside strings, escaped quotes among them, are not nesting.
  Json cfg = testing::qwen3_config();
  cfg["note"] = std::string(1000, '[') + "\"" + std::string(1000, '{');
  EXPECT_NO_THROW(parse_config(cfg.dump()));
  // 128 levels parse; the value is then reported by its kind.
  EXPECT_TRUE(throws_error([&] { parse_config(nested_vocab(127)); }, ErrorKind::InvalidModel,
                           "'vocab_size' must be an integer, got array of 1 element(s)"));
}

TEST(Hardening, DeeplyNestedSafetensorsHeaderIsRefused) {
  for (const std::string& header : {"{\"w\":{\"dtype\":" + nested_array(100000, "\"F32\"") +
                                        ",\"shape\":[1],\"data_offsets\":[0,4]}}",
                                    "{\"__metadata__\":{\"x\":" + nested_array(100000, "\"y\"") +
                                        "},\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"}) {
    // Built by hand: serialising such a value (as the test writer would) recurses.
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
    file += header + std::string(4, '\0');
    EXPECT_TRUE(throws_error(
        [&] { parse_safetensors(reinterpret_cast<const std::byte*>(file.data()), file.size(), "f"); },
        ErrorKind::InvalidModel, "JSON nested more than 128 levels"));
  }
}

TEST(Hardening, DescribeNeverRecursesAndEscapesControlBytes) {
  Json deep = Json::parse(nested_array(50000, "{}"));
  EXPECT_EQ(detail::describe(deep), "array of 1 element(s)");
  EXPECT_EQ(detail::describe(Json("a\x1b[31m")), "string \"a\\u001b[31m\"");
  EXPECT_EQ(detail::printable(std::string("sh\0ard\n", 7)), "sh\\x00ard\\x0a");
}

TEST(Hardening, HugeLayerCountIsRejectedBeforeAllocating) {
  // Rejected against the files before per-layer bookkeeping (was 3 GB and 36 s for 10^6).
  for (int64_t layers : {int64_t(1000000), int64_t(2147483647)}) {
    SmallModel m;
    m.cfg["num_hidden_layers"] = layers;
    testing::write_file(m.path("config.json"), m.cfg.dump());
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(throws_error([&] { load(m.dir.path()); }, ErrorKind::InvalidModel,
                             "num_hidden_layers = " + std::to_string(layers) +
                                 " but the weights hold 2 of those layer(s)"));
    // Not a timing assertion on speed, a bound on the damage: seconds would mean the old path.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  }
}

TEST(Hardening, OneTensorOfAFarLayerDoesNotLetAHugeLayerCountThrough) {
  // The guard once took the largest layer index in the files: one empty tensor named after
  // layer 2^31 - 2 made a config of 2^31 - 1 layers pass it, and the expected tensor set then
  // took terabytes.
  const int64_t layers = 2147483647;
  Json cfg = testing::qwen3_config();
  cfg["num_hidden_layers"] = layers;
  std::vector<testing::TensorData> tensors = testing::model_tensors(testing::qwen3_config(), DType::F32);
  tensors.push_back({"model.layers." + std::to_string(layers - 1) + ".x", "F32", {0}, {}, {}});
  testing::TempDir dir;
  testing::write_model(dir.path(), cfg, tensors);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(throws_error([&] { load(dir.path()); }, ErrorKind::InvalidModel,
                           "num_hidden_layers = 2147483647 but the weights hold 3 of those layer(s)"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(Hardening, FifoConfigAndWeightsAreRefusedWithoutBlocking) {
  for (const char* name : {"config.json", "model.safetensors"}) {
    SmallModel m;
    fs::remove(m.path(name));
    ASSERT_EQ(::mkfifo(m.path(name).c_str(), 0600), 0);
    EXPECT_TRUE(throws_error([&] { load(m.dir.path()); }, ErrorKind::InvalidModel,
                             "not a regular file (a FIFO)"))
        << name;
  }
}

TEST(Hardening, ConfigPointingAtADeviceIsRefused) {
  SmallModel m;
  fs::remove(m.path("config.json"));
  fs::create_symlink("/dev/zero", m.path("config.json"));
  EXPECT_TRUE(throws_error([&] { load(m.dir.path()); }, ErrorKind::InvalidModel,
                           "not a regular file (a character device)"));
}

TEST(Hardening, SymlinkLoopIsNamedAsSuch) {
  for (const char* name : {"config.json", "model.safetensors"}) {
    SmallModel m;
    fs::remove(m.path(name));
    fs::create_symlink(name, m.path(name));  // points at itself
    EXPECT_TRUE(throws_error([&] { load(m.dir.path()); }, ErrorKind::InvalidModel, "symlink loop"))
        << name;
  }
}

TEST(Hardening, UnreadableFileSaysPermissionDenied) {
  SmallModel m;
  ASSERT_EQ(::chmod(m.path("config.json").c_str(), 0), 0);
  ::chmod(m.dir.path().c_str(), 0755);
  auto check = [&] {
    return throws_error([&] { load(m.dir.path()); }, ErrorKind::Io, "permission denied");
  };
  if (::geteuid() != 0) {
    EXPECT_TRUE(check());
    return;
  }
  // Root reads mode-000 files: the check runs in a child that drops to an unprivileged user.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const bool dropped = ::setgid(65534) == 0 && ::setuid(65534) == 0;
    ::_exit(!dropped ? 2 : check() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2) GTEST_SKIP() << "cannot drop root privileges here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "as an unprivileged user: not 'permission denied' (Io)";
}

TEST(Hardening, OversizedJsonIsRefusedBeforeReading) {
  SmallModel m;
  fs::resize_file(m.path("config.json"), detail::kMaxJsonFileBytes + 1);  // sparse
  EXPECT_TRUE(throws_error([&] { load(m.dir.path()); }, ErrorKind::InvalidModel, "-byte limit"));
}

TEST(Hardening, ShardNameWithNulIsPrintedWhole) {
  SmallModel m;
  fs::remove(m.path("model.safetensors"));
  Json index = {{"weight_map", {{"model.norm.weight", std::string("a\0b.safetensors", 15)}}}};
  testing::write_file(m.path("model.safetensors.index.json"), index.dump());
  EXPECT_TRUE(throws_error([&] { load(m.dir.path()); }, ErrorKind::InvalidModel,
                           "shard file name 'a\\x00b.safetensors'"));
}

TEST(Hardening, ResidentWeightsSurviveTruncation) {
  SmallModel m;
  Weights w = Weights::open(m.dir.path());
  const Tensor& t = w.at("model.norm.weight");
  const std::vector<uint8_t> before(reinterpret_cast<const uint8_t*>(t.data),
                                    reinterpret_cast<const uint8_t*>(t.data) + t.nbytes);
  w.make_resident();
  fs::resize_file(m.path("model.safetensors"), 0);  // a mapped page would now raise SIGBUS
  const Tensor& r = w.at("model.norm.weight");
  EXPECT_EQ(std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(r.data),
                                 reinterpret_cast<const uint8_t*>(r.data) + r.nbytes),
            before);
}

TEST(Hardening, TruncationBeforeResidencyIsAnIoError) {
  SmallModel m;
  Weights w = Weights::open(m.dir.path());
  fs::resize_file(m.path("model.safetensors"), 100);
  EXPECT_TRUE(throws_error([&] { w.make_resident(); }, ErrorKind::Io, "truncated after load"));
}

TEST(Hardening, ReleasedWeightsKeepShapesButNoBytes) {
  SmallModel m;
  Weights w = Weights::open(m.dir.path());
  w.release_data();
  EXPECT_FALSE(w.has_data());
  EXPECT_EQ(w.at("model.norm.weight").data, nullptr);
  EXPECT_EQ(w.at("model.norm.weight").shape, std::vector<int64_t>{32});
  EXPECT_TRUE(throws_error([&] { check_finite(w); }, ErrorKind::BadState, "released"));
}

TEST(Hardening, CheckFiniteNamesTheFirstBadElement) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    testing::TempDir dir;
    Json cfg = testing::qwen3_config();
    auto tensors = testing::model_tensors(cfg, dt);
    testing::write_model(dir.path(), cfg, tensors);
    EXPECT_NO_THROW(check_finite(Weights::open(dir.path())));
    for (auto& t : tensors) {
      if (t.name != "model.layers.1.self_attn.q_proj.weight") continue;
      const size_t es = dtype_size(dt), i = 5;
      // All exponent bits set, mantissa non-zero: a NaN in each format.
      if (dt == DType::F32) { t.bytes[i * es + 3] = 0x7f; t.bytes[i * es + 2] = 0xc0; }
      if (dt == DType::BF16) { t.bytes[i * es + 1] = 0x7f; t.bytes[i * es] = 0xc0; }
      if (dt == DType::F16) { t.bytes[i * es + 1] = 0x7e; }
    }
    testing::write_model(dir.path(), cfg, tensors);
    EXPECT_TRUE(throws_error([&] { check_finite(Weights::open(dir.path())); }, ErrorKind::InvalidModel,
                             "'model.layers.1.self_attn.q_proj.weight' element 5 is NaN or infinite"))
        << dtype_name(dt);
  }
}

}  // namespace
}  // namespace mpk::model
