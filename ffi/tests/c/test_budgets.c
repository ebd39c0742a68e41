/* Budgets and cancellation through the C ABI (docs/untrusted-models.md §3-§4), on models
 * written by `cargo run -p mote-ffi --example craft_models -- CRAFTED_DIR` (from
 * mote::fuzzing::craft; nothing opaque is checked in) and one zoo model:
 *
 *   test_budgets CRAFTED_DIR ZOO_DIR
 *
 * endless_loop.tar: main() loops forever. loop_and_recursion.tar: the same main(), and
 * recurse(x), which calls itself forever. inflating.tar.gz: endless_loop.tar and 32 MiB of
 * zeros, gzip-compressed. A watchdog (alarm) fails the program if a call is never stopped.
 */
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "mote.h"
#include "check.h"

static char crafted[1024], zoo[1024];

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static MoteModel *load_crafted(const char *name) {
    MoteModel *m = NULL;
    OK(mote_model_load_with_options(file_in(crafted, name), MOTE_LOAD_CODE_FREE, &m));
    return m;
}

static MoteSession *session_with(MoteModel *m, uint64_t max_instructions, size_t max_registers) {
    MoteSessionOptions *o = NULL;
    MoteSession *s = NULL;
    OK(mote_session_options_new(&o));
    OK(mote_session_options_set_max_instructions(o, max_instructions));
    OK(mote_session_options_set_max_registers(o, max_registers));
    OK(mote_session_new(m, o, &s));
    mote_session_options_free(o);
    return s;
}

/* Runs `function` with no inputs; returns the error code (0 on success) and checks that the
 * message names `needle`. */
static uint32_t run(MoteSession *s, const char *function, const char *needle) {
    MoteTensorList *out = (MoteTensorList *)0x1;
    MoteError *e = mote_session_run(s, function, NULL, 0, &out);
    uint32_t code = mote_error_code(e);
    if (e && !strstr(mote_error_message(e), needle)) {
        fprintf(stderr, "run %s: [%u] \"%s\" does not name \"%s\"\n", function, code, mote_error_message(e),
                needle);
        failures++;
    }
    CHECK(e != NULL && out == (MoteTensorList *)0x1); /* these calls never return */
    mote_error_free(e);
    return code;
}

/* The setters refuse 0 (a budget cannot be turned off) and bad handles. */
static void test_setters(void) {
    MoteSessionOptions *o = NULL;
    OK(mote_session_options_new(&o));
    FAILS(mote_session_options_set_memory_budget(o, 0), MOTE_ERROR_CODE_INVALID_ARGUMENT, "memory budget");
    FAILS(mote_session_options_set_max_registers(o, 0), MOTE_ERROR_CODE_INVALID_ARGUMENT, "max registers");
    FAILS(mote_session_options_set_stack_budget(o, 0), MOTE_ERROR_CODE_INVALID_ARGUMENT, "stack budget");
    FAILS(mote_session_options_set_max_instructions(o, 0), MOTE_ERROR_CODE_INVALID_ARGUMENT, "max instructions");
    FAILS(mote_session_options_set_max_instructions(NULL, 1), MOTE_ERROR_CODE_NULL_ARGUMENT, "");
    mote_session_options_free(o);
    FAILS(mote_session_options_set_stack_budget(o, 1), MOTE_ERROR_CODE_INVALID_HANDLE, "");
}

/* (a) The endless loop under a small instruction budget: RESOURCE_EXHAUSTED naming it, on
 * every call (the count restarts with each call). */
static void test_instruction_budget(void) {
    MoteModel *m = load_crafted("endless_loop.tar");
    MoteSession *s = session_with(m, 10000, 1 << 20);
    for (int i = 0; i < 2; i++)
        CHECK(run(s, "main", "SessionOptions::max_instructions") == MOTE_ERROR_CODE_RESOURCE_EXHAUSTED &&
              run(s, "main", "budget of 10000 instructions") == MOTE_ERROR_CODE_RESOURCE_EXHAUSTED);
    mote_session_free(s);
    mote_model_free(m);
}

/* recurse(1.0f), which calls itself forever, fails with RESOURCE_EXHAUSTED, a message
 * containing `needle`, and no outputs. */
static void recursion_exhausts(MoteSession *s, const char *needle) {
    float one = 1;
    MoteTensor *x = NULL;
    MoteTensorList *out = NULL;
    MoteDtype f32 = {MOTE_DTYPE_CODE_FLOAT, 32, 1};
    OK(mote_tensor_from_copy(f32, NULL, 0, &one, sizeof one, &x));
    FAILS(mote_session_run(s, "recurse", (const MoteTensor *const *)&x, 1, &out),
          MOTE_ERROR_CODE_RESOURCE_EXHAUSTED, needle);
    CHECK(out == NULL);
    mote_tensor_free(x);
}

/* The register and stack budgets stop endless recursion; the memory budget stops a zoo
 * model's first allocation. Each message names its option. */
static void test_other_session_budgets(void) {
    MoteModel *m = load_crafted("loop_and_recursion.tar");
    MoteSession *s = session_with(m, UINT64_MAX, 256); /* 16 registers a frame: 16 frames */
    recursion_exhausts(s, "more than the budget of 256");
    mote_session_free(s);

    MoteSessionOptions *o = NULL;
    OK(mote_session_options_new(&o));
    OK(mote_session_options_set_stack_budget(o, 16 << 10));
    OK(mote_session_new(m, o, &s));
    recursion_exhausts(s, "the stack budget of 16384 bytes");
    mote_session_free(s);
    mote_model_free(m);

    /* raise.so computes 3 * x: 32 bytes of output do not fit in 16. */
    OK(mote_model_load(file_in(zoo, "raise.so"), &m));
    OK(mote_session_options_set_memory_budget(o, 16));
    OK(mote_session_new(m, o, &s));
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t shape[1] = {8};
    MoteDtype f32 = {MOTE_DTYPE_CODE_FLOAT, 32, 1};
    MoteTensor *v = NULL;
    MoteTensorList *out = NULL;
    OK(mote_tensor_from_copy(f32, shape, 1, data, sizeof data, &v));
    FAILS(mote_session_run(s, "main", (const MoteTensor *const *)&v, 1, &out), MOTE_ERROR_CODE_RESOURCE_EXHAUSTED,
          "budget of 16 bytes");
    mote_session_free(s);
    /* With room for it, the same call computes 3 * x. */
    OK(mote_session_options_set_memory_budget(o, 1 << 20));
    OK(mote_session_new(m, o, &s));
    MoteTensor *y = NULL;
    MoteTensorInfo info;
    OK(mote_session_run(s, "main", (const MoteTensor *const *)&v, 1, &out));
    OK(mote_tensor_list_get(out, 0, &y));
    OK(mote_tensor_info(y, &info));
    CHECK(info.byte_size == sizeof data && ((float *)info.data)[7] == 24.0f);
    mote_tensor_free(y);
    mote_tensor_list_free(out);
    mote_tensor_free(v);
    mote_session_free(s);
    mote_session_options_free(o);
    mote_model_free(m);
}

struct interrupter {
    MoteSession *session;
    unsigned delay_ms;
    double returned_after_ms; /* how long mote_session_interrupt itself took */
    uint32_t code;            /* its error code, 0 for success */
};

static void *interrupt_later(void *arg) {
    struct interrupter *it = arg;
    usleep(it->delay_ms * 1000u);
    double t0 = now_ms();
    MoteError *e = mote_session_interrupt(it->session);
    it->returned_after_ms = now_ms() - t0;
    it->code = mote_error_code(e);
    mote_error_free(e);
    return NULL;
}

/* (b) No instruction budget to speak of: only the interrupt, from another thread while this
 * one runs the call (holding the session), ends it. The interrupt must not wait for the
 * session: if it did, neither thread would ever return (the watchdog fails the program). The
 * session then runs other calls: recursion stopped by its register budget, and the loop once
 * more, cancelled again. */
static void test_interrupt_while_running(void) {
    MoteModel *m = load_crafted("loop_and_recursion.tar");
    MoteSession *s = session_with(m, UINT64_MAX, 256);
    for (int round = 0; round < 2; round++) {
        struct interrupter it = {s, 50, -1, 99};
        pthread_t th;
        double t0 = now_ms();
        CHECK(pthread_create(&th, NULL, interrupt_later, &it) == 0);
        CHECK(run(s, "main", "") == MOTE_ERROR_CODE_CANCELLED);
        double took = now_ms() - t0;
        pthread_join(th, NULL);
        CHECK(it.code == 0);
        CHECK(took >= 45); /* it ran until interrupted */
        CHECK(it.returned_after_ms >= 0 && it.returned_after_ms < 1000);
        fprintf(stderr, "round %d: cancelled after %.0f ms; the interrupt returned in %.3f ms\n", round, took,
                it.returned_after_ms);
        recursion_exhausts(s, "SessionOptions::max_registers");
    }
    mote_session_free(s);
    mote_model_free(m);
}

/* (c) An interrupt while no call runs cancels exactly the next call; two of them before a
 * call count as one. Bad handles are errors. */
static void test_interrupt_while_idle(void) {
    MoteModel *m = load_crafted("endless_loop.tar");
    MoteSession *s = session_with(m, 10000, 1 << 20);
    OK(mote_session_interrupt(s));
    CHECK(run(s, "main", "") == MOTE_ERROR_CODE_CANCELLED);
    CHECK(run(s, "main", "max_instructions") == MOTE_ERROR_CODE_RESOURCE_EXHAUSTED);
    OK(mote_session_interrupt(s));
    OK(mote_session_interrupt(s));
    CHECK(run(s, "main", "") == MOTE_ERROR_CODE_CANCELLED);
    CHECK(run(s, "main", "max_instructions") == MOTE_ERROR_CODE_RESOURCE_EXHAUSTED);
    FAILS(mote_session_interrupt(NULL), MOTE_ERROR_CODE_NULL_ARGUMENT, "MoteSession");
    FAILS(mote_session_interrupt((MoteSession *)m), MOTE_ERROR_CODE_INVALID_HANDLE, "MoteSession");
    mote_session_free(s);
    FAILS(mote_session_interrupt(s), MOTE_ERROR_CODE_INVALID_HANDLE, "not live");
    mote_model_free(m);
}

/* (d) The load budget: the archive inflates to 32 MiB and more; over a 4 MiB budget the load
 * is RESOURCE_EXHAUSTED, from a path and from memory; with 64 MiB, or the default, it loads
 * (and is the endless loop). A budget needs a code-free load and is never 0. */
static void test_load_budget(void) {
    const char *path = file_in(crafted, "inflating.tar.gz");
    MoteModel *m = (MoteModel *)0x1;
    FAILS(mote_model_load_with_budget(path, MOTE_LOAD_CODE_FREE, 4 << 20, &m), MOTE_ERROR_CODE_RESOURCE_EXHAUSTED,
          "the load's budget of 4194304 bytes");
    FAILS(mote_model_load_with_budget(path, MOTE_LOAD_CODE_FREE | MOTE_LOAD_READ_FILE, 4 << 20, &m),
          MOTE_ERROR_CODE_RESOURCE_EXHAUSTED, "LoadOptions::memory_budget");
    FAILS(mote_model_load_with_budget(path, 0, 64 << 20, &m), MOTE_ERROR_CODE_INVALID_ARGUMENT,
          "MOTE_LOAD_CODE_FREE");
    FAILS(mote_model_load_with_budget(path, MOTE_LOAD_CODE_FREE, 0, &m), MOTE_ERROR_CODE_INVALID_ARGUMENT,
          "at least 1 byte");
    FAILS(mote_model_load_with_budget(path, MOTE_LOAD_CODE_FREE | 0x80, 64 << 20, &m),
          MOTE_ERROR_CODE_INVALID_ARGUMENT, "unknown load flags 0x80");
    FAILS(mote_model_load_with_budget(NULL, MOTE_LOAD_CODE_FREE, 64 << 20, &m), MOTE_ERROR_CODE_NULL_ARGUMENT,
          "path");
    CHECK(m == (MoteModel *)0x1);

    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    static unsigned char bytes[1 << 20];
    size_t n = f ? fread(bytes, 1, sizeof bytes, f) : 0;
    if (f) fclose(f);
    CHECK(n > 0 && n < sizeof bytes);
    FAILS(mote_model_load_from_memory_with_budget(bytes, n, MOTE_LOAD_CODE_FREE, 4 << 20, &m),
          MOTE_ERROR_CODE_RESOURCE_EXHAUSTED, "LoadOptions::memory_budget");
    FAILS(mote_model_load_from_memory_with_budget(NULL, n, MOTE_LOAD_CODE_FREE, 4 << 20, &m),
          MOTE_ERROR_CODE_NULL_ARGUMENT, "data");
    CHECK(m == (MoteModel *)0x1);

    OK(mote_model_load_from_memory_with_budget(bytes, n, MOTE_LOAD_CODE_FREE, 64 << 20, &m));
    mote_model_free(m);
    OK(mote_model_load_with_options(path, MOTE_LOAD_CODE_FREE, &m));
    MoteSession *s = session_with(m, 1000, 1 << 20);
    CHECK(run(s, "main", "max_instructions") == MOTE_ERROR_CODE_RESOURCE_EXHAUSTED);
    mote_session_free(s);
    mote_model_free(m);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CRAFTED_DIR ZOO_DIR\n", argv[0]);
        return 2;
    }
    snprintf(crafted, sizeof crafted, "%s", argv[1]);
    snprintf(zoo, sizeof zoo, "%s", argv[2]);
    alarm(120); /* a call nothing stopped: SIGALRM ends the program, and the check fails */
    test_setters();
    test_instruction_budget();
    test_other_session_budgets();
    test_interrupt_while_running();
    test_interrupt_while_idle();
    test_load_budget();
    return finish("test_budgets");
}
