// uniffi's generated module is an implementation detail: not re-exported, and no public
// declaration may mention its types (docs/uniffi.md).
#if compiler(>=6.0)
internal import MoteRPCUniFFI
#else
@_implementationOnly import MoteRPCUniFFI
#endif

// MoteRPC: what an RPC app needs of Mote, with the names the `Mote` product gives them, so that
// an app moves from one product to the other by its import alone (docs/swiftpm.md, "Two
// products"). RPCServer.swift is this product's own; MoteError.swift and Logging.swift are
// Mote's files (symbolic links). The two lines below are the only Swift written twice: Mote
// declares them in Sources/Mote/Model.swift, beside the rest of `Model`.

/// Mote's version.
public func moteVersion() -> String { MoteRPCUniFFI.version() }

/// The models linked into the program. In MoteRPC only the list of their prefixes: the models
/// themselves are loaded by the server, for its clients (`Mote`'s ``Model`` loads them).
public enum Model {
    /// The prefixes of the models linked into this program as TVM system libraries, sorted:
    /// what an RPC server gives out through `ffi.SystemLib(prefix)` (docs/system-lib.md).
    public static var systemLibPrefixes: [String] { MoteRPCUniFFI.systemLibPrefixes() }
}
