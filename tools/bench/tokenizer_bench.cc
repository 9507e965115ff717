// Tokenizer encoding speed: the strings of a JSON-lines file (one JSON string a line, e.g.
// tools/tokenizer/corpus.py --out FILE) encoded `--reps` times by one thread.
//
//   tokenizer_bench --tokenizer DIR|FILE --corpus FILE [--reps 3] [--add-special-tokens]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/tokenizer.h"

int main(int argc, char** argv) {
  CLI::App app{"tokenizer_bench: encoding speed of mpk's tokenizer"};
  std::string tokenizer, corpus;
  int reps = 3;
  bool special = false;
  app.add_option("--tokenizer", tokenizer, "tokenizer.json or a directory holding one")->required();
  app.add_option("--corpus", corpus, "JSON lines, one string each")->required();
  app.add_option("--reps", reps, "passes over the corpus")->check(CLI::Range(1, 1000));
  app.add_flag("--add-special-tokens", special, "apply the template");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const auto tok = mpk::text::Tokenizer::load(tokenizer);
    const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::ifstream in(corpus);
    if (!in) throw std::runtime_error("cannot read " + corpus);
    std::vector<std::string> texts;
    size_t bytes = 0;
    for (std::string line; std::getline(in, line);) {
      texts.push_back(nlohmann::json::parse(line).get<std::string>());
      bytes += texts.back().size();
    }
    size_t tokens = 0;
    const auto t1 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r)
      for (const std::string& t : texts) tokens += tok->encode(t, special).size();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::printf("%s: load %.1f ms; %zu strings (%zu bytes) x %d: %zu tokens in %.3f s, %.2f M tokens/s, %.1f MB/s\n",
                tokenizer.c_str(), load_ms, texts.size(), bytes, reps, tokens, s, double(tokens) / s / 1e6,
                double(bytes) * reps / s / 1e6);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
}
