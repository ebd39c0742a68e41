package org.mote.tvm4j;

/**
 * The type indices of TVM's FFI, with the values of TVM 0.27 (tvm-ffi's
 * {@code TVMFFITypeIndex}). Mote's Java layer does not pass them to native code; they are
 * here for code that compares {@link TVMObject#typeIndex}.
 */
public class TypeIndex {
    /** Not instantiated in practice; public for source compatibility. */
    public TypeIndex() {}

    /** None. */
    public static final int kTVMFFINone = 0;
    /** A 64-bit integer. */
    public static final int kTVMFFIInt = 1;
    /** A boolean. */
    public static final int kTVMFFIBool = 2;
    /** A 64-bit float. */
    public static final int kTVMFFIFloat = 3;
    /** An opaque pointer. */
    public static final int kTVMFFIOpaquePtr = 4;
    /** A data type. */
    public static final int kTVMFFIDataType = 5;
    /** A device. */
    public static final int kTVMFFIDevice = 6;
    /** A borrowed DLTensor pointer. */
    public static final int kTVMFFIDLTensorPtr = 7;
    /** A borrowed C string. */
    public static final int kTVMFFIRawStr = 8;
    /** A borrowed byte array. */
    public static final int kTVMFFIByteArrayPtr = 9;
    /** An object passed by move. */
    public static final int kTVMFFIObjectRValueRef = 10;
    /** The first static object index. */
    public static final int kTVMFFIStaticObjectBegin = 64;
    /** Any object. */
    public static final int kTVMFFIObject = 64;
    /** A string object. */
    public static final int kTVMFFIStr = 65;
    /** A bytes object. */
    public static final int kTVMFFIBytes = 66;
    /** An error object. */
    public static final int kTVMFFIError = 67;
    /** A function. */
    public static final int kTVMFFIFunction = 68;
    /** A shape. */
    public static final int kTVMFFIShape = 69;
    /** A tensor. */
    public static final int kTVMFFITensor = 70;
    /** A tensor (the name before TVM 0.22). */
    public static final int kTVMFFINDArray = kTVMFFITensor;
    /** An array. */
    public static final int kTVMFFIArray = 71;
    /** A map. */
    public static final int kTVMFFIMap = 72;
    /** A module. */
    public static final int kTVMFFIModule = 73;
}
