#include <stdio.h>
#include "mote.h"

int main(int argc, char **argv) {
    MoteModel *model = NULL; MoteSession *session = NULL; MoteTensorList *outputs = NULL;
    MoteTensor *x = NULL, *y = NULL; MoteTensorInfo info;
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8}; int64_t shape[1] = {8};
    MoteDtype f32 = {MOTE_DTYPE_CODE_FLOAT, 32, 1};
    MoteError *err = mote_model_load(argc > 1 ? argv[1] : "model.so", &model);
    if (!err) err = mote_session_new(model, NULL, &session);
    if (!err) err = mote_tensor_from_copy(f32, shape, 1, data, sizeof data, &x);
    if (!err) err = mote_session_run(session, "main", (const MoteTensor *const *)&x, 1, &outputs);
    if (!err) err = mote_tensor_list_get(outputs, 0, &y);
    if (!err) err = mote_tensor_info(y, &info);
    if (!err) printf("y[0] = %g\n", ((float *)info.data)[0]);
    else fprintf(stderr, "error %u: %s\n", mote_error_code(err), mote_error_message(err));
    mote_error_free(err); mote_tensor_free(y); mote_tensor_list_free(outputs);
    mote_tensor_free(x); mote_session_free(session); mote_model_free(model);
    return err != NULL;
}
