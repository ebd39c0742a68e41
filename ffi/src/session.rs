//! Sessions: running functions, the stateful API, profiling.

use std::ffi::{c_char, CString};
use std::sync::Mutex;

use mote::{Session, SessionOptions, Tensor, Value};

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
/// to run in parallel.
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
static SESSIONS: Table<Mutex<Session>> = Table::new(0x53, "MoteSession");
static PROFILES: Table<Profile> = Table::new(0x50, "MoteProfile");

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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
        write_out(out, SESSIONS.insert(Mutex::new(s))?.cast());
        Ok(())
    })
}

/// Free a session. NULL is a no-op. Tensors it returned stay valid.
#[no_mangle]
pub unsafe extern "C" fn mote_session_free(session: *mut MoteSession) {
    crate::error::guard_value((), || SESSIONS.free(session))
}

fn tensor_args(inputs: *const *const MoteTensor, count: usize) -> Result<Vec<Value>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if inputs.is_null() {
        return Err(MoteError::null("inputs"));
    }
    // SAFETY: non-NULL; the contract requires `count` readable handles.
    let handles = unsafe { std::slice::from_raw_parts(inputs, count) };
    handles
        .iter()
        .enumerate()
        .map(|(i, &h)| {
            TENSORS
                .get(h)
                .map(|t| Value::Tensor((*t).clone()))
                .map_err(|e| e.context(format_args!("input {i}")))
        })
        .collect()
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
/// written to `*outputs` as a new list the caller frees. Inputs are borrowed for the call.
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
        let args = tensor_args(inputs, num_inputs)?;
        let result = lock(&s).call(function, &args)?;
        list_out(&result, outputs)
    })
}

/// Stateful API, step 1: bind the inputs of `function` for later `mote_session_invoke_stateful`
/// calls (the tensors are retained by the session until replaced or the session is freed).
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
        lock(&s).set_input(function, args)?;
        Ok(())
    })
}

/// Stateful API, step 2: run `function` on the inputs bound by `mote_session_set_input`.
#[no_mangle]
pub unsafe extern "C" fn mote_session_invoke_stateful(
    session: *mut MoteSession,
    function: *const c_char,
) -> *mut MoteError {
    guard(|| {
        let s = SESSIONS.get(session)?;
        lock(&s).invoke_stateful(str_arg(function, "function")?)?;
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
        let v = lock(&s).get_output(str_arg(function, "function")?)?;
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
        lock(&*SESSIONS.get(session)?).set_profiling(enabled);
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
        let entries = lock(&*SESSIONS.get(session)?).take_profile();
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
