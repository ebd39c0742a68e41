//! Swift functions registered with Mote, which models call by name (`T.call_packed`, Relax
//! `call_packed`), and the argument values that cross in both directions.
//!
//! Mote may call a registered function on the caller's thread or on one of a session's worker
//! threads. A Swift error (or any failure of the foreign call) becomes
//! `mote::Error::Callback` with its text, so the Mote call that triggered it fails with that
//! message and the session goes on. A panic here is caught: a kernel with C frames may be the
//! caller.

use std::sync::Arc;

use mote::{Arg, Value};

use crate::error::NativeError;
use crate::tensor::NativeTensor;

/// A value passed to a kernel or to a registered function, or returned by one.
#[derive(uniffi::Enum)]
pub enum NativeArg {
    /// No value.
    None,
    /// An integer.
    Int { value: i64 },
    /// A floating-point number.
    Float { value: f64 },
    /// A boolean.
    Bool { value: bool },
    /// A string.
    Str { value: String },
    /// An element type, by name.
    DType { value: String },
    /// A raw address (a kernel's buffer): valid only during the call, unchecked as in C.
    Pointer { address: u64 },
    /// A tensor. Tensors given to a registered function are copies of the caller's.
    Tensor { tensor: Arc<NativeTensor> },
    /// A value Swift cannot use (a shape, tuple, function or storage), by kind.
    Other { kind: String },
}

impl NativeArg {
    pub(crate) fn to_value(&self) -> Result<Value, NativeError> {
        Ok(match self {
            NativeArg::None => Value::None,
            NativeArg::Int { value } => Value::Int(*value),
            NativeArg::Float { value } => Value::Float(*value),
            NativeArg::Bool { value } => Value::Bool(*value),
            NativeArg::Str { value } => Value::Str(value.as_str().into()),
            NativeArg::DType { value } => Value::DType(value.parse()?),
            NativeArg::Tensor { tensor } => Value::Tensor(tensor.share()?),
            NativeArg::Pointer { .. } => {
                return Err(NativeError::invalid(
                    "a pointer cannot be passed from Swift (it would be dereferenced unchecked)",
                ))
            }
            NativeArg::Other { kind } => {
                return Err(NativeError::invalid(format!(
                    "a `{kind}` value cannot be passed from Swift"
                )))
            }
        })
    }

    fn from_arg(a: &Arg<'_>) -> Result<NativeArg, mote::Error> {
        Ok(match a {
            Arg::None => NativeArg::None,
            Arg::Int(v) => NativeArg::Int { value: *v },
            Arg::Float(v) => NativeArg::Float { value: *v },
            Arg::Bool(v) => NativeArg::Bool { value: *v },
            Arg::DType(d) => NativeArg::DType {
                value: d.to_string(),
            },
            Arg::Str(s) => NativeArg::Str {
                value: s.to_string(),
            },
            Arg::OpaquePtr(p) => NativeArg::Pointer { address: *p as u64 },
            // A copy: the view is valid only during this call, the Swift object may live on.
            Arg::Tensor(t) => NativeArg::Tensor {
                tensor: NativeTensor::wrap(t.to_tensor()?),
            },
            Arg::Value(Value::Tensor(t)) => NativeArg::Tensor {
                tensor: NativeTensor::wrap(t.deep_copy()?),
            },
            Arg::Value(v) => NativeArg::Other {
                kind: v.kind().to_string(),
            },
            _ => NativeArg::Other {
                kind: a.kind().to_string(),
            },
        })
    }
}

/// A function implemented in Swift that models may call by name.
#[uniffi::export(with_foreign)]
pub trait NativeFunction: Send + Sync {
    /// Called with the model's arguments; returns the result (`None` for none).
    fn call(&self, args: Vec<NativeArg>) -> Result<NativeArg, NativeError>;
}

/// Register `function` under `name` (replacing any function of that name), for every model.
#[uniffi::export]
pub fn register_function(name: String, function: Arc<dyn NativeFunction>) {
    let owned = name.clone();
    mote::register_function(
        &name,
        Arc::new(move |args: &[Arg<'_>]| dispatch(&owned, function.as_ref(), args)),
    );
}

/// Remove the function registered under `name`; whether there was one.
#[uniffi::export]
pub fn unregister_function(name: String) -> bool {
    mote::unregister_function(&name)
}

/// Whether a function is registered under `name`.
#[uniffi::export]
pub fn function_exists(name: String) -> bool {
    mote::lookup_function(&name).is_some()
}

fn dispatch(name: &str, f: &dyn NativeFunction, args: &[Arg<'_>]) -> mote::Result<Value> {
    let failed = |message: String| mote::Error::Callback {
        name: name.to_string(),
        message,
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let args = args
            .iter()
            .map(NativeArg::from_arg)
            .collect::<Result<Vec<_>, _>>()?;
        match f.call(args) {
            Ok(v) => v.to_value().map_err(|e| failed(e.to_string())),
            Err(e) => Err(failed(e.to_string())),
        }
    }));
    result.unwrap_or_else(|_| Err(failed("mote-swift: internal error (a panic)".into())))
}
