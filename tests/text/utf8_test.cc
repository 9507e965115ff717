// The lossy UTF-8 decoder: maximal-subpart replacement (the reference's from_utf8_lossy), and
// the same text whether the bytes come at once or in any chunks.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "text/byte_level.h"
#include "text/utf8.h"

namespace mpk::text {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, LossyReplacesEachMaximalInvalidSubpart) {
  EXPECT_EQ(utf8_lossy("abc"), "abc");
  EXPECT_EQ(utf8_lossy("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x99\x82"), "\xF0\x9F\x99\x82");
  EXPECT_EQ(utf8_lossy("\x80"), kFffd);
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), kFffd + kFffd);                // overlong lead, then a lone tail
  EXPECT_EQ(utf8_lossy("\xE2\x82"), kFffd);                        // truncated at the end: one
  EXPECT_EQ(utf8_lossy("\xE2\x82" "A"), kFffd + "A");              // truncated before ASCII
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);    // a surrogate
  EXPECT_EQ(utf8_lossy("\xF0\x80\x80"), kFffd + kFffd + kFffd);    // overlong 4-byte
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x99"), kFffd);
  EXPECT_EQ(utf8_lossy("\xFF\xFE"), kFffd + kFffd);
}

TEST(Utf8, ValidityMatchesTheDecoder) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x99\x82"));
  EXPECT_TRUE(valid_utf8(kFffd));
  for (const char* bad : {"\x80", "\xC3", "\xE4\xBD", "\xED\xA0\x80", "\xC0\x80", "\xF8\x88\x80\x80\x80",
                          "a\xFF", "\xF4\x90\x80\x80"})
    EXPECT_FALSE(valid_utf8(bad)) << bad;
}

TEST(Utf8, ChunkedDecodingEqualsWholeDecoding) {
  std::mt19937 rng(7);
  const std::string pieces[] = {"a", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x99\x82", "\x80", "\xC3",
                                "\xED\xA0", "\xF0\x9F", "\xFF", " "};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    const int n = int(rng() % 12);
    for (int i = 0; i < n; ++i) bytes += pieces[rng() % std::size(pieces)];
    std::string streamed;
    Utf8Decoder d;
    for (size_t i = 0; i < bytes.size();) {
      const size_t k = 1 + rng() % 3;
      d.feed(std::string_view(bytes).substr(i, k), streamed);
      i += k;
    }
    d.finish(streamed);
    ASSERT_EQ(streamed, utf8_lossy(bytes)) << "trial " << trial;
    ASSERT_TRUE(valid_utf8(streamed));
  }
}

TEST(ByteLevel, EveryByteHasItsOwnPrintableCharacter) {
  for (int b = 0; b < 256; ++b) EXPECT_EQ(char_byte(byte_char(static_cast<unsigned char>(b))), b);
  EXPECT_EQ(byte_char(' '), char32_t(0x120));  // 'Ġ'
  EXPECT_EQ(byte_char('\n'), char32_t(0x10A));  // 'Ċ'
  EXPECT_EQ(byte_char('a'), char32_t('a'));
  EXPECT_EQ(char_byte(U'\u4F60'), -1);
  EXPECT_EQ(to_byte_level(" a"), "\xC4\xA0" "a");
}

}  // namespace
}  // namespace mpk::text
