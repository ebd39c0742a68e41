//! The loaded program a model shares between its sessions: the executable, the library whose
//! kernels it calls, what every function-table entry resolved to, and the checked call sites of
//! offloaded subgraphs. Built once by [`Program::link`] (a Relax executable) or
//! [`Program::link_kernel_library`] (a kernel-only library, whose function table is its
//! kernels and which has no bytecode) and immutable afterwards.

use std::sync::Arc;

use super::builtins::Builtin;
use crate::error::{Error, Result};
use crate::host::abi::SafeCallFn;
use crate::loader::executable::{Arg, Executable, FuncKind};
use crate::loader::library::Library;
use crate::offload::{Constant, InFile, Site};
use crate::registry::PackedFunc;
use crate::value::Value;

/// What a function-table entry resolved to when the model loaded.
#[derive(Clone)]
pub(crate) enum Callee {
    Vm(u32),
    Kernel(SafeCallFn),
    Builtin(Builtin),
    Registered(PackedFunc),
    /// `mote.subgraph`: an offloaded region, run by Mote's backends.
    Subgraph,
    /// A kernel of a model compiled for OpenCL, in a session's device program
    /// ([`Program::for_device`]): its host function takes device tensors and launches the
    /// OpenCL kernels, so it runs with the session's device state lent to the thread.
    DeviceKernel(SafeCallFn),
}

/// A linked executable. Its fields are private: sessions read it through the accessors, and
/// nothing changes it after [`Program::link`].
pub(crate) struct Program {
    id: usize,
    /// Keeps the kernels (and the context slots pointing at this library) alive.
    library: Arc<Library>,
    exe: Executable,
    callees: Vec<Callee>,
    /// Every `mote.subgraph` call site, parsed and checked at load.
    subgraphs: Vec<Site>,
    /// A kernel-only library: every entry of `exe.funcs` is a packed entry resolved to a
    /// kernel, and those are the functions callable from outside.
    kernel_library: bool,
    /// For each function-table entry compiled to native code (`exec_mode="compiled"`), its
    /// `__vmtir__<name>` (docs/tvm-format.md §3.6); empty when there is none.
    compiled: Vec<Option<SafeCallFn>>,
}

impl Program {
    /// Resolve every function-table name (the library's kernels, then Mote's builtins, then
    /// registered functions) and check every subgraph call site. `id` tells this program's
    /// function values from another's.
    pub(crate) fn link(id: usize, library: Arc<Library>, mut exe: Executable) -> Result<Program> {
        let mut missing = Vec::new();
        let callees: Vec<Callee> = exe
            .funcs
            .iter()
            .enumerate()
            .map(|(i, f)| match f.kind {
                FuncKind::Vm | FuncKind::VmTir => Callee::Vm(i as u32),
                FuncKind::Packed => {
                    if f.name == SUBGRAPH_FUNCTION {
                        Callee::Subgraph
                    } else if let Some(k) = library.kernel(&f.name) {
                        Callee::Kernel(k)
                    } else if let Some(b) = Builtin::from_name(&f.name) {
                        Callee::Builtin(b)
                    } else if let Some(r) = crate::registry::lookup_function(&f.name) {
                        Callee::Registered(r)
                    } else {
                        missing.push(f.name.clone());
                        Callee::Vm(u32::MAX)
                    }
                }
            })
            .collect();
        // Compiled Relax functions: each runs its library's native `__vmtir__<name>`.
        let mut compiled = Vec::new();
        if exe.funcs.iter().any(|f| f.kind == FuncKind::VmTir) {
            if library.is_dynamically_loaded() {
                crate::loader::library::ensure_compiled_mode_symbols_visible()?;
            }
            compiled = exe
                .funcs
                .iter()
                .map(|f| {
                    if f.kind != FuncKind::VmTir {
                        return None;
                    }
                    let name = format!("__vmtir__{}", f.name);
                    let k = library.kernel(&name);
                    if k.is_none() {
                        missing.push(name);
                    }
                    k
                })
                .collect();
        }
        if !missing.is_empty() {
            return Err(Error::MissingFunctions { names: missing });
        }
        // The key the VM's pool holds in place of each constant left in the file.
        let keys: Vec<Option<Arc<str>>> = exe
            .in_payload
            .iter()
            .enumerate()
            .map(|(c, p)| {
                p.as_ref()
                    .map(|_| Arc::from(format!("mote: constant {c}, read from the model file")))
            })
            .collect();
        let (mut subgraphs, slots) = subgraph_sites(&exe, &callees, &library, &keys)?;
        defer_constants(&mut exe, &mut subgraphs, &slots, &library, &keys)?;
        Ok(Program {
            id,
            library,
            exe,
            callees,
            subgraphs,
            kernel_library: false,
            compiled,
        })
    }

    /// A kernel-only library (docs/tvm-format.md §1.4): its function table is `kernels`, the
    /// names the dynamic symbol table lists, each resolved now through the system loader.
    pub(crate) fn link_kernel_library(
        id: usize,
        library: Arc<Library>,
        kernels: &[String],
    ) -> Result<Program> {
        let callees = kernels
            .iter()
            .map(|name| {
                library.kernel(name).map(Callee::Kernel).ok_or_else(|| {
                    Error::Format(format!(
                        "the dynamic symbol table lists __tvm_ffi_{name}, but the system loader \
                         does not find it"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Program {
            id,
            library,
            exe: Executable::packed_only(kernels),
            callees,
            subgraphs: Vec::new(),
            kernel_library: true,
            compiled: Vec::new(),
        })
    }

    /// This Relax program as one session runs it on a device (docs/opencl.md §8): the same
    /// code and function table, with `constants` (the session's device copies of the tensor
    /// constants, the rest as they were) and every kernel called as a [`Callee::DeviceKernel`].
    pub(crate) fn for_device(&self, constants: Vec<Value>) -> Result<Program> {
        if !self.subgraphs.is_empty() {
            return Err(Error::Unsupported(
                "offloaded regions in a model compiled for OpenCL".into(),
            ));
        }
        if self.kernel_library || constants.len() != self.exe.constants.len() {
            return Err(Error::InvalidArgument(
                "a device program needs a Relax program and one value per constant".into(),
            ));
        }
        let mut exe = self.exe.clone();
        exe.constants = constants;
        let callees = self
            .callees
            .iter()
            .map(|c| match *c {
                Callee::Kernel(k) => Callee::DeviceKernel(k),
                ref other => other.clone(),
            })
            .collect();
        Ok(Program {
            id: self.id,
            library: self.library.clone(),
            exe,
            callees,
            subgraphs: Vec::new(),
            kernel_library: false,
            compiled: self.compiled.clone(),
        })
    }

    /// The native code of function `fidx`, when it was compiled (`exec_mode="compiled"`).
    #[inline]
    pub(crate) fn compiled_function(&self, fidx: usize) -> Option<SafeCallFn> {
        self.compiled.get(fidx).copied().flatten()
    }

    /// Whether the Relax functions are native code (`exec_mode="compiled"`).
    pub(crate) fn is_compiled(&self) -> bool {
        !self.compiled.is_empty()
    }

    /// Whether this is a kernel-only library rather than a Relax executable.
    pub(crate) fn is_kernel_library(&self) -> bool {
        self.kernel_library
    }

    pub(crate) fn id(&self) -> usize {
        self.id
    }

    pub(crate) fn library(&self) -> &Library {
        &self.library
    }

    pub(crate) fn exe(&self) -> &Executable {
        &self.exe
    }

    pub(crate) fn callee(&self, func: u32) -> &Callee {
        &self.callees[func as usize]
    }

    pub(crate) fn callees(&self) -> &[Callee] {
        &self.callees
    }

    pub(crate) fn subgraphs(&self) -> &[Site] {
        &self.subgraphs
    }

    /// Number and total bytes of the tensor constants (bound weights), those left in the
    /// model file included.
    pub(crate) fn constant_bytes(&self) -> (usize, usize) {
        let held = self.exe.constants.iter().filter_map(Value::as_tensor);
        let (n, bytes) = held.fold((0, 0), |(n, b), t| (n + 1, b + t.byte_len()));
        let (in_file, in_file_bytes) = self.constants_in_file();
        (n + in_file, bytes + in_file_bytes)
    }

    /// The part of [`Program::constant_bytes`] left in the model file (`defer_constants`).
    pub(crate) fn constants_in_file(&self) -> (usize, usize) {
        let in_file = self.exe.in_payload.iter().flatten();
        in_file.fold((0, 0), |(n, b), p| (n + 1, b + p.range.len()))
    }
}

/// Settle the tensor constants the parser left in the model file (`Executable::in_payload`,
/// for a library that stays mapped; docs/footprint.md, "Memory"). One that only offloaded
/// regions read as a constant stays there: the VM's pool holds a key in its place (the call
/// sites recognise their calls by it) and the sites read it from the file when a backend
/// prepares them. Any other (the parser's rule is coarser than a region's constant slots) is
/// copied now, as every constant of a file read as data is. `slots[i]`: the pool index of
/// each constant of site `i`. Those that stay keep their `in_payload` entry; the others lose it.
fn defer_constants(
    exe: &mut Executable,
    sites: &mut [Site],
    slots: &[Vec<u32>],
    library: &Arc<Library>,
    keys: &[Option<Arc<str>>],
) -> Result<()> {
    let n = exe.constants.len();
    if exe.in_payload.iter().all(Option::is_none) {
        return Ok(());
    }
    // Every use of each constant as an argument ...
    let (uses, _) = exe.constant_uses(None);
    // ... against its uses as a region's constant: a constant stays in the file only when
    // the two agree, so no instruction but a `mote.subgraph` call ever sees the key.
    let mut as_region_constant = vec![0usize; n];
    for &c in slots.iter().flatten() {
        if let Some(u) = as_region_constant.get_mut(c as usize) {
            *u += 1;
        }
    }
    for c in 0..n {
        let Some(p) = exe.in_payload[c].clone() else {
            continue;
        };
        if uses[c] == 0 || uses[c] != as_region_constant[c] {
            let t = crate::offload::read_constant(library, &p)?;
            for (site, pool) in sites.iter_mut().zip(slots) {
                for (k, _) in pool.iter().enumerate().filter(|(_, &q)| q as usize == c) {
                    site.constants[k] = Constant::Held(t.clone());
                }
            }
            exe.constants[c] = Value::Tensor(t);
            exe.in_payload[c] = None;
            continue;
        }
        // The sites already hold it as an `InFile` with this key (`subgraph_sites`).
        let Some(key) = keys.get(c).cloned().flatten() else {
            return Err(Error::Format(format!("constant {c} has no key (internal)")));
        };
        exe.constants[c] = Value::Str(key);
    }
    Ok(())
}

/// The packed function name of offloaded regions (docs/subgraph-format.md).
pub(crate) const SUBGRAPH_FUNCTION: &str = "mote.subgraph";

/// Find, parse and check every `mote.subgraph` call: `(desc, inputs..., constants...,
/// outputs...)` with the description and the constants taken from the VM's constant pool.
/// Returns the sites and, for each, the constant pool index of each of its constants.
/// A constant the parser left in the file becomes an `InFile` with its key from `keys`.
fn subgraph_sites(
    exe: &Executable,
    callees: &[Callee],
    library: &Arc<Library>,
    keys: &[Option<Arc<str>>],
) -> Result<(Vec<Site>, Vec<Vec<u32>>)> {
    if !crate::offload::BUILT {
        // A build without the `offload` feature: a model that calls offloaded subgraphs does
        // not load, and the description parser below is left out of the library.
        if callees.iter().any(|c| matches!(c, Callee::Subgraph)) {
            return Err(crate::offload::left_out(crate::offload::Needs::Model));
        }
        return Ok((Vec::new(), Vec::new()));
    }
    let mut sites = Vec::new();
    let mut slots = Vec::new();
    for f in exe.funcs.iter().filter(|f| f.kind == FuncKind::Vm) {
        for (i, (func, args)) in exe
            .calls(f)
            .filter(|(func, _)| matches!(callees.get(*func as usize), Some(Callee::Subgraph)))
            .enumerate()
        {
            let _ = func;
            let context = format!("{}: {SUBGRAPH_FUNCTION} call #{i}", f.name);
            let bad = |m: String| Error::Subgraph {
                subgraph: context.clone(),
                node: None,
                message: m,
            };
            let konst = |a: Option<&Arg>| match a {
                Some(Arg::Const(c)) => exe.constants.get(*c as usize),
                _ => None,
            };
            // A tensor the parser left in the file, with the key that stands for it.
            let in_file = |a: Option<&Arg>| {
                let Some(Arg::Const(c)) = a else { return None };
                let p = exe.in_payload.get(*c as usize)?.as_ref()?;
                Some(InFile {
                    library: library.clone(),
                    data: p.clone(),
                    key: keys.get(*c as usize)?.clone()?,
                })
            };
            let desc: Arc<str> = match konst(args.first()) {
                Some(Value::Str(s)) => s.clone(),
                _ => {
                    return Err(bad(
                        "the first argument is not a constant string (the JSON description)".into(),
                    ))
                }
            };
            let (graph, symbolic) = crate::offload::symbolic::parse(&desc, &context)?;
            let (ni, nc, no) = (
                graph.inputs.len(),
                graph.constants.len(),
                graph.outputs.len(),
            );
            if args.len() != 1 + ni + nc + no {
                return Err(bad(format!(
                    "the call passes {} arguments, but its description needs 1 + {ni} inputs + {nc} constants + {no} outputs",
                    args.len()
                )));
            }
            let mut constants = Vec::with_capacity(nc);
            let mut pool = Vec::with_capacity(nc);
            for (k, &t) in graph.constants.iter().enumerate() {
                if let Some(Arg::Const(c)) = args.get(1 + ni + k) {
                    pool.push(*c);
                }
                // A tensor in the pool, or one the parser left in the file (`defer_constants`
                // settles those).
                let constant = match (konst(args.get(1 + ni + k)), in_file(args.get(1 + ni + k))) {
                    (Some(Value::Tensor(c)), _) => Constant::Held(c.clone()),
                    (_, Some(f)) => Constant::InFile(f),
                    _ => {
                        return Err(bad(format!(
                            "argument {} (constant {k}) is not a tensor constant of the model",
                            1 + ni + k
                        )))
                    }
                };
                let (shape, dtype) = match &constant {
                    Constant::Held(c) => (c.shape(), c.dtype()),
                    Constant::InFile(f) => (f.data.shape.as_slice(), f.data.dtype),
                };
                let d = &graph.tensors[t];
                if shape != d.shape.as_slice() || dtype != d.dtype {
                    return Err(bad(format!(
                        "constant {k} is a {dtype} tensor of shape {shape:?}, the description says {} {:?}",
                        d.dtype,
                        d.shape
                    )));
                }
                constants.push(constant);
            }
            sites.push(Site::new(f.name.clone(), desc, graph, symbolic, constants));
            slots.push(pool);
        }
    }
    Ok((sites, slots))
}
