//! Tensors: DLPack-compatible, 64-byte aligned, reference counted.
//!
//! A [`Tensor`] is a view (shape, dtype, byte offset) of a [`Storage`]. Several tensors can share
//! one storage, which is how the VM reuses memory that the compiler planned. Storage memory is
//! either owned (allocated 64-byte aligned, optionally returned to a [`Pool`] when the last view
//! drops) or borrowed from the embedder for a stated lifetime.

use std::alloc::Layout;
use std::any::Any;
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use crate::dtype::DType;
use crate::error::{Error, Result};

/// Alignment of every buffer Mote allocates (TVM's `kAllocAlignment`).
pub const ALIGNMENT: usize = 64;

/// Byte written over poisoned memory meant for floats: all-ones is a NaN in every IEEE width
/// (and in bfloat16), so a result element nobody wrote shows as NaN.
pub(crate) const POISON_FLOAT: u8 = 0xFF;
/// Byte written over poisoned memory meant for other dtypes: 0xA5A5... is an implausible
/// integer and not a valid bool.
pub(crate) const POISON_OTHER: u8 = 0xA5;

/// The poison byte for memory that will hold `dtype` elements.
pub(crate) fn poison_byte(dtype: DType) -> u8 {
    if dtype.is_float() {
        POISON_FLOAT
    } else {
        POISON_OTHER
    }
}

/// Whether sessions poison memory unless told otherwise: always in builds with the `poison`
/// feature (the test crates enable it) and in unit tests, else when `MOTE_POISON_MEMORY=1`
/// (the C test suite).
pub(crate) fn poison_by_default() -> bool {
    cfg!(any(test, feature = "poison"))
        || std::env::var("MOTE_POISON_MEMORY").is_ok_and(|v| v == "1")
}

/// Owned, 64-byte aligned raw memory.
struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

/// The most one buffer may take: the machine's physical memory where the OS says (Linux,
/// Android), else no limit. A size read from a model file (a corrupted `alloc_storage`) can
/// be anything; one larger than the machine is `OutOfMemory` at once, instead of a request an
/// overcommitting kernel might grant and then kill the process for (AddressSanitizer, which
/// reports such requests, found one in the corrupted-executable sweep).
fn max_buffer_bytes() -> usize {
    physical_memory().unwrap_or(usize::MAX)
}

/// The machine's physical memory, where the OS says: `sysconf` on Linux and Android,
/// `hw.memsize` on Apple platforms.
pub(crate) fn physical_memory() -> Option<usize> {
    static MEM: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *MEM.get_or_init(|| {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            // SAFETY: sysconf only reads system configuration.
            let (pages, size) = unsafe {
                (
                    libc::sysconf(libc::_SC_PHYS_PAGES),
                    libc::sysconf(libc::_SC_PAGESIZE),
                )
            };
            if pages > 0 && size > 0 {
                return Some((pages as usize).saturating_mul(size as usize));
            }
        }
        #[cfg(target_vendor = "apple")]
        {
            let mut mem: u64 = 0;
            let mut len = std::mem::size_of::<u64>();
            // SAFETY: the name is a NUL-terminated string; `mem` and `len` are valid for
            // writes of the sizes given, and sysctlbyname writes at most `len` bytes.
            let rc = unsafe {
                libc::sysctlbyname(
                    c"hw.memsize".as_ptr(),
                    (&mut mem as *mut u64).cast(),
                    &mut len,
                    std::ptr::null_mut(),
                    0,
                )
            };
            if rc == 0 && mem > 0 {
                return Some(usize::try_from(mem).unwrap_or(usize::MAX));
            }
        }
        None
    })
}

impl AlignedBuf {
    fn new(len: usize, zeroed: bool) -> Result<Self> {
        if len > max_buffer_bytes() {
            return Err(Error::OutOfMemory(len));
        }
        // Zero-sized requests still get a real, aligned pointer: kernels reject NULL data.
        let layout =
            Layout::from_size_align(len.max(1), ALIGNMENT).map_err(|_| Error::OutOfMemory(len))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe {
            if zeroed {
                std::alloc::alloc_zeroed(layout)
            } else {
                std::alloc::alloc(layout)
            }
        };
        let ptr = NonNull::new(raw).ok_or(Error::OutOfMemory(len))?;
        Ok(AlignedBuf { ptr, layout })
    }
}

// SAFETY: AlignedBuf uniquely owns its allocation; moving it between threads moves ownership.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references to an AlignedBuf expose no access to the memory.
unsafe impl Sync for AlignedBuf {}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated with exactly this layout in `AlignedBuf::new`.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// A cache of freed buffers keyed by size, shared by a session and the storages it allocated.
///
/// Relax plans storage sizes at compile time, so the same sizes recur on every call: reusing
/// them makes steady-state inference allocation-free.
pub struct Pool {
    free: Mutex<PoolState>,
    limit_bytes: usize,
    /// Overwrite every buffer handed out (fresh or recycled), so that work a kernel skipped
    /// cannot pass for done by leaving an earlier run's bytes in place.
    poison: bool,
    /// The most bytes live storages allocated from this pool may hold together
    /// (`SessionOptions::memory_budget_bytes`); `PoolState::live` counts them.
    budget: usize,
}

/// Free buffers by size. A model uses a handful of distinct sizes, so a linear list beats
/// hashing on the hot path.
#[derive(Default)]
struct PoolState {
    by_size: Vec<(usize, Vec<AlignedBuf>)>,
    cached_bytes: usize,
    /// Bytes of live storages allocated from this pool (rounded to the alignment). Counted
    /// under the lock every allocation and release takes anyway, so the budget costs no
    /// atomic operation of its own.
    live: usize,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("limit_bytes", &self.limit_bytes)
            .finish()
    }
}

impl Pool {
    /// A pool that keeps at most `limit_bytes` of freed memory for reuse.
    pub fn new(limit_bytes: usize) -> Arc<Pool> {
        Pool::with_poison(limit_bytes, false)
    }

    /// A pool that, when `poison` is set, overwrites every buffer it hands out (see
    /// `SessionOptions::poison_memory`).
    pub(crate) fn with_poison(limit_bytes: usize, poison: bool) -> Arc<Pool> {
        Pool::with_budget(limit_bytes, poison, usize::MAX)
    }

    /// [`Pool::with_poison`] whose live storages may hold at most `budget` bytes together.
    pub(crate) fn with_budget(limit_bytes: usize, poison: bool, budget: usize) -> Arc<Pool> {
        Arc::new(Pool {
            free: Mutex::new(PoolState::default()),
            limit_bytes,
            poison,
            budget,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        // Every update keeps the state consistent before anything can panic.
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Count `size` more live bytes (refused when that would pass the budget), and take a
    /// cached buffer of that size if there is one.
    fn take(&self, size: usize) -> Result<Option<AlignedBuf>> {
        let mut st = self.state();
        let live = st.live;
        if live.saturating_add(size) > self.budget {
            return Err(self.exhausted(size, live));
        }
        st.live = live + size;
        let buf = st
            .by_size
            .iter_mut()
            .find(|(s, _)| *s == size)
            .and_then(|(_, list)| list.pop());
        if buf.is_some() {
            st.cached_bytes -= size;
        }
        Ok(buf)
    }

    /// The error of an allocation over the budget, built out of line (the check on the hot
    /// path stays a compare and a branch).
    #[cold]
    #[inline(never)]
    fn exhausted(&self, size: usize, live: usize) -> Error {
        Error::ResourceExhausted {
            budget: "SessionOptions::memory_budget_bytes",
            message: format!(
                "allocating {size} bytes with {live} already held would pass the budget of {} \
                 bytes",
                self.budget
            ),
        }
    }

    /// Count `size` more live bytes held elsewhere (device memory, docs/opencl.md §8), refused
    /// when that would pass the budget; [`Pool::release`] gives them back.
    pub(crate) fn reserve(&self, size: usize) -> Result<()> {
        let mut st = self.state();
        let live = st.live;
        if live.saturating_add(size) > self.budget {
            return Err(self.exhausted(size, live));
        }
        st.live = live + size;
        Ok(())
    }

    /// Give back bytes counted by [`Pool::reserve`].
    pub(crate) fn release(&self, size: usize) {
        self.unreserve(size);
    }

    /// Give back a reservation whose allocation failed.
    fn unreserve(&self, size: usize) {
        let mut st = self.state();
        st.live = st.live.saturating_sub(size);
    }

    /// Bytes the budget has left (`SessionOptions::memory_budget_bytes` minus live storage).
    pub(crate) fn budget_left(&self) -> usize {
        self.budget.saturating_sub(self.state().live)
    }

    /// Bytes of live storage allocated from this pool.
    pub fn live_bytes(&self) -> usize {
        self.state().live
    }

    /// A storage of `size` bytes was dropped: count it out, and keep its buffer for reuse if
    /// the cache has room.
    fn give(&self, size: usize, buf: AlignedBuf) {
        {
            let mut st = self.state();
            st.live = st.live.saturating_sub(size);
            if st.cached_bytes + size <= self.limit_bytes {
                st.cached_bytes += size;
                match st.by_size.iter_mut().find(|(s, _)| *s == size) {
                    Some((_, list)) => list.push(buf),
                    None => st.by_size.push((size, vec![buf])),
                }
            }
        }
    }

    /// Whether buffers from this pool are poisoned.
    pub(crate) fn poisons(&self) -> bool {
        self.poison
    }

    /// Bytes currently held for reuse.
    pub fn cached_bytes(&self) -> usize {
        self.free.lock().map(|s| s.cached_bytes).unwrap_or(0)
    }

    /// Release every cached buffer.
    pub fn clear(&self) {
        if let Ok(mut st) = self.free.lock() {
            st.by_size.clear();
            st.cached_bytes = 0;
        }
    }
}

enum Memory {
    Owned {
        buf: Option<AlignedBuf>,
        pool: Option<Arc<Pool>>,
    },
    Borrowed {
        ptr: NonNull<u8>,
        _owner: Option<Box<dyn Any + Send + Sync>>,
    },
}

/// One raw allocation that tensors view.
pub struct Storage {
    mem: Memory,
    len: usize,
}

// SAFETY: Storage owns its allocation (or holds a borrow whose owner promised it is valid and
// usable from any thread for the storage's lifetime). Concurrent writes are the caller's
// contract exactly as for any DLPack buffer: Mote only writes through a storage from the single
// VM session that allocated it, and exposes mutable access only when the storage is unshared.
unsafe impl Send for Storage {}
// SAFETY: see `Send`; shared references only read the pointer and length.
unsafe impl Sync for Storage {}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Storage").field("len", &self.len).finish()
    }
}

impl Storage {
    /// Allocate `len` bytes, from `pool` when it has a buffer of that size.
    pub fn alloc(len: usize, pool: Option<&Arc<Pool>>) -> Result<Arc<Storage>> {
        Storage::alloc_hinted(len, pool, DType::U8)
    }

    /// [`Storage::alloc`] for memory that will hold `hint` elements: a poisoning pool fills it
    /// with that dtype's poison byte.
    pub(crate) fn alloc_hinted(
        len: usize,
        pool: Option<&Arc<Pool>>,
        hint: DType,
    ) -> Result<Arc<Storage>> {
        let rounded = len.div_ceil(ALIGNMENT).max(1) * ALIGNMENT;
        let cached = match pool {
            Some(p) => p.take(rounded)?,
            None => None,
        };
        let buf = match cached {
            Some(b) => b,
            None => AlignedBuf::new(rounded, false).inspect_err(|_| {
                if let Some(p) = pool {
                    p.unreserve(rounded);
                }
            })?,
        };
        if pool.is_some_and(|p| p.poison) {
            // SAFETY: `buf` is a live allocation of `layout.size()` bytes owned only by us.
            unsafe {
                std::ptr::write_bytes(buf.ptr.as_ptr(), poison_byte(hint), buf.layout.size())
            };
        }
        Ok(Arc::new(Storage {
            mem: Memory::Owned {
                buf: Some(buf),
                pool: pool.cloned(),
            },
            len,
        }))
    }

    /// Allocate `len` zeroed bytes (never from a pool).
    pub fn zeroed(len: usize) -> Result<Arc<Storage>> {
        let buf = AlignedBuf::new(len.div_ceil(ALIGNMENT).max(1) * ALIGNMENT, true)?;
        Ok(Arc::new(Storage {
            mem: Memory::Owned {
                buf: Some(buf),
                pool: None,
            },
            len,
        }))
    }

    /// Wrap memory Mote does not own.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes, and stay valid (and not be used
    /// in a conflicting way by others) until the returned storage and every tensor viewing it
    /// have been dropped. `owner` is dropped when the storage is, and may free the memory.
    /// [`Tensor::is_exclusive`] relies on the "not used in a conflicting way" part: a tensor
    /// holding the only reference to this storage is treated as the only way to reach the
    /// bytes, and a kernel given it by [`Session::call_kernel`](crate::Session::call_kernel)
    /// may write them while nobody else may read or write them.
    pub unsafe fn borrowed(
        ptr: NonNull<u8>,
        len: usize,
        owner: Option<Box<dyn Any + Send + Sync>>,
    ) -> Arc<Storage> {
        Arc::new(Storage {
            mem: Memory::Borrowed { ptr, _owner: owner },
            len,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_ptr(&self) -> *mut u8 {
        match &self.mem {
            Memory::Owned { buf: Some(b), .. } => b.ptr.as_ptr(),
            // Unreachable: `buf` is only taken in `drop`.
            Memory::Owned { buf: None, .. } => NonNull::dangling().as_ptr(),
            Memory::Borrowed { ptr, .. } => ptr.as_ptr(),
        }
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Memory::Owned {
            buf,
            pool: Some(pool),
        } = &mut self.mem
        {
            if let Some(b) = buf.take() {
                pool.give(b.layout.size(), b);
            }
        }
    }
}

struct TensorInner {
    storage: Arc<Storage>,
    offset: usize,
    shape: Arc<[i64]>,
    dtype: DType,
}

/// An n-dimensional array: a typed, shaped view of a [`Storage`].
///
/// Cloning is cheap (reference counted). Tensors are `Send + Sync`; their data is read-only
/// through shared handles, and writable only through [`Tensor::data_mut`] when unshared.
#[derive(Clone)]
pub struct Tensor(Arc<TensorInner>);

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({}, {:?})", self.dtype(), self.shape())
    }
}

/// Number of elements of a shape; an error for negative dims or overflow.
pub fn num_elements(shape: &[i64]) -> Result<usize> {
    shape.iter().try_fold(1usize, |acc, &d| {
        let d = usize::try_from(d)
            .map_err(|_| Error::Mismatch(format!("negative dimension {d} in shape {shape:?}")))?;
        acc.checked_mul(d)
            .ok_or_else(|| Error::Mismatch(format!("shape {shape:?} is too large")))
    })
}

/// Bytes a tensor of this shape and dtype occupies.
pub fn byte_size(shape: &[i64], dtype: DType) -> Result<usize> {
    num_elements(shape)?
        .checked_mul(dtype.size_bytes())
        .ok_or_else(|| Error::Mismatch(format!("shape {shape:?} is too large")))
}

impl Tensor {
    /// A view of `storage` at byte `offset`; checks that it fits.
    pub fn view(
        storage: Arc<Storage>,
        offset: usize,
        shape: impl Into<Arc<[i64]>>,
        dtype: DType,
    ) -> Result<Tensor> {
        let shape: Arc<[i64]> = shape.into();
        let nbytes = byte_size(&shape, dtype)?;
        if offset
            .checked_add(nbytes)
            .is_none_or(|end| end > storage.len())
        {
            return Err(Error::Mismatch(format!(
                "a {dtype} tensor of shape {shape:?} at offset {offset} does not fit in a storage of {} bytes",
                storage.len()
            )));
        }
        Ok(Tensor(Arc::new(TensorInner {
            storage,
            offset,
            shape,
            dtype,
        })))
    }

    /// A new zero-filled tensor.
    pub fn zeros(shape: &[i64], dtype: DType) -> Result<Tensor> {
        let storage = Storage::zeroed(byte_size(shape, dtype)?)?;
        Tensor::view(storage, 0, shape, dtype)
    }

    /// A new tensor holding a copy of `bytes` (row-major, little-endian elements).
    pub fn from_bytes(shape: &[i64], dtype: DType, bytes: &[u8]) -> Result<Tensor> {
        let n = byte_size(shape, dtype)?;
        if bytes.len() != n {
            return Err(Error::Mismatch(format!(
                "{} bytes given for a {dtype} tensor of shape {shape:?}, which needs {n}",
                bytes.len()
            )));
        }
        let storage = Storage::alloc(n, None)?;
        // SAFETY: the storage was just allocated with at least `n` bytes and is not shared.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), storage.as_ptr(), n) };
        Tensor::view(storage, 0, shape, dtype)
    }

    pub fn shape(&self) -> &[i64] {
        &self.0.shape
    }

    /// The shape, shared (no copy).
    pub fn shape_arc(&self) -> &Arc<[i64]> {
        &self.0.shape
    }

    pub fn ndim(&self) -> usize {
        self.0.shape.len()
    }

    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    pub fn num_elements(&self) -> usize {
        // Checked when the view was made.
        self.0.shape.iter().map(|&d| d as usize).product()
    }

    pub fn byte_len(&self) -> usize {
        self.num_elements() * self.0.dtype.size_bytes()
    }

    pub fn storage(&self) -> &Arc<Storage> {
        &self.0.storage
    }

    pub fn byte_offset(&self) -> usize {
        self.0.offset
    }

    /// Address of the first element.
    pub fn data_ptr(&self) -> *mut u8 {
        // The offset was checked against the storage length when the view was made.
        self.0.storage.as_ptr().wrapping_add(self.0.offset)
    }

    /// The raw element bytes.
    pub fn data(&self) -> &[u8] {
        // SAFETY: the view lies inside the storage (checked in `view`), which lives as long as
        // `self`. Writers (kernels) write tensors the VM allocated before handing them out, and
        // the arguments of a kernel-only library's kernel during `Session::call_kernel`, which
        // takes them by `&mut` and only when `is_exclusive`: no `&[u8]` from this function can
        // then be alive, and no other handle exists to make one.
        unsafe { std::slice::from_raw_parts(self.data_ptr(), self.byte_len()) }
    }

    /// Mutable element bytes, only when no other handle shares this tensor or its storage.
    pub fn data_mut(&mut self) -> Result<&mut [u8]> {
        let len = self.byte_len();
        let ptr = self.data_ptr();
        let inner = Arc::get_mut(&mut self.0).ok_or_else(|| {
            Error::InvalidArgument("tensor is shared; copy it before writing".into())
        })?;
        if Arc::get_mut(&mut inner.storage).is_none() {
            return Err(Error::InvalidArgument(
                "tensor storage is shared; copy it before writing".into(),
            ));
        }
        // SAFETY: both the view and its storage are uniquely owned by `self`, borrowed mutably.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }

    /// Whether this handle is the only way to reach its bytes: neither the handle (a clone
    /// of it) nor its storage (another view of it, from [`Tensor::reshape`] or
    /// [`Tensor::view`], or an `Arc<Storage>` kept from [`Tensor::storage`]) is shared.
    ///
    /// A storage made by [`Storage::borrowed`] counts as exclusive when this tensor holds its
    /// only reference: the memory's owner promised, in that function's safety contract, that
    /// nobody else uses the bytes in a conflicting way while the storage lives. This is what
    /// [`Session::call_kernel`](crate::Session::call_kernel) requires of every tensor it lets
    /// a kernel write. Taking `&mut self` means no borrow of this handle's data
    /// ([`Tensor::data`], [`Tensor::as_slice`]) is alive while the answer is used.
    pub fn is_exclusive(&mut self) -> bool {
        // `get_mut` also fails on weak references, so no handle can be revived later.
        Arc::get_mut(&mut self.0).is_some_and(|inner| Arc::get_mut(&mut inner.storage).is_some())
    }

    /// Same data, new shape (no copy). The element count must match.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let n = num_elements(shape)?;
        if n != self.num_elements() {
            return Err(Error::Mismatch(format!(
                "cannot reshape a tensor of shape {:?} into {shape:?}",
                self.shape()
            )));
        }
        Tensor::view(
            self.0.storage.clone(),
            self.0.offset,
            shape.to_vec(),
            self.0.dtype,
        )
    }

    /// A deep copy into fresh memory.
    pub fn deep_copy(&self) -> Result<Tensor> {
        Tensor::from_bytes(self.shape(), self.dtype(), self.data())
    }

    /// Elements as `T`, checked against the dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.check_element::<T>()?;
        let bytes = self.data();
        if (bytes.as_ptr() as usize) % std::mem::align_of::<T>() != 0 {
            return Err(Error::Mismatch(
                "tensor data is not aligned for its element type".into(),
            ));
        }
        // SAFETY: dtype matches T (same size, any bit pattern valid for these plain types), the
        // pointer is aligned for T and the length is a whole number of elements.
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), self.num_elements()) })
    }

    fn check_element<T: Element>(&self) -> Result<()> {
        if T::DTYPE != self.dtype() && !(T::DTYPE == DType::U8 && self.dtype() == DType::BOOL) {
            return Err(Error::Mismatch(format!(
                "tensor holds {}, not {}",
                self.dtype(),
                T::DTYPE
            )));
        }
        Ok(())
    }

    /// Copy from a slice of elements.
    pub fn from_slice<T: Element>(shape: &[i64], data: &[T]) -> Result<Tensor> {
        // SAFETY: `Element` types are plain data without padding.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data))
        };
        Tensor::from_bytes(shape, T::DTYPE, bytes)
    }

    /// The elements as an `ndarray` view of the tensor's own memory (no copy), in its shape.
    /// `T` must be the tensor's element type.
    #[cfg(feature = "ndarray")]
    pub fn array_view<T: Element>(&self) -> Result<ndarray::ArrayViewD<'_, T>> {
        let shape = self.dims()?;
        ndarray::ArrayViewD::from_shape(shape, self.as_slice::<T>()?)
            .map_err(|e| Error::Mismatch(e.to_string()))
    }

    /// The elements as a mutable `ndarray` view of the tensor's own memory (no copy), only
    /// when no other handle shares the tensor or its storage ([`Tensor::data_mut`]'s rule).
    #[cfg(feature = "ndarray")]
    pub fn array_view_mut<T: Element>(&mut self) -> Result<ndarray::ArrayViewMutD<'_, T>> {
        self.check_element::<T>()?;
        let shape = self.dims()?;
        let n = self.num_elements();
        let bytes = self.data_mut()?;
        if (bytes.as_ptr() as usize) % std::mem::align_of::<T>() != 0 {
            return Err(Error::Mismatch(
                "tensor data is not aligned for its element type".into(),
            ));
        }
        // SAFETY: the dtype matches T (same size, any bit pattern valid for these plain
        // types), the pointer is aligned for T, `n` elements fill the bytes, and the bytes are
        // borrowed mutably from an exclusive tensor for the view's lifetime.
        let elems = unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), n) };
        ndarray::ArrayViewMutD::from_shape(shape, elems).map_err(|e| Error::Mismatch(e.to_string()))
    }

    /// The shape as `ndarray` dimensions.
    #[cfg(feature = "ndarray")]
    fn dims(&self) -> Result<Vec<usize>> {
        self.shape()
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| Error::Mismatch(format!("dimension {d}"))))
            .collect()
    }

    /// Copy into an owned `ndarray` array.
    #[cfg(feature = "ndarray")]
    pub fn to_ndarray<T: Element>(&self) -> Result<ndarray::ArrayD<T>> {
        Ok(self.array_view::<T>()?.to_owned())
    }

    /// A tensor holding a copy of any `ndarray` array (any memory order), in Mote's aligned
    /// memory.
    #[cfg(feature = "ndarray")]
    pub fn from_array<T, S, D>(a: &ndarray::ArrayBase<S, D>) -> Result<Tensor>
    where
        T: Element,
        S: ndarray::Data<Elem = T>,
        D: ndarray::Dimension,
    {
        let shape: Vec<i64> = a.shape().iter().map(|&d| d as i64).collect();
        match a.as_slice() {
            Some(s) => Tensor::from_slice(&shape, s),
            None => {
                let v: Vec<T> = a.iter().cloned().collect();
                Tensor::from_slice(&shape, &v)
            }
        }
    }

    /// True when both handles view the same memory with the same layout.
    pub fn same_data(&self, other: &Tensor) -> bool {
        self.data_ptr() == other.data_ptr()
            && self.shape() == other.shape()
            && self.dtype() == other.dtype()
    }
}

/// Element types with a fixed dtype. Sealed: only plain numeric types.
pub trait Element: Copy + Send + Sync + 'static + private::Sealed {
    const DTYPE: DType;
}

mod private {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $dt:expr),* $(,)?) => {$(
        impl private::Sealed for $t {}
        impl Element for $t { const DTYPE: DType = $dt; }
    )*};
}

element! {
    f32 => DType::F32, f64 => DType::F64, half::f16 => DType::F16, half::bf16 => DType::BF16,
    i8 => DType::I8, i16 => DType::I16, i32 => DType::I32, i64 => DType::I64,
    u8 => DType::U8, u16 => DType::U16, u32 => DType::U32, u64 => DType::U64,
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_poisoning_pool_poisons_fresh_and_recycled_buffers() {
        let pool = Pool::with_poison(1 << 20, true);
        let a = Storage::alloc_hinted(100, Some(&pool), DType::F32).unwrap();
        // SAFETY: the storage is 100 bytes, unshared.
        let bytes = unsafe { std::slice::from_raw_parts_mut(a.as_ptr(), 100) };
        assert!(bytes.iter().all(|&b| b == POISON_FLOAT));
        let t = Tensor::view(a.clone(), 0, vec![25], DType::F32).unwrap();
        assert!(t.as_slice::<f32>().unwrap().iter().all(|v| v.is_nan()));
        bytes.fill(7);
        let addr = a.as_ptr();
        drop(t);
        drop(a);
        // Same size: the pool hands the same buffer back, overwritten for the new dtype.
        let b = Storage::alloc_hinted(100, Some(&pool), DType::I32).unwrap();
        assert_eq!(b.as_ptr(), addr);
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), 100) };
        assert!(bytes.iter().all(|&b| b == POISON_OTHER));
        assert!(crate::dtype::DType::F16.is_float() && poison_byte(DType::F16) == POISON_FLOAT);
        // A pool that does not poison leaves recycled bytes alone (no cost in release).
        let plain = Pool::new(1 << 20);
        let c = Storage::alloc(64, Some(&plain)).unwrap();
        // SAFETY: 64 bytes, unshared.
        unsafe { std::ptr::write_bytes(c.as_ptr(), 7, 64) };
        drop(c);
        let d = Storage::alloc(64, Some(&plain)).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { *d.as_ptr() }, 7);
    }

    use super::*;

    /// A buffer larger than the machine's memory is `OutOfMemory` without asking the
    /// allocator (a size from a corrupted model file).
    #[test]
    fn impossible_sizes_are_out_of_memory() {
        for len in [usize::MAX / 2, 0x5a00_0000_0000_0800] {
            assert!(matches!(
                Storage::alloc(len, None),
                Err(Error::OutOfMemory(_))
            ));
            assert!(matches!(Storage::zeroed(len), Err(Error::OutOfMemory(_))));
        }
        assert!(Storage::alloc(4096, None).is_ok());
    }

    #[cfg(feature = "ndarray")]
    #[test]
    fn aligned_and_round_trips_through_ndarray() {
        let a = ndarray::Array::from_shape_fn((3, 5), |(i, j)| (i * 10 + j) as f32);
        let t = Tensor::from_array(&a).unwrap();
        assert_eq!(t.data_ptr() as usize % ALIGNMENT, 0);
        assert_eq!(t.shape(), &[3, 5]);
        let b = t.to_ndarray::<f32>().unwrap();
        assert_eq!(b, a.clone().into_dyn());
        // Transposed (non-contiguous) input is copied in logical order.
        let c = ndarray::array![[1i32, 2], [3, 4]];
        let t = Tensor::from_array(&c.t()).unwrap();
        assert_eq!(t.as_slice::<i32>().unwrap(), &[1, 3, 2, 4]);
        assert!(t.as_slice::<f32>().is_err());
    }

    /// Views are the tensor's own memory: a view reads it in place, a mutable view writes it
    /// (seen by the tensor afterwards), and the rules of `as_slice` and `data_mut` hold: the
    /// element type must match, and a shared tensor gives no mutable view.
    #[cfg(feature = "ndarray")]
    #[test]
    fn ndarray_views_are_zero_copy() {
        let a = ndarray::Array::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as f32);
        let mut t = Tensor::from_array(&a).unwrap();
        {
            let v = t.array_view::<f32>().unwrap();
            assert_eq!(v.as_ptr() as usize, t.data_ptr() as usize, "no copy");
            assert_eq!(v.shape(), &[2, 3, 4]);
            assert_eq!(v[[1, 2, 3]], 123.0);
        }
        assert!(t.array_view::<i32>().is_err());
        assert!(t.array_view_mut::<i32>().is_err());
        {
            let mut m = t.array_view_mut::<f32>().unwrap();
            m[[0, 1, 2]] = -1.0;
            m.slice_mut(ndarray::s![1, .., 0]).fill(7.0);
        }
        let s = t.as_slice::<f32>().unwrap();
        assert_eq!(s[6], -1.0);
        assert_eq!((s[12], s[16], s[20]), (7.0, 7.0, 7.0));
        let shared = t.clone();
        assert!(
            t.array_view_mut::<f32>().is_err(),
            "shared tensors are read-only"
        );
        drop(shared);
        assert!(t.array_view_mut::<f32>().is_ok());
        let scalar = Tensor::from_slice::<i64>(&[], &[5]).unwrap();
        assert_eq!(scalar.array_view::<i64>().unwrap().ndim(), 0);
    }

    #[test]
    fn views_are_bounds_checked() {
        let s = Storage::alloc(64, None).unwrap();
        assert!(Tensor::view(s.clone(), 0, vec![16], DType::F32).is_ok());
        assert!(Tensor::view(s.clone(), 4, vec![16], DType::F32).is_err());
        assert!(Tensor::view(s.clone(), 0, vec![-1], DType::F32).is_err());
        assert!(Tensor::view(s, usize::MAX, vec![1], DType::F32).is_err());
    }

    #[test]
    fn pool_reuses_buffers() {
        let pool = Pool::new(1 << 20);
        let p1 = {
            let s = Storage::alloc(100, Some(&pool)).unwrap();
            s.as_ptr()
        };
        assert_eq!(pool.cached_bytes(), 128);
        let s2 = Storage::alloc(120, Some(&pool)).unwrap();
        assert_eq!(s2.as_ptr(), p1);
        assert_eq!(pool.cached_bytes(), 0);
    }

    #[test]
    fn exclusive_only_when_no_other_handle_reaches_the_bytes() {
        let mut t = Tensor::zeros(&[4], DType::F32).unwrap();
        assert!(t.is_exclusive());
        // A clone of the handle.
        let c = t.clone();
        assert!(!t.is_exclusive());
        drop(c);
        assert!(t.is_exclusive());
        // Another view of the same storage: reshape, or view over a kept storage.
        let r = t.reshape(&[2, 2]).unwrap();
        assert!(!t.is_exclusive());
        drop(r);
        let kept = t.storage().clone();
        assert!(!t.is_exclusive());
        let mut v = Tensor::view(kept, 8, vec![2], DType::F32).unwrap();
        assert!(!t.is_exclusive() && !v.is_exclusive());
        drop(t);
        // The view now holds the storage alone: exclusive, although it is a sub-range.
        assert!(v.is_exclusive());
        // A weak reference to the storage could revive a handle.
        let weak = Arc::downgrade(v.storage());
        assert!(!v.is_exclusive());
        drop(weak);
        assert!(v.is_exclusive());
        // Borrowed memory: exclusive while one tensor holds the storage, whose owner (here a
        // clone of the storage that owns the bytes) is not a handle Mote gives out.
        let backing = Storage::alloc(16, None).unwrap();
        let ptr = NonNull::new(backing.as_ptr()).unwrap();
        // SAFETY: `backing` owns 16 valid bytes and is kept alive as the owner; nothing else
        // uses them in this test.
        let lent = unsafe { Storage::borrowed(ptr, 16, Some(Box::new(backing))) };
        let mut b = Tensor::view(lent, 0, vec![4], DType::F32).unwrap();
        assert!(b.is_exclusive());
        let b2 = b.clone();
        assert!(!b.is_exclusive());
        drop(b2);
        // Exclusive means data_mut works, and the other way round.
        assert!(b.is_exclusive() && b.data_mut().is_ok());
    }

    #[test]
    fn data_mut_requires_unique_ownership() {
        let mut t = Tensor::zeros(&[4], DType::F32).unwrap();
        assert!(t.data_mut().is_ok());
        let view = t.reshape(&[2, 2]).unwrap();
        assert!(t.data_mut().is_err());
        drop(view);
        t.data_mut().unwrap()[0] = 1;
    }
}
