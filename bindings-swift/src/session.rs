//! Sessions: one `mote::Session` behind a mutex that is only ever `try_lock`ed, so a second
//! caller (another thread, or a callback re-entering its own session) gets `Busy` instead of
//! waiting or racing.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use mote::{SessionOptions, Value};

use crate::callback::NativeArg;
use crate::error::NativeError;
use crate::tensor::NativeTensor;
use crate::NativeModel;

/// Options of a new session.
#[derive(uniffi::Record)]
pub struct SessionConfig {
    /// Threads for parallel kernels; 0: Mote's default (CPU count, or `MOTE_NUM_THREADS`).
    pub threads: u32,
    /// Backends for offloaded subgraphs, in order of preference; empty: all available.
    pub backends: Vec<String>,
    /// Fill every intermediate buffer with NaN / 0xA5 before use (tests).
    pub poison_memory: bool,
    /// Time every callee (read with `take_profile`).
    pub profiling: bool,
}

/// Accumulated time of one callee of a profiled session.
#[derive(uniffi::Record)]
pub struct ProfileRecord {
    /// Kernel, builtin or function name.
    pub name: String,
    /// `kernel`, `builtin`, `function` or `registered`.
    pub kind: String,
    /// Calls counted.
    pub calls: u64,
    /// Total time in nanoseconds.
    pub total_nanos: u64,
}

/// A session of a model: runs it on one caller at a time.
#[derive(uniffi::Object)]
pub struct NativeSession {
    inner: Mutex<mote::Session>,
}

impl NativeSession {
    fn lock(&self) -> Result<MutexGuard<'_, mote::Session>, NativeError> {
        match self.inner.try_lock() {
            Ok(g) => Ok(g),
            // A panic inside a call cannot leave the session half-updated in a way a later
            // call trusts: each call starts from its arguments.
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(NativeError::busy(
                "session in use by another call (another thread, or a callback of its own \
                 call): use one session per thread",
            )),
        }
    }
}

fn shared(inputs: &[Arc<NativeTensor>]) -> Result<Vec<mote::Tensor>, NativeError> {
    inputs.iter().map(|t| t.share()).collect()
}

fn wrap_all(v: Vec<mote::Tensor>) -> Vec<Arc<NativeTensor>> {
    v.into_iter().map(NativeTensor::wrap).collect()
}

#[uniffi::export]
impl NativeSession {
    /// A session of `model`.
    #[uniffi::constructor]
    pub fn new(model: Arc<NativeModel>, config: SessionConfig) -> Result<Arc<Self>, NativeError> {
        let mut s = model.inner.session_with(SessionOptions {
            threads: (config.threads > 0).then_some(config.threads as usize),
            backends: config.backends,
            poison_memory: config.poison_memory,
            ..Default::default()
        })?;
        s.set_profiling(config.profiling);
        Ok(Arc::new(NativeSession {
            inner: Mutex::new(s),
        }))
    }

    /// Threads parallel kernels may use.
    pub fn threads(&self) -> Result<u32, NativeError> {
        Ok(self.lock()?.threads() as u32)
    }

    /// Call the Relax function `function` on tensors; its outputs (tuples flattened).
    pub fn run(
        &self,
        function: String,
        inputs: Vec<Arc<NativeTensor>>,
    ) -> Result<Vec<Arc<NativeTensor>>, NativeError> {
        let inputs = shared(&inputs)?;
        let out = self.lock()?.run(&function, &inputs)?;
        Ok(wrap_all(out))
    }

    /// Call a kernel of a kernel-only library; it writes into the tensors passed. Each tensor
    /// is taken out of its handle for the call (so the kernel holds it alone); one passed twice
    /// is passed as a copy at its later positions.
    pub fn call_kernel(&self, kernel: String, args: Vec<NativeArg>) -> Result<(), NativeError> {
        let mut values = Vec::with_capacity(args.len());
        let mut taken: Vec<(usize, Arc<NativeTensor>)> = Vec::new();
        let result = (|| {
            for a in &args {
                let v = match a {
                    NativeArg::Tensor { tensor } => {
                        let earlier = taken.iter().find(|(_, t)| Arc::ptr_eq(t, tensor));
                        if let Some(Value::Tensor(t)) = earlier.and_then(|(i, _)| values.get(*i)) {
                            Value::Tensor(t.deep_copy()?)
                        } else {
                            let t = tensor.take()?;
                            taken.push((values.len(), tensor.clone()));
                            Value::Tensor(t)
                        }
                    }
                    other => other.to_value()?,
                };
                values.push(v);
            }
            self.lock()?.call_kernel(&kernel, &mut values)?;
            Ok(())
        })();
        for (i, handle) in taken {
            if let Some(Value::Tensor(t)) = values.get_mut(i).map(std::mem::take) {
                handle.restore(t);
            }
        }
        result
    }

    /// Stateful API: keep `inputs` for a later `invoke_stateful(function)`.
    pub fn set_input(
        &self,
        function: String,
        inputs: Vec<Arc<NativeTensor>>,
    ) -> Result<(), NativeError> {
        let values = shared(&inputs)?.into_iter().map(Value::Tensor).collect();
        Ok(self.lock()?.set_input(&function, values)?)
    }

    /// Stateful API: run `function` on the inputs set before.
    pub fn invoke_stateful(&self, function: String) -> Result<(), NativeError> {
        Ok(self.lock()?.invoke_stateful(&function)?)
    }

    /// Stateful API: the outputs of the last `invoke_stateful(function)` (tuples flattened).
    pub fn get_output(&self, function: String) -> Result<Vec<Arc<NativeTensor>>, NativeError> {
        let v = self.lock()?.get_output(&function)?;
        Ok(wrap_all(v.flatten_tensors()))
    }

    /// Turn profiling on or off.
    pub fn set_profiling(&self, on: bool) -> Result<(), NativeError> {
        self.lock()?.set_profiling(on);
        Ok(())
    }

    /// The time per callee since profiling started or the last `take_profile`, then reset.
    pub fn take_profile(&self) -> Result<Vec<ProfileRecord>, NativeError> {
        Ok(self
            .lock()?
            .take_profile()
            .into_iter()
            .map(|e| ProfileRecord {
                name: e.name,
                kind: format!("{:?}", e.kind).to_lowercase(),
                calls: e.calls,
                total_nanos: u64::try_from(e.total.as_nanos()).unwrap_or(u64::MAX),
            })
            .collect())
    }
}
