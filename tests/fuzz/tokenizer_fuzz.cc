// The tokenizer. An input that starts with '{' is a tokenizer.json: loaded, then used on a few
// fixed strings (encode, decode, streaming decode). Any other input is text, for each bundled
// test tokenizer. Bad files and text that is not UTF-8 must be an mpk::Error; decode(encode(s))
// must never fail, and the streamed pieces must join to decode's text.
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

using namespace mpk;

void exercise(const std::shared_ptr<const text::Tokenizer>& tok, const std::string& s) {
  fuzz::expect_mpk_errors_only([&] {
    const bool valid = text::valid_utf8(s);
    std::vector<int32_t> ids;
    try {
      ids = tok->encode(s, true);
    } catch (const Error& e) {
      if (valid) throw;  // valid text must encode
      return;
    }
    const std::string whole = tok->decode(ids);
    text::StreamDecoder sd(tok);
    std::string joined;
    for (const int32_t id : ids) joined += sd.push(id);
    joined += sd.finish();
    if (joined != whole || !text::valid_utf8(whole)) {
      std::fprintf(stderr, "fuzz: streamed text differs from decode, or decode is not UTF-8\n");
      std::abort();
    }
  });
}

const std::vector<std::shared_ptr<const text::Tokenizer>>& bundled() {
  static const auto t = [] {
    std::vector<std::shared_ptr<const text::Tokenizer>> v;
    for (const char* n : {"qwen2-small", "llama3-small", "gpt2-edge"})
      v.push_back(text::Tokenizer::load(fuzz::test_data() / "tokenizers" / n));
    return v;
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  bundled();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (!input.empty() && input[0] == '{') {
    const auto path = fuzz::scratch_dir() / "tokenizer.json";
    fuzz::write_file(path, input);
    std::shared_ptr<const text::Tokenizer> tok;
    fuzz::expect_mpk_errors_only([&] { tok = text::Tokenizer::load(path); });
    if (!tok) return 0;
    for (const char* s : {"", "Hello, world! it's 12345", " \t\n\r\n  ", "\xe4\xbd\xa0\xe5\xa5\xbd\xf0\x9f\x99\x82",
                          "e\xcc\x81<|im_end|><|eot_id|>", "\xff\xfe"})
      exercise(tok, s);
    return 0;
  }
  for (const auto& tok : bundled()) exercise(tok, input);
  return 0;
}
