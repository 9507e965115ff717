// config.json, then what is built from it: the input is the text of config.json.
//  1. parse_config, then (for at most kMaxLayers layers, the sizes a real weights file bounds)
//     expected_tensors, the IR builder, validate and the text dump;
//  2. model::load of a copy of the fixture of the parsed family and dtype with this
//     config.json, so the config is checked against real tensors, then the IR of the result.
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "fuzz_util.h"
#include "ir/builder.h"
#include "ir/graph.h"
#include "model/config.h"
#include "model/model.h"
#include "model/weights.h"

namespace {

using namespace mpk;
namespace fs = std::filesystem;

// Building a graph or a tensor list is proportional to the layer count; load() bounds it by
// the tensors in the files. Parsing itself is always run, whatever the count.
constexpr int kMaxLayers = 64;

// Fixture folders by (family, dtype is bf16), copied once per process.
const std::map<std::pair<model::Family, bool>, fs::path>& fixtures() {
  static const auto m = [] {
    std::map<std::pair<model::Family, bool>, fs::path> r;
    r[{model::Family::Qwen3, false}] = fuzz::copy_fixture("qwen3-f32");
    r[{model::Family::Qwen3, true}] = fuzz::copy_fixture("qwen3-bf16");
    r[{model::Family::Qwen2, false}] = fuzz::copy_fixture("qwen2-f32");
    r[{model::Family::Qwen2, true}] = fuzz::copy_fixture("qwen2-bf16");
    r[{model::Family::Llama, false}] = fuzz::copy_fixture("llama-f32");
    r[{model::Family::Llama, true}] = fuzz::copy_fixture("llama-bf16-sharded");
    return r;
  }();
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixtures();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  model::Config cfg;
  bool parsed = false;
  fuzz::expect_mpk_errors_only([&] {
    cfg = model::parse_config(text, "fuzz/config.json");
    parsed = true;
  });
  if (!parsed) return 0;

  if (cfg.num_layers <= kMaxLayers) {
    fuzz::expect_mpk_errors_only([&] {
      auto tensors = model::expected_tensors(cfg);
      ir::Graph g = ir::build(cfg);
      ir::validate(g);
      (void)ir::to_text(g);
    });
  }

  const fs::path& dir = fixtures().at({cfg.family, cfg.torch_dtype != DType::F32});
  fuzz::write_file(dir / "config.json", text);
  fuzz::expect_mpk_errors_only([&] {
    auto m = model::load(dir);
    ir::Graph g = ir::build(m->config, m->dtype);
    ir::validate(g);
    (void)ir::to_json(g);
  });
  return 0;
}
