#include "model/json_util.h"

#include <limits>

#include "base/error.h"
#include "model/mapped_file.h"

namespace mpk::model::detail {

namespace {

// Deeper than any config, index, header or tokenizer file goes (the format's reference reader
// stops at 128 too).
constexpr int kMaxJsonDepth = 128;

// The byte at which `text` opens its (kMaxJsonDepth + 1)-th nested array or object, or npos: a
// scan outside strings before the parser, which would build the whole tree first (gigabytes
// for a 100 MB header of '[').
size_t too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace

Json parse_json(std::string_view text, const std::string& origin) {
  const size_t deep = too_deep_at(text);
  MPK_CHECK(deep == std::string_view::npos, InvalidModel)
      << origin << ": JSON nested more than " << kMaxJsonDepth << " levels deep (at byte " << deep << ")";
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    MPK_THROW(InvalidModel) << origin << ": not valid JSON: " << e.what();
  }
}

std::string read_text_file(const std::filesystem::path& path, size_t max_bytes) {
  RegularFile f(path);
  MPK_CHECK(f.size() <= max_bytes, InvalidModel)
      << path.string() << ": " << f.size() << " bytes, more than the " << max_bytes
      << "-byte limit for this file";
  std::string text(f.size(), '\0');
  size_t got = f.read_at(0, text.data(), text.size());
  MPK_CHECK(got == text.size(), Io) << path.string() << ": file shrank while being read";
  return text;
}

Json read_json_file(const std::filesystem::path& path) {
  return parse_json(read_text_file(path, kMaxJsonFileBytes), path.string());
}

std::string describe(const Json& v) {
  // Containers are summarised, never serialised: dump() recurses once per nesting level, and a
  // value nested 100,000 deep would overflow the stack.
  if (v.is_array()) return "array of " + std::to_string(v.size()) + " element(s)";
  if (v.is_object()) return "object of " + std::to_string(v.size()) + " key(s)";
  constexpr size_t kMaxChars = 60;
  std::string s = printable(v.dump(-1, ' ', false, Json::error_handler_t::replace));
  if (s.size() > kMaxChars) s = s.substr(0, kMaxChars) + "...";
  return std::string(v.type_name()) + " " + s;
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x20 && c != 0x7f) {
      out.push_back(char(c));
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

int64_t as_int64(const Json& v, const std::string& origin, const std::string& what) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    MPK_CHECK(u <= uint64_t(std::numeric_limits<int64_t>::max()), InvalidModel)
        << origin << ": " << what << " = " << u << " is out of range";
    return int64_t(u);
  }
  MPK_CHECK(v.is_number_integer(), InvalidModel)
      << origin << ": " << what << " must be an integer, got " << describe(v);
  return v.get<int64_t>();
}

ObjectReader::ObjectReader(const Json& obj, std::string origin, std::string prefix)
    : obj_(obj), origin_(std::move(origin)), prefix_(std::move(prefix)) {
  MPK_CHECK(obj_.is_object(), InvalidModel)
      << origin_ << ": " << (prefix_.empty() ? std::string("top level") : prefix_.substr(0, prefix_.size() - 1))
      << " must be a JSON object, got " << describe(obj_);
}

const Json* ObjectReader::get(std::string_view key) const {
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int> ObjectReader::opt_positive_int(std::string_view key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  std::string quoted = key_name(key);
  quoted.insert(quoted.begin(), '\'');
  quoted.push_back('\'');
  int64_t n = as_int64(*v, origin_, quoted);
  MPK_CHECK(n > 0 && n <= std::numeric_limits<int>::max(), InvalidModel)
      << origin_ << ": '" << key_name(key) << "' must be a positive integer, got " << n;
  return int(n);
}

int ObjectReader::positive_int(std::string_view key) const {
  auto n = opt_positive_int(key);
  MPK_CHECK(n.has_value(), InvalidModel)
      << origin_ << ": missing required key '" << key_name(key) << "'";
  return *n;
}

std::optional<double> ObjectReader::opt_number(std::string_view key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  MPK_CHECK(v->is_number(), InvalidModel)
      << origin_ << ": '" << key_name(key) << "' must be a number, got " << describe(*v);
  return v->get<double>();
}

std::optional<bool> ObjectReader::opt_bool(std::string_view key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  MPK_CHECK(v->is_boolean(), InvalidModel)
      << origin_ << ": '" << key_name(key) << "' must be true or false, got " << describe(*v);
  return v->get<bool>();
}

std::optional<std::string> ObjectReader::opt_string(std::string_view key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  MPK_CHECK(v->is_string(), InvalidModel)
      << origin_ << ": '" << key_name(key) << "' must be a string, got " << describe(*v);
  return v->get<std::string>();
}

}  // namespace mpk::model::detail
