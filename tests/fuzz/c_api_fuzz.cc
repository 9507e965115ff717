// The C API as a host application could drive it: the input is decoded into a sequence of
// calls (session create/destroy with fuzzed config fields, prefill with fuzzed tokens, decode,
// logits, position, reset, stats, info, runtime create/destroy, failing model loads, NULL
// arguments). One model (tests/data/qwen3-f32, reference backend) is loaded per process.
// Caller-side buffers are exactly as large as the caller says (struct_size, n, max_tokens), so
// ASan sees any access past them. The header's promises are checked: failed creates leave
// *out NULL, decode writes at most max_tokens ids inside the vocabulary, logits are finite.
#include <fuzzer/FuzzedDataProvider.h>
#include <mpk/mpk.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"

// c_api_fuzz_c.c: enum values outside their enumerators, formed in C.
extern "C" const char* mpk_fuzz_status_name(int status);
extern "C" void mpk_fuzz_set_backend(mpk_model_config* cfg, int backend);

namespace {

namespace fuzz = mpk::fuzz;

#define FUZZ_REQUIRE(cond)                                                          \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "fuzz: %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, \
                   #cond, mpk_last_error());                                        \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

struct Globals {
  mpk_runtime* rt = nullptr;
  mpk_model* model = nullptr;
  std::string model_dir;
  int32_t vocab = 0;
  size_t max_positions = 0;
};
Globals g;

void check_status(mpk_status s) {
  FUZZ_REQUIRE(std::strcmp(mpk_status_name(s), "MPK_STATUS_UNKNOWN") != 0);  // a documented one
  if (s != MPK_OK) FUZZ_REQUIRE(std::strlen(mpk_last_error()) > 0);
}

// A caller's struct of `size` bytes (at least the size_t struct_size field) holding the first
// bytes of `init`: exactly what an older or newer header's caller passes.
template <typename T>
std::vector<unsigned char> sized_struct(const T& init, size_t size) {
  size = std::max(size, sizeof(size_t));
  std::vector<unsigned char> buf(size, 0xA5);
  std::memcpy(buf.data(), &init, std::min(size, sizeof(T)));
  std::memcpy(buf.data(), &size, sizeof(size_t));
  return buf;
}

size_t pick_struct_size(FuzzedDataProvider& in, size_t full) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: return in.ConsumeIntegralInRange<size_t>(0, full + 64);
    case 1: return full + 8;
    default: return full;
  }
}

size_t pick_size(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return 0;
    case 1: return SIZE_MAX;
    case 2: return g.max_positions;
    case 3: return g.max_positions + 1;
    case 4: return in.ConsumeIntegral<size_t>();
    default: return in.ConsumeIntegralInRange<size_t>(1, 64);
  }
}

int32_t pick_token(FuzzedDataProvider& in) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) return in.ConsumeIntegral<int32_t>();
  return in.ConsumeIntegralInRange<int32_t>(0, g.vocab - 1);
}

constexpr size_t kSlots = 4;
using Sessions = std::array<mpk_session*, kSlots>;

void op_session_create(FuzzedDataProvider& in, Sessions& ss) {
  size_t slot = in.ConsumeIntegralInRange<size_t>(0, kSlots - 1);
  mpk_session_destroy(ss[slot]);
  ss[slot] = nullptr;
  mpk_session_config c;
  mpk_session_config_init(&c);
  if (in.ConsumeBool()) c.kv_capacity = pick_size(in);
  if (in.ConsumeBool()) c.steps_per_launch = in.ConsumeBool() ? pick_size(in) : 1;
  if (in.ConsumeBool()) c.profile = in.ConsumeIntegral<int>();
  if (in.ConsumeBool()) c.exact_prefill = in.ConsumeIntegral<int>();
  auto buf = sized_struct(c, pick_struct_size(in, sizeof c));
  const bool null_cfg = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  const bool null_model = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  const bool null_out = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  mpk_session* s = reinterpret_cast<mpk_session*>(&buf);  // must be overwritten
  mpk_status st = mpk_session_create(null_model ? nullptr : g.model,
                                     null_cfg ? nullptr : reinterpret_cast<mpk_session_config*>(buf.data()),
                                     null_out ? nullptr : &s);
  check_status(st);
  if (null_out) {
    FUZZ_REQUIRE(st != MPK_OK);
    return;
  }
  if (st != MPK_OK) {
    FUZZ_REQUIRE(s == nullptr);
    return;
  }
  FUZZ_REQUIRE(s != nullptr);
  ss[slot] = s;
}

mpk_session* pick_session(FuzzedDataProvider& in, const Sessions& ss) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) return nullptr;
  return ss[in.ConsumeIntegralInRange<size_t>(0, kSlots - 1)];
}

void op_prefill(FuzzedDataProvider& in, const Sessions& ss) {
  mpk_session* s = pick_session(in, ss);
  size_t n = in.ConsumeIntegralInRange<size_t>(0, 24);
  std::vector<int32_t> tokens(n);
  for (auto& t : tokens) t = pick_token(in);
  size_t before = 0;
  if (s) FUZZ_REQUIRE(mpk_session_position(s, &before) == MPK_OK);
  const bool null_tokens = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  // A heap copy of exactly n ids (a vector of size 0 has no storage: pass a dangling-free
  // pointer to a 1-element buffer instead).
  std::vector<int32_t> exact(tokens.begin(), tokens.end());
  int32_t one = 0;
  const int32_t* p = null_tokens ? nullptr : n ? exact.data() : &one;
  mpk_status st = mpk_session_prefill(s, p, n);
  check_status(st);
  if (s) {
    size_t after = 0;
    FUZZ_REQUIRE(mpk_session_position(s, &after) == MPK_OK);
    if (st == MPK_OK) {
      FUZZ_REQUIRE(n > 0 && after == before + n);
    } else if (st == MPK_ERROR_INVALID_ARGUMENT || st == MPK_ERROR_CAPACITY) {
      FUZZ_REQUIRE(after == before);  // "after these the session is unchanged"
    }
  }
}

void op_decode(FuzzedDataProvider& in, const Sessions& ss) {
  mpk_session* s = pick_session(in, ss);
  size_t max_tokens = in.ConsumeIntegralInRange<size_t>(0, 12);
  const int mode = in.ConsumeIntegralInRange<int>(0, 15);
  std::vector<int32_t> out(max_tokens);
  int32_t* outp = max_tokens ? out.data() : nullptr;
  size_t n = SIZE_MAX;
  mpk_status st;
  if (mode == 0) {
    st = mpk_session_decode(s, max_tokens ? max_tokens : SIZE_MAX, nullptr, &n);  // no room
    check_status(st);
    FUZZ_REQUIRE(st != MPK_OK && n == 0);
    return;
  }
  if (mode == 1) {
    st = mpk_session_decode(s, max_tokens, outp, nullptr);
    check_status(st);
    FUZZ_REQUIRE(st != MPK_OK);
    return;
  }
  st = mpk_session_decode(s, max_tokens, outp, &n);
  check_status(st);
  FUZZ_REQUIRE(n <= max_tokens);
  if (st == MPK_OK && max_tokens > 0) FUZZ_REQUIRE(n >= 1);  // stops after an EOS, written
  for (size_t i = 0; i < n; ++i) FUZZ_REQUIRE(out[i] >= 0 && out[i] < g.vocab);
}

void op_logits(FuzzedDataProvider& in, const Sessions& ss) {
  mpk_session* s = pick_session(in, ss);
  const float* l = nullptr;
  size_t v = 0;
  const int mode = in.ConsumeIntegralInRange<int>(0, 7);
  mpk_status st = mpk_session_logits(s, mode == 0 ? nullptr : &l, mode == 1 ? nullptr : &v);
  check_status(st);
  if (st != MPK_OK) return;
  FUZZ_REQUIRE(l != nullptr && v == size_t(g.vocab));
  for (size_t i = 0; i < v; ++i) FUZZ_REQUIRE(std::isfinite(l[i]));
}

void op_misc_session(FuzzedDataProvider& in, Sessions& ss) {
  mpk_session* s = pick_session(in, ss);
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: {
      size_t pos = 0;
      check_status(mpk_session_position(s, in.ConsumeBool() ? &pos : nullptr));
      break;
    }
    case 1: check_status(mpk_session_reset(s)); break;
    case 2: {
      const double* ms = nullptr;
      size_t n = 0;
      mpk_status st = mpk_session_step_times(s, &ms, &n);
      check_status(st);
      if (st == MPK_OK) for (size_t i = 0; i < n; ++i) fuzz::touch(&ms[i], sizeof(double));
      break;
    }
    case 3: {
      const char* json = nullptr;
      mpk_status st = mpk_session_profile(s, in.ConsumeBool() ? &json : nullptr);
      check_status(st);
      if (st == MPK_OK) FUZZ_REQUIRE(json != nullptr && std::strlen(json) > 0);
      break;
    }
    case 4: {  // destroy a slot
      size_t slot = in.ConsumeIntegralInRange<size_t>(0, kSlots - 1);
      mpk_session_destroy(ss[slot]);
      ss[slot] = nullptr;
      break;
    }
  }
}

void op_model_queries(FuzzedDataProvider& in) {
  const mpk_model* m = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? nullptr : g.model;
  if (in.ConsumeBool()) {
    mpk_stats init{};
    auto buf = sized_struct(init, pick_struct_size(in, sizeof init));
    bool null_stats = in.ConsumeIntegralInRange<int>(0, 15) == 0;
    check_status(mpk_model_stats(m, null_stats ? nullptr : reinterpret_cast<mpk_stats*>(buf.data())));
  } else {
    mpk_model_info init{};
    auto buf = sized_struct(init, pick_struct_size(in, sizeof init));
    bool null_info = in.ConsumeIntegralInRange<int>(0, 15) == 0;
    mpk_status st =
        mpk_model_info_get(m, null_info ? nullptr : reinterpret_cast<mpk_model_info*>(buf.data()));
    check_status(st);
    if (st == MPK_OK && buf.size() >= sizeof(mpk_model_info)) {
      mpk_model_info info;
      std::memcpy(&info, buf.data(), sizeof info);
      FUZZ_REQUIRE(info.vocab_size == g.vocab);
      FUZZ_REQUIRE(std::memchr(info.architecture, 0, sizeof info.architecture) != nullptr);
    }
  }
}

void log_to_nowhere(mpk_log_level, const char* msg, void*) { fuzz::touch(msg, std::strlen(msg) + 1); }

void op_runtime(FuzzedDataProvider& in) {
  mpk_runtime_config c;
  mpk_runtime_config_init(&c);
  std::string dir;
  if (in.ConsumeBool()) c.device = in.ConsumeIntegral<int32_t>();
  if (in.ConsumeBool()) c.num_threads = in.ConsumeIntegral<int32_t>();
  if (in.ConsumeBool()) {
    // Under the scratch folder, in case a later version creates the folder early.
    dir = (fuzz::scratch_dir() / "rt").string() + "/" + in.ConsumeRandomLengthString(64);
    c.cache_dir = dir.c_str();
  }
  if (in.ConsumeBool()) c.log_callback = log_to_nowhere;
  auto buf = sized_struct(c, pick_struct_size(in, sizeof c));
  const bool null_cfg = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  const bool null_out = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  mpk_runtime* rt = reinterpret_cast<mpk_runtime*>(&buf);
  mpk_status st = mpk_runtime_create(null_cfg ? nullptr : reinterpret_cast<mpk_runtime_config*>(buf.data()),
                                     null_out ? nullptr : &rt);
  check_status(st);
  if (null_out) return;
  if (st != MPK_OK) {
    FUZZ_REQUIRE(rt == nullptr);
    return;
  }
  FUZZ_REQUIRE(rt != nullptr);
  mpk_runtime_destroy(rt);
}

// Loads that must fail fast: a bad argument, a bad config struct or a missing folder. A real
// load per input would be too slow; the process's model is the successful one.
void op_bad_load(FuzzedDataProvider& in) {
  mpk_model_config c;
  mpk_model_config_init(&c);
  std::string dir = g.model_dir;
  size_t size = sizeof c;
  bool null_rt = false, null_dir = false, null_cfg = false, null_out = false;
  switch (in.ConsumeIntegralInRange<int>(0, 6)) {
    case 0: null_rt = true; break;
    case 1: null_dir = true; break;
    case 2: null_cfg = true; break;
    case 3: null_out = true; break;
    case 4: mpk_fuzz_set_backend(&c, in.ConsumeBool() ? -1 : in.ConsumeIntegralInRange<int>(3, 1 << 20)); break;
    case 5: size = in.ConsumeIntegralInRange<size_t>(0, sizeof c - 1); break;
    case 6: dir = fuzz::scratch_dir() / ("absent-" + in.ConsumeRandomLengthString(32)); break;
  }
  auto buf = sized_struct(c, size);
  mpk_model* m = reinterpret_cast<mpk_model*>(&buf);
  mpk_status st = mpk_model_load(null_rt ? nullptr : g.rt, null_dir ? nullptr : dir.c_str(),
                                 null_cfg ? nullptr : reinterpret_cast<mpk_model_config*>(buf.data()),
                                 null_out ? nullptr : &m);
  check_status(st);
  FUZZ_REQUIRE(st != MPK_OK);
  if (!null_out) FUZZ_REQUIRE(m == nullptr);
}

void op_globals(FuzzedDataProvider& in) {
  const char* name = mpk_fuzz_status_name(in.ConsumeIntegral<int32_t>());
  FUZZ_REQUIRE(name != nullptr);
  fuzz::touch(name, std::strlen(name) + 1);
  fuzz::touch(mpk_version(), std::strlen(mpk_version()) + 1);
  mpk_session_destroy(nullptr);
  mpk_model_destroy(nullptr);
  mpk_runtime_destroy(nullptr);
  mpk_runtime_config_init(nullptr);
  mpk_model_config_init(nullptr);
  mpk_session_config_init(nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mpk_runtime_config rc;
  mpk_runtime_config_init(&rc);
  rc.num_threads = 1;
  const std::string cache = (fuzz::scratch_dir() / "cache").string();
  rc.cache_dir = cache.c_str();
  FUZZ_REQUIRE(mpk_runtime_create(&rc, &g.rt) == MPK_OK);
  mpk_model_config mc;
  mpk_model_config_init(&mc);
  mc.backend = MPK_BACKEND_REFERENCE;
  g.model_dir = (fuzz::test_data() / "qwen3-f32").string();
  FUZZ_REQUIRE(mpk_model_load(g.rt, g.model_dir.c_str(), &mc, &g.model) == MPK_OK);
  mpk_model_info info;
  info.struct_size = sizeof info;
  FUZZ_REQUIRE(mpk_model_info_get(g.model, &info) == MPK_OK);
  g.vocab = info.vocab_size;
  g.max_positions = size_t(info.max_position_embeddings);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Sessions ss{};
  for (int step = 0; step < 48 && in.remaining_bytes() > 0; ++step) {
    switch (in.ConsumeIntegralInRange<int>(0, 9)) {
      case 0: op_session_create(in, ss); break;
      case 1:
      case 2: op_prefill(in, ss); break;
      case 3:
      case 4: op_decode(in, ss); break;
      case 5: op_logits(in, ss); break;
      case 6: op_misc_session(in, ss); break;
      case 7: op_model_queries(in); break;
      case 8: in.ConsumeBool() ? op_runtime(in) : op_bad_load(in); break;
      case 9: op_globals(in); break;
    }
  }
  for (mpk_session* s : ss) mpk_session_destroy(s);
  return 0;
}
