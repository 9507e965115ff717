#include "runtime/tune.h"

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "base/error.h"
#include "base/log.h"
#include "base/percentile.h"
#include "base/rel_l2.h"
#include "cache/cache.h"
#include "cache/paths.h"
#include "cache/sha256.h"
#include "cuda/nvrtc.h"
#include "runtime/gpu_backend.h"
#include "runtime/megakernel.h"

namespace mpk::rt {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) { return percentile(std::move(v), 50); }

// One parameter set on the device: its kernel and weights, and a session to time it with.
struct Side {
  MegakernelParams params;
  std::unique_ptr<Stats> stats = std::make_unique<Stats>();  // sessions keep a reference
  std::shared_ptr<const GpuModel> model;
  std::unique_ptr<GpuSession> session;
};

class Bench {
 public:
  Bench(const RuntimeOptions& options, const model::Model& model, const ir::Graph& graph, const TuneOptions& t)
      : options_(options), model_(model), graph_(graph), t_(t) {
    options_.progress = {};
    std::mt19937_64 rng(t.seed);
    std::uniform_int_distribution<int32_t> token(0, int32_t(graph.config.vocab_size) - 1);
    for (int i = 0; i < t.prompt_tokens; ++i) prompt_.push_back(token(rng));
  }

  // Loads `p`, or the model's defaults without it (planned, proved and compiled through the
  // cache on the way).
  std::unique_ptr<Side> load(const MegakernelParams* p) {
    auto s = std::make_unique<Side>();
    RuntimeOptions o = options_;
    o.mk_params = p ? to_text(*p) : std::string();
    o.tune_policy = TunePolicy::DefaultsOnly;
    s->model = std::make_shared<const GpuModel>(o, model_, graph_, *s->stats);
    s->params = s->model->params();
    SessionOptions so;
    // At least the most KV chunks a plan takes (kv_splits <= 64; within the model's positions):
    // a split is timed as stored, not cut to a short capacity.
    const int64_t positions = graph_.config.max_position_embeddings;
    so.kv_capacity = size_t(std::max<int64_t>(t_.prompt_tokens + t_.steps + 1,
                                              positions > 0 ? std::min<int64_t>(64, positions) : 64));
    so.steps_per_launch = size_t(t_.steps);
    so.tensor_core_prefill = false;  // the decode step's own arithmetic for the test
    s->session = std::make_unique<GpuSession>(s->model, so, *s->stats);
    return s;
  }

  // The logits after the teacher-forced prompt.
  std::vector<float> logits(Side& s) {
    s.session->reset();
    s.session->prefill(prompt_.data(), prompt_.size());
    return s.session->logits();
  }

  // One timed launch of `steps` greedy steps after the prompt: the per-token p50, us.
  double launch_us(Side& s) {
    s.session->reset();
    s.session->prefill(prompt_.data(), prompt_.size());
    std::vector<int32_t> out;
    s.session->decode(size_t(t_.steps), {}, out);
    std::vector<double> us;
    for (double ms : s.session->step_ms()) us.push_back(ms * 1000);
    MPK_ICHECK(!us.empty()) << "a timed launch ran no steps";
    return median(std::move(us));
  }

  struct Comparison {
    double a_us = 0, b_us = 0;  // medians
    bool b_faster = false;      // by the margin, every launch of b beating every launch of a
  };
  // a and b interleaved, launch by launch, after one warm-up launch each.
  Comparison compare(Side& a, Side& b, int launches) {
    launch_us(a);
    launch_us(b);
    std::vector<double> av, bv;
    for (int i = 0; i < launches; ++i) {
      av.push_back(launch_us(a));
      bv.push_back(launch_us(b));
    }
    Comparison c{median(av), median(bv)};
    c.b_faster = c.b_us <= (1 - t_.margin) * c.a_us && *std::max_element(bv.begin(), bv.end()) <
                                                             *std::min_element(av.begin(), av.end());
    return c;
  }

 private:
  RuntimeOptions options_;
  const model::Model& model_;
  const ir::Graph& graph_;
  const TuneOptions& t_;
  std::vector<int32_t> prompt_;
};

struct Planned {
  const ParamAxis* axis;
  std::string change;
};

// Plans, proves and compiles the untried sets of `axis` around `best` into the cache in
// parallel (NVRTC and Z3 each run single-threaded), so that the loads that follow hit it;
// the ones that cannot be built, and the ones whose kernel spills registers to local memory
// (ptxas's figures: a spill of the weights loaded before a wait costs that wait's overlap, and
// every spilling set measured was slower), go to `unbuildable` with the reason.
void precompile_axis(const RuntimeOptions& options, const GpuModel& ref, const ParamAxis& axis,
                     const MegakernelParams& best, const std::set<std::string>& tried,
                     std::map<std::string, std::string>& unbuildable) {
  std::vector<MegakernelParams> sets;
  for (const std::string& change : axis.changes) {
    try {
      const MegakernelParams p = parse_params(change, best);
      if (!tried.count(to_json(p))) sets.push_back(p);
    } catch (const Error&) {
      // an invalid change is reported when its turn comes
    }
  }
  std::vector<std::string> why(sets.size());
  tbb::parallel_for(size_t(0), sets.size(), [&](size_t i) {
    try {
      const cuda::PtxasInfo info =
          precompile_megakernel(options, ref.graph(), ref.weight_dtype(), ref.num_workers(), ref.arch(), sets[i]);
      if (info.spill_store_bytes > 0 || info.spill_load_bytes > 0)
        why[i] = fmt::format("spills {} bytes ({} registers)", info.spill_store_bytes, info.registers);
    } catch (const std::exception& e) {  // Error, and Z3's or the allocator's
      why[i] = e.what();
    }
  });
  for (size_t i = 0; i < sets.size(); ++i)
    if (!why[i].empty()) unbuildable[to_json(sets[i])] = why[i];
}

}  // namespace

std::string tuning_signature_text(const ir::Graph& graph, DType dtype, int workers, const std::string& device_name,
                                  const std::string& arch) {
  const auto& c = graph.config;
  const auto [maj, min] = cuda::nvrtc_version();
  json j = {{"architecture", c.architecture},
            {"shape",
             {c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads, c.num_kv_heads,
              c.head_dim}},
            {"dtype", dtype_name(dtype)},
            {"workers", workers},
            {"device", device_name},
            {"arch", arch},
            {"nvrtc", std::to_string(maj) + "." + std::to_string(min)},
            {"codegen", kMegakernelCodegenVersion},
            // The kernel text itself: a result measured on other code does not carry over.
            {"source", cache::sha256_hex(megakernel_source(MegakernelParams{}, dtype, 0))}};
  // A gelu model's step runs the host fallback between launches: not the SiLU model's timing.
  if (c.hidden_act != model::Activation::Silu) j["hidden_act"] = "gelu_pytorch_tanh";
  return j.dump();  // nlohmann orders object keys: one text per signature
}

TuneResult tune(const RuntimeOptions& options, const model::Model& model, const ir::Graph& graph,
                const TuneOptions& t) {
  MPK_CHECK(t.steps >= 1 && t.launches >= 1 && t.prompt_tokens >= 1 && t.margin >= 0 && t.budget_s >= 0,
            InvalidArgument)
      << "tune: steps, launches and prompt_tokens must be positive, margin and budget non-negative";
  check_axis_names(t.axes);
  const int64_t positions = graph.config.max_position_embeddings;
  MPK_CHECK(positions <= 0 || int64_t(t.prompt_tokens) + t.steps < positions, InvalidArgument)
      << "tune: a prompt of " << t.prompt_tokens << " and " << t.steps << " steps pass the model's "
      << positions << " positions";
  const auto t0 = Clock::now();
  Bench bench(options, model, graph, t);
  TuneResult r;
  r.seed = t.seed;
  r.first_position = t.prompt_tokens;
  r.steps = t.steps;

  // The defaults first: their errors are the model's, not a candidate's.
  std::unique_ptr<Side> defaults = bench.load(nullptr);
  r.defaults = defaults->params;
  r.signature_text = defaults->model->tuning_signature();
  const std::vector<float> reference = bench.logits(*defaults);
  MPK_CHECK(std::isfinite(rel_l2(reference, reference)), Numerics)
      << "tune: the defaults' logits are not finite";

  // Coordinate descent in the seed's order.
  std::mt19937_64 rng(t.seed);
  std::vector<const ParamAxis*> axes;
  for (const ParamAxis& a : search_axes())
    if (t.axes.empty() || std::find(t.axes.begin(), t.axes.end(), a.name) != t.axes.end()) {
      axes.push_back(&a);
      r.axes.push_back(a.name);
    }
  std::shuffle(axes.begin(), axes.end(), rng);
  std::vector<Planned> plan;
  for (const ParamAxis* a : axes) {
    std::vector<std::string> changes = a->changes;
    std::shuffle(changes.begin(), changes.end(), rng);
    for (std::string& c : changes) plan.push_back({a, std::move(c)});
  }

  Side* best = defaults.get();
  std::unique_ptr<Side> best_owned;  // the best when it is not the defaults
  std::set<std::string> tried{to_json(r.defaults)};
  std::map<std::string, std::string> unbuildable;  // to_json(params) -> why it cannot load
  for (size_t i = 0; i < plan.size(); ++i) {
    if ((i == 0 || plan[i].axis != plan[i - 1].axis) && seconds_since(t0) <= t.budget_s)
      precompile_axis(options, *defaults->model, *plan[i].axis, best->params, tried, unbuildable);
    const auto tc = Clock::now();
    TuneTrial trial;
    trial.axis = plan[i].axis->name;
    trial.stage = plan[i].axis->stage;
    trial.change = plan[i].change;
    MegakernelParams p;
    bool run = false;
    try {
      p = parse_params(trial.change, best->params);
      run = tried.insert(to_json(p)).second;  // the best's own value, or a set already tried
    } catch (const Error& e) {
      trial.verdict = std::string("rejected: ") + e.what();
    }
    if (run && seconds_since(t0) > t.budget_s) {
      trial.verdict = "skipped: budget";
      r.budget_exhausted = true;
    } else if (run) {
      std::unique_ptr<Side> cand;
      if (const auto it = unbuildable.find(to_json(p)); it != unbuildable.end()) {
        trial.verdict = "rejected: " + it->second;
      } else {
        try {
          cand = bench.load(&p);
        } catch (const Error& e) {
          trial.verdict = std::string("rejected: ") + e.what();
        }
      }
      if (cand) {
        try {
          trial.rel_l2 = rel_l2(bench.logits(*cand), reference);
          if (!(trial.rel_l2 <= t.max_rel_l2))
            trial.verdict = fmt::format("failed test: logits rel. L2 {:.2e} > {:.0e}", trial.rel_l2, t.max_rel_l2);
        } catch (const Error& e) {
          trial.verdict = std::string("failed test: ") + e.what();
        }
      }
      if (cand && trial.verdict.empty()) {
        try {
          const Bench::Comparison c = bench.compare(*best, *cand, t.launches);
          trial.us = c.b_us;
          trial.best_us = c.a_us;
          trial.verdict = c.b_faster ? "faster" : "not faster";
          if (c.b_faster) {
            best_owned = std::move(cand);
            best = best_owned.get();
          }
        } catch (const Error& e) {
          // A launch that times out or fails; should the device itself be lost, the best's
          // next launch fails outside this and ends the search.
          trial.verdict = std::string("failed test: timed launch: ") + e.what();
        }
      }
    }
    if (!run && trial.verdict.empty()) continue;  // nothing new to try
    r.timed += trial.verdict == "faster" || trial.verdict == "not faster";
    r.rejected += trial.verdict.rfind("rejected", 0) == 0;
    r.failed += trial.verdict.rfind("failed", 0) == 0;
    trial.ms = seconds_since(tc) * 1000;
    r.trials.push_back(trial);
    if (t.progress) {
      const double done = double(i + 1) / double(plan.size());
      const double elapsed = seconds_since(t0);
      const double eta = std::min(elapsed / done * (1 - done), std::max(0.0, t.budget_s - elapsed));
      std::string line = fmt::format("{:<40} {}", trial.change, trial.verdict);
      if (trial.us > 0) line += fmt::format(" ({:.1f} vs {:.1f} us/token)", trial.us, trial.best_us);
      t.progress(line, done, eta);
    }
  }

  // The winner against the defaults, whole, in one interleaved run with twice the launches.
  r.chosen = best->params;
  if (best == defaults.get()) {
    std::vector<double> v;
    for (int i = 0; i < t.launches; ++i) v.push_back(bench.launch_us(*defaults));
    r.default_us = r.chosen_us = median(v);
  } else {
    const Bench::Comparison c = bench.compare(*defaults, *best, 2 * t.launches);
    r.default_us = c.a_us;
    r.chosen_us = c.b_us;
    if (!c.b_faster) {  // not confirmed: the defaults stay
      log(LogLevel::Info, "tune: {} not confirmed against the defaults ({:.1f} vs {:.1f} us/token)",
          to_json(r.chosen), c.b_us, c.a_us);
      r.chosen = r.defaults;
      r.chosen_us = r.default_us;
    }
  }
  r.elapsed_s = seconds_since(t0);
  return r;
}

std::vector<std::string> timed_stages(const TuneResult& r) {
  std::vector<std::string> out;
  for (const TuneTrial& t : r.trials)
    if ((t.verdict == "faster" || t.verdict == "not faster") && std::find(out.begin(), out.end(), t.stage) == out.end())
      out.push_back(t.stage);
  return out;
}

cache::Tuning tuning_record(const TuneResult& r) {
  json trials = json::array();
  const TuneTrial* runner_up = nullptr;
  for (const TuneTrial& t : r.trials) {
    json j = {{"axis", t.axis}, {"stage", t.stage}, {"change", t.change}, {"verdict", t.verdict},
              {"ms", std::round(t.ms)}};
    if (t.us > 0) j.update({{"us", t.us}, {"best_us", t.best_us}, {"rel_l2", t.rel_l2}});
    trials.push_back(std::move(j));
    if (t.verdict == "not faster" && (!runner_up || t.us / t.best_us < runner_up->us / runner_up->best_us))
      runner_up = &t;
  }
  json record = {{"seed", r.seed},
                 {"axes", r.axes},
                 {"timed_positions", {r.first_position, r.first_position + r.steps - 1}},
                 {"defaults", json::parse(to_json(r.defaults))},
                 {"default_us", r.default_us},
                 {"chosen_us", r.chosen_us},
                 {"speedup", r.default_us / r.chosen_us},
                 {"budget_exhausted", r.budget_exhausted},
                 {"elapsed_s", r.elapsed_s},
                 {"counts", {{"tried", r.trials.size()}, {"timed", r.timed}, {"rejected", r.rejected},
                             {"failed_test", r.failed}}},
                 {"trials", std::move(trials)}};
  // The closest loser, measured against the best of its time: how near the search came to
  // choosing otherwise.
  if (runner_up)
    record["runner_up"] = {{"change", runner_up->change}, {"us", runner_up->us}, {"best_us", runner_up->best_us},
                           {"margin", runner_up->us / runner_up->best_us - 1}};
  cache::Tuning t;
  t.signature_text = r.signature_text;
  t.params_json = to_json(r.chosen);
  t.record_json = record.dump();
  t.time_us = r.chosen_us;
  t.default_time_us = r.default_us;
  return t;
}

namespace {

// The cache of `options`, or nullopt (logged) when it cannot be opened.
std::optional<cache::Cache> open_cache(const RuntimeOptions& options) {
  try {
    MPK_CHECK(!options.cache_dir.empty(), Cache) << "no kernel cache directory";
    cache::CacheOptions co;
    co.path = options.cache_dir / cache::kCacheFileName;
    std::filesystem::create_directories(co.path.parent_path());
    return std::make_optional<cache::Cache>(std::move(co));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Cache && e.kind() != ErrorKind::Io && e.kind() != ErrorKind::NotFound) throw;
    log(LogLevel::Warn, "kernel cache unavailable for tuning results ({})", e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    log(LogLevel::Warn, "kernel cache directory unavailable for tuning results ({})", e.what());
  }
  return std::nullopt;
}

}  // namespace

std::optional<cache::Tuning> find_tuning(const RuntimeOptions& options, const std::string& signature_text) {
  std::optional<cache::Cache> c = open_cache(options);
  if (!c) return std::nullopt;
  try {
    return c->tuning(cache::sha256_hex(signature_text));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Cache && e.kind() != ErrorKind::Io) throw;
    log(LogLevel::Warn, "kernel cache: tuning results unreadable ({})", e.what());
  }
  return std::nullopt;
}

bool store_tuning(const RuntimeOptions& options, const cache::Tuning& t) {
  std::optional<cache::Cache> c = open_cache(options);
  if (!c) return false;
  try {
    c->publish_tuning(t);
    return true;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Cache && e.kind() != ErrorKind::Io) throw;
    log(LogLevel::Warn, "kernel cache: tuning result not stored ({})", e.what());
  }
  return false;
}

}  // namespace mpk::rt
