// The reference against transformers: every fixture of tests/data (make_fixtures.py) is loaded,
// its prompt prefilled and its greedy tokens teacher-forced; each step's logits must be within
// relative L2 1e-4 of transformers' fp32 logits and pick the same token.
#include <gtest/gtest.h>

#include <cstdio>

#include "ir/builder.h"
#include "model/model.h"
#include "ref/executor.h"
#include "test_util.h"

namespace mpk::ref {
namespace {

namespace fs = std::filesystem;
using testing::Fixture;
using testing::rel_l2;

constexpr double kGoldenTol = 1e-4;

std::vector<float> row(const Fixture& f, int step) {
  auto begin = f.logits.begin() + long(step) * f.vocab_size;
  return std::vector<float>(begin, begin + f.vocab_size);
}

class Golden : public ::testing::TestWithParam<fs::path> {};

TEST_P(Golden, MatchesTransformersStepByStep) {
  const Fixture f = testing::read_fixture(GetParam());
  ASSERT_EQ(int(f.tokens.size()), f.steps);
  auto model = model::load(f.dir);
  ASSERT_EQ(model->config.vocab_size, f.vocab_size);
  const ir::Graph graph = ir::build(model->config, model->dtype);
  Executor exec(*model, graph, f.prompt.size() + size_t(f.steps));
  double worst = 0;
  for (int step = 0; step < f.steps; ++step) {
    if (step == 0)
      exec.forward(f.prompt.data(), f.prompt.size());
    else
      exec.forward(&f.tokens[size_t(step - 1)], 1);
    const double err = rel_l2(exec.logits(), row(f, step));
    worst = std::max(worst, err);
    EXPECT_LE(err, kGoldenTol) << "step " << step;
    EXPECT_EQ(exec.next_token(), f.tokens[size_t(step)]) << "step " << step;
  }
  EXPECT_EQ(exec.position(), f.prompt.size() + size_t(f.steps) - 1);
  std::printf("[ golden   ] %s: max relative L2 %.2e over %d steps\n",
              f.dir.filename().c_str(), worst, f.steps);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::ValuesIn(testing::fixture_dirs()),
                         [](const auto& info) {
                           std::string name = info.param.filename().string();
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(GoldenFixtures, AllFamiliesAndDTypesArePresent) {
  // The parameterised test above passes vacuously without fixtures: insist on them.
  std::vector<std::string> names;
  for (const fs::path& d : testing::fixture_dirs()) names.push_back(d.filename().string());
  for (const char* want : {"qwen3-f32", "qwen3-bf16", "qwen2-f32", "qwen2-bf16", "llama-f32",
                           "llama-bf16-sharded"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

}  // namespace
}  // namespace mpk::ref
