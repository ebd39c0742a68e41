//! The public entry point: [`Model`] (a loaded, shareable model) and what it can say about
//! itself.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::host::abi::FfiAny;
use crate::loader::executable::{Arg, Executable, FuncKind};
use crate::loader::library::{blob_payload, parse_module_tree, Library, ModuleTree};
use crate::value::Value;
use crate::vm::builtins::Builtin;
use crate::vm::program::{Callee, Program};
use crate::vm::{Session, SessionOptions};

/// A loaded model: the library, its executable and resolved functions.
///
/// `Model` is `Send + Sync` and cheap to clone; create one [`Session`] per thread to run it.
#[derive(Clone)]
pub struct Model {
    pub(crate) inner: Arc<Program>,
}

/// One dimension of a parameter's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    Fixed(i64),
    /// A symbolic dimension, by name when the model records it.
    Var(String),
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Fixed(d) => write!(f, "{d}"),
            Dim::Var(v) => f.write_str(v),
        }
    }
}

/// What is known about a parameter: from the function's own checks, or failing that from the
/// signature of the first kernel that consumes it.
#[derive(Clone, Debug, Default)]
pub struct ParamInfo {
    pub name: String,
    pub dtype: Option<DType>,
    pub shape: Option<Vec<Dim>>,
}

/// A Relax function of the model.
#[derive(Clone, Debug)]
pub struct FunctionInfo {
    pub name: String,
    pub params: Vec<ParamInfo>,
    /// What [`crate::Session::run`] returns, one entry per tensor in the same order, named
    /// `output` or `output[i]` (tuples, flattened depth-first), read from the function's
    /// instructions (docs/tvm-format.md §9.3). `None` when their number is unknown (a result
    /// the bytecode does not describe), and always for a kernel-only library's kernels, which
    /// return nothing but write into their arguments.
    pub outputs: Option<Vec<ParamInfo>>,
}

/// A kernel's signature, as the kernel itself reports it.
#[derive(Clone, Debug)]
pub struct KernelSignature {
    pub name: String,
    /// `(parameter name, dtype, shape)`; dtype and shape are `None` for scalar parameters.
    pub params: Vec<(String, Option<DType>, Option<Vec<Dim>>)>,
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// How [`Model::load_with`] loads a library.
///
/// ```no_run
/// use mote::{LoadOptions, Model};
/// let model = Model::load_with("model.so", LoadOptions::default().code_free(true))?;
/// assert!(model.is_code_free());
/// # Ok::<(), mote::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LoadOptions {
    code_free: bool,
    read_into_memory: bool,
    memory_budget: Option<u64>,
}

/// The default [`LoadOptions::memory_budget`] for a file of `file_bytes`: 16 times its size
/// plus 64 MiB, at most 4 GiB. A gzip-compressed archive of TVM output inflates about 1.1x
/// (weights) to 4x (object code), so real files stay far below; a file built to inflate (deflate
/// reaches 1032:1) is stopped at this multiple of its own size (docs/untrusted-models.md §3).
pub fn default_load_budget(file_bytes: usize) -> u64 {
    (file_bytes as u64)
        .saturating_mul(16)
        .saturating_add(64 << 20)
        .min(4 << 30)
}

/// Platforms where a process may not map downloaded code: there, every load is code-free.
const CODE_FREE_ONLY: bool = cfg!(any(
    target_os = "ios",
    target_os = "tvos",
    target_os = "watchos",
    target_os = "visionos"
));

impl Default for LoadOptions {
    /// Mapped as code (with the system loader), except on iOS, tvOS, watchOS and visionOS,
    /// where it is code-free.
    fn default() -> Self {
        LoadOptions {
            code_free: CODE_FREE_ONLY,
            read_into_memory: false,
            memory_budget: None,
        }
    }
}

impl LoadOptions {
    /// Load without mapping the file as code (docs/code-free.md): the library is read as data,
    /// only its module blob is used, and a program that calls any compiled kernel is refused
    /// with [`Error::Unsupported`] naming them. Accepts an ELF `.so`, a Mach-O `.dylib`, an
    /// ELF or Mach-O object, or the `.tar` that `export_library("m.tar")` writes.
    ///
    /// A file is mapped read-only (never executable) and stays mapped while the model lives,
    /// holding the weights only offloaded regions read: it must not be rewritten or truncated
    /// in place meanwhile (replacing it with a rename is fine), as for any mapped library.
    pub fn code_free(mut self, yes: bool) -> Self {
        self.code_free = yes;
        self
    }

    /// Whether loads with these options are code-free.
    pub fn is_code_free(&self) -> bool {
        self.code_free
    }

    /// For a code-free load from a path: read the whole file into memory instead of mapping
    /// it, so that nothing of the file stays mapped and a later truncation or rewrite in place
    /// (by another process, or whoever controls the file) cannot fault the process with
    /// `SIGBUS` (docs/code-free.md §4). The cost: the file's bytes are held while loading and
    /// every weight is copied (none is left in the file). Use it for files the app does not
    /// control; the RPC server does for its uploads in code-free mode.
    ///
    /// Only code-free loads can do without a mapping: a library that runs code is mapped by
    /// the system loader, so [`Model::load_with`] refuses this option without
    /// [`LoadOptions::code_free`] (`Error::InvalidArgument`).
    pub fn read_into_memory(mut self, yes: bool) -> Self {
        self.read_into_memory = yes;
        self
    }

    /// Whether code-free loads from a path read the file instead of mapping it.
    pub fn is_read_into_memory(&self) -> bool {
        self.read_into_memory
    }

    /// The most memory a code-free load may allocate to decode the file, in bytes: a
    /// gzip-compressed `.tar` is inflated only up to it, and one that would inflate further is
    /// [`Error::ResourceExhausted`] (having held at most this much). Everything else a load
    /// allocates is bounded by the file's own size: the executable's constants are copies of
    /// bytes in the file. Default ([`default_load_budget`]): 16 times the file's size plus
    /// 64 MiB, at most 4 GiB. A load that maps the library as code runs the file's code, so no
    /// budget applies to it.
    pub fn memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// The budget set with [`LoadOptions::memory_budget`], or `None` for the default.
    pub fn memory_budget_bytes(&self) -> Option<u64> {
        self.memory_budget
    }
}

impl Model {
    /// Load a library made by TVM 0.27's `export_library`: a Relax model, or a kernel-only
    /// library (a TIR module compiled on its own; see [`Model::is_kernel_library`]).
    ///
    /// Loading a library runs its code: only load model files you trust as you would trust a
    /// native library. Every name the bytecode calls is resolved now; anything Mote cannot
    /// provide is reported as [`Error::MissingFunctions`].
    ///
    /// On iOS, tvOS, watchOS and visionOS this is a code-free load (see [`LoadOptions`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        Self::load_with(path, LoadOptions::default())
    }

    /// Load with options: [`LoadOptions::code_free`] reads the file as data instead of
    /// mapping it as code. A code-free load runs nothing from the file, so the trust rule of
    /// [`Model::load`] does not apply to it: every byte Mote uses is validated.
    pub fn load_with(path: impl AsRef<Path>, options: LoadOptions) -> Result<Model> {
        let path = path.as_ref();
        if options.read_into_memory && !options.code_free {
            return Err(Error::InvalidArgument(format!(
                "{}: reading the file into memory needs a code-free load (a library that runs \
                 code is mapped by the system loader)",
                path.display()
            )));
        }
        if options.code_free && options.read_into_memory {
            // Read, never mapped: the model keeps copies of what it needs and no mapping of
            // the file, so nothing done to the file later can fault a read.
            let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
            let (library, blob) = Library::open_code_free(&bytes, path, options.memory_budget)?;
            return Self::from_code_free(library, blob);
        }
        if options.code_free {
            // Mapped read-only as data: a blob the file holds verbatim is read in place, like a
            // mapped library's; a decoded one (compressed tar, C array) is copied out of.
            return match Library::open_code_free_file(path, options.memory_budget)? {
                (library, None) => Self::from_library(library),
                (library, Some(blob)) => Self::from_code_free(library, blob),
            };
        }
        Self::from_library(Library::open(path)?)
    }

    /// [`Model::load_from_memory`] with options. A code-free load works from memory on every
    /// platform (nothing is mapped).
    pub fn load_from_memory_with(bytes: &[u8], options: LoadOptions) -> Result<Model> {
        if options.code_free {
            let (library, blob) =
                Library::open_code_free(bytes, Path::new("<memory>"), options.memory_budget)?;
            return Self::from_code_free(library, blob);
        }
        Self::from_library(Library::open_memory(bytes)?)
    }

    /// Load a model library from bytes in memory (a downloaded model, an asset), without a
    /// file the caller has to manage. Linux and Android only (the bytes go to an anonymous
    /// `memfd`); elsewhere this is [`Error::Unsupported`]. The same trust rule as
    /// [`Model::load`] applies: the bytes are native code.
    pub fn load_from_memory(bytes: &[u8]) -> Result<Model> {
        Self::load_from_memory_with(bytes, LoadOptions::default())
    }

    /// Load a model linked into the program (a "system library": TVM 0.27's objects built
    /// with the `system_lib_prefix` attribute, see docs/system-lib.md), by its prefix
    /// (`"mlp_"`). Its objects registered themselves before `main`; an unknown prefix is
    /// [`Error::Load`], whose message lists the prefixes there are. Several models with
    /// distinct prefixes can be linked into one program. [`Model::path`] reads
    /// `<system-lib PREFIX>`.
    pub fn from_system_lib(prefix: &str) -> Result<Model> {
        Self::from_library(crate::loader::system_lib::library(prefix)?)
    }

    /// The prefixes of the models linked into the program (see [`Model::from_system_lib`]),
    /// sorted.
    pub fn system_lib_prefixes() -> Vec<String> {
        crate::loader::system_lib::prefixes()
    }

    /// A library whose blob lies in a mapped file: loaded by the system loader, linked into
    /// the program, or mapped as data by a code-free load.
    fn from_library(library: Arc<Library>) -> Result<Model> {
        let Some(tree) = library.module_tree()? else {
            return Self::from_kernel_library(library);
        };
        if let Some(module) = opencl_kernel_library(&tree)? {
            if library.code_free_kernels().is_some() {
                return Err(opencl_library_code_free(&module));
            }
            // Kernel-only, compiled for OpenCL: the host functions are the kernels, and they
            // launch the module's (docs/tvm-format.md §10.1).
            drop(tree);
            library.set_opencl(Arc::new(module));
            return Self::from_kernel_library(library);
        }
        // A blob in a mapped file gives its constants' pages back once they are copied.
        let exe = Self::executable(&library, &tree, true)?;
        Self::from_parts(library, exe)
    }

    /// A library read as data and its module blob (`Library::open_code_free(_file)`), which
    /// is dropped once the executable has copied what it needs.
    fn from_code_free(library: Arc<Library>, blob: Vec<u8>) -> Result<Model> {
        let exe = {
            let tree = parse_module_tree(blob_payload(&blob)?)?;
            Self::executable(&library, &tree, false)?
        };
        drop(blob);
        Self::from_parts(library, exe)
    }

    /// The executable a module tree holds, checked against what the library can provide.
    fn executable(library: &Library, tree: &ModuleTree<'_>, page_out: bool) -> Result<Executable> {
        let path = library.path();
        let root = tree.kinds.first().map(String::as_str).unwrap_or("");
        if let Some(m) = opencl_kernel_library(tree)? {
            return Err(opencl_library_code_free(&m));
        }
        if root != "relax.VMExecutable" {
            return Err(Error::Unsupported(format!(
                "root module of kind `{root}`; Mote runs relax.VMExecutable"
            )));
        }
        for (i, kind) in tree.kinds.iter().enumerate().skip(1) {
            match kind.as_str() {
                "_lib" => {}
                "opencl" => {
                    // The kernels of a Relax model compiled for OpenCL, imported by `_lib`
                    // (docs/tvm-format.md §10.6): its host code launches them, so a file read
                    // as data cannot run them.
                    let m = crate::loader::opencl_module::parse(tree.payloads[i])?;
                    if library.code_free_kernels().is_some() {
                        return Err(opencl_library_code_free(&m));
                    }
                    library.set_opencl(Arc::new(m));
                }
                other => return Err(refuse_module_kind(i, other)),
            }
        }
        if !tree.imports[0].iter().any(|&i| tree.kinds[i] == "_lib") && tree.kinds.len() > 1 {
            return Err(Error::Format(
                "the executable does not import the kernel library".into(),
            ));
        }
        // A mapped file stays mapped: the weights only offloaded regions read stay in it
        // (`vm::program::defer_constants`).
        let defer_for = page_out.then_some(crate::vm::SUBGRAPH_FUNCTION);
        let exe = Executable::parse_with(tree.payloads[0], page_out, defer_for)?;
        if let Some(defined) = library.code_free_kernels() {
            check_code_free(path, &exe, defined)?;
        }
        Ok(exe)
    }

    /// A library without a module blob: its functions are the kernels it exports
    /// (docs/tvm-format.md §1.4).
    fn from_kernel_library(library: Arc<Library>) -> Result<Model> {
        let kernels = library.exported_kernels()?.to_vec();
        if kernels.is_empty() {
            return Err(Error::Unsupported(format!(
                "{} has neither a __tvm_ffi__library_bin module blob nor any __tvm_ffi_<name> \
                 kernel: it is not a library exported by TVM",
                library.path().display()
            )));
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let program = Program::link_kernel_library(id, library, &kernels)?;
        let model = Model {
            inner: Arc::new(program),
        };
        log::debug!(
            "loaded {}: a kernel-only library with kernels {}",
            model.path().display(),
            kernels.join(", ")
        );
        Ok(model)
    }

    fn from_parts(library: Arc<Library>, exe: Executable) -> Result<Model> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let model = Model {
            inner: Arc::new(Program::link(id, library, exe)?),
        };
        log::debug!(
            "loaded {}: {} functions, {} kernels",
            model.path().display(),
            model.function_names().len(),
            model.kernels().len()
        );
        Ok(model)
    }

    /// How every `mote.subgraph` call would be split between backends for a session preference
    /// order (`SessionOptions::backends`; empty: the default order). Plans only; nothing is
    /// prepared.
    pub fn partition_plan(&self, backends: &[String]) -> Vec<crate::offload::SubgraphPlan> {
        if !crate::offload::BUILT {
            // No model with offloaded subgraphs loads in this build.
            return Vec::new();
        }
        let (order, unavailable) = crate::offload::resolve_with_reasons(backends);
        self.inner
            .subgraphs()
            .iter()
            .map(|s| {
                crate::offload::planner::plan_site(
                    &s.function,
                    &s.graph,
                    s.symbols(),
                    crate::offload::Constants::of_site(&s.constants),
                    &order,
                    &unavailable,
                )
            })
            .collect()
    }

    /// A session with default options.
    pub fn session(&self) -> Result<Session> {
        Session::new(self.clone(), SessionOptions::default())
    }

    /// A session with the given options.
    pub fn session_with(&self, options: SessionOptions) -> Result<Session> {
        Session::new(self.clone(), options)
    }

    pub fn path(&self) -> &Path {
        self.inner.library().path()
    }

    /// Whether this is a kernel-only library: a TIR module exported on its own
    /// (`tvm.compile(tir_mod, target="llvm").export_library(...)`), which has kernels but no
    /// Relax VM executable. Its functions are its kernels, called with every argument, outputs
    /// included (destination passing): [`Session::call`] passes tensors as views of the
    /// caller's memory, so the kernel writes into the caller's output tensors, and returns the
    /// kernel's own result (usually `Value::None`). `main` is among them when the library has
    /// TVM's `main` alias (emitted when the module has exactly one kernel).
    pub fn is_kernel_library(&self) -> bool {
        self.inner.is_kernel_library()
    }

    /// Names of the functions callable from outside: the Relax functions, or for a kernel-only
    /// library its kernels (sorted, `main` included when the library has that alias).
    pub fn function_names(&self) -> Vec<String> {
        let kernels = self.is_kernel_library();
        self.inner
            .exe()
            .funcs
            .iter()
            .filter(|f| kernels || f.kind.is_relax())
            .map(|f| f.name.clone())
            .collect()
    }

    /// Whether the program calls no compiled kernel: every function it calls is a VM builtin,
    /// `mote.subgraph` (offloaded to the backends) or a registered function
    /// (docs/code-free.md §1), and its Relax functions are bytecode, not native code
    /// (`exec_mode="compiled"`). Such a library can be loaded with
    /// [`LoadOptions::code_free`]; otherwise [`Model::kernels`] names what it calls.
    pub fn is_code_free(&self) -> bool {
        !self.is_kernel_library() && !self.inner.is_compiled() && self.kernels().is_empty()
    }

    /// Whether this model was loaded code-free (read as data, never mapped as code).
    pub fn is_loaded_code_free(&self) -> bool {
        self.inner.library().code_free_kernels().is_some()
    }

    /// Names of the kernels the bytecode calls; for a kernel-only library, every kernel.
    pub fn kernels(&self) -> Vec<String> {
        self.entries(|c| matches!(c, Callee::Kernel(_)))
    }

    /// The device kernels the library's host code launches (today: the kernels of an `opencl`
    /// module, docs/tvm-format.md §10), in the module's order; empty for a CPU model.
    pub fn device_kernels(&self) -> Vec<DeviceKernel> {
        use crate::loader::opencl_module::{ClParam, LaunchDim};
        let Some(m) = self.inner.library().opencl() else {
            return Vec::new();
        };
        m.kernels
            .iter()
            .map(|k| DeviceKernel {
                device: "opencl",
                name: k.name.clone(),
                params: k
                    .params
                    .iter()
                    .map(|p| match p {
                        ClParam::Buffer => "buffer",
                        ClParam::I32 => "int32",
                        ClParam::I64 => "int64",
                        ClParam::U32 => "uint32",
                        ClParam::F32 => "float32",
                        ClParam::F64 => "float64",
                    })
                    .collect(),
                launch: k
                    .launch
                    .iter()
                    .map(|d| {
                        let (what, dim) = match d {
                            LaunchDim::Group(i) => ("blockIdx", *i),
                            LaunchDim::Item(i) => ("threadIdx", *i),
                        };
                        format!("{what}.{}", ["x", "y", "z"][dim])
                    })
                    .chain(k.dyn_shared.then(|| "dynamic shared memory".to_string()))
                    .collect(),
            })
            .collect()
    }

    /// Names of the builtins the bytecode calls.
    pub fn builtins(&self) -> Vec<String> {
        self.entries(|c| matches!(c, Callee::Builtin(_)))
    }

    /// Names resolved to registered functions.
    pub fn registered_functions(&self) -> Vec<String> {
        self.entries(|c| matches!(c, Callee::Registered(_)))
    }

    fn entries(&self, pred: impl Fn(&Callee) -> bool) -> Vec<String> {
        let m = &self.inner;
        m.exe()
            .funcs
            .iter()
            .zip(m.callees())
            .filter(|(_, c)| pred(c))
            .map(|(f, _)| f.name.clone())
            .collect()
    }

    /// Number and total bytes of tensor constants (bound weights).
    pub fn constant_bytes(&self) -> (usize, usize) {
        self.inner.constant_bytes()
    }

    /// Number and total bytes of the tensor constants that only offloaded subgraphs read and
    /// that Mote left in the mapped model file rather than copying them at load: each backend
    /// reads them when it prepares a subgraph, and keeps only its own form of them
    /// (docs/footprint.md, "Memory"). A code-free load from a file leaves them in the file
    /// too when it holds the module blob verbatim (docs/code-free.md §4); one from memory, or
    /// of a compressed `.tar`, copies every constant: `(0, 0)`.
    pub fn constants_in_file(&self) -> (usize, usize) {
        self.inner.constants_in_file()
    }

    /// Everything known about a function's parameters.
    ///
    /// For a kernel-only library this is what the kernel reports when probed with no
    /// arguments ([`Model::kernel_signature`]): every parameter's name, and the dtype and shape
    /// of tensor parameters (both `None` for a scalar). A kernel that reports nothing is
    /// [`Error::Unsupported`].
    pub fn function_info(&self, name: &str) -> Result<FunctionInfo> {
        let m = &self.inner;
        if m.is_kernel_library() {
            self.kernel_function(name)?;
            let sig = self.kernel_signature(name).ok_or_else(|| {
                Error::Unsupported(format!(
                    "kernel `{name}` did not report its parameters when called with no \
                     arguments, so its signature is unknown"
                ))
            })?;
            return Ok(FunctionInfo {
                name: name.to_string(),
                outputs: None,
                params: sig
                    .params
                    .into_iter()
                    .map(|(name, dtype, shape)| ParamInfo { name, dtype, shape })
                    .collect(),
            });
        }
        let fidx = self.vm_function(name)?;
        let f = &m.exe().funcs[fidx];
        let mut params: Vec<ParamInfo> = f
            .param_names
            .iter()
            .map(|n| ParamInfo {
                name: n.clone(),
                ..Default::default()
            })
            .collect();
        let konst = |a: &Arg| match a {
            Arg::Const(c) => m.exe().constants.get(*c as usize),
            _ => None,
        };
        let param_of = |a: &Arg| match a {
            Arg::Reg(r) if (*r as usize) < f.num_args => Some(*r as usize),
            _ => None,
        };
        for (func, args) in m.exe().calls(f) {
            let Some(p) = args.first().and_then(param_of) else {
                continue;
            };
            match m.callee(func) {
                Callee::Builtin(Builtin::CheckTensorInfo) => {
                    if let Some(Value::DType(d)) = args.get(2).and_then(konst) {
                        params[p].dtype = Some(*d);
                    }
                }
                Callee::Builtin(Builtin::MatchShape) => {
                    let n = match args.get(2) {
                        Some(Arg::Imm(n)) => *n as usize,
                        _ => continue,
                    };
                    let names = args
                        .last()
                        .and_then(konst)
                        .and_then(|v| match v {
                            Value::Str(s) => annotation_dims(s),
                            _ => None,
                        })
                        .filter(|d| d.len() == n);
                    // `n` is the file's word: reserve no more than the arguments can fill.
                    let mut dims = Vec::with_capacity(n.min(args.len().saturating_sub(3) / 2));
                    for i in 0..n {
                        let (code, v) = match (args.get(3 + 2 * i), args.get(4 + 2 * i)) {
                            (Some(Arg::Imm(c)), Some(Arg::Imm(v))) => (*c, *v),
                            _ => break,
                        };
                        dims.push(match (code, &names) {
                            (0, _) => Dim::Fixed(v),
                            (_, Some(names)) => Dim::Var(names[i].clone()),
                            _ => Dim::Var(format!("d{v}")),
                        });
                    }
                    if dims.len() == n {
                        params[p].shape = Some(dims);
                    }
                }
                _ => {}
            }
        }
        // Parameters the function does not check (weights passed as arguments): ask the first
        // kernel that consumes them.
        for (func, args) in m.exe().calls(f) {
            if !matches!(*m.callee(func), Callee::Kernel(_)) {
                continue;
            }
            for (k, a) in args.iter().enumerate() {
                let Some(p) = param_of(a) else { continue };
                if params[p].shape.is_some() && params[p].dtype.is_some() {
                    continue;
                }
                let Some(sig) = self.kernel_signature(&m.exe().funcs[func as usize].name) else {
                    continue;
                };
                if let Some((_, dt, shape)) = sig.params.get(k) {
                    params[p].dtype = params[p].dtype.or(*dt);
                    if params[p].shape.is_none() {
                        params[p].shape = shape.clone();
                    }
                }
            }
        }
        let outputs = crate::outputs::outputs(m, fidx, &params);
        Ok(FunctionInfo {
            name: name.to_string(),
            params,
            outputs,
        })
    }

    pub(crate) fn vm_function(&self, name: &str) -> Result<usize> {
        self.inner
            .exe()
            .find(name)
            .filter(|&i| self.inner.exe().funcs[i].kind.is_relax())
            .ok_or_else(|| Error::UnknownFunction {
                name: name.to_string(),
                available: self.function_names(),
            })
    }

    /// The function-table index of kernel `name` of a kernel-only library.
    pub(crate) fn kernel_function(&self, name: &str) -> Result<u32> {
        self.inner
            .exe()
            .find(name)
            .map(|i| i as u32)
            .ok_or_else(|| Error::UnknownFunction {
                name: name.to_string(),
                available: self.function_names(),
            })
    }

    /// The signature a kernel reports when called with no arguments (generated kernels check
    /// their argument count before touching anything, and name every parameter's shape in the
    /// error).
    ///
    /// TVM's `main` alias reports the kernel it stands for, under that kernel's name; in a
    /// kernel-only library, where that kernel is the only other one, Mote reads the signature
    /// under its name (docs/tvm-format.md §7.5).
    pub fn kernel_signature(&self, name: &str) -> Option<KernelSignature> {
        let k = self.inner.library().kernel(name)?;
        let mut result = FfiAny::NONE;
        crate::host::error_slot::take_error();
        // SAFETY: a zero-argument call with NULL args: kernels reject the count first
        // (docs/tvm-format.md §7.5) and report the expected signature.
        let rc = unsafe { k(std::ptr::null_mut(), std::ptr::null(), 0, &mut result) };
        let (_, msg) = crate::host::error_slot::take_error()?;
        if rc == 0 {
            return None;
        }
        parse_signature(name, &msg).or_else(|| {
            if !self.is_kernel_library() || name != MAIN_ALIAS {
                return None;
            }
            let names = self.function_names();
            let [a, b] = names.as_slice() else {
                return None;
            };
            let aliased = match (a.as_str(), b.as_str()) {
                (MAIN_ALIAS, other) | (other, MAIN_ALIAS) => other,
                _ => return None,
            };
            let sig = parse_signature(aliased, &msg)?;
            Some(KernelSignature {
                name: name.to_string(),
                params: sig.params,
            })
        })
    }
}

/// The `opencl` module of a kernel-only library compiled for OpenCL (root `_lib` importing
/// it, docs/tvm-format.md §10.1), decoded; `None` for any other tree.
fn opencl_kernel_library(
    tree: &ModuleTree<'_>,
) -> Result<Option<crate::loader::opencl_module::OpenClModule>> {
    if tree.kinds.first().map(String::as_str) != Some("_lib") {
        return Ok(None);
    }
    let Some(i) = tree.imports[0]
        .iter()
        .copied()
        .find(|&i| tree.kinds[i] == "opencl")
    else {
        return Ok(None);
    };
    if let Some((j, other)) = tree
        .kinds
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, k)| *k != "opencl")
    {
        return Err(refuse_module_kind(j, other));
    }
    crate::loader::opencl_module::parse(tree.payloads[i]).map(Some)
}

/// A kernel of device code the model's library holds ([`Model::device_kernels`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceKernel {
    /// The kind of device code: `"opencl"`.
    pub device: &'static str,
    /// The kernel's name in the device code (and the name the host code looks up).
    pub name: String,
    /// How each parameter is passed: `buffer` (device memory) or a scalar type.
    pub params: Vec<&'static str>,
    /// The launch sizes the host passes after the parameters, in order (`blockIdx.x`: the
    /// number of work-groups along x; `threadIdx.x`: the work-group's size along x).
    pub launch: Vec<String>,
}

/// Read as data, nothing of the file runs: the host code that launches an OpenCL library's
/// kernels cannot either.
fn opencl_library_code_free(m: &crate::loader::opencl_module::OpenClModule) -> Error {
    Error::Unsupported(format!(
        "a library compiled for OpenCL ({} kernel(s): {}): its host code launches them, so it \
         cannot be loaded code-free",
        m.kernels.len(),
        m.kernels
            .iter()
            .take(3)
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The error for a module Mote does not run: code for a device it has no driver for is named
/// as such (TVM's module kinds: `cuda`, `metal`, `vulkan`, `hip`, `webgpu`, `hexagon`, ...).
fn refuse_module_kind(i: usize, kind: &str) -> Error {
    let device = match kind {
        "cuda" => Some("CUDA"),
        "metal" => Some("Metal"),
        "vulkan" => Some("Vulkan"),
        "hip" | "hsaco" | "rocm" => Some("ROCm"),
        "webgpu" => Some("WebGPU"),
        "hexagon" => Some("Hexagon"),
        "sdaccel" | "aocx" | "xclbin" => Some("an FPGA"),
        _ => None,
    };
    Error::Unsupported(match device {
        Some(d) => format!("module {i} (`{kind}`) is built for {d}; Mote runs OpenCL and the CPU"),
        None => format!(
            "module {i} is of kind `{kind}`; Mote supports the executable, its kernel library and \
             OpenCL modules"
        ),
    })
}

/// Refuse, before linking, a program that would call a kernel the file defines: on the
/// code-free path nothing of the file runs (docs/code-free.md §1). A name that is in the
/// file's kernels is what a mapped load would call, even if a builtin has the same name.
fn check_code_free(path: &Path, exe: &Executable, defined: &[String]) -> Result<()> {
    let file_name = || {
        path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    let compiled: Vec<&str> = exe
        .funcs
        .iter()
        .filter(|f| f.kind == FuncKind::VmTir)
        .map(|f| f.name.as_str())
        .collect();
    if !compiled.is_empty() {
        // docs/tvm-format.md §3.6: the Relax functions themselves are native code.
        return Err(Error::Unsupported(format!(
            "{} was built with exec_mode=\"compiled\": its Relax functions {} are native code \
             (__vmtir__<name>), which a code-free load never runs; load it mapped, or build it \
             with the default bytecode mode",
            file_name(),
            compiled.join(", ")
        )));
    }
    let mut called: Vec<&str> = exe
        .funcs
        .iter()
        .filter(|f| f.kind == FuncKind::Packed)
        .map(|f| f.name.as_str())
        .filter(|n| defined.binary_search_by(|d| d.as_str().cmp(n)).is_ok())
        .collect();
    called.dedup();
    if called.is_empty() {
        return Ok(());
    }
    let name = file_name();
    Err(Error::Unsupported(format!(
        "{name} is not code-free: its program calls compiled kernels {}; partition it with \
         partition_for_acl(..., code_free=\"require\") (or partition_for_bnns) so that every \
         operator is offloaded",
        called.join(", ")
    )))
}

/// The weak alias TVM emits for the only kernel of a TIR module (docs/tvm-format.md §1.3).
const MAIN_ALIAS: &str = "main";

/// Dims from an error context's `annotation=R.Tensor((n, 16), dtype=...)`.
pub(crate) fn annotation_dims(err: &str) -> Option<Vec<String>> {
    let start = err.find("R.Tensor((")? + "R.Tensor((".len();
    let inner = &err[start..];
    let end = inner.find(')')?;
    Some(
        inner[..end]
            .split(',')
            .map(|s| s.trim().trim_matches('"').to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

/// Split at commas not nested in brackets or parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = s[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    out
}

fn parse_dim(d: &str) -> Dim {
    d.strip_prefix("T.int64(")
        .or_else(|| d.strip_prefix("T.int32("))
        .and_then(|r| r.strip_suffix(')'))
        .and_then(|v| v.parse().ok())
        .or_else(|| d.parse().ok())
        .map(Dim::Fixed)
        .unwrap_or_else(|| Dim::Var(d.to_string()))
}

pub(crate) fn parse_signature(name: &str, msg: &str) -> Option<KernelSignature> {
    let open = format!("{name}(");
    let start = msg.find(&open)? + open.len();
    let body = msg[start..].rsplit_once(')')?.0;
    let params = split_top(body)
        .into_iter()
        .map(|p| {
            let (pname, ty) = p.split_once(':').unwrap_or((p, ""));
            let ty = ty.trim();
            match ty.strip_prefix("Tensor(").and_then(|t| t.strip_suffix(')')) {
                Some(inner) => {
                    let parts = split_top(inner);
                    let shape = parts
                        .first()
                        .and_then(|s| s.strip_prefix('[').and_then(|s| s.strip_suffix(']')))
                        .map(|dims| split_top(dims).into_iter().map(parse_dim).collect());
                    let dtype = parts.get(1).and_then(|d| d.parse().ok());
                    (pname.trim().to_string(), dtype, shape)
                }
                None => (pname.trim().to_string(), None, None),
            }
        })
        .collect();
    Some(KernelSignature {
        name: name.to_string(),
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_for_other_devices_are_refused_by_name() {
        for (kind, device) in [
            ("metal", "Metal"),
            ("cuda", "CUDA"),
            ("vulkan", "Vulkan"),
            ("hip", "ROCm"),
        ] {
            let e = refuse_module_kind(2, kind).to_string();
            assert!(
                e.contains(&format!(
                    "module 2 (`{kind}`) is built for {device}; Mote runs OpenCL and the CPU"
                )),
                "{e}"
            );
        }
        let e = refuse_module_kind(1, "mystery").to_string();
        assert!(e.contains("module 1 is of kind `mystery`"), "{e}");
    }

    /// Found by the `model_code_free` fuzz target (docs/fuzzing.md): a `.tar` export whose
    /// `match_shape` instruction claims a rank of billions. `function_info` reserved that
    /// many dimensions before reading any (capacity overflow or an abort); it must answer.
    #[test]
    fn a_match_shape_claiming_a_huge_rank_reserves_nothing_for_it() {
        let file = include_bytes!(
            "../../fuzz/regressions/model_code_free/function-info-match-shape-count.tar"
        );
        let model = Model::load_from_memory_with(file, LoadOptions::default().code_free(true))
            .expect("the mutated export still loads");
        let names = model.function_names();
        assert!(!names.is_empty());
        for f in names {
            crate::test_alloc::largest_since_reset();
            let info = model.function_info(&f).expect("function_info answers");
            let largest = crate::test_alloc::largest_since_reset();
            assert!(largest < 1 << 16, "{f}: an allocation of {largest} bytes");
            for p in &info.params {
                assert!(p.shape.as_ref().is_none_or(|d| d.len() <= 8), "{f}: {p:?}");
            }
        }
    }

    #[test]
    fn parses_kernel_signatures_from_errors() {
        let msg = "Expected 2 arguments when calling:\n  `relu(add: Tensor([T.int64(1), n], float32), compute: Tensor([T.int64(1), T.int64(8)], float16), k: int64)`";
        let s = parse_signature("relu", msg).unwrap();
        assert_eq!(s.params.len(), 3);
        assert_eq!(s.params[0].0, "add");
        assert_eq!(
            s.params[0].2,
            Some(vec![Dim::Fixed(1), Dim::Var("n".into())])
        );
        assert_eq!(s.params[1].1, Some(DType::F16));
        assert_eq!(s.params[2], ("k".to_string(), None, None));
    }

    #[test]
    fn reads_symbolic_names_from_annotations() {
        let e = "ErrorContext(fn=forward, loc=param[0], param=x, annotation=R.Tensor((n, 16), dtype=\"float32\")) ";
        assert_eq!(
            annotation_dims(e),
            Some(vec!["n".to_string(), "16".to_string()])
        );
    }
}
