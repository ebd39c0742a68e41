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

    /// A tensor over memory the caller owns, without a copy: `byte_len` bytes at `address`,
    /// which must be `mote::ALIGNMENT` (64) byte aligned and hold `shape` x `dtype`. The
    /// caller's contract (the Swift API's, `Tensor(borrowing:...)`): the memory stays valid,
    /// and nobody else reads or writes it while a call uses the tensor, until `deallocator` is
    /// called (once, on any thread, when Mote holds the tensor no more). When this fails the
    /// memory stays the caller's and `deallocator` is not called.
    #[uniffi::constructor]
    pub fn borrowing(
        address: u64,
        byte_len: u64,
        shape: Vec<i64>,
        dtype: String,
        deallocator: Option<Arc<dyn NativeDeallocator>>,
    ) -> Result<Arc<Self>, NativeError> {
        let dt = dtype_of(&dtype)?;
        let len = usize::try_from(byte_len)
            .map_err(|_| NativeError::invalid(format!("{byte_len} bytes")))?;
        let addr = usize::try_from(address)
            .map_err(|_| NativeError::invalid(format!("address {address:#x}")))?;
        let Some(ptr) = std::ptr::NonNull::new(addr as *mut u8) else {
            return Err(NativeError::invalid(
                "the borrowed memory's address is null",
            ));
        };
        if addr % mote::ALIGNMENT != 0 {
            return Err(NativeError::invalid(format!(
                "the borrowed memory at {addr:#x} is not {}-byte aligned, as Mote's kernels \
                 need; allocate it aligned (UnsafeMutableRawBufferPointer.allocate(byteCount:\
                 alignment: 64)) or copy it (Tensor(bytes:shape:dtype:))",
                mote::ALIGNMENT
            )));
        }
        let mut need = Some(dt.size_bytes());
        for &d in &shape {
            let d = usize::try_from(d).map_err(|_| {
                NativeError::new(
                    mote::ErrorCode::Mismatch,
                    format!("negative dimension in shape {shape:?}"),
                )
            })?;
            need = need.and_then(|n| n.checked_mul(d));
        }
        let need = need.ok_or_else(|| {
            NativeError::invalid(format!("a {dt} tensor of shape {shape:?} is too large"))
        })?;
        if need > len {
            return Err(NativeError::new(
                mote::ErrorCode::Mismatch,
                format!("a {dt} tensor of shape {shape:?} needs {need} bytes; {len} were given"),
            ));
        }
        // Only now does the deallocator become Mote's to call.
        let owner =
            deallocator.map(|d| Box::new(Release(d)) as Box<dyn std::any::Any + Send + Sync>);
        // SAFETY: the caller promised (the contract above, the Swift API's documented one)
        // that `len` bytes at `ptr` stay valid and unused by others during calls until the
        // deallocator runs, which happens when the storage drops.
        let storage = unsafe { mote::Storage::borrowed(ptr, len, owner) };
        Ok(NativeTensor::wrap(Tensor::view(storage, 0, shape, dt)?))
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

/// What frees memory lent to `NativeTensor::borrowing` (a Swift closure).
#[uniffi::export(with_foreign)]
pub trait NativeDeallocator: Send + Sync {
    /// Called once, when Mote uses the memory no more.
    fn release(&self);
}

/// Calls the deallocator when the storage holding it drops.
struct Release(Arc<dyn NativeDeallocator>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.release();
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

    struct Counted(std::sync::atomic::AtomicUsize);
    impl NativeDeallocator for Counted {
        fn release(&self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Borrowed memory is the tensor's memory (no copy, both ways), its deallocator runs once
    /// when the last holder goes, and a refused borrow (misaligned, too small, bad shape)
    /// leaves the memory the caller's: its deallocator is never called.
    #[test]
    fn borrowed_memory_is_used_in_place_and_released_once() {
        #[repr(C, align(64))]
        struct Buf([f32; 32]);
        let mut buf = Box::new(Buf([1.5; 32]));
        let addr = buf.0.as_mut_ptr() as u64;
        let count = Arc::new(Counted(std::sync::atomic::AtomicUsize::new(0)));
        let released = || count.0.load(std::sync::atomic::Ordering::SeqCst);
        let refuse = |a: u64, n: u64, shape: Vec<i64>| {
            let d: Arc<dyn NativeDeallocator> = count.clone();
            match NativeTensor::borrowing(a, n, shape, "float32".into(), Some(d)) {
                Ok(_) => panic!("borrowed"),
                Err(e) => e,
            }
        };
        assert_eq!(
            code(refuse(addr + 4, 124, vec![31])),
            ErrorCode::InvalidArgument as u32
        );
        assert_eq!(
            code(refuse(addr, 128, vec![33])),
            ErrorCode::Mismatch as u32
        );
        assert_eq!(
            code(refuse(addr, 128, vec![-1])),
            ErrorCode::Mismatch as u32
        );
        assert_eq!(
            code(refuse(0, 128, vec![32])),
            ErrorCode::InvalidArgument as u32
        );
        assert_eq!(released(), 0, "refused borrows never release");
        let d: Arc<dyn NativeDeallocator> = count.clone();
        let t = NativeTensor::borrowing(addr, 128, vec![4, 8], "float32".into(), Some(d)).unwrap();
        let r = t.clone().begin_read().unwrap();
        assert_eq!(r.address(), addr, "in place");
        drop(r);
        let held = t.share().unwrap();
        assert_eq!(held.as_slice::<f32>().unwrap()[31], 1.5);
        drop(t);
        assert_eq!(released(), 0, "a session's handle still holds it");
        drop(held);
        assert_eq!(released(), 1);
        buf.0[0] = 0.0;
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
