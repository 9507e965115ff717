// The executor's contract: prefill equals token-by-token feeding, errors change nothing, reset,
// thread-count independence, f16 weights, and weight/graph mismatches.
#include "ref/executor.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>

#include "base/error.h"
#include "ir/builder.h"
#include "model/model.h"
#include "test_util.h"

namespace mpk::ref {
namespace {

namespace fs = std::filesystem;
using testing::rel_l2;

fs::path fixture(const char* name) { return fs::path(MPK_TEST_DATA) / name; }

::testing::AssertionResult throws_kind(const std::function<void()>& f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    if (e.kind() == kind) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "threw " << error_kind_name(e.kind()) << " (" << e.what() << "), expected "
           << error_kind_name(kind);
  }
  return ::testing::AssertionFailure() << "did not throw " << error_kind_name(kind);
}

// A loaded fixture with its graph.
struct Loaded {
  explicit Loaded(const fs::path& dir)
      : f(testing::read_fixture(dir)),
        model(model::load(dir)),
        graph(ir::build(model->config, model->dtype)) {}
  std::vector<int32_t> sequence() const {  // prompt + teacher-forced tokens
    std::vector<int32_t> s = f.prompt;
    s.insert(s.end(), f.tokens.begin(), f.tokens.end() - 1);
    return s;
  }
  testing::Fixture f;
  std::unique_ptr<model::Model> model;
  ir::Graph graph;
};

class PerFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(PerFixture, PrefillMatchesTokenByToken) {
  Loaded m(fixture(GetParam()));
  const std::vector<int32_t> seq = m.sequence();
  Executor whole(*m.model, m.graph, seq.size()), single(*m.model, m.graph, seq.size()),
      chunks(*m.model, m.graph, seq.size());
  whole.forward(seq.data(), seq.size());
  for (size_t i = 0; i < seq.size(); ++i) single.forward(&seq[i], 1);
  chunks.forward(seq.data(), 3);
  chunks.forward(seq.data() + 3, seq.size() - 3);
  EXPECT_LE(rel_l2(whole.logits(), single.logits()), 1e-6);
  EXPECT_LE(rel_l2(chunks.logits(), single.logits()), 1e-6);
  EXPECT_EQ(whole.position(), seq.size());
  EXPECT_EQ(single.position(), seq.size());
  EXPECT_EQ(whole.next_token(), single.next_token());
}

TEST_P(PerFixture, ThreadCountDoesNotChangeResults) {
  Loaded m(fixture(GetParam()));
  const std::vector<int32_t> seq = m.sequence();
  Executor one(*m.model, m.graph, seq.size(), {.num_threads = 1});
  Executor all(*m.model, m.graph, seq.size());
  one.forward(seq.data(), seq.size());
  all.forward(seq.data(), seq.size());
  EXPECT_EQ(one.logits(), all.logits());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PerFixture,
                         ::testing::Values("qwen3-f32", "qwen2-bf16", "llama-bf16-sharded"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(Executor, StartsEmpty) {
  Loaded m(fixture("qwen3-f32"));
  Executor exec(*m.model, m.graph, 4);
  EXPECT_TRUE(exec.logits().empty());
  EXPECT_EQ(exec.next_token(), -1);
  EXPECT_EQ(exec.position(), 0u);
  EXPECT_EQ(exec.capacity(), 4u);
}

TEST(Executor, NextTokenIsArgmaxOfLogits) {
  Loaded m(fixture("qwen2-f32"));
  Executor exec(*m.model, m.graph, 16);
  exec.forward(m.f.prompt.data(), m.f.prompt.size());
  const std::vector<float>& l = exec.logits();
  ASSERT_EQ(l.size(), size_t(m.f.vocab_size));
  EXPECT_EQ(exec.next_token(), int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
}

TEST(Executor, CapacityErrorChangesNothing) {
  Loaded m(fixture("qwen3-bf16"));
  const std::vector<int32_t> seq = m.sequence();
  Executor exec(*m.model, m.graph, 5);
  exec.forward(seq.data(), 3);
  const std::vector<float> before = exec.logits();
  EXPECT_TRUE(throws_kind([&] { exec.forward(seq.data() + 3, 3); }, ErrorKind::Capacity));
  EXPECT_EQ(exec.position(), 3u);
  EXPECT_EQ(exec.logits(), before);
  exec.forward(seq.data() + 3, 2);  // exactly full
  EXPECT_EQ(exec.position(), 5u);
  EXPECT_TRUE(throws_kind([&] { exec.forward(seq.data(), 1); }, ErrorKind::Capacity));
  // The cache was not disturbed: the same 5 tokens fed at once give the same logits.
  Executor fresh(*m.model, m.graph, 5);
  fresh.forward(seq.data(), 5);
  EXPECT_LE(rel_l2(exec.logits(), fresh.logits()), 1e-6);
}

TEST(Executor, BadTokensAreInvalidArgumentAndChangeNothing) {
  Loaded m(fixture("llama-f32"));
  const std::vector<int32_t> seq = m.sequence();
  Executor exec(*m.model, m.graph, 32);
  exec.forward(seq.data(), 4);
  const std::vector<float> before = exec.logits();
  const int32_t vocab = m.f.vocab_size;
  for (std::vector<int32_t> bad : {std::vector<int32_t>{seq[4], -1}, {vocab}, {1, vocab + 7, 2},
                                   {std::numeric_limits<int32_t>::min()}}) {
    EXPECT_TRUE(throws_kind([&] { exec.forward(bad.data(), bad.size()); },
                            ErrorKind::InvalidArgument));
    EXPECT_EQ(exec.position(), 4u);
    EXPECT_EQ(exec.logits(), before);
  }
  EXPECT_TRUE(throws_kind([&] { exec.forward(seq.data(), 0); }, ErrorKind::InvalidArgument));
  EXPECT_TRUE(throws_kind([&] { exec.forward(nullptr, 2); }, ErrorKind::InvalidArgument));
  // vocab - 1 is valid.
  const int32_t last = vocab - 1;
  EXPECT_NO_THROW(exec.forward(&last, 1));
  EXPECT_EQ(exec.position(), 5u);
  // The failed calls left the sequence intact: continuing matches an uninterrupted run.
  Executor clean(*m.model, m.graph, 32);
  std::vector<int32_t> ref(seq.begin(), seq.begin() + 4);
  ref.push_back(last);
  clean.forward(ref.data(), ref.size());
  EXPECT_LE(rel_l2(exec.logits(), clean.logits()), 1e-6);
}

TEST(Executor, ResetStartsANewSequence) {
  Loaded m(fixture("qwen2-bf16"));
  const std::vector<int32_t> seq = m.sequence();
  Executor exec(*m.model, m.graph, seq.size());
  exec.forward(seq.data(), seq.size());
  const std::vector<float> first = exec.logits();
  exec.reset();
  EXPECT_EQ(exec.position(), 0u);
  EXPECT_TRUE(exec.logits().empty());
  EXPECT_EQ(exec.next_token(), -1);
  exec.forward(seq.data(), seq.size());  // the whole capacity again
  EXPECT_EQ(exec.logits(), first);
}

TEST(Executor, ConstructionErrors) {
  Loaded m(fixture("qwen3-f32"));
  EXPECT_TRUE(throws_kind([&] { Executor e(*m.model, m.graph, 0); }, ErrorKind::InvalidArgument));
  EXPECT_TRUE(throws_kind([&] { Executor e(*m.model, m.graph, 4, {.num_threads = -1}); },
                          ErrorKind::InvalidArgument));
  EXPECT_TRUE(throws_kind([&] { Executor e(*m.model, m.graph, size_t(1) << 62); },
                          ErrorKind::OutOfMemory));
  // A graph whose shapes differ from the weights.
  model::Config wrong = m.model->config;
  wrong.intermediate_size += 8;
  ir::Graph g_wrong = ir::build(wrong, m.model->dtype);
  EXPECT_TRUE(throws_kind([&] { Executor e(*m.model, g_wrong, 4); }, ErrorKind::InvalidModel));
  // A graph that wants lm_head.weight from a tied model.
  model::Config untied = m.model->config;
  untied.tie_word_embeddings = false;
  ir::Graph g_untied = ir::build(untied, m.model->dtype);
  EXPECT_TRUE(throws_kind([&] { Executor e(*m.model, g_untied, 4); }, ErrorKind::InvalidModel));
}

// Writes `src`'s tensors as `dtype` (values rounded through f16 either way) with its config.
void write_through_f16(const model::Model& src, const fs::path& dir, DType dtype) {
  std::map<std::string, testing::StTensor> out;
  for (const auto& [name, t] : src.weights.tensors()) {
    ASSERT_EQ(t.dtype, DType::F32);
    std::vector<float> v(size_t(t.numel()));
    std::memcpy(v.data(), t.data, v.size() * 4);
    std::vector<float> rounded = testing::encode(v, DType::F16).values;
    out[name] = {dtype, t.shape, testing::encode(rounded, dtype).bytes};
  }
  testing::write_safetensors(dir / "model.safetensors", out);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(src.dir / "config.json"));
  cfg["dtype"] = cfg["torch_dtype"] = dtype == DType::F16 ? "float16" : "float32";
  std::ofstream(dir / "config.json") << cfg.dump(1);
}

TEST(Executor, F16WeightsWidenExactly) {
  auto src = model::load(fixture("qwen3-f32"));
  testing::TempDir f16_dir("f16"), f32_dir("f32");
  write_through_f16(*src, f16_dir.path(), DType::F16);
  write_through_f16(*src, f32_dir.path(), DType::F32);
  auto m16 = model::load(f16_dir.path());
  auto m32 = model::load(f32_dir.path());
  ASSERT_EQ(m16->dtype, DType::F16);
  ir::Graph g16 = ir::build(m16->config, m16->dtype), g32 = ir::build(m32->config, m32->dtype);
  const testing::Fixture f = testing::read_fixture(fixture("qwen3-f32"));
  Executor e16(*m16, g16, 16), e32(*m32, g32, 16);
  e16.forward(f.prompt.data(), f.prompt.size());
  e32.forward(f.prompt.data(), f.prompt.size());
  EXPECT_EQ(e16.logits(), e32.logits());
  // Rounding the weights to f16 moves the logits, but not far.
  std::vector<float> golden(f.logits.begin(), f.logits.begin() + f.vocab_size);
  EXPECT_LE(rel_l2(e16.logits(), golden), 1e-2);
  EXPECT_GT(rel_l2(e16.logits(), golden), 0.0);
}

}  // namespace
}  // namespace mpk::ref
