//! C callbacks registered as named functions the VM (and model kernels) can call.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void, CString};
use std::ptr;
use std::sync::{Arc, Mutex, Weak};

use mote::{Arg, Storage, Tensor, Value};

use crate::error::{guard, str_arg, MoteError, MoteErrorCode};
use crate::tensor::{Loan, MoteTensor, TENSORS};

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
/// lent for the duration of the callback and released by Mote when it returns.
///
/// `tensor` is a lent handle: its memory may belong to the kernel that made the call (a
/// scratch buffer, an output) and be reused or freed as soon as the callback returns. Read and
/// write it through `mote_tensor_info(...).data` during the call (writes reach the kernel's
/// buffer: that is how destination-passing outputs are produced). To keep its contents, use
/// `mote_tensor_clone`, which for a lent handle makes a deep copy owned by the new handle;
/// passed as an input to `mote_session_run` or `mote_session_set_input`, it is copied too (a
/// kernel of a kernel-only library refuses it, since its writes would go to the copy). Do
/// not keep `data`, `shape` or the handle itself beyond the call. `string` and `pointer` are
/// likewise valid only during the call.
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
/// return a tensor, store a handle you created in `*result` (Mote takes ownership; a lent
/// argument handle stored there is returned as a copy); leave it NULL to return nothing.
/// Called from whichever thread runs the session (or one of its worker threads), possibly
/// several at once: `user_data` must be safe to share between threads.
///
/// The callback must return normally: a C++ exception or a `longjmp` must not leave it (that
/// would unwind through Mote's frames, which is undefined behaviour). Catch everything inside
/// and return an error made with `mote_error_new` instead.
///
/// A callback may call Mote, with one limit: a session is never re-entered. Calling the
/// session that is running this callback gives `MOTE_ERROR_CODE_BUSY`, as does calling any
/// session another thread is running (a callback does not wait for a session).
pub type MoteFunctionCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        args: *const MoteArg,
        num_args: usize,
        result: *mut *mut MoteTensor,
    ) -> *mut MoteError,
>;

/// Called once to release the `user_data` of a registration when it is no longer used (see
/// `mote_function_register`), with no lock of Mote's held: it may call Mote. Must return
/// normally (no C++ exception, no `longjmp`).
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
            crate::callback::embedder(|| unsafe { free(self.user_data as *mut c_void) })
        }
    }
}

/// A tensor handle over the memory of a lent tensor, without copying (the callback may write
/// a destination-passing output through it). Wrapped in a `Loan` at once, so keeping it copies.
fn lend(t: mote::TensorRef<'_>) -> mote::Result<Tensor> {
    let data = std::ptr::NonNull::new(t.data_ptr())
        .ok_or_else(|| mote::Error::InvalidArgument("a lent tensor with NULL data".into()))?;
    // SAFETY: the memory is valid for `byte_len` bytes while the callback runs; the only
    // handle over this storage is a `Loan`, which `Lent` ends before `Registration::call`
    // returns (a kept handle is a deep copy, see `Loan`).
    let storage = unsafe { Storage::borrowed(data, t.byte_len(), None) };
    Tensor::view(storage, 0, t.shape(), t.dtype())
}

/// Handles and strings lent to one callback invocation, released when it returns (dropping a
/// `Loan` frees its handle and ends the loan).
struct Lent {
    _tensors: Vec<Loan>,
    _strings: Vec<CString>,
}

impl Registration {
    fn call(&self, args: &[Arg<'_>]) -> mote::Result<Value> {
        let fail = |message: String| mote::Error::Callback {
            name: self.name.clone(),
            message,
        };
        let mut lent = Lent {
            _tensors: Vec::new(),
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
            match a {
                Arg::None => arg.kind = MoteArgKind::None as u32,
                Arg::Int(i) => (arg.kind, arg.int_value) = (MoteArgKind::Int as u32, *i),
                Arg::Bool(b) => (arg.kind, arg.int_value) = (MoteArgKind::Bool as u32, *b as i64),
                Arg::Float(f) => (arg.kind, arg.float_value) = (MoteArgKind::Float as u32, *f),
                Arg::OpaquePtr(p) => {
                    (arg.kind, arg.pointer) = (MoteArgKind::Pointer as u32, *p as *mut c_void)
                }
                Arg::Str(s) => {
                    let c = CString::new(s.replace('\0', "")).unwrap_or_default();
                    arg.kind = MoteArgKind::String as u32;
                    arg.string = c.as_ptr();
                    lent._strings.push(c);
                }
                Arg::Tensor(t) => {
                    // Every tensor argument is lent, whether a kernel's view (valid only during
                    // the call) or a VM tensor (whose storage the VM may reuse for another
                    // tensor later in the same function): keeping one copies it.
                    let loan = Loan::new(lend(*t).map_err(|e| fail(e.to_string()))?)
                        .map_err(|e| fail(e.message.to_string_lossy().into_owned()))?;
                    arg.kind = MoteArgKind::Tensor as u32;
                    arg.tensor = loan.handle();
                    lent._tensors.push(loan);
                }
                _ => {}
            }
            c_args.push(arg);
        }
        let mut result: *mut MoteTensor = ptr::null_mut();
        // SAFETY: the registrant promised a function of this signature, callable from any
        // thread with its user data; the arguments live until `lent` drops after the call.
        let err = crate::callback::embedder(|| unsafe {
            (self.callback)(
                self.user_data as *mut c_void,
                c_args.as_ptr(),
                c_args.len(),
                &mut result,
            )
        });
        // Take the result before the loans end: a lent handle stored there is kept as a copy.
        let returned = TENSORS
            .remove(result)
            .and_then(|e| e.map(|e| e.keep()).transpose());
        drop(lent);
        if !err.is_null() {
            // SAFETY: a non-NULL error comes from `mote_error_new`; ownership passes to us.
            let e = unsafe { Box::from_raw(err) };
            return Err(fail(e.message.to_string_lossy().into_owned()));
        }
        match returned {
            Ok(Some(t)) => Ok(Value::Tensor(t)),
            Ok(None) => Ok(Value::None),
            Err(e) => Err(fail(format!(
                "the callback stored an invalid result handle: {}",
                e.message.to_string_lossy()
            ))),
        }
    }
}

/// Register `callback` under `name` (process-wide), replacing any function of that name.
///
/// Models reach it by name in two ways, bound at different times:
/// - a kernel's lookup of a global function (TIR `T.call_packed`) is bound late, by name, at
///   each call: a new registration takes effect at once, even for models already loaded, and
///   a call made while nothing is registered fails with `MOTE_ERROR_CODE_KERNEL`;
/// - a call the model's bytecode makes itself (Relax `R.call_packed` / `R.call_dps_packed`) is
///   resolved when the model is loaded: register before `mote_model_load` (a missing function
///   fails the load with `MOTE_ERROR_CODE_MISSING_FUNCTIONS`), and a loaded model keeps
///   calling the registration it resolved, even after it is replaced or removed.
///
/// `free_user_data` (may be NULL) is called once, to release `user_data`, when the
/// registration is no longer used: replaced or removed, no call to it running, and every
/// model that resolved it at load freed (sessions keep their model).
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
        let replaced = {
            let mut ours = registered();
            let replaced = ours.get(name).and_then(Weak::upgrade);
            ours.insert(name.to_string(), Arc::downgrade(&reg));
            mote::register_function(name, Arc::new(move |args: &[Arg<'_>]| reg.call(args)));
            replaced
        };
        // Released here, outside every lock (see `REGISTERED`).
        drop(replaced);
        Ok(())
    })
}

/// The registrations made through this API, by name. Weak: the runtime's registry (and the
/// models that resolved a registration) own them. A replaced or removed registration is held
/// here, strongly, across the registry update, so that the registry drops its reference under
/// its lock without releasing the registration; the last reference then goes, and
/// `free_user_data` runs, after every lock is released. A free callback may call Mote (register
/// again, load a model): under the registry's lock that would deadlock.
static REGISTERED: Mutex<BTreeMap<String, Weak<Registration>>> = Mutex::new(BTreeMap::new());

fn registered() -> std::sync::MutexGuard<'static, BTreeMap<String, Weak<Registration>>> {
    REGISTERED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Remove the function registered under `name`; `*existed` (may be NULL) says whether there
/// was one. Kernel lookups fail from the next call on; models that resolved the function at
/// load keep calling it (see `mote_function_register`).
#[no_mangle]
pub unsafe extern "C" fn mote_function_unregister(
    name: *const c_char,
    existed: *mut bool,
) -> *mut MoteError {
    guard(|| {
        let name = str_arg(name, "name")?;
        let (found, removed) = {
            let mut ours = registered();
            let removed = ours.remove(name).and_then(|w| w.upgrade());
            (mote::unregister_function(name), removed)
        };
        // Released here, outside every lock (see `REGISTERED`).
        drop(removed);
        if !existed.is_null() {
            crate::error::write_out(existed, found);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    //! Lent tensors without a model: a `Registration` called directly with a tensor that views
    //! memory the test owns, as a kernel's argument views the kernel's memory. The C suite
    //! (`tests/c/test_callbacks.c`) covers the same through real kernels and the VM.
    use super::*;
    use crate::tensor::{
        mote_tensor_clone, mote_tensor_free, mote_tensor_info, mote_tensor_new, MoteDtype,
        MoteTensorInfo,
    };
    use mote::DType;
    use std::ptr::NonNull;

    #[derive(Default)]
    struct Seen {
        lent: usize,
        lent_data: usize,
        kept: usize,
        as_result: bool,
    }

    fn info(t: *const MoteTensor) -> std::result::Result<MoteTensorInfo, u32> {
        let mut out = std::mem::MaybeUninit::<MoteTensorInfo>::uninit();
        // SAFETY: `out` is writable; `t` is checked by the table.
        let err = unsafe { mote_tensor_info(t, out.as_mut_ptr()) };
        if err.is_null() {
            // SAFETY: written on success.
            Ok(unsafe { out.assume_init() })
        } else {
            // SAFETY: an error returned by Mote, freed here.
            let code = unsafe { Box::from_raw(err) }.code;
            Err(code)
        }
    }

    fn floats(i: &MoteTensorInfo) -> Vec<f32> {
        // SAFETY: a live f32 tensor of `byte_size` bytes.
        unsafe { std::slice::from_raw_parts(i.data.cast::<f32>(), i.byte_size / 4) }.to_vec()
    }

    /// Writes 42 into element 0 through the lent data pointer, then keeps a clone (or stores
    /// the lent handle as its result). No panics here: this is called through `extern "C"`.
    unsafe extern "C" fn keep(
        user_data: *mut c_void,
        args: *const MoteArg,
        n: usize,
        result: *mut *mut MoteTensor,
    ) -> *mut MoteError {
        let fail = |m: &str| MoteError::new(MoteErrorCode::Mismatch, m).into_raw();
        // SAFETY: the test passes a `Seen` and Mote passes `n` arguments.
        let (seen, args) = unsafe {
            (
                &mut *user_data.cast::<Seen>(),
                std::slice::from_raw_parts(args, n),
            )
        };
        if n != 1 || args[0].kind != MoteArgKind::Tensor as u32 {
            return fail("expected one tensor");
        }
        let Ok(i) = info(args[0].tensor) else {
            return fail("the lent tensor is not live during the call");
        };
        // SAFETY: the lent tensor's memory (16 floats) is writable during the call.
        unsafe { *i.data.cast::<f32>() = 42.0 };
        seen.lent = args[0].tensor as usize;
        seen.lent_data = i.data as usize;
        if seen.as_result {
            // SAFETY: `result` is Mote's out-param for this call.
            unsafe { *result = args[0].tensor };
            return ptr::null_mut();
        }
        let mut kept = ptr::null_mut();
        // SAFETY: valid handle and out-param; an error is handed back to Mote as ours.
        let err = unsafe { mote_tensor_clone(args[0].tensor, &mut kept) };
        seen.kept = kept as usize;
        err
    }

    /// A [16] f32 tensor viewing `buf`, as `services.rs` views a kernel's DLTensor.
    fn view_of(buf: &mut [f32; 16]) -> Tensor {
        let p = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: the test keeps `buf` alive and unmoved until after the call.
        let storage = unsafe { Storage::borrowed(p, 64, None) };
        Tensor::view(storage, 0, vec![16], DType::F32).unwrap()
    }

    fn registration(seen: &mut Seen) -> Registration {
        Registration {
            name: "test.keep".into(),
            callback: keep,
            user_data: seen as *mut Seen as usize,
            free: None,
        }
    }

    #[test]
    fn a_kept_lent_tensor_is_a_copy_that_outlives_the_lent_memory() {
        let mut seen = Seen::default();
        let reg = registration(&mut seen);
        let mut buf = Box::new([0f32; 16]);
        for (i, v) in buf.iter_mut().enumerate() {
            *v = i as f32 + 0.5;
        }
        let r = reg
            .call(&[Arg::from_value(&Value::Tensor(view_of(&mut buf)))])
            .unwrap();
        assert!(matches!(r, Value::None));
        drop(reg);
        // The write through the lent data pointer reached the lender's memory.
        assert_eq!(buf[0], 42.0);
        assert_eq!(seen.lent_data, buf.as_ptr() as usize);
        // Poison and free the lent memory: the clone does not depend on it.
        buf.fill(f32::NAN);
        drop(buf);
        let kept = info(seen.kept as *const MoteTensor).unwrap();
        assert_ne!(kept.data as usize, seen.lent_data);
        assert_eq!(kept.byte_size, 64);
        let mut want: Vec<f32> = (0..16).map(|i| i as f32 + 0.5).collect();
        want[0] = 42.0;
        assert_eq!(floats(&kept), want);
        // The lent handle ended with the call.
        assert_eq!(
            info(seen.lent as *const MoteTensor).err(),
            Some(MoteErrorCode::InvalidHandle as u32)
        );
        // SAFETY: a handle the callback created and handed over.
        unsafe { mote_tensor_free(seen.kept as *mut MoteTensor) };
    }

    #[test]
    fn a_lent_handle_stored_as_the_result_comes_back_as_a_copy() {
        let mut seen = Seen {
            as_result: true,
            ..Seen::default()
        };
        let reg = registration(&mut seen);
        let mut buf = Box::new([7f32; 16]);
        let r = reg
            .call(&[Arg::from_value(&Value::Tensor(view_of(&mut buf)))])
            .unwrap();
        let Value::Tensor(t) = r else {
            panic!("expected a tensor")
        };
        assert_ne!(t.data_ptr() as usize, buf.as_ptr() as usize);
        buf.fill(0.0);
        let mut want = [7f32; 16];
        want[0] = 42.0;
        assert_eq!(t.as_slice::<f32>().unwrap(), &want[..]);
    }

    #[test]
    fn a_lent_tensor_cannot_be_copied_once_the_loan_ended() {
        let mut buf = Box::new([1f32; 16]);
        let loan = Loan::new(view_of(&mut buf)).unwrap();
        // A thread that looked the handle up before the loan ended still holds the entry.
        let entry = TENSORS.get(loan.handle()).unwrap();
        assert_eq!(
            entry.keep().unwrap().as_slice::<f32>().unwrap(),
            &[1f32; 16]
        );
        drop(loan);
        let e = entry.keep().expect_err("copy after the loan ended");
        assert_eq!(e.code, MoteErrorCode::InvalidHandle as u32);
    }

    #[test]
    fn a_clone_of_an_ordinary_tensor_shares_its_memory() {
        let f32_ = MoteDtype {
            code: 2,
            bits: 32,
            lanes: 1,
        };
        let (mut t, mut c) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: valid arguments and out-params.
        unsafe {
            assert!(mote_tensor_new(f32_, [4i64].as_ptr(), 1, &mut t).is_null());
            assert!(mote_tensor_clone(t, &mut c).is_null());
        }
        assert_eq!(info(t).unwrap().data, info(c).unwrap().data);
        // SAFETY: handles made above.
        unsafe {
            mote_tensor_free(t);
            mote_tensor_free(c);
        }
    }
}
