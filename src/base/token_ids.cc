#include "base/token_ids.h"

namespace mpk {

std::optional<std::vector<int32_t>> parse_token_ids(std::string_view text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string_view item = text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos);
    if (item.empty()) return std::nullopt;
    int64_t v = 0;
    for (const char c : item) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
      if (v > INT32_MAX) return std::nullopt;
    }
    ids.push_back(int32_t(v));
    if (comma == std::string_view::npos) return ids;
    pos = comma + 1;
  }
}

}  // namespace mpk
