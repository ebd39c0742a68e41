//! C callbacks registered as named functions the VM (and model kernels) can call.

use std::ffi::{c_char, c_void, CString};
use std::ptr;
use std::sync::Arc;

use mote::{Arg, Storage, Tensor, Value};

use crate::error::{guard, str_arg, MoteError, MoteErrorCode};
use crate::tensor::{MoteTensor, TENSORS};

/// Kinds of `MoteArg`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoteArgKind {
    None = 0,
    Int = 1,
    Float = 2,
    Bool = 3,
    Tensor = 4,
    /// An opaque pointer (for example a kernel's raw buffer).
    Pointer = 5,
    String = 6,
    /// Anything else (a function, a shape...): not representable in C.
    Other = 7,
}

/// One argument of a callback. Only the field matching `kind` is meaningful. Everything is
/// borrowed for the duration of the callback: `tensor` is freed by Mote after it returns (use
/// `mote_tensor_clone` to keep it), `string` likewise.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MoteArg {
    /// A `MoteArgKind` value.
    pub kind: u32,
    /// `Int` and `Bool` (0 or 1).
    pub int_value: i64,
    pub float_value: f64,
    pub pointer: *mut c_void,
    /// UTF-8, NUL-terminated.
    pub string: *const c_char,
    /// Output tensors of destination-passing calls are written through its data pointer.
    pub tensor: *mut MoteTensor,
}

/// A function implemented in C. Return NULL on success or an error made with
/// `mote_error_new` (Mote takes ownership and reports it as `MOTE_ERROR_CODE_CALLBACK`). To
/// return a tensor, store a handle you created in `*result` (Mote takes ownership); leave it
/// NULL to return nothing. Called from whichever thread runs the session, possibly several at
/// once: `user_data` must be safe to share between threads.
pub type MoteFunctionCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        args: *const MoteArg,
        num_args: usize,
        result: *mut *mut MoteTensor,
    ) -> *mut MoteError,
>;

/// Called once when a registration is replaced or removed, to release `user_data`.
pub type MoteFreeCallback = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

struct Registration {
    name: String,
    callback: unsafe extern "C" fn(
        *mut c_void,
        *const MoteArg,
        usize,
        *mut *mut MoteTensor,
    ) -> *mut MoteError,
    user_data: usize,
    free: MoteFreeCallback,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(free) = self.free {
            // SAFETY: the registrant asked for this to be called once, when the registration
            // ends; dropping the last reference is that moment.
            unsafe { free(self.user_data as *mut c_void) }
        }
    }
}

/// A tensor handle over the memory of a lent tensor, without copying (the callback may write
/// a destination-passing output through it).
fn lend(t: mote::TensorRef<'_>) -> mote::Result<Tensor> {
    let data = std::ptr::NonNull::new(t.data_ptr())
        .ok_or_else(|| mote::Error::InvalidArgument("a lent tensor with NULL data".into()))?;
    // SAFETY: the memory is valid for `byte_len` bytes while the callback runs; the handle made
    // from this storage is freed by `Lent` before `Registration::call` returns.
    let storage = unsafe { Storage::borrowed(data, t.byte_len(), None) };
    Tensor::view(storage, 0, t.shape(), t.dtype())
}

/// Handles and strings lent to one callback invocation, released when it returns.
struct Lent {
    tensors: Vec<*mut MoteTensor>,
    _strings: Vec<CString>,
}

impl Drop for Lent {
    fn drop(&mut self) {
        for &t in &self.tensors {
            TENSORS.free(t);
        }
    }
}

impl Registration {
    fn call(&self, args: &[Arg<'_>]) -> mote::Result<Value> {
        let fail = |message: String| mote::Error::Callback {
            name: self.name.clone(),
            message,
        };
        let mut lent = Lent {
            tensors: Vec::new(),
            _strings: Vec::new(),
        };
        let mut c_args = Vec::with_capacity(args.len());
        for a in args {
            let mut arg = MoteArg {
                kind: MoteArgKind::Other as u32,
                int_value: 0,
                float_value: 0.0,
                pointer: ptr::null_mut(),
                string: ptr::null(),
                tensor: ptr::null_mut(),
            };
            match *a {
                Arg::None => arg.kind = MoteArgKind::None as u32,
                Arg::Int(i) => (arg.kind, arg.int_value) = (MoteArgKind::Int as u32, i),
                Arg::Bool(b) => (arg.kind, arg.int_value) = (MoteArgKind::Bool as u32, b as i64),
                Arg::Float(f) => (arg.kind, arg.float_value) = (MoteArgKind::Float as u32, f),
                Arg::OpaquePtr(p) => {
                    (arg.kind, arg.pointer) = (MoteArgKind::Pointer as u32, p as *mut c_void)
                }
                Arg::Str(s) => {
                    let c = CString::new(s.replace('\0', "")).unwrap_or_default();
                    arg.kind = MoteArgKind::String as u32;
                    arg.string = c.as_ptr();
                    lent._strings.push(c);
                }
                Arg::Tensor(t) => {
                    let h = TENSORS
                        .insert(lend(t).map_err(|e| fail(e.to_string()))?)
                        .map_err(|e| fail(e.message.to_string_lossy().into_owned()))?;
                    arg.kind = MoteArgKind::Tensor as u32;
                    arg.tensor = h.cast();
                    lent.tensors.push(h.cast());
                }
                _ => {}
            }
            c_args.push(arg);
        }
        let mut result: *mut MoteTensor = ptr::null_mut();
        // SAFETY: the registrant promised a function of this signature, callable from any
        // thread with its user data; the arguments live until `lent` drops after the call.
        let err = unsafe {
            (self.callback)(
                self.user_data as *mut c_void,
                c_args.as_ptr(),
                c_args.len(),
                &mut result,
            )
        };
        drop(lent);
        let returned = TENSORS.remove(result);
        if !err.is_null() {
            // SAFETY: a non-NULL error comes from `mote_error_new`; ownership passes to us.
            let e = unsafe { Box::from_raw(err) };
            return Err(fail(e.message.to_string_lossy().into_owned()));
        }
        match returned {
            Ok(Some(t)) => Ok(Value::Tensor((*t).clone())),
            Ok(None) => Ok(Value::None),
            Err(e) => Err(fail(format!(
                "the callback stored an invalid result handle: {}",
                e.message.to_string_lossy()
            ))),
        }
    }
}

/// Register `callback` under `name` (process-wide), replacing any function of that name.
/// Models loaded afterwards can call it by name (TVM's `call_packed` / `call_dps_packed`, or a
/// kernel's function lookup). `free_user_data` (may be NULL) is called once when the
/// registration is replaced or removed.
#[no_mangle]
pub unsafe extern "C" fn mote_function_register(
    name: *const c_char,
    callback: MoteFunctionCallback,
    user_data: *mut c_void,
    free_user_data: MoteFreeCallback,
) -> *mut MoteError {
    guard(|| {
        let name = str_arg(name, "name")?;
        let Some(callback) = callback else {
            return Err(MoteError::null("callback"));
        };
        if name.is_empty() {
            return Err(MoteError::new(
                MoteErrorCode::InvalidArgument,
                "empty function name",
            ));
        }
        let reg = Arc::new(Registration {
            name: name.to_string(),
            callback,
            user_data: user_data as usize,
            free: free_user_data,
        });
        mote::register_function(name, Arc::new(move |args: &[Arg<'_>]| reg.call(args)));
        Ok(())
    })
}

/// Remove the function registered under `name`; `*existed` (may be NULL) says whether there
/// was one. Models already loaded keep the function they resolved.
#[no_mangle]
pub unsafe extern "C" fn mote_function_unregister(
    name: *const c_char,
    existed: *mut bool,
) -> *mut MoteError {
    guard(|| {
        let found = mote::unregister_function(str_arg(name, "name")?);
        if !existed.is_null() {
            crate::error::write_out(existed, found);
        }
        Ok(())
    })
}
