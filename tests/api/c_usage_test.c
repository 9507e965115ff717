/* The usage example of mpk.h, as C: load a model, prefill, decode greedily. */
#include <mpk/mpk.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    mpk_status s_ = (call);                                                            \
    if (s_ != MPK_OK) {                                                                \
      fprintf(stderr, "%s failed: %s: %s\n", #call, mpk_status_name(s_), mpk_last_error()); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

int main(int argc, char** argv) {
  mpk_runtime_config rc;
  mpk_runtime* rt = NULL;
  mpk_model_config mc;
  mpk_model* model = NULL;
  mpk_session_config sc;
  mpk_session* s = NULL;
  mpk_model_info info;
  int32_t prompt[3] = {5, 17, 300};
  int32_t out[16];
  size_t n = 0, vocab = 0, pos = 0, i;
  const float* logits = NULL;

  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
    return 2;
  }
  printf("mpk %s\n", mpk_version());
  mpk_runtime_config_init(&rc);
  CHECK(mpk_runtime_create(&rc, &rt));
  mpk_model_config_init(&mc);
  mc.backend = MPK_BACKEND_REFERENCE;
  CHECK(mpk_model_load(rt, argv[1], &mc, &model));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK(mpk_model_info_get(model, &info));
  printf("%s: %d layers, vocab %d\n", info.architecture, info.num_layers, info.vocab_size);
  mpk_session_config_init(&sc);
  sc.kv_capacity = 64;
  CHECK(mpk_session_create(model, &sc, &s));
  CHECK(mpk_session_prefill(s, prompt, 3));
  CHECK(mpk_session_decode(s, 16, out, &n));
  CHECK(mpk_session_logits(s, &logits, &vocab));
  CHECK(mpk_session_position(s, &pos));
  if (n == 0 || n > 16 || vocab != (size_t)info.vocab_size || pos != 3 + n) {
    fprintf(stderr, "unexpected result: n=%zu vocab=%zu pos=%zu\n", n, vocab, pos);
    return 1;
  }
  for (i = 0; i < n; ++i) {
    if (out[i] < 0 || out[i] >= info.vocab_size) {
      fprintf(stderr, "token %d out of range\n", out[i]);
      return 1;
    }
    printf("%d ", out[i]);
  }
  printf("\n");
  mpk_session_destroy(s);
  mpk_model_destroy(model);
  mpk_runtime_destroy(rt);
  /* NULL is a no-op. */
  mpk_session_destroy(NULL);
  mpk_model_destroy(NULL);
  mpk_runtime_destroy(NULL);
  return 0;
}
