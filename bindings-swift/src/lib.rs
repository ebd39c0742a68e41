//! Swift bindings of Mote: the uniffi layer under the Swift package `Mote`
//! (`bindings-swift/Sources/Mote`).
//!
//! Everything here is exported with uniffi's proc-macros; `scripts/swift-bindings.sh` generates
//! `Sources/MoteFFI/include/moteFFI.h` and `Sources/MoteUniFFI/mote.swift` from the built
//! library. Those generated types (`NativeModel`, `NativeSession`, ...) are the bridge, not the
//! API: apps use the hand-written Swift layer (`Model`, `Session`, `Tensor`, `MoteError`), which
//! states each type's threading rule. This crate is a thin translator over `mote`, as `mote-ffi`
//! (C) and `mote-java` (JNI) are. The RPC server is not here: it is `mote-swift-rpc`
//! (bindings-swift/rpc, the Swift product `MoteRPC`), which shares this crate's `error` and
//! `logging` modules (docs/swiftpm.md, "Two products").
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
mod session;
mod tensor;

use std::sync::Arc;

pub use callback::{NativeArg, NativeFunction};
pub use error::{error_codes, ErrorCodeInfo, NativeError};
pub use logging::LogSink;
pub use session::{
    NativeCancelToken, NativeInterruptHandle, NativeSession, ProfileRecord, SessionConfig,
};
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

    /// Load a library with `options` (`mote::LoadOptions`): as data, without mapping it as
    /// code, when `code_free` (docs/code-free.md): only its module blob is read, and a program
    /// that calls compiled kernels is refused naming them. `code_free == false` is
    /// [`NativeModel::load`] (on iOS every load is code-free anyway).
    #[uniffi::constructor]
    pub fn load_with(path: String, options: LoadConfig) -> Result<Arc<Self>, NativeError> {
        Ok(Arc::new(NativeModel {
            inner: mote::Model::load_with(&path, load_options(&options)?)?,
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

    /// The parameters of `function` (a Relax function, or a kernel of a kernel-only library):
    /// name, and dtype and shape where the model records them (a scalar or a value of another
    /// kind has none).
    pub fn parameters(&self, function: String) -> Result<Vec<NativeParam>, NativeError> {
        Ok(self
            .inner
            .function_info(&function)?
            .params
            .into_iter()
            .map(NativeParam::from)
            .collect())
    }

    /// What `run` of the Relax function `function` returns, one entry per tensor in the same
    /// order (`output`, or `output[i]` for tuples), with dtype and shape where the bytecode
    /// says; `None` when even their number is unknown, and for a kernel-only library's kernels
    /// (they return nothing).
    pub fn outputs(&self, function: String) -> Result<Option<Vec<NativeParam>>, NativeError> {
        Ok(self
            .inner
            .function_info(&function)?
            .outputs
            .map(|o| o.into_iter().map(NativeParam::from).collect()))
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

/// A parameter of a function (`mote::ParamInfo`).
#[derive(uniffi::Record)]
pub struct NativeParam {
    pub name: String,
    /// The dtype's name (`float32`), when the model records it.
    pub dtype: Option<String>,
    /// The shape, when the model records it.
    pub shape: Option<Vec<NativeDim>>,
}

impl From<mote::ParamInfo> for NativeParam {
    fn from(p: mote::ParamInfo) -> NativeParam {
        NativeParam {
            name: p.name,
            dtype: p.dtype.map(|d| d.to_string()),
            shape: p.shape.map(|dims| {
                dims.into_iter()
                    .map(|d| match d {
                        mote::Dim::Fixed(size) => NativeDim::Fixed { size },
                        mote::Dim::Var(name) => NativeDim::Symbolic { name },
                    })
                    .collect()
            }),
        }
    }
}

/// One dimension of a parameter's shape.
#[derive(uniffi::Enum)]
pub enum NativeDim {
    Fixed {
        size: i64,
    },
    /// A symbolic dimension (`n`), named as the model names it ("?" when it does not).
    Symbolic {
        name: String,
    },
}

/// Options of a load (`mote::LoadOptions`).
#[derive(uniffi::Record)]
pub struct LoadConfig {
    /// Read the file as data, never mapped as code (docs/code-free.md).
    pub code_free: bool,
    /// With `code_free`: read the whole file into memory instead of mapping it, so a later
    /// truncation or rewrite of the file cannot fault the process (docs/code-free.md §4).
    /// Refused without `code_free`.
    pub read_into_memory: bool,
    /// With `code_free`: the most bytes decoding the file may allocate (a gzip `.tar` inflated
    /// past it is `ResourceExhausted`; docs/untrusted-models.md §3). `None`: Mote's default
    /// (16 x the file + 64 MiB, at most 4 GiB). 0 is refused, and so is a budget without
    /// `code_free` (a load that maps code has no budget: it would be ignored).
    pub memory_budget_bytes: Option<u64>,
}

/// Mote's options for `config`, every value checked: nothing is silently ignored.
fn load_options(config: &LoadConfig) -> Result<mote::LoadOptions, NativeError> {
    let mut o = mote::LoadOptions::default()
        .code_free(config.code_free)
        .read_into_memory(config.read_into_memory);
    match config.memory_budget_bytes {
        None => {}
        Some(0) => {
            return Err(NativeError::invalid(
                "LoadOptions.memoryBudgetBytes is 0 (must be at least 1; nil keeps Mote's default)",
            ))
        }
        Some(_) if !config.code_free => {
            return Err(NativeError::invalid(
                "LoadOptions.memoryBudgetBytes needs codeFree: a load that maps the library as \
                 code runs its code, and no budget applies to it",
            ))
        }
        Some(b) => o = o.memory_budget(b),
    }
    Ok(o)
}

// The test hooks below exist only in builds with the `test-hooks` feature (what
// scripts/test-swift.sh builds and generates bindings from; docs/uniffi.md, "Test hooks"):
// the library apps link, and the XCFramework, have none of them.

/// For tests of the error mapping: fail with an error of `code` (1..=20) and `message`.
#[cfg(any(test, feature = "test-hooks"))]
#[uniffi::export]
pub fn raise_for_test(code: u32, message: String) -> Result<(), NativeError> {
    Err(NativeError::Mote { code, message })
}

/// For tests of budgets and cancellation: write to `path` a code-free model file whose `main()`
/// loops forever (`mote::fuzzing::craft::endless_loop`, one backward jump): only
/// `max_instructions` or an interrupt ends a call of it.
#[cfg(any(test, feature = "test-hooks"))]
#[uniffi::export]
pub fn write_endless_loop_for_test(path: String) -> Result<(), NativeError> {
    std::fs::write(&path, mote::fuzzing::craft::endless_loop())
        .map_err(|e| NativeError::new(mote::ErrorCode::Io, format!("{path}: {e}")))
}

/// For tests of the panic boundary: panic with `message`. uniffi catches it and Swift gets a
/// thrown error (a `Result` return makes the Swift declaration `throws`; a panic in a
/// non-throwing export would stop the Swift process).
#[cfg(any(test, feature = "test-hooks"))]
#[uniffi::export]
pub fn panic_for_test(message: String) -> Result<(), NativeError> {
    panic!("{message}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote::ErrorCode;

    /// `bytes` as a gzip file of stored (uncompressed) deflate blocks: a valid gzip stream that
    /// needs no compressor (RFC 1952 framing, RFC 1951 block type 0).
    fn gzip_stored(bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        let chunks: Vec<&[u8]> = bytes.chunks(0xffff).collect();
        for (i, c) in chunks.iter().enumerate() {
            out.push(u8::from(i + 1 == chunks.len()));
            let len = c.len() as u16;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(c);
        }
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        out.extend_from_slice(&(!crc).to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out
    }

    fn load(path: &str, config: LoadConfig) -> Result<Arc<NativeModel>, u32> {
        NativeModel::load_with(path.to_string(), config)
            .map_err(|NativeError::Mote { code, .. }| code)
    }

    fn code_free(read_into_memory: bool, memory_budget_bytes: Option<u64>) -> LoadConfig {
        LoadConfig {
            code_free: true,
            read_into_memory,
            memory_budget_bytes,
        }
    }

    #[test]
    fn load_options_reach_the_loader_and_bad_ones_are_refused() {
        let dir = std::env::temp_dir();
        let tar = dir.join(format!("mote-swift-load-{}.tar", std::process::id()));
        let tar = tar.display().to_string();
        write_endless_loop_for_test(tar.clone()).unwrap();
        // The same model gzip-compressed, as `export_library("m.tar")` writes it: inflating it
        // is what the load budget bounds.
        let bytes = std::fs::read(&tar).unwrap();
        let gz = format!("{tar}.gz");
        std::fs::write(&gz, gzip_stored(&bytes)).unwrap();

        for read in [false, true] {
            let m = load(&gz, code_free(read, None)).unwrap();
            assert!(m.is_loaded_code_free());
            assert_eq!(m.function_names(), vec!["main".to_string()]);
            assert!(load(&gz, code_free(read, Some(bytes.len() as u64 + 4096))).is_ok());
            assert_eq!(
                load(&gz, code_free(read, Some(bytes.len() as u64 / 2))).err(),
                Some(ErrorCode::ResourceExhausted as u32),
                "read_into_memory {read}: inflating past the budget"
            );
        }
        let invalid = Some(ErrorCode::InvalidArgument as u32);
        assert_eq!(
            load(&tar, code_free(false, Some(0))).err(),
            invalid,
            "zero budget"
        );
        let mapped = |read_into_memory, memory_budget_bytes| LoadConfig {
            code_free: false,
            read_into_memory,
            memory_budget_bytes,
        };
        assert_eq!(
            load(&tar, mapped(false, Some(1 << 20))).err(),
            invalid,
            "budget, mapped"
        );
        assert_eq!(
            load(&tar, mapped(true, None)).err(),
            invalid,
            "read_into_memory, mapped"
        );
        std::fs::remove_file(&tar).unwrap();
        std::fs::remove_file(&gz).unwrap();
    }

    #[test]
    fn every_code_has_its_swift_name() {
        let codes = error_codes();
        assert_eq!(codes.len(), 20);
        assert_eq!(
            codes.iter().map(|c| c.code).collect::<Vec<_>>(),
            (1..=20).collect::<Vec<_>>()
        );
        assert_eq!(codes[17].name, "resourceExhausted");
        assert_eq!(codes[18].name, "cancelled");
        assert_eq!(codes[19].name, "device");
    }
}
