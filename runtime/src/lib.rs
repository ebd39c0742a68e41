//! Mote: a small, fast, memory-safe runtime for models compiled by Apache TVM 0.27.
//!
//! ```no_run
//! use mote::{Model, Tensor, Value};
//! let model = Model::load("model.so")?;
//! let mut session = model.session()?;
//! let x = Tensor::from_slice(&[1, 16], &[0.5f32; 16])?;
//! let out = session.call("forward", &[Value::Tensor(x)])?;
//! # Ok::<(), mote::Error>(())
//! ```
//!
//! A [`Model`] is `Send + Sync`; a [`Session`] runs it on one thread at a time.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

/// Devices beside the host CPU: OpenCL (docs/opencl.md). Not yet a stable API: models do not
/// use it yet (issue 28).
#[doc(hidden)]
// Without OpenCL every device object is uninhabited (`device::opencl::sys::Built`): the
// compiler then reports the code after making one as unreachable, which is the point.
#[cfg_attr(not(feature = "opencl"), allow(unreachable_code, unused_variables))]
pub mod device;
mod dtype;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod host;
mod loader;
mod model;
pub mod npy;
mod outputs;
/// Tar archives, gzip-compressed or not (what `export_library("m.tar")` writes), read as Mote
/// reads a model's `.tar`.
pub mod tar {
    pub use crate::loader::object_file::{Tar, TarEntry, TarKind};
}
mod offload;
mod registry;
mod tensor;
#[cfg(test)]
mod test_alloc;
mod value;
mod vm;

/// Backends for offloaded subgraphs: the contract, the registry, plug-ins and the planner.
pub mod backend {
    pub use crate::offload::backends::{bnns, cpu, plugin};
    pub use crate::offload::{
        backend_names, load_plugin, register_backend, segment_io, Backend, Buffers, Constants,
        NodePlan, Prepared, SubgraphPlan, SubgraphRunner, CPU,
    };
}
/// The subgraph description format (docs/subgraph-format.md).
pub use offload::format as subgraph;

pub use device::{Device, DeviceTensor};
pub use dtype::DType;
pub use error::{Error, ErrorCode, Result};
pub use model::{
    default_load_budget, DeviceKernel, Dim, FunctionInfo, KernelSignature, LoadOptions, Model,
    ParamInfo,
};
pub use offload::{NodePlan, SubgraphPlan};
pub use registry::{lookup_function, register_function, unregister_function, PackedFunc};
pub use tensor::{Element, Pool, Storage, Tensor, ALIGNMENT};
pub use value::{Arg, Function, TensorRef, Value};
pub use vm::builtins::BUILTIN_NAMES;
pub use vm::{
    default_memory_budget, default_threads, CallKind, InterruptHandle, ProfileEntry, Session,
    SessionOptions, TraceEvent, DEFAULT_MAX_INSTRUCTIONS, DEFAULT_MAX_REGISTERS,
    DEFAULT_STACK_BUDGET,
};

/// Mote's version.
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The symbol executables that embed Mote must export so model libraries can report errors;
/// pass `-Wl,--export-dynamic-symbol=` followed by this name to the linker on Linux/Android.
pub const ERROR_SYMBOL: &str = "TVMFFIErrorSetRaisedFromCStrParts";

/// What libraries built with `exec_mode="compiled"` import besides [`ERROR_SYMBOL`]: an
/// executable that embeds Mote and loads such models exports these too (docs/tvm-format.md
/// §3.6); without them, loading one is [`Error::Load`] naming the flag.
pub const COMPILED_MODE_SYMBOLS: [&str; 3] = [
    "TVMBackendAnyListSetPackedArg",
    "TVMBackendAnyListMoveFromPackedReturn",
    "TVMBackendAnyListResetItem",
];
