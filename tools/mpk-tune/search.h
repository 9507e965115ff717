// mpk-tune tune and tunings (see search.cc).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "commands.h"

namespace mpk::tune {

struct TuneArgs {
  std::filesystem::path model_dir;
  double budget_s = 600;
  uint64_t seed = 1;
  int steps = 128;
  int launches = 5;
  int prompt_tokens = 16;  // the timed steps decode positions prompt_tokens .. + steps - 1
  std::vector<std::string> axes;  // the axes searched (rt::TuneOptions::axes); empty: all
};

// Searches the model's megakernel parameters on GPU 0 (runtime/tune.h), stores the result in
// the cache at ctx.cache_path (a file named kernels.db: the runtime looks for that name in its
// cache folder), and prints a table per stage class: the values chosen, the speed-up their
// trials measured, candidates tried / timed / rejected / failed tests, then the chosen set
// against the defaults confirmed in one run. Progress and an ETA go to stderr (one line per
// candidate unless stderr is a terminal). Error(NoDevice) without a GPU.
int cmd_tune(const Context& ctx, const TuneArgs& args);

// The tuning results in the cache, newest first.
int cmd_tunings(const Context& ctx);

}  // namespace mpk::tune
