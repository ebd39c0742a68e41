//! Mote's RPC server for Swift: the uniffi layer under the Swift product `MoteRPC`
//! (`bindings-swift/Sources/MoteRPC`), what an RPC app links instead of `mote-swift`
//! (docs/swiftpm.md, "Two products").
//!
//! It exports the server (`NativeRpcServer`, over `mote-rpc`), the log sink, the prefixes of the
//! linked system libraries, the version and the error codes, under its own uniffi namespace
//! `mote_rpc`; `scripts/swift-bindings.sh` generates `Sources/MoteRPCFFI/include/mote_rpcFFI.h`
//! and `Sources/MoteRPCUniFFI/mote_rpc.swift` from the built library. The error and logging
//! modules are mote-swift's own files, compiled here too (`#[path]`), so that the two Swift
//! products share their Swift wrappers (`MoteError`, `MoteLogging`) as well.
//!
//! No panic crosses into Swift: uniffi catches a panic in every exported function and Swift
//! sees a thrown error; the logger catches the sink's own.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

// With `c-abi`, the C ABI is part of the same library (as in mote-swift); naming the crate
// keeps it linked.
#[cfg(feature = "c-abi")]
use mote_ffi as _;

#[path = "../../src/error.rs"]
mod error;
#[path = "../../src/logging.rs"]
mod logging;
mod rpc;

pub use error::{error_codes, ErrorCodeInfo, NativeError};
pub use logging::LogSink;
pub use rpc::{NativeRpcServer, RpcConfig, RpcMode, RpcState};

uniffi::setup_scaffolding!("mote_rpc");

/// Mote's version (the `mote` crate's).
#[uniffi::export]
pub fn version() -> String {
    mote::version().to_string()
}

/// The prefixes of the models linked into the program as TVM system libraries
/// (docs/system-lib.md), sorted: what the server gives out through `ffi.SystemLib(prefix)`.
#[uniffi::export]
pub fn system_lib_prefixes() -> Vec<String> {
    mote::Model::system_lib_prefixes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_the_version_codes_and_no_linked_model() {
        assert_eq!(version(), mote::version());
        assert_eq!(error_codes().len(), 20);
        assert_eq!(error_codes()[10].name, "invalidArgument");
        assert!(system_lib_prefixes().is_empty());
    }
}
