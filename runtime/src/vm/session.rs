//! The public face of a session: creation, calls, the stateful API.

use std::collections::HashMap;
use std::sync::Arc;

use super::program::Callee;
use super::{Budget, CallState, InterruptHandle, Session};
use crate::error::{Error, Result};
use crate::host::threadpool::ThreadPool;
use crate::model::Model;
use crate::tensor::Pool;
use crate::value::{Function, Value};

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
    /// Overwrite every intermediate buffer the session hands out (fresh or reused) and every
    /// offload scratch buffer before a run: NaN for floats, `0xA5` bytes otherwise. For tests:
    /// work a kernel skipped then shows in the outputs instead of passing on an earlier run's
    /// bytes. Default: on in builds with the `poison` feature or when `MOTE_POISON_MEMORY=1`,
    /// else off (it costs a memset per allocation).
    pub poison_memory: bool,
    /// The most bytes of storage this session's calls may hold at once: storage the VM
    /// allocates (`vm.builtin.alloc_storage`, shape heaps; outputs the caller still holds
    /// count until dropped) and an offloaded region's scratch memory. Over it, a call fails
    /// with [`Error::ResourceExhausted`] instead of asking the system for more. Default
    /// [`default_memory_budget`]: half the machine's physical memory (docs/untrusted-models.md
    /// §3 gives the reasoning).
    pub memory_budget_bytes: usize,
    /// The most VM registers all frames of a call may hold together (each frame gets its
    /// function's `register_file_size`, read from the file). Default 2^20 (a few tens of MiB
    /// of registers); TVM's compiler gives a function tens to hundreds.
    pub max_registers: usize,
    /// Bytes of the calling thread's stack that nested Relax calls may use, measured from
    /// where the call entered the session; a deeper call is [`Error::ResourceExhausted`]
    /// before it can overflow. Default 256 KiB: with what a kernel needs at the deepest
    /// level, a call stays inside a 512 KiB thread (iOS's secondary threads), measured on
    /// aarch64 release and debug builds (docs/untrusted-models.md §3).
    pub stack_budget_bytes: usize,
    /// The most VM instructions one call may execute (a kernel or offloaded region counts one
    /// however long it runs). Relax control flow may loop, and this bounds it. Counted without
    /// a cost per instruction: a function's whole body is charged when it is entered and again
    /// at each backward jump (without one, a frame runs each instruction at most once), so a
    /// call stops no later than this many. Default 2^28 (a second or so of a tight loop; a
    /// large model runs a few thousand per call).
    pub max_instructions: u64,
    /// The OpenCL device a model compiled for OpenCL runs on: an index into the devices
    /// OpenCL lists (docs/opencl.md §2). `None`: the first GPU, else the first device. Ignored
    /// for models without OpenCL code.
    pub opencl_device: Option<usize>,
    /// Time each OpenCL kernel launch on the device (OpenCL profiling events), for
    /// [`Session::device_times`]. Default off.
    pub opencl_profiling: bool,
    /// A directory (the app's own: what is in it is loaded into the driver) where compiled
    /// OpenCL programs are kept, so that loading the same model again skips the compiler
    /// (docs/opencl.md §7). Files are named by device, driver and source and used only when
    /// all three match. Applies when a model's kernel is first built on a device, by
    /// whichever session launches it first. `None` (default): every load compiles.
    pub opencl_program_cache: Option<std::path::PathBuf>,
    /// Write every OpenCL kernel launch of this session to this file, in a text format a plain
    /// OpenCL host program replays (kernel sources, work sizes, arguments): for benchmarks
    /// against the same launches without Mote (docs/benchmarks.md, "OpenCL"). `None` (default):
    /// no trace.
    pub opencl_trace: Option<std::path::PathBuf>,
}

/// Default [`SessionOptions::memory_budget_bytes`]: half the physical memory where the system
/// says (Linux, Android, Apple platforms), else 4 GiB.
pub fn default_memory_budget() -> usize {
    crate::tensor::physical_memory()
        .map(|m| m / 2)
        .unwrap_or(4 << 30)
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            threads: None,
            pool_limit_bytes: 256 << 20,
            backends: Vec::new(),
            poison_memory: crate::tensor::poison_by_default(),
            memory_budget_bytes: default_memory_budget(),
            max_registers: DEFAULT_MAX_REGISTERS,
            stack_budget_bytes: DEFAULT_STACK_BUDGET,
            max_instructions: DEFAULT_MAX_INSTRUCTIONS,
            opencl_device: None,
            opencl_profiling: false,
            opencl_program_cache: None,
            opencl_trace: None,
        }
    }
}

/// `items` with their host tensors copied to `d` (nested tuples too).
fn device_values(
    d: &mut crate::device::opencl::exec::DeviceSession,
    pool: &Arc<Pool>,
    items: &[Value],
    here: crate::Device,
) -> Result<Vec<Value>> {
    items
        .iter()
        .map(|a| match a {
            Value::Tensor(t) => d.upload(t, pool).map(Value::DeviceTensor),
            Value::DeviceTensor(t) if t.device() != here => Err(Error::InvalidArgument(format!(
                "a tensor on {} passed to a session on {here}",
                t.device()
            ))),
            Value::Tuple(inner) => Ok(Value::Tuple(Arc::new(device_values(d, pool, inner, here)?))),
            other => Ok(other.clone()),
        })
        .collect()
}

/// `v` with its device tensors copied to the host (tuples walked).
fn host_value(d: &mut crate::device::opencl::exec::DeviceSession, v: Value) -> Result<Value> {
    Ok(match v {
        Value::DeviceTensor(t) => Value::Tensor(d.download(&t)?),
        Value::Tuple(items) => Value::Tuple(Arc::new(
            items
                .iter()
                .cloned()
                .map(|i| host_value(d, i))
                .collect::<Result<Vec<_>>>()?,
        )),
        other => other,
    })
}

/// Default [`SessionOptions::max_registers`].
pub const DEFAULT_MAX_REGISTERS: usize = 1 << 20;
/// Default [`SessionOptions::stack_budget_bytes`].
pub const DEFAULT_STACK_BUDGET: usize = 256 << 10;
/// Default [`SessionOptions::max_instructions`].
pub const DEFAULT_MAX_INSTRUCTIONS: u64 = 1 << 28;

/// The most threads a session may use.
pub const MAX_THREADS: usize = 1024;

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

impl Session {
    pub(crate) fn new(model: Model, options: SessionOptions) -> Result<Session> {
        let threads = options.threads.unwrap_or_else(default_threads);
        if threads == 0 || threads > MAX_THREADS {
            let from = if options.threads.is_some() {
                "SessionOptions::threads"
            } else {
                "MOTE_NUM_THREADS/TVM_NUM_THREADS"
            };
            return Err(Error::InvalidArgument(format!(
                "thread count {threads} from {from} (must be 1..={MAX_THREADS})"
            )));
        }
        let device = match model.inner.library().opencl() {
            Some(module) => Some(crate::device::opencl::exec::open_session(
                module,
                model.inner.library().opencl_programs(),
                options.opencl_device,
                options.opencl_profiling,
                options.opencl_program_cache.clone(),
            )?),
            None => None,
        };
        let pool = Pool::with_budget(
            options.pool_limit_bytes,
            options.poison_memory,
            options.memory_budget_bytes,
        );
        // A Relax model compiled for OpenCL: the session's own program, with the tensor
        // constants copied to the device once, as TVM's VM does when it starts (docs/opencl.md
        // §8), counted in the session's memory budget.
        let mut device = device;
        if let Some(d) = device.as_mut() {
            // Device buffers are kept for reuse up to the same limit as host ones.
            d.buffers = crate::device::memory::BufferCache::new(options.pool_limit_bytes);
        }
        if let (Some(d), Some(path)) = (device.as_mut(), options.opencl_trace.as_ref()) {
            d.trace = Some(
                crate::device::opencl::exec::Trace::create(path)
                    .map_err(|e| Error::io(path.clone(), e))?,
            );
        }
        let device_program = match device.as_mut() {
            Some(d) if !model.inner.is_kernel_library() => {
                let constants = model
                    .inner
                    .exe()
                    .constants
                    .iter()
                    .map(|c| match c {
                        Value::Tensor(t) => d.upload(t, &pool).map(Value::DeviceTensor),
                        other => Ok(other.clone()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                Some(Arc::new(model.inner.for_device(constants)?))
            }
            _ => None,
        };
        Ok(Session {
            device,
            device_program,
            device_times: Vec::new(),
            compiled: None,
            model,
            pool,
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
            interrupt: InterruptHandle::default(),
            budget: Budget::of(&options),
            call: CallState::default(),
        })
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// A handle that stops this session's running call from any thread, with
    /// [`Error::Cancelled`] (see [`InterruptHandle`]). Every handle of a session is the same.
    pub fn interrupt_handle(&self) -> InterruptHandle {
        self.interrupt.clone()
    }

    /// Threads available to parallel kernels.
    pub fn threads(&self) -> usize {
        self.threads.threads()
    }

    /// Bytes held now against [`SessionOptions::memory_budget_bytes`]: storage the VM
    /// allocated (outputs the caller still holds included) and, for a model compiled for
    /// OpenCL, device memory (its weights' copies, inputs and intermediates).
    pub fn memory_in_use(&self) -> usize {
        self.pool.live_bytes()
    }

    pub(crate) fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Call the Relax function `name`.
    ///
    /// The VM allocates the function's outputs itself, so `args` are only read. A kernel-only
    /// library ([`Model::is_kernel_library`]) is refused with [`Error::InvalidArgument`]: its
    /// kernels write into tensors the caller passes, and go through
    /// [`Session::call_kernel`], which makes sure nobody else can see those tensors.
    pub fn call(&mut self, name: &str, args: &[Value]) -> Result<Value> {
        let threads = self.threads.clone();
        let model = self.model.inner.clone();
        if model.is_kernel_library() {
            return Err(use_call_kernel(name, "Session::call"));
        }
        let fidx = self.model.vm_function(name)?;
        if self.device_program.is_some() {
            return self.call_on_device(fidx, args, true);
        }
        threads.install(|| self.enter(|s| s.invoke_vm(&model, fidx, args)))
    }

    /// Function `fidx` of the session's device program, with host tensor arguments copied to
    /// the device; the result's device tensors copied back when `to_host`, else left there with
    /// the device's work finished.
    fn call_on_device(&mut self, fidx: usize, args: &[Value], to_host: bool) -> Result<Value> {
        let program = self
            .device_program
            .clone()
            .ok_or_else(|| Error::InvalidArgument("the session runs on the CPU".into()))?;
        let threads = self.threads.clone();
        self.device_times.clear();
        threads.install(|| {
            self.enter(|s| {
                let args = s.device_args(args)?;
                let out = s.invoke_vm(&program, fidx, &args)?;
                if to_host {
                    return s.host_result(out);
                }
                s.device_or_refuse("call_device")?
                    .queue()
                    .finish()
                    .map_err(crate::device::opencl::exec::device_error)?;
                Ok(out)
            })
        })
    }

    /// [`Session::call`], but the device tensors of the result stay on the device (no copy
    /// back; [`Session::download`] copies one, and they can be passed to the next call as they
    /// are). The call's device work has finished when it returns. The same as
    /// [`Session::call`] in a session on the CPU.
    pub fn call_device(&mut self, name: &str, args: &[Value]) -> Result<Value> {
        if self.device_program.is_none() {
            return self.call(name, args);
        }
        let fidx = self.model.vm_function(name)?;
        self.call_on_device(fidx, args, false)
    }

    /// The device this session runs the model's kernels on: [`Device::Cpu`] unless the model
    /// was compiled for OpenCL.
    ///
    /// [`Device::Cpu`]: crate::Device::Cpu
    pub fn device(&self) -> crate::Device {
        self.device
            .as_ref()
            .map_or(crate::Device::Cpu, |d| d.device())
    }

    /// A copy of `t` on this session's device, to pass to its calls without a copy each time
    /// (docs/opencl.md §8). [`Error::InvalidArgument`] in a session on the CPU.
    pub fn upload(&mut self, t: &crate::Tensor) -> Result<crate::DeviceTensor> {
        let pool = self.pool.clone();
        self.device_or_refuse("upload")?.upload(t, &pool)
    }

    /// A zeroed tensor of `shape` and `dtype` on this session's device, counted against its
    /// memory budget: to fill through [`Session::map`] and pass to calls (docs/opencl.md §8).
    /// [`Error::InvalidArgument`] in a session on the CPU.
    pub fn alloc_device(
        &mut self,
        shape: &[i64],
        dtype: crate::DType,
    ) -> Result<crate::DeviceTensor> {
        let pool = self.pool.clone();
        self.device_or_refuse("alloc_device")?
            .zeros(shape, dtype, &pool)
    }

    /// Device tensor `t`'s bytes in host memory, for reading and writing, once the session's
    /// work on the device has finished (docs/opencl.md §8). On a device that shares memory
    /// with the host (phones' GPUs; [`crate::device::Mapped::in_place`]) these are the device's
    /// own bytes and nothing is copied: an app writes its input straight into the tensor a
    /// call then reads, and reads an output where the kernels left it. `t` must not be shared
    /// ([`DeviceTensor::is_exclusive`](crate::DeviceTensor::is_exclusive)); the mapping
    /// borrows the session and `t`, so no call runs until it ends.
    pub fn map<'a>(
        &'a mut self,
        t: &'a mut crate::DeviceTensor,
    ) -> Result<crate::device::Mapped<'a>> {
        self.device_or_refuse("map")?.map(t)
    }

    /// A host copy of device tensor `t`, once the session's work on the device has finished.
    pub fn download(&mut self, t: &crate::DeviceTensor) -> Result<crate::Tensor> {
        self.device_or_refuse("download")?.download(t)
    }

    fn device_or_refuse(
        &mut self,
        what: &str,
    ) -> Result<&mut crate::device::opencl::exec::DeviceSession> {
        self.device.as_mut().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "Session::{what}: this session runs on the CPU (its model has no OpenCL code)"
            ))
        })
    }

    /// Arguments of a call to a model on the device: host tensors copied there (device
    /// tensors of this session's device pass as they are; docs/opencl.md §8). Borrowed as
    /// they are when nothing needs a copy (an app that keeps its tensors on the device).
    fn device_args<'a>(&mut self, args: &'a [Value]) -> Result<std::borrow::Cow<'a, [Value]>> {
        let here = self.device();
        let as_they_are = args.iter().all(|a| match a {
            Value::Tensor(_) | Value::Tuple(_) => false,
            Value::DeviceTensor(t) => t.device() == here,
            _ => true,
        });
        if as_they_are {
            return Ok(std::borrow::Cow::Borrowed(args));
        }
        let pool = self.pool.clone();
        let d = self.device_or_refuse("call")?;
        device_values(d, &pool, args, here).map(std::borrow::Cow::Owned)
    }

    /// A call's result with its device tensors copied to the host (tuples walked).
    fn host_result(&mut self, v: Value) -> Result<Value> {
        let d = self.device_or_refuse("call")?;
        host_value(d, v)
    }

    /// Call kernel `name` of a kernel-only library ([`Model::is_kernel_library`]), the way TVM
    /// calls `lib["name"](a, b, c)`.
    ///
    /// `args` are all of the kernel's arguments, outputs included: tensors are passed as views
    /// of their own memory, so the kernel's writes land in them; ints, floats, bools and dtypes
    /// as scalars. The result is the kernel's own return value, `Value::None` for TVM's
    /// destination-passing kernels.
    ///
    /// A kernel may write any tensor it is given, so every tensor argument must be exclusive
    /// ([`Tensor::is_exclusive`]): no clone of the handle, no other view of its storage, no
    /// kept reference to the storage. Otherwise the call fails with
    /// [`Error::InvalidArgument`] naming the argument, before the kernel runs: drop the other
    /// handles first, or pass a [`Tensor::deep_copy`] and read the result from it. Taking
    /// `&mut [Value]` means the caller holds no borrow of the tensors' data during the call.
    /// The same tensor cannot be passed twice (each handle would share it); an in-place kernel
    /// takes it once.
    ///
    /// An opaque pointer is refused ([`Error::Mismatch`]): a kernel would dereference it, and
    /// nothing here can vouch for it. The kernel checks the rest itself: a wrong count, dtype
    /// or shape is [`Error::Kernel`] with TVM's message. Like TVM, Mote does not check what a
    /// kernel does with its scalars (a loop bound it takes is the kernel's contract). A Relax
    /// model is refused with [`Error::InvalidArgument`]: use [`Session::call`].
    ///
    /// Reading an argument's data across the call does not compile, because the call borrows
    /// the arguments mutably (error E0502):
    ///
    /// ```compile_fail,E0502
    /// # fn f(session: &mut mote::Session) -> mote::Result<()> {
    /// use mote::{DType, Tensor, Value};
    /// let mut args = vec![Value::Tensor(Tensor::zeros(&[4], DType::F32)?)];
    /// let before: &[f32] = args[0].as_tensor().unwrap().as_slice()?;
    /// session.call_kernel("fill", &mut args)?; // `args` is still borrowed by `before`
    /// println!("{}", before[0]);
    /// # Ok(()) }
    /// ```
    ///
    /// and neither does a reader on another thread while the kernel runs (E0502 too):
    ///
    /// ```compile_fail,E0502
    /// # fn f(session: &mut mote::Session) -> mote::Result<()> {
    /// use mote::{DType, Tensor, Value};
    /// let mut args = vec![Value::Tensor(Tensor::zeros(&[4], DType::F32)?)];
    /// std::thread::scope(|scope| {
    ///     let reader = scope.spawn(|| args[0].as_tensor().map(|t| t.data()[0]));
    ///     let written = session.call_kernel("fill", &mut args); // `args` is shared with `reader`
    ///     (reader.join(), written)
    /// });
    /// # Ok(()) }
    /// ```
    ///
    /// What types cannot see (a clone kept elsewhere) is the exclusivity check's job:
    ///
    /// ```no_run
    /// use mote::{DType, Error, Model, Tensor, Value};
    /// let model = Model::load("gemm.so")?;
    /// let mut session = model.session()?;
    /// let a = Tensor::zeros(&[64, 32], DType::F32)?;
    /// let b = Tensor::zeros(&[32, 48], DType::F32)?;
    /// let c = Tensor::zeros(&[64, 48], DType::F32)?;
    /// let kept = c.clone();
    /// let mut args = [Value::Tensor(a), Value::Tensor(b), Value::Tensor(c)];
    /// assert!(matches!(session.call_kernel("gemm", &mut args), Err(Error::InvalidArgument(_))));
    /// drop(kept);
    /// session.call_kernel("gemm", &mut args)?; // the product is in args[2]
    /// # Ok::<(), mote::Error>(())
    /// ```
    ///
    /// [`Tensor::is_exclusive`]: crate::Tensor::is_exclusive
    /// [`Tensor::deep_copy`]: crate::Tensor::deep_copy
    pub fn call_kernel(&mut self, name: &str, args: &mut [Value]) -> Result<Value> {
        let threads = self.threads.clone();
        let model = self.model.inner.clone();
        if !model.is_kernel_library() {
            return Err(Error::InvalidArgument(format!(
                "`{name}`: Session::call_kernel calls kernels of kernel-only libraries; this \
                 model is a Relax program, whose functions are called with Session::call"
            )));
        }
        let func = self.model.kernel_function(name)?;
        for (i, arg) in args.iter_mut().enumerate() {
            let shared = match arg {
                Value::OpaquePtr(_) => {
                    return Err(Error::Mismatch(format!(
                        "kernel `{name}`: argument {i} is an opaque pointer, which a caller \
                         cannot pass to a kernel (it would be dereferenced unchecked)"
                    )))
                }
                Value::Tensor(t) => !t.is_exclusive(),
                _ => false,
            };
            if shared {
                return Err(Error::InvalidArgument(format!(
                    "kernel `{name}`: tensor argument {i} is shared (another handle, view or \
                     storage reference reaches its memory), and the kernel may write it while \
                     that one reads; drop the other clones and views before the call, or pass \
                     a deep_copy() of it and read the result from the copy"
                )));
            }
        }
        if self.device.is_some() {
            return self.enter(|s| s.call_kernel_on_device(&model, func, args));
        }
        // One kernel and no VM: no instruction or stack budget to set up, only the interrupt
        // to consume (a call of a few hundred nanoseconds feels every check it makes).
        if let (Callee::Kernel(k), None) = (model.callee(func), &self.profiler) {
            let k = *k;
            if self.interrupt.take() {
                return Err(Error::Cancelled);
            }
            return threads.install(|| self.call_kernel_values(&model, func, k, args));
        }
        threads.install(|| self.enter(|s| s.call_index(&model, func, args)))
    }

    /// Device time of each OpenCL kernel launch of the last call, in launch order: (kernel
    /// name, nanoseconds). Empty unless [`SessionOptions::opencl_profiling`] is on.
    pub fn device_times(&self) -> &[(String, u64)] {
        &self.device_times
    }

    /// Call a function value the model returned (a Relax closure, TVM's `invoke_closure`):
    /// `args` first, then the arguments the closure captured.
    ///
    /// `f` must come from this session's model (a clone of the same [`Model`] counts), else
    /// [`Error::InvalidArgument`]; so must its target be a Relax function, since a kernel or
    /// packed function could write into `args`, which this call only borrows. The arity is
    /// checked as in [`Session::call`].
    pub fn call_function(&mut self, f: &Function, args: &[Value]) -> Result<Value> {
        let threads = self.threads.clone();
        let model = self.model.inner.clone();
        check_function_value(model.id(), model.exe(), model.callees(), f)?;
        if let Some(program) = self.device_program.clone() {
            self.device_times.clear();
            return threads.install(|| {
                self.enter(|s| {
                    let args = s.device_args(args)?;
                    let out = s.call_function_value(&program, f, &args)?;
                    s.host_result(out)
                })
            });
        }
        threads.install(|| self.enter(|s| s.call_function_value(&model, f, args)))
    }

    /// Call with tensors, returning the output tensors (tuples flattened). A kernel-only
    /// library is refused as by [`Session::call`]: use [`Session::call_kernel`].
    pub fn run(&mut self, name: &str, inputs: &[crate::Tensor]) -> Result<Vec<crate::Tensor>> {
        if self.model.is_kernel_library() {
            return Err(use_call_kernel(name, "Session::run"));
        }
        let args: Vec<Value> = inputs.iter().cloned().map(Value::Tensor).collect();
        Ok(self.call(name, &args)?.flatten_tensors())
    }

    /// Stateful API: store the inputs of `name` for a later [`Session::invoke_stateful`].
    ///
    /// Not for kernel-only libraries ([`Error::InvalidArgument`]): the session would keep
    /// the tensors between this call and the kernel call, while the caller's clones of them
    /// stay free to be read anywhere, so the kernel's writes could not be kept exclusive as
    /// [`Session::call_kernel`] requires. Call that instead.
    pub fn set_input(&mut self, name: &str, args: Vec<Value>) -> Result<()> {
        if self.model.is_kernel_library() {
            return Err(stateful_kernel(name));
        }
        let fidx = self.model.vm_function(name)?;
        self.check_arity(fidx, args.len())?;
        self.inputs.insert(name.to_string(), args);
        Ok(())
    }

    /// Stateful API: run `name` on the inputs given to [`Session::set_input`]. Not for
    /// kernel-only libraries (see [`Session::set_input`]).
    pub fn invoke_stateful(&mut self, name: &str) -> Result<()> {
        if self.model.is_kernel_library() {
            return Err(stateful_kernel(name));
        }
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

    pub(super) fn check_arity(&self, fidx: usize, given: usize) -> Result<()> {
        let f = &self.model.inner.exe().funcs[fidx];
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
}

/// The error for calling a kernel-only library's kernel through an entry point that cannot
/// keep its tensor arguments exclusive.
fn use_call_kernel(name: &str, entry: &str) -> Error {
    Error::InvalidArgument(format!(
        "`{name}`: this model is a kernel-only library, whose kernels write into the tensors \
         they are given; {entry} cannot promise that nobody else sees them, so call it with \
         Session::call_kernel, which takes the arguments as &mut [Value] and requires every \
         tensor to be exclusive"
    ))
}

/// The error for the stateful API on a kernel-only library.
fn stateful_kernel(name: &str) -> Error {
    Error::InvalidArgument(format!(
        "`{name}`: the stateful API (set_input/invoke_stateful) cannot call a kernel of a \
         kernel-only library: it keeps the tensors until a later call, during which the \
         caller's other handles could read memory the kernel writes; call it with \
         Session::call_kernel"
    ))
}

/// Whether `f` may be called from outside by [`Session::call_function`] on the program with
/// this `id`, function table and resolution: it must be that program's, and a Relax function.
fn check_function_value(
    id: usize,
    exe: &crate::loader::executable::Executable,
    callees: &[Callee],
    f: &Function,
) -> Result<()> {
    if f.model_id != id {
        return Err(Error::InvalidArgument(
            "a function value from another model: call it on a session of the model that \
             returned it"
                .into(),
        ));
    }
    match (
        exe.funcs.get(f.index as usize),
        callees.get(f.index as usize),
    ) {
        (Some(_), Some(Callee::Vm(_))) => Ok(()),
        (Some(t), _) => Err(Error::InvalidArgument(format!(
            "function value `{}` is not a Relax function; only Relax functions and closures \
             can be called from outside (a kernel or packed function could write into \
             arguments this call only borrows)",
            t.name
        ))),
        (None, _) => Err(Error::InvalidArgument(format!(
            "function value #{} is not in this model's function table",
            f.index
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::loader::executable::Executable;
    use crate::vm::builtins::Builtin;

    #[test]
    fn only_this_models_relax_functions_are_callable_as_values() {
        let exe = Executable::packed_only(&["vm.builtin.null_value".into(), "closure".into()]);
        let callees = [Callee::Builtin(Builtin::NullValue), Callee::Vm(1)];
        let value = |model_id, index| Function {
            model_id,
            index,
            saved: Arc::from([]),
        };
        let refused = |f: Function, needle: &str| match check_function_value(7, &exe, &callees, &f)
        {
            Err(Error::InvalidArgument(m)) if m.contains(needle) => {}
            r => panic!("{f:?}: expected a refusal mentioning `{needle}`, got {r:?}"),
        };
        assert!(check_function_value(7, &exe, &callees, &value(7, 1)).is_ok());
        // The same index of another model: refused before anything is looked up.
        refused(value(8, 1), "another model");
        refused(value(8, 0), "another model");
        refused(
            value(7, 0),
            "`vm.builtin.null_value` is not a Relax function",
        );
        refused(value(7, 2), "#2 is not in this model's function table");
    }
}
