//! The public face of a session: creation, calls, the stateful API.

use std::collections::HashMap;
use std::sync::Arc;

use super::Session;
use crate::error::{Error, Result};
use crate::host::threadpool::ThreadPool;
use crate::model::Model;
use crate::tensor::Pool;
use crate::value::Value;

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
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            threads: None,
            pool_limit_bytes: 256 << 20,
            backends: Vec::new(),
            poison_memory: crate::tensor::poison_by_default(),
        }
    }
}

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
        Ok(Session {
            model,
            pool: Pool::with_poison(options.pool_limit_bytes, options.poison_memory),
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
    ///
    /// In a kernel-only library ([`Model::is_kernel_library`]) `name` is a kernel, and `args`
    /// are all of its arguments, outputs included: tensors are passed as views of their own
    /// memory, so the kernel's writes land in them; ints, floats, bools and dtypes as scalars.
    /// An opaque pointer is refused ([`Error::Mismatch`]): a kernel would dereference it, and
    /// nothing here can vouch for it. The result is the kernel's own return value,
    /// `Value::None` for TVM's destination-passing kernels. The kernel checks its arguments
    /// itself: a wrong count, dtype or shape is [`Error::Kernel`] with TVM's message. Like
    /// TVM, Mote does not check what a kernel does with its scalars (a loop bound it takes is
    /// the kernel's contract). A kernel may write any tensor it is given, so hold no borrow of
    /// an argument's data ([`Tensor::data`], [`Tensor::as_slice`]) across the call: read it
    /// afterwards.
    ///
    /// [`Tensor::data`]: crate::Tensor::data
    /// [`Tensor::as_slice`]: crate::Tensor::as_slice
    pub fn call(&mut self, name: &str, args: &[Value]) -> Result<Value> {
        let threads = self.threads.clone();
        let model = self.model.inner.clone();
        if model.is_kernel_library() {
            let func = self.model.kernel_function(name)?;
            if let Some(i) = args.iter().position(|a| matches!(a, Value::OpaquePtr(_))) {
                return Err(Error::Mismatch(format!(
                    "kernel `{name}`: argument {i} is an opaque pointer, which a caller cannot \
                     pass to a kernel (it would be dereferenced unchecked)"
                )));
            }
            return threads.install(|| self.call_index(&model, func, args));
        }
        let fidx = self.model.vm_function(name)?;
        threads.install(|| self.invoke_vm(&model, fidx, args))
    }

    /// Call with tensors, returning the output tensors (tuples flattened).
    ///
    /// For a kernel of a kernel-only library this returns an empty list: the kernel writes its
    /// outputs into tensors among `inputs`, which the caller allocated (see [`Session::call`]).
    pub fn run(&mut self, name: &str, inputs: &[crate::Tensor]) -> Result<Vec<crate::Tensor>> {
        let args: Vec<Value> = inputs.iter().cloned().map(Value::Tensor).collect();
        Ok(self.call(name, &args)?.flatten_tensors())
    }

    /// Stateful API: store the inputs of `name` for a later [`Session::invoke_stateful`].
    pub fn set_input(&mut self, name: &str, args: Vec<Value>) -> Result<()> {
        if self.model.is_kernel_library() {
            // Kernels check their own arguments when they run.
            self.model.kernel_function(name)?;
        } else {
            let fidx = self.model.vm_function(name)?;
            self.check_arity(fidx, args.len())?;
        }
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
