/* Tiny assertion helpers shared by the C tests. */
#ifndef MOTE_TEST_CHECK_H
#define MOTE_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

/* `dir/name` in one of four rotating buffers (so a few can be used in one call). */
static inline const char *file_in(const char *dir, const char *name) {
    static char buf[4][1200];
    static int i = 0;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
    return buf[i];
}

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

/* The call must succeed; otherwise print the error and abort the test program. */
#define OK(call)                                                                  \
    do {                                                                          \
        MoteError *ok_err_ = (call);                                              \
        if (ok_err_) {                                                            \
            fprintf(stderr, "%s:%d: %s failed: [%u] %s\n", __FILE__, __LINE__, #call, \
                    mote_error_code(ok_err_), mote_error_message(ok_err_));       \
            mote_error_free(ok_err_);                                             \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

/* The call must fail with `code`, and its message must contain `needle` (may be ""). */
#define FAILS(call, code, needle)                                                 \
    do {                                                                          \
        MoteError *f_err_ = (call);                                               \
        if (!f_err_) {                                                            \
            fprintf(stderr, "%s:%d: %s succeeded, expected error %d\n", __FILE__, \
                    __LINE__, #call, (int)(code));                                \
            failures++;                                                           \
        } else {                                                                  \
            if (mote_error_code(f_err_) != (uint32_t)(code) ||                    \
                !strstr(mote_error_message(f_err_), (needle))) {                  \
                fprintf(stderr, "%s:%d: %s: got [%u] \"%s\", expected [%d] containing \"%s\"\n", \
                        __FILE__, __LINE__, #call, mote_error_code(f_err_),       \
                        mote_error_message(f_err_), (int)(code), (needle));       \
                failures++;                                                       \
            }                                                                     \
            mote_error_free(f_err_);                                              \
        }                                                                         \
    } while (0)

static int finish(const char *name) {
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
        return 1;
    }
    fprintf(stderr, "%s: all checks passed\n", name);
    return 0;
}

#endif
