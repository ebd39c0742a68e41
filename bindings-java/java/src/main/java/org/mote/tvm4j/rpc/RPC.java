package org.mote.tvm4j.rpc;

/** The constants of TVM's RPC protocol, as tvm4j names them. */
public class RPC {
    /** For source compatibility; the class holds constants only. */
    public RPC() {}

    /** The tracker protocol's magic number. */
    public static final int RPC_TRACKER_MAGIC = 0x2f271;
    /** The RPC protocol's magic number. */
    public static final int RPC_MAGIC = 0xff271;
    /** The answer to a key that does not match. */
    public static final int RPC_CODE_MISMATCH = RPC_MAGIC + 2;
    /** Remote device types are offset by multiples of this. */
    public static final int RPC_SESS_MASK = 128;
    /** The server's timeout argument prefix. */
    public static final String TIMEOUT_ARG = "-timeout=";

    /** The tracker's request codes. */
    public class TrackerCode {
        /** For source compatibility. */
        public TrackerCode() {}

        /** Offer a server. */
        public static final int PUT = 3;
        /** Send the server's address. */
        public static final int UPDATE_INFO = 5;
        /** Ask for the keys clients wait for. */
        public static final int GET_PENDING_MATCHKEYS = 7;
        /** Success. */
        public static final int SUCCESS = 0;
    }
}
