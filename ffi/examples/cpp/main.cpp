// Load a model, fill every input of a function with a ramp, run it, print the outputs.
//
//   run_model MODEL.so [FUNCTION]
//
// A small RAII layer over the C ABI: each handle type gets a unique_ptr with its _free, and
// every MoteError* becomes a C++ exception. It also registers a function models can call by
// name ("mote.zoo.scale_shift", which the zoo's `packed` model calls), implemented in C++:
// exceptions must never leave a callback into Mote, so it catches them all and returns a
// MoteError instead.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "mote.h"

namespace {

struct Error : std::runtime_error {
    uint32_t code;
    Error(uint32_t c, const std::string &m) : std::runtime_error(m), code(c) {}
};

void check(MoteError *e) {
    if (!e) return;
    Error err(mote_error_code(e), mote_error_message(e));
    mote_error_free(e);
    throw err;
}

template <typename T, void (*Free)(T *)>
struct Deleter {
    void operator()(T *p) const { Free(p); }
};
using Model = std::unique_ptr<MoteModel, Deleter<MoteModel, mote_model_free>>;
using Session = std::unique_ptr<MoteSession, Deleter<MoteSession, mote_session_free>>;
using Tensor = std::unique_ptr<MoteTensor, Deleter<MoteTensor, mote_tensor_free>>;
using TensorList = std::unique_ptr<MoteTensorList, Deleter<MoteTensorList, mote_tensor_list_free>>;

Tensor ramp(const MoteParamInfo &p) {
    if (p.ndim < 0) throw std::runtime_error(std::string("unknown shape for ") + p.name);
    std::vector<int64_t> shape(p.shape, p.shape + p.ndim);
    for (auto &d : shape) d = d < 0 ? 1 : d;  // symbolic dimensions: pick 1
    MoteTensor *t = nullptr;
    check(mote_tensor_new(p.dtype, shape.data(), shape.size(), &t));
    Tensor tensor(t);
    MoteTensorInfo info;
    check(mote_tensor_info(t, &info));
    if (p.dtype.code == MOTE_DTYPE_CODE_FLOAT && p.dtype.bits == 32) {
        auto *f = static_cast<float *>(info.data);
        for (size_t i = 0; i < info.byte_size / 4; i++) f[i] = static_cast<float>(i % 7) / 7.0f;
    }
    return tensor;
}

// dst[i] = 2 * src[i] + 1 for the arguments (src, dst, n) the `packed` model's kernel passes.
// Everything that can throw runs inside the try block; nothing propagates into Mote.
MoteError *scale_shift(void *, const MoteArg *args, size_t num_args, MoteTensor **) {
    try {
        if (num_args != 3 || args[0].kind != MOTE_ARG_KIND_POINTER ||
            args[1].kind != MOTE_ARG_KIND_POINTER || args[2].kind != MOTE_ARG_KIND_INT ||
            args[2].int_value < 0)
            throw std::invalid_argument("scale_shift takes (src pointer, dst pointer, count)");
        const auto *src = static_cast<const float *>(args[0].pointer);
        auto *dst = static_cast<float *>(args[1].pointer);
        std::vector<float> staged(src, src + args[2].int_value);  // may throw std::bad_alloc
        for (size_t i = 0; i < staged.size(); i++) dst[i] = 2.0f * staged[i] + 1.0f;
        return nullptr;
    } catch (const std::exception &e) {
        return mote_error_new(MOTE_ERROR_CODE_CALLBACK, e.what());
    } catch (...) {
        return mote_error_new(MOTE_ERROR_CODE_CALLBACK, "unknown C++ exception");
    }
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s MODEL.so [FUNCTION]\n", argv[0]);
        return 2;
    }
    const char *function = argc > 2 ? argv[2] : "main";
    try {
        check(mote_function_register("mote.zoo.scale_shift", scale_shift, nullptr, nullptr));
        MoteModel *m = nullptr;
        check(mote_model_load(argv[1], &m));
        Model model(m);
        MoteSession *s = nullptr;
        check(mote_session_new(m, nullptr, &s));
        Session session(s);

        size_t count = 0;
        check(mote_model_param_count(m, function, &count));
        std::vector<Tensor> inputs;
        std::vector<const MoteTensor *> args;
        for (size_t i = 0; i < count; i++) {
            MoteParamInfo p;
            check(mote_model_param_info(m, function, i, &p));
            inputs.push_back(ramp(p));
            args.push_back(inputs.back().get());
        }
        MoteTensorList *l = nullptr;
        check(mote_session_run(s, function, args.data(), args.size(), &l));
        TensorList outputs(l);
        size_t n = 0;
        check(mote_tensor_list_len(l, &n));
        for (size_t i = 0; i < n; i++) {
            MoteTensor *t = nullptr;
            check(mote_tensor_list_get(l, i, &t));
            Tensor out(t);
            MoteTensorInfo info;
            check(mote_tensor_info(t, &info));
            std::printf("out%zu: shape [", i);
            for (size_t d = 0; d < info.ndim; d++) std::printf(d ? ", %lld" : "%lld", (long long)info.shape[d]);
            std::printf("], %zu bytes", info.byte_size);
            if (info.dtype.code == MOTE_DTYPE_CODE_FLOAT && info.dtype.bits == 32 && info.byte_size >= 4)
                std::printf(", first %g", static_cast<double>(static_cast<float *>(info.data)[0]));
            std::printf("\n");
        }
        return 0;
    } catch (const Error &e) {
        std::fprintf(stderr, "mote error %u: %s\n", e.code, e.what());
        return 1;
    }
}
