//! The process-wide registry of named functions the VM and kernels can call.
//!
//! Models reach a registered function by name in two ways, bound at different times
//! (docs/tvm-format.md §3.4, §8.4):
//! - a call the model's bytecode makes (Relax `R.call_packed` / `R.call_dps_packed`) is
//!   resolved once, when the model loads, after the model's own kernels and Mote's builtins:
//!   register before loading (a name nothing provides fails the load with
//!   [`Error::MissingFunctions`](crate::Error::MissingFunctions)); a loaded model keeps the
//!   function it resolved, even after it is replaced or removed here;
//! - a kernel's lookup (TIR `T.call_packed`) is resolved at run time, through a handle the
//!   library keeps per name, after the library's own kernels: a new registration takes effect
//!   at the next call, even for models already loaded.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::Result;
use crate::value::{Arg, Value};

/// A function callable from models: takes the call's arguments, returns one value.
///
/// The arguments are borrowed for the call (tensors may be a kernel's own memory); keep
/// anything past it only through an explicit copy ([`Arg::to_value`]).
pub type PackedFunc = Arc<dyn Fn(&[Arg<'_>]) -> Result<Value> + Send + Sync>;

type Registry = HashMap<String, PackedFunc>;

fn registry() -> &'static RwLock<Registry> {
    static REG: OnceLock<RwLock<Registry>> = OnceLock::new();
    REG.get_or_init(Default::default)
}

// The map is only ever swapped entry by entry, so a panic elsewhere while a guard was held
// cannot leave it half-updated: a poisoned lock is safe to keep using.
fn read() -> RwLockReadGuard<'static, Registry> {
    registry().read().unwrap_or_else(|p| p.into_inner())
}
fn write() -> RwLockWriteGuard<'static, Registry> {
    registry().write().unwrap_or_else(|p| p.into_inner())
}

/// Register `f` under `name`, replacing any earlier registration (see the module docs for when
/// models see it).
pub fn register_function(name: &str, f: PackedFunc) {
    let replaced = write().insert(name.to_string(), f);
    // Dropped after the lock is released: the last reference to a closure may run code (a C
    // registration's free callback) that registers or looks up functions itself.
    drop(replaced);
}

/// Remove a registration; `true` if there was one. Models that resolved it at load keep their
/// reference; kernel lookups fail from the next call on.
pub fn unregister_function(name: &str) -> bool {
    let removed = write().remove(name);
    // As in `register_function`, released outside the lock.
    removed.is_some()
}

/// Look a registered function up.
pub fn lookup_function(name: &str) -> Option<PackedFunc> {
    read().get(name).cloned()
}
