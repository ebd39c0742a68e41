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
// Format-2 ops that need several ACL functions (grouped conv, scale_shift, layer_norm, split...)
// are lowered to a chain of Steps inside one node; their private constants and scratch tensors are
// owned by the node, and the scratch lives in the graph's memory group (backends/acl/README.md).
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
#include <functional>
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
    Concat,
    Steps  // a chain of Step (format-v2 ops and lowerings)
};

// One ACL function of a multi-function lowering (Fn::Steps). Operands are graph tensors or the
// node's private tensors (constants re-shaped for broadcasting, scratch intermediates).
enum class SK { Add, Sub, Mul, Div, Slice, Permute, Shuffle, Lrn, MeanStd, RowMean, Copy, Conv, Concat };

struct Step {
    SK k = SK::Copy;
    std::vector<TRec *> in;
    TRec *out = nullptr;
    ac::Coordinates starts, ends;  // Slice, ACL numbering
    ac::PermutationVector perm;    // Permute, ACL numbering
    unsigned groups = 1;           // Shuffle
    ac::NormalizationLayerInfo norm{ac::NormType::CROSS_MAP};
    float eps = 0.0f;  // MeanStd
    ac::PadStrideInfo psi;          // Conv
    ac::Size2D dil{1, 1};           // Conv
    ac::ActivationLayerInfo act;    // Conv (fused)
    size_t axis = 0;                // Concat, ACL numbering
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
    // Activations applied in place on outs[0] after the main function(s): what the function
    // cannot fuse (elementwise ops, hardsigmoid's two functions).
    std::vector<ac::ActivationLayerInfo> post;
    std::vector<Step> steps;       // Fn::Steps
    std::vector<TRec *> scratch;   // private intermediates of the steps (in `owned`)
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

// The ACL functions computing Mote activation `act` (empty: none). Two entries for hardsigmoid
// (ACL has no single function for min(max(a*x + b, 0), 1)). The v2 activations are float32 only
// (docs/subgraph-format.md): `fp32` says whether the node computes in float32.
std::vector<ac::ActivationLayerInfo> make_acts(int32_t act, const mote_bk_node_attrs &a, bool fp32) {
    using AF = ac::ActivationLayerInfo::ActivationFunction;
    using AI = ac::ActivationLayerInfo;
    if (act >= MOTE_BK_ACT_SIGMOID && act <= MOTE_BK_ACT_LEAKY_RELU && !fp32)
        fail(MOTE_BK_UNSUPPORTED, "activation " + std::to_string(act) + " is float32-only (format version 2)");
    switch (act) {
    case MOTE_BK_ACT_NONE: return {};
    case MOTE_BK_ACT_RELU: return {AI(AF::RELU)};
    case MOTE_BK_ACT_RELU6: return {AI(AF::BOUNDED_RELU, 6.0f)};
    case MOTE_BK_ACT_CLIP: return {AI(AF::LU_BOUNDED_RELU, a.act_max, a.act_min)};
    case MOTE_BK_ACT_SIGMOID: return {AI(AF::LOGISTIC)};
    case MOTE_BK_ACT_TANH: return {AI(AF::TANH, 1.0f, 1.0f)};
    case MOTE_BK_ACT_HARDSWISH: return {AI(AF::HARD_SWISH)};
    case MOTE_BK_ACT_HARDSIGMOID:
        return {AI(AF::LINEAR, a.act_alpha, a.act_beta), AI(AF::LU_BOUNDED_RELU, 1.0f, 0.0f)};
    case MOTE_BK_ACT_SILU: return {AI(AF::SWISH, 1.0f)};
    case MOTE_BK_ACT_GELU: return {AI(AF::GELU)};  // ACL 24.11's GELU is the erf form (tested)
    case MOTE_BK_ACT_GELU_TANH:
        fail(MOTE_BK_UNSUPPORTED, "gelu_tanh: ACL 24.11 only has the exact (erf) GELU; the tanh "
                                  "approximation differs from it by more than the 1e-4 tolerance");
    case MOTE_BK_ACT_LEAKY_RELU: return {AI(AF::LEAKY_RELU, a.act_alpha)};
    default: fail(MOTE_BK_UNSUPPORTED, "unknown activation " + std::to_string(act));
    }
}

// Split `acts` into the function's fused activation (a single function) and `post`.
void set_fused(Node &n, std::vector<ac::ActivationLayerInfo> acts) {
    n.act = ac::ActivationLayerInfo();
    n.post.clear();
    if (acts.size() == 1) n.act = acts[0];
    else n.post = std::move(acts);
}

// ---------------------------------------------------------------------------------------------
// validate / configure per node
// ---------------------------------------------------------------------------------------------

ac::Status validate_step(const Step &st, const std::function<ac::TensorInfo(TRec *)> &info_of) {
    std::vector<ac::TensorInfo> in;
    for (TRec *r : st.in) in.push_back(info_of(r));
    ac::TensorInfo out = info_of(st.out);
    switch (st.k) {
    case SK::Add: return ac::NEArithmeticAddition::validate(&in[0], &in[1], &out, ac::ConvertPolicy::SATURATE);
    case SK::Sub: return ac::NEArithmeticSubtraction::validate(&in[0], &in[1], &out, ac::ConvertPolicy::SATURATE);
    case SK::Mul:
        return ac::NEPixelWiseMultiplication::validate(&in[0], &in[1], &out, 1.0f, ac::ConvertPolicy::SATURATE,
                                                       ac::RoundingPolicy::TO_ZERO);
    case SK::Div: return ac::NEElementwiseDivision::validate(&in[0], &in[1], &out);
    case SK::Slice: return ac::NESlice::validate(&in[0], &out, st.starts, st.ends);
    case SK::Permute: return ac::NEPermute::validate(&in[0], &out, st.perm);
    case SK::Shuffle: return ac::NEChannelShuffleLayer::validate(&in[0], &out, st.groups);
    case SK::Lrn: return ac::NENormalizationLayer::validate(&in[0], &out, st.norm);
    case SK::MeanStd: return ac::NEMeanStdDevNormalizationLayer::validate(&in[0], &out, st.eps);
    case SK::RowMean: return ac::NEReductionOperation::validate(&in[0], &out, 0, ac::ReductionOperation::MEAN_SUM, true);
    case SK::Copy: return ac::NEReshapeLayer::validate(&in[0], &out);
    case SK::Conv:
        return ac::NEConvolutionLayer::validate(&in[0], &in[1], in.size() > 2 ? &in[2] : nullptr, &out, st.psi,
                                                ac::WeightsInfo(), st.dil, st.act, false, 1);
    case SK::Concat: {
        std::vector<const ac::ITensorInfo *> v;
        for (auto &i : in) v.push_back(&i);
        return ac::NEConcatenateLayer::validate(v, &out, st.axis);
    }
    }
    return ac::Status(ac::ErrorCode::RUNTIME_ERROR, "unknown step");
}

// Validate `n` with the given infos (operands in n.ins/n.outs order; `info_of` gives the info of
// any tensor the node's steps touch). Throws UNSUPPORTED.
void validate_node(const Node &n, std::vector<ac::TensorInfo> &in, std::vector<ac::TensorInfo> &out,
                   const std::function<ac::TensorInfo(TRec *)> &info_of) {
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
        break;
    case Fn::Mul:
        s = ac::NEPixelWiseMultiplication::validate(&in[0], &in[1], &out[0], 1.0f, ac::ConvertPolicy::SATURATE,
                                                    ac::RoundingPolicy::TO_ZERO);
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
    case Fn::Steps:
        s = ac::Status();
        for (const Step &st : n.steps) {
            s = validate_step(st, info_of);
            if (!s) break;
        }
        break;
    }
    if (!s) fail(MOTE_BK_UNSUPPORTED, status_text(s));
    for (const ac::ActivationLayerInfo &p : n.post) {
        s = ac::NEActivationLayer::validate(&out[0], nullptr, p);
        if (!s) fail(MOTE_BK_UNSUPPORTED, "activation: " + status_text(s));
    }
}

std::unique_ptr<ac::IFunction> configure_step(const Step &st, const std::shared_ptr<ac::IMemoryManager> &mm) {
    auto T = [&](size_t i) { return st.in[i]->t.get(); };
    ac::Tensor *out = st.out->t.get();
    std::unique_ptr<ac::IFunction> fn;
    switch (st.k) {
    case SK::Add: {
        auto f = std::make_unique<ac::NEArithmeticAddition>();
        f->configure(T(0), T(1), out, ac::ConvertPolicy::SATURATE);
        fn = std::move(f);
        break;
    }
    case SK::Sub: {
        auto f = std::make_unique<ac::NEArithmeticSubtraction>();
        f->configure(T(0), T(1), out, ac::ConvertPolicy::SATURATE);
        fn = std::move(f);
        break;
    }
    case SK::Mul: {
        auto f = std::make_unique<ac::NEPixelWiseMultiplication>();
        f->configure(T(0), T(1), out, 1.0f, ac::ConvertPolicy::SATURATE, ac::RoundingPolicy::TO_ZERO);
        fn = std::move(f);
        break;
    }
    case SK::Div: {
        auto f = std::make_unique<ac::NEElementwiseDivision>();
        f->configure(T(0), T(1), out);
        fn = std::move(f);
        break;
    }
    case SK::Slice: {
        auto f = std::make_unique<ac::NESlice>();
        f->configure(T(0), out, st.starts, st.ends);
        fn = std::move(f);
        break;
    }
    case SK::Permute: {
        auto f = std::make_unique<ac::NEPermute>();
        f->configure(T(0), out, st.perm);
        fn = std::move(f);
        break;
    }
    case SK::Shuffle: {
        auto f = std::make_unique<ac::NEChannelShuffleLayer>();
        f->configure(T(0), out, st.groups);
        fn = std::move(f);
        break;
    }
    case SK::Lrn: {
        auto f = std::make_unique<ac::NENormalizationLayer>();
        f->configure(T(0), out, st.norm);
        fn = std::move(f);
        break;
    }
    case SK::MeanStd: {
        auto f = std::make_unique<ac::NEMeanStdDevNormalizationLayer>();
        f->configure(T(0), out, st.eps);
        fn = std::move(f);
        break;
    }
    case SK::Conv: {
        auto f = std::make_unique<ac::NEConvolutionLayer>(mm);
        f->configure(T(0), T(1), st.in.size() > 2 ? T(2) : nullptr, out, st.psi, ac::WeightsInfo(), st.dil, st.act,
                     false, 1);
        fn = std::move(f);
        break;
    }
    case SK::Concat: {
        std::vector<const ac::ITensor *> v;
        for (size_t i = 0; i < st.in.size(); ++i) v.push_back(T(i));
        auto f = std::make_unique<ac::NEConcatenateLayer>();
        f->configure(v, out, st.axis);
        fn = std::move(f);
        break;
    }
    case SK::RowMean: {
        auto f = std::make_unique<ac::NEReductionOperation>(mm);
        f->configure(T(0), out, 0, ac::ReductionOperation::MEAN_SUM, true);
        fn = std::move(f);
        break;
    }
    case SK::Copy: {
        auto f = std::make_unique<ac::NEReshapeLayer>();
        f->configure(T(0), out);
        fn = std::move(f);
        break;
    }
    }
    return fn;
}

void configure_node(Node &n, const std::shared_ptr<ac::IMemoryManager> &mm, ac::MemoryGroup &group) {
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
    case Fn::Steps:
        // Scratch intermediates live in the graph's memory group: manage() before their producer
        // is configured, allocate() once after their last consumer (all inside this node).
        for (TRec *r : n.scratch) group.manage(r->t.get());
        for (const Step &st : n.steps) n.fns.push_back(configure_step(st, mm));
        for (TRec *r : n.scratch) r->t->allocator()->allocate();
        break;
    }
    for (const ac::ActivationLayerInfo &p : n.post) {
        auto f = std::make_unique<ac::NEActivationLayer>();
        f->configure(out, nullptr, p);  // in place on the output
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
    case MOTE_BK_OP_ACTIVATION: return "activation";
    case MOTE_BK_OP_SUBTRACT: return "subtract";
    case MOTE_BK_OP_DIVIDE: return "divide";
    case MOTE_BK_OP_SCALE_SHIFT: return "scale_shift";
    case MOTE_BK_OP_LRN: return "lrn";
    case MOTE_BK_OP_TRANSPOSE: return "transpose";
    case MOTE_BK_OP_CHANNEL_SHUFFLE: return "channel_shuffle";
    case MOTE_BK_OP_SPLIT: return "split";
    case MOTE_BK_OP_LAYER_NORM: return "layer_norm";
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
// A private tensor of node `n` (owned by it): a constant sharing `data`, or a scratch
// intermediate when `data` is null.
TRec *private_tensor(Node &n, const TRec &like, std::vector<int64_t> dims, Buffer data) {
    auto p = std::make_unique<TRec>();
    p->dtype = like.dtype;
    p->dims = std::move(dims);
    p->bytes = p->numel() * dtype_size(p->dtype);
    if (data) {
        p->kind = MOTE_BK_TENSOR_CONSTANT;
        p->data = std::move(data);
    } else {
        p->kind = MOTE_BK_TENSOR_INTERMEDIATE;
    }
    TRec *raw = p.get();
    n.owned.push_back(std::move(p));
    if (raw->kind == MOTE_BK_TENSOR_INTERMEDIATE) n.scratch.push_back(raw);
    return raw;
}

Step step(SK k, std::vector<TRec *> in, TRec *out) {
    Step st;
    st.k = k;
    st.in = std::move(in);
    st.out = out;
    return st;
}

bool is_f32(const Node &n) {
    for (const TRec *r : n.ins)
        if (r->dtype != MOTE_BK_DTYPE_FLOAT32 && r->dtype != MOTE_BK_DTYPE_INT32) return false;
    for (const TRec *r : n.outs)
        if (r->dtype != MOTE_BK_DTYPE_FLOAT32) return false;
    return true;
}

void translate(Node &n, std::map<TRec *, ac::DataLayout> &layouts) {
    const mote_bk_node_attrs &a = n.a;
    if (n.op == MOTE_BK_OP_SPLIT ? n.outs.empty() : n.outs.size() != 1)
        fail(MOTE_BK_INVALID_ARG, std::string(op_name(n.op)) + ": wrong number of outputs");
    const bool f32 = is_f32(n);
    auto need_f32 = [&]() {
        if (!f32) fail(MOTE_BK_UNSUPPORTED, std::string(op_name(n.op)) + ": float32 only");
    };
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
        set_fused(n, make_acts(a.activation, a, f32));
        layouts[x] = L;
        layouts[n.outs[0]] = L;
        if (groups > 1 && groups != cin) {
            // Grouped conv: ACL's NEON convolution refuses num_groups != 1. Two lowerings:
            // - "split": per group, NESlice of the input channels, one NEConvolutionLayer with
            //   that group's weight/bias rows, then NEConcatenateLayer of the group outputs
            //   (slices and group outputs are scratch in the graph's memory group);
            // - "blockdiag": ONE convolution whose weights are block-diagonal (zeros outside each
            //   group's block): one function, but groups x the MACs and weight bytes.
            // Default "split": it was faster in every case measured (groups 2..32, 1x1 and 3x3;
            // backends/acl/README.md); MOTE_ACL_GROUPED_CONV=blockdiag selects the other.
            need_f32();
            if (cin % groups != 0 || O % groups != 0) fail(MOTE_BK_INVALID_ARG, "conv2d: channels not divisible by groups");
            if (w->kind != MOTE_BK_TENSOR_CONSTANT)
                fail(MOTE_BK_UNSUPPORTED, "grouped conv2d: weights must be a constant (they are expanded)");
            const bool nhwc = L == ac::DataLayout::NHWC;
            const int64_t Ig = cin / groups, Og = O / groups;
            if ((nhwc ? w->dims[3] : w->dims[1]) != Ig)
                fail(MOTE_BK_INVALID_ARG, "grouped conv2d: weight input-channel dim must be C_in/groups");
            const int64_t KH = nhwc ? w->dims[1] : w->dims[2];
            const int64_t KW = nhwc ? w->dims[2] : w->dims[3];
            const char *strat = std::getenv("MOTE_ACL_GROUPED_CONV");
            bool blockdiag = false;
            if (strat != nullptr && std::strcmp(strat, "split") == 0) blockdiag = false;
            if (strat != nullptr && std::strcmp(strat, "blockdiag") == 0) blockdiag = true;
            if (!blockdiag) {
                TRec *b = n.ins.size() > 2 ? n.ins[2] : nullptr;
                if (b != nullptr && (b->kind != MOTE_BK_TENSOR_CONSTANT || b->numel() != static_cast<size_t>(O)))
                    fail(MOTE_BK_UNSUPPORTED, "grouped conv2d: the bias must be a constant [O] (it is sliced per group)");
                TRec *y = n.outs[0];
                const int64_t N = x->dims[0], H = nhwc ? x->dims[1] : x->dims[2], W = nhwc ? x->dims[2] : x->dims[3];
                const int64_t OH = nhwc ? y->dims[1] : y->dims[2], OW = nhwc ? y->dims[2] : y->dims[3];
                const int caxis = nhwc ? 0 : 2;  // channel axis, ACL numbering
                const size_t wg_elems = static_cast<size_t>(Og * KH * KW * Ig);
                Step cat = step(SK::Concat, {}, y);
                cat.axis = caxis;
                for (int gi = 0; gi < groups; ++gi) {
                    auto dims4 = [&](int64_t h, int64_t wd, int64_t c) {
                        return nhwc ? std::vector<int64_t>{N, h, wd, c} : std::vector<int64_t>{N, c, h, wd};
                    };
                    TRec *xg = private_tensor(n, *x, dims4(H, W, Ig), nullptr);
                    xg->layout = L;
                    Step sl = step(SK::Slice, {x}, xg);
                    const int64_t full[4] = {x->dims[3], x->dims[2], x->dims[1], x->dims[0]};  // ACL order
                    for (int j = 0; j < 4; ++j) {
                        sl.starts.set(j, j == caxis ? static_cast<int>(gi * Ig) : 0);
                        sl.ends.set(j, j == caxis ? static_cast<int>((gi + 1) * Ig) : static_cast<int>(full[j]));
                    }
                    n.steps.push_back(sl);
                    // Weights OHWI / OIHW: O is outermost, so group gi's rows are contiguous.
                    Buffer wb = alloc_buffer(wg_elems * 4);
                    std::memcpy(wb.get(), w->data.get() + gi * wg_elems * 4, wg_elems * 4);
                    TRec *wg = private_tensor(n, *w, nhwc ? std::vector<int64_t>{Og, KH, KW, Ig} : std::vector<int64_t>{Og, Ig, KH, KW}, wb);
                    wg->layout = L;
                    Step cv = step(SK::Conv, {xg, wg}, nullptr);
                    if (b != nullptr) {
                        Buffer bb = alloc_buffer(static_cast<size_t>(Og) * 4);
                        std::memcpy(bb.get(), b->data.get() + gi * Og * 4, static_cast<size_t>(Og) * 4);
                        cv.in.push_back(private_tensor(n, *b, {Og}, bb));
                    }
                    TRec *yg = private_tensor(n, *y, dims4(OH, OW, Og), nullptr);
                    yg->layout = L;
                    cv.out = yg;
                    cv.psi = n.psi;
                    cv.dil = n.dil;
                    cv.act = n.act;  // elementwise: fused per group; two-function ones stay in post
                    n.steps.push_back(cv);
                    cat.in.push_back(yg);
                }
                n.steps.push_back(cat);
                n.fn = Fn::Steps;
                break;
            }
            if (groups > 8)
                fail(MOTE_BK_UNSUPPORTED, "grouped conv2d with groups=" + std::to_string(groups) +
                                              " > 8 and MOTE_ACL_GROUPED_CONV=blockdiag: that lowering would cost groups x the MACs");
            std::vector<int64_t> dims = nhwc ? std::vector<int64_t>{O, KH, KW, cin} : std::vector<int64_t>{O, cin, KH, KW};
            Buffer buf = alloc_buffer(static_cast<size_t>(O * KH * KW * cin) * 4);
            const float *src = reinterpret_cast<const float *>(w->data.get());
            float *dst = reinterpret_cast<float *>(buf.get());
            for (int64_t o = 0; o < O; ++o) {
                const int64_t c0 = (o / Og) * Ig;
                for (int64_t i = 0; i < Ig; ++i)
                    for (int64_t kh = 0; kh < KH; ++kh)
                        for (int64_t kw = 0; kw < KW; ++kw) {
                            const float v = nhwc ? src[((o * KH + kh) * KW + kw) * Ig + i] : src[((o * Ig + i) * KH + kh) * KW + kw];
                            if (nhwc) dst[((o * KH + kh) * KW + kw) * cin + c0 + i] = v;
                            else dst[((o * cin + c0 + i) * KH + kh) * KW + kw] = v;
                        }
            }
            TRec *p = private_tensor(n, *w, dims, buf);
            p->layout = L;
            n.ins[1] = p;
            n.fn = Fn::Conv;
        } else if (groups == 1) {
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
        {
            std::vector<ac::ActivationLayerInfo> acts = make_acts(a.activation, a, f32);
            if (acts.size() == 1) n.fc.activation_info = acts[0];
            else n.post = acts;
        }
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
        n.post = make_acts(a.activation, a, f32);  // ACL elementwise functions fuse nothing
        break;
    case MOTE_BK_OP_RELU:
    case MOTE_BK_OP_RELU6:
    case MOTE_BK_OP_CLIP:
        need_inputs(n, 1, 1);
        n.fn = Fn::Act;
        n.act = make_acts(n.op == MOTE_BK_OP_RELU    ? MOTE_BK_ACT_RELU
                          : n.op == MOTE_BK_OP_RELU6 ? MOTE_BK_ACT_RELU6
                                                     : MOTE_BK_ACT_CLIP,
                          a, f32)[0];
        break;
    case MOTE_BK_OP_ACTIVATION: {
        need_inputs(n, 1, 1);
        need_f32();
        std::vector<ac::ActivationLayerInfo> acts = make_acts(a.activation, a, f32);
        if (acts.empty()) {
            n.fn = Fn::Steps;  // "none": a copy
            n.steps.push_back(step(SK::Copy, {n.ins[0]}, n.outs[0]));
        } else {
            n.fn = Fn::Act;
            n.act = acts[0];
            n.post.assign(acts.begin() + 1, acts.end());
        }
        break;
    }
    case MOTE_BK_OP_SUBTRACT:
    case MOTE_BK_OP_DIVIDE:
        need_inputs(n, 2, 2);
        need_f32();
        n.fn = Fn::Steps;
        n.steps.push_back(step(n.op == MOTE_BK_OP_SUBTRACT ? SK::Sub : SK::Div, {n.ins[0], n.ins[1]}, n.outs[0]));
        n.post = make_acts(a.activation, a, f32);
        break;
    case MOTE_BK_OP_SCALE_SHIFT: {
        // y = x * scale[c] + shift[c]: a multiply and an add with scale/shift viewed as
        // [1,..,C,..,1] (ACL broadcasting), through a scratch tensor. Exact per element, any axis.
        need_inputs(n, 3, 3);
        need_f32();
        TRec *x = n.ins[0], *sc = n.ins[1], *sh = n.ins[2];
        const int r = static_cast<int>(x->dims.size());
        if (a.axis < 0 || a.axis >= r) fail(MOTE_BK_INVALID_ARG, "scale_shift: axis out of range");
        const int64_t C = x->dims[a.axis];
        if (sc->numel() != static_cast<size_t>(C) || sh->numel() != static_cast<size_t>(C))
            fail(MOTE_BK_INVALID_ARG, "scale_shift: scale/shift must have C = data.shape[axis] elements");
        if (sc->kind != MOTE_BK_TENSOR_CONSTANT || sh->kind != MOTE_BK_TENSOR_CONSTANT)
            fail(MOTE_BK_UNSUPPORTED, "scale_shift: scale and shift must be constants (they are re-shaped for broadcasting)");
        std::vector<int64_t> bd(static_cast<size_t>(r), 1);
        bd[a.axis] = C;
        TRec *scv = private_tensor(n, *sc, bd, sc->data);
        TRec *shv = private_tensor(n, *sh, bd, sh->data);
        TRec *tmp = private_tensor(n, *x, x->dims, nullptr);
        n.fn = Fn::Steps;
        n.steps.push_back(step(SK::Mul, {x, scv}, tmp));
        n.steps.push_back(step(SK::Add, {tmp, shv}, n.outs[0]));
        n.post = make_acts(a.activation, a, f32);
        break;
    }
    case MOTE_BK_OP_LRN: {
        need_inputs(n, 1, 1);
        need_f32();
        ac::DataLayout L = node_layout(n);
        rank4(n.ins[0], "data");
        if (a.lrn_size < 1) fail(MOTE_BK_INVALID_ARG, "lrn: size must be >= 1");
        // ACL sums over [c - size/2, c + size/2]: the ONNX window only for odd sizes.
        if (a.lrn_size % 2 == 0)
            fail(MOTE_BK_UNSUPPORTED, "lrn: even size " + std::to_string(a.lrn_size) +
                                          ": ACL's window is symmetric (size+1 channels), ONNX's is not");
        Step st = step(SK::Lrn, {n.ins[0]}, n.outs[0]);
        // is_scaled: ACL divides alpha by size, as the format does.
        st.norm = ac::NormalizationLayerInfo(ac::NormType::CROSS_MAP, static_cast<uint32_t>(a.lrn_size), a.lrn_alpha,
                                             a.lrn_beta, a.lrn_bias, true);
        n.fn = Fn::Steps;
        n.steps.push_back(st);
        layouts[n.ins[0]] = L;
        layouts[n.outs[0]] = L;
        break;
    }
    case MOTE_BK_OP_TRANSPOSE: {
        need_inputs(n, 1, 1);
        const int r = static_cast<int>(n.ins[0]->dims.size());
        if (a.num_axes != r) fail(MOTE_BK_INVALID_ARG, "transpose: num_axes must equal the rank");
        std::vector<bool> seen(static_cast<size_t>(r), false);
        bool identity = true;
        for (int i = 0; i < r; ++i) {
            if (a.axes[i] < 0 || a.axes[i] >= r || seen[a.axes[i]]) fail(MOTE_BK_INVALID_ARG, "transpose: axes is not a permutation");
            seen[a.axes[i]] = true;
            identity &= a.axes[i] == i;
        }
        n.fn = Fn::Steps;
        if (identity) {
            n.steps.push_back(step(SK::Copy, {n.ins[0]}, n.outs[0]));
            break;
        }
        if (r > 4) fail(MOTE_BK_UNSUPPORTED, "transpose: NEPermute supports rank <= 4 (got " + std::to_string(r) + ")");
        Step st = step(SK::Permute, {n.ins[0]}, n.outs[0]);
        // ACL numbers dims innermost first: acl[j] = r-1-p[r-1-j].
        for (int j = 0; j < r; ++j) st.perm.set(j, static_cast<uint32_t>(r - 1 - a.axes[r - 1 - j]));
        n.steps.push_back(st);
        break;
    }
    case MOTE_BK_OP_CHANNEL_SHUFFLE: {
        need_inputs(n, 1, 1);
        ac::DataLayout L = node_layout(n);
        rank4(n.ins[0], "data");
        if (a.groups < 1) fail(MOTE_BK_INVALID_ARG, "channel_shuffle: groups must be >= 1");
        Step st = step(SK::Shuffle, {n.ins[0]}, n.outs[0]);
        st.groups = static_cast<unsigned>(a.groups);
        n.fn = Fn::Steps;
        n.steps.push_back(st);
        layouts[n.ins[0]] = L;
        layouts[n.outs[0]] = L;
        break;
    }
    case MOTE_BK_OP_SPLIT: {
        need_inputs(n, 1, 1);
        TRec *x = n.ins[0];
        const int r = static_cast<int>(x->dims.size());
        if (a.axis < 0 || a.axis >= r) fail(MOTE_BK_INVALID_ARG, "split: axis out of range");
        if (r > 4) fail(MOTE_BK_UNSUPPORTED, "split: NESlice supports rank <= 4");
        const int acl_axis = r - 1 - a.axis;
        int64_t off = 0;
        n.fn = Fn::Steps;
        for (TRec *o : n.outs) {
            if (static_cast<int>(o->dims.size()) != r) fail(MOTE_BK_INVALID_ARG, "split: output rank differs");
            Step st = step(SK::Slice, {x}, o);
            for (int j = 0; j < r; ++j) {
                const int64_t full = x->dims[r - 1 - j];
                st.starts.set(j, j == acl_axis ? static_cast<int>(off) : 0);
                st.ends.set(j, j == acl_axis ? static_cast<int>(off + o->dims[a.axis]) : static_cast<int>(full));
            }
            off += o->dims[a.axis];
            n.steps.push_back(st);
        }
        if (off != x->dims[a.axis]) fail(MOTE_BK_INVALID_ARG, "split: output extents do not sum to the input's");
        break;
    }
    case MOTE_BK_OP_LAYER_NORM: {
        // NEMeanStdDevNormalizationLayer normalizes each row of a 2-D tensor; then * gamma + beta
        // (broadcast along the rows). Rank != 2 goes through 2-D scratch copies [rows, D].
        // ACL computes the variance as E[x^2] - E[x]^2 in float32, which cancels badly when the
        // mean is large against the spread (6e-4 off for data in [20, 21]): the rows are centred
        // first (row mean by NEReductionOperation, then a broadcast subtract).
        need_inputs(n, 3, 3);
        need_f32();
        TRec *x = n.ins[0], *gm = n.ins[1], *bt = n.ins[2];
        const int r = static_cast<int>(x->dims.size());
        if (r < 1 || a.axis != r - 1) fail(MOTE_BK_UNSUPPORTED, "layer_norm: only the last axis is supported");
        const int64_t D = x->dims[r - 1];
        if (gm->numel() != static_cast<size_t>(D) || bt->numel() != static_cast<size_t>(D))
            fail(MOTE_BK_INVALID_ARG, "layer_norm: gamma/beta must have D elements");
        const int64_t rows = static_cast<int64_t>(x->numel()) / D;
        n.fn = Fn::Steps;
        TRec *gv = gm->dims.size() == 1 ? gm : nullptr, *bv = bt->dims.size() == 1 ? bt : nullptr;
        if (!gv || !bv) {
            if (gm->kind != MOTE_BK_TENSOR_CONSTANT || bt->kind != MOTE_BK_TENSOR_CONSTANT)
                fail(MOTE_BK_UNSUPPORTED, "layer_norm: gamma/beta of rank != 1 must be constants");
            gv = private_tensor(n, *gm, {D}, gm->data);
            bv = private_tensor(n, *bt, {D}, bt->data);
        }
        TRec *x2 = x, *y2 = n.outs[0];
        if (r != 2) {
            x2 = private_tensor(n, *x, {rows, D}, nullptr);
            y2 = private_tensor(n, *x, {rows, D}, nullptr);
            n.steps.push_back(step(SK::Copy, {x}, x2));
        }
        TRec *mean = private_tensor(n, *x, {rows, 1}, nullptr);
        TRec *centred = private_tensor(n, *x, {rows, D}, nullptr);
        TRec *norm = private_tensor(n, *x, {rows, D}, nullptr);
        TRec *scaled = private_tensor(n, *x, {rows, D}, nullptr);
        n.steps.push_back(step(SK::RowMean, {x2}, mean));
        n.steps.push_back(step(SK::Sub, {x2, mean}, centred));
        Step ms = step(SK::MeanStd, {centred}, norm);
        ms.eps = a.epsilon;
        n.steps.push_back(ms);
        n.steps.push_back(step(SK::Mul, {norm, gv}, scaled));
        n.steps.push_back(step(SK::Add, {scaled, bv}, y2));
        if (r != 2) n.steps.push_back(step(SK::Copy, {y2}, n.outs[0]));
        break;
    }
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
        for (const Step &st : g.nodes[i]->steps)
            for (TRec *r : st.in) r->last_use = static_cast<int>(i);
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
            validate_node(n, in, out, [](TRec *r) { return make_info(*r); });
        } catch (ShimError &e) {
            fail(MOTE_BK_UNSUPPORTED, "node `" + n.name + "`: " + e.msg);
        }
        for (TRec *r : n.outs)
            if (r->kind == MOTE_BK_TENSOR_INTERMEDIATE && r->producer == static_cast<int>(i))
                g.group->manage(r->t.get());
        configure_node(n, g.mm_layers, *g.group);
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
            try {
                validate_node(*n, in, out, info_of);
            } catch (ShimError &) {
                // A function that refuses to fuse the activation: run it separately, in place.
                if (!n->act.enabled() || (n->fn != Fn::Conv && n->fn != Fn::Depthwise)) throw;
                n->post.insert(n->post.begin(), n->act);
                n->act = ac::ActivationLayerInfo();
                validate_node(*n, in, out, info_of);
            }
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
