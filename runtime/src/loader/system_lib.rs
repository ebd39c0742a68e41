//! Models linked into the program ("system libraries", docs/system-lib.md): the process-wide
//! registry their static constructors fill through `TVMFFIEnvModRegisterSystemLibSymbol`, the
//! lookup rule, and one [`Library`] per prefix, kept for the life of the process.
//!
//! Registration runs before `main` (or while a shared library holding such objects is being
//! loaded), in no fixed order, so everything here is const-initialised: no lazy statics, no
//! logging, nothing that needs the runtime to be set up.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void, CStr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::host::error_slot::{c_boundary, set_error};
use crate::loader::library::Library;

/// What a system library registers its module blob under, after its prefix (docs/system-lib.md
/// §2).
const BLOB_NAME: &str = "__tvm_ffi__library_bin";
/// Library-level names (blob, context slot) start with this; kernels (`__tvm_ffi_<name>`) do
/// not (docs/tvm-format.md §1.3).
const LIBRARY_LEVEL: &str = "__tvm_ffi__";
const KERNEL_PREFIX: &str = "__tvm_ffi_";
/// Bytes of the `u64` length before the blob's payload (docs/tvm-format.md §2.1).
const BLOB_LENGTH_BYTES: usize = 8;

struct Registry {
    /// Registered name (bytes, as given) → address.
    symbols: BTreeMap<Box<[u8]>, usize>,
    /// Registrations refused because the name or the address was NULL.
    rejected: usize,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    symbols: BTreeMap::new(),
    rejected: 0,
});

/// One library per prefix: its context slot points at it, so it must never go away.
static LIBRARIES: Mutex<BTreeMap<String, Arc<Library>>> = Mutex::new(BTreeMap::new());

fn registry() -> MutexGuard<'static, Registry> {
    // Every update is a single insert or increment, so a poisoned registry is still consistent.
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// `TVMFFIEnvModRegisterSystemLibSymbol`: what the static constructors of a system library's
/// objects call for its blob, its context slot and each kernel (docs/system-lib.md §2).
/// Registering a name again replaces its address, as TVM does. A NULL name or address is
/// refused: -1 with an error recorded (and counted, see [`prefixes_message`]).
///
/// # Safety
/// `name` is NULL or a NUL-terminated C string.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModRegisterSystemLibSymbol(
    name: *const c_char,
    ptr: *mut c_void,
) -> i32 {
    c_boundary("TVMFFIEnvModRegisterSystemLibSymbol", -1, || {
        if name.is_null() || ptr.is_null() {
            registry().rejected += 1;
            set_error(
                "ValueError",
                "TVMFFIEnvModRegisterSystemLibSymbol: NULL name or address",
            );
            return -1;
        }
        // SAFETY: non-NULL names are C strings (the constructors pass string literals). The
        // bytes are copied, so a name in a library that is unloaded later does not dangle.
        let name = unsafe { CStr::from_ptr(name) }.to_bytes();
        registry().symbols.insert(name.into(), ptr as usize);
        0
    })
}

/// The address registered for `prefix + name`, else for `name` (docs/system-lib.md §3). The
/// fallback is for kernels, which are registered as `__tvm_ffi_<prefix><name>`; library-level
/// names (`__tvm_ffi__library_bin`, `__tvm_ffi__library_ctx`) are only taken with the prefix,
/// since without it they belong to the library whose prefix is empty.
pub(crate) fn lookup(prefix: &str, name: &str) -> Option<*mut c_void> {
    let reg = registry();
    let mut key = Vec::with_capacity(prefix.len() + name.len());
    key.extend_from_slice(prefix.as_bytes());
    key.extend_from_slice(name.as_bytes());
    reg.symbols
        .get(&key[..])
        .or_else(|| {
            let fallback = !prefix.is_empty() && !name.starts_with(LIBRARY_LEVEL);
            fallback.then(|| reg.symbols.get(name.as_bytes())).flatten()
        })
        .map(|&a| a as *mut c_void)
}

/// The prefixes of the system libraries linked into the program: one per registered
/// `<prefix>__tvm_ffi__library_bin`, sorted.
pub(crate) fn prefixes() -> Vec<String> {
    registry()
        .symbols
        .keys()
        .filter_map(|k| k.strip_suffix(BLOB_NAME.as_bytes()))
        .filter_map(|p| std::str::from_utf8(p).ok())
        .map(str::to_string)
        .collect()
}

/// The kernels registered under `prefix`, as the bytecode names them (`<prefix><name>`).
fn kernels(prefix: &str) -> Vec<String> {
    let start = format!("{KERNEL_PREFIX}{prefix}");
    registry()
        .symbols
        .keys()
        .filter(|k| k.starts_with(start.as_bytes()) && !k.starts_with(LIBRARY_LEVEL.as_bytes()))
        .filter_map(|k| std::str::from_utf8(&k[KERNEL_PREFIX.len()..]).ok())
        .map(str::to_string)
        .collect()
}

/// The library for `prefix`, made on first use and kept for the life of the process.
pub(crate) fn library(prefix: &str) -> Result<Arc<Library>> {
    let mut libs = LIBRARIES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(lib) = libs.get(prefix) {
        return Ok(Arc::clone(lib));
    }
    if lookup(prefix, BLOB_NAME).is_none() {
        return Err(Error::Load {
            path: label(prefix),
            message: prefixes_message(prefix),
        });
    }
    let lib = Library::open_system_lib(prefix, kernels(prefix));
    libs.insert(prefix.to_string(), Arc::clone(&lib));
    Ok(lib)
}

/// How a system library is named where a path would be (`Model::path`).
pub(crate) fn label(prefix: &str) -> PathBuf {
    PathBuf::from(format!("<system-lib {prefix}>"))
}

fn prefixes_message(prefix: &str) -> String {
    let known = prefixes();
    let known = if known.is_empty() {
        "none".to_string()
    } else {
        known
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let rejected = match registry().rejected {
        0 => String::new(),
        n => format!("; {n} registration(s) with a NULL name or address were refused"),
    };
    format!(
        "no statically linked model with prefix `{prefix}` (registered prefixes: {known}{rejected}); \
         link the model's objects into the program, whole when they come from a static archive \
         (-Wl,--whole-archive on Linux and Android, -Wl,-force_load on Apple): docs/system-lib.md"
    )
}

/// The payload of a registered blob at `p` (docs/tvm-format.md §2.1). Its length field is
/// trusted: the blob is part of the program, put there by the linker, not bytes read from a
/// file, so there is no mapping to bound it by (unlike `Library::open`'s blobs).
///
/// # Safety
/// `p` is the address a system library registered for its blob: an 8-byte length followed by
/// that many bytes, valid for `'a`.
pub(crate) unsafe fn linked_blob<'a>(p: *const u8) -> Result<&'a [u8]> {
    let mut len = [0u8; BLOB_LENGTH_BYTES];
    // SAFETY: the blob starts with its 8-byte length (it may be unaligned).
    unsafe { std::ptr::copy_nonoverlapping(p, len.as_mut_ptr(), BLOB_LENGTH_BYTES) };
    let total = usize::try_from(u64::from_le_bytes(len))
        .ok()
        .and_then(|n| n.checked_add(BLOB_LENGTH_BYTES))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| Error::Format(format!("{BLOB_NAME} claims an impossible length")))?;
    // SAFETY: the caller promises `total` readable bytes for 'a (the length is trusted, see
    // above).
    let bytes = unsafe { std::slice::from_raw_parts(p, total) };
    crate::loader::library::blob_payload(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(name: &CStr, ptr: *mut c_void) -> i32 {
        // SAFETY: a C string.
        unsafe { TVMFFIEnvModRegisterSystemLibSymbol(name.as_ptr(), ptr) }
    }

    #[test]
    fn lookup_takes_the_prefixed_name_then_the_plain_one_for_kernels_only() {
        let (a, b, c) = (
            0x1000 as *mut c_void,
            0x2000 as *mut c_void,
            0x3000 as *mut c_void,
        );
        assert_eq!(register(c"__tvm_ffi_unit_t1_k", a), 0);
        assert_eq!(register(c"unit_t1___tvm_ffi__library_ctx", b), 0);
        assert_eq!(register(c"__tvm_ffi__library_ctx", c), 0);
        assert_eq!(lookup("unit_t1_", "__tvm_ffi_unit_t1_k"), Some(a));
        assert_eq!(lookup("unit_t1_", "__tvm_ffi__library_ctx"), Some(b));
        assert_eq!(lookup("unit_t2_", "__tvm_ffi__library_ctx"), None);
        assert_eq!(lookup("", "__tvm_ffi__library_ctx"), Some(c));
        // Registering again replaces the address.
        assert_eq!(register(c"__tvm_ffi_unit_t1_k", c), 0);
        assert_eq!(lookup("unit_t1_", "__tvm_ffi_unit_t1_k"), Some(c));
        assert!(kernels("unit_t1_").contains(&"unit_t1_k".to_string()));
    }

    #[test]
    fn null_registrations_are_refused_and_unknown_prefixes_are_load_errors() {
        // SAFETY: NULL name is allowed by the contract.
        let r = unsafe { TVMFFIEnvModRegisterSystemLibSymbol(std::ptr::null(), 8 as *mut c_void) };
        assert_eq!(r, -1);
        assert!(crate::host::error_slot::take_error().is_some());
        assert_eq!(register(c"unit_null", std::ptr::null_mut()), -1);
        match library("unit_nosuch_") {
            Err(Error::Load { path, message }) => {
                assert_eq!(path, PathBuf::from("<system-lib unit_nosuch_>"));
                assert!(message.contains("unit_nosuch_"), "{message}");
                assert!(message.contains("refused"), "{message}");
            }
            Err(e) => panic!("wrong error {e}"),
            Ok(_) => panic!("an unknown prefix loaded"),
        }
    }

    #[test]
    fn linked_blob_lengths_are_checked_against_their_payload_and_limits() {
        let mut b = 3u64.to_le_bytes().to_vec();
        b.extend_from_slice(b"abc");
        // SAFETY: both are a length and (for `b`) that many bytes, alive for the calls.
        unsafe {
            assert_eq!(linked_blob(b.as_ptr()).unwrap(), b"abc");
            let huge = u64::MAX.to_le_bytes();
            assert!(linked_blob(huge.as_ptr()).is_err());
        }
    }
}
