// mpk-run: load a model directory, prefill a prompt, decode greedily, report tokens and
// per-token latency. Uses the public C API (plus the IR for --dump-graph).
#include <mpk/mpk.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "base/error.h"
#include "base/percentile.h"
#include "base/token_ids.h"
#include "ir/builder.h"
#include "ir/graph.h"
#include "model/model.h"

namespace {

using Clock = std::chrono::steady_clock;
using mpk::percentile;

std::vector<int32_t> parse_ids(const std::string& text) {
  std::optional<std::vector<int32_t>> ids = mpk::parse_token_ids(text);
  if (ids) return *ids;
  // Name the first item that is not an id (the whole list may be long).
  std::string bad = text;
  for (size_t pos = 0;; pos = text.find(',', pos) + 1) {
    const std::string item = text.substr(pos, text.find(',', pos) - pos);
    if (!mpk::parse_token_ids(item)) {
      bad = item.size() > 40 ? item.substr(0, 40) + "..." : item;
      break;
    }
    if (text.find(',', pos) == std::string::npos) break;
  }
  throw CLI::ValidationError("--prompt-ids",
                             "'" + bad + "' is not a token id (comma-separated non-negative integers)");
}

const char* backend_str(mpk_backend b) {
  switch (b) {
    case MPK_BACKEND_AUTO: return "auto";
    case MPK_BACKEND_GPU: return "gpu";
    case MPK_BACKEND_REFERENCE: return "reference";
  }
  return "?";
}

// Progress of the long phases on stderr when it is a terminal (and not with --json): one line
// per phase, its percentage while it runs, its time when it ends.
struct Progress {
  bool on = false;
  std::string phase;
  Clock::time_point t0;
  int pct = -1;
};

void on_progress(const char* phase, uint64_t done, uint64_t total, void* user) {
  auto* p = static_cast<Progress*>(user);
  if (!p->on) return;
  if (p->phase != phase) {
    p->phase = phase;
    p->t0 = Clock::now();
    p->pct = -1;
    std::fprintf(stderr, "mpk-run: %s...", phase);
  }
  if (total > 0 && done == total) {
    const double s = std::chrono::duration<double>(Clock::now() - p->t0).count();
    std::fprintf(stderr, "\rmpk-run: %s: %.2f s   \n", phase, s);
    p->phase.clear();
  } else if (total > 0) {
    const int pct = int(100.0 * double(done) / double(total));
    if (pct != p->pct) std::fprintf(stderr, "\rmpk-run: %s... %d%%", phase, pct);
    p->pct = pct;
  }
  std::fflush(stderr);
}

// A call refused as an invalid argument got it from this command line (a prompt id past the
// vocabulary, a KV capacity past the model's positions): a usage error, exit 2.
int die(const char* what, mpk_status s) {
  std::fprintf(stderr, "mpk-run: %s failed: %s: %s\n", what, mpk_status_name(s), mpk_last_error());
  return s == MPK_ERROR_INVALID_ARGUMENT ? 2 : 1;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"mpk-run: decoding of a Hugging Face decoder model with mpk (greedy, or sampled)"};
  std::string model_dir, prompt_text, prompt_str, backend = "auto", logits_out;
  // Signed, range-checked: "-1" must be refused, not wrapped to 2^64 - 1.
  int64_t max_new_arg = 16, kv_capacity_arg = 0, steps_arg = 1;
  int threads = 0;
  bool json = false, info = false, dump_graph = false, ignore_eos = false, check = false;
  double temperature = 0, top_p = 1;
  int64_t top_k = 0;
  uint64_t seed = 0;
  app.add_option("--model", model_dir, "model directory (config.json + safetensors)")->required();
  auto* ids_opt = app.add_option("--prompt-ids", prompt_text, "prompt token ids, comma-separated (e.g. 5,17,300)");
  app.add_option("--prompt", prompt_str,
                 "prompt text, encoded with the model directory's tokenizer.json; the generated "
                 "text is streamed to stdout as it is produced")
      ->excludes(ids_opt);
  app.add_option("--max-new-tokens", max_new_arg, "tokens to generate")
      ->check(CLI::Range(int64_t(0), int64_t(INT32_MAX)))
      ->capture_default_str();
  app.add_option("--backend", backend, "auto | gpu | reference")
      ->check(CLI::IsMember({"auto", "gpu", "reference"}))
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object");
  app.add_option("--logits-out", logits_out,
                 "write float32 rows of vocab logits, one per generated token");
  app.add_flag("--info", info, "print model information");
  app.add_flag("--dump-graph", dump_graph, "print the model's graph IR");
  app.add_option("--kv-capacity", kv_capacity_arg,
                 "KV-cache capacity in tokens (default: prompt + new tokens)")
      ->check(CLI::Range(int64_t(0), int64_t(INT32_MAX)));
  app.add_option("--threads", threads, "host threads for the reference backend (0: all)")
      ->check(CLI::Range(0, 4096));
  app.add_flag("--ignore-eos", ignore_eos, "keep generating after an end-of-sequence token");
  app.add_option("--temperature", temperature, "sampling temperature (0: greedy, the default)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--top-k", top_k, "sample among the k most likely tokens (0: all)")
      ->check(CLI::Range(int64_t(0), int64_t(INT32_MAX)));
  app.add_option("--top-p", top_p, "sample within the smallest set of probability >= p (1: all)")
      ->check(CLI::Range(1e-6, 1.0));
  app.add_option("--seed", seed, "sampling seed (the same seed gives the same tokens)");
  app.add_flag("--check", check, "scan every weight for NaN/Inf at load");
  bool exact_prefill = false;
  app.add_flag("--exact-prefill", exact_prefill,
               "GPU: prefill through the decode step (fp32 activations) instead of the tensor cores");
  std::string profile_out;
  app.add_option("--steps-per-launch", steps_arg,
                 "GPU: decode steps per megakernel launch (1: one launch per token)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)))
      ->capture_default_str();
  std::string tune_policy = "cache-only";
  double tune_budget = 120;
  app.add_option("--tune-policy", tune_policy,
                 "GPU: the megakernel's parameters: cache-only (a tuning result from the kernel "
                 "cache, else the defaults), defaults-only, tune-on-miss (search at load without "
                 "a result, within --tune-budget)")
      ->check(CLI::IsMember({"cache-only", "defaults-only", "tune-on-miss"}))
      ->capture_default_str();
  app.add_option("--tune-budget", tune_budget, "seconds tune-on-miss may search")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--profile-out", profile_out,
                 "GPU: write per-task device timers of the last decode step (JSON) to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and succeeds; every usage error exits 2 (CLI11's own codes are 100+).
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  // CLI11's Range lets NaN through: every comparison with it is false.
  for (const auto& [name, v] : {std::pair{"--temperature", temperature}, {"--top-p", top_p},
                                {"--tune-budget", tune_budget}})
    if (std::isnan(v)) {
      std::fprintf(stderr, "mpk-run: %s: not a number\n", name);
      return 2;
    }
  const size_t max_new = size_t(max_new_arg), steps_per_launch = size_t(steps_arg);
  size_t kv_capacity = size_t(kv_capacity_arg);
  if (steps_per_launch > 1 && !logits_out.empty()) {
    std::fprintf(stderr, "mpk-run: --logits-out needs every step's logits: use --steps-per-launch 1\n");
    return 2;
  }

  std::vector<int32_t> prompt;
  try {
    if (!prompt_text.empty()) prompt = parse_ids(prompt_text);
  } catch (const CLI::Error& e) {
    app.exit(e);
    return 2;
  }
  const bool text_mode = app.count("--prompt") > 0;
  if (prompt.empty() && !text_mode && !info && !dump_graph) {
    std::fprintf(stderr, "mpk-run: --prompt or --prompt-ids is required (unless --info or --dump-graph)\n%s",
                 app.help().c_str());
    return 2;
  }

  nlohmann::json out;
  if (dump_graph) {
    try {
      // Through the loader: the config's sizes are checked against the weights before a graph
      // proportional to them is built.
      auto g = mpk::ir::build(mpk::model::load(model_dir)->config);
      if (json) out["graph"] = nlohmann::json::parse(mpk::ir::to_json(g), nullptr, true, true);
      else std::printf("%s\n", mpk::ir::to_text(g).c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mpk-run: --dump-graph: %s\n", e.what());
      return 1;
    }
    if (prompt.empty() && !text_mode && !info) {  // the graph alone: nothing to load for the GPU
      if (json) std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      return 0;
    }
  }

  Progress progress;
  progress.on = !json && isatty(STDERR_FILENO);
  mpk_runtime_config rc;
  mpk_runtime_config_init(&rc);
  rc.num_threads = threads;
  rc.progress_callback = on_progress;
  rc.progress_user_data = &progress;
  rc.tune_policy = tune_policy == "defaults-only" ? MPK_TUNE_DEFAULTS_ONLY
                   : tune_policy == "tune-on-miss" ? MPK_TUNE_ON_MISS
                                                   : MPK_TUNE_CACHE_ONLY;
  rc.tune_budget_s = tune_budget;
  mpk_runtime* rt = nullptr;
  if (mpk_status s = mpk_runtime_create(&rc, &rt); s != MPK_OK) return die("runtime create", s);

  mpk_model_config mc;
  mpk_model_config_init(&mc);
  mc.validate_weights = check ? 1 : 0;
  mc.backend = backend == "gpu" ? MPK_BACKEND_GPU
               : backend == "reference" ? MPK_BACKEND_REFERENCE
                                        : MPK_BACKEND_AUTO;
  mpk_model* model = nullptr;
  int rc_exit = 0;
  mpk_session* sess = nullptr;
  mpk_model_info mi{};
  mi.struct_size = sizeof(mi);
  std::vector<int32_t> tokens;
  std::vector<double> step_ms, launch_ms, device_ms;
  std::vector<size_t> call_tokens;  // tokens each mpk_session_decode call returned
  double prefill_ms = 0;
  std::FILE* lf = nullptr;
  const std::string logits_part = logits_out + ".part";
  std::string stop_reason = "max_new_tokens";  // or "eos", "kv_cache_full"
  bool failed_tokens = false;  // decode failed: print the tokens it produced before the error
  mpk_stats st{};  // the load's phase times, read right after it
  st.struct_size = sizeof st;
  mpk_tokenizer* tok = nullptr;
  mpk_detokenizer* detok = nullptr;
  std::string generated;  // the generated text (--prompt), special tokens included

  auto run = [&]() -> int {
    if (mpk_status s = mpk_model_load(rt, model_dir.c_str(), &mc, &model); s != MPK_OK)
      return die("model load", s);
    if (mpk_status s = mpk_model_info_get(model, &mi); s != MPK_OK) return die("model info", s);
    if (mpk_status s = mpk_model_stats(model, &st); s != MPK_OK) return die("model stats", s);
    if (mc.backend == MPK_BACKEND_AUTO && mi.backend == MPK_BACKEND_REFERENCE)
      std::fprintf(stderr,
                   "mpk-run: no usable CUDA GPU for this model here: running the CPU reference (fp32)\n");
    if (info) {
      nlohmann::json j = {{"architecture", mi.architecture}, {"layers", mi.num_layers},
                          {"hidden_size", mi.hidden_size}, {"intermediate_size", mi.intermediate_size},
                          {"heads", mi.num_heads}, {"kv_heads", mi.num_kv_heads},
                          {"head_dim", mi.head_dim}, {"vocab_size", mi.vocab_size},
                          {"max_position_embeddings", mi.max_position_embeddings},
                          {"tied_embeddings", bool(mi.tied_embeddings)},
                          {"dtype", mi.dtype == MPK_DTYPE_F32 ? "f32" : mi.dtype == MPK_DTYPE_F16 ? "f16" : "bf16"},
                          {"parameters", mi.num_parameters}, {"backend", backend_str(mi.backend)}};
      if (json) {
        out["info"] = j;
      } else {
        for (auto& [k, v] : j.items()) std::printf("%-24s %s\n", k.c_str(), v.dump().c_str());
      }
    }
    if (text_mode) {
      if (mpk_status s = mpk_model_tokenizer(model, &tok); s != MPK_OK) return die("tokenizer", s);
      size_t n = 0;
      mpk_status s = mpk_tokenizer_encode(tok, prompt_str.data(), prompt_str.size(), 1, nullptr, 0, &n);
      if (s != MPK_OK && s != MPK_ERROR_CAPACITY) return die("tokenize", s);
      prompt.resize(n);
      if ((s = mpk_tokenizer_encode(tok, prompt_str.data(), prompt_str.size(), 1, prompt.data(), n, &n)) != MPK_OK)
        return die("tokenize", s);
      if (prompt.empty()) {
        std::fprintf(stderr, "mpk-run: the prompt encodes to no tokens\n");
        return 2;
      }
      if (mpk_status s2 = mpk_detokenizer_create(tok, 0, &detok); s2 != MPK_OK) return die("detokenizer", s2);
    }
    if (prompt.empty()) return 0;

    mpk_session_config sc;
    mpk_session_config_init(&sc);
    if (kv_capacity == 0) {
      // Prompt + new tokens, saturating, and never above what the model supports.
      const size_t limit = mi.max_position_embeddings > 0 ? size_t(mi.max_position_embeddings)
                                                          : SIZE_MAX;
      const size_t want = max_new >= limit ? limit : prompt.size() + max_new + 1;
      kv_capacity = std::min(want, limit);
    }
    if (!profile_out.empty() && mi.backend != MPK_BACKEND_GPU) {
      std::fprintf(stderr, "mpk-run: --profile-out needs the GPU backend (the model runs on %s)\n",
                   backend_str(mi.backend));
      return 2;
    }
    sc.kv_capacity = kv_capacity;
    sc.steps_per_launch = steps_per_launch;
    sc.profile = profile_out.empty() ? 0 : 1;
    sc.exact_prefill = exact_prefill ? 1 : 0;
    if (mpk_status s = mpk_session_create(model, &sc, &sess); s != MPK_OK)
      return die("session create", s);
    mpk_sampling_config samp;
    mpk_sampling_config_init(&samp);
    samp.temperature = float(temperature);
    samp.top_k = int32_t(top_k);
    samp.top_p = float(top_p);
    samp.seed = seed;
    if (mpk_status s = mpk_session_set_sampling(sess, &samp); s != MPK_OK) return die("sampling", s);
    if (!logits_out.empty()) {
      // Written beside the file and renamed over it at the end: a run that fails leaves any
      // earlier file as it was.
      lf = std::fopen(logits_part.c_str(), "wb");
      if (!lf) {
        std::fprintf(stderr, "mpk-run: cannot open %s for writing\n", logits_part.c_str());
        return 1;
      }
    }
    auto t0 = Clock::now();
    if (mpk_status s = mpk_session_prefill(sess, prompt.data(), prompt.size()); s != MPK_OK)
      return die("prefill", s);
    prefill_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    // Device step times exist on the GPU backend only.
    auto device_steps = [&] {
      const double* t = nullptr;
      size_t n = 0;
      if (mpk_session_step_times(sess, &t, &n) == MPK_OK) device_ms.insert(device_ms.end(), t, t + n);
    };
    size_t num_eos = 0;  // every id the session stops at (mpk_model_info holds 8)
    if (mpk_status s = mpk_model_eos_token_ids(model, nullptr, 0, &num_eos); s != MPK_OK) return die("model", s);
    std::vector<int32_t> eos_ids(num_eos);
    if (mpk_status s = mpk_model_eos_token_ids(model, eos_ids.data(), eos_ids.size(), &num_eos); s != MPK_OK)
      return die("model", s);
    const int32_t* eos = eos_ids.data();
    const int32_t* eos_end = eos + eos_ids.size();
    std::vector<float> row;  // the logits that choose the next token, written once it is chosen
    while (tokens.size() < max_new) {
      if (lf) {
        const float* l = nullptr;
        size_t v = 0;
        if (mpk_status s = mpk_session_logits(sess, &l, &v); s != MPK_OK) return die("logits", s);
        row.assign(l, l + v);
      }
      const size_t want = std::min(steps_per_launch, max_new - tokens.size());
      std::vector<int32_t> got(want, -1);
      size_t n = 0;
      auto t = Clock::now();
      mpk_status s = mpk_session_decode(sess, want, got.data(), &n);
      launch_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
      // Tokens decoded before a failure are kept and printed with the reason.
      tokens.insert(tokens.end(), got.begin(), got.begin() + long(std::min(n, want)));
      if (lf && n > 0 && std::fwrite(row.data(), sizeof(float), row.size(), lf) != row.size()) {
        std::fprintf(stderr, "mpk-run: write to %s failed\n", logits_part.c_str());
        return 1;
      }
      for (size_t k = 0; detok && k < std::min(n, want); ++k) {
        const char* piece = nullptr;
        size_t len = 0;
        if (mpk_status s2 = mpk_detokenizer_push(detok, got[k], &piece, &len); s2 != MPK_OK)
          return die("detokenize", s2);
        generated.append(piece, len);
        if (!json) {
          std::fwrite(piece, 1, len, stdout);
          std::fflush(stdout);
        }
      }
      if (s == MPK_ERROR_CAPACITY) {
        stop_reason = "kv_cache_full";
        std::fprintf(stderr, "mpk-run: stopped after %zu tokens: %s\n", tokens.size(), mpk_last_error());
        launch_ms.pop_back();
        break;
      }
      if (s != MPK_OK) {
        failed_tokens = true;
        return die("decode", s);
      }
      call_tokens.push_back(n);
      device_steps();
      if (!ignore_eos && n > 0 && std::find(eos, eos_end, tokens.back()) != eos_end) {
        stop_reason = "eos";
        break;
      }
    }
    if (detok) {
      const char* piece = nullptr;
      size_t len = 0;
      if (mpk_status s = mpk_detokenizer_finish(detok, &piece, &len); s != MPK_OK) return die("detokenize", s);
      generated.append(piece, len);
      if (!json) std::printf("%.*s\n", int(len), piece);
    }
    if (!profile_out.empty()) {
      const char* report = nullptr;
      if (mpk_status s = mpk_session_profile(sess, &report); s != MPK_OK) return die("profile", s);
      std::FILE* pf = std::fopen(profile_out.c_str(), "w");
      if (!pf || std::fputs(report, pf) < 0 || std::fclose(pf) != 0) {
        std::fprintf(stderr, "mpk-run: cannot write %s\n", profile_out.c_str());
        return 1;
      }
    }
    // Per token: the host time of each one-token decode, or in multi-step mode (one launch for
    // many tokens) the device clock of each step.
    if (steps_per_launch == 1) {
      step_ms = launch_ms;
    } else if (!device_ms.empty()) {
      step_ms = device_ms;
    } else {  // no device clock (reference backend): each call's time over its tokens
      for (size_t c = 0; c < launch_ms.size(); ++c)
        for (size_t k = 0; k < call_tokens[c]; ++k) step_ms.push_back(launch_ms[c] / double(call_tokens[c]));
    }
    return 0;
  };
  rc_exit = run();
  if (lf && std::fclose(lf) != 0 && rc_exit == 0) {
    std::fprintf(stderr, "mpk-run: closing %s failed\n", logits_part.c_str());
    rc_exit = 1;
  }
  if (lf && rc_exit == 0 && std::rename(logits_part.c_str(), logits_out.c_str()) != 0) {
    std::fprintf(stderr, "mpk-run: cannot rename %s to %s\n", logits_part.c_str(), logits_out.c_str());
    rc_exit = 1;
  }
  if (lf && rc_exit != 0) std::remove(logits_part.c_str());
  mpk_detokenizer_destroy(detok);
  mpk_stats fin{};  // after the run: the host fallback's time
  fin.struct_size = sizeof fin;
  if (mpk_model_stats(model, &fin) != MPK_OK) fin = st;
  mpk_tokenizer_destroy(tok);
  mpk_session_destroy(sess);
  mpk_model_destroy(model);
  mpk_runtime_destroy(rt);
  if (rc_exit != 0) {
    if (failed_tokens) {
      std::string ids;
      for (size_t i = 0; i < tokens.size(); ++i) ids += (i ? "," : "") + std::to_string(tokens[i]);
      std::fprintf(stderr, "mpk-run: tokens decoded before the failure: %s\n", ids.c_str());
    }
    return rc_exit;
  }

  if (!prompt.empty()) {
    auto summary = [](const std::vector<double>& v) {
      double sum = 0;
      for (double x : v) sum += x;
      return nlohmann::json{{"p50", percentile(v, 50)}, {"p95", percentile(v, 95)},
                            {"p99", percentile(v, 99)},
                            {"mean", v.empty() ? 0 : sum / double(v.size())}, {"n", v.size()}};
    };
    nlohmann::json lat = summary(step_ms);
    if (json) {
      out["model"] = model_dir;
      out["backend"] = backend_str(mi.backend);
      out["prompt_ids"] = prompt;
      out["tokens"] = tokens;
      out["phases_ms"] = {{"read", st.read_ms}, {"plan", st.plan_ms}, {"prove", st.prove_ms},
                          {"kernel", st.kernel_ms}, {"upload", st.upload_ms}, {"load", st.load_ms},
                          {"tune", st.tune_ms}, {"prefill", prefill_ms}};
      out["tuning"] = {{"policy", tune_policy}, {"tuned", bool(st.tuned)},
                       {"candidates_timed", st.tune_candidates},
                       {"changed_params", st.tune_changed_params},
                       {"stages_changed", st.tune_stages_changed},
                       {"stages_searched", st.tune_stages_searched}};
      // Ops no megakernel variant runs, on the host between the kernel's launches (on the
      // reference backend every op runs there: no copies).
      out["host_fallback"] = {{"ops_per_step", fin.host_fallback_ops},
                              {"bytes_per_step", fin.host_fallback_bytes},
                              {"ms", fin.host_fallback_ms}};
      if (text_mode) out["text"] = generated;
      out["stop_reason"] = stop_reason;
      out["prefill_ms"] = prefill_ms;
      out["latency_ms"] = lat;
      out["steps_per_launch"] = steps_per_launch;
      out["launch_ms"] = summary(launch_ms);
      if (!device_ms.empty()) out["device_step_ms"] = summary(device_ms);
      out["timer"] = steps_per_launch == 1 ? "host steady_clock around each mpk_session_decode(1)"
                     : !device_ms.empty() && fin.host_fallback_ops > 0 && mi.backend == MPK_BACKEND_GPU
                         ? "host steady_clock per decode step (host-fallback ops: one step per launch "
                           "series, mpk_session_step_times)"
                     : !device_ms.empty()
                         ? "device globaltimer per decode step (multi-step launches)"
                         : "host steady_clock around each mpk_session_decode(N), over its tokens";
    } else {
      // With --prompt the text went to stdout as it came; the report goes to stderr.
      std::FILE* rep = text_mode ? stderr : stdout;
      std::string ids;
      for (size_t i = 0; i < tokens.size(); ++i) ids += (i ? "," : "") + std::to_string(tokens[i]);
      std::fprintf(rep, "tokens: %s\n", ids.c_str());
      std::fprintf(rep, "stopped: %s\n", stop_reason.c_str());
      std::fprintf(rep, "backend: %s, prompt %zu tokens, prefill %.3f ms\n", backend_str(mi.backend),
                   prompt.size(), prefill_ms);
      std::fprintf(rep, "decode latency per token (ms): p50 %.3f  p95 %.3f  p99 %.3f  (%zu tokens)\n",
                  lat["p50"].get<double>(), lat["p95"].get<double>(), lat["p99"].get<double>(),
                  tokens.size());
    }
  }
  // A path that is not UTF-8 is replaced, not a reason to fail after a successful run.
  if (json)
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run_cli(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpk-run: %s\n", e.what());
    return 1;
  }
}
