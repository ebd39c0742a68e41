/* Statically linked models (docs/system-lib.md) through the C ABI: which prefixes the program
 * holds decides what mote_model_from_system_lib finds.
 *
 *   test_system_lib linked PREFIX...    each PREFIX loads and has functions; an unknown prefix
 *                                       is MOTE_ERROR_CODE_LOAD naming every PREFIX
 *   test_system_lib dropped PREFIX...   each PREFIX is MOTE_ERROR_CODE_LOAD (the program was
 *                                       linked with the models' archive, but not whole, so the
 *                                       linker left the objects out)
 * (The outputs of linked models are compared with TVM's by test_zoo.c.)
 */
#include "mote.h"
#include "check.h"

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "linked") != 0 && strcmp(argv[1], "dropped") != 0)) {
        fprintf(stderr, "usage: %s linked|dropped PREFIX...\n", argv[0]);
        return 2;
    }
    int linked = strcmp(argv[1], "linked") == 0;
    for (int i = 2; i < argc; i++) {
        MoteModel *model = NULL;
        if (linked) {
            size_t n = 0;
            OK(mote_model_from_system_lib(argv[i], &model));
            OK(mote_model_function_count(model, &n));
            CHECK(n > 0);
            mote_model_free(model);
        } else {
            FAILS(mote_model_from_system_lib(argv[i], &model), MOTE_ERROR_CODE_LOAD,
                  "whole-archive");
            CHECK(model == NULL);
        }
    }
    if (linked) {
        MoteModel *model = NULL;
        MoteError *err = mote_model_from_system_lib("nosuch_", &model);
        CHECK(err && mote_error_code(err) == MOTE_ERROR_CODE_LOAD && model == NULL);
        for (int i = 2; err && i < argc; i++) {
            char quoted[256];
            snprintf(quoted, sizeof quoted, "`%s`", argv[i]);
            if (!strstr(mote_error_message(err), quoted)) {
                fprintf(stderr, "the error \"%s\" does not list %s\n", mote_error_message(err),
                        quoted);
                failures++;
            }
        }
        mote_error_free(err);
        FAILS(mote_model_from_system_lib(NULL, &model), MOTE_ERROR_CODE_NULL_ARGUMENT, "prefix");
    }
    return finish(linked ? "test_system_lib linked" : "test_system_lib dropped");
}
