/* Out-of-range enum values as a C caller passes them: legal in C (an enum is an integer type
 * there), undefined behaviour if formed in C++, so the C API target forms them here. */
#include <mpk/mpk.h>

const char* mpk_fuzz_status_name(int status) { return mpk_status_name((mpk_status)status); }

void mpk_fuzz_set_backend(mpk_model_config* cfg, int backend) { cfg->backend = (mpk_backend)backend; }
