/*
 * Replays a trace of OpenCL kernel launches written by Mote (`mote bench --opencl-trace FILE`,
 * format in runtime/src/device/opencl/exec.rs, `Trace`) with nothing but the OpenCL API: the
 * same kernel sources, work sizes and arguments, on the same device, as a plain host program
 * would enqueue them. It is the peer Mote's per-call time is compared with
 * (scripts/bench-opencl.sh, docs/benchmarks.md "OpenCL").
 *
 *   replay TRACE DEVICE_INDEX RUNS [COPY_BYTES]
 *
 * Times RUNS repetitions of the whole launch sequence (arguments set, kernels enqueued, then
 * clFinish), after 20 untimed ones, and prints one line of JSON: the median and minimum
 * microseconds per sequence and the number of launches in it. With COPY_BYTES, also times a
 * blocking clEnqueueWriteBuffer and clEnqueueReadBuffer of that many bytes (medians, in
 * microseconds), the peer of Mote's host<->device copies, and a blocking clEnqueueMapBuffer then
 * clEnqueueUnmapMemObject and clFinish of a CL_MEM_ALLOC_HOST_PTR buffer of that size, the peer
 * of Mote's mapped (zero-copy) device memory.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_KERNELS 64
#define MAX_BUFFERS 256
#define MAX_LAUNCHES 4096
#define MAX_ARGS 32

typedef struct {
    int kind; /* 0 buffer, 1 null, 2 scalar */
    int buffer;
    size_t size;
    unsigned char bytes[8];
} Arg;

typedef struct {
    int kernel;
    cl_uint dims;
    size_t global[3], local[3];
    int nargs;
    Arg args[MAX_ARGS];
} Launch;

static cl_kernel kernels[MAX_KERNELS];
static cl_mem buffers[MAX_BUFFERS];
static size_t buffer_sizes[MAX_BUFFERS];
static Launch launches[MAX_LAUNCHES];
static int nlaunches;

static void die(const char *what, cl_int code) {
    fprintf(stderr, "replay: %s (OpenCL error %d)\n", what, (int)code);
    exit(1);
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: replay TRACE DEVICE_INDEX RUNS [COPY_BYTES]\n");
        return 2;
    }
    int want = atoi(argv[2]), runs = atoi(argv[3]);
    long copy_bytes = argc > 4 ? atol(argv[4]) : 0;
    if (runs < 1) runs = 1;

    /* The device: DEVICE_INDEX in platform order, as Mote numbers devices. */
    cl_platform_id platforms[16];
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(16, platforms, &np);
    if (err != CL_SUCCESS || np == 0) die("no OpenCL platform", err);
    cl_device_id device = NULL;
    int seen = 0;
    for (cl_uint p = 0; p < np && !device; p++) {
        cl_device_id ids[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, ids, &nd) != CL_SUCCESS) continue;
        for (cl_uint d = 0; d < nd; d++, seen++)
            if (seen == want) { device = ids[d]; break; }
    }
    if (!device) die("no such device", 0);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (err != CL_SUCCESS) die("clCreateContext", err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    if (err != CL_SUCCESS) die("clCreateCommandQueue", err);

    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "kernel ", 7)) {
            int k;
            char name[256];
            size_t len;
            if (sscanf(line, "kernel %d %255s %zu", &k, name, &len) != 3 || k < 0 || k >= MAX_KERNELS)
                die("bad kernel line", 0);
            char *src = malloc(len + 1);
            if (!src || fread(src, 1, len, f) != len) die("short kernel source", 0);
            src[len] = 0;
            fgetc(f); /* the newline after the source */
            const char *s = src;
            cl_program prog = clCreateProgramWithSource(ctx, 1, &s, &len, &err);
            if (err != CL_SUCCESS) die("clCreateProgramWithSource", err);
            err = clBuildProgram(prog, 1, &device, "", NULL, NULL);
            if (err != CL_SUCCESS) die("clBuildProgram", err);
            kernels[k] = clCreateKernel(prog, name, &err);
            if (err != CL_SUCCESS) die("clCreateKernel", err);
            free(src);
        } else if (!strncmp(line, "launch ", 7)) {
            if (nlaunches == MAX_LAUNCHES) die("too many launches", 0);
            Launch *l = &launches[nlaunches++];
            char *p = line + 7;
            l->kernel = (int)strtol(p, &p, 10);
            l->dims = (cl_uint)strtoul(p, &p, 10);
            if (l->dims < 1 || l->dims > 3) die("bad launch dims", 0);
            for (cl_uint d = 0; d < l->dims; d++) l->global[d] = strtoull(p, &p, 10);
            for (cl_uint d = 0; d < l->dims; d++) l->local[d] = strtoull(p, &p, 10);
            l->nargs = (int)strtol(p, &p, 10);
            if (l->nargs < 0 || l->nargs > MAX_ARGS) die("bad argument count", 0);
            for (int i = 0; i < l->nargs; i++) {
                Arg *a = &l->args[i];
                if (!fgets(line, sizeof line, f)) die("short launch", 0);
                if (!strncmp(line, "buffer ", 7)) {
                    a->kind = 0;
                    if (sscanf(line, "buffer %d %zu", &a->buffer, &a->size) != 2 || a->buffer < 0 ||
                        a->buffer >= MAX_BUFFERS)
                        die("bad buffer line", 0);
                    if (!buffers[a->buffer]) {
                        buffers[a->buffer] =
                            clCreateBuffer(ctx, CL_MEM_READ_WRITE, a->size ? a->size : 1, NULL, &err);
                        if (err != CL_SUCCESS) die("clCreateBuffer", err);
                        /* Zeros, not whatever the allocator left: garbage can hold denormals or
                         * NaNs, which make float arithmetic on a CPU device many times slower
                         * than on the data Mote's calls carry. */
                        static const unsigned char zero[4] = {0, 0, 0, 0};
                        err = clEnqueueFillBuffer(q, buffers[a->buffer], zero, 1, 0, a->size ? a->size : 1,
                                                  0, NULL, NULL);
                        if (err != CL_SUCCESS) die("clEnqueueFillBuffer", err);
                        buffer_sizes[a->buffer] = a->size;
                    }
                } else if (!strncmp(line, "null", 4)) {
                    a->kind = 1;
                } else if (!strncmp(line, "scalar ", 7)) {
                    a->kind = 2;
                    size_t n = (strlen(line + 7) - 1) / 2;
                    if (n > 8) die("bad scalar", 0);
                    a->size = n;
                    for (size_t j = 0; j < n; j++) {
                        unsigned v;
                        sscanf(line + 7 + 2 * j, "%2x", &v);
                        a->bytes[j] = (unsigned char)v;
                    }
                } else {
                    die("bad argument line", 0);
                }
            }
        }
    }
    fclose(f);
    if (nlaunches == 0) die("the trace has no launch", 0);

    double *t = malloc(sizeof(double) * (size_t)runs);
    for (int r = -20; r < runs; r++) {
        double t0 = now_us();
        for (int i = 0; i < nlaunches; i++) {
            Launch *l = &launches[i];
            cl_kernel k = kernels[l->kernel];
            for (int j = 0; j < l->nargs; j++) {
                Arg *a = &l->args[j];
                if (a->kind == 0)
                    err = clSetKernelArg(k, (cl_uint)j, sizeof(cl_mem), &buffers[a->buffer]);
                else if (a->kind == 1)
                    err = clSetKernelArg(k, (cl_uint)j, sizeof(cl_mem), NULL);
                else
                    err = clSetKernelArg(k, (cl_uint)j, a->size, a->bytes);
                if (err != CL_SUCCESS) die("clSetKernelArg", err);
            }
            err = clEnqueueNDRangeKernel(q, k, l->dims, NULL, l->global, l->local, 0, NULL, NULL);
            if (err != CL_SUCCESS) die("clEnqueueNDRangeKernel", err);
        }
        err = clFinish(q);
        if (err != CL_SUCCESS) die("clFinish", err);
        if (r >= 0) t[r] = now_us() - t0;
    }
    double med = median(t, runs), min = t[0];
    printf("{\"launches\": %d, \"median_us\": %.3f, \"min_us\": %.3f", nlaunches, med, min);
    if (copy_bytes > 0) {
        cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)copy_bytes, NULL, &err);
        if (err != CL_SUCCESS) die("clCreateBuffer (copy)", err);
        unsigned char *host = calloc(1, (size_t)copy_bytes);
        double *w = malloc(sizeof(double) * (size_t)runs), *rd = malloc(sizeof(double) * (size_t)runs);
        for (int r = -5; r < runs; r++) {
            double t0 = now_us();
            err = clEnqueueWriteBuffer(q, b, CL_TRUE, 0, (size_t)copy_bytes, host, 0, NULL, NULL);
            if (err != CL_SUCCESS) die("clEnqueueWriteBuffer", err);
            double t1 = now_us();
            err = clEnqueueReadBuffer(q, b, CL_TRUE, 0, (size_t)copy_bytes, host, 0, NULL, NULL);
            if (err != CL_SUCCESS) die("clEnqueueReadBuffer", err);
            if (r >= 0) { w[r] = t1 - t0; rd[r] = now_us() - t1; }
        }
        /* The zero-copy path: a buffer the host can reach (CL_MEM_ALLOC_HOST_PTR), mapped for
         * reading and writing, then unmapped and waited for. */
        cl_mem hb = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, (size_t)copy_bytes, NULL, &err);
        if (err != CL_SUCCESS) die("clCreateBuffer (mapped)", err);
        double *mp = malloc(sizeof(double) * (size_t)runs);
        for (int r = -5; r < runs; r++) {
            double t0 = now_us();
            void *p = clEnqueueMapBuffer(q, hb, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, (size_t)copy_bytes, 0, NULL,
                                         NULL, &err);
            if (err != CL_SUCCESS) die("clEnqueueMapBuffer", err);
            err = clEnqueueUnmapMemObject(q, hb, p, 0, NULL, NULL);
            if (err != CL_SUCCESS) die("clEnqueueUnmapMemObject", err);
            err = clFinish(q);
            if (err != CL_SUCCESS) die("clFinish", err);
            if (r >= 0) mp[r] = now_us() - t0;
        }
        printf(", \"copy_bytes\": %ld, \"write_us\": %.3f, \"read_us\": %.3f, \"map_us\": %.3f", copy_bytes,
               median(w, runs), median(rd, runs), median(mp, runs));
    }
    printf("}\n");
    return 0;
}
