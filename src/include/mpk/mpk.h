/* mpk — a JIT runtime that compiles a decoder LLM's decode step into one persistent GPU
 * megakernel. This is the whole public interface.
 *
 * Conventions (like cuda.h / sqlite3.h):
 *   - every fallible function returns an mpk_status and writes results through out-params;
 *   - on failure, mpk_last_error() holds a human-readable message (thread-local);
 *   - config structs are filled by mpk_*_config_init() before use (sets struct_size);
 *   - *_destroy(NULL) is a no-op.
 *
 * Usage:
 *   mpk_runtime_config rc; mpk_runtime_config_init(&rc);
 *   mpk_runtime* rt = NULL;
 *   if (mpk_runtime_create(&rc, &rt) != MPK_OK) { fprintf(stderr, "%s\n", mpk_last_error()); }
 *   mpk_model_config mc; mpk_model_config_init(&mc);          // mc.backend = MPK_BACKEND_AUTO
 *   mpk_model* model = NULL;
 *   mpk_model_load(rt, "path/to/model_dir", &mc, &model);
 *   mpk_session_config sc; mpk_session_config_init(&sc);      // sc.kv_capacity = 4096 tokens
 *   mpk_session* s = NULL;
 *   mpk_session_create(model, &sc, &s);
 *   int32_t prompt[3] = {5, 17, 300};
 *   mpk_session_prefill(s, prompt, 3);
 *   int32_t out[16]; size_t n = 0;
 *   mpk_session_decode(s, 16, out, &n);                       // greedy
 *   mpk_session_destroy(s); mpk_model_destroy(model); mpk_runtime_destroy(rt);
 */
#ifndef MPK_MPK_H_
#define MPK_MPK_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define MPK_API __declspec(dllexport)
#else
#define MPK_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define MPK_VERSION_MAJOR 0
#define MPK_VERSION_MINOR 8
#define MPK_VERSION_PATCH 0

/* ---- status ----------------------------------------------------------------------------- */

typedef enum mpk_status {
  MPK_OK = 0,
  MPK_ERROR_INVALID_ARGUMENT = -1, /* NULL handle/pointer, wrong struct_size, bad value */
  MPK_ERROR_NOT_FOUND = -2,        /* model directory or file missing */
  MPK_ERROR_INVALID_MODEL = -3,    /* malformed config.json, safetensors or tensor set */
  MPK_ERROR_UNSUPPORTED = -4,      /* unsupported architecture, dtype or option */
  MPK_ERROR_NO_DEVICE = -5,        /* no CUDA driver or no usable GPU */
  MPK_ERROR_CUDA = -6,             /* a CUDA driver call failed */
  MPK_ERROR_COMPILE = -7,          /* kernel compilation failed */
  MPK_ERROR_CACHE = -8,            /* kernel cache failure */
  MPK_ERROR_CAPACITY = -9,         /* KV-cache capacity or a caller's buffer exceeded */
  MPK_ERROR_OUT_OF_MEMORY = -10,
  MPK_ERROR_BAD_STATE = -11,       /* call not valid now (e.g. decode before prefill) */
  MPK_ERROR_IO = -12,              /* read/write/mmap failure */
  MPK_ERROR_TIMEOUT = -13,         /* a deadline passed */
  MPK_ERROR_NUMERICS = -14,        /* logits or a chosen token came from NaN/Inf values */
  MPK_ERROR_INTERNAL = -99         /* an mpk bug: please report it */
} mpk_status;

/// Name of a status, e.g. "MPK_ERROR_NOT_FOUND"; "MPK_STATUS_UNKNOWN" for other values.
MPK_API const char* mpk_status_name(mpk_status status);
/// Message of the last failed call on this thread ("" if none). Valid until the next mpk call
/// on this thread. Works even when a *_create failed and no handle exists.
MPK_API const char* mpk_last_error(void);
/// Library version as "MAJOR.MINOR.PATCH"; static storage.
MPK_API const char* mpk_version(void);

/* ---- runtime ---------------------------------------------------------------------------- */

typedef struct mpk_runtime mpk_runtime;
typedef struct mpk_model mpk_model;
typedef struct mpk_session mpk_session;

typedef enum mpk_log_level {
  MPK_LOG_DEBUG = 0,
  MPK_LOG_INFO = 1,
  MPK_LOG_WARN = 2,
  MPK_LOG_ERROR = 3
} mpk_log_level;

typedef void (*mpk_log_callback)(mpk_log_level level, const char* message, void* user_data);
/* Progress of a long phase: "read" (the model's files), "plan", "prove", "kernel" (the kernel
 * cache, or compiling on a miss), "upload" (weights to the GPU) and "tune" (MPK_TUNE_ON_MISS's
 * search, in thousandths) during mpk_model_load, and "prefill" during mpk_session_prefill; `done` of `total` units (bytes or tokens), called at
 * least at the start (done 0; total 0 when unknown) and the end (done == total, both > 0; 1 of
 * 1 for a phase without units), on the thread making the call. */
typedef void (*mpk_progress_callback)(const char* phase, uint64_t done, uint64_t total,
                                      void* user_data);

typedef enum mpk_backend {
  MPK_BACKEND_AUTO = 0,      /* the GPU when one is usable, else the CPU reference (logged) */
  MPK_BACKEND_GPU = 1,       /* the GPU megakernel; MPK_ERROR_NO_DEVICE / UNSUPPORTED if not */
  MPK_BACKEND_REFERENCE = 2  /* the CPU reference executor (fp32) */
} mpk_backend;

/* Where a GPU model's megakernel code parameters come from (mpk-tune tune searches them). */
typedef enum mpk_tune_policy {
  MPK_TUNE_CACHE_ONLY = 0,    /* a tuning result for the model, the GPU and the toolkit in the
                                 kernel cache, else the model's defaults (the default); a result
                                 whose kernel fails to build is logged and the defaults run
                                 (mpk_stats.tuned is 0) */
  MPK_TUNE_DEFAULTS_ONLY = 1, /* the model's defaults, whatever the cache holds */
  MPK_TUNE_ON_MISS = 2        /* as CACHE_ONLY; without a result (or with one whose kernel fails
                                 to build), mpk_model_load searches within tune_budget_s
                                 (reported as the "tune" phase) and stores what it finds */
} mpk_tune_policy;

typedef struct mpk_runtime_config {
  size_t struct_size;           /* set by mpk_runtime_config_init */
  int32_t device;               /* CUDA device ordinal (default 0) */
  const char* cache_dir;        /* kernel cache directory; NULL: $MPK_CACHE_DIR, else
                                   $HOME/.cache/mpk (read when a model loads) */
  int32_t num_threads;          /* host threads for the reference backend; 0: all cores */
  mpk_log_callback log_callback;/* NULL: warnings to stderr (level: $MPK_LOG). Process-wide:
                                   the last runtime created with one receives all messages */
  void* log_user_data;
  mpk_progress_callback progress_callback; /* NULL: none; for this runtime's models */
  void* progress_user_data;
  mpk_tune_policy tune_policy;  /* default MPK_TUNE_CACHE_ONLY (since 0.5; a caller whose
                                   struct_size ends before it gets the defaults) */
  double tune_budget_s;         /* MPK_TUNE_ON_MISS: the search's wall time, > 0 (default 120;
                                   weight upload and compiles count, the last comparison runs
                                   past it) */
} mpk_runtime_config;

/// Fills defaults and struct_size. `cfg` must not be NULL.
MPK_API void mpk_runtime_config_init(mpk_runtime_config* cfg);
/// Creates a runtime. Does not touch the GPU (a machine without one can create it).
/// Thread-safe handle. Returns MPK_OK or MPK_ERROR_INVALID_ARGUMENT.
MPK_API mpk_status mpk_runtime_create(const mpk_runtime_config* cfg, mpk_runtime** out);
/// Destroys a runtime; all its models must be destroyed first. NULL is a no-op.
MPK_API void mpk_runtime_destroy(mpk_runtime* rt);

/* ---- model ------------------------------------------------------------------------------ */

typedef struct mpk_model_config {
  size_t struct_size;  /* set by mpk_model_config_init */
  mpk_backend backend; /* default MPK_BACKEND_AUTO */
  int32_t validate_weights; /* nonzero: scan every weight for NaN/Inf at load (reads all the
                               bytes once; MPK_ERROR_INVALID_MODEL names the first). Default 0.
                               (Since 0.3, in what was padding: the struct's size is
                               unchanged and mpk_model_config_init zeroes it.) */
} mpk_model_config;

typedef enum mpk_family {
  MPK_FAMILY_QWEN3 = 0,
  MPK_FAMILY_QWEN2 = 1, /* Qwen2 / Qwen2.5: q/k/v bias */
  MPK_FAMILY_LLAMA = 2  /* Llama 3.x (llama3 rope scaling) */
} mpk_family;

typedef enum mpk_dtype { MPK_DTYPE_F32 = 0, MPK_DTYPE_F16 = 1, MPK_DTYPE_BF16 = 2 } mpk_dtype;

typedef struct mpk_model_info {
  size_t struct_size;     /* caller sets sizeof(mpk_model_info) */
  mpk_family family;
  char architecture[64];  /* e.g. "Qwen3ForCausalLM" */
  int32_t num_layers;
  int32_t hidden_size;
  int32_t intermediate_size;
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t vocab_size;
  int32_t max_position_embeddings;
  int32_t tied_embeddings; /* 1 when the LM head reuses the embedding matrix */
  mpk_dtype dtype;         /* weight dtype as stored */
  uint64_t num_parameters; /* unique parameters (a tied matrix counted once) */
  mpk_backend backend;     /* the backend actually in use (never AUTO) */
  int32_t num_eos_token_ids;     /* end-of-sequence ids (config + generation_config) */
  int32_t eos_token_ids[8];      /* the first min(num_eos_token_ids, 8) of them */
} mpk_model_info;

/// Loads a Hugging Face model directory (config.json + safetensors, optionally sharded).
/// Only regular files are opened (a FIFO or device is refused without blocking). The loaded
/// model keeps no file mapped: the reference backend reads the weights into memory, the GPU
/// backend frees its host copy after the upload, so the files may change or be truncated
/// afterwards without effect. The model is immutable: thread-safe, shared by sessions.
/// Returns MPK_ERROR_NOT_FOUND, _INVALID_MODEL, _UNSUPPORTED, _NO_DEVICE (backend GPU), _IO
/// (permission denied, read failure), _INVALID_ARGUMENT; on failure *out is set to NULL.
MPK_API void mpk_model_config_init(mpk_model_config* cfg);
MPK_API mpk_status mpk_model_load(mpk_runtime* rt, const char* model_dir,
                                  const mpk_model_config* cfg, mpk_model** out);
/// Fills `info` (info->struct_size must be set). Thread-safe.
MPK_API mpk_status mpk_model_info_get(const mpk_model* model, mpk_model_info* info);
/// Since 0.7: every end-of-sequence id of the model (mpk_model_info holds the first 8): writes
/// the first min(capacity, total) to ids (NULL allowed when capacity is 0) and the total to
/// *count. The ids at which mpk_session_decode stops. MPK_ERROR_INVALID_ARGUMENT for a NULL
/// model or count, or NULL ids with a capacity. Thread-safe.
MPK_API mpk_status mpk_model_eos_token_ids(const mpk_model* model, int32_t* ids, size_t capacity, size_t* count);
/// Destroys a model; its sessions must be destroyed first. NULL is a no-op.
MPK_API void mpk_model_destroy(mpk_model* model);

typedef struct mpk_stats {
  size_t struct_size;       /* caller sets sizeof(mpk_stats) */
  mpk_backend backend;      /* the backend in use */
  uint64_t num_tasks;       /* tasks in the decode step (0 on the reference backend) */
  uint64_t num_workers;     /* worker CTAs of the megakernel (one per SM; 0 on the reference) */
  uint64_t num_kernels;     /* compiled kernel modules: the megakernel, and the prefill
                               kernels for bf16 models */
  uint64_t cache_hits;      /* kernels loaded from the kernel cache */
  uint64_t cache_misses;    /* kernels compiled at load */
  uint64_t proved;          /* kernel modules whose proofs all hold (Z3, before they run;
                               a kernel with a failed proof never loads): num_kernels on
                               the GPU */
  uint64_t host_fallback_ops;   /* ops run on the host per step: on the GPU, ops no megakernel
                                   variant implements, run by the reference's code between
                                   launches of the megakernel's segments (mpk-tune coverage
                                   lists them); all of them on the reference */
  uint64_t host_fallback_bytes; /* GPU: bytes copied per step for them: inputs to the host
                                   (those another host op made stay there), outputs back;
                                   the status and counter words besides */
  double compile_ms;        /* time spent compiling at load */
  uint64_t launches;        /* GPU kernel launches so far (one per step, or per N steps in
                               multi-step mode; a step of a model with host-fallback ops is
                               one launch per segment: host_fallback_ops and the segments
                               mpk-tune coverage reports) */
  uint64_t tokens;          /* tokens processed so far (prefill + decode), all sessions */
  uint64_t device_bytes;    /* GPU memory held now: weights + KV caches + activations of the
                               live sessions (0 on the reference backend) */
  uint64_t proof_obligations; /* obligations proved for those kernels (mpk-tune prove lists
                                 them) */
  /* Wall time of mpk_model_load's phases (mpk_progress_callback names them), ms; load_ms is
   * the whole call. */
  double read_ms, plan_ms, prove_ms, kernel_ms, upload_ms, load_ms;
  /* Since 0.5 (a caller whose struct_size ends before them does not get them): */
  int32_t tuned;                /* 1: the megakernel's parameters come from a tuning result (found
                                   in the cache, or searched by this load) */
  uint64_t tune_candidates;     /* parameter sets this load's search timed (MPK_TUNE_ON_MISS) */
  uint64_t tune_changed_params; /* parameters the kernel runs with that differ from the model's
                                   defaults */
  double tune_ms;               /* this load's search, included in load_ms */
  /* Since 0.6: */
  uint64_t tune_stages_changed;  /* stage classes of the decode step (linear, down, LM head,
                                    attention, merge, MLP, worker) whose parameters differ from
                                    the defaults */
  uint64_t tune_stages_searched; /* stage classes this load's search timed candidates of */
  /* Since 0.8: */
  double host_fallback_ms;       /* GPU: host time spent running host-fallback ops, all sessions
                                    so far (their copies are stream-ordered around the
                                    launches, in the step's time) */
} mpk_stats;

/// Statistics of a model (all its sessions). Thread-safe.
MPK_API mpk_status mpk_model_stats(const mpk_model* model, mpk_stats* stats);

/* ---- session ---------------------------------------------------------------------------- */

typedef struct mpk_session_config {
  size_t struct_size;  /* set by mpk_session_config_init */
  size_t kv_capacity;  /* tokens the KV cache holds; default 4096; at most max_position_embeddings */
  size_t steps_per_launch; /* GPU: decode steps one megakernel launch runs (>= 1, default 1; at
                              most 4096 are used). 1 is the single-step mode: the host controls
                              every step. N > 1 is the multi-step mode: the device feeds each
                              argmax to the next step and stops at an EOS id, so
                              mpk_session_decode(s, k, ...) needs about k / N launches; logits are
                              those of the last step either way. A model with host-fallback ops
                              (mpk_stats) runs one step at a time whatever N is: its step is a
                              launch per segment with the host between them. A prompt of 4 tokens or more
                              on a bf16 model is prefilled on the tensor cores in chunks of up
                              to 4096 tokens; others run as decode steps, in launches of up to
                              4096 tokens. (Since 0.2; a caller whose
                              struct_size ends before this field gets the defaults.) */
  int profile;         /* GPU: nonzero records per-task device timers (mpk_session_profile) */
  int exact_prefill;   /* GPU: nonzero runs every prompt through the decode step (fp32
                          activations, the reference's arithmetic; about 1 ms per token on
                          Qwen3-0.6B) instead of the tensor-core prefill of bf16 models (bf16
                          operands; docs/PERFORMANCE.md has its accuracy). Default 0. (Since
                          0.4, in what was padding on 64-bit targets: the struct's size is
                          unchanged, so a caller must zero it: mpk_session_config_init does.) */
} mpk_session_config;

/// A session is one sequence with its KV cache. Not thread-safe: use one thread at a time.
MPK_API void mpk_session_config_init(mpk_session_config* cfg);
MPK_API mpk_status mpk_session_create(mpk_model* model, const mpk_session_config* cfg,
                                      mpk_session** out);
/// Appends n >= 1 prompt tokens and computes the logits at the last one.
/// MPK_ERROR_INVALID_ARGUMENT for a token id outside [0, vocab); MPK_ERROR_CAPACITY when the
/// KV cache cannot hold them: after these the session is unchanged. MPK_ERROR_NUMERICS when
/// the resulting logits hold NaN or Inf (they stay readable). After a device failure
/// (MPK_ERROR_CUDA, MPK_ERROR_TIMEOUT) or MPK_ERROR_NUMERICS, prefill and decode return
/// MPK_ERROR_BAD_STATE until mpk_session_reset.
MPK_API mpk_status mpk_session_prefill(mpk_session* s, const int32_t* tokens, size_t n);
/// Decoding: up to max_tokens times, picks a token from the current logits (the argmax, or a
/// draw under mpk_session_set_sampling), writes it to out, and feeds it. Stops after an end-of-sequence token (which is written). *n_out is the
/// number written. MPK_ERROR_BAD_STATE before any prefill; MPK_ERROR_CAPACITY when the KV cache
/// fills before max_tokens; MPK_ERROR_NUMERICS when the next token would be chosen from logits
/// holding NaN or Inf. On both, the tokens written so far are kept and *n_out says how many.
MPK_API mpk_status mpk_session_decode(mpk_session* s, size_t max_tokens, int32_t* out,
                                      size_t* n_out);
/// The fp32 logits at the last fed position (vocab entries). Owned by the session, valid until
/// the next call on it. MPK_ERROR_BAD_STATE before any prefill.
MPK_API mpk_status mpk_session_logits(mpk_session* s, const float** logits, size_t* vocab);
/// Number of tokens in the KV cache.
MPK_API mpk_status mpk_session_position(const mpk_session* s, size_t* position);
/// Empties the KV cache: the session can take a new prompt (also after a device failure).
MPK_API mpk_status mpk_session_reset(mpk_session* s);
/// GPU: the duration in ms of each step of the last prefill or decode call, on the device clock
/// (globaltimer: a step ends when its argmax is written; the first step of a launch starts when
/// the first worker starts); for a prefill on the tensor cores, of each chunk (CUDA events); for
/// a model with host-fallback ops (mpk_stats), whose step is several launches with the host
/// between them, on the host's clock over the step. Owned by the session, valid until the
/// next call on it.
/// MPK_ERROR_UNSUPPORTED on the reference backend.
MPK_API mpk_status mpk_session_step_times(const mpk_session* s, const double** ms, size_t* n);
/// GPU sessions created with cfg.profile: per-task device timers of the last step summed by
/// task kind, as a JSON object {"timer", "step_us", "workers", "tasks", "kinds": [{"kind",
/// "tasks", "stages", "bytes", "span_us", "busy_us_mean", "wait_us_mean", "gbps"}],
/// "timeline": [[task, worker, start, ready, end] in ns from the step's first start]}; a
/// stage's span runs from its first task's ready time to its last task's end. Owned by the
/// session, valid until the next call on it. MPK_ERROR_BAD_STATE without profiling or before any
/// megakernel step since the last reset or tensor-core prefill (which runs none);
/// MPK_ERROR_UNSUPPORTED on the reference backend.
MPK_API mpk_status mpk_session_profile(mpk_session* s, const char** json);

/* Sampling. The token is drawn from softmax(logits / temperature) over the top_k largest
 * logits (0: all), cut to the smallest set of them whose probability reaches top_p (the
 * weights counted in units of 2^-32 of the largest's, so that every backend sums them
 * exactly), with Gumbel noise from Philox4x32-10 keyed by the seed and counted by the token's
 * position and id: the same logits, configuration and seed give the same token on every
 * backend and machine. temperature 0 (the default), or any below 1e-5, is greedy. On the GPU
 * the megakernel draws inside its multi-step launches (the drawn token feeds the next step
 * without a host round trip) under every configuration but a top_p below 1 over more than
 * 2^21 candidates (the top_k, or the whole vocabulary), which no backend draws
 * (mpk_session_set_sampling refuses it, the reference sampler's limit). */
typedef struct mpk_sampling_config {
  size_t struct_size;  /* set by mpk_sampling_config_init */
  float temperature;   /* >= 0; 0 (or below 1e-5): greedy */
  int32_t top_k;       /* >= 0; 0: no top-k */
  float top_p;         /* in (0, 1]; 1: no nucleus cut */
  uint64_t seed;
} mpk_sampling_config;
MPK_API void mpk_sampling_config_init(mpk_sampling_config* cfg);
/// Sets how mpk_session_decode chooses tokens from now on (also across reset).
/// MPK_ERROR_INVALID_ARGUMENT for a value outside its range or a nucleus over more than 2^21
/// candidates of the model's vocabulary; the session is then unchanged.
MPK_API mpk_status mpk_session_set_sampling(mpk_session* s, const mpk_sampling_config* cfg);
MPK_API void mpk_session_destroy(mpk_session* s);

/* ---- tokenizer -------------------------------------------------------------------------- */

/* Text in and out with a model directory's tokenizer.json (Hugging Face tokenizers format;
 * byte-level BPE as Qwen2/Qwen3, Llama 3 and GPT-2 use it). A tokenizer is immutable: one
 * handle may be used from several threads at once. */
typedef struct mpk_tokenizer mpk_tokenizer;
typedef struct mpk_detokenizer mpk_detokenizer;

/// Loads `path`: a tokenizer.json file or a directory holding one. MPK_ERROR_NOT_FOUND when
/// there is none; MPK_ERROR_INVALID_MODEL for a malformed file; MPK_ERROR_UNSUPPORTED for a
/// model type, normalizer, pre-tokenizer, decoder or post-processor mpk does not implement
/// (named in mpk_last_error).
MPK_API mpk_status mpk_tokenizer_load(const char* path, mpk_tokenizer** out);
/// The tokenizer.json of the directory `model` was loaded from; errors as mpk_tokenizer_load.
MPK_API mpk_status mpk_model_tokenizer(const mpk_model* model, mpk_tokenizer** out);
MPK_API void mpk_tokenizer_destroy(mpk_tokenizer* tok);
/// 1 + the largest token id.
MPK_API mpk_status mpk_tokenizer_vocab_size(const mpk_tokenizer* tok, size_t* size);
/// The ids of `len` bytes of UTF-8 `text` (NULL allowed when len is 0). `add_special_tokens`
/// != 0 applies the tokenizer's template (e.g. Llama 3's <|begin_of_text|>). *n_ids is set to
/// the number of ids; when it exceeds `capacity`, nothing is written and the call returns
/// MPK_ERROR_CAPACITY (call again with a larger buffer). MPK_ERROR_INVALID_ARGUMENT when the
/// text is not valid UTF-8.
MPK_API mpk_status mpk_tokenizer_encode(const mpk_tokenizer* tok, const char* text, size_t len,
                                        int add_special_tokens, int32_t* ids, size_t capacity,
                                        size_t* n_ids);
/// The UTF-8 text of `n` ids, NUL-terminated (special tokens left out when skip_special != 0;
/// bytes that do not form UTF-8 become U+FFFD). *len is set to its length without the NUL;
/// when len + 1 exceeds `capacity`, nothing is written and the call returns MPK_ERROR_CAPACITY.
/// An id that is no token (a model's vocabulary is often padded beyond its tokenizer's)
/// decodes to nothing; MPK_ERROR_INVALID_ARGUMENT for a negative id.
MPK_API mpk_status mpk_tokenizer_decode(const mpk_tokenizer* tok, const int32_t* ids, size_t n,
                                        int skip_special, char* text, size_t capacity,
                                        size_t* len);
/// Streaming decode of generated ids: each push hands back the text that became complete (never
/// part of a UTF-8 character; often empty), finish what is left; the pieces joined equal
/// mpk_tokenizer_decode of all the ids. The detokenizer keeps its tokenizer alive. *text is
/// NUL-terminated, owned by the detokenizer and valid until its next call.
MPK_API mpk_status mpk_detokenizer_create(const mpk_tokenizer* tok, int skip_special,
                                          mpk_detokenizer** out);
MPK_API mpk_status mpk_detokenizer_push(mpk_detokenizer* d, int32_t id, const char** text,
                                        size_t* len);
MPK_API mpk_status mpk_detokenizer_finish(mpk_detokenizer* d, const char** text, size_t* len);
MPK_API void mpk_detokenizer_destroy(mpk_detokenizer* d);

#ifdef __cplusplus
}
#endif
#endif /* MPK_MPK_H_ */
