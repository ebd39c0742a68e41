/* Callbacks that receive tensors, call Mote back, or replace themselves.
 *
 *   test_callbacks ZOO_DIR MODELS_DIR
 *
 * MODELS_DIR holds lend.so and vm_dps.so, built by ffi/tests/callback_models.py (no zoo model
 * hands a tensor to a callback: the zoo's `packed` kernel passes raw pointers). Two paths lend
 * tensors to a callback, and both are covered:
 *   - kernel path (lend.so): a TIR kernel calls "mote.test.lend" through T.call_packed with
 *     two buffers, so Mote's TVMFFIFunctionCall turns DLTensor pointers into tensors that view
 *     the kernel's memory: its scratch buffer S (from TVMBackendAllocWorkspace, released when
 *     the kernel returns) and its output B. This is the use-after-free case: the scratch
 *     buffer is cached per thread and freed when the thread exits.
 *   - VM path (vm_dps.so): the VM calls "mote.test.vm_dps" (R.call_dps_packed) with the
 *     caller's input tensor and the output it allocated.
 * The tests run under valgrind (scripts/test-ffi.sh): a kept tensor that still pointed at
 * kernel memory would be a read of freed memory there, and wrong values everywhere else.
 * Expected values are computed here, in float, exactly as the kernel and callbacks do.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "mote.h"
#include "check.h"

#define N 512

static char zoo[1024], models[1024];
static const MoteDtype F32 = {MOTE_DTYPE_CODE_FLOAT, 32, 1};
static const int64_t SHAPE[1] = {N};

static const char *path_in(const char *dir, const char *name) {
    static char buf[4][1200];
    static int i = 0;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
    return buf[i];
}

/* A [N] float32 tensor with x[i] = base + step * i. */
static MoteTensor *ramp(float base, float step) {
    float x[N];
    for (int i = 0; i < N; i++) x[i] = base + step * (float)i;
    MoteTensor *t = NULL;
    OK(mote_tensor_from_copy(F32, SHAPE, 1, x, sizeof x, &t));
    return t;
}

/* The data of a [N] float32 tensor (checked). */
static float *floats(const MoteTensor *t) {
    MoteTensorInfo info;
    OK(mote_tensor_info(t, &info));
    CHECK(info.dtype.code == MOTE_DTYPE_CODE_FLOAT && info.dtype.bits == 32);
    CHECK(info.ndim == 1 && info.shape[0] == N && info.byte_size == N * sizeof(float));
    return info.data;
}

static void *data_of(const MoteTensor *t) {
    MoteTensorInfo info;
    OK(mote_tensor_info(t, &info));
    return info.data;
}

/* Count the elements of `t` that differ from f(x[i]) for the input x = base + step * i. */
enum op { SAME, PLUS_ONE, TIMES_TWO, PLUS_ONE_TIMES_THREE };
static int mismatches(const MoteTensor *t, float base, float step, enum op op) {
    const float *v = floats(t);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float x = base + step * (float)i, want;
        switch (op) {
        case SAME: want = x; break;
        case PLUS_ONE: want = x + 1.0f; break;
        case TIMES_TWO: want = 2.0f * x; break;
        default: want = x + 1.0f; want = 3.0f * want; break;
        }
        if (v[i] != want) bad++;
    }
    return bad;
}

/* The single output of a call, as a new handle. */
static MoteTensor *only_output(MoteTensorList *l) {
    size_t n = 0;
    OK(mote_tensor_list_len(l, &n));
    CHECK(n == 1);
    MoteTensor *t = NULL;
    OK(mote_tensor_list_get(l, 0, &t));
    return t;
}

static MoteTensor *run1(MoteSession *s, const char *fn, const MoteTensor *x) {
    MoteTensorList *l = NULL;
    OK(mote_session_run(s, fn, &x, 1, &l));
    MoteTensor *y = only_output(l);
    mote_tensor_list_free(l);
    return y;
}

/* ---- the callbacks ----------------------------------------------------------------------- */

/* "mote.test.lend"(S, B): B = 3 * S, written through the lent output's data pointer. */
static struct {
    int calls;
    int keep;                    /* clone both lent tensors into kept_* */
    MoteTensor *kept_scratch, *kept_out;
    MoteTensor *seen_handle;     /* the lent handle of S, to check it is dead afterwards */
    void *seen_data;             /* S's data during the call */
    MoteSession *other;          /* if set: run and bind `identity` of this session with S */
    MoteTensorList *identity_out;
    MoteSession *self;           /* if set: call this session (the one running us) */
    MoteError *self_err;
    int block;                   /* if set: wait for `b_done` (see test_busy_across_threads) */
} lend;
static atomic_int a_inside, b_done;

static MoteError *on_lend(void *user_data, const MoteArg *args, size_t n, MoteTensor **result) {
    (void)user_data, (void)result;
    lend.calls++;
    if (n != 2 || args[0].kind != MOTE_ARG_KIND_TENSOR || args[1].kind != MOTE_ARG_KIND_TENSOR)
        return mote_error_new(MOTE_ERROR_CODE_MISMATCH, "lend: expected two tensors");
    const float *S = floats(args[0].tensor);
    float *B = floats(args[1].tensor);
    for (int i = 0; i < N; i++) B[i] = 3.0f * S[i];
    if (lend.keep) {
        OK(mote_tensor_clone(args[0].tensor, &lend.kept_scratch));
        OK(mote_tensor_clone(args[1].tensor, &lend.kept_out));
        lend.seen_handle = args[0].tensor;
        lend.seen_data = (void *)S;
        /* The copy is a snapshot in fresh memory, not a second view. */
        CHECK(data_of(lend.kept_scratch) != (void *)S);
        CHECK(data_of(lend.kept_out) != (void *)B);
    }
    if (lend.other) {
        const MoteTensor *in = args[0].tensor;
        OK(mote_session_run(lend.other, "identity", &in, 1, &lend.identity_out));
        OK(mote_session_set_input(lend.other, "identity", &in, 1));
    }
    if (lend.self) {
        const MoteTensor *in = args[0].tensor;
        MoteTensorList *l = NULL;
        lend.self_err = mote_session_run(lend.self, "main", &in, 1, &l);
        CHECK(l == NULL);
    }
    if (lend.block) {
        atomic_store(&a_inside, 1);
        while (!atomic_load(&b_done)) usleep(1000);
    }
    return NULL;
}

/* "mote.test.vm_dps"(x, out): out = 2 * x. */
static struct {
    int calls, keep;
    MoteTensor *kept_x, *kept_out;
    MoteSession *self;           /* if set: call this session (the one running us) */
    int return_self_err;         /* ...and fail with the error that gave */
    MoteError *self_err;
    MoteSession *across;         /* if set: wait for `a_inside`, then call this session */
    MoteError *across_err;
} vm;

static MoteError *on_vm_dps(void *user_data, const MoteArg *args, size_t n, MoteTensor **result) {
    (void)user_data, (void)result;
    vm.calls++;
    if (n != 2 || args[0].kind != MOTE_ARG_KIND_TENSOR || args[1].kind != MOTE_ARG_KIND_TENSOR)
        return mote_error_new(MOTE_ERROR_CODE_MISMATCH, "vm_dps: expected two tensors");
    const float *x = floats(args[0].tensor);
    float *out = floats(args[1].tensor);
    for (int i = 0; i < N; i++) out[i] = 2.0f * x[i];
    if (vm.keep) {
        OK(mote_tensor_clone(args[0].tensor, &vm.kept_x));
        OK(mote_tensor_clone(args[1].tensor, &vm.kept_out));
    }
    if (vm.self) {
        const MoteTensor *in = args[0].tensor;
        MoteTensorList *l = NULL;
        MoteError *e = mote_session_run(vm.self, "identity", &in, 1, &l);
        CHECK(l == NULL);
        if (vm.return_self_err) return e;
        vm.self_err = e;
    }
    if (vm.across) {
        while (!atomic_load(&a_inside)) usleep(1000);
        const MoteTensor *in = args[0].tensor;
        MoteTensorList *l = NULL;
        vm.across_err = mote_session_run(vm.across, "main", &in, 1, &l);
        CHECK(l == NULL);
        atomic_store(&b_done, 1);
    }
    return NULL;
}

/* A replacement for "mote.test.vm_dps" (out = -x), to see which registration a model calls. */
static int v2_calls;
static MoteError *on_vm_dps_v2(void *user_data, const MoteArg *args, size_t n, MoteTensor **result) {
    (void)user_data, (void)result;
    v2_calls++;
    if (n != 2) return mote_error_new(MOTE_ERROR_CODE_MISMATCH, "vm_dps v2: expected two tensors");
    const float *x = floats(args[0].tensor);
    float *out = floats(args[1].tensor);
    for (int i = 0; i < N; i++) out[i] = -x[i];
    return NULL;
}

static int freed_v1, freed_v2;
static void free_counter(void *p) { (*(int *)p)++; }

/* ---- the tests --------------------------------------------------------------------------- */

static MoteModel *lend_model, *vm_model;
static MoteSession *lend_session, *vm_session;

/* VM path, and when registered functions are bound: a model's own calls (R.call_dps_packed)
 * are resolved at load and keep that registration; its user data is released with the last
 * model that resolved it. */
static void test_vm_path_binding(void) {
    bool existed = true;
    OK(mote_function_unregister("mote.test.vm_dps", &existed));
    CHECK(!existed);
    MoteModel *m = (MoteModel *)0x1;
    FAILS(mote_model_load(path_in(models, "vm_dps.so"), &m), MOTE_ERROR_CODE_MISSING_FUNCTIONS,
          "mote.test.vm_dps");
    CHECK(m == (MoteModel *)0x1);

    OK(mote_function_register("mote.test.vm_dps", on_vm_dps, &freed_v1, free_counter));
    OK(mote_model_load(path_in(models, "vm_dps.so"), &m));
    MoteSession *s = NULL;
    OK(mote_session_new(m, NULL, &s));
    MoteTensor *x = ramp(-3.0f, 0.5f);
    MoteTensor *y = run1(s, "main", x);
    CHECK(vm.calls == 1 && mismatches(y, -3.0f, 0.5f, TIMES_TWO) == 0);
    mote_tensor_free(y);

    /* Replaced: this model still calls the registration it resolved at load, which is not
     * released while the model lives; a model loaded now resolves the new one. */
    OK(mote_function_register("mote.test.vm_dps", on_vm_dps_v2, &freed_v2, free_counter));
    CHECK(freed_v1 == 0);
    y = run1(s, "main", x);
    CHECK(vm.calls == 2 && v2_calls == 0 && mismatches(y, -3.0f, 0.5f, TIMES_TWO) == 0);
    mote_tensor_free(y);
    MoteModel *m2 = NULL;
    MoteSession *s2 = NULL;
    OK(mote_model_load(path_in(models, "vm_dps.so"), &m2));
    OK(mote_session_new(m2, NULL, &s2));
    y = run1(s2, "main", x);
    CHECK(v2_calls == 1 && vm.calls == 2);
    const float *v = floats(y);
    CHECK(v[0] == 3.0f && v[N - 1] == -(-3.0f + 0.5f * (N - 1)));
    mote_tensor_free(y);

    /* Removed: loaded models keep working; each registration is released once nothing uses
     * it (v2 when the model that resolved it goes, v1 likewise). */
    OK(mote_function_unregister("mote.test.vm_dps", &existed));
    CHECK(existed);
    y = run1(s, "main", x);
    CHECK(vm.calls == 3 && mismatches(y, -3.0f, 0.5f, TIMES_TWO) == 0);
    mote_tensor_free(y);
    CHECK(freed_v1 == 0 && freed_v2 == 0);
    mote_session_free(s2);
    mote_model_free(m2);
    CHECK(freed_v2 == 1);
    mote_session_free(s);
    CHECK(freed_v1 == 0); /* the model handle still holds it */
    mote_model_free(m);
    CHECK(freed_v1 == 1);
    mote_tensor_free(x);
}

/* VM path, lent tensors: the callback's arguments are the caller's input and the VM's output;
 * clones of both are copies, so later writes to the input do not reach them. */
static void test_vm_path_lent(void) {
    MoteTensor *x = ramp(5.0f, -0.25f);
    float *xd = floats(x);
    vm.keep = 1;
    MoteTensor *y = run1(vm_session, "main", x);
    vm.keep = 0;
    CHECK(mismatches(y, 5.0f, -0.25f, TIMES_TWO) == 0); /* the callback's writes reached the VM */
    CHECK(vm.kept_x && vm.kept_out);
    if (!vm.kept_x || !vm.kept_out) return;
    CHECK(data_of(vm.kept_x) != (void *)xd);             /* a copy, not the caller's memory */
    CHECK(data_of(vm.kept_out) != data_of(y));
    for (int i = 0; i < N; i++) xd[i] = 1000.0f;         /* later writes do not reach it */
    MoteTensor *y2 = run1(vm_session, "main", x);
    CHECK(floats(y2)[7] == 2000.0f);
    CHECK(mismatches(vm.kept_x, 5.0f, -0.25f, SAME) == 0);
    CHECK(mismatches(vm.kept_out, 5.0f, -0.25f, TIMES_TWO) == 0);
    mote_tensor_free(vm.kept_x);
    mote_tensor_free(vm.kept_out);
    vm.kept_x = vm.kept_out = NULL;
    mote_tensor_free(y);
    mote_tensor_free(y2);
    mote_tensor_free(x);
}

struct run_args {
    MoteSession *s;
    const MoteTensor *x;
    MoteTensor *y;
};
static void *run_thread(void *p) {
    struct run_args *a = p;
    a->y = run1(a->s, "main", a->x);
    return NULL;
}

/* Kernel path, lent tensors: a clone of the kernel's scratch buffer, kept by the callback, is
 * read after the call, after the thread that ran it (and owned the scratch memory) exited, and
 * after further runs that reuse the memory with other values. */
static void test_kernel_path_lent(void) {
    const float b1 = -7.0f, s1 = 0.25f;
    MoteTensor *x1 = ramp(b1, s1);
    lend.keep = 1;
    lend.other = vm_session;
    struct run_args a = {lend_session, x1, NULL};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, run_thread, &a) == 0);
    pthread_join(th, NULL); /* the thread's cached workspace blocks are freed now */
    lend.keep = 0;
    lend.other = NULL;
    CHECK(lend.calls == 1);
    CHECK(mismatches(a.y, b1, s1, PLUS_ONE_TIMES_THREE) == 0); /* writes through `data` arrived */
    CHECK(lend.kept_scratch && lend.kept_out && lend.identity_out);
    if (!lend.kept_scratch || !lend.kept_out || !lend.identity_out) return;
    CHECK(mismatches(lend.kept_scratch, b1, s1, PLUS_ONE) == 0);
    CHECK(mismatches(lend.kept_out, b1, s1, PLUS_ONE_TIMES_THREE) == 0);

    /* The lent handle died with the call. */
    MoteTensorInfo info;
    MoteTensor *c = NULL;
    FAILS(mote_tensor_info(lend.seen_handle, &info), MOTE_ERROR_CODE_INVALID_HANDLE, "MoteTensor");
    FAILS(mote_tensor_clone(lend.seen_handle, &c), MOTE_ERROR_CODE_INVALID_HANDLE, "MoteTensor");
    CHECK(c == NULL);

    /* Runs on this thread: the kernel's scratch memory now holds other values. */
    const float b2 = -1000.0f, s2 = -1.0f;
    MoteTensor *x2 = ramp(b2, s2);
    for (int r = 0; r < 3; r++) {
        MoteTensor *y = run1(lend_session, "main", x2);
        CHECK(mismatches(y, b2, s2, PLUS_ONE_TIMES_THREE) == 0);
        mote_tensor_free(y);
    }
    CHECK(lend.calls == 4);
    CHECK(mismatches(lend.kept_scratch, b1, s1, PLUS_ONE) == 0);
    CHECK(mismatches(lend.kept_out, b1, s1, PLUS_ONE_TIMES_THREE) == 0);

    /* Inside the callback, the lent S went to another session: as an input of `identity`, which
     * returns it as its output, and as a bound input. Both kept copies. */
    MoteTensor *id = only_output(lend.identity_out);
    CHECK(data_of(id) != lend.seen_data);
    CHECK(mismatches(id, b1, s1, PLUS_ONE) == 0);
    mote_tensor_free(id);
    OK(mote_session_invoke_stateful(vm_session, "identity"));
    MoteTensorList *l = NULL;
    OK(mote_session_get_output(vm_session, "identity", &l));
    id = only_output(l);
    CHECK(mismatches(id, b1, s1, PLUS_ONE) == 0);
    mote_tensor_free(id);
    mote_tensor_list_free(l);

    mote_tensor_list_free(lend.identity_out);
    mote_tensor_free(lend.kept_scratch);
    mote_tensor_free(lend.kept_out);
    lend.identity_out = NULL;
    lend.kept_scratch = lend.kept_out = NULL;
    mote_tensor_free(a.y);
    mote_tensor_free(x1);
    mote_tensor_free(x2);
}

/* A callback calling the session that runs it gets MOTE_ERROR_CODE_BUSY, not a deadlock; the
 * session keeps working. Kernel path (the callback ignores the error, so the run succeeds) and
 * VM path (the callback returns the error, so the run fails with it). */
static void test_reentry(void) {
    MoteTensor *x = ramp(1.0f, 1.0f);
    lend.self = lend_session;
    MoteTensor *y = run1(lend_session, "main", x);
    lend.self = NULL;
    CHECK(mismatches(y, 1.0f, 1.0f, PLUS_ONE_TIMES_THREE) == 0);
    CHECK(lend.self_err != NULL);
    if (lend.self_err) {
        CHECK(mote_error_code(lend.self_err) == MOTE_ERROR_CODE_BUSY);
        CHECK(strstr(mote_error_message(lend.self_err), "already running a call on this thread") != NULL);
        mote_error_free(lend.self_err);
        lend.self_err = NULL;
    }
    mote_tensor_free(y);

    vm.self = vm_session;
    vm.return_self_err = 1;
    MoteTensorList *l = (MoteTensorList *)0x1;
    const MoteTensor *in = x;
    FAILS(mote_session_run(vm_session, "main", &in, 1, &l), MOTE_ERROR_CODE_CALLBACK,
          "already running a call on this thread");
    CHECK(l == (MoteTensorList *)0x1);
    vm.return_self_err = 0;
    y = run1(vm_session, "main", x);
    vm.self = NULL;
    CHECK(vm.self_err && mote_error_code(vm.self_err) == MOTE_ERROR_CODE_BUSY);
    mote_error_free(vm.self_err);
    vm.self_err = NULL;
    CHECK(mismatches(y, 1.0f, 1.0f, TIMES_TWO) == 0);
    mote_tensor_free(y);

    /* Afterwards both sessions work as before. */
    y = run1(lend_session, "main", x);
    CHECK(mismatches(y, 1.0f, 1.0f, PLUS_ONE_TIMES_THREE) == 0);
    mote_tensor_free(y);
    y = run1(vm_session, "main", x);
    CHECK(mismatches(y, 1.0f, 1.0f, TIMES_TWO) == 0);
    mote_tensor_free(y);
    mote_tensor_free(x);
}

/* A callback on thread B calling a session that thread A is running (and whose callback waits
 * for B) gets MOTE_ERROR_CODE_BUSY at once: waiting would deadlock. */
static void test_busy_across_threads(void) {
    MoteTensor *x = ramp(0.0f, 1.0f);
    atomic_store(&a_inside, 0);
    atomic_store(&b_done, 0);
    lend.block = 1;
    struct run_args a = {lend_session, x, NULL};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, run_thread, &a) == 0);
    vm.across = lend_session;
    MoteTensor *y = run1(vm_session, "main", x);
    vm.across = NULL;
    pthread_join(th, NULL);
    lend.block = 0;
    CHECK(vm.across_err != NULL);
    if (vm.across_err) {
        CHECK(mote_error_code(vm.across_err) == MOTE_ERROR_CODE_BUSY);
        CHECK(strstr(mote_error_message(vm.across_err), "another thread") != NULL);
        mote_error_free(vm.across_err);
        vm.across_err = NULL;
    }
    CHECK(mismatches(y, 0.0f, 1.0f, TIMES_TWO) == 0);
    CHECK(mismatches(a.y, 0.0f, 1.0f, PLUS_ONE_TIMES_THREE) == 0);
    mote_tensor_free(y);
    mote_tensor_free(a.y);
    mote_tensor_free(x);
}

/* Outside callbacks, threads sharing one session wait for each other (calls are serialized). */
static MoteSession *shared;
static void *shared_worker(void *p) {
    (void)p;
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t shape[1] = {8};
    MoteTensor *t = NULL;
    OK(mote_tensor_from_copy(F32, shape, 1, x, sizeof x, &t));
    for (int r = 0; r < 20; r++) {
        MoteTensorList *l = NULL;
        OK(mote_session_run(shared, "main", (const MoteTensor *const *)&t, 1, &l));
        MoteTensor *y = only_output(l);
        MoteTensorInfo info;
        OK(mote_tensor_info(y, &info));
        for (int i = 0; i < 8; i++) CHECK(((float *)info.data)[i] == 3.0f * x[i]);
        mote_tensor_free(y);
        mote_tensor_list_free(l);
    }
    mote_tensor_free(t);
    return NULL;
}

static void test_shared_session_serializes(void) {
    MoteModel *m = NULL;
    OK(mote_model_load(path_in(zoo, "raise.so"), &m));
    OK(mote_session_new(m, NULL, &shared));
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, shared_worker, NULL) == 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    mote_session_free(shared);
    mote_model_free(m);
}

/* A free callback may call Mote: it runs after Mote's locks are released (it used to run under
 * the function registry's lock, and registering from it deadlocked). */
static MoteError *noop(void *user_data, const MoteArg *args, size_t n, MoteTensor **result) {
    (void)user_data, (void)args, (void)n, (void)result;
    return NULL;
}
static void free_and_register(void *user_data) {
    (*(int *)user_data)++;
    MoteError *e = mote_function_register("mote.test.registered_by_free", noop, NULL, NULL);
    CHECK(e == NULL);
    mote_error_free(e);
    bool existed = false;
    OK(mote_function_unregister("mote.test.unregistered_by_free", &existed));
    CHECK(existed);
}

static void test_free_callback_may_call_mote(void) {
    int freed = 0;
    OK(mote_function_register("mote.test.unregistered_by_free", noop, NULL, NULL));
    OK(mote_function_register("mote.test.freed", noop, &freed, free_and_register));
    OK(mote_function_register("mote.test.freed", noop, NULL, NULL)); /* replaced: freed */
    CHECK(freed == 1);
    bool existed = false;
    OK(mote_function_unregister("mote.test.registered_by_free", &existed));
    CHECK(existed);
    OK(mote_function_register("mote.test.unregistered_by_free", noop, NULL, NULL));
    OK(mote_function_register("mote.test.freed", noop, &freed, free_and_register));
    OK(mote_function_unregister("mote.test.freed", &existed)); /* removed: freed */
    CHECK(existed && freed == 2);
    OK(mote_function_unregister("mote.test.registered_by_free", &existed));
    CHECK(existed);
}

/* ---- logs -------------------------------------------------------------------------------- */

/* A warning from Mote: a double free is detected and logged. */
static void provoke_warning(void) {
    MoteTensor *t = NULL;
    OK(mote_tensor_new(F32, SHAPE, 1, &t));
    mote_tensor_free(t);
    mote_tensor_free(t);
}

static int first_calls, second_calls;
static MoteError *set_from_inside = (MoteError *)0x1;
static void second_log(void *user_data, uint32_t level, const char *target, const char *message) {
    (void)level, (void)target, (void)message;
    CHECK(user_data == &second_calls);
    second_calls++;
}
static void first_log(void *user_data, uint32_t level, const char *target, const char *message) {
    (void)target;
    CHECK(user_data == &first_calls && level == MOTE_LOG_LEVEL_WARN);
    CHECK(strstr(message, "double free") != NULL);
    first_calls++;
    set_from_inside = mote_log_set_callback(second_log, &second_calls, MOTE_LOG_LEVEL_WARN);
    provoke_warning(); /* made inside the log callback: dropped, not recursed into */
}

/* The log callback replaces itself: no deadlock, and the next record goes to the new one. */
static void test_log_set_from_inside(void) {
    OK(mote_log_set_callback(first_log, &first_calls, MOTE_LOG_LEVEL_WARN));
    provoke_warning();
    CHECK(first_calls == 1 && second_calls == 0);
    CHECK(set_from_inside == NULL);
    provoke_warning();
    CHECK(first_calls == 1 && second_calls == 1);
    OK(mote_log_set_callback(NULL, NULL, MOTE_LOG_LEVEL_OFF));
    provoke_warning();
    CHECK(second_calls == 1);
}

/* Replacing the callback while another thread is inside it waits for that call to return, so
 * the replaced callback's user data may be freed at once (valgrind checks it is not used). */
static atomic_int slow_entered;
static void slow_log(void *user_data, uint32_t level, const char *target, const char *message) {
    (void)level, (void)target, (void)message;
    if (atomic_exchange(&slow_entered, 1)) return;
    usleep(300 * 1000);
    *(int *)user_data = 1;
}
static void *warn_thread(void *p) {
    (void)p;
    provoke_warning();
    return NULL;
}

static void test_log_replace_waits(void) {
    int *done = calloc(1, sizeof *done);
    OK(mote_log_set_callback(slow_log, done, MOTE_LOG_LEVEL_WARN));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, warn_thread, NULL) == 0);
    while (!atomic_load(&slow_entered)) usleep(1000);
    OK(mote_log_set_callback(NULL, NULL, MOTE_LOG_LEVEL_OFF));
    CHECK(*done == 1); /* the running call had finished */
    free(done);
    pthread_join(th, NULL);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s ZOO_DIR MODELS_DIR\n", argv[0]);
        return 2;
    }
    snprintf(zoo, sizeof zoo, "%s", argv[1]);
    snprintf(models, sizeof models, "%s", argv[2]);

    test_vm_path_binding();

    OK(mote_function_register("mote.test.lend", on_lend, NULL, NULL));
    OK(mote_function_register("mote.test.vm_dps", on_vm_dps, NULL, NULL));
    OK(mote_model_load(path_in(models, "lend.so"), &lend_model));
    OK(mote_model_load(path_in(models, "vm_dps.so"), &vm_model));
    OK(mote_session_new(lend_model, NULL, &lend_session));
    OK(mote_session_new(vm_model, NULL, &vm_session));
    test_vm_path_lent();
    test_kernel_path_lent();
    test_reentry();
    test_busy_across_threads();
    mote_session_free(lend_session);
    mote_session_free(vm_session);
    mote_model_free(lend_model);
    mote_model_free(vm_model);
    OK(mote_function_unregister("mote.test.lend", NULL));
    OK(mote_function_unregister("mote.test.vm_dps", NULL));

    test_shared_session_serializes();
    test_free_callback_may_call_mote();
    test_log_set_from_inside();
    test_log_replace_waits();
    return finish("test_callbacks");
}
