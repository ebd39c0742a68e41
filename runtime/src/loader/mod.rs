//! Turning a file into something runnable: the ELF pre-check, the shared library and its blob,
//! the Relax executable inside it (docs/tvm-format.md §1-§5), models linked into the program
//! (docs/system-lib.md), and the same file read as data for the code-free path
//! (docs/code-free.md).

pub(crate) mod elf;
pub(crate) mod executable;
pub(crate) mod file_map;
pub(crate) mod library;
pub(crate) mod object_file;
pub(crate) mod opencl_module;
#[cfg(all(unix, not(target_vendor = "apple")))]
pub(crate) mod symbol_scope;
pub(crate) mod system_lib;
