//! Swift bindings of Mote: the uniffi layer under the Swift package `Mote`
//! (`bindings-swift/Sources/Mote`).
//!
//! Everything here is exported with uniffi's proc-macros; `scripts/swift-bindings.sh` generates
//! `Sources/MoteFFI/include/moteFFI.h` and `Sources/MoteUniFFI/mote.swift` from the built
//! library. Those generated types (`NativeModel`, `NativeSession`, ...) are the bridge, not the
//! API: apps use the hand-written Swift layer (`Model`, `Session`, `Tensor`, `MoteError`), which
//! states each type's threading rule. This crate is a thin translator over `mote` and
//! `mote-rpc`, as `mote-ffi` (C) and `mote-java` (JNI) are.
//!
//! No panic crosses into Swift: uniffi catches a panic in every exported function and Swift
//! sees a thrown error; callbacks into Swift and the logger catch their own.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

// With `c-abi`, the C ABI is part of the same library (the XCFramework's one static library
// serves C, C++, Objective-C and Swift); naming the crate keeps it linked.
#[cfg(feature = "c-abi")]
use mote_ffi as _;

mod callback;
mod error;
mod logging;
mod rpc;
mod session;
mod tensor;

use std::sync::Arc;

pub use callback::{NativeArg, NativeFunction};
pub use error::NativeError;
pub use logging::LogSink;
pub use rpc::{NativeRpcServer, RpcConfig, RpcMode, RpcState};
pub use session::{NativeSession, ProfileRecord, SessionConfig};
pub use tensor::{NamedTensor, NativeTensor};

uniffi::setup_scaffolding!("mote");

/// Mote's version (the `mote` crate's).
#[uniffi::export]
pub fn version() -> String {
    mote::version().to_string()
}

/// Backends that can run offloaded subgraphs on this machine, in the default order.
#[uniffi::export]
pub fn backend_names() -> Vec<String> {
    mote::backend::backend_names()
}

/// The prefixes of the models linked into the program as TVM system libraries
/// (docs/system-lib.md), sorted.
#[uniffi::export]
pub fn system_lib_prefixes() -> Vec<String> {
    mote::Model::system_lib_prefixes()
}

/// Load a backend plug-in (docs/backend-plugins.md) and return its name.
#[uniffi::export]
pub fn load_plugin(path: String) -> Result<String, NativeError> {
    Ok(mote::backend::load_plugin(&path)?.name().to_string())
}

/// A loaded model library: a Relax program or a kernel-only library. `Send + Sync`: any
/// number of threads may make sessions from one model at once.
#[derive(uniffi::Object)]
pub struct NativeModel {
    pub(crate) inner: mote::Model,
}

#[uniffi::export]
impl NativeModel {
    /// Load a library written by TVM 0.27's `export_library`.
    #[uniffi::constructor]
    pub fn load(path: String) -> Result<Arc<Self>, NativeError> {
        Ok(Arc::new(NativeModel {
            inner: mote::Model::load(&path)?,
        }))
    }

    /// Load a library as data, without mapping it as code (docs/code-free.md): only its
    /// module blob is read, and a program that calls compiled kernels is refused naming them.
    /// `code_free == false` is [`NativeModel::load`] (on iOS every load is code-free anyway).
    #[uniffi::constructor]
    pub fn load_with(path: String, code_free: bool) -> Result<Arc<Self>, NativeError> {
        let options = mote::LoadOptions::default().code_free(code_free);
        Ok(Arc::new(NativeModel {
            inner: mote::Model::load_with(&path, options)?,
        }))
    }

    /// A model linked into the program as a TVM system library, by its prefix
    /// (docs/system-lib.md).
    #[uniffi::constructor]
    pub fn from_system_lib(prefix: String) -> Result<Arc<Self>, NativeError> {
        Ok(Arc::new(NativeModel {
            inner: mote::Model::from_system_lib(&prefix)?,
        }))
    }

    /// Whether the program calls no compiled kernel (loadable code-free).
    pub fn is_code_free(&self) -> bool {
        self.inner.is_code_free()
    }

    /// Whether this model was loaded code-free (read as data, nothing mapped as code).
    pub fn is_loaded_code_free(&self) -> bool {
        self.inner.is_loaded_code_free()
    }

    /// Whether the library holds kernels only (no Relax program).
    pub fn is_kernel_library(&self) -> bool {
        self.inner.is_kernel_library()
    }

    /// The functions callers can call: Relax functions, or a kernel library's kernels.
    pub fn function_names(&self) -> Vec<String> {
        self.inner.function_names()
    }

    /// Parameter names of the Relax function `function`, in order.
    pub fn parameter_names(&self, function: String) -> Result<Vec<String>, NativeError> {
        Ok(self
            .inner
            .function_info(&function)?
            .params
            .into_iter()
            .map(|p| p.name)
            .collect())
    }

    /// Parameter names of the kernel `kernel` of a kernel-only library, as the kernel reports
    /// them (empty when it does not).
    pub fn kernel_parameter_names(&self, kernel: String) -> Vec<String> {
        self.inner
            .kernel_signature(&kernel)
            .map(|s| s.params.into_iter().map(|p| p.0).collect())
            .unwrap_or_default()
    }

    /// The file the model was loaded from.
    pub fn path(&self) -> String {
        self.inner.path().display().to_string()
    }
}

/// The stable code and name of every Mote error, `(1, "io")` to `(17, "busy")`: the Swift
/// `MoteError` has one case per entry (its tests check the two agree).
#[uniffi::export]
pub fn error_codes() -> Vec<ErrorCodeInfo> {
    error::ALL_CODES
        .iter()
        .map(|&c| ErrorCodeInfo {
            code: c as u32,
            name: error::code_name(c).to_string(),
        })
        .collect()
}

/// One of Mote's error codes.
#[derive(uniffi::Record)]
pub struct ErrorCodeInfo {
    /// The number (`mote::ErrorCode`, the C ABI's `MoteErrorCode`).
    pub code: u32,
    /// The name, as the Swift case spells it.
    pub name: String,
}

/// For tests of the error mapping: fail with an error of `code` (1..=17) and `message`.
#[uniffi::export]
pub fn raise_for_test(code: u32, message: String) -> Result<(), NativeError> {
    Err(NativeError::Mote { code, message })
}

/// For tests of the panic boundary: panic with `message`. uniffi catches it and Swift gets a
/// thrown error (a `Result` return makes the Swift declaration `throws`; a panic in a
/// non-throwing export would stop the Swift process).
#[uniffi::export]
pub fn panic_for_test(message: String) -> Result<(), NativeError> {
    panic!("{message}");
}
