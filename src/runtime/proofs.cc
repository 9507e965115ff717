#include "runtime/proofs.h"

#include <map>
#include <mutex>
#include <set>

#include "base/error.h"
#include "base/log.h"
#include "ir/layouts.h"
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

}  // namespace

std::vector<superopt::ProofRecord> plan_proofs(const std::vector<MkTask>& tasks) {
  std::set<int> counts;
  for (const MkTask& t : tasks)
    if (t.kind == MPK_MK_ATTENTION) counts.insert(t.num_chunks);
  std::vector<superopt::ProofRecord> records;
  for (int parts : counts) records.push_back(even_split_proof(parts));
  return records;
}

std::string prove_plan(const std::vector<MkTask>& tasks) {
  std::string json = "[";
  for (const superopt::ProofRecord& r : plan_proofs(tasks)) {
    for (const superopt::Obligation& o : r.obligations)
      MPK_CHECK(o.result == "proved", Internal)
          << "megakernel: " << r.subject << ": obligation '" << o.name << "' " << o.result
          << (o.counterexample.empty() ? "" : " (" + o.counterexample + ")")
          << "; the kernel is not run";
    if (json.size() > 1) json += ',';
    json += r.to_json();
  }
  return json + "]";
}

}  // namespace mpk::rt
