// A tuning result: the megakernel code parameters a search chose for one model signature (the
// model's shape and dtype, the worker count, the GPU, the toolkit and the code generator), kept
// in the cache's tunings table beside the kernels. A load that finds one runs its parameters;
// the compiled kernel itself is an ordinary cache entry under its own key.
#pragma once

#include <string>

#include "cache/entry.h"

namespace mpk::cache {

struct Tuning {
  std::string signature;       // hex SHA-256 of signature_text (publish_tuning fills it)
  std::string signature_text;  // canonical JSON of what the result holds for
  std::string params_json;     // the chosen parameters (JSON object)
  std::string record_json;     // the search: per-class results, runner-up, margin, counts
  double time_us = 0;          // the chosen parameters' per-token p50 on the device clock
  double default_time_us = 0;  // the defaults' in the same run
  Provenance provenance;       // publish_tuning fills what is left empty
};

// A stored result whose fields still hold together: the signature is the digest of its text,
// the JSON fields parse, the times are positive and finite.
bool tuning_is_intact(const Tuning& t);

}  // namespace mpk::cache
