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

/// The body of every entry point C code calls into Mote through (kernel services, callbacks):
/// a panic becomes the entry point's failure value `fail` with an error recorded for the
/// caller, instead of unwinding into a C frame (which aborts the process).
pub(crate) fn c_boundary<R>(entry: &str, fail: R, body: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        let _ = catch_unwind(|| set_error("RuntimeError", &format!("{entry}: Mote panicked")));
        fail
    })
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
        // SAFETY: a C string and three parts, each NULL or a C string, all alive for the call.
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

    #[test]
    fn a_panic_at_a_c_boundary_becomes_an_error() {
        let r = c_boundary("TestEntry", -1, || -> i32 { panic!("boom") });
        assert_eq!(r, -1);
        let (kind, msg) = take_error().expect("an error is recorded");
        assert_eq!(
            (kind.as_str(), msg.as_str()),
            ("RuntimeError", "TestEntry: Mote panicked")
        );
        assert_eq!(c_boundary("TestEntry", -1, || 0), 0);
    }

    /// Every `extern "C"` function Mote defines (not the ones it calls, not test helpers) runs
    /// its body inside `c_boundary` or `catch_unwind`.
    #[test]
    fn every_extern_c_function_has_a_panic_boundary() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![src];
        let mut checked = 0;
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if p.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            // Unit tests come last in a file; their helper lambdas are not entry points.
            let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            for (at, _) in text.match_indices("extern \"C\" fn ") {
                let head = &text[at..];
                let (Some(brace), Some(semi)) = (head.find('{'), head.find(';')) else {
                    continue;
                };
                let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
                if semi < brace || text[line_start..at].contains("type ") {
                    continue; // a declaration or a function-pointer type
                }
                // The body: up to the matching closing brace.
                let mut depth = 0;
                let mut end = brace;
                for (k, c) in head[brace..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = brace + k;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let body = &head[brace..end];
                let name = head["extern \"C\" fn ".len()..]
                    .split('(')
                    .next()
                    .unwrap_or("");
                assert!(
                    body.contains("c_boundary(") || body.contains("catch_unwind("),
                    "{}: extern \"C\" fn {name} has no panic boundary",
                    p.display()
                );
                checked += 1;
            }
        }
        assert!(
            checked >= 10,
            "only {checked} entry points found; is the scan broken?"
        );
    }
}
