//! `bnns` in a build for a non-Apple target: the backend's name and an unavailable backend.
//! The real backend (`mod.rs`) is compiled for Apple targets and for unit tests only; see
//! `backends/mod.rs`.

use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::offload::format::Graph;
use crate::offload::{Backend, Constants, Prepared};

/// The name sessions use for this backend.
pub const NAME: &str = "bnns";

/// Apple's BNNS (Accelerate); never available in this build.
#[derive(Default)]
pub struct BnnsBackend {
    _private: (),
}

impl Backend for BnnsBackend {
    fn name(&self) -> &str {
        NAME
    }

    fn available(&self) -> std::result::Result<(), String> {
        Err(super::BNNS_UNAVAILABLE.into())
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
            backend: NAME.into(),
            message: super::BNNS_UNAVAILABLE.into(),
        })
    }
}
