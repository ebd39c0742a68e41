/*
 * test_acl_shim.c: drives libmote_acl.so through the Mote backend plug-in ABI (dlopen + dlsym)
 * and compares every op with a naive double-precision reference written here.
 *
 *   test_acl_shim PATH/TO/libmote_acl.so
 *
 * fp32: |got - ref| <= 1e-4 * max(1, |ref|); quantized: within 1 LSB.
 * Last line: "acl checks: N passed, M failed"; exit status 1 if any failed.
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mote_backend.h"

/* ---- ABI entry points ---- */
static uint32_t (*p_abi)(void);
static const char *(*p_name)(void);
static int32_t (*p_avail)(char *, size_t);
static int32_t (*p_new)(mote_bk_graph **, char *, size_t);
static int32_t (*p_add_tensor)(mote_bk_graph *, const mote_bk_tensor_desc *, uint32_t *, char *, size_t);
static int32_t (*p_add_node)(mote_bk_graph *, const char *, const mote_bk_node_attrs *, const uint32_t *, uint32_t,
                             const uint32_t *, uint32_t, char *, size_t);
static int32_t (*p_finalize)(mote_bk_graph *, char *, size_t);
static int32_t (*p_run)(mote_bk_graph *, const void *const *, uint32_t, void *const *, uint32_t, char *, size_t);
static void (*p_free)(mote_bk_graph *);

static int g_pass, g_fail;
static char g_err[512];

static void check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok) g_pass++; else g_fail++;
    fflush(stdout);
}

/* ---- deterministic data ---- */
static uint32_t g_seed = 12345;
static float frand(float lo, float hi) {
    g_seed = g_seed * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)((g_seed >> 8) / 16777216.0);
}
static int irand(int lo, int hi) { return lo + (int)(frand(0.f, 0.999999f) * (float)(hi - lo + 1)); }
static float *rand_f(size_t n, float lo, float hi) {
    float *p = aligned_alloc(64, ((n * 4 + 63) / 64) * 64);
    for (size_t i = 0; i < n; i++) p[i] = frand(lo, hi);
    return p;
}
static void *alloc64(size_t bytes) {
    void *p = aligned_alloc(64, ((bytes + 63) / 64) * 64 + 64);
    memset(p, 0, bytes);
    return p;
}

/* ---- graph helpers ---- */
#define DIMS(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static size_t esize(int dt) { return dt == MOTE_BK_DTYPE_FLOAT16 ? 2 : (dt == MOTE_BK_DTYPE_INT8 || dt == MOTE_BK_DTYPE_UINT8) ? 1 : 4; }

static uint32_t tq(mote_bk_graph *g, int kind, int dtype, const int64_t *dims, int ndim, const void *data,
                   uint32_t nsc, const float *sc, const int32_t *zp, int qaxis) {
    mote_bk_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.kind = kind;
    d.dtype = dtype;
    d.ndim = ndim;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) { d.dims[i] = dims[i]; n *= (size_t)dims[i]; }
    d.quant_axis = qaxis;
    d.num_scales = nsc;
    d.scales = sc;
    d.zero_points = zp;
    d.data = data;
    d.data_bytes = data ? n * esize(dtype) : 0;
    uint32_t id = 0xffffffffu;
    int32_t st = p_add_tensor(g, &d, &id, g_err, sizeof g_err);
    if (st != MOTE_BK_OK) { printf("add_tensor failed (%d): %s\n", st, g_err); return 0xffffffffu; }
    return id;
}
static uint32_t tf(mote_bk_graph *g, int kind, const int64_t *dims, int ndim, const void *data) {
    return tq(g, kind, MOTE_BK_DTYPE_FLOAT32, dims, ndim, data, 0, NULL, NULL, -1);
}
static uint32_t tq1(mote_bk_graph *g, int kind, int dt, const int64_t *dims, int ndim, const void *data, const float *s,
                    const int32_t *z) {
    return tq(g, kind, dt, dims, ndim, data, 1, s, z, -1);
}

static mote_bk_node_attrs attrs(int op) {
    mote_bk_node_attrs a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.op = op;
    a.strides[0] = a.strides[1] = 1;
    a.dilation[0] = a.dilation[1] = 1;
    a.groups = 1;
    return a;
}
static int32_t node(mote_bk_graph *g, const char *name, const mote_bk_node_attrs *a, const uint32_t *in, uint32_t nin,
                    uint32_t out) {
    return p_add_node(g, name, a, in, nin, &out, 1, g_err, sizeof g_err);
}
static mote_bk_graph *gnew(void) {
    mote_bk_graph *g = NULL;
    if (p_new(&g, g_err, sizeof g_err) != MOTE_BK_OK) { printf("graph_new failed: %s\n", g_err); return NULL; }
    return g;
}
/* add_node + finalize + run with one input list; returns status (prints errors). */
static int32_t build_run(mote_bk_graph *g, const char *what, const void *const *ins, uint32_t nin, void *const *outs,
                         uint32_t nout) {
    int32_t st = p_finalize(g, g_err, sizeof g_err);
    if (st) { printf("  %s: finalize -> %d: %s\n", what, st, g_err); return st; }
    st = p_run(g, ins, nin, outs, nout, g_err, sizeof g_err);
    if (st) printf("  %s: run -> %d: %s\n", what, st, g_err);
    return st;
}

/* ---- comparisons ---- */
static double act_apply(double v, int act, double lo, double hi) {
    if (act == MOTE_BK_ACT_RELU) return v < 0 ? 0 : v;
    if (act == MOTE_BK_ACT_RELU6) return v < 0 ? 0 : v > 6 ? 6 : v;
    if (act == MOTE_BK_ACT_CLIP) return v < lo ? lo : v > hi ? hi : v;
    return v;
}
static void cmp_f(const char *what, const float *got, const double *ref, size_t n) {
    double maxe = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        double tol = 1e-4 * (fabs(ref[i]) > 1 ? fabs(ref[i]) : 1);
        if (!(e <= tol)) bad = 1;
        if (e > maxe || e != e) maxe = e;
    }
    check(!bad, "%s: %zu values, max abs err %.3g", what, n, maxe);
}
static long qround(double v, long zp, long lo, long hi) {
    long q = (long)nearbyint(v) + zp;
    return q < lo ? lo : q > hi ? hi : q;
}
static void cmp_q(const char *what, const void *got, int dt, const long *ref, size_t n) {
    long maxe = 0;
    for (size_t i = 0; i < n; i++) {
        long g = dt == MOTE_BK_DTYPE_UINT8 ? (long)((const uint8_t *)got)[i] : (long)((const int8_t *)got)[i];
        long e = labs(g - ref[i]);
        if (e > maxe) maxe = e;
    }
    check(maxe <= 1, "%s: %zu values, max err %ld LSB", what, n, maxe);
}

/* ---- references ---- */
static size_t xidx(int nhwc, int C, int H, int W, int n, int c, int h, int w) {
    return nhwc ? (((size_t)n * H + h) * W + w) * C + c : (((size_t)n * C + c) * H + h) * W + w;
}
/* generic (grouped) conv: x, w as doubles; weights OHWI (nhwc) or OIHW; out acc + bias (no act). */
static void ref_conv(int nhwc, const double *x, int N, int C, int H, int W, const double *w, int O, int KH, int KW,
                     int groups, const double *b, const int st[2], const int pad[4], const int dil[2], double *y,
                     int OH, int OW) {
    int Ig = C / groups, Og = O / groups;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double acc = b ? b[o] : 0;
                    int grp = o / Og;
                    for (int i = 0; i < Ig; i++)
                        for (int kh = 0; kh < KH; kh++)
                            for (int kw = 0; kw < KW; kw++) {
                                int ih = oh * st[0] - pad[0] + kh * dil[0];
                                int iw = ow * st[1] - pad[1] + kw * dil[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                int c = grp * Ig + i;
                                size_t wi = nhwc ? (((size_t)o * KH + kh) * KW + kw) * Ig + i
                                                 : (((size_t)o * Ig + i) * KH + kh) * KW + kw;
                                acc += x[xidx(nhwc, C, H, W, n, c, ih, iw)] * w[wi];
                            }
                    y[xidx(nhwc, O, OH, OW, n, o, oh, ow)] = acc;
                }
}
static int out_size(int in, int k, int s, int p0, int p1, int d, int ceilm) {
    int eff = d * (k - 1) + 1;
    int num = in + p0 + p1 - eff;
    return (ceilm ? (num + s - 1) / s : num / s) + 1;
}
static double *to_d(const float *p, size_t n) {
    double *d = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = p[i];
    return d;
}

/* ================================================================================ tests */

typedef struct {
    int nhwc, N, C, H, W, O, KH, KW, groups, st[2], pad[4], dil[2], act, bias;
    float lo, hi;
    int dtype_override; /* fp16 test */
} conv_case;

/* fp32 conv through the ABI vs reference. Returns add_node status. */
static int32_t conv_f32(const char *what, conv_case cc, int expect_ok) {
    int Ig = cc.C / cc.groups;
    int OH = out_size(cc.H, cc.KH, cc.st[0], cc.pad[0], cc.pad[2], cc.dil[0], 0);
    int OW = out_size(cc.W, cc.KW, cc.st[1], cc.pad[1], cc.pad[3], cc.dil[1], 0);
    size_t nx = (size_t)cc.N * cc.C * cc.H * cc.W, nw = (size_t)cc.O * Ig * cc.KH * cc.KW,
           ny = (size_t)cc.N * cc.O * OH * OW;
    float *x = rand_f(nx, -1, 1), *w = rand_f(nw, -1, 1), *b = rand_f(cc.O, -0.5f, 0.5f);
    float *y = alloc64(ny * 4);
    mote_bk_graph *g = gnew();
    int dt = cc.dtype_override ? cc.dtype_override : MOTE_BK_DTYPE_FLOAT32;
    uint32_t tx, ty, tw, tb = 0;
    if (cc.nhwc) {
        tx = tq(g, MOTE_BK_TENSOR_INPUT, dt, DIMS(cc.N, cc.H, cc.W, cc.C), NULL, 0, NULL, NULL, -1);
        ty = tq(g, MOTE_BK_TENSOR_OUTPUT, dt, DIMS(cc.N, OH, OW, cc.O), NULL, 0, NULL, NULL, -1);
        tw = tq(g, MOTE_BK_TENSOR_CONSTANT, dt, DIMS(cc.O, cc.KH, cc.KW, Ig), w, 0, NULL, NULL, -1);
    } else {
        tx = tq(g, MOTE_BK_TENSOR_INPUT, dt, DIMS(cc.N, cc.C, cc.H, cc.W), NULL, 0, NULL, NULL, -1);
        ty = tq(g, MOTE_BK_TENSOR_OUTPUT, dt, DIMS(cc.N, cc.O, OH, OW), NULL, 0, NULL, NULL, -1);
        tw = tq(g, MOTE_BK_TENSOR_CONSTANT, dt, DIMS(cc.O, Ig, cc.KH, cc.KW), w, 0, NULL, NULL, -1);
    }
    if (cc.bias) tb = tq(g, MOTE_BK_TENSOR_CONSTANT, dt, DIMS(cc.O), b, 0, NULL, NULL, -1);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_CONV2D);
    a.layout = cc.nhwc ? MOTE_BK_LAYOUT_NHWC : MOTE_BK_LAYOUT_NCHW;
    memcpy(a.strides, cc.st, sizeof a.strides);
    memcpy(a.padding, cc.pad, sizeof a.padding);
    memcpy(a.dilation, cc.dil, sizeof a.dilation);
    a.groups = cc.groups;
    a.activation = cc.act;
    a.act_min = cc.lo;
    a.act_max = cc.hi;
    uint32_t ins[3] = {tx, tw, tb};
    int32_t st = node(g, what, &a, ins, cc.bias ? 3 : 2, ty);
    if (!expect_ok) {
        p_free(g);
        free(x); free(w); free(b); free(y);
        return st;
    }
    if (st != MOTE_BK_OK) {
        check(0, "%s: add_node -> %d: %s", what, st, g_err);
    } else if (build_run(g, what, (const void *[]){x}, 1, (void *[]){y}, 1) == MOTE_BK_OK) {
        double *xd = to_d(x, nx), *wd = to_d(w, nw), *bd = to_d(b, cc.O), *r = malloc(ny * sizeof(double));
        ref_conv(cc.nhwc, xd, cc.N, cc.C, cc.H, cc.W, wd, cc.O, cc.KH, cc.KW, cc.groups, cc.bias ? bd : NULL, cc.st,
                 cc.pad, cc.dil, r, OH, OW);
        for (size_t i = 0; i < ny; i++) r[i] = act_apply(r[i], cc.act, cc.lo, cc.hi);
        cmp_f(what, y, r, ny);
        free(xd); free(wd); free(bd); free(r);
    } else {
        check(0, "%s: finalize/run", what);
    }
    p_free(g);
    free(x); free(w); free(b); free(y);
    return st;
}

/* quantized conv (regular or depthwise), NHWC. */
static void conv_q(const char *what, int dt, int per_channel, conv_case cc, float sx, int zx, float sw, int zw,
                   float so, int zo) {
    int Ig = cc.C / cc.groups;
    int OH = out_size(cc.H, cc.KH, cc.st[0], cc.pad[0], cc.pad[2], cc.dil[0], 0);
    int OW = out_size(cc.W, cc.KW, cc.st[1], cc.pad[1], cc.pad[3], cc.dil[1], 0);
    size_t nx = (size_t)cc.N * cc.C * cc.H * cc.W, nw = (size_t)cc.O * Ig * cc.KH * cc.KW,
           ny = (size_t)cc.N * cc.O * OH * OW;
    long qlo = dt == MOTE_BK_DTYPE_UINT8 ? 0 : -128, qhi = dt == MOTE_BK_DTYPE_UINT8 ? 255 : 127;
    uint8_t *x = alloc64(nx), *w = alloc64(nw), *y = alloc64(ny);
    int32_t *b = alloc64(cc.O * 4);
    float *wsc = malloc(cc.O * sizeof(float));
    int32_t *wzp = calloc(cc.O, sizeof(int32_t));
    double *xd = malloc(nx * sizeof(double)), *wd = malloc(nw * sizeof(double)), *bd = malloc(cc.O * sizeof(double));
    int wdt = per_channel ? MOTE_BK_DTYPE_INT8 : dt;
    for (size_t i = 0; i < nx; i++) {
        long v = irand((int)qlo, (int)qhi);
        if (dt == MOTE_BK_DTYPE_UINT8) x[i] = (uint8_t)v; else ((int8_t *)x)[i] = (int8_t)v;
        xd[i] = (double)(v - zx);
    }
    for (int o = 0; o < cc.O; o++) { wsc[o] = per_channel ? sw * (0.5f + 0.25f * (o % 4)) : sw; wzp[o] = per_channel ? 0 : zw; }
    for (size_t i = 0; i < nw; i++) {
        int o = (int)(i / (nw / cc.O));
        long v = wdt == MOTE_BK_DTYPE_UINT8 ? irand(0, 255) : irand(-127, 127);
        if (wdt == MOTE_BK_DTYPE_UINT8) w[i] = (uint8_t)v; else ((int8_t *)w)[i] = (int8_t)v;
        wd[i] = (double)(v - wzp[o]);
    }
    for (int o = 0; o < cc.O; o++) { b[o] = irand(-2000, 2000); bd[o] = b[o]; }
    mote_bk_graph *g = gnew();
    uint32_t tx = tq1(g, MOTE_BK_TENSOR_INPUT, dt, DIMS(cc.N, cc.H, cc.W, cc.C), NULL, &sx, (int32_t[]){zx});
    uint32_t ty = tq1(g, MOTE_BK_TENSOR_OUTPUT, dt, DIMS(cc.N, OH, OW, cc.O), NULL, &so, (int32_t[]){zo});
    uint32_t tw = per_channel ? tq(g, MOTE_BK_TENSOR_CONSTANT, wdt, DIMS(cc.O, cc.KH, cc.KW, Ig), w, cc.O, wsc, wzp, 0)
                              : tq1(g, MOTE_BK_TENSOR_CONSTANT, wdt, DIMS(cc.O, cc.KH, cc.KW, Ig), w, wsc, wzp);
    float *bsc = malloc(cc.O * sizeof(float));
    for (int o = 0; o < cc.O; o++) bsc[o] = sx * wsc[o];
    uint32_t tb = per_channel ? tq(g, MOTE_BK_TENSOR_CONSTANT, MOTE_BK_DTYPE_INT32, DIMS(cc.O), b, cc.O, bsc, wzp, 0)
                              : tq1(g, MOTE_BK_TENSOR_CONSTANT, MOTE_BK_DTYPE_INT32, DIMS(cc.O), b, bsc, wzp);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_CONV2D);
    a.layout = MOTE_BK_LAYOUT_NHWC;
    memcpy(a.strides, cc.st, sizeof a.strides);
    memcpy(a.padding, cc.pad, sizeof a.padding);
    memcpy(a.dilation, cc.dil, sizeof a.dilation);
    a.groups = cc.groups;
    a.activation = cc.act;
    a.act_min = cc.lo;
    a.act_max = cc.hi;
    int32_t st = node(g, what, &a, (uint32_t[]){tx, tw, tb}, 3, ty);
    if (st != MOTE_BK_OK) {
        check(0, "%s: add_node -> %d: %s", what, st, g_err);
    } else if (build_run(g, what, (const void *[]){x}, 1, (void *[]){y}, 1) == MOTE_BK_OK) {
        double *r = malloc(ny * sizeof(double));
        long *rq = malloc(ny * sizeof(long));
        ref_conv(1, xd, cc.N, cc.C, cc.H, cc.W, wd, cc.O, cc.KH, cc.KW, cc.groups, bd, cc.st, cc.pad, cc.dil, r, OH, OW);
        for (size_t i = 0; i < ny; i++) {
            int o = (int)(i % cc.O);
            double real = act_apply(r[i] * (double)sx * (double)wsc[o], cc.act, cc.lo, cc.hi);
            rq[i] = qround(real / so, zo, qlo, qhi);
        }
        cmp_q(what, y, dt, rq, ny);
        free(r); free(rq);
    } else {
        check(0, "%s: finalize/run", what);
    }
    p_free(g);
    free(x); free(w); free(y); free(b); free(wsc); free(wzp); free(xd); free(wd); free(bd); free(bsc);
}

/* pooling ref + test (fp32). type: 0 max, 1 avg. */
static void pool_f32(const char *what, int nhwc, int type, int global, int N, int C, int H, int W, int KH, int KW,
                     int sh, int sw, const int pad[4], int ceilm, int cip) {
    int OH = global ? 1 : out_size(H, KH, sh, pad[0], pad[2], 1, ceilm);
    int OW = global ? 1 : out_size(W, KW, sw, pad[1], pad[3], 1, ceilm);
    if (global) { KH = H; KW = W; sh = sw = 1; }
    size_t nx = (size_t)N * C * H * W, ny = (size_t)N * C * OH * OW;
    float *x = rand_f(nx, -2, 2), *y = alloc64(ny * 4);
    mote_bk_graph *g = gnew();
    uint32_t tx = nhwc ? tf(g, MOTE_BK_TENSOR_INPUT, DIMS(N, H, W, C), NULL) : tf(g, MOTE_BK_TENSOR_INPUT, DIMS(N, C, H, W), NULL);
    uint32_t ty = nhwc ? tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(N, OH, OW, C), NULL) : tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(N, C, OH, OW), NULL);
    mote_bk_node_attrs a = attrs(global ? (type ? MOTE_BK_OP_GLOBAL_AVG_POOL2D : MOTE_BK_OP_GLOBAL_MAX_POOL2D)
                                        : (type ? MOTE_BK_OP_AVG_POOL2D : MOTE_BK_OP_MAX_POOL2D));
    a.layout = nhwc ? MOTE_BK_LAYOUT_NHWC : MOTE_BK_LAYOUT_NCHW;
    if (!global) {
        a.pool_size[0] = KH; a.pool_size[1] = KW;
        a.strides[0] = sh; a.strides[1] = sw;
        memcpy(a.padding, pad, sizeof a.padding);
        a.ceil_mode = ceilm;
        a.count_include_pad = cip;
    }
    int32_t st = node(g, what, &a, &tx, 1, ty);
    if (st != MOTE_BK_OK) {
        check(0, "%s: add_node -> %d: %s", what, st, g_err);
    } else if (build_run(g, what, (const void *[]){x}, 1, (void *[]){y}, 1) == MOTE_BK_OK) {
        double *r = malloc(ny * sizeof(double));
        int pt = global ? 0 : pad[0], pl = global ? 0 : pad[1], pb = global ? 0 : pad[2], pr = global ? 0 : pad[3];
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++)
                for (int oh = 0; oh < OH; oh++)
                    for (int ow = 0; ow < OW; ow++) {
                        int hs = oh * sh - pt, ws = ow * sw - pl;
                        int he = hs + KH < H + pb ? hs + KH : H + pb, we = ws + KW < W + pr ? ws + KW : W + pr;
                        int full = (he - hs) * (we - ws);
                        int hs0 = hs < 0 ? 0 : hs, ws0 = ws < 0 ? 0 : ws, he0 = he > H ? H : he, we0 = we > W ? W : we;
                        double acc = type ? 0 : -INFINITY;
                        int cnt = 0;
                        for (int h = hs0; h < he0; h++)
                            for (int w = ws0; w < we0; w++) {
                                double v = x[xidx(nhwc, C, H, W, n, c, h, w)];
                                if (type) acc += v; else if (v > acc) acc = v;
                                cnt++;
                            }
                        if (type) acc /= (cip ? full : cnt);
                        r[xidx(nhwc, C, OH, OW, n, c, oh, ow)] = acc;
                    }
        cmp_f(what, y, r, ny);
        free(r);
    } else {
        check(0, "%s: finalize/run", what);
    }
    p_free(g);
    free(x); free(y);
}

/* element-wise (same-rank numpy broadcasting, rank <= 4). */
static void ew_f32(const char *what, int op, int act, const int64_t *da, const int64_t *db, int rank) {
    int64_t dy[4];
    size_t na = 1, nb = 1, ny = 1;
    for (int i = 0; i < rank; i++) {
        dy[i] = da[i] > db[i] ? da[i] : db[i];
        na *= da[i]; nb *= db[i]; ny *= dy[i];
    }
    float *a = rand_f(na, -2, 2), *b = rand_f(nb, -2, 2), *y = alloc64(ny * 4);
    mote_bk_graph *g = gnew();
    uint32_t ta = tf(g, MOTE_BK_TENSOR_INPUT, da, rank, NULL);
    uint32_t ty = tf(g, MOTE_BK_TENSOR_OUTPUT, dy, rank, NULL);
    uint32_t tb = tf(g, MOTE_BK_TENSOR_CONSTANT, db, rank, b);
    mote_bk_node_attrs at = attrs(op);
    at.activation = act;
    int32_t st = node(g, what, &at, (uint32_t[]){ta, tb}, 2, ty);
    if (st != MOTE_BK_OK) {
        check(0, "%s: add_node -> %d: %s", what, st, g_err);
    } else if (build_run(g, what, (const void *[]){a}, 1, (void *[]){y}, 1) == MOTE_BK_OK) {
        double *r = malloc(ny * sizeof(double));
        for (size_t i = 0; i < ny; i++) {
            size_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
            for (int k = rank - 1; k >= 0; k--) {
                size_t c = rem % dy[k];
                rem /= dy[k];
                ia += (da[k] == 1 ? 0 : c) * sa;
                ib += (db[k] == 1 ? 0 : c) * sb;
                sa *= da[k]; sb *= db[k];
            }
            double v = op == MOTE_BK_OP_ADD ? (double)a[ia] + b[ib] : (double)a[ia] * b[ib];
            r[i] = act_apply(v, act, 0, 0);
        }
        cmp_f(what, y, r, ny);
        free(r);
    } else {
        check(0, "%s: finalize/run", what);
    }
    p_free(g);
    free(a); free(b); free(y);
}

static void unary_f32(const char *what, int op, float lo, float hi) {
    size_t n = 2 * 5 * 7 * 3;
    float *x = rand_f(n, -8, 8), *y = alloc64(n * 4);
    mote_bk_graph *g = gnew();
    uint32_t tx = tf(g, MOTE_BK_TENSOR_INPUT, DIMS(2, 5, 7, 3), NULL);
    uint32_t ty = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(2, 5, 7, 3), NULL);
    mote_bk_node_attrs a = attrs(op);
    a.act_min = lo;
    a.act_max = hi;
    int32_t st = node(g, what, &a, &tx, 1, ty);
    if (st != MOTE_BK_OK) {
        check(0, "%s: add_node -> %d: %s", what, st, g_err);
    } else if (build_run(g, what, (const void *[]){x}, 1, (void *[]){y}, 1) == MOTE_BK_OK) {
        double *r = malloc(n * sizeof(double));
        int act = op == MOTE_BK_OP_RELU ? MOTE_BK_ACT_RELU : op == MOTE_BK_OP_RELU6 ? MOTE_BK_ACT_RELU6 : MOTE_BK_ACT_CLIP;
        for (size_t i = 0; i < n; i++) r[i] = act_apply(x[i], act, lo, hi);
        cmp_f(what, y, r, n);
        free(r);
    } else {
        check(0, "%s: finalize/run", what);
    }
    p_free(g);
    free(x); free(y);
}

static void softmax_f32(const char *what, int axis) {
    int64_t d[3] = {2, 3, 4};
    size_t n = 24;
    float *x = rand_f(n, -3, 3), *y = alloc64(n * 4);
    mote_bk_graph *g = gnew();
    uint32_t tx = tf(g, MOTE_BK_TENSOR_INPUT, d, 3, NULL), ty = tf(g, MOTE_BK_TENSOR_OUTPUT, d, 3, NULL);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_SOFTMAX);
    a.axis = axis;
    int32_t st = node(g, what, &a, &tx, 1, ty);
    if (st != MOTE_BK_OK) {
        check(0, "%s: add_node -> %d: %s", what, st, g_err);
    } else if (build_run(g, what, (const void *[]){x}, 1, (void *[]){y}, 1) == MOTE_BK_OK) {
        double r[24];
        size_t strides[3] = {12, 4, 1};
        for (size_t i = 0; i < n; i++) {
            size_t c = (i / strides[axis]) % d[axis], base = i - c * strides[axis];
            double m = -INFINITY, s = 0;
            for (int k = 0; k < d[axis]; k++) if (x[base + k * strides[axis]] > m) m = x[base + k * strides[axis]];
            for (int k = 0; k < d[axis]; k++) s += exp(x[base + k * strides[axis]] - m);
            r[i] = exp(x[i] - m) / s;
        }
        cmp_f(what, y, r, n);
    } else {
        check(0, "%s: finalize/run", what);
    }
    p_free(g);
    free(x); free(y);
}

static void dense_f32(const char *what, int rank3, int act) {
    int B = 2, S = rank3 ? 3 : 1, K = 10, N = 6;
    size_t M = (size_t)B * S;
    float *x = rand_f(M * K, -1, 1), *w = rand_f((size_t)N * K, -1, 1), *b = rand_f(N, -1, 1), *y = alloc64(M * N * 4);
    mote_bk_graph *g = gnew();
    uint32_t tx = rank3 ? tf(g, MOTE_BK_TENSOR_INPUT, DIMS(B, S, K), NULL) : tf(g, MOTE_BK_TENSOR_INPUT, DIMS(B, K), NULL);
    uint32_t ty = rank3 ? tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(B, S, N), NULL) : tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(B, N), NULL);
    uint32_t tw = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(N, K), w), tb = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(N), b);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_DENSE);
    a.activation = act;
    int32_t st = node(g, what, &a, (uint32_t[]){tx, tw, tb}, 3, ty);
    if (st != MOTE_BK_OK) {
        check(0, "%s: add_node -> %d: %s", what, st, g_err);
    } else if (build_run(g, what, (const void *[]){x}, 1, (void *[]){y}, 1) == MOTE_BK_OK) {
        double *r = malloc(M * N * sizeof(double));
        for (size_t m = 0; m < M; m++)
            for (int nn = 0; nn < N; nn++) {
                double acc = b[nn];
                for (int k = 0; k < K; k++) acc += (double)x[m * K + k] * w[(size_t)nn * K + k];
                r[m * N + nn] = act_apply(acc, act, 0, 0);
            }
        cmp_f(what, y, r, M * N);
        free(r);
    } else {
        check(0, "%s: finalize/run", what);
    }
    p_free(g);
    free(x); free(w); free(b); free(y);
}

static void dense_q(const char *what) {
    int M = 3, K = 16, N = 5;
    float sx = 0.05f, sw = 0.02f, so = 0.1f;
    int zx = -3, zo = 4;
    int8_t *x = alloc64(M * K), *w = alloc64(N * K), *y = alloc64(M * N);
    int32_t *b = alloc64(N * 4);
    for (int i = 0; i < M * K; i++) x[i] = (int8_t)irand(-128, 127);
    for (int i = 0; i < N * K; i++) w[i] = (int8_t)irand(-127, 127);
    for (int i = 0; i < N; i++) b[i] = irand(-500, 500);
    float bs = sx * sw;
    mote_bk_graph *g = gnew();
    uint32_t tx = tq1(g, MOTE_BK_TENSOR_INPUT, MOTE_BK_DTYPE_INT8, DIMS(M, K), NULL, &sx, &zx);
    uint32_t ty = tq1(g, MOTE_BK_TENSOR_OUTPUT, MOTE_BK_DTYPE_INT8, DIMS(M, N), NULL, &so, &zo);
    uint32_t tw = tq1(g, MOTE_BK_TENSOR_CONSTANT, MOTE_BK_DTYPE_INT8, DIMS(N, K), w, &sw, (int32_t[]){0});
    uint32_t tb = tq1(g, MOTE_BK_TENSOR_CONSTANT, MOTE_BK_DTYPE_INT32, DIMS(N), b, &bs, (int32_t[]){0});
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_DENSE);
    a.activation = MOTE_BK_ACT_RELU;
    int32_t st = node(g, what, &a, (uint32_t[]){tx, tw, tb}, 3, ty);
    if (st != MOTE_BK_OK) {
        check(0, "%s: add_node -> %d: %s", what, st, g_err);
    } else if (build_run(g, what, (const void *[]){x}, 1, (void *[]){y}, 1) == MOTE_BK_OK) {
        long r[15];
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                long acc = b[n];
                for (int k = 0; k < K; k++) acc += (long)(x[m * K + k] - zx) * w[n * K + k];
                r[m * N + n] = qround(act_apply(acc * (double)sx * sw, MOTE_BK_ACT_RELU, 0, 0) / so, zo, -128, 127);
            }
        cmp_q(what, y, MOTE_BK_DTYPE_INT8, r, (size_t)M * N);
    } else {
        check(0, "%s: finalize/run", what);
    }
    p_free(g);
    free(x); free(w); free(y); free(b);
}

static void add_q(const char *what) {
    size_t n = 4 * 5 * 6;
    float sa = 0.03f, sb = 0.05f, so = 0.07f;
    int za = 120, zb = 100, zo = 128;
    uint8_t *a = alloc64(n), *b = alloc64(n), *y = alloc64(n);
    for (size_t i = 0; i < n; i++) { a[i] = (uint8_t)irand(0, 255); b[i] = (uint8_t)irand(0, 255); }
    mote_bk_graph *g = gnew();
    uint32_t ta = tq1(g, MOTE_BK_TENSOR_INPUT, MOTE_BK_DTYPE_UINT8, DIMS(4, 5, 6), NULL, &sa, &za);
    uint32_t tb = tq1(g, MOTE_BK_TENSOR_INPUT, MOTE_BK_DTYPE_UINT8, DIMS(4, 5, 6), NULL, &sb, &zb);
    uint32_t ty = tq1(g, MOTE_BK_TENSOR_OUTPUT, MOTE_BK_DTYPE_UINT8, DIMS(4, 5, 6), NULL, &so, &zo);
    mote_bk_node_attrs at = attrs(MOTE_BK_OP_ADD);
    int32_t st = node(g, what, &at, (uint32_t[]){ta, tb}, 2, ty);
    if (st != MOTE_BK_OK) {
        check(0, "%s: add_node -> %d: %s", what, st, g_err);
    } else if (build_run(g, what, (const void *[]){a, b}, 2, (void *[]){y}, 1) == MOTE_BK_OK) {
        long *r = malloc(n * sizeof(long));
        for (size_t i = 0; i < n; i++) r[i] = qround((sa * (double)(a[i] - za) + sb * (double)(b[i] - zb)) / so, zo, 0, 255);
        cmp_q(what, y, MOTE_BK_DTYPE_UINT8, r, n);
        free(r);
    } else {
        check(0, "%s: finalize/run", what);
    }
    p_free(g);
    free(a); free(b); free(y);
}

static void matmul_f32(const char *what) {
    int B = 2, M = 4, K = 6, N = 5;
    float *a = rand_f(B * M * K, -1, 1), *b = rand_f(B * K * N, -1, 1), *y = alloc64(B * M * N * 4);
    mote_bk_graph *g = gnew();
    uint32_t ta = tf(g, MOTE_BK_TENSOR_INPUT, DIMS(B, M, K), NULL), tb = tf(g, MOTE_BK_TENSOR_INPUT, DIMS(B, K, N), NULL);
    uint32_t ty = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(B, M, N), NULL);
    mote_bk_node_attrs at = attrs(MOTE_BK_OP_MATMUL);
    int32_t st = node(g, what, &at, (uint32_t[]){ta, tb}, 2, ty);
    if (st != MOTE_BK_OK) {
        check(0, "%s: add_node -> %d: %s", what, st, g_err);
    } else if (build_run(g, what, (const void *[]){a, b}, 2, (void *[]){y}, 1) == MOTE_BK_OK) {
        double r[40];
        for (int bb = 0; bb < B; bb++)
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++) {
                    double acc = 0;
                    for (int k = 0; k < K; k++) acc += (double)a[(bb * M + m) * K + k] * b[(bb * K + k) * N + n];
                    r[(bb * M + m) * N + n] = acc;
                }
        cmp_f(what, y, r, (size_t)B * M * N);
    } else {
        check(0, "%s: finalize/run", what);
    }
    p_free(g);
    free(a); free(b); free(y);
}

static void reshape_concat(void) {
    /* reshape [2,3,4] -> [6,4] */
    float *x = rand_f(24, -1, 1), *y = alloc64(24 * 4);
    mote_bk_graph *g = gnew();
    uint32_t tx = tf(g, MOTE_BK_TENSOR_INPUT, DIMS(2, 3, 4), NULL), ty = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(6, 4), NULL);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_RESHAPE);
    int32_t st = node(g, "reshape", &a, &tx, 1, ty);
    if (st) check(0, "reshape: add_node -> %d: %s", st, g_err);
    else if (build_run(g, "reshape", (const void *[]){x}, 1, (void *[]){y}, 1) == 0) {
        double *r = to_d(x, 24);
        cmp_f("reshape [2,3,4]->[6,4]", y, r, 24);
        free(r);
    } else check(0, "reshape: finalize/run");
    p_free(g);
    /* concat along axis 3 (NHWC channels) and axis 1; plus concat(t, t) */
    for (int axis = 1; axis <= 3; axis += 2) {
        int64_t da[4] = {1, 2, 3, 4}, db[4] = {1, 2, 3, 4}, dy[4] = {1, 2, 3, 4};
        db[axis] = 2;
        dy[axis] = da[axis] + db[axis];
        size_t na = 24, nb = 24 / da[axis] * 2, ny = na + nb;
        float *a0 = rand_f(na, -1, 1), *b0 = rand_f(nb, -1, 1), *yy = alloc64(ny * 4);
        g = gnew();
        uint32_t ta = tf(g, MOTE_BK_TENSOR_INPUT, da, 4, NULL), tb = tf(g, MOTE_BK_TENSOR_INPUT, db, 4, NULL);
        uint32_t t2 = tf(g, MOTE_BK_TENSOR_OUTPUT, dy, 4, NULL);
        mote_bk_node_attrs c = attrs(MOTE_BK_OP_CONCATENATE);
        c.axis = axis;
        char nm[64];
        snprintf(nm, sizeof nm, "concat axis %d", axis);
        st = node(g, nm, &c, (uint32_t[]){ta, tb}, 2, t2);
        if (st) check(0, "%s: add_node -> %d: %s", nm, st, g_err);
        else if (build_run(g, nm, (const void *[]){a0, b0}, 2, (void *[]){yy}, 1) == 0) {
            double *r = malloc(ny * sizeof(double));
            size_t inner = 1;
            for (int k = axis + 1; k < 4; k++) inner *= dy[k];
            size_t outer = ny / (dy[axis] * inner), i = 0;
            for (size_t o = 0; o < outer; o++) {
                for (size_t j = 0; j < (size_t)da[axis] * inner; j++) r[i++] = a0[o * da[axis] * inner + j];
                for (size_t j = 0; j < (size_t)db[axis] * inner; j++) r[i++] = b0[o * db[axis] * inner + j];
            }
            cmp_f(nm, yy, r, ny);
            free(r);
        } else check(0, "%s: finalize/run", nm);
        p_free(g);
        free(a0); free(b0); free(yy);
    }
    free(x); free(y);
}

/* conv -> relu -> max_pool -> reshape -> dense (+ second output read by a later node, concat(t,t)) */
static void multi_node(void) {
    const int H = 8, W = 8, C = 3, O = 4, N = 5;
    float *w = rand_f(O * 3 * 3 * C, -1, 1), *b = rand_f(O, -0.3f, 0.3f), *wd = rand_f(N * 4 * 4 * O, -1, 1),
          *bd = rand_f(N, -1, 1);
    mote_bk_graph *g = gnew();
    uint32_t tx = tf(g, MOTE_BK_TENSOR_INPUT, DIMS(1, H, W, C), NULL);
    uint32_t tout = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(1, N), NULL);
    uint32_t tpool = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(1, 4, 4, O), NULL); /* output also read later */
    uint32_t tcat = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(1, H, W, 2 * O), NULL);
    uint32_t tw = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(O, 3, 3, C), w), tb = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(O), b);
    uint32_t t1 = tf(g, MOTE_BK_TENSOR_INTERMEDIATE, DIMS(1, H, W, O), NULL);
    uint32_t t2 = tf(g, MOTE_BK_TENSOR_INTERMEDIATE, DIMS(1, H, W, O), NULL);
    uint32_t t3 = tf(g, MOTE_BK_TENSOR_INTERMEDIATE, DIMS(1, 4 * 4 * O), NULL);
    uint32_t twd = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(N, 4 * 4 * O), wd), tbd = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(N), bd);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_CONV2D);
    a.layout = MOTE_BK_LAYOUT_NHWC;
    a.padding[0] = a.padding[1] = a.padding[2] = a.padding[3] = 1;
    int ok = 1;
    ok &= node(g, "conv", &a, (uint32_t[]){tx, tw, tb}, 3, t1) == 0;
    mote_bk_node_attrs r = attrs(MOTE_BK_OP_RELU);
    ok &= node(g, "relu", &r, &t1, 1, t2) == 0;
    mote_bk_node_attrs p = attrs(MOTE_BK_OP_MAX_POOL2D);
    p.layout = MOTE_BK_LAYOUT_NHWC;
    p.pool_size[0] = p.pool_size[1] = 2;
    p.strides[0] = p.strides[1] = 2;
    ok &= node(g, "pool", &p, &t2, 1, tpool) == 0;
    mote_bk_node_attrs rs = attrs(MOTE_BK_OP_RESHAPE);
    ok &= node(g, "reshape", &rs, &tpool, 1, t3) == 0;
    mote_bk_node_attrs d = attrs(MOTE_BK_OP_DENSE);
    ok &= node(g, "dense", &d, (uint32_t[]){t3, twd, tbd}, 3, tout) == 0;
    mote_bk_node_attrs c = attrs(MOTE_BK_OP_CONCATENATE);
    c.axis = 3;
    ok &= node(g, "concat_tt", &c, (uint32_t[]){t2, t2}, 2, tcat) == 0; /* intermediate used twice */
    check(ok, "multi-node graph: 6 nodes accepted%s%s", ok ? "" : ": ", ok ? "" : g_err);
    int32_t st = p_finalize(g, g_err, sizeof g_err);
    check(st == 0, "multi-node graph: finalize (%s)", st ? g_err : "ok");
    for (int iter = 0; iter < 2 && st == 0; iter++) {
        float *x = rand_f(H * W * C, -1, 1); /* new input buffer each run */
        float *y = alloc64(N * 4), *yp = alloc64(4 * 4 * O * 4), *yc = alloc64(H * W * 2 * O * 4);
        st = p_run(g, (const void *[]){x}, 1, (void *[]){y, yp, yc}, 3, g_err, sizeof g_err);
        check(st == 0, "multi-node run %d (%s)", iter + 1, st ? g_err : "ok");
        if (st == 0) {
            double *xd = to_d(x, H * W * C), *wdd = to_d(w, O * 9 * C), *bdd = to_d(b, O);
            double *cv = malloc(H * W * O * sizeof(double)), rp[64], ry[5], rc[H * W * 2 * O];
            ref_conv(1, xd, 1, C, H, W, wdd, O, 3, 3, 1, bdd, (int[]){1, 1}, (int[]){1, 1, 1, 1}, (int[]){1, 1}, cv, H, W);
            for (int i = 0; i < H * W * O; i++) cv[i] = cv[i] < 0 ? 0 : cv[i];
            for (int ph = 0; ph < 4; ph++)
                for (int pw = 0; pw < 4; pw++)
                    for (int o = 0; o < O; o++) {
                        double m = -INFINITY;
                        for (int i = 0; i < 2; i++)
                            for (int j = 0; j < 2; j++) {
                                double v = cv[((2 * ph + i) * W + 2 * pw + j) * O + o];
                                if (v > m) m = v;
                            }
                        rp[(ph * 4 + pw) * O + o] = m;
                    }
            for (int n = 0; n < N; n++) {
                double acc = bd[n];
                for (int k = 0; k < 64; k++) acc += rp[k] * wd[n * 64 + k];
                ry[n] = acc;
            }
            for (int s = 0; s < H * W; s++)
                for (int o = 0; o < 2 * O; o++) rc[s * 2 * O + o] = cv[s * O + o % O];
            char nm[64];
            snprintf(nm, sizeof nm, "multi-node run %d dense output", iter + 1);
            cmp_f(nm, y, ry, N);
            snprintf(nm, sizeof nm, "multi-node run %d pool output (read later)", iter + 1);
            cmp_f(nm, yp, rp, 64);
            snprintf(nm, sizeof nm, "multi-node run %d concat(t,t) of an intermediate", iter + 1);
            cmp_f(nm, yc, rc, (size_t)H * W * 2 * O);
            free(xd); free(wdd); free(bdd); free(cv);
        }
        free(x); free(y); free(yp); free(yc);
    }
    p_free(g);
    free(w); free(b); free(wd); free(bd);
}

static void unsupported_and_errors(void) {
    /* fp16 conv -> UNSUPPORTED with a reason */
    conv_case f16 = {1, 1, 4, 6, 6, 4, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 1, 0, 0, MOTE_BK_DTYPE_FLOAT16};
    g_err[0] = 0;
    int32_t st = conv_f32("fp16 conv", f16, 0);
    check(st == MOTE_BK_UNSUPPORTED && g_err[0], "fp16 conv -> UNSUPPORTED (%d): %s", st, g_err);
    /* grouped conv in a graph that stays usable */
    mote_bk_graph *g = gnew();
    uint32_t tx = tf(g, MOTE_BK_TENSOR_INPUT, DIMS(1, 5, 5, 4), NULL);
    uint32_t ty = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(1, 5, 5, 4), NULL);
    float *w = rand_f(4 * 3 * 3 * 2, -1, 1);
    uint32_t tw = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(4, 3, 3, 2), w);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_CONV2D);
    a.layout = MOTE_BK_LAYOUT_NHWC;
    a.groups = 2;
    a.padding[0] = a.padding[1] = a.padding[2] = a.padding[3] = 1;
    a.activation = MOTE_BK_ACT_GELU_TANH;
    g_err[0] = 0;
    st = node(g, "grouped", &a, (uint32_t[]){tx, tw}, 2, ty);
    check(st == MOTE_BK_UNSUPPORTED && strstr(g_err, "gelu_tanh") != NULL,
          "grouped conv (groups=2) + gelu_tanh -> UNSUPPORTED (%d): %s", st, g_err);
    /* pool with mismatched output shape -> UNSUPPORTED from ACL validate */
    mote_bk_node_attrs bp = attrs(MOTE_BK_OP_MAX_POOL2D);
    bp.layout = MOTE_BK_LAYOUT_NHWC;
    bp.pool_size[0] = bp.pool_size[1] = 2;
    bp.strides[0] = bp.strides[1] = 2;
    st = node(g, "badpool", &bp, &tx, 1, ty);
    check(st == MOTE_BK_UNSUPPORTED, "pool with wrong output shape -> UNSUPPORTED (%d): %s", st, g_err);
    /* uint8 per-channel weights: not expressible in ACL -> UNSUPPORTED */
    {
        float sx = 0.1f, so = 0.2f, sws[4] = {0.01f, 0.02f, 0.03f, 0.04f};
        int32_t zx = 128, zo = 128, zws[4] = {0, 0, 0, 0};
        uint8_t wq[4 * 9 * 4] = {0};
        mote_bk_graph *gq = gnew();
        uint32_t qx = tq1(gq, MOTE_BK_TENSOR_INPUT, MOTE_BK_DTYPE_UINT8, DIMS(1, 5, 5, 4), NULL, &sx, &zx);
        uint32_t qy = tq1(gq, MOTE_BK_TENSOR_OUTPUT, MOTE_BK_DTYPE_UINT8, DIMS(1, 3, 3, 4), NULL, &so, &zo);
        uint32_t qw = tq(gq, MOTE_BK_TENSOR_CONSTANT, MOTE_BK_DTYPE_UINT8, DIMS(4, 3, 3, 4), wq, 4, sws, zws, 0);
        mote_bk_node_attrs qa = attrs(MOTE_BK_OP_CONV2D);
        qa.layout = MOTE_BK_LAYOUT_NHWC;
        st = node(gq, "u8pc", &qa, (uint32_t[]){qx, qw}, 2, qy);
        check(st == MOTE_BK_UNSUPPORTED, "uint8 per-channel weights -> UNSUPPORTED (%d): %s", st, g_err);
        p_free(gq);
    }
    /* invalid args */
    check(node(g, "badid", &bp, (uint32_t[]){99}, 1, ty) == MOTE_BK_INVALID_ARG, "bad tensor id -> INVALID_ARG (%s)", g_err);
    check(p_add_node(NULL, "x", &bp, &tx, 1, &ty, 1, g_err, sizeof g_err) == MOTE_BK_INVALID_ARG, "add_node(NULL graph) -> INVALID_ARG");
    check(p_add_node(g, "x", NULL, &tx, 1, &ty, 1, g_err, sizeof g_err) == MOTE_BK_INVALID_ARG, "add_node(NULL attrs) -> INVALID_ARG");
    uint32_t id;
    check(p_add_tensor(g, NULL, &id, g_err, sizeof g_err) == MOTE_BK_INVALID_ARG, "add_tensor(NULL desc) -> INVALID_ARG");
    check(p_new(NULL, g_err, sizeof g_err) == MOTE_BK_INVALID_ARG, "graph_new(NULL) -> INVALID_ARG");
    check(p_run(g, NULL, 0, NULL, 0, g_err, sizeof g_err) == MOTE_BK_BAD_STATE, "run before finalize -> BAD_STATE (%s)", g_err);
    check(p_finalize(NULL, g_err, sizeof g_err) == MOTE_BK_INVALID_ARG, "finalize(NULL) -> INVALID_ARG");
    /* the graph is still usable: add a supported relu and run */
    mote_bk_node_attrs r = attrs(MOTE_BK_OP_RELU);
    st = node(g, "relu", &r, &tx, 1, ty);
    check(st == 0, "graph usable after UNSUPPORTED: relu accepted (%d)", st);
    float *x = rand_f(100, -1, 1), *y = alloc64(400);
    st = build_run(g, "after-unsupported", (const void *[]){x}, 1, (void *[]){y}, 1);
    if (st == 0) {
        double rr[100];
        for (int i = 0; i < 100; i++) rr[i] = x[i] < 0 ? 0 : x[i];
        cmp_f("graph usable after UNSUPPORTED: relu result", y, rr, 100);
    } else check(0, "graph usable after UNSUPPORTED: finalize/run");
    check(node(g, "late", &r, &tx, 1, ty) == MOTE_BK_BAD_STATE, "add_node after finalize -> BAD_STATE");
    mote_bk_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d; d.kind = MOTE_BK_TENSOR_INPUT; d.dtype = MOTE_BK_DTYPE_FLOAT32; d.ndim = 1; d.dims[0] = 4;
    check(p_add_tensor(g, &d, &id, g_err, sizeof g_err) == MOTE_BK_BAD_STATE, "add_tensor after finalize -> BAD_STATE");
    check(p_finalize(g, g_err, sizeof g_err) == MOTE_BK_BAD_STATE, "finalize twice -> BAD_STATE");
    check(p_run(g, (const void *[]){x}, 1, NULL, 0, g_err, sizeof g_err) == MOTE_BK_INVALID_ARG, "run with wrong arity -> INVALID_ARG (%s)", g_err);
    check(p_run(g, (const void *[]){NULL}, 1, (void *[]){y}, 1, g_err, sizeof g_err) == MOTE_BK_INVALID_ARG, "run with NULL buffer -> INVALID_ARG");
    char small[8];
    p_run(g, (const void *[]){x}, 1, NULL, 0, small, sizeof small);
    check(strlen(small) < sizeof small, "error message truncated and NUL-terminated (\"%s\")", small);
    p_free(g);
    p_free(NULL);
    check(1, "graph_free(NULL) is a no-op");
    /* probe graph: one node, never finalized, freed */
    g = gnew();
    tx = tf(g, MOTE_BK_TENSOR_INPUT, DIMS(1, 4), NULL);
    ty = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(1, 4), NULL);
    check(node(g, "probe", &r, &tx, 1, ty) == 0, "probe graph add_node");
    p_free(g);
    /* bad constant size */
    g = gnew();
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d; d.kind = MOTE_BK_TENSOR_CONSTANT; d.dtype = MOTE_BK_DTYPE_FLOAT32; d.ndim = 1; d.dims[0] = 4;
    d.data = x; d.data_bytes = 3;
    check(p_add_tensor(g, &d, &id, g_err, sizeof g_err) == MOTE_BK_INVALID_ARG, "constant with wrong data_bytes -> INVALID_ARG");
    p_free(g);
    free(w); free(x); free(y);
}


/* ================================================================================ format v2 */

/* The v2 activations (docs/subgraph-format.md), double precision. */
static double act_v2(double v, int act, double al, double be, double lo, double hi) {
    switch (act) {
    case MOTE_BK_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case MOTE_BK_ACT_TANH: return tanh(v);
    case MOTE_BK_ACT_HARDSWISH: { double t = v + 3; t = t < 0 ? 0 : t > 6 ? 6 : t; return v * t / 6; }
    case MOTE_BK_ACT_HARDSIGMOID: { double t = al * v + be; return t < 0 ? 0 : t > 1 ? 1 : t; }
    case MOTE_BK_ACT_SILU: return v / (1.0 + exp(-v));
    case MOTE_BK_ACT_GELU: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    case MOTE_BK_ACT_GELU_TANH: return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    case MOTE_BK_ACT_LEAKY_RELU: return v >= 0 ? v : al * v;
    default: return act_apply(v, act, lo, hi);
    }
}
static const char *act_str(int act) {
    static const char *n[] = {"none", "relu", "relu6", "clip", "sigmoid", "tanh", "hardswish", "hardsigmoid",
                              "silu", "gelu", "gelu_tanh", "leaky_relu"};
    return act >= 0 && act < 12 ? n[act] : "?";
}
static void set_act(mote_bk_node_attrs *a, int act) {
    a->activation = act;
    if (act == MOTE_BK_ACT_HARDSIGMOID) { a->act_alpha = 0.2f; a->act_beta = 0.5f; }
    if (act == MOTE_BK_ACT_LEAKY_RELU) a->act_alpha = 0.1f;
    if (act == MOTE_BK_ACT_CLIP) { a->act_min = -0.5f; a->act_max = 0.75f; }
}
static double act_of(const mote_bk_node_attrs *a, double v) {
    return act_v2(v, a->activation, a->act_alpha, a->act_beta, a->act_min, a->act_max);
}

/* One tensor of a single-node test graph. */
typedef struct {
    int kind, rank;
    int64_t d[6];
    float *data; /* INPUT / CONSTANT data; OUTPUT buffer (allocated by run_node) */
} tspec;
static size_t tnumel(const tspec *t) {
    size_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= (size_t)t->d[i];
    return n;
}

/* Build a one-node graph (ins: INPUT or CONSTANT; outs: OUTPUT), add the node, and if accepted
 * finalize and run it twice (outputs poisoned with NaN before each run). Returns the add_node
 * status; *ran says whether both runs succeeded (outputs in outs[i].data). */
static int32_t run_node(const char *what, mote_bk_node_attrs *a, tspec *ins, int nin, tspec *outs, int nout, int *ran) {
    *ran = 0;
    mote_bk_graph *g = gnew();
    uint32_t iid[8], oid[8];
    const void *ib[8];
    void *ob[8];
    int ni = 0;
    for (int i = 0; i < nin; i++) {
        iid[i] = tf(g, ins[i].kind, ins[i].d, ins[i].rank, ins[i].kind == MOTE_BK_TENSOR_CONSTANT ? ins[i].data : NULL);
        if (ins[i].kind == MOTE_BK_TENSOR_INPUT) ib[ni++] = ins[i].data;
    }
    for (int i = 0; i < nout; i++) {
        oid[i] = tf(g, MOTE_BK_TENSOR_OUTPUT, outs[i].d, outs[i].rank, NULL);
        outs[i].data = alloc64(tnumel(&outs[i]) * 4);
        ob[i] = outs[i].data;
    }
    g_err[0] = 0;
    int32_t st = p_add_node(g, what, a, iid, (uint32_t)nin, oid, (uint32_t)nout, g_err, sizeof g_err);
    if (st == MOTE_BK_OK) {
        st = p_finalize(g, g_err, sizeof g_err);
        if (st) {
            printf("  %s: finalize -> %d: %s\n", what, st, g_err);
        } else {
            int ok = 1;
            for (int rep = 0; rep < 2 && ok; rep++) {
                for (int i = 0; i < nout; i++)
                    for (size_t k = 0; k < tnumel(&outs[i]); k++) outs[i].data[k] = NAN;
                int32_t rs = p_run(g, ib, (uint32_t)ni, ob, (uint32_t)nout, g_err, sizeof g_err);
                if (rs) { printf("  %s: run -> %d: %s\n", what, rs, g_err); ok = 0; }
            }
            *ran = ok;
        }
        st = MOTE_BK_OK;
    }
    p_free(g);
    return st;
}
static tspec T_(int kind, int rank, const int64_t *d, float lo, float hi) {
    tspec t;
    memset(&t, 0, sizeof t);
    t.kind = kind;
    t.rank = rank;
    for (int i = 0; i < rank; i++) t.d[i] = d[i];
    if (kind != MOTE_BK_TENSOR_OUTPUT) t.data = rand_f(tnumel(&t), lo, hi);
    return t;
}
#define TS(kind, lo, hi, ...) T_(kind, (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}, lo, hi)
static void free_specs(tspec *t, int n) {
    for (int i = 0; i < n; i++) { free(t[i].data); t[i].data = NULL; }
}
/* Expect a node to run and match `ref` (one output). */
static void expect_ran(const char *what, int32_t st, int ran, const float *got, const double *ref, size_t n) {
    if (st != MOTE_BK_OK) check(0, "%s: add_node -> %d: %s", what, st, g_err);
    else if (!ran) check(0, "%s: finalize/run failed", what);
    else cmp_f(what, got, ref, n);
}
/* Expect UNSUPPORTED with a message containing `needle`. */
static void expect_refused(const char *what, int32_t st, const char *needle) {
    check(st == MOTE_BK_UNSUPPORTED && strstr(g_err, needle) != NULL, "%s -> UNSUPPORTED (%d): %s", what, st, g_err);
}

/* standalone activation op over [2,5,7,3] in [-6,6] */
static void activation_op(int act) {
    char what[96];
    snprintf(what, sizeof what, "activation op %s", act_str(act));
    tspec in = TS(MOTE_BK_TENSOR_INPUT, -6, 6, 2, 5, 7, 3), out = TS(MOTE_BK_TENSOR_OUTPUT, 0, 0, 2, 5, 7, 3);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_ACTIVATION);
    set_act(&a, act);
    int ran;
    int32_t st = run_node(what, &a, &in, 1, &out, 1, &ran);
    size_t n = tnumel(&in);
    double *r = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) r[i] = act_of(&a, in.data[i]);
    expect_ran(what, st, ran, out.data, r, n);
    free(r);
    free_specs(&in, 1); free_specs(&out, 1);
}

/* conv with a v2 fused activation (NHWC/NCHW, groups) */
static void conv_act(const char *what, int nhwc, int C, int H, int W, int O, int K, int groups, int stride, int pad, int act) {
    int Ig = C / groups;
    int OH = out_size(H, K, stride, pad, pad, 1, 0), OW = out_size(W, K, stride, pad, pad, 1, 0);
    tspec in[3], out;
    if (nhwc) {
        in[0] = TS(MOTE_BK_TENSOR_INPUT, -1, 1, 1, H, W, C);
        in[1] = TS(MOTE_BK_TENSOR_CONSTANT, -1, 1, O, K, K, Ig);
        out = TS(MOTE_BK_TENSOR_OUTPUT, 0, 0, 1, OH, OW, O);
    } else {
        in[0] = TS(MOTE_BK_TENSOR_INPUT, -1, 1, 1, C, H, W);
        in[1] = TS(MOTE_BK_TENSOR_CONSTANT, -1, 1, O, Ig, K, K);
        out = TS(MOTE_BK_TENSOR_OUTPUT, 0, 0, 1, O, OH, OW);
    }
    in[2] = TS(MOTE_BK_TENSOR_CONSTANT, -0.5f, 0.5f, O);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_CONV2D);
    a.layout = nhwc ? MOTE_BK_LAYOUT_NHWC : MOTE_BK_LAYOUT_NCHW;
    a.groups = groups;
    a.strides[0] = a.strides[1] = stride;
    a.padding[0] = a.padding[1] = a.padding[2] = a.padding[3] = pad;
    set_act(&a, act);
    int ran;
    int32_t st = run_node(what, &a, in, 3, &out, 1, &ran);
    size_t ny = tnumel(&out);
    double *xd = to_d(in[0].data, tnumel(&in[0])), *wd = to_d(in[1].data, tnumel(&in[1])), *bd = to_d(in[2].data, O);
    double *r = malloc(ny * sizeof(double));
    int sts[2] = {stride, stride}, pads[4] = {pad, pad, pad, pad}, dil[2] = {1, 1};
    ref_conv(nhwc, xd, 1, C, H, W, wd, O, K, K, groups, bd, sts, pads, dil, r, OH, OW);
    for (size_t i = 0; i < ny; i++) r[i] = act_of(&a, r[i]);
    expect_ran(what, st, ran, out.data, r, ny);
    free(xd); free(wd); free(bd); free(r);
    free_specs(in, 3); free_specs(&out, 1);
}

/* dense [3,10] x [7,10]^T + bias with activation */
static void dense_act(int act) {
    char what[96];
    snprintf(what, sizeof what, "dense + %s", act_str(act));
    tspec in[3] = {TS(MOTE_BK_TENSOR_INPUT, -1, 1, 3, 10), TS(MOTE_BK_TENSOR_CONSTANT, -1, 1, 7, 10),
                   TS(MOTE_BK_TENSOR_CONSTANT, -1, 1, 7)};
    tspec out = TS(MOTE_BK_TENSOR_OUTPUT, 0, 0, 3, 7);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_DENSE);
    set_act(&a, act);
    int ran;
    int32_t st = run_node(what, &a, in, 3, &out, 1, &ran);
    double r[21];
    for (int m = 0; m < 3; m++)
        for (int u = 0; u < 7; u++) {
            double acc = in[2].data[u];
            for (int k = 0; k < 10; k++) acc += (double)in[0].data[m * 10 + k] * in[1].data[u * 10 + k];
            r[m * 7 + u] = act_of(&a, acc);
        }
    expect_ran(what, st, ran, out.data, r, 21);
    free_specs(in, 3); free_specs(&out, 1);
}

/* broadcast index helper: flat output index -> flat operand index (same rank, dims 1 broadcast) */
static size_t bidx(size_t i, const int64_t *dy, const int64_t *dx, int rank) {
    size_t rem = i, ix = 0, sx = 1;
    for (int k = rank - 1; k >= 0; k--) {
        size_t c = rem % (size_t)dy[k];
        rem /= (size_t)dy[k];
        ix += (dx[k] == 1 ? 0 : c) * sx;
        sx *= (size_t)dx[k];
    }
    return ix;
}

/* add/multiply/subtract/divide with broadcasting and an activation */
static void binary_op(const char *what, int op, int act, tspec A, tspec B) {
    tspec in[2] = {A, B}, out;
    memset(&out, 0, sizeof out);
    out.kind = MOTE_BK_TENSOR_OUTPUT;
    out.rank = A.rank;
    for (int i = 0; i < A.rank; i++) out.d[i] = A.d[i] > B.d[i] ? A.d[i] : B.d[i];
    if (op == MOTE_BK_OP_DIVIDE) /* keep divisors away from 0 */
        for (size_t i = 0; i < tnumel(&B); i++) B.data[i] = B.data[i] < 0 ? B.data[i] - 0.5f : B.data[i] + 0.5f;
    mote_bk_node_attrs a = attrs(op);
    set_act(&a, act);
    int ran;
    int32_t st = run_node(what, &a, in, 2, &out, 1, &ran);
    size_t n = tnumel(&out);
    double *r = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        double x = A.data[bidx(i, out.d, A.d, A.rank)], y = B.data[bidx(i, out.d, B.d, B.rank)];
        double v = op == MOTE_BK_OP_ADD ? x + y : op == MOTE_BK_OP_MULTIPLY ? x * y : op == MOTE_BK_OP_SUBTRACT ? x - y : x / y;
        r[i] = act_of(&a, v);
    }
    expect_ran(what, st, ran, out.data, r, n);
    free(r);
    free_specs(in, 2); free_specs(&out, 1);
}

static void scale_shift(const char *what, tspec X, int axis, int act, int const_scale) {
    int64_t C = X.d[axis];
    tspec in[3] = {X, TS(MOTE_BK_TENSOR_CONSTANT, -2, 2, C), TS(MOTE_BK_TENSOR_CONSTANT, -1, 1, C)};
    if (!const_scale) in[1].kind = MOTE_BK_TENSOR_INPUT;
    tspec out = X;
    out.kind = MOTE_BK_TENSOR_OUTPUT;
    out.data = NULL;
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_SCALE_SHIFT);
    a.axis = axis;
    set_act(&a, act);
    int ran;
    int32_t st = run_node(what, &a, in, 3, &out, 1, &ran);
    if (!const_scale) {
        expect_refused(what, st, "constant");
    } else {
        size_t n = tnumel(&X), inner = 1;
        for (int k = axis + 1; k < X.rank; k++) inner *= (size_t)X.d[k];
        double *r = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            size_t c = (i / inner) % (size_t)C;
            r[i] = act_of(&a, (double)X.data[i] * in[1].data[c] + in[2].data[c]);
        }
        expect_ran(what, st, ran, out.data, r, n);
        free(r);
    }
    free_specs(in, 3); free_specs(&out, 1);
}

static void lrn(const char *what, int nhwc, int size, float alpha, float beta, float bias, int expect_ok) {
    int N = 2, C = 7, H = 3, W = 4;
    tspec in = nhwc ? TS(MOTE_BK_TENSOR_INPUT, -2, 2, 2, 3, 4, 7) : TS(MOTE_BK_TENSOR_INPUT, -2, 2, 2, 7, 3, 4);
    tspec out = in;
    out.kind = MOTE_BK_TENSOR_OUTPUT;
    out.data = NULL;
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_LRN);
    a.layout = nhwc ? MOTE_BK_LAYOUT_NHWC : MOTE_BK_LAYOUT_NCHW;
    a.lrn_size = size; a.lrn_alpha = alpha; a.lrn_beta = beta; a.lrn_bias = bias;
    int ran;
    int32_t st = run_node(what, &a, &in, 1, &out, 1, &ran);
    if (!expect_ok) {
        expect_refused(what, st, "even size");
    } else {
        size_t n = tnumel(&in);
        double *r = malloc(n * sizeof(double));
        int lo = (size - 1) / 2, hi = size / 2; /* floor((size-1)/2), ceil((size-1)/2) */
        for (int b = 0; b < N; b++)
            for (int c = 0; c < C; c++)
                for (int h = 0; h < H; h++)
                    for (int w = 0; w < W; w++) {
                        double sq = 0;
                        for (int c2 = c - lo; c2 <= c + hi; c2++) {
                            if (c2 < 0 || c2 >= C) continue;
                            double v = in.data[xidx(nhwc, C, H, W, b, c2, h, w)];
                            sq += v * v;
                        }
                        size_t i = xidx(nhwc, C, H, W, b, c, h, w);
                        r[i] = in.data[i] / pow(bias + alpha / size * sq, beta);
                    }
        expect_ran(what, st, ran, out.data, r, n);
        free(r);
    }
    free_specs(&in, 1); free_specs(&out, 1);
}

static void transpose(const char *what, tspec X, const int *axes, int expect_ok) {
    tspec out;
    memset(&out, 0, sizeof out);
    out.kind = MOTE_BK_TENSOR_OUTPUT;
    out.rank = X.rank;
    for (int i = 0; i < X.rank; i++) out.d[i] = X.d[axes[i]];
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_TRANSPOSE);
    a.num_axes = X.rank;
    for (int i = 0; i < X.rank; i++) a.axes[i] = axes[i];
    int ran;
    int32_t st = run_node(what, &a, &X, 1, &out, 1, &ran);
    if (!expect_ok) {
        expect_refused(what, st, "rank <= 4");
    } else {
        size_t n = tnumel(&X), xs[6];
        xs[X.rank - 1] = 1;
        for (int k = X.rank - 2; k >= 0; k--) xs[k] = xs[k + 1] * (size_t)X.d[k + 1];
        double *r = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            size_t rem = i, src = 0;
            for (int k = X.rank - 1; k >= 0; k--) {
                size_t c = rem % (size_t)out.d[k];
                rem /= (size_t)out.d[k];
                src += c * xs[axes[k]];
            }
            r[i] = X.data[src];
        }
        expect_ran(what, st, ran, out.data, r, n);
        free(r);
    }
    free_specs(&X, 1); free_specs(&out, 1);
}

static void channel_shuffle(const char *what, int nhwc, int C, int groups, int expect_ok) {
    int N = 1, H = 3, W = 5;
    tspec in = nhwc ? TS(MOTE_BK_TENSOR_INPUT, -1, 1, 1, 3, 5, C) : TS(MOTE_BK_TENSOR_INPUT, -1, 1, 1, C, 3, 5);
    tspec out = in;
    out.kind = MOTE_BK_TENSOR_OUTPUT;
    out.data = NULL;
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_CHANNEL_SHUFFLE);
    a.layout = nhwc ? MOTE_BK_LAYOUT_NHWC : MOTE_BK_LAYOUT_NCHW;
    a.groups = groups;
    int ran;
    int32_t st = run_node(what, &a, &in, 1, &out, 1, &ran);
    if (!expect_ok) {
        check(st == MOTE_BK_UNSUPPORTED && g_err[0], "%s -> UNSUPPORTED (%d): %s", what, st, g_err);
    } else {
        size_t n = tnumel(&in);
        double *r = malloc(n * sizeof(double));
        int cg = C / groups;
        for (int b = 0; b < N; b++)
            for (int i = 0; i < groups; i++)
                for (int j = 0; j < cg; j++)
                    for (int h = 0; h < H; h++)
                        for (int w = 0; w < W; w++)
                            r[xidx(nhwc, C, H, W, b, j * groups + i, h, w)] = in.data[xidx(nhwc, C, H, W, b, i * cg + j, h, w)];
        expect_ran(what, st, ran, out.data, r, n);
        free(r);
    }
    free_specs(&in, 1); free_specs(&out, 1);
}

static void split(const char *what, tspec X, int axis, const int *sizes, int k, int expect_ok) {
    tspec outs[4];
    for (int o = 0; o < k; o++) {
        outs[o] = X;
        outs[o].kind = MOTE_BK_TENSOR_OUTPUT;
        outs[o].data = NULL;
        outs[o].d[axis] = sizes[o];
    }
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_SPLIT);
    a.axis = axis;
    int ran;
    int32_t st = run_node(what, &a, &X, 1, outs, k, &ran);
    if (!expect_ok) {
        expect_refused(what, st, "rank <= 4");
    } else if (st != MOTE_BK_OK || !ran) {
        check(0, "%s: add_node -> %d / ran %d: %s", what, st, ran, g_err);
    } else {
        size_t outer = 1, inner = 1;
        for (int i = 0; i < axis; i++) outer *= (size_t)X.d[i];
        for (int i = axis + 1; i < X.rank; i++) inner *= (size_t)X.d[i];
        int off = 0;
        for (int o = 0; o < k; o++) {
            size_t n = tnumel(&outs[o]);
            double *r = malloc(n * sizeof(double));
            for (size_t i = 0; i < n; i++) {
                size_t in_i = i % inner, rest = i / inner, c = rest % (size_t)sizes[o], ou = rest / (size_t)sizes[o];
                r[i] = X.data[(ou * (size_t)X.d[axis] + off + c) * inner + in_i];
            }
            char w2[128];
            snprintf(w2, sizeof w2, "%s output %d", what, o);
            cmp_f(w2, outs[o].data, r, n);
            free(r);
            off += sizes[o];
        }
    }
    free_specs(&X, 1); free_specs(outs, k);
}

static void layer_norm(const char *what, tspec X, int axis, float eps, int expect_ok) {
    int64_t D = X.d[X.rank - 1];
    tspec in[3] = {X, TS(MOTE_BK_TENSOR_CONSTANT, -2, 2, D), TS(MOTE_BK_TENSOR_CONSTANT, -1, 1, D)};
    tspec out = X;
    out.kind = MOTE_BK_TENSOR_OUTPUT;
    out.data = NULL;
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_LAYER_NORM);
    a.axis = axis;
    a.epsilon = eps;
    int ran;
    int32_t st = run_node(what, &a, in, 3, &out, 1, &ran);
    if (!expect_ok) {
        expect_refused(what, st, "last axis");
    } else {
        size_t n = tnumel(&X), rows = n / (size_t)D;
        double *r = malloc(n * sizeof(double));
        for (size_t row = 0; row < rows; row++) {
            const float *x = X.data + row * D;
            double m = 0, v = 0;
            for (int64_t j = 0; j < D; j++) m += x[j];
            m /= D;
            for (int64_t j = 0; j < D; j++) v += (x[j] - m) * (x[j] - m);
            v /= D;
            for (int64_t j = 0; j < D; j++) r[row * D + j] = (x[j] - m) / sqrt(v + eps) * in[1].data[j] + in[2].data[j];
        }
        expect_ran(what, st, ran, out.data, r, n);
        free(r);
    }
    free_specs(in, 3); free_specs(&out, 1);
}


/* INPUT -> scale_shift -> INTERMEDIATE -> layer_norm -> INTERMEDIATE -> split -> 2 OUTPUTs, plus a
 * grouped conv reading an OUTPUT: the scratch tensors of the lowerings share the graph's memory
 * group with the graph intermediates; three runs with fresh inputs, outputs poisoned each time. */
static void v2_chain(void) {
    const char *what = "v2 chain scale_shift -> layer_norm -> split -> grouped conv [split]";
    mote_bk_graph *g = gnew();
    float *sc = rand_f(8, -2, 2), *sh = rand_f(8, -1, 1), *gm = rand_f(8, 0.5f, 1.5f), *bt = rand_f(8, -1, 1);
    float *w = rand_f(4 * 3 * 3 * 2, -1, 1);
    uint32_t tx = tf(g, MOTE_BK_TENSOR_INPUT, DIMS(1, 5, 5, 8), NULL);
    uint32_t tsc = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(8), sc), tsh = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(8), sh);
    uint32_t tgm = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(8), gm), tbt = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(8), bt);
    uint32_t t1 = tf(g, MOTE_BK_TENSOR_INTERMEDIATE, DIMS(1, 5, 5, 8), NULL);
    uint32_t t2 = tf(g, MOTE_BK_TENSOR_INTERMEDIATE, DIMS(1, 5, 5, 8), NULL);
    uint32_t y0 = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(1, 5, 5, 4), NULL), y1 = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(1, 5, 5, 4), NULL);
    uint32_t tw = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(4, 3, 3, 2), w);
    uint32_t y2 = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(1, 5, 5, 4), NULL);
    mote_bk_node_attrs a1 = attrs(MOTE_BK_OP_SCALE_SHIFT), a2 = attrs(MOTE_BK_OP_LAYER_NORM), a3 = attrs(MOTE_BK_OP_SPLIT),
                       a4 = attrs(MOTE_BK_OP_CONV2D);
    a1.axis = 3;
    a1.activation = MOTE_BK_ACT_TANH;
    a2.axis = 3;
    a2.epsilon = 1e-5f;
    a3.axis = 3;
    a4.layout = MOTE_BK_LAYOUT_NHWC;
    a4.groups = 2;
    a4.padding[0] = a4.padding[1] = a4.padding[2] = a4.padding[3] = 1;
    int ok = node(g, "ss", &a1, (uint32_t[]){tx, tsc, tsh}, 3, t1) == 0 &&
             node(g, "ln", &a2, (uint32_t[]){t1, tgm, tbt}, 3, t2) == 0 &&
             p_add_node(g, "split", &a3, &t2, 1, (uint32_t[]){y0, y1}, 2, g_err, sizeof g_err) == 0 &&
             node(g, "gconv", &a4, (uint32_t[]){y1, tw}, 2, y2) == 0 &&
             p_finalize(g, g_err, sizeof g_err) == 0;
    if (!ok) {
        check(0, "%s: build: %s", what, g_err);
        p_free(g);
        return;
    }
    int bad = 0;
    double maxe = 0;
    for (int run = 0; run < 3; run++) {
        float *x = rand_f(200, -2, 2), *o0 = alloc64(400), *o1 = alloc64(400), *o2 = alloc64(400);
        for (int i = 0; i < 100; i++) o0[i] = o1[i] = o2[i] = NAN;
        if (p_run(g, (const void *[]){x}, 1, (void *[]){o0, o1, o2}, 3, g_err, sizeof g_err)) {
            printf("  run: %s\n", g_err);
            bad = 1;
        } else {
            double r[200], h[100], ref2[100];
            for (int p = 0; p < 25; p++) {
                double v[8], m = 0, var = 0;
                for (int c = 0; c < 8; c++) { v[c] = tanh((double)x[p * 8 + c] * sc[c] + sh[c]); m += v[c]; }
                m /= 8;
                for (int c = 0; c < 8; c++) var += (v[c] - m) * (v[c] - m);
                var /= 8;
                for (int c = 0; c < 8; c++) r[p * 8 + c] = (v[c] - m) / sqrt(var + 1e-5) * gm[c] + bt[c];
                for (int c = 0; c < 4; c++) h[p * 4 + c] = r[p * 8 + 4 + c];
            }
            double *wd = to_d(w, 72);
            ref_conv(1, h, 1, 4, 5, 5, wd, 4, 3, 3, 2, NULL, (int[]){1, 1}, (int[]){1, 1, 1, 1}, (int[]){1, 1}, ref2, 5, 5);
            free(wd);
            for (int p = 0; p < 25; p++)
                for (int c = 0; c < 4; c++) {
                    double e0 = fabs(o0[p * 4 + c] - r[p * 8 + c]), e1 = fabs(o1[p * 4 + c] - r[p * 8 + 4 + c]);
                    double e2 = fabs(o2[p * 4 + c] - ref2[p * 4 + c]);
                    double tol2 = 1e-4 * (fabs(ref2[p * 4 + c]) > 1 ? fabs(ref2[p * 4 + c]) : 1);
                    if (!(e0 <= 1e-4 * fmax(1, fabs(r[p * 8 + c])) && e1 <= 1e-4 * fmax(1, fabs(r[p * 8 + 4 + c])) && e2 <= tol2)) bad = 1;
                    maxe = fmax(maxe, fmax(e0, fmax(e1, e2)));
                    if (e0 != e0 || e1 != e1 || e2 != e2) bad = 1;
                }
        }
        free(x); free(o0); free(o1); free(o2);
    }
    check(!bad, "%s: 3 runs, max abs err %.3g", what, maxe);
    p_free(g);
    free(sc); free(sh); free(gm); free(bt); free(w);
}


/* conv NHWC -> scale_shift(axis 3) -> lrn NHWC -> channel_shuffle NHWC -> transpose (0,3,1,2):
 * the v2 ops on intermediates that carry the NHWC layout of a conv; attrs passed with the v1
 * struct_size for the conv (the fields appended in v2 read as zero). */
static void v2_layout_chain(void) {
    const char *what = "v2 chain conv NHWC -> scale_shift -> lrn -> channel_shuffle -> transpose";
    const int H = 5, W = 6, C = 3, O = 6;
    float *w = rand_f(O * 9 * C, -1, 1), *sc = rand_f(O, 0.5f, 2), *sh = rand_f(O, -1, 1);
    mote_bk_graph *g = gnew();
    uint32_t tx = tf(g, MOTE_BK_TENSOR_INPUT, DIMS(1, H, W, C), NULL);
    uint32_t tw = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(O, 3, 3, C), w);
    uint32_t tsc = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(O), sc), tsh = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(O), sh);
    uint32_t t1 = tf(g, MOTE_BK_TENSOR_INTERMEDIATE, DIMS(1, H, W, O), NULL);
    uint32_t t2 = tf(g, MOTE_BK_TENSOR_INTERMEDIATE, DIMS(1, H, W, O), NULL);
    uint32_t t3 = tf(g, MOTE_BK_TENSOR_INTERMEDIATE, DIMS(1, H, W, O), NULL);
    uint32_t t4 = tf(g, MOTE_BK_TENSOR_INTERMEDIATE, DIMS(1, H, W, O), NULL);
    uint32_t ty = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(1, O, H, W), NULL);
    mote_bk_node_attrs a0 = attrs(MOTE_BK_OP_CONV2D), a1 = attrs(MOTE_BK_OP_SCALE_SHIFT), a2 = attrs(MOTE_BK_OP_LRN),
                       a3 = attrs(MOTE_BK_OP_CHANNEL_SHUFFLE), a4 = attrs(MOTE_BK_OP_TRANSPOSE);
    a0.struct_size = (uint32_t)offsetof(mote_bk_node_attrs, act_alpha);
    a0.layout = MOTE_BK_LAYOUT_NHWC;
    a0.padding[0] = a0.padding[1] = a0.padding[2] = a0.padding[3] = 1;
    a1.axis = 3;
    a1.activation = MOTE_BK_ACT_SIGMOID;
    a2.layout = MOTE_BK_LAYOUT_NHWC;
    a2.lrn_size = 3; a2.lrn_alpha = 0.4f; a2.lrn_beta = 0.75f; a2.lrn_bias = 1.0f;
    a3.layout = MOTE_BK_LAYOUT_NHWC;
    a3.groups = 2;
    a4.num_axes = 4;
    a4.axes[0] = 0; a4.axes[1] = 3; a4.axes[2] = 1; a4.axes[3] = 2;
    int ok = node(g, "conv", &a0, (uint32_t[]){tx, tw}, 2, t1) == 0 && node(g, "ss", &a1, (uint32_t[]){t1, tsc, tsh}, 3, t2) == 0 &&
             node(g, "lrn", &a2, &t2, 1, t3) == 0 && node(g, "shuffle", &a3, &t3, 1, t4) == 0 &&
             node(g, "transpose", &a4, &t4, 1, ty) == 0 && p_finalize(g, g_err, sizeof g_err) == 0;
    if (!ok) {
        check(0, "%s: build: %s", what, g_err);
    } else {
        int bad = 0;
        double maxe = 0;
        for (int run = 0; run < 2; run++) {
            float *x = rand_f(H * W * C, -1, 1), *y = alloc64(H * W * O * 4);
            for (int i = 0; i < H * W * O; i++) y[i] = NAN;
            if (p_run(g, (const void *[]){x}, 1, (void *[]){y}, 1, g_err, sizeof g_err)) { bad = 1; continue; }
            double *xd = to_d(x, H * W * C), *wd = to_d(w, O * 9 * C), c[5 * 6 * 6], l[5 * 6 * 6];
            ref_conv(1, xd, 1, C, H, W, wd, O, 3, 3, 1, NULL, (int[]){1, 1}, (int[]){1, 1, 1, 1}, (int[]){1, 1}, c, H, W);
            for (int p = 0; p < H * W; p++)
                for (int o = 0; o < O; o++) c[p * O + o] = 1 / (1 + exp(-(c[p * O + o] * sc[o] + sh[o])));
            for (int p = 0; p < H * W; p++)
                for (int o = 0; o < O; o++) {
                    double sq = 0;
                    for (int o2 = o - 1; o2 <= o + 1; o2++)
                        if (o2 >= 0 && o2 < O) sq += c[p * O + o2] * c[p * O + o2];
                    l[p * O + o] = c[p * O + o] / pow(1.0 + 0.4 / 3 * sq, 0.75);
                }
            for (int p = 0; p < H * W; p++)
                for (int oc = 0; oc < O; oc++) {
                    /* shuffle g=2, C/g=3: output channel j*2+i = input channel i*3+j */
                    int i = oc % 2, j = oc / 2;
                    double ref = l[p * O + i * 3 + j];
                    double got = y[oc * H * W + p]; /* NCHW after the transpose */
                    double e = fabs(got - ref);
                    if (!(e <= 1e-4)) bad = 1;
                    if (e > maxe || e != e) maxe = e;
                }
            free(xd); free(wd); free(x); free(y);
        }
        check(!bad, "%s: 2 runs, max abs err %.3g", what, maxe);
    }
    p_free(g);
    free(w); free(sc); free(sh);
}

static void format_v2(void) {
    int acts[] = {MOTE_BK_ACT_SIGMOID, MOTE_BK_ACT_TANH, MOTE_BK_ACT_HARDSWISH, MOTE_BK_ACT_HARDSIGMOID,
                  MOTE_BK_ACT_SILU, MOTE_BK_ACT_GELU, MOTE_BK_ACT_LEAKY_RELU, MOTE_BK_ACT_RELU, MOTE_BK_ACT_CLIP};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) activation_op(acts[i]);
    {   /* gelu_tanh is refused (ACL's GELU is the erf form; they differ by > 1e-4) */
        tspec in = TS(MOTE_BK_TENSOR_INPUT, -6, 6, 4, 5), out = TS(MOTE_BK_TENSOR_OUTPUT, 0, 0, 4, 5);
        mote_bk_node_attrs a = attrs(MOTE_BK_OP_ACTIVATION);
        a.activation = MOTE_BK_ACT_GELU_TANH;
        int ran;
        expect_refused("activation op gelu_tanh", run_node("gelu_tanh", &a, &in, 1, &out, 1, &ran), "erf");
        free_specs(&in, 1); free_specs(&out, 1);
        double m = 0;
        for (double v = -6; v <= 6; v += 0.001) {
            double e = fabs(act_v2(v, MOTE_BK_ACT_GELU, 0, 0, 0, 0) - act_v2(v, MOTE_BK_ACT_GELU_TANH, 0, 0, 0, 0));
            if (e > m) m = e;
        }
        check(m > 1e-4, "gelu vs gelu_tanh differ by %.3g (> 1e-4, so one cannot stand for the other)", m);
    }
    /* fused activations on conv (incl. grouped), dense, add, subtract... */
    conv_act("conv NHWC 3x3 + sigmoid", 1, 5, 7, 6, 6, 3, 1, 1, 1, MOTE_BK_ACT_SIGMOID);
    conv_act("conv NCHW 3x3 s2 + hardswish", 0, 3, 9, 7, 4, 3, 1, 2, 1, MOTE_BK_ACT_HARDSWISH);
    conv_act("conv NHWC 1x1 + hardsigmoid (two functions)", 1, 6, 5, 5, 7, 1, 1, 1, 0, MOTE_BK_ACT_HARDSIGMOID);
    conv_act("conv NHWC 3x3 + gelu", 1, 4, 6, 6, 5, 3, 1, 1, 1, MOTE_BK_ACT_GELU);
    conv_act("conv NCHW 3x3 + silu", 0, 4, 6, 5, 5, 3, 1, 1, 0, MOTE_BK_ACT_SILU);
    conv_act("conv NHWC 3x3 + leaky_relu 0.1", 1, 4, 6, 6, 5, 3, 1, 1, 1, MOTE_BK_ACT_LEAKY_RELU);
    conv_act("conv NHWC 3x3 + tanh", 1, 4, 5, 6, 5, 3, 1, 1, 1, MOTE_BK_ACT_TANH);
    /* grouped conv: groups 2 and 4, NHWC and NCHW, with and without activation, odd sizes */
    conv_act("grouped conv NHWC g=2 C=6 O=4 7x5 3x3 pad1", 1, 6, 7, 5, 4, 3, 2, 1, 1, MOTE_BK_ACT_NONE);
    conv_act("grouped conv NHWC g=2 + relu s2", 1, 6, 9, 7, 10, 3, 2, 2, 1, MOTE_BK_ACT_RELU);
    conv_act("grouped conv NHWC g=4 C=8 O=12 + hardswish", 1, 8, 5, 7, 12, 3, 4, 1, 1, MOTE_BK_ACT_HARDSWISH);
    conv_act("grouped conv NCHW g=2 C=6 O=6", 0, 6, 7, 5, 6, 3, 2, 1, 1, MOTE_BK_ACT_NONE);
    conv_act("grouped conv NCHW g=4 C=12 O=8 5x5 + sigmoid", 0, 12, 9, 9, 8, 5, 4, 1, 2, MOTE_BK_ACT_SIGMOID);
    conv_act("grouped conv NCHW g=4 + hardsigmoid", 0, 8, 5, 5, 4, 1, 4, 1, 0, MOTE_BK_ACT_HARDSIGMOID);
    /* both lowerings on the same cases (the default is split) */
    for (int k = 0; k < 2; k++) {
        const char *strat = k == 0 ? "split" : "blockdiag";
        char w1[96], w2[96], w3[96];
        setenv("MOTE_ACL_GROUPED_CONV", strat, 1);
        snprintf(w1, sizeof w1, "grouped conv NHWC g=2 + relu [%s]", strat);
        snprintf(w2, sizeof w2, "grouped conv NCHW g=4 C=12 O=8 5x5 + sigmoid [%s]", strat);
        snprintf(w3, sizeof w3, "grouped conv NHWC g=4 + hardsigmoid [%s]", strat);
        conv_act(w1, 1, 6, 9, 7, 10, 3, 2, 2, 1, MOTE_BK_ACT_RELU);
        conv_act(w2, 0, 12, 9, 9, 8, 5, 4, 1, 2, MOTE_BK_ACT_SIGMOID);
        conv_act(w3, 1, 8, 5, 5, 4, 1, 4, 1, 0, MOTE_BK_ACT_HARDSIGMOID);
    }
    unsetenv("MOTE_ACL_GROUPED_CONV");
    conv_act("grouped conv NHWC g=16 C=32 O=32", 1, 32, 5, 5, 32, 3, 16, 1, 1, MOTE_BK_ACT_RELU6);
    {   /* groups > 8 with the block-diagonal lowering is refused with the reason */
        setenv("MOTE_ACL_GROUPED_CONV", "blockdiag", 1);
        tspec in[2] = {TS(MOTE_BK_TENSOR_INPUT, -1, 1, 1, 4, 4, 32), TS(MOTE_BK_TENSOR_CONSTANT, -1, 1, 32, 3, 3, 2)};
        tspec out = TS(MOTE_BK_TENSOR_OUTPUT, 0, 0, 1, 2, 2, 32);
        mote_bk_node_attrs a = attrs(MOTE_BK_OP_CONV2D);
        a.layout = MOTE_BK_LAYOUT_NHWC;
        a.groups = 16;
        int ran;
        expect_refused("grouped conv groups=16 [blockdiag]", run_node("g16", &a, in, 2, &out, 1, &ran), "groups=16 > 8");
        free_specs(in, 2); free_specs(&out, 1);
        unsetenv("MOTE_ACL_GROUPED_CONV");
    }
    dense_act(MOTE_BK_ACT_SILU);
    dense_act(MOTE_BK_ACT_HARDSIGMOID);
    dense_act(MOTE_BK_ACT_GELU);
    /* subtract / divide / add / multiply with broadcasting and v2 activations */
    binary_op("subtract [2,3,4,5] - [1,3,1,5] + tanh", MOTE_BK_OP_SUBTRACT, MOTE_BK_ACT_TANH,
              TS(MOTE_BK_TENSOR_INPUT, -2, 2, 2, 3, 4, 5), TS(MOTE_BK_TENSOR_CONSTANT, -2, 2, 1, 3, 1, 5));
    binary_op("subtract [3,7] - [3,7] (two inputs)", MOTE_BK_OP_SUBTRACT, MOTE_BK_ACT_NONE,
              TS(MOTE_BK_TENSOR_INPUT, -2, 2, 3, 7), TS(MOTE_BK_TENSOR_INPUT, -2, 2, 3, 7));
    binary_op("divide [1,5,5,6] / [1,1,1,6]", MOTE_BK_OP_DIVIDE, MOTE_BK_ACT_NONE,
              TS(MOTE_BK_TENSOR_INPUT, -2, 2, 1, 5, 5, 6), TS(MOTE_BK_TENSOR_CONSTANT, -2, 2, 1, 1, 1, 6));
    binary_op("divide [2,3,5] / [2,1,5] + leaky_relu", MOTE_BK_OP_DIVIDE, MOTE_BK_ACT_LEAKY_RELU,
              TS(MOTE_BK_TENSOR_INPUT, -2, 2, 2, 3, 5), TS(MOTE_BK_TENSOR_INPUT, -2, 2, 2, 1, 5));
    binary_op("add [1,4,4,8] + [1,1,1,8] + hardsigmoid", MOTE_BK_OP_ADD, MOTE_BK_ACT_HARDSIGMOID,
              TS(MOTE_BK_TENSOR_INPUT, -2, 2, 1, 4, 4, 8), TS(MOTE_BK_TENSOR_CONSTANT, -2, 2, 1, 1, 1, 8));
    binary_op("multiply [2,6] * [2,6] + silu", MOTE_BK_OP_MULTIPLY, MOTE_BK_ACT_SILU,
              TS(MOTE_BK_TENSOR_INPUT, -2, 2, 2, 6), TS(MOTE_BK_TENSOR_INPUT, -2, 2, 2, 6));
    /* scale_shift: channel axis of NHWC and NCHW, rank 2, with activation; refusal */
    scale_shift("scale_shift NHWC [1,5,6,7] axis 3", TS(MOTE_BK_TENSOR_INPUT, -2, 2, 1, 5, 6, 7), 3, MOTE_BK_ACT_NONE, 1);
    scale_shift("scale_shift NCHW [2,7,5,3] axis 1 + relu6", TS(MOTE_BK_TENSOR_INPUT, -2, 2, 2, 7, 5, 3), 1, MOTE_BK_ACT_RELU6, 1);
    scale_shift("scale_shift [3,9] axis 1 + hardswish", TS(MOTE_BK_TENSOR_INPUT, -2, 2, 3, 9), 1, MOTE_BK_ACT_HARDSWISH, 1);
    scale_shift("scale_shift with a non-constant scale", TS(MOTE_BK_TENSOR_INPUT, -2, 2, 1, 5, 6, 7), 3, MOTE_BK_ACT_NONE, 0);
    /* lrn */
    lrn("lrn NHWC size 5 (AlexNet 1e-4, 0.75, 2)", 1, 5, 1e-4f, 0.75f, 2.0f, 1);
    lrn("lrn NCHW size 3 alpha 0.5 beta 0.6 bias 1", 0, 3, 0.5f, 0.6f, 1.0f, 1);
    lrn("lrn NHWC size 1", 1, 1, 0.3f, 0.5f, 1.5f, 1);
    lrn("lrn NCHW size 4 (even)", 0, 4, 0.3f, 0.75f, 1.0f, 0);
    /* transpose */
    transpose("transpose [3,5] (1,0)", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 3, 5), (int[]){1, 0}, 1);
    transpose("transpose [2,3,4] (2,0,1)", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 2, 3, 4), (int[]){2, 0, 1}, 1);
    transpose("transpose [2,3,4,5] (0,3,1,2) NHWC->NCHW", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 2, 3, 4, 5), (int[]){0, 3, 1, 2}, 1);
    transpose("transpose [2,3,4,5] (0,2,3,1) NCHW->NHWC", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 2, 3, 4, 5), (int[]){0, 2, 3, 1}, 1);
    transpose("transpose [2,3,4,5] (3,2,1,0)", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 2, 3, 4, 5), (int[]){3, 2, 1, 0}, 1);
    transpose("transpose [2,3,4,5] (1,0,3,2)", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 2, 3, 4, 5), (int[]){1, 0, 3, 2}, 1);
    transpose("transpose [7] (0) identity", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 7), (int[]){0}, 1);
    transpose("transpose rank 5", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 2, 1, 3, 2, 2), (int[]){0, 2, 1, 3, 4}, 0);
    /* channel_shuffle */
    channel_shuffle("channel_shuffle NHWC C=6 g=2", 1, 6, 2, 1);
    channel_shuffle("channel_shuffle NCHW C=12 g=3", 0, 12, 3, 1);
    channel_shuffle("channel_shuffle NHWC C=12 g=4", 1, 12, 4, 1);
    channel_shuffle("channel_shuffle NCHW C=7 g=2 (C % g != 0)", 0, 7, 2, 0);
    /* split */
    split("split [2,9,3] axis 1 into 2,4,3", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 2, 9, 3), 1, (int[]){2, 4, 3}, 3, 1);
    split("split [1,4,5,6] axis 3 into 1,5", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 1, 4, 5, 6), 3, (int[]){1, 5}, 2, 1);
    split("split [6,2] axis 0 into 3,3", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 6, 2), 0, (int[]){3, 3}, 2, 1);
    split("split [5] axis 0 into 5 (k=1)", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 5), 0, (int[]){5}, 1, 1);
    split("split rank 5", TS(MOTE_BK_TENSOR_INPUT, -1, 1, 2, 2, 2, 2, 4), 4, (int[]){2, 2}, 2, 0);
    /* layer_norm */
    layer_norm("layer_norm [4,10] eps 1e-5", TS(MOTE_BK_TENSOR_INPUT, -2, 2, 4, 10), 1, 1e-5f, 1);
    layer_norm("layer_norm [2,3,7] eps 1e-3", TS(MOTE_BK_TENSOR_INPUT, -3, 5, 2, 3, 7), 2, 1e-3f, 1);
    layer_norm("layer_norm [1,5,2,16] offset data", TS(MOTE_BK_TENSOR_INPUT, 3, 5, 1, 5, 2, 16), 3, 1e-5f, 1);
    layer_norm("layer_norm [3,64] data in [20,21] (large mean)", TS(MOTE_BK_TENSOR_INPUT, 20, 21, 3, 64), 1, 1e-5f, 1);
    layer_norm("layer_norm [2,256] data in [-100,100]", TS(MOTE_BK_TENSOR_INPUT, -100, 100, 2, 256), 1, 1e-5f, 1);
    layer_norm("layer_norm axis 0 of [4,10]", TS(MOTE_BK_TENSOR_INPUT, -2, 2, 4, 10), 0, 1e-5f, 0);
    {   /* a v2 activation on a quantized op is refused */
        float sx = 0.1f; int32_t zx = 0;
        mote_bk_graph *g = gnew();
        uint32_t a0 = tq1(g, MOTE_BK_TENSOR_INPUT, MOTE_BK_DTYPE_INT8, DIMS(1, 8), NULL, &sx, &zx);
        uint32_t a1 = tq1(g, MOTE_BK_TENSOR_INPUT, MOTE_BK_DTYPE_INT8, DIMS(1, 8), NULL, &sx, &zx);
        uint32_t y = tq1(g, MOTE_BK_TENSOR_OUTPUT, MOTE_BK_DTYPE_INT8, DIMS(1, 8), NULL, &sx, &zx);
        mote_bk_node_attrs a = attrs(MOTE_BK_OP_ADD);
        a.activation = MOTE_BK_ACT_SIGMOID;
        g_err[0] = 0;
        expect_refused("int8 add + sigmoid", node(g, "qadd", &a, (uint32_t[]){a0, a1}, 2, y), "float32");
        p_free(g);
    }
}

/* two threads, two graphs, many runs each */
typedef struct {
    int id, runs, bad;
} thr_arg;
static void *thr_main(void *p) {
    thr_arg *t = p;
    char err[512];
    const int H = 10, W = 10, C = 8, O = 8;
    uint32_t seed = 777u + t->id;
    float *w = malloc(O * 9 * C * 4), *x = aligned_alloc(64, H * W * C * 4), *y = aligned_alloc(64, H * W * O * 4);
    for (int i = 0; i < O * 9 * C; i++) { seed = seed * 1664525u + 1013904223u; w[i] = ((seed >> 8) / 16777216.0f) - 0.5f; }
    mote_bk_graph *g = NULL;
    p_new(&g, err, sizeof err);
    mote_bk_tensor_desc d;
    uint32_t tx, ty, tw;
    memset(&d, 0, sizeof d); d.struct_size = sizeof d; d.dtype = MOTE_BK_DTYPE_FLOAT32; d.ndim = 4;
    d.kind = MOTE_BK_TENSOR_INPUT; d.dims[0] = 1; d.dims[1] = H; d.dims[2] = W; d.dims[3] = C;
    p_add_tensor(g, &d, &tx, err, sizeof err);
    d.kind = MOTE_BK_TENSOR_OUTPUT; d.dims[3] = O;
    p_add_tensor(g, &d, &ty, err, sizeof err);
    d.kind = MOTE_BK_TENSOR_CONSTANT; d.dims[0] = O; d.dims[1] = 3; d.dims[2] = 3; d.dims[3] = C; d.data = w; d.data_bytes = O * 9 * C * 4;
    p_add_tensor(g, &d, &tw, err, sizeof err);
    mote_bk_node_attrs a = attrs(MOTE_BK_OP_CONV2D);
    a.layout = MOTE_BK_LAYOUT_NHWC;
    a.padding[0] = a.padding[1] = a.padding[2] = a.padding[3] = 1;
    a.activation = MOTE_BK_ACT_RELU;
    uint32_t ins[2] = {tx, tw};
    if (p_add_node(g, "tconv", &a, ins, 2, &ty, 1, err, sizeof err) || p_finalize(g, err, sizeof err)) {
        t->bad = t->runs;
        p_free(g);
        return NULL;
    }
    double *wd = malloc(O * 9 * C * sizeof(double)), *xd = malloc(H * W * C * sizeof(double)), *r = malloc(H * W * O * sizeof(double));
    for (int i = 0; i < O * 9 * C; i++) wd[i] = w[i];
    for (int it = 0; it < t->runs; it++) {
        for (int i = 0; i < H * W * C; i++) { seed = seed * 1664525u + 1013904223u; x[i] = ((seed >> 8) / 16777216.0f) * 2 - 1; xd[i] = x[i]; }
        if (p_run(g, (const void *const[]){x}, 1, (void *const[]){y}, 1, err, sizeof err)) { t->bad++; continue; }
        ref_conv(1, xd, 1, C, H, W, wd, O, 3, 3, 1, NULL, (int[]){1, 1}, (int[]){1, 1, 1, 1}, (int[]){1, 1}, r, H, W);
        for (int i = 0; i < H * W * O; i++) {
            double ref = r[i] < 0 ? 0 : r[i];
            if (fabs(y[i] - ref) > 1e-4 * (fabs(ref) > 1 ? fabs(ref) : 1)) { t->bad++; break; }
        }
    }
    p_free(g);
    free(w); free(x); free(y); free(wd); free(xd); free(r);
    return NULL;
}


/* test_acl_shim LIB bench: time both grouped-conv lowerings (not part of the checks). */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void bench_grouped(int C, int HW, int O, int groups, int K) {
    for (int k = 0; k < 2; k++) {
        const char *strat = k == 0 ? "split" : "blockdiag";
        setenv("MOTE_ACL_GROUPED_CONV", strat, 1);
        int Ig = C / groups;
        float *x = rand_f((size_t)HW * HW * C, -1, 1), *w = rand_f((size_t)O * K * K * Ig, -1, 1);
        float *y = alloc64((size_t)HW * HW * O * 4);
        mote_bk_graph *g = gnew();
        uint32_t tx = tf(g, MOTE_BK_TENSOR_INPUT, DIMS(1, HW, HW, C), NULL);
        uint32_t ty = tf(g, MOTE_BK_TENSOR_OUTPUT, DIMS(1, HW, HW, O), NULL);
        uint32_t tw = tf(g, MOTE_BK_TENSOR_CONSTANT, DIMS(O, K, K, Ig), w);
        mote_bk_node_attrs a = attrs(MOTE_BK_OP_CONV2D);
        a.layout = MOTE_BK_LAYOUT_NHWC;
        a.groups = groups;
        a.padding[0] = a.padding[1] = a.padding[2] = a.padding[3] = K / 2;
        if (node(g, "b", &a, (uint32_t[]){tx, tw}, 2, ty) || p_finalize(g, g_err, sizeof g_err)) {
            printf("bench %s: %s\n", strat, g_err);
        } else {
            p_run(g, (const void *[]){x}, 1, (void *[]){y}, 1, g_err, sizeof g_err);
            int reps = 5;
            double t0 = now_s();
            for (int r = 0; r < reps; r++) p_run(g, (const void *[]){x}, 1, (void *[]){y}, 1, g_err, sizeof g_err);
            printf("bench grouped conv NHWC %dx%dx%d -> %d, %dx%d, groups %d [%s]: %.2f ms/run\n", HW, HW, C, O, K, K,
                   groups, strat, (now_s() - t0) / reps * 1e3);
        }
        p_free(g);
        free(x); free(w); free(y);
    }
    unsetenv("MOTE_ACL_GROUPED_CONV");
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "libmote_acl.so";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("FAIL: dlopen %s: %s\nacl checks: 0 passed, 1 failed\n", path, dlerror()); return 1; }
#define SYM(v, n) do { *(void **)&v = dlsym(h, n); if (!v) { printf("FAIL: missing symbol %s\nacl checks: 0 passed, 1 failed\n", n); return 1; } } while (0)
    SYM(p_abi, "mote_backend_abi_version");
    SYM(p_name, "mote_backend_name");
    SYM(p_avail, "mote_backend_available");
    SYM(p_new, "mote_backend_graph_new");
    SYM(p_add_tensor, "mote_backend_graph_add_tensor");
    SYM(p_add_node, "mote_backend_graph_add_node");
    SYM(p_finalize, "mote_backend_graph_finalize");
    SYM(p_run, "mote_backend_graph_run");
    SYM(p_free, "mote_backend_graph_free");
    check(1, "dlopen + all 9 symbols");
    check(p_abi() == MOTE_BACKEND_ABI_VERSION, "abi version %u", p_abi());
    check(strcmp(p_name(), "acl") == 0, "name \"%s\"", p_name());
    int32_t av = p_avail(g_err, sizeof g_err);
    check(av == MOTE_BK_OK, "available (%d)", av);
    if (argc > 2 && strcmp(argv[2], "bench") == 0) {
        bench_grouped(64, 28, 64, 2, 3);
        bench_grouped(64, 28, 64, 4, 3);
        bench_grouped(64, 28, 64, 8, 3);
        bench_grouped(128, 14, 128, 32, 3);
        bench_grouped(64, 28, 64, 2, 1);
        bench_grouped(64, 28, 64, 8, 1);
        return 0;
    }

    /* conv2d fp32 */
    conv_f32("conv NHWC 3x3 s(2,1) pad t1/l0/b2/r1 bias relu",
             (conv_case){1, 1, 3, 7, 6, 4, 3, 3, 1, {2, 1}, {1, 0, 2, 1}, {1, 1}, MOTE_BK_ACT_RELU, 1, 0, 0, 0}, 1);
    conv_f32("conv NHWC 3x3 C=O=16 s1 pad1 clip[-0.5,1.5] (Winograd)",
             (conv_case){1, 1, 16, 9, 9, 16, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, MOTE_BK_ACT_CLIP, 1, -0.5f, 1.5f, 0}, 1);
    conv_f32("conv NHWC 5x3 dil(2,1) no bias relu6",
             (conv_case){1, 2, 4, 12, 8, 6, 5, 3, 1, {1, 1}, {0, 0, 0, 0}, {2, 1}, MOTE_BK_ACT_RELU6, 0, 0, 0, 0}, 1);
    conv_f32("conv NHWC 1x1", (conv_case){1, 1, 8, 5, 5, 5, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 0, 1, 0, 0, 0}, 1);
    conv_f32("conv NCHW 3x3 s2 pad1 bias relu6",
             (conv_case){0, 1, 3, 8, 7, 5, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, MOTE_BK_ACT_RELU6, 1, 0, 0, 0}, 1);
    /* depthwise */
    conv_f32("depthwise NHWC 3x3 s2 pad t1/l1/b0/r0 M=1 bias relu6",
             (conv_case){1, 1, 6, 9, 9, 6, 3, 3, 6, {2, 2}, {1, 1, 0, 0}, {1, 1}, MOTE_BK_ACT_RELU6, 1, 0, 0, 0}, 1);
    conv_f32("depthwise NHWC 3x3 multiplier 2 pad1",
             (conv_case){1, 1, 4, 7, 6, 8, 3, 3, 4, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 1, 0, 0, 0}, 1);
    conv_f32("depthwise NHWC 5x5 dilation 2",
             (conv_case){1, 1, 3, 12, 12, 3, 5, 5, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}, MOTE_BK_ACT_RELU, 1, 0, 0, 0}, 1);
    conv_f32("depthwise NCHW 3x3 pad1 bias",
             (conv_case){0, 1, 5, 6, 6, 5, 3, 3, 5, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 1, 0, 0, 0}, 1);
    /* quantized conv / depthwise */
    conv_q("qconv uint8 3x3 wzp 120 relu", MOTE_BK_DTYPE_UINT8, 0,
           (conv_case){1, 1, 4, 6, 6, 5, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, MOTE_BK_ACT_RELU, 1, 0, 0, 0}, 0.05f, 128,
           0.01f, 120, 0.2f, 10);
    conv_q("qconv int8 x per-channel int8 weights s2 relu6", MOTE_BK_DTYPE_INT8, 1,
           (conv_case){1, 1, 6, 8, 8, 4, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, MOTE_BK_ACT_RELU6, 1, 0, 0, 0}, 0.04f, -5,
           0.01f, 0, 0.05f, -20);
    conv_q("qdepthwise uint8 3x3 relu6", MOTE_BK_DTYPE_UINT8, 0,
           (conv_case){1, 1, 8, 7, 7, 8, 3, 3, 8, {1, 1}, {1, 1, 1, 1}, {1, 1}, MOTE_BK_ACT_RELU6, 1, 0, 0, 0}, 0.03f, 100,
           0.02f, 128, 0.05f, 0);
    conv_q("qdepthwise int8 per-channel M=1 s2", MOTE_BK_DTYPE_INT8, 1,
           (conv_case){1, 1, 4, 8, 8, 4, 3, 3, 4, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 1, 0, 0, 0}, 0.03f, 3, 0.02f, 0, 0.04f, 2);
    /* pools */
    int p1[4] = {1, 1, 1, 1}, p0[4] = {0, 0, 0, 0};
    pool_f32("max_pool NHWC 3x2 window s2 pad1 ceil", 1, 0, 0, 1, 4, 7, 8, 3, 2, 2, 2, p1, 1, 0);
    pool_f32("avg_pool NHWC 3x3 s2 pad1 ceil exclude pad", 1, 1, 0, 1, 4, 7, 7, 3, 3, 2, 2, p1, 1, 0);
    pool_f32("avg_pool NHWC 3x3 s2 pad1 count_include_pad", 1, 1, 0, 2, 3, 8, 8, 3, 3, 2, 2, p1, 0, 1);
    pool_f32("max_pool NCHW 2x2 s2", 0, 0, 0, 1, 3, 6, 6, 2, 2, 2, 2, p0, 0, 0);
    pool_f32("global_avg_pool NHWC", 1, 1, 1, 1, 5, 6, 7, 0, 0, 0, 0, p0, 0, 0);
    pool_f32("global_max_pool NHWC", 1, 0, 1, 2, 3, 4, 5, 0, 0, 0, 0, p0, 0, 0);
    pool_f32("global_avg_pool NCHW", 0, 1, 1, 1, 4, 5, 5, 0, 0, 0, 0, p0, 0, 0);
    /* dense / matmul */
    dense_f32("dense [2,10]x[6,10]^T + bias relu", 0, MOTE_BK_ACT_RELU);
    dense_f32("dense rank-3 [2,3,10] + bias", 1, MOTE_BK_ACT_NONE);
    dense_q("dense int8 + S32 bias relu");
    matmul_f32("matmul [2,4,6]x[2,6,5]");
    /* elementwise */
    ew_f32("add [1,4,4,8] + [1,1,1,8]", MOTE_BK_OP_ADD, 0, (int64_t[]){1, 4, 4, 8}, (int64_t[]){1, 1, 1, 8}, 4);
    ew_f32("add + relu [2,3,5]", MOTE_BK_OP_ADD, MOTE_BK_ACT_RELU, (int64_t[]){2, 3, 5}, (int64_t[]){2, 3, 5}, 3);
    ew_f32("multiply [1,4,4,8] * [1,4,4,1]", MOTE_BK_OP_MULTIPLY, 0, (int64_t[]){1, 4, 4, 8}, (int64_t[]){1, 4, 4, 1}, 4);
    add_q("add uint8 requantized (3 qinfos)");
    unary_f32("relu", MOTE_BK_OP_RELU, 0, 0);
    unary_f32("relu6", MOTE_BK_OP_RELU6, 0, 0);
    unary_f32("clip [-1.5, 2.5]", MOTE_BK_OP_CLIP, -1.5f, 2.5f);
    softmax_f32("softmax axis 2 (last)", 2);
    softmax_f32("softmax axis 1", 1);
    reshape_concat();
    multi_node();
    unsupported_and_errors();
    format_v2();
    v2_chain();
    v2_layout_chain();

    /* two threads, two graphs */
    pthread_t th[2];
    thr_arg ta[2] = {{0, 30, 0}, {1, 30, 0}};
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thr_main, &ta[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    check(ta[0].bad == 0 && ta[1].bad == 0, "2 threads x 30 runs on 2 graphs: %d + %d wrong runs", ta[0].bad, ta[1].bad);

    printf("acl checks: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
