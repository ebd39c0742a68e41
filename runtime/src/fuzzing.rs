//! Entry points for the fuzz targets (`fuzz/`, docs/fuzzing.md): each parser of untrusted
//! bytes, reachable from outside the crate, and the seeds a zoo file yields for them. Not
//! part of the API: hidden from the docs and free to change.

use crate::error::Result;
use crate::loader::{elf, executable::Executable, library};
use crate::model::{LoadOptions, Model};

/// The ELF pre-check and the dynamic-symbol listing of a library file.
pub fn elf(bytes: &[u8]) -> Result<usize> {
    elf::check(bytes)?;
    Ok(elf::exported_kernels(bytes)?.len())
}

/// A module blob: its length prefix, then the import tree and the modules' payloads.
pub fn module_blob(bytes: &[u8]) -> Result<usize> {
    let payload = library::blob_payload(bytes)?;
    Ok(library::parse_module_tree(payload)?.kinds.len())
}

/// A Relax VM executable (the `relax.VMExecutable` module's payload).
pub fn executable(bytes: &[u8]) -> Result<usize> {
    Ok(Executable::parse(bytes)?.instrs.len())
}

/// A whole model file read code-free: container (ELF, Mach-O, object, `.tar`), blob, import
/// tree, executable, subgraph descriptions, linking.
pub fn model_code_free(bytes: &[u8]) -> Result<Model> {
    Model::load_from_memory_with(bytes, LoadOptions::default().code_free(true))
}

/// What a model file holds for the other targets: `("blob", ...)` (the length-prefixed
/// module blob), `("executable", ...)` for each VM executable, `("subgraph", ...)` for each
/// offloaded region's description. Empty when the file does not load code-free.
pub fn seeds(bytes: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok((_, blob)) = library::Library::open_code_free(bytes, std::path::Path::new("<seed>"))
    else {
        return out;
    };
    if let Ok(tree) = library::blob_payload(&blob).and_then(library::parse_module_tree) {
        for (kind, payload) in tree.kinds.iter().zip(&tree.payloads) {
            if kind == "relax.VMExecutable" {
                out.push(("executable", payload.to_vec()));
            }
        }
    }
    out.push(("blob", blob));
    if let Ok(model) = model_code_free(bytes) {
        for site in model.inner.subgraphs() {
            out.push(("subgraph", site.desc.as_bytes().to_vec()));
        }
    }
    out
}
