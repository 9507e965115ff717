// The tokenizer through the C API: loading (file, directory, a model's), the size-query
// protocol of encode and decode, streaming detokenization, and every misuse's status.
#include <cstring>
#include <string>
#include <vector>

#include "api_fixture.h"

namespace {

using mpk_test::fixture;
using mpk_test::Loaded;

std::vector<int32_t> encode(const mpk_tokenizer* tok, const std::string& text, int special) {
  size_t n = 0;
  const mpk_status s = mpk_tokenizer_encode(tok, text.data(), text.size(), special, nullptr, 0, &n);
  EXPECT_TRUE(s == MPK_OK || s == MPK_ERROR_CAPACITY) << mpk_last_error();
  std::vector<int32_t> ids(n);
  EXPECT_EQ(mpk_tokenizer_encode(tok, text.data(), text.size(), special, ids.data(), n, &n), MPK_OK);
  return ids;
}

std::string decode(const mpk_tokenizer* tok, const std::vector<int32_t>& ids, int skip) {
  size_t len = 0;
  char probe[1];
  const mpk_status s = mpk_tokenizer_decode(tok, ids.data(), ids.size(), skip, probe, 1, &len);
  if (s == MPK_OK) return std::string();
  EXPECT_EQ(s, MPK_ERROR_CAPACITY) << mpk_last_error();
  std::string text(len + 1, '\0');
  EXPECT_EQ(mpk_tokenizer_decode(tok, ids.data(), ids.size(), skip, text.data(), text.size(), &len), MPK_OK);
  EXPECT_EQ(text[len], '\0');
  text.resize(len);
  return text;
}

TEST(ApiTokenizer, EncodesDecodesAndStreams) {
  mpk_tokenizer* tok = nullptr;
  const std::string dir = fixture("tokenizers/llama3-large");
  ASSERT_EQ(mpk_tokenizer_load(dir.c_str(), &tok), MPK_OK) << mpk_last_error();
  size_t vocab = 0;
  EXPECT_EQ(mpk_tokenizer_vocab_size(tok, &vocab), MPK_OK);
  EXPECT_EQ(vocab, 4000u);
  const std::string text = "Hello 世界 🙂 it's 12345<|eot_id|>";
  const auto plain = encode(tok, text, 0), with_bos = encode(tok, text, 1);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(with_bos.size(), plain.size() + 1);
  EXPECT_EQ(std::vector<int32_t>(with_bos.begin() + 1, with_bos.end()), plain);
  EXPECT_EQ(decode(tok, plain, 0), text);
  EXPECT_EQ(decode(tok, plain, 1), "Hello 世界 🙂 it's 12345");
  EXPECT_EQ(decode(tok, with_bos, 0), "<|begin_of_text|>" + text);
  // A buffer one id short: nothing written, the size reported.
  std::vector<int32_t> small(plain.size() - 1, -5);
  size_t n = 0;
  EXPECT_EQ(mpk_tokenizer_encode(tok, text.data(), text.size(), 0, small.data(), small.size(), &n),
            MPK_ERROR_CAPACITY);
  EXPECT_EQ(n, plain.size());
  EXPECT_EQ(small, std::vector<int32_t>(plain.size() - 1, -5));
  // The text without its NUL does not fit either.
  std::string buf(text.size(), 'x');
  size_t len = 0;
  EXPECT_EQ(mpk_tokenizer_decode(tok, plain.data(), plain.size(), 0, buf.data(), buf.size(), &len),
            MPK_ERROR_CAPACITY);
  EXPECT_EQ(len, text.size());
  EXPECT_EQ(buf, std::string(text.size(), 'x'));
  // Streaming: the pieces joined are the text, each whole UTF-8.
  mpk_detokenizer* d = nullptr;
  ASSERT_EQ(mpk_detokenizer_create(tok, 0, &d), MPK_OK);
  mpk_tokenizer_destroy(tok);  // the detokenizer keeps it alive
  std::string joined;
  for (const int32_t id : plain) {
    const char* piece = nullptr;
    ASSERT_EQ(mpk_detokenizer_push(d, id, &piece, &len), MPK_OK);
    EXPECT_EQ(std::strlen(piece), len);
    joined.append(piece, len);
  }
  const char* rest = nullptr;
  ASSERT_EQ(mpk_detokenizer_finish(d, &rest, &len), MPK_OK);
  joined.append(rest, len);
  EXPECT_EQ(joined, text);
  mpk_detokenizer_destroy(d);
}

TEST(ApiTokenizer, AModelsTokenizerIsItsDirectorys) {
  Loaded l(fixture("qwen3-f32"));
  ASSERT_NE(l.model, nullptr);
  mpk_tokenizer* tok = nullptr;
  ASSERT_EQ(mpk_model_tokenizer(l.model, &tok), MPK_OK) << mpk_last_error();
  const auto ids = encode(tok, "a<|im_end|>", 1);
  ASSERT_FALSE(ids.empty());
  for (const int32_t id : ids) EXPECT_LT(size_t(id), size_t(l.info.vocab_size));
  mpk_tokenizer_destroy(tok);
}

TEST(ApiTokenizer, MisuseGetsItsStatus) {
  mpk_tokenizer* tok = nullptr;
  EXPECT_EQ(mpk_tokenizer_load(nullptr, &tok), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_tokenizer_load(fixture("tokenizers").c_str(), nullptr), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_tokenizer_load(fixture("no-such-dir").c_str(), &tok), MPK_ERROR_NOT_FOUND);
  EXPECT_EQ(tok, nullptr);
  EXPECT_EQ(mpk_tokenizer_load(fixture("qwen3-f32/config.json").c_str(), &tok), MPK_ERROR_INVALID_MODEL);
  EXPECT_NE(std::string(mpk_last_error()), "");
  EXPECT_EQ(mpk_model_tokenizer(nullptr, &tok), MPK_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(mpk_tokenizer_load(fixture("tokenizers/qwen2-small").c_str(), &tok), MPK_OK);
  size_t n = 7;
  int32_t ids[4];
  EXPECT_EQ(mpk_tokenizer_encode(tok, "ab\xC3", 3, 0, ids, 4, &n), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(mpk_tokenizer_encode(tok, nullptr, 2, 0, ids, 4, &n), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_tokenizer_encode(tok, "ab", 2, 0, nullptr, 4, &n), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_tokenizer_encode(tok, "ab", 2, 0, ids, 4, nullptr), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_tokenizer_encode(nullptr, "ab", 2, 0, ids, 4, &n), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_tokenizer_encode(tok, nullptr, 0, 0, nullptr, 0, &n), MPK_OK);  // empty text
  EXPECT_EQ(n, 0u);
  const int32_t neg[] = {5, -1};
  char text[16];
  size_t len = 0;
  EXPECT_EQ(mpk_tokenizer_decode(tok, neg, 2, 0, text, sizeof text, &len), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_tokenizer_decode(tok, nullptr, 1, 0, text, sizeof text, &len), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_tokenizer_decode(tok, neg, 1, 0, nullptr, 4, &len), MPK_ERROR_INVALID_ARGUMENT);
  mpk_detokenizer* d = nullptr;
  EXPECT_EQ(mpk_detokenizer_create(nullptr, 0, &d), MPK_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(mpk_detokenizer_create(tok, 0, &d), MPK_OK);
  const char* piece = nullptr;
  EXPECT_EQ(mpk_detokenizer_push(d, -3, &piece, &len), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_detokenizer_push(d, 5, nullptr, &len), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_detokenizer_push(nullptr, 5, &piece, &len), MPK_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpk_detokenizer_finish(nullptr, &piece, &len), MPK_ERROR_INVALID_ARGUMENT);
  mpk_detokenizer_destroy(d);
  mpk_detokenizer_destroy(nullptr);
  mpk_tokenizer_destroy(tok);
  mpk_tokenizer_destroy(nullptr);
}

}  // namespace
