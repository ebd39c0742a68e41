//! The per-thread error slot: what a kernel raises (through the exported
//! `TVMFFIErrorSetRaisedFromCStrParts` or the context-slot `TVMFFIErrorSetRaisedFromCStr`) before
//! returning non-zero, taken by whoever called the kernel (docs/tvm-format.md §7).

use std::cell::RefCell;
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static LAST_ERROR: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Record an error for the current thread (what a kernel does before returning -1).
pub(crate) fn set_error(kind: &str, message: &str) {
    LAST_ERROR.with(|e| *e.borrow_mut() = Some((kind.to_string(), message.to_string())));
}

/// Take the current thread's recorded error, if any.
pub(crate) fn take_error() -> Option<(String, String)> {
    LAST_ERROR.with(|e| e.borrow_mut().take())
}

pub(crate) fn lossy(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL strings from kernels are NUL-terminated C strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `TVMFFIErrorSetRaisedFromCStrParts`: the one symbol model libraries link against directly.
/// The message is the concatenation of the non-NULL parts.
///
/// # Safety
/// `kind` is NULL or a C string; `parts` is NULL or points to `num_parts` entries, each NULL or
/// a C string.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStrParts(
    kind: *const c_char,
    parts: *const *const c_char,
    num_parts: i32,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let mut msg = String::new();
        if !parts.is_null() {
            for i in 0..num_parts.max(0) as usize {
                // SAFETY: the caller passes `num_parts` entries.
                msg.push_str(&lossy(unsafe { *parts.add(i) }));
            }
        }
        set_error(&lossy(kind), &msg);
    }));
}

/// `TVMFFIErrorSetRaisedFromCStr`.
pub(crate) unsafe extern "C" fn error_set_raised_from_cstr(
    kind: *const c_char,
    msg: *const c_char,
) {
    let _ = catch_unwind(|| set_error(&lossy(kind), &lossy(msg)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[test]
    fn error_parts_are_concatenated_skipping_nulls() {
        let kind = CString::new("ValueError").unwrap();
        let a = CString::new("Invalid x.shape[0]").unwrap();
        let b = CString::new(", expected 4").unwrap();
        let parts = [a.as_ptr(), std::ptr::null(), b.as_ptr()];
        unsafe { TVMFFIErrorSetRaisedFromCStrParts(kind.as_ptr(), parts.as_ptr(), 3) };
        assert_eq!(
            take_error(),
            Some((
                "ValueError".to_string(),
                "Invalid x.shape[0], expected 4".to_string()
            ))
        );
        assert_eq!(take_error(), None);
    }
}
