/* Prints the layout of every struct and the value of every enum constant in mote.h, for
 * comparison with the committed baseline ffi/abi/layout.txt (scripts/test-ffi.sh). */
#include <stddef.h>
#include <stdio.h>

#include "mote.h"

#define S(T) printf("sizeof %s %zu align %zu\n", #T, sizeof(T), _Alignof(T))
#define F(T, f) printf("  %s.%s offset %zu size %zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))
#define E(c) printf("enum %s %lld\n", #c, (long long)(c))

int main(void) {
    printf("MOTE_ABI_VERSION %d\n", MOTE_ABI_VERSION);
    S(MoteDtype); F(MoteDtype, code); F(MoteDtype, bits); F(MoteDtype, lanes);
    S(MoteTensorInfo); F(MoteTensorInfo, dtype); F(MoteTensorInfo, ndim); F(MoteTensorInfo, shape);
    F(MoteTensorInfo, data); F(MoteTensorInfo, byte_size);
    S(MoteParamInfo); F(MoteParamInfo, name); F(MoteParamInfo, dtype); F(MoteParamInfo, ndim);
    F(MoteParamInfo, shape);
    S(MoteProfileEntry); F(MoteProfileEntry, name); F(MoteProfileEntry, kind);
    F(MoteProfileEntry, calls); F(MoteProfileEntry, total_ns);
    S(MoteArg); F(MoteArg, kind); F(MoteArg, int_value); F(MoteArg, float_value);
    F(MoteArg, pointer); F(MoteArg, string); F(MoteArg, tensor);
    S(MoteCallArg); F(MoteCallArg, tensor); F(MoteCallArg, device_tensor);
#include "abi_enums.inc"
    return 0;
}
