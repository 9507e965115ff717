#include "search.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cache/cache.h"
#include "cache/paths.h"
#include "cache/sha256.h"
#include "cuda/driver.h"
#include "ir/builder.h"
#include "model/model.h"
#include "report.h"
#include "runtime/tune.h"

namespace mpk::tune {
namespace {

using nlohmann::json;

std::string duration_text(double s) {
  const int n = int(s + 0.5);
  return n >= 60 ? fmt::format("{}m{:02}s", n / 60, n % 60) : fmt::format("{}s", n);
}

// The values of `chosen` that differ from `defaults` among the parameters the axes of `stage`
// set (rt::axis_fields: the weight ring's axis also sets stage_late, the controller warp's
// block_threads), each once.
std::string stage_changes(const std::string& stage, const json& chosen, const json& defaults) {
  std::vector<std::string> seen;
  std::string out;
  for (const rt::ParamAxis& a : rt::search_axes()) {
    if (a.stage != stage) continue;
    for (const std::string& name : rt::axis_fields(a)) {
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(name);
      if (chosen.value(name, 0) != defaults.value(name, 0))
        out += fmt::format("{}{}={}", out.empty() ? "" : ",", name, chosen[name].dump());
    }
  }
  return out.empty() ? "defaults" : out;
}

}  // namespace

int cmd_tune(const Context& ctx, const TuneArgs& args) {
  rt::check_axis_names(args.axes);  // before the GPU: a typo is found anywhere
  MPK_CHECK(ctx.cache_path.filename() == cache::kCacheFileName, InvalidArgument)
      << "tune: the cache file must be named " << cache::kCacheFileName << " (the runtime looks for it by name)";
  MPK_CHECK(!ctx.read_only, InvalidArgument) << "tune stores its result: --read-only refused";
  MPK_CHECK(cuda::driver_available() && cuda::device_count() > 0, NoDevice)
      << "tune times candidates on a GPU and this machine has none (mpk-tune candidates checks them without one)";
  // Opened before the search: a cache that cannot take the result is found in seconds, not at
  // the end of the budget (an unwritable file opens read-only).
  cache::CacheOptions co;
  co.path = ctx.cache_path;
  cache::Cache store(std::move(co));
  MPK_CHECK(!store.read_only(), Io) << "tune: the kernel cache " << ctx.cache_path.string()
                                    << " cannot be written, and the search's result is stored there";
  rt::RuntimeOptions o;
  o.cache_dir = std::filesystem::absolute(ctx.cache_path).parent_path();  // "kernels.db": here
  o = rt::resolve_environment(o);
  o.mk_params.clear();  // the search sets them
  const std::unique_ptr<model::Model> model = model::load(args.model_dir);
  const ir::Graph graph = ir::build(model->config);

  rt::TuneOptions t;
  t.budget_s = args.budget_s;
  t.seed = args.seed;
  t.steps = args.steps;
  t.launches = args.launches;
  t.axes = args.axes;
  t.prompt_tokens = args.prompt_tokens;
  const bool tty = isatty(STDERR_FILENO);
  t.progress = [&](const std::string& line, double done, double eta) {
    if (tty)
      std::fprintf(stderr, "\r\033[Kmpk-tune: %3.0f%% ETA %s  %s", 100 * done, duration_text(eta).c_str(),
                   line.substr(0, 100).c_str());
    else
      std::fprintf(stderr, "mpk-tune: [%3.0f%%, ETA %s] %s\n", 100 * done, duration_text(eta).c_str(), line.c_str());
    std::fflush(stderr);
  };
  std::fprintf(stderr, "mpk-tune: searching %s within %s (seed %llu; timed at positions %d..%d)\n",
               args.model_dir.c_str(), duration_text(args.budget_s).c_str(), (unsigned long long)args.seed,
               args.prompt_tokens, args.prompt_tokens + args.steps - 1);
  const rt::TuneResult r = rt::tune(o, *model, graph, t);
  if (tty) std::fprintf(stderr, "\n");
  const cache::Tuning record = rt::tuning_record(r);
  try {
    store.publish_tuning(record);
  } catch (const Error&) {
    // The search's time is not lost with the write: its choice goes to stderr first.
    std::fprintf(stderr, "mpk-tune: the search chose %s; storing it failed:\n", record.params_json.c_str());
    throw;
  }

  const json rec = json::parse(record.record_json);
  const json chosen = json::parse(record.params_json), defaults = rec["defaults"];
  if (ctx.json) {
    ctx.out << json{{"signature", cache::sha256_hex(record.signature_text)},
                    {"signature_text", json::parse(record.signature_text)},
                    {"params", chosen},
                    {"record", rec}}
                   .dump(2)
            << '\n';
    return kExitOk;
  }
  struct Class {
    int tried = 0, timed = 0, rejected = 0, failed = 0;
    double speedup = 1;
  };
  std::map<std::string, Class> classes;
  for (const rt::TuneTrial& tr : r.trials) {
    Class& c = classes[tr.stage];
    ++c.tried;
    c.timed += tr.us > 0;
    c.rejected += tr.verdict.rfind("rejected", 0) == 0;
    c.failed += tr.verdict.rfind("failed", 0) == 0;
    if (tr.verdict == "faster") c.speedup *= tr.best_us / tr.us;
  }
  Table table({"STAGE CLASS", "CHOSEN", "SPEED-UP", "TRIED", "TIMED", "REJECTED", "FAILED TEST"}, {2, 3, 4, 5, 6});
  for (const auto& [stage, c] : classes)
    table.add({stage, stage_changes(stage, chosen, defaults), fmt::format("{:.3f}x", c.speedup),
               std::to_string(c.tried), std::to_string(c.timed), std::to_string(c.rejected),
               std::to_string(c.failed)});
  table.print(ctx.out);
  ctx.out << fmt::format(
      "chosen {:.1f} us/token vs defaults {:.1f} ({:.3f}x), confirmed in one interleaved run; {} candidates "
      "in {}{}\n",
      r.chosen_us, r.default_us, r.default_us / r.chosen_us, r.trials.size(), duration_text(r.elapsed_s),
      r.budget_exhausted ? " (budget reached: the rest skipped)" : "");
  if (rec.contains("runner_up"))
    ctx.out << fmt::format("closest loser: {} ({:+.2f}% against the best of its time)\n",
                           rec["runner_up"]["change"].get<std::string>(),
                           100 * rec["runner_up"]["margin"].get<double>());
  ctx.out << fmt::format("stored in {} under {}\n", ctx.cache_path.string(),
                         cache::sha256_hex(record.signature_text).substr(0, 16));
  return kExitOk;
}

int cmd_tunings(const Context& ctx) {
  MPK_CHECK(cache::regular_file_exists(ctx.cache_path), NotFound) << "no kernel cache at " << ctx.cache_path.string();
  cache::CacheOptions co;
  co.path = ctx.cache_path;
  co.read_only = ctx.read_only;
  const std::vector<cache::Tuning> all = cache::Cache(std::move(co)).tunings();
  if (ctx.json) {
    json arr = json::array();
    for (const cache::Tuning& t : all)
      arr.push_back({{"signature", t.signature},
                     {"signature_text", json::parse(t.signature_text)},
                     {"params", json::parse(t.params_json)},
                     {"record", json::parse(t.record_json)},
                     {"time_us", t.time_us},
                     {"default_time_us", t.default_time_us},
                     {"host", t.provenance.host},
                     {"created", t.provenance.unix_time},
                     {"mpk_version", t.provenance.mpk_version}});
    ctx.out << json{{"path", ctx.cache_path.string()}, {"tunings", arr}}.dump(2) << '\n';
    return kExitOk;
  }
  Table table({"SIGNATURE", "MODEL", "DEVICE", "US/TOKEN", "DEFAULTS", "SPEED-UP", "CREATED", "HOST"}, {3, 4, 5});
  for (const cache::Tuning& t : all) {
    const json s = json::parse(t.signature_text);
    table.add({t.signature.substr(0, 16),
               fmt::format("{} {}", s.value("architecture", "?"), s.contains("shape") ? s["shape"].dump() : ""),
               s.value("device", "?"), fmt::format("{:.1f}", t.time_us), fmt::format("{:.1f}", t.default_time_us),
               fmt::format("{:.3f}x", t.default_time_us / t.time_us), utc_time(t.provenance.unix_time),
               t.provenance.host});
  }
  table.print(ctx.out);
  ctx.out << all.size() << (all.size() == 1 ? " tuning result" : " tuning results") << " in "
          << ctx.cache_path.string() << '\n';
  return kExitOk;
}

}  // namespace mpk::tune
