// The C API: every extern "C" body runs inside MPK_API_BEGIN/END, which turns C++ exceptions
// into an mpk_status and the thread-local last-error text. Nothing escapes to the host.
#include <mpk/mpk.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "runtime/runtime.h"
#include "text/tokenizer.h"

struct mpk_runtime {
  mpk::rt::RuntimeOptions options;
  bool owns_log_sink = false;
};
struct mpk_model {
  std::shared_ptr<mpk::rt::LoadedModel> impl;
  std::string dir;
};
struct mpk_tokenizer {
  std::shared_ptr<const mpk::text::Tokenizer> impl;
};
struct mpk_detokenizer {
  std::unique_ptr<mpk::text::StreamDecoder> impl;
  std::string text;
};
struct mpk_session {
  std::unique_ptr<mpk::rt::Session> impl;
  std::vector<int32_t> scratch;
  std::string profile;
};

namespace {

thread_local std::string t_last_error;

mpk_status status_of(mpk::ErrorKind k) {
  using K = mpk::ErrorKind;
  switch (k) {
    case K::InvalidArgument: return MPK_ERROR_INVALID_ARGUMENT;
    case K::NotFound: return MPK_ERROR_NOT_FOUND;
    case K::InvalidModel: return MPK_ERROR_INVALID_MODEL;
    case K::Unsupported: return MPK_ERROR_UNSUPPORTED;
    case K::NoDevice: return MPK_ERROR_NO_DEVICE;
    case K::Cuda: return MPK_ERROR_CUDA;
    case K::Compile: return MPK_ERROR_COMPILE;
    case K::Cache: return MPK_ERROR_CACHE;
    case K::Capacity: return MPK_ERROR_CAPACITY;
    case K::OutOfMemory: return MPK_ERROR_OUT_OF_MEMORY;
    case K::BadState: return MPK_ERROR_BAD_STATE;
    case K::Io: return MPK_ERROR_IO;
    case K::Timeout: return MPK_ERROR_TIMEOUT;
    case K::Numerics: return MPK_ERROR_NUMERICS;
    case K::Internal: return MPK_ERROR_INTERNAL;
  }
  return MPK_ERROR_INTERNAL;
}

// Never throws: a failure to store the message (no memory) leaves a fixed text.
thread_local const char* t_fallback_error = nullptr;

mpk_status fail(mpk_status s, const char* msg, const char* prefix = "") noexcept {
  try {
    t_last_error = prefix;
    t_last_error += msg;
    t_fallback_error = nullptr;
  } catch (...) {
    t_fallback_error = "out of host memory while reporting an error";
  }
  return s;
}

// Checks a struct's size: callers must have run its *_init (or set sizeof). min_size: the
// smallest layout an older header had (fields past a caller's struct_size keep their
// defaults, or are not written).
template <typename T>
void check_struct(const T* p, const char* what, size_t min_size = sizeof(T)) {
  MPK_CHECK(p != nullptr, InvalidArgument) << what << " is NULL";
  MPK_CHECK(p->struct_size >= min_size, InvalidArgument)
      << what << "->struct_size is " << p->struct_size << ", expected " << sizeof(T)
      << " (initialise it with its mpk_*_init function)";
}

// A C caller may store any int in an enum field; reading it as the C++ enum type would be
// undefined for values outside the enumerators, so it is read as the integer it is.
template <typename Enum>
int enum_value(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

mpk::rt::Backend to_backend(const mpk_backend& b) {
  switch (enum_value(b)) {
    case MPK_BACKEND_AUTO: return mpk::rt::Backend::Auto;
    case MPK_BACKEND_GPU: return mpk::rt::Backend::Gpu;
    case MPK_BACKEND_REFERENCE: return mpk::rt::Backend::Reference;
  }
  MPK_THROW(InvalidArgument) << "unknown backend " << enum_value(b);
}

mpk_backend from_backend(mpk::rt::Backend b) {
  switch (b) {
    case mpk::rt::Backend::Auto: return MPK_BACKEND_AUTO;
    case mpk::rt::Backend::Gpu: return MPK_BACKEND_GPU;
    case mpk::rt::Backend::Reference: return MPK_BACKEND_REFERENCE;
  }
  return MPK_BACKEND_AUTO;
}

}  // namespace

#define MPK_API_BEGIN()  \
  t_last_error.clear();  \
  t_fallback_error = nullptr; \
  try {
#define MPK_API_END()                                                              \
  }                                                                                \
  catch (const mpk::Error& e) {                                                    \
    return fail(status_of(e.kind()), e.what());                                    \
  }                                                                                \
  catch (const std::bad_alloc&) {                                                  \
    return fail(MPK_ERROR_OUT_OF_MEMORY, "out of host memory");                    \
  }                                                                                \
  catch (const std::exception& e) {                                                \
    return fail(MPK_ERROR_INTERNAL, e.what(), "internal error: ");                 \
  }                                                                                \
  catch (...) {                                                                    \
    return fail(MPK_ERROR_INTERNAL, "internal error: unknown exception");          \
  }                                                                                \
  return MPK_OK;
#define MPK_NULL_CHECK(p) MPK_CHECK((p) != nullptr, InvalidArgument) << #p " is NULL"

extern "C" {

const char* mpk_status_name(mpk_status s) {
  switch (enum_value(s)) {
#define MPK_NAME(S) \
  case S: return #S;
    MPK_NAME(MPK_OK) MPK_NAME(MPK_ERROR_INVALID_ARGUMENT) MPK_NAME(MPK_ERROR_NOT_FOUND)
    MPK_NAME(MPK_ERROR_INVALID_MODEL) MPK_NAME(MPK_ERROR_UNSUPPORTED)
    MPK_NAME(MPK_ERROR_NO_DEVICE) MPK_NAME(MPK_ERROR_CUDA) MPK_NAME(MPK_ERROR_COMPILE)
    MPK_NAME(MPK_ERROR_CACHE) MPK_NAME(MPK_ERROR_CAPACITY) MPK_NAME(MPK_ERROR_OUT_OF_MEMORY)
    MPK_NAME(MPK_ERROR_BAD_STATE) MPK_NAME(MPK_ERROR_IO) MPK_NAME(MPK_ERROR_TIMEOUT) MPK_NAME(MPK_ERROR_NUMERICS)
    MPK_NAME(MPK_ERROR_INTERNAL)
#undef MPK_NAME
  }
  return "MPK_STATUS_UNKNOWN";
}

const char* mpk_last_error(void) {
  return t_fallback_error ? t_fallback_error : t_last_error.c_str();
}

const char* mpk_version(void) {
#define MPK_STR2(x) #x
#define MPK_STR(x) MPK_STR2(x)
  return MPK_STR(MPK_VERSION_MAJOR) "." MPK_STR(MPK_VERSION_MINOR) "." MPK_STR(MPK_VERSION_PATCH);
}

void mpk_runtime_config_init(mpk_runtime_config* cfg) {
  if (!cfg) return;
  std::memset(cfg, 0, sizeof(*cfg));
  cfg->struct_size = sizeof(*cfg);
  cfg->tune_policy = MPK_TUNE_CACHE_ONLY;
  cfg->tune_budget_s = 120;
}

mpk_status mpk_runtime_create(const mpk_runtime_config* cfg, mpk_runtime** out) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(out);
  *out = nullptr;
  // A caller built before the progress callback existed passes the smaller struct.
  check_struct(cfg, "cfg", offsetof(mpk_runtime_config, progress_callback));
  mpk_runtime_config c;
  mpk_runtime_config_init(&c);
  std::memcpy(&c, cfg, std::min(cfg->struct_size, sizeof c));
  cfg = &c;
  MPK_CHECK(cfg->device >= 0, InvalidArgument) << "device ordinal " << cfg->device << " < 0";
  MPK_CHECK(cfg->num_threads >= 0, InvalidArgument)
      << "num_threads " << cfg->num_threads << " < 0";
  MPK_CHECK(cfg->tune_policy >= MPK_TUNE_CACHE_ONLY && cfg->tune_policy <= MPK_TUNE_ON_MISS, InvalidArgument)
      << "tune_policy " << int(cfg->tune_policy) << " is not an mpk_tune_policy";
  MPK_CHECK(std::isfinite(cfg->tune_budget_s) && cfg->tune_budget_s > 0, InvalidArgument)
      << "tune_budget_s " << cfg->tune_budget_s << " is not a positive number of seconds";
  auto rt = std::make_unique<mpk_runtime>();
  rt->options.tune_policy = cfg->tune_policy == MPK_TUNE_DEFAULTS_ONLY ? mpk::rt::TunePolicy::DefaultsOnly
                            : cfg->tune_policy == MPK_TUNE_ON_MISS     ? mpk::rt::TunePolicy::TuneOnMiss
                                                                       : mpk::rt::TunePolicy::CacheOnly;
  rt->options.tune_budget_s = cfg->tune_budget_s;
  rt->options.device = cfg->device;
  rt->options.num_threads = cfg->num_threads;
  // Empty: resolved with the rest of the environment when a model loads.
  if (cfg->cache_dir && *cfg->cache_dir) rt->options.cache_dir = cfg->cache_dir;
  if (cfg->log_callback) {
    auto cb = cfg->log_callback;
    void* ud = cfg->log_user_data;
    mpk::set_log_sink([cb, ud](mpk::LogLevel l, const std::string& m) {
      cb(static_cast<mpk_log_level>(l), m.c_str(), ud);
    }, rt.get());
    rt->owns_log_sink = true;
  }
  if (cfg->progress_callback) {
    auto cb = cfg->progress_callback;
    void* ud = cfg->progress_user_data;
    rt->options.progress = [cb, ud](const char* phase, uint64_t done, uint64_t total) {
      cb(phase, done, total, ud);
    };
  }
  *out = rt.release();
  MPK_API_END();
}

void mpk_runtime_destroy(mpk_runtime* rt) {
  if (rt && rt->owns_log_sink) mpk::clear_log_sink(rt);
  delete rt;
}

void mpk_model_config_init(mpk_model_config* cfg) {
  if (!cfg) return;
  std::memset(cfg, 0, sizeof(*cfg));
  cfg->struct_size = sizeof(*cfg);
  cfg->backend = MPK_BACKEND_AUTO;
}

mpk_status mpk_model_load(mpk_runtime* rt, const char* model_dir, const mpk_model_config* cfg,
                          mpk_model** out) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(out);
  *out = nullptr;
  MPK_NULL_CHECK(rt);
  MPK_NULL_CHECK(model_dir);
  check_struct(cfg, "cfg");
  const bool validate = cfg->validate_weights != 0;
  auto m = std::make_unique<mpk_model>();
  m->impl = mpk::rt::LoadedModel::load(rt->options, model_dir, to_backend(cfg->backend), validate);
  m->dir = model_dir;
  *out = m.release();
  MPK_API_END();
}

mpk_status mpk_model_info_get(const mpk_model* model, mpk_model_info* info) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(model);
  check_struct(info, "info");
  const auto& m = model->impl->model();
  const auto& c = m.config;
  info->family = c.family == mpk::model::Family::Qwen3   ? MPK_FAMILY_QWEN3
                 : c.family == mpk::model::Family::Qwen2 ? MPK_FAMILY_QWEN2
                                                         : MPK_FAMILY_LLAMA;
  std::memset(info->architecture, 0, sizeof(info->architecture));
  std::strncpy(info->architecture, c.architecture.c_str(), sizeof(info->architecture) - 1);
  info->num_layers = c.num_layers;
  info->hidden_size = c.hidden_size;
  info->intermediate_size = c.intermediate_size;
  info->num_heads = c.num_heads;
  info->num_kv_heads = c.num_kv_heads;
  info->head_dim = c.head_dim;
  info->vocab_size = c.vocab_size;
  info->max_position_embeddings = c.max_position_embeddings;
  info->tied_embeddings = c.tie_word_embeddings ? 1 : 0;
  info->dtype = m.dtype == mpk::DType::F32   ? MPK_DTYPE_F32
                : m.dtype == mpk::DType::F16 ? MPK_DTYPE_F16
                                             : MPK_DTYPE_BF16;
  info->num_parameters = m.num_parameters;
  info->backend = from_backend(model->impl->backend());
  info->num_eos_token_ids = int32_t(c.eos_token_ids.size());
  for (size_t i = 0; i < 8; ++i)
    info->eos_token_ids[i] = i < c.eos_token_ids.size() ? c.eos_token_ids[i] : -1;
  MPK_API_END();
}

mpk_status mpk_model_eos_token_ids(const mpk_model* model, int32_t* ids, size_t capacity, size_t* count) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(model);
  MPK_NULL_CHECK(count);
  MPK_CHECK(ids || capacity == 0, InvalidArgument) << "ids is NULL with a capacity of " << capacity;
  const std::vector<int>& eos = model->impl->model().config.eos_token_ids;
  for (size_t i = 0; i < eos.size() && i < capacity; ++i) ids[i] = int32_t(eos[i]);
  *count = eos.size();
  MPK_API_END();
}

void mpk_model_destroy(mpk_model* model) { delete model; }

mpk_status mpk_model_stats(const mpk_model* model, mpk_stats* stats) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(model);
  // A caller built before device_bytes existed passes the smaller struct: it gets the fields
  // it knows.
  check_struct(stats, "stats", offsetof(mpk_stats, device_bytes));
  mpk_stats out{};
  out.struct_size = stats->struct_size;
  const auto& st = model->impl->stats();
  out.backend = from_backend(model->impl->backend());
  out.host_fallback_ops = st.host_fallback_ops;
  out.host_fallback_bytes = st.host_fallback_bytes;
  out.host_fallback_ms = double(st.host_fallback_ns.load()) / 1e6;
  out.num_tasks = st.num_tasks;
  out.num_workers = st.num_workers;
  out.num_kernels = st.num_kernels;
  out.cache_hits = st.cache_hits;
  out.cache_misses = st.cache_misses;
  out.proved = st.proved;
  out.proof_obligations = st.proof_obligations;
  out.device_bytes = st.device_bytes.load();
  out.compile_ms = st.compile_ms;
  out.launches = st.launches.load();
  out.tokens = st.tokens.load();
  out.read_ms = st.read_ms;
  out.plan_ms = st.plan_ms;
  out.prove_ms = st.prove_ms;
  out.kernel_ms = st.kernel_ms;
  out.upload_ms = st.upload_ms;
  out.load_ms = st.load_ms;
  out.tuned = st.tuned ? 1 : 0;
  out.tune_candidates = st.tune_candidates;
  out.tune_changed_params = st.tune_changed_params;
  out.tune_ms = st.tune_ms;
  out.tune_stages_changed = st.tune_stages_changed;
  out.tune_stages_searched = st.tune_stages_searched;
  std::memcpy(stats, &out, std::min(stats->struct_size, sizeof out));
  MPK_API_END();
}

void mpk_session_config_init(mpk_session_config* cfg) {
  if (!cfg) return;
  std::memset(cfg, 0, sizeof(*cfg));
  cfg->struct_size = sizeof(*cfg);
  cfg->kv_capacity = 4096;
  cfg->steps_per_launch = 1;
}

mpk_status mpk_session_create(mpk_model* model, const mpk_session_config* cfg,
                              mpk_session** out) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(out);
  *out = nullptr;
  MPK_NULL_CHECK(model);
  // Callers built against the 0.1 header know kv_capacity only: fields past their struct_size
  // keep their defaults (as mpk_model_stats, the bytes both sides know are copied).
  check_struct(cfg, "cfg", offsetof(mpk_session_config, steps_per_launch));
  mpk_session_config c;
  mpk_session_config_init(&c);
  std::memcpy(&c, cfg, std::min(cfg->struct_size, sizeof c));
  mpk::rt::SessionOptions o;
  o.kv_capacity = c.kv_capacity;
  o.steps_per_launch = c.steps_per_launch;  // checked by the session
  o.profile = c.profile != 0;
  o.tensor_core_prefill = c.exact_prefill == 0;
  auto s = std::make_unique<mpk_session>();
  s->impl = std::make_unique<mpk::rt::Session>(model->impl, o);
  *out = s.release();
  MPK_API_END();
}

mpk_status mpk_session_prefill(mpk_session* s, const int32_t* tokens, size_t n) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(s);
  MPK_NULL_CHECK(tokens);
  s->impl->prefill(tokens, n);
  MPK_API_END();
}

mpk_status mpk_session_decode(mpk_session* s, size_t max_tokens, int32_t* out, size_t* n_out) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(n_out);
  *n_out = 0;
  MPK_NULL_CHECK(s);
  MPK_CHECK(out != nullptr || max_tokens == 0, InvalidArgument) << "out is NULL";
  s->scratch.clear();
  // Tokens decoded before an error are still handed back.
  struct Flush {
    mpk_session* s;
    int32_t* out;
    size_t* n_out;
    ~Flush() {
      std::copy(s->scratch.begin(), s->scratch.end(), out);
      *n_out = s->scratch.size();
    }
  } flush{s, out, n_out};
  s->impl->decode(max_tokens, s->scratch);
  MPK_API_END();
}

mpk_status mpk_session_logits(mpk_session* s, const float** logits, size_t* vocab) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(s);
  MPK_NULL_CHECK(logits);
  MPK_NULL_CHECK(vocab);
  const auto& l = s->impl->logits();
  *logits = l.data();
  *vocab = l.size();
  MPK_API_END();
}

mpk_status mpk_session_position(const mpk_session* s, size_t* position) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(s);
  MPK_NULL_CHECK(position);
  *position = s->impl->position();
  MPK_API_END();
}

mpk_status mpk_session_reset(mpk_session* s) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(s);
  s->impl->reset();
  MPK_API_END();
}

mpk_status mpk_session_step_times(const mpk_session* s, const double** ms, size_t* n) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(s);
  MPK_NULL_CHECK(ms);
  MPK_NULL_CHECK(n);
  const auto& t = s->impl->step_ms();
  *ms = t.data();
  *n = t.size();
  MPK_API_END();
}

mpk_status mpk_session_profile(mpk_session* s, const char** json) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(s);
  MPK_NULL_CHECK(json);
  s->profile = s->impl->profile_json();
  *json = s->profile.c_str();
  MPK_API_END();
}

void mpk_sampling_config_init(mpk_sampling_config* cfg) {
  if (!cfg) return;
  std::memset(cfg, 0, sizeof(*cfg));
  cfg->struct_size = sizeof(*cfg);
  cfg->top_p = 1;
}

mpk_status mpk_session_set_sampling(mpk_session* s, const mpk_sampling_config* cfg) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(s);
  check_struct(cfg, "cfg");
  s->impl->set_sampling({cfg->temperature, cfg->top_k, cfg->top_p, cfg->seed});
  MPK_API_END();
}

void mpk_session_destroy(mpk_session* s) { delete s; }

mpk_status mpk_tokenizer_load(const char* path, mpk_tokenizer** out) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(out);
  *out = nullptr;
  MPK_NULL_CHECK(path);
  auto t = std::make_unique<mpk_tokenizer>();
  t->impl = mpk::text::Tokenizer::load(path);
  *out = t.release();
  MPK_API_END();
}

mpk_status mpk_model_tokenizer(const mpk_model* model, mpk_tokenizer** out) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(out);
  *out = nullptr;
  MPK_NULL_CHECK(model);
  auto t = std::make_unique<mpk_tokenizer>();
  t->impl = mpk::text::Tokenizer::load(std::filesystem::path(model->dir) / "tokenizer.json");
  *out = t.release();
  MPK_API_END();
}

void mpk_tokenizer_destroy(mpk_tokenizer* tok) { delete tok; }

mpk_status mpk_tokenizer_vocab_size(const mpk_tokenizer* tok, size_t* size) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(tok);
  MPK_NULL_CHECK(size);
  *size = size_t(tok->impl->vocab_size());
  MPK_API_END();
}

mpk_status mpk_tokenizer_encode(const mpk_tokenizer* tok, const char* text, size_t len,
                                int add_special_tokens, int32_t* ids, size_t capacity, size_t* n_ids) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(n_ids);
  *n_ids = 0;
  MPK_NULL_CHECK(tok);
  MPK_CHECK(text != nullptr || len == 0, InvalidArgument) << "text is NULL";
  MPK_CHECK(ids != nullptr || capacity == 0, InvalidArgument) << "ids is NULL";
  const std::vector<int32_t> v =
      tok->impl->encode(std::string_view(text ? text : "", len), add_special_tokens != 0);
  *n_ids = v.size();
  MPK_CHECK(v.size() <= capacity, Capacity)
      << "the text has " << v.size() << " tokens, the buffer holds " << capacity;
  std::copy(v.begin(), v.end(), ids);
  MPK_API_END();
}

mpk_status mpk_tokenizer_decode(const mpk_tokenizer* tok, const int32_t* ids, size_t n,
                                int skip_special, char* text, size_t capacity, size_t* len) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(len);
  *len = 0;
  MPK_NULL_CHECK(tok);
  MPK_CHECK(ids != nullptr || n == 0, InvalidArgument) << "ids is NULL";
  MPK_CHECK(text != nullptr || capacity == 0, InvalidArgument) << "text is NULL";
  const std::string s = tok->impl->decode(std::span<const int32_t>(ids, n), skip_special != 0);
  *len = s.size();
  MPK_CHECK(s.size() < capacity, Capacity)
      << "the text has " << s.size() << " bytes and a NUL, the buffer holds " << capacity;
  std::memcpy(text, s.c_str(), s.size() + 1);
  MPK_API_END();
}

mpk_status mpk_detokenizer_create(const mpk_tokenizer* tok, int skip_special, mpk_detokenizer** out) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(out);
  *out = nullptr;
  MPK_NULL_CHECK(tok);
  auto d = std::make_unique<mpk_detokenizer>();
  d->impl = std::make_unique<mpk::text::StreamDecoder>(tok->impl, skip_special != 0);
  *out = d.release();
  MPK_API_END();
}

mpk_status mpk_detokenizer_push(mpk_detokenizer* d, int32_t id, const char** text, size_t* len) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(d);
  MPK_NULL_CHECK(text);
  MPK_NULL_CHECK(len);
  d->text = d->impl->push(id);
  *text = d->text.c_str();
  *len = d->text.size();
  MPK_API_END();
}

mpk_status mpk_detokenizer_finish(mpk_detokenizer* d, const char** text, size_t* len) {
  MPK_API_BEGIN();
  MPK_NULL_CHECK(d);
  MPK_NULL_CHECK(text);
  MPK_NULL_CHECK(len);
  d->text = d->impl->finish();
  *text = d->text.c_str();
  *len = d->text.size();
  MPK_API_END();
}

void mpk_detokenizer_destroy(mpk_detokenizer* d) { delete d; }

}  // extern "C"
