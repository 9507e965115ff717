// mpk-tune: inspect and maintain the kernel cache.
//
//   mpk-tune [--cache PATH] [--json] [--read-only] COMMAND ...
//     list [--limit N] | show KEY | stats | prune [--max-bytes N] | export FILE [--force]
//     | import FILE | verify | prove --model DIR [--workers N] [--kv-capacity N]
//     | coverage --model DIR [--workers N] [--kv-capacity N] [--arch A] [--compile]
//     | candidates --model DIR [--workers N] [--kv-capacity N] [--arch A] [--seed N] [--max N]
//     | tune --model DIR [--budget 10m] [--seed N] [--steps N] [--launches N] | tunings
#include <CLI/CLI.hpp>
#include <cstdint>

#include <iostream>

#include "base/error.h"
#include "cache/paths.h"
#include "commands.h"
#include "candidates.h"
#include "coverage.h"
#include "prove.h"
#include "search.h"

using namespace mpk;
using namespace mpk::tune;

namespace {

constexpr const char* kFooter =
    "Exit status: 0 success, 1 failure, 2 bad arguments, 3 verify found damage.\n"
    "Default cache: $MPK_CACHE_DIR/kernels.db, else $HOME/.cache/mpk/kernels.db (without HOME,\n"
    "the home directory of the user account).";

const CLI::Validator kCount(
    [](std::string& s) -> std::string {
      bool digits = !s.empty() && s.size() < 19 && s.find_first_not_of("0123456789") == std::string::npos;
      return digits ? "" : "'" + s + "' is not a non-negative integer";
    },
    "N");

// "90", "90s", "10m", "1h" as seconds (positive, at most a day); nullopt otherwise.
std::optional<double> parse_duration(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string unit = text.substr(used);
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  v *= scale;
  if (!(v > 0 && v <= 86400)) return std::nullopt;
  return v;
}

int usage_error(const CLI::App& app, const std::string& message) {
  std::cerr << "mpk-tune: " << message << "\n\n" << app.help();
  return kExitUsage;
}

int run(int argc, char** argv) {
  CLI::App app{"Inspect and maintain the mpk kernel cache.", "mpk-tune"};
  app.footer(kFooter);
  app.require_subcommand(1, 1);
  app.fallthrough();  // global options may also follow the subcommand

  std::string cache_path, max_bytes_text, file, key;
  bool json = false, read_only = false, force = false;
  size_t limit = 0;
  app.add_option("--cache", cache_path, "Cache database file");
  app.add_flag("--json", json, "Print JSON instead of tables");
  app.add_flag("--read-only", read_only, "Open the cache read-only");

  CLI::App* list = app.add_subcommand("list", "List entries, most recently used first");
  list->add_option("--limit", limit, "Show at most N entries (0: all)")->check(kCount);
  CLI::App* show = app.add_subcommand("show", "Show one entry");
  show->add_option("KEY", key, "Key or unique key prefix")->required();
  CLI::App* stats = app.add_subcommand("stats", "Cache size and counters");
  CLI::App* prune = app.add_subcommand("prune", "Evict least-recently-used entries to a byte budget");
  prune->add_option("--max-bytes", max_bytes_text, "Budget, e.g. 500M or 2G (default $MPK_CACHE_MAX_BYTES or 2G)");
  CLI::App* exp = app.add_subcommand("export", "Write all good entries to a new cache file");
  exp->add_option("FILE", file, "Target file")->required();
  exp->add_flag("--force", force, "Overwrite FILE");
  CLI::App* imp = app.add_subcommand("import", "Merge a cache file; on conflict the faster verified entry wins");
  imp->add_option("FILE", file, "Source cache file")->required();
  CLI::App* verify = app.add_subcommand("verify", "Re-check every checksum; drop damaged entries");
  std::string model_dir;
  int workers = 132;
  int64_t kv_capacity = 4096;
  // The commands that plan a model from its config.json.
  auto plan_options = [&](CLI::App* c) {
    c->add_option("--model", model_dir, "Model directory (its config.json)")->required();
    c->add_option("--workers", workers, "Worker CTAs the plan is made for (one per SM)")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    c->add_option("--kv-capacity", kv_capacity, "KV capacity the plan is made for")
        ->check(CLI::Range(int64_t(1), int64_t(INT32_MAX)))  // positions are ints on the device
        ->capture_default_str();
    return c;
  };
  CLI::App* prove = plan_options(app.add_subcommand(
      "prove", "Prove the formulas of a model's megakernel plan (config.json only, no GPU)"));
  std::string arch = "sm_90a";
  bool compile = false;
  CLI::App* coverage = plan_options(app.add_subcommand(
      "coverage", "Which kernel variant runs each op of a model (config.json only, no GPU)"));
  coverage->add_option("--arch", arch, "GPU architecture (NVRTC's, e.g. sm_90a)")->capture_default_str();
  coverage->add_flag("--compile", compile, "also compile the kernel for --arch with NVRTC");
  uint64_t seed = 1;
  CLI::App* candidates = plan_options(app.add_subcommand(
      "candidates", "The search's candidates for a model through static filters, proofs and NVRTC (no GPU)"));
  candidates->add_option("--arch", arch, "GPU architecture (NVRTC's, e.g. sm_90a)")->capture_default_str();
  candidates->add_option("--seed", seed, "order of the candidates")->capture_default_str();
  size_t max_candidates = 0;
  candidates->add_option("--max", max_candidates, "check only the first N (0: all)")->capture_default_str();

  TuneArgs tune_args;
  std::string budget_text = "10m";
  CLI::App* tune_cmd = app.add_subcommand(
      "tune", "Search the model's megakernel parameters on the GPU and store the result in the cache");
  tune_cmd->add_option("--model", tune_args.model_dir, "Model directory")->required();
  tune_cmd->add_option("--budget", budget_text, "Wall-time budget: seconds, or with s/m/h (e.g. 90s, 10m)")
      ->capture_default_str();
  tune_cmd->add_option("--seed", tune_args.seed, "order of the search")->capture_default_str();
  tune_cmd->add_option("--steps", tune_args.steps, "decode steps per timed launch")
      ->check(CLI::Range(8, 4096))
      ->capture_default_str();
  tune_cmd->add_option("--launches", tune_args.launches, "timed launches per side of a comparison")
      ->check(CLI::Range(3, 50))
      ->capture_default_str();
  tune_cmd->add_option("--prompt-tokens", tune_args.prompt_tokens,
                       "prompt before the timed steps: the KV length they start at (and the logits' test)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  tune_cmd->add_option("--axes", tune_args.axes, "search only these axes (e.g. kv_splits,tile_waves); default: all")
      ->delimiter(',');
  CLI::App* tunings = app.add_subcommand("tunings", "List the tuning results in the cache");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e.what());
  }

  std::optional<uint64_t> max_bytes = cache::default_max_bytes();
  if (prune->parsed() && !max_bytes_text.empty()) {
    max_bytes = cache::parse_byte_size(max_bytes_text);
    if (!max_bytes) return usage_error(app, "--max-bytes: '" + max_bytes_text + "' is not a byte size");
  }

  if (prove->parsed()) return cmd_prove(std::cout, model_dir, workers, kv_capacity, json);
  if (coverage->parsed())
    return cmd_coverage(std::cout, model_dir, workers, kv_capacity, arch, compile, json);
  if (candidates->parsed())
    return cmd_candidates(std::cout, model_dir, workers, kv_capacity, arch, seed, max_candidates, json);
  Context ctx{cache_path.empty() ? cache::default_cache_path() : std::filesystem::path(cache_path), json,
              read_only, std::cout};
  if (tune_cmd->parsed()) {
    const std::optional<double> budget = parse_duration(budget_text);
    if (!budget) return usage_error(app, "--budget: '" + budget_text + "' is not a duration (e.g. 90, 90s, 10m, 1h)");
    tune_args.budget_s = *budget;
    return cmd_tune(ctx, tune_args);
  }
  if (tunings->parsed()) return cmd_tunings(ctx);
  if (list->parsed()) return cmd_list(ctx, limit);
  if (show->parsed()) return cmd_show(ctx, key);
  if (stats->parsed()) return cmd_stats(ctx);
  if (prune->parsed()) return cmd_prune(ctx, *max_bytes);
  if (exp->parsed()) return cmd_export(ctx, file, force);
  if (imp->parsed()) return cmd_import(ctx, file);
  if (verify->parsed()) return cmd_verify(ctx);
  return usage_error(app, "no command");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    std::cerr << "mpk-tune: " << e.what() << '\n';
    return kExitError;
  } catch (const std::exception& e) {
    std::cerr << "mpk-tune: " << e.what() << '\n';
    return kExitError;
  }
}
