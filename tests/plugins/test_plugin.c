/*
 * A test backend plug-in for Mote's plug-in ABI (runtime/include/mote_backend.h).
 *
 * It runs float32 `add` (same shapes, optional fused relu) and `relu` only, so every other
 * node falls back to Mote's CPU backend. Built twice by tests/build.rs: once as is, and once
 * with -DTEST_PLUGIN_ABI_VERSION=99 to check that Mote refuses a wrong ABI version.
 * Counters (test_plugin_runs, test_plugin_nodes_run) let tests see that it really ran.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mote_backend.h"

#ifndef TEST_PLUGIN_ABI_VERSION
#define TEST_PLUGIN_ABI_VERSION MOTE_BACKEND_ABI_VERSION
#endif

/* The layout the runtime's Rust mirror asserts (runtime/src/offload/backends/plugin.rs). */
_Static_assert(offsetof(mote_bk_node_attrs, act_max) == 76, "act_max offset");
_Static_assert(offsetof(mote_bk_node_attrs, act_alpha) == 80, "act_alpha offset");
_Static_assert(offsetof(mote_bk_node_attrs, act_beta) == 84, "act_beta offset");
_Static_assert(offsetof(mote_bk_node_attrs, lrn_size) == 88, "lrn_size offset");
_Static_assert(offsetof(mote_bk_node_attrs, lrn_bias) == 100, "lrn_bias offset");
_Static_assert(offsetof(mote_bk_node_attrs, num_axes) == 104, "num_axes offset");
_Static_assert(offsetof(mote_bk_node_attrs, axes) == 108, "axes offset");
_Static_assert(offsetof(mote_bk_node_attrs, epsilon) == 140, "epsilon offset");
_Static_assert(sizeof(mote_bk_node_attrs) == 144, "mote_bk_node_attrs size");

#define MAX_TENSORS 256
#define MAX_NODES 128

typedef struct {
    int32_t kind;
    int32_t dtype;
    int64_t count;
    float *owned; /* constants and intermediates */
    float *bound; /* inputs and outputs during a run */
} tensor;

typedef struct {
    int32_t op;
    int32_t activation;
    uint32_t in[2];
    uint32_t n_in;
    uint32_t out;
} node;

struct mote_bk_graph {
    tensor tensors[MAX_TENSORS];
    uint32_t n_tensors;
    node nodes[MAX_NODES];
    uint32_t n_nodes;
    int finalized;
};

/* Observable by tests through dlsym. */
uint64_t test_plugin_runs = 0;
uint64_t test_plugin_nodes_run = 0;

static int32_t fail(int32_t code, char *err, size_t errlen, const char *msg) {
    if (err && errlen > 0) {
        snprintf(err, errlen, "%s", msg);
    }
    return code;
}

uint32_t mote_backend_abi_version(void) { return TEST_PLUGIN_ABI_VERSION; }

const char *mote_backend_name(void) { return "testplug"; }

int32_t mote_backend_available(char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    return MOTE_BK_OK;
}

int32_t mote_backend_graph_new(mote_bk_graph **out, char *err, size_t errlen) {
    if (!out) return fail(MOTE_BK_INVALID_ARG, err, errlen, "out is NULL");
    mote_bk_graph *g = calloc(1, sizeof(*g));
    if (!g) return fail(MOTE_BK_RUNTIME_ERROR, err, errlen, "out of memory");
    *out = g;
    return MOTE_BK_OK;
}

int32_t mote_backend_graph_add_tensor(mote_bk_graph *g, const mote_bk_tensor_desc *d,
                                      uint32_t *out_id, char *err, size_t errlen) {
    if (!g || !d || !out_id) return fail(MOTE_BK_INVALID_ARG, err, errlen, "NULL argument");
    if (g->finalized) return fail(MOTE_BK_BAD_STATE, err, errlen, "graph is finalized");
    if (g->n_tensors >= MAX_TENSORS) return fail(MOTE_BK_UNSUPPORTED, err, errlen, "too many tensors");
    if (d->ndim < 0 || d->ndim > MOTE_BK_MAX_DIMS)
        return fail(MOTE_BK_INVALID_ARG, err, errlen, "bad rank");
    tensor *t = &g->tensors[g->n_tensors];
    memset(t, 0, sizeof(*t));
    t->kind = d->kind;
    t->dtype = d->dtype;
    t->count = 1;
    for (int i = 0; i < d->ndim; i++) t->count *= d->dims[i];
    if (d->kind == MOTE_BK_TENSOR_CONSTANT && d->dtype == MOTE_BK_DTYPE_FLOAT32) {
        if (!d->data || d->data_bytes != (uint64_t)t->count * 4)
            return fail(MOTE_BK_INVALID_ARG, err, errlen, "constant without data");
        t->owned = malloc((size_t)t->count * 4 + 1);
        if (!t->owned) return fail(MOTE_BK_RUNTIME_ERROR, err, errlen, "out of memory");
        memcpy(t->owned, d->data, (size_t)t->count * 4);
    }
    *out_id = g->n_tensors++;
    return MOTE_BK_OK;
}

int32_t mote_backend_graph_add_node(mote_bk_graph *g, const char *name,
                                    const mote_bk_node_attrs *a, const uint32_t *inputs,
                                    uint32_t num_inputs, const uint32_t *outputs,
                                    uint32_t num_outputs, char *err, size_t errlen) {
    (void)name;
    if (!g || !a || !inputs || !outputs) return fail(MOTE_BK_INVALID_ARG, err, errlen, "NULL argument");
    if (g->finalized) return fail(MOTE_BK_BAD_STATE, err, errlen, "graph is finalized");
    if (a->struct_size < sizeof(mote_bk_node_attrs))
        return fail(MOTE_BK_INVALID_ARG, err, errlen, "attrs struct too small");
    if (a->op != MOTE_BK_OP_ADD && a->op != MOTE_BK_OP_RELU)
        return fail(MOTE_BK_UNSUPPORTED, err, errlen, "testplug supports only float32 add and relu");
    uint32_t want = a->op == MOTE_BK_OP_ADD ? 2 : 1;
    if (num_inputs != want || num_outputs != 1)
        return fail(MOTE_BK_INVALID_ARG, err, errlen, "wrong operand count");
    for (uint32_t i = 0; i < num_inputs; i++)
        if (inputs[i] >= g->n_tensors) return fail(MOTE_BK_INVALID_ARG, err, errlen, "bad tensor id");
    if (outputs[0] >= g->n_tensors) return fail(MOTE_BK_INVALID_ARG, err, errlen, "bad tensor id");
    const tensor *o = &g->tensors[outputs[0]];
    for (uint32_t i = 0; i < num_inputs; i++) {
        const tensor *t = &g->tensors[inputs[i]];
        if (t->dtype != MOTE_BK_DTYPE_FLOAT32)
            return fail(MOTE_BK_UNSUPPORTED, err, errlen, "testplug supports float32 only");
        if (t->count != o->count)
            return fail(MOTE_BK_UNSUPPORTED, err, errlen, "testplug does not broadcast");
    }
    if (a->activation != MOTE_BK_ACT_NONE && a->activation != MOTE_BK_ACT_RELU)
        return fail(MOTE_BK_UNSUPPORTED, err, errlen, "testplug fuses relu only");
    if (g->n_nodes >= MAX_NODES) return fail(MOTE_BK_UNSUPPORTED, err, errlen, "too many nodes");
    node *n = &g->nodes[g->n_nodes++];
    n->op = a->op;
    n->activation = a->activation;
    n->n_in = num_inputs;
    for (uint32_t i = 0; i < num_inputs; i++) n->in[i] = inputs[i];
    n->out = outputs[0];
    return MOTE_BK_OK;
}

int32_t mote_backend_graph_finalize(mote_bk_graph *g, char *err, size_t errlen) {
    if (!g) return fail(MOTE_BK_INVALID_ARG, err, errlen, "NULL graph");
    if (g->finalized) return fail(MOTE_BK_BAD_STATE, err, errlen, "already finalized");
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        tensor *t = &g->tensors[i];
        if (t->kind == MOTE_BK_TENSOR_INTERMEDIATE) {
            t->owned = calloc((size_t)t->count + 1, sizeof(float));
            if (!t->owned) return fail(MOTE_BK_RUNTIME_ERROR, err, errlen, "out of memory");
        }
    }
    g->finalized = 1;
    return MOTE_BK_OK;
}

static float *data_of(tensor *t) { return t->owned ? t->owned : t->bound; }

int32_t mote_backend_graph_run(mote_bk_graph *g, const void *const *inputs, uint32_t num_inputs,
                               void *const *outputs, uint32_t num_outputs, char *err,
                               size_t errlen) {
    if (!g) return fail(MOTE_BK_INVALID_ARG, err, errlen, "NULL graph");
    if (!g->finalized) return fail(MOTE_BK_BAD_STATE, err, errlen, "not finalized");
    uint32_t ni = 0, no = 0;
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        tensor *t = &g->tensors[i];
        if (t->kind == MOTE_BK_TENSOR_INPUT) {
            if (ni >= num_inputs || !inputs[ni]) return fail(MOTE_BK_INVALID_ARG, err, errlen, "missing input");
            t->bound = (float *)inputs[ni++];
        } else if (t->kind == MOTE_BK_TENSOR_OUTPUT) {
            if (no >= num_outputs || !outputs[no]) return fail(MOTE_BK_INVALID_ARG, err, errlen, "missing output");
            t->bound = (float *)outputs[no++];
        }
    }
    if (ni != num_inputs || no != num_outputs)
        return fail(MOTE_BK_INVALID_ARG, err, errlen, "wrong number of buffers");
    for (uint32_t k = 0; k < g->n_nodes; k++) {
        node *n = &g->nodes[k];
        tensor *o = &g->tensors[n->out];
        float *y = data_of(o);
        const float *a = data_of(&g->tensors[n->in[0]]);
        const float *b = n->n_in > 1 ? data_of(&g->tensors[n->in[1]]) : NULL;
        for (int64_t i = 0; i < o->count; i++) {
            float v = b ? a[i] + b[i] : a[i];
            if (n->op == MOTE_BK_OP_RELU || n->activation == MOTE_BK_ACT_RELU) v = v > 0.0f ? v : 0.0f;
            y[i] = v;
        }
        test_plugin_nodes_run++;
    }
    for (uint32_t i = 0; i < g->n_tensors; i++) g->tensors[i].bound = NULL;
    test_plugin_runs++;
    return MOTE_BK_OK;
}

void mote_backend_graph_free(mote_bk_graph *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].owned);
    free(g);
}
