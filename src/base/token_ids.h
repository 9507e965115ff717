// Token ids written as text by the command-line tools: "5,17,300".
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace mpk {

// The comma-separated ids of `text`: each item digits only (no blank, no sign), at most
// INT32_MAX; nullopt for an empty list, an empty item (",", "1,,2", "1,") or anything else.
std::optional<std::vector<int32_t>> parse_token_ids(std::string_view text);

}  // namespace mpk
