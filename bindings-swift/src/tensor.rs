//! Tensors shared with Swift.
//!
//! Swift reads and writes a tensor's memory in place (no copy) through an access
//! (`NativeAccess`) from `begin_read` or `begin_write`, which holds the data's address until it
//! ends (by `end` or by being dropped, once, and only by its holder). A small lock state makes
//! that sound without holding a Rust lock across calls from Swift:
//!
//! - any number of readers at once, or one writer, never both (a conflicting request fails at
//!   once with code `Busy`; nothing waits);
//! - a writer needs the tensor to be exclusive (`mote::Tensor::is_exclusive`): while a session,
//!   an output or another view shares the memory, writing is refused;
//! - sessions take a clone to read inputs only when no writer is active, and a kernel call
//!   takes the tensor out for its duration (readers and writers then get `Busy`).

use std::sync::{Arc, Mutex, MutexGuard};

use mote::{DType, Tensor};

use crate::error::NativeError;

struct Slot {
    /// `None` while a kernel call has taken the tensor.
    tensor: Option<Tensor>,
    readers: usize,
    writing: bool,
}

/// A tensor (`mote::Tensor`): shape, dtype, 64-byte aligned memory. `Send + Sync` with the
/// access rules above.
#[derive(uniffi::Object)]
pub struct NativeTensor {
    slot: Mutex<Slot>,
    shape: Vec<i64>,
    dtype: DType,
    byte_len: usize,
}

/// A tensor with a name (an `.npz` member).
#[derive(uniffi::Record)]
pub struct NamedTensor {
    pub name: String,
    pub tensor: Arc<NativeTensor>,
}

fn dtype_of(s: &str) -> Result<DType, NativeError> {
    Ok(s.parse::<DType>()?)
}

impl NativeTensor {
    pub(crate) fn wrap(t: Tensor) -> Arc<NativeTensor> {
        Arc::new(NativeTensor {
            shape: t.shape().to_vec(),
            dtype: t.dtype(),
            byte_len: t.byte_len(),
            slot: Mutex::new(Slot {
                tensor: Some(t),
                readers: 0,
                writing: false,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        // A panic while holding this lock leaves the counters consistent (each update is one
        // statement), so a poisoned lock is still usable.
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A handle for a session to read (a clone sharing the memory).
    pub(crate) fn share(&self) -> Result<Tensor, NativeError> {
        let s = self.lock();
        if s.writing {
            return Err(NativeError::busy(
                "the tensor is being written (inside withUnsafeMutableBytes) on another thread",
            ));
        }
        s.tensor.clone().ok_or_else(in_kernel)
    }

    /// Take the tensor out for a kernel call (put it back with `restore`).
    pub(crate) fn take(&self) -> Result<Tensor, NativeError> {
        let mut s = self.lock();
        if s.writing || s.readers > 0 {
            return Err(NativeError::busy(
                "the tensor is being read or written through its memory on another thread",
            ));
        }
        s.tensor.take().ok_or_else(in_kernel)
    }

    pub(crate) fn restore(&self, t: Tensor) {
        self.lock().tensor = Some(t);
    }
}

fn in_kernel() -> NativeError {
    NativeError::busy("the tensor is in use by a kernel call on another thread")
}

#[uniffi::export]
impl NativeTensor {
    /// A zero-filled tensor.
    #[uniffi::constructor]
    pub fn zeros(shape: Vec<i64>, dtype: String) -> Result<Arc<Self>, NativeError> {
        Ok(NativeTensor::wrap(Tensor::zeros(
            &shape,
            dtype_of(&dtype)?,
        )?))
    }

    /// A tensor holding a copy of `bytes` (exactly shape × element size bytes).
    #[uniffi::constructor]
    pub fn from_bytes(
        shape: Vec<i64>,
        dtype: String,
        bytes: Vec<u8>,
    ) -> Result<Arc<Self>, NativeError> {
        Ok(NativeTensor::wrap(Tensor::from_bytes(
            &shape,
            dtype_of(&dtype)?,
            &bytes,
        )?))
    }

    /// The dimensions.
    pub fn shape(&self) -> Vec<i64> {
        self.shape.clone()
    }

    /// The element type's name (`float32`, `int8`, `bool`...).
    pub fn dtype(&self) -> String {
        self.dtype.to_string()
    }

    /// Bytes of data.
    pub fn byte_len(&self) -> u64 {
        self.byte_len as u64
    }

    /// A copy of the data.
    pub fn to_bytes(&self) -> Result<Vec<u8>, NativeError> {
        let t = self.share()?;
        Ok(t.data().to_vec())
    }

    /// A deep copy (new memory).
    pub fn deep_copy(&self) -> Result<Arc<NativeTensor>, NativeError> {
        Ok(NativeTensor::wrap(self.share()?.deep_copy()?))
    }

    /// Start reading the memory in place: the access holds the data's address (valid for
    /// `byte_len` bytes until the access ends). Fails with `Busy` while a writer or a kernel
    /// call has it.
    pub fn begin_read(self: Arc<Self>) -> Result<Arc<NativeAccess>, NativeError> {
        let address = {
            let mut s = self.lock();
            if s.writing {
                return Err(NativeError::busy(
                    "the tensor is being written on another thread",
                ));
            }
            let addr = s.tensor.as_ref().ok_or_else(in_kernel)?.data_ptr() as u64;
            s.readers += 1;
            addr
        };
        Ok(NativeAccess::new(self, address, false))
    }

    /// Start writing the memory in place: the access holds the data's address (valid for
    /// `byte_len` bytes until the access ends). Fails with `Busy` while anyone reads, writes or
    /// runs a kernel on it, and with `InvalidArgument` when the memory is shared (a session or
    /// another view holds it, e.g. two outputs of one call that are the same tensor).
    pub fn begin_write(self: Arc<Self>) -> Result<Arc<NativeAccess>, NativeError> {
        let address = {
            let mut s = self.lock();
            if s.writing || s.readers > 0 {
                return Err(NativeError::busy(
                    "the tensor is being read or written through its memory on another thread",
                ));
            }
            let t = s.tensor.as_mut().ok_or_else(in_kernel)?;
            if !t.is_exclusive() {
                return Err(NativeError::invalid(
                    "the tensor's memory is shared (a running session or another view holds it), \
                     so it cannot be written in place; write a copy (Tensor.copy())",
                ));
            }
            let addr = t.data_ptr() as u64;
            s.writing = true;
            addr
        };
        Ok(NativeAccess::new(self, address, true))
    }
}

/// One in-place read or write of a tensor's memory, from `begin_read`/`begin_write`: the
/// ownership token of that access. Only its holder can end it (`end`, or dropping it), and
/// only once, so no caller can end another's access and let a writer in under a reader.
#[derive(uniffi::Object)]
pub struct NativeAccess {
    tensor: Arc<NativeTensor>,
    address: u64,
    write: bool,
    ended: std::sync::atomic::AtomicBool,
}

impl NativeAccess {
    fn new(tensor: Arc<NativeTensor>, address: u64, write: bool) -> Arc<NativeAccess> {
        Arc::new(NativeAccess {
            tensor,
            address,
            write,
            ended: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

#[uniffi::export]
impl NativeAccess {
    /// The data's address, valid for the tensor's `byte_len` bytes until the access ends.
    pub fn address(&self) -> u64 {
        self.address
    }

    /// End the access (again: nothing).
    pub fn end(&self) {
        if self.ended.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let mut s = self.tensor.lock();
        if self.write {
            s.writing = false;
        } else {
            s.readers = s.readers.saturating_sub(1);
        }
    }
}

impl std::fmt::Debug for NativeAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.write { "write" } else { "read" };
        write!(f, "NativeAccess({kind} at {:#x})", self.address)
    }
}

impl Drop for NativeAccess {
    fn drop(&mut self) {
        self.end();
    }
}

/// Read every array of an `.npz` file (numpy's format), in file order. For tests and tools
/// that compare with numpy/TVM outputs.
#[uniffi::export]
pub fn read_npz(path: String) -> Result<Vec<NamedTensor>, NativeError> {
    Ok(mote::npy::read_npz(&path)?
        .into_iter()
        .map(|(name, t)| NamedTensor {
            name,
            tensor: NativeTensor::wrap(t),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote::ErrorCode;

    fn code(e: NativeError) -> u32 {
        match e {
            NativeError::Mote { code, .. } => code,
        }
    }

    #[test]
    fn readers_and_one_writer_never_both() {
        let t = NativeTensor::zeros(vec![4], "float32".into()).unwrap();
        let w = t.clone().begin_write().unwrap();
        assert_eq!(
            code(t.clone().begin_read().unwrap_err()),
            ErrorCode::Busy as u32
        );
        assert_eq!(code(t.share().unwrap_err()), ErrorCode::Busy as u32);
        assert_eq!(
            code(t.clone().begin_write().unwrap_err()),
            ErrorCode::Busy as u32
        );
        let address = w.address();
        w.end();
        let r = t.clone().begin_read().unwrap();
        assert_eq!(r.address(), address);
        assert_eq!(
            code(t.clone().begin_write().unwrap_err()),
            ErrorCode::Busy as u32
        );
        assert_eq!(code(t.take().unwrap_err()), ErrorCode::Busy as u32);
        r.end();
        t.clone().begin_write().unwrap().end();
    }

    /// An access ends once, by its holder: ending the writer's access twice, or ending it after
    /// a reader came in, cannot end anyone else's; dropping an access ends it.
    #[test]
    fn accesses_are_ownership_tokens() {
        let t = NativeTensor::zeros(vec![4], "float32".into()).unwrap();
        let w = t.clone().begin_write().unwrap();
        w.end();
        let r1 = t.clone().begin_read().unwrap();
        let r2 = t.clone().begin_read().unwrap();
        // A stale end of the writer's access, and a second end of one reader's, change nothing:
        // one reader is still in, so no writer may start.
        w.end();
        r1.end();
        r1.end();
        assert_eq!(
            code(t.clone().begin_write().unwrap_err()),
            ErrorCode::Busy as u32
        );
        drop(r2);
        let w2 = t.clone().begin_write().unwrap();
        drop(w2);
        t.clone().begin_read().unwrap().end();
    }

    #[test]
    fn shared_memory_is_not_writable_and_a_taken_tensor_is_busy() {
        let t = NativeTensor::zeros(vec![4], "float32".into()).unwrap();
        let held = t.share().unwrap();
        assert_eq!(
            code(t.clone().begin_write().unwrap_err()),
            ErrorCode::InvalidArgument as u32
        );
        drop(held);
        let inner = t.take().unwrap();
        assert_eq!(
            code(t.clone().begin_read().unwrap_err()),
            ErrorCode::Busy as u32
        );
        t.restore(inner);
        t.clone().begin_write().unwrap().end();
    }

    #[test]
    fn bytes_round_trip_and_bad_sizes_fail() {
        let t = NativeTensor::from_bytes(vec![2], "int16".into(), vec![1, 0, 2, 0]).unwrap();
        assert_eq!(t.to_bytes().unwrap(), vec![1, 0, 2, 0]);
        assert_eq!(t.dtype(), "int16");
        assert!(NativeTensor::from_bytes(vec![2], "int16".into(), vec![1]).is_err());
        assert_eq!(
            code(NativeTensor::zeros(vec![2], "nope".into()).err().unwrap()),
            ErrorCode::InvalidArgument as u32
        );
    }
}
