//! The one error transport: fallible functions return `MoteError*`, NULL on success.

use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// Why a call failed. Values are stable across releases and never reused; codes below 64 are
/// the runtime's (`mote::ErrorCode`), 64 and up belong to the C ABI. A newer library may
/// return a code this header does not list: treat it like `MOTE_ERROR_CODE_INTERNAL`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoteErrorCode {
    /// A file could not be read.
    Io = 1,
    /// A model library could not be loaded (not a shared library, wrong architecture,
    /// truncated, unresolved symbols).
    Load = 2,
    /// A model file is malformed (executable bytes, module tree).
    Format = 3,
    /// Something valid that Mote does not support (an op, a module kind, a platform feature).
    Unsupported = 4,
    /// The model calls functions Mote cannot provide; the message lists them.
    MissingFunctions = 5,
    /// No function of that name in the model.
    UnknownFunction = 6,
    /// Wrong number of arguments.
    ArgumentCount = 7,
    /// Wrong shape, dtype or kind of an argument.
    Mismatch = 8,
    /// A model kernel reported an error; the message is the kernel's.
    Kernel = 9,
    /// A registered function (for example a C callback) reported an error.
    Callback = 10,
    /// An argument is invalid (bad option, index out of range, unaligned data...).
    InvalidArgument = 11,
    /// A `.npy`/`.npz` file is malformed.
    Npy = 12,
    /// The VM hit an inconsistency in the bytecode.
    Vm = 13,
    /// An allocation failed.
    OutOfMemory = 14,
    /// An offloaded subgraph's description is malformed or does not match its call; the
    /// message names the region and the node.
    Subgraph = 15,
    /// A backend (built-in or plug-in) failed to load, prepare or run a subgraph.
    Backend = 16,
    /// The session is running a call that cannot wait for this one: the caller is a callback
    /// of that very call (a session cannot be re-entered from its own callbacks), or a callback
    /// calling a session another thread is running (waiting could deadlock). The session
    /// itself is fine: call it again once the running call has returned.
    Busy = 17,
    /// A budget of the load or session options (memory, registers, stack, instructions) would
    /// be exceeded; the message names it (docs/untrusted-models.md).
    ResourceExhausted = 18,
    /// The call was stopped by `mote_session_interrupt`.
    Cancelled = 19,
    /// A device (OpenCL) failed or is missing: no `libOpenCL` or no device where a model
    /// compiled for OpenCL needs one, a program the driver rejects (its build log in the
    /// message), or an allocation, copy or launch the driver refuses. The message names the
    /// device (`opencl` or `opencl:N`; docs/opencl.md).
    Device = 20,
    /// A handle is not a live handle of the expected type (already freed, or of another type).
    InvalidHandle = 64,
    /// A required pointer argument is NULL.
    NullArgument = 65,
    /// A string argument is not valid UTF-8.
    InvalidUtf8 = 66,
    /// A bug in Mote (a caught panic). Please report it with the message.
    Internal = 67,
}

/// An error: a stable code and a message. Owned by the caller, freed with `mote_error_free`.
#[derive(Debug)]
pub struct MoteError {
    pub(crate) code: u32,
    pub(crate) message: CString,
}

impl MoteError {
    pub(crate) fn new(code: MoteErrorCode, message: impl Into<String>) -> MoteError {
        Self::with_raw_code(code as u32, message.into())
    }

    fn with_raw_code(code: u32, message: String) -> MoteError {
        let message = CString::new(message.replace('\0', "\\0"))
            .unwrap_or_else(|_| CString::from(c"(unprintable message)"));
        MoteError { code, message }
    }

    /// The same error with `prefix: ` in front of its message.
    pub(crate) fn context(self, prefix: impl std::fmt::Display) -> MoteError {
        let message = format!("{prefix}: {}", self.message.to_string_lossy());
        Self::with_raw_code(self.code, message)
    }

    /// `index` is not below `len`; `what` names the collection ("functions", "rows"...).
    pub(crate) fn out_of_range(
        index: usize,
        len: usize,
        what: impl std::fmt::Display,
    ) -> MoteError {
        Self::new(
            MoteErrorCode::InvalidArgument,
            format!("index {index} out of range: {len} {what}"),
        )
    }

    pub(crate) fn null(what: &str) -> MoteError {
        Self::new(MoteErrorCode::NullArgument, format!("`{what}` is NULL"))
    }

    pub(crate) fn into_raw(self) -> *mut MoteError {
        Box::into_raw(Box::new(self))
    }
}

impl From<mote::Error> for MoteError {
    fn from(e: mote::Error) -> Self {
        Self::with_raw_code(MoteErrorCode::from(e.code()) as u32, e.to_string())
    }
}

/// The one list that ties `mote::ErrorCode` to `MoteErrorCode`. Both conversions below are
/// exhaustive matches without a wildcard, generated from this list, so a variant added to
/// either enum does not compile until it is listed here; the tests then check that each pair
/// has the same number and the same name.
///
/// Naming rule: a runtime code and its C code have the same Rust variant name;
/// cbindgen spells the C constant `MOTE_ERROR_CODE_` + the name in SCREAMING_SNAKE_CASE
/// (`ErrorCode::InvalidArgument` <-> `MoteErrorCode::InvalidArgument` =
/// `MOTE_ERROR_CODE_INVALID_ARGUMENT`). Codes of the C layer alone (64 and up) are listed
/// after `c_only`.
macro_rules! error_code_table {
    ($($name:ident),* $(,)?; c_only: $($c_only:ident),* $(,)?) => {
        impl From<mote::ErrorCode> for MoteErrorCode {
            fn from(c: mote::ErrorCode) -> MoteErrorCode {
                match c {
                    $(mote::ErrorCode::$name => MoteErrorCode::$name,)*
                }
            }
        }

        impl MoteErrorCode {
            /// The runtime's code of the same name, `None` for the C layer's own codes.
            #[cfg_attr(not(test), allow(dead_code))]
            pub(crate) fn runtime(self) -> Option<mote::ErrorCode> {
                match self {
                    $(MoteErrorCode::$name => Some(mote::ErrorCode::$name),)*
                    $(MoteErrorCode::$c_only => None,)*
                }
            }
        }

        #[cfg(test)]
        const SHARED_CODES: &[(mote::ErrorCode, MoteErrorCode, &str)] =
            &[$((mote::ErrorCode::$name, MoteErrorCode::$name, stringify!($name)),)*];
        #[cfg(test)]
        const C_ONLY_CODES: &[(MoteErrorCode, &str)] =
            &[$((MoteErrorCode::$c_only, stringify!($c_only)),)*];
    };
}

error_code_table!(
    Io, Load, Format, Unsupported, MissingFunctions, UnknownFunction, ArgumentCount, Mismatch,
    Kernel, Callback, InvalidArgument, Npy, Vm, OutOfMemory, Subgraph, Backend, Busy,
    ResourceExhausted, Cancelled, Device;
    c_only: InvalidHandle, NullArgument, InvalidUtf8, Internal
);

pub(crate) type Result<T> = std::result::Result<T, MoteError>;

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    let text = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("internal error (panic caught at the C boundary): {text}")
}

/// Run the body of an `extern "C"` function: its error or a caught panic becomes the returned
/// `MoteError*`; success is NULL.
pub(crate) fn guard(body: impl FnOnce() -> Result<()>) -> *mut MoteError {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ptr::null_mut(),
        Ok(Err(e)) => e.into_raw(),
        Err(p) => MoteError::new(MoteErrorCode::Internal, panic_message(p.as_ref())).into_raw(),
    }
}

/// Like [`guard`] for functions that cannot report errors (`_free`, plain getters).
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// Write `value` through `out` (already checked non-NULL): the last step of a successful call.
pub(crate) fn write_out<T>(out: *mut T, value: T) {
    // SAFETY: callers check `out` for NULL before doing any work; the contract (README) makes
    // the caller responsible for `out` pointing at writable memory for a `T`.
    unsafe { out.write(value) }
}

pub(crate) fn check_out<T>(out: *mut T, what: &str) -> Result<()> {
    if out.is_null() {
        Err(MoteError::null(what))
    } else {
        Ok(())
    }
}

/// A borrowed C string argument as `&str`.
pub(crate) fn str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(MoteError::null(what));
    }
    // SAFETY: non-NULL; the contract requires a NUL-terminated string valid for the call.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map_err(|_| {
        MoteError::new(
            MoteErrorCode::InvalidUtf8,
            format!("`{what}` is not valid UTF-8"),
        )
    })
}

/// The error's code (a `MoteErrorCode` value). 0 for a NULL error.
#[no_mangle]
pub unsafe extern "C" fn mote_error_code(error: *const MoteError) -> u32 {
    guard_value(0, || {
        // SAFETY: the caller passes NULL or an error returned by Mote and not yet freed.
        unsafe { error.as_ref() }.map_or(0, |e| e.code)
    })
}

/// The error's message, UTF-8 and NUL-terminated, borrowed from the error: valid until
/// `mote_error_free(error)`. "" for a NULL error.
#[no_mangle]
pub unsafe extern "C" fn mote_error_message(error: *const MoteError) -> *const c_char {
    guard_value(c"".as_ptr(), || {
        // SAFETY: as in `mote_error_code`.
        unsafe { error.as_ref() }.map_or(c"".as_ptr(), |e| e.message.as_ptr())
    })
}

/// Free an error. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn mote_error_free(error: *mut MoteError) {
    guard_value((), || {
        if !error.is_null() {
            // SAFETY: a non-NULL error was made by `Box::into_raw` in this library and the
            // caller gives up its ownership here.
            drop(unsafe { Box::from_raw(error) });
        }
    })
}

/// A new error, for C callbacks to return (see `MoteFunctionCallback`). `message` may be NULL.
/// Returns NULL only if allocation fails.
#[no_mangle]
pub unsafe extern "C" fn mote_error_new(code: u32, message: *const c_char) -> *mut MoteError {
    guard_value(ptr::null_mut(), || {
        let text = if message.is_null() {
            String::new()
        } else {
            // SAFETY: non-NULL and NUL-terminated per the contract.
            unsafe { CStr::from_ptr(message) }
                .to_string_lossy()
                .into_owned()
        };
        MoteError::with_raw_code(code, text).into_raw()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// `InvalidArgument` -> `INVALID_ARGUMENT`, as cbindgen's `ScreamingSnakeCase` does.
    fn screaming(name: &str) -> String {
        let mut out = String::new();
        for (i, ch) in name.chars().enumerate() {
            if ch.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_uppercase());
        }
        out
    }

    #[test]
    fn runtime_codes_map_to_c_codes_of_the_same_number_and_name() {
        for &(runtime, c, name) in SHARED_CODES {
            assert_eq!(MoteErrorCode::from(runtime), c, "{name}");
            assert_eq!(runtime as u32, c as u32, "{name}: numbers differ");
            assert_eq!(format!("{runtime:?}"), name);
            assert_eq!(format!("{c:?}"), name);
            assert!((runtime as u32) < 64, "{name}: runtime codes are below 64");
        }
    }

    #[test]
    fn c_codes_map_back_to_runtime_codes_or_are_the_c_layers_own() {
        for &(runtime, c, name) in SHARED_CODES {
            assert_eq!(c.runtime(), Some(runtime), "{name}");
        }
        for &(c, name) in C_ONLY_CODES {
            assert_eq!(c.runtime(), None, "{name}");
            assert_eq!(format!("{c:?}"), name);
            assert!(c as u32 >= 64, "{name}: C-only codes are 64 and up");
        }
        let numbers: Vec<u32> = SHARED_CODES
            .iter()
            .map(|&(_, c, _)| c as u32)
            .chain(C_ONLY_CODES.iter().map(|&(c, _)| c as u32))
            .collect();
        let unique: HashSet<u32> = numbers.iter().copied().collect();
        assert_eq!(unique.len(), numbers.len(), "a number is used twice");
        assert!(
            !unique.contains(&0),
            "0 means 'no error' to mote_error_code"
        );
    }

    /// The checked-in header lists exactly these codes, under the rule's names.
    #[test]
    fn the_header_spells_every_code_by_the_naming_rule() {
        let header = include_str!("../include/mote.h");
        let listed: HashSet<String> = header
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("MOTE_ERROR_CODE_"))
            .map(|l| l.trim_end_matches(',').to_string())
            .collect();
        let expected: HashSet<String> = SHARED_CODES
            .iter()
            .map(|&(_, c, name)| (c, name))
            .chain(C_ONLY_CODES.iter().copied())
            .map(|(c, name)| format!("MOTE_ERROR_CODE_{} = {}", screaming(name), c as u32))
            .collect();
        assert_eq!(listed, expected);
        assert_eq!(screaming("InvalidArgument"), "INVALID_ARGUMENT");
    }

    #[test]
    fn runtime_errors_keep_their_code() {
        let e = MoteError::from(mote::Error::InvalidArgument("x".into()));
        assert_eq!(e.code, MoteErrorCode::InvalidArgument as u32);
        let e = MoteError::from(mote::Error::Backend {
            backend: "b".into(),
            message: "m".into(),
        });
        assert_eq!(e.code, 16);
    }
}
