//! The one error type of the runtime.
//!
//! Every failure a user, a file or a kernel can cause is a variant here, with enough context to
//! act on it. Bindings map [`Error::code`] one to one onto their own error types.

use std::path::PathBuf;

/// Result alias used throughout Mote.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when loading or running a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The system loader refused the model library (not a shared library, wrong architecture,
    /// truncated, missing dependency...).
    #[error("cannot load model library {path}: {message}")]
    Load { path: PathBuf, message: String },
    /// The model's embedded data (module blob, executable, constants) is malformed.
    #[error("malformed model: {0}")]
    Format(String),
    /// The model uses a feature Mote does not implement.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Functions the bytecode calls that are neither kernels in the library, nor Mote builtins,
    /// nor registered functions.
    #[error("the model calls functions Mote cannot provide: {}", names.join(", "))]
    MissingFunctions { names: Vec<String> },
    /// No function of that name in the model.
    #[error("no function named `{name}` in the model (available: {})", available.join(", "))]
    UnknownFunction {
        name: String,
        available: Vec<String>,
    },
    /// Wrong number of arguments for a function.
    #[error("`{function}` takes {expected} arguments ({}), but {given} were given", params.join(", "))]
    ArgumentCount {
        function: String,
        expected: usize,
        given: usize,
        params: Vec<String>,
    },
    /// An argument or value has the wrong type, rank, shape or dtype.
    #[error("{0}")]
    Mismatch(String),
    /// A compiled kernel reported an error (its own message is kept verbatim).
    #[error("kernel `{kernel}` failed: {kind}: {message}")]
    Kernel {
        kernel: String,
        kind: String,
        message: String,
    },
    /// A function registered with Mote returned an error.
    #[error("function `{name}` failed: {message}")]
    Callback { name: String, message: String },
    /// A caller-supplied value is invalid (bad option, bad index, bad name...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A `.npy`/`.npz` file is malformed or holds an unsupported dtype.
    #[error("{path}: {message}")]
    Npy { path: String, message: String },
    /// The VM hit an inconsistent state that well-formed bytecode cannot produce.
    #[error("VM error in `{function}` at pc {pc}: {message}")]
    Vm {
        function: String,
        pc: usize,
        message: String,
    },
    /// Memory could not be allocated.
    #[error("out of memory allocating {0} bytes")]
    OutOfMemory(usize),
    /// An offloaded subgraph description (`mote.subgraph`) is malformed, or its call does not
    /// match it. `subgraph` names the region (and its call site), `node` the offending node.
    #[error("subgraph `{subgraph}`{}: {message}", node.as_ref().map(|n| format!(", node `{n}`")).unwrap_or_default())]
    Subgraph {
        subgraph: String,
        node: Option<String>,
        message: String,
    },
    /// A backend (built-in or plug-in) failed to load, prepare or run.
    #[error("backend `{backend}`: {message}")]
    Backend { backend: String, message: String },
    /// A budget set in [`LoadOptions`](crate::LoadOptions) or
    /// [`SessionOptions`](crate::SessionOptions) (or its default) would be exceeded: memory,
    /// registers, stack, or executed instructions (docs/untrusted-models.md §3). `budget` names
    /// the option; nothing was left half-done.
    #[error("{budget} exceeded: {message}")]
    ResourceExhausted {
        budget: &'static str,
        message: String,
    },
    /// The call was stopped through the session's
    /// [`InterruptHandle`](crate::InterruptHandle) (or a binding's cancellation: a Java
    /// `Thread.interrupt`, a cancelled Swift `Task`, an RPC timeout).
    #[error("the call was cancelled")]
    Cancelled,
    /// A device failed or is missing (docs/opencl.md): no `libOpenCL` or no device where a
    /// model compiled for OpenCL needs one, a program the driver rejects (its build log in the
    /// message), or an allocation, copy or launch the driver refuses. `device` names it
    /// (`opencl`, or `opencl:N` for device N).
    #[error("device `{device}`: {message}")]
    Device { device: String, message: String },
}

/// Stable numeric error codes, shared by every binding. Values are never reused.
///
/// The C ABI's `MoteErrorCode` (`ffi/src/error.rs`) repeats these under the same names
/// (`ErrorCode::InvalidArgument` is `MOTE_ERROR_CODE_INVALID_ARGUMENT`) and numbers; a test in
/// `mote-ffi` fails to compile or fails when the two drift apart. Codes 64 and up are the C
/// layer's own and are not listed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ErrorCode {
    Io = 1,
    Load = 2,
    Format = 3,
    Unsupported = 4,
    MissingFunctions = 5,
    UnknownFunction = 6,
    ArgumentCount = 7,
    Mismatch = 8,
    Kernel = 9,
    Callback = 10,
    InvalidArgument = 11,
    Npy = 12,
    Vm = 13,
    OutOfMemory = 14,
    Subgraph = 15,
    Backend = 16,
    /// A session was called while it was already running a call that cannot wait for it: from
    /// a callback of that very call (re-entry), or from a callback while another thread holds
    /// the session. Reported by bindings that share a session between callers (the C ABI);
    /// no [`Error`] of this crate has it, since `Session` methods take `&mut self`.
    Busy = 17,
    /// [`Error::ResourceExhausted`]: a memory, register, stack or execution budget.
    ResourceExhausted = 18,
    /// [`Error::Cancelled`]: the call was interrupted.
    Cancelled = 19,
    /// [`Error::Device`]: a device (OpenCL) failed or is missing.
    Device = 20,
}

impl ErrorCode {
    /// Every code, in numeric order: the table each binding maps one to one (a binding's test
    /// walks it, so a new code fails there until the binding names it).
    pub const ALL: [ErrorCode; 20] = [
        ErrorCode::Io,
        ErrorCode::Load,
        ErrorCode::Format,
        ErrorCode::Unsupported,
        ErrorCode::MissingFunctions,
        ErrorCode::UnknownFunction,
        ErrorCode::ArgumentCount,
        ErrorCode::Mismatch,
        ErrorCode::Kernel,
        ErrorCode::Callback,
        ErrorCode::InvalidArgument,
        ErrorCode::Npy,
        ErrorCode::Vm,
        ErrorCode::OutOfMemory,
        ErrorCode::Subgraph,
        ErrorCode::Backend,
        ErrorCode::Busy,
        ErrorCode::ResourceExhausted,
        ErrorCode::Cancelled,
        ErrorCode::Device,
    ];
}

impl Error {
    /// The stable code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Io { .. } => ErrorCode::Io,
            Error::Load { .. } => ErrorCode::Load,
            Error::Format(_) => ErrorCode::Format,
            Error::Unsupported(_) => ErrorCode::Unsupported,
            Error::MissingFunctions { .. } => ErrorCode::MissingFunctions,
            Error::UnknownFunction { .. } => ErrorCode::UnknownFunction,
            Error::ArgumentCount { .. } => ErrorCode::ArgumentCount,
            Error::Mismatch(_) => ErrorCode::Mismatch,
            Error::Kernel { .. } => ErrorCode::Kernel,
            Error::Callback { .. } => ErrorCode::Callback,
            Error::InvalidArgument(_) => ErrorCode::InvalidArgument,
            Error::Npy { .. } => ErrorCode::Npy,
            Error::Vm { .. } => ErrorCode::Vm,
            Error::OutOfMemory(_) => ErrorCode::OutOfMemory,
            Error::Subgraph { .. } => ErrorCode::Subgraph,
            Error::Backend { .. } => ErrorCode::Backend,
            Error::ResourceExhausted { .. } => ErrorCode::ResourceExhausted,
            Error::Cancelled => ErrorCode::Cancelled,
            Error::Device { .. } => ErrorCode::Device,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

#[cfg(test)]
mod code_tests {
    #[test]
    fn all_codes_are_listed_in_numeric_order() {
        for (i, c) in super::ErrorCode::ALL.iter().enumerate() {
            assert_eq!(*c as u32, i as u32 + 1, "{c:?}");
        }
    }
}
