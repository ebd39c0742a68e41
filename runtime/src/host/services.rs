//! The services compiled kernels call back into: workspace memory, packed-function lookup and
//! calls, one-time handle initialization (docs/tvm-format.md §8). Errors go through
//! `error_slot`; parallel launch lives in `threadpool`.
//!
//! These are `extern "C"` functions whose addresses the loader writes into each model
//! library's context slots; none of them may unwind into the kernel.

use std::cell::RefCell;
use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::Mutex;

use super::error_slot::{c_boundary, lossy, set_error};
use crate::host::abi::{type_index as ti, DLTensor, FfiAny, SafeCallFn};
use crate::tensor::{Storage, Tensor, ALIGNMENT};
use crate::value::{Arg, Value};

// ---- workspace ----------------------------------------------------------------------------

/// Each workspace block starts with a 64-byte header holding its size, so the block after it
/// stays 64-byte aligned. Freed blocks are kept in a small per-thread cache: kernels allocate
/// and free the same sizes on every call, in LIFO order.
const HEADER: usize = ALIGNMENT;
const CACHE_SLOTS: usize = 8;

struct WorkspaceCache(Vec<(usize, NonNull<u8>)>);

impl Drop for WorkspaceCache {
    fn drop(&mut self) {
        for (size, p) in self.0.drain(..) {
            if let Some(l) = workspace_layout(size) {
                // SAFETY: every cached block was allocated with the layout of its recorded size.
                unsafe { std::alloc::dealloc(p.as_ptr(), l) };
            }
        }
    }
}

thread_local! {
    static WORKSPACE_CACHE: RefCell<WorkspaceCache> = const { RefCell::new(WorkspaceCache(Vec::new())) };
}

fn workspace_layout(total: usize) -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(total, ALIGNMENT).ok()
}

/// `TVMBackendAllocWorkspace`.
pub(crate) unsafe extern "C" fn alloc_workspace(
    dev_type: i32,
    _dev_id: i32,
    nbytes: u64,
    _code: i32,
    _bits: i32,
) -> *mut c_void {
    if dev_type == crate::device::opencl::exec::DEVICE_OPENCL {
        // Device memory for a library compiled for OpenCL (docs/tvm-format.md §10.5).
        return c_boundary("TVMBackendAllocWorkspace", std::ptr::null_mut(), || {
            crate::device::opencl::exec::alloc_workspace(nbytes).unwrap_or_else(|m| {
                set_error("MemoryError", &format!("TVMBackendAllocWorkspace: {m}"));
                std::ptr::null_mut()
            })
        });
    }
    let r = catch_unwind(|| {
        let total = usize::try_from(nbytes).ok()?.checked_add(HEADER)?;
        let cached = WORKSPACE_CACHE.with(|c| {
            let c = &mut c.borrow_mut().0;
            let pos = c.iter().rposition(|&(size, _)| size == total)?;
            Some(c.swap_remove(pos).1)
        });
        let base = match cached {
            Some(p) => p.as_ptr(),
            // SAFETY: the layout has a non-zero size (at least HEADER).
            None => unsafe { std::alloc::alloc(workspace_layout(total)?) },
        };
        if base.is_null() {
            return None;
        }
        // SAFETY: the block is at least HEADER bytes and 64-byte aligned.
        unsafe {
            base.cast::<usize>().write(total);
            Some(base.add(HEADER).cast::<c_void>())
        }
    });
    match r {
        Ok(Some(p)) => p,
        _ => {
            set_error(
                "MemoryError",
                &format!("cannot allocate a workspace of {nbytes} bytes"),
            );
            std::ptr::null_mut()
        }
    }
}

/// `TVMBackendFreeWorkspace`.
pub(crate) unsafe extern "C" fn free_workspace(
    dev_type: i32,
    _dev_id: i32,
    ptr: *mut c_void,
) -> i32 {
    c_boundary("TVMBackendFreeWorkspace", -1, || {
        if ptr.is_null() {
            return 0;
        }
        if dev_type == crate::device::opencl::exec::DEVICE_OPENCL {
            return match crate::device::opencl::exec::free_workspace(ptr) {
                Ok(()) => 0,
                Err(m) => {
                    set_error("MemoryError", &format!("TVMBackendFreeWorkspace: {m}"));
                    -1
                }
            };
        }
        // SAFETY: `ptr` came from `alloc_workspace`, so a header with the block size precedes it.
        let (base, total) = unsafe {
            let base = ptr.cast::<u8>().sub(HEADER);
            (base, base.cast::<usize>().read())
        };
        if workspace_layout(total).is_none() {
            set_error(
                "MemoryError",
                "TVMBackendFreeWorkspace: corrupted workspace block",
            );
            return -1;
        }
        let spilled = WORKSPACE_CACHE.with(|c| {
            let c = &mut c.borrow_mut().0;
            // SAFETY: base is non-NULL (ptr was non-NULL and HEADER bytes past it).
            c.push((total, unsafe { NonNull::new_unchecked(base) }));
            if c.len() > CACHE_SLOTS {
                Some(c.remove(0))
            } else {
                None
            }
        });
        if let Some((size, p)) = spilled {
            if let Some(l) = workspace_layout(size) {
                // SAFETY: every cached block was allocated with the layout of its recorded size.
                unsafe { std::alloc::dealloc(p.as_ptr(), l) };
            }
        }
        0
    })
}

// ---- packed functions called from kernels ---------------------------------------------------

/// What a kernel gets back from `TVMFFIEnvModLookupFromImports`: an opaque handle it only
/// passes to `TVMFFIFunctionCall`.
pub(crate) enum EnvFunction {
    Kernel(SafeCallFn),
    /// Bound late, by name, at every call: re-registering a function takes effect at once and
    /// a replaced registration is released. (The handle lives as long as the library is
    /// mapped, see `Library::env_function`.)
    Registered {
        name: String,
    },
    /// A kernel of the library's `opencl` module (docs/tvm-format.md §10.5).
    OpenClKernel {
        module: std::sync::Arc<crate::loader::opencl_module::OpenClModule>,
        index: usize,
    },
    /// `__tvm_set_device`, for a library with an `opencl` module.
    SetDevice,
    /// A VM builtin, for the native code of compiled Relax functions (`vm::compiled`).
    VmBuiltin(crate::vm::builtins::Builtin),
}

/// Convert one kernel-side argument into a value. Tensors become views of the kernel's memory
/// with no owner: they stay inside `function_call`, which lends them to the registered function
/// only as `Arg::Tensor` (a `TensorRef` bound to the call) and drops them before returning.
///
/// # Safety
/// Pointer payloads must be valid as the type index says.
unsafe fn any_to_value(a: &FfiAny) -> Result<Value, String> {
    Ok(match a.type_index {
        ti::NONE => Value::None,
        ti::INT => Value::Int(a.value as i64),
        ti::BOOL => Value::Bool(a.value != 0),
        ti::FLOAT => Value::Float(f64::from_bits(a.value)),
        ti::OPAQUE_PTR => Value::OpaquePtr(a.value as usize),
        ti::DATA_TYPE => Value::DType(crate::host::abi::unpack_dtype(a.value)),
        ti::RAW_STR => Value::Str(lossy(a.as_ptr() as *const c_char).into()),
        ti::DL_TENSOR_PTR | ti::TENSOR => {
            let p = if a.type_index == ti::TENSOR {
                let header = crate::host::abi::OBJECT_HEADER_BYTES;
                // SAFETY: a Tensor object keeps its DLTensor right after the object header
                // (docs/tvm-format.md §6.5); the caller guarantees a live object.
                unsafe { a.as_ptr().cast::<u8>().add(header).cast::<DLTensor>() }
            } else {
                a.as_ptr().cast::<DLTensor>()
            };
            // SAFETY: the caller guarantees a valid DLTensor for this type index.
            let t = unsafe { p.as_ref() }.ok_or("NULL tensor")?;
            if t.ndim < 0 || (t.ndim > 0 && t.shape.is_null()) {
                return Err("malformed DLTensor".into());
            }
            // SAFETY: `shape` has `ndim` entries.
            let shape = unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }.to_vec();
            let len = crate::tensor::byte_size(&shape, t.dtype).map_err(|e| e.to_string())?;
            let data = NonNull::new(t.data.cast::<u8>())
                .ok_or("tensor with NULL data")?
                .as_ptr()
                .wrapping_add(t.byte_offset as usize);
            // SAFETY: the kernel keeps this memory valid while its call to a registered
            // function runs; the storage never leaves `function_call` (the callee only sees a
            // `TensorRef` borrowing it), which drops it before returning to the kernel.
            let storage = unsafe { Storage::borrowed(NonNull::new_unchecked(data), len, None) };
            Value::Tensor(Tensor::view(storage, 0, shape, t.dtype).map_err(|e| e.to_string())?)
        }
        t => return Err(format!("unsupported argument type index {t}")),
    })
}

fn value_to_result(v: &Value) -> Result<FfiAny, String> {
    Ok(match *v {
        Value::None => FfiAny::NONE,
        Value::Int(i) => FfiAny::int(i),
        Value::Bool(b) => FfiAny::bool(b),
        Value::Float(f) => FfiAny::float(f),
        Value::OpaquePtr(p) => FfiAny::ptr(ti::OPAQUE_PTR, p as *const c_void),
        Value::DType(d) => FfiAny::dtype(d),
        ref v => return Err(format!("cannot return a {} to a kernel", v.kind())),
    })
}

/// `TVMFFIFunctionCall`.
pub(crate) unsafe extern "C" fn function_call(
    handle: *mut c_void,
    args: *const FfiAny,
    n: i32,
    result: *mut FfiAny,
) -> i32 {
    c_boundary("TVMFFIFunctionCall", -1, || {
        if handle.is_null() || (n > 0 && args.is_null()) || result.is_null() {
            set_error(
                "ValueError",
                "TVMFFIFunctionCall: NULL handle, arguments or result",
            );
            return -1;
        }
        // SAFETY: handles are only made by `env_lookup`, and stay valid while the library of
        // the kernel calling with one is mapped (`Library::env_function`).
        let f = unsafe { &*(handle as *const EnvFunction) };
        match f {
            // SAFETY: forwarding the kernel's own arguments to another kernel of the same library.
            EnvFunction::Kernel(k) => unsafe { k(std::ptr::null_mut(), args, n, result) },
            // SAFETY: `args` has `n` items (checked non-NULL when n > 0), `result` is non-NULL.
            EnvFunction::VmBuiltin(b) => unsafe {
                crate::vm::compiled::call_builtin(*b, args, n, result)
            },
            EnvFunction::OpenClKernel { .. } | EnvFunction::SetDevice => {
                let raw = if n > 0 {
                    // SAFETY: checked non-NULL above; the caller passes `n` values.
                    unsafe { std::slice::from_raw_parts(args, n as usize) }
                } else {
                    &[]
                };
                let r = match f {
                    EnvFunction::OpenClKernel { module, index } => {
                        crate::device::opencl::exec::launch(module, *index, raw)
                    }
                    _ => crate::device::opencl::exec::set_device(raw),
                };
                match r {
                    Ok(()) => {
                        // SAFETY: checked non-NULL above.
                        unsafe { *result = FfiAny::NONE };
                        0
                    }
                    Err(m) => {
                        set_error("RuntimeError", &m);
                        -1
                    }
                }
            }
            EnvFunction::Registered { name } => {
                let r = catch_unwind(AssertUnwindSafe(|| -> Result<FfiAny, String> {
                    let f = crate::registry::lookup_function(name)
                        .ok_or_else(|| "the function is no longer registered".to_string())?;
                    let raw = if n > 0 {
                        // SAFETY: checked non-NULL above; the caller passes `n` values.
                        unsafe { std::slice::from_raw_parts(args, n as usize) }
                    } else {
                        &[]
                    };
                    // A compiled Relax function's cells are read back as the values they
                    // hold; anything else is a kernel's argument.
                    let vals = raw
                        .iter()
                        .map(|a| match crate::vm::compiled::registered_arg(a) {
                            Some(v) => Ok(v),
                            // SAFETY: values come from generated code and follow the FFI
                            // conventions.
                            None => unsafe { any_to_value(a) },
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let args: Vec<Arg<'_>> = vals.iter().map(Arg::from_value).collect();
                    let out = f(&args).map_err(|e| e.to_string())?;
                    value_to_result(&out)
                        .or_else(|e| crate::vm::compiled::registered_result(&out).unwrap_or(Err(e)))
                }));
                match r {
                    Ok(Ok(v)) => {
                        // SAFETY: checked non-NULL above.
                        unsafe { *result = v };
                        0
                    }
                    Ok(Err(m)) => {
                        set_error("RuntimeError", &format!("{name}: {m}"));
                        -1
                    }
                    Err(_) => {
                        set_error("RuntimeError", &format!("{name}: panicked"));
                        -1
                    }
                }
            }
        }
    })
}

/// `TVMFFIEnvModLookupFromImports`: resolve `name` for a kernel of the library whose context
/// pointer is `ctx` (a `Library`): the library's own kernels first, then registered functions.
pub(crate) unsafe extern "C" fn env_lookup(
    ctx: *mut c_void,
    name: *const c_char,
    out: *mut *mut c_void,
) -> i32 {
    c_boundary("TVMFFIEnvModLookupFromImports", -1, || {
        if ctx.is_null() || name.is_null() || out.is_null() {
            set_error("ValueError", "TVMFFIEnvModLookupFromImports: NULL argument");
            return -1;
        }
        let name = lossy(name);
        let r = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the loader stores a pointer to the live `Library` in the context slot.
            let lib = unsafe { &*(ctx as *const crate::loader::library::Library) };
            lib.env_function(&name)
        }));
        match r {
            Ok(Some(h)) => {
                // SAFETY: `out` checked non-NULL.
                unsafe { *out = h.as_ptr().cast::<c_void>() };
                0
            }
            _ => {
                set_error(
                    "RuntimeError",
                    &format!(
                        "function `{name}` is neither in the model library nor registered with Mote"
                    ),
                );
                -1
            }
        }
    })
}

static INIT_ONCE: Mutex<()> = Mutex::new(());

/// `TVMFFIHandleInitOnce`.
pub(crate) unsafe extern "C" fn handle_init_once(
    handle: *mut *mut c_void,
    init: Option<unsafe extern "C" fn(*mut *mut c_void) -> i32>,
) -> i32 {
    c_boundary("TVMFFIHandleInitOnce", -1, || {
        if handle.is_null() {
            set_error("ValueError", "TVMFFIHandleInitOnce: NULL handle");
            return -1;
        }
        let slot = handle as *const std::sync::atomic::AtomicPtr<c_void>;
        // SAFETY: the slot is a pointer-sized, pointer-aligned static of the kernel library.
        let slot = unsafe { &*slot };
        if !slot.load(std::sync::atomic::Ordering::Acquire).is_null() {
            return 0;
        }
        let _g = INIT_ONCE.lock();
        if !slot.load(std::sync::atomic::Ordering::Acquire).is_null() {
            return 0;
        }
        let Some(init) = init else {
            set_error("ValueError", "TVMFFIHandleInitOnce: NULL init function");
            return -1;
        };
        let mut tmp: *mut c_void = std::ptr::null_mut();
        // SAFETY: generated init functions take a pointer to write the handle to.
        if unsafe { init(&mut tmp) } != 0 {
            return -1;
        }
        if tmp.is_null() {
            set_error(
                "RuntimeError",
                "TVMFFIHandleInitOnce: init returned a NULL handle",
            );
            return -1;
        }
        slot.store(tmp, std::sync::atomic::Ordering::Release);
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_is_aligned_and_reused() {
        // SAFETY: every block is freed once, after use within its size.
        unsafe {
            let a = alloc_workspace(1, 0, 262_144, 2, 32);
            assert!(!a.is_null());
            assert_eq!(a as usize % 64, 0);
            std::ptr::write_bytes(a.cast::<u8>(), 7, 262_144);
            assert_eq!(free_workspace(1, 0, a), 0);
            let b = alloc_workspace(1, 0, 262_144, 2, 32);
            assert_eq!(a, b);
            assert_eq!(free_workspace(1, 0, b), 0);
            for i in 0..20 {
                let p = alloc_workspace(1, 0, 100 + i, 2, 32);
                assert_eq!(p as usize % 64, 0);
                assert_eq!(free_workspace(1, 0, p), 0);
            }
        }
    }
}
