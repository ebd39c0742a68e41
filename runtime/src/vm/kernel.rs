//! Calling compiled kernels through the safe-call ABI (docs/tvm-format.md §7).

use std::time::Instant;

use super::program::Program;
use super::Session;
use crate::error::{Error, Result};
use crate::host::abi::{type_index as ti, DLDevice, DLTensor, FfiAny, SafeCallFn, DEVICE_CPU};
use crate::loader::executable::Arg;
use crate::value::Value;

impl Session {
    /// Call kernel `k` (function-table entry `func`) with `args`, which it may write.
    pub(super) fn call_kernel_values(
        &mut self,
        m: &Program,
        func: u32,
        k: SafeCallFn,
        args: &[Value],
    ) -> Result<Value> {
        let mut dl = std::mem::take(&mut self.dl_scratch);
        let mut anys = std::mem::take(&mut self.any_scratch);
        let r = invoke_kernel(&mut dl, &mut anys, k, args.len(), |i| {
            ArgView::Val(&args[i])
        });
        self.dl_scratch = dl;
        self.any_scratch = anys;
        r.map_err(|e| e.into_error(&m.exe().funcs[func as usize].name))
    }

    /// A kernel call straight from the instruction's argument words: registers and constants
    /// are read in place, without the reference-count traffic of cloning them into values.
    pub(super) fn call_kernel_in_place(
        &mut self,
        m: &Program,
        func: u32,
        k: SafeCallFn,
        base: usize,
        words: &[Arg],
    ) -> Result<Value> {
        let start = self.profiler.is_some().then(Instant::now);
        let mut dl = std::mem::take(&mut self.dl_scratch);
        let mut anys = std::mem::take(&mut self.any_scratch);
        let regs = &self.regs;
        let r = invoke_kernel(&mut dl, &mut anys, k, words.len(), |i| match words[i] {
            Arg::Reg(r) => ArgView::Val(&regs[base + r as usize]),
            Arg::Const(c) => ArgView::Val(&m.exe().constants[c as usize]),
            Arg::Imm(v) => ArgView::Int(v),
            Arg::Void | Arg::Vm | Arg::Func(_) => ArgView::Other("special register or function"),
        });
        self.dl_scratch = dl;
        self.any_scratch = anys;
        if let Some(start) = start {
            self.record(m, func, start);
        }
        r.map_err(|e| e.into_error(&m.exe().funcs[func as usize].name))
    }
}

/// A kernel argument as seen without cloning it.
enum ArgView<'a> {
    Val(&'a Value),
    Int(i64),
    Other(&'static str),
}

enum KernelFailure {
    BadArgument(usize, &'static str),
    Raised { kind: String, message: String },
}

impl KernelFailure {
    fn into_error(self, kernel: &str) -> Error {
        match self {
            KernelFailure::BadArgument(i, kind) => Error::Mismatch(format!(
                "kernel `{kernel}`: argument {i} is a {kind}, which kernels cannot take"
            )),
            KernelFailure::Raised { kind, message } => Error::Kernel {
                kernel: kernel.to_string(),
                kind,
                message,
            },
        }
    }
}

/// Call kernel `k` with `n` arguments: tensors as `DLTensor*` (type 7, offset folded into
/// `data`), scalars by value.
fn invoke_kernel<'a>(
    dl: &mut Vec<DLTensor>,
    anys: &mut Vec<FfiAny>,
    k: SafeCallFn,
    n: usize,
    get: impl Fn(usize) -> ArgView<'a>,
) -> Result<Value, KernelFailure> {
    dl.clear();
    anys.clear();
    for i in 0..n {
        match get(i) {
            ArgView::Val(Value::Tensor(t)) => dl.push(DLTensor {
                data: t.data_ptr().cast(),
                device: DLDevice {
                    device_type: DEVICE_CPU,
                    device_id: 0,
                },
                ndim: t.ndim() as i32,
                dtype: t.dtype(),
                shape: t.shape().as_ptr().cast_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            }),
            ArgView::Val(
                Value::None
                | Value::Int(_)
                | Value::Bool(_)
                | Value::Float(_)
                | Value::DType(_)
                | Value::OpaquePtr(_),
            )
            | ArgView::Int(_) => {}
            ArgView::Val(v) => return Err(KernelFailure::BadArgument(i, v.kind())),
            ArgView::Other(what) => return Err(KernelFailure::BadArgument(i, what)),
        }
    }
    // `dl` is complete and not resized below, so pointers into it stay valid.
    let mut next = 0;
    for i in 0..n {
        anys.push(match get(i) {
            ArgView::Val(Value::Tensor(_)) => {
                let p = &dl[next] as *const DLTensor;
                next += 1;
                FfiAny::ptr(ti::DL_TENSOR_PTR, p.cast())
            }
            ArgView::Val(Value::Int(i)) => FfiAny::int(*i),
            ArgView::Int(i) => FfiAny::int(i),
            ArgView::Val(Value::Bool(b)) => FfiAny::bool(*b),
            ArgView::Val(Value::Float(f)) => FfiAny::float(*f),
            ArgView::Val(Value::DType(d)) => FfiAny::dtype(*d),
            ArgView::Val(Value::OpaquePtr(p)) => FfiAny::ptr(ti::OPAQUE_PTR, *p as *const _),
            _ => FfiAny::NONE,
        });
    }
    let mut result = FfiAny::NONE;
    // SAFETY: `k` is a safe-call kernel of the model's library (kept alive by the model); every
    // tensor argument points at a DLTensor in `dl` whose data and shape belong to values the
    // caller keeps alive for the duration of the call.
    let rc = unsafe { k(std::ptr::null_mut(), anys.as_ptr(), n as i32, &mut result) };
    if rc != 0 {
        let (kind, message) = crate::host::error_slot::take_error().unwrap_or_else(|| {
            (
                "RuntimeError".into(),
                format!("returned {rc} without an error message"),
            )
        });
        return Err(KernelFailure::Raised { kind, message });
    }
    Ok(match result.type_index {
        ti::INT => Value::Int(result.value as i64),
        ti::BOOL => Value::Bool(result.value != 0),
        ti::FLOAT => Value::Float(f64::from_bits(result.value)),
        _ => Value::None,
    })
}
