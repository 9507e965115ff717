/* A host application built against an installed mpk. */
#include <mpk/mpk.h>
#include <stdio.h>

int main(int argc, char** argv) {
  mpk_runtime_config rc;
  mpk_model_config mc;
  mpk_session_config sc;
  mpk_runtime* rt = NULL;
  mpk_model* model = NULL;
  mpk_session* s = NULL;
  int32_t prompt[2] = {1, 2};
  int32_t out[4];
  size_t n = 0;
  mpk_status st;
  if (argc != 2) return 2;
  mpk_runtime_config_init(&rc);
  mpk_model_config_init(&mc);
  mc.backend = MPK_BACKEND_REFERENCE;
  mpk_session_config_init(&sc);
  sc.kv_capacity = 16;
  if ((st = mpk_runtime_create(&rc, &rt)) != MPK_OK ||
      (st = mpk_model_load(rt, argv[1], &mc, &model)) != MPK_OK ||
      (st = mpk_session_create(model, &sc, &s)) != MPK_OK ||
      (st = mpk_session_prefill(s, prompt, 2)) != MPK_OK ||
      (st = mpk_session_decode(s, 4, out, &n)) != MPK_OK) {
    fprintf(stderr, "consumer: %s: %s\n", mpk_status_name(st), mpk_last_error());
    return 1;
  }
  printf("consumer: mpk %s decoded %zu tokens\n", mpk_version(), n);
  mpk_session_destroy(s);
  mpk_model_destroy(model);
  mpk_runtime_destroy(rt);
  return n > 0 ? 0 : 1;
}
