package org.mote.tvm4j;

/**
 * An element type: a type code ({@link #INT}, {@link #UINT}, {@link #FLOAT},
 * {@link #HANDLE}), a bit width and a lane count, made from a name such as {@code "float32"}.
 */
public class TVMType {
    /** Signed integers. */
    public static final int INT = 0;
    /** Unsigned integers. */
    public static final int UINT = 1;
    /** Floats. */
    public static final int FLOAT = 2;
    /** Opaque handles. */
    public static final int HANDLE = 4;

    /** {@link #INT}, {@link #UINT}, {@link #FLOAT} or {@link #HANDLE}. */
    public final int typeCode;
    /** Bits per lane. */
    public final int bits;
    /** Bytes per lane ({@code bits / 8}). */
    public final int numOfBytes;
    /** Lanes per element (1 for scalars). */
    public final int lanes;

    /**
     * The type of a name: {@code "int8"}...{@code "int64"}, {@code "uint8"}...,
     * {@code "float16"}, {@code "float32"}, {@code "float64"}, {@code "handle"}; a name without
     * a width ({@code "float"}) has 32 bits.
     *
     * @param typeStr the name
     * @param lanes lanes per element
     * @throws IllegalArgumentException for a name of no such type, or a width that is not a
     *     power of two of at least 8
     */
    public TVMType(String typeStr, int lanes) {
        this.lanes = lanes;
        int code;
        String width;
        if (typeStr.startsWith("uint")) {
            code = UINT;
            width = typeStr.substring(4);
        } else if (typeStr.startsWith("int")) {
            code = INT;
            width = typeStr.substring(3);
        } else if (typeStr.startsWith("float")) {
            code = FLOAT;
            width = typeStr.substring(5);
        } else if (typeStr.startsWith("handle")) {
            code = HANDLE;
            width = "64";
        } else {
            throw new IllegalArgumentException("unknown element type `" + typeStr + "`");
        }
        int b;
        try {
            b = width.isEmpty() ? 32 : Integer.parseInt(width);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("unknown element type `" + typeStr + "`", e);
        }
        if (b < 8 || (b & (b - 1)) != 0) {
            throw new IllegalArgumentException("unknown element type `" + typeStr + "` (" + b + " bits)");
        }
        this.typeCode = code;
        this.bits = b;
        this.numOfBytes = b / 8;
    }

    /**
     * The one-lane type of a name ({@code new TVMType("float32")}).
     *
     * @param typeStr the name
     * @throws IllegalArgumentException for a name of no such type
     */
    public TVMType(String typeStr) {
        this(typeStr, 1);
    }

    /** The dtype name Mote uses ({@code "float32"}, {@code "float32x4"}). */
    String moteName() {
        String base;
        switch (typeCode) {
            case INT: base = "int"; break;
            case UINT: base = "uint"; break;
            case FLOAT: base = "float"; break;
            default: base = "handle"; break;
        }
        return base + bits + (lanes != 1 ? "x" + lanes : "");
    }

    /** The type of one of Mote's dtype names; "bool" is an 8-bit unsigned integer here. */
    static TVMType fromMote(String dtype) {
        if (dtype.equals("bool")) {
            return new TVMType("uint8");
        }
        int x = dtype.indexOf('x');
        if (x > 0) {
            return new TVMType(dtype.substring(0, x), Integer.parseInt(dtype.substring(x + 1)));
        }
        return new TVMType(dtype);
    }

    @Override
    public int hashCode() {
        return (typeCode << 16) | (bits << 8) | lanes;
    }

    @Override
    public boolean equals(Object other) {
        if (!(other instanceof TVMType)) {
            return false;
        }
        TVMType o = (TVMType) other;
        return typeCode == o.typeCode && bits == o.bits && lanes == o.lanes;
    }

    /**
     * The name: {@code "float32"}, with {@code "x" + lanes} when there are several lanes.
     *
     * @return the name
     */
    @Override
    public String toString() {
        return moteName();
    }
}
