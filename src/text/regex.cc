#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"

namespace mpk::text {

std::string unicode_whitespace_pattern(const std::string& pattern) {
  // Oniguruma's Unicode \s: U+0009-U+000D, U+0085 and the separators (Zs, Zl, Zp).
  constexpr const char* kSpace = "\\t-\\r\\x{85}\\p{Z}";
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[++i];
      if (n == 's')
        out += in_class ? std::string(kSpace) : "[" + std::string(kSpace) + "]";
      else if (n == 'S' && !in_class)
        out += "[^" + std::string(kSpace) + "]";
      else
        out += {c, n};
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct Regex::Impl {
  pcre2_code* code = nullptr;
};

Regex::Regex(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  const std::string p = unicode_whitespace_pattern(pattern);
  int err = 0;
  PCRE2_SIZE at = 0;
  // \C matches one byte even in UTF mode: a piece could end inside a character, and the next
  // pattern, told the text is valid UTF-8, would match past the piece's end.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &err, &at, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    MPK_THROW(Unsupported) << "tokenizer regex '" << pattern << "' does not compile at offset " << at
                           << ": " << reinterpret_cast<const char*>(msg);
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // the interpreter when JIT is unavailable
}

Regex::~Regex() { pcre2_code_free(impl_->code); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view s) const {
  std::vector<std::pair<size_t, size_t>> out;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(impl_->code, nullptr), &pcre2_match_data_free);
  MPK_CHECK(md != nullptr, OutOfMemory) << "tokenizer regex: no memory for match data";
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t start = 0;
  while (start <= s.size()) {
    // The caller validated the UTF-8 once; a later start is always a character boundary.
    const int rc = pcre2_match(impl_->code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      MPK_THROW(Unsupported) << "tokenizer regex: matching failed: " << reinterpret_cast<const char*>(msg);
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    size_t b = ov[0], e = ov[1];
    MPK_CHECK(b <= e && e <= s.size(), Unsupported)
        << "tokenizer regex: a match [" << b << ", " << e << ") outside the text of " << s.size()
        << " bytes (\\K in a lookaround?)";
    if (e > b) {
      out.emplace_back(b, e);
      start = e;
    } else {  // an empty match: step over one character
      start = b + 1;
      while (start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) ++start;
    }
  }
  return out;
}

}  // namespace mpk::text
