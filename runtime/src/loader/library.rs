//! Loading a model library made by `export_library` (docs/tvm-format.md §1-§2): `dlopen` with
//! `RTLD_LOCAL`, the context slots, the `__tvm_ffi__library_bin` module blob and its import tree,
//! and for a kernel-only library (no blob) the kernels its dynamic symbol table lists (§1.4).

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::error::{Error, Result};
use crate::host::abi::SafeCallFn;
use crate::host::error_slot;
use crate::host::services::{self, EnvFunction};
use crate::loader::executable::Reader;
use crate::loader::file_map::FileMap;
use crate::loader::object_file::Image;

/// The module blob: a length-prefixed payload (docs/tvm-format.md §1.3, §2).
const BLOB_SYMBOL: &str = "__tvm_ffi__library_bin";
/// The pointer slot Mote fills with its `Library` for by-name lookups (docs/tvm-format.md §1.3,
/// §8.4).
const CTX_SYMBOL: &str = "__tvm_ffi__library_ctx";
/// Prefix of every kernel symbol, `__tvm_ffi_<name>` (docs/tvm-format.md §1.3).
const KERNEL_PREFIX: &str = "__tvm_ffi_";
/// The error function libraries import from the process (docs/tvm-format.md §1.2, §7.4).
const ERROR_SYMBOL: &str = "TVMFFIErrorSetRaisedFromCStrParts";
/// Bytes of the `u64` length before the blob's payload (docs/tvm-format.md §2.1).
const BLOB_LENGTH_BYTES: usize = 8;
/// Mach-O magics, as the first four bytes read little-endian: 64-bit, 32-bit, and a universal
/// (fat) file; a universal file read big-endian is `FAT_MAGIC` too (docs/tvm-format.md §1.1).
const MACHO_MAGIC_64: u32 = 0xfeed_facf;
const MACHO_MAGIC_32: u32 = 0xfeed_face;
const FAT_MAGIC: u32 = 0xcafe_babe;

/// A loaded model library. One per mapped file: loading the same file twice shares it, because
/// the system loader maps it once and its context slots are global to the mapping.
pub(crate) struct Library {
    /// Where the library's symbols and blob come from.
    backing: Backing,
    path: PathBuf,
    /// Handles given to kernels by `env_lookup`, boxed so their addresses stay put. Freed in
    /// `Drop` once the library is unmapped, leaked if it stays mapped (see `env_function`).
    env_cache: Mutex<HashMap<String, Box<EnvFunction>>>,
    /// The kernels the file's dynamic symbol table exports, read before `dlopen`. Only a
    /// kernel-only library (no module blob) needs them, so a table Mote cannot read fails
    /// only such a library.
    exported: KernelListing,
    /// The `opencl` module the library's host code launches kernels of, set by the model at
    /// load (docs/tvm-format.md §10): its kernels and `__tvm_set_device` resolve through
    /// `env_function`.
    opencl: OnceLock<Arc<crate::loader::opencl_module::OpenClModule>>,
    /// That module's programs, built once per device.
    opencl_programs: crate::device::opencl::exec::ProgramCache,
}

/// How a library's code and data reach the process. Every way of getting a model in
/// (a mapped file, objects linked into the program, a file or bytes read as data) is one
/// variant; `symbol` and `module_blob` are the only places that look inside.
enum Backing {
    /// A file opened by the system loader.
    Mapped {
        /// Closed by hand in `Drop`, before the function handles kernels may have cached.
        lib: std::mem::ManuallyDrop<libloading::os::unix::Library>,
        /// The memory file a library loaded from bytes lives in (see `open_memory`).
        _memfd: Option<std::os::fd::OwnedFd>,
        /// Where the blob symbol is and how many mapped bytes follow it, found on the first
        /// `module_blob` (a symbol lookup and a walk of the loaded segments): a model's weights
        /// left in the file are read through it each time a backend prepares one.
        blob: OnceLock<Option<(usize, usize)>>,
    },
    /// Objects linked into the program, whose symbols were registered under `prefix`
    /// (docs/system-lib.md). Never unloaded.
    SystemLib { prefix: String },
    /// A file read as data, never mapped as code (docs/code-free.md). No symbols, no context
    /// slots, no kernels.
    CodeFree {
        /// The kernels the file defines, which the program must not call.
        kernels: Vec<String>,
        /// The file mapped read-only and where the blob lies in it, when the file holds the
        /// blob verbatim (`open_code_free_file`): the model's weights that only offloaded
        /// regions read stay there. `None` when the blob was handed to the loader instead
        /// (`open_code_free`), which copies what it needs and drops it.
        file: Option<BlobInFile>,
    },
}

/// A file mapped as data and its module blob's place in it (length field and payload).
struct BlobInFile {
    map: FileMap,
    blob: std::ops::Range<usize>,
}

/// What the file says about the kernels it exports (docs/tvm-format.md §1.4).
enum KernelListing {
    Listed(Vec<String>),
    /// The ELF dynamic symbol table is malformed: why.
    Malformed(String),
    /// A Mach-O file: Mote does not read its symbol table.
    Unavailable,
}

// SAFETY: a dlopen handle may be used from any thread; the cache is behind a mutex.
unsafe impl Send for Library {}
// SAFETY: as above.
unsafe impl Sync for Library {}

/// The decoded `__tvm_ffi__library_bin`. The payloads are borrowed from the blob, which the
/// library holds (mapped or read): a model's constants are copied once, by the modules that
/// decode them, not a second time here.
pub(crate) struct ModuleTree<'a> {
    /// Module kinds in index order (`"_lib"` for the library itself).
    pub kinds: Vec<String>,
    /// Payloads, empty for `"_lib"`.
    pub payloads: Vec<&'a [u8]>,
    /// `imports[i]`: module indices module `i` imports, in order.
    pub imports: Vec<Vec<usize>>,
}

fn live_libraries() -> &'static Mutex<HashMap<usize, Weak<Library>>> {
    static LIVE: OnceLock<Mutex<HashMap<usize, Weak<Library>>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

impl Drop for Library {
    fn drop(&mut self) {
        let lib = match &mut self.backing {
            Backing::Mapped { lib, .. } => lib,
            // A system library is kept for the life of the process (`system_lib::library`).
            Backing::SystemLib { .. } | Backing::CodeFree { .. } => return,
        };
        // SAFETY: `lib` is not used again; this is the only place it is taken.
        let lib = unsafe { std::mem::ManuallyDrop::take(lib) };
        // dlclose under the registry's lock, as `open_checked` dlopens under it: a later load
        // that gets the same addresses then happens after everything this library's users did
        // (its context slots are written again by plain stores, `fill_context_slots`).
        let _registry = live_libraries().lock().unwrap_or_else(|p| p.into_inner());
        let closed = lib.close().is_ok();
        let cache = std::mem::take(self.env_cache.get_mut().unwrap_or_else(|p| p.into_inner()));
        if cache.is_empty() {
            return;
        }
        // The handles may only go once no code of the library can run any more: it is
        // unmapped unless another dlopen of the same file (outside Mote) keeps it alive.
        let still_mapped = !closed
            || CString::new(self.path.as_os_str().as_encoded_bytes()).map_or(true, |p| {
                // SAFETY: RTLD_NOLOAD only queries; a handle it returns is released at once.
                unsafe {
                    let h = libc::dlopen(p.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
                    if !h.is_null() {
                        libc::dlclose(h);
                    }
                    !h.is_null()
                }
            });
        if still_mapped {
            // Kernels that stay mapped may still call through their cached handles.
            cache.into_values().for_each(|f| {
                Box::leak(f);
            });
        }
    }
}

impl Library {
    pub fn open(path: &Path) -> Result<Arc<Library>> {
        ensure_error_symbol_visible()?;
        // Read piece by piece: the checks need the headers and the dynamic symbol table, and a
        // copy of the whole file would add its size to the peak memory of every load.
        let image = std::fs::File::open(path)
            .and_then(crate::loader::elf::file_image)
            .map_err(|e| Error::io(path, e))?;
        // `dlopen` searches the library path for a name without a slash; a model is always the
        // file the caller named (`mote run model.so` in the model's folder).
        let path = std::path::absolute(path).map_err(|e| Error::io(path, e))?;
        Self::open_checked(&path, &image, None)
    }

    /// Read a library as data, without mapping it as code (docs/code-free.md): an ELF or
    /// Mach-O library or object, or the tar `export_library` writes. `label` names it in
    /// messages. Returns the module blob (length field and payload) beside the library, which
    /// does not keep it: the model copies what it needs while loading, then holds no copy of
    /// the file. `budget` bounds what decoding may allocate (`LoadOptions::memory_budget`;
    /// `None`: the default for the file's size).
    pub fn open_code_free(
        bytes: &[u8],
        label: &Path,
        budget: Option<u64>,
    ) -> Result<(Arc<Library>, Vec<u8>)> {
        let image = read_image(bytes, label, budget)?;
        let blob = image.blob.into_owned();
        Ok((Self::code_free(image.kernels, None, label), blob))
    }

    /// [`Library::open_code_free`] for a file, mapped read-only as data (docs/code-free.md
    /// §4). When the file holds the blob verbatim (an ELF or Mach-O file, an uncompressed tar)
    /// the library keeps the mapping and the blob is read from it (`module_tree`), so no copy
    /// of the file is made and the weights only offloaded regions read can stay in it; the
    /// second value is then `None`. Otherwise (a compressed tar, TVM's C array, a file that
    /// cannot be mapped) it is the decoded blob, as [`Library::open_code_free`] returns it.
    pub fn open_code_free_file(
        path: &Path,
        budget: Option<u64>,
    ) -> Result<(Arc<Library>, Option<Vec<u8>>)> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let Some(map) = FileMap::new(&file).map_err(|e| Error::io(path, e))? else {
            let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
            let (library, blob) = Self::open_code_free(&bytes, path, budget)?;
            return Ok((library, Some(blob)));
        };
        drop(file);
        let image = read_image(map.bytes(), path, budget)?;
        let base = map.bytes().as_ptr() as usize;
        let in_file = match &image.blob {
            std::borrow::Cow::Borrowed(b) => (b.as_ptr() as usize)
                .checked_sub(base)
                .map(|at| at..at + b.len())
                .filter(|r| r.end <= map.bytes().len()),
            std::borrow::Cow::Owned(_) => None,
        };
        match in_file {
            Some(blob) => {
                let kernels = image.kernels;
                let file = BlobInFile { map, blob };
                Ok((Self::code_free(kernels, Some(file), path), None))
            }
            None => {
                let blob = image.blob.into_owned();
                Ok((Self::code_free(image.kernels, None, path), Some(blob)))
            }
        }
    }

    fn code_free(kernels: Vec<String>, file: Option<BlobInFile>, label: &Path) -> Arc<Library> {
        Arc::new(Library {
            exported: KernelListing::Listed(kernels.clone()),
            backing: Backing::CodeFree { kernels, file },
            path: label.into(),
            env_cache: Mutex::new(HashMap::new()),
            opencl: OnceLock::new(),
            opencl_programs: Default::default(),
        })
    }

    /// Whether the system loader opened the library (`dlopen`): its imports resolve against
    /// the process's global scope.
    pub(crate) fn is_dynamically_loaded(&self) -> bool {
        matches!(self.backing, Backing::Mapped { .. })
    }

    /// For a library read as data, the kernels its file defines; `None` for a mapped one.
    pub fn code_free_kernels(&self) -> Option<&[String]> {
        match &self.backing {
            Backing::CodeFree { kernels, .. } => Some(kernels),
            Backing::Mapped { .. } | Backing::SystemLib { .. } => None,
        }
    }

    /// Load from bytes through an anonymous memory file. The descriptor stays open as long as
    /// the library: its `/proc/self/fd/N` name is what the system loader knows the library by,
    /// and a reused number must never alias a live library.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn open_memory(bytes: &[u8]) -> Result<Arc<Library>> {
        use std::io::Write;
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        ensure_error_symbol_visible()?;
        let label = Path::new("<memory>");
        // SAFETY: the name is a NUL-terminated literal; the flags are valid.
        let fd = unsafe { libc::memfd_create(c"mote-model".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::io(label, std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut file = std::fs::File::from(fd.try_clone().map_err(|e| Error::io(label, e))?);
        file.write_all(bytes).map_err(|e| Error::io(label, e))?;
        drop(file);
        let path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        Self::open_checked(&path, bytes, Some(fd))
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub fn open_memory(_bytes: &[u8]) -> Result<Arc<Library>> {
        Err(Error::Unsupported(
            "loading a model from memory needs memfd (Linux, Android); write it to a file and load that".into(),
        ))
    }

    fn open_checked<'a, R: object::ReadRef<'a>>(
        path: &Path,
        image: R,
        memfd: Option<std::os::fd::OwnedFd>,
    ) -> Result<Arc<Library>> {
        let with_path = |e: Error| match e {
            Error::Load { message, .. } => Error::Load {
                path: path.into(),
                message,
            },
            e => e,
        };
        let magic = image
            .read_bytes_at(0, 4)
            .ok()
            .and_then(|m| <[u8; 4]>::try_from(m).ok());
        let exported = match magic {
            Some(m) if &m == b"\x7fELF" => {
                crate::loader::elf::check(image).map_err(with_path)?;
                match crate::loader::elf::exported_kernels(image) {
                    Ok(names) => KernelListing::Listed(names),
                    Err(Error::Format(m)) => KernelListing::Malformed(m),
                    Err(e) => KernelListing::Malformed(e.to_string()),
                }
            }
            Some(m) if is_macho(&m) => KernelListing::Unavailable,
            _ => {
                return Err(Error::Load {
                    path: path.into(),
                    message: "not a shared library (bad magic); export the model with export_library(\"model.so\")".into(),
                })
            }
        };
        let flags = libc::RTLD_LAZY | libc::RTLD_LOCAL;
        // The registry's lock is held from dlopen to the registration, and `Drop` dlcloses under
        // it: a library mapped where a closed one was is filled in only after the closed one's
        // last use (no data race on the reused addresses, which ThreadSanitizer checks).
        let mut live = live_libraries().lock().map_err(|_| Error::Load {
            path: path.into(),
            message: "library registry poisoned".into(),
        })?;
        // SAFETY: loading a model library runs its initializers: model files are code, and the
        // caller chose to trust this one (documented on `Model::load`).
        let lib =
            unsafe { libloading::os::unix::Library::open(Some(path), flags) }.map_err(|e| {
                Error::Load {
                    path: path.into(),
                    message: e.to_string(),
                }
            })?;
        let handle = lib.into_raw();
        // SAFETY: `handle` was just returned by dlopen.
        let lib = unsafe { libloading::os::unix::Library::from_raw(handle) };
        if let Some(existing) = live.get(&(handle as usize)).and_then(Weak::upgrade) {
            // Same mapping: reuse it (dropping `lib` only decrements dlopen's count).
            return Ok(existing);
        }
        let library = Arc::new(Library {
            backing: Backing::Mapped {
                lib: std::mem::ManuallyDrop::new(lib),
                _memfd: memfd,
                blob: OnceLock::new(),
            },
            path: path.into(),
            env_cache: Mutex::new(HashMap::new()),
            opencl: OnceLock::new(),
            opencl_programs: Default::default(),
            exported,
        });
        library.fill_context_slots();
        live.retain(|_, w| w.strong_count() > 0);
        live.insert(handle as usize, Arc::downgrade(&library));
        Ok(library)
    }

    /// The library of the objects linked into the program under `prefix`, its context slots
    /// filled (docs/system-lib.md §3). Only `system_lib::library` calls this, once per prefix.
    pub(crate) fn open_system_lib(prefix: &str, kernels: Vec<String>) -> Arc<Library> {
        let library = Arc::new(Library {
            backing: Backing::SystemLib {
                prefix: prefix.to_string(),
            },
            path: crate::loader::system_lib::label(prefix),
            env_cache: Mutex::new(HashMap::new()),
            opencl: OnceLock::new(),
            opencl_programs: Default::default(),
            exported: KernelListing::Listed(kernels),
        });
        library.fill_context_slots();
        library
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The address of the library's symbol `name`.
    fn symbol(&self, name: &str) -> Option<*mut c_void> {
        match &self.backing {
            Backing::Mapped { lib, .. } => {
                let c = CString::new(name).ok()?;
                // SAFETY: we only take the symbol's address, typed as a raw pointer.
                let sym = unsafe { lib.get::<*mut c_void>(c.as_bytes_with_nul()) }.ok()?;
                let p = sym.into_raw();
                (!p.is_null()).then_some(p)
            }
            Backing::SystemLib { prefix } => crate::loader::system_lib::lookup(prefix, name),
            Backing::CodeFree { .. } => None,
        }
    }

    /// Write Mote's service functions into every context slot the library has (the eight
    /// slots of docs/tvm-format.md §8.1).
    fn fill_context_slots(self: &Arc<Self>) {
        let slots: [(&str, usize); 8] = [
            (
                "__TVMBackendAllocWorkspace",
                services::alloc_workspace as *const () as usize,
            ),
            (
                "__TVMBackendFreeWorkspace",
                services::free_workspace as *const () as usize,
            ),
            (
                "__TVMBackendParallelLaunch",
                crate::host::threadpool::parallel_launch as *const () as usize,
            ),
            (
                "__TVMBackendParallelBarrier",
                crate::host::threadpool::parallel_barrier as *const () as usize,
            ),
            (
                "__TVMFFIFunctionCall",
                services::function_call as *const () as usize,
            ),
            (
                "__TVMFFIEnvModLookupFromImports",
                services::env_lookup as *const () as usize,
            ),
            (
                "__TVMFFIHandleInitOnce",
                services::handle_init_once as *const () as usize,
            ),
            (
                "__TVMFFIErrorSetRaisedFromCStr",
                error_slot::error_set_raised_from_cstr as *const () as usize,
            ),
        ];
        for (name, f) in slots {
            if let Some(slot) = self.symbol(name) {
                // SAFETY: context slots are 8-byte pointer variables the library reads through
                // its GOT; writing before any kernel runs is what TVM's loader does.
                unsafe { slot.cast::<usize>().write_unaligned(f) };
            }
        }
        if let Some(slot) = self.symbol(CTX_SYMBOL) {
            // SAFETY: as above; the pointer stays valid while this Library lives, and the slot
            // belongs to this mapping, which lives exactly as long.
            unsafe {
                slot.cast::<usize>()
                    .write_unaligned(Arc::as_ptr(self) as usize)
            };
        }
    }

    /// The kernel `__tvm_ffi_<name>`, if the library exports it.
    pub fn kernel(&self, name: &str) -> Option<SafeCallFn> {
        let p = self.symbol(&format!("{KERNEL_PREFIX}{name}"))?;
        // SAFETY: `__tvm_ffi_` functions have the safe-call signature (docs/tvm-format.md §7.1).
        Some(unsafe { std::mem::transmute::<*mut c_void, SafeCallFn>(p) })
    }

    /// The kernels the library exports, `<name>` for each `__tvm_ffi_<name>` (sorted): read
    /// from the ELF dynamic symbol table before the library was opened. A malformed table is
    /// [`Error::Format`]; a Mach-O file, whose table Mote does not read, is
    /// [`Error::Unsupported`] (docs/tvm-format.md §1.4).
    pub fn exported_kernels(&self) -> Result<&[String]> {
        match &self.exported {
            KernelListing::Listed(names) => Ok(names),
            KernelListing::Malformed(m) => Err(Error::Format(m.clone())),
            KernelListing::Unavailable => Err(Error::Unsupported(format!(
                "{} is a Mach-O library without a module blob (a kernel-only library): Mote lists \
                 kernels from ELF dynamic symbol tables only; export a Relax module instead",
                self.path.display()
            ))),
        }
    }

    /// A handle for `name` as kernels look it up. Generated code caches handles in the
    /// library's static data, so a handle must live as long as the mapping, not as long as a
    /// borrow of `self`: it is a raw pointer, valid until this object unmaps the library (when
    /// the box is freed), and forever if someone else keeps the library mapped (the box is
    /// leaked then).
    pub fn env_function(&self, name: &str) -> Option<NonNull<EnvFunction>> {
        let mut cache = self.env_cache.lock().ok()?;
        if let Some(f) = cache.get(name) {
            return Some(NonNull::from(&**f));
        }
        let opencl = self.opencl.get();
        let f = if let Some(k) = self.kernel(name) {
            EnvFunction::Kernel(k)
        } else if let Some(index) =
            opencl.and_then(|m| m.kernels.iter().position(|k| k.name == name))
        {
            EnvFunction::OpenClKernel {
                module: opencl.expect("checked above").clone(),
                index,
            }
        } else if opencl.is_some() && name == "__tvm_set_device" {
            EnvFunction::SetDevice
        } else if let Some(b) = crate::vm::builtins::Builtin::from_name(name) {
            // Called by the native code of compiled Relax functions (docs/tvm-format.md §3.6).
            EnvFunction::VmBuiltin(b)
        } else {
            crate::registry::lookup_function(name)?;
            EnvFunction::Registered {
                name: name.to_string(),
            }
        };
        let boxed = Box::new(f);
        let handle = NonNull::from(&*boxed);
        cache.insert(name.to_string(), boxed);
        Some(handle)
    }

    /// Attach the `opencl` module the host code launches (once, at load, before any call).
    pub(crate) fn set_opencl(&self, module: Arc<crate::loader::opencl_module::OpenClModule>) {
        let _ = self.opencl.set(module);
    }

    pub(crate) fn opencl(&self) -> Option<&Arc<crate::loader::opencl_module::OpenClModule>> {
        self.opencl.get()
    }

    pub(crate) fn opencl_programs(&self) -> &crate::device::opencl::exec::ProgramCache {
        &self.opencl_programs
    }

    /// Decode `__tvm_ffi__library_bin`; `None` for a library without one (a bare TIR export)
    /// and for one read as data whose blob was returned by `open_code_free(_file)`.
    pub(crate) fn module_tree(&self) -> Result<Option<ModuleTree<'_>>> {
        self.module_blob()?.map(parse_module_tree).transpose()
    }

    /// The payload of `__tvm_ffi__library_bin` (after its length), bounds-checked against what
    /// backs it; `None` when the library has no blob.
    fn module_blob(&self) -> Result<Option<&[u8]>> {
        match &self.backing {
            Backing::Mapped { blob, .. } => {
                let found = match blob.get() {
                    Some(&found) => found,
                    None => {
                        let found = match self.symbol(BLOB_SYMBOL) {
                            None => None,
                            Some(p) => {
                                let p = p.cast::<u8>().cast_const();
                                let bound = mapped_bytes_after(p).ok_or_else(|| {
                                    Error::Format(format!(
                                        "{BLOB_SYMBOL} does not point into the library's mapped data"
                                    ))
                                })?;
                                Some((p as usize, bound))
                            }
                        };
                        *blob.get_or_init(|| found)
                    }
                };
                let Some((p, bound)) = found else {
                    return Ok(None);
                };
                // SAFETY: `bound` bytes from `p` lie inside a loaded segment of this library
                // (`mapped_bytes_after`), which stays mapped while `self` lives, and the blob is
                // read-only data.
                let mapped = unsafe { std::slice::from_raw_parts(p as *const u8, bound) };
                blob_payload(mapped).map(Some)
            }
            Backing::SystemLib { .. } => {
                let Some(p) = self.symbol(BLOB_SYMBOL) else {
                    return Ok(None);
                };
                // SAFETY: the address was registered for the blob by the objects linked into
                // the program, which stay for its whole life.
                unsafe { crate::loader::system_lib::linked_blob(p.cast::<u8>()) }.map(Some)
            }
            Backing::CodeFree {
                file: Some(BlobInFile { map, blob }),
                ..
            } => {
                let bytes = map.bytes().get(blob.clone()).ok_or_else(|| {
                    Error::Format(format!("{BLOB_SYMBOL} lies outside the mapped file"))
                })?;
                blob_payload(bytes).map(Some)
            }
            // Handed to the loader by `open_code_free(_file)`.
            Backing::CodeFree { file: None, .. } => Ok(None),
        }
    }
}

/// What `bytes`, a library read as data, holds (`object_file::read`), its errors naming `label`.
fn read_image<'a>(bytes: &'a [u8], label: &Path, budget: Option<u64>) -> Result<Image<'a>> {
    if !crate::offload::BUILT {
        // A door of the `offload` feature: the object-file, archive and gzip readers behind it
        // serve models whose every operator is offloaded, and are left out with it.
        return Err(crate::offload::left_out(crate::offload::Needs::CodeFree));
    }
    let budget = budget.unwrap_or_else(|| crate::model::default_load_budget(bytes.len()));
    let image = crate::loader::object_file::read(bytes, budget).map_err(|e| match e {
        Error::Format(m) => Error::Format(format!("{}: {m}", label.display())),
        Error::Unsupported(m) => Error::Unsupported(format!("{}: {m}", label.display())),
        e => e,
    })?;
    if !image.prefix.is_empty() {
        log::debug!(
            "{}: module blob of system-lib prefix `{}`",
            label.display(),
            image.prefix
        );
    }
    log::debug!(
        "{}: read as data ({}), {} blob bytes{}, {} kernel symbols",
        label.display(),
        image.container,
        image.blob.len(),
        match image.blob {
            std::borrow::Cow::Borrowed(_) => " in the file",
            std::borrow::Cow::Owned(_) => " decoded",
        },
        image.kernels.len()
    );
    Ok(image)
}

/// The payload of a length-prefixed blob whose bytes (and maybe more after them) are `bytes`
/// (docs/tvm-format.md §2.1): a length claiming more than is there is an error.
pub(crate) fn blob_payload(bytes: &[u8]) -> Result<&[u8]> {
    let Some((len, rest)) = bytes.split_first_chunk::<BLOB_LENGTH_BYTES>() else {
        return Err(Error::Format(format!("{BLOB_SYMBOL} is truncated")));
    };
    let nbytes = u64::from_le_bytes(*len);
    match usize::try_from(nbytes).ok().and_then(|n| rest.get(..n)) {
        Some(payload) => Ok(payload),
        None => Err(Error::Format(format!(
            "{BLOB_SYMBOL} claims {nbytes} bytes but only {} are there",
            rest.len()
        ))),
    }
}

fn is_macho(m: &[u8; 4]) -> bool {
    matches!(
        u32::from_le_bytes(*m),
        MACHO_MAGIC_64 | MACHO_MAGIC_32 | FAT_MAGIC
    ) || u32::from_be_bytes(*m) == FAT_MAGIC
}

pub(crate) fn parse_module_tree(blob: &[u8]) -> Result<ModuleTree<'_>> {
    let mut r = Reader::new(blob, "module blob");
    let indptr = r.i64_vec()?;
    let children = r.i64_vec()?;
    let n = indptr
        .len()
        .checked_sub(1)
        .ok_or_else(|| r.err("empty import tree"))?;
    let mut imports = Vec::with_capacity(n);
    for i in 0..n {
        let (a, b) = (indptr[i], indptr[i + 1]);
        if a < 0 || b < a || b as usize > children.len() {
            return Err(r.err(format!("bad import tree row {i}: {a}..{b}")));
        }
        let row = children[a as usize..b as usize]
            .iter()
            .map(|&c| usize::try_from(c).ok().filter(|&c| c < n))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| r.err(format!("module {i} imports a module out of range")))?;
        imports.push(row);
    }
    let mut kinds = Vec::with_capacity(n);
    let mut payloads = Vec::with_capacity(n);
    for _ in 0..n {
        let kind = r.str()?;
        let payload = if kind == "_lib" {
            &[][..]
        } else {
            let len = r.count(1)?;
            r.bytes(len)?
        };
        kinds.push(kind);
        payloads.push(payload);
    }
    if r.remaining() != 0 {
        return Err(r.err(format!("{} unexpected trailing bytes", r.remaining())));
    }
    Ok(ModuleTree {
        kinds,
        payloads,
        imports,
    })
}

/// How many bytes starting at `p` lie inside the loaded segment that contains it. A corrupted
/// length field must not make Mote read past the mapping.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn mapped_bytes_after(p: *const u8) -> Option<usize> {
    struct Search {
        addr: usize,
        found: Option<usize>,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> libc::c_int {
        // A panic must not unwind into the C library's frame: stop the walk instead.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: dl_iterate_phdr passes valid info for each loaded object, and `data` is our
            // `Search`.
            let (info, s) = unsafe { (&*info, &mut *(data as *mut Search)) };
            for i in 0..info.dlpi_phnum as usize {
                // SAFETY: dlpi_phdr has dlpi_phnum entries.
                let ph = unsafe { &*info.dlpi_phdr.add(i) };
                if ph.p_type != libc::PT_LOAD {
                    continue;
                }
                let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
                let end = start.wrapping_add(ph.p_memsz as usize);
                if (start..end).contains(&s.addr) {
                    s.found = Some(end - s.addr);
                    return 1;
                }
            }
            0
        }))
        .unwrap_or(1)
    }
    let mut s = Search {
        addr: p as usize,
        found: None,
    };
    // SAFETY: `visit` matches the callback type and only touches `s` for the call's duration.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut s as *mut Search as *mut c_void) };
    s.found
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn mapped_bytes_after(p: *const u8) -> Option<usize> {
    // Without dl_iterate_phdr, trust the symbol's own length (Apple platforms link models
    // statically): the bound is the length field plus what it claims, when that is a size a
    // slice can have.
    let mut len = [0u8; BLOB_LENGTH_BYTES];
    // SAFETY: the blob symbol starts with its 8-byte length (docs/tvm-format.md §2.1); it may
    // be unaligned.
    unsafe { std::ptr::copy_nonoverlapping(p, len.as_mut_ptr(), BLOB_LENGTH_BYTES) };
    let claimed = usize::try_from(u64::from_le_bytes(len)).ok()?;
    Some(
        claimed
            .checked_add(BLOB_LENGTH_BYTES)
            .filter(|&n| n <= isize::MAX as usize)
            .unwrap_or(BLOB_LENGTH_BYTES),
    )
}

/// Make sure model libraries can resolve `TVMFFIErrorSetRaisedFromCStrParts` to Mote's.
///
/// When Mote is inside a shared library opened with `RTLD_LOCAL` (a JNI library, `libmote.so`
/// loaded by `dlopen`), the symbol is promoted to the global scope by re-opening that library
/// with `RTLD_NOLOAD | RTLD_GLOBAL`. An executable must export it itself
/// (`-Wl,--export-dynamic-symbol=TVMFFIErrorSetRaisedFromCStrParts`, done by the `mote` CLI and
/// the test crates).
fn ensure_error_symbol_visible() -> Result<()> {
    static CHECK: OnceLock<Result<(), String>> = OnceLock::new();
    let ours = error_slot::TVMFFIErrorSetRaisedFromCStrParts as *const c_void;
    ensure_symbol_visible(&CHECK, ERROR_SYMBOL, ours)
}

/// The same for the functions a library built with `exec_mode="compiled"` imports
/// (docs/tvm-format.md §3.6), checked when such a library is linked, before any of its code
/// runs: the library was opened with lazy binding, so a missing one would end the process at
/// its first call instead.
pub(crate) fn ensure_compiled_mode_symbols_visible() -> Result<()> {
    static CHECKS: [OnceLock<Result<(), String>>; 3] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let ours = crate::vm::compiled::imported();
    for (check, (name, f)) in CHECKS.iter().zip(ours) {
        ensure_symbol_visible(check, name, f)?;
    }
    Ok(())
}

fn ensure_symbol_visible(
    cache: &OnceLock<Result<(), String>>,
    symbol: &str,
    ours: *const c_void,
) -> Result<()> {
    cache
        .get_or_init(|| {
            let name = CString::new(symbol).map_err(|e| e.to_string())?;
            // bionic resolves a dlopen'ed model against its namespace's global group, which
            // neither dlopen(NULL) nor RTLD_GLOBAL reflects (docs/android.md §4).
            #[cfg(target_os = "android")]
            let checked = crate::loader::symbol_scope::check_bionic(ours, &name);
            #[cfg(not(target_os = "android"))]
            let checked = check_global_scope(ours, &name);
            checked
        })
        .clone()
        .map_err(|message| Error::Load {
            path: PathBuf::new(),
            message,
        })
}

/// glibc's and Apple's rule: model libraries see the global scope, which is what a lookup
/// through the main program's handle searches.
#[cfg(not(target_os = "android"))]
fn check_global_scope(ours: *const c_void, name: &std::ffi::CStr) -> Result<(), String> {
    let symbol = name.to_string_lossy();
    // (`RTLD_DEFAULT` would not do: called from inside a library loaded with RTLD_LOCAL, it
    // also searches that library itself.)
    let global = || {
        // SAFETY: dlopen(NULL) returns the main program's handle; dlsym gets a valid C
        // string; the handle is closed again (it only drops a reference count).
        unsafe {
            let main = libc::dlopen(std::ptr::null(), libc::RTLD_LAZY);
            if main.is_null() {
                return std::ptr::null_mut();
            }
            let p = libc::dlsym(main, name.as_ptr());
            libc::dlclose(main);
            p
        }
    };
    let found = global();
    if !found.is_null() {
        if found.cast_const() != ours {
            log::warn!("{symbol} resolves to another runtime's copy; model libraries will call it");
        }
        return Ok(());
    }
    // SAFETY: Dl_info is plain C data (pointers and integers); all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads loader data for an address in our own image and
    // writes `info`.
    if unsafe { libc::dladdr(ours, &mut info) } != 0 && !info.dli_fname.is_null() {
        // SAFETY: dli_fname is the path of the object containing Mote; NOLOAD only
        // changes the flags of an already-loaded object.
        let h = unsafe {
            libc::dlopen(
                info.dli_fname,
                libc::RTLD_NOLOAD | libc::RTLD_GLOBAL | libc::RTLD_LAZY,
            )
        };
        if !h.is_null() && !global().is_null() {
            return Ok(());
        }
    }
    Err(format!(
        "{symbol} is not visible to model libraries: link your executable with \
         -Wl,--export-dynamic-symbol={symbol} (or -rdynamic), or use Mote as a shared library"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(indptr: &[i64], children: &[i64], mods: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = Vec::new();
        let vec = |b: &mut Vec<u8>, v: &[i64]| {
            b.extend_from_slice(&(v.len() as u64).to_le_bytes());
            v.iter().for_each(|x| b.extend_from_slice(&x.to_le_bytes()));
        };
        vec(&mut b, indptr);
        vec(&mut b, children);
        for (k, p) in mods {
            b.extend_from_slice(&(k.len() as u64).to_le_bytes());
            b.extend_from_slice(k.as_bytes());
            if *k != "_lib" {
                b.extend_from_slice(&(p.len() as u64).to_le_bytes());
                b.extend_from_slice(p);
            }
        }
        b
    }

    #[test]
    fn parses_the_usual_tree() {
        let b = blob(
            &[0, 1, 1],
            &[1],
            &[("relax.VMExecutable", b"abc"), ("_lib", b"")],
        );
        let t = parse_module_tree(&b).unwrap();
        assert_eq!(t.kinds, ["relax.VMExecutable", "_lib"]);
        assert_eq!(t.imports, vec![vec![1], vec![]]);
        assert_eq!(t.payloads[0], b"abc");
    }

    #[test]
    fn rejects_bad_trees() {
        assert!(parse_module_tree(&blob(
            &[0, 1, 1],
            &[7],
            &[("relax.VMExecutable", b""), ("_lib", b"")]
        ))
        .is_err());
        assert!(parse_module_tree(&blob(&[0, 2, 1], &[1], &[("a", b""), ("_lib", b"")])).is_err());
        let b = blob(
            &[0, 1, 1],
            &[1],
            &[("relax.VMExecutable", b"abc"), ("_lib", b"")],
        );
        for cut in 0..b.len() {
            assert!(parse_module_tree(&b[..cut]).is_err());
        }
    }
}
