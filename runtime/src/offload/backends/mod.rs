//! The backends Mote carries: `cpu` (every op, everywhere), `bnns` (Apple Accelerate), and
//! plug-ins loaded from shared libraries (the ACL shim is one).

// BNNS exists only on Apple targets: elsewhere a stub that reports itself unavailable keeps
// the backend's name and its reason in plans, without the filter code (about 27 KB of an
// aarch64 library, docs/footprint.md). Unit tests build the real backend everywhere: they run it
// on an emulator of the filter semantics.
#[cfg(any(target_vendor = "apple", test))]
pub mod bnns;
#[cfg(not(any(target_vendor = "apple", test)))]
#[path = "bnns/stub.rs"]
pub mod bnns;

/// Why `bnns` cannot run in a build for a non-Apple target.
const BNNS_UNAVAILABLE: &str =
    "BNNS is part of Apple's Accelerate framework, which exists only on macOS and iOS (this build is not for an Apple target)";
#[cfg(feature = "cpu-backend")]
pub mod cpu;
// A build without the `cpu-backend` feature (a selective build): a `cpu` backend that refuses
// every node, saying why.
#[cfg(not(feature = "cpu-backend"))]
#[path = "cpu_stub.rs"]
pub mod cpu;
pub mod plugin;
