// Speed of the CPU reference executor (a program, not a test).
//
//   mpk_ref_bench fixtures [threads]        every golden fixture: prefill its prompt, decode 256
//   mpk_ref_bench synthetic [threads] [layers] [hidden] [intermediate] [heads] [kv_heads]
//                           [head_dim] [vocab] [prefill]
//                                           a random bf16 Qwen3-style model of that shape
//                                           (default: Qwen3-0.6B's layer shape, 4 layers)
// threads 0 = all cores. Prints tokens/s of prefill and of decode.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "ir/builder.h"
#include "model/model.h"
#include "ref/executor.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void bench(const mpk::model::Model& m, int threads, const std::vector<int32_t>& prompt,
           int decode_steps, const std::string& label) {
  const mpk::ir::Graph g = mpk::ir::build(m.config, m.dtype);
  mpk::ref::Executor exec(m, g, prompt.size() + size_t(decode_steps), {.num_threads = threads});
  // Warm-up: the first pass faults the mapped weights in.
  exec.forward(prompt.data(), prompt.size());
  exec.reset();
  auto t0 = Clock::now();
  exec.forward(prompt.data(), prompt.size());
  const double prefill = seconds_since(t0);
  t0 = Clock::now();
  for (int i = 0; i < decode_steps; ++i) {
    int32_t next = exec.next_token();
    exec.forward(&next, 1);
  }
  const double decode = seconds_since(t0);
  std::printf("%-22s threads %-2d  prefill %4zu tok: %9.1f tok/s   decode %3d tok: %8.2f tok/s "
              "(%.2f ms/tok)\n",
              label.c_str(), threads == 0 ? int(std::thread::hardware_concurrency()) : threads,
              prompt.size(), double(prompt.size()) / prefill, decode_steps,
              decode_steps / decode, 1e3 * decode / decode_steps);
}

// A random bf16 model directory of the given Qwen3 shape (weights are irrelevant to speed).
void write_synthetic(const fs::path& dir, const mpk::model::Config& c) {
  nlohmann::json cfg = {{"architectures", {"Qwen3ForCausalLM"}},
                        {"model_type", "qwen3"},
                        {"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_hidden_layers", c.num_layers},
                        {"num_attention_heads", c.num_heads},
                        {"num_key_value_heads", c.num_kv_heads},
                        {"head_dim", c.head_dim},
                        {"max_position_embeddings", 40960},
                        {"rms_norm_eps", 1e-6},
                        {"rope_theta", 1e6},
                        {"tie_word_embeddings", c.tie_word_embeddings},
                        {"torch_dtype", "bfloat16"}};
  std::ofstream(dir / "config.json") << cfg.dump(1);
  std::map<std::string, mpk::ref::testing::StTensor> tensors;
  uint64_t state = 88172645463325252ull;
  for (const auto& [name, shape] : mpk::model::expected_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    mpk::ref::testing::StTensor t{mpk::DType::BF16, shape, std::vector<uint8_t>(size_t(n) * 2)};
    for (int64_t i = 0; i < n; ++i) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      // Small values of both signs: exponent 0x3c (~2^-7), random mantissa.
      uint16_t h = uint16_t(((state & 1) << 15) | (0x3cu << 7) | ((state >> 8) & 0x7f));
      std::memcpy(&t.bytes[size_t(i) * 2], &h, 2);
    }
    tensors.emplace(name, std::move(t));
  }
  mpk::ref::testing::write_safetensors(dir / "model.safetensors", tensors);
}

int arg(int argc, char** argv, int i, int fallback) {
  return argc > i ? std::atoi(argv[i]) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "fixtures";
  try {
    if (mode == "fixtures") {
      const int threads = arg(argc, argv, 2, 0);
      for (const fs::path& dir : mpk::ref::testing::fixture_dirs()) {
        auto f = mpk::ref::testing::read_fixture(dir);
        auto m = mpk::model::load(dir);
        bench(*m, threads, f.prompt, 256, dir.filename().string());
      }
      return 0;
    }
    if (mode == "synthetic") {
      mpk::model::Config c;
      c.family = mpk::model::Family::Qwen3;
      c.qk_norm = true;
      c.tie_word_embeddings = true;
      const int threads = arg(argc, argv, 2, 0);
      c.num_layers = arg(argc, argv, 3, 4);
      c.hidden_size = arg(argc, argv, 4, 1024);
      c.intermediate_size = arg(argc, argv, 5, 3072);
      c.num_heads = arg(argc, argv, 6, 16);
      c.num_kv_heads = arg(argc, argv, 7, 8);
      c.head_dim = arg(argc, argv, 8, 128);
      c.vocab_size = arg(argc, argv, 9, 151936);
      const int prefill = arg(argc, argv, 10, 64);
      mpk::ref::testing::TempDir dir("bench");
      auto t0 = Clock::now();
      write_synthetic(dir.path(), c);
      auto m = mpk::model::load(dir.path());
      std::printf("synthetic qwen3: %d layers, hidden %d, intermediate %d, heads %d/%d x %d, "
                  "vocab %d, %.0f M params bf16 (written in %.1f s)\n",
                  c.num_layers, c.hidden_size, c.intermediate_size, c.num_heads, c.num_kv_heads,
                  c.head_dim, c.vocab_size, double(m->num_parameters) / 1e6, seconds_since(t0));
      std::vector<int32_t> prompt(static_cast<size_t>(prefill));
      for (int i = 0; i < prefill; ++i) prompt[size_t(i)] = (i * 7919) % c.vocab_size;
      bench(*m, threads, prompt, 16, "synthetic");
      return 0;
    }
    std::fprintf(stderr, "usage: %s fixtures [threads] | synthetic [threads] [layers] [hidden] "
                 "[intermediate] [heads] [kv_heads] [head_dim] [vocab] [prefill]\n", argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpk_ref_bench: %s\n", e.what());
    return 1;
  }
}
