//! `cpu` in a build without the `cpu-backend` feature: the backend's name, refusing every node
//! with the reason, so that a model with offloaded subgraphs fails with a typed error
//! (`Error::Backend`) when a region is prepared. See `backends/mod.rs` and docs/footprint.md.

use std::convert::Infallible;
use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::offload::format::Graph;
use crate::offload::{Backend, Constants, Prepared};
use crate::tensor::Tensor;

const LEFT_OUT: &str = "the built-in cpu backend is not in this build of Mote (built without its `cpu-backend` feature: a selective build for models whose code TVM compiled); offloaded subgraphs need it or another backend that takes every node";

/// The built-in CPU backend (`"cpu"`), left out of this build.
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        crate::offload::CPU
    }

    fn available(&self) -> std::result::Result<(), String> {
        Err(LEFT_OUT.into())
    }

    fn supports(&self, _: &Graph, _: usize, _: Constants<'_>) -> std::result::Result<(), String> {
        self.available()
    }

    fn prepare(
        &self,
        _: &Arc<Graph>,
        _: Range<usize>,
        _: Constants<'_>,
    ) -> Result<Box<dyn Prepared>> {
        Err(Error::Backend {
            backend: crate::offload::CPU.into(),
            message: LEFT_OUT.into(),
        })
    }
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
