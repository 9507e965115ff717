// Shared by the prover tests (tests/superopt): the first failed obligation of a record, and the
// mutation suites' verdicts (a generated mutant of a formula judged against a brute-force
// enumeration of the prover's own domain).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/error.h"
#include "ir/index_expr.h"
#include "superopt/index_prover.h"

namespace mpk::superopt {

// "name: result (counterexample)" of the first obligation not proved, or "".
inline std::string failed(const ProofRecord& r) {
  for (const Obligation& o : r.obligations)
    if (o.result != "proved") return o.name + ": " + o.result + " (" + o.counterexample + ")";
  return "";
}

// True when a and b evaluate alike at every point of `domain` (an undefined value differs).
inline bool same_values(const ir::IndexExpr& a, const ir::IndexExpr& b, const std::vector<ir::IndexEnv>& domain) {
  for (const ir::IndexEnv& env : domain) {
    try {
      if (ir::eval(a, env) != ir::eval(b, env)) return false;
    } catch (const Error&) {
      return false;
    }
  }
  return true;
}

// A mutation suite's verdicts against the brute force on the prover's own domain: a mutant that
// breaks the layout must be refuted; one equal to the formula at every point (a rewrite) must be
// proved. A mutant that is a different valid layout is counted apart: the description's inverse
// names the original's holders, so the prover may refute it (it is never run).
struct Tally {
  const char* name;
  int generated = 0, wrong = 0, equivalent = 0, other = 0, other_proved = 0;
  void judge(bool proved, bool ok, bool same, const std::string& what) {
    ++generated;
    if (!ok) {
      ++wrong;
      EXPECT_FALSE(proved) << name << ": " << what << " is wrong but was proved";
    } else if (same) {
      ++equivalent;
      EXPECT_TRUE(proved) << name << ": " << what << " equals the formula but was not proved";
    } else {
      ++other;
      other_proved += proved;
    }
  }
  ~Tally() {  // and most generated mutants break the layout: the suite has teeth
    EXPECT_GT(wrong, generated / 2) << name;
    std::printf("[mutation] %s: %d mutants, %d wrong (all refuted), %d equivalent (all proved), %d other valid "
                "layouts (%d proved)\n",
                name, generated, wrong, equivalent, other, other_proved);
  }
};

}  // namespace mpk::superopt
