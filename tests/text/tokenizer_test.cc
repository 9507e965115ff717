// The tokenizer against ids the reference library (Hugging Face tokenizers) produced for the
// bundled tokenizer files (tests/data/tokenizers/golden.jsonl, tools/tokenizer/), the decoders,
// and its errors on malformed files and bad arguments.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "base/error.h"
#include "text/tokenizer.h"

namespace mpk::text {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kDir = fs::path(MPK_TEST_DATA) / "tokenizers";

std::shared_ptr<const Tokenizer> load(const std::string& name) { return Tokenizer::load(kDir / name); }

TEST(Tokenizer, MatchesTheReferenceOnTheGoldenSet) {
  std::ifstream in(kDir / "golden.jsonl");
  ASSERT_TRUE(in) << "missing golden.jsonl";
  std::map<std::string, std::shared_ptr<const Tokenizer>> toks;
  size_t n = 0, special = 0;
  for (std::string line; std::getline(in, line);) {
    const Json g = Json::parse(line);
    const std::string name = g.at("tokenizer");
    if (!toks.count(name)) toks[name] = load(name);
    const auto& tok = toks[name];
    const std::string text = g.at("text");
    const bool add = g.at("add_special_tokens");
    const std::vector<int32_t> want = g.at("ids");
    SCOPED_TRACE(name + " add_special_tokens=" + std::to_string(add) + " text=" + Json(text).dump());
    const std::vector<int32_t> got = tok->encode(text, add);
    ASSERT_EQ(got, want);
    EXPECT_EQ(tok->decode(got), g.at("decoded").get<std::string>());
    StreamDecoder sd(tok);
    std::string stream;
    for (const int32_t id : got) stream += sd.push(id);
    stream += sd.finish();
    EXPECT_EQ(stream, tok->decode(got));
    ++n;
    special += add;
  }
  EXPECT_GE(toks.size(), 4u);
  EXPECT_GE(n, 1000u);
  EXPECT_GT(special, 0u);
}

TEST(Tokenizer, SpecialTokensAreCutOutWhole) {
  const auto tok = load("qwen2-large");
  const int32_t end = *tok->token_id("<|im_end|>");
  EXPECT_TRUE(tok->is_special(end));
  const auto ids = tok->encode("a<|im_end|>b<|im_", false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), end), 1);
  EXPECT_EQ(tok->decode(ids), "a<|im_end|>b<|im_");
  EXPECT_EQ(tok->decode(ids, /*skip_special=*/true), "ab<|im_");
  const auto llama = load("llama3-large");
  const int32_t bos = *llama->token_id("<|begin_of_text|>");
  EXPECT_EQ(llama->encode("hi", true).front(), bos);
  EXPECT_NE(llama->encode("hi", false).front(), bos);
  EXPECT_TRUE(load("qwen2-large")->encode("", true).empty());
}

// gpt2-edge: every added-token flag, as the reference applies it (expected texts from it).
TEST(Tokenizer, AddedTokenFlagsAsTheReference) {
  const auto tok = load("gpt2-edge");
  auto text = [&](const std::string& s) { return tok->decode(tok->encode(s, false)); };
  auto has = [&](const std::string& s, const char* token) {
    const auto ids = tok->encode(s, false);
    return std::count(ids.begin(), ids.end(), *tok->token_id(token));
  };
  // Each piece between added tokens gets ByteLevel's prefix space.
  EXPECT_EQ(text("a <|im_start|> b"), " a<|im_start|> b");  // lstrip
  EXPECT_EQ(text("a <|im_end|>  b"), " a <|im_end|> b");     // rstrip
  // single_word, with the reference's \w: U+0301 and Ⓐ (So, Alphabetic) are word characters,
  // ½ (No) and an unassigned code point are not. It is matched before normalization.
  EXPECT_EQ(has("<think> x<think>", "<think>"), 1);
  EXPECT_EQ(has("<think>\u0301", "<think>"), 0);
  EXPECT_EQ(has("\u24B6<think>", "<think>"), 0);
  EXPECT_EQ(has("\U00076351<think>", "<think>"), 1);
  EXPECT_EQ(text("\u00BD<think>"), " 1\u20442<think>");
  // normalized: "ﬁ" is matched as "fi". A discarded single_word match ("find" in "finds") is
  // skipped whole: the shorter "fi" at the same place is not tried.
  EXPECT_EQ(text("first"), "\uFB01 rst");
  EXPECT_EQ(text("\uFB01nd it"), "find it");
  EXPECT_EQ(has("finds", "\uFB01") + has("finds", "find"), 0);
  // The Split by "..." drops it, after normalization ("…").
  EXPECT_EQ(text("wait... what\u2026"), " wait what");
}

// The reference's normalizers use Unicode 9.0 tables: later characters are left alone.
TEST(Tokenizer, NormalizersLeaveCharactersAfterUnicode9) {
  const auto tok = load("gpt2-edge");  // NFKD, then NFC
  auto text = [&](const std::string& s) { return tok->decode(tok->encode(s, false)); };
  EXPECT_EQ(text("\uFB00"), " ff");
  EXPECT_EQ(text("\u32FF"), " \u32FF");                           // Unicode 12.1: <square> 令和
  EXPECT_EQ(text("\U0001CCD6"), " \U0001CCD6");                   // Unicode 16.0: <font> A
  EXPECT_EQ(text("a\u0301\u0334"), " \u00E1\u0334");              // reordered, composed
  EXPECT_EQ(text("a\u1DF6\u0334"), " a\u1DF6\u0334");             // U+1DF6 (10.0): class 0 there
  EXPECT_EQ(text("\U00011935\U00011930"), " \U00011935\U00011930");  // composes to U+11938 (13.0)
}

TEST(Tokenizer, StreamingNeverSplitsACharacter) {
  const auto tok = load("qwen2-small");
  const std::string text = "naïve 你好世界 🙂👍🏽 \u00e9 \u0915\u094D\u0937";
  const auto ids = tok->encode(text, false);
  ASSERT_EQ(tok->decode(ids), text);  // NFC leaves this text as it is
  StreamDecoder sd(tok);
  std::string joined;
  for (const int32_t id : ids) {
    const std::string piece = sd.push(id);
    // Every piece is whole UTF-8 by itself.
    EXPECT_EQ(tok->decode(tok->encode(piece, false)), piece);
    joined += piece;
  }
  joined += sd.finish();
  EXPECT_EQ(joined, text);
  // A token cut mid-character at the end of the stream becomes U+FFFD, as decode() does.
  int32_t partial = -1;
  for (int32_t id = 0; id < tok->vocab_size() && partial < 0; ++id)
    if (tok->token_bytes(id) == "\xE4") partial = id;
  ASSERT_GE(partial, 0);
  StreamDecoder sd2(tok);
  EXPECT_EQ(sd2.push(partial), "");
  EXPECT_EQ(sd2.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{partial}), "\xEF\xBF\xBD");
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  const auto tok = load("llama3-large");
  const std::string text = "The quick brown fox jumps over 1234567 lazy dogs. 你好! <|eot_id|>";
  const auto want = tok->encode(text, true);
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        if (tok->encode(text, true) != want) ++bad;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

template <class F>
ErrorKind kind_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error";
  return ErrorKind::Internal;
}

TEST(Tokenizer, BadArgumentsAreClearErrors) {
  const auto tok = load("qwen2-small");
  EXPECT_EQ(kind_of([&] { tok->encode("abc\xC3", false); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { tok->encode("\xED\xA0\x80", false); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { tok->decode(std::vector<int32_t>{-1}); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { StreamDecoder(tok).push(-7); }), ErrorKind::InvalidArgument);
  // Ids past the tokenizer's vocabulary (a model's padded rows) decode to nothing.
  const int32_t a = *tok->token_id("a");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{a, tok->vocab_size(), 1 << 30, a}), "aa");
  EXPECT_FALSE(tok->is_token(tok->vocab_size()));
  EXPECT_EQ(StreamDecoder(tok).push(1 << 30), "");
}

// A copy of a bundled tokenizer.json with one change, written to a temporary file.
class Malformed : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(kDir / "qwen2-small" / "tokenizer.json");
    base_ = Json::parse(in);
    dir_ = fs::temp_directory_path() / ("mpk_tok_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  ErrorKind load_text(const std::string& text) {
    std::ofstream(dir_ / "tokenizer.json") << text;
    return kind_of([&] { Tokenizer::load(dir_); });
  }
  ErrorKind load_json(const Json& j) { return load_text(j.dump()); }
  Json base_;
  fs::path dir_;
};

TEST_F(Malformed, EachDefectHasItsStatus) {
  EXPECT_EQ(kind_of([&] { Tokenizer::load(dir_ / "missing.json"); }), ErrorKind::NotFound);
  EXPECT_EQ(kind_of([&] { Tokenizer::load(dir_); }), ErrorKind::NotFound);  // no tokenizer.json
  EXPECT_EQ(load_text("{\"model\": "), ErrorKind::InvalidModel);
  EXPECT_EQ(load_text("[1, 2]"), ErrorKind::InvalidModel);
  Json j = base_;
  j.erase("model");
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  j = base_;
  j["model"]["merges"].push_back("xyz\xC4\xA0 q");  // a part the vocabulary lacks
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  j = base_;
  j["model"]["merges"].push_back("a b c");
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  j = base_;
  j["model"]["vocab"]["zzz-dup"] = j["model"]["vocab"]["a"];  // two tokens, one id
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  j = base_;
  j["model"]["vocab"]["zzz-big"] = int64_t(1) << 40;
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  j["model"]["vocab"]["zzz-big"] = int64_t(1) << 20;  // tables sized by the largest id
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  j["model"]["vocab"]["zzz-big"] = (int64_t(1) << 20) - 1;
  EXPECT_NO_THROW(Tokenizer::load((std::ofstream(dir_ / "tokenizer.json") << j.dump(), dir_)));
  j = base_;
  j["model"]["vocab"]["zzz-neg"] = -3;
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  j = base_;
  j["model"]["vocab"].erase("a");  // a byte without its token
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  j = base_;
  j["added_tokens"][0]["id"] = "seven";
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  j = base_;
  j["added_tokens"][0]["special"] = "yes";  // not a boolean
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  j = base_;
  j["model"]["type"] = "WordPiece";
  EXPECT_EQ(load_json(j), ErrorKind::Unsupported);
  j = base_;
  j["model"]["dropout"] = 0.1;
  EXPECT_EQ(load_json(j), ErrorKind::Unsupported);
  j = base_;
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_EQ(load_json(j), ErrorKind::Unsupported);
  j = base_;
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_EQ(load_json(j), ErrorKind::Unsupported);
  j = base_;
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_EQ(load_json(j), ErrorKind::Unsupported);
  // One byte whatever the character: pieces that end inside a character.
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "[a-z]+\\C";
  EXPECT_EQ(load_json(j), ErrorKind::Unsupported);
  j = base_;
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithNext";
  EXPECT_EQ(load_json(j), ErrorKind::Unsupported);
  j = base_;
  j["post_processor"] = {{"type", "RobertaProcessing"}};
  EXPECT_EQ(load_json(j), ErrorKind::Unsupported);
  // Unchanged, it loads.
  EXPECT_NO_THROW(Tokenizer::load((std::ofstream(dir_ / "tokenizer.json") << base_.dump(), dir_)));
}

// A post-processor template whose special token's id is not in the vocabulary: refused at load
// (it would be added to every prompt and reach the model).
TEST_F(Malformed, TemplateIdsMustBeTokens) {
  std::ifstream in(kDir / "llama3-small" / "tokenizer.json");
  Json j = Json::parse(in);
  {
    std::ofstream f(dir_ / "tokenizer.json");
    f << j.dump();
  }
  EXPECT_NO_THROW(Tokenizer::load(dir_));  // unchanged, it loads
  Json& specials = j["post_processor"]["processors"][1]["special_tokens"];
  ASSERT_TRUE(specials.is_object() && !specials.empty()) << j["post_processor"].dump();
  for (auto& [name, s] : specials.items()) s["ids"] = {1000000};  // below kMaxId, past the vocabulary
  EXPECT_EQ(load_json(j), ErrorKind::InvalidModel);
  std::string why;
  try {
    Tokenizer::load(dir_);
  } catch (const Error& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("template adds id 1000000, which is no token"), std::string::npos) << why;
}

}  // namespace
}  // namespace mpk::text
