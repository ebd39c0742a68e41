//! The process-wide list of backends, and how a session's preference order resolves against it.

use std::sync::{Arc, OnceLock, RwLock};

use super::backend::{Backend, Constants, Prepared, CPU};
use super::backends::{bnns, cpu, plugin};
use crate::error::{Error, Result};
use crate::offload::format::Graph;
use std::ops::Range;

fn registry() -> &'static RwLock<Vec<Arc<dyn Backend>>> {
    static REG: OnceLock<RwLock<Vec<Arc<dyn Backend>>>> = OnceLock::new();
    REG.get_or_init(|| {
        let mut v: Vec<Arc<dyn Backend>> = Vec::new();
        // Without the `offload` feature no plug-in is looked for (a door: the plug-in loader
        // is left out of such a build; `super::BUILT`).
        if super::BUILT {
            v.extend(plugin::from_environment());
            if !v.iter().any(|b| b.name() == "acl") {
                v.push(plugin::discover_acl());
            }
        }
        v.push(bnns::registered());
        v.push(cpu::registered());
        RwLock::new(v)
    })
}

/// A backend Mote knows but cannot use on this machine (its library is missing, or it is for
/// another platform); it refuses everything, with the reason.
pub(crate) struct Unavailable {
    pub name: &'static str,
    pub why: String,
}

impl Backend for Unavailable {
    fn name(&self) -> &str {
        self.name
    }

    fn available(&self) -> std::result::Result<(), String> {
        Err(self.why.clone())
    }

    fn supports(&self, _: &Graph, _: usize, _: Constants<'_>) -> std::result::Result<(), String> {
        Err(self.why.clone())
    }

    fn prepare(
        &self,
        _: &Arc<Graph>,
        _: Range<usize>,
        _: Constants<'_>,
    ) -> Result<Box<dyn Prepared>> {
        Err(Error::Backend {
            backend: self.name.into(),
            message: self.why.clone(),
        })
    }
}

/// Why backend `name` cannot run here (`None` when it can).
pub(crate) fn unavailable_reason(name: &str) -> Option<String> {
    let all: Vec<Arc<dyn Backend>> = registry().read().map(|r| r.clone()).unwrap_or_default();
    match all.iter().find(|b| b.name() == name) {
        Some(b) => b.available().err(),
        None => Some("no backend of that name is registered".into()),
    }
}

/// Add a backend ahead of the built-in CPU backend (a later registration of the same name
/// replaces the earlier one).
pub fn register_backend(backend: Arc<dyn Backend>) {
    if let Ok(mut r) = registry().write() {
        r.retain(|b| b.name() != backend.name());
        let pos = r.iter().position(|b| b.name() == CPU).unwrap_or(r.len());
        r.insert(pos, backend);
    }
}

/// Names of the registered backends, in default preference order.
pub fn backend_names() -> Vec<String> {
    registry()
        .read()
        .map(|r| r.iter().map(|b| b.name().to_string()).collect())
        .unwrap_or_default()
}

/// The backends to try, in order, for a session preference list (empty: every available
/// backend, plug-ins first). `cpu` is always last resort. Unknown or unavailable names are
/// logged and skipped: a missing vendor library means fallback, not failure.
pub(crate) fn resolve(preference: &[String]) -> Vec<Arc<dyn Backend>> {
    resolve_with_reasons(preference).0
}

/// Backends skipped when resolving an order: `(name, why)`.
pub(crate) type Skipped = Vec<(String, String)>;

/// [`resolve`], plus the backends it skipped: unknown names, and registered backends that
/// cannot run here.
pub(crate) fn resolve_with_reasons(preference: &[String]) -> (Vec<Arc<dyn Backend>>, Skipped) {
    let all: Vec<Arc<dyn Backend>> = registry().read().map(|r| r.clone()).unwrap_or_default();
    let mut out: Vec<Arc<dyn Backend>> = Vec::new();
    let mut skipped: Skipped = Vec::new();
    let wanted: Vec<String> = if preference.is_empty() {
        all.iter().map(|b| b.name().to_string()).collect()
    } else {
        preference.to_vec()
    };
    for name in &wanted {
        if out.iter().any(|b| b.name() == name) {
            continue;
        }
        match all.iter().find(|b| b.name() == name) {
            Some(b) => match b.available() {
                Ok(()) => out.push(b.clone()),
                // Asked for by name: worth saying. In the default order, a vendor backend for
                // another platform is expected; subgraphs partitioned for it say so instead
                // (`Site::executor`).
                Err(why) => {
                    if preference.is_empty() {
                        log::debug!("backend `{name}` is not available here: {why}");
                    } else {
                        log::info!("backend `{name}` is not available here: {why}");
                    }
                    skipped.push((name.clone(), why));
                }
            },
            None => {
                let known = all.iter().map(|b| b.name()).collect::<Vec<_>>().join(", ");
                log::warn!("backend `{name}` is not registered (known: {known}); skipping it");
                skipped.push((name.clone(), format!("not registered (known: {known})")));
            }
        }
    }
    if !out.iter().any(|b| b.name() == CPU) {
        out.push(cpu::registered());
    }
    (out, skipped)
}
