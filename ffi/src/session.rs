//! Sessions: running functions, the stateful API, profiling.

use std::ffi::{c_char, CString};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use mote::{InterruptHandle, Session, SessionOptions, Tensor, Value};

use crate::error::{check_out, guard, str_arg, write_out, MoteError, MoteErrorCode, Result};
use crate::handle::Table;
use crate::model::{MoteModel, MODELS};
use crate::tensor::{MoteTensor, MoteTensorList, TENSORS, TENSOR_LISTS};

/// Options for a new session (opaque handle; a builder). Any thread, one at a time.
pub struct MoteSessionOptions {
    _private: [u8; 0],
}

/// A VM session: registers, memory pool and worker threads for one model (opaque handle).
/// Calls on one session are serialized (a second thread waits); use one session per thread
/// to run in parallel. A session is never re-entered: a call from a callback of a running call
/// of the same session, or from a callback while another thread runs the session, fails with
/// `MOTE_ERROR_CODE_BUSY` instead of waiting (which would deadlock).
pub struct MoteSession {
    _private: [u8; 0],
}

/// Per-callee timings taken from a session (opaque handle).
pub struct MoteProfile {
    _private: [u8; 0],
}

/// One row of a profile. Strings are borrowed from the profile: valid until it is freed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MoteProfileEntry {
    /// The callee: a kernel, builtin, registered function or Relax function name.
    pub name: *const c_char,
    /// `"kernel"`, `"builtin"`, `"function"`, `"registered"`, ...
    pub kind: *const c_char,
    pub calls: u64,
    /// Total time in nanoseconds, including nested calls for Relax functions.
    pub total_ns: u64,
}

pub(crate) struct Profile {
    rows: Vec<(CString, CString, u64, u64)>,
}

static OPTIONS: Table<Mutex<SessionOptions>> = Table::new(0x4f, "MoteSessionOptions");
pub(crate) static SESSIONS: Table<FfiSession> = Table::new(0x53, "MoteSession");

/// A session's table entry: the session behind its lock, and beside it, outside the lock, the
/// session's interrupt handle, so that `mote_session_interrupt` never waits for a running call.
pub(crate) struct FfiSession {
    session: Exclusive<Session>,
    interrupt: InterruptHandle,
}

impl Deref for FfiSession {
    type Target = Exclusive<Session>;
    fn deref(&self) -> &Exclusive<Session> {
        &self.session
    }
}

static PROFILES: Table<Profile> = Table::new(0x50, "MoteProfile");

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A small number naming the current thread (never 0), for [`Exclusive`]'s owner field.
fn thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static NUMBER: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|n| *n)
}

/// A mutex that knows which thread holds it, so that a thread asking again (a callback of a
/// session call calling the same session) gets an error instead of a deadlock. Other threads
/// wait as with a plain mutex, except from inside an embedder callback, where waiting could
/// deadlock too (the holder may be waiting for that very callback, run on one of its worker
/// threads), so they get the error at once.
pub(crate) struct Exclusive<T> {
    value: Mutex<T>,
    /// `thread_number()` of the holder, 0 when free. Only the holder writes its own number
    /// (after locking) and clears it (before unlocking), so reading one's own number here
    /// proves one holds the lock.
    owner: AtomicU64,
}

pub(crate) struct ExclusiveGuard<'a, T> {
    guard: MutexGuard<'a, T>,
    owner: &'a AtomicU64,
}

impl<T> Drop for ExclusiveGuard<'_, T> {
    fn drop(&mut self) {
        // Runs before `guard` unlocks the mutex.
        self.owner.store(0, Ordering::Release);
    }
}

impl<T> Deref for ExclusiveGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for ExclusiveGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Exclusive<T> {
    pub(crate) fn new(value: T) -> Self {
        Exclusive {
            value: Mutex::new(value),
            owner: AtomicU64::new(0),
        }
    }

    pub(crate) fn lock(&self) -> Result<ExclusiveGuard<'_, T>> {
        let me = thread_number();
        if self.owner.load(Ordering::Acquire) == me {
            return Err(MoteError::new(
                MoteErrorCode::Busy,
                "the session is already running a call on this thread: a callback of that \
                 call cannot call the same session (calls on one session do not nest)",
            ));
        }
        let guard = if crate::callback::inside() {
            match self.value.try_lock() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    return Err(MoteError::new(
                        MoteErrorCode::Busy,
                        "the session is running a call on another thread, and a callback does \
                         not wait for a session (the session could be waiting for this \
                         callback); call it outside the callback, or use another session",
                    ))
                }
            }
        } else {
            lock(&self.value)
        };
        self.owner.store(me, Ordering::Release);
        Ok(ExclusiveGuard {
            guard,
            owner: &self.owner,
        })
    }
}

/// New session options with the defaults: threads = number of CPUs (or `MOTE_NUM_THREADS`),
/// every available backend in the default order.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_new(
    out: *mut *mut MoteSessionOptions,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        write_out(
            out,
            OPTIONS
                .insert(Mutex::new(SessionOptions::default()))?
                .cast(),
        );
        Ok(())
    })
}

/// Threads kernels may use (the calling thread counts as one); 0 restores the default.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_set_threads(
    options: *mut MoteSessionOptions,
    threads: u32,
) -> *mut MoteError {
    guard(|| {
        let o = OPTIONS.get(options)?;
        lock(&o).threads = (threads > 0).then_some(threads as usize);
        Ok(())
    })
}

/// Bytes of freed intermediate buffers a session keeps for reuse.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_set_pool_limit(
    options: *mut MoteSessionOptions,
    bytes: usize,
) -> *mut MoteError {
    guard(|| {
        lock(&*OPTIONS.get(options)?).pool_limit_bytes = bytes;
        Ok(())
    })
}

/// Append a backend (`"acl"`, `"bnns"`, `"cpu"`, or a plug-in's name) to the preference order
/// for offloaded subgraphs. Without any, every backend available here is used, vendor
/// libraries first.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_add_backend(
    options: *mut MoteSessionOptions,
    name: *const c_char,
) -> *mut MoteError {
    guard(|| {
        let o = OPTIONS.get(options)?;
        let name = str_arg(name, "name")?;
        if name.is_empty() {
            return Err(MoteError::new(
                MoteErrorCode::InvalidArgument,
                "empty backend name",
            ));
        }
        lock(&o).backends.push(name.to_string());
        Ok(())
    })
}

/// A budget value from C: 0 is refused (`MOTE_ERROR_CODE_INVALID_ARGUMENT`), never read as
/// "the default" or "no limit" (docs/untrusted-models.md: a budget is always on).
fn budget<T: Copy + Default + PartialEq>(value: T, what: &str) -> Result<T> {
    if value == T::default() {
        return Err(MoteError::new(
            MoteErrorCode::InvalidArgument,
            format!("{what} must be at least 1 (a budget cannot be turned off)"),
        ));
    }
    Ok(value)
}

/// The most bytes of storage one call of the session may hold at once (storage the VM
/// allocates, outputs the caller still holds, an offloaded region's scratch memory); over it a
/// call fails with `MOTE_ERROR_CODE_RESOURCE_EXHAUSTED`. Default: half the physical memory
/// (docs/untrusted-models.md §3). 0 is `MOTE_ERROR_CODE_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_set_memory_budget(
    options: *mut MoteSessionOptions,
    bytes: usize,
) -> *mut MoteError {
    guard(|| {
        let o = OPTIONS.get(options)?;
        lock(&o).memory_budget_bytes = budget(bytes, "the memory budget")?;
        Ok(())
    })
}

/// The most VM registers all frames of one call may hold together; over it a call fails with
/// `MOTE_ERROR_CODE_RESOURCE_EXHAUSTED`. Default 2^20 (docs/untrusted-models.md §3). 0 is
/// `MOTE_ERROR_CODE_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_set_max_registers(
    options: *mut MoteSessionOptions,
    registers: usize,
) -> *mut MoteError {
    guard(|| {
        let o = OPTIONS.get(options)?;
        lock(&o).max_registers = budget(registers, "max registers")?;
        Ok(())
    })
}

/// Bytes of the calling thread's stack that nested Relax calls may use, from where the call
/// entered the session; a deeper call fails with `MOTE_ERROR_CODE_RESOURCE_EXHAUSTED` before it
/// can overflow the stack. Default 256 KiB (docs/untrusted-models.md §3). 0 is
/// `MOTE_ERROR_CODE_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_set_stack_budget(
    options: *mut MoteSessionOptions,
    bytes: usize,
) -> *mut MoteError {
    guard(|| {
        let o = OPTIONS.get(options)?;
        lock(&o).stack_budget_bytes = budget(bytes, "the stack budget")?;
        Ok(())
    })
}

/// The most VM instructions one call may execute (a kernel or an offloaded region counts one);
/// a call that would run more fails with `MOTE_ERROR_CODE_RESOURCE_EXHAUSTED`. Default 2^28
/// (docs/untrusted-models.md §3). 0 is `MOTE_ERROR_CODE_INVALID_ARGUMENT`; `UINT64_MAX` leaves
/// only `mote_session_interrupt` to stop a model that loops.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_set_max_instructions(
    options: *mut MoteSessionOptions,
    instructions: u64,
) -> *mut MoteError {
    guard(|| {
        let o = OPTIONS.get(options)?;
        lock(&o).max_instructions = budget(instructions, "max instructions")?;
        Ok(())
    })
}

/// The OpenCL device a model compiled for OpenCL runs on: an index into the devices OpenCL
/// lists, in order (docs/opencl.md §2). Without it, the first GPU, else the first device. An
/// index past the list makes `mote_session_new` fail with `MOTE_ERROR_CODE_INVALID_ARGUMENT`
/// for such a model; no OpenCL library or no device is `MOTE_ERROR_CODE_DEVICE`. Ignored for
/// models without OpenCL code.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_set_opencl_device(
    options: *mut MoteSessionOptions,
    index: u32,
) -> *mut MoteError {
    guard(|| {
        let o = OPTIONS.get(options)?;
        lock(&o).opencl_device = Some(index as usize);
        Ok(())
    })
}

/// Time each OpenCL kernel launch of the session's calls (OpenCL profiling events;
/// docs/opencl.md). Default off. Ignored for models without OpenCL code.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_set_opencl_profiling(
    options: *mut MoteSessionOptions,
    on: bool,
) -> *mut MoteError {
    guard(|| {
        let o = OPTIONS.get(options)?;
        lock(&o).opencl_profiling = on;
        Ok(())
    })
}

/// A directory (the app's own: what is in it is loaded into the OpenCL driver) where compiled
/// OpenCL programs are kept, so that loading the same model again skips the compiler
/// (docs/opencl.md §7). NULL restores the default: no cache, every load compiles. An empty
/// path is `MOTE_ERROR_CODE_INVALID_ARGUMENT`. The string is copied.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_set_opencl_program_cache(
    options: *mut MoteSessionOptions,
    dir: *const c_char,
) -> *mut MoteError {
    guard(|| {
        let o = OPTIONS.get(options)?;
        let dir = if dir.is_null() {
            None
        } else {
            let d = str_arg(dir, "dir")?;
            if d.is_empty() {
                return Err(MoteError::new(
                    MoteErrorCode::InvalidArgument,
                    "empty OpenCL program cache directory (NULL turns the cache off)",
                ));
            }
            Some(std::path::PathBuf::from(d))
        };
        lock(&o).opencl_program_cache = dir;
        Ok(())
    })
}

/// What `options` holds, for tests.
#[cfg(test)]
pub(crate) fn options_of(options: *const MoteSessionOptions) -> SessionOptions {
    lock(&OPTIONS.get(options).expect("live options")).clone()
}

/// Free session options. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn mote_session_options_free(options: *mut MoteSessionOptions) {
    crate::error::guard_value((), || OPTIONS.free(options))
}

/// A new session for `model`. `options` may be NULL (defaults); it is not retained.
#[no_mangle]
pub unsafe extern "C" fn mote_session_new(
    model: *const MoteModel,
    options: *const MoteSessionOptions,
    out: *mut *mut MoteSession,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let m = MODELS.get(model)?;
        let opts = if options.is_null() {
            SessionOptions::default()
        } else {
            lock(&*OPTIONS.get(options)?).clone()
        };
        let s = m.model.session_with(opts)?;
        let entry = FfiSession {
            interrupt: s.interrupt_handle(),
            session: Exclusive::new(s),
        };
        write_out(out, SESSIONS.insert(entry)?.cast());
        Ok(())
    })
}

/// The device `session` runs its model's kernels on, as DLPack codes: `*device_type` 1
/// (`kDLCPU`) and `*device_id` 0 for a model without OpenCL code, `*device_type` 4
/// (`kDLOpenCL`) and `*device_id` the OpenCL device index (see
/// `mote_session_options_set_opencl_device`) for one compiled for OpenCL.
#[no_mangle]
pub unsafe extern "C" fn mote_session_device(
    session: *const MoteSession,
    device_type: *mut i32,
    device_id: *mut i32,
) -> *mut MoteError {
    guard(|| {
        check_out(device_type, "device_type")?;
        check_out(device_id, "device_id")?;
        let s = SESSIONS.get(session)?;
        let (t, id) = dl_device(s.lock()?.device())?;
        write_out(device_type, t);
        write_out(device_id, id);
        Ok(())
    })
}

/// DLPack's `(device_type, device_id)` for `d`.
pub(crate) fn dl_device(d: mote::Device) -> Result<(i32, i32)> {
    match d {
        mote::Device::Cpu => Ok((1, 0)),
        mote::Device::OpenCl { index } => Ok((4, index as i32)),
        other => Err(MoteError::new(
            MoteErrorCode::Internal,
            format!("no DLPack code for device {other}"),
        )),
    }
}

/// Free a session. NULL is a no-op. Tensors it returned stay valid.
#[no_mangle]
pub unsafe extern "C" fn mote_session_free(session: *mut MoteSession) {
    crate::error::guard_value((), || SESSIONS.free(session))
}

/// Cancel the call `session` is running: it returns `MOTE_ERROR_CODE_CANCELLED` at its next VM
/// call or backward jump, or between an offloaded region's segments (a kernel already running
/// finishes first). Call it from any thread, also while another thread is inside a call on `session`:
/// it does not wait for the session, and returns at once. An interrupt is never lost: when no
/// call is running, the session's next call is cancelled as it starts. Each interrupt cancels
/// one call, and interrupts not yet consumed count as one. The session stays usable afterwards
/// (docs/untrusted-models.md §4). A NULL, freed or mistyped handle is an error, as everywhere.
#[no_mangle]
pub unsafe extern "C" fn mote_session_interrupt(session: *mut MoteSession) -> *mut MoteError {
    guard(|| {
        // The table entry's handle: no lock of the session is taken.
        SESSIONS.get(session)?.interrupt.interrupt();
        Ok(())
    })
}

/// The `count` tensor handles at `inputs` (which may be NULL when `count` is 0).
fn input_handles<'a>(
    inputs: *const *const MoteTensor,
    count: usize,
) -> Result<&'a [*const MoteTensor]> {
    if count == 0 {
        return Ok(&[]);
    }
    if inputs.is_null() {
        return Err(MoteError::null("inputs"));
    }
    // SAFETY: non-NULL; the contract requires `count` readable handles, valid during the call
    // that passed them (the callers use the slice only within that call).
    Ok(unsafe { std::slice::from_raw_parts(inputs, count) })
}

fn tensor_args(inputs: *const *const MoteTensor, count: usize) -> Result<Vec<Value>> {
    input_handles(inputs, count)?
        .iter()
        .enumerate()
        .map(|(i, &h)| {
            // A tensor lent to a callback is copied: the session may keep an input (as a bound
            // input, in its registers, as an output) beyond the callback that lent it.
            TENSORS
                .get(h)
                .and_then(|e| e.keep())
                .map(Value::Tensor)
                .map_err(|e| e.context(format_args!("input {i}")))
        })
        .collect()
}

/// The arguments of a kernel call from C: for each handle, a fresh view of the same memory
/// through a storage of its own, so that `Session::call_kernel` finds every tensor exclusive.
/// A tensor lent to a callback is refused: it would be copied (see `tensor_args`), and the
/// kernel's writes would go to the copy.
fn kernel_args(inputs: *const *const MoteTensor, count: usize) -> Result<Vec<Value>> {
    input_handles(inputs, count)?
        .iter()
        .enumerate()
        .map(|(i, &h)| {
            let entry = TENSORS
                .get(h)
                .map_err(|e| e.context(format_args!("input {i}")))?;
            if entry.is_lent() {
                return Err(MoteError::new(
                    MoteErrorCode::InvalidArgument,
                    format!(
                        "input {i} is a tensor lent to a callback, which a kernel call would \
                         copy, losing what the kernel writes; copy it into a tensor of your own \
                         (mote_tensor_clone) and pass that"
                    ),
                ));
            }
            Ok(Value::Tensor(fresh_view(entry.tensor())?))
        })
        .collect()
}

/// A view of `t`'s bytes through a new storage that keeps `t`'s storage alive.
fn fresh_view(t: &Tensor) -> Result<Tensor> {
    let original = Arc::clone(t.storage());
    let len = original.len();
    let Some(ptr) = NonNull::new(original.as_ptr()) else {
        return Err(MoteError::new(
            MoteErrorCode::InvalidArgument,
            "a tensor without memory",
        ));
    };
    // SAFETY: `ptr` is the memory of `original`, valid for reads and writes of `len` bytes for
    // as long as `original` lives; `original` is the new storage's owner, dropped only after
    // the new storage and every view of it, so the memory outlives them.
    //
    // The new storage and its one view are made here and held only by this call's argument
    // list, so no Mote handle but that one reaches the bytes through them, and
    // `Tensor::is_exclusive` says so. The other ways to the same bytes are the caller's: the
    // `MoteTensor` handle passed in, and anything the caller made from it or lent it to (views,
    // a Relax session's stored inputs, another thread's call). The C contract of
    // `mote_session_run` on a kernel-only library (ffi/README.md, the header) is that none of
    // those is read or written while the call runs. That promise is the "not used in a
    // conflicting way by others" that `Storage::borrowed` asks for; Mote cannot check it,
    // exactly as TVM cannot when C hands it a DLTensor.
    let storage = unsafe { mote::Storage::borrowed(ptr, len, Some(Box::new(original))) };
    Ok(Tensor::view(
        storage,
        t.byte_offset(),
        t.shape_arc().clone(),
        t.dtype(),
    )?)
}

/// The error for the stateful API on a kernel-only library: stored tensors would be written
/// later, while the caller's handles to them are free to be read.
fn stateful_kernel(function: &str) -> MoteError {
    MoteError::new(
        MoteErrorCode::InvalidArgument,
        format!(
            "`{function}`: the stateful API cannot call a kernel of a kernel-only library (the \
             session would keep the tensors and the kernel would write them later, while other \
             handles to them may be read); call it with mote_session_run"
        ),
    )
}

/// A returned value as tensors: tuples flattened depth-first; ints, floats and bools become
/// 0-d int64/float64/bool tensors and shapes 1-d int64 tensors; None is no tensor.
pub(crate) fn flatten(v: &Value, out: &mut Vec<Tensor>) -> Result<()> {
    match v {
        Value::None => {}
        Value::Tensor(t) => out.push(t.clone()),
        Value::Tuple(items) => {
            for i in items.iter() {
                flatten(i, out)?;
            }
        }
        Value::Int(i) => out.push(Tensor::from_slice::<i64>(&[], &[*i])?),
        Value::Float(f) => out.push(Tensor::from_slice::<f64>(&[], &[*f])?),
        Value::Bool(b) => out.push(Tensor::from_bytes(&[], mote::DType::BOOL, &[*b as u8])?),
        Value::Shape(s) => out.push(Tensor::from_slice::<i64>(&[s.len() as i64], s)?),
        other => {
            return Err(MoteError::new(
                MoteErrorCode::Unsupported,
                format!(
                    "the function returned a {}, which the C API cannot represent",
                    other.kind()
                ),
            ))
        }
    }
    Ok(())
}

fn list_out(v: &Value, out: *mut *mut MoteTensorList) -> Result<()> {
    let mut tensors = Vec::new();
    flatten(v, &mut tensors)?;
    write_out(out, TENSOR_LISTS.insert(tensors)?.cast());
    Ok(())
}

/// Call `function` with `num_inputs` tensors; its result (tuples flattened depth-first) is
/// written to `*outputs` as a new list the caller frees. Inputs are borrowed for the call (an
/// output may share an input's memory), except tensors lent to a callback, which are copied.
/// In a kernel-only library `function` is a kernel and `inputs` are all of its arguments,
/// output buffers included: the kernel writes into the caller's tensors (into the caller's
/// memory for `mote_tensor_from_borrowed` ones) and `*outputs` is an empty list. While the
/// call runs, the caller must not read or write those tensors' memory in any other way (no
/// other thread, no other session holding them as stateful inputs, no view of them): the
/// kernel writes it. Passing one tensor twice gives the kernel aliased buffers, as in TVM. A
/// tensor lent to a callback is refused (`MOTE_ERROR_CODE_INVALID_ARGUMENT`): copy it first.
/// Kernels check their own arguments: a wrong count, dtype or shape is
/// `MOTE_ERROR_CODE_KERNEL`.
/// From a callback of a call running on this session, or while another thread runs it, this
/// fails with `MOTE_ERROR_CODE_BUSY` (see `MoteSession`).
#[no_mangle]
pub unsafe extern "C" fn mote_session_run(
    session: *mut MoteSession,
    function: *const c_char,
    inputs: *const *const MoteTensor,
    num_inputs: usize,
    outputs: *mut *mut MoteTensorList,
) -> *mut MoteError {
    guard(|| {
        check_out(outputs, "outputs")?;
        let s = SESSIONS.get(session)?;
        let function = str_arg(function, "function")?;
        let mut session = s.lock()?;
        let result = if session.model().is_kernel_library() {
            let mut args = kernel_args(inputs, num_inputs)?;
            session.call_kernel(function, &mut args)?
        } else {
            let args = tensor_args(inputs, num_inputs)?;
            session.call(function, &args)?
        };
        drop(session);
        list_out(&result, outputs)
    })
}

/// Stateful API, step 1: bind the inputs of `function` for later `mote_session_invoke_stateful`
/// calls (the tensors are retained by the session until replaced or the session is freed;
/// tensors lent to a callback are copied). Not for kernel-only libraries
/// (`MOTE_ERROR_CODE_INVALID_ARGUMENT`): call their kernels with `mote_session_run`.
#[no_mangle]
pub unsafe extern "C" fn mote_session_set_input(
    session: *mut MoteSession,
    function: *const c_char,
    inputs: *const *const MoteTensor,
    num_inputs: usize,
) -> *mut MoteError {
    guard(|| {
        let s = SESSIONS.get(session)?;
        let function = str_arg(function, "function")?;
        let args = tensor_args(inputs, num_inputs)?;
        let mut session = s.lock()?;
        if session.model().is_kernel_library() {
            return Err(stateful_kernel(function));
        }
        session.set_input(function, args)?;
        Ok(())
    })
}

/// Stateful API, step 2: run `function` on the inputs bound by `mote_session_set_input`.
/// Not for kernel-only libraries (see `mote_session_set_input`).
#[no_mangle]
pub unsafe extern "C" fn mote_session_invoke_stateful(
    session: *mut MoteSession,
    function: *const c_char,
) -> *mut MoteError {
    guard(|| {
        let s = SESSIONS.get(session)?;
        let function = str_arg(function, "function")?;
        let mut session = s.lock()?;
        if session.model().is_kernel_library() {
            return Err(stateful_kernel(function));
        }
        session.invoke_stateful(function)?;
        Ok(())
    })
}

/// Stateful API, step 3: the result of the last `mote_session_invoke_stateful(function)`, as a
/// new list the caller frees.
#[no_mangle]
pub unsafe extern "C" fn mote_session_get_output(
    session: *mut MoteSession,
    function: *const c_char,
    outputs: *mut *mut MoteTensorList,
) -> *mut MoteError {
    guard(|| {
        check_out(outputs, "outputs")?;
        let s = SESSIONS.get(session)?;
        let v = s.lock()?.get_output(str_arg(function, "function")?)?;
        list_out(&v, outputs)
    })
}

/// Start (`enabled` != 0) or stop timing every call the session makes. Starting clears
/// earlier timings.
#[no_mangle]
pub unsafe extern "C" fn mote_session_set_profiling(
    session: *mut MoteSession,
    enabled: bool,
) -> *mut MoteError {
    guard(|| {
        SESSIONS.get(session)?.lock()?.set_profiling(enabled);
        Ok(())
    })
}

/// The timings gathered since profiling started (slowest first), as a new profile the caller
/// frees; the session's counters restart from zero.
#[no_mangle]
pub unsafe extern "C" fn mote_session_take_profile(
    session: *mut MoteSession,
    out: *mut *mut MoteProfile,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let entries = SESSIONS.get(session)?.lock()?.take_profile();
        let rows = entries
            .iter()
            .map(|e| {
                let kind = format!("{:?}", e.kind).to_lowercase();
                (
                    CString::new(e.name.replace('\0', "")).unwrap_or_default(),
                    CString::new(kind).unwrap_or_default(),
                    e.calls,
                    u64::try_from(e.total.as_nanos()).unwrap_or(u64::MAX),
                )
            })
            .collect();
        write_out(out, PROFILES.insert(Profile { rows })?.cast());
        Ok(())
    })
}

/// Number of rows in a profile.
#[no_mangle]
pub unsafe extern "C" fn mote_profile_len(
    profile: *const MoteProfile,
    out: *mut usize,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        write_out(out, PROFILES.get(profile)?.rows.len());
        Ok(())
    })
}

/// Row `index` of a profile.
#[no_mangle]
pub unsafe extern "C" fn mote_profile_get(
    profile: *const MoteProfile,
    index: usize,
    out: *mut MoteProfileEntry,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let p = PROFILES.get(profile)?;
        let (name, kind, calls, ns) = p
            .rows
            .get(index)
            .ok_or_else(|| MoteError::out_of_range(index, p.rows.len(), "rows"))?;
        // The strings live as long as the profile (kept alive by its table entry).
        write_out(
            out,
            MoteProfileEntry {
                name: name.as_ptr(),
                kind: kind.as_ptr(),
                calls: *calls,
                total_ns: *ns,
            },
        );
        Ok(())
    })
}

/// Free a profile. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn mote_profile_free(profile: *mut MoteProfile) {
    crate::error::guard_value((), || PROFILES.free(profile))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    fn code_of<T>(r: Result<T>) -> Option<(u32, String)> {
        r.err()
            .map(|e| (e.code, e.message.to_string_lossy().into_owned()))
    }

    #[test]
    fn the_holding_thread_gets_busy_instead_of_a_deadlock() {
        let x = Exclusive::new(1u32);
        let mut g = x.lock().unwrap();
        *g += 1;
        let (code, message) = code_of(x.lock()).expect("a nested lock must fail");
        assert_eq!(code, MoteErrorCode::Busy as u32);
        assert!(message.contains("on this thread"), "{message}");
        drop(g);
        assert_eq!(*x.lock().unwrap(), 2, "usable again once released");
    }

    #[test]
    fn other_threads_wait_for_the_holder() {
        let x = Arc::new(Exclusive::new(0u32));
        let released = Arc::new(AtomicBool::new(false));
        let g = x.lock().unwrap();
        let waiter = {
            let (x, released) = (Arc::clone(&x), Arc::clone(&released));
            std::thread::spawn(move || {
                let mut g = x.lock().expect("an ordinary thread waits");
                assert!(
                    released.load(Ordering::SeqCst),
                    "got the lock while it was held"
                );
                *g += 1;
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        released.store(true, Ordering::SeqCst);
        drop(g);
        waiter.join().unwrap();
        assert_eq!(*x.lock().unwrap(), 1);
    }

    #[test]
    fn a_callback_on_another_thread_gets_busy_instead_of_waiting() {
        let x = Arc::new(Exclusive::new(0u32));
        let g = x.lock().unwrap();
        let x2 = Arc::clone(&x);
        let r = std::thread::spawn(move || {
            crate::callback::embedder(|| code_of(x2.lock().map(|_| ())))
        })
        .join()
        .unwrap();
        let (code, message) = r.expect("must not wait from a callback");
        assert_eq!(code, MoteErrorCode::Busy as u32);
        assert!(message.contains("another thread"), "{message}");
        drop(g);
        // Free: a callback gets it at once.
        let x2 = Arc::clone(&x);
        std::thread::spawn(move || crate::callback::embedder(|| assert!(x2.lock().is_ok())))
            .join()
            .unwrap();
    }
}

#[cfg(test)]
mod kernel_arg_tests {
    //! Kernel arguments without a model: what `mote_session_run` hands `call_kernel`.
    use super::*;
    use crate::tensor::Loan;
    use mote::DType;

    #[test]
    fn kernel_arguments_are_fresh_exclusive_views_and_lent_tensors_are_refused() {
        let original = Tensor::zeros(&[2, 3], DType::F32).unwrap();
        let handle: *const MoteTensor = crate::tensor::new_handle(original.clone()).unwrap();
        let before = Arc::strong_count(original.storage());
        let mut args = kernel_args(&handle, 1).unwrap();
        let Value::Tensor(view) = &mut args[0] else {
            panic!("not a tensor: {:?}", args[0]);
        };
        // The same bytes, shape and dtype, through a storage only this view holds, although
        // the caller's handle (and `original` here) still reach the memory.
        assert!(view.same_data(&original));
        assert!(view.is_exclusive());
        view.data_mut().unwrap()[0] = 0x7f;
        assert_eq!(
            original.data()[0],
            0x7f,
            "writes land in the caller's memory"
        );
        // The view keeps the original storage alive (one more reference), until dropped.
        assert_eq!(Arc::strong_count(original.storage()), before + 1);
        drop(args);
        assert_eq!(Arc::strong_count(original.storage()), before);
        // SAFETY: a handle this test made, freed once.
        unsafe { crate::tensor::mote_tensor_free(handle.cast_mut()) };

        // A lent tensor would be copied, and a kernel's writes lost: refused by index.
        let loan = Loan::new(Tensor::zeros(&[4], DType::F32).unwrap()).unwrap();
        let handles: [*const MoteTensor; 1] = [loan.handle()];
        let e = kernel_args(handles.as_ptr(), 1).err().unwrap();
        assert_eq!(e.code, MoteErrorCode::InvalidArgument as u32);
        let m = e.message.to_str().unwrap();
        assert!(
            m.contains("input 0") && m.contains("mote_tensor_clone"),
            "{m}"
        );
        // No arguments, and NULL with a count, as for every entry point.
        assert!(kernel_args(std::ptr::null(), 0).unwrap().is_empty());
        assert!(kernel_args(std::ptr::null(), 1).is_err());
    }
}
