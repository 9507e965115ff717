#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace mpk::text {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int, 0x200> to_byte{};
  Tables() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[size_t(b)] = printable ? char32_t(b) : next++;
      to_byte[to_char[size_t(b)]] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_char(unsigned char b) { return tables().to_char[b]; }

int char_byte(char32_t c) { return c < 0x200 ? tables().to_byte[c] : -1; }

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) append_utf8(out, byte_char(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace mpk::text
