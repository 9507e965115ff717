// canonical_options: one spelling per NVRTC option list, for cache keys and compiles.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "cuda/nvrtc.h"

namespace mpk::cuda {
namespace {

enum class Arg { Flag, Value };

struct KnownOption {
  std::string_view name;  // long name, written "--name"
  Arg arg;
};

// NVRTC's options by long name (NVRTC 13 spellings).
constexpr KnownOption kKnown[] = {
    {"gpu-architecture", Arg::Value},   {"define-macro", Arg::Value},
    {"undefine-macro", Arg::Value},     {"include-path", Arg::Value},
    {"pre-include", Arg::Value},        {"std", Arg::Value},
    {"maxrregcount", Arg::Value},       {"ftz", Arg::Value},
    {"prec-sqrt", Arg::Value},          {"prec-div", Arg::Value},
    {"fmad", Arg::Value},               {"relocatable-device-code", Arg::Value},
    {"dopt", Arg::Value},               {"ptxas-options", Arg::Value},
    {"split-compile", Arg::Value},      {"jump-table-density", Arg::Value},
    {"diag-error", Arg::Value},         {"diag-suppress", Arg::Value},
    {"diag-warn", Arg::Value},          {"optimization-info", Arg::Value},
    {"builtin-move-forward", Arg::Value}, {"builtin-initializer-list", Arg::Value},
    {"device-stack-protector", Arg::Value}, {"modify-stack-limit", Arg::Value},
    {"version-ident", Arg::Value},      {"pch-verbose", Arg::Value},
    {"pch-messages", Arg::Value},       {"instantiate-templates-in-pch", Arg::Value},
    {"device-debug", Arg::Flag},        {"generate-line-info", Arg::Flag},
    {"use_fast_math", Arg::Flag},       {"extra-device-vectorization", Arg::Flag},
    {"extensible-whole-program", Arg::Flag}, {"disable-warnings", Arg::Flag},
    {"dlink-time-opt", Arg::Flag},      {"device-as-default-execution-space", Arg::Flag},
    {"device-c", Arg::Flag},            {"device-w", Arg::Flag},
    {"display-error-number", Arg::Flag}, {"no-display-error-number", Arg::Flag},
    {"restrict", Arg::Flag},            {"device-int128", Arg::Flag},
    {"pch", Arg::Flag},                 {"minimal", Arg::Flag},
    {"optix-ir", Arg::Flag},            {"fdevice-syntax-only", Arg::Flag},
    {"gen-opt-lto", Arg::Flag},
};

// Short spellings (after one dash) whose long name differs.
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"arch", "gpu-architecture"}, {"D", "define-macro"},
    {"U", "undefine-macro"},      {"I", "include-path"},
    {"include", "pre-include"},   {"G", "device-debug"},
    {"lineinfo", "generate-line-info"}, {"rdc", "relocatable-device-code"},
    {"ewp", "extensible-whole-program"}, {"w", "disable-warnings"},
    {"dlto", "dlink-time-opt"},   {"default-device", "device-as-default-execution-space"},
    {"dc", "device-c"},           {"dw", "device-w"},
    {"Xptxas", "ptxas-options"},  {"err-no", "display-error-number"},
    {"no-err-no", "no-display-error-number"}, {"jtd", "jump-table-density"},
    {"dQ", "version-ident"},      {"opt-info", "optimization-info"},
};

const KnownOption* find_known(std::string_view name) {
  for (const auto& k : kKnown)
    if (k.name == name) return &k;
  return nullptr;
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

struct Parsed {
  std::string name;    // long name for known options, else the name as written
  std::string prefix;  // "--" for known options, else the dashes as written
  bool known = false;
  Arg arg = Arg::Flag;
  bool has_value = false;
  std::string value;
};

// Splits one option entry into name and (maybe) value. `s` is trimmed and starts with '-'.
Parsed parse_option(std::string_view s) {
  Parsed p;
  std::size_t dashes = s.starts_with("--") ? 2 : 1;
  std::string_view body = s.substr(dashes);
  std::string_view name = body;
  // The gcc-style attached short forms: -DNAME, -UNAME, -Idir.
  if (dashes == 1 && body.size() > 1 && (body[0] == 'D' || body[0] == 'U' || body[0] == 'I')) {
    name = body.substr(0, 1);
    p.has_value = true;
    p.value = trim(body.substr(1));
  } else if (auto cut = body.find_first_of("= \t"); cut != std::string_view::npos) {
    name = body.substr(0, cut);
    p.has_value = true;
    p.value = trim(body.substr(cut + (body[cut] == '=' ? 1 : 0)));
  }
  std::string_view long_name = name;
  if (dashes == 1) {
    for (const auto& [alias, target] : kAliases)
      if (alias == name) long_name = target;
  }
  const KnownOption* known = find_known(long_name);
  // A long name written with one dash is only an NVRTC spelling when NVRTC lists it so;
  // unknown options are kept exactly as written.
  if (known) {
    p.known = true;
    p.arg = known->arg;
    p.name = std::string(known->name);
    p.prefix = "--";
  } else {
    p.name = std::string(name);
    p.prefix = std::string(s.substr(0, dashes));
  }
  return p;
}

std::string macro_name(const std::string& def) {
  return def.substr(0, def.find_first_of("=("));
}

}  // namespace

std::vector<std::string> canonical_options(const std::vector<std::string>& options) {
  // 1. Parse into (name, value) pairs, pairing an option with a separate value entry.
  std::vector<Parsed> parsed;
  for (std::size_t i = 0; i < options.size(); ++i) {
    std::string_view s = trim(options[i]);
    if (s.empty()) continue;
    MPK_CHECK(s[0] == '-' && s.find_first_not_of('-') != std::string_view::npos,
              InvalidArgument)
        << "NVRTC option '" << options[i] << "' does not follow an option that takes a value";
    Parsed p = parse_option(s);
    if (!p.has_value && i + 1 < options.size()) {
      std::string_view next = trim(options[i + 1]);
      bool takes = p.known ? p.arg == Arg::Value : !next.empty() && next[0] != '-';
      if (takes) {
        p.has_value = true;
        p.value = next;
        ++i;
      }
    }
    MPK_CHECK(!(p.known && p.arg == Arg::Value && !p.has_value), InvalidArgument)
        << "NVRTC option '" << options[i] << "' needs a value (--" << p.name << "=...)";
    parsed.push_back(std::move(p));
  }

  // 2. Fold macros to their final state and drop repeats.
  std::map<std::string, const Parsed*> macros;  // macro name → last -D or -U
  std::vector<const Parsed*> kept;
  for (const Parsed& p : parsed) {
    if (p.name == "define-macro" || p.name == "undefine-macro") {
      macros[macro_name(p.value)] = &p;
      continue;
    }
    auto same = [&](const Parsed* q) {
      return q->name == p.name && q->prefix == p.prefix && q->has_value == p.has_value &&
             q->value == p.value;
    };
    if (std::none_of(kept.begin(), kept.end(), same)) kept.push_back(&p);
  }
  for (const auto& [name, p] : macros) kept.push_back(p);

  // 3. Order by option name; stable, so include paths keep their search order and macros
  // stay sorted by macro name.
  std::stable_sort(kept.begin(), kept.end(),
                   [](const Parsed* a, const Parsed* b) { return a->name < b->name; });
  std::vector<std::string> out;
  out.reserve(kept.size());
  for (const Parsed* p : kept) out.push_back(p->prefix + p->name + (p->has_value ? "=" + p->value : ""));
  return out;
}

}  // namespace mpk::cuda
