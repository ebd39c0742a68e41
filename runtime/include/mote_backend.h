/*
 * mote_backend.h: the Mote backend plug-in ABI, version 1.
 *
 * A backend plug-in is a shared library that runs offloaded subgraphs (the `mote.subgraph`
 * regions of docs/subgraph-format.md) for Mote. Mote loads it with dlopen (paths from the
 * colon-separated MOTE_BACKEND_PLUGINS environment variable, or mote::backend::load_plugin),
 * checks mote_backend_abi_version() right away, and refuses a library whose version differs from
 * the MOTE_BACKEND_ABI_VERSION it was built with.
 *
 * Contract (docs/backend-plugin-abi.md has the long form):
 *
 * - Status. Every function that can fail returns an int32_t status (MOTE_BK_OK == 0 on success)
 *   and takes a caller-provided error buffer `err` of `errlen` bytes. On failure the plug-in
 *   writes a NUL-terminated, possibly truncated, human-readable message into it (when `err` is not
 *   NULL and `errlen` > 0). There is no hidden thread-local error state. Out-parameters are
 *   written only on success. No C++ exception or longjmp may cross this boundary.
 * - Graphs. Mote builds one graph per run of consecutive subgraph nodes the plug-in accepted:
 *   graph_new, then add_tensor for every tensor the nodes touch, then add_node for each node in
 *   execution order, then finalize (where weights are transformed once), then any number of
 *   graph_run, then graph_free.
 * - add_node validates immediately. If the plug-in cannot run the node (op, dtype, layout,
 *   attribute, platform...), it returns MOTE_BK_UNSUPPORTED with the reason in `err` and leaves
 *   the graph exactly as before the call. Mote uses this to decide per node, logs the reason and
 *   runs the node with its own CPU backend instead. Mote also builds small throw-away "probe"
 *   graphs (one node, never finalized) to ask that question; graph_free must accept them.
 * - Tensors. add_tensor returns ids 0, 1, 2... in call order. CONSTANT data is copied (or fully
 *   consumed) during the call: the caller may free it as soon as add_tensor returns.
 *   INTERMEDIATE tensors are owned by the plug-in. INPUT and OUTPUT tensors are bound per run:
 *   graph_run's `inputs` are in the order the INPUT tensors were added, `outputs` in the order
 *   the OUTPUT tensors were added. A later node of the same graph may read an OUTPUT tensor.
 * - I/O buffers passed to graph_run are borrowed for the duration of that call only: dense,
 *   row-major in the declared shape, aligned to at least the element size (Mote passes 64-byte
 *   aligned buffers), inputs and outputs never overlap. The plug-in must not retain them.
 * - Threading. mote_backend_abi_version, mote_backend_name and mote_backend_available may be
 *   called from any thread at any time. A graph is built (new, add_*, finalize) on one thread at
 *   a time. Mote never runs one graph concurrently with itself, but different graphs may run at
 *   the same time on different threads; a plug-in whose library is not thread-safe across graphs
 *   must serialize internally. graph_free is never called while the graph runs.
 * - Structs carry `struct_size` (set by the caller to sizeof the struct it was compiled with).
 *   Later ABI versions only append fields; a plug-in reads a field only if it lies within
 *   `struct_size`, and treats missing fields as zero. Enum values are never renumbered or reused.
 * - Versioning. Anything that is not an append (a changed signature, a changed meaning) bumps
 *   MOTE_BACKEND_ABI_VERSION.
 *
 * Required symbols (all with C linkage, default visibility):
 *   mote_backend_abi_version, mote_backend_name, mote_backend_available, mote_backend_graph_new,
 *   mote_backend_graph_add_tensor, mote_backend_graph_add_node, mote_backend_graph_finalize,
 *   mote_backend_graph_run, mote_backend_graph_free.
 */
#ifndef MOTE_BACKEND_H
#define MOTE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The ABI version this header describes. mote_backend_abi_version() must return it. */
#define MOTE_BACKEND_ABI_VERSION 1u

/** Largest tensor rank the ABI carries. */
#define MOTE_BK_MAX_DIMS 8

/* ---- Status codes (int32_t) ---- */
#define MOTE_BK_OK 0
/** The plug-in cannot run this node/graph; Mote falls back. `err` says why. */
#define MOTE_BK_UNSUPPORTED 1
/** A malformed argument (NULL pointer, bad id, inconsistent shapes...). */
#define MOTE_BK_INVALID_ARG 2
/** The plug-in or its library failed while doing valid work. */
#define MOTE_BK_RUNTIME_ERROR 3
/** Call out of order (add after finalize, run before finalize...). */
#define MOTE_BK_BAD_STATE 4

/* ---- Element types (int32_t) ---- */
#define MOTE_BK_DTYPE_FLOAT32 1
#define MOTE_BK_DTYPE_FLOAT16 2
#define MOTE_BK_DTYPE_INT32 3
#define MOTE_BK_DTYPE_INT8 4
#define MOTE_BK_DTYPE_UINT8 5

/* ---- Tensor kinds (int32_t) ---- */
#define MOTE_BK_TENSOR_INPUT 1
#define MOTE_BK_TENSOR_OUTPUT 2
#define MOTE_BK_TENSOR_CONSTANT 3
#define MOTE_BK_TENSOR_INTERMEDIATE 4

/* ---- Layouts of 4-D ops (int32_t) ---- */
#define MOTE_BK_LAYOUT_NONE 0
/** Data NHWC, weights OHWI ([O, KH, KW, I/groups]). */
#define MOTE_BK_LAYOUT_NHWC 1
/** Data NCHW, weights OIHW ([O, I/groups, KH, KW]). */
#define MOTE_BK_LAYOUT_NCHW 2

/* ---- Ops (int32_t), the ops of subgraph format 1 ---- */
#define MOTE_BK_OP_CONV2D 1
#define MOTE_BK_OP_MAX_POOL2D 2
#define MOTE_BK_OP_AVG_POOL2D 3
#define MOTE_BK_OP_GLOBAL_MAX_POOL2D 4
#define MOTE_BK_OP_GLOBAL_AVG_POOL2D 5
#define MOTE_BK_OP_DENSE 6
#define MOTE_BK_OP_MATMUL 7
#define MOTE_BK_OP_ADD 8
#define MOTE_BK_OP_MULTIPLY 9
#define MOTE_BK_OP_RELU 10
#define MOTE_BK_OP_RELU6 11
#define MOTE_BK_OP_CLIP 12
#define MOTE_BK_OP_SOFTMAX 13
#define MOTE_BK_OP_RESHAPE 14
#define MOTE_BK_OP_CONCATENATE 15
#define MOTE_BK_OP_ACTIVATION 16
#define MOTE_BK_OP_SUBTRACT 17
#define MOTE_BK_OP_DIVIDE 18
#define MOTE_BK_OP_SCALE_SHIFT 19
#define MOTE_BK_OP_LRN 20
#define MOTE_BK_OP_TRANSPOSE 21
#define MOTE_BK_OP_CHANNEL_SHUFFLE 22
#define MOTE_BK_OP_SPLIT 23
#define MOTE_BK_OP_LAYER_NORM 24

/* ---- Fused activations (int32_t) ---- */
#define MOTE_BK_ACT_NONE 0
#define MOTE_BK_ACT_RELU 1
#define MOTE_BK_ACT_RELU6 2
/** clamp to [act_min, act_max] (real units). */
#define MOTE_BK_ACT_CLIP 3
#define MOTE_BK_ACT_SIGMOID 4
#define MOTE_BK_ACT_TANH 5
#define MOTE_BK_ACT_HARDSWISH 6
#define MOTE_BK_ACT_HARDSIGMOID 7   /* act_alpha, act_beta */
#define MOTE_BK_ACT_SILU 8
#define MOTE_BK_ACT_GELU 9
#define MOTE_BK_ACT_GELU_TANH 10
#define MOTE_BK_ACT_LEAKY_RELU 11   /* act_alpha */

/** An opaque graph owned by the plug-in. */
typedef struct mote_bk_graph mote_bk_graph;

/** Describes one tensor of a graph. */
typedef struct mote_bk_tensor_desc {
    /** sizeof(mote_bk_tensor_desc) as the caller knows it. */
    uint32_t struct_size;
    /** MOTE_BK_TENSOR_*. */
    int32_t kind;
    /** MOTE_BK_DTYPE_*. */
    int32_t dtype;
    /** Rank, 0..=MOTE_BK_MAX_DIMS. */
    int32_t ndim;
    /** Shape, outermost first; entries past ndim are 0. */
    int64_t dims[MOTE_BK_MAX_DIMS];
    /**
     * Quantization (int8/uint8 tensors and the int32 bias of quantized conv2d/dense):
     * real = scale * (q - zero_point). num_scales == 0: not quantized; 1: per tensor;
     * dims[quant_axis]: per channel along quant_axis. quant_axis is -1 when per tensor.
     * The arrays are borrowed for the duration of the add_tensor call (copy them).
     */
    int32_t quant_axis;
    uint32_t num_scales;
    const float *scales;
    const int32_t *zero_points;
    /** CONSTANT only: the row-major data, borrowed for the duration of the call. */
    const void *data;
    /** Bytes at `data` (product of dims times the element size). */
    uint64_t data_bytes;
} mote_bk_tensor_desc;

/** The attributes of one node: one flat struct for every op; fields an op does not use are 0. */
typedef struct mote_bk_node_attrs {
    /** sizeof(mote_bk_node_attrs) as the caller knows it. */
    uint32_t struct_size;
    /** MOTE_BK_OP_*. */
    int32_t op;
    /** MOTE_BK_LAYOUT_* (4-D ops), else MOTE_BK_LAYOUT_NONE. */
    int32_t layout;
    /** conv2d / pools: [h, w]. */
    int32_t strides[2];
    /** conv2d / pools: [top, left, bottom, right]. */
    int32_t padding[4];
    /** conv2d / pools: [h, w]. */
    int32_t dilation[2];
    /** conv2d: groups (groups == C_in == O / multiplier is depthwise). */
    int32_t groups;
    /** pools: window [h, w]. */
    int32_t pool_size[2];
    /** pools: 1 to round output sizes up. */
    int32_t ceil_mode;
    /** avg_pool2d: 1 to divide by the full window including padding. */
    int32_t count_include_pad;
    /** softmax / concatenate: axis, already normalized to 0..rank-1. */
    int32_t axis;
    /** conv2d / dense / add / multiply: MOTE_BK_ACT_*. */
    int32_t activation;
    /** MOTE_BK_ACT_CLIP and the clip op: the bounds, in real units. */
    float act_min;
    float act_max;
    /** MOTE_BK_ACT_HARDSIGMOID (alpha, beta) and MOTE_BK_ACT_LEAKY_RELU (alpha). */
    float act_alpha;
    float act_beta;
    /** lrn: size, alpha, beta, bias. */
    int32_t lrn_size;
    float lrn_alpha;
    float lrn_beta;
    float lrn_bias;
    /** transpose: the permutation (num_axes entries, output dim i = input dim axes[i]). */
    int32_t num_axes;
    int32_t axes[MOTE_BK_MAX_DIMS];
    /** layer_norm: epsilon. */
    float epsilon;
} mote_bk_node_attrs;

/** The ABI version the plug-in implements; must equal MOTE_BACKEND_ABI_VERSION. */
uint32_t mote_backend_abi_version(void);

/** The backend's name (e.g. "acl"): a static NUL-terminated string, valid while loaded. Names
 * are what SessionOptions::backends and `mote inspect` use. */
const char *mote_backend_name(void);

/** MOTE_BK_OK if the backend can run on this machine (CPU features, vendor library present...),
 * else MOTE_BK_UNSUPPORTED with the reason in `err`. */
int32_t mote_backend_available(char *err, size_t errlen);

/** Create an empty graph in *out. */
int32_t mote_backend_graph_new(mote_bk_graph **out, char *err, size_t errlen);

/** Add a tensor; its id (0, 1, 2... in call order) goes to *out_id. */
int32_t mote_backend_graph_add_tensor(mote_bk_graph *graph, const mote_bk_tensor_desc *desc,
                                      uint32_t *out_id, char *err, size_t errlen);

/**
 * Add a node reading tensors `inputs[0..num_inputs)` and writing `outputs[0..num_outputs)`
 * (ids from add_tensor; operand order as in docs/subgraph-format.md, e.g. conv2d's data, weight,
 * bias). `name` is the node's name, for messages. Validates now: MOTE_BK_UNSUPPORTED + reason
 * leaves the graph unchanged.
 */
int32_t mote_backend_graph_add_node(mote_bk_graph *graph, const char *name,
                                    const mote_bk_node_attrs *attrs, const uint32_t *inputs,
                                    uint32_t num_inputs, const uint32_t *outputs,
                                    uint32_t num_outputs, char *err, size_t errlen);

/** Freeze the graph: allocate, transform weights. No add_* afterwards. */
int32_t mote_backend_graph_finalize(mote_bk_graph *graph, char *err, size_t errlen);

/** Run a finalized graph once. Buffers are borrowed for this call only (see the preamble). */
int32_t mote_backend_graph_run(mote_bk_graph *graph, const void *const *inputs,
                               uint32_t num_inputs, void *const *outputs, uint32_t num_outputs,
                               char *err, size_t errlen);

/** Destroy a graph (finalized or not). NULL is a no-op. */
void mote_backend_graph_free(mote_bk_graph *graph);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MOTE_BACKEND_H */
