// The search for a model's megakernel code parameters on the GPU: coordinate descent over
// search_axes() from the model's defaults. An axis' candidates are planned, proved and compiled
// together (TBB; a refused task, a failed proof, a compile error or a kernel that spills
// registers rejects one), then each is
// loaded, tested against the defaults' logits on a
// teacher-forced prompt, and timed against the current best inside multi-step launches on the
// device clock, the two interleaved launch by launch. A candidate replaces the best only when
// the median of its launches' p50s is at least `margin` lower and every one of its launches
// beats every one of the best's (with 5 launches each, a split that chance gives 1 time in
// 252). The winner is confirmed against the defaults the same way at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "cache/tuning.h"
#include "ir/graph.h"
#include "model/model.h"
#include "runtime/kernel_params.h"
#include "runtime/runtime.h"

namespace mpk::rt {

// What a tuning result holds for, as canonical JSON: the model's architecture and shape, its
// weight dtype, the worker count, the device, the toolkit, the code generator and a digest of
// the kernel source.
std::string tuning_signature_text(const ir::Graph& graph, DType dtype, int workers,
                                  const std::string& device_name, const std::string& arch);

struct TuneOptions {
  double budget_s = 600;  // wall time; no new candidate starts after it (the confirmation runs)
  uint64_t seed = 1;      // the order of the axes and of their values
  int steps = 128;        // decode steps per timed launch
  int launches = 5;       // timed launches per side of a comparison, interleaved
  double margin = 0.01;   // how much faster a candidate's median must be
  int prompt_tokens = 16; // the differential test's teacher-forced prompt, and the prompt
                          // the timed steps follow (they decode its length .. + steps - 1:
                          // the best KV split depends on those lengths)
  double max_rel_l2 = 1e-4;  // its limit on the logits against the defaults'
  // Search only these axes (search_axes() names, e.g. "kv_splits"); empty: every axis. An
  // unknown name is Error(InvalidArgument).
  std::vector<std::string> axes;
  // Called after each candidate: a line on it, the share of candidates done, the estimated
  // seconds left.
  std::function<void(const std::string& line, double done, double eta_s)> progress;
};

struct TuneTrial {
  std::string axis, stage, change;  // "rows_per_warp", "linear", "rows_per_warp=1"
  // "faster" (became the best), "not faster", "rejected: ..." (plan, proof, compile),
  // "failed test: ..." (logits), "skipped: budget".
  std::string verdict;
  double us = 0, best_us = 0;  // medians of the launches' per-token p50s (device clock)
  double rel_l2 = 0;           // the differential test's error
  double ms = 0;               // wall time spent on it
};

struct TuneResult {
  std::string signature_text;
  MegakernelParams defaults, chosen;
  double default_us = 0, chosen_us = 0;  // the confirmation, in one interleaved run
  std::vector<TuneTrial> trials;
  uint64_t seed = 0;
  std::vector<std::string> axes;  // the axes searched, in search_axes() order
  int first_position = 0, steps = 0;  // the timed launches decode positions first .. + steps - 1
  bool budget_exhausted = false;
  double elapsed_s = 0;
  int timed = 0, rejected = 0, failed = 0;  // candidates by outcome
};

// Runs the search for `model` (its weights still in host memory) on options.device, with the
// kernel cache of `options` (every candidate's kernel lands there). Error(NoDevice) and the
// defaults' own load errors propagate; a candidate's errors only reject it.
TuneResult tune(const RuntimeOptions& options, const model::Model& model, const ir::Graph& graph,
                const TuneOptions& topts);

// The stage classes of which the search timed at least one candidate, in first-timed order.
std::vector<std::string> timed_stages(const TuneResult& r);

// The cache record of a search (cache/tuning.h).
cache::Tuning tuning_record(const TuneResult& r);

// Looks up the tuning result for `signature_text` in options.cache_dir's cache: nullopt when
// there is none or no usable cache (logged).
std::optional<cache::Tuning> find_tuning(const RuntimeOptions& options, const std::string& signature_text);
// Stores it; false (logged) without a usable cache.
bool store_tuning(const RuntimeOptions& options, const cache::Tuning& t);

}  // namespace mpk::rt
