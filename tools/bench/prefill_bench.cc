// Time to first token on the GPU: mpk's tensor-core prefill of each prompt, repeated on one
// session (reset between runs), after warm-up runs. Per prompt: the host time of the whole
// prefill call (p50/p95/p99: the time to first token, the prefill's argmax being the first
// token), the device time of its chunks (CUDA events), the host's time to enqueue their
// launches, the achieved TFLOP/s, and the last
// position's logits (fp32, raw) for an accuracy check elsewhere; prompts up to
// --steps-max-tokens also once through the decode step (the exact fp32 path), with the
// relative L2 between the two paths' logits.
//
//   prefill_bench --model DIR --prompts FILE [--repeat 10] [--warmup 2] [--steps-max-tokens 1024]
//                 [--logits-dir DIR] [--out FILE] [--profile]
// --profile: one more prefill per prompt with an event after each step: device ms by step
// (projections by output, attention, norms, ...), printed and kept as "profile_ms".
// FILE: a JSON object {"<name>": [ids...], ...}.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/percentile.h"
#include "runtime/gpu_backend.h"
#include "runtime/runtime.h"

using namespace mpk;
using Clock = std::chrono::steady_clock;

namespace {

nlohmann::json summary(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return {{"p50", percentile(v, 50)}, {"p95", percentile(v, 95)}, {"p99", percentile(v, 99)},
          {"mean", sum / double(v.size())}, {"min", *std::min_element(v.begin(), v.end())},
          {"max", *std::max_element(v.begin(), v.end())}, {"n", v.size()}, {"samples", v}};
}

// Multiply-adds x2 of one prefill: every projection (LM head for the last row only) and
// causal attention (QK^T and PV over keys [0, t] for row t).
double prefill_flops(const model::Config& c, double n) {
  const double h = c.hidden_size, q = double(c.num_heads) * c.head_dim,
               kv = double(c.num_kv_heads) * c.head_dim, in = c.intermediate_size;
  const double per_token = h * (q + 2 * kv) + q * h + 3 * h * in;
  const double attn = 2.0 * double(c.num_heads) * c.head_dim * n * (n + 1) / 2;  // 2 matmuls
  return 2 * (per_token * n * c.num_layers + attn * c.num_layers + h * double(c.vocab_size));
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"prefill_bench: mpk's time to first token on the GPU"};
  std::string model_dir, prompts_file, logits_dir, out;
  int repeat = 10, warmup = 2;
  size_t steps_max = 1024;
  app.add_option("--model", model_dir, "model directory")->required();
  app.add_option("--prompts", prompts_file, "JSON object: name -> token ids")->required();
  app.add_option("--repeat", repeat, "timed prefills per prompt")->check(CLI::Range(1, 1000));
  app.add_option("--warmup", warmup, "untimed prefills per prompt first")->check(CLI::Range(0, 100));
  app.add_option("--steps-max-tokens", steps_max, "also run prompts up to this long through the decode step");
  app.add_option("--logits-dir", logits_dir, "write <name>.f32 (the last position's logits) here");
  app.add_option("--out", out, "JSON results");
  bool profile = false;
  app.add_flag("--profile", profile, "device time by step kind, from one more prefill");
  CLI11_PARSE(app, argc, argv);
  try {
    std::ifstream pf(prompts_file);
    if (!pf) throw std::runtime_error("cannot read " + prompts_file);
    const nlohmann::json prompts = nlohmann::json::parse(pf);
    rt::RuntimeOptions ro = rt::resolve_environment({});
    const auto t0 = Clock::now();
    auto m = rt::LoadedModel::load(ro, model_dir, rt::Backend::Gpu);
    const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!m->gpu()->prefill_kernels()) throw std::runtime_error("no tensor-core prefill: " + m->gpu()->prefill_why());
    nlohmann::json res = {{"model", model_dir}, {"load_ms", load_ms}, {"repeat", repeat}, {"warmup", warmup},
                          {"prompts", nlohmann::json::object()}};
    for (const auto& [name, ids_json] : prompts.items()) {
      const std::vector<int32_t> ids = ids_json.get<std::vector<int32_t>>();
      rt::SessionOptions so;
      so.kv_capacity = ids.size() + 8;
      rt::Session s(m, so);
      std::vector<double> host, device, enqueue;
      for (int r = 0; r < warmup + repeat; ++r) {
        s.reset();
        const auto a = Clock::now();
        s.prefill(ids.data(), ids.size());
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
        if (r < warmup) continue;
        host.push_back(ms);
        double d = 0;
        for (double c : s.step_ms()) d += c;
        device.push_back(d);
        // The host's enqueue of the launches: where it is as long as their device time, the
        // device waited on the host.
        double e = 0;
        for (double c : s.prefill_enqueue_ms()) e += c;
        enqueue.push_back(e);
      }
      const std::vector<float> logits = s.logits();
      const double flops = prefill_flops(m->config(), double(ids.size()));
      nlohmann::json e = {{"tokens", ids.size()}, {"chunks", s.step_ms().size()},
                          {"ttft_ms", summary(host)}, {"device_ms", summary(device)},
                          {"enqueue_ms", summary(enqueue)},
                          {"tflops_at_p50", flops / (percentile(host, 50) * 1e-3) / 1e12},
                          {"first_token", std::max_element(logits.begin(), logits.end()) - logits.begin()}};
      if (!logits_dir.empty()) {
        const std::string path = logits_dir + "/" + name + ".f32";
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * 4));
        if (!f) throw std::runtime_error("cannot write " + path);
        e["logits"] = path;
      }
      if (profile) {
        rt::SessionOptions po = so;
        po.profile = true;
        rt::GpuSession ps(m->gpu(), po, m->stats());
        ps.prefill(ids.data(), ids.size());
        nlohmann::json pj = nlohmann::json::object();
        std::printf("%s: device ms by step:", name.c_str());
        for (const auto& [label, ms] : ps.prefill_profile()) {
          pj[label] = ms;
          std::printf(" %s %.3f", label.c_str(), ms);
        }
        std::printf("\n");
        e["profile_ms"] = pj;
      }
      if (ids.size() <= steps_max) {
        try {  // a failure here keeps the timings above
          rt::SessionOptions st = so;
          st.tensor_core_prefill = false;
          rt::Session ss(m, st);
          const auto a = Clock::now();
          ss.prefill(ids.data(), ids.size());
          e["decode_step_prefill_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
          e["rel_l2_vs_decode_step"] = rel_l2(logits, ss.logits());
        } catch (const std::exception& x) {
          e["decode_step_error"] = x.what();
        }
      }
      std::printf("%-8s %5zu tokens: TTFT p50 %.3f ms (p95 %.3f, p99 %.3f; device %.3f ms, %zu chunk(s)), %.1f TFLOP/s",
                  name.c_str(), ids.size(), double(e["ttft_ms"]["p50"]), double(e["ttft_ms"]["p95"]),
                  double(e["ttft_ms"]["p99"]), double(e["device_ms"]["p50"]), s.step_ms().size(),
                  double(e["tflops_at_p50"]));
      std::printf("; host enqueue p50 %.3f ms", double(e["enqueue_ms"]["p50"]));
      if (e.contains("rel_l2_vs_decode_step"))
        std::printf("; decode-step prefill %.1f ms, rel L2 between them %.2e", double(e["decode_step_prefill_ms"]),
                    double(e["rel_l2_vs_decode_step"]));
      std::printf("\n");
      std::fflush(stdout);
      res["prompts"][name] = e;
    }
    if (!out.empty()) {
      std::ofstream f(out);
      f << res.dump(1) << "\n";
      if (!f) throw std::runtime_error("cannot write " + out);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prefill_bench: %s\n", e.what());
    return 1;
  }
}
