//! The backends Mote carries: `cpu` (every op, everywhere), `bnns` (Apple Accelerate), and
//! plug-ins loaded from shared libraries (the ACL shim is one).

pub mod bnns;
pub mod cpu;
pub mod plugin;
