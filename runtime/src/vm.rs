//! The Relax VM interpreter (spec/tvm-0.27.md §3.7): frames, registers, calls into kernels,
//! builtins and registered functions, closures, and the stateful API.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::abi::{type_index as ti, DLDevice, DLTensor, FfiAny, SafeCallFn, DEVICE_CPU};
use crate::builtins::Builtin;
use crate::error::{Error, Result};
use crate::executable::{Arg, Instr};
use crate::model::{Callee, Model, ModelInner};
use crate::tensor::Pool;
use crate::threadpool::ThreadPool;
use crate::value::{Function, Value};

/// Deepest nesting of Relax function calls before the VM reports an error instead of
/// overflowing the stack.
const MAX_DEPTH: usize = 256;

/// Options for a [`Session`].
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// Threads kernels may use for parallel loops (the calling thread counts as one).
    /// `None`: the number of CPUs, or `MOTE_NUM_THREADS` / `TVM_NUM_THREADS` when set.
    pub threads: Option<usize>,
    /// Keep up to this many bytes of freed intermediate buffers for reuse.
    pub pool_limit_bytes: usize,
    /// Backends that may run offloaded subgraphs, in order of preference, by name
    /// (`"acl"`, `"bnns"`, `"cpu"`, or a plug-in's name). Empty: every backend available
    /// here, vendor libraries first and the built-in CPU backend last.
    pub backends: Vec<String>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            threads: None,
            pool_limit_bytes: 256 << 20,
            backends: Vec::new(),
        }
    }
}

/// Default thread count: the environment's choice, else the CPU count.
pub fn default_threads() -> usize {
    ["MOTE_NUM_THREADS", "TVM_NUM_THREADS"]
        .iter()
        .find_map(|v| {
            std::env::var(v)
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
        })
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}

/// What a profiled call was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    Kernel,
    Builtin,
    Function,
    Registered,
}

/// Accumulated time of one callee.
#[derive(Clone, Debug)]
pub struct ProfileEntry {
    pub name: String,
    pub kind: CallKind,
    pub calls: u64,
    pub total: Duration,
}

/// One call, for a Chrome/Perfetto trace.
#[derive(Clone, Debug)]
pub struct TraceEvent {
    pub name: String,
    pub kind: CallKind,
    /// Since the session's trace started.
    pub start: Duration,
    pub duration: Duration,
    pub depth: usize,
}

#[derive(Default)]
struct Profiler {
    by_func: HashMap<u32, (u64, Duration)>,
    trace: Option<(Instant, Vec<TraceEvent>)>,
}

/// A VM instance running one model: registers, memory pool, worker threads, stateful inputs.
///
/// A session is `Send` but not `Sync`: use it from one thread at a time, and create one session
/// per thread to run a model concurrently.
pub struct Session {
    model: Model,
    pool: Arc<Pool>,
    threads: Arc<ThreadPool>,
    regs: Vec<Value>,
    argbuf: Vec<Value>,
    dl_scratch: Vec<DLTensor>,
    any_scratch: Vec<FfiAny>,
    depth: usize,
    inputs: HashMap<String, Vec<Value>>,
    outputs: HashMap<String, Value>,
    profiler: Option<Box<Profiler>>,
    /// `SessionOptions::backends`, resolved to backends on the first subgraph call.
    backend_names: Vec<String>,
    backends: Option<Vec<Arc<dyn crate::backend::Backend>>>,
}

// SAFETY: the raw pointers in the scratch vectors are only meaningful during a kernel call made
// by the thread that owns the session; between calls they are dead data.
unsafe impl Send for Session {}

impl Session {
    pub(crate) fn new(model: Model, options: SessionOptions) -> Result<Session> {
        let threads = options.threads.unwrap_or_else(default_threads);
        if threads == 0 || threads > 1024 {
            return Err(Error::InvalidArgument(format!(
                "thread count {threads} (must be 1..=1024)"
            )));
        }
        Ok(Session {
            model,
            pool: Pool::new(options.pool_limit_bytes),
            threads: Arc::new(ThreadPool::new(threads)),
            regs: Vec::new(),
            argbuf: Vec::new(),
            dl_scratch: Vec::new(),
            any_scratch: Vec::new(),
            depth: 0,
            inputs: HashMap::new(),
            outputs: HashMap::new(),
            profiler: None,
            backend_names: options.backends.clone(),
            backends: None,
        })
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Threads available to parallel kernels.
    pub fn threads(&self) -> usize {
        self.threads.threads()
    }

    pub(crate) fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Call the Relax function `name`.
    pub fn call(&mut self, name: &str, args: &[Value]) -> Result<Value> {
        let fidx = self.model.vm_function(name)?;
        let threads = self.threads.clone();
        let model = self.model.inner.clone();
        threads.install(|| self.invoke_vm(&model, fidx, args))
    }

    /// Call with tensors, returning the output tensors (tuples flattened).
    pub fn run(&mut self, name: &str, inputs: &[crate::Tensor]) -> Result<Vec<crate::Tensor>> {
        let args: Vec<Value> = inputs.iter().cloned().map(Value::Tensor).collect();
        Ok(self.call(name, &args)?.flatten_tensors())
    }

    /// Stateful API: store the inputs of `name` for a later [`Session::invoke_stateful`].
    pub fn set_input(&mut self, name: &str, args: Vec<Value>) -> Result<()> {
        let fidx = self.model.vm_function(name)?;
        self.check_arity(fidx, args.len())?;
        self.inputs.insert(name.to_string(), args);
        Ok(())
    }

    /// Stateful API: run `name` on the inputs given to [`Session::set_input`].
    pub fn invoke_stateful(&mut self, name: &str) -> Result<()> {
        let args =
            self.inputs.get(name).cloned().ok_or_else(|| {
                Error::InvalidArgument(format!("no inputs were set for `{name}`"))
            })?;
        let out = self.call(name, &args)?;
        self.outputs.insert(name.to_string(), out);
        Ok(())
    }

    /// Stateful API: the output of the last [`Session::invoke_stateful`] of `name`.
    pub fn get_output(&self, name: &str) -> Result<Value> {
        self.outputs.get(name).cloned().ok_or_else(|| {
            Error::InvalidArgument(format!("`{name}` has not been invoked statefully"))
        })
    }

    /// Turn per-callee timing on or off (off by default; on costs two clock reads per call).
    pub fn set_profiling(&mut self, on: bool) {
        match (on, self.profiler.is_some()) {
            (true, false) => self.profiler = Some(Box::default()),
            (false, true) => self.profiler = None,
            _ => {}
        }
    }

    /// Record every call for a trace (implies profiling).
    pub fn set_tracing(&mut self, on: bool) {
        self.set_profiling(on || self.profiler.is_some());
        if let Some(p) = &mut self.profiler {
            p.trace = on.then(|| (Instant::now(), Vec::new()));
        }
    }

    /// Time per callee since profiling was turned on, slowest first; resets the counters.
    pub fn take_profile(&mut self) -> Vec<ProfileEntry> {
        let Some(p) = &mut self.profiler else {
            return Vec::new();
        };
        let m = &self.model.inner;
        let mut out: Vec<ProfileEntry> = p
            .by_func
            .drain()
            .map(|(f, (calls, total))| ProfileEntry {
                name: m.exe.funcs[f as usize].name.clone(),
                kind: kind_of(&m.callees[f as usize]),
                calls,
                total,
            })
            .collect();
        out.sort_by_key(|e| std::cmp::Reverse(e.total));
        out
    }

    /// The trace events recorded since tracing was turned on; resets the trace.
    pub fn take_trace(&mut self) -> Vec<TraceEvent> {
        match self.profiler.as_mut().and_then(|p| p.trace.as_mut()) {
            Some((_, events)) => std::mem::take(events),
            None => Vec::new(),
        }
    }

    fn check_arity(&self, fidx: usize, given: usize) -> Result<()> {
        let f = &self.model.inner.exe.funcs[fidx];
        if f.num_args != given {
            return Err(Error::ArgumentCount {
                function: f.name.clone(),
                expected: f.num_args,
                given,
                params: f.param_names.clone(),
            });
        }
        Ok(())
    }

    pub(crate) fn invoke_vm(
        &mut self,
        m: &ModelInner,
        fidx: usize,
        args: &[Value],
    ) -> Result<Value> {
        self.check_arity(fidx, args.len())?;
        if self.depth >= MAX_DEPTH {
            return Err(Error::Vm {
                function: m.exe.funcs[fidx].name.clone(),
                pc: 0,
                message: format!("calls nested deeper than {MAX_DEPTH}"),
            });
        }
        let base = self.regs.len();
        let rfs = m.exe.funcs[fidx].register_file_size;
        self.regs.resize(base + rfs, Value::None);
        self.regs[base..base + args.len()].clone_from_slice(args);
        self.depth += 1;
        let r = self.run_frame(m, fidx, base);
        self.depth -= 1;
        self.regs.truncate(base);
        r
    }

    fn run_frame(&mut self, m: &ModelInner, fidx: usize, base: usize) -> Result<Value> {
        let f = &m.exe.funcs[fidx];
        let mut pc = f.start;
        loop {
            let vm_err = |pc: usize, message: String| Error::Vm {
                function: f.name.clone(),
                pc,
                message,
            };
            if pc >= f.end {
                return Err(vm_err(pc, "ran past the end of the function".into()));
            }
            match m.exe.instrs[pc] {
                Instr::Call {
                    dst,
                    func,
                    args,
                    nargs,
                } => {
                    // `null_value` only drops a register (the compiler's early frees).
                    if nargs == 0
                        && self.profiler.is_none()
                        && matches!(
                            m.callees[func as usize],
                            Callee::Builtin(Builtin::NullValue)
                        )
                    {
                        if let Some(d) = dst {
                            self.regs[base + d as usize] = Value::None;
                        }
                        pc += 1;
                        continue;
                    }
                    if let Callee::Kernel(k) = m.callees[func as usize] {
                        let v = self.call_kernel_in_place(
                            m,
                            func,
                            k,
                            base,
                            m.exe.call_args(args, nargs),
                        )?;
                        if let Some(d) = dst {
                            self.regs[base + d as usize] = v;
                        }
                        pc += 1;
                        continue;
                    }
                    let mut argv = std::mem::take(&mut self.argbuf);
                    let mark = argv.len();
                    for &a in m.exe.call_args(args, nargs) {
                        let v = self.read(m, base, a);
                        argv.push(v);
                    }
                    let r = self.call_index(m, func, &argv[mark..]);
                    argv.truncate(mark);
                    self.argbuf = argv;
                    let v = r?;
                    if let Some(d) = dst {
                        self.regs[base + d as usize] = v;
                    }
                }
                Instr::Ret { reg } => return Ok(self.read(m, base, reg)),
                Instr::Goto { target } => {
                    pc = target;
                    continue;
                }
                Instr::If { cond, else_target } => {
                    let c = self.read(m, base, cond);
                    let c = c.as_int().ok_or_else(|| {
                        vm_err(pc, format!("If condition is a {}, not an int", c.kind()))
                    })?;
                    pc = if c != 0 { pc + 1 } else { else_target };
                    continue;
                }
            }
            pc += 1;
        }
    }

    #[inline]
    fn read(&self, m: &ModelInner, base: usize, a: Arg) -> Value {
        match a {
            Arg::Reg(r) => self.regs[base + r as usize].clone(),
            Arg::Void => Value::None,
            Arg::Vm => Value::OpaquePtr(0),
            Arg::Imm(i) => Value::Int(i),
            Arg::Const(c) => m.exe.constants[c as usize].clone(),
            Arg::Func(f) => Value::Function(Function {
                model_id: m.id,
                index: f,
                saved: Arc::from([]),
            }),
        }
    }

    /// Call function-table entry `func` with `args`.
    pub(crate) fn call_index(
        &mut self,
        m: &ModelInner,
        func: u32,
        args: &[Value],
    ) -> Result<Value> {
        let start = self.profiler.is_some().then(Instant::now);
        let model = m;
        let r = match &model.callees[func as usize] {
            Callee::Vm(i) => self.invoke_vm(m, *i as usize, args),
            Callee::Kernel(k) => self.call_kernel(m, func, *k, args),
            Callee::Builtin(b) => self.builtin(m, *b, args),
            Callee::Subgraph => self.run_subgraph(m, args),
            Callee::Registered(f) => f(args).map_err(|e| match e {
                e @ Error::Callback { .. } => e,
                e => Error::Callback {
                    name: model.exe.funcs[func as usize].name.clone(),
                    message: e.to_string(),
                },
            }),
        };
        if let Some(start) = start {
            self.record(m, func, start);
        }
        r
    }

    fn record(&mut self, m: &ModelInner, func: u32, start: Instant) {
        let depth = self.depth;
        let Some(p) = self.profiler.as_mut() else {
            return;
        };
        let d = start.elapsed();
        let e = p.by_func.entry(func).or_default();
        e.0 += 1;
        e.1 += d;
        if let Some((t0, events)) = &mut p.trace {
            events.push(TraceEvent {
                name: m.exe.funcs[func as usize].name.clone(),
                kind: kind_of(&m.callees[func as usize]),
                start: start.saturating_duration_since(*t0),
                duration: d,
                depth,
            });
        }
    }

    /// Call a function value (a closure or function-table entry), appending its saved args.
    pub(crate) fn call_function(
        &mut self,
        m: &ModelInner,
        f: &Function,
        args: &[Value],
    ) -> Result<Value> {
        if f.model_id != m.id {
            return Err(Error::InvalidArgument(
                "a function value from another model".into(),
            ));
        }
        if f.saved.is_empty() {
            return self.call_index(m, f.index, args);
        }
        let mut all = args.to_vec();
        all.extend(f.saved.iter().cloned());
        self.call_index(m, f.index, &all)
    }

    fn call_kernel(
        &mut self,
        m: &ModelInner,
        func: u32,
        k: SafeCallFn,
        args: &[Value],
    ) -> Result<Value> {
        let mut dl = std::mem::take(&mut self.dl_scratch);
        let mut anys = std::mem::take(&mut self.any_scratch);
        let r = invoke_kernel(&mut dl, &mut anys, k, args.len(), |i| {
            ArgView::Val(&args[i])
        });
        self.dl_scratch = dl;
        self.any_scratch = anys;
        r.map_err(|e| e.into_error(&m.exe.funcs[func as usize].name))
    }

    /// A kernel call straight from the instruction's argument words: registers and constants
    /// are read in place, without the reference-count traffic of cloning them into values.
    fn call_kernel_in_place(
        &mut self,
        m: &ModelInner,
        func: u32,
        k: SafeCallFn,
        base: usize,
        words: &[Arg],
    ) -> Result<Value> {
        let start = self.profiler.is_some().then(Instant::now);
        let mut dl = std::mem::take(&mut self.dl_scratch);
        let mut anys = std::mem::take(&mut self.any_scratch);
        let regs = &self.regs;
        let r = invoke_kernel(&mut dl, &mut anys, k, words.len(), |i| match words[i] {
            Arg::Reg(r) => ArgView::Val(&regs[base + r as usize]),
            Arg::Const(c) => ArgView::Val(&m.exe.constants[c as usize]),
            Arg::Imm(v) => ArgView::Int(v),
            Arg::Void | Arg::Vm | Arg::Func(_) => ArgView::Other("special register or function"),
        });
        self.dl_scratch = dl;
        self.any_scratch = anys;
        if let Some(start) = start {
            self.record(m, func, start);
        }
        r.map_err(|e| e.into_error(&m.exe.funcs[func as usize].name))
    }
}

impl Session {
    /// A `mote.subgraph` call: `(desc, inputs..., constants..., outputs...)`.
    fn run_subgraph(&mut self, m: &ModelInner, args: &[Value]) -> Result<Value> {
        let desc = match args.first() {
            Some(Value::Str(s)) => s,
            _ => {
                return Err(Error::Subgraph {
                    subgraph: crate::model::SUBGRAPH_FUNCTION.into(),
                    node: None,
                    message: "the first argument is not the description string".into(),
                })
            }
        };
        // The call site: the same description constant and the same weights.
        let site = m
            .subgraphs
            .iter()
            .filter(|s| Arc::ptr_eq(&s.desc, desc) || *s.desc == **desc)
            .find(|s| {
                let ni = s.graph.inputs.len();
                s.constants.iter().enumerate().all(|(k, c)| {
                    matches!(args.get(1 + ni + k), Some(Value::Tensor(t)) if t.same_data(c))
                })
            })
            .ok_or_else(|| Error::Subgraph {
                subgraph: crate::model::SUBGRAPH_FUNCTION.into(),
                node: None,
                message: "a call that does not match any call site checked at load (description or weights differ)".into(),
            })?;
        let g = &site.graph;
        let (ni, nc, no) = (g.inputs.len(), g.constants.len(), g.outputs.len());
        let bad = |message: String| Error::Subgraph {
            subgraph: g.name.clone(),
            node: None,
            message,
        };
        if args.len() != 1 + ni + nc + no {
            return Err(bad(format!(
                "called with {} arguments, the description needs 1 + {ni} inputs + {nc} constants + {no} outputs",
                args.len()
            )));
        }
        let tensor_at = |k: usize, what: &str, t: usize| -> Result<crate::Tensor> {
            let d = &g.tensors[t];
            match &args[k] {
                Value::Tensor(x) if x.shape() == d.shape.as_slice() && x.dtype() == d.dtype => {
                    Ok(x.clone())
                }
                Value::Tensor(x) => Err(bad(format!(
                    "{what} is a {} tensor of shape {:?}, the description says {} {:?}",
                    x.dtype(),
                    x.shape(),
                    d.dtype,
                    d.shape
                ))),
                v => Err(bad(format!("{what} is a {}, not a tensor", v.kind()))),
            }
        };
        let inputs = g
            .inputs
            .iter()
            .enumerate()
            .map(|(k, &t)| tensor_at(1 + k, &format!("input {k}"), t))
            .collect::<Result<Vec<_>>>()?;
        let outputs = g
            .outputs
            .iter()
            .enumerate()
            .map(|(k, &t)| tensor_at(1 + ni + nc + k, &format!("output {k}"), t))
            .collect::<Result<Vec<_>>>()?;
        if self.backends.is_none() {
            self.backends = Some(crate::backend::resolve(&self.backend_names));
        }
        let backends = self.backends.as_deref().unwrap_or(&[]);
        let exec = site.executor(backends)?;
        exec.run(&inputs, &site.constants, &outputs)?;
        Ok(Value::None)
    }
}

fn kind_of(c: &Callee) -> CallKind {
    match c {
        Callee::Vm(_) => CallKind::Function,
        Callee::Kernel(_) => CallKind::Kernel,
        Callee::Builtin(_) => CallKind::Builtin,
        Callee::Registered(_) => CallKind::Registered,
        Callee::Subgraph => CallKind::Builtin,
    }
}

/// A kernel argument as seen without cloning it.
enum ArgView<'a> {
    Val(&'a Value),
    Int(i64),
    Other(&'static str),
}

enum KernelFailure {
    BadArgument(usize, &'static str),
    Raised { kind: String, message: String },
}

impl KernelFailure {
    fn into_error(self, kernel: &str) -> Error {
        match self {
            KernelFailure::BadArgument(i, kind) => Error::Mismatch(format!(
                "kernel `{kernel}`: argument {i} is a {kind}, which kernels cannot take"
            )),
            KernelFailure::Raised { kind, message } => Error::Kernel {
                kernel: kernel.to_string(),
                kind,
                message,
            },
        }
    }
}

/// Call kernel `k` with `n` arguments: tensors as `DLTensor*` (type 7, offset folded into
/// `data`), scalars by value.
fn invoke_kernel<'a>(
    dl: &mut Vec<DLTensor>,
    anys: &mut Vec<FfiAny>,
    k: SafeCallFn,
    n: usize,
    get: impl Fn(usize) -> ArgView<'a>,
) -> Result<Value, KernelFailure> {
    dl.clear();
    anys.clear();
    for i in 0..n {
        match get(i) {
            ArgView::Val(Value::Tensor(t)) => dl.push(DLTensor {
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
            }),
            ArgView::Val(
                Value::None
                | Value::Int(_)
                | Value::Bool(_)
                | Value::Float(_)
                | Value::DType(_)
                | Value::OpaquePtr(_),
            )
            | ArgView::Int(_) => {}
            ArgView::Val(v) => return Err(KernelFailure::BadArgument(i, v.kind())),
            ArgView::Other(what) => return Err(KernelFailure::BadArgument(i, what)),
        }
    }
    // `dl` is complete and not resized below, so pointers into it stay valid.
    let mut next = 0;
    for i in 0..n {
        anys.push(match get(i) {
            ArgView::Val(Value::Tensor(_)) => {
                let p = &dl[next] as *const DLTensor;
                next += 1;
                FfiAny::ptr(ti::DL_TENSOR_PTR, p.cast())
            }
            ArgView::Val(Value::Int(i)) => FfiAny::int(*i),
            ArgView::Int(i) => FfiAny::int(i),
            ArgView::Val(Value::Bool(b)) => FfiAny::bool(*b),
            ArgView::Val(Value::Float(f)) => FfiAny::float(*f),
            ArgView::Val(Value::DType(d)) => FfiAny::dtype(*d),
            ArgView::Val(Value::OpaquePtr(p)) => FfiAny::ptr(ti::OPAQUE_PTR, *p as *const _),
            _ => FfiAny::NONE,
        });
    }
    let mut result = FfiAny::NONE;
    // SAFETY: `k` is a safe-call kernel of the model's library (kept alive by the model); every
    // tensor argument points at a DLTensor in `dl` whose data and shape belong to values the
    // caller keeps alive for the duration of the call.
    let rc = unsafe { k(std::ptr::null_mut(), anys.as_ptr(), n as i32, &mut result) };
    if rc != 0 {
        let (kind, message) = crate::services::take_error().unwrap_or_else(|| {
            (
                "RuntimeError".into(),
                format!("returned {rc} without an error message"),
            )
        });
        return Err(KernelFailure::Raised { kind, message });
    }
    Ok(match result.type_index {
        ti::INT => Value::Int(result.value as i64),
        ti::BOOL => Value::Bool(result.value != 0),
        ti::FLOAT => Value::Float(f64::from_bits(result.value)),
        _ => Value::None,
    })
}
