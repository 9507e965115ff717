#include "text/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <unordered_map>

#include "base/error.h"
#include "model/json_util.h"
#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/regex.h"
#include "text/utf8.h"

namespace mpk::text {

using Json = model::detail::Json;

namespace {

// Ids from this on are refused: the tables are sized by the largest id, so a 3 KB file with one
// id near 2^24 took 650 MiB (real vocabularies are below 2^18; 2^20 ids cost about 40 MiB).
constexpr int64_t kMaxId = int64_t(1) << 20;

// GPT-2's split, used by a ByteLevel pre-tokenizer with use_regex.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct AddedToken {
  int32_t id = 0;
  std::string content;  // normalized already when `normalized`
  bool special = false, normalized = false, lstrip = false, rstrip = false, single_word = false;
};

struct PreTokenizer {
  enum class Kind { Split, ByteLevel } kind;
  std::unique_ptr<Regex> regex;  // Split by regex, or ByteLevel with use_regex
  std::string literal;           // Split by a string
  bool removed = false;          // Split: drop the matches (else each is a piece of its own)
  bool add_prefix_space = false;
};

// A post-processor template item: the sequence itself, or fixed ids.
struct TemplateItem {
  bool sequence = false;
  std::vector<int32_t> ids;
};

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  MPK_THROW(InvalidModel) << origin << ": " << what;
}

const Json& member(const Json& j, const char* key, const std::string& origin) {
  if (!j.is_object() || !j.contains(key)) bad(origin, std::string("missing \"") + key + "\"");
  return j.at(key);
}

std::string string_of(const Json& j, const std::string& origin, const std::string& what) {
  if (!j.is_string()) bad(origin, what + " is not a string: " + model::detail::describe(j));
  return j.get<std::string>();
}

// An optional boolean of object `j` (absent or null: `dflt`); Error(InvalidModel) naming the
// key when it is something else, through the model loader's reader.
bool flag(const Json& j, const char* key, bool dflt, const std::string& origin) {
  return model::detail::ObjectReader(j, origin).opt_bool(key).value_or(dflt);
}

std::string type_of(const Json& j, const std::string& origin, const std::string& what) {
  return string_of(member(j, "type", origin + " " + what), origin, what + ".type");
}

bool is_whitespace(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// single_word is decided by the reference with the Rust regex crate's Unicode \w (UTS #18):
// Alphabetic, marks, decimal digits, connector punctuation and the joiners (U+200C, U+200D).
// That is neither PCRE2's \w nor L/M/N: No is not in it, unassigned code points are not, and
// Alphabetic adds to L, Nl and M only the enclosed letters spelled out below (no Alphabetic
// property before PCRE2 10.40). PCRE2 10.42 knows Unicode 14, the regex crate 16: code points
// assigned since differ.
bool is_word_char(char32_t c) {
  static const Regex word(
      R"([\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\x{24B6}-\x{24E9}\x{1F130}-\x{1F149}\x{1F150}-\x{1F169})"
      R"(\x{1F170}-\x{1F189}])");
  std::string s;
  append_utf8(s, c);
  return !word.find_all(s).empty();
}

// The reference normalizes with Unicode 9.0 tables (unicode-normalization-alignments 0.1.12):
// a later code point has no decomposition, combining class 0 and no composition there, so it
// splits the text into runs that normalize independently and stays as it is. These are the
// later code points to which utf8proc (Unicode 15.0) gives a decomposition, a nonzero combining
// class or (U+11930, U+11935) a canonical composition; the rest normalize alike in both.
constexpr std::pair<char32_t, char32_t> kAfterUnicode9[] = {
    {0x7FD, 0x7FD}, {0x898, 0x89F}, {0x8CA, 0x8D3}, {0x9FE, 0x9FE}, {0xC3C, 0xC3C}, {0xD3B, 0xD3C},
    {0xEBA, 0xEBA}, {0x1715, 0x1715}, {0x1ABF, 0x1ACE}, {0x1DF6, 0x1DFA}, {0x32FF, 0x32FF},
    {0xA7F2, 0xA7F4}, {0xA82C, 0xA82C}, {0xAB69, 0xAB69}, {0x10781, 0x10785}, {0x10787, 0x107B0},
    {0x107B2, 0x107BA}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF},
    {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B},
    {0x1145E, 0x1145E}, {0x11839, 0x1183A}, {0x11930, 0x11930}, {0x11935, 0x11935},
    {0x11938, 0x11938}, {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0},
    {0x11A34, 0x11A34}, {0x11A47, 0x11A47}, {0x11A99, 0x11A99}, {0x11D42, 0x11D42},
    {0x11D44, 0x11D45}, {0x11D97, 0x11D97}, {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1},
    {0x1E030, 0x1E06D}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE},
    {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF}, {0x1F16C, 0x1F16C}, {0x1FBF0, 0x1FBF9},
};

bool after_unicode9(char32_t c) {
  const auto* it = std::upper_bound(std::begin(kAfterUnicode9), std::end(kAfterUnicode9), c,
                                    [](char32_t v, const std::pair<char32_t, char32_t>& r) { return v < r.first; });
  return it != std::begin(kAfterUnicode9) && c <= std::prev(it)->second;
}

}  // namespace

struct Tokenizer::Impl {
  std::string origin;
  std::unique_ptr<Bpe> bpe;
  std::vector<AddedToken> added;
  // Per pass (normalized or not) and first byte: the added tokens that can start there, so
  // that the search does not compare every token at every byte (Llama 3 has 256).
  std::vector<const AddedToken*> by_first[2][256];
  std::vector<int> norm_options;  // utf8proc option sets, applied in order
  std::vector<PreTokenizer> pre;
  bool has_template = false;
  std::vector<TemplateItem> single;
  std::vector<std::string> id_bytes;
  std::vector<uint8_t> id_kind;  // 0: no token, 1: token, 2: special
  std::unordered_map<std::string, int32_t> added_ids;

  void parse_normalizer(const Json& j);
  void parse_pre_tokenizer(const Json& j);
  void parse_post_processor(const Json& j);
  std::string normalize(std::string_view s) const;
  void encode_plain(std::string_view s, std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view s, std::vector<int32_t>& out) const;
  // Cuts the tokens `normalized == pass` out of `s`: ids to out, the text between to `gap`.
  template <class Gap>
  void split_added(std::string_view s, bool pass, std::vector<int32_t>& out, Gap gap) const;
};

void Tokenizer::Impl::parse_normalizer(const Json& j) {
  if (j.is_null()) return;
  const std::string t = type_of(j, origin, "normalizer");
  if (t == "Sequence") {
    const Json& list = member(j, "normalizers", origin);
    if (!list.is_array()) bad(origin, "normalizer.normalizers is not a list");
    for (const Json& n : list) parse_normalizer(n);
    return;
  }
  const int base = UTF8PROC_STABLE;
  if (t == "NFC") norm_options.push_back(base | UTF8PROC_COMPOSE);
  else if (t == "NFD") norm_options.push_back(base | UTF8PROC_DECOMPOSE);
  else if (t == "NFKC") norm_options.push_back(base | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  else if (t == "NFKD") norm_options.push_back(base | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  else MPK_THROW(Unsupported) << origin << ": normalizer type " << t << " is not supported";
}

void Tokenizer::Impl::parse_pre_tokenizer(const Json& j) {
  if (j.is_null()) return;
  const std::string t = type_of(j, origin, "pre_tokenizer");
  if (t == "Sequence") {
    const Json& list = member(j, "pretokenizers", origin);
    if (!list.is_array()) bad(origin, "pre_tokenizer.pretokenizers is not a list");
    for (const Json& p : list) parse_pre_tokenizer(p);
    return;
  }
  PreTokenizer p;
  if (t == "Split") {
    p.kind = PreTokenizer::Kind::Split;
    const Json& pat = member(j, "pattern", origin);
    if (pat.contains("Regex")) p.regex = std::make_unique<Regex>(string_of(pat.at("Regex"), origin, "Split pattern"));
    else p.literal = string_of(member(pat, "String", origin), origin, "Split pattern");
    const std::string behavior = string_of(member(j, "behavior", origin), origin, "Split behavior");
    MPK_CHECK(behavior == "Isolated" || behavior == "Removed", Unsupported)
        << origin << ": Split behavior " << behavior << " is not supported (Isolated, Removed)";
    MPK_CHECK(!flag(j, "invert", false, origin), Unsupported) << origin << ": an inverted Split is not supported";
    MPK_CHECK(p.regex || !p.literal.empty(), InvalidModel) << origin << ": a Split by the empty string";
    p.removed = behavior == "Removed";
  } else if (t == "ByteLevel") {
    p.kind = PreTokenizer::Kind::ByteLevel;
    p.add_prefix_space = flag(j, "add_prefix_space", true, origin);
    if (flag(j, "use_regex", true, origin)) p.regex = std::make_unique<Regex>(kGpt2Pattern);
  } else {
    MPK_THROW(Unsupported) << origin << ": pre-tokenizer type " << t << " is not supported";
  }
  pre.push_back(std::move(p));
}

void Tokenizer::Impl::parse_post_processor(const Json& j) {
  if (j.is_null()) return;
  const std::string t = type_of(j, origin, "post_processor");
  if (t == "ByteLevel") return;  // offsets only
  if (t == "Sequence") {
    const Json& list = member(j, "processors", origin);
    if (!list.is_array()) bad(origin, "post_processor.processors is not a list");
    for (const Json& p : list) parse_post_processor(p);
    return;
  }
  MPK_CHECK(t == "TemplateProcessing", Unsupported)
      << origin << ": post-processor type " << t << " is not supported";
  MPK_CHECK(!has_template, Unsupported) << origin << ": two post-processor templates";
  has_template = true;
  const Json& specials = member(j, "special_tokens", origin);
  const Json& items = member(j, "single", origin);
  if (!items.is_array()) bad(origin, "post_processor.single is not a list");
  for (const Json& it : items) {
    TemplateItem item;
    if (it.contains("Sequence")) {
      item.sequence = true;
      MPK_CHECK(string_of(member(it.at("Sequence"), "id", origin), origin, "Sequence id") == "A", Unsupported)
          << origin << ": a single-sequence template that names sequence B";
    } else {
      const std::string name = string_of(member(member(it, "SpecialToken", origin), "id", origin), origin,
                                         "SpecialToken id");
      if (!specials.contains(name)) bad(origin, "template token '" + name + "' is not in special_tokens");
      const Json& ids = member(specials.at(name), "ids", origin);
      if (!ids.is_array()) bad(origin, "special_tokens." + name + ".ids is not a list");
      for (const Json& id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxId)
          bad(origin, "special_tokens." + name + " has id " + model::detail::describe(id));
        item.ids.push_back(int32_t(id.get<int64_t>()));
      }
    }
    single.push_back(std::move(item));
  }
}

std::string Tokenizer::Impl::normalize(std::string_view s) const {
  if (norm_options.empty()) return std::string(s);
  std::string out;
  auto run = [&](std::string_view r) {  // every normalizer, in order, over a run
    std::string cur(r);
    for (const int opt : norm_options) {
      utf8proc_uint8_t* dst = nullptr;
      const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(cur.data()),
                                              utf8proc_ssize_t(cur.size()), &dst, utf8proc_option_t(opt));
      MPK_CHECK(n >= 0, InvalidArgument) << "tokenizer: normalizing failed: " << utf8proc_errmsg(n);
      cur.assign(reinterpret_cast<const char*>(dst), size_t(n));
      std::free(dst);
    }
    out += cur;
  };
  size_t begin = 0;  // of the current run
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    if (!after_unicode9(next_code_point(s, i))) continue;
    if (at > begin) run(s.substr(begin, at - begin));
    out.append(s.substr(at, i - at));
    begin = i;
  }
  if (begin < s.size()) run(s.substr(begin));
  return out;
}

template <class Gap>
void Tokenizer::Impl::split_added(std::string_view s, bool pass, std::vector<int32_t>& out, Gap gap) const {
  // As the reference's AddedVocabulary::find_matches: the non-overlapping leftmost-longest
  // matches of all tokens of the pass (one Aho-Corasick search). single_word then discards a
  // match, and neither a shorter token there nor one starting inside it is tried; the search
  // goes on from a match's own end, not from the end of the whitespace rstrip takes.
  size_t done = 0;  // text before this is handled
  size_t i = 0;     // where the search goes on
  while (i < s.size()) {
    const AddedToken* best = nullptr;
    for (const AddedToken* t : by_first[pass][static_cast<unsigned char>(s[i])]) {
      if (s.compare(i, t->content.size(), t->content) != 0) continue;
      if (!best || t->content.size() > best->content.size()) best = t;
    }
    if (!best) {
      i += 1;
      while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
      continue;
    }
    size_t start = i, end = i + best->content.size();
    i = end;
    if (best->single_word) {
      bool alone = true;
      if (start > 0) {  // the character before
        size_t b = start - 1;
        while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
        alone = !is_word_char(next_code_point(s, b));
      }
      if (alone && end < s.size()) {
        size_t e = end;
        alone = !is_word_char(next_code_point(s, e));
      }
      if (!alone) continue;
    }
    if (best->lstrip) {
      while (start > done) {
        size_t b = start - 1;
        while (b > done && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
        size_t bb = b;
        if (!is_whitespace(next_code_point(s, bb))) break;
        start = b;
      }
      start = std::max(start, done);  // a match inside what rstrip took strips nothing more
    }
    if (best->rstrip) {
      while (end < s.size()) {
        size_t e = end;
        if (!is_whitespace(next_code_point(s, e))) break;
        end = e;
      }
    }
    if (start > done) gap(s.substr(done, start - done), out);
    out.push_back(best->id);
    done = end;
  }
  if (done < s.size()) gap(s.substr(done), out);
}

void Tokenizer::Impl::encode_plain(std::string_view s, std::vector<int32_t>& out) const {
  const std::string norm = normalize(s);
  split_added(norm, true, out, [this](std::string_view g, std::vector<int32_t>& o) { encode_normalized(g, o); });
}

void Tokenizer::Impl::encode_normalized(std::string_view s, std::vector<int32_t>& out) const {
  std::vector<std::string> pieces{std::string(s)};
  for (const PreTokenizer& p : pre) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      if (p.kind == PreTokenizer::Kind::ByteLevel && p.add_prefix_space && piece.rfind(' ', 0) != 0)
        piece.insert(0, 1, ' ');
      std::vector<std::pair<size_t, size_t>> m;
      if (p.regex) {
        m = p.regex->find_all(piece);
      } else if (!p.literal.empty()) {
        for (size_t at = piece.find(p.literal); at != std::string::npos; at = piece.find(p.literal, at + p.literal.size()))
          m.emplace_back(at, at + p.literal.size());
      } else {
        m.emplace_back(0, piece.size());  // ByteLevel without its regex: the piece whole
      }
      size_t prev = 0;
      auto emit = [&](size_t b, size_t e) {
        if (e <= b) return;
        std::string_view v(piece.data() + b, e - b);
        next.push_back(p.kind == PreTokenizer::Kind::ByteLevel ? to_byte_level(v) : std::string(v));
      };
      for (const auto& [b, e] : m) {
        emit(prev, b);
        if (!p.removed) emit(b, e);
        prev = e;
      }
      emit(prev, piece.size());
    }
    pieces = std::move(next);
  }
  for (const std::string& w : pieces) bpe->encode_word(w, out);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::load(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path file =
      std::filesystem::is_directory(path, ec) ? path / "tokenizer.json" : path;
  MPK_CHECK(std::filesystem::exists(file, ec), NotFound) << "tokenizer: " << file.string() << " does not exist";
  auto impl = std::make_unique<Impl>();
  impl->origin = file.string();
  const std::string& origin = impl->origin;
  const Json j = model::detail::read_json_file(file);
  try {
    if (!j.is_object()) bad(origin, "not a JSON object");
    const Json& m = member(j, "model", origin);
    if (m.contains("type") && !m.at("type").is_null()) {
      const std::string t = string_of(m.at("type"), origin, "model.type");
      MPK_CHECK(t == "BPE", Unsupported) << origin << ": model type " << t << " is not supported (BPE)";
    }
    MPK_CHECK(!m.contains("dropout") || m.at("dropout").is_null(), Unsupported)
        << origin << ": BPE dropout is not supported (encoding would be random)";
    MPK_CHECK(!m.contains("unk_token") || m.at("unk_token").is_null(), Unsupported)
        << origin << ": an unknown token is not supported (byte-level BPE needs none)";
    MPK_CHECK(!flag(m, "byte_fallback", false, origin), Unsupported) << origin << ": byte_fallback is not supported";
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      MPK_CHECK(!m.contains(k) || m.at(k).is_null() || m.at(k) == "", Unsupported)
          << origin << ": " << k << " is not supported";

    Vocab vocab;
    const Json& v = member(m, "vocab", origin);
    if (!v.is_object()) bad(origin, "model.vocab is not an object");
    int64_t max_id = -1;
    for (const auto& [tok, id] : v.items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxId)
        bad(origin, "token '" + model::detail::printable(tok) + "' has id " + model::detail::describe(id));
      vocab.emplace(tok, int32_t(id.get<int64_t>()));
      max_id = std::max(max_id, id.get<int64_t>());
    }
    std::vector<std::pair<std::string, std::string>> merges;
    const Json& ms = member(m, "merges", origin);
    if (!ms.is_array()) bad(origin, "model.merges is not a list");
    merges.reserve(ms.size());
    for (const Json& mg : ms) {
      if (mg.is_string()) {
        const std::string s = mg.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          bad(origin, "merge '" + model::detail::printable(s) + "' is not two tokens");
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
        merges.emplace_back(mg[0].get<std::string>(), mg[1].get<std::string>());
      } else {
        bad(origin, "merge " + model::detail::describe(mg) + " is not two tokens");
      }
    }

    impl->parse_normalizer(j.contains("normalizer") ? j.at("normalizer") : Json());
    impl->parse_pre_tokenizer(j.contains("pre_tokenizer") ? j.at("pre_tokenizer") : Json());
    impl->parse_post_processor(j.contains("post_processor") ? j.at("post_processor") : Json());
    const Json dec = j.contains("decoder") ? j.at("decoder") : Json();
    MPK_CHECK(!dec.is_null() && type_of(dec, origin, "decoder") == "ByteLevel", Unsupported)
        << origin << ": only the ByteLevel decoder is supported";
    const bool byte_level = std::any_of(impl->pre.begin(), impl->pre.end(),
                                        [](const PreTokenizer& p) { return p.kind == PreTokenizer::Kind::ByteLevel; });
    MPK_CHECK(byte_level, Unsupported) << origin << ": only byte-level BPE is supported (no ByteLevel pre-tokenizer)";
    for (int b = 0; b < 256; ++b) {
      std::string c;
      append_utf8(c, byte_char(static_cast<unsigned char>(b)));
      MPK_CHECK(vocab.count(c), InvalidModel) << origin << ": byte " << b << " has no token";
    }

    if (j.contains("added_tokens") && !j.at("added_tokens").is_null()) {
      const Json& list = j.at("added_tokens");
      if (!list.is_array()) bad(origin, "added_tokens is not a list");
      for (const Json& a : list) {
        AddedToken t;
        const Json& id = member(a, "id", origin);
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxId)
          bad(origin, "added token id " + model::detail::describe(id));
        t.id = int32_t(id.get<int64_t>());
        t.content = string_of(member(a, "content", origin), origin, "added token content");
        MPK_CHECK(!t.content.empty() && valid_utf8(t.content), InvalidModel)
            << origin << ": added token " << t.id << " is empty or not UTF-8";
        t.special = flag(a, "special", false, origin);
        t.normalized = flag(a, "normalized", !t.special, origin);
        t.lstrip = flag(a, "lstrip", false, origin);
        t.rstrip = flag(a, "rstrip", false, origin);
        t.single_word = flag(a, "single_word", false, origin);
        max_id = std::max<int64_t>(max_id, t.id);
        impl->added_ids[t.content] = t.id;
        impl->added.push_back(std::move(t));
      }
    }
    // Decoding: an added token's content stands for its id; every other id is its vocabulary text.
    impl->id_bytes.assign(size_t(max_id + 1), std::string());
    impl->id_kind.assign(size_t(max_id + 1), 0);
    std::vector<const std::string*> text(size_t(max_id + 1), nullptr);
    for (const auto& [tok, id] : vocab) {
      MPK_CHECK(!text[size_t(id)], InvalidModel)
          << origin << ": id " << id << " is both '" << model::detail::printable(*text[size_t(id)]) << "' and '"
          << model::detail::printable(tok) << "'";
      text[size_t(id)] = &tok;
      impl->id_kind[size_t(id)] = 1;
    }
    for (const AddedToken& t : impl->added) {
      text[size_t(t.id)] = &t.content;
      impl->id_kind[size_t(t.id)] = t.special ? 2 : 1;
    }
    for (size_t id = 0; id < text.size(); ++id) {
      if (!text[id]) continue;
      // ByteLevel decoding: a token all of whose characters stand for bytes is those bytes,
      // any other is its own UTF-8.
      const std::string& s = *text[id];
      std::string bytes;
      bool all = true;
      for (size_t i = 0; i < s.size() && all;) {
        const int b = char_byte(next_code_point(s, i));
        if (b < 0) all = false;
        else bytes += char(b);
      }
      impl->id_bytes[id] = all ? bytes : s;
    }
    // The template's ids go into every encoded prompt: each must be a token (an unknown id would
    // reach the model and decode to nothing).
    for (const TemplateItem& item : impl->single)
      for (const int32_t id : item.ids)
        MPK_CHECK(size_t(id) < impl->id_kind.size() && impl->id_kind[size_t(id)] != 0, InvalidModel)
            << origin << ": the post-processor's template adds id " << id << ", which is no token";
    impl->bpe = std::make_unique<Bpe>(std::move(vocab), merges, flag(m, "ignore_merges", false, origin));
    // A normalized added token is matched in normalized text, so in its normalized form.
    for (AddedToken& t : impl->added)
      if (t.normalized) t.content = impl->normalize(t.content);
    for (const AddedToken& t : impl->added)  // in file order: the first of equal contents wins
      if (!t.content.empty())
        impl->by_first[t.normalized][static_cast<unsigned char>(t.content[0])].push_back(&t);
  } catch (const Json::exception& e) {
    bad(origin, e.what());
  }
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  MPK_CHECK(valid_utf8(text), InvalidArgument) << "tokenizer: the text is not valid UTF-8";
  std::vector<int32_t> ids;
  impl_->split_added(text, false, ids, [this](std::string_view g, std::vector<int32_t>& o) { impl_->encode_plain(g, o); });
  if (!add_special_tokens || !impl_->has_template) return ids;
  std::vector<int32_t> out;
  for (const TemplateItem& it : impl_->single) {
    const std::vector<int32_t>& part = it.sequence ? ids : it.ids;
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (const int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    bytes += token_bytes(id);
  }
  return utf8_lossy(bytes);
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  static const std::string kNone;
  MPK_CHECK(id >= 0, InvalidArgument) << "tokenizer: id " << id << " is negative";
  return is_token(id) ? impl_->id_bytes[size_t(id)] : kNone;
}

bool Tokenizer::is_token(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->id_kind.size() && impl_->id_kind[size_t(id)] != 0;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->id_kind.size() && impl_->id_kind[size_t(id)] == 2;
}

int32_t Tokenizer::vocab_size() const { return int32_t(impl_->id_kind.size()); }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (const auto it = impl_->added_ids.find(std::string(token)); it != impl_->added_ids.end()) return it->second;
  return impl_->bpe->id(token);
}

struct StreamDecoder::State {
  Utf8Decoder utf8;
};

StreamDecoder::StreamDecoder(std::shared_ptr<const Tokenizer> tok, bool skip_special)
    : tok_(std::move(tok)), skip_special_(skip_special), state_(std::make_unique<State>()) {
  MPK_CHECK(tok_ != nullptr, InvalidArgument) << "StreamDecoder: no tokenizer";
}
StreamDecoder::~StreamDecoder() = default;

std::string StreamDecoder::push(int32_t id) {
  std::string out;
  if (skip_special_ && tok_->is_special(id)) return out;
  state_->utf8.feed(tok_->token_bytes(id), out);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out;
  state_->utf8.finish(out);
  return out;
}

}  // namespace mpk::text
