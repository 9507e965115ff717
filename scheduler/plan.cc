#include "scheduler/plan.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "base/error.h"
#include "base/log.h"
#include "scheduler/dump.h"
#include "scheduler/events.h"
#include "scheduler/simulate.h"
#include "scheduler/validate.h"

namespace mpk::sched {
namespace {

std::string env_or(const std::optional<std::string>& value, const char* name) {
  if (value) return *value;
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool listed(const std::string& list, const std::string& item) {
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    if (list.compare(begin, end - begin, item) == 0) return true;
    begin = end + 1;
  }
  return false;
}

class Dumper {
 public:
  explicit Dumper(const PlanOptions& o)
      : list_(env_or(o.dump, "MPK_DUMP")), dir_(env_or(o.dump_dir, "MPK_DUMP_DIR")) {}

  void tasks(int n, const char* stage, const TaskGraph& tg) {
    if (listed(list_, "tasks")) write(n, stage, to_json(tg), to_dot(tg));
  }
  void schedule(int n, const TaskGraph& tg, const Schedule& s, const CostModel& cost) {
    if (!listed(list_, "schedule")) return;
    const SimResult sim = simulate(tg, s, cost);
    write(n, "schedule", to_json(s, &sim), to_dot(tg, s));
  }

 private:
  void write(int n, const char* stage, const std::string& json, const std::string& dot) {
    if (dir_.empty()) {
      std::cerr << "// mpk scheduler dump " << n << ": " << stage << "\n" << json << "\n";
      return;
    }
    const std::filesystem::path base =
        std::filesystem::path(dir_) / ("sched." + std::to_string(n) + "." + stage);
    for (const auto& [ext, text] : {std::pair{".json", &json}, std::pair{".dot", &dot}}) {
      const std::filesystem::path path = base.string() + ext;
      std::ofstream f(path);
      f << *text;
      MPK_CHECK(f.good(), Io) << "scheduler dump: cannot write " << path.string();
    }
    log(LogLevel::Info, "scheduler dump: {}.{{json,dot}}", base.string());
  }

  std::string list_, dir_;
};

}  // namespace

Plan plan(const ir::Graph& graph, const PlanOptions& o) {
  Dumper dump(o);
  TaskGraph tg = decompose(graph, o.decompose);
  dump.tasks(1, "decompose", tg);
  tg = fuse(graph, std::move(tg), o.fuse);
  dump.tasks(2, "fuse", tg);
  tg = build_events(std::move(tg));
  dump.tasks(3, "events", tg);
  Schedule s = schedule(tg, o.schedule);
  dump.schedule(4, tg, s, o.schedule.cost);
  const std::vector<Violation> v = validate(tg, s);
  MPK_ICHECK(v.empty()) << "scheduler: the schedule does not validate:\n" << to_text(v);
  std::vector<TaskSpec> specs = task_specs(graph, tg);
  return {std::move(tg), std::move(s), std::move(specs)};
}

}  // namespace mpk::sched
