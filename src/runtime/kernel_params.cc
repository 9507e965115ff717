#include "runtime/kernel_params.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "base/error.h"

namespace mpk::rt {
namespace {

// Every parameter once: its name (JSON, parse_params), its #define, its range and step. The
// order is the cache key's JSON layout.
struct Field {
  const char* name;
  const char* define;  // nullptr: a plan parameter the source does not see
  int MegakernelParams::*member;
  int lo, hi, multiple;
};

constexpr Field kFields[] = {
    {"block_threads", "MK_BLOCK_THREADS", &MegakernelParams::block_threads, 64, 1024, 32},
    {"rows_per_warp", "MK_ROWS_PER_WARP", &MegakernelParams::rows_per_warp, 1, 4, 1},
    {"down_rows_per_warp", "MK_DOWN_ROWS_PER_WARP", &MegakernelParams::down_rows_per_warp, 0, 4, 1},
    {"head_rows_per_warp", "MK_HEAD_ROWS_PER_WARP", &MegakernelParams::head_rows_per_warp, 0, 4, 1},
    {"loads_in_flight", "MK_LOADS_IN_FLIGHT", &MegakernelParams::loads_in_flight, 1, 8, 1},
    {"max_k_split", "MK_MAX_KSPLIT", &MegakernelParams::max_k_split, 1, 8, 1},
    {"heads_per_pass", "MK_HEADS_PER_PASS", &MegakernelParams::heads_per_pass, 1, 8, 1},
    {"prefetch_rounds", "MK_PREFETCH_ROUNDS", &MegakernelParams::prefetch_rounds, 0, 8, 1},
    {"merge_batch", "MK_MERGE_BATCH", &MegakernelParams::merge_batch, 1, 16, 1},
    {"max_head_dim", "MK_MAX_HEAD_DIM", &MegakernelParams::max_head_dim, 64, 256, 64},
    {"poll_warp_loads", "MK_POLL_WARP_LOADS", &MegakernelParams::poll_warp_loads, 0, 1, 1},
    {"controller_warp", "MK_CONTROLLER_WARP", &MegakernelParams::controller_warp, 0, 1, 1},
    {"stage_weights", "MK_STAGE_WEIGHTS", &MegakernelParams::stage_weights, 0, 1, 1},
    {"stage_late", "MK_STAGE_LATE", &MegakernelParams::stage_late, 0, 1, 1},
    {"fold_down", "MK_FOLD_DOWN", &MegakernelParams::fold_down, 0, 1, 1},
    {"prefetch_next", "MK_PREFETCH_NEXT", &MegakernelParams::prefetch_next, 0, 1024, 1},
    {"phase_timers", "MK_PHASE_TIMERS", &MegakernelParams::phase_timers, 0, 1, 1},
    // The decomposition: the plan's, no #define (the kernel's source stays the same).
    {"kv_splits", nullptr, &MegakernelParams::kv_splits, 0, 64, 1},
    {"merge_task", nullptr, &MegakernelParams::merge_task, 0, 1, 1},
    {"tile_waves", nullptr, &MegakernelParams::tile_waves, 1, 4, 1},
};

}  // namespace

void validate(const MegakernelParams& p) {
  for (const Field& f : kFields) {
    const int v = p.*f.member;
    MPK_CHECK(v >= f.lo && v <= f.hi, InvalidArgument)
        << "megakernel parameter " << f.name << " = " << v << " is outside [" << f.lo << ", "
        << f.hi << "]";
    MPK_CHECK(v % f.multiple == 0, InvalidArgument)
        << "megakernel parameter " << f.name << " = " << v << " is not a multiple of " << f.multiple;
  }
  MPK_CHECK(!p.stage_late || p.stage_weights, InvalidArgument)
      << "megakernel parameter stage_late = 1 needs stage_weights = 1 (it times the weight ring's copies)";
  MPK_CHECK(launch_threads(p) <= 1024, InvalidArgument)
      << "megakernel parameters: block_threads " << p.block_threads
      << " and the controller warp exceed 1024 threads";
}

MegakernelParams params_for_head_dim(int head_dim, MegakernelParams base) {
  base.max_head_dim = std::clamp((head_dim + 63) / 64 * 64, 64, 256);
  return base;
}

MegakernelParams default_params(int head_dim, int64_t weight_bytes, int64_t layers, int workers) {
  MegakernelParams p = params_for_head_dim(head_dim);
  const int64_t per_worker = layers > 0 && workers > 0 ? weight_bytes / layers / workers : -1;
  if (per_worker >= 0 && per_worker <= kControllerMaxLayerBytes) {
    p.block_threads -= 32;
    p.controller_warp = 1;
    if (per_worker >= kPrefetchNextMinLayerBytes) p.prefetch_next = kSmallModelPrefetchNextKiB;
  }
  return p;
}

int launch_threads(const MegakernelParams& p) { return p.block_threads + 32 * p.controller_warp; }

std::string to_defines(const MegakernelParams& p) {
  validate(p);
  std::string out;
  for (const Field& f : kFields)
    if (f.define) out += fmt::format("#define {} {}\n", f.define, p.*f.member);
  return out;
}

namespace {

// The items of "name=value,...": each parameter named and its value, in the text's order.
std::vector<std::pair<const Field*, int>> parse_items(const std::string& text) {
  std::vector<std::pair<const Field*, int>> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    MPK_CHECK(eq != std::string::npos, InvalidArgument)
        << "megakernel parameter '" << item << "' is not name=value";
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    const long v = std::strtol(value.c_str(), &end, 10);
    MPK_CHECK(!value.empty() && *end == '\0' && v >= -(1L << 30) && v <= (1L << 30), InvalidArgument)
        << "megakernel parameter " << name << " = '" << value << "' is not an integer";
    const Field* f = std::find_if(std::begin(kFields), std::end(kFields),
                                  [&](const Field& x) { return name == x.name; });
    MPK_CHECK(f != std::end(kFields), InvalidArgument) << "unknown megakernel parameter '" << name << "'";
    out.emplace_back(f, int(v));
  }
  return out;
}

// The parameters an axis sets (axis_fields), in kFields' order.
std::vector<const Field*> axis_params(const ParamAxis& axis) {
  std::vector<bool> set(std::size(kFields));
  for (size_t i = 0; i < std::size(kFields); ++i) set[i] = std::string_view(kFields[i].name) == axis.name;
  for (const std::string& change : axis.changes)
    for (const auto& [f, v] : parse_items(change)) set[size_t(f - kFields)] = true;
  std::vector<const Field*> out;
  for (size_t i = 0; i < std::size(kFields); ++i)
    if (set[i]) out.push_back(&kFields[i]);
  return out;
}

}  // namespace

MegakernelParams parse_params(const std::string& text, MegakernelParams base) {
  for (const auto& [f, v] : parse_items(text)) base.*f->member = v;
  validate(base);
  return base;
}

std::string to_json(const MegakernelParams& p) {
  std::string out = "{";
  for (const Field& f : kFields)
    out += fmt::format("{}\"{}\":{}", out.size() > 1 ? "," : "", f.name, p.*f.member);
  return out + "}";
}

int changed_params(const MegakernelParams& a, const MegakernelParams& b) {
  int n = 0;
  for (const Field& f : kFields) n += a.*f.member != b.*f.member;
  return n;
}

bool same_plan(const MegakernelParams& a, const MegakernelParams& b) {
  return a.fold_down == b.fold_down && a.kv_splits == b.kv_splits && a.merge_task == b.merge_task &&
         a.tile_waves == b.tile_waves;
}

std::string to_text(const MegakernelParams& p) {
  std::string out;
  for (const Field& f : kFields) out += fmt::format("{}{}={}", out.empty() ? "" : ",", f.name, p.*f.member);
  return out;
}

MegakernelParams params_from_json(const std::string& json, MegakernelParams base) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  MPK_CHECK(j.is_object(), InvalidArgument) << "megakernel parameters are not a JSON object: " << json.substr(0, 80);
  std::string text;
  for (const auto& [name, value] : j.items()) {
    MPK_CHECK(value.is_number_integer(), InvalidArgument)
        << "megakernel parameter " << name << " is not an integer: " << value.dump();
    text += fmt::format("{}{}={}", text.empty() ? "" : ",", name, value.get<int64_t>());
  }
  return parse_params(text, base);
}

const std::vector<ParamAxis>& search_axes() {
  static const std::vector<ParamAxis> axes = {
      {"rows_per_warp", "linear", {"rows_per_warp=1", "rows_per_warp=2", "rows_per_warp=3", "rows_per_warp=4"}},
      {"down_rows_per_warp", "down",
       {"down_rows_per_warp=0", "down_rows_per_warp=1", "down_rows_per_warp=2", "down_rows_per_warp=3",
        "down_rows_per_warp=4"}},
      {"head_rows_per_warp", "LM head",
       {"head_rows_per_warp=0", "head_rows_per_warp=1", "head_rows_per_warp=2", "head_rows_per_warp=3",
        "head_rows_per_warp=4"}},
      {"loads_in_flight", "linear",
       {"loads_in_flight=2", "loads_in_flight=3", "loads_in_flight=4", "loads_in_flight=5", "loads_in_flight=6"}},
      {"max_k_split", "linear", {"max_k_split=2", "max_k_split=4", "max_k_split=8"}},
      {"heads_per_pass", "attention", {"heads_per_pass=2", "heads_per_pass=4", "heads_per_pass=8"}},
      {"merge_batch", "merge", {"merge_batch=4", "merge_batch=8", "merge_batch=16"}},
      {"prefetch_rounds", "linear", {"prefetch_rounds=0", "prefetch_rounds=1", "prefetch_rounds=2"}},
      {"poll_warp_loads", "worker", {"poll_warp_loads=0", "poll_warp_loads=1"}},
      {"block_threads", "worker",
       {"block_threads=384", "block_threads=448", "block_threads=480", "block_threads=512"}},
      {"stage_weights", "linear",
       {"stage_weights=0,stage_late=0", "stage_weights=1,stage_late=0", "stage_weights=1,stage_late=1"}},
      {"prefetch_next", "worker", {"prefetch_next=0", "prefetch_next=64", "prefetch_next=128", "prefetch_next=256"}},
      {"fold_down", "MLP", {"fold_down=0", "fold_down=1"}},
      {"controller_warp", "worker",
       {"controller_warp=0,block_threads=512", "controller_warp=1,block_threads=480"}},
      // The decomposition: KV chunks per head (0: a wave), the merge's placement, tiles per stage.
      {"kv_splits", "attention", {"kv_splits=0", "kv_splits=2", "kv_splits=4", "kv_splits=8", "kv_splits=32"}},
      {"merge_task", "merge", {"merge_task=0", "merge_task=1"}},
      {"tile_waves", "linear", {"tile_waves=1", "tile_waves=2"}},
  };
  return axes;
}

void check_axis_names(const std::vector<std::string>& names) {
  for (const std::string& name : names)
    MPK_CHECK(std::any_of(search_axes().begin(), search_axes().end(),
                          [&](const ParamAxis& a) { return name == a.name; }),
              InvalidArgument)
        << "no search axis named '" << name << "'";
}

std::vector<std::string> axis_fields(const ParamAxis& axis) {
  std::vector<std::string> out;
  for (const Field* f : axis_params(axis)) out.push_back(f->name);
  return out;
}

std::vector<std::string> changed_stages(const MegakernelParams& a, const MegakernelParams& b) {
  std::vector<std::string> out;
  for (const ParamAxis& axis : search_axes()) {
    const std::vector<const Field*> fields = axis_params(axis);
    const bool changed =
        std::any_of(fields.begin(), fields.end(), [&](const Field* f) { return a.*f->member != b.*f->member; });
    if (changed && std::find(out.begin(), out.end(), axis.stage) == out.end()) out.push_back(axis.stage);
  }
  return out;
}

}  // namespace mpk::rt
