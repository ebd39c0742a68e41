//! Values the VM computes with, and that functions take and return.

use std::fmt;
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Storage, Tensor};

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
