//! One error type crosses to Swift: a Mote error code with its message. The Swift layer turns
//! it into `MoteError`, one case per code (`Sources/Mote/MoteError.swift`).

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
