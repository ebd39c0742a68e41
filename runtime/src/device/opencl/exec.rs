//! Running TVM's OpenCL kernels: what the host code of a library compiled for OpenCL calls
//! back into (docs/tvm-format.md §10.5, docs/opencl.md §5).
//!
//! A session that runs such a library owns a [`DeviceSession`] (its queue and kernel objects).
//! For the length of one call it lends it, with the call's buffers, to the calling thread as a
//! [`CallState`]: the host function calls `__tvm_set_device`, `TVMBackendAllocWorkspace(4, ..)`
//! and the kernels by name on that same thread, and each of those finds the state there. Nothing
//! is shared between calls or sessions; a kernel launched with no call in progress is an error.

use std::cell::Cell;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::{Buffer, ClError, Context, Kernel, KernelArg, Program, Queue};
use crate::device::{Device, DeviceStorage, DeviceTensor};
use crate::host::abi::{type_index as ti, FfiAny};
use crate::loader::opencl_module::{ClParam, LaunchDim, OpenClModule};
use crate::tensor::{Pool, Tensor};

/// Device type of OpenCL in DLPack (`kDLOpenCL`).
pub(crate) const DEVICE_OPENCL: i32 = 4;

/// What `DLTensor::data` points at for a tensor in OpenCL memory: the `cl_mem` first, as in
/// TVM's runtime, 64-byte aligned (the host code assumes that alignment of `data`).
#[repr(C, align(64))]
pub(crate) struct ClBuf {
    mem: super::sys::Mem,
    buffer: Buffer,
}

// SAFETY: OpenCL memory objects may be used from any thread (OpenCL 1.2 §A.2: every API call
// but clSetKernelArg is thread-safe); a ClBuf is never changed after it is made, and `Buffer`
// is Send and Sync itself.
unsafe impl Send for ClBuf {}
// SAFETY: as for Send.
unsafe impl Sync for ClBuf {}

impl ClBuf {
    pub(crate) fn new(buffer: Buffer) -> Box<ClBuf> {
        Box::new(ClBuf {
            mem: buffer.raw(),
            buffer,
        })
    }

    pub(crate) fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// The pointer host code gets as the tensor's data.
    pub(crate) fn handle(&self) -> *mut c_void {
        self as *const ClBuf as *mut c_void
    }
}

/// The programs of one model's `opencl` module on one device: each kernel's source chunk is
/// built once, on first use, and shared by every session on the device.
pub(crate) struct ModelPrograms {
    module: Arc<OpenClModule>,
    context: Arc<Context>,
    built: Vec<OnceLock<Result<Arc<Program>, ClError>>>,
}

impl ModelPrograms {
    pub(crate) fn new(module: Arc<OpenClModule>, context: Arc<Context>) -> ModelPrograms {
        let built = module.kernels.iter().map(|_| OnceLock::new()).collect();
        ModelPrograms {
            module,
            context,
            built,
        }
    }

    /// Kernel `index`'s program, built on first use (through the program cache in `cache`,
    /// when the session that first uses it names one).
    fn program(&self, index: usize, cache: Option<&Path>) -> Result<Arc<Program>, ClError> {
        let k = &self.module.kernels[index];
        self.built[index]
            .get_or_init(|| {
                // TVM builds each chunk without options (docs/tvm-format.md §10.4).
                let source = self.module.chunk(k);
                let built = match cache {
                    Some(dir) => {
                        super::cache::build(&self.context, source, "", dir).map(|(p, how)| {
                            log::debug!("OpenCL kernel `{}`: {how:?} ({})", k.name, dir.display());
                            p
                        })
                    }
                    None => self.context.build(source, ""),
                };
                built.map(Arc::new).map_err(|e| ClError {
                    message: format!("kernel `{}`: {}", k.name, e.message),
                    code: e.code,
                })
            })
            .clone()
    }
}

/// Per model, the programs for each device it has run on.
#[derive(Default)]
pub(crate) struct ProgramCache(Mutex<Vec<Arc<ModelPrograms>>>);

impl ProgramCache {
    pub(crate) fn for_context(
        &self,
        module: &Arc<OpenClModule>,
        context: &Arc<Context>,
    ) -> Arc<ModelPrograms> {
        let mut list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = list.iter().find(|p| Arc::ptr_eq(&p.context, context)) {
            return p.clone();
        }
        let p = Arc::new(ModelPrograms::new(module.clone(), context.clone()));
        list.push(p.clone());
        p
    }
}

/// A session's own OpenCL state: its queue and its kernel objects (whose arguments are state,
/// so never shared).
pub(crate) struct DeviceSession {
    pub(crate) device_index: usize,
    /// `SessionOptions::opencl_program_cache`.
    cache: Option<PathBuf>,
    queue: Queue,
    programs: Arc<ModelPrograms>,
    kernels: Vec<Option<Kernel>>,
    /// `SessionOptions::opencl_trace`.
    pub(crate) trace: Option<Trace>,
    /// The device buffers of this session's dropped storage, for reuse.
    pub(crate) buffers: Arc<crate::device::memory::BufferCache>,
}

impl DeviceSession {
    pub(crate) fn new(
        device_index: usize,
        programs: Arc<ModelPrograms>,
        profiling: bool,
        cache: Option<PathBuf>,
    ) -> Result<DeviceSession, ClError> {
        let queue = programs.context.queue(profiling)?;
        let kernels = programs.module.kernels.iter().map(|_| None).collect();
        Ok(DeviceSession {
            device_index,
            cache,
            queue,
            programs,
            kernels,
            trace: None,
            buffers: crate::device::memory::BufferCache::new(0),
        })
    }

    pub(crate) fn queue(&mut self) -> &mut Queue {
        &mut self.queue
    }

    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.programs.context
    }

    /// The device this session runs on.
    pub(crate) fn device(&self) -> Device {
        Device::OpenCl {
            index: self.device_index,
        }
    }

    /// `bytes` of device memory, reserved from `pool`'s budget until the storage drops, and
    /// filled with the poison byte of `hint` when the pool poisons (as host storage is, so
    /// that a kernel that skips work cannot pass for done: `SessionOptions::poison_memory`).
    pub(crate) fn alloc(
        &mut self,
        bytes: usize,
        pool: &Arc<Pool>,
        hint: crate::DType,
    ) -> crate::Result<Arc<DeviceStorage>> {
        pool.reserve(bytes)?;
        let poison = pool.poisons().then(|| crate::tensor::poison_byte(hint));
        match self.buffer_for(bytes, poison) {
            Ok(b) => Ok(DeviceStorage::new(
                b,
                self.device(),
                pool.clone(),
                Some(self.buffers.clone()),
            )),
            Err(e) => {
                pool.release(bytes);
                Err(device_error(e))
            }
        }
    }

    /// A buffer of `bytes` for storage or a workspace: one the session kept (from dropped
    /// storage or a freed workspace) else a new one, so that the kept buffers are all alike;
    /// filled with `poison` when given. New buffers are host-visible where the device shares
    /// memory with the host, so that mapping a tensor (`Session::map`) reaches its bytes
    /// without a copy.
    fn buffer_for(&mut self, bytes: usize, poison: Option<u8>) -> Result<Box<ClBuf>, ClError> {
        let b = match self.buffers.take(bytes) {
            Some(b) => b,
            None => ClBuf::new(
                self.context()
                    .buffer(bytes, self.context().device().unified_memory)?,
            ),
        };
        if let Some(byte) = poison {
            self.queue.write(b.buffer(), 0, &vec![byte; bytes])?;
        }
        Ok(b)
    }

    /// A device copy of host tensor `t` (the copy is complete when this returns).
    pub(crate) fn upload(&mut self, t: &Tensor, pool: &Arc<Pool>) -> crate::Result<DeviceTensor> {
        let storage = self.alloc(t.byte_len(), pool, t.dtype())?;
        self.queue
            .write(storage.buffer(), 0, t.data())
            .map_err(device_error)?;
        DeviceTensor::view(storage, t.shape_arc().clone(), t.dtype())
    }

    /// A zeroed device tensor of `shape` and `dtype`, reserved from `pool`'s budget.
    pub(crate) fn zeros(
        &mut self,
        shape: &[i64],
        dtype: crate::DType,
        pool: &Arc<Pool>,
    ) -> crate::Result<DeviceTensor> {
        let bytes = crate::tensor::byte_size(shape, dtype)?;
        let storage = self.alloc(bytes, pool, dtype)?;
        let mut m = self
            .queue
            .map(storage.buffer(), bytes)
            .map_err(device_error)?;
        m.bytes_mut().fill(0);
        m.unmap().map_err(device_error)?;
        DeviceTensor::view(storage, shape.into(), dtype)
    }

    /// `t`'s bytes in host memory (docs/opencl.md §8), once every command enqueued before
    /// has finished; `t` must be this session's device's and not shared.
    pub(crate) fn map<'a>(
        &'a mut self,
        t: &'a mut DeviceTensor,
    ) -> crate::Result<crate::device::Mapped<'a>> {
        if t.device() != self.device() {
            return Err(crate::Error::InvalidArgument(format!(
                "a tensor on {} given to a session on {}",
                t.device(),
                self.device()
            )));
        }
        if !t.is_exclusive() {
            return Err(crate::Error::InvalidArgument(
                "Session::map: the device tensor is shared (a clone, another view of its \
                 storage, or its storage kept); map it where it has one owner"
                    .into(),
            ));
        }
        let t: &'a DeviceTensor = t;
        let element = (t.dtype(), crate::tensor::num_elements(t.shape())?);
        let device = self.device();
        crate::device::memory::map(
            &mut self.queue,
            t.storage().buffer(),
            t.byte_len(),
            device,
            Some(element),
        )
    }

    /// A host copy of `d`, once every command enqueued before has finished.
    pub(crate) fn download(&mut self, d: &DeviceTensor) -> crate::Result<Tensor> {
        if d.device() != self.device() {
            return Err(crate::Error::InvalidArgument(format!(
                "a tensor on {} given to a session on {}",
                d.device(),
                self.device()
            )));
        }
        let mut t = Tensor::zeros(d.shape(), d.dtype())?;
        let bytes = t.data_mut()?;
        self.queue
            .read(d.storage().buffer(), 0, bytes)
            .map_err(device_error)?;
        Ok(t)
    }
}

/// An OpenCL failure as Mote's error.
pub(crate) fn device_error(e: ClError) -> crate::Error {
    crate::Error::Device {
        device: "opencl".into(),
        message: e.to_string(),
    }
}

/// The device buffers of a call's tensor arguments, held in place for the usual few (a call
/// of a few microseconds feels an allocation), in a vector beyond [`CallBufs::INLINE`].
pub(crate) struct CallBufs<'a> {
    inline: [Option<&'a ClBuf>; CallBufs::INLINE],
    more: Vec<&'a ClBuf>,
}

impl<'a> CallBufs<'a> {
    const INLINE: usize = 8;

    fn iter(&self) -> impl Iterator<Item = &'a ClBuf> + '_ {
        self.inline
            .iter()
            .map_while(|b| *b)
            .chain(self.more.iter().copied())
    }
}

impl<'a> FromIterator<&'a ClBuf> for CallBufs<'a> {
    fn from_iter<I: IntoIterator<Item = &'a ClBuf>>(iter: I) -> CallBufs<'a> {
        let mut bufs = CallBufs {
            inline: [None; CallBufs::INLINE],
            more: Vec::new(),
        };
        for (i, b) in iter.into_iter().enumerate() {
            match bufs.inline.get_mut(i) {
                Some(slot) => *slot = Some(b),
                None => bufs.more.push(b),
            }
        }
        bufs
    }
}

/// One call's state, lent to the calling thread while the host code runs.
pub(crate) struct CallState<'a> {
    device: &'a mut DeviceSession,
    /// The tensors passed to the call: only these and the call's workspaces may be launched on.
    args: CallBufs<'a>,
    #[allow(
        clippy::vec_box,
        reason = "host code holds pointers to these, which must not move"
    )]
    workspaces: Vec<Box<ClBuf>>,
    /// Device bytes the call's workspaces may still take (the session's memory budget).
    budget_left: usize,
    /// Fill each workspace with the float poison byte before the kernels get it, new or kept
    /// from an earlier call (`SessionOptions::poison_memory`).
    poison: bool,
    /// Set when a workspace was refused for the budget: the call's error is then
    /// `ResourceExhausted`, whatever the host code made of the refusal.
    pub(crate) exhausted: Option<String>,
    /// Device time of each launch, when the queue profiles: (kernel name, nanoseconds).
    pub(crate) times: Vec<(String, u64)>,
    /// Set when the driver refused something the host code asked for (a build, an argument,
    /// a launch, a workspace): the call's error is then `Error::Device`, whatever the host code
    /// made of it.
    pub(crate) device_failed: Option<String>,
}

impl<'a> CallState<'a> {
    /// The state of a call whose tensors are `args`, with `budget_left` device bytes left for
    /// workspaces.
    pub(crate) fn new(
        device: &'a mut DeviceSession,
        args: CallBufs<'a>,
        budget_left: usize,
    ) -> CallState<'a> {
        CallState {
            device,
            args,
            workspaces: Vec::new(),
            budget_left,
            poison: false,
            exhausted: None,
            times: Vec::new(),
            device_failed: None,
        }
    }

    /// Poison the call's workspaces when `poison` (the session's pool poisons).
    pub(crate) fn poisoned(mut self, poison: bool) -> CallState<'a> {
        self.poison = poison;
        self
    }

    /// Note a driver failure (the first one is the call's error) and give its message to the
    /// host code.
    fn driver_failed(&mut self, e: ClError) -> String {
        note_failure(&mut self.device_failed, e)
    }

    /// Runs `body` (which calls the host code) with this state installed on the thread.
    pub(crate) fn run<R>(&mut self, body: impl FnOnce() -> R) -> R {
        struct Restore(*mut CallState<'static>);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        // The pointer is only dereferenced by `with_current` on this thread, while `body`
        // runs; `self` is not touched until it returns, and `Restore` takes it back even if
        // `body` unwinds.
        let p = (self as *mut CallState<'a>).cast::<CallState<'static>>();
        let _restore = Restore(CURRENT.with(|c| c.replace(p)));
        body()
    }
}

/// Note a driver failure in a call's `device_failed` (the first one is the call's error) and
/// give its message to the host code.
fn note_failure(device_failed: &mut Option<String>, e: ClError) -> String {
    let m = e.to_string();
    device_failed.get_or_insert_with(|| m.clone());
    m
}

/// The buffer of a call (one of its tensors or workspaces) whose record is at `p`.
fn call_buffer<'s>(
    args: &'s CallBufs<'_>,
    workspaces: &'s [Box<ClBuf>],
    p: *const c_void,
) -> Option<&'s ClBuf> {
    args.iter()
        .chain(workspaces.iter().map(|b| &**b))
        .find(|b| std::ptr::eq(*b as *const ClBuf as *const c_void, p))
}

thread_local! {
    static CURRENT: Cell<*mut CallState<'static>> = const { Cell::new(std::ptr::null_mut()) };
}

fn with_current<R>(f: impl FnOnce(&mut CallState<'_>) -> Result<R, String>) -> Result<R, String> {
    // No call state can exist without OpenCL (`sys::Built`); saying so here lets the compiler
    // drop the launch and workspace code that host code reaches through this.
    #[cfg(not(feature = "opencl"))]
    return {
        let _ = f;
        Err(super::sys::NOT_BUILT.into())
    };
    let p = CURRENT.with(Cell::get);
    if p.is_null() {
        return Err(
            "an OpenCL function was called with no Mote session call in progress on this thread"
                .into(),
        );
    }
    // SAFETY: `CallState::run` installed `p` from a live `&mut CallState` that it does not use
    // while its body runs; this thread is inside that body (host code calling back), and the
    // callbacks never nest, so this is the only reference in use.
    f(unsafe { &mut *p })
}

/// `__tvm_set_device(device_type, device_id)`: only the session's own OpenCL device.
pub(crate) fn set_device(args: &[FfiAny]) -> Result<(), String> {
    let [t, id] = args else {
        return Err(format!(
            "__tvm_set_device takes 2 arguments, got {}",
            args.len()
        ));
    };
    if t.type_index != ti::INT || id.type_index != ti::INT {
        return Err("__tvm_set_device takes two ints".into());
    }
    let (t, id) = (t.value as i64, id.value as i64);
    with_current(|s| {
        if t != i64::from(DEVICE_OPENCL) || id != s.device.device_index as i64 {
            return Err(format!(
                "the library asks for device ({t}, {id}); this session runs on OpenCL device {}",
                s.device.device_index
            ));
        }
        Ok(())
    })
}

/// `TVMBackendAllocWorkspace(4, ...)`: a buffer of the call, freed at the latest when it ends.
pub(crate) fn alloc_workspace(nbytes: u64) -> Result<*mut c_void, String> {
    with_current(|s| {
        let n = usize::try_from(nbytes).map_err(|_| format!("a workspace of {nbytes} bytes"))?;
        if n > s.budget_left {
            let m = format!(
                "a device workspace of {n} bytes, with {} bytes of the session's memory budget left",
                s.budget_left
            );
            s.exhausted = Some(m.clone());
            return Err(m);
        }
        let poison = s
            .poison
            .then(|| crate::tensor::poison_byte(crate::DType::F32));
        let b = s
            .device
            .buffer_for(n, poison)
            .map_err(|e| s.driver_failed(e))?;
        s.budget_left -= n;
        let h = b.handle();
        s.workspaces.push(b);
        Ok(h)
    })
}

/// `TVMBackendFreeWorkspace(4, ptr)`.
pub(crate) fn free_workspace(p: *mut c_void) -> Result<(), String> {
    with_current(|s| {
        let i = s
            .workspaces
            .iter()
            .position(|b| b.handle() == p)
            .ok_or_else(|| "freeing an OpenCL workspace this call did not allocate".to_string())?;
        let b = s.workspaces.swap_remove(i);
        s.budget_left += b.buffer().len();
        // Kept for the next call's workspace of the size (the queue runs the kernels that use
        // it before any later one that gets it).
        s.device.buffers.give(b);
        Ok(())
    })
}

/// A kernel of the model's `opencl` module called by host code (docs/tvm-format.md §10.5):
/// its parameters, then the launch extents.
pub(crate) fn launch(module: &OpenClModule, index: usize, args: &[FfiAny]) -> Result<(), String> {
    let info = module
        .kernels
        .get(index)
        .ok_or_else(|| format!("no OpenCL kernel {index}"))?;
    let name = &info.name;
    if args.len() != info.arg_count() {
        return Err(format!(
            "OpenCL kernel `{name}` takes {} arguments ({} parameters and {} launch sizes), got {}",
            info.arg_count(),
            info.params.len(),
            info.launch.len() + usize::from(info.dyn_shared),
            args.len()
        ));
    }
    with_current(|s| {
        if !std::ptr::eq(&*s.device.programs.module, module) {
            return Err(format!(
                "OpenCL kernel `{name}` belongs to another model than this call's"
            ));
        }
        if s.device.kernels[index].is_none() {
            let program = s
                .device
                .programs
                .program(index, s.device.cache.as_deref())
                .map_err(|e| s.driver_failed(e))?;
            s.device.kernels[index] = Some(program.kernel(name).map_err(|e| s.driver_failed(e))?);
        }
        set_and_launch(s, index, info, args)
    })
}

/// Sets kernel `index`'s arguments from `args` (those that changed since its last launch) and
/// enqueues it; the kernel was created before.
fn set_and_launch(
    s: &mut CallState<'_>,
    index: usize,
    info: &crate::loader::opencl_module::ClKernel,
    args: &[FfiAny],
) -> Result<(), String> {
    // The kernel is borrowed in place, apart from the rest of the call's state.
    let CallState {
        device,
        args: bufs,
        workspaces,
        times,
        device_failed,
        ..
    } = s;
    let DeviceSession {
        queue,
        kernels,
        trace,
        programs,
        ..
    } = &mut **device;
    let name = &info.name;
    let Some(kernel) = kernels.get_mut(index).and_then(Option::as_mut) else {
        return Err(format!("OpenCL kernel `{name}` was not created"));
    };
    let bad = |i: usize, want: &str, a: &FfiAny| {
        format!(
            "OpenCL kernel `{name}` argument {i}: expected {want}, got type index {}",
            a.type_index
        )
    };
    let tracing = trace.is_some();
    let mut traced = Vec::new();
    for (i, (p, a)) in info.params.iter().zip(args).enumerate() {
        let idx = i as u32;
        let (set, arg) = match (p, a.type_index) {
            (ClParam::Buffer, ti::OPAQUE_PTR) => {
                let b = call_buffer(bufs, workspaces, a.value as usize as *const c_void)
                    .ok_or_else(|| {
                        format!(
                            "OpenCL kernel `{name}` argument {i}: not a device buffer of this call"
                        )
                    })?;
                (
                    kernel.set_arg(idx, KernelArg::Buffer(&b.buffer)),
                    TraceArg::Buffer(b as *const ClBuf as usize, b.buffer.len()),
                )
            }
            (ClParam::Buffer, ti::NONE) => {
                (kernel.set_arg(idx, KernelArg::NullBuffer), TraceArg::Null)
            }
            (ClParam::I32 | ClParam::U32 | ClParam::I64 | ClParam::F32 | ClParam::F64, _) => {
                // The bytes as the kernel takes them (4 or 8), first of 8.
                let four = |[b0, b1, b2, b3]: [u8; 4]| ([b0, b1, b2, b3, 0, 0, 0, 0], 4);
                let (v, n): ([u8; 8], usize) = match (p, a.type_index) {
                    (ClParam::I32, ti::INT) => four((a.value as i64 as i32).to_ne_bytes()),
                    (ClParam::U32, ti::INT) => four((a.value as i64 as u32).to_ne_bytes()),
                    (ClParam::I64, ti::INT) => ((a.value as i64).to_ne_bytes(), 8),
                    (ClParam::F32, ti::FLOAT) => {
                        four((f64::from_bits(a.value) as f32).to_ne_bytes())
                    }
                    (ClParam::F64, ti::FLOAT) => (f64::from_bits(a.value).to_ne_bytes(), 8),
                    (ClParam::F32 | ClParam::F64, _) => return Err(bad(i, "a float", a)),
                    _ => return Err(bad(i, "an int", a)),
                };
                (
                    kernel.set_arg(idx, KernelArg::Bytes(&v[..n])),
                    TraceArg::Scalar(v, n),
                )
            }
            (ClParam::Buffer, _) => return Err(bad(i, "a device buffer", a)),
        };
        set.map_err(|e| note_failure(device_failed, e))?;
        if tracing {
            traced.push(arg);
        }
    }
    // Launch sizes (§10.5): group counts and group sizes per dimension, 1 where not named or
    // not positive; the dynamic shared memory size, last, is not an argument of the OpenCL
    // kernel TVM generates, and is ignored as TVM's runtime does.
    let (mut groups, mut items, mut dims) = ([1usize; 3], [1usize; 3], 0usize);
    for (j, d) in info.launch.iter().enumerate() {
        let a = &args[info.params.len() + j];
        if a.type_index != ti::INT {
            return Err(bad(info.params.len() + j, "an int launch size", a));
        }
        let v = a.value as i64;
        let v = if v <= 0 {
            1
        } else {
            usize::try_from(v).map_err(|_| format!("launch size {v}"))?
        };
        match *d {
            LaunchDim::Group(k) => {
                groups[k] = v;
                dims = dims.max(k + 1);
            }
            LaunchDim::Item(k) => {
                items[k] = v;
                dims = dims.max(k + 1);
            }
        }
    }
    let dims = dims.max(1);
    let mut global = [0usize; 3];
    for k in 0..dims {
        global[k] = groups[k].checked_mul(items[k]).ok_or_else(|| {
            format!(
                "OpenCL kernel `{name}`: launch of {} x {} work items",
                groups[k], items[k]
            )
        })?;
    }
    let t = queue
        .launch(kernel, &global[..dims], Some(&items[..dims]))
        .map_err(|e| note_failure(device_failed, e))?;
    if let Some(t) = t {
        times.push((name.clone(), t.nanos));
    }
    if let Some(trace) = trace.as_mut() {
        let module = &programs.module;
        trace
            .launch(module, index, &global[..dims], &items[..dims], &traced)
            .map_err(|e| format!("writing the OpenCL trace: {e}"))?;
    }
    Ok(())
}

/// One kernel argument as a launch set it, for the trace.
enum TraceArg {
    /// The buffer record's address and the buffer's size.
    Buffer(usize, usize),
    Null,
    Scalar([u8; 8], usize),
}

/// `SessionOptions::opencl_trace`: every launch of the session written to a text file a plain
/// OpenCL host program can replay (`scripts/bench/opencl-replay.c`, docs/benchmarks.md "OpenCL"). The
/// format, one record per line:
///
/// - `kernel K NAME SOURCE_BYTES` then the kernel's OpenCL C source (that many bytes) and a
///   newline: the first launch of kernel K of the model's module;
/// - `launch K DIMS G0 .. L0 .. NARGS` (DIMS global sizes, then DIMS work-group sizes), then
///   NARGS lines: `buffer ID BYTES` (a device buffer: the same ID is the same buffer), `null`, or
///   `scalar HEX` (the argument's bytes as the kernel takes them).
pub(crate) struct Trace {
    out: std::io::BufWriter<std::fs::File>,
    written: Vec<bool>,
    /// Buffer record address -> (id, size); a new size at an old address is a new buffer.
    buffers: std::collections::HashMap<usize, (usize, usize)>,
}

impl Trace {
    pub(crate) fn create(path: &Path) -> std::io::Result<Trace> {
        Ok(Trace {
            out: std::io::BufWriter::new(std::fs::File::create(path)?),
            written: Vec::new(),
            buffers: std::collections::HashMap::new(),
        })
    }

    fn launch(
        &mut self,
        module: &OpenClModule,
        index: usize,
        global: &[usize],
        local: &[usize],
        args: &[TraceArg],
    ) -> std::io::Result<()> {
        use std::io::Write;
        if self.written.len() <= index {
            self.written.resize(index + 1, false);
        }
        if !self.written[index] {
            let k = &module.kernels[index];
            let source = module.chunk(k);
            writeln!(self.out, "kernel {index} {} {}", k.name, source.len())?;
            self.out.write_all(source.as_bytes())?;
            writeln!(self.out)?;
            self.written[index] = true;
        }
        let sizes = |v: &[usize]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        writeln!(
            self.out,
            "launch {index} {} {} {} {}",
            global.len(),
            sizes(global),
            sizes(local),
            args.len()
        )?;
        for a in args {
            match *a {
                TraceArg::Buffer(addr, size) => {
                    let next = self.buffers.len();
                    let e = self.buffers.entry(addr).or_insert((next, size));
                    if e.1 != size {
                        *e = (next, size);
                    }
                    writeln!(self.out, "buffer {} {size}", e.0)?;
                }
                TraceArg::Null => writeln!(self.out, "null")?,
                TraceArg::Scalar(v, n) => {
                    let hex: String = v[..n].iter().map(|b| format!("{b:02x}")).collect();
                    writeln!(self.out, "scalar {hex}")?;
                }
            }
        }
        self.out.flush()
    }
}

/// The device state of a new session of a model whose library has `module`: the device the
/// options name (an index into [`super::system_devices`]), else the first GPU, else the first
/// device; its shared context; the model's programs there; a queue of the session's own.
pub(crate) fn open_session(
    module: &Arc<OpenClModule>,
    programs: &ProgramCache,
    device: Option<usize>,
    profiling: bool,
    cache: Option<PathBuf>,
) -> crate::Result<DeviceSession> {
    let err = |message: String| crate::Error::Device {
        device: "opencl".into(),
        message,
    };
    let list =
        super::system_devices().map_err(|e| err(format!("this model runs on OpenCL: {e}")))?;
    let index = match device {
        Some(i) if i < list.len() => i,
        Some(i) => {
            return Err(crate::Error::InvalidArgument(format!(
                "SessionOptions::opencl_device {i}: OpenCL lists {} device(s)",
                list.len()
            )))
        }
        None => super::default_device(list)
            .ok_or_else(|| err("this model runs on OpenCL, which lists no device".into()))?,
    };
    let context = super::shared_context(&list[index]).map_err(|e| err(e.to_string()))?;
    let programs = programs.for_context(module, &context);
    DeviceSession::new(index, programs, profiling, cache).map_err(|e| err(e.to_string()))
}
