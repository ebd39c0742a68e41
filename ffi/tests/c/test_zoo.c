/* Runs every case of the model zoo through the C ABI and compares with TVM's outputs.
 * Kernel cases (kernel-only libraries) pass every argument, output buffers included, to
 * mote_session_run, which must return no outputs and leave TVM's values in those buffers
 * (filled with 0xFF bytes, NaN or -1, before every call) and the other arguments unchanged.
 *
 *   test_zoo CASES_DIR [MIN_CASES]     (made by ffi/tests/zoo_cases.py; MIN_CASES default 16)
 *
 * A case whose library reads "syslib:PREFIX" loads the model linked into this program under
 * that prefix (mote_model_from_system_lib; zoo_cases.py --system-lib).
 */
#include <math.h>
#include <stdint.h>

#include "mote.h"
#include "check.h"

typedef struct {
    MoteDtype dtype;
    int ndim;
    int64_t dims[8];
    char file[1024];
} Desc;

static int read_desc(FILE *f, const char *kind, Desc *d) {
    char k[8];
    int code, bits;
    if (fscanf(f, "%7s %d %d %d", k, &code, &bits, &d->ndim) != 4 || strcmp(k, kind) != 0 ||
        d->ndim < 0 || d->ndim > 8)
        return 0;
    for (int i = 0; i < d->ndim; i++)
        if (fscanf(f, "%lld", (long long *)&d->dims[i]) != 1) return 0;
    d->dtype.code = (uint8_t)code;
    d->dtype.bits = (uint8_t)bits;
    d->dtype.lanes = 1;
    return fscanf(f, "%1023s", d->file) == 1;
}

static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* Element `i` as a double (the oracle comparison is done in double). */
static double element(MoteDtype t, const void *data, size_t i) {
    switch (t.code * 100 + t.bits) {
    case 232: return ((const float *)data)[i];
    case 264: return ((const double *)data)[i];
    case 216: { /* IEEE half */
        uint16_t h = ((const uint16_t *)data)[i];
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(m + 1024, e - 25);
        return (h & 0x8000) ? -v : v;
    }
    case 416: { /* bfloat16: the high half of a float */
        uint32_t bits32 = (uint32_t)((const uint16_t *)data)[i] << 16;
        float f;
        memcpy(&f, &bits32, 4);
        return f;
    }
    case 8: return ((const int8_t *)data)[i];
    case 16: return ((const int16_t *)data)[i];
    case 32: return ((const int32_t *)data)[i];
    case 64: return (double)((const int64_t *)data)[i];
    case 108: return ((const uint8_t *)data)[i];
    case 608: return ((const uint8_t *)data)[i];
    default: return NAN;
    }
}

/* The zoo's `packed` model calls this by name: dst[i] = 2 * src[i] + 1 over n floats. */
static MoteError *scale_shift(void *user_data, const MoteArg *args, size_t n, MoteTensor **result) {
    (void)user_data;
    (void)result;
    if (n != 3 || args[0].kind != MOTE_ARG_KIND_POINTER || args[1].kind != MOTE_ARG_KIND_POINTER ||
        args[2].kind != MOTE_ARG_KIND_INT)
        return mote_error_new(MOTE_ERROR_CODE_MISMATCH, "scale_shift(src, dst, n) expected");
    const float *src = args[0].pointer;
    float *dst = args[1].pointer;
    for (int64_t i = 0; i < args[2].int_value; i++) dst[i] = 2.0f * src[i] + 1.0f;
    return NULL;
}

/* Does `info` (output `o` of case `stem`) match TVM's output described by `want`? */
static int matches(const char *stem, size_t o, const MoteTensorInfo *info, const Desc *want,
                   double rtol, double atol) {
    size_t size;
    void *expected = read_file(want->file, &size);
    int ok = 1;
    if (!expected || size != info->byte_size || info->ndim != (size_t)want->ndim ||
        info->dtype.code != want->dtype.code || info->dtype.bits != want->dtype.bits) {
        fprintf(stderr, "%s: out%zu has the wrong dtype, shape or size\n", stem, o);
        ok = 0;
    }
    for (size_t d = 0; ok && d < info->ndim; d++)
        if (info->shape[d] != want->dims[d]) ok = 0;
    size_t n = info->dtype.bits ? info->byte_size / (info->dtype.bits / 8) : 0;
    for (size_t i = 0; ok && i < n; i++) {
        double a = element(info->dtype, info->data, i), b = element(info->dtype, expected, i);
        if (!(fabs(a - b) <= atol + rtol * fabs(b))) {
            fprintf(stderr, "%s: out%zu[%zu] is %.9g but TVM gives %.9g\n", stem, o, i, a, b);
            ok = 0;
        }
    }
    free(expected);
    return ok;
}

/* What mote_model_output_info says of `function` against the tensors a call gave back: as
 * many outputs, each with the tensor's dtype and rank, every fixed dimension equal (-1 marks a
 * symbolic one). */
static int outputs_described(const char *stem, const MoteModel *model, const char *function,
                             MoteTensorList *results, size_t count) {
    size_t described = 0;
    MoteError *err = mote_model_output_count(model, function, &described);
    if (err) {
        fprintf(stderr, "%s: mote_model_output_count: %s\n", stem, mote_error_message(err));
        mote_error_free(err);
        return 0;
    }
    if (described != count) {
        fprintf(stderr, "%s: %zu outputs described, %zu given back\n", stem, described, count);
        return 0;
    }
    for (size_t o = 0; o < count; o++) {
        MoteTensor *t = NULL;
        MoteTensorInfo info;
        MoteParamInfo p;
        OK(mote_tensor_list_get(results, o, &t));
        OK(mote_tensor_info(t, &info));
        OK(mote_model_output_info(model, function, o, &p));
        int ok = p.dtype.code == info.dtype.code && p.dtype.bits == info.dtype.bits &&
                 p.ndim >= 0 && (size_t)p.ndim == info.ndim;
        for (int d = 0; ok && d < p.ndim; d++)
            ok = p.shape[d] == -1 || p.shape[d] == info.shape[d];
        mote_tensor_free(t);
        if (!ok) {
            fprintf(stderr, "%s: output %zu (%s) is not described as given back\n", stem, o, p.name);
            return 0;
        }
    }
    return 1;
}

static int run_case(FILE *f, const char *header) {
    char stem[256], lib[1024], function[128], mode[16];
    double rtol, atol;
    int n_in, n_out, consumed = 0;
    if (sscanf(header, "case %255s %1023s %127s %15s %lf %lf %d %d %n", stem, lib, function, mode,
               &rtol, &atol, &n_in, &n_out, &consumed) < 8) {
        fprintf(stderr, "bad case line: %s\n", header);
        return 0;
    }
    char expect_error[512];
    snprintf(expect_error, sizeof expect_error, "%s", header + consumed);
    expect_error[strcspn(expect_error, "\n")] = 0;
    int want_error = strcmp(expect_error, "-") != 0;

    MoteTensor *inputs[16] = {0};
    Desc ins[16], outs[16];
    int kernel = strcmp(mode, "kernel") == 0, written[16] = {0}, n_written = 0;
    if (n_in > 16 || n_out > 16) return 0;
    for (int i = 0; i < n_in; i++) {
        size_t size;
        if (!read_desc(f, "in", &ins[i])) return 0;
        void *bytes = read_file(ins[i].file, &size);
        if (!bytes) return 0;
        OK(mote_tensor_from_copy(ins[i].dtype, ins[i].dims, (size_t)ins[i].ndim, bytes, size,
                                 &inputs[i]));
        free(bytes);
    }
    for (int i = 0; i < n_out; i++)
        if (!read_desc(f, "out", &outs[i])) return 0;
    if (kernel) {
        char k[8];
        if (fscanf(f, "%7s %d", k, &n_written) != 2 || strcmp(k, "written") != 0 ||
            n_written != n_out)
            return 0;
        for (int i = 0; i < n_written; i++)
            if (fscanf(f, "%d", &written[i]) != 1 || written[i] < 0 || written[i] >= n_in) return 0;
    }

    int ok = 1;
    MoteModel *model = NULL;
    if (strncmp(lib, "syslib:", 7) == 0)
        OK(mote_model_from_system_lib(lib + 7, &model));
    else
        OK(mote_model_load(lib, &model));
    for (uint32_t threads = 1; threads <= 2; threads++) {
        MoteSessionOptions *opts = NULL;
        MoteSession *session = NULL;
        MoteTensorList *results = NULL;
        OK(mote_session_options_new(&opts));
        OK(mote_session_options_set_threads(opts, threads));
        OK(mote_session_new(model, opts, &session));
        mote_session_options_free(opts);
        MoteError *err;
        const MoteTensor *const *in = (const MoteTensor *const *)inputs;
        for (int w = 0; w < n_written; w++) {
            MoteTensorInfo info;
            OK(mote_tensor_info(inputs[written[w]], &info));
            memset(info.data, 0xFF, info.byte_size);
        }
        if (strcmp(mode, "stateful") == 0) {
            err = mote_session_set_input(session, function, in, (size_t)n_in);
            if (!err) err = mote_session_invoke_stateful(session, function);
            if (!err) err = mote_session_get_output(session, function, &results);
        } else {
            err = mote_session_run(session, function, in, (size_t)n_in, &results);
        }
        if (want_error) {
            if (!err || mote_error_code(err) != MOTE_ERROR_CODE_KERNEL ||
                !strstr(mote_error_message(err), expect_error)) {
                fprintf(stderr, "%s: expected a kernel error containing \"%s\", got \"%s\"\n", stem,
                        expect_error, err ? mote_error_message(err) : "success");
                ok = 0;
            }
        } else if (err) {
            fprintf(stderr, "%s: [%u] %s\n", stem, mote_error_code(err), mote_error_message(err));
            ok = 0;
        } else if (kernel) {
            size_t count = 1;
            OK(mote_tensor_list_len(results, &count));
            if (count != 0) {
                fprintf(stderr, "%s: a kernel call returned %zu outputs, not 0\n", stem, count);
                ok = 0;
            }
            ok = ok && outputs_described(stem, model, function, results, count);
            for (int i = 0; ok && i < n_in; i++) {
                MoteTensorInfo info;
                OK(mote_tensor_info(inputs[i], &info));
                int w = -1;
                for (int k = 0; k < n_written; k++)
                    if (written[k] == i) w = k;
                if (w >= 0) {
                    ok = matches(stem, (size_t)w, &info, &outs[w], rtol, atol);
                } else {
                    size_t size;
                    void *given = read_file(ins[i].file, &size);
                    if (!given || size != info.byte_size || memcmp(given, info.data, size) != 0) {
                        fprintf(stderr, "%s: the kernel changed its input arg%d\n", stem, i);
                        ok = 0;
                    }
                    free(given);
                }
            }
        } else {
            size_t count = 0;
            OK(mote_tensor_list_len(results, &count));
            if (count != (size_t)n_out) {
                fprintf(stderr, "%s: %zu outputs, TVM gives %d\n", stem, count, n_out);
                ok = 0;
            }
            ok = ok && outputs_described(stem, model, function, results, count);
            for (size_t o = 0; ok && o < count; o++) {
                MoteTensor *t = NULL;
                MoteTensorInfo info;
                OK(mote_tensor_list_get(results, o, &t));
                OK(mote_tensor_info(t, &info));
                ok = matches(stem, o, &info, &outs[o], rtol, atol);
                mote_tensor_free(t);
            }
        }
        mote_error_free(err);
        mote_tensor_list_free(results);
        mote_session_free(session);
    }
    mote_model_free(model);
    for (int i = 0; i < n_in; i++) mote_tensor_free(inputs[i]);
    fprintf(stderr, "  %-28s %s\n", stem, ok ? "ok" : "FAILED");
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s CASES_DIR [MIN_CASES]\n", argv[0]);
        return 2;
    }
    int min_cases = argc == 3 ? atoi(argv[2]) : 16;
    OK(mote_function_register("mote.zoo.scale_shift", scale_shift, NULL, NULL));
    char path[1200], line[2048];
    snprintf(path, sizeof path, "%s/cases.txt", argv[1]);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 2;
    }
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "case ", 5) != 0) continue;
        cases++;
        if (!run_case(f, line)) failures++;
    }
    fclose(f);
    CHECK(cases >= min_cases && min_cases > 0);
    OK(mote_function_unregister("mote.zoo.scale_shift", NULL));
    fprintf(stderr, "test_zoo: %d cases\n", cases);
    return finish("test_zoo");
}
