//! The Relax VM (docs/tvm-format.md §3-§4, §9): a [`Session`] runs one model's bytecode.
//!
//! The session's state is defined here; each concern is an `impl Session` in its own child
//! module: `session` (the public API and options), `interp` (frames, registers, calls),
//! `kernel` (calling compiled kernels), `builtins` (the VM builtins), `offload_call` (the
//! `mote.subgraph` call) and `profile` (timing and traces). `program` is the loaded, linked
//! executable a model shares between its sessions.

use std::collections::HashMap;
use std::sync::Arc;

use crate::host::abi::{DLTensor, FfiAny};
use crate::host::threadpool::ThreadPool;
use crate::model::Model;
use crate::tensor::Pool;
use crate::value::Value;

pub(crate) mod builtins;
mod interp;
mod kernel;
mod offload_call;
mod profile;
pub(crate) mod program;
mod session;

pub use profile::{CallKind, ProfileEntry, TraceEvent};
pub(crate) use program::SUBGRAPH_FUNCTION;
pub use session::{default_threads, SessionOptions};

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
}

// SAFETY: the raw pointers in the scratch vectors are only meaningful during a kernel call made
// by the thread that owns the session; between calls they are dead data.
unsafe impl Send for Session {}
