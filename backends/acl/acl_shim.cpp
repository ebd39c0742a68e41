// libmote_acl.so: Mote backend plug-in (runtime/include/mote_backend.h, ABI 1) over the
// Arm Compute Library 24.11 NEON backend.
//
// Structure
// - add_tensor records the tensor (constants are copied into 64-byte aligned graph-owned memory).
// - add_node builds the ACL TensorInfos the node will use and calls the ACL function's static
//   validate() right away (release ACL builds do not validate inside configure()). On failure it
//   returns MOTE_BK_UNSUPPORTED with ACL's message and the graph is left untouched.
// - finalize creates one arm_compute::Tensor per tensor, re-validates and configures every
//   function in node order following the memory-group protocol (manage() before configuring the
//   producer of an intermediate, allocate() exactly once after configuring its last consumer),
//   populates both memory managers with one pool, imports the constants and calls prepare() so
//   weights are transformed once.
// - run imports the caller's INPUT/OUTPUT buffers (zero-copy, TensorAllocator::import_memory),
//   acquires the graph's memory group, runs the functions in order and releases the group.
//
// Threading rule
// - ACL's scheduler (Scheduler::get()) is a process-global singleton and ACL documents its runtime
//   as not thread-safe when different functions execute from separate threads. Therefore every
//   graph_run (and the prepare() calls of finalize, which also execute kernels) is serialized
//   across ALL graphs of the process with one process-wide mutex. ACL's own worker threads still
//   parallelize inside each function. Setting the environment variable MOTE_ACL_SERIALIZE_RUNS=0
//   (read once, at the first run) disables the mutex at the caller's risk.
// - Each graph owns exactly one memory pool (populate(..., 1)): a graph must never run concurrently
//   with itself (Mote guarantees this with a per-graph lock). Graph building (new, add_*,
//   finalize) happens on one thread at a time per graph.
//
// Every exported function catches every C++ exception (catch (...)) and turns it into a status.

#include "mote_backend.h"

#include "arm_compute/core/Error.h"
#include "arm_compute/core/TensorInfo.h"
#include "arm_compute/core/TensorShape.h"
#include "arm_compute/core/Types.h"
#include "arm_compute/runtime/Allocator.h"
#include "arm_compute/runtime/BlobLifetimeManager.h"
#include "arm_compute/runtime/MemoryGroup.h"
#include "arm_compute/runtime/MemoryManagerOnDemand.h"
#include "arm_compute/runtime/NEON/NEFunctions.h"
#include "arm_compute/runtime/OffsetLifetimeManager.h"
#include "arm_compute/runtime/PoolManager.h"
#include "arm_compute/runtime/Tensor.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ac = arm_compute;

namespace {

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (err == nullptr || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    err[errlen - 1] = '\0';
}

// Thrown inside the shim only; converted to a status at the boundary.
struct ShimError {
    int32_t code;
    std::string msg;
};

[[noreturn]] void fail(int32_t code, std::string msg) { throw ShimError{code, std::move(msg)}; }

std::string status_text(const ac::Status &s) {
    std::string d = s.error_description();
    if (d.empty()) d = "ACL validate failed";
    return d;
}

// ---------------------------------------------------------------------------------------------
// Aligned byte buffers for constants
// ---------------------------------------------------------------------------------------------

struct FreeDeleter {
    void operator()(void *p) const { std::free(p); }
};
using Buffer = std::shared_ptr<uint8_t>;

Buffer alloc_buffer(size_t bytes) {
    size_t n = ((bytes ? bytes : 1) + 63) / 64 * 64;
    void *p = std::aligned_alloc(64, n);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, n);
    return Buffer(static_cast<uint8_t *>(p), FreeDeleter());
}

size_t dtype_size(int32_t dt) {
    switch (dt) {
    case MOTE_BK_DTYPE_FLOAT32: return 4;
    case MOTE_BK_DTYPE_FLOAT16: return 2;
    case MOTE_BK_DTYPE_INT32: return 4;
    case MOTE_BK_DTYPE_INT8: return 1;
    case MOTE_BK_DTYPE_UINT8: return 1;
    default: return 0;
    }
}

const char *layout_name(ac::DataLayout l) {
    return l == ac::DataLayout::NHWC ? "NHWC" : l == ac::DataLayout::NCHW ? "NCHW" : "unknown";
}

// ---------------------------------------------------------------------------------------------
// Graph model
// ---------------------------------------------------------------------------------------------

struct TRec {
    int32_t kind = 0;
    int32_t dtype = 0;
    std::vector<int64_t> dims;  // outermost first
    std::vector<float> scales;
    std::vector<int32_t> zps;
    int32_t qaxis = -1;
    Buffer data;  // CONSTANT only
    size_t bytes = 0;
    ac::DataLayout layout = ac::DataLayout::UNKNOWN;
    bool nonconst = false;  // NEMatMul operands
    // Built at finalize.
    std::unique_ptr<ac::Tensor> t;
    int producer = -1;
    int last_use = -1;
    int io_index = -1;  // position among INPUT (or OUTPUT) tensors

    size_t numel() const {
        size_t n = 1;
        for (int64_t d : dims) n *= static_cast<size_t>(d);
        return n;
    }
};

enum class Fn {
    Conv,
    Depthwise,
    Pool,
    Dense,
    MatMul,
    Add,
    Mul,
    Act,
    Softmax,
    Reshape,
    Concat
};

struct Node {
    std::string name;
    int32_t op = 0;
    Fn fn = Fn::Act;
    mote_bk_node_attrs a{};
    std::vector<TRec *> ins;   // operands (data, weight, bias...) in function order
    std::vector<TRec *> outs;  // exactly one
    std::vector<std::unique_ptr<TRec>> owned;  // private rearranged constants (depthwise weights)
    // Derived parameters.
    ac::PadStrideInfo psi;
    ac::Size2D dil{1, 1};
    unsigned multiplier = 1;
    ac::ActivationLayerInfo act;  // fused or standalone activation
    ac::PoolingLayerInfo pool;
    ac::FullyConnectedLayerInfo fc;
    int32_t acl_axis = 0;
    std::vector<std::unique_ptr<ac::IFunction>> fns;
};

struct Graph {
    std::deque<std::unique_ptr<TRec>> tensors;  // ids
    std::vector<std::unique_ptr<Node>> nodes;
    std::vector<TRec *> inputs, outputs;
    bool finalized = false;
    bool broken = false;  // finalize failed
    std::shared_ptr<ac::MemoryManagerOnDemand> mm_layers;  // functions' internal scratch
    std::shared_ptr<ac::MemoryManagerOnDemand> mm_tensors; // intermediates
    std::unique_ptr<ac::MemoryGroup> group;
    ac::Allocator allocator;
};

// ---------------------------------------------------------------------------------------------
// TensorInfo construction
// ---------------------------------------------------------------------------------------------

ac::DataType acl_dtype(const TRec &r) {
    switch (r.dtype) {
    case MOTE_BK_DTYPE_FLOAT32: return ac::DataType::F32;
    case MOTE_BK_DTYPE_FLOAT16: return ac::DataType::F16;
    case MOTE_BK_DTYPE_INT32: return ac::DataType::S32;
    case MOTE_BK_DTYPE_UINT8: return ac::DataType::QASYMM8;
    case MOTE_BK_DTYPE_INT8:
        return r.scales.size() > 1 ? ac::DataType::QSYMM8_PER_CHANNEL : ac::DataType::QASYMM8_SIGNED;
    default: return ac::DataType::UNKNOWN;
    }
}

// The ACL info of a tensor: shape innermost first with the exact rank, `layout` (UNKNOWN: the
// tensor's own, else NCHW which is ACL's default and irrelevant for layout-free ops).
ac::TensorInfo make_info(const TRec &r, ac::DataLayout layout = ac::DataLayout::UNKNOWN) {
    ac::TensorShape shape;
    const size_t rank = r.dims.size();
    if (rank == 0) {
        shape.set(0, 1, false);
    } else {
        for (size_t i = 0; i < rank; ++i)
            shape.set(i, static_cast<size_t>(r.dims[rank - 1 - i]), false);
    }
    ac::TensorInfo info(shape, 1, acl_dtype(r));
    if (layout == ac::DataLayout::UNKNOWN) layout = r.layout;
    if (layout != ac::DataLayout::UNKNOWN) info.set_data_layout(layout);
    if (r.dtype == MOTE_BK_DTYPE_UINT8 || r.dtype == MOTE_BK_DTYPE_INT8) {
        if (r.scales.size() > 1) {
            info.set_quantization_info(ac::QuantizationInfo(r.scales));
        } else if (r.scales.size() == 1) {
            info.set_quantization_info(ac::QuantizationInfo(r.scales[0], r.zps.empty() ? 0 : r.zps[0]));
        }
    }
    if (r.nonconst) info.set_are_values_constant(false);
    return info;
}

ac::ActivationLayerInfo make_act(int32_t act, float lo, float hi) {
    using AF = ac::ActivationLayerInfo::ActivationFunction;
    switch (act) {
    case MOTE_BK_ACT_NONE: return ac::ActivationLayerInfo();
    case MOTE_BK_ACT_RELU: return ac::ActivationLayerInfo(AF::RELU);
    case MOTE_BK_ACT_RELU6: return ac::ActivationLayerInfo(AF::BOUNDED_RELU, 6.0f);
    case MOTE_BK_ACT_CLIP: return ac::ActivationLayerInfo(AF::LU_BOUNDED_RELU, hi, lo);
    default: fail(MOTE_BK_UNSUPPORTED, "unknown activation " + std::to_string(act));
    }
}

// ---------------------------------------------------------------------------------------------
// validate / configure per node
// ---------------------------------------------------------------------------------------------

// Validate `n` with the given infos (operands in n.ins/n.outs order). Throws UNSUPPORTED.
void validate_node(const Node &n, std::vector<ac::TensorInfo> &in, std::vector<ac::TensorInfo> &out) {
    ac::Status s;
    const ac::ITensorInfo *bias = in.size() > 2 ? &in[2] : nullptr;
    switch (n.fn) {
    case Fn::Conv:
        s = ac::NEConvolutionLayer::validate(&in[0], &in[1], bias, &out[0], n.psi, ac::WeightsInfo(), n.dil,
                                             n.act, false, 1);
        break;
    case Fn::Depthwise:
        s = ac::NEDepthwiseConvolutionLayer::validate(&in[0], &in[1], bias, &out[0], n.psi, n.multiplier, n.act,
                                                      n.dil);
        break;
    case Fn::Pool: s = ac::NEPoolingLayer::validate(&in[0], &out[0], n.pool); break;
    case Fn::Dense: s = ac::NEFullyConnectedLayer::validate(&in[0], &in[1], bias, &out[0], n.fc); break;
    case Fn::MatMul:
        s = ac::NEMatMul::validate(&in[0], &in[1], &out[0], ac::MatMulInfo(), ac::CpuMatMulSettings());
        break;
    case Fn::Add:
        s = ac::NEArithmeticAddition::validate(&in[0], &in[1], &out[0], ac::ConvertPolicy::SATURATE);
        if (s && n.act.enabled()) s = ac::NEActivationLayer::validate(&out[0], nullptr, n.act);
        break;
    case Fn::Mul:
        s = ac::NEPixelWiseMultiplication::validate(&in[0], &in[1], &out[0], 1.0f, ac::ConvertPolicy::SATURATE,
                                                    ac::RoundingPolicy::TO_ZERO);
        if (s && n.act.enabled()) s = ac::NEActivationLayer::validate(&out[0], nullptr, n.act);
        break;
    case Fn::Act: s = ac::NEActivationLayer::validate(&in[0], &out[0], n.act); break;
    case Fn::Softmax: s = ac::NESoftmaxLayer::validate(&in[0], &out[0], 1.0f, n.acl_axis); break;
    case Fn::Reshape: s = ac::NEReshapeLayer::validate(&in[0], &out[0]); break;
    case Fn::Concat: {
        std::vector<const ac::ITensorInfo *> v;
        for (auto &i : in) v.push_back(&i);
        s = ac::NEConcatenateLayer::validate(v, &out[0], static_cast<size_t>(n.acl_axis));
        break;
    }
    }
    if (!s) fail(MOTE_BK_UNSUPPORTED, status_text(s));
}

void configure_node(Node &n, const std::shared_ptr<ac::IMemoryManager> &mm) {
    auto T = [&](size_t i) { return n.ins[i]->t.get(); };
    ac::Tensor *out = n.outs[0]->t.get();
    ac::Tensor *bias = n.ins.size() > 2 ? T(2) : nullptr;
    switch (n.fn) {
    case Fn::Conv: {
        auto f = std::make_unique<ac::NEConvolutionLayer>(mm);
        f->configure(T(0), T(1), bias, out, n.psi, ac::WeightsInfo(), n.dil, n.act, false, 1);
        n.fns.push_back(std::move(f));
        break;
    }
    case Fn::Depthwise: {
        auto f = std::make_unique<ac::NEDepthwiseConvolutionLayer>(mm);
        f->configure(T(0), T(1), bias, out, n.psi, n.multiplier, n.act, n.dil);
        n.fns.push_back(std::move(f));
        break;
    }
    case Fn::Pool: {
        auto f = std::make_unique<ac::NEPoolingLayer>(mm);
        f->configure(T(0), out, n.pool);
        n.fns.push_back(std::move(f));
        break;
    }
    case Fn::Dense: {
        auto f = std::make_unique<ac::NEFullyConnectedLayer>(mm);
        f->configure(T(0), T(1), bias, out, n.fc);
        n.fns.push_back(std::move(f));
        break;
    }
    case Fn::MatMul: {
        auto f = std::make_unique<ac::NEMatMul>(mm);
        f->configure(T(0), T(1), out, ac::MatMulInfo(), ac::CpuMatMulSettings());
        n.fns.push_back(std::move(f));
        break;
    }
    case Fn::Add: {
        auto f = std::make_unique<ac::NEArithmeticAddition>();
        f->configure(T(0), T(1), out, ac::ConvertPolicy::SATURATE);
        n.fns.push_back(std::move(f));
        break;
    }
    case Fn::Mul: {
        auto f = std::make_unique<ac::NEPixelWiseMultiplication>();
        f->configure(T(0), T(1), out, 1.0f, ac::ConvertPolicy::SATURATE, ac::RoundingPolicy::TO_ZERO);
        n.fns.push_back(std::move(f));
        break;
    }
    case Fn::Act: {
        auto f = std::make_unique<ac::NEActivationLayer>();
        f->configure(T(0), out, n.act);
        n.fns.push_back(std::move(f));
        break;
    }
    case Fn::Softmax: {
        auto f = std::make_unique<ac::NESoftmaxLayer>(mm);
        f->configure(T(0), out, 1.0f, n.acl_axis);
        n.fns.push_back(std::move(f));
        break;
    }
    case Fn::Reshape: {
        auto f = std::make_unique<ac::NEReshapeLayer>();
        f->configure(T(0), out);
        n.fns.push_back(std::move(f));
        break;
    }
    case Fn::Concat: {
        std::vector<const ac::ITensor *> v;
        for (size_t i = 0; i < n.ins.size(); ++i) v.push_back(T(i));
        auto f = std::make_unique<ac::NEConcatenateLayer>();
        f->configure(v, out, static_cast<size_t>(n.acl_axis));
        n.fns.push_back(std::move(f));
        break;
    }
    }
    if ((n.fn == Fn::Add || n.fn == Fn::Mul) && n.act.enabled()) {
        auto f = std::make_unique<ac::NEActivationLayer>();
        f->configure(out, nullptr, n.act);  // in place on the output
        n.fns.push_back(std::move(f));
    }
}

// ---------------------------------------------------------------------------------------------
// add_node: translation + validation (no graph mutation until everything succeeded)
// ---------------------------------------------------------------------------------------------

const char *op_name(int32_t op) {
    switch (op) {
    case MOTE_BK_OP_CONV2D: return "conv2d";
    case MOTE_BK_OP_MAX_POOL2D: return "max_pool2d";
    case MOTE_BK_OP_AVG_POOL2D: return "avg_pool2d";
    case MOTE_BK_OP_GLOBAL_MAX_POOL2D: return "global_max_pool2d";
    case MOTE_BK_OP_GLOBAL_AVG_POOL2D: return "global_avg_pool2d";
    case MOTE_BK_OP_DENSE: return "dense";
    case MOTE_BK_OP_MATMUL: return "matmul";
    case MOTE_BK_OP_ADD: return "add";
    case MOTE_BK_OP_MULTIPLY: return "multiply";
    case MOTE_BK_OP_RELU: return "relu";
    case MOTE_BK_OP_RELU6: return "relu6";
    case MOTE_BK_OP_CLIP: return "clip";
    case MOTE_BK_OP_SOFTMAX: return "softmax";
    case MOTE_BK_OP_RESHAPE: return "reshape";
    case MOTE_BK_OP_CONCATENATE: return "concatenate";
    default: return "unknown";
    }
}

void need_inputs(const Node &n, size_t lo, size_t hi) {
    if (n.ins.size() < lo || n.ins.size() > hi)
        fail(MOTE_BK_INVALID_ARG, std::string(op_name(n.op)) + ": wrong number of inputs (" +
                                      std::to_string(n.ins.size()) + ")");
}

ac::DataLayout node_layout(const Node &n) {
    if (n.a.layout == MOTE_BK_LAYOUT_NHWC) return ac::DataLayout::NHWC;
    if (n.a.layout == MOTE_BK_LAYOUT_NCHW) return ac::DataLayout::NCHW;
    fail(MOTE_BK_INVALID_ARG, std::string(op_name(n.op)) + ": layout must be NHWC or NCHW");
}

// Build the node's derived parameters and private tensors. `layouts` receives the layout each
// operand tensor must carry (tensor -> layout).
void translate(Node &n, std::map<TRec *, ac::DataLayout> &layouts) {
    const mote_bk_node_attrs &a = n.a;
    if (n.outs.size() != 1) fail(MOTE_BK_INVALID_ARG, std::string(op_name(n.op)) + ": expects exactly one output");
    auto rank4 = [&](TRec *r, const char *what) {
        if (r->dims.size() != 4)
            fail(MOTE_BK_INVALID_ARG, std::string(op_name(n.op)) + ": " + what + " must be rank 4");
    };
    switch (n.op) {
    case MOTE_BK_OP_CONV2D: {
        need_inputs(n, 2, 3);
        ac::DataLayout L = node_layout(n);
        TRec *x = n.ins[0], *w = n.ins[1];
        rank4(x, "data");
        rank4(w, "weight");
        rank4(n.outs[0], "output");
        if (a.strides[0] <= 0 || a.strides[1] <= 0) fail(MOTE_BK_INVALID_ARG, "conv2d: strides must be > 0");
        for (int i = 0; i < 4; ++i)
            if (a.padding[i] < 0) fail(MOTE_BK_INVALID_ARG, "conv2d: negative padding");
        const int64_t cin = L == ac::DataLayout::NHWC ? x->dims[3] : x->dims[1];
        const int64_t O = w->dims[0];
        const int groups = a.groups <= 0 ? 1 : a.groups;
        n.psi = ac::PadStrideInfo(a.strides[1], a.strides[0], a.padding[1], a.padding[3], a.padding[0],
                                  a.padding[2], ac::DimensionRoundingType::FLOOR);
        n.dil = ac::Size2D(a.dilation[1] > 0 ? a.dilation[1] : 1, a.dilation[0] > 0 ? a.dilation[0] : 1);
        n.act = make_act(a.activation, a.act_min, a.act_max);
        layouts[x] = L;
        layouts[n.outs[0]] = L;
        if (groups == 1) {
            n.fn = Fn::Conv;
            layouts[w] = L;
        } else if (groups == cin) {
            n.fn = Fn::Depthwise;
            if (O % cin != 0) fail(MOTE_BK_INVALID_ARG, "conv2d: depthwise output channels not a multiple of groups");
            n.multiplier = static_cast<unsigned>(O / cin);
            if (w->kind != MOTE_BK_TENSOR_CONSTANT)
                fail(MOTE_BK_UNSUPPORTED, "depthwise conv2d: weights must be a constant (they are rearranged)");
            // Mote weights: NHWC -> OHWI [C*M, KH, KW, 1]; NCHW -> OIHW [C*M, 1, KH, KW].
            const bool nhwc = L == ac::DataLayout::NHWC;
            const int64_t KH = nhwc ? w->dims[1] : w->dims[2];
            const int64_t KW = nhwc ? w->dims[2] : w->dims[3];
            if ((nhwc ? w->dims[3] : w->dims[1]) != 1)
                fail(MOTE_BK_INVALID_ARG, "depthwise conv2d: weight input-channel dim must be 1");
            auto p = std::make_unique<TRec>();
            p->kind = MOTE_BK_TENSOR_CONSTANT;
            p->dtype = w->dtype;
            p->scales = w->scales;
            p->zps = w->zps;
            p->qaxis = w->qaxis;
            p->layout = L;
            p->bytes = w->bytes;
            const size_t es = dtype_size(w->dtype);
            if (nhwc) {
                // ACL NHWC depthwise weights: (C*M, KW, KH) innermost first = framework [KH, KW, C*M].
                p->dims = {KH, KW, O};
                p->data = alloc_buffer(w->bytes);
                const uint8_t *src = w->data.get();
                uint8_t *dst = p->data.get();
                for (int64_t o = 0; o < O; ++o)
                    for (int64_t kh = 0; kh < KH; ++kh)
                        for (int64_t kw = 0; kw < KW; ++kw)
                            std::memcpy(dst + ((kh * KW + kw) * O + o) * es, src + ((o * KH + kh) * KW + kw) * es, es);
            } else {
                // ACL NCHW depthwise weights: (KW, KH, C*M) = framework [C*M, KH, KW]: same bytes.
                p->dims = {O, KH, KW};
                p->data = w->data;
            }
            n.ins[1] = p.get();
            n.owned.push_back(std::move(p));
        } else {
            fail(MOTE_BK_UNSUPPORTED, "grouped conv2d (groups=" + std::to_string(groups) + ", C_in=" +
                                          std::to_string(cin) + ") is not supported on NEON");
        }
        break;
    }
    case MOTE_BK_OP_MAX_POOL2D:
    case MOTE_BK_OP_AVG_POOL2D: {
        need_inputs(n, 1, 1);
        ac::DataLayout L = node_layout(n);
        rank4(n.ins[0], "data");
        rank4(n.outs[0], "output");
        if ((a.dilation[0] > 1) || (a.dilation[1] > 1))
            fail(MOTE_BK_UNSUPPORTED, "pooling with dilation is not supported by ACL");
        if (a.pool_size[0] <= 0 || a.pool_size[1] <= 0 || a.strides[0] <= 0 || a.strides[1] <= 0)
            fail(MOTE_BK_INVALID_ARG, "pool2d: pool_size and strides must be > 0");
        ac::PadStrideInfo psi(a.strides[1], a.strides[0], a.padding[1], a.padding[3], a.padding[0], a.padding[2],
                              a.ceil_mode ? ac::DimensionRoundingType::CEIL : ac::DimensionRoundingType::FLOOR);
        const bool avg = n.op == MOTE_BK_OP_AVG_POOL2D;
        n.pool = ac::PoolingLayerInfo(avg ? ac::PoolingType::AVG : ac::PoolingType::MAX,
                                      ac::Size2D(a.pool_size[1], a.pool_size[0]), L, psi,
                                      avg ? !a.count_include_pad : true);
        n.fn = Fn::Pool;
        layouts[n.ins[0]] = L;
        layouts[n.outs[0]] = L;
        break;
    }
    case MOTE_BK_OP_GLOBAL_MAX_POOL2D:
    case MOTE_BK_OP_GLOBAL_AVG_POOL2D: {
        need_inputs(n, 1, 1);
        ac::DataLayout L = node_layout(n);
        rank4(n.ins[0], "data");
        rank4(n.outs[0], "output");
        n.pool = ac::PoolingLayerInfo(n.op == MOTE_BK_OP_GLOBAL_AVG_POOL2D ? ac::PoolingType::AVG : ac::PoolingType::MAX,
                                      L);
        n.fn = Fn::Pool;
        layouts[n.ins[0]] = L;
        layouts[n.outs[0]] = L;
        break;
    }
    case MOTE_BK_OP_DENSE: {
        need_inputs(n, 2, 3);
        const size_t r = n.ins[0]->dims.size();
        if (r != 2 && r != 3)
            fail(MOTE_BK_UNSUPPORTED, "dense: only rank-2 or rank-3 data is offloaded to ACL (got rank " +
                                          std::to_string(r) + ")");
        if (n.ins[1]->dims.size() != 2) fail(MOTE_BK_INVALID_ARG, "dense: weight must be [N, K]");
        n.fc = ac::FullyConnectedLayerInfo();
        n.fc.activation_info = make_act(a.activation, a.act_min, a.act_max);
        n.fc.weights_trained_layout = ac::DataLayout::NHWC;
        n.fc.transpose_weights = true;  // weights [N, K] = ACL (K, N)
        n.fn = Fn::Dense;
        break;
    }
    case MOTE_BK_OP_MATMUL:
        need_inputs(n, 2, 2);
        n.fn = Fn::MatMul;
        break;
    case MOTE_BK_OP_ADD:
    case MOTE_BK_OP_MULTIPLY:
        need_inputs(n, 2, 2);
        n.fn = n.op == MOTE_BK_OP_ADD ? Fn::Add : Fn::Mul;
        n.act = make_act(a.activation, a.act_min, a.act_max);
        break;
    case MOTE_BK_OP_RELU:
    case MOTE_BK_OP_RELU6:
    case MOTE_BK_OP_CLIP:
        need_inputs(n, 1, 1);
        n.fn = Fn::Act;
        n.act = make_act(n.op == MOTE_BK_OP_RELU    ? MOTE_BK_ACT_RELU
                         : n.op == MOTE_BK_OP_RELU6 ? MOTE_BK_ACT_RELU6
                                                    : MOTE_BK_ACT_CLIP,
                         a.act_min, a.act_max);
        break;
    case MOTE_BK_OP_SOFTMAX: {
        need_inputs(n, 1, 1);
        const int r = static_cast<int>(n.ins[0]->dims.size());
        if (a.axis < 0 || a.axis >= r) fail(MOTE_BK_INVALID_ARG, "softmax: axis out of range");
        n.acl_axis = r - 1 - a.axis;
        n.fn = Fn::Softmax;
        break;
    }
    case MOTE_BK_OP_RESHAPE:
        need_inputs(n, 1, 1);
        if (n.ins[0]->numel() != n.outs[0]->numel())
            fail(MOTE_BK_INVALID_ARG, "reshape: element counts differ");
        n.fn = Fn::Reshape;
        break;
    case MOTE_BK_OP_CONCATENATE: {
        need_inputs(n, 1, 64);
        const int r = static_cast<int>(n.outs[0]->dims.size());
        if (a.axis < 0 || a.axis >= r) fail(MOTE_BK_INVALID_ARG, "concatenate: axis out of range");
        if (r > 4) fail(MOTE_BK_UNSUPPORTED, "concatenate: ACL supports rank <= 4");
        n.acl_axis = r - 1 - a.axis;
        n.fn = Fn::Concat;
        break;
    }
    default: fail(MOTE_BK_UNSUPPORTED, "op " + std::to_string(n.op) + " is not supported by the acl backend");
    }
    // Per-channel quantization: ACL only has symmetric int8 per-channel weights
    // (QSYMM8_PER_CHANNEL, along the output channel); an int32 bias carries no ACL qinfo.
    auto check_pc = [&](const TRec *r, bool weight_slot) {
        if (r->scales.size() <= 1 || r->dtype == MOTE_BK_DTYPE_INT32) return;
        const bool weights_op = n.fn == Fn::Conv || n.fn == Fn::Depthwise || n.fn == Fn::Dense;
        if (!weights_op || !weight_slot)
            fail(MOTE_BK_UNSUPPORTED, "per-channel quantization is only supported on conv2d/dense weights");
        if (r->dtype != MOTE_BK_DTYPE_INT8)
            fail(MOTE_BK_UNSUPPORTED, "per-channel quantized weights must be int8 (ACL QSYMM8_PER_CHANNEL)");
        if (r->qaxis != 0)
            fail(MOTE_BK_UNSUPPORTED, "per-channel weight scales must be along the output-channel axis 0");
        for (int32_t z : r->zps)
            if (z != 0) fail(MOTE_BK_UNSUPPORTED, "per-channel weights need zero points of 0 (symmetric)");
    };
    for (size_t i = 0; i < n.ins.size(); ++i) check_pc(n.ins[i], i == 1);
    for (const TRec *r : n.outs) check_pc(r, false);
}

// ---------------------------------------------------------------------------------------------
// Process-wide run serialization
// ---------------------------------------------------------------------------------------------

std::mutex g_run_mutex;

bool serialize_runs() {
    static const bool on = [] {
        const char *v = std::getenv("MOTE_ACL_SERIALIZE_RUNS");
        return !(v != nullptr && std::strcmp(v, "0") == 0);
    }();
    return on;
}

struct RunLock {
    std::unique_lock<std::mutex> lk;
    RunLock() {
        if (serialize_runs()) lk = std::unique_lock<std::mutex>(g_run_mutex);
    }
};

// Wraps an entry point body: converts every exception into a status + message.
template <class F> int32_t guarded(char *err, size_t errlen, F &&body) {
    try {
        return body();
    } catch (const ShimError &e) {
        set_err(err, errlen, "%s", e.msg.c_str());
        return e.code;
    } catch (const std::bad_alloc &) {
        set_err(err, errlen, "out of memory");
        return MOTE_BK_RUNTIME_ERROR;
    } catch (const std::exception &e) {
        set_err(err, errlen, "ACL error: %s", e.what());
        return MOTE_BK_RUNTIME_ERROR;
    } catch (...) {
        set_err(err, errlen, "unknown C++ exception");
        return MOTE_BK_RUNTIME_ERROR;
    }
}

void do_finalize(Graph &g) {
    // 1. ACL tensors for every tensor (graph and private).
    std::vector<TRec *> all;
    for (auto &t : g.tensors) all.push_back(t.get());
    for (auto &n : g.nodes)
        for (auto &p : n->owned) all.push_back(p.get());
    for (TRec *r : all) {
        r->t = std::make_unique<ac::Tensor>();
        r->t->allocator()->init(make_info(*r));
        r->producer = -1;
        r->last_use = -1;
    }
    // 2. Producers / last consumers.
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        for (TRec *r : g.nodes[i]->ins) r->last_use = static_cast<int>(i);
        for (TRec *r : g.nodes[i]->outs)
            if (r->producer < 0) r->producer = static_cast<int>(i);
    }
    g.mm_layers = std::make_shared<ac::MemoryManagerOnDemand>(std::make_shared<ac::BlobLifetimeManager>(),
                                                              std::make_shared<ac::PoolManager>());
    g.mm_tensors = std::make_shared<ac::MemoryManagerOnDemand>(std::make_shared<ac::OffsetLifetimeManager>(),
                                                               std::make_shared<ac::PoolManager>());
    g.group = std::make_unique<ac::MemoryGroup>(g.mm_tensors);
    std::vector<bool> allocated(all.size(), false);
    auto index_of = [&](TRec *r) { return static_cast<size_t>(std::find(all.begin(), all.end(), r) - all.begin()); };
    // 3. Configure in node order (validate first: configure does not in release ACL).
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        Node &n = *g.nodes[i];
        std::vector<ac::TensorInfo> in, out;
        for (TRec *r : n.ins) in.push_back(make_info(*r));
        for (TRec *r : n.outs) out.push_back(make_info(*r));
        try {
            validate_node(n, in, out);
        } catch (ShimError &e) {
            fail(MOTE_BK_UNSUPPORTED, "node `" + n.name + "`: " + e.msg);
        }
        for (TRec *r : n.outs)
            if (r->kind == MOTE_BK_TENSOR_INTERMEDIATE && r->producer == static_cast<int>(i))
                g.group->manage(r->t.get());
        configure_node(n, g.mm_layers);
        // Allocate intermediates whose last consumer is this node (once), and intermediates
        // nobody reads (right after their producer).
        std::vector<TRec *> cand(n.ins);
        cand.insert(cand.end(), n.outs.begin(), n.outs.end());
        for (TRec *r : cand) {
            if (r->kind != MOTE_BK_TENSOR_INTERMEDIATE) continue;
            size_t k = index_of(r);
            if (allocated[k]) continue;
            if (r->last_use == static_cast<int>(i) || (r->last_use < 0 && r->producer == static_cast<int>(i))) {
                r->t->allocator()->allocate();
                allocated[k] = true;
            }
        }
    }
    // 4. I/O and constants must stay dense (zero-copy import).
    for (TRec *r : all) {
        if (r->kind == MOTE_BK_TENSOR_INTERMEDIATE) continue;
        if (r->t->info()->has_padding())
            fail(MOTE_BK_UNSUPPORTED, "ACL requested padding on an input/output/constant tensor; zero-copy impossible");
    }
    // 5. Pools: one per graph (a graph never runs concurrently with itself).
    g.mm_layers->populate(g.allocator, 1);
    g.mm_tensors->populate(g.allocator, 1);
    // 6. Constants (graph-owned copies, imported zero-copy).
    for (TRec *r : all) {
        if (r->kind != MOTE_BK_TENSOR_CONSTANT) continue;
        if (r->last_use < 0) continue;
        ac::Status s = r->t->allocator()->import_memory(r->data.get());
        if (!s) fail(MOTE_BK_RUNTIME_ERROR, "import of a constant failed: " + status_text(s));
    }
    // 7. prepare(): weights transformed once. Executes kernels, hence the run lock.
    {
        RunLock lock;
        ac::MemoryGroupResourceScope scope(*g.group);
        for (auto &n : g.nodes)
            for (auto &f : n->fns) f->prepare();
    }
}

}  // namespace

struct mote_bk_graph {
    Graph g;
};

// ---------------------------------------------------------------------------------------------
// Exported C ABI
// ---------------------------------------------------------------------------------------------

#define MOTE_EXPORT extern "C" __attribute__((visibility("default")))

MOTE_EXPORT uint32_t mote_backend_abi_version(void) { return MOTE_BACKEND_ABI_VERSION; }

MOTE_EXPORT const char *mote_backend_name(void) { return "acl"; }

MOTE_EXPORT int32_t mote_backend_available(char *err, size_t errlen) {
#if !defined(__aarch64__)
    set_err(err, errlen, "the acl backend needs an aarch64 CPU");
    return MOTE_BK_UNSUPPORTED;
#else
    return guarded(err, errlen, [&]() -> int32_t {
        ac::TensorInfo info(ac::TensorShape(8U), 1, ac::DataType::F32);
        ac::TensorInfo out(ac::TensorShape(8U), 1, ac::DataType::F32);
        ac::Status s = ac::NEActivationLayer::validate(
            &info, &out, ac::ActivationLayerInfo(ac::ActivationLayerInfo::ActivationFunction::RELU));
        if (!s) fail(MOTE_BK_UNSUPPORTED, "Arm Compute Library is not usable: " + status_text(s));
        return MOTE_BK_OK;
    });
#endif
}

MOTE_EXPORT int32_t mote_backend_graph_new(mote_bk_graph **out, char *err, size_t errlen) {
    return guarded(err, errlen, [&]() -> int32_t {
        if (out == nullptr) fail(MOTE_BK_INVALID_ARG, "graph_new: out is NULL");
        *out = new mote_bk_graph();
        return MOTE_BK_OK;
    });
}

MOTE_EXPORT int32_t mote_backend_graph_add_tensor(mote_bk_graph *graph, const mote_bk_tensor_desc *desc,
                                                  uint32_t *out_id, char *err, size_t errlen) {
    return guarded(err, errlen, [&]() -> int32_t {
        if (graph == nullptr || desc == nullptr || out_id == nullptr)
            fail(MOTE_BK_INVALID_ARG, "add_tensor: NULL argument");
        Graph &g = graph->g;
        if (g.finalized || g.broken) fail(MOTE_BK_BAD_STATE, "add_tensor: graph already finalized");
        mote_bk_tensor_desc d;
        std::memset(&d, 0, sizeof d);
        std::memcpy(&d, desc, std::min<size_t>(desc->struct_size, sizeof d));
        if (desc->struct_size < offsetof(mote_bk_tensor_desc, dims))
            fail(MOTE_BK_INVALID_ARG, "add_tensor: struct_size too small");
        auto r = std::make_unique<TRec>();
        if (d.kind < MOTE_BK_TENSOR_INPUT || d.kind > MOTE_BK_TENSOR_INTERMEDIATE)
            fail(MOTE_BK_INVALID_ARG, "add_tensor: bad kind " + std::to_string(d.kind));
        if (dtype_size(d.dtype) == 0) fail(MOTE_BK_INVALID_ARG, "add_tensor: bad dtype " + std::to_string(d.dtype));
        if (d.ndim < 0 || d.ndim > MOTE_BK_MAX_DIMS) fail(MOTE_BK_INVALID_ARG, "add_tensor: bad ndim");
        r->kind = d.kind;
        r->dtype = d.dtype;
        for (int i = 0; i < d.ndim; ++i) {
            if (d.dims[i] <= 0) fail(MOTE_BK_INVALID_ARG, "add_tensor: dims must be > 0");
            r->dims.push_back(d.dims[i]);
        }
        if (d.num_scales > 0) {
            if (d.scales == nullptr || d.zero_points == nullptr)
                fail(MOTE_BK_INVALID_ARG, "add_tensor: num_scales > 0 but scales/zero_points NULL");
            if (d.num_scales > 1) {
                if (d.quant_axis < 0 || d.quant_axis >= d.ndim || d.dims[d.quant_axis] != (int64_t)d.num_scales)
                    fail(MOTE_BK_INVALID_ARG, "add_tensor: per-channel num_scales must equal dims[quant_axis]");
            }
            r->scales.assign(d.scales, d.scales + d.num_scales);
            r->zps.assign(d.zero_points, d.zero_points + d.num_scales);
            r->qaxis = d.quant_axis;
        }
        r->bytes = r->numel() * dtype_size(d.dtype);
        if (d.kind == MOTE_BK_TENSOR_CONSTANT) {
            if (d.data == nullptr) fail(MOTE_BK_INVALID_ARG, "add_tensor: constant without data");
            if (d.data_bytes != r->bytes)
                fail(MOTE_BK_INVALID_ARG, "add_tensor: data_bytes " + std::to_string(d.data_bytes) +
                                              " != " + std::to_string(r->bytes));
            r->data = alloc_buffer(r->bytes);
            std::memcpy(r->data.get(), d.data, r->bytes);
        }
        if (d.kind == MOTE_BK_TENSOR_INPUT) r->io_index = static_cast<int>(g.inputs.size());
        if (d.kind == MOTE_BK_TENSOR_OUTPUT) r->io_index = static_cast<int>(g.outputs.size());
        TRec *raw = r.get();
        g.tensors.push_back(std::move(r));
        if (raw->kind == MOTE_BK_TENSOR_INPUT) g.inputs.push_back(raw);
        if (raw->kind == MOTE_BK_TENSOR_OUTPUT) g.outputs.push_back(raw);
        *out_id = static_cast<uint32_t>(g.tensors.size() - 1);
        return MOTE_BK_OK;
    });
}

MOTE_EXPORT int32_t mote_backend_graph_add_node(mote_bk_graph *graph, const char *name,
                                                const mote_bk_node_attrs *attrs, const uint32_t *inputs,
                                                uint32_t num_inputs, const uint32_t *outputs, uint32_t num_outputs,
                                                char *err, size_t errlen) {
    return guarded(err, errlen, [&]() -> int32_t {
        if (graph == nullptr || attrs == nullptr || (num_inputs > 0 && inputs == nullptr) ||
            (num_outputs > 0 && outputs == nullptr))
            fail(MOTE_BK_INVALID_ARG, "add_node: NULL argument");
        Graph &g = graph->g;
        if (g.finalized || g.broken) fail(MOTE_BK_BAD_STATE, "add_node: graph already finalized");
        auto n = std::make_unique<Node>();
        n->name = name ? name : "?";
        std::memset(&n->a, 0, sizeof n->a);
        std::memcpy(&n->a, attrs, std::min<size_t>(attrs->struct_size, sizeof n->a));
        if (attrs->struct_size < offsetof(mote_bk_node_attrs, layout))
            fail(MOTE_BK_INVALID_ARG, "add_node: struct_size too small");
        n->op = n->a.op;
        const std::string who = "node `" + n->name + "` (" + op_name(n->op) + "): ";
        try {
            for (uint32_t i = 0; i < num_inputs; ++i) {
                if (inputs[i] >= g.tensors.size()) fail(MOTE_BK_INVALID_ARG, "input id " + std::to_string(inputs[i]) + " out of range");
                TRec *r = g.tensors[inputs[i]].get();
                if (r->kind == MOTE_BK_TENSOR_INTERMEDIATE) {
                    bool produced = false;
                    for (auto &m : g.nodes)
                        for (TRec *o : m->outs) produced |= (o == r);
                    if (!produced) fail(MOTE_BK_INVALID_ARG, "intermediate input " + std::to_string(inputs[i]) + " has no producer yet");
                }
                n->ins.push_back(r);
            }
            for (uint32_t i = 0; i < num_outputs; ++i) {
                if (outputs[i] >= g.tensors.size()) fail(MOTE_BK_INVALID_ARG, "output id " + std::to_string(outputs[i]) + " out of range");
                TRec *r = g.tensors[outputs[i]].get();
                if (r->kind != MOTE_BK_TENSOR_OUTPUT && r->kind != MOTE_BK_TENSOR_INTERMEDIATE)
                    fail(MOTE_BK_INVALID_ARG, "output id " + std::to_string(outputs[i]) + " is not an OUTPUT/INTERMEDIATE tensor");
                for (auto &m : g.nodes)
                    for (TRec *o : m->outs)
                        if (o == r) fail(MOTE_BK_INVALID_ARG, "tensor " + std::to_string(outputs[i]) + " already has a producer");
                for (TRec *in : n->ins)
                    if (in == r) fail(MOTE_BK_INVALID_ARG, "a node may not write its own input");
                n->outs.push_back(r);
            }
            std::map<TRec *, ac::DataLayout> layouts;
            translate(*n, layouts);
            for (auto &kv : layouts) {
                if (kv.first->layout != ac::DataLayout::UNKNOWN && kv.first->layout != kv.second)
                    fail(MOTE_BK_UNSUPPORTED, std::string("tensor already used with layout ") +
                                                  layout_name(kv.first->layout) + ", node wants " +
                                                  layout_name(kv.second));
            }
            const bool matmul = n->fn == Fn::MatMul;
            auto info_of = [&](TRec *r) {
                auto it = layouts.find(r);
                ac::TensorInfo info = make_info(*r, it != layouts.end() ? it->second : ac::DataLayout::UNKNOWN);
                if (matmul) info.set_are_values_constant(false);
                return info;
            };
            std::vector<ac::TensorInfo> in, out;
            for (TRec *r : n->ins) in.push_back(info_of(r));
            for (TRec *r : n->outs) out.push_back(info_of(r));
            validate_node(*n, in, out);
            // Commit (nothing below can fail in a way that leaves the graph half-changed).
            for (auto &kv : layouts) kv.first->layout = kv.second;
            if (matmul)
                for (TRec *r : n->ins) r->nonconst = true;
        } catch (ShimError &e) {
            e.msg = who + e.msg;
            throw;
        }
        g.nodes.push_back(std::move(n));
        return MOTE_BK_OK;
    });
}

MOTE_EXPORT int32_t mote_backend_graph_finalize(mote_bk_graph *graph, char *err, size_t errlen) {
    return guarded(err, errlen, [&]() -> int32_t {
        if (graph == nullptr) fail(MOTE_BK_INVALID_ARG, "finalize: graph is NULL");
        Graph &g = graph->g;
        if (g.finalized || g.broken) fail(MOTE_BK_BAD_STATE, "finalize: graph already finalized");
        if (g.nodes.empty()) fail(MOTE_BK_INVALID_ARG, "finalize: graph has no nodes");
        for (TRec *o : g.outputs) {
            bool produced = false;
            for (auto &n : g.nodes)
                for (TRec *r : n->outs) produced |= (r == o);
            if (!produced) fail(MOTE_BK_INVALID_ARG, "finalize: an OUTPUT tensor is never written");
        }
        g.broken = true;  // until everything succeeded
        do_finalize(g);
        g.broken = false;
        g.finalized = true;
        return MOTE_BK_OK;
    });
}

MOTE_EXPORT int32_t mote_backend_graph_run(mote_bk_graph *graph, const void *const *inputs, uint32_t num_inputs,
                                           void *const *outputs, uint32_t num_outputs, char *err, size_t errlen) {
    return guarded(err, errlen, [&]() -> int32_t {
        if (graph == nullptr) fail(MOTE_BK_INVALID_ARG, "run: graph is NULL");
        Graph &g = graph->g;
        if (!g.finalized) fail(MOTE_BK_BAD_STATE, "run: graph is not finalized");
        if (num_inputs != g.inputs.size() || num_outputs != g.outputs.size())
            fail(MOTE_BK_INVALID_ARG, "run: expected " + std::to_string(g.inputs.size()) + " inputs and " +
                                          std::to_string(g.outputs.size()) + " outputs, got " +
                                          std::to_string(num_inputs) + " and " + std::to_string(num_outputs));
        if ((num_inputs > 0 && inputs == nullptr) || (num_outputs > 0 && outputs == nullptr))
            fail(MOTE_BK_INVALID_ARG, "run: NULL buffer array");
        for (uint32_t i = 0; i < num_inputs; ++i)
            if (inputs[i] == nullptr) fail(MOTE_BK_INVALID_ARG, "run: input " + std::to_string(i) + " is NULL");
        for (uint32_t i = 0; i < num_outputs; ++i)
            if (outputs[i] == nullptr) fail(MOTE_BK_INVALID_ARG, "run: output " + std::to_string(i) + " is NULL");
        RunLock lock;
        for (uint32_t i = 0; i < num_inputs; ++i) {
            ac::Status s = g.inputs[i]->t->allocator()->import_memory(const_cast<void *>(inputs[i]));
            if (!s) fail(MOTE_BK_RUNTIME_ERROR, "run: import of input failed: " + status_text(s));
        }
        for (uint32_t i = 0; i < num_outputs; ++i) {
            ac::Status s = g.outputs[i]->t->allocator()->import_memory(outputs[i]);
            if (!s) fail(MOTE_BK_RUNTIME_ERROR, "run: import of output failed: " + status_text(s));
        }
        {
            ac::MemoryGroupResourceScope scope(*g.group);
            for (auto &n : g.nodes)
                for (auto &f : n->fns) f->run();
        }
        return MOTE_BK_OK;
    });
}

MOTE_EXPORT void mote_backend_graph_free(mote_bk_graph *graph) {
    try {
        delete graph;
    } catch (...) {
    }
}
