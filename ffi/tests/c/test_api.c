/* The C ABI's contract, one check at a time: every documented error path, ownership and
 * NULL rules, zero-copy tensors, callbacks, logs, profiles, threads.
 *
 *   test_api ZOO_DIR SCRATCH_DIR
 *
 * Numbers are checked against independent arithmetic done here (the raise model computes
 * 3 * x), never against Mote's own output.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "mote.h"
#include "check.h"

static char zoo[1024], scratch[1024];

static const char *zoo_file(const char *name) {
    static char buf[4][1200];
    static int i = 0;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", zoo, name);
    return buf[i];
}

static const MoteDtype F32 = {MOTE_DTYPE_CODE_FLOAT, 32, 1};
static const MoteDtype I32 = {MOTE_DTYPE_CODE_INT, 32, 1};

static MoteTensor *f32_tensor(const int64_t *shape, size_t ndim, const float *data) {
    size_t n = 1;
    for (size_t i = 0; i < ndim; i++) n *= (size_t)shape[i];
    MoteTensor *t = NULL;
    OK(mote_tensor_from_copy(F32, shape, ndim, data, n * sizeof(float), &t));
    return t;
}

static void test_version(void) {
    CHECK(mote_abi_version() == MOTE_ABI_VERSION);
    CHECK(strlen(mote_version()) >= 5);
}

static void test_errors_and_nulls(void) {
    MoteModel *model = (MoteModel *)0x1; /* out-params stay untouched on failure */
    FAILS(mote_model_load("/nonexistent/model.so", &model), MOTE_ERROR_CODE_IO, "/nonexistent/model.so");
    CHECK(model == (MoteModel *)0x1);
    FAILS(mote_model_load(NULL, &model), MOTE_ERROR_CODE_NULL_ARGUMENT, "path");
    FAILS(mote_model_load(zoo_file("mlp.so"), NULL), MOTE_ERROR_CODE_NULL_ARGUMENT, "out");

    /* A malformed file (not a shared library) and a truncated one. */
    char bad[1200];
    snprintf(bad, sizeof bad, "%s/garbage.so", scratch);
    FILE *f = fopen(bad, "wb");
    fputs("this is not an ELF file at all", f);
    fclose(f);
    FAILS(mote_model_load(bad, &model), MOTE_ERROR_CODE_LOAD, "bad magic");
    FILE *src = fopen(zoo_file("mlp.so"), "rb");
    char head[4096];
    size_t got = fread(head, 1, sizeof head, src);
    fclose(src);
    snprintf(bad, sizeof bad, "%s/truncated.so", scratch);
    f = fopen(bad, "wb");
    fwrite(head, 1, got, f);
    fclose(f);
    FAILS(mote_model_load(bad, &model), MOTE_ERROR_CODE_LOAD, "");
    CHECK(model == (MoteModel *)0x1);

    /* Invalid UTF-8 in a path. */
    FAILS(mote_model_load("\xff\xfe.so", &model), MOTE_ERROR_CODE_INVALID_UTF8, "path");

    /* _free(NULL) is a no-op for every type; mote_error_* accept NULL. */
    mote_model_free(NULL);
    mote_session_free(NULL);
    mote_session_options_free(NULL);
    mote_tensor_free(NULL);
    mote_tensor_list_free(NULL);
    mote_profile_free(NULL);
    mote_error_free(NULL);
    CHECK(mote_error_code(NULL) == 0);
    CHECK(strcmp(mote_error_message(NULL), "") == 0);

    MoteError *e = mote_error_new(1234, "custom");
    CHECK(mote_error_code(e) == 1234 && strcmp(mote_error_message(e), "custom") == 0);
    mote_error_free(e);
}

/* Code-free loads (docs/code-free.md): the zoo's models call TVM kernels, so reading them as
 * data is refused with their names; flag 0 is the ordinary load. */
static void test_code_free(void) {
    MoteModel *model = (MoteModel *)0x1;
    FAILS(mote_model_load_with_options(zoo_file("mlp.so"), MOTE_LOAD_CODE_FREE, &model),
          MOTE_ERROR_CODE_UNSUPPORTED, "mlp.so is not code-free: its program calls compiled kernels");
    CHECK(model == (MoteModel *)0x1);
    FAILS(mote_model_load_with_options(zoo_file("mlp.so"), 0x80, &model), MOTE_ERROR_CODE_INVALID_ARGUMENT,
          "unknown load flags 0x80");
    FAILS(mote_model_load_with_options(NULL, MOTE_LOAD_CODE_FREE, &model), MOTE_ERROR_CODE_NULL_ARGUMENT, "path");
    /* Reading the file instead of mapping it: only for code-free loads; the read file is
     * checked like a mapped one. */
    FAILS(mote_model_load_with_options(zoo_file("mlp.so"), MOTE_LOAD_READ_FILE, &model),
          MOTE_ERROR_CODE_INVALID_ARGUMENT, "needs a code-free load");
    FAILS(mote_model_load_with_options(zoo_file("mlp.so"), MOTE_LOAD_CODE_FREE | MOTE_LOAD_READ_FILE, &model),
          MOTE_ERROR_CODE_UNSUPPORTED, "mlp.so is not code-free: its program calls compiled kernels");
    FILE *src = fopen(zoo_file("mlp.so"), "rb");
    CHECK(src != NULL);
    static unsigned char bytes[1 << 20];
    size_t n = src ? fread(bytes, 1, sizeof bytes, src) : 0;
    if (src) fclose(src);
    CHECK(n > 0 && n < sizeof bytes);
    FAILS(mote_model_load_from_memory_with_options(bytes, n, MOTE_LOAD_CODE_FREE, &model),
          MOTE_ERROR_CODE_UNSUPPORTED, "<memory> is not code-free");
    FAILS(mote_model_load_from_memory_with_options((const uint8_t *)"not an object", 13, MOTE_LOAD_CODE_FREE,
                                                   &model),
          MOTE_ERROR_CODE_FORMAT, "not an ELF or Mach-O");
    CHECK(model == (MoteModel *)0x1);
    OK(mote_model_load_with_options(zoo_file("mlp.so"), 0, &model));
    bool code_free = true, loaded_code_free = true;
    OK(mote_model_is_code_free(model, &code_free, &loaded_code_free));
    CHECK(!code_free && !loaded_code_free);
    OK(mote_model_is_code_free(model, &code_free, NULL));
    FAILS(mote_model_is_code_free(model, NULL, NULL), MOTE_ERROR_CODE_NULL_ARGUMENT, "out");
    mote_model_free(model);
}

static void test_model_info_and_memory_load(void) {
    MoteModel *model = NULL;
    OK(mote_model_load(zoo_file("mlp.so"), &model));
    size_t count = 0;
    OK(mote_model_function_count(model, &count));
    CHECK(count >= 1);
    int found = 0;
    for (size_t i = 0; i < count; i++) {
        const char *name = NULL;
        OK(mote_model_function_name(model, i, &name));
        found |= strcmp(name, "forward") == 0;
    }
    CHECK(found);
    const char *untouched = "x";
    FAILS(mote_model_function_name(model, count, &untouched), MOTE_ERROR_CODE_INVALID_ARGUMENT, "out of range");
    CHECK(strcmp(untouched, "x") == 0);

    size_t params = 0;
    OK(mote_model_param_count(model, "forward", &params));
    CHECK(params == 5);
    MoteParamInfo p;
    OK(mote_model_param_info(model, "forward", 0, &p));
    CHECK(p.dtype.code == MOTE_DTYPE_CODE_FLOAT && p.dtype.bits == 32);
    CHECK(p.ndim == 2 && p.shape[0] == 2 && p.shape[1] == 16);
    CHECK(strlen(p.name) > 0);
    OK(mote_model_param_info(model, "forward", 1, &p)); /* fc1.weight [32,16] */
    CHECK(p.ndim == 2 && p.shape[0] == 32 && p.shape[1] == 16);
    FAILS(mote_model_param_info(model, "forward", 5, &p), MOTE_ERROR_CODE_INVALID_ARGUMENT, "out of range");
    FAILS(mote_model_param_count(model, "nope", &params), MOTE_ERROR_CODE_UNKNOWN_FUNCTION, "nope");
    /* What forward returns, read from its instructions: one float32[2, 8]. */
    size_t outputs = 0;
    OK(mote_model_output_count(model, "forward", &outputs));
    CHECK(outputs == 1);
    OK(mote_model_output_info(model, "forward", 0, &p));
    CHECK(strcmp(p.name, "output") == 0);
    CHECK(p.dtype.code == MOTE_DTYPE_CODE_FLOAT && p.dtype.bits == 32);
    CHECK(p.ndim == 2 && p.shape[0] == 2 && p.shape[1] == 8);
    FAILS(mote_model_output_info(model, "forward", 1, &p), MOTE_ERROR_CODE_INVALID_ARGUMENT, "out of range");
    FAILS(mote_model_output_count(model, "nope", &outputs), MOTE_ERROR_CODE_UNKNOWN_FUNCTION, "nope");
    mote_model_free(model);

    /* The symbolic batch dimension of mlp_dyn is reported as -1, in and out. */
    OK(mote_model_load(zoo_file("mlp_dyn.so"), &model));
    OK(mote_model_param_info(model, "forward", 0, &p));
    CHECK(p.ndim == 2 && p.shape[0] == -1 && p.shape[1] == 16);
    OK(mote_model_output_info(model, "forward", 0, &p));
    CHECK(p.ndim == 2 && p.shape[0] == -1 && p.shape[1] == 8);
    mote_model_free(model);

    /* From memory: the same bytes, no file. */
    FILE *f = fopen(zoo_file("raise.so"), "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)n);
    CHECK(fread(bytes, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    OK(mote_model_load_from_memory(bytes, (size_t)n, &model));
    free(bytes);
    MoteSession *s = NULL;
    OK(mote_session_new(model, NULL, &s));
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t shape[1] = {8};
    MoteTensor *t = f32_tensor(shape, 1, x);
    MoteTensorList *out = NULL;
    OK(mote_session_run(s, "main", (const MoteTensor *const *)&t, 1, &out));
    MoteTensor *y = NULL;
    MoteTensorInfo info;
    OK(mote_tensor_list_get(out, 0, &y));
    OK(mote_tensor_info(y, &info));
    for (int i = 0; i < 8; i++) CHECK(((float *)info.data)[i] == 3 * x[i]);
    mote_tensor_free(y);
    mote_tensor_list_free(out);
    mote_tensor_free(t);
    mote_session_free(s);
    mote_model_free(model);
    unsigned char junk[64] = {0};
    FAILS(mote_model_load_from_memory(junk, sizeof junk, &model), MOTE_ERROR_CODE_LOAD, "");
    FAILS(mote_model_load_from_memory(NULL, 10, &model), MOTE_ERROR_CODE_NULL_ARGUMENT, "data");
}

static void test_call_errors_and_freed_handles(void) {
    MoteModel *model = NULL;
    MoteSession *s = NULL;
    OK(mote_model_load(zoo_file("raise.so"), &model));
    OK(mote_session_new(model, NULL, &s));
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t shape8[1] = {8}, shape4[1] = {4};
    MoteTensor *good = f32_tensor(shape8, 1, x);
    MoteTensor *short_ = f32_tensor(shape4, 1, x);
    MoteTensor *ints = NULL;
    int32_t xi[8] = {0};
    OK(mote_tensor_from_copy(I32, shape8, 1, xi, sizeof xi, &ints));
    MoteTensorList *out = (MoteTensorList *)0x1;
    const MoteTensor *args[2] = {good, good};

    FAILS(mote_session_run(s, "missing_fn", args, 1, &out), MOTE_ERROR_CODE_UNKNOWN_FUNCTION, "missing_fn");
    FAILS(mote_session_run(s, "main", args, 2, &out), MOTE_ERROR_CODE_ARGUMENT_COUNT, "");
    FAILS(mote_session_run(s, "main", args, 0, &out), MOTE_ERROR_CODE_ARGUMENT_COUNT, "");
    args[0] = short_;
    FAILS(mote_session_run(s, "main", args, 1, &out), MOTE_ERROR_CODE_MISMATCH, "");
    args[0] = ints;
    FAILS(mote_session_run(s, "main", args, 1, &out), MOTE_ERROR_CODE_MISMATCH, "");
    FAILS(mote_session_run(s, "main", NULL, 1, &out), MOTE_ERROR_CODE_NULL_ARGUMENT, "inputs");
    FAILS(mote_session_run(s, NULL, args, 1, &out), MOTE_ERROR_CODE_NULL_ARGUMENT, "function");
    FAILS(mote_session_run(NULL, "main", args, 1, &out), MOTE_ERROR_CODE_NULL_ARGUMENT, "MoteSession");
    FAILS(mote_session_run(s, "main", args, 1, NULL), MOTE_ERROR_CODE_NULL_ARGUMENT, "outputs");
    CHECK(out == (MoteTensorList *)0x1);

    /* A kernel that raises: its message surfaces, and the session still works afterwards. */
    float neg[8] = {-1, 2, 3, 4, 5, 6, 7, 8};
    MoteTensor *bad = f32_tensor(shape8, 1, neg);
    args[0] = bad;
    FAILS(mote_session_run(s, "main", args, 1, &out), MOTE_ERROR_CODE_KERNEL,
          "first element must be non-negative");
    args[0] = good;
    out = NULL;
    OK(mote_session_run(s, "main", args, 1, &out));
    mote_tensor_list_free(out);

    /* Handles of the wrong type and freed handles are detected, not dereferenced. */
    FAILS(mote_session_run((MoteSession *)model, "main", args, 1, &out), MOTE_ERROR_CODE_INVALID_HANDLE, "MoteSession");
    mote_tensor_free(bad);
    args[0] = bad;
    FAILS(mote_session_run(s, "main", args, 1, &out), MOTE_ERROR_CODE_INVALID_HANDLE, "input 0");
    MoteTensorInfo info;
    FAILS(mote_tensor_info(bad, &info), MOTE_ERROR_CODE_INVALID_HANDLE, "MoteTensor");
    mote_tensor_free(bad); /* a double free is detected and ignored */
    mote_session_free(s);
    args[0] = good;
    FAILS(mote_session_run(s, "main", args, 1, &out), MOTE_ERROR_CODE_INVALID_HANDLE, "MoteSession");
    /* Sessions keep their model: free the model first, the session still runs. */
    OK(mote_session_new(model, NULL, &s));
    mote_model_free(model);
    FAILS(mote_session_new(model, NULL, &s), MOTE_ERROR_CODE_INVALID_HANDLE, "MoteModel");
    OK(mote_session_run(s, "main", args, 1, &out));
    mote_tensor_list_free(out);
    size_t len;
    FAILS(mote_tensor_list_len(out, &len), MOTE_ERROR_CODE_INVALID_HANDLE, "MoteTensorList");
    mote_session_free(s);
    mote_tensor_free(good);
    mote_tensor_free(short_);
    mote_tensor_free(ints);
}

static void test_tensors(void) {
    int64_t shape[2] = {2, 3};
    MoteTensor *t = NULL;
    MoteTensorInfo info;
    OK(mote_tensor_new(F32, shape, 2, &t));
    OK(mote_tensor_info(t, &info));
    CHECK(info.ndim == 2 && info.shape[0] == 2 && info.shape[1] == 3 && info.byte_size == 24);
    CHECK(((uintptr_t)info.data % 64) == 0);
    for (int i = 0; i < 6; i++) CHECK(((float *)info.data)[i] == 0.0f);
    MoteTensor *c = NULL;
    OK(mote_tensor_clone(t, &c));
    MoteTensorInfo ci;
    OK(mote_tensor_info(c, &ci));
    CHECK(ci.data == info.data);
    mote_tensor_free(t);
    OK(mote_tensor_info(c, &ci)); /* the clone keeps the memory */
    mote_tensor_free(c);

    int64_t negative[1] = {-1};
    FAILS(mote_tensor_new(F32, negative, 1, &t), MOTE_ERROR_CODE_INVALID_ARGUMENT, "negative");
    MoteDtype weird = {MOTE_DTYPE_CODE_FLOAT, 7, 1};
    FAILS(mote_tensor_new(weird, shape, 2, &t), MOTE_ERROR_CODE_INVALID_ARGUMENT, "dtype");
    FAILS(mote_tensor_new(F32, NULL, 2, &t), MOTE_ERROR_CODE_NULL_ARGUMENT, "shape");
    float six[6] = {0};
    FAILS(mote_tensor_from_copy(F32, shape, 2, six, 20, &t), MOTE_ERROR_CODE_MISMATCH, "");
}

static int released = 0;
static void release_buffer(void *p) {
    released++;
    free(p);
}

static void test_zero_copy(void) {
    /* A borrowed input: Mote reads the caller's memory in place and calls release once. */
    MoteModel *model = NULL;
    MoteSession *s = NULL;
    OK(mote_model_load(zoo_file("raise.so"), &model));
    OK(mote_session_new(model, NULL, &s));
    float *x = aligned_alloc(64, 64);
    for (int i = 0; i < 8; i++) x[i] = (float)i;
    int64_t shape[1] = {8};
    MoteTensor *t = NULL;
    OK(mote_tensor_from_borrowed(F32, shape, 1, x, 32, release_buffer, x, &t));
    MoteTensorList *out = NULL;
    OK(mote_session_run(s, "main", (const MoteTensor *const *)&t, 1, &out));
    MoteTensor *y = NULL;
    MoteTensorInfo info;
    OK(mote_tensor_list_get(out, 0, &y));
    OK(mote_tensor_info(y, &info));
    for (int i = 0; i < 8; i++) CHECK(((float *)info.data)[i] == 3.0f * (float)i);
    x[0] = 5; /* writes are visible to the next run: no copy was made */
    mote_tensor_list_free(out);
    mote_tensor_free(y);
    OK(mote_session_run(s, "main", (const MoteTensor *const *)&t, 1, &out));
    OK(mote_tensor_list_get(out, 0, &y));
    OK(mote_tensor_info(y, &info));
    CHECK(((float *)info.data)[0] == 15.0f);
    mote_tensor_free(y);
    mote_tensor_list_free(out);
    CHECK(released == 0);
    mote_tensor_free(t);
    CHECK(released == 1);

    /* Refused borrowings never call release. */
    char *raw = aligned_alloc(64, 128);
    FAILS(mote_tensor_from_borrowed(F32, shape, 1, raw + 4, 32, release_buffer, raw, &t),
          MOTE_ERROR_CODE_INVALID_ARGUMENT, "aligned");
    FAILS(mote_tensor_from_borrowed(F32, shape, 1, raw, 16, release_buffer, raw, &t), MOTE_ERROR_CODE_MISMATCH, "");
    CHECK(released == 1);
    free(raw);
    mote_session_free(s);
    mote_model_free(model);
}

/* A kernel-only library (gemm.so: C[64,48] = A[64,32] @ B[32,48], and TVM's `main` alias):
 * its kernels are its functions, and mote_session_run passes every argument, the output
 * buffer included, so the kernel writes straight into the caller's memory (through a fresh
 * view per call: the handles stay the caller's, and nothing else may use them meanwhile). The reference is
 * computed here; small integers keep every float32 sum exact. */
enum { GM = 64, GK = 32, GN = 48 };

static int gemm_matches(const float *c, const float *a, const float *b) {
    for (int i = 0; i < GM; i++)
        for (int j = 0; j < GN; j++) {
            double want = 0;
            for (int k = 0; k < GK; k++) want += (double)a[i * GK + k] * b[k * GN + j];
            if (c[i * GN + j] != (float)want) {
                fprintf(stderr, "C[%d,%d] is %g, expected %g\n", i, j, c[i * GN + j], want);
                return 0;
            }
        }
    return 1;
}

static void test_kernel_library(void) {
    MoteModel *model = NULL;
    OK(mote_model_load(zoo_file("gemm.so"), &model));
    size_t count = 0;
    OK(mote_model_function_count(model, &count));
    CHECK(count == 2);
    const char *name = NULL;
    OK(mote_model_function_name(model, 0, &name));
    CHECK(strcmp(name, "gemm") == 0);
    OK(mote_model_function_name(model, 1, &name));
    CHECK(strcmp(name, "main") == 0);
    static const int64_t dims[3][2] = {{GM, GK}, {GK, GN}, {GM, GN}};
    static const char *const names[3] = {"A", "B", "C"};
    for (int f = 0; f < 2; f++) {
        const char *function = f ? "main" : "gemm";
        size_t params = 0;
        OK(mote_model_param_count(model, function, &params));
        CHECK(params == 3);
        for (size_t i = 0; i < 3 && i < params; i++) {
            MoteParamInfo p;
            OK(mote_model_param_info(model, function, i, &p));
            CHECK(strcmp(p.name, names[i]) == 0);
            CHECK(p.dtype.code == MOTE_DTYPE_CODE_FLOAT && p.dtype.bits == 32);
            CHECK(p.ndim == 2 && p.shape[0] == dims[i][0] && p.shape[1] == dims[i][1]);
        }
        /* A kernel returns nothing: it writes into its arguments. */
        size_t outputs = 1;
        OK(mote_model_output_count(model, function, &outputs));
        CHECK(outputs == 0);
        MoteParamInfo p;
        FAILS(mote_model_output_info(model, function, 0, &p), MOTE_ERROR_CODE_INVALID_ARGUMENT, "out of range");
    }

    float a[GM * GK], b[GK * GN];
    for (int i = 0; i < GM * GK; i++) a[i] = (float)((i * 7) % 13 - 6);
    for (int i = 0; i < GK * GN; i++) b[i] = (float)((i * 5) % 11 - 5);
    float *c = aligned_alloc(64, sizeof(float) * GM * GN);
    MoteTensor *args[3] = {f32_tensor(dims[0], 2, a), f32_tensor(dims[1], 2, b), NULL};
    int released_before = released;
    OK(mote_tensor_from_borrowed(F32, dims[2], 2, c, sizeof(float) * GM * GN, release_buffer, c,
                                 &args[2]));
    MoteSessionOptions *opts = NULL;
    MoteSession *s = NULL;
    OK(mote_session_options_new(&opts));
    OK(mote_session_options_set_threads(opts, 2));
    OK(mote_session_new(model, opts, &s));
    mote_session_options_free(opts);
    const MoteTensor *const *in = (const MoteTensor *const *)args;
    for (int f = 0; f < 2; f++) {
        memset(c, 0xFF, sizeof(float) * GM * GN); /* NaN */
        MoteTensorList *out = NULL;
        OK(mote_session_run(s, f ? "main" : "gemm", in, 3, &out));
        size_t n = 1;
        OK(mote_tensor_list_len(out, &n));
        CHECK(n == 0);
        mote_tensor_list_free(out);
        CHECK(gemm_matches(c, a, b));
    }

    /* Errors: the name (listing the kernels), then the kernel's own checks. */
    memset(c, 0xFF, sizeof(float) * GM * GN);
    MoteTensorList *out = (MoteTensorList *)0x1;
    FAILS(mote_session_run(s, "gemm2", in, 3, &out), MOTE_ERROR_CODE_UNKNOWN_FUNCTION, "gemm, main");
    FAILS(mote_session_run(s, "gemm", in, 2, &out), MOTE_ERROR_CODE_KERNEL, "Expected 3 arguments");
    FAILS(mote_session_run(s, "gemm", NULL, 0, &out), MOTE_ERROR_CODE_KERNEL, "Expected 3 arguments");
    const MoteTensor *swapped[3] = {args[1], args[0], args[2]};
    FAILS(mote_session_run(s, "gemm", swapped, 3, &out), MOTE_ERROR_CODE_KERNEL, "A.shape");
    CHECK(out == (MoteTensorList *)0x1);
    /* The stateful API would keep the tensors and write them later: refused, pointing at run. */
    FAILS(mote_session_set_input(s, "gemm", in, 3), MOTE_ERROR_CODE_INVALID_ARGUMENT,
          "mote_session_run");
    FAILS(mote_session_invoke_stateful(s, "gemm"), MOTE_ERROR_CODE_INVALID_ARGUMENT,
          "mote_session_run");
    CHECK(c[0] != c[0]); /* nothing was written */

    mote_session_free(s);
    for (int i = 0; i < 3; i++) mote_tensor_free(args[i]);
    CHECK(released == released_before + 1);
    mote_model_free(model);

    /* A kernel's scalar parameter has no dtype or shape. */
    OK(mote_model_load(zoo_file("kernels.so"), &model));
    OK(mote_model_function_count(model, &count));
    CHECK(count == 3);
    MoteParamInfo p;
    OK(mote_model_param_info(model, "scaled_gemm", 2, &p));
    CHECK(strcmp(p.name, "alpha") == 0 && p.ndim == -1 && p.shape == NULL && p.dtype.bits == 0);
    FAILS(mote_model_param_count(model, "main", &count), MOTE_ERROR_CODE_UNKNOWN_FUNCTION, "scaled_gemm");
    mote_model_free(model);

    /* From memory too. */
    FILE *f = fopen(zoo_file("gemm.so"), "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)size);
    CHECK(fread(bytes, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    OK(mote_model_load_from_memory(bytes, (size_t)size, &model));
    free(bytes);
    OK(mote_session_new(model, NULL, &s));
    float *c2 = calloc(GM * GN, sizeof(float));
    int64_t c_shape[2] = {GM, GN};
    MoteTensor *margs[3] = {f32_tensor(dims[0], 2, a), f32_tensor(dims[1], 2, b), NULL};
    for (int i = 0; i < GM * GN; i++) c2[i] = NAN;
    OK(mote_tensor_from_copy(F32, c_shape, 2, c2, sizeof(float) * GM * GN, &margs[2]));
    OK(mote_session_run(s, "main", (const MoteTensor *const *)margs, 3, &out));
    mote_tensor_list_free(out);
    MoteTensorInfo info;
    OK(mote_tensor_info(margs[2], &info)); /* the output tensor handle holds the result */
    CHECK(gemm_matches(info.data, a, b));
    for (int i = 0; i < 3; i++) mote_tensor_free(margs[i]);
    free(c2);
    mote_session_free(s);
    mote_model_free(model);
}

static void test_stateful(void) {
    /* multi.embed(a, c, w...) through the stateful API equals the direct call. */
    MoteModel *model = NULL;
    MoteSession *s = NULL;
    OK(mote_model_load(zoo_file("multi.so"), &model));
    OK(mote_session_new(model, NULL, &s));
    size_t n = 0;
    OK(mote_model_param_count(model, "embed", &n));
    CHECK(n >= 2 && n <= 8);
    MoteTensor *args[8] = {0};
    for (size_t i = 0; i < n; i++) {
        MoteParamInfo p;
        OK(mote_model_param_info(model, "embed", i, &p));
        CHECK(p.ndim >= 0);
        int64_t shape[8];
        for (int d = 0; d < p.ndim; d++) shape[d] = p.shape[d] < 0 ? 1 : p.shape[d];
        OK(mote_tensor_new(p.dtype, shape, (size_t)p.ndim, &args[i]));
        MoteTensorInfo info;
        OK(mote_tensor_info(args[i], &info));
        if (p.dtype.code == MOTE_DTYPE_CODE_FLOAT && p.dtype.bits == 32)
            for (size_t k = 0; k < info.byte_size / 4; k++) ((float *)info.data)[k] = (float)((k * 7 + i) % 5) / 4;
    }
    MoteTensorList *direct = NULL, *stateful = NULL;
    OK(mote_session_run(s, "embed", (const MoteTensor *const *)args, n, &direct));
    FAILS(mote_session_invoke_stateful(s, "embed"), MOTE_ERROR_CODE_INVALID_ARGUMENT, "");
    OK(mote_session_set_input(s, "embed", (const MoteTensor *const *)args, n));
    OK(mote_session_invoke_stateful(s, "embed"));
    OK(mote_session_get_output(s, "embed", &stateful));
    size_t a = 0, b = 0;
    OK(mote_tensor_list_len(direct, &a));
    OK(mote_tensor_list_len(stateful, &b));
    CHECK(a == 2 && a == b);
    for (size_t i = 0; i < a && a == b; i++) {
        MoteTensor *x = NULL, *y = NULL;
        MoteTensorInfo xi, yi;
        OK(mote_tensor_list_get(direct, i, &x));
        OK(mote_tensor_list_get(stateful, i, &y));
        OK(mote_tensor_info(x, &xi));
        OK(mote_tensor_info(y, &yi));
        CHECK(xi.byte_size == yi.byte_size && memcmp(xi.data, yi.data, xi.byte_size) == 0);
        mote_tensor_free(x);
        mote_tensor_free(y);
    }
    MoteTensor *out_of_range = NULL;
    FAILS(mote_tensor_list_get(direct, 99, &out_of_range), MOTE_ERROR_CODE_INVALID_ARGUMENT, "out of range");
    mote_tensor_list_free(direct);
    mote_tensor_list_free(stateful);
    for (size_t i = 0; i < n; i++) mote_tensor_free(args[i]);
    mote_session_free(s);
    mote_model_free(model);
}

/* A C callback the packed model's kernel calls by name; a second version fails. */
static int calls = 0;
static MoteError *scale_shift(void *user_data, const MoteArg *args, size_t n, MoteTensor **result) {
    (void)result;
    calls += *(int *)user_data;
    if (n != 3 || args[2].kind != MOTE_ARG_KIND_INT) return mote_error_new(MOTE_ERROR_CODE_MISMATCH, "bad args");
    const float *src = args[0].pointer;
    float *dst = args[1].pointer;
    for (int64_t i = 0; i < args[2].int_value; i++) dst[i] = 2.0f * src[i] + 1.0f;
    return NULL;
}
static MoteError *failing(void *user_data, const MoteArg *args, size_t n, MoteTensor **result) {
    (void)user_data, (void)args, (void)n, (void)result;
    return mote_error_new(MOTE_ERROR_CODE_INVALID_ARGUMENT, "the callback says no");
}
static int freed_user_data = 0;
static void free_user_data(void *p) {
    (void)p;
    freed_user_data++;
}

static void test_callbacks(void) {
    static int one = 1;
    MoteModel *model = NULL;
    FAILS(mote_function_register("x", NULL, NULL, NULL), MOTE_ERROR_CODE_NULL_ARGUMENT, "callback");
    bool existed = true;
    OK(mote_function_unregister("mote.zoo.scale_shift", &existed));
    CHECK(!existed);
    /* The packed model's kernel looks the function up when it runs: without it, the run fails
     * and names the function; once registered, the same session works. */
    OK(mote_model_load(zoo_file("packed.so"), &model));
    MoteSession *s = NULL;
    OK(mote_session_new(model, NULL, &s));
    size_t n = 0;
    OK(mote_model_param_count(model, "main", &n));
    MoteTensor *args[4] = {0};
    for (size_t i = 0; i < n && i < 4; i++) {
        MoteParamInfo p;
        OK(mote_model_param_info(model, "main", i, &p));
        OK(mote_tensor_new(p.dtype, p.shape, (size_t)p.ndim, &args[i]));
    }
    MoteTensorList *out = NULL;
    FAILS(mote_session_run(s, "main", (const MoteTensor *const *)args, n, &out), MOTE_ERROR_CODE_KERNEL,
          "mote.zoo.scale_shift");
    OK(mote_function_register("mote.zoo.scale_shift", scale_shift, &one, free_user_data));
    OK(mote_session_run(s, "main", (const MoteTensor *const *)args, n, &out));
    CHECK(calls >= 1);
    mote_tensor_list_free(out);

    /* Functions are bound by name at each call: a replacement takes effect at once, and the
     * replaced registration's user data is released. Its error surfaces. */
    OK(mote_function_register("mote.zoo.scale_shift", failing, NULL, NULL));
    CHECK(freed_user_data == 1);
    MoteError *e = mote_session_run(s, "main", (const MoteTensor *const *)args, n, &out);
    CHECK(e != NULL);
    if (e) {
        CHECK(strstr(mote_error_message(e), "the callback says no") != NULL);
        mote_error_free(e);
    }
    mote_session_free(s);
    mote_model_free(model);
    OK(mote_function_unregister("mote.zoo.scale_shift", &existed));
    CHECK(existed);
    for (size_t i = 0; i < n && i < 4; i++) mote_tensor_free(args[i]);
}

static int log_records = 0;
static void on_log(void *user_data, uint32_t level, const char *target, const char *message) {
    (void)level;
    (void)message;
    CHECK(user_data == (void *)&log_records);
    CHECK(strncmp(target, "mote", 4) == 0);
    log_records++;
}

static void test_logs_and_profile(void) {
    OK(mote_log_set_callback(on_log, &log_records, MOTE_LOG_LEVEL_DEBUG));
    MoteModel *model = NULL;
    OK(mote_model_load(zoo_file("mlp.so"), &model));
    CHECK(log_records > 0); /* loading logs what was loaded, at debug level */
    OK(mote_log_set_callback(NULL, NULL, MOTE_LOG_LEVEL_OFF));
    int before = log_records;

    MoteSession *s = NULL;
    OK(mote_session_new(model, NULL, &s));
    CHECK(log_records == before);
    OK(mote_session_set_profiling(s, true));
    MoteTensor *args[5];
    for (size_t i = 0; i < 5; i++) {
        MoteParamInfo p;
        OK(mote_model_param_info(model, "forward", i, &p));
        OK(mote_tensor_new(p.dtype, p.shape, (size_t)p.ndim, &args[i]));
    }
    MoteTensorList *out = NULL;
    for (int r = 0; r < 3; r++) {
        OK(mote_session_run(s, "forward", (const MoteTensor *const *)args, 5, &out));
        mote_tensor_list_free(out);
    }
    MoteProfile *profile = NULL;
    OK(mote_session_take_profile(s, &profile));
    size_t rows = 0;
    OK(mote_profile_len(profile, &rows));
    CHECK(rows >= 2);
    int saw_kernel = 0;
    for (size_t i = 0; i < rows; i++) {
        MoteProfileEntry e;
        OK(mote_profile_get(profile, i, &e));
        if (strcmp(e.kind, "kernel") == 0 && strcmp(e.name, "matmul") == 0) {
            saw_kernel = 1;
            CHECK(e.calls == 3);
        }
    }
    CHECK(saw_kernel);
    MoteProfileEntry e;
    FAILS(mote_profile_get(profile, rows, &e), MOTE_ERROR_CODE_INVALID_ARGUMENT, "out of range");
    mote_profile_free(profile);
    for (size_t i = 0; i < 5; i++) mote_tensor_free(args[i]);
    mote_session_free(s);
    mote_model_free(model);
}

/* One model, one session per thread, concurrently. */
static MoteModel *shared_model;
static void *worker(void *arg) {
    (void)arg;
    MoteSession *s = NULL;
    OK(mote_session_new(shared_model, NULL, &s));
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t shape[1] = {8};
    MoteTensor *t = f32_tensor(shape, 1, x);
    for (int r = 0; r < 50; r++) {
        MoteTensorList *out = NULL;
        MoteTensor *y = NULL;
        MoteTensorInfo info;
        OK(mote_session_run(s, "main", (const MoteTensor *const *)&t, 1, &out));
        OK(mote_tensor_list_get(out, 0, &y));
        OK(mote_tensor_info(y, &info));
        CHECK(((float *)info.data)[7] == 24.0f);
        mote_tensor_free(y);
        mote_tensor_list_free(out);
    }
    mote_tensor_free(t);
    mote_session_free(s);
    return NULL;
}

static void test_threads(void) {
    OK(mote_model_load(zoo_file("raise.so"), &shared_model));
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, worker, NULL);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    mote_model_free(shared_model);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s ZOO_DIR SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    snprintf(zoo, sizeof zoo, "%s", argv[1]);
    snprintf(scratch, sizeof scratch, "%s", argv[2]);
    test_version();
    test_errors_and_nulls();
    test_code_free();
    test_model_info_and_memory_load();
    test_call_errors_and_freed_handles();
    test_tensors();
    test_zero_copy();
    test_kernel_library();
    test_stateful();
    test_callbacks();
    test_logs_and_profile();
    test_threads();
    return finish("test_api");
}
