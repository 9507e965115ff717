// The sharded-weights index: the input is model.safetensors.index.json of a copy of the
// llama-bf16-sharded fixture (its three real shards stay in place). Weights::open, then
// model::load, read the index and the shards it names.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "model/model.h"
#include "model/weights.h"

namespace {

namespace fs = std::filesystem;

const fs::path& model_dir() {
  static const fs::path dir = mpk::fuzz::copy_fixture("llama-bf16-sharded");
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  model_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& dir = model_dir();
  mpk::fuzz::write_file(dir / "model.safetensors.index.json",
                        std::string_view(reinterpret_cast<const char*>(data), size));
  mpk::fuzz::expect_mpk_errors_only([&] {
    mpk::model::Weights w = mpk::model::Weights::open(dir);
    for (const auto& [name, t] : w.tensors()) mpk::fuzz::touch(t.data, t.nbytes);
  });
  mpk::fuzz::expect_mpk_errors_only([&] { (void)mpk::model::load(dir); });
  return 0;
}
