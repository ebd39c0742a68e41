//! The process-wide registry of named functions the VM and kernels can call.
//!
//! A model's bytecode and kernels call functions by name. Names are resolved against the model's
//! own kernels, then Mote's builtins, then this registry. Register before loading the model.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use crate::error::Result;
use crate::value::{Arg, Value};

/// A function callable from models: takes the call's arguments, returns one value.
///
/// The arguments are borrowed for the call (tensors may be a kernel's own memory); keep
/// anything past it only through an explicit copy ([`Arg::to_value`]).
pub type PackedFunc = Arc<dyn Fn(&[Arg<'_>]) -> Result<Value> + Send + Sync>;

fn registry() -> &'static RwLock<HashMap<String, PackedFunc>> {
    static REG: OnceLock<RwLock<HashMap<String, PackedFunc>>> = OnceLock::new();
    REG.get_or_init(Default::default)
}

/// Register `f` under `name`, replacing any earlier registration. Models loaded afterwards
/// resolve calls to `name` to it.
pub fn register_function(name: &str, f: PackedFunc) {
    if let Ok(mut r) = registry().write() {
        r.insert(name.to_string(), f);
    }
}

/// Remove a registration. Models that already resolved it keep their reference.
pub fn unregister_function(name: &str) -> bool {
    registry()
        .write()
        .map(|mut r| r.remove(name).is_some())
        .unwrap_or(false)
}

/// Look a registered function up.
pub fn lookup_function(name: &str) -> Option<PackedFunc> {
    registry().read().ok()?.get(name).cloned()
}
