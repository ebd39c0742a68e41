//! Values the VM computes with, and that functions take and return.

use std::fmt;
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Element, Storage, Tensor};

/// A function value: a Relax function of a model (with arguments bound by a closure), or any
/// other entry of the model's function table (a kernel or a builtin).
#[derive(Clone)]
pub struct Function {
    /// Identifies the model the index belongs to.
    pub(crate) model_id: usize,
    pub(crate) index: u32,
    /// Arguments appended after the call's own (TVM's `BindLastArgs`).
    pub(crate) saved: Arc<[Value]>,
}

impl fmt::Debug for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Function(#{}, {} saved)", self.index, self.saved.len())
    }
}

/// A runtime value.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum Value {
    #[default]
    None,
    Int(i64),
    Float(f64),
    Bool(bool),
    DType(DType),
    Str(Arc<str>),
    /// A shape (TVM's `ShapeTuple`).
    Shape(Arc<[i64]>),
    Tensor(Tensor),
    /// A tuple (TVM's `Array`).
    Tuple(Arc<Vec<Value>>),
    Function(Function),
    /// Raw memory allocated by the VM (`alloc_storage`).
    Storage(Arc<Storage>),
    /// A tensor on a device (a model compiled for OpenCL): no host view of its bytes; a
    /// session copies it (docs/opencl.md §8).
    DeviceTensor(crate::device::DeviceTensor),
    /// Device memory allocated by the VM (`alloc_storage` on a device).
    DeviceStorage(Arc<crate::device::DeviceStorage>),
    // The variants that own nothing come first and last, the rest in between: then dropping
    // a value tests one range before its single indirect jump (the VM drops values on every
    // call; a trivial variant in the middle made the drop a full jump table, +0.7%).
    /// An opaque pointer (passed through to kernels and callbacks untouched).
    OpaquePtr(usize),
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}

impl Value {
    /// A short description for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Bool(_) => "bool",
            Value::DType(_) => "dtype",
            Value::Str(_) => "string",
            Value::Shape(_) => "shape",
            Value::Tensor(_) => "tensor",
            Value::Tuple(_) => "tuple",
            Value::Function(_) => "function",
            Value::Storage(_) => "storage",
            Value::OpaquePtr(_) => "pointer",
            Value::DeviceTensor(_) => "device tensor",
            Value::DeviceStorage(_) => "device storage",
        }
    }

    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// Integer view of ints and bools (TVM converts freely between them).
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            Value::Int(i) => Some(i),
            Value::Bool(b) => Some(b as i64),
            _ => None,
        }
    }

    /// The tensors of this value, tuples flattened depth-first.
    pub fn flatten_tensors(&self) -> Vec<Tensor> {
        let mut out = Vec::new();
        fn walk(v: &Value, out: &mut Vec<Tensor>) {
            match v {
                Value::Tensor(t) => out.push(t.clone()),
                Value::Tuple(items) => items.iter().for_each(|i| walk(i, out)),
                _ => {}
            }
        }
        walk(self, &mut out);
        out
    }

    pub(crate) fn expect_tensor(&self, what: &str) -> Result<&Tensor> {
        self.as_tensor().ok_or_else(|| {
            Error::Mismatch(format!("{what}: expected a tensor, got {}", self.kind()))
        })
    }

    pub(crate) fn expect_int(&self, what: &str) -> Result<i64> {
        self.as_int()
            .ok_or_else(|| Error::Mismatch(format!("{what}: expected an int, got {}", self.kind())))
    }

    pub(crate) fn expect_shape(&self, what: &str) -> Result<&Arc<[i64]>> {
        match self {
            Value::Shape(s) => Ok(s),
            v => Err(Error::Mismatch(format!(
                "{what}: expected a shape, got {}",
                v.kind()
            ))),
        }
    }
}

/// One argument of a call to a registered function, borrowed for the duration of the call.
///
/// Tensors arrive as [`TensorRef`]s: some are views of memory that a compiled kernel owns only
/// while it runs, so nothing in an argument can be kept past the call without an explicit copy
/// ([`Arg::to_value`], [`TensorRef::to_tensor`]). The lifetime enforces it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Arg<'a> {
    None,
    Int(i64),
    Float(f64),
    Bool(bool),
    DType(DType),
    Str(&'a str),
    /// An opaque pointer (for example a kernel's raw buffer), passed through untouched.
    OpaquePtr(usize),
    Tensor(TensorRef<'a>),
    /// Anything else the VM passes (shapes, tuples, functions, storage). Mote owns these
    /// values, so cloning one keeps it safely.
    Value(&'a Value),
}

impl<'a> Arg<'a> {
    /// The argument view of a value.
    pub fn from_value(v: &'a Value) -> Arg<'a> {
        match v {
            Value::None => Arg::None,
            Value::Int(i) => Arg::Int(*i),
            Value::Float(f) => Arg::Float(*f),
            Value::Bool(b) => Arg::Bool(*b),
            Value::DType(d) => Arg::DType(*d),
            Value::Str(s) => Arg::Str(s),
            Value::OpaquePtr(p) => Arg::OpaquePtr(*p),
            Value::Tensor(t) => Arg::Tensor(TensorRef { tensor: t }),
            v => Arg::Value(v),
        }
    }

    /// A short description for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Arg::None => "None",
            Arg::Int(_) => "int",
            Arg::Float(_) => "float",
            Arg::Bool(_) => "bool",
            Arg::DType(_) => "dtype",
            Arg::Str(_) => "string",
            Arg::OpaquePtr(_) => "pointer",
            Arg::Tensor(_) => "tensor",
            Arg::Value(v) => v.kind(),
        }
    }

    /// Integer view of ints and bools.
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            Arg::Int(i) => Some(i),
            Arg::Bool(b) => Some(b as i64),
            _ => None,
        }
    }

    pub fn as_tensor(&self) -> Option<TensorRef<'a>> {
        match *self {
            Arg::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// An owned value that outlives the call: tensors are deep-copied.
    pub fn to_value(&self) -> Result<Value> {
        Ok(match *self {
            Arg::None => Value::None,
            Arg::Int(i) => Value::Int(i),
            Arg::Float(f) => Value::Float(f),
            Arg::Bool(b) => Value::Bool(b),
            Arg::DType(d) => Value::DType(d),
            Arg::Str(s) => Value::Str(s.into()),
            Arg::OpaquePtr(p) => Value::OpaquePtr(p),
            Arg::Tensor(t) => Value::Tensor(t.to_tensor()?),
            Arg::Value(v) => v.clone(),
        })
    }
}

/// A tensor lent to a registered function for one call.
///
/// It reads like a [`Tensor`], and its memory may be written through [`TensorRef::data_ptr`]
/// while the call runs (that is how destination-passing calls return results), but it cannot
/// be cloned into a `Tensor`: [`TensorRef::to_tensor`] copies the elements instead.
///
/// Keeping a copy compiles:
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use mote::{Arg, Tensor, Value};
/// static KEPT: Mutex<Option<Tensor>> = Mutex::new(None);
/// mote::register_function("keep", Arc::new(|args: &[Arg<'_>]| {
///     if let Some(t) = args.first().and_then(|a| a.as_tensor()) {
///         *KEPT.lock().unwrap() = Some(t.to_tensor()?);
///     }
///     Ok(Value::None)
/// }));
/// ```
///
/// Keeping the lent view itself does not:
///
/// ```compile_fail
/// use std::sync::{Arc, Mutex};
/// use mote::{Arg, TensorRef, Value};
/// static KEPT: Mutex<Option<TensorRef<'static>>> = Mutex::new(None);
/// mote::register_function("keep", Arc::new(|args: &[Arg<'_>]| {
///     if let Some(t) = args.first().and_then(|a| a.as_tensor()) {
///         *KEPT.lock().unwrap() = Some(t);
///     }
///     Ok(Value::None)
/// }));
/// ```
#[derive(Clone, Copy)]
pub struct TensorRef<'a> {
    /// Private: handing out the `Tensor` would let a caller clone it past the call.
    tensor: &'a Tensor,
}

impl fmt::Debug for TensorRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TensorRef({}, {:?})", self.dtype(), self.shape())
    }
}

impl<'a> TensorRef<'a> {
    pub fn shape(&self) -> &'a [i64] {
        self.tensor.shape()
    }

    pub fn ndim(&self) -> usize {
        self.tensor.ndim()
    }

    pub fn dtype(&self) -> DType {
        self.tensor.dtype()
    }

    pub fn num_elements(&self) -> usize {
        self.tensor.num_elements()
    }

    pub fn byte_len(&self) -> usize {
        self.tensor.byte_len()
    }

    /// The raw element bytes.
    pub fn data(&self) -> &'a [u8] {
        self.tensor.data()
    }

    /// Elements as `T`, checked against the dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&'a [T]> {
        self.tensor.as_slice()
    }

    /// Address of the first element, valid for reads and writes of [`TensorRef::byte_len`]
    /// bytes until the call returns.
    pub fn data_ptr(&self) -> *mut u8 {
        self.tensor.data_ptr()
    }

    /// A copy into fresh memory that the caller owns.
    pub fn to_tensor(&self) -> Result<Tensor> {
        self.tensor.deep_copy()
    }
}
