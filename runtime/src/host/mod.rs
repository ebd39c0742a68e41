//! What compiled kernels see of Mote: the C structures of the kernel ABI, the service functions
//! written into a library's context slots, the thread pool behind parallel launches, and the
//! per-thread error slot kernels raise into (docs/tvm-format.md §6-§8).

pub(crate) mod abi;
pub(crate) mod error_slot;
pub(crate) mod exports;
pub(crate) mod pages;
pub(crate) mod services;
pub(crate) mod threadpool;
