//! Entry points for the fuzz targets (`fuzz/`, docs/fuzzing.md): each parser of untrusted
//! bytes, reachable from outside the crate, and the seeds a zoo file yields for them. Not
//! part of the API: hidden from the docs and free to change.

use crate::error::Result;

use crate::loader::{elf, executable::Executable, library};
use crate::model::{LoadOptions, Model};
pub use crate::vm::craft;

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

/// The payload of an `opencl` module (docs/tvm-format.md §10.2): function map, launch tags,
/// source chunks.
pub fn opencl_module(bytes: &[u8]) -> Result<usize> {
    Ok(crate::loader::opencl_module::parse(bytes)?.kernels.len())
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

/// The same model file loaded code-free from `path` (where the target wrote it): mapped as
/// data, with the weights only offloaded regions read left in the file.
pub fn model_code_free_file(path: &std::path::Path) -> Result<Model> {
    Model::load_with(path, LoadOptions::default().code_free(true))
}

/// What a model file holds for the other targets: `("blob", ...)` (the length-prefixed
/// module blob), `("executable", ...)` for each VM executable, `("opencl_module", ...)` for
/// each `opencl` module's payload, `("subgraph", ...)` for each
/// offloaded region's description. Empty when the file does not load code-free.
pub fn seeds(bytes: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let Some(blob) = blob_of(bytes) else {
        return out;
    };
    if let Some(tree) = tree_of(&blob) {
        for (kind, payload) in tree.kinds.iter().zip(&tree.payloads) {
            if kind == "relax.VMExecutable" {
                out.push(("executable", payload.to_vec()));
            } else if kind == "opencl" {
                out.push(("opencl_module", payload.to_vec()));
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

/// Where a model file keeps what Mote parses, as byte ranges of the file, for the
/// corrupted-file corpus (docs/fuzzing.md, "Corrupted files"): `("blob", ..)` (the module
/// blob), `("executable", ..)` (the VM executable inside it) and `("description", ..)` for each
/// offloaded region's description. A range is listed only where the file holds those bytes
/// verbatim (not a `.tar` whose blob is C source text). Empty when the file is no model.
pub fn regions(file: &[u8]) -> Vec<(&'static str, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let Some(blob) = blob_of(file) else {
        return out;
    };
    let Some(at) = find(file, &blob) else {
        return out;
    };
    out.push(("blob", at..at + blob.len()));
    let Some(tree) = tree_of(&blob) else {
        return out;
    };
    let Some(&payload) = tree.payloads.first() else {
        return out;
    };
    // The payload is a sub-slice of `blob`, which lies at `at` in the file.
    let start = at + (payload.as_ptr() as usize - blob.as_ptr() as usize);
    out.push(("executable", start..start + payload.len()));
    if let Ok(exe) = Executable::parse(payload) {
        for c in &exe.constants {
            if let crate::value::Value::Str(s) = c {
                if s.starts_with('{') && s.contains("\"nodes\"") {
                    if let Some(d) = find(&file[start..start + payload.len()], s.as_bytes()) {
                        out.push(("description", start + d..start + d + s.len()));
                    }
                }
            }
        }
    }
    out
}

/// The module blob (length field and payload) of a model file read as data.
fn blob_of(file: &[u8]) -> Option<Vec<u8>> {
    let (_, blob) =
        library::Library::open_code_free(file, std::path::Path::new("<file>"), None).ok()?;
    Some(blob)
}

/// The module tree of a blob [`blob_of`] gave.
fn tree_of(blob: &[u8]) -> Option<library::ModuleTree<'_>> {
    library::blob_payload(blob)
        .and_then(library::parse_module_tree)
        .ok()
}

/// The first offset of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The function of a model file a corrupted copy is run with (scripts/test-corrupt.sh): `main`
/// or `forward` when its executable has one, else its first Relax function; `None` when the
/// file holds no executable Mote can read.
pub fn entry_function(file: &[u8]) -> Option<String> {
    let blob = blob_of(file)?;
    let tree = tree_of(&blob)?;
    let exe = Executable::parse(tree.payloads.first()?).ok()?;
    let vm: Vec<&str> = exe
        .funcs
        .iter()
        .filter(|f| f.kind.is_relax())
        .map(|f| f.name.as_str())
        .collect();
    ["main", "forward"]
        .into_iter()
        .find(|n| vm.contains(n))
        .or(vm.first().copied())
        .map(str::to_string)
}

/// The tar inside a gzip-compressed `.tar` export, for a `model_code_free` seed of its own:
/// mutations of the compressed file mostly break the gzip stream, and decompressing it under
/// coverage instrumentation dominates the target's time (docs/fuzzing.md).
pub fn gunzipped(file: &[u8]) -> Option<Vec<u8>> {
    file.starts_with(&[0x1f, 0x8b])
        .then(|| crate::loader::object_file::gunzip(file, u64::MAX).ok())
        .flatten()
}

/// Run a subgraph description on the `cpu` backend the way a session runs an offloaded
/// region: prepared and run with a pool of `threads` threads installed (1 to 4), so its
/// kernels split their parallel loops as they do in a session of that many threads
/// (docs/fuzzing.md). The pools live for the process: a fuzz target runs millions of inputs,
/// and a pool per input would spend its time starting threads.
pub fn run_subgraph(
    description: &str,
    constants: Vec<crate::Tensor>,
    inputs: &[crate::Tensor],
    threads: usize,
) -> Result<Vec<crate::Tensor>> {
    use crate::host::threadpool::ThreadPool;
    use std::sync::OnceLock;
    static POOLS: [OnceLock<ThreadPool>; 4] = [const { OnceLock::new() }; 4];
    let k = threads.clamp(1, POOLS.len());
    let pool = POOLS[k - 1].get_or_init(|| ThreadPool::new(k));
    pool.install(|| {
        let runner = crate::offload::SubgraphRunner::new(description, constants)?;
        runner.run(&[crate::offload::CPU.to_string()], inputs)
    })
}
