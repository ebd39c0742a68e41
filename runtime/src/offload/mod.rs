//! Backends that run offloaded subgraphs (`mote.subgraph` calls), the registry they live in, and
//! the planner that splits a subgraph between them.
//!
//! Every backend implements [`Backend`]: it says whether it can run on this machine, which nodes
//! it supports (with a reason when not), prepares a run of consecutive nodes once (weights
//! transformed there), and runs the prepared segment on borrowed buffers. The registry holds
//! plug-ins first (loaded from `MOTE_BACKEND_PLUGINS` or [`load_plugin`]) and the built-in `cpu`
//! backend last; `cpu` runs every op of the format, so every node has a home.
//!
//! Planning is per node: each node goes to the first backend in the session's preference order
//! that supports it; consecutive nodes on one backend form one segment, prepared once per model,
//! call site and preference order, and shared by every session of the model. A node that does
//! not go to the first choice is logged with the reasons the preferred backends gave.
//!
//! Layout: [`format`] parses and validates the description; [`symbolic`] binds the symbolic
//! dimensions of a version-3 one per call; [`backend`] is the contract every
//! backend implements; [`registry`] holds the backends; [`planner`] assigns nodes; [`executor`]
//! runs prepared segments; [`backends`] holds the built-in `cpu`, `bnns` and plug-in backends.

pub mod backend;
pub mod backends;
mod constants;
pub mod executor;
pub mod format;
pub mod planner;
pub mod registry;
pub mod symbolic;

pub use backend::{Backend, Buffers, Constants, Prepared, CPU};
pub use backends::plugin::load_plugin;
pub(crate) use constants::{read as read_constant, Constant, InFile};
pub(crate) use executor::Site;
pub use executor::SubgraphRunner;
pub use planner::{segment_io, NodePlan, SubgraphPlan};
pub use registry::{backend_names, register_backend};
pub(crate) use registry::{resolve, resolve_with_reasons};

/// Whether this build runs offloaded subgraphs (the `offload` feature). Without it six doors
/// answer at once (checking a model's `mote.subgraph` calls at load, running one, planning
/// one, loading a backend plug-in, the registry's search for plug-ins, and reading a model
/// file as data, which only models whose every operator is offloaded need), with [`left_out`]
/// where something needs them, so that nothing behind them stays in the library: the
/// description parser, the planner, the executor, the plug-in loader and the object-file,
/// archive and gzip readers are reached through those doors only (docs/footprint.md,
/// "Selective builds").
pub(crate) const BUILT: bool = cfg!(feature = "offload");

/// Who needs offloaded subgraphs, for [`left_out`].
pub(crate) enum Needs {
    /// A model whose program calls `mote.subgraph`.
    Model,
    /// [`load_plugin`].
    Plugin,
    /// Reading a model file as data (`LoadOptions::code_free`).
    CodeFree,
}

/// What a model or a plug-in that needs offloaded subgraphs gets from a build without the
/// `offload` feature.
pub(crate) fn left_out(who: Needs) -> crate::Error {
    let who = match who {
        Needs::Model => {
            "this model calls offloaded subgraphs (`mote.subgraph`, from partition_for_acl or \
             partition_for_bnns)"
        }
        Needs::Plugin => "a backend plug-in runs offloaded subgraphs",
        Needs::CodeFree => {
            "a model read as data (code-free) runs only offloaded subgraphs and VM builtins"
        }
    };
    crate::Error::Unsupported(format!(
        "{who}, which this build of Mote leaves out (built without its `offload` feature: a \
         selective build for models whose code TVM compiled)"
    ))
}
