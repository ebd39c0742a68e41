/* Load one crafted file code-free through the C ABI (ffi/include/mote.h), read into memory
 * (MOTE_LOAD_READ_FILE), make a session with the default options and call `main` with no
 * arguments. Prints `code N: MESSAGE` (N = 0 when everything succeeded) and exits 0 whatever
 * the outcome: scripts/test-crafted.sh compares N with the manifest (python/crafted.py).
 * A crash, abort or hang is what the script catches by the exit status and its time limit. */
#include <stdio.h>
#include "mote.h"

int main(int argc, char **argv) {
    MoteModel *model = NULL; MoteSession *session = NULL; MoteTensorList *outputs = NULL;
    MoteError *err;
    if (argc != 2) { fprintf(stderr, "usage: crafted_load FILE\n"); return 2; }
    err = mote_model_load_with_options(argv[1], MOTE_LOAD_CODE_FREE | MOTE_LOAD_READ_FILE, &model);
    if (!err) err = mote_session_new(model, NULL, &session);
    if (!err) err = mote_session_run(session, "main", NULL, 0, &outputs);
    if (err) printf("code %u: %s\n", (unsigned)mote_error_code(err), mote_error_message(err));
    else printf("code 0: ok\n");
    mote_error_free(err); mote_tensor_list_free(outputs);
    mote_session_free(session); mote_model_free(model);
    return 0;
}
