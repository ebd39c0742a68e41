//! The Relax VM (docs/tvm-format.md §3-§4, §9): a [`Session`] runs one model's bytecode.
//!
//! The session's state is defined here; each concern is an `impl Session` in its own child
//! module: `session` (the public API and options), `interp` (frames, registers, calls),
//! `kernel` (calling compiled kernels), `builtins` (the VM builtins), `offload_call` (the
//! `mote.subgraph` call) and `profile` (timing and traces). `program` is the loaded, linked
//! executable a model shares between its sessions.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::host::abi::{DLTensor, FfiAny};
use crate::host::threadpool::ThreadPool;
use crate::model::Model;
use crate::tensor::Pool;
use crate::value::Value;

#[cfg(test)]
mod budget_tests;
pub(crate) mod builtins;
pub(crate) mod compiled;
pub mod craft;
mod interp;
mod kernel;
mod offload_call;
mod profile;
pub(crate) mod program;
mod session;

pub use profile::{CallKind, ProfileEntry, TraceEvent};
pub(crate) use program::SUBGRAPH_FUNCTION;
pub use session::{
    default_memory_budget, default_threads, SessionOptions, DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_MAX_REGISTERS, DEFAULT_STACK_BUDGET,
};

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
    profiler: Option<Box<profile::Profiler>>,
    /// `SessionOptions::backends`, resolved to backends on the first subgraph call.
    backend_names: Vec<String>,
    backends: Option<Vec<Arc<dyn crate::offload::Backend>>>,
    /// Set from any thread to stop the running call ([`Session::interrupt_handle`]).
    interrupt: InterruptHandle,
    /// The limits from `SessionOptions`, fixed for the session's life.
    budget: Budget,
    /// What the call in progress has used of them; reset as each call enters the session.
    call: CallState,
    /// The OpenCL queue and kernels of a model compiled for OpenCL (docs/opencl.md §5).
    device: Option<crate::device::opencl::exec::DeviceSession>,
    /// A Relax model on the device: its program with this session's device constants
    /// (`Program::for_device`); `None` otherwise.
    device_program: Option<Arc<program::Program>>,
    /// Device time of each OpenCL launch of the last call, when profiling.
    device_times: Vec<(String, u64)>,
    /// The cells and lists of compiled Relax functions (`compiled`), made on the first call
    /// of one.
    compiled: Option<Box<compiled::CompiledState>>,
}

/// Stops a running call of one [`Session`] from any thread (docs/untrusted-models.md §4).
///
/// [`InterruptHandle::interrupt`] makes the call in progress return [`Error::Cancelled`] at
/// its next call of a kernel, offloaded region, Relax function or registered function, or
/// its next backward jump (a kernel already running finishes first; an offloaded region stops
/// between its backend segments). An interrupt is never lost: when no call is running, the
/// session's next call is cancelled as it starts. Each interrupt cancels one call; the session
/// stays usable afterwards.
///
/// ```no_run
/// let model = mote::Model::load("model.so")?;
/// let mut session = model.session()?;
/// let handle = session.interrupt_handle();
/// std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_secs(2));
///     handle.interrupt();
/// });
/// match session.run("main", &[]) {
///     Err(mote::Error::Cancelled) => println!("took too long"),
///     r => println!("{:?}", r.map(|o| o.len())),
/// }
/// # Ok::<(), mote::Error>(())
/// ```
///
/// [`Error::Cancelled`]: crate::Error::Cancelled
#[derive(Clone, Debug, Default)]
pub struct InterruptHandle(Arc<AtomicBool>);

impl InterruptHandle {
    /// Cancel the session's running call, or its next one if none is running.
    pub fn interrupt(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether an interrupt is pending (not yet consumed by a call).
    pub fn is_pending(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Discard a pending interrupt that no call has consumed. For a caller that interrupts on
    /// behalf of one call (a binding's cancellation, a timeout): once that call has returned,
    /// a late interrupt must not cancel the session's next call. Do it where the interrupting
    /// side can no longer fire (under the same lock that arms it), or it may still land after.
    pub fn clear(&self) {
        self.0.store(false, Ordering::Release);
    }

    /// Consume a pending interrupt: true at most once per [`InterruptHandle::interrupt`].
    #[inline]
    pub(crate) fn take(&self) -> bool {
        self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::AcqRel)
    }
}

/// `SessionOptions`' budgets, as the interpreter checks them.
#[derive(Clone, Copy, Debug)]
struct Budget {
    max_registers: usize,
    stack_bytes: usize,
    instructions: u64,
}

impl Budget {
    fn of(o: &SessionOptions) -> Budget {
        Budget {
            max_registers: o.max_registers,
            stack_bytes: o.stack_budget_bytes,
            instructions: o.max_instructions,
        }
    }
}

/// Per-call accounting, reset when a call enters the session (`Session::enter`).
#[derive(Clone, Copy, Debug, Default)]
struct CallState {
    /// Instructions the call may still execute.
    instructions_left: u64,
    /// Address of a local of the entry frame: stack use is measured from here (stacks grow
    /// down on every platform Mote supports).
    stack_base: usize,
}

// SAFETY: the raw pointers in the scratch vectors are only meaningful during a kernel call made
// by the thread that owns the session; between calls they are dead data.
unsafe impl Send for Session {}
