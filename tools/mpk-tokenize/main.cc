// mpk-tokenize: a model directory's tokenizer on the command line.
//
//   mpk-tokenize --tokenizer DIR|FILE [--add-special-tokens] < lines.jsonl
//
// Each input line is one JSON string; each output line is {"ids": [...], "text": decode(ids),
// "stream": the pieces of a StreamDecoder fed one id at a time, joined}, or {"error": "..."}
// for an input that cannot be encoded. `--text "..."` encodes one string instead and prints
// the ids comma-separated; `--ids 1,2,3` prints their text. Usage errors exit 2.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/token_ids.h"
#include "text/tokenizer.h"

namespace {

using mpk::text::StreamDecoder;
using mpk::text::Tokenizer;

nlohmann::json run_one(const std::shared_ptr<const Tokenizer>& tok, const std::string& s, bool special) {
  nlohmann::json r;
  try {
    const std::vector<int32_t> ids = tok->encode(s, special);
    StreamDecoder sd(tok);
    std::string stream;
    for (const int32_t id : ids) stream += sd.push(id);
    stream += sd.finish();
    r["ids"] = ids;
    r["text"] = tok->decode(ids);
    r["stream"] = stream;
  } catch (const mpk::Error& e) {
    r = {{"error", e.what()}};
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mpk-tokenize: encode and decode with a model directory's tokenizer.json"};
  std::string path, text, ids_arg;
  bool special = false;
  app.add_option("--tokenizer", path, "tokenizer.json, or a model directory holding one")->required();
  app.add_flag("--add-special-tokens", special, "apply the post-processor's template (e.g. a BOS token)");
  app.add_option("--text", text, "encode this text and print the ids");
  app.add_option("--ids", ids_arg, "decode these comma-separated ids");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // --help prints and succeeds; usage errors exit 2
    return code == 0 ? 0 : 2;
  }
  std::optional<std::vector<int32_t>> ids;
  if (app.count("--ids") && !(ids = mpk::parse_token_ids(ids_arg))) {
    std::fprintf(stderr, "mpk-tokenize: --ids: '%s' is not a list of token ids (e.g. 5,17,300)\n", ids_arg.c_str());
    return 2;
  }
  try {
    const auto tok = Tokenizer::load(path);
    // Given, even empty: an empty --text is encoded (to nothing), not a cue to read stdin.
    if (app.count("--text")) {
      const auto ids = tok->encode(text, special);
      for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? "," : "", ids[i]);
      std::printf("\n");
      return 0;
    }
    if (ids) {
      std::printf("%s\n", tok->decode(*ids).c_str());
      return 0;
    }
    std::string line;
    while (std::getline(std::cin, line)) {
      nlohmann::json out;
      try {
        const nlohmann::json in = nlohmann::json::parse(line);
        out = in.is_string() ? run_one(tok, in.get<std::string>(), special)
                             : nlohmann::json{{"error", "the line is not a JSON string"}};
      } catch (const nlohmann::json::exception& e) {
        out = {{"error", std::string("bad JSON line: ") + e.what()}};
      }
      std::cout << out.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) << '\n';
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpk-tokenize: %s\n", e.what());
    return 1;
  }
}
