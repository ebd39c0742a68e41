//! The `vm.builtin.*` functions TVM 0.27's Relax pipeline emits for CPU (docs/tvm-format.md §9).

use std::sync::Arc;

use crate::dtype::{code, DType};
use crate::error::{Error, Result};
use crate::tensor::{byte_size, Storage, Tensor};
use crate::value::{Function, Value};
use crate::vm::program::Program;
use crate::vm::Session;

macro_rules! builtins {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// A builtin Mote implements.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Builtin { $($variant),* }

        impl Builtin {
            pub fn from_name(name: &str) -> Option<Builtin> {
                match name { $($name => Some(Builtin::$variant),)* _ => None }
            }
            pub fn name(self) -> &'static str {
                match self { $(Builtin::$variant => $name),* }
            }
        }

        /// Names of every builtin Mote implements.
        pub const BUILTIN_NAMES: &[&str] = &[$($name),*];
    };
}

builtins! {
    CheckTensorInfo => "vm.builtin.check_tensor_info",
    CheckShapeInfo => "vm.builtin.check_shape_info",
    CheckPrimValueInfo => "vm.builtin.check_prim_value_info",
    CheckStringInfo => "vm.builtin.check_string_info",
    CheckTupleInfo => "vm.builtin.check_tuple_info",
    CheckFuncInfo => "vm.builtin.check_func_info",
    MatchShape => "vm.builtin.match_shape",
    MatchPrimValue => "vm.builtin.match_prim_value",
    MakeShape => "vm.builtin.make_shape",
    MakePrimValue => "vm.builtin.make_prim_value",
    AllocShapeHeap => "vm.builtin.alloc_shape_heap",
    AllocStorage => "vm.builtin.alloc_storage",
    AllocTensor => "vm.builtin.alloc_tensor",
    NullValue => "vm.builtin.null_value",
    Reshape => "vm.builtin.reshape",
    ShapeOf => "vm.builtin.shape_of",
    TensorToShape => "vm.builtin.tensor_to_shape",
    EnsureZeroOffset => "vm.builtin.ensure_zero_offset",
    ToDevice => "vm.builtin.to_device",
    Copy => "vm.builtin.copy",
    MakeTuple => "vm.builtin.make_tuple",
    TupleGetItem => "vm.builtin.tuple_getitem",
    TupleResetItem => "vm.builtin.tuple_reset_item",
    ReadIfCond => "vm.builtin.read_if_cond",
    MakeClosure => "vm.builtin.make_closure",
    InvokeClosure => "vm.builtin.invoke_closure",
    CallTirDyn => "vm.builtin.call_tir_dyn",
    MemoryManagerClear => "vm.builtin.memory_manager.clear",
}

/// The error-context string the compiler passes to checks (may be None), borrowed: the checks
/// run on every call, and only a failing one formats it.
fn context(v: Option<&Value>) -> &str {
    match v {
        Some(Value::Str(s)) => s.trim(),
        _ => "",
    }
}

fn mismatch(ctx: &str, what: String) -> Error {
    if ctx.is_empty() {
        Error::Mismatch(what)
    } else {
        Error::Mismatch(format!("{what} [{ctx}]"))
    }
}

fn arg(b: Builtin, args: &[Value], i: usize) -> Result<&Value> {
    args.get(i).ok_or_else(|| {
        Error::Mismatch(format!("{} called with {} arguments", b.name(), args.len()))
    })
}

fn shape_of_value<'a>(v: &'a Value, what: &str) -> Result<&'a [i64]> {
    match v {
        Value::Tensor(t) => Ok(t.shape()),
        Value::DeviceTensor(t) => Ok(t.shape()),
        Value::Shape(s) => Ok(s),
        v => Err(Error::Mismatch(format!(
            "{what}: expected a tensor or shape, got {}",
            v.kind()
        ))),
    }
}

/// The int64 shape heap, read and written in place.
struct Heap<'a>(Option<&'a Tensor>);

impl Heap<'_> {
    fn slot(&self, i: i64) -> Result<*mut i64> {
        let t = self
            .0
            .ok_or_else(|| Error::Mismatch("symbolic shape without a shape heap".into()))?;
        if t.dtype() != DType::I64 || i < 0 || i as usize >= t.num_elements() {
            return Err(Error::Mismatch(format!(
                "shape heap index {i} out of range"
            )));
        }
        Ok(t.data_ptr().cast::<i64>().wrapping_add(i as usize))
    }
    fn get(&self, i: i64) -> Result<i64> {
        // SAFETY: `slot` checked the index against the heap's int64 elements; the heap is a
        // 64-byte aligned tensor allocated by `alloc_shape_heap`.
        self.slot(i).map(|p| unsafe { p.read() })
    }
    fn set(&self, i: i64, v: i64) -> Result<()> {
        // SAFETY: as in `get`; the heap belongs to this session's running frame alone.
        self.slot(i).map(|p| unsafe { p.write(v) })
    }
}

fn heap_of(v: &Value) -> Result<Heap<'_>> {
    match v {
        Value::None => Ok(Heap(None)),
        Value::Tensor(t) => Ok(Heap(Some(t))),
        v => Err(Error::Mismatch(format!("shape heap is a {}", v.kind()))),
    }
}

/// One `match_shape`/`match_prim_value` step.
fn match_dim(
    heap: &Heap,
    code: i64,
    v: i64,
    actual: i64,
    ctx: &str,
    what: &dyn Fn() -> String,
) -> Result<()> {
    match code {
        0 if actual != v => Err(mismatch(
            ctx,
            format!("{}: expected {v}, got {actual}", what()),
        )),
        1 => heap.set(v, actual),
        3 => {
            let expect = heap.get(v)?;
            if expect != actual {
                Err(mismatch(
                    ctx,
                    format!(
                        "{}: expected {expect} (bound earlier), got {actual}",
                        what()
                    ),
                ))
            } else {
                Ok(())
            }
        }
        0 | 2 => Ok(()),
        c => Err(Error::Mismatch(format!("unknown match code {c}"))),
    }
}

fn make_dim(heap: &Heap, code: i64, v: i64) -> Result<i64> {
    match code {
        0 => Ok(v),
        1 => heap.get(v),
        c => Err(Error::Mismatch(format!("unknown make_shape code {c}"))),
    }
}

fn read_scalar_int(t: &Tensor) -> Result<i64> {
    let dt = t.dtype();
    if !matches!(dt.code, code::INT | code::UINT | code::BOOL) || t.num_elements() == 0 {
        return Err(Error::Mismatch(format!(
            "condition tensor of {dt} with {} elements",
            t.num_elements()
        )));
    }
    let b = t.data();
    Ok(match dt.bits {
        1 | 8 => b[0] as i8 as i64,
        16 => i16::from_le_bytes([b[0], b[1]]) as i64,
        32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        64 => i64::from_le_bytes(
            b[..8]
                .try_into()
                .map_err(|_| Error::Mismatch("short tensor".into()))?,
        ),
        bits => {
            return Err(Error::Mismatch(format!(
                "condition tensor of {bits}-bit ints"
            )))
        }
    })
}

impl Session {
    pub(crate) fn builtin(&mut self, m: &Program, b: Builtin, args: &[Value]) -> Result<Value> {
        let a = |i| arg(b, args, i);
        let int = |i: usize| -> Result<i64> { a(i)?.expect_int(b.name()) };
        Ok(match b {
            Builtin::CheckTensorInfo => {
                let ctx = context(args.last());
                // Like TVM, the device is not checked here: the kernels' host code does that.
                let (shape, dtype) = match a(0)? {
                    Value::Tensor(t) => (t.shape(), t.dtype()),
                    Value::DeviceTensor(t) => (t.shape(), t.dtype()),
                    v => {
                        return Err(mismatch(
                            ctx,
                            format!("expected a tensor, got {}", v.kind()),
                        ))
                    }
                };
                let ndim = int(1)?;
                if ndim != -1 && ndim != shape.len() as i64 {
                    return Err(mismatch(
                        ctx,
                        format!(
                            "expected a tensor of rank {ndim}, got rank {} (shape {shape:?})",
                            shape.len(),
                        ),
                    ));
                }
                if args.len() == 4 {
                    if let Value::DType(d) = a(2)? {
                        if *d != dtype {
                            return Err(mismatch(ctx, format!("expected dtype {d}, got {dtype}")));
                        }
                    }
                }
                Value::None
            }
            Builtin::CheckShapeInfo => {
                let ctx = context(args.last());
                let s = match a(0)? {
                    Value::Shape(s) => s,
                    v => return Err(mismatch(ctx, format!("expected a shape, got {}", v.kind()))),
                };
                let ndim = int(1)?;
                if ndim != -1 && ndim != s.len() as i64 {
                    return Err(mismatch(
                        ctx,
                        format!("expected a shape of {ndim} dims, got {}", s.len()),
                    ));
                }
                Value::None
            }
            Builtin::CheckPrimValueInfo => {
                let ctx = context(args.last());
                let v = a(0)?;
                let ok = match a(1)? {
                    Value::DType(d) if d.is_float() => matches!(v, Value::Float(_) | Value::Int(_)),
                    Value::DType(d) if d.code == code::HANDLE => {
                        matches!(v, Value::OpaquePtr(_) | Value::None)
                    }
                    Value::DType(_) => matches!(v, Value::Int(_) | Value::Bool(_)),
                    _ => true,
                };
                if !ok {
                    return Err(mismatch(
                        ctx,
                        format!("expected a {:?} value, got {}", a(1)?, v.kind()),
                    ));
                }
                Value::None
            }
            Builtin::CheckStringInfo => {
                if !matches!(a(0)?, Value::Str(_)) {
                    return Err(mismatch(
                        context(args.last()),
                        format!("expected a string, got {}", a(0)?.kind()),
                    ));
                }
                Value::None
            }
            Builtin::CheckTupleInfo => {
                let ctx = context(args.last());
                let n = int(1)?;
                match a(0)? {
                    Value::Tuple(t) if n == -1 || t.len() as i64 == n => Value::None,
                    Value::Tuple(t) => {
                        return Err(mismatch(
                            ctx,
                            format!("expected a tuple of {n}, got {}", t.len()),
                        ))
                    }
                    v => return Err(mismatch(ctx, format!("expected a tuple, got {}", v.kind()))),
                }
            }
            Builtin::CheckFuncInfo => match a(0)? {
                Value::Function(_) => Value::None,
                v => {
                    return Err(mismatch(
                        context(args.last()),
                        format!("expected a function, got {}", v.kind()),
                    ))
                }
            },
            Builtin::MatchShape => {
                let ctx = context(args.last());
                let shape = shape_of_value(a(0)?, "match_shape")
                    .map_err(|e| mismatch(ctx, e.to_string()))?;
                let heap = heap_of(a(1)?)?;
                let n = int(2)?;
                if args.len() as i64 != 4 + 2 * n {
                    return Err(Error::Mismatch(format!(
                        "match_shape: {} arguments for {n} dims",
                        args.len()
                    )));
                }
                if shape.len() as i64 != n {
                    return Err(mismatch(
                        ctx,
                        format!("expected rank {n}, got shape {shape:?}"),
                    ));
                }
                for (i, &dim) in shape.iter().enumerate() {
                    let (c, v) = (int(3 + 2 * i)?, int(4 + 2 * i)?);
                    match_dim(&heap, c, v, dim, ctx, &|| {
                        format!("dimension {i} of shape {shape:?}")
                    })?;
                }
                Value::None
            }
            Builtin::MatchPrimValue => {
                let ctx = context(args.last());
                let heap = heap_of(a(1)?)?;
                match_dim(&heap, int(2)?, int(3)?, int(0)?, ctx, &|| "value".into())?;
                Value::None
            }
            Builtin::MakeShape => {
                let heap = heap_of(a(0)?)?;
                let n = int(1)?;
                if n < 0 || args.len() as i64 != 2 + 2 * n {
                    return Err(Error::Mismatch(format!(
                        "make_shape: {} arguments for {n} dims",
                        args.len()
                    )));
                }
                // Shapes are short: build on the stack, allocate once.
                let mut small = [0i64; 8];
                let mut large = Vec::new();
                let dims: &mut [i64] = if n as usize <= small.len() {
                    &mut small[..n as usize]
                } else {
                    large.resize(n as usize, 0);
                    &mut large
                };
                for (i, d) in dims.iter_mut().enumerate() {
                    *d = make_dim(&heap, int(2 + 2 * i)?, int(3 + 2 * i)?)?;
                }
                Value::Shape(Arc::from(&*dims))
            }
            Builtin::MakePrimValue => Value::Int(make_dim(&heap_of(a(0)?)?, int(1)?, int(2)?)?),
            Builtin::AllocShapeHeap => {
                // Its size comes from the file, so it is the session's storage like any other:
                // from the session's pool (a heap of the same size is reused from one call to
                // the next, with no allocation) and under its memory budget, then zeroed.
                let n = int(1)?;
                let bytes = usize::try_from(n)
                    .ok()
                    .and_then(|n| n.checked_mul(8))
                    .ok_or_else(|| Error::Mismatch(format!("alloc_shape_heap: {n} entries")))?;
                let storage = Storage::alloc_hinted(bytes, Some(self.pool()), DType::I64)?;
                let mut heap = Tensor::view(storage, 0, Arc::from([n]), DType::I64)?;
                heap.data_mut()?.fill(0);
                Value::Tensor(heap)
            }
            Builtin::AllocStorage => {
                let size = a(1)?.expect_shape("alloc_storage size")?;
                // Device indices as TVM's VM numbers them: a session on a device has it first
                // and the host last (docs/tvm-format.md §10.6); otherwise the host is the only
                // one.
                let dev = int(2)?;
                let on_device = match (dev, self.device.is_some()) {
                    (0, true) => true,
                    (1 | -1, true) | (0 | -1, false) => false,
                    _ => {
                        return Err(Error::Unsupported(format!(
                            "storage on device index {dev}; this session has {}",
                            if self.device.is_some() {
                                "its OpenCL device (0) and the host (1)"
                            } else {
                                "the host only (0)"
                            }
                        )))
                    }
                };
                let hint = match a(3)? {
                    Value::DType(d) => *d,
                    _ => DType::U8,
                };
                if let Some(Value::Str(scope)) = args.get(4) {
                    if &**scope != "global" {
                        return Err(Error::Unsupported(format!("memory scope {scope:?}")));
                    }
                }
                let n = byte_size(size, hint)?;
                match self.device.as_mut() {
                    Some(d) if on_device => Value::DeviceStorage(d.alloc(n, &self.pool, hint)?),
                    _ => Value::Storage(Storage::alloc_hinted(n, Some(self.pool()), hint)?),
                }
            }
            Builtin::AllocTensor => {
                let storage = match a(0)? {
                    Value::Storage(s) => s.clone(),
                    Value::DeviceStorage(s) => {
                        // TVM's OpenCL host code takes device tensors at offset 0 only.
                        if int(1)? != 0 {
                            return Err(Error::Unsupported(format!(
                                "a device tensor at offset {} of its storage",
                                int(1)?
                            )));
                        }
                        let shape = a(2)?.expect_shape("alloc_tensor shape")?;
                        let Value::DType(dtype) = a(3)? else {
                            return Err(Error::Mismatch(format!(
                                "alloc_tensor: expected a dtype, got {}",
                                a(3)?.kind()
                            )));
                        };
                        return Ok(Value::DeviceTensor(crate::device::DeviceTensor::view(
                            s.clone(),
                            shape.clone(),
                            *dtype,
                        )?));
                    }
                    v => {
                        return Err(Error::Mismatch(format!(
                            "alloc_tensor: expected a storage, got {}",
                            v.kind()
                        )))
                    }
                };
                let offset = usize::try_from(int(1)?)
                    .map_err(|_| Error::Mismatch("alloc_tensor: negative offset".into()))?;
                let shape = a(2)?.expect_shape("alloc_tensor shape")?;
                let dtype = match a(3)? {
                    Value::DType(d) => *d,
                    v => {
                        return Err(Error::Mismatch(format!(
                            "alloc_tensor: expected a dtype, got {}",
                            v.kind()
                        )))
                    }
                };
                Value::Tensor(Tensor::view(storage, offset, shape.clone(), dtype)?)
            }
            Builtin::NullValue => Value::None,
            Builtin::Reshape => {
                let (dims, dtype) = match a(0)? {
                    Value::DeviceTensor(t) => (t.shape(), t.dtype()),
                    v => {
                        let t = v.expect_tensor("reshape")?;
                        (t.shape(), t.dtype())
                    }
                };
                let shape = a(1)?.expect_shape("reshape")?;
                if crate::tensor::num_elements(shape)? != crate::tensor::num_elements(dims)? {
                    return Err(Error::Mismatch(format!(
                        "cannot reshape a tensor of shape {dims:?} into {shape:?}"
                    )));
                }
                match a(0)? {
                    Value::DeviceTensor(t) => {
                        Value::DeviceTensor(crate::device::DeviceTensor::view(
                            t.storage().clone(),
                            shape.clone(),
                            dtype,
                        )?)
                    }
                    v => {
                        let t = v.expect_tensor("reshape")?;
                        Value::Tensor(Tensor::view(
                            t.storage().clone(),
                            t.byte_offset(),
                            shape.clone(),
                            dtype,
                        )?)
                    }
                }
            }
            Builtin::ShapeOf => match a(0)? {
                Value::DeviceTensor(t) => Value::Shape(t.shape_arc().clone()),
                v => Value::Shape(v.expect_tensor("shape_of")?.shape_arc().clone()),
            },
            Builtin::TensorToShape => {
                let t = a(0)?.expect_tensor("tensor_to_shape")?;
                if t.ndim() != 1 || t.dtype().code != code::INT {
                    return Err(Error::Mismatch(format!(
                        "tensor_to_shape: expected a 1-D int tensor, got {t:?}"
                    )));
                }
                let dims: Vec<i64> = match t.dtype().bits {
                    16 => t.as_slice::<i16>()?.iter().map(|&d| d as i64).collect(),
                    32 => t.as_slice::<i32>()?.iter().map(|&d| d as i64).collect(),
                    64 => t.as_slice::<i64>()?.to_vec(),
                    b => return Err(Error::Mismatch(format!("tensor_to_shape: {b}-bit ints"))),
                };
                Value::Shape(Arc::from(dims))
            }
            // Mote folds offsets into the data pointer for every call: nothing to do.
            Builtin::EnsureZeroOffset => {
                Value::Tensor(a(0)?.expect_tensor("ensure_zero_offset")?.clone())
            }
            // `R.to_vdevice` between the session's OpenCL device and the host.
            Builtin::ToDevice if self.device.is_some() => {
                let (dev_type, dev_id) = (int(1)?, int(2)?);
                let d = self.device.as_mut().expect("matched above");
                let here = d.device().dl();
                match a(0)? {
                    Value::Tensor(t)
                        if dev_type == i64::from(here.device_type)
                            && dev_id == i64::from(here.device_id) =>
                    {
                        Value::DeviceTensor(d.upload(t, &self.pool)?)
                    }
                    Value::Tensor(t) if dev_type == crate::host::abi::DEVICE_CPU as i64 => {
                        Value::Tensor(t.deep_copy()?)
                    }
                    Value::DeviceTensor(t) if dev_type == crate::host::abi::DEVICE_CPU as i64 => {
                        Value::Tensor(d.download(t)?)
                    }
                    v => {
                        return Err(Error::Unsupported(format!(
                            "copying a {} to device ({dev_type}, {dev_id}); this session runs on \
                             {} and the host",
                            v.kind(),
                            d.device()
                        )))
                    }
                }
            }
            Builtin::ToDevice => {
                let t = a(0)?.expect_tensor("to_device")?;
                let dev = int(1)?;
                if dev != crate::host::abi::DEVICE_CPU as i64 {
                    return Err(Error::Unsupported(format!(
                        "copy to device type {dev}; Mote runs on CPU"
                    )));
                }
                Value::Tensor(t.deep_copy()?)
            }
            Builtin::Copy => a(0)?.clone(),
            Builtin::MakeTuple => Value::Tuple(Arc::new(args.to_vec())),
            Builtin::TupleGetItem => {
                let i = int(1)?;
                match a(0)? {
                    Value::Tuple(t) => usize::try_from(i)
                        .ok()
                        .and_then(|i| t.get(i))
                        .cloned()
                        .ok_or_else(|| {
                            Error::Mismatch(format!(
                                "tuple index {i} out of range for {} items",
                                t.len()
                            ))
                        })?,
                    v => return Err(Error::Mismatch(format!("tuple_getitem on a {}", v.kind()))),
                }
            }
            // Only a hint to free memory early; tuples here are immutable and shared.
            Builtin::TupleResetItem => Value::None,
            Builtin::ReadIfCond => match a(0)? {
                Value::Tensor(t) => Value::Bool(read_scalar_int(t)? != 0),
                v => Value::Bool(
                    v.as_int().ok_or_else(|| {
                        Error::Mismatch(format!("if condition is a {}", v.kind()))
                    })? != 0,
                ),
            },
            Builtin::MakeClosure => {
                let f = match a(0)? {
                    Value::Function(f) => f,
                    v => return Err(Error::Mismatch(format!("make_closure on a {}", v.kind()))),
                };
                let mut saved = f.saved.to_vec();
                saved.splice(0..0, args[1..].iter().cloned());
                Value::Function(Function {
                    model_id: f.model_id,
                    index: f.index,
                    saved: Arc::from(saved),
                })
            }
            Builtin::InvokeClosure => {
                let f = match a(1)? {
                    Value::Function(f) => f.clone(),
                    v => return Err(Error::Mismatch(format!("invoke_closure on a {}", v.kind()))),
                };
                self.call_function_value(m, &f, &args[2..])?
            }
            Builtin::CallTirDyn => {
                let f = match a(0)? {
                    Value::Function(f) => f.clone(),
                    v => return Err(Error::Mismatch(format!("call_tir_dyn on a {}", v.kind()))),
                };
                let extra = args
                    .last()
                    .ok_or_else(|| Error::Mismatch("call_tir_dyn without arguments".into()))?
                    .expect_shape("call_tir_dyn")?;
                let mut all: Vec<Value> = args[1..args.len() - 1].to_vec();
                all.extend(extra.iter().map(|&d| Value::Int(d)));
                self.call_function_value(m, &f, &all)?
            }
            Builtin::MemoryManagerClear => {
                self.pool().clear();
                Value::None
            }
        })
    }
}
