// mpk-tune prove: the proofs a model's megakernel plan, the top-k draw and, for bf16 models,
// the tensor-core prefill rest on, without a GPU or weights.
#include "prove.h"
#include "report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <ostream>

#include "config_plan.h"
#include "runtime/megakernel.h"
#include "runtime/prefill.h"
#include "runtime/proofs.h"

namespace mpk::tune {

int cmd_prove(std::ostream& out, const std::filesystem::path& model_dir, int workers,
              int64_t kv_capacity, bool json) {
  const ConfigPlan p = plan_from_config(model_dir, workers, kv_capacity);
  const int64_t cap = p.kv_capacity;
  const auto tasks = rt::build_tables(p.graph, p.plan, p.mem, rt::SegmentBases{}, p.params).device_tasks();
  std::vector<rt::PlanProof> records = rt::plan_proofs(tasks, p.params);
  int64_t num_logits = 0;
  for (const MkTask& t : tasks)
    if (t.kind == MPK_MK_ARGMAX) num_logits = t.num_logits;
  const auto draws = rt::draw_proofs(p.params, num_logits);  // the kernel a top-k sampling session runs
  records.insert(records.end(), draws.begin(), draws.end());
  // The tensor-core prefill's formulas, when the model takes it (bf16 weights).
  const std::string prefill_why = rt::prefill_unsupported(p.graph, p.graph.weight_dtype);
  if (prefill_why.empty()) {
    const auto pf = rt::prefill_proofs(p.graph, workers);
    records.insert(records.end(), pf.begin(), pf.end());
  }
  bool all = !records.empty();
  double total = 0;
  nlohmann::json j = {{"model", model_dir.string()}, {"workers", workers}, {"kv_capacity", cap},
                      {"tasks", tasks.size()}, {"records", nlohmann::json::array()}};
  j["prefill"] = prefill_why.empty() ? "tensor cores" : "decode step: " + prefill_why;
  if (!json)
    out << fmt::format("{}: {} tasks on {} workers, KV capacity {}; prefill: {}\n", model_dir.string(),
                       tasks.size(), workers, cap, j["prefill"].get<std::string>());
  for (const rt::PlanProof& p : records) {
    const superopt::ProofRecord& r = p.record;
    all &= r.proved();
    nlohmann::json rec = nlohmann::json::parse(r.to_json());
    rec["use"] = p.use;
    j["records"].push_back(rec);
    if (!json) out << p.use << "\n  " << r.subject << '\n';
    for (const superopt::Obligation& o : r.obligations) {
      total += o.ms;
      if (!json)
        out << fmt::format("    {:<53} {:>8} {:>8.1f} ms{}\n", o.name, o.result, o.ms,
                           o.counterexample.empty() ? "" : "  (" + o.counterexample + ")");
    }
  }
  j["proved"] = all;
  j["total_ms"] = total;
  if (json)
    out << json_text(j) << '\n';
  else
    out << fmt::format("{}: {} record(s), {:.0f} ms in all (Z3 {})\n",
                       all ? "all proved" : "NOT PROVED", records.size(), total,
                       records.empty() ? "-" : records[0].record.z3_version);
  return all ? 0 : 1;
}

}  // namespace mpk::tune
