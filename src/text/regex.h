// A pre-tokenizer's regular expression, compiled with PCRE2 (UTF, Unicode properties). The
// patterns tokenizer.json files carry are written for Oniguruma, whose \s and \S are Unicode
// White_Space; PCRE2's differ (U+0085), so they are rewritten to that class before compiling.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mpk::text {

class Regex {
 public:
  // Error(Unsupported) naming the pattern and PCRE2's message when it does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The non-empty matches in `s` (valid UTF-8), left to right, as [begin, end) byte offsets.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `pattern` with \s and \S (outside and inside classes) spelled as Unicode White_Space.
std::string unicode_whitespace_pattern(const std::string& pattern);

}  // namespace mpk::text
