// Text to token ids and back for a model directory's tokenizer.json (Hugging Face tokenizers
// format): byte-level BPE as Qwen2/Qwen3, Llama 3 and GPT-2 use it. The pipeline is the
// reference library's: added tokens are cut out of the text first (special tokens and those
// marked not normalized on the raw text, the others after normalization), the rest is
// normalized (NFC/NFKC/NFD/NFKD), split by the pre-tokenizers (regex splits, byte level),
// encoded by BPE, and the post-processor's template adds its special tokens. Decoding joins the
// tokens' bytes and replaces invalid UTF-8 by U+FFFD; StreamDecoder does the same one token at
// a time and never emits part of a character.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mpk::text {

class Tokenizer {
 public:
  // `path`: a tokenizer.json file, or a model directory holding one. Errors: NotFound (no
  // file), Io, InvalidModel (not JSON, a vocabulary or merge that does not add up, ids out of
  // range), Unsupported (a model type, normalizer, pre-tokenizer, decoder or post-processor
  // this implementation lacks, named in the message).
  static std::shared_ptr<const Tokenizer> load(const std::filesystem::path& path);
  ~Tokenizer();

  // The ids of UTF-8 `text`; `add_special_tokens` applies the post-processor's template (e.g.
  // Llama 3's <|begin_of_text|>). Error(InvalidArgument) when `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // The text of `ids` (special tokens left out with `skip_special`). An id that is no token
  // decodes to nothing, as in the reference library (a model's vocabulary is often padded
  // beyond its tokenizer's); Error(InvalidArgument) for a negative id.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The bytes the decoder makes of one token (not necessarily whole characters; empty for an
  // id that is no token). Error(InvalidArgument) for a negative id.
  const std::string& token_bytes(int32_t id) const;
  bool is_token(int32_t id) const;
  bool is_special(int32_t id) const;
  // 1 + the largest id.
  int32_t vocab_size() const;
  std::optional<int32_t> token_id(std::string_view token) const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Decodes a stream of ids as they are produced: each push returns the text that is complete so
// far (never part of a UTF-8 character), finish the rest; the pieces joined equal decode() of
// all the ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(std::shared_ptr<const Tokenizer> tok, bool skip_special = false);
  ~StreamDecoder();
  std::string push(int32_t id);
  std::string finish();

 private:
  std::shared_ptr<const Tokenizer> tok_;
  bool skip_special_;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mpk::text
