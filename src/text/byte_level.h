// The byte-level alphabet of GPT-2-style BPE: every byte is one printable code point (the
// printable Latin-1 bytes themselves, the others U+0100 onwards in byte order), so that any
// byte string is a string of vocabulary characters.
#pragma once

#include <string>
#include <string_view>

namespace mpk::text {

// The code point that stands for byte b.
char32_t byte_char(unsigned char b);
// The byte that code point c stands for, or -1 when c is none of the 256.
int char_byte(char32_t c);
// `bytes` written in the alphabet (UTF-8 of the code points).
std::string to_byte_level(std::string_view bytes);

}  // namespace mpk::text
