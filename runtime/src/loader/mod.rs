//! Turning a file into something runnable: the ELF pre-check, the shared library and its blob,
//! and the Relax executable inside it (docs/tvm-format.md §1-§5).

pub(crate) mod elf;
pub(crate) mod executable;
pub(crate) mod library;
