/* The OpenCL options of the C ABI (docs/opencl.md): a model compiled for OpenCL on a chosen
 * device, the session's device as DLPack codes, its outputs against TVM's, device tensors
 * (upload, a call that keeps its results on the device, download), and the errors.
 *
 *   test_opencl OPENCL_ZOO ZOO CACHE_DIR INPUT.f32 EXPECTED.f32
 *
 * OPENCL_ZOO: scripts/opencl-zoo.sh's folder (mlp_cl.so: main(x[1,16] f32) -> [1,8]); ZOO: the
 * x86_64 zoo (raise.so, a CPU model); CACHE_DIR: an empty directory for the program cache;
 * INPUT/EXPECTED: mlp_cl.main's input `arg0` and TVM's output `out0` as raw little-endian
 * floats (scripts/test-ffi.sh writes them from the zoo's .npz files). Needs an OpenCL device
 * (POCL on the test host: scripts/opencl.sh). */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "mote.h"
#include "check.h"

/* Reads exactly `n` floats from `path`; exits on a short or long file. */
static void read_floats(const char *path, float *out, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    size_t got = fread(out, sizeof(float), n, f);
    int extra = fgetc(f);
    fclose(f);
    if (got != n || extra != EOF) {
        fprintf(stderr, "%s: expected exactly %zu floats\n", path, n);
        exit(1);
    }
}

static int entries_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

/* `y` is mlp_cl's [1, 8] output, within 1e-5 of `expected`; `what` and `k` name the call. */
static void check_output(const MoteTensor *y, const float expected[8], const char *what, int k) {
    MoteTensorInfo info;
    OK(mote_tensor_info(y, &info));
    CHECK(info.ndim == 2 && info.shape[0] == 1 && info.shape[1] == 8);
    CHECK(info.byte_size == 8 * sizeof(float));
    const float *got = info.data;
    int bad = 0;
    for (int i = 0; i < 8; i++)
        if (!(fabsf(got[i] - expected[i]) <= 1e-5f + 1e-5f * fabsf(expected[i]))) {
            fprintf(stderr, "%s %d: out0[%d] = %g, expected %g\n", what, k, i, got[i], expected[i]);
            bad++;
        }
    CHECK(bad == 0);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s OPENCL_ZOO ZOO CACHE_DIR INPUT.f32 EXPECTED.f32\n", argv[0]);
        return 2;
    }
    const char *clzoo = argv[1], *zoo = argv[2], *cache = argv[3];
    float x[16], expected[8];
    read_floats(argv[4], x, 16);
    read_floats(argv[5], expected, 8);

    MoteModel *m = NULL;
    OK(mote_model_load(file_in(clzoo, "mlp_cl.so"), &m));
    MoteSessionOptions *o = NULL;
    OK(mote_session_options_new(&o));

    /* Argument checks of the new options. */
    FAILS(mote_session_options_set_opencl_program_cache(o, ""), MOTE_ERROR_CODE_INVALID_ARGUMENT,
          "empty OpenCL program cache");
    OK(mote_session_options_set_opencl_program_cache(o, NULL));
    FAILS(mote_session_options_set_opencl_device(NULL, 0), MOTE_ERROR_CODE_NULL_ARGUMENT, "");

    /* Device 99 does not exist: the session is refused, naming the option. */
    OK(mote_session_options_set_opencl_device(o, 99));
    MoteSession *s = NULL;
    FAILS(mote_session_new(m, o, &s), MOTE_ERROR_CODE_INVALID_ARGUMENT, "opencl_device 99");
    CHECK(s == NULL);

    /* Device 0, profiled, with a program cache: runs main and matches TVM's output. */
    OK(mote_session_options_set_opencl_device(o, 0));
    OK(mote_session_options_set_opencl_profiling(o, true));
    OK(mote_session_options_set_opencl_program_cache(o, cache));
    OK(mote_session_new(m, o, &s));
    int32_t type = -1, id = -1;
    OK(mote_session_device(s, &type, &id));
    CHECK(type == 4 && id == 0);
    FAILS(mote_session_device(s, NULL, &id), MOTE_ERROR_CODE_NULL_ARGUMENT, "device_type");
    FAILS(mote_session_device(s, &type, NULL), MOTE_ERROR_CODE_NULL_ARGUMENT, "device_id");

    int64_t shape[2] = {1, 16};
    MoteDtype f32 = {MOTE_DTYPE_CODE_FLOAT, 32, 1};
    MoteTensor *in = NULL;
    OK(mote_tensor_from_copy(f32, shape, 2, x, sizeof x, &in));
    for (int round = 0; round < 2; round++) {
        MoteTensorList *outs = NULL;
        MoteTensor *y = NULL;
        size_t n = 0;
        OK(mote_session_run(s, "main", (const MoteTensor *const *)&in, 1, &outs));
        OK(mote_tensor_list_len(outs, &n));
        CHECK(n == 1);
        OK(mote_tensor_list_get(outs, 0, &y));
        check_output(y, expected, "host call", round);
        mote_tensor_free(y);
        mote_tensor_list_free(outs);
    }
    /* The program built on device 0 went into the cache directory. */
    CHECK(entries_in(cache) > 0);

    /* Device tensors: the input uploaded once, main run on it and on a host tensor with the
     * results kept on the device, then downloaded and compared. */
    MoteDeviceTensor *dx = NULL;
    OK(mote_session_upload(s, in, &dx));
    size_t dndim = 0;
    type = -1, id = -1;
    OK(mote_device_tensor_info(dx, &type, &id, &dndim));
    CHECK(type == 4 && id == 0 && dndim == 2);
    OK(mote_device_tensor_info(dx, NULL, NULL, NULL));
    MoteCallArg args[2] = {{NULL, dx}, {in, NULL}};
    for (int k = 0; k < 2; k++) {
        MoteDeviceTensorList *douts = NULL;
        MoteDeviceTensor *dy = NULL;
        MoteTensor *y = NULL;
        size_t n = 0;
        OK(mote_session_run_device(s, "main", &args[k], 1, &douts));
        OK(mote_device_tensor_list_len(douts, &n));
        CHECK(n == 1);
        FAILS(mote_device_tensor_list_get(douts, 1, &dy), MOTE_ERROR_CODE_INVALID_ARGUMENT, "");
        OK(mote_device_tensor_list_get(douts, 0, &dy));
        mote_device_tensor_list_free(douts); /* the handle taken from it stays valid */
        OK(mote_device_tensor_info(dy, &type, &id, &dndim));
        CHECK(type == 4 && id == 0 && dndim == 2);
        OK(mote_session_download(s, dy, &y));
        check_output(y, expected, "device call", k);
        mote_tensor_free(y);
        mote_device_tensor_free(dy);
    }
    /* A downloaded input is the uploaded one, bit for bit. */
    MoteTensor *back = NULL;
    MoteTensorInfo binfo;
    OK(mote_session_download(s, dx, &back));
    OK(mote_tensor_info(back, &binfo));
    CHECK(binfo.byte_size == sizeof x && memcmp(binfo.data, x, sizeof x) == 0);
    mote_tensor_free(back);
    /* Malformed call arguments. */
    MoteDeviceTensorList *dl = NULL;
    MoteCallArg neither = {NULL, NULL}, both = {in, dx};
    FAILS(mote_session_run_device(s, "main", &neither, 1, &dl), MOTE_ERROR_CODE_INVALID_ARGUMENT,
          "input 0");
    FAILS(mote_session_run_device(s, "main", &both, 1, &dl), MOTE_ERROR_CODE_INVALID_ARGUMENT,
          "exactly one");
    FAILS(mote_session_run_device(s, "main", NULL, 1, &dl), MOTE_ERROR_CODE_NULL_ARGUMENT, "inputs");
    FAILS(mote_session_run_device(s, "main", args, 1, NULL), MOTE_ERROR_CODE_NULL_ARGUMENT, "outputs");
    FAILS(mote_session_upload(s, in, NULL), MOTE_ERROR_CODE_NULL_ARGUMENT, "out");
    mote_tensor_free(in);
    mote_session_free(s);

    /* A session without the options picks a device by itself (POCL's CPU device here: 0). */
    OK(mote_session_new(m, NULL, &s));
    OK(mote_session_device(s, &type, &id));
    CHECK(type == 4 && id == 0);
    mote_session_free(s);
    mote_model_free(m);

    /* A CPU model ignores the OpenCL options and says it runs on the CPU. */
    OK(mote_session_options_set_opencl_device(o, 99));
    OK(mote_model_load(file_in(zoo, "raise.so"), &m));
    OK(mote_session_new(m, o, &s));
    type = -1, id = -1;
    OK(mote_session_device(s, &type, &id));
    CHECK(type == 1 && id == 0);
    /* Device tensors need a session on a device. */
    MoteTensor *h = NULL;
    float eight[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t eshape[1] = {8};
    OK(mote_tensor_from_copy(f32, eshape, 1, eight, sizeof eight, &h));
    MoteDeviceTensor *none = NULL;
    FAILS(mote_session_upload(s, h, &none), MOTE_ERROR_CODE_INVALID_ARGUMENT, "runs on the CPU");
    CHECK(none == NULL);
    MoteCallArg harg = {h, NULL};
    FAILS(mote_session_run_device(s, "main", &harg, 1, &dl), MOTE_ERROR_CODE_INVALID_ARGUMENT,
          "runs on the CPU");
    FAILS(mote_session_download(s, dx, &h), MOTE_ERROR_CODE_INVALID_ARGUMENT, "opencl:0");
    mote_tensor_free(h);
    mote_session_free(s);
    mote_model_free(m);
    mote_session_options_free(o);
    /* The device tensor outlives its session and model; freed last. */
    mote_device_tensor_free(dx);
    FAILS(mote_device_tensor_info(dx, NULL, NULL, NULL), MOTE_ERROR_CODE_INVALID_HANDLE, "");
    mote_device_tensor_free(NULL);
    FAILS(mote_session_device(NULL, &type, &id), MOTE_ERROR_CODE_NULL_ARGUMENT, "");
    return finish("test_opencl");
}
