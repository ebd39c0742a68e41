//! `bnns` in a build for a non-Apple target: the backend's name, registered as unavailable with
//! the reason. The real backend (`mod.rs`) is compiled for Apple targets and for unit tests
//! only; see `backends/mod.rs`.

use std::sync::Arc;

use crate::offload::registry::Unavailable;
use crate::offload::Backend;

/// The name sessions use for this backend.
pub const NAME: &str = "bnns";

/// What the registry holds under this name.
pub(crate) fn registered() -> Arc<dyn Backend> {
    Arc::new(Unavailable {
        name: NAME,
        why: super::BNNS_UNAVAILABLE.into(),
    })
}
