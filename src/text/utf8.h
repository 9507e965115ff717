// UTF-8 for the tokenizer: validation, encoding one code point, and the decoder that turns any
// bytes into text with one U+FFFD per maximal invalid subpart (Unicode 3.9, the WHATWG decoder,
// which is what the reference tokenizer's lossy conversion does), a chunk at a time, so that a
// stream of token bytes and the same bytes decoded at once give the same text.
#pragma once

#include <string>
#include <string_view>

namespace mpk::text {

// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
bool valid_utf8(std::string_view s);

// Appends the UTF-8 of code point `cp` (at most U+10FFFF, not a surrogate).
void append_utf8(std::string& out, char32_t cp);

// The next code point of well-formed UTF-8 `s` at byte `i`, which moves past it.
char32_t next_code_point(std::string_view s, size_t& i);

class Utf8Decoder {
 public:
  // Appends the text of `bytes`; a sequence still incomplete at the end waits for more.
  void feed(std::string_view bytes, std::string& out);
  // Ends the stream: an incomplete sequence left over becomes one U+FFFD.
  void finish(std::string& out);

 private:
  void reset() { cp_ = 0, needed_ = 0, seen_ = 0, lower_ = 0x80, upper_ = 0xBF; }
  char32_t cp_ = 0;
  int needed_ = 0, seen_ = 0;
  unsigned lower_ = 0x80, upper_ = 0xBF;
};

// The text of `bytes` at once (Utf8Decoder fed everything, then finished).
std::string utf8_lossy(std::string_view bytes);

}  // namespace mpk::text
