//! Calling compiled kernels through the safe-call ABI (docs/tvm-format.md §7).

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

use super::program::{Callee, Program};
use super::Session;
use crate::device::opencl::exec::{CallBufs, CallState, ClBuf, DEVICE_OPENCL};
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
        let r = invoke_kernel(&mut dl, &mut anys, k, args.len(), None, false, |i| {
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
        let r = invoke_kernel(
            &mut dl,
            &mut anys,
            k,
            words.len(),
            None,
            false,
            |i| match words[i] {
                Arg::Reg(r) => ArgView::Val(&regs[base + r as usize]),
                Arg::Const(c) => ArgView::Val(&m.exe().constants[c as usize]),
                Arg::Imm(v) => ArgView::Int(v),
                Arg::Void | Arg::Vm | Arg::Func(_) => {
                    ArgView::Other("special register or function")
                }
            },
        );
        self.dl_scratch = dl;
        self.any_scratch = anys;
        if let Some(start) = start {
            self.record(m, func, start);
        }
        r.map_err(|e| e.into_error(&m.exe().funcs[func as usize].name))
    }
}

impl Session {
    /// Call kernel `k` (entry `func`) of a Relax model compiled for OpenCL, from the
    /// instruction's argument words (`base`: the frame's first register) or, without them,
    /// from `values` (docs/opencl.md §8). Device tensors go to the host function as the
    /// device's (their buffer handles), host tensors (shape heaps) as the host's; the session's
    /// device state is lent to the thread while it runs, and only this call's device tensors
    /// and workspaces may be launched on. Nothing waits for the launches: the queue runs them
    /// in order, and a copy back to the host waits for them.
    pub(super) fn call_device_kernel(
        &mut self,
        m: &Program,
        func: u32,
        k: SafeCallFn,
        words: Option<(usize, &[Arg])>,
        values: &[Value],
    ) -> Result<Value> {
        let start = self.profiler.is_some().then(Instant::now);
        let budget = self.pool.budget_left();
        let mut dl = std::mem::take(&mut self.dl_scratch);
        let mut anys = std::mem::take(&mut self.any_scratch);
        let Some(dev) = self.device.as_mut() else {
            return Err(Error::Unsupported(
                "a device kernel in a session without a device".into(),
            ));
        };
        let regs = &self.regs;
        let get = |i: usize| match words {
            Some((base, words)) => match words[i] {
                Arg::Reg(r) => ArgView::Val(&regs[base + r as usize]),
                Arg::Const(c) => ArgView::Val(&m.exe().constants[c as usize]),
                Arg::Imm(v) => ArgView::Int(v),
                Arg::Void | Arg::Vm | Arg::Func(_) => {
                    ArgView::Other("special register or function")
                }
            },
            None => ArgView::Val(&values[i]),
        };
        let n = words.map_or(values.len(), |(_, w)| w.len());
        let bufs: CallBufs<'_> = (0..n)
            .filter_map(|i| match get(i) {
                ArgView::Val(Value::DeviceTensor(d)) => Some(d.storage().cl_buf()),
                _ => None,
            })
            .collect();
        let mut state = CallState::new(dev, bufs, budget).poisoned(self.pool.poisons());
        let r = state.run(|| invoke_kernel(&mut dl, &mut anys, k, n, None, true, get));
        let times = std::mem::take(&mut state.times);
        let exhausted = state.exhausted.take();
        let driver = state.device_failed.take();
        drop(state);
        self.dl_scratch = dl;
        self.any_scratch = anys;
        self.device_times.extend(times);
        if let Some(start) = start {
            self.record(m, func, start);
        }
        let name = || &m.exe().funcs[func as usize].name;
        if let Some(message) = driver {
            return Err(Error::Device {
                device: "opencl".into(),
                message: format!("`{}`: {message}", name()),
            });
        }
        if let Some(message) = exhausted {
            return Err(Error::ResourceExhausted {
                budget: "SessionOptions::memory_budget_bytes",
                message: format!("`{}`: {message}", name()),
            });
        }
        r.map_err(|e| e.into_error(name()))
    }

    /// Call kernel `func` of a kernel-only library compiled for OpenCL (docs/opencl.md §5):
    /// each tensor argument is copied into a device buffer, the host function runs with this
    /// session's device state lent to the thread (it launches the kernels), and once the queue
    /// has finished every tensor argument is copied back, since the kernels may write any of
    /// them (the caller made sure each is exclusive).
    pub(super) fn call_kernel_on_device(
        &mut self,
        m: &Program,
        func: u32,
        args: &mut [Value],
    ) -> Result<Value> {
        let name = m.exe().funcs[func as usize].name.as_str();
        let Callee::Kernel(k) = *m.callee(func) else {
            return Err(Error::InvalidArgument(format!("`{name}` is not a kernel")));
        };
        let failed = |e: crate::device::opencl::ClError| Error::Device {
            device: "opencl".into(),
            message: format!("`{name}`: {e}"),
        };
        // Device memory counts against the session's memory budget, like the storage the VM
        // allocates (docs/opencl.md §5): the copies of the arguments, then any workspace.
        let budget = self.pool.budget_left();
        let needed: usize = args
            .iter()
            .filter_map(|a| a.as_tensor().map(|t| t.byte_len()))
            .fold(0, usize::saturating_add);
        if needed > budget {
            return Err(Error::ResourceExhausted {
                budget: "SessionOptions::memory_budget_bytes",
                message: format!(
                    "`{name}` needs {needed} bytes of device memory for its arguments, with {budget} \
                     bytes of the budget left"
                ),
            });
        }
        let dev = self
            .device
            .as_mut()
            .expect("the caller checked the session has a device");
        // Device tensors (`Session::upload`, an RPC client's `remote.cl` memory) are passed as
        // they are, when they are on this session's device.
        for a in args.iter() {
            if let Value::DeviceTensor(t) = a {
                if t.device() != dev.device()
                    || !Arc::ptr_eq(t.storage().buffer().context(), dev.context())
                {
                    return Err(Error::InvalidArgument(format!(
                        "`{name}`: a tensor on {} passed to a session on {}",
                        t.device(),
                        dev.device()
                    )));
                }
            }
        }
        // The device copies of host tensors, and each argument's device data (read only for
        // host tensors, so left empty, and unallocated, when there are none).
        let mut bufs = Vec::new();
        let mut data: Vec<*mut c_void> = Vec::new();
        let any_host = args.iter().any(|a| matches!(a, Value::Tensor(_)));
        for a in args.iter().filter(|_| any_host) {
            data.push(match a {
                Value::Tensor(t) => {
                    let b = dev.context().buffer(t.byte_len(), false).map_err(failed)?;
                    dev.queue().write(&b, 0, t.data()).map_err(failed)?;
                    let b = ClBuf::new(b);
                    let h = b.handle();
                    bufs.push(b);
                    h
                }
                _ => std::ptr::null_mut(),
            });
        }
        let placed = Placed {
            data: &data,
            device: DLDevice {
                device_type: DEVICE_OPENCL,
                device_id: dev.device_index as i32,
            },
        };
        let mut dl = std::mem::take(&mut self.dl_scratch);
        let mut anys = std::mem::take(&mut self.any_scratch);
        let on_device = args.iter().filter_map(|a| match a {
            Value::DeviceTensor(t) => Some(t.storage().cl_buf()),
            _ => None,
        });
        let mut state = CallState::new(
            dev,
            bufs.iter().map(|b| &**b).chain(on_device).collect(),
            budget - needed,
        )
        .poisoned(self.pool.poisons());
        let r = state.run(|| {
            invoke_kernel(
                &mut dl,
                &mut anys,
                k,
                args.len(),
                Some(&placed),
                true,
                |i| ArgView::Val(&args[i]),
            )
        });
        let times = std::mem::take(&mut state.times);
        let driver = state.device_failed.take();
        let exhausted = state.exhausted.take();
        drop(state);
        self.dl_scratch = dl;
        self.any_scratch = anys;
        let dev = self.device.as_mut().expect("checked above");
        dev.queue().finish().map_err(failed)?;
        if let Some(message) = driver {
            return Err(Error::Device {
                device: "opencl".into(),
                message: format!("`{name}`: {message}"),
            });
        }
        if let Some(message) = exhausted {
            return Err(Error::ResourceExhausted {
                budget: "SessionOptions::memory_budget_bytes",
                message: format!("`{name}`: {message}"),
            });
        }
        let out = r.map_err(|e| e.into_error(name))?;
        let mut j = 0;
        for a in args.iter_mut() {
            if let Value::Tensor(t) = a {
                dev.queue()
                    .read(bufs[j].buffer(), 0, t.data_mut()?)
                    .map_err(failed)?;
                j += 1;
            }
        }
        self.device_times = times;
        Ok(out)
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

/// Where the host tensors of a kernel call were copied: the device `data` of argument `i` (null
/// for the others), and the device.
struct Placed<'p> {
    data: &'p [*mut c_void],
    device: DLDevice,
}

/// Call kernel `k` with `n` arguments: tensors as `DLTensor*` (type 7, offset folded into
/// `data`; with `placed`, the device's data instead), scalars by value. Inlined into each
/// caller so that the host calls, which pass `None`, test nothing per tensor for `placed`.
#[inline(always)]
fn invoke_kernel<'a>(
    dl: &mut Vec<DLTensor>,
    anys: &mut Vec<FfiAny>,
    k: SafeCallFn,
    n: usize,
    placed: Option<&Placed<'_>>,
    on_device: bool,
    get: impl Fn(usize) -> ArgView<'a>,
) -> Result<Value, KernelFailure> {
    dl.clear();
    anys.clear();
    for i in 0..n {
        match get(i) {
            ArgView::Val(Value::Tensor(t)) => dl.push(DLTensor {
                data: match placed {
                    Some(p) => p.data[i],
                    None => t.data_ptr().cast(),
                },
                device: match placed {
                    Some(p) => p.device,
                    None => DLDevice {
                        device_type: DEVICE_CPU,
                        device_id: 0,
                    },
                },
                ndim: t.ndim() as i32,
                dtype: t.dtype(),
                shape: t.shape().as_ptr().cast_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            }),
            // Only where the host function was compiled for the device (`on_device`): any
            // other kernel would read the handle as the tensor's bytes.
            ArgView::Val(Value::DeviceTensor(d)) if on_device => dl.push(DLTensor {
                data: d.handle(),
                device: d.device().dl(),
                ndim: d.ndim() as i32,
                dtype: d.dtype(),
                shape: d.shape().as_ptr().cast_mut(),
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
            ArgView::Val(Value::Tensor(_) | Value::DeviceTensor(_)) => {
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
