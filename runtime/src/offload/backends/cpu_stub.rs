//! `cpu` in a build without the `cpu-backend` feature: the backend's name, registered as
//! unavailable, so that it refuses every node with the reason and a model with offloaded
//! subgraphs fails with a typed error (`Error::Backend`) when a region is prepared. See
//! `backends/mod.rs` and docs/footprint.md.

use std::convert::Infallible;
use std::sync::Arc;

use crate::error::Result;
use crate::offload::format::Graph;
use crate::offload::registry::Unavailable;
use crate::offload::{Backend, Constants, CPU};
use crate::tensor::Tensor;

const LEFT_OUT: &str = "the built-in cpu backend is not in this build of Mote (built without its `cpu-backend` feature: a selective build for models whose code TVM compiled); offloaded subgraphs need it or another backend that takes every node";

/// What the registry holds under this name.
pub(crate) fn registered() -> Arc<dyn Backend> {
    Arc::new(Unavailable {
        name: CPU,
        why: LEFT_OUT.into(),
    })
}

/// A region rewritten to NHWC; never made in this build (`to_nhwc` is always `None`).
pub(crate) struct Converted {
    pub graph: Arc<Graph>,
    pub transposes: usize,
    never: Infallible,
}

impl Converted {
    pub(crate) fn constant(&self, _: usize, _: Tensor) -> Result<Tensor> {
        match self.never {}
    }
}

/// The NHWC rewrite is the cpu backend's: without it a region stays as written.
pub(crate) fn to_nhwc(_: &Graph, _: Constants<'_>) -> Result<Option<Converted>> {
    Ok(None)
}
