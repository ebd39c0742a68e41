//! Every JNI entry point. Each `/// java:` line is the exact Java declaration of the function
//! below it in `org.mote.NativeBridge`; `scripts/java-natives.sh` writes that class from these
//! lines and fails in CI when the checked-in copy differs.
//!
//! Argument lists cross as four parallel arrays (`tags`, `longs`, `doubles`, `strs`): entry
//! `i` is `tags[i]` (see [`Tag`]) with its payload in `longs[i]` (int, bool, tensor handle,
//! pointer), `doubles[i]` (float) or `strs[i]` (string). Results come back as a value handle
//! (0 for None) that Java reads with the `value*` entries and frees once.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, TryLockError};

use jni::objects::{JByteArray, JByteBuffer, JClass, JDoubleArray, JIntArray, JLongArray};
use jni::objects::{JObjectArray, JString};
use jni::sys::{jboolean, jint, jlong};
use jni::{Env, EnvUnowned};
use mote::{Arg, DType, Model, Session, SessionOptions, Tensor, Value};

use crate::cancel::{with_token, CallToken};
use crate::session_pool::SessionPool;
use crate::{entry, free_handle, handle_ref, into_handle, JErr};

/// The kind of one argument or value, shared with `org.mote.NativeBridge`'s constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Tag {
    None = 0,
    Int = 1,
    Float = 2,
    Bool = 3,
    Str = 4,
    Tensor = 5,
    Tuple = 6,
    Pointer = 7,
    Shape = 8,
    DType = 9,
    /// A value Java cannot hold (a VM closure, raw storage).
    Other = 10,
    /// A byte string (Java `byte[]`, tvm4j's bytes). Payload: a tensor handle (`longs[i]`)
    /// of a 1-D uint8 tensor holding the bytes. See [`bytes_value`].
    Bytes = 11,
    /// A function registered with Mote, by its global name (`strs[i]`). See
    /// [`function_value`].
    Function = 12,
}

/// Every tag with its Java constant name (`NativeBridge.TAG_<NAME>`, generated).
pub const TAGS: [(&str, Tag); 13] = [
    ("NONE", Tag::None),
    ("INT", Tag::Int),
    ("FLOAT", Tag::Float),
    ("BOOL", Tag::Bool),
    ("STR", Tag::Str),
    ("TENSOR", Tag::Tensor),
    ("TUPLE", Tag::Tuple),
    ("POINTER", Tag::Pointer),
    ("SHAPE", Tag::Shape),
    ("DTYPE", Tag::DType),
    ("OTHER", Tag::Other),
    ("BYTES", Tag::Bytes),
    ("FUNCTION", Tag::Function),
];

/// The first element of the tuple that carries a byte string through Mote's values (which
/// have no bytes kind): `(BYTES_MARK, uint8 tensor)`. NUL-prefixed, so no model's string is
/// mistaken for it.
const BYTES_MARK: &str = "\0mote-java:bytes";
/// The first element of the tuple that carries a registered function through Mote's values
/// (which have no packed-function kind): `(FUNCTION_MARK, global name)`.
const FUNCTION_MARK: &str = "\0mote-java:function";

/// A byte string as a Mote value: `(BYTES_MARK, t)`, `t` a 1-D uint8 tensor.
fn bytes_value(t: Tensor) -> Value {
    Value::Tuple(std::sync::Arc::new(vec![
        Value::Str(BYTES_MARK.into()),
        Value::Tensor(t),
    ]))
}

/// The registered function `name` as a Mote value: `(FUNCTION_MARK, name)`. Fails when no
/// function is registered under that name.
fn function_value(name: &str) -> Result<Value, JErr> {
    if mote::lookup_function(name).is_none() {
        return Err(JErr::Mote(mote::Error::UnknownFunction {
            name: name.to_string(),
            available: Vec::new(),
        }));
    }
    Ok(Value::Tuple(std::sync::Arc::new(vec![
        Value::Str(FUNCTION_MARK.into()),
        Value::Str(name.into()),
    ])))
}

/// What a value made by [`bytes_value`] or [`function_value`] carries.
pub(crate) enum Marked<'a> {
    Bytes(&'a Tensor),
    Function(&'a str),
}

/// The byte string or function a value carries, if it is one.
pub(crate) fn marked(v: &Value) -> Option<Marked<'_>> {
    let Value::Tuple(t) = v else { return None };
    match t.as_slice() {
        [Value::Str(m), Value::Tensor(b)] if &**m == BYTES_MARK => Some(Marked::Bytes(b)),
        [Value::Str(m), Value::Str(n)] if &**m == FUNCTION_MARK => Some(Marked::Function(n)),
        _ => None,
    }
}

/// A session, used by one thread at a time (see the crate docs).
pub struct SessionH(Mutex<Session>);

/// A tvm4j `Module`: a model and the bounded pool of sessions its functions run in
/// ([`SessionPool`]).
pub struct ModuleH {
    pub(crate) sessions: SessionPool,
}

/// A tensor owned by one Java object. `None` while a kernel call has moved it out to hold it
/// exclusively.
pub struct TensorH(pub(crate) Mutex<Option<Tensor>>);

/// How many [`TensorH`] exist (for the tests of `close()` and the backstop, through the
/// `test-hooks` feature's `TestHooks.liveTensors`).
static LIVE_TENSORS: AtomicI64 = AtomicI64::new(0);

/// The number of [`TensorH`] alive now.
#[cfg(feature = "test-hooks")]
pub(crate) fn live_tensors() -> i64 {
    LIVE_TENSORS.load(Ordering::Relaxed)
}

impl Drop for TensorH {
    fn drop(&mut self) {
        LIVE_TENSORS.fetch_sub(1, Ordering::Relaxed);
    }
}

impl TensorH {
    pub(crate) fn new(t: Tensor) -> TensorH {
        LIVE_TENSORS.fetch_add(1, Ordering::Relaxed);
        TensorH(Mutex::new(Some(t)))
    }

    fn get(&self) -> Result<Tensor, JErr> {
        self.0
            .lock()
            .map_err(|_| JErr::State("tensor lock poisoned".into()))?
            .clone()
            .ok_or_else(|| {
                JErr::State("tensor is in use by a kernel call on another thread".into())
            })
    }
}

pub(crate) fn string(env: &Env<'_>, s: &JString<'_>, what: &str) -> Result<String, JErr> {
    if s.is_null() {
        return Err(JErr::Arg(format!("{what} is null")));
    }
    Ok(s.try_to_string(env)?)
}

fn new_string<'l>(env: &mut Env<'l>, s: &str) -> Result<JString<'l>, JErr> {
    Ok(JString::from_str(env, s)?)
}

fn longs_of(env: &Env<'_>, a: &JLongArray<'_>, what: &str) -> Result<Vec<i64>, JErr> {
    if a.is_null() {
        return Err(JErr::Arg(format!("{what} is null")));
    }
    let mut v = vec![0i64; a.len(env)?];
    a.get_region(env, 0, &mut v)?;
    Ok(v)
}

fn new_longs<'l>(env: &mut Env<'l>, v: &[i64]) -> Result<JLongArray<'l>, JErr> {
    let a = env.new_long_array(v.len())?;
    a.set_region(env, 0, v)?;
    Ok(a)
}

fn dtype(s: &str) -> Result<DType, JErr> {
    Ok(s.parse::<DType>()?)
}

/// One argument as Java sent it.
enum JArg {
    None,
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Tensor(i64),
    /// A byte string, in the uint8 tensor of this handle.
    Bytes(i64),
    /// A registered function, by name.
    Function(String),
}

fn read_args(
    env: &mut Env<'_>,
    tags: &JIntArray<'_>,
    longs: &JLongArray<'_>,
    doubles: &JDoubleArray<'_>,
    strs: &JObjectArray<'_>,
) -> Result<Vec<JArg>, JErr> {
    if tags.is_null() || longs.is_null() || doubles.is_null() || strs.is_null() {
        return Err(JErr::Arg("argument arrays must not be null".into()));
    }
    let n = tags.len(env)?;
    if longs.len(env)? != n || doubles.len(env)? != n || strs.len(env)? != n {
        return Err(JErr::Arg("argument arrays differ in length".into()));
    }
    let mut t = vec![0i32; n];
    tags.get_region(env, 0, &mut t)?;
    let mut l = vec![0i64; n];
    longs.get_region(env, 0, &mut l)?;
    let mut d = vec![0f64; n];
    doubles.get_region(env, 0, &mut d)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(match t[i] {
            x if x == Tag::None as i32 => JArg::None,
            x if x == Tag::Int as i32 => JArg::Int(l[i]),
            x if x == Tag::Float as i32 => JArg::Float(d[i]),
            x if x == Tag::Bool as i32 => JArg::Bool(l[i] != 0),
            x if x == Tag::Tensor as i32 => JArg::Tensor(l[i]),
            x if x == Tag::Bytes as i32 => JArg::Bytes(l[i]),
            x if x == Tag::Str as i32 || x == Tag::Function as i32 => {
                let o = strs.get_element(env, i)?;
                let s = env.cast_local::<JString>(o)?;
                let s = string(env, &s, "string argument")?;
                if x == Tag::Str as i32 {
                    JArg::Str(s)
                } else {
                    JArg::Function(s)
                }
            }
            x => return Err(JErr::Arg(format!("argument {i}: unknown tag {x}"))),
        });
    }
    Ok(out)
}

/// The value of an argument that is not a tensor (tensors: `None`). A byte string shares
/// its tensor (nothing writes it); a function must be registered.
fn scalar_value(a: &JArg) -> Result<Option<Value>, JErr> {
    Ok(Some(match a {
        JArg::None => Value::None,
        JArg::Int(i) => Value::Int(*i),
        JArg::Float(f) => Value::Float(*f),
        JArg::Bool(b) => Value::Bool(*b),
        JArg::Str(s) => Value::Str(s.as_str().into()),
        JArg::Bytes(h) => bytes_value(tensor_of(*h)?),
        JArg::Function(name) => function_value(name)?,
        JArg::Tensor(_) => return Ok(None),
    }))
}

/// Arguments for a call that only reads them: tensors are shared clones.
fn shared_values(args: &[JArg]) -> Result<Vec<Value>, JErr> {
    args.iter()
        .map(|a| match a {
            JArg::Tensor(h) => {
                // SAFETY: Java passes handles of open tensors it keeps alive during the call.
                let t = unsafe { handle_ref::<TensorH>(*h, "Tensor")? };
                Ok(Value::Tensor(t.get()?))
            }
            other => Ok(scalar_value(other)?.unwrap_or_default()),
        })
        .collect()
}

/// Arguments for a kernel call: each tensor is moved out of its Java object so the kernel
/// holds it alone (`Session::call_kernel` requires it); a tensor passed again later in the
/// same call is passed as a copy (writes through that later position are not kept). Returns
/// the values and, per moved tensor, its handle and position, for [`restore`].
/// The tensors [`exclusive_values`] moved out of their Java objects: handle and position.
type Taken = Vec<(i64, usize)>;

fn exclusive_values(args: &[JArg]) -> Result<(Vec<Value>, Taken), JErr> {
    let mut values = Vec::with_capacity(args.len());
    let mut taken: Taken = Vec::new();
    for a in args {
        let v = match a {
            JArg::Tensor(h) => {
                if let Some(&(_, first)) = taken.iter().find(|(th, _)| th == h) {
                    let t: &Tensor = values_tensor(&values, first);
                    match t.deep_copy() {
                        Ok(c) => Value::Tensor(c),
                        Err(e) => {
                            restore(&mut values, &taken);
                            return Err(e.into());
                        }
                    }
                } else {
                    // SAFETY: Java passes handles of open tensors it keeps alive during the call.
                    let cell = match unsafe { handle_ref::<TensorH>(*h, "Tensor") } {
                        Ok(c) => c,
                        Err(e) => {
                            restore(&mut values, &taken);
                            return Err(e);
                        }
                    };
                    let t = cell.0.lock().ok().and_then(|mut g| g.take());
                    match t {
                        Some(t) => {
                            taken.push((*h, values.len()));
                            Value::Tensor(t)
                        }
                        None => {
                            restore(&mut values, &taken);
                            return Err(JErr::State(
                                "tensor is in use by a kernel call on another thread".into(),
                            ));
                        }
                    }
                }
            }
            other => match scalar_value(other) {
                Ok(v) => v.unwrap_or_default(),
                Err(e) => {
                    restore(&mut values, &taken);
                    return Err(e);
                }
            },
        };
        values.push(v);
    }
    Ok((values, taken))
}

fn values_tensor(values: &[Value], i: usize) -> &Tensor {
    values[i]
        .as_tensor()
        .expect("a taken position holds a tensor")
}

/// Put the tensors [`exclusive_values`] moved out back into their Java objects.
fn restore(values: &mut [Value], taken: &[(i64, usize)]) {
    for &(h, i) in taken {
        let t = std::mem::take(&mut values[i]);
        if let Value::Tensor(t) = t {
            // SAFETY: the same live handle `exclusive_values` took the tensor from.
            if let Ok(cell) = unsafe { handle_ref::<TensorH>(h, "Tensor") } {
                if let Ok(mut g) = cell.0.lock() {
                    *g = Some(t);
                }
            }
        }
    }
}

fn value_handle(v: Value) -> jlong {
    match v {
        Value::None => 0,
        v => into_handle(v),
    }
}

fn lock_session(s: &SessionH) -> Result<std::sync::MutexGuard<'_, Session>, JErr> {
    match s.0.try_lock() {
        Ok(g) => Ok(g),
        Err(TryLockError::WouldBlock) => Err(JErr::State(
            "session in use by another thread (or by a callback of its own call)".into(),
        )),
        // A panic mid-call was turned into an exception; the session's state is still
        // memory-safe to use (the VM resets per call).
        Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
    }
}

fn call_any(s: &mut Session, name: &str, args: &[JArg]) -> Result<jlong, JErr> {
    if s.model().is_kernel_library() {
        let (mut values, taken) = exclusive_values(args)?;
        let r = s.call_kernel(name, &mut values);
        restore(&mut values, &taken);
        Ok(value_handle(r?))
    } else {
        let values = shared_values(args)?;
        Ok(value_handle(s.call(name, &values)?))
    }
}

/// A budget from Java: 0 for the default, else a positive count (`SessionOptions` and
/// `LoadOptions` refuse the rest in Java already; this refuses them again, never a silent
/// default).
fn budget<T: TryFrom<i64>>(v: i64, what: &str, default: T) -> Result<T, JErr> {
    if v == 0 {
        return Ok(default);
    }
    if v < 0 {
        return Err(JErr::Mote(mote::Error::InvalidArgument(format!(
            "{what} {v} is not positive"
        ))));
    }
    T::try_from(v).map_err(|_| {
        JErr::Mote(mote::Error::InvalidArgument(format!(
            "{what} {v} is too large for this platform"
        )))
    })
}

/// The length of the `budgets` array of [`session_options`]:
/// `{memoryBudgetBytes, maxRegisters, stackBudgetBytes, maxInstructions}`, 0 for a default.
const SESSION_BUDGETS: usize = 4;

/// The OpenCL options `org.mote.SessionOptions` sends: the device index (-1 for the default:
/// the first GPU, else the first device), profiling, and the program cache directory (null:
/// none).
struct OpenClArgs<'a, 'l> {
    device: jint,
    profiling: jboolean,
    program_cache: &'a JString<'l>,
}

/// `mote::SessionOptions` from what `org.mote.SessionOptions` sends.
fn session_options(
    env: &mut Env<'_>,
    threads: jint,
    backends: &JString<'_>,
    poison: jboolean,
    budgets: &JLongArray<'_>,
    opencl: &OpenClArgs<'_, '_>,
) -> Result<SessionOptions, JErr> {
    let backends = string(env, backends, "backends")?;
    let opencl_device = match opencl.device {
        -1 => None,
        n if n >= 0 => Some(n as usize),
        n => {
            return Err(JErr::Mote(mote::Error::InvalidArgument(format!(
                "openclDevice {n} is negative"
            ))))
        }
    };
    let opencl_program_cache = if opencl.program_cache.is_null() {
        None
    } else {
        let dir = string(env, opencl.program_cache, "openclProgramCache")?;
        if dir.is_empty() {
            return Err(JErr::Mote(mote::Error::InvalidArgument(
                "openclProgramCache is empty".into(),
            )));
        }
        Some(std::path::PathBuf::from(dir))
    };
    let threads = match threads {
        0 => None,
        n if n > 0 => Some(n as usize),
        n => {
            return Err(JErr::Mote(mote::Error::InvalidArgument(format!(
                "thread count {n}"
            ))))
        }
    };
    let b = longs_of(env, budgets, "budgets")?;
    if b.len() != SESSION_BUDGETS {
        return Err(JErr::Arg(format!(
            "{} session budgets, not {SESSION_BUDGETS}",
            b.len()
        )));
    }
    Ok(SessionOptions {
        threads,
        backends: backends
            .split(',')
            .filter(|b| !b.is_empty())
            .map(str::to_string)
            .collect(),
        poison_memory: poison,
        memory_budget_bytes: budget(b[0], "memoryBudgetBytes", mote::default_memory_budget())?,
        max_registers: budget(b[1], "maxRegisters", mote::DEFAULT_MAX_REGISTERS)?,
        stack_budget_bytes: budget(b[2], "stackBudgetBytes", mote::DEFAULT_STACK_BUDGET)?,
        max_instructions: budget(b[3], "maxInstructions", mote::DEFAULT_MAX_INSTRUCTIONS)?,
        opencl_device,
        opencl_profiling: opencl.profiling,
        opencl_program_cache,
        ..Default::default()
    })
}

/// `mote::LoadOptions` from what `org.mote.LoadOptions` sends (`memory_budget` 0: the default).
fn load_options(
    code_free: jboolean,
    read_into_memory: jboolean,
    memory_budget: jlong,
) -> Result<mote::LoadOptions, JErr> {
    let mut o = mote::LoadOptions::default()
        .code_free(code_free)
        .read_into_memory(read_into_memory);
    if memory_budget != 0 {
        o = o.memory_budget(budget(memory_budget, "load memoryBudgetBytes", 0u64)?);
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------------------
// Library

/// java: static native void init(int maxLogLevel);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_init<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    max_log_level: jint,
) {
    entry(&mut env, |env| {
        crate::callback::init(env)?;
        crate::logging::init(env, max_log_level)
    })
}

/// java: static native String version();
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_version<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
) -> JString<'l> {
    entry(&mut env, |env| new_string(env, mote::version()))
}

/// java: static native void setLogLevel(int maxLogLevel);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_setLogLevel<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    max_log_level: jint,
) {
    entry(&mut env, |_| {
        crate::logging::set_level(max_log_level);
        Ok(())
    })
}

/// java: static native void loadPlugin(String path);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_loadPlugin<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    path: JString<'l>,
) {
    entry(&mut env, |env| {
        let path = string(env, &path, "plug-in path")?;
        mote::backend::load_plugin(path)?;
        Ok(())
    })
}

/// java: static native String backendNames();
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_backendNames<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
) -> JString<'l> {
    entry(&mut env, |env| {
        let names = mote::backend::backend_names().join("\n");
        new_string(env, &names)
    })
}

/// The OpenCL line of a status text from what `system_devices` gave: the devices' names (and
/// OpenCL versions), or `none` and why.
fn opencl_status(devices: Result<Vec<(String, String)>, String>) -> String {
    match devices {
        Ok(d) if d.is_empty() => "OpenCL: none (OpenCL lists no device)".to_string(),
        Ok(d) => {
            let names: Vec<String> = d
                .iter()
                .enumerate()
                .map(|(i, (name, version))| format!("{i}: {name} ({version})"))
                .collect();
            format!("OpenCL: {}", names.join(", "))
        }
        Err(why) => format!("OpenCL: none ({why})"),
    }
}

/// Whether OpenCL is usable in this process, as one line for a status text: `OpenCL: 0: <device
/// name> (<OpenCL version>), 1: ...` (the indices `SessionOptions.openclDevice` takes), or
/// `OpenCL: none (<reason>)` (no `libOpenCL`, no platform, no device). Mote opens `libOpenCL`
/// at run time (`mote::device::opencl::system_devices`, listed once per process). Behind
/// `Mote.openclStatus()` and `org.mote.rpc.Server.openclStatus()`: here, not in `rpc.rs`, so
/// that the library built without the RPC server has it too.
/// java: static native String openclStatus();
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_openclStatus<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
) -> JString<'l> {
    entry(&mut env, |env| {
        let devices = mote::device::opencl::system_devices()
            .map(|d| {
                d.iter()
                    .map(|i| (i.name.trim().to_string(), i.version.trim().to_string()))
                    .collect()
            })
            .map_err(|e| e.to_string());
        new_string(env, &opencl_status(devices))
    })
}

// ---------------------------------------------------------------------------------------------
// Model

/// java: static native long modelLoad(String path);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_modelLoad<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    path: JString<'l>,
) -> jlong {
    entry(&mut env, |env| {
        let path = string(env, &path, "model path")?;
        Ok(into_handle(Model::load(path)?))
    })
}

/// Load as data when `codeFree` (`mote::LoadOptions::code_free`, docs/code-free.md), read
/// into memory when `readIntoMemory`, within `memoryBudget` bytes (0: the default), else as
/// [`Java_org_mote_NativeBridge_modelLoad`] does.
/// java: static native long modelLoadWith(String path, boolean codeFree, boolean readIntoMemory, long memoryBudget);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_modelLoadWith<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    path: JString<'l>,
    code_free: jboolean,
    read_into_memory: jboolean,
    memory_budget: jlong,
) -> jlong {
    entry(&mut env, |env| {
        let path = string(env, &path, "model path")?;
        let options = load_options(code_free, read_into_memory, memory_budget)?;
        Ok(into_handle(Model::load_with(path, options)?))
    })
}

/// java: static native long modelFromSystemLib(String prefix);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_modelFromSystemLib<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    prefix: JString<'l>,
) -> jlong {
    entry(&mut env, |env| {
        let prefix = string(env, &prefix, "system library prefix")?;
        Ok(into_handle(Model::from_system_lib(&prefix)?))
    })
}

/// java: static native void modelFree(long model);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_modelFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    model: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java frees each handle once, after its last call finished.
        unsafe { free_handle::<Model>(model) };
        Ok(())
    })
}

/// java: static native boolean modelIsKernelLibrary(long model);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_modelIsKernelLibrary<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    model: jlong,
) -> jboolean {
    entry(&mut env, |_| {
        // SAFETY: a live model handle (see `handle_ref`).
        let m = unsafe { handle_ref::<Model>(model, "Model")? };
        Ok(m.is_kernel_library())
    })
}

/// java: static native String modelFunctionNames(long model);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_modelFunctionNames<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    model: jlong,
) -> JString<'l> {
    entry(&mut env, |env| {
        // SAFETY: a live model handle (see `handle_ref`).
        let m = unsafe { handle_ref::<Model>(model, "Model")? };
        new_string(env, &m.function_names().join("\n"))
    })
}

/// java: static native String modelParamNames(long model, String function);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_modelParamNames<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    model: jlong,
    function: JString<'l>,
) -> JString<'l> {
    entry(&mut env, |env| {
        // SAFETY: a live model handle (see `handle_ref`).
        let m = unsafe { handle_ref::<Model>(model, "Model")? };
        let f = string(env, &function, "function name")?;
        let names: Vec<String> = m
            .function_info(&f)?
            .params
            .into_iter()
            .map(|p| p.name)
            .collect();
        new_string(env, &names.join("\n"))
    })
}

/// `budgets`: `{memoryBudgetBytes, maxRegisters, stackBudgetBytes, maxInstructions}`, 0 for
/// a default (`mote::SessionOptions`).
/// `openclDevice` -1: the default device; `openclProgramCache` null: no cache.
/// java: static native long sessionNew(long model, int threads, String backends, boolean poison, boolean profiling, long[] budgets, int openclDevice, boolean openclProfiling, String openclProgramCache);
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_org_mote_NativeBridge_sessionNew<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    model: jlong,
    threads: jint,
    backends: JString<'l>,
    poison: jboolean,
    profiling: jboolean,
    budgets: JLongArray<'l>,
    opencl_device: jint,
    opencl_profiling: jboolean,
    opencl_program_cache: JString<'l>,
) -> jlong {
    entry(&mut env, |env| {
        // SAFETY: a live model handle (see `handle_ref`).
        let m = unsafe { handle_ref::<Model>(model, "Model")? };
        let opencl = OpenClArgs {
            device: opencl_device,
            profiling: opencl_profiling,
            program_cache: &opencl_program_cache,
        };
        let options = session_options(env, threads, &backends, poison, &budgets, &opencl)?;
        let mut s = m.session_with(options)?;
        s.set_profiling(profiling);
        Ok(into_handle(SessionH(Mutex::new(s))))
    })
}

// ---------------------------------------------------------------------------------------------
// Session

/// java: static native void sessionFree(long session);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_sessionFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    session: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java frees each handle once, after its last call finished.
        unsafe { free_handle::<SessionH>(session) };
        Ok(())
    })
}

/// The session's device as DLPack's `{device_type, device_id}` (`{1, 0}` for the CPU, `{4, N}`
/// for OpenCL device N).
/// java: static native long[] sessionDevice(long session);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_sessionDevice<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    session: jlong,
) -> JLongArray<'l> {
    entry(&mut env, |env| {
        // SAFETY: a live session handle (see `handle_ref`).
        let s = unsafe { handle_ref::<SessionH>(session, "Session")? };
        let pair = match lock_session(s)?.device() {
            mote::Device::Cpu => [1, 0],
            mote::Device::OpenCl { index } => [4, index as i64],
            other => {
                return Err(JErr::Mote(mote::Error::Unsupported(format!(
                    "no DLPack code for device {other}"
                ))))
            }
        };
        new_longs(env, &pair)
    })
}

/// java: static native int sessionThreads(long session);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_sessionThreads<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    session: jlong,
) -> jint {
    entry(&mut env, |_| {
        // SAFETY: a live session handle (see `handle_ref`).
        let s = unsafe { handle_ref::<SessionH>(session, "Session")? };
        Ok(lock_session(s)?.threads() as jint)
    })
}

/// `token`: the call's `CallToken` (0: not interruptible), see [`crate::cancel`].
/// java: static native long sessionCall(long session, long token, String function, int[] tags, long[] longs, double[] doubles, String[] strs);
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_org_mote_NativeBridge_sessionCall<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    session: jlong,
    token: jlong,
    function: JString<'l>,
    tags: JIntArray<'l>,
    longs: JLongArray<'l>,
    doubles: JDoubleArray<'l>,
    strs: JObjectArray<'l>,
) -> jlong {
    entry(&mut env, |env| {
        // SAFETY: a live session handle (see `handle_ref`).
        let s = unsafe { handle_ref::<SessionH>(session, "Session")? };
        let name = string(env, &function, "function name")?;
        let args = read_args(env, &tags, &longs, &doubles, &strs)?;
        let mut s = lock_session(s)?;
        let h = s.interrupt_handle();
        with_token(token, h, || call_any(&mut s, &name, &args))
    })
}

/// java: static native void sessionSetInput(long session, String function, int[] tags, long[] longs, double[] doubles, String[] strs);
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_org_mote_NativeBridge_sessionSetInput<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    session: jlong,
    function: JString<'l>,
    tags: JIntArray<'l>,
    longs: JLongArray<'l>,
    doubles: JDoubleArray<'l>,
    strs: JObjectArray<'l>,
) {
    entry(&mut env, |env| {
        // SAFETY: a live session handle (see `handle_ref`).
        let s = unsafe { handle_ref::<SessionH>(session, "Session")? };
        let name = string(env, &function, "function name")?;
        let args = read_args(env, &tags, &longs, &doubles, &strs)?;
        let values = shared_values(&args)?;
        lock_session(s)?.set_input(&name, values)?;
        Ok(())
    })
}

/// `token` as for [`Java_org_mote_NativeBridge_sessionCall`].
/// java: static native void sessionInvokeStateful(long session, long token, String function);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_sessionInvokeStateful<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    session: jlong,
    token: jlong,
    function: JString<'l>,
) {
    entry(&mut env, |env| {
        // SAFETY: a live session handle (see `handle_ref`).
        let s = unsafe { handle_ref::<SessionH>(session, "Session")? };
        let name = string(env, &function, "function name")?;
        let mut s = lock_session(s)?;
        let h = s.interrupt_handle();
        with_token(token, h, || Ok(s.invoke_stateful(&name)?))
    })
}

/// java: static native long sessionGetOutput(long session, String function);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_sessionGetOutput<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    session: jlong,
    function: JString<'l>,
) -> jlong {
    entry(&mut env, |env| {
        // SAFETY: a live session handle (see `handle_ref`).
        let s = unsafe { handle_ref::<SessionH>(session, "Session")? };
        let name = string(env, &function, "function name")?;
        let v = lock_session(s)?.get_output(&name)?;
        Ok(value_handle(v))
    })
}

/// java: static native String sessionProfile(long session);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_sessionProfile<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    session: jlong,
) -> JString<'l> {
    entry(&mut env, |env| {
        // SAFETY: a live session handle (see `handle_ref`).
        let s = unsafe { handle_ref::<SessionH>(session, "Session")? };
        let entries = lock_session(s)?.take_profile();
        let text: Vec<String> = entries
            .iter()
            .map(|e| {
                format!(
                    "{}\t{:?}\t{}\t{}",
                    e.name,
                    e.kind,
                    e.calls,
                    e.total.as_nanos()
                )
            })
            .collect();
        new_string(env, &text.join("\n"))
    })
}

// ---------------------------------------------------------------------------------------------
// Module (tvm4j)

/// Load options as for [`Java_org_mote_NativeBridge_modelLoadWith`]; the pool's sessions get
/// the session options as for [`Java_org_mote_NativeBridge_sessionNew`].
/// java: static native long moduleLoad(String path, int maxSessions, boolean codeFree, boolean readIntoMemory, long loadBudget, int threads, String backends, boolean poison, long[] budgets, int openclDevice, boolean openclProfiling, String openclProgramCache);
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_org_mote_NativeBridge_moduleLoad<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    path: JString<'l>,
    max_sessions: jint,
    code_free: jboolean,
    read_into_memory: jboolean,
    load_budget: jlong,
    threads: jint,
    backends: JString<'l>,
    poison: jboolean,
    budgets: JLongArray<'l>,
    opencl_device: jint,
    opencl_profiling: jboolean,
    opencl_program_cache: JString<'l>,
) -> jlong {
    entry(&mut env, |env| {
        let path = string(env, &path, "module path")?;
        let max = usize::try_from(max_sessions)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| JErr::Arg(format!("maxSessions {max_sessions} is not at least 1")))?;
        let opencl = OpenClArgs {
            device: opencl_device,
            profiling: opencl_profiling,
            program_cache: &opencl_program_cache,
        };
        let session = session_options(env, threads, &backends, poison, &budgets, &opencl)?;
        let load = load_options(code_free, read_into_memory, load_budget)?;
        let model = Model::load_with(path, load)?;
        Ok(into_handle(ModuleH {
            sessions: SessionPool::new(model, max, session),
        }))
    })
}

/// java: static native void moduleFree(long module);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_moduleFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    module: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java frees each handle once, after its last call finished.
        unsafe { free_handle::<ModuleH>(module) };
        Ok(())
    })
}

/// java: static native String moduleFunctionNames(long module);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_moduleFunctionNames<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    module: jlong,
) -> JString<'l> {
    entry(&mut env, |env| {
        // SAFETY: a live module handle (see `handle_ref`).
        let m = unsafe { handle_ref::<ModuleH>(module, "Module")? };
        new_string(env, &m.sessions.model().function_names().join("\n"))
    })
}

/// `token` as for [`Java_org_mote_NativeBridge_sessionCall`]: armed with the session this call
/// checked out of the pool.
/// java: static native long moduleCall(long module, long token, String function, int[] tags, long[] longs, double[] doubles, String[] strs);
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_org_mote_NativeBridge_moduleCall<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    module: jlong,
    token: jlong,
    function: JString<'l>,
    tags: JIntArray<'l>,
    longs: JLongArray<'l>,
    doubles: JDoubleArray<'l>,
    strs: JObjectArray<'l>,
) -> jlong {
    entry(&mut env, |env| {
        // SAFETY: a live module handle (see `handle_ref`).
        let m = unsafe { handle_ref::<ModuleH>(module, "Module")? };
        let name = string(env, &function, "function name")?;
        let args = read_args(env, &tags, &longs, &doubles, &strs)?;
        m.sessions.with_session(|s| {
            let h = s.interrupt_handle();
            with_token(token, h, || call_any(s, &name, &args))
        })?
    })
}

// ---------------------------------------------------------------------------------------------
// Interrupting a call (`org.mote.Interruptor`, see `crate::cancel`)

/// A new call token, for one interruptible call.
/// java: static native long tokenNew();
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tokenNew<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
) -> jlong {
    entry(&mut env, |_| Ok(into_handle(CallToken::default())))
}

/// The call's thread was interrupted: cancel the call (see [`crate::cancel`]).
/// java: static native void tokenInterrupt(long token);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tokenInterrupt<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    token: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: a live token handle: `Interruptor` calls this and frees the token under one
        // Java lock, so never after the free.
        let t = unsafe { handle_ref::<CallToken>(token, "call token")? };
        t.interrupt();
        Ok(())
    })
}

/// java: static native void tokenFree(long token);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tokenFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    token: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java frees each token once, after the call that used it returned and under
        // the lock `tokenInterrupt` is called under.
        unsafe { free_handle::<CallToken>(token) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Global (registered) functions

/// java: static native void registerFunction(String name, long callbackId);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_registerFunction<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    name: JString<'l>,
    callback_id: jlong,
) {
    entry(&mut env, |env| {
        let name = string(env, &name, "function name")?;
        crate::callback::register(env, &name, callback_id)
    })
}

/// java: static native boolean unregisterFunction(String name);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_unregisterFunction<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    name: JString<'l>,
) -> jboolean {
    entry(&mut env, |env| {
        let name = string(env, &name, "function name")?;
        Ok(mote::unregister_function(&name))
    })
}

/// java: static native boolean functionExists(String name);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_functionExists<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    name: JString<'l>,
) -> jboolean {
    entry(&mut env, |env| {
        let name = string(env, &name, "function name")?;
        Ok(mote::lookup_function(&name).is_some())
    })
}

/// java: static native long globalCall(String name, int[] tags, long[] longs, double[] doubles, String[] strs);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_globalCall<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    name: JString<'l>,
    tags: JIntArray<'l>,
    longs: JLongArray<'l>,
    doubles: JDoubleArray<'l>,
    strs: JObjectArray<'l>,
) -> jlong {
    entry(&mut env, |env| {
        let name = string(env, &name, "function name")?;
        let args = read_args(env, &tags, &longs, &doubles, &strs)?;
        let f = mote::lookup_function(&name).ok_or_else(|| {
            JErr::Mote(mote::Error::UnknownFunction {
                name: name.clone(),
                available: Vec::new(),
            })
        })?;
        let values = shared_values(&args)?;
        let view: Vec<Arg<'_>> = values.iter().map(Arg::from_value).collect();
        Ok(value_handle(f(&view)?))
    })
}

// ---------------------------------------------------------------------------------------------
// Tensor

/// java: static native long tensorEmpty(long[] shape, String dtype);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tensorEmpty<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    shape: JLongArray<'l>,
    dt: JString<'l>,
) -> jlong {
    entry(&mut env, |env| {
        let shape = longs_of(env, &shape, "shape")?;
        let dt = dtype(&string(env, &dt, "dtype")?)?;
        Ok(into_handle(TensorH::new(Tensor::zeros(&shape, dt)?)))
    })
}

/// java: static native long tensorFromBuffer(java.nio.ByteBuffer buffer, long[] shape, String dtype);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tensorFromBuffer<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    buffer: JByteBuffer<'l>,
    shape: JLongArray<'l>,
    dt: JString<'l>,
) -> jlong {
    entry(&mut env, |env| {
        if buffer.is_null() {
            return Err(JErr::Arg("buffer is null".into()));
        }
        let shape = longs_of(env, &shape, "shape")?;
        let dt = dtype(&string(env, &dt, "dtype")?)?;
        let addr = env.get_direct_buffer_address(&buffer)?;
        let cap = env.get_direct_buffer_capacity(&buffer)?;
        let Some(ptr) = std::ptr::NonNull::new(addr) else {
            return Err(JErr::Arg("not a direct ByteBuffer".into()));
        };
        if (addr as usize) % mote::ALIGNMENT != 0 {
            // Mote's kernels need aligned data: copy the bytes into a tensor of Mote's own
            // (documented: kernel writes then reach the tensor, not the buffer).
            // SAFETY: a direct buffer's memory is valid for `cap` bytes while the buffer lives;
            // the local reference `buffer` keeps it alive during this call, and the storage and
            // its view are dropped before the call returns (only the copy survives).
            let storage = unsafe { mote::Storage::borrowed(ptr, cap, None) };
            let view = Tensor::view(storage, 0, shape, dt)?;
            return Ok(into_handle(TensorH::new(view.deep_copy()?)));
        }
        // The storage keeps a global reference to the buffer, so Java cannot collect (and
        // free) its memory while any tensor views it.
        let owner = env.new_global_ref(&buffer)?;
        // SAFETY: a direct buffer's memory is valid for `cap` bytes for as long as the buffer
        // object lives, which the global reference guarantees. Java code writing the buffer
        // during a call that uses the tensor is a data race the Java docs forbid (README).
        let storage = unsafe { mote::Storage::borrowed(ptr, cap, Some(Box::new(owner))) };
        Ok(into_handle(TensorH::new(Tensor::view(
            storage, 0, shape, dt,
        )?)))
    })
}

/// The address of a direct buffer's first byte (0 for a buffer that is not direct), for
/// `Tensor.allocateBuffer`'s alignment (Android has `ByteBuffer.alignedSlice` only from API 33).
/// java: static native long bufferAddress(java.nio.ByteBuffer buffer);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_bufferAddress<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    buffer: JByteBuffer<'l>,
) -> jlong {
    entry(&mut env, |env| {
        if buffer.is_null() {
            return Err(JErr::Arg("buffer is null".into()));
        }
        Ok(env
            .get_direct_buffer_address(&buffer)
            .map_or(0, |p| p as jlong))
    })
}

/// java: static native void tensorFree(long tensor);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tensorFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java frees each handle once, after its last call finished.
        unsafe { free_handle::<TensorH>(tensor) };
        Ok(())
    })
}

fn tensor_of(h: jlong) -> Result<Tensor, JErr> {
    // SAFETY: a live tensor handle (see `handle_ref`).
    unsafe { handle_ref::<TensorH>(h, "Tensor")? }.get()
}

/// java: static native long[] tensorShape(long tensor);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tensorShape<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
) -> JLongArray<'l> {
    entry(&mut env, |env| {
        let t = tensor_of(tensor)?;
        new_longs(env, t.shape())
    })
}

/// java: static native String tensorDType(long tensor);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tensorDType<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
) -> JString<'l> {
    entry(&mut env, |env| {
        let t = tensor_of(tensor)?;
        new_string(env, &t.dtype().to_string())
    })
}

/// java: static native long tensorAddress(long tensor);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tensorAddress<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
) -> jlong {
    entry(&mut env, |_| Ok(tensor_of(tensor)?.data_ptr() as jlong))
}

/// java: static native void tensorCopyFrom(long tensor, byte[] data);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tensorCopyFrom<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
    data: JByteArray<'l>,
) {
    entry(&mut env, |env| {
        if data.is_null() {
            return Err(JErr::Arg("data is null".into()));
        }
        // SAFETY: a live tensor handle (see `handle_ref`).
        let cell = unsafe { handle_ref::<TensorH>(tensor, "Tensor")? };
        let mut g = cell
            .0
            .lock()
            .map_err(|_| JErr::State("tensor lock poisoned".into()))?;
        let t = g.as_mut().ok_or_else(|| {
            JErr::State("tensor is in use by a kernel call on another thread".into())
        })?;
        let n = data.len(env)?;
        if n != t.byte_len() {
            return Err(JErr::Mote(mote::Error::Mismatch(format!(
                "{n} bytes given for a {} tensor of shape {:?}, which holds {}",
                t.dtype(),
                t.shape(),
                t.byte_len()
            ))));
        }
        let bytes = t.data_mut().map_err(|_| {
            JErr::State(
                "tensor is shared (a ByteBuffer view or a result still references it); \
                 write through the view instead, or copy it"
                    .into(),
            )
        })?;
        // SAFETY: i8 and u8 have the same size and alignment; the slice is ours alone.
        let signed = unsafe { &mut *(bytes as *mut [u8] as *mut [i8]) };
        data.get_region(env, 0, signed)?;
        Ok(())
    })
}

/// java: static native byte[] tensorToBytes(long tensor);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tensorToBytes<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
) -> JByteArray<'l> {
    entry(&mut env, |env| {
        let t = tensor_of(tensor)?;
        Ok(env.byte_array_from_slice(t.data())?)
    })
}

/// java: static native long tensorRetain(long tensor);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_tensorRetain<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
) -> jlong {
    entry(&mut env, |_| Ok(into_handle(tensor_of(tensor)?)))
}

/// java: static native void retainedFree(long retained);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_retainedFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    retained: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java (its Cleaner) frees each retained handle once.
        unsafe { free_handle::<Tensor>(retained) };
        Ok(())
    })
}

/// java: static native java.nio.ByteBuffer retainedBuffer(long retained);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_retainedBuffer<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    retained: jlong,
) -> JByteBuffer<'l> {
    entry(&mut env, |env| {
        // SAFETY: a live retained handle: Java frees it only after the buffer is unreachable.
        let t = unsafe { handle_ref::<Tensor>(retained, "Tensor view")? };
        // SAFETY: the memory is valid for `byte_len` bytes while the retained tensor lives,
        // and Java's Cleaner frees that only once the returned buffer is unreachable.
        Ok(unsafe { env.new_direct_byte_buffer(t.data_ptr(), t.byte_len().max(1))? })
    })
}

/// java: static native java.nio.ByteBuffer pointerBuffer(long address, long bytes);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_pointerBuffer<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    address: jlong,
    bytes: jlong,
) -> JByteBuffer<'l> {
    entry(&mut env, |env| {
        if address == 0 || bytes < 0 {
            return Err(JErr::Arg(format!(
                "pointer {address:#x} with {bytes} bytes"
            )));
        }
        // SAFETY: not checkable: `Pointer.asByteBuffer` documents that the caller must name
        // memory a kernel passed to its callback, valid for `bytes` during that callback.
        Ok(unsafe { env.new_direct_byte_buffer(address as *mut u8, bytes as usize)? })
    })
}

// ---------------------------------------------------------------------------------------------
// Values

fn value_of<'a>(h: jlong) -> Result<&'a Value, JErr> {
    // SAFETY: a live value handle (see `handle_ref`).
    unsafe { handle_ref::<Value>(h, "Value") }
}

/// The tag of a value.
pub fn tag_of(v: &Value) -> Tag {
    match v {
        Value::None => Tag::None,
        Value::Int(_) => Tag::Int,
        Value::Float(_) => Tag::Float,
        Value::Bool(_) => Tag::Bool,
        Value::Str(_) => Tag::Str,
        Value::Tensor(_) => Tag::Tensor,
        v @ Value::Tuple(_) => match marked(v) {
            Some(Marked::Bytes(_)) => Tag::Bytes,
            Some(Marked::Function(_)) => Tag::Function,
            None => Tag::Tuple,
        },
        Value::OpaquePtr(_) => Tag::Pointer,
        Value::Shape(_) => Tag::Shape,
        Value::DType(_) => Tag::DType,
        _ => Tag::Other,
    }
}

/// java: static native void valueFree(long value);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    value: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java frees each value handle once.
        unsafe { free_handle::<Value>(value) };
        Ok(())
    })
}

/// java: static native int valueTag(long value);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueTag<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    value: jlong,
) -> jint {
    entry(&mut env, |_| Ok(tag_of(value_of(value)?) as jint))
}

/// java: static native String valueDescribe(long value);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueDescribe<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    value: jlong,
) -> JString<'l> {
    entry(&mut env, |env| {
        let v = value_of(value)?;
        let s = match v {
            Value::Str(s) => s.to_string(),
            Value::DType(d) => d.to_string(),
            other => match marked(other) {
                Some(Marked::Function(name)) => name.to_string(),
                Some(Marked::Bytes(_)) => "bytes".to_string(),
                None => other.kind().to_string(),
            },
        };
        new_string(env, &s)
    })
}

/// java: static native long valueLong(long value);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueLong<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    value: jlong,
) -> jlong {
    entry(&mut env, |_| {
        Ok(match value_of(value)? {
            Value::Int(i) => *i,
            Value::Bool(b) => *b as i64,
            Value::OpaquePtr(p) => *p as i64,
            other => return Err(JErr::Arg(format!("a {} is not an integer", other.kind()))),
        })
    })
}

/// java: static native double valueDouble(long value);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueDouble<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    value: jlong,
) -> f64 {
    entry(&mut env, |_| match value_of(value)? {
        Value::Float(f) => Ok(*f),
        other => Err(JErr::Arg(format!("a {} is not a float", other.kind()))),
    })
}

/// java: static native long valueTensor(long value);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueTensor<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    value: jlong,
) -> jlong {
    entry(&mut env, |_| match value_of(value)? {
        Value::Tensor(t) => Ok(into_handle(TensorH::new(t.clone()))),
        other => Err(JErr::Arg(format!("a {} is not a tensor", other.kind()))),
    })
}

/// java: static native long[] valueShape(long value);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueShape<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    value: jlong,
) -> JLongArray<'l> {
    entry(&mut env, |env| match value_of(value)? {
        Value::Shape(s) => new_longs(env, s),
        other => Err(JErr::Arg(format!("a {} is not a shape", other.kind()))),
    })
}

/// java: static native byte[] valueBytes(long value);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueBytes<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    value: jlong,
) -> JByteArray<'l> {
    entry(&mut env, |env| {
        let v = value_of(value)?;
        match marked(v) {
            Some(Marked::Bytes(t)) => Ok(env.byte_array_from_slice(t.data())?),
            _ => Err(JErr::Arg(format!("a {} is not a byte string", v.kind()))),
        }
    })
}

/// java: static native int valueTupleSize(long value);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueTupleSize<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    value: jlong,
) -> jint {
    entry(&mut env, |_| match value_of(value)? {
        Value::Tuple(t) => Ok(t.len() as jint),
        other => Err(JErr::Arg(format!("a {} is not a tuple", other.kind()))),
    })
}

/// java: static native long valueTupleGet(long value, int index);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueTupleGet<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    value: jlong,
    index: jint,
) -> jlong {
    entry(&mut env, |_| match value_of(value)? {
        Value::Tuple(t) => {
            let v = t
                .get(index as usize)
                .ok_or_else(|| JErr::Arg(format!("tuple index {index} of {}", t.len())))?;
            Ok(value_handle(v.clone()))
        }
        other => Err(JErr::Arg(format!("a {} is not a tuple", other.kind()))),
    })
}

/// java: static native long valueFrom(int tag, long l, double d, String s);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_NativeBridge_valueFrom<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tag: jint,
    l: jlong,
    d: f64,
    s: JString<'l>,
) -> jlong {
    entry(&mut env, |env| {
        let v = match tag {
            x if x == Tag::None as i32 => Value::None,
            x if x == Tag::Int as i32 => Value::Int(l),
            x if x == Tag::Float as i32 => Value::Float(d),
            x if x == Tag::Bool as i32 => Value::Bool(l != 0),
            x if x == Tag::Str as i32 => Value::Str(string(env, &s, "string")?.into()),
            x if x == Tag::Tensor as i32 => Value::Tensor(tensor_of(l)?),
            x if x == Tag::Bytes as i32 => bytes_value(tensor_of(l)?),
            x if x == Tag::Function as i32 => function_value(&string(env, &s, "function name")?)?,
            x => return Err(JErr::Arg(format!("cannot make a value of tag {x}"))),
        };
        Ok(value_handle(v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opencl_line_names_the_devices_or_says_why_there_is_none() {
        assert_eq!(
            opencl_status(Ok(vec![
                ("Adreno (TM) 740".into(), "OpenCL 3.0 Adreno(TM) 740".into()),
                ("cpu".into(), "OpenCL 1.2".into()),
            ])),
            "OpenCL: 0: Adreno (TM) 740 (OpenCL 3.0 Adreno(TM) 740), 1: cpu (OpenCL 1.2)"
        );
        assert_eq!(
            opencl_status(Ok(vec![])),
            "OpenCL: none (OpenCL lists no device)"
        );
        assert_eq!(
            opencl_status(Err(
                "no usable OpenCL library (looked for libOpenCL.so)".into()
            )),
            "OpenCL: none (no usable OpenCL library (looked for libOpenCL.so))"
        );
    }

    #[test]
    fn byte_strings_and_functions_cross_as_marked_tuples_only() {
        let t = Tensor::zeros(&[3], DType::U8).expect("a uint8 tensor");
        let b = bytes_value(t);
        assert_eq!(tag_of(&b), Tag::Bytes);
        assert!(matches!(marked(&b), Some(Marked::Bytes(t)) if t.shape() == [3]));

        assert!(function_value("mote-java.test.unregistered").is_err());
        mote::register_function(
            "mote-java.test.marked",
            std::sync::Arc::new(|_: &[Arg<'_>]| Ok(Value::None)),
        );
        let f = function_value("mote-java.test.marked").expect("a registered function");
        assert_eq!(tag_of(&f), Tag::Function);
        assert!(matches!(
            marked(&f),
            Some(Marked::Function("mote-java.test.marked"))
        ));
        mote::unregister_function("mote-java.test.marked");

        // A model's own tuples, even of two strings, stay tuples.
        let plain = Value::Tuple(std::sync::Arc::new(vec![
            Value::Str("mote-java:function".into()),
            Value::Str("x".into()),
        ]));
        assert_eq!(tag_of(&plain), Tag::Tuple);
        assert!(marked(&plain).is_none());
    }
}
