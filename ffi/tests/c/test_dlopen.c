/* Mote loaded as a plugin: this program does not link libmote; it dlopens it with RTLD_LOCAL
 * (as a JVM, Python or a plugin host would), so Mote's symbols are not global. A model library
 * loaded through it must still reach TVMFFIErrorSetRaisedFromCStrParts: the kernel error's
 * message must come back intact.
 *
 *   test_dlopen LIBMOTE_SO ZOO_DIR
 */
#include <dlfcn.h>
#include <stdint.h>

#include "mote.h"
#include "check.h"

#define LOAD(sym)                                                          \
    typeof(&sym) p_##sym = (typeof(&sym))dlsym(lib, #sym);                 \
    if (!p_##sym) {                                                        \
        fprintf(stderr, "missing symbol %s\n", #sym);                      \
        return 1;                                                          \
    }

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s LIBMOTE_SO ZOO_DIR\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    CHECK(dlsym(RTLD_DEFAULT, "TVMFFIErrorSetRaisedFromCStrParts") == NULL);
    LOAD(mote_model_load);
    LOAD(mote_session_new);
    LOAD(mote_session_run);
    LOAD(mote_tensor_from_copy);
    LOAD(mote_tensor_free);
    LOAD(mote_tensor_list_free);
    LOAD(mote_session_free);
    LOAD(mote_model_free);
    LOAD(mote_error_code);
    LOAD(mote_error_message);
    LOAD(mote_error_free);

    char path[1200];
    snprintf(path, sizeof path, "%s/raise.so", argv[2]);
    MoteModel *model = NULL;
    MoteSession *session = NULL;
    MoteError *err = p_mote_model_load(path, &model);
    if (err) {
        fprintf(stderr, "load: %s\n", p_mote_error_message(err));
        return 1;
    }
    err = p_mote_session_new(model, NULL, &session);
    CHECK(err == NULL);
    float x[8] = {-1, 2, 3, 4, 5, 6, 7, 8};
    int64_t shape[1] = {8};
    MoteDtype f32 = {MOTE_DTYPE_CODE_FLOAT, 32, 1};
    MoteTensor *t = NULL;
    err = p_mote_tensor_from_copy(f32, shape, 1, x, sizeof x, &t);
    CHECK(err == NULL);
    MoteTensorList *out = NULL;
    err = p_mote_session_run(session, "main", (const MoteTensor *const *)&t, 1, &out);
    CHECK(err != NULL);
    if (err) {
        CHECK(p_mote_error_code(err) == MOTE_ERROR_CODE_KERNEL);
        CHECK(strstr(p_mote_error_message(err), "first element must be non-negative") != NULL);
        fprintf(stderr, "kernel error through a RTLD_LOCAL libmote: %s\n", p_mote_error_message(err));
        p_mote_error_free(err);
    }
    x[0] = 1;
    p_mote_tensor_free(t);
    err = p_mote_tensor_from_copy(f32, shape, 1, x, sizeof x, &t);
    CHECK(err == NULL);
    err = p_mote_session_run(session, "main", (const MoteTensor *const *)&t, 1, &out);
    CHECK(err == NULL);
    p_mote_error_free(err);
    p_mote_tensor_list_free(out);
    p_mote_tensor_free(t);
    p_mote_session_free(session);
    p_mote_model_free(model);
    return finish("test_dlopen");
}
