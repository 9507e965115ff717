// mpk-tune candidates: enumerate -> static filters -> prove -> compile, the part of the
// superoptimizer's search that needs no GPU.
#include "candidates.h"
#include "report.h"

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <set>
#include <vector>

#include "base/error.h"
#include "config_plan.h"
#include "cuda/nvrtc.h"
#include "runtime/megakernel.h"
#include "runtime/proofs.h"

namespace mpk::tune {
namespace {

// Shared memory one block may opt into, by architecture (bytes); 0 when not known here.
int64_t smem_limit(const std::string& arch) {
  const std::string cc = arch.substr(arch.find('_') + 1);
  const int n = std::atoi(cc.c_str());
  if (n == 90 || n == 100 || n == 103) return 232448;
  if (n == 80 || n == 87) return 166912;
  if (n == 86 || n == 89 || n == 120) return 101376;
  return 0;
}

struct Candidate {
  std::string change;  // "defaults" or "name=value,..."
  rt::MegakernelParams params;
  std::string verdict = "pass";
  int64_t smem = 0;
  int obligations = 0;
  double prove_ms = 0, compile_ms = 0;
  cuda::PtxasInfo ptxas{};
};

std::vector<Candidate> enumerate(const rt::MegakernelParams& defaults, uint64_t seed) {
  std::vector<Candidate> out{{"defaults", defaults}};
  std::set<std::string> seen{rt::to_json(defaults)};  // a change the defaults already have is none
  auto add = [&](const std::string& change) {
    Candidate c{change, defaults};
    try {
      c.params = rt::parse_params(change, defaults);
    } catch (const Error& e) {
      c.verdict = std::string("invalid: ") + e.what();
    }
    if (seen.insert(c.verdict == "pass" ? rt::to_json(c.params) : c.verdict).second) out.push_back(c);
  };
  for (const rt::ParamAxis& a : rt::search_axes())
    for (const std::string& change : a.changes) add(change);
  std::mt19937_64 rng(seed);
  std::shuffle(out.begin() + 1, out.end(), rng);
  return out;
}

void check(Candidate& c, const ConfigPlan& p, const std::string& arch) {
  if (c.verdict != "pass") return;
  const auto refused = rt::refused_tasks(p.graph, p.plan, p.mem, c.params);
  if (!refused.empty()) {
    c.verdict = "cannot implement: " + refused.front().second;
    return;
  }
  const rt::MegakernelTables tables = rt::build_tables(p.graph, p.plan, p.mem, rt::SegmentBases{}, c.params);
  c.smem = tables.dynamic_smem;
  const auto proofs = rt::plan_proofs(tables.device_tasks(), c.params);
  for (const rt::PlanProof& pr : proofs) {
    c.obligations += int(pr.record.obligations.size());
    for (const superopt::Obligation& o : pr.record.obligations) {
      c.prove_ms += o.ms;
      if (o.result != "proved" && c.verdict == "pass") c.verdict = "not proved: " + pr.use + ": " + o.name;
    }
  }
  if (c.verdict != "pass") return;
  cuda::CompileRequest r;
  r.source = rt::megakernel_source(c.params, p.config.torch_dtype);
  r.arch = arch;
  r.options = rt::megakernel_compile_options();  // with ptxas's report
  const cuda::CompileResult res = cuda::compile(r);
  c.compile_ms = res.compile_ms;
  c.ptxas = cuda::parse_ptxas_info(res.log, rt::megakernel_entry(p.config.torch_dtype));
  const int64_t limit = smem_limit(arch);
  if (limit > 0 && c.smem + std::max(c.ptxas.static_smem_bytes, 0) > limit)
    c.verdict = fmt::format("shared memory {} + {} bytes > {}", c.smem, c.ptxas.static_smem_bytes, limit);
  else if (c.ptxas.spill_store_bytes > 0)
    c.verdict = fmt::format("spills {} bytes (registers capped at {})", c.ptxas.spill_store_bytes, c.ptxas.registers);
}

}  // namespace

int cmd_candidates(std::ostream& out, const std::filesystem::path& model_dir, int workers,
                   int64_t kv_capacity, const std::string& arch, uint64_t seed, size_t max,
                   bool json) {
  const ConfigPlan p = plan_from_config(model_dir, workers, kv_capacity);
  std::vector<Candidate> cands = enumerate(p.params, seed);
  if (max > 0 && cands.size() > max) cands.resize(max);
  // A decomposition candidate (KV chunks, the merge's task, tiles, fold_down) runs its own plan:
  // it is checked against that one, made once here.
  std::vector<std::unique_ptr<ConfigPlan>> own(cands.size());
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].verdict == "pass" && !rt::same_plan(cands[i].params, rt::MegakernelParams{}))
      try {
        own[i] = std::make_unique<ConfigPlan>(plan_from_config(model_dir, workers, kv_capacity, cands[i].params));
      } catch (const Error& e) {
        cands[i].verdict = std::string("error: ") + e.what();
      }
  std::vector<std::string> errors(cands.size());
  tbb::parallel_for(size_t(0), cands.size(), [&](size_t i) {
    try {
      check(cands[i], own[i] ? *own[i] : p, arch);
    } catch (const Error& e) {
      cands[i].verdict = std::string("error: ") + e.what();
    }
  });
  size_t passed = 0;
  nlohmann::json j = {{"model", model_dir.string()}, {"arch", arch}, {"workers", workers},
                      {"seed", seed}, {"defaults", nlohmann::json::parse(rt::to_json(p.params))},
                      {"candidates", nlohmann::json::array()}};
  if (!json)
    out << fmt::format("{}: {} candidates around the defaults {} (arch {}, {} workers, seed {})\n",
                       model_dir.string(), cands.size(), rt::to_json(p.params), arch, workers, seed)
        << fmt::format("  {:<40} {:>8} {:>5} {:>6} {:>6} {:>9} {:>9}  {}\n", "change", "smem",
                       "regs", "spill", "proofs", "Z3 ms", "nvrtc ms", "verdict");
  for (const Candidate& c : cands) {
    passed += c.verdict == "pass";
    j["candidates"].push_back({{"change", c.change}, {"params", nlohmann::json::parse(rt::to_json(c.params))},
                               {"dynamic_smem", c.smem}, {"registers", c.ptxas.registers},
                               {"spill_store_bytes", c.ptxas.spill_store_bytes},
                               {"obligations", c.obligations}, {"prove_ms", c.prove_ms},
                               {"compile_ms", c.compile_ms}, {"verdict", c.verdict}});
    if (!json)
      out << fmt::format("  {:<40} {:>8} {:>5} {:>6} {:>6} {:>9.0f} {:>9.0f}  {}\n", c.change, c.smem,
                         c.ptxas.registers, c.ptxas.spill_store_bytes, c.obligations, c.prove_ms,
                         c.compile_ms, c.verdict);
  }
  j["passed"] = passed;
  if (json)
    out << json_text(j) << '\n';
  else
    out << fmt::format("{} of {} pass the static filters, proofs and compile; `mpk-tune tune` times them "
                       "on a GPU\n", passed, cands.size());
  return cands.front().verdict == "pass" ? 0 : 1;
}

}  // namespace mpk::tune
