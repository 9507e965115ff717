#include "text/utf8.h"

namespace mpk::text {

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

void Utf8Decoder::feed(std::string_view bytes, std::string& out) {
  for (size_t i = 0; i < bytes.size();) {
    const unsigned b = static_cast<unsigned char>(bytes[i]);
    if (needed_ == 0) {
      ++i;
      if (b <= 0x7F) {
        out += char(b);
      } else if (b >= 0xC2 && b <= 0xDF) {
        needed_ = 1, cp_ = b & 0x1F;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower_ = 0xA0;  // no overlong forms
        if (b == 0xED) upper_ = 0x9F;  // no surrogates
        needed_ = 2, cp_ = b & 0x0F;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower_ = 0x90;
        if (b == 0xF4) upper_ = 0x8F;  // nothing above U+10FFFF
        needed_ = 3, cp_ = b & 0x07;
      } else {
        append_utf8(out, 0xFFFD);
      }
      continue;
    }
    if (b < lower_ || b > upper_) {  // the subpart so far is invalid; b starts afresh
      reset();
      append_utf8(out, 0xFFFD);
      continue;
    }
    ++i;
    lower_ = 0x80, upper_ = 0xBF;
    cp_ = (cp_ << 6) | (b & 0x3F);
    if (++seen_ == needed_) {
      append_utf8(out, cp_);
      reset();
    }
  }
}

void Utf8Decoder::finish(std::string& out) {
  if (needed_ != 0) append_utf8(out, 0xFFFD);
  reset();
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  Utf8Decoder d;
  d.feed(bytes, out);
  d.finish(out);
  return out;
}

bool valid_utf8(std::string_view s) {
  // The decoder's rules (Unicode 3.9, table 3-7) without building any text.
  for (size_t i = 0; i < s.size();) {
    const unsigned b = static_cast<unsigned char>(s[i]);
    if (b <= 0x7F) {
      ++i;
      continue;
    }
    int n = 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) n = 1;
    else if (b >= 0xE0 && b <= 0xEF) n = 2, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4) n = 3, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    else return false;
    if (i + size_t(n) >= s.size()) return false;  // truncated
    for (int k = 1; k <= n; ++k) {
      const unsigned c = static_cast<unsigned char>(s[i + size_t(k)]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return false;
    }
    i += size_t(n) + 1;
  }
  return true;
}

char32_t next_code_point(std::string_view s, size_t& i) {
  const unsigned b = static_cast<unsigned char>(s[i]);
  const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  char32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += size_t(n);
  return cp;
}

}  // namespace mpk::text
