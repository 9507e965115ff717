#include "runtime/proofs.h"

#include <map>
#include <mutex>
#include <set>

#include "base/error.h"
#include "base/log.h"
#include "ir/layouts.h"
#include "ir/online_softmax.h"
#include "superopt/algebra_prover.h"
#include "superopt/index_prover.h"

namespace mpk::rt {
namespace {

// Every run-time length a KV position (an int) can give.
constexpr int64_t kMaxLen = int64_t(1) << 31;

superopt::ProofRecord even_split_proof(int parts) {
  static std::mutex mu;
  static std::map<int, superopt::ProofRecord> done;
  std::lock_guard<std::mutex> lock(mu);
  auto it = done.find(parts);
  if (it != done.end()) return it->second;
  superopt::ProofRecord r = superopt::prove_even_split(ir::even_split_formula(), kMaxLen, parts);
  double ms = 0;
  for (const superopt::Obligation& o : r.obligations) ms += o.ms;
  log(LogLevel::Debug, "{} in {:.0f} ms: {}", r.subject, ms, r.proved() ? "proved" : "NOT proved");
  return done.emplace(parts, std::move(r)).first->second;
}

superopt::ProofRecord online_softmax_proof() {
  static const superopt::ProofRecord r = [] {
    superopt::ProofRecord p = superopt::prove_online_softmax(ir::online_softmax_formulas());
    log(LogLevel::Debug, "{}: {}", p.subject, p.proved() ? "proved" : "NOT proved");
    return p;
  }();
  return r;
}

}  // namespace

std::vector<PlanProof> plan_proofs(const std::vector<MkTask>& tasks, int max_k_split) {
  std::map<int, std::pair<bool, bool>> uses;  // parts -> (attention chunks, linear K parts)
  for (const MkTask& t : tasks) {
    if (t.kind == MPK_MK_ATTENTION) uses[t.num_chunks].first = true;
    if (t.kind == MPK_MK_LINEAR)
      for (int ks = 1; ks <= max_k_split; ++ks) uses[ks].second = true;
  }
  std::vector<PlanProof> out;
  for (const auto& [parts, u] : uses) {
    std::string use;
    const std::string n = std::to_string(parts), s = parts == 1 ? "" : "s";
    if (u.first) use = "attention: KV length over " + n + " chunk" + s;
    if (u.second) use += std::string(use.empty() ? "" : "; ") + "linear: K over " + n + " part" + s;
    out.push_back({use, even_split_proof(parts)});
  }
  for (const MkTask& t : tasks) {
    if (t.kind != MPK_MK_ATTENTION) continue;
    out.push_back({"attention: online softmax (per-position update, warp combine, chunk merge)",
                   online_softmax_proof()});
    break;
  }
  return out;
}

std::string prove_plan(const std::vector<MkTask>& tasks, int max_k_split) {
  std::string json = "[";
  for (const PlanProof& p : plan_proofs(tasks, max_k_split)) {
    for (const superopt::Obligation& o : p.record.obligations)
      MPK_CHECK(o.result == "proved", Internal)
          << "megakernel: " << p.use << ": " << p.record.subject << ": obligation '" << o.name
          << "' " << o.result << (o.counterexample.empty() ? "" : " (" + o.counterexample + ")")
          << "; the kernel is not run";
    if (json.size() > 1) json += ',';
    json += "{\"use\":\"" + p.use + "\"," + p.record.to_json().substr(1);
  }
  return json + "]";
}

}  // namespace mpk::rt
