/* The corrupted-file corpus through the C ABI (docs/fuzzing.md, "Corrupted files").
 *
 *   corrupt_sweep CORPUS_DIR PASSES EVERY
 *
 * Reads CORPUS_DIR/corpus.tsv (written by the fuzz crate's `corrupt`) and loads every EVERY-th
 * copy PASSES times: mapped (`.so` copies only: a changed byte is never in their code) and
 * read as data (MOTE_LOAD_CODE_FREE). A load that succeeds gets a session, and both are freed.
 * A failure must be a typed error: a code from MOTE_ERROR_CODE_IO to MOTE_ERROR_CODE_DEVICE with
 * a message (MOTE_ERROR_CODE_INTERNAL is a caught Rust panic: a bug). After each pass the
 * resident memory, the open descriptors and the mappings are read: from the end of the first
 * pass to the end of the last, descriptors and mappings must not change and memory may grow by
 * at most 4 MiB (a library left loaded or a handle kept per load would show in all three).
 * Prints the outcomes by error code and exits 1 on any failure. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mote.h"

static long resident_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, pages = 0;
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &size, &pages) != 2) pages = -1;
    fclose(f);
    return pages < 0 ? -1 : pages * (sysconf(_SC_PAGESIZE) / 1024);
}

static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

static int mappings(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    int n = 0, c;
    if (!f) return -1;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static unsigned long outcomes[2][128];
static int failures;

static void check(MoteError *err, MoteModel *model, const char *copy, int code_free) {
    if (!err) {
        MoteSession *session = NULL;
        MoteError *serr = mote_session_new(model, NULL, &session);
        if (serr) {
            unsigned code = mote_error_code(serr);
            if (code == MOTE_ERROR_CODE_INTERNAL) {
                fprintf(stderr, "FAIL %s: session: internal error: %s\n", copy, mote_error_message(serr));
                failures++;
            }
            mote_error_free(serr);
        }
        mote_session_free(session);
        mote_model_free(model);
        outcomes[code_free][0]++;
        return;
    }
    unsigned code = mote_error_code(err);
    const char *msg = mote_error_message(err);
    if (code < MOTE_ERROR_CODE_IO || code > MOTE_ERROR_CODE_DEVICE || !msg || !*msg) {
        fprintf(stderr, "FAIL %s (%s): error code %u: %s\n", copy, code_free ? "code-free" : "mapped",
                code, msg ? msg : "(no message)");
        failures++;
    }
    outcomes[code_free][code < 128 ? code : 127]++;
    mote_error_free(err);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: corrupt_sweep CORPUS_DIR PASSES EVERY\n");
        return 2;
    }
    const char *dir = argv[1];
    int passes = atoi(argv[2]), every = atoi(argv[3]);
    if (passes < 1 || every < 1) return 2;
    char path[4096], line[8192];
    snprintf(path, sizeof path, "%s/corpus.tsv", dir);
    long first_kib = 0, last_kib = 0;
    int first_fds = 0, last_fds = 0, first_maps = 0, last_maps = 0;
    unsigned long copies = 0;
    for (int pass = 0; pass < passes; pass++) {
        FILE *list = fopen(path, "r");
        if (!list) {
            perror(path);
            return 1;
        }
        unsigned long i = 0;
        while (fgets(line, sizeof line, list)) {
            char *tab = strchr(line, '\t');
            if (!tab) continue;
            *tab = '\0';
            if (i++ % (unsigned long)every) continue;
            char copy[4096 + sizeof line];
            snprintf(copy, sizeof copy, "%s/%s", dir, line);
            size_t n = strlen(line);
            MoteModel *model = NULL;
            MoteError *err;
            if (n > 3 && strcmp(line + n - 3, ".so") == 0) {
                err = mote_model_load(copy, &model);
                check(err, model, line, 0);
                model = NULL;
            }
            err = mote_model_load_with_options(copy, MOTE_LOAD_CODE_FREE, &model);
            check(err, model, line, 1);
            if (pass == 0) copies++;
        }
        fclose(list);
        last_kib = resident_kib();
        last_fds = open_fds();
        last_maps = mappings();
        if (pass == 0) {
            first_kib = last_kib;
            first_fds = last_fds;
            first_maps = last_maps;
        }
        printf("pass %d: %lu copies, resident %ld KiB, %d descriptors, %d mappings\n", pass + 1, copies,
               last_kib, last_fds, last_maps);
    }
    for (int cf = 0; cf < 2; cf++) {
        printf("%s:", cf ? "code-free" : "mapped");
        for (int c = 0; c < 128; c++) {
            if (!outcomes[cf][c]) continue;
            if (c == 0) printf(" loaded %lu", outcomes[cf][c]);
            else printf(", error code %d: %lu", c, outcomes[cf][c]);
        }
        printf("\n");
    }
    if (last_fds != first_fds) {
        fprintf(stderr, "FAIL: descriptors %d after the first pass, %d after the last\n", first_fds, last_fds);
        failures++;
    }
    if (last_maps != first_maps) {
        fprintf(stderr, "FAIL: mappings %d after the first pass, %d after the last\n", first_maps, last_maps);
        failures++;
    }
    if (last_kib - first_kib > 4096) {
        fprintf(stderr, "FAIL: resident memory grew by %ld KiB from the first pass to the last\n",
                last_kib - first_kib);
        failures++;
    }
    printf("corrupt sweep: %lu copies x %d passes, %d failures\n", copies, passes, failures);
    return failures ? 1 : 0;
}
