//! Mote's RPC server for TVM 0.27's Python client.
//!
//! This branch only carries the two "other ways of serving" (see `MODES.md`): registering free
//! session slots with a TVM tracker, and serving through a TVM proxy. The wire codec, the
//! session loop and the listen-mode server live in the core modules.

pub mod proxy;
pub mod slots;
pub mod tracker;
