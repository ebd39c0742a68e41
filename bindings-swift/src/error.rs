//! One error type crosses to Swift: a Mote error code with its message. The Swift layer turns
//! it into `MoteError`, one case per code (`Sources/Mote/MoteError.swift`).
//!
//! Compiled into two crates: mote-swift and mote-swift-rpc (bindings-swift/rpc, through
//! `#[path]`), so that both Swift products get the same `NativeError` and error codes and share
//! `MoteError.swift` (docs/swiftpm.md, "Two products"). Everything here must build in both.

use mote::ErrorCode;

/// A failed Mote call: `code` is `mote::ErrorCode` as a number (1..=20), `message` the
/// error's full text.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum NativeError {
    /// A Mote error.
    #[error("{message}")]
    Mote { code: u32, message: String },
}

impl NativeError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        NativeError::Mote {
            code: code as u32,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        NativeError::new(ErrorCode::InvalidArgument, message)
    }

    // mote-swift-rpc compiles this file too and never reports `busy`.
    #[allow(dead_code)]
    pub(crate) fn busy(message: impl Into<String>) -> Self {
        NativeError::new(ErrorCode::Busy, message)
    }
}

impl From<mote::Error> for NativeError {
    fn from(e: mote::Error) -> Self {
        NativeError::new(e.code(), e.to_string())
    }
}

/// A Swift callback that failed in a way its own code did not report (uniffi's wording).
impl From<uniffi::UnexpectedUniFFICallbackError> for NativeError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        NativeError::new(ErrorCode::Callback, e.reason)
    }
}

/// The stable code and name of every Mote error, `(1, "io")` to `(20, "device")`: the Swift
/// `MoteError` has one case per entry (its tests check the two agree).
#[uniffi::export]
pub fn error_codes() -> Vec<ErrorCodeInfo> {
    ALL_CODES
        .iter()
        .map(|&c| ErrorCodeInfo {
            code: c as u32,
            name: code_name(c).to_string(),
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

/// Every code, in order.
pub(crate) const ALL_CODES: [ErrorCode; 20] = ErrorCode::ALL;

/// The Swift case name of a code. The match is exhaustive, so a new code fails to compile here
/// until it is named here (`ErrorCode::ALL` lists every code).
pub(crate) fn code_name(c: ErrorCode) -> &'static str {
    match c {
        ErrorCode::Io => "io",
        ErrorCode::Load => "load",
        ErrorCode::Format => "format",
        ErrorCode::Unsupported => "unsupported",
        ErrorCode::MissingFunctions => "missingFunctions",
        ErrorCode::UnknownFunction => "unknownFunction",
        ErrorCode::ArgumentCount => "argumentCount",
        ErrorCode::Mismatch => "mismatch",
        ErrorCode::Kernel => "kernel",
        ErrorCode::Callback => "callback",
        ErrorCode::InvalidArgument => "invalidArgument",
        ErrorCode::Npy => "npy",
        ErrorCode::Vm => "vm",
        ErrorCode::OutOfMemory => "outOfMemory",
        ErrorCode::Subgraph => "subgraph",
        ErrorCode::Backend => "backend",
        ErrorCode::Busy => "busy",
        ErrorCode::ResourceExhausted => "resourceExhausted",
        ErrorCode::Cancelled => "cancelled",
        ErrorCode::Device => "device",
    }
}
