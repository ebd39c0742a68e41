//! Tensors whose bytes live on a device (docs/opencl.md §8).
//!
//! A [`DeviceTensor`] is a shape and dtype over a [`DeviceStorage`]. It has no host view of its
//! bytes: they are reached only through a session's explicit copies
//! ([`crate::Session::download`] and the copies a call makes for host inputs and outputs) or
//! an explicit mapping ([`crate::Session::map`], [`DeviceQueue::map`]), which on devices that
//! share memory with the host (phones' GPUs) reaches the device's bytes without a copy.
//! Device storage counts against the memory budget of the session that allocated it
//! (`SessionOptions::memory_budget_bytes`), like host storage, until the last handle drops.

use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::host::abi::DLDevice;
use crate::tensor::Pool;

use super::opencl::exec::{ClBuf, DEVICE_OPENCL};
use super::opencl::{Buffer, Mapping};

/// Where a tensor's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Device {
    /// Host memory.
    Cpu,
    /// OpenCL device `index` of the list [`crate::device::opencl::system_devices`] returns.
    OpenCl { index: usize },
}

impl Device {
    /// DLPack's `(device_type, device_id)` for this device, as kernels see it.
    pub fn dl(self) -> DLDevice {
        match self {
            Device::Cpu => DLDevice {
                device_type: crate::host::abi::DEVICE_CPU,
                device_id: 0,
            },
            Device::OpenCl { index } => DLDevice {
                device_type: DEVICE_OPENCL,
                device_id: index as i32,
            },
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::OpenCl { index } => write!(f, "opencl:{index}"),
        }
    }
}

/// Bytes on a device, allocated by a session (the VM's `alloc_storage`, a constant's or an
/// input's copy). Given back to the session's memory budget when the last handle drops, and its
/// buffer to the session's [`BufferCache`] (when it came from one) for the next allocation of
/// the same size.
pub struct DeviceStorage {
    /// See `opencl::sys::Built`: no storage exists in a build without OpenCL.
    built: super::opencl::sys::Built,
    /// Taken out only in `drop`.
    buf: std::mem::ManuallyDrop<Box<ClBuf>>,
    device: Device,
    /// The budget the bytes were reserved from.
    pool: Arc<Pool>,
    cache: Option<Arc<BufferCache>>,
}

/// Device buffers a session's dropped storage left, kept by size for the next allocation of
/// the same size, up to `SessionOptions::pool_limit_bytes` in all, as the host pool keeps host
/// buffers: a model allocates the same few sizes on every call, and a driver's allocation costs
/// far more than a lookup (tens of microseconds on phones' drivers).
pub(crate) struct BufferCache {
    /// Kept with their 64-byte aligned records (`ClBuf`), which cost an aligned allocation each.
    #[allow(
        clippy::vec_box,
        reason = "the boxes are reused: host code holds pointers to a record, which must not move"
    )]
    free: std::sync::Mutex<Vec<Box<ClBuf>>>,
    limit_bytes: usize,
}

impl BufferCache {
    pub(crate) fn new(limit_bytes: usize) -> Arc<BufferCache> {
        Arc::new(BufferCache {
            free: std::sync::Mutex::new(Vec::new()),
            limit_bytes,
        })
    }

    /// A kept buffer of exactly `size` bytes, if there is one.
    pub(crate) fn take(&self, size: usize) -> Option<Box<ClBuf>> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let i = free.iter().position(|b| b.buffer().len() == size)?;
        Some(free.swap_remove(i))
    }

    pub(crate) fn give(&self, b: Box<ClBuf>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let held: usize = free.iter().map(|b| b.buffer().len()).sum();
        if held.saturating_add(b.buffer().len()) <= self.limit_bytes {
            free.push(b);
        }
    }
}

impl DeviceStorage {
    /// `buffer`, whose `len()` bytes were reserved from `pool`'s budget by the caller; its
    /// buffer goes to `cache` when the storage drops.
    pub(crate) fn new(
        buffer: Box<ClBuf>,
        device: Device,
        pool: Arc<Pool>,
        cache: Option<Arc<BufferCache>>,
    ) -> Arc<DeviceStorage> {
        Arc::new(DeviceStorage {
            built: buffer.buffer().built(),
            buf: std::mem::ManuallyDrop::new(buffer),
            device,
            pool,
            cache,
        })
    }

    pub fn len(&self) -> usize {
        self.buf.buffer().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub(crate) fn buffer(&self) -> &Buffer {
        self.buf.buffer()
    }

    pub(crate) fn cl_buf(&self) -> &ClBuf {
        &self.buf
    }
}

impl Drop for DeviceStorage {
    fn drop(&mut self) {
        self.pool.release(self.buf.buffer().len());
        // SAFETY: `buf` is taken once, here, and nothing reads it after (the storage is going).
        let buf = unsafe { std::mem::ManuallyDrop::take(&mut self.buf) };
        if let Some(cache) = &self.cache {
            cache.give(buf);
        }
    }
}

impl fmt::Debug for DeviceStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceStorage({} bytes on {})", self.len(), self.device)
    }
}

/// A tensor on a device: shape and dtype over the whole of a [`DeviceStorage`]'s first bytes.
/// Cheap to clone (the storage is shared). One pointer wide, like [`crate::Tensor`], so that
/// dropping a `Value` stays a single branch and call (the VM drops values on every call).
#[derive(Clone)]
pub struct DeviceTensor(Arc<DeviceTensorInner>, super::opencl::sys::Built);

struct DeviceTensorInner {
    storage: Arc<DeviceStorage>,
    shape: Arc<[i64]>,
    dtype: DType,
}

impl DeviceTensor {
    /// A tensor of `shape` and `dtype` at the start of `storage`, which must hold its bytes.
    pub fn view(
        storage: Arc<DeviceStorage>,
        shape: Arc<[i64]>,
        dtype: DType,
    ) -> Result<DeviceTensor> {
        let need = crate::tensor::byte_size(&shape, dtype)?;
        if need > storage.len() {
            return Err(Error::Mismatch(format!(
                "a device tensor of shape {shape:?} {dtype} needs {need} bytes; its storage has {}",
                storage.len()
            )));
        }
        #[allow(
            clippy::let_unit_value,
            reason = "a unit only in builds with OpenCL; uninhabited without"
        )]
        let built = storage.built;
        Ok(DeviceTensor(
            Arc::new(DeviceTensorInner {
                storage,
                shape,
                dtype,
            }),
            built,
        ))
    }

    pub fn shape(&self) -> &[i64] {
        &self.0.shape
    }

    pub(crate) fn shape_arc(&self) -> &Arc<[i64]> {
        &self.0.shape
    }

    pub fn ndim(&self) -> usize {
        self.0.shape.len()
    }

    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    pub fn device(&self) -> Device {
        self.0.storage.device
    }

    /// Bytes of the tensor's elements.
    pub fn byte_len(&self) -> usize {
        // Checked against the storage in `view`.
        crate::tensor::byte_size(&self.0.shape, self.0.dtype).unwrap_or(0)
    }

    pub fn storage(&self) -> &Arc<DeviceStorage> {
        &self.0.storage
    }

    /// Whether this handle is the only way to reach its bytes: neither it (a clone) nor its
    /// storage (another view, or an `Arc` from [`DeviceTensor::storage`]) is shared. Mapping
    /// requires it ([`crate::Session::map`]).
    pub fn is_exclusive(&mut self) -> bool {
        Arc::get_mut(&mut self.0).is_some_and(|i| Arc::get_mut(&mut i.storage).is_some())
    }

    /// What host code gets as the tensor's `data` (docs/tvm-format.md §10.5).
    pub(crate) fn handle(&self) -> *mut c_void {
        self.0.storage.buf.handle()
    }
}

impl fmt::Debug for DeviceTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceTensor({:?} {} on {})",
            &*self.0.shape,
            self.0.dtype,
            self.device()
        )
    }
}

/// Device bytes mapped into host memory, for reading and writing: from
/// [`crate::Session::map`] (a device tensor's bytes) or [`DeviceQueue::map`] (a storage's).
/// Where [`Mapped::in_place`] is true (memory the device shares with the host, allocated
/// host-visible: what Mote allocates on such devices) the bytes are the device's own and
/// nothing is copied; elsewhere the driver copies them out at mapping and back at unmapping.
/// The mapping borrows the queue and the tensor or storage, so no call or copy runs on them
/// while the host holds the bytes; it ends with [`Mapped::unmap`] (which reports a failure) or
/// when dropped (which logs one).
pub struct Mapped<'a> {
    mapping: Mapping<'a>,
    device: Device,
    /// The tensor's dtype and element count, when a tensor was mapped.
    element: Option<(DType, usize)>,
}

impl Mapped<'_> {
    /// Whether these are the device's own bytes (no copy was made, none will be).
    pub fn in_place(&self) -> bool {
        self.mapping.in_place()
    }

    /// The elements of a mapped tensor as `T`, which must be its dtype.
    pub fn as_slice<T: crate::tensor::Element>(&self) -> Result<&[T]> {
        let n = self.elements::<T>()?;
        // SAFETY: `elements` checked the dtype (same size, any bit pattern valid), the
        // alignment and that `n` elements fit in the mapped bytes.
        Ok(unsafe { std::slice::from_raw_parts(self.mapping.bytes().as_ptr().cast::<T>(), n) })
    }

    /// As [`Mapped::as_slice`], for writing.
    pub fn as_mut_slice<T: crate::tensor::Element>(&mut self) -> Result<&mut [T]> {
        let n = self.elements::<T>()?;
        let p = self.mapping.bytes_mut().as_mut_ptr().cast::<T>();
        // SAFETY: as in `as_slice`; `&mut self` makes this the only reference to the bytes.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
    }

    fn elements<T: crate::tensor::Element>(&self) -> Result<usize> {
        let Some((dtype, n)) = self.element else {
            return Err(Error::InvalidArgument(
                "a mapped storage has no dtype; map a device tensor for typed access".into(),
            ));
        };
        if T::DTYPE != dtype && !(T::DTYPE == DType::U8 && dtype == DType::BOOL) {
            return Err(Error::Mismatch(format!(
                "the mapped tensor is {dtype}, not {}",
                T::DTYPE
            )));
        }
        let bytes = self.mapping.bytes();
        if (bytes.as_ptr() as usize) % std::mem::align_of::<T>() != 0
            || n.checked_mul(std::mem::size_of::<T>()) != Some(bytes.len())
        {
            return Err(Error::Mismatch(
                "the mapped bytes are not aligned or sized for the element type".into(),
            ));
        }
        Ok(n)
    }

    /// Gives the bytes back to the device and waits until it has them.
    pub fn unmap(self) -> Result<()> {
        let device = self.device;
        self.mapping.unmap().map_err(|e| Error::Device {
            device: device.to_string(),
            message: e.to_string(),
        })
    }
}

impl std::ops::Deref for Mapped<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.mapping.bytes()
    }
}

impl std::ops::DerefMut for Mapped<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.mapping.bytes_mut()
    }
}

impl fmt::Debug for Mapped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Mapped({} bytes of {}, {})",
            self.mapping.bytes().len(),
            self.device,
            if self.in_place() {
                "in place"
            } else {
                "copied"
            }
        )
    }
}

/// Maps `len` bytes of `buffer` through `queue`, for a tensor of `element` when given.
pub(crate) fn map<'a>(
    queue: &'a mut super::opencl::Queue,
    buffer: &'a Buffer,
    len: usize,
    device: Device,
    element: Option<(DType, usize)>,
) -> Result<Mapped<'a>> {
    let mapping = queue.map(buffer, len).map_err(|e| Error::Device {
        device: device.to_string(),
        message: e.to_string(),
    })?;
    Ok(Mapped {
        mapping,
        device,
        element,
    })
}

/// A queue of its own on a device, for memory outside any session: what an app, or Mote's RPC
/// server for a client's `remote.cl(0)` tensors, allocates and copies before and between calls
/// (docs/opencl.md §8). Its storage can be passed to any session on the same device; every copy
/// here has finished when it returns, and a session's call has finished its device work when
/// it returns, so the two never need to wait for each other.
pub struct DeviceQueue {
    device: Device,
    queue: super::opencl::Queue,
    /// Counts this queue's live storage against its budget.
    pool: Arc<Pool>,
}

impl DeviceQueue {
    /// A queue on `device` whose storage may hold at most `budget_bytes` at once.
    pub fn open(device: Device, budget_bytes: usize) -> Result<DeviceQueue> {
        let Device::OpenCl { index } = device else {
            return Err(Error::InvalidArgument(format!(
                "DeviceQueue::open: {device} is the host; host memory needs no device queue"
            )));
        };
        let failed = |message: String| Error::Device {
            device: device.to_string(),
            message,
        };
        let list = super::opencl::system_devices().map_err(|e| failed(e.to_string()))?;
        let info = list.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "OpenCL device {index}: OpenCL lists {} device(s)",
                list.len()
            ))
        })?;
        let context = super::opencl::shared_context(info).map_err(|e| failed(e.to_string()))?;
        let queue = context.queue(false).map_err(|e| failed(e.to_string()))?;
        Ok(DeviceQueue {
            device,
            queue,
            pool: Pool::with_budget(0, false, budget_bytes),
        })
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// Bytes of live storage allocated here.
    pub fn bytes_in_use(&self) -> usize {
        self.pool.live_bytes()
    }

    fn failed(&self, e: super::opencl::ClError) -> Error {
        Error::Device {
            device: self.device.to_string(),
            message: e.to_string(),
        }
    }

    /// `bytes` of zeroed device memory; `ResourceExhausted` past the budget. Host-visible on a
    /// device that shares memory with the host, so [`DeviceQueue::map`] copies nothing.
    pub fn alloc(&mut self, bytes: usize) -> Result<Arc<DeviceStorage>> {
        self.pool.reserve(bytes)?;
        let context = self.queue.context();
        let b = match context.buffer(bytes, context.device().unified_memory) {
            Ok(b) => b,
            Err(e) => {
                self.pool.release(bytes);
                return Err(self.failed(e));
            }
        };
        let storage = DeviceStorage::new(ClBuf::new(b), self.device, self.pool.clone(), None);
        self.write(&storage, 0, &vec![0u8; bytes])?;
        Ok(storage)
    }

    fn own<'s>(&self, s: &'s DeviceStorage) -> Result<&'s Buffer> {
        if !Arc::ptr_eq(s.buffer().context(), self.queue.context()) {
            return Err(Error::InvalidArgument(format!(
                "device storage on {} used with a queue on {}",
                s.device(),
                self.device
            )));
        }
        Ok(s.buffer())
    }

    /// Copy `src` into `dst` at `offset` (bounds checked).
    pub fn write(&mut self, dst: &DeviceStorage, offset: usize, src: &[u8]) -> Result<()> {
        let b = self.own(dst)?;
        self.queue.write(b, offset, src).map_err(|e| self.failed(e))
    }

    /// Copy `dst.len()` bytes of `src` from `offset` into `dst` (bounds checked).
    pub fn read(&mut self, src: &DeviceStorage, offset: usize, dst: &mut [u8]) -> Result<()> {
        let b = self.own(src)?;
        self.queue.read(b, offset, dst).map_err(|e| self.failed(e))
    }

    /// `storage`'s bytes in host memory (docs/opencl.md §8), once every copy before has
    /// finished. The storage must not be shared (no other `Arc` of it, no device tensor over
    /// it): the host then holds its only way in until the mapping ends.
    pub fn map<'a>(&'a mut self, storage: &'a mut Arc<DeviceStorage>) -> Result<Mapped<'a>> {
        if Arc::get_mut(storage).is_none() {
            return Err(Error::InvalidArgument(
                "DeviceQueue::map: the storage is shared; map it where it has one owner".into(),
            ));
        }
        let storage: &'a DeviceStorage = storage;
        let b = self.own(storage)?;
        map(&mut self.queue, b, b.len(), self.device, None)
    }

    /// Copy `len` bytes between two storages on this device (bounds checked; overlapping
    /// ranges of one storage are refused, as OpenCL requires).
    pub fn copy(
        &mut self,
        src: &DeviceStorage,
        src_offset: usize,
        dst: &DeviceStorage,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        let (s, d) = (self.own(src)?, self.own(dst)?);
        if std::ptr::eq(src, dst)
            && src_offset < dst_offset.saturating_add(len)
            && dst_offset < src_offset.saturating_add(len)
        {
            return Err(Error::InvalidArgument(format!(
                "copying {len} bytes within one device storage from {src_offset} to \
                 {dst_offset}: the ranges overlap"
            )));
        }
        self.queue
            .copy(s, src_offset, d, dst_offset, len)
            .and_then(|()| self.queue.finish())
            .map_err(|e| self.failed(e))
    }
}
