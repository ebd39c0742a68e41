//! Compiled exec mode (docs/tvm-format.md §3.6): a Relax function built with
//! `exec_mode="compiled"` is native code in the model library, `__vmtir__<name>(ctx, regs,
//! consts, funcs)`. It keeps every value in three lists of `TVMFFIAny` (its registers, the
//! constant pool, the function table), calls kernels of its own library directly, and reaches
//! everything else (the VM builtins, registered functions) by name through
//! `TVMFFIFunctionCall`. It never looks inside a value: it copies list items into argument
//! arrays (`TVMBackendAnyListSetPackedArg`) and moves results into its registers
//! (`TVMBackendAnyListMoveFromPackedReturn`), both functions Mote exports.
//!
//! Values that are not plain scalars live in boxed [`Cell`]s that a per-session table owns;
//! a list item holds a cell's address. A cell starts with a `DLTensor`, so a tensor's cell is
//! what kernels take as a `DLTensor*`. Every address the native code hands back is looked up
//! in the table before Mote reads it, and each cell has one owner: the session's pools, one
//! register, or (a result not yet moved into a register) the frame that made it.
//!
//! The native code gets no handle to the session: the builtins it calls find the running
//! frame in a per-thread stack that [`Session::invoke_compiled`] pushes for the length of the
//! native call (the builtins run on the calling thread, inside that call).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::Arc;

use super::builtins::Builtin;
use super::program::Program;
use super::Session;
use crate::error::{Error, Result};
use crate::host::abi::{type_index as ti, DLDevice, DLTensor, FfiAny, DEVICE_CPU};
use crate::host::error_slot::{c_boundary, lossy, set_error, take_error};
use crate::value::{Function, Value};

/// Type indices Mote gives the cells of values other than tensors (tvm-ffi's static object
/// indices, docs/tvm-format.md §6.2; only Mote reads these cells back).
mod object_index {
    pub const OBJECT: i32 = 64;
    pub const STR: i32 = 65;
    pub const FUNCTION: i32 = 68;
    pub const SHAPE: i32 = 69;
    pub const ARRAY: i32 = 71;
}

/// The functions compiled libraries import from the process by name, with Mote's definitions
/// (`Library` checks they are visible before such a library runs).
pub(crate) fn imported() -> [(&'static str, *const c_void); 3] {
    [
        (
            "TVMBackendAnyListSetPackedArg",
            TVMBackendAnyListSetPackedArg as *const c_void,
        ),
        (
            "TVMBackendAnyListMoveFromPackedReturn",
            TVMBackendAnyListMoveFromPackedReturn as *const c_void,
        ),
        (
            "TVMBackendAnyListResetItem",
            TVMBackendAnyListResetItem as *const c_void,
        ),
    ]
}

/// A value the native code holds by address. `dl` comes first: a tensor's cell is a
/// `DLTensor*` for kernels (its data and shape point into `value`, which never moves or
/// changes while the cell lives).
#[repr(C)]
struct Cell {
    dl: DLTensor,
    value: Value,
}

/// Who owns a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// The constant pool or the function table: lives as long as the session's state.
    Pool,
    /// One register of a running frame.
    Register,
    /// A result not yet moved into a register, made while frame `depth` was on top: freed
    /// when that frame ends if nobody took it.
    Loose { depth: usize },
}

/// The cells of one session, by address.
#[derive(Default)]
struct Cells(HashMap<usize, (Box<Cell>, Owner)>);

impl Cells {
    /// `v` as a list item: scalars in place, anything else in a new cell owned by `owner`.
    fn make(&mut self, v: Value, owner: Owner) -> Result<FfiAny> {
        let index = match &v {
            Value::None => return Ok(FfiAny::NONE),
            Value::Int(i) => return Ok(FfiAny::int(*i)),
            Value::Bool(b) => return Ok(FfiAny::bool(*b)),
            Value::Float(f) => return Ok(FfiAny::float(*f)),
            Value::DType(d) => return Ok(FfiAny::dtype(*d)),
            Value::OpaquePtr(p) => return Ok(FfiAny::ptr(ti::OPAQUE_PTR, *p as *const c_void)),
            Value::Tensor(_) => ti::DL_TENSOR_PTR,
            Value::Str(_) => object_index::STR,
            Value::Shape(_) => object_index::SHAPE,
            Value::Tuple(_) => object_index::ARRAY,
            Value::Function(_) => object_index::FUNCTION,
            Value::Storage(_) => object_index::OBJECT,
            v @ (Value::DeviceTensor(_) | Value::DeviceStorage(_)) => {
                return Err(Error::Unsupported(format!(
                    "a {} in a compiled Relax function (compiled exec mode runs on the CPU)",
                    v.kind()
                )))
            }
        };
        let dl = match &v {
            Value::Tensor(t) => DLTensor {
                data: t.data_ptr().cast(),
                device: DLDevice {
                    device_type: DEVICE_CPU,
                    device_id: 0,
                },
                ndim: t.ndim() as i32,
                dtype: t.dtype(),
                shape: t.shape().as_ptr().cast_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            _ => DLTensor {
                data: std::ptr::null_mut(),
                device: DLDevice {
                    device_type: DEVICE_CPU,
                    device_id: 0,
                },
                ndim: 0,
                dtype: crate::dtype::DType::F32,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        };
        let cell = Box::new(Cell { dl, value: v });
        let addr = &*cell as *const Cell as usize;
        self.0.insert(addr, (cell, owner));
        Ok(FfiAny::ptr(index, addr as *const c_void))
    }

    /// The cell an item refers to, if it is one of this table's.
    fn cell(&self, a: &FfiAny) -> Option<&(Box<Cell>, Owner)> {
        if a.type_index == ti::DL_TENSOR_PTR || a.type_index >= object_index::OBJECT {
            self.0.get(&(a.value as usize))
        } else {
            None
        }
    }

    /// The value an item stands for. `session` is the context pointer the native code was
    /// given, which stands for the VM as the interpreter passes it.
    fn value(&self, a: &FfiAny, session: usize) -> std::result::Result<Value, String> {
        Ok(match a.type_index {
            ti::NONE => Value::None,
            ti::INT => Value::Int(a.value as i64),
            ti::BOOL => Value::Bool(a.value != 0),
            ti::FLOAT => Value::Float(f64::from_bits(a.value)),
            ti::DATA_TYPE => Value::DType(crate::host::abi::unpack_dtype(a.value)),
            ti::OPAQUE_PTR if a.value as usize == session => Value::OpaquePtr(0),
            ti::OPAQUE_PTR => Value::OpaquePtr(a.value as usize),
            // A string literal of the native code, in the library's read-only data.
            ti::RAW_STR => Value::Str(lossy(a.value as usize as *const c_char).into()),
            t => match self.cell(a) {
                Some((c, _)) => c.value.clone(),
                None => {
                    return Err(format!(
                        "a value of type index {t} at {:#x} that Mote did not make",
                        a.value
                    ))
                }
            },
        })
    }

    /// Free what `a` owns, unless the pools own it.
    fn release(&mut self, a: FfiAny) {
        let key = a.value as usize;
        if matches!(self.cell(&a), Some((_, o)) if *o != Owner::Pool) {
            self.0.remove(&key);
        }
    }
}

/// A session's state for compiled functions: its cells and the two lists every frame shares.
pub(crate) struct CompiledState {
    cells: Cells,
    consts: Vec<FfiAny>,
    funcs: Vec<FfiAny>,
    /// Registers the running compiled frames hold (the register budget counts them).
    regs_held: usize,
}

impl CompiledState {
    fn new(m: &Program) -> Result<CompiledState> {
        let mut cells = Cells::default();
        let consts = m
            .exe()
            .constants
            .iter()
            .map(|c| cells.make(c.clone(), Owner::Pool))
            .collect::<Result<Vec<_>>>()?;
        let funcs = (0..m.exe().funcs.len() as u32)
            .map(|index| {
                let f = Function {
                    model_id: m.id(),
                    index,
                    saved: Arc::from([]),
                };
                cells.make(Value::Function(f), Owner::Pool)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(CompiledState {
            cells,
            consts,
            funcs,
            regs_held: 0,
        })
    }
}

/// A compiled function's call in progress, on the stack of `invoke_compiled`.
struct Frame {
    session: *mut Session,
    program: *const Program,
    regs: *mut FfiAny,
    nregs: usize,
    /// Its position in the thread's stack of frames.
    depth: usize,
    /// The first error a builtin raised, kept typed (the native code only passes on -1).
    error: Option<Error>,
}

thread_local! {
    /// The frames of compiled calls running on this thread, innermost last.
    static FRAMES: RefCell<Vec<*mut Frame>> = const { RefCell::new(Vec::new()) };
}

/// Pops its frame when the native call ends, however it ends.
struct Pushed;

impl Pushed {
    fn push(frame: *mut Frame) -> Pushed {
        FRAMES.with(|f| f.borrow_mut().push(frame));
        Pushed
    }
}

impl Drop for Pushed {
    fn drop(&mut self) {
        FRAMES.with(|f| f.borrow_mut().pop());
    }
}

fn depth() -> usize {
    FRAMES.with(|f| f.borrow().len())
}

/// Run `body` with the innermost frame, its session and program, or fail naming `entry`.
///
/// # Safety
/// Only from code the innermost frame's native call is running (its builtins and list
/// functions, on its thread): then the frame, its session and program are alive, and nothing
/// else uses them until `body` returns.
unsafe fn with_frame<R>(
    entry: &str,
    body: impl FnOnce(&mut Frame, &mut Session, &Program) -> std::result::Result<R, Error>,
) -> std::result::Result<R, ()> {
    let Some(fp) = FRAMES.with(|f| f.borrow().last().copied()) else {
        set_error(
            "RuntimeError",
            &format!("{entry}: called outside a compiled Relax function"),
        );
        return Err(());
    };
    // SAFETY: the caller's contract: the frame lives on the stack of the `invoke_compiled`
    // that pushed it, which is inside the native call that reached us, and the session and
    // program it points to are borrowed by that `invoke_compiled` for the call's length.
    let (frame, session, program) = unsafe { (&mut *fp, &mut *(*fp).session, &*(*fp).program) };
    body(frame, session, program).map_err(|e| {
        set_error("RuntimeError", &format!("{entry}: {e}"));
        if frame.error.is_none() {
            frame.error = Some(e);
        }
    })
}

fn list_error(what: String) -> Error {
    Error::Vm {
        function: "(compiled)".into(),
        pc: 0,
        message: what,
    }
}

/// `TVMBackendAnyListSetPackedArg`: copy item `index` of `list` into `args[offset]`, lent for
/// one call (docs/tvm-format.md §3.6).
///
/// # Safety
/// `args` has room for `offset + 1` items; called by a compiled function Mote is running.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListSetPackedArg(
    list: *mut c_void,
    index: i32,
    args: *mut FfiAny,
    offset: i32,
) -> i32 {
    c_boundary("TVMBackendAnyListSetPackedArg", -1, || {
        let body = |frame: &mut Frame, session: &mut Session, _: &Program| {
            let item = read_item(frame, session, list, index)?;
            if args.is_null() || offset < 0 {
                return Err(list_error("bad argument array".into()));
            }
            // SAFETY: the caller's contract: `args` has room at `offset`.
            unsafe { *args.add(offset as usize) = item };
            Ok(())
        };
        // SAFETY: only compiled functions import this; Mote runs them inside a frame.
        let r = unsafe { with_frame("TVMBackendAnyListSetPackedArg", body) };
        if r.is_ok() {
            0
        } else {
            -1
        }
    })
}

/// Item `index` of one of the frame's three lists.
fn read_item(frame: &Frame, session: &Session, list: *mut c_void, index: i32) -> Result<FfiAny> {
    let state = session
        .compiled
        .as_ref()
        .ok_or_else(|| list_error("no compiled state".into()))?;
    let items: &[FfiAny] = if list.cast::<FfiAny>() == frame.regs {
        // SAFETY: `regs` has `nregs` items, owned by the frame's `invoke_compiled`.
        unsafe { std::slice::from_raw_parts(frame.regs, frame.nregs) }
    } else if list.cast_const() == state.consts.as_ptr().cast() {
        &state.consts
    } else if list.cast_const() == state.funcs.as_ptr().cast() {
        &state.funcs
    } else {
        return Err(list_error(format!("{list:p} is not a list of this call")));
    };
    usize::try_from(index)
        .ok()
        .and_then(|i| items.get(i))
        .copied()
        .ok_or_else(|| list_error(format!("item {index} of a list of {}", items.len())))
}

/// `TVMBackendAnyListMoveFromPackedReturn`: move the result in `args[ret_offset]` into
/// register `index` of `list`, freeing what the register held.
///
/// # Safety
/// `args` has an item at `ret_offset`; called by a compiled function Mote is running.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListMoveFromPackedReturn(
    list: *mut c_void,
    index: i32,
    args: *mut FfiAny,
    ret_offset: i32,
) -> i32 {
    c_boundary("TVMBackendAnyListMoveFromPackedReturn", -1, || {
        let body = |frame: &mut Frame, session: &mut Session, _: &Program| {
            if args.is_null() || ret_offset < 0 {
                return Err(list_error("bad result array".into()));
            }
            // SAFETY: the caller's contract: `args` has an item at `ret_offset`.
            let slot = unsafe { &mut *args.add(ret_offset as usize) };
            store(frame, session, list, index, *slot)?;
            *slot = FfiAny::NONE;
            Ok(())
        };
        // SAFETY: as in `TVMBackendAnyListSetPackedArg`.
        let r = unsafe { with_frame("TVMBackendAnyListMoveFromPackedReturn", body) };
        if r.is_ok() {
            0
        } else {
            -1
        }
    })
}

/// `TVMBackendAnyListResetItem`: free what register `index` of `list` holds.
///
/// # Safety
/// Called by a compiled function Mote is running.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListResetItem(list: *mut c_void, index: i32) -> i32 {
    c_boundary("TVMBackendAnyListResetItem", -1, || {
        // SAFETY: as in `TVMBackendAnyListSetPackedArg`.
        let r = unsafe {
            with_frame("TVMBackendAnyListResetItem", |frame, session, _| {
                store(frame, session, list, index, FfiAny::NONE)
            })
        };
        if r.is_ok() {
            0
        } else {
            -1
        }
    })
}

/// Put `new` into register `index` of the frame (the only list the native code writes),
/// taking ownership of it if it is a cell, and free what the register held.
fn store(
    frame: &Frame,
    session: &mut Session,
    list: *mut c_void,
    index: i32,
    new: FfiAny,
) -> Result<()> {
    if list.cast::<FfiAny>() != frame.regs {
        return Err(list_error(format!("{list:p} is not this call's registers")));
    }
    let i = usize::try_from(index)
        .ok()
        .filter(|&i| i < frame.nregs)
        .ok_or_else(|| list_error(format!("register {index} of {}", frame.nregs)))?;
    let state = session
        .compiled
        .as_mut()
        .ok_or_else(|| list_error("no compiled state".into()))?;
    match new.type_index {
        ti::NONE
        | ti::INT
        | ti::BOOL
        | ti::FLOAT
        | ti::DATA_TYPE
        | ti::OPAQUE_PTR
        | ti::RAW_STR => {}
        t => match state.cells.0.get_mut(&(new.value as usize)) {
            Some((_, owner @ Owner::Loose { .. })) => *owner = Owner::Register,
            Some(_) => {
                return Err(list_error(format!(
                    "a result (type index {t}) that another list already owns"
                )))
            }
            None => {
                return Err(list_error(format!(
                    "a result of type index {t} that Mote did not make"
                )))
            }
        },
    }
    // SAFETY: `i < nregs`; the registers belong to the frame's `invoke_compiled`, which does
    // not touch them while the native call runs.
    let old = unsafe { std::mem::replace(&mut *frame.regs.add(i), new) };
    state.cells.release(old);
    Ok(())
}

/// A VM builtin the native code called by name (`TVMFFIFunctionCall` of a handle from
/// `TVMFFIEnvModLookupFromImports`): arguments read back from the cells, the builtin run as
/// the interpreter runs it, the result made a cell the caller must move into a register.
///
/// # Safety
/// `args` has `n` items (when `n > 0`) and `result` is writable.
pub(crate) unsafe fn call_builtin(
    b: Builtin,
    args: *const FfiAny,
    n: i32,
    result: *mut FfiAny,
) -> i32 {
    let raw = if n > 0 && !args.is_null() {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(args, n as usize) }
    } else {
        &[]
    };
    // SAFETY: builtins are looked up only by the native code of compiled functions (a kernel
    // that calls one by name outside a frame gets an error from `with_frame`).
    let r = unsafe {
        with_frame(b.name(), |_, session, program| {
            // Where a running compiled function stops: every builtin call (the kernels it calls
            // directly are out of reach), charged one instruction each.
            if session.interrupt.take() {
                return Err(Error::Cancelled);
            }
            session.call.instructions_left = session
                .call
                .instructions_left
                .checked_sub(1)
                .ok_or_else(|| Error::ResourceExhausted {
                    budget: "SessionOptions::max_instructions",
                    message: format!(
                        "`{}` in a compiled function: the call would pass its budget of {} \
                             instructions",
                        b.name(),
                        session.budget.instructions
                    ),
                })?;
            let ctx = session as *mut Session as usize;
            let state = session
                .compiled
                .as_ref()
                .ok_or_else(|| list_error("no compiled state".into()))?;
            let vals = raw
                .iter()
                .map(|a| state.cells.value(a, ctx))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|m| Error::Mismatch(format!("{}: {m}", b.name())))?;
            let out = session.builtin(program, b, &vals)?;
            loose(session, out)
        })
    };
    match r {
        Ok(v) => {
            // SAFETY: the caller's contract.
            unsafe { *result = v };
            0
        }
        Err(()) => -1,
    }
}

/// `v` as a result for the native code: a cell the innermost frame frees unless it is moved
/// into a register.
fn loose(session: &mut Session, v: Value) -> Result<FfiAny> {
    let state = session
        .compiled
        .as_mut()
        .ok_or_else(|| list_error("no compiled state".into()))?;
    state.cells.make(v, Owner::Loose { depth: depth() })
}

/// A registered function's argument as the value it stands for, when a compiled function
/// passes one of its cells (`None` otherwise: the caller reads it as a kernel's argument).
pub(crate) fn registered_arg(a: &FfiAny) -> Option<Value> {
    if FRAMES.with(|f| f.borrow().is_empty()) {
        return None;
    }
    // SAFETY: a frame is running on this thread, and we are inside its native call (a
    // registered function called from it).
    let r = unsafe {
        with_frame("TVMFFIFunctionCall", |_, session, _| {
            Ok(session
                .compiled
                .as_ref()
                .and_then(|s| s.cells.cell(a))
                .map(|(c, _)| c.value.clone()))
        })
    };
    r.ok().flatten()
}

/// A registered function's result, when a compiled function called it: scalars as they are,
/// anything else as a cell (`None` when no compiled call is running on this thread: a kernel
/// called it, and kernels only take scalars back).
pub(crate) fn registered_result(v: &Value) -> Option<std::result::Result<FfiAny, String>> {
    if FRAMES.with(|f| f.borrow().is_empty()) {
        return None;
    }
    // SAFETY: a frame is running on this thread, and we are inside its native call (a
    // registered function called from it).
    let r = unsafe {
        with_frame("TVMFFIFunctionCall", |_, session, _| {
            loose(session, v.clone())
        })
    };
    Some(r.map_err(|()| take_error().map_or_else(String::new, |(_, m)| m)))
}

impl Session {
    /// Run compiled function `fidx` (its native code `native`) on `args`
    /// (docs/tvm-format.md §3.6).
    pub(super) fn invoke_compiled(
        &mut self,
        m: &Program,
        fidx: usize,
        native: crate::host::abi::SafeCallFn,
        args: &[Value],
    ) -> Result<Value> {
        let f = &m.exe().funcs[fidx];
        if self.device_program.is_some() {
            return Err(Error::Unsupported(format!(
                "`{}` is a compiled Relax function (exec_mode=\"compiled\"), which Mote runs on \
                 the CPU only",
                f.name
            )));
        }
        if self.stack_used() > self.budget.stack_bytes || self.depth >= super::interp::MAX_DEPTH {
            return Err(self.stack_exhausted(f));
        }
        if self.compiled.is_none() {
            self.compiled = Some(Box::new(CompiledState::new(m)?));
        }
        let rfs = f.register_file_size;
        let held = self.regs.len() + self.compiled.as_ref().map_or(0, |s| s.regs_held);
        if held.saturating_add(rfs) > self.budget.max_registers {
            return Err(self.registers_exhausted(f, held));
        }
        let state = self
            .compiled
            .as_mut()
            .ok_or_else(|| list_error("no compiled state".into()))?;
        let mut regs = vec![FfiAny::NONE; rfs];
        for (r, a) in regs.iter_mut().zip(args) {
            match state.cells.make(a.clone(), Owner::Register) {
                Ok(v) => *r = v,
                Err(e) => {
                    regs.into_iter().for_each(|r| state.cells.release(r));
                    return Err(e);
                }
            }
        }
        state.regs_held += rfs;
        let (consts, funcs) = (state.consts.as_ptr(), state.funcs.as_ptr());
        let session = self as *mut Session;
        let mut frame = Frame {
            session,
            program: m,
            regs: regs.as_mut_ptr(),
            nregs: rfs,
            depth: depth() + 1,
            error: None,
        };
        let call = [
            FfiAny::ptr(ti::OPAQUE_PTR, session as *const c_void),
            FfiAny::ptr(ti::OPAQUE_PTR, regs.as_ptr().cast()),
            FfiAny::ptr(ti::OPAQUE_PTR, consts.cast()),
            FfiAny::ptr(ti::OPAQUE_PTR, funcs.cast()),
        ];
        let mut result = FfiAny::NONE;
        self.depth += 1;
        let rc = {
            let _pushed = Pushed::push(&mut frame);
            // SAFETY: `native` is the library's `__vmtir__` function (the safe-call ABI); the
            // lists it gets outlive the call (`regs` here, the pools in the session's state,
            // which nothing replaces while a call runs); the session is reached only through
            // the frame while the native code runs.
            unsafe { native(std::ptr::null_mut(), call.as_ptr(), 4, &mut result) }
        };
        // The native call has ended: the session is reached through `self` again.
        self.depth -= 1;
        // Nothing replaces the state while a call runs; without it no cell is left to release.
        let state = self
            .compiled
            .as_mut()
            .ok_or_else(|| list_error("no compiled state after the call".into()))?;
        state.regs_held -= rfs;
        let out = if rc == 0 {
            state
                .cells
                .value(&regs[f.num_args], session as usize)
                .map_err(|m| list_error(format!("`{}` returned {m}", f.name)))
        } else {
            let raised = take_error();
            Err(frame.error.take().unwrap_or_else(|| {
                let (kind, message) = raised.unwrap_or_else(|| {
                    (
                        "RuntimeError".into(),
                        format!("returned {rc} without an error message"),
                    )
                });
                Error::Kernel {
                    kernel: format!("__vmtir__{}", f.name),
                    kind,
                    message,
                }
            }))
        };
        state.cells.release(result);
        for r in regs {
            state.cells.release(r);
        }
        // Results nobody moved into a register.
        let d = frame.depth;
        state
            .cells
            .0
            .retain(|_, (_, o)| !matches!(o, Owner::Loose { depth } if *depth >= d));
        out
    }
}
