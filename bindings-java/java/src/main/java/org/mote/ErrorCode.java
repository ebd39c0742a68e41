package org.mote;

/**
 * Mote's stable error codes, one to one with the Rust runtime's {@code mote::ErrorCode} (same
 * names, same numbers; numbers are never reused). Each code has its own exception class under
 * {@link MoteException}. Immutable.
 */
public enum ErrorCode {
    /** a file could not be read or written ({@link MoteIoException}). */
    IO(1),
    /** the system loader refused the model library ({@link LoadException}). */
    LOAD(2),
    /** the model's embedded data is malformed ({@link FormatException}). */
    FORMAT(3),
    /** the model uses a feature Mote does not implement ({@link UnsupportedException}). */
    UNSUPPORTED(4),
    /** the model calls functions nobody provides (register them with Function.register) ({@link MissingFunctionsException}). */
    MISSING_FUNCTIONS(5),
    /** no function of that name ({@link UnknownFunctionException}). */
    UNKNOWN_FUNCTION(6),
    /** wrong number of arguments ({@link ArgumentCountException}). */
    ARGUMENT_COUNT(7),
    /** an argument has the wrong type, rank, shape or dtype ({@link MismatchException}). */
    MISMATCH(8),
    /** a compiled kernel reported an error (its message is kept) ({@link KernelException}). */
    KERNEL(9),
    /** a registered function (a Java callback too) failed; its message is kept ({@link CallbackException}). */
    CALLBACK(10),
    /** a caller-supplied value is invalid (bad option, misaligned buffer...) ({@link InvalidArgumentException}). */
    INVALID_ARGUMENT(11),
    /** a .npy/.npz file is malformed ({@link NpyException}). */
    NPY(12),
    /** the VM hit a state well-formed bytecode cannot produce ({@link VmException}). */
    VM(13),
    /** memory could not be allocated ({@link MoteOutOfMemoryException}). */
    OUT_OF_MEMORY(14),
    /** an offloaded subgraph description is malformed or mismatched ({@link SubgraphException}). */
    SUBGRAPH(15),
    /** a backend failed to load, prepare or run ({@link BackendException}). */
    BACKEND(16),
    /** a session was re-entered while running ({@link BusyException}). */
    BUSY(17),
    /** a budget of the load or session options would be exceeded ({@link ResourceExhaustedException}). */
    RESOURCE_EXHAUSTED(18),
    /** the call was interrupted ({@link CancelledException}). */
    CANCELLED(19),
    /** a device (OpenCL) failed or is missing ({@link DeviceException}). */
    DEVICE(20);

    private final int value;

    ErrorCode(int value) {
        this.value = value;
    }

    /**
     * The numeric code, as the C ABI and every other binding report it.
     *
     * @return the code's number
     */
    public int value() {
        return value;
    }
}
