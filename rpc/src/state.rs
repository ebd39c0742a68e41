//! What one RPC session owns and how each request acts on it (docs/rpc.md "Handles",
//! "Remote memory", "Functions").
//!
//! Everything here belongs to the session's own thread: handles are ids into this session's
//! table, data handles are ids into its memory table, and no state is shared with other
//! sessions.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::{Arc, Weak};
use std::time::Instant;

use mote::device::{DeviceQueue, DeviceStorage};
use mote::{
    DType, DeviceTensor, Function, Model, PackedFunc, Session, SessionOptions, Storage, Tensor,
    Value,
};
use serde_json::json;

use crate::interrupt::Calls;
use crate::sandbox::Sandbox;
use crate::session::{RequestError, SessionConfig};
use crate::timer::{TimeEvaluator, TimerParams};
use crate::wire::{self, type_index, Arg, Device, Packet, Ret, RpcCode, WireDType, WireTensor};

type Res<T> = Result<T, RequestError>;

/// Global functions a client can look up with `kGetGlobalFunc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Global {
    Upload,
    Download,
    DownloadLinkedModule,
    Remove,
    LoadModule,
    ModuleGetFunction,
    ImportModule,
    TimeEvaluator,
    Profile,
    Trace,
    SystemLib,
    SystemLibs,
}

impl Global {
    pub(crate) const ALL: [(&'static str, Global); 12] = [
        ("tvm.rpc.server.upload", Global::Upload),
        ("tvm.rpc.server.download", Global::Download),
        (
            "tvm.rpc.server.download_linked_module",
            Global::DownloadLinkedModule,
        ),
        ("tvm.rpc.server.remove", Global::Remove),
        ("tvm.rpc.server.load_module", Global::LoadModule),
        (
            "tvm.rpc.server.ModuleGetFunction",
            Global::ModuleGetFunction,
        ),
        ("tvm.rpc.server.ImportModule", Global::ImportModule),
        ("runtime.RPCTimeEvaluator", Global::TimeEvaluator),
        ("mote.profile", Global::Profile),
        ("mote.trace", Global::Trace),
        ("ffi.SystemLib", Global::SystemLib),
        ("mote.system_libs", Global::SystemLibs),
    ];

    fn lookup(name: &str) -> Option<Global> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, g)| *g)
    }

    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, g)| *g == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }
}

/// The functions every VM module answers (TVM's client looks them all up eagerly).
pub(crate) const VM_FUNCTIONS: [&str; 10] = [
    "vm_initialization",
    "set_input",
    "invoke_stateful",
    "get_output",
    "get_output_arity",
    "get_function_arity",
    "get_function_param_name",
    "invoke_closure",
    "save_function",
    "set_instrument",
];

/// Functions of a loaded Relax executable module.
const EXECUTABLE_FUNCTIONS: [&str; 3] = ["vm_load_executable", "stats", "has_function"];

/// A function bound by `save_function`.
struct Saved {
    function: String,
    args: Vec<Value>,
    include_return: bool,
}

pub(crate) struct VmModule {
    session: Session,
    saved: HashMap<String, Saved>,
}

pub(crate) enum ModKind {
    /// A loaded Relax model (TVM's `relax.VMExecutable`).
    Executable(Model),
    /// A VM made by `vm_load_executable`.
    Vm(RefCell<VmModule>),
    /// A kernel-only library: its functions are its kernels.
    Kernels {
        model: Model,
        options: SessionOptions,
        session: RefCell<Option<Session>>,
    },
    /// A module without functions: what TVM's `ffi.SystemLib(prefix)` gives when nothing is
    /// linked under that prefix (looking a function up in it answers "absent").
    Empty,
}

pub(crate) struct ModuleObj {
    kind: ModKind,
    label: String,
    imports: RefCell<Vec<Rc<ModuleObj>>>,
}

impl Drop for ModuleObj {
    fn drop(&mut self) {
        // An import chain can be as long as a client makes it (an import keeps its child alive
        // after the child's handle is freed); dropping it recursively would overflow the
        // session thread's stack. Take each module's imports out and drop them from a list.
        let mut pending = std::mem::take(self.imports.get_mut());
        while let Some(m) = pending.pop() {
            if let Ok(mut m) = Rc::try_unwrap(m) {
                pending.append(m.imports.get_mut());
            }
        }
    }
}

impl ModuleObj {
    fn new(kind: ModKind, label: String) -> Rc<ModuleObj> {
        Rc::new(ModuleObj {
            kind,
            label,
            imports: RefCell::new(Vec::new()),
        })
    }

    /// Whether this module itself has function `name`.
    fn has_own(&self, name: &str) -> bool {
        match &self.kind {
            ModKind::Executable(_) => EXECUTABLE_FUNCTIONS.contains(&name),
            ModKind::Vm(vm) => {
                let vm = vm.borrow();
                VM_FUNCTIONS.contains(&name)
                    || vm.saved.contains_key(name)
                    || vm
                        .session
                        .model()
                        .function_names()
                        .iter()
                        .any(|f| f == name)
            }
            ModKind::Kernels { model, .. } => model.function_names().iter().any(|f| f == name),
            ModKind::Empty => false,
        }
    }

    /// Whether `other` is this module or one of its imports, at any depth. Imports form a
    /// graph that may share modules, so each module is visited once: walking every path would
    /// take time exponential in the depth.
    fn reaches(self: &Rc<Self>, other: &Rc<ModuleObj>) -> bool {
        let mut seen = HashSet::new();
        let mut stack = vec![self.clone()];
        while let Some(m) = stack.pop() {
            if Rc::ptr_eq(&m, other) {
                return true;
            }
            if seen.insert(Rc::as_ptr(&m)) {
                stack.extend(m.imports.borrow().iter().cloned());
            }
        }
        false
    }

    /// The module (this one or an import) that provides `name`: this module, then its imports
    /// depth first in import order, each module visited once.
    fn find(self: &Rc<Self>, name: &str, query_imports: bool) -> Option<Rc<Self>> {
        if self.has_own(name) {
            return Some(self.clone());
        }
        if !query_imports {
            return None;
        }
        let mut seen = HashSet::from([Rc::as_ptr(self)]);
        let mut stack: Vec<Rc<Self>> = self.imports.borrow().iter().rev().cloned().collect();
        while let Some(m) = stack.pop() {
            if !seen.insert(Rc::as_ptr(&m)) {
                continue;
            }
            if m.has_own(name) {
                return Some(m);
            }
            stack.extend(m.imports.borrow().iter().rev().cloned());
        }
        None
    }
}

/// One model function, as a timer or the profiler calls it.
#[derive(Clone)]
pub(crate) struct Target {
    module: Rc<ModuleObj>,
    name: String,
}

impl Target {
    /// Calls the function with already converted arguments.
    pub(crate) fn invoke(&self, args: &[Value], calls: &Calls<'_>) -> Res<Value> {
        invoke_model(&self.module, &self.name, args, calls)
    }
}

/// Calls a model function of a VM or kernel module (not the VM's own API functions). `calls`
/// arms the call so that a server stop or the client's timeout interrupts it.
fn invoke_model(module: &ModuleObj, name: &str, args: &[Value], calls: &Calls<'_>) -> Res<Value> {
    match &module.kind {
        ModKind::Vm(vm) => {
            let mut vm = vm.borrow_mut();
            if let Some(s) = vm.saved.get(name) {
                // Bound arguments come last (TVM binds the last arguments of a saved closure).
                let mut all = args.to_vec();
                all.extend(s.args.iter().cloned());
                let (function, include_return) = (s.function.clone(), s.include_return);
                let h = vm.session.interrupt_handle();
                let r = calls.run(&h, || vm.session.call_device(&function, &all))?;
                return Ok(if include_return { r } else { Value::None });
            }
            if VM_FUNCTIONS.contains(&name) {
                return Err(RequestError::Invalid(format!(
                    "`{name}` is part of the VM's API, not a model function"
                )));
            }
            let h = vm.session.interrupt_handle();
            // Results on an OpenCL device stay there, as TVM's VM leaves them.
            Ok(calls.run(&h, || vm.session.call_device(name, args))?)
        }
        ModKind::Kernels {
            model,
            options,
            session,
        } => {
            let mut s = session.borrow_mut();
            if s.is_none() {
                // On the OpenCL device of the first device tensor passed, if any.
                let opencl_device = args.iter().find_map(|a| match a {
                    Value::DeviceTensor(t) => match t.device() {
                        mote::Device::OpenCl { index } => Some(index),
                        _ => None,
                    },
                    _ => None,
                });
                *s = Some(model.session_with(SessionOptions {
                    opencl_device: opencl_device.or(options.opencl_device),
                    ..options.clone()
                })?);
            }
            match s.as_mut() {
                // Kernel-only libraries: the kernel writes its outputs into the client's
                // buffers, through views only the call holds.
                Some(s) => {
                    let mut args = exclusive_views(args)?;
                    let h = s.interrupt_handle();
                    Ok(calls.run(&h, || s.call_kernel(name, &mut args))?)
                }
                None => Err(RequestError::Invalid("kernel session missing".into())),
            }
        }
        ModKind::Executable(_) => Err(RequestError::Invalid(format!(
            "`{name}` is not callable on an executable module; call vm_load_executable first"
        ))),
        ModKind::Empty => Err(empty_module(name)),
    }
}

/// The error for a function of an empty module (a system library with nothing linked).
fn empty_module(name: &str) -> RequestError {
    RequestError::Invalid(format!(
        "no function `{name}`: the module is empty (no model is linked into the server under \
         that system-library prefix)"
    ))
}

/// Kernel arguments as `Session::call_kernel` wants them: every tensor becomes a fresh view of
/// the same bytes that no other handle can reach, whose storage keeps the original alive.
fn exclusive_views(args: &[Value]) -> Res<Vec<Value>> {
    args.iter()
        .map(|v| match v {
            Value::Tensor(t) => {
                let owner = t.storage().clone();
                let len = owner.len();
                let ptr = NonNull::new(owner.as_ptr()).ok_or_else(|| {
                    RequestError::Invalid("a tensor without memory passed to a kernel".into())
                })?;
                // SAFETY: `owner` (moved into the new storage) keeps the `len` bytes at `ptr`
                // allocated for as long as the view lives. A session's state lives on its one
                // thread (`Rc`/`RefCell`, not `Send`), and this thread is inside the kernel call
                // for as long as the view is used, so no other reader or writer of these bytes
                // (the memory table, tensors returned earlier) can run meanwhile; the view is
                // dropped when the call returns.
                let storage = unsafe { Storage::borrowed(ptr, len, Some(Box::new(owner))) };
                Ok(Value::Tensor(Tensor::view(
                    storage,
                    t.byte_offset(),
                    t.shape_arc().clone(),
                    t.dtype(),
                )?))
            }
            other => Ok(other.clone()),
        })
        .collect()
}

/// Calls a closure a VM module returned (TVM's `invoke_closure`, or calling its handle).
fn call_closure(module: &ModuleObj, f: &Function, args: &[Value], calls: &Calls<'_>) -> Res<Value> {
    match &module.kind {
        ModKind::Vm(vm) => {
            let session = &mut vm.borrow_mut().session;
            let h = session.interrupt_handle();
            Ok(calls.run(&h, || session.call_function(f, args))?)
        }
        _ => Err(RequestError::Invalid(
            "a closure of a module that is not a VM".into(),
        )),
    }
}

/// A handle's object. Each handle given to the client owns one reference.
#[derive(Clone)]
enum Obj {
    Global(Global),
    Module(Rc<ModuleObj>),
    Func(Target),
    Timer(Rc<RefCell<TimeEvaluator>>),
    /// A closure returned by a VM module's function, called through that module's session.
    Closure {
        module: Rc<ModuleObj>,
        f: Function,
    },
    /// A tensor returned by a call; its data is registered in the memory table.
    Tensor {
        tensor: Tensor,
        region: u64,
    },
    /// A tensor on an OpenCL device returned by a call, registered likewise.
    DeviceTensor {
        tensor: DeviceTensor,
        region: u64,
    },
    /// Any other returned object (tuple, shape, closure).
    Value(Value),
    /// A function registered in the server's process (`mote::register_function`), served with
    /// `serve_registered_functions` (docs/rpc.md "Global functions"). Resolved once, when the
    /// client looked it up, as TVM's server resolves a global function: a later registration
    /// under the same name is seen by a new lookup, not by this handle.
    Registered {
        /// The name it was looked up by, for error messages.
        name: String,
        f: PackedFunc,
    },
}

/// Memory a data id names: host memory, or memory on one of the machine's OpenCL devices
/// (`remote.cl(N)`; docs/rpc.md "Devices"), reached only through copies.
enum Mem {
    Host(Arc<Storage>),
    Device(Arc<DeviceStorage>),
}

impl Mem {
    fn len(&self) -> usize {
        match self {
            Mem::Host(s) => s.len(),
            Mem::Device(s) => s.len(),
        }
    }

    /// The key of the memory table's reverse index.
    fn key(&self) -> usize {
        match self {
            Mem::Host(s) => s.as_ptr() as usize,
            Mem::Device(s) => Arc::as_ptr(s) as usize,
        }
    }

    /// The device this memory is on, as the wire names it.
    fn device(&self) -> Device {
        match self {
            Mem::Host(_) => Device::CPU,
            Mem::Device(s) => match s.device() {
                mote::Device::OpenCl { index } => Device {
                    device_type: OPENCL,
                    device_id: index as i32,
                },
                _ => Device::CPU,
            },
        }
    }
}

/// A block of server memory the client may name by its data id.
struct Region {
    storage: Mem,
    /// Allocated by the client (kDevAllocData*): writable, freed by kDevFreeData.
    client_alloc: bool,
    /// Live handles of returned tensors over this storage.
    returned_refs: usize,
}

/// The answer to one packet.
pub(crate) enum Reply {
    Frame(Vec<u8>),
    Shutdown,
    /// `kInitServer` with `rpc.Connect` to an allowed hop: the session connects there and
    /// relays (crate::chain); the client's answer depends on that connection.
    Chain(crate::chain::Hop),
}

pub(crate) struct State<'c> {
    config: &'c SessionConfig,
    /// Model calls, interrupted when the session must end (server stop, client timeout); long
    /// work polls `ending()` and gives up.
    calls: &'c Calls<'c>,
    // Declared before the sandbox so that models are released before their files go.
    handles: HashMap<u64, Obj>,
    regions: HashMap<u64, Region>,
    region_of_storage: HashMap<usize, u64>,
    sandbox: Sandbox,
    next_id: u64,
    /// Every storage allocated for the client, counted against `max_remote_memory` for as long
    /// as anything holds it: its region, or views a saved function or `set_input` still binds
    /// after kDevFreeData.
    client_storages: Vec<Weak<Storage>>,
    /// Every module made in this session, alive as long as a handle, an import or a function
    /// holds it: `max_handles` bounds these too (each VM module owns a Mote session and its
    /// worker threads).
    modules: Vec<std::rc::Weak<ModuleObj>>,
    /// One copy queue per OpenCL device the client allocated on, opened on first use.
    device_queues: HashMap<usize, DeviceQueue>,
    initialized: bool,
}

/// The options of every Mote session this server makes: the runtime's default budgets
/// (docs/untrusted-models.md §3), the configured threads and instruction budget.
fn session_options(config: &SessionConfig) -> SessionOptions {
    SessionOptions {
        threads: config.session_threads,
        max_instructions: config.max_instructions,
        ..SessionOptions::default()
    }
}

/// The text of the `kException` a failed request answers with (TVM's client raises `RPCError`
/// with it). A budget or a cancellation says so first, by the name of its error code.
fn wire_message(e: &RequestError) -> String {
    match e {
        RequestError::Mote(mote::Error::ResourceExhausted { .. }) => {
            format!("ResourceExhausted: {e}")
        }
        RequestError::Mote(mote::Error::Cancelled) => "Cancelled: the call was interrupted \
             because the session is ending (the server is stopping or the session's timeout \
             expired)"
            .into(),
        _ => e.to_string(),
    }
}

/// The Mote dtype of a wire dtype.
fn dtype_of(d: WireDType) -> DType {
    DType {
        code: d.code,
        bits: d.bits,
        lanes: d.lanes,
    }
}

fn str_arg<'a>(args: &'a [Arg], i: usize, what: &str) -> Res<&'a str> {
    match args.get(i) {
        Some(Arg::RawStr(s)) | Some(Arg::Str(s)) => Ok(s),
        Some(a) => Err(RequestError::Invalid(format!(
            "{what}: expected a string, got {}",
            a.kind()
        ))),
        None => Err(RequestError::Invalid(format!("{what}: argument missing"))),
    }
}

fn int_arg(args: &[Arg], i: usize, what: &str) -> Res<i64> {
    match args.get(i) {
        Some(Arg::Int(v)) => Ok(*v),
        Some(Arg::Bool(b)) => Ok(i64::from(*b)),
        Some(a) => Err(RequestError::Invalid(format!(
            "{what}: expected an int, got {}",
            a.kind()
        ))),
        None => Err(RequestError::Invalid(format!("{what}: argument missing"))),
    }
}

fn i32_arg(args: &[Arg], i: usize, what: &str) -> Res<i32> {
    let v = int_arg(args, i, what)?;
    i32::try_from(v).map_err(|_| RequestError::Invalid(format!("{what}: {v} is out of range")))
}

fn arity(args: &[Arg], n: usize, what: &str) -> Res<()> {
    if args.len() != n {
        return Err(RequestError::Invalid(format!(
            "{what} takes {n} arguments, {} were given",
            args.len()
        )));
    }
    Ok(())
}

/// DLPack's device type of OpenCL (`kDLOpenCL`), what TVM's `remote.cl(0)` names.
const OPENCL: i32 = 4;

/// An attribute of OpenCL device `id` (an index into the devices OpenCL lists, as TVM numbers
/// them), answered as TVM's OpenCL runtime answers it (docs/rpc.md "Devices"). Without OpenCL,
/// or past the last device, it does not exist and has no attributes.
fn opencl_attr(id: i32, kind: i64) -> Res<Arg> {
    let list = mote::device::opencl::system_devices().unwrap_or(&[]);
    let Some(d) = usize::try_from(id).ok().and_then(|i| list.get(i)) else {
        return match kind {
            0 => Ok(Arg::Int(0)),
            1..=16 => Ok(Arg::None),
            _ => Err(RequestError::Invalid(format!(
                "unknown device attribute kind {kind}"
            ))),
        };
    };
    let int = |v: u64| Arg::Int(i64::try_from(v).unwrap_or(i64::MAX));
    Ok(match kind {
        0 => Arg::Int(1),                       // kExist
        1 => int(d.max_work_group_size as u64), // kMaxThreadsPerBlock
        2 => Arg::Int(1),                       // kWarpSize: OpenCL has none
        3 => int(d.local_mem_bytes),            // kMaxSharedMemoryPerBlock
        4 => Arg::RawStr(
            // kComputeVersion: "3.0" of "OpenCL 3.0 ..."
            d.version
                .strip_prefix("OpenCL ")
                .and_then(|v| v.split_whitespace().next())
                .unwrap_or("")
                .to_string(),
        ),
        5 => Arg::RawStr(d.name.clone()),            // kDeviceName
        6 => int(u64::from(d.max_clock_mhz) * 1000), // kMaxClockRate, in kHz
        7 => int(u64::from(d.compute_units)),        // kMultiProcessorCount
        8 => Arg::RawStr(format!(
            // kMaxThreadDimensions
            "[{}]",
            d.max_work_item_sizes
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        11 => Arg::Int(120), // kApiVersion: OpenCL 1.2 entry points
        12 => Arg::RawStr(d.driver_version.clone()), // kDriverVersion
        13 => int(d.global_cache_bytes), // kL2CacheSizeBytes
        14 => int(d.global_mem_bytes), // kTotalGlobalMemory
        9 | 10 | 15 | 16 => Arg::None,
        _ => {
            return Err(RequestError::Invalid(format!(
                "unknown device attribute kind {kind}"
            )))
        }
    })
}

fn check_cpu(d: Device) -> Res<()> {
    if d.device_type != 1 {
        return Err(RequestError::Unsupported(format!(
            "device type {} (this server only has cpu, device type 1)",
            d.device_type
        )));
    }
    Ok(())
}

/// A device the client may use: the CPU (`None`) or one of the OpenCL devices the machine
/// lists (`Some(index)`); anything else is refused.
fn check_device(d: Device) -> Res<Option<usize>> {
    if d.device_type == OPENCL {
        let n = mote::device::opencl::system_devices().map_or(0, |l| l.len());
        return match usize::try_from(d.device_id) {
            Ok(i) if i < n => Ok(Some(i)),
            _ => Err(RequestError::Unsupported(format!(
                "OpenCL device {} (this server has {n})",
                d.device_id
            ))),
        };
    }
    if d.device_type != 1 {
        return Err(RequestError::Unsupported(format!(
            "device type {} (this server has cpu, device type 1, and the OpenCL devices, type 4)",
            d.device_type
        )));
    }
    Ok(None)
}

impl<'c> State<'c> {
    pub(crate) fn new(config: &'c SessionConfig, sandbox: Sandbox, calls: &'c Calls<'c>) -> Self {
        State {
            config,
            calls,
            handles: HashMap::new(),
            regions: HashMap::new(),
            region_of_storage: HashMap::new(),
            sandbox,
            next_id: 0x1000,
            client_storages: Vec::new(),
            modules: Vec::new(),
            device_queues: HashMap::new(),
            initialized: false,
        }
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Fails when the session already keeps `max_handles` modules alive, with or without
    /// handles (an import keeps its child alive after the child's handle is freed).
    /// What a loaded model becomes as a module, with the load logged (kernels, or for a Relax
    /// program where each offloaded node will run, so a remote user can see the backends).
    fn module_kind(&self, name: &str, model: Model) -> ModKind {
        if model.is_kernel_library() {
            log::info!(
                "load_module {name:?}: kernel-only library ({})",
                model.function_names().join(", ")
            );
            ModKind::Kernels {
                model,
                options: session_options(self.config),
                session: RefCell::new(None),
            }
        } else {
            log::info!(
                "load_module {name:?}: Relax executable ({})",
                model.function_names().join(", ")
            );
            // Where each offloaded node will run, so a remote user (and the phone test)
            // can see the backends at work.
            for p in model.partition_plan(&[]) {
                let on = |b: &str| p.nodes.iter().filter(|n| n.backend == b).count();
                let mut elsewhere: Vec<&str> = Vec::new();
                for n in &p.nodes {
                    if n.backend != p.target && !elsewhere.contains(&n.backend.as_str()) {
                        elsewhere.push(&n.backend);
                    }
                }
                let others: Vec<String> = elsewhere
                    .iter()
                    .map(|b| format!("{} on {b}", on(b)))
                    .collect();
                log::info!(
                    "load_module {name:?}: subgraph {}: {} of {} nodes on {}{}",
                    p.name,
                    on(&p.target),
                    p.nodes.len(),
                    p.target,
                    if others.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", others.join(", "))
                    }
                );
            }
            ModKind::Executable(model)
        }
    }

    fn module_room(&mut self) -> Res<()> {
        self.modules.retain(|w| w.strong_count() > 0);
        if self.modules.len() >= self.config.limits.max_handles {
            return Err(RequestError::Limit(format!(
                "the session keeps {} modules alive (imports included), the limit",
                self.modules.len()
            )));
        }
        Ok(())
    }

    fn insert(&mut self, obj: Obj) -> Res<u64> {
        if self.handles.len() >= self.config.limits.max_handles {
            return Err(RequestError::Limit(format!(
                "the session holds {} handles, the limit",
                self.config.limits.max_handles
            )));
        }
        let id = self.fresh_id();
        self.handles.insert(id, obj);
        Ok(id)
    }

    fn obj(&self, h: u64) -> Res<&Obj> {
        self.handles
            .get(&h)
            .ok_or_else(|| RequestError::Invalid(format!("unknown handle {h:#x}")))
    }

    fn module(&self, a: Option<&Arg>, what: &str) -> Res<Rc<ModuleObj>> {
        let h = match a {
            Some(Arg::Module(h)) | Some(Arg::ObjectRef { handle: h, .. }) => *h,
            Some(a) => {
                return Err(RequestError::Invalid(format!(
                    "{what}: expected a module, got {}",
                    a.kind()
                )))
            }
            None => return Err(RequestError::Invalid(format!("{what}: argument missing"))),
        };
        match self.obj(h)? {
            Obj::Module(m) => Ok(m.clone()),
            _ => Err(RequestError::Invalid(format!(
                "{what}: handle {h:#x} is not a module"
            ))),
        }
    }

    /// Handles one packet. Errors become `kException` frames; the session goes on.
    pub(crate) fn handle(&mut self, p: &Packet) -> Reply {
        match self.dispatch(p) {
            Ok(r) => r,
            Err(e) => Reply::Frame(wire::exception_frame(&wire_message(&e))),
        }
    }

    fn dispatch(&mut self, p: &Packet) -> Res<Reply> {
        let code = p
            .rpc_code()
            .ok_or_else(|| RequestError::Invalid(format!("unknown RPC code {}", p.code)))?;
        if code == RpcCode::Shutdown {
            return Ok(Reply::Shutdown);
        }
        if !self.initialized && code != RpcCode::InitServer {
            return Err(RequestError::Invalid(
                "the first request must be kInitServer".into(),
            ));
        }
        let ret1 = |a: Arg| Ok(Reply::Frame(wire::return_frame(&[a])));
        match code {
            RpcCode::InitServer => {
                let (ver, args) = wire::decode_init_server(&p.body)?;
                if ver != wire::PROTOCOL_VERSION {
                    return Err(RequestError::Invalid(format!(
                        "protocol version {ver:?} is not supported (this server speaks {})",
                        wire::PROTOCOL_VERSION
                    )));
                }
                if !args.is_empty() {
                    if self.initialized {
                        return Err(RequestError::Invalid(
                            "a session constructor after kInitServer: the session is already \
                             initialised"
                                .into(),
                        ));
                    }
                    let hop = crate::chain::parse(&args, &self.config.allow_hops)?;
                    return Ok(Reply::Chain(hop));
                }
                self.initialized = true;
                ret1(Arg::None)
            }
            RpcCode::CallFunc => {
                let (h, args) = wire::decode_call_func(&p.body)?;
                let r = self.call(h, &args)?;
                Ok(Reply::Frame(wire::return_frame(&r.to_args())))
            }
            RpcCode::CopyToRemote => {
                let (t, data) = wire::decode_copy_to_remote(&p.body)?;
                if let Some((s, dev)) = self.device_range(&t, data.len() as u64, true)? {
                    self.queue(dev)?.write(&s, t.byte_offset as usize, data)?;
                    return ret1(Arg::None);
                }
                let dst = self.range(&t, data.len() as u64, true)?;
                // SAFETY: `range` checked that `dst..dst+len` lies inside a live storage the
                // client allocated (the region keeps it alive). This session's thread is the only
                // one touching the storage now (no call is running), and `data` is a distinct
                // buffer (the packet body).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
                ret1(Arg::None)
            }
            RpcCode::CopyFromRemote => {
                let (t, n) = wire::decode_copy_from_remote(&p.body)?;
                let max = self.config.limits.max_packet.saturating_sub(16);
                if n > max {
                    return Err(RequestError::Limit(format!(
                        "a copy of {n} bytes exceeds the packet limit of {} bytes",
                        self.config.limits.max_packet
                    )));
                }
                if let Some((s, dev)) = self.device_range(&t, n, false)? {
                    let mut bytes = vec![0u8; n as usize];
                    self.queue(dev)?
                        .read(&s, t.byte_offset as usize, &mut bytes)?;
                    return Ok(Reply::Frame(wire::copy_ack_frame(&bytes)));
                }
                let src = self.range(&t, n, false)?;
                // SAFETY: `range` checked that `src..src+n` lies inside a live storage of this
                // session, kept alive by its region; nothing writes it while this thread reads.
                let bytes = unsafe { std::slice::from_raw_parts(src, n as usize) };
                Ok(Reply::Frame(wire::copy_ack_frame(bytes)))
            }
            RpcCode::GetGlobalFunc => {
                let args = wire::decode_seq(&p.body)?;
                let name = str_arg(&args, 0, "kGetGlobalFunc")?;
                let h = match Global::lookup(name) {
                    Some(g) => self.insert(Obj::Global(g))?,
                    // The server's own names come first; then, when the server serves them,
                    // the functions registered in its process (docs/rpc.md "Global
                    // functions").
                    None => match self.registered(name) {
                        Some(f) => self.insert(Obj::Registered {
                            name: name.to_owned(),
                            f,
                        })?,
                        None => 0,
                    },
                };
                ret1(Arg::OpaquePtr(h))
            }
            RpcCode::FreeHandle => {
                let args = wire::decode_seq(&p.body)?;
                let h = match args.first() {
                    Some(Arg::OpaquePtr(h)) | Some(Arg::Function(h)) | Some(Arg::Module(h)) => *h,
                    _ => {
                        return Err(RequestError::Invalid(
                            "kFreeHandle: expected a handle".into(),
                        ))
                    }
                };
                self.free_handle(h)?;
                ret1(Arg::None)
            }
            RpcCode::DevSetDevice => {
                let args = wire::decode_seq(&p.body)?;
                match args.first() {
                    Some(Arg::Device(d)) => check_device(*d).map(|_| ())?,
                    _ => {
                        return Err(RequestError::Invalid(
                            "kDevSetDevice: expected a device".into(),
                        ))
                    }
                }
                ret1(Arg::None)
            }
            RpcCode::DevGetAttr => {
                let args = wire::decode_seq(&p.body)?;
                let d = match args.first() {
                    Some(Arg::Device(d)) => *d,
                    _ => {
                        return Err(RequestError::Invalid(
                            "kDevGetAttr: expected a device".into(),
                        ))
                    }
                };
                let kind = int_arg(&args, 1, "kDevGetAttr kind")?;
                ret1(self.device_attr(d, kind)?)
            }
            RpcCode::DevAllocData => {
                let args = wire::decode_seq(&p.body)?;
                arity(&args, 4, "kDevAllocData")?;
                let dev = match args[0] {
                    Arg::Device(d) => check_device(d)?,
                    _ => {
                        return Err(RequestError::Invalid(
                            "kDevAllocData: expected a device".into(),
                        ))
                    }
                };
                let n = int_arg(&args, 1, "nbytes")?;
                let align = int_arg(&args, 2, "alignment")?;
                if align <= 0 || align as usize > mote::ALIGNMENT || (align & (align - 1)) != 0 {
                    return Err(RequestError::Invalid(format!(
                        "alignment {align} (must be a power of two up to {})",
                        mote::ALIGNMENT
                    )));
                }
                let n = u64::try_from(n)
                    .map_err(|_| RequestError::Invalid(format!("negative size {n}")))?;
                ret1(Arg::OpaquePtr(self.alloc(n, dev)?))
            }
            RpcCode::DevAllocDataWithScope => {
                let args = wire::decode_seq(&p.body)?;
                let t = match args.first() {
                    Some(Arg::Tensor(t)) => t,
                    _ => {
                        return Err(RequestError::Invalid(
                            "kDevAllocDataWithScope: expected a tensor".into(),
                        ))
                    }
                };
                let dev = check_device(t.device)?;
                match args.get(1) {
                    None | Some(Arg::None) => {}
                    Some(Arg::RawStr(s)) | Some(Arg::Str(s)) if s.is_empty() || s == "global" => {}
                    Some(a) => {
                        return Err(RequestError::Unsupported(format!(
                            "memory scope {a:?} (only \"global\")"
                        )))
                    }
                }
                let n = t.nbytes().ok_or_else(|| {
                    RequestError::Invalid(format!("tensor shape {:?} has no valid size", t.shape))
                })?;
                ret1(Arg::OpaquePtr(self.alloc(n, dev)?))
            }
            RpcCode::DevFreeData => {
                let args = wire::decode_seq(&p.body)?;
                let h = match args.get(1) {
                    Some(Arg::OpaquePtr(h)) => *h,
                    _ => {
                        return Err(RequestError::Invalid(
                            "kDevFreeData: expected a data handle".into(),
                        ))
                    }
                };
                self.free_data(h)?;
                ret1(Arg::None)
            }
            RpcCode::DevStreamSync | RpcCode::DevFreeStream | RpcCode::DevSetStream => {
                // Work is finished when a call or copy returns, on the CPU and on OpenCL
                // devices alike: there is only the null stream.
                let args = wire::decode_seq(&p.body)?;
                match args.first() {
                    Some(Arg::Device(d)) => check_device(*d).map(|_| ())?,
                    _ => return Err(RequestError::Invalid("expected a device".into())),
                }
                ret1(Arg::None)
            }
            RpcCode::DevCreateStream | RpcCode::DevGetCurrentStream => {
                let args = wire::decode_seq(&p.body)?;
                match args.first() {
                    Some(Arg::Device(d)) => check_device(*d).map(|_| ())?,
                    _ => return Err(RequestError::Invalid("expected a device".into())),
                }
                ret1(Arg::OpaquePtr(0))
            }
            RpcCode::CopyAmongRemote => {
                let args = wire::decode_seq(&p.body)?;
                let (from, to) = match (args.first(), args.get(1)) {
                    (Some(Arg::Tensor(a)), Some(Arg::Tensor(b))) => (a, b),
                    _ => {
                        return Err(RequestError::Invalid(
                            "kCopyAmongRemote: expected two tensors".into(),
                        ))
                    }
                };
                let n = from
                    .nbytes()
                    .ok_or_else(|| RequestError::Invalid("bad source shape".into()))?;
                if to.nbytes() != Some(n) {
                    return Err(RequestError::Invalid(format!(
                        "kCopyAmongRemote: source has {n} bytes, destination {:?}",
                        to.nbytes()
                    )));
                }
                let on_device = (
                    self.device_range(from, n, false)?,
                    self.device_range(to, n, true)?,
                );
                match on_device {
                    (None, None) => {
                        let src = self.range(from, n, false)?;
                        let dst = self.range(to, n, true)?;
                        // SAFETY: both ranges lie inside live storages of this session (checked
                        // by `range`); `copy` allows overlap; no other thread touches them now.
                        unsafe { std::ptr::copy(src, dst, n as usize) };
                    }
                    (Some((s, dev)), None) => {
                        let dst = self.range(to, n, true)?;
                        // SAFETY: `range` checked that `dst..dst+n` lies inside a live storage the
                        // client allocated; device memory is never host memory, so the two do
                        // not overlap; no other thread touches the storage now.
                        let out = unsafe { std::slice::from_raw_parts_mut(dst, n as usize) };
                        self.queue(dev)?.read(&s, from.byte_offset as usize, out)?;
                    }
                    (None, Some((d, dev))) => {
                        let src = self.range(from, n, false)?;
                        // SAFETY: as above, for a read of the source range.
                        let bytes = unsafe { std::slice::from_raw_parts(src, n as usize) };
                        self.queue(dev)?.write(&d, to.byte_offset as usize, bytes)?;
                    }
                    (Some((s, dev)), Some((d, to_dev))) => {
                        if dev != to_dev {
                            return Err(RequestError::Unsupported(
                                "copies between two OpenCL devices".into(),
                            ));
                        }
                        self.queue(dev)?.copy(
                            &s,
                            from.byte_offset as usize,
                            &d,
                            to.byte_offset as usize,
                            n as usize,
                        )?;
                    }
                }
                ret1(Arg::None)
            }
            RpcCode::Return | RpcCode::Exception | RpcCode::CopyAck | RpcCode::None => Err(
                RequestError::Invalid(format!("a client may not send {code:?}")),
            ),
            RpcCode::Shutdown => Ok(Reply::Shutdown),
        }
    }

    fn device_attr(&self, d: Device, kind: i64) -> Res<Arg> {
        // DeviceAttrKind values (docs/rpc.md "Devices").
        if d.device_type == OPENCL {
            return opencl_attr(d.device_id, kind);
        }
        if d.device_type != 1 {
            return if kind == 0 {
                Ok(Arg::Int(0))
            } else {
                check_cpu(d).map(|_| Arg::None)
            };
        }
        Ok(match kind {
            0 => Arg::Int(1),                              // kExist
            5 => Arg::RawStr("cpu".into()),                // kDeviceName
            7 => Arg::Int(mote::default_threads() as i64), // kMultiProcessorCount
            1..=16 => Arg::None,
            _ => {
                return Err(RequestError::Invalid(format!(
                    "unknown device attribute kind {kind}"
                )))
            }
        })
    }

    /// The copy queue of OpenCL device `index`, opened on first use with the session's remote
    /// memory limit as its budget.
    fn queue(&mut self, index: usize) -> Res<&mut DeviceQueue> {
        if !self.device_queues.contains_key(&index) {
            let budget =
                usize::try_from(self.config.limits.max_remote_memory).unwrap_or(usize::MAX);
            let q = DeviceQueue::open(mote::Device::OpenCl { index }, budget)?;
            self.device_queues.insert(index, q);
        }
        Ok(self.device_queues.get_mut(&index).expect("inserted above"))
    }

    /// Allocates `n` bytes for the client, on the host (`device` None) or on OpenCL device
    /// `device`; returns the data id. Host and device memory count together against the
    /// session's remote memory limit.
    fn alloc(&mut self, n: u64, device: Option<usize>) -> Res<u64> {
        let max = self.config.limits.max_remote_memory;
        self.client_storages.retain(|w| w.strong_count() > 0);
        let on_devices: u64 = self
            .device_queues
            .values()
            .map(|q| q.bytes_in_use() as u64)
            .sum();
        let used: u64 = self
            .client_storages
            .iter()
            .filter_map(Weak::upgrade)
            .map(|s| s.len() as u64)
            .sum::<u64>()
            + on_devices;
        if used.saturating_add(n) > max {
            return Err(RequestError::Limit(format!(
                "allocating {n} bytes would bring this session's remote memory to {} bytes, above \
                 the limit of {max} bytes",
                used.saturating_add(n)
            )));
        }
        let len = usize::try_from(n).map_err(|_| RequestError::Limit(format!("{n} bytes")))?;
        let storage = match device {
            Some(index) => Mem::Device(self.queue(index)?.alloc(len)?),
            None => {
                let s = Storage::zeroed(len)?;
                self.client_storages.push(Arc::downgrade(&s));
                Mem::Host(s)
            }
        };
        let id = self.fresh_id();
        self.region_of_storage.insert(storage.key(), id);
        self.regions.insert(
            id,
            Region {
                storage,
                client_alloc: true,
                returned_refs: 0,
            },
        );
        Ok(id)
    }

    fn free_data(&mut self, id: u64) -> Res<()> {
        let r = self
            .regions
            .get_mut(&id)
            .filter(|r| r.client_alloc)
            .ok_or_else(|| RequestError::Invalid(format!("unknown data handle {id:#x}")))?;
        r.client_alloc = false;
        self.drop_region_if_unused(id);
        Ok(())
    }

    fn drop_region_if_unused(&mut self, id: u64) {
        if let Some(r) = self.regions.get(&id) {
            if !r.client_alloc && r.returned_refs == 0 {
                let key = r.storage.key();
                self.regions.remove(&id);
                self.region_of_storage.remove(&key);
            }
        }
    }

    fn free_handle(&mut self, h: u64) -> Res<()> {
        match self.handles.remove(&h) {
            Some(Obj::Tensor { region, .. } | Obj::DeviceTensor { region, .. }) => {
                if let Some(r) = self.regions.get_mut(&region) {
                    r.returned_refs = r.returned_refs.saturating_sub(1);
                }
                self.drop_region_if_unused(region);
                Ok(())
            }
            Some(_) => Ok(()),
            None => Err(RequestError::Invalid(format!("unknown handle {h:#x}"))),
        }
    }

    /// The address of `len` bytes at `t.data + t.byte_offset`, checked against the memory table.
    fn range(&self, t: &WireTensor, len: u64, write: bool) -> Res<*mut u8> {
        check_cpu(t.device)?;
        let r = self.region_for(t, len, write)?;
        let Mem::Host(storage) = &r.storage else {
            return Err(RequestError::Invalid(format!(
                "data handle {:#x} is device memory, named as cpu memory",
                t.data
            )));
        };
        let cap = storage.len() as u64;
        if t.byte_offset.checked_add(len).is_none_or(|end| end > cap) {
            return Err(RequestError::Invalid(format!(
                "{len} bytes at offset {} do not fit in the {cap}-byte allocation",
                t.byte_offset
            )));
        }
        // SAFETY: offset + len <= storage length, checked above, so the pointer stays inside
        // (or one past) the allocation.
        Ok(unsafe { storage.as_ptr().add(t.byte_offset as usize) })
    }

    /// The region a tensor record names, checked for a write and for `len` bytes at its offset.
    fn region_for(&self, t: &WireTensor, len: u64, write: bool) -> Res<&Region> {
        let r = self
            .regions
            .get(&t.data)
            .ok_or_else(|| RequestError::Invalid(format!("unknown data handle {:#x}", t.data)))?;
        if write && !r.client_alloc {
            return Err(RequestError::Invalid(
                "tensors returned by calls are read-only; copy into memory you allocated".into(),
            ));
        }
        let cap = r.storage.len() as u64;
        if t.byte_offset.checked_add(len).is_none_or(|end| end > cap) {
            return Err(RequestError::Invalid(format!(
                "{len} bytes at offset {} do not fit in the {cap}-byte allocation",
                t.byte_offset
            )));
        }
        if r.storage.device() != t.device {
            return Err(RequestError::Invalid(format!(
                "data handle {:#x} is memory of device ({}, {}), named as device ({}, {})",
                t.data,
                r.storage.device().device_type,
                r.storage.device().device_id,
                t.device.device_type,
                t.device.device_id
            )));
        }
        Ok(r)
    }

    /// For a tensor record on an OpenCL device: its storage (checked as `region_for` does) and
    /// the device index. `None` for a record on the CPU.
    fn device_range(
        &self,
        t: &WireTensor,
        len: u64,
        write: bool,
    ) -> Res<Option<(Arc<DeviceStorage>, usize)>> {
        let Some(dev) = check_device(t.device)? else {
            return Ok(None);
        };
        match &self.region_for(t, len, write)?.storage {
            Mem::Device(s) => Ok(Some((s.clone(), dev))),
            Mem::Host(_) => Err(RequestError::Invalid(format!(
                "data handle {:#x} is cpu memory, named as OpenCL memory",
                t.data
            ))),
        }
    }

    /// A view of a client tensor record over this session's memory: a host tensor, or a
    /// device tensor for a record on an OpenCL device (at offset 0: TVM's OpenCL host code
    /// takes no other).
    fn view(&self, t: &WireTensor) -> Res<Value> {
        let n = t.nbytes().ok_or_else(|| {
            RequestError::Invalid(format!(
                "tensor of shape {:?} and dtype {:?} has no valid size",
                t.shape, t.dtype
            ))
        })?;
        if let Some((storage, _)) = self.device_range(t, n, false)? {
            if t.byte_offset != 0 {
                return Err(RequestError::Unsupported(format!(
                    "an OpenCL tensor at byte offset {}",
                    t.byte_offset
                )));
            }
            return Ok(Value::DeviceTensor(DeviceTensor::view(
                storage,
                t.shape.clone().into(),
                dtype_of(t.dtype),
            )?));
        }
        self.range(t, n, false)?;
        let r = self
            .regions
            .get(&t.data)
            .ok_or_else(|| RequestError::Invalid(format!("unknown data handle {:#x}", t.data)))?;
        let Mem::Host(storage) = &r.storage else {
            return Err(RequestError::Invalid(
                "device memory named as cpu memory".into(),
            ));
        };
        Ok(Value::Tensor(Tensor::view(
            storage.clone(),
            t.byte_offset as usize,
            t.shape.clone(),
            dtype_of(t.dtype),
        )?))
    }

    /// A wire argument as a runtime value for a model function.
    fn value_of(&self, a: &Arg) -> Res<Value> {
        Ok(match a {
            Arg::None => Value::None,
            Arg::Int(v) => Value::Int(*v),
            Arg::Bool(v) => Value::Bool(*v),
            Arg::Float(v) => Value::Float(*v),
            Arg::RawStr(s) | Arg::Str(s) => Value::Str(s.as_str().into()),
            Arg::DataType(d) => Value::DType(dtype_of(*d)),
            Arg::Tensor(t) => self.view(t)?,
            Arg::ObjectRef { handle, .. } | Arg::Function(handle) => match self.obj(*handle)? {
                Obj::Tensor { tensor, .. } => Value::Tensor(tensor.clone()),
                Obj::DeviceTensor { tensor, .. } => Value::DeviceTensor(tensor.clone()),
                Obj::Value(v) => v.clone(),
                Obj::Closure { f, .. } => Value::Function(f.clone()),
                _ => {
                    return Err(RequestError::Unsupported(format!(
                        "passing handle {handle:#x} (a module, function or timer) to a model"
                    )))
                }
            },
            other => {
                return Err(RequestError::Unsupported(format!(
                    "passing a {} to a model function",
                    other.kind()
                )))
            }
        })
    }

    fn values_of(&self, args: &[Arg]) -> Res<Vec<Value>> {
        args.iter().map(|a| self.value_of(a)).collect()
    }

    /// The function registered in the process under `name`, when this server serves them.
    fn registered(&self, name: &str) -> Option<PackedFunc> {
        if !self.config.serve_registered_functions {
            return None;
        }
        mote::lookup_function(name)
    }

    /// Argument `index` of a call to the registered function `function`, as a runtime value:
    /// what [`State::value_of`] makes of it for a model (tensor records become views of the
    /// session's memory, returned tensors and objects are passed back), except what a
    /// registered function has no use for or Mote's values cannot hold, refused naming the
    /// argument: bytes and devices (no such values), raw handles, and handles of functions,
    /// closures and modules (they run only through this session).
    fn registered_arg(&self, function: &str, index: usize, a: &Arg) -> Res<Value> {
        let refuse = |reason: String| RequestError::Argument {
            function: function.to_owned(),
            index,
            reason,
        };
        match a {
            Arg::Bytes(_) | Arg::ByteArray(_) => Err(refuse(
                "bytes cannot be passed to a registered function (Mote's values have no bytes \
                 type); pass a string or a tensor"
                    .into(),
            )),
            Arg::Device(d) => Err(refuse(format!(
                "a device ({}, {}) cannot be passed to a registered function (Mote's values \
                 have no device type)",
                d.device_type, d.device_id
            ))),
            Arg::OpaquePtr(_) => Err(refuse(
                "a raw handle cannot be passed to a registered function".into(),
            )),
            Arg::Module(_) => Err(refuse(
                "a module cannot be passed to a registered function".into(),
            )),
            Arg::Function(h) | Arg::ObjectRef { handle: h, .. } => match self.obj(*h) {
                Ok(Obj::Tensor { .. } | Obj::DeviceTensor { .. } | Obj::Value(_)) => {
                    self.value_of(a).map_err(|e| refuse(e.to_string()))
                }
                Ok(_) => Err(refuse(format!(
                    "handle {h:#x} is a function, closure, module or timer, which cannot be \
                     passed to a registered function"
                ))),
                Err(e) => Err(refuse(e.to_string())),
            },
            other => self.value_of(other).map_err(|e| refuse(e.to_string())),
        }
    }

    /// kCallFunc on a registered function (docs/rpc.md "Global functions"): the arguments as
    /// a model call gets them, the result as a model call returns it. An error of the function
    /// is the call's error, as when a model calls it (`Error::Callback`); a panic is caught
    /// and answered as an error. Either way the session goes on.
    fn call_registered(&mut self, name: &str, f: &PackedFunc, args: &[Arg]) -> Res<Ret> {
        let values = args
            .iter()
            .enumerate()
            .map(|(i, a)| self.registered_arg(name, i, a))
            .collect::<Res<Vec<_>>>()?;
        // A registered function has no interrupt handle: a session that is ending does not
        // start it, but one that has started runs to its end (docs/rpc.md "Timeouts").
        if self.calls.ending() {
            return Err(RequestError::Mote(mote::Error::Cancelled));
        }
        let views: Vec<mote::Arg<'_>> = values.iter().map(mote::Arg::from_value).collect();
        // The function is the embedder's code: a panic in it must not end the session thread
        // (and with it the session). Nothing of the session's state is borrowed by the call,
        // so none can be left half-updated by the unwind.
        let r = catch_unwind(AssertUnwindSafe(|| f(&views)));
        drop(views);
        drop(values);
        match r {
            Ok(Ok(v)) => self.ret_of(v),
            // The same error a model's call of it gives (the VM names the function likewise).
            Ok(Err(e @ mote::Error::Callback { .. })) => Err(e.into()),
            Ok(Err(e)) => Err(RequestError::Mote(mote::Error::Callback {
                name: name.to_owned(),
                message: e.to_string(),
            })),
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".into());
                // Dropping a payload runs its destructor, which could panic in turn.
                let _ = catch_unwind(AssertUnwindSafe(|| drop(payload)));
                log::error!("the registered function {name} panicked: {message}");
                Err(RequestError::Panicked {
                    function: name.to_owned(),
                    message,
                })
            }
        }
    }

    /// Registers a returned tensor: a handle owning it and a data id naming its storage.
    fn register_tensor(&mut self, t: Tensor) -> Res<(WireTensor, u64)> {
        let mem = Mem::Host(t.storage().clone());
        let (dtype, shape, offset) = (t.dtype(), t.shape().to_vec(), t.byte_offset() as u64);
        self.register(mem, dtype, shape, offset, |region| Obj::Tensor {
            tensor: t,
            region,
        })
    }

    /// Registers a returned device tensor, as `register_tensor` does a host one.
    fn register_device_tensor(&mut self, t: DeviceTensor) -> Res<(WireTensor, u64)> {
        let mem = Mem::Device(t.storage().clone());
        let (dtype, shape) = (t.dtype(), t.shape().to_vec());
        self.register(mem, dtype, shape, 0, |region| Obj::DeviceTensor {
            tensor: t,
            region,
        })
    }

    /// The memory table's region for `mem` (made when new), the tensor record naming it, and a
    /// handle owning `obj(region)`.
    fn register(
        &mut self,
        mem: Mem,
        d: DType,
        shape: Vec<i64>,
        byte_offset: u64,
        obj: impl FnOnce(u64) -> Obj,
    ) -> Res<(WireTensor, u64)> {
        let key = mem.key();
        let device = mem.device();
        let region = match self.region_of_storage.get(&key) {
            Some(id) => *id,
            None => {
                let id = self.fresh_id();
                self.regions.insert(
                    id,
                    Region {
                        storage: mem,
                        client_alloc: false,
                        returned_refs: 0,
                    },
                );
                self.region_of_storage.insert(key, id);
                id
            }
        };
        let rec = WireTensor {
            data: region,
            device,
            dtype: WireDType {
                code: d.code,
                bits: d.bits,
                lanes: d.lanes,
            },
            shape,
            byte_offset,
        };
        let h = match self.insert(obj(region)) {
            Ok(h) => h,
            Err(e) => {
                self.drop_region_if_unused(region);
                return Err(e);
            }
        };
        if let Some(r) = self.regions.get_mut(&region) {
            r.returned_refs += 1;
        }
        Ok((rec, h))
    }

    /// A value returned by a function of `module` as a kCallFunc return: a closure keeps the
    /// module whose session can call it.
    fn ret_of_from(&mut self, v: Value, module: &Rc<ModuleObj>) -> Res<Ret> {
        match v {
            Value::Function(f) => Ok(Ret::Function(self.insert(Obj::Closure {
                module: module.clone(),
                f,
            })?)),
            v => self.ret_of(v),
        }
    }

    /// A runtime value as a kCallFunc return.
    fn ret_of(&mut self, v: Value) -> Res<Ret> {
        Ok(match v {
            Value::None => Ret::None,
            Value::Int(i) => Ret::Int(i),
            Value::Float(f) => Ret::Float(f),
            Value::Bool(b) => Ret::Bool(b),
            Value::Str(s) => Ret::Str(s.to_string()),
            Value::DType(d) => Ret::DataType(WireDType {
                code: d.code,
                bits: d.bits,
                lanes: d.lanes,
            }),
            Value::Tensor(t) => {
                let (rec, h) = self.register_tensor(t)?;
                Ret::Tensor(rec, h)
            }
            Value::DeviceTensor(t) => {
                let (rec, h) = self.register_device_tensor(t)?;
                Ret::Tensor(rec, h)
            }
            v @ Value::Tuple(_) => Ret::Object(type_index::ARRAY, self.insert(Obj::Value(v))?),
            v @ Value::Shape(_) => Ret::Object(type_index::SHAPE, self.insert(Obj::Value(v))?),
            other => {
                return Err(RequestError::Unsupported(format!(
                    "returning a {} over RPC",
                    other.kind()
                )))
            }
        })
    }

    /// kCallFunc.
    fn call(&mut self, h: u64, args: &[Arg]) -> Res<Ret> {
        match self.obj(h)?.clone() {
            Obj::Global(g) => self.call_global(g, args),
            Obj::Func(t) => self.call_module_fn(&t, args),
            Obj::Timer(t) => {
                let values = self.values_of(args)?;
                let bytes = t.borrow_mut().run(&values, self.calls)?;
                Ok(Ret::Bytes(bytes))
            }
            Obj::Closure { module, f } => {
                let values = self.values_of(args)?;
                let r = call_closure(&module, &f, &values, self.calls)?;
                self.ret_of_from(r, &module)
            }
            Obj::Registered { name, f } => self.call_registered(&name, &f, args),
            _ => Err(RequestError::Invalid(format!(
                "handle {h:#x} is not a function"
            ))),
        }
    }

    fn call_global(&mut self, g: Global, args: &[Arg]) -> Res<Ret> {
        let what = g.name();
        match g {
            Global::Upload => {
                arity(args, 2, what)?;
                let name = str_arg(args, 0, what)?;
                let data = match &args[1] {
                    Arg::Bytes(b) | Arg::ByteArray(b) => b,
                    a => {
                        return Err(RequestError::Invalid(format!(
                            "{what}: expected bytes, got {}",
                            a.kind()
                        )))
                    }
                };
                self.sandbox.upload(name, data)?;
                log::info!("upload {name:?} ({} bytes)", data.len());
                Ok(Ret::None)
            }
            Global::Download => {
                arity(args, 1, what)?;
                let name = str_arg(args, 0, what)?;
                let max = self.config.limits.max_packet.saturating_sub(64);
                let data = self.sandbox.download(name, max)?;
                log::info!("download {name:?} ({} bytes)", data.len());
                Ok(Ret::Bytes(data))
            }
            Global::DownloadLinkedModule => {
                // As TVM's server: a .so/.dylib as it is, a .o or .tar linked into one.
                arity(args, 1, what)?;
                let name = str_arg(args, 0, what)?;
                let max = self.config.limits.max_packet.saturating_sub(64);
                let data = crate::link::linked_module(
                    &self.sandbox,
                    name,
                    max,
                    self.config.limits.max_upload_file,
                    self.config.code_free,
                )?;
                Ok(Ret::Bytes(data))
            }
            Global::Remove => {
                arity(args, 1, what)?;
                let name = str_arg(args, 0, what)?;
                self.sandbox.remove(name)?;
                log::info!("remove {name:?}");
                Ok(Ret::None)
            }
            Global::LoadModule => {
                arity(args, 1, what)?;
                let name = str_arg(args, 0, what)?;
                self.module_room()?;
                let path = self.sandbox.existing(name)?;
                let options = mote::LoadOptions::default();
                // Code-free uploads are read, not mapped: nothing done to the file afterwards
                // can fault the server (docs/code-free.md §4).
                let options = if self.config.code_free {
                    options.code_free(true).read_into_memory(true)
                } else {
                    options
                };
                let model = Model::load_with(&path, options)?;
                let kind = self.module_kind(name, model);
                let m = ModuleObj::new(kind, name.to_owned());
                self.modules.push(Rc::downgrade(&m));
                Ok(Ret::Module(self.insert(Obj::Module(m))?))
            }
            Global::SystemLib => {
                // TVM's client asks `ffi.SystemLib()` (prefix "") or `ffi.SystemLib(prefix)`
                // for a model linked into the server (docs/rpc.md, "Statically linked models").
                if args.len() > 1 {
                    arity(args, 1, what)?;
                }
                let prefix = if args.is_empty() {
                    ""
                } else {
                    str_arg(args, 0, what)?
                };
                self.module_room()?;
                let label = format!("<system-lib {prefix}>");
                // As TVM's server: nothing linked under the prefix is an empty module, whose
                // functions are absent (AttributeError on TVM's client), not an error.
                let linked = Model::system_lib_prefixes();
                let kind = if linked.iter().any(|p| p == prefix) {
                    self.module_kind(&label, Model::from_system_lib(prefix)?)
                } else {
                    log::info!(
                        "ffi.SystemLib({prefix:?}): nothing linked under that prefix (linked: \
                         {}), an empty module",
                        if linked.is_empty() {
                            "none".into()
                        } else {
                            linked.join(", ")
                        }
                    );
                    ModKind::Empty
                };
                let m = ModuleObj::new(kind, label);
                self.modules.push(Rc::downgrade(&m));
                Ok(Ret::Module(self.insert(Obj::Module(m))?))
            }
            Global::SystemLibs => {
                // The prefixes of the models linked into the server, comma-separated.
                arity(args, 0, what)?;
                Ok(Ret::Str(Model::system_lib_prefixes().join(",")))
            }
            Global::ModuleGetFunction => {
                if args.len() != 2 && args.len() != 3 {
                    arity(args, 3, what)?;
                }
                let m = self.module(args.first(), what)?;
                let name = str_arg(args, 1, what)?;
                let query_imports = match args.get(2) {
                    Some(Arg::Bool(b)) => *b,
                    Some(Arg::Int(i)) => *i != 0,
                    _ => false,
                };
                match m.find(name, query_imports) {
                    Some(module) => {
                        let t = Target {
                            module,
                            name: name.to_owned(),
                        };
                        Ok(Ret::Function(self.insert(Obj::Func(t))?))
                    }
                    None => Ok(Ret::None),
                }
            }
            Global::ImportModule => {
                arity(args, 2, what)?;
                let parent = self.module(args.first(), what)?;
                let child = self.module(args.get(1), what)?;
                if child.reaches(&parent) {
                    return Err(RequestError::Invalid(
                        "importing this module would make an import cycle".into(),
                    ));
                }
                parent.imports.borrow_mut().push(child);
                Ok(Ret::None)
            }
            Global::TimeEvaluator => {
                arity(args, 12, what)?;
                let target = match args.first() {
                    Some(Arg::None) => {
                        return Err(RequestError::Unsupported(
                            "timing a global function (only module functions can be timed)".into(),
                        ))
                    }
                    a => {
                        let m = self.module(a, what)?;
                        let name = str_arg(args, 1, what)?;
                        let module = m.find(name, false).ok_or_else(|| {
                            RequestError::Invalid(format!(
                                "module {:?} has no function `{name}`",
                                m.label
                            ))
                        })?;
                        Target {
                            module,
                            name: name.to_owned(),
                        }
                    }
                };
                let dev = Device {
                    device_type: i32_arg(args, 2, "dev_type")?,
                    device_id: i32_arg(args, 3, "dev_id")?,
                };
                // On an OpenCL device each timed call has finished its device work when it
                // returns, so the times are wall-clock times of whole calls (docs/rpc.md).
                check_device(dev)?;
                let params = TimerParams {
                    number: i32_arg(args, 4, "number")?,
                    repeat: i32_arg(args, 5, "repeat")?,
                    min_repeat_ms: i32_arg(args, 6, "min_repeat_ms")?,
                    limit_zero_time_iterations: i32_arg(args, 7, "limit_zero_time_iterations")?,
                    cooldown_interval_ms: i32_arg(args, 8, "cooldown_interval_ms")?,
                    repeats_to_cooldown: i32_arg(args, 9, "repeats_to_cooldown")?,
                    cache_flush_bytes: i32_arg(args, 10, "cache_flush_bytes")?,
                    f_preproc: str_arg(args, 11, "f_preproc")?.to_owned(),
                };
                let timer =
                    TimeEvaluator::new(target, params, self.config.limits.max_remote_memory)?;
                let h = self.insert(Obj::Timer(Rc::new(RefCell::new(timer))))?;
                Ok(Ret::Function(h))
            }
            Global::Profile | Global::Trace => {
                if args.len() < 2 {
                    return Err(RequestError::Invalid(format!(
                        "{what}(module, function, *args): {} arguments given",
                        args.len()
                    )));
                }
                let m = self.module(args.first(), what)?;
                let name = str_arg(args, 1, what)?.to_owned();
                let values = self.values_of(&args[2..])?;
                let json = profile(&m, &name, &values, g == Global::Trace, self.calls)?;
                Ok(Ret::Str(json))
            }
        }
    }

    fn call_module_fn(&mut self, t: &Target, args: &[Arg]) -> Res<Ret> {
        let name = t.name.as_str();
        match &t.module.kind {
            ModKind::Executable(model) => match name {
                "vm_load_executable" => {
                    self.module_room()?;
                    let session = model.session_with(session_options(self.config))?;
                    let vm = ModuleObj::new(
                        ModKind::Vm(RefCell::new(VmModule {
                            session,
                            saved: HashMap::new(),
                        })),
                        format!("{}#vm", t.module.label),
                    );
                    self.modules.push(Rc::downgrade(&vm));
                    Ok(Ret::Module(self.insert(Obj::Module(vm))?))
                }
                "stats" => {
                    let (n, bytes) = model.constant_bytes();
                    Ok(Ret::Str(format!(
                        "Mote executable {:?}: functions: {}; kernels: {}; constants: {n} tensors, \
                         {bytes} bytes",
                        t.module.label,
                        model.function_names().join(", "),
                        model.kernels().len()
                    )))
                }
                "has_function" => {
                    let f = str_arg(args, 0, "has_function")?;
                    Ok(Ret::Bool(model.function_names().iter().any(|n| n == f)))
                }
                _ => Err(RequestError::Invalid(format!("no function `{name}`"))),
            },
            ModKind::Empty => Err(empty_module(name)),
            ModKind::Vm(vm) => {
                if VM_FUNCTIONS.contains(&name) && !vm.borrow().saved.contains_key(name) {
                    return self.call_vm_api(vm, name, args);
                }
                let values = self.values_of(args)?;
                let r = invoke_model(&t.module, name, &values, self.calls)?;
                self.ret_of_from(r, &t.module)
            }
            ModKind::Kernels { .. } => {
                let values = self.values_of(args)?;
                let r = invoke_model(&t.module, name, &values, self.calls)?;
                self.ret_of(r)
            }
        }
    }

    /// The VM module's own API (docs/rpc.md "Modules").
    fn call_vm_api(&mut self, vm: &RefCell<VmModule>, name: &str, args: &[Arg]) -> Res<Ret> {
        match name {
            "vm_initialization" => {
                // Triples (device_type, device_id, allocator kind). TVM's Python VM passes the
                // device it was given and then the host; a model compiled for OpenCL runs on
                // the OpenCL device named (its session is made again on it when it differs),
                // any other on the CPU. The allocator choice does not change results.
                if args.len() < 3 || args.len() % 3 != 0 {
                    return Err(RequestError::Invalid(format!(
                        "vm_initialization takes (device_type, device_id, alloc_type) triples, \
                         {} arguments given",
                        args.len()
                    )));
                }
                let mut opencl = None;
                for i in (0..args.len()).step_by(3) {
                    let d = check_device(Device {
                        device_type: i32_arg(args, i, "device_type")?,
                        device_id: i32_arg(args, i + 1, "device_id")?,
                    })?;
                    int_arg(args, i + 2, "alloc_type")?;
                    if let Some(d) = d {
                        if opencl.is_some_and(|o| o != d) {
                            return Err(RequestError::Unsupported(
                                "a VM on two OpenCL devices".into(),
                            ));
                        }
                        opencl = Some(d);
                    }
                }
                let mut vm = vm.borrow_mut();
                let here = vm.session.device();
                match (opencl, here) {
                    (None, mote::Device::Cpu) => {}
                    (Some(d), mote::Device::OpenCl { index }) if d == index => {}
                    (Some(d), mote::Device::OpenCl { .. }) => {
                        let model = vm.session.model().clone();
                        vm.session = model.session_with(SessionOptions {
                            opencl_device: Some(d),
                            ..session_options(self.config)
                        })?;
                    }
                    (Some(d), _) => {
                        return Err(RequestError::Unsupported(format!(
                            "a VM on OpenCL device {d} for a model compiled for the CPU"
                        )))
                    }
                    (None, here) => {
                        return Err(RequestError::Unsupported(format!(
                            "a VM on the CPU for a model compiled for {here}; initialise it on \
                             remote.cl(N)"
                        )))
                    }
                }
                Ok(Ret::None)
            }
            "set_input" => {
                let f = str_arg(args, 0, name)?.to_owned();
                let values = self.values_of(&args[1..])?;
                vm.borrow_mut().session.set_input(&f, values)?;
                Ok(Ret::None)
            }
            "invoke_stateful" => {
                arity(args, 1, name)?;
                let f = str_arg(args, 0, name)?;
                vm.borrow_mut().session.invoke_stateful(f)?;
                Ok(Ret::None)
            }
            "get_output" | "get_output_arity" => {
                let f = str_arg(args, 0, name)?;
                let mut v = vm.borrow().session.get_output(f)?;
                for i in 1..args.len() {
                    let idx = int_arg(args, i, "index")?;
                    v = match &v {
                        Value::Tuple(items) => usize::try_from(idx)
                            .ok()
                            .and_then(|i| items.get(i))
                            .cloned()
                            .ok_or_else(|| {
                                RequestError::Invalid(format!(
                                    "index {idx} out of range for a tuple of {}",
                                    items.len()
                                ))
                            })?,
                        other => {
                            return Err(RequestError::Invalid(format!(
                                "cannot index a {} output",
                                other.kind()
                            )))
                        }
                    };
                }
                if name == "get_output_arity" {
                    return Ok(Ret::Int(match &v {
                        Value::Tuple(items) => items.len() as i64,
                        _ => -1,
                    }));
                }
                if matches!(v, Value::Tuple(_)) {
                    return Err(RequestError::Invalid(
                        "get_output does not return tuples; index into it (get_output_arity \
                         tells the length)"
                            .into(),
                    ));
                }
                self.ret_of(v)
            }
            "get_function_arity" | "get_function_param_name" => {
                let f = str_arg(args, 0, name)?;
                let info = vm.borrow().session.model().function_info(f)?;
                if name == "get_function_arity" {
                    return Ok(Ret::Int(info.params.len() as i64));
                }
                let i = int_arg(args, 1, "index")?;
                let p = usize::try_from(i)
                    .ok()
                    .and_then(|i| info.params.get(i))
                    .ok_or_else(|| {
                        RequestError::Invalid(format!(
                            "`{f}` has {} parameters, no parameter {i}",
                            info.params.len()
                        ))
                    })?;
                Ok(Ret::Str(p.name.clone()))
            }
            "save_function" => {
                if args.len() < 3 {
                    return Err(RequestError::Invalid(
                        "save_function(function, saved_name, include_return, *args)".into(),
                    ));
                }
                let f = str_arg(args, 0, name)?.to_owned();
                let saved_name = str_arg(args, 1, name)?.to_owned();
                let include_return = int_arg(args, 2, "include_return")? != 0;
                let values = self.values_of(&args[3..])?;
                let mut vm = vm.borrow_mut();
                if !vm.session.model().function_names().contains(&f) {
                    return Err(RequestError::Invalid(format!("no function `{f}` to save")));
                }
                if VM_FUNCTIONS.contains(&saved_name.as_str()) {
                    return Err(RequestError::Invalid(format!(
                        "`{saved_name}` is reserved by the VM"
                    )));
                }
                vm.saved.insert(
                    saved_name,
                    Saved {
                        function: f,
                        args: values,
                        include_return,
                    },
                );
                Ok(Ret::None)
            }
            "set_instrument" => {
                // Accepted so that clients calling it work; Mote's VM has no instrumentation
                // hook, so the function is not called (docs/rpc.md "Modules").
                Ok(Ret::None)
            }
            "invoke_closure" => {
                let h = match args.first() {
                    Some(Arg::Function(h)) | Some(Arg::ObjectRef { handle: h, .. }) => *h,
                    _ => {
                        return Err(RequestError::Invalid(
                            "invoke_closure(closure, *args): the first argument must be a \
                             closure handle"
                                .into(),
                        ))
                    }
                };
                let Obj::Closure { module, f } = self.obj(h)?.clone() else {
                    return Err(RequestError::Invalid(format!(
                        "handle {h:#x} is not a closure"
                    )));
                };
                let values = self.values_of(&args[1..])?;
                let r = call_closure(&module, &f, &values, self.calls)?;
                self.ret_of_from(r, &module)
            }
            _ => Err(RequestError::Invalid(format!("no VM function `{name}`"))),
        }
    }
}

/// `mote.profile` / `mote.trace`: run `name` once with profiling or tracing on.
fn profile(
    m: &Rc<ModuleObj>,
    name: &str,
    args: &[Value],
    trace: bool,
    calls: &Calls<'_>,
) -> Res<String> {
    let set = |m: &ModuleObj, on: bool| match &m.kind {
        ModKind::Vm(vm) => {
            let s = &mut vm.borrow_mut().session;
            if trace {
                s.set_tracing(on)
            } else {
                s.set_profiling(on)
            }
        }
        ModKind::Kernels { session, .. } => {
            if let Some(s) = session.borrow_mut().as_mut() {
                if trace {
                    s.set_tracing(on)
                } else {
                    s.set_profiling(on)
                }
            }
        }
        ModKind::Executable(_) | ModKind::Empty => {}
    };
    if matches!(m.kind, ModKind::Executable(_) | ModKind::Empty) {
        return Err(RequestError::Invalid(
            "profile a VM module (vm_load_executable's result) or a kernel library".into(),
        ));
    }
    // A kernel library's session is created by its first call; make sure it exists.
    if let ModKind::Kernels {
        model,
        options,
        session,
    } = &m.kind
    {
        if session.borrow().is_none() {
            *session.borrow_mut() = Some(model.session_with(options.clone())?);
        }
    }
    set(m, true);
    let start = Instant::now();
    let r = invoke_model(m, name, args, calls);
    let wall = start.elapsed();
    let take = |m: &ModuleObj| -> (Vec<mote::ProfileEntry>, Vec<mote::TraceEvent>) {
        let f = |s: &mut Session| {
            if trace {
                (Vec::new(), s.take_trace())
            } else {
                (s.take_profile(), Vec::new())
            }
        };
        match &m.kind {
            ModKind::Vm(vm) => f(&mut vm.borrow_mut().session),
            ModKind::Kernels { session, .. } => {
                session.borrow_mut().as_mut().map(f).unwrap_or_default()
            }
            ModKind::Executable(_) | ModKind::Empty => Default::default(),
        }
    };
    let (entries, events) = take(m);
    set(m, false);
    r?;
    let kind = |k: mote::CallKind| format!("{k:?}").to_lowercase();
    let v = if trace {
        // The same shape as `mote bench --trace` writes (Chrome/Perfetto trace events).
        let evs: Vec<_> = events
            .iter()
            .map(|e| {
                json!({
                    "name": e.name, "cat": kind(e.kind), "ph": "X",
                    "ts": e.start.as_secs_f64() * 1e6, "dur": e.duration.as_secs_f64() * 1e6,
                    "pid": 1, "tid": 1, "args": {"depth": e.depth},
                })
            })
            .collect();
        json!({"traceEvents": evs, "displayTimeUnit": "ms"})
    } else {
        json!({
            "function": name,
            "wall_ms": wall.as_secs_f64() * 1e3,
            "entries": entries.iter().map(|e| json!({
                "name": e.name, "kind": kind(e.kind), "calls": e.calls,
                "total_ms": e.total.as_secs_f64() * 1e3,
            })).collect::<Vec<_>>(),
        })
    };
    serde_json::to_string(&v).map_err(|e| RequestError::Invalid(e.to_string()))
}
