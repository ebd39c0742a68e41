//! The `relax.VMExecutable` payload: function table, constant pool and bytecode
//! (docs/tvm-format.md §3-§5). Parsing validates everything the interpreter relies on, so a corrupted
//! file is a [`Error::Format`] here rather than a surprise mid-run.

use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::value::Value;

/// Executable magic of older TVM: no memory-scope section (docs/tvm-format.md §3.2).
const MAGIC_V1: u64 = 0xD225_DE2F_4214_151D;
/// Executable magic TVM 0.27 writes: a memory-scope section follows the bytecode (§3.2, §3.5).
const MAGIC_V2: u64 = 0xD225_DE2F_4214_151E;
/// First word of every tensor record in the constant pool (docs/tvm-format.md §5.2).
const TENSOR_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;
/// The only executable version string Mote reads (docs/tvm-format.md §3.2).
const VM_VERSION: &str = "0.14";
/// Register word `%void`: a discarded destination, None as a source (docs/tvm-format.md §4.3).
const VOID_REGISTER: i64 = 1 << 54;
/// Register word `%vm`: the VM context (docs/tvm-format.md §4.3).
const VM_REGISTER: i64 = (1 << 54) + 1;
/// An argument word keeps its kind in the top 8 bits and a 56-bit two's-complement value
/// below (docs/tvm-format.md §4.4).
const ARG_KIND_SHIFT: u32 = 56;
/// Instruction opcodes, each an instruction's first word (docs/tvm-format.md §4.2).
mod opcode {
    pub const CALL: i64 = 1;
    pub const RET: i64 = 2;
    pub const GOTO: i64 = 3;
    pub const IF: i64 = 4;
}
/// Function-table kinds (docs/tvm-format.md §3.4).
mod func_kind {
    pub const PACKED: i32 = 0;
    pub const VM: i32 = 1;
    pub const VM_TIR: i32 = 2;
}
/// Argument kinds (docs/tvm-format.md §4.4).
mod arg_kind {
    pub const REGISTER: u64 = 0;
    pub const IMMEDIATE: u64 = 1;
    pub const CONST_IDX: u64 = 2;
    pub const FUNC_IDX: u64 = 3;
}

/// Bounds-checked little-endian reader over a byte slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    pub fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::Format(format!("{} at byte {}: {msg}", self.what, self.pos))
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.err(format!("needs {n} bytes, only {} left", self.remaining())));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    pub fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// A count of items each at least `min_size` bytes long; rejects counts the remaining
    /// bytes cannot hold, so corrupted lengths never cause huge allocations.
    pub fn count(&mut self, min_size: usize) -> Result<usize> {
        let n = self.u64()?;
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(min_size.max(1)))
            .is_some_and(|bytes| bytes <= self.remaining());
        if !fits {
            return Err(self.err(format!(
                "count {n} exceeds the remaining {} bytes",
                self.remaining()
            )));
        }
        Ok(n as usize)
    }

    pub fn str(&mut self) -> Result<String> {
        let n = self.count(1)?;
        let b = self.bytes(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.err("string is not UTF-8"))
    }

    pub fn dtype(&mut self) -> Result<DType> {
        let [code, bits, l0, l1] = self.array()?;
        Ok(DType {
            code,
            bits,
            lanes: u16::from_le_bytes([l0, l1]),
        })
    }

    pub fn i64_vec(&mut self) -> Result<Vec<i64>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.i64()).collect()
    }
}

/// Kind of a function-table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FuncKind {
    /// Resolved by name: a kernel in the library, a builtin, or a registered function.
    Packed,
    /// Relax bytecode.
    Vm,
    /// A Relax function compiled to native code (`exec_mode="compiled"`): the library's
    /// `__vmtir__<name>` runs it (docs/tvm-format.md §3.6).
    VmTir,
}

impl FuncKind {
    /// A Relax function (bytecode or compiled): callable from outside, as a closure.
    pub fn is_relax(self) -> bool {
        matches!(self, FuncKind::Vm | FuncKind::VmTir)
    }
}

#[derive(Clone, Debug)]
pub struct FuncInfo {
    pub kind: FuncKind,
    pub name: String,
    pub start: usize,
    pub end: usize,
    pub num_args: usize,
    pub register_file_size: usize,
    pub param_names: Vec<String>,
}

/// A decoded instruction argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    Reg(u32),
    /// `%void`: reads as None.
    Void,
    /// `%vm`: the VM context.
    Vm,
    Imm(i64),
    Const(u32),
    Func(u32),
}

/// A destination register (`None` = discard).
pub type Dst = Option<u32>;

#[derive(Clone, Copy, Debug)]
pub enum Instr {
    Call {
        dst: Dst,
        func: u32,
        args: u32,
        nargs: u32,
    },
    Ret {
        reg: Arg,
    },
    Goto {
        target: usize,
    },
    If {
        cond: Arg,
        else_target: usize,
    },
}

/// A parsed, validated executable.
#[derive(Clone)]
pub struct Executable {
    pub funcs: Vec<FuncInfo>,
    /// The constant pool. A tensor left in the payload (`in_payload`) is `Value::None` here.
    pub constants: Vec<Value>,
    /// For each constant, `Some` when it is a tensor whose bytes were validated but left in the
    /// payload (see [`Executable::parse_with`]'s `defer_for`).
    pub in_payload: Vec<Option<InPayload>>,
    pub instrs: Vec<Instr>,
    /// Flat pool of call arguments; `Instr::Call::args` indexes into it.
    pub args: Vec<Arg>,
}

/// A tensor constant left in the payload: checked like any other, not copied.
#[derive(Clone, Debug)]
pub struct InPayload {
    /// Its data bytes' range in the payload.
    pub range: std::ops::Range<usize>,
    pub shape: Vec<i64>,
    pub dtype: DType,
}

impl Executable {
    pub fn parse(bytes: &[u8]) -> Result<Executable> {
        Self::parse_with(bytes, false, None)
    }

    /// [`Executable::parse`]; with `page_out`, `bytes` lie in a mapped file and the pages of
    /// each constant are handed back to the system once it is copied (`host::pages`). With
    /// `defer_for`, the name of a packed function, a tensor constant whose every use is an
    /// argument (after the first) of calls to that function is not copied: it is left in
    /// `bytes` and described in `in_payload` (docs/footprint.md, "Memory").
    pub(crate) fn parse_with(
        bytes: &[u8],
        page_out: bool,
        defer_for: Option<&str>,
    ) -> Result<Executable> {
        let mut r = Reader::new(bytes, "VM executable");
        let magic = r.u64()?;
        if magic != MAGIC_V1 && magic != MAGIC_V2 {
            return Err(r.err(format!(
                "bad magic {magic:#018x} (not a relax.VMExecutable)"
            )));
        }
        let version = r.str()?;
        if version != VM_VERSION {
            return Err(Error::Unsupported(format!(
                "VM executable version {version:?}; Mote reads version {VM_VERSION} (TVM 0.27)"
            )));
        }
        let nfuncs = r.count(4 + 8 * 6)?;
        let mut funcs = Vec::with_capacity(nfuncs);
        for _ in 0..nfuncs {
            funcs.push(parse_func(&mut r)?);
        }
        if magic == MAGIC_V2 {
            let nscopes = r.count(16)?;
            for _ in 0..nscopes {
                let idx = r.i64()?;
                let scope = r.str()?;
                if scope != "global" {
                    return Err(Error::Unsupported(format!(
                        "constant {idx} has memory scope {scope:?}; only \"global\" exists on CPU"
                    )));
                }
            }
        }
        let nconst = r.count(4)?;
        let mut constants = Vec::with_capacity(nconst);
        let mut in_payload = Vec::with_capacity(nconst);
        for i in 0..nconst {
            // Tensors are copied once the bytecode has said which ones stay in the payload.
            let (c, t) = parse_constant(&mut r).map_err(|e| match e {
                Error::Format(m) => Error::Format(format!("{m} (constant {i})")),
                e => e,
            })?;
            constants.push(c);
            in_payload.push(t);
        }
        let offsets = r.i64_vec()?;
        let data = r.i64_vec()?;
        if r.remaining() != 0 {
            return Err(r.err(format!("{} unexpected trailing bytes", r.remaining())));
        }
        let mut exe = Executable {
            funcs,
            constants,
            in_payload,
            instrs: Vec::with_capacity(offsets.len()),
            args: Vec::new(),
        };
        exe.decode(&offsets, &data)?;
        exe.validate()?;
        let keep = match defer_for {
            Some(name) => exe.args_only_of(name),
            None => vec![false; nconst],
        };
        for (c, keep) in keep.into_iter().enumerate() {
            if keep {
                continue;
            }
            if let Some(t) = exe.in_payload[c].take() {
                exe.constants[c] = Value::Tensor(t.copy_from(bytes, page_out)?);
            }
        }
        Ok(exe)
    }

    /// For each constant, whether every use of it is an argument, other than the first, of a
    /// call to the packed function `name` (and there is one).
    fn args_only_of(&self, name: &str) -> Vec<bool> {
        let f = self
            .funcs
            .iter()
            .position(|f| f.kind == FuncKind::Packed && f.name == name);
        let (uses, as_arg) = self.constant_uses(f);
        uses.iter()
            .zip(&as_arg)
            .map(|(&u, &a)| u > 0 && u == a)
            .collect()
    }

    /// How often each constant is an argument anywhere (a call's, a return's, a branch's),
    /// each instruction counted once; and how many of those are arguments after the first of
    /// calls to function `f`.
    pub(crate) fn constant_uses(&self, f: Option<usize>) -> (Vec<usize>, Vec<usize>) {
        let n = self.constants.len();
        let (mut uses, mut as_arg) = (vec![0usize; n], vec![0usize; n]);
        let mut count = |a: &Arg, of_f: bool| {
            if let Arg::Const(c) = *a {
                if let Some(u) = uses.get_mut(c as usize) {
                    *u += 1;
                    as_arg[c as usize] += usize::from(of_f);
                }
            }
        };
        for instr in &self.instrs {
            match *instr {
                Instr::Call {
                    func, args, nargs, ..
                } => {
                    for (k, a) in self.call_args(args, nargs).iter().enumerate() {
                        count(a, Some(func as usize) == f && k > 0);
                    }
                }
                Instr::Ret { reg } => count(&reg, false),
                Instr::If { cond, .. } => count(&cond, false),
                Instr::Goto { .. } => {}
            }
        }
        (uses, as_arg)
    }

    fn decode(&mut self, offsets: &[i64], data: &[i64]) -> Result<()> {
        for (pc, &off) in offsets.iter().enumerate() {
            let bad = |m: &str| Error::Format(format!("instruction {pc}: {m}"));
            let off = usize::try_from(off).map_err(|_| bad("negative offset"))?;
            let word = |k: usize| -> Result<i64> {
                off.checked_add(k)
                    .and_then(|i| data.get(i).copied())
                    .ok_or_else(|| bad("runs past the end of the bytecode"))
            };
            let instr = match word(0)? {
                opcode::CALL => {
                    let dst = match word(1)? {
                        VOID_REGISTER | VM_REGISTER => None,
                        r => Some(u32::try_from(r).map_err(|_| bad("bad destination register"))?),
                    };
                    let func = u32::try_from(word(2)?).map_err(|_| bad("bad function index"))?;
                    let nargs = u32::try_from(word(3)?).map_err(|_| bad("bad argument count"))?;
                    if nargs as usize > data.len() {
                        return Err(bad("bad argument count"));
                    }
                    let start = self.args.len() as u32;
                    for k in 0..nargs as usize {
                        self.args
                            .push(decode_arg(word(4 + k)?).map_err(|m| bad(&m))?);
                    }
                    Instr::Call {
                        dst,
                        func,
                        args: start,
                        nargs,
                    }
                }
                opcode::RET => Instr::Ret {
                    reg: decode_reg(word(1)?).map_err(|m| bad(&m))?,
                },
                opcode::GOTO => Instr::Goto {
                    target: relative(pc, word(1)?).ok_or_else(|| bad("jump out of range"))?,
                },
                opcode::IF => Instr::If {
                    cond: decode_reg(word(1)?).map_err(|m| bad(&m))?,
                    else_target: relative(pc, word(2)?).ok_or_else(|| bad("jump out of range"))?,
                },
                op => return Err(bad(&format!("unknown opcode {op}"))),
            };
            self.instrs.push(instr);
        }
        Ok(())
    }

    /// Check every index the interpreter will use, per VM function.
    fn validate(&self) -> Result<()> {
        for f in self.funcs.iter().filter(|f| f.kind == FuncKind::Vm) {
            let bad = |pc: usize, m: String| {
                Error::Format(format!("function `{}`, instruction {pc}: {m}", f.name))
            };
            if f.start >= f.end || f.end > self.instrs.len() {
                return Err(Error::Format(format!(
                    "function `{}` spans instructions {}..{} of {}",
                    f.name,
                    f.start,
                    f.end,
                    self.instrs.len()
                )));
            }
            if f.num_args > f.register_file_size {
                return Err(Error::Format(format!(
                    "function `{}` has {} parameters but {} registers",
                    f.name, f.num_args, f.register_file_size
                )));
            }
            let check_arg = |pc: usize, a: Arg| -> Result<()> {
                match a {
                    Arg::Reg(r) if r as usize >= f.register_file_size => Err(bad(
                        pc,
                        format!("register {r} out of {}", f.register_file_size),
                    )),
                    Arg::Const(c) if c as usize >= self.constants.len() => {
                        Err(bad(pc, format!("constant {c} out of range")))
                    }
                    Arg::Func(i) if i as usize >= self.funcs.len() => {
                        Err(bad(pc, format!("function {i} out of range")))
                    }
                    _ => Ok(()),
                }
            };
            let check_target = |pc: usize, t: usize| {
                if t < f.start || t >= f.end {
                    Err(bad(pc, format!("jump to {t} leaves the function")))
                } else {
                    Ok(())
                }
            };
            for pc in f.start..f.end {
                match self.instrs[pc] {
                    Instr::Call {
                        dst,
                        func,
                        args,
                        nargs,
                    } => {
                        if dst.is_some_and(|d| d as usize >= f.register_file_size) {
                            return Err(bad(pc, "destination register out of range".into()));
                        }
                        if func as usize >= self.funcs.len() {
                            return Err(bad(pc, format!("calls function {func}, out of range")));
                        }
                        for &a in &self.args[args as usize..(args + nargs) as usize] {
                            check_arg(pc, a)?;
                        }
                    }
                    Instr::Ret { reg } => check_arg(pc, reg)?,
                    Instr::Goto { target } => check_target(pc, target)?,
                    Instr::If { cond, else_target } => {
                        check_arg(pc, cond)?;
                        check_target(pc, else_target)?;
                        if else_target <= pc + 1 {
                            return Err(bad(pc, "If jumps backwards".into()));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub fn call_args(&self, args: u32, nargs: u32) -> &[Arg] {
        &self.args[args as usize..(args + nargs) as usize]
    }

    /// The calls of a VM function, in order: `(callee index, arguments)`.
    pub fn calls<'a>(&'a self, f: &FuncInfo) -> impl Iterator<Item = (u32, &'a [Arg])> + 'a {
        self.instrs[f.start..f.end]
            .iter()
            .filter_map(move |i| match *i {
                Instr::Call {
                    func, args, nargs, ..
                } => Some((func, self.call_args(args, nargs))),
                _ => None,
            })
    }

    /// An executable with no bytecode and no constants whose function table is one packed
    /// entry per name: how a kernel-only library's kernels are held (docs/tvm-format.md §1.4).
    pub fn packed_only(names: &[String]) -> Executable {
        Executable {
            funcs: names
                .iter()
                .map(|n| FuncInfo {
                    kind: FuncKind::Packed,
                    name: n.clone(),
                    start: 0,
                    end: 0,
                    num_args: 0,
                    register_file_size: 0,
                    param_names: Vec::new(),
                })
                .collect(),
            constants: Vec::new(),
            in_payload: Vec::new(),
            instrs: Vec::new(),
            args: Vec::new(),
        }
    }

    /// Index of a function by name.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.funcs.iter().position(|f| f.name == name)
    }
}

/// The instruction `off` after `pc`; `None` when that is before 0 or not representable (a
/// jump offset is a word of the file: i64::MAX must not overflow, found by the fuzzer).
fn relative(pc: usize, off: i64) -> Option<usize> {
    i64::try_from(pc)
        .ok()
        .and_then(|pc| pc.checked_add(off))
        .and_then(|t| usize::try_from(t).ok())
}

fn decode_reg(w: i64) -> Result<Arg, String> {
    match w {
        VOID_REGISTER => Ok(Arg::Void),
        VM_REGISTER => Ok(Arg::Vm),
        r => u32::try_from(r)
            .map(Arg::Reg)
            .map_err(|_| format!("bad register {r}")),
    }
}

fn decode_arg(word: i64) -> Result<Arg, String> {
    let kind = (word as u64) >> ARG_KIND_SHIFT;
    // Shifting the kind out and back arithmetically sign-extends the 56-bit value.
    let tag_bits = 64 - ARG_KIND_SHIFT;
    let value = (word << tag_bits) >> tag_bits;
    let idx = |v: i64| u32::try_from(v).map_err(|_| format!("bad index {v}"));
    match kind {
        arg_kind::REGISTER => decode_reg(value),
        arg_kind::IMMEDIATE => Ok(Arg::Imm(value)),
        arg_kind::CONST_IDX => Ok(Arg::Const(idx(value)?)),
        arg_kind::FUNC_IDX => Ok(Arg::Func(idx(value)?)),
        k => Err(format!("unknown argument kind {k}")),
    }
}

fn parse_func(r: &mut Reader) -> Result<FuncInfo> {
    let kind = match r.i32()? {
        func_kind::PACKED => FuncKind::Packed,
        func_kind::VM => FuncKind::Vm,
        func_kind::VM_TIR => FuncKind::VmTir,
        k => return Err(r.err(format!("unknown function kind {k}"))),
    };
    let name = r.str()?;
    let start = r.i64()?;
    let end = r.i64()?;
    let num_args = r.i64()?;
    let rfs = r.i64()?;
    let nparams = r.count(8)?;
    let param_names = (0..nparams).map(|_| r.str()).collect::<Result<Vec<_>>>()?;
    let to_usize = |v: i64, what: &str| {
        usize::try_from(v).map_err(|_| Error::Format(format!("function `{name}`: bad {what} {v}")))
    };
    let (start, end, num_args, register_file_size) = if kind.is_relax() {
        let n = to_usize(num_args, "argument count")?;
        if param_names.len() != n {
            return Err(Error::Format(format!(
                "function `{name}` has {n} arguments but {} parameter names",
                param_names.len()
            )));
        }
        let rfs = to_usize(rfs, "register count")?;
        if kind == FuncKind::VmTir {
            // No bytecode: the registers hold the arguments, then the result (§3.6).
            if rfs <= n {
                return Err(Error::Format(format!(
                    "compiled function `{name}` has {n} arguments but {rfs} registers"
                )));
            }
            (0, 0, n, rfs)
        } else {
            (to_usize(start, "start")?, to_usize(end, "end")?, n, rfs)
        }
    } else {
        (0, 0, 0, 0)
    };
    if register_file_size > 1 << 20 {
        return Err(Error::Format(format!(
            "function `{name}` asks for {register_file_size} registers"
        )));
    }
    Ok(FuncInfo {
        kind,
        name,
        start,
        end,
        num_args,
        register_file_size,
        param_names,
    })
}

/// A tensor record (docs/tvm-format.md §5.2) of the constant pool, checked; its data is
/// left where it is.
fn parse_tensor(r: &mut Reader) -> Result<InPayload> {
    let magic = r.u64()?;
    if magic != TENSOR_MAGIC {
        return Err(r.err(format!("bad tensor magic {magic:#018x}")));
    }
    let _reserved = r.u64()?;
    let dev_type = r.i32()?;
    let _dev_id = r.i32()?;
    if dev_type != crate::host::abi::DEVICE_CPU {
        return Err(r.err(format!("tensor saved for device type {dev_type}, not CPU")));
    }
    let ndim = r.i32()?;
    let ndim = usize::try_from(ndim).map_err(|_| r.err(format!("bad ndim {ndim}")))?;
    if ndim * 8 > r.remaining() {
        return Err(r.err(format!("bad ndim {ndim}")));
    }
    let dtype = r.dtype()?;
    let shape = (0..ndim).map(|_| r.i64()).collect::<Result<Vec<_>>>()?;
    let nbytes = r.count(1)?;
    let start = r.pos;
    r.bytes(nbytes)?;
    let expect = crate::tensor::byte_size(&shape, dtype).map_err(|e| r.err(e))?;
    if expect != nbytes {
        return Err(r.err(format!(
            "{dtype} tensor of shape {shape:?} has {nbytes} data bytes, expected {expect}"
        )));
    }
    Ok(InPayload {
        range: start..start + nbytes,
        shape,
        dtype,
    })
}

impl InPayload {
    /// The tensor, copied out of `payload` (the bytes it was parsed from); with `page_out`,
    /// the pages holding only its bytes are handed back to the system (`host::pages`).
    pub(crate) fn copy_from(&self, payload: &[u8], page_out: bool) -> Result<Tensor> {
        let bytes = payload.get(self.range.clone()).ok_or_else(|| {
            Error::Format(format!(
                "constant bytes {:?} lie outside the VM executable",
                self.range
            ))
        })?;
        let t = Tensor::from_bytes(&self.shape, self.dtype, bytes)?;
        if page_out {
            crate::host::pages::page_out(bytes);
        }
        Ok(t)
    }
}

/// A constant: a value, or (`Value::None` and `Some`) a tensor still in the payload.
fn parse_constant(r: &mut Reader) -> Result<(Value, Option<InPayload>)> {
    use crate::host::abi::type_index as ti;
    let tag = r.i32()?;
    Ok(match tag {
        ti::DATA_TYPE => (Value::DType(r.dtype()?), None),
        65 => (Value::Str(Arc::from(r.str()?)), None),
        69 => (Value::Shape(Arc::from(r.i64_vec()?)), None),
        ti::INT => (Value::Int(r.i64()?), None),
        ti::FLOAT => (Value::Float(r.f64()?), None),
        ti::TENSOR => (Value::None, Some(parse_tensor(r)?)),
        t => return Err(r.err(format!("unsupported constant type index {t}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_words_decode_with_sign() {
        assert_eq!(decode_arg(0x0100_0000_0000_0002), Ok(Arg::Imm(2)));
        assert_eq!(decode_arg(0x01ff_ffff_ffff_ffff), Ok(Arg::Imm(-1)));
        assert_eq!(decode_arg(0x0200_0000_0000_0003), Ok(Arg::Const(3)));
        assert_eq!(decode_arg(0x0040_0000_0000_0000), Ok(Arg::Void));
        assert_eq!(decode_arg(0x0040_0000_0000_0001), Ok(Arg::Vm));
        assert!(decode_arg(0x0700_0000_0000_0000).is_err());
    }

    #[test]
    fn jump_offsets_at_the_ends_of_i64_are_out_of_range() {
        assert_eq!(relative(5, -2), Some(3));
        assert_eq!(relative(5, -6), None);
        assert_eq!(relative(5, i64::MAX), None);
        assert_eq!(relative(0, i64::MIN), None);
        assert_eq!(relative(usize::MAX, 0), None);
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        assert!(Executable::parse(&[]).is_err());
        assert!(Executable::parse(&[0u8; 64]).is_err());
        let mut b = MAGIC_V2.to_le_bytes().to_vec();
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(Executable::parse(&b).is_err());
    }
}
