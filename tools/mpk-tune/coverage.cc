// mpk-tune coverage: op kind x dtype x arch -> what runs it in the megakernel.
#include "coverage.h"
#include "report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>

#include "base/error.h"
#include "config_plan.h"
#include "runtime/megakernel.h"
#include "runtime/prefill.h"
#include "runtime/variants.h"

namespace mpk::tune {
namespace {

struct Row {
  int ops = 0;
  std::set<std::string> runs_as;  // "linear.r2", ...
  int host = 0;                   // of its ops, those the host fallback runs
  std::string unsupported;        // why nothing runs it
};

}  // namespace

int cmd_coverage(std::ostream& out, const std::filesystem::path& model_dir, int workers,
                 int64_t kv_capacity, const std::string& arch, bool compile, bool json) {
  const ConfigPlan p = plan_from_config(model_dir, workers, kv_capacity);
  const model::Config& cfg = p.config;
  const ir::Graph& g = p.graph;
  const std::vector<rt::Variant> variants = rt::kernel_variants(p.params);

  std::map<std::string, Row> rows;  // by op kind name, in the graph's order of first use
  std::vector<std::string> order;
  std::map<std::string, ir::OpKind> kind_of;
  for (const ir::Op& op : g.ops) {
    const std::string name = ir::op_name(op.kind);
    kind_of.emplace(name, op.kind);
    if (!rows.count(name)) order.push_back(name);
    ++rows[name].ops;
  }
  // Each task's variant, or why the kernel does not run it.
  std::vector<int> variant;  // per task id
  int segments = 0;
  const std::vector<std::pair<int, std::string>> refused =
      rt::refused_tasks(g, p.plan, p.mem, p.params, &variant, &segments);
  std::map<int, std::string> why;
  for (const auto& [id, text] : refused) why[id] = text;
  int host_ops = 0;
  for (const sched::Task& t : p.plan.tasks.tasks) {
    for (const sched::FusedOp& f : t.ops) {
      Row& r = rows[ir::op_name(f.kind)];
      if (why.count(t.id)) {
        if (r.unsupported.empty()) r.unsupported = why[t.id];
      } else if (refused.empty() && variant[size_t(t.id)] < 0) {  // a host task (runtime/host_ops.h)
        ++r.host;
        ++host_ops;
      } else if (refused.empty()) {
        r.runs_as.insert(rt::variant_name(variants.at(size_t(variant[size_t(t.id)]))));
      }
    }
  }
  if (!refused.empty()) segments = 0;  // no kernel is built
  std::string compiled = "not compiled (--compile)";
  if (compile && refused.empty()) {
    const cuda::CompileResult c = rt::compile_megakernel(arch, p.params, cfg.torch_dtype);
    compiled = fmt::format("compiled for {} in {:.1f} s ({} bytes)", arch, c.compile_ms / 1e3, c.cubin.size());
  }

  int uncovered = 0, unsupported = 0;  // ops that do not run; of them, those nothing runs
  // Prompts: the tensor-core prefill's kernels, or the decode step (and why).
  const std::string prefill_why = rt::prefill_unsupported(g, cfg.torch_dtype);
  const std::string prefill = prefill_why.empty() ? "tensor cores" : "decode step: " + prefill_why;
  nlohmann::json j = {{"model", model_dir.string()}, {"dtype", dtype_name(cfg.torch_dtype)},
                      {"arch", arch}, {"workers", workers}, {"kernel", compiled},
                      {"host_fallback_ops", host_ops}, {"segments", segments}, {"prefill", prefill},
                      {"ops", nlohmann::json::array()}};
  if (!json)
    out << fmt::format("{}: {} ops, weights {}, arch {}, {} workers; kernel {}; prefill: {}\n",
                       model_dir.string(), g.ops.size(), dtype_name(cfg.torch_dtype), arch, workers, compiled,
                       prefill);
  for (const std::string& name : order) {
    const Row& r = rows[name];
    std::string runs;
    for (const std::string& v : r.runs_as) runs += (runs.empty() ? "" : ", ") + v;
    // Ops of refused tasks are unsupported; the others cannot run either while any task is
    // refused (the kernel is not built), but are not the cause.
    const bool ok = r.unsupported.empty() && (!r.runs_as.empty() || r.host > 0);
    uncovered += ok ? 0 : r.ops;
    unsupported += r.unsupported.empty() ? 0 : r.ops;
    const std::string status = !ok                  ? (!r.unsupported.empty() ? "unsupported" : "blocked")
                               : r.host == 0        ? "megakernel"
                               : r.runs_as.empty()  ? "host"
                                                    : "megakernel+host";
    if (r.host > 0) runs += std::string(runs.empty() ? "" : ", ") + "host fallback (src/ref), between segments";
    const std::string pf = prefill_why.empty() ? rt::prefill_kernels_for(g, kind_of.at(name), arch) : "decode step";
    j["ops"].push_back({{"op", name}, {"count", r.ops}, {"status", status}, {"runs_as", r.runs_as},
                        {"host", r.host}, {"why", r.unsupported}, {"prefill", pf}});
    if (!json)
      out << fmt::format("  {:<16} {:>5}  {:<11}  {:<44}  prefill: {}\n", name, r.ops, status,
                         ok ? runs : !r.unsupported.empty() ? r.unsupported
                                   : refused.empty() ? "in no task" : "the kernel is not built",
                         pf);
  }
  j["uncovered_ops"] = uncovered;
  if (json)
    out << json_text(j) << '\n';
  else
    out << fmt::format("{}: {} of {} ops run on the device, {} on the host (host fallback: {}); {} "
                       "unsupported, {} blocked by them\n",
                       uncovered == 0 ? "covered" : "NOT COVERED", int(g.ops.size()) - uncovered - host_ops,
                       g.ops.size(), host_ops,
                       host_ops == 0 ? "none"
                                     : fmt::format("{} megakernel launches a step, the host's ops between them", segments),
                       unsupported, uncovered - unsupported);
  return uncovered == 0 ? 0 : 1;
}

}  // namespace mpk::tune
