//! Tensors and tensor lists.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use mote::{DType, Storage, Tensor, ALIGNMENT};

use crate::error::{check_out, guard, write_out, MoteError, MoteErrorCode, Result};
use crate::handle::Table;

/// An n-dimensional array (opaque handle). Thread-safety: a tensor handle may be used from any
/// thread; its data is plain memory, so concurrent writes (or a write while a session reads
/// the tensor) are data races the caller must avoid.
///
/// A tensor handle a callback receives as an argument (`MoteArg.tensor`) is *lent*: it may view
/// memory that belongs to a compiled kernel and is valid only while the callback runs, and Mote
/// frees the handle when the callback returns. Nothing keeps a lent tensor's memory: keeping it
/// copies it (`mote_tensor_clone`, an input to `mote_session_run`/`mote_session_set_input`).
pub struct MoteTensor {
    _private: [u8; 0],
}

/// A list of tensors, the outputs of a call (opaque handle). Immutable; any thread.
pub struct MoteTensorList {
    _private: [u8; 0],
}

/// Element type, DLPack-compatible: `code` is a `MoteDtypeCode`, `bits` the element width,
/// `lanes` 1 for scalars.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoteDtype {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// Values of `MoteDtype::code` (DLPack's `DLDataTypeCode`).
#[repr(u32)]
#[derive(Clone, Copy, Debug)]
pub enum MoteDtypeCode {
    Int = 0,
    Uint = 1,
    Float = 2,
    Bfloat = 4,
    Bool = 6,
}

/// What `mote_tensor_info` reports. Pointers are borrowed from the tensor and valid until it is
/// freed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MoteTensorInfo {
    pub dtype: MoteDtype,
    /// Number of dimensions; `shape` has this many entries.
    pub ndim: usize,
    pub shape: *const i64,
    /// The first element. Dense, row-major, 64-byte aligned for tensors Mote allocated.
    pub data: *mut c_void,
    /// Size of the data in bytes.
    pub byte_size: usize,
}

/// Called once, from any thread, when Mote no longer uses memory lent to it with
/// `mote_tensor_from_borrowed`. Must return normally (no C++ exception, no `longjmp`).
pub type MoteReleaseCallback = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

pub(crate) static TENSORS: Table<TensorEntry> = Table::new(0x54, "MoteTensor");

/// What a `MoteTensor` handle names.
pub(crate) struct TensorEntry {
    tensor: Tensor,
    /// `Some` for a tensor lent to a callback: its memory may belong to a kernel and be valid
    /// only during the call. The flag is `true` while the loan lasts; copies read the memory
    /// under its read lock and the loan ends under its write lock, so no copy made from another
    /// thread can read the memory after the callback has returned.
    loan: Option<RwLock<bool>>,
}

impl TensorEntry {
    pub(crate) fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// Whether the handle names a tensor lent to a callback (see `loan`).
    pub(crate) fn is_lent(&self) -> bool {
        self.loan.is_some()
    }

    /// The tensor, to be kept beyond the handle: the same memory for an ordinary handle, a
    /// deep copy into fresh memory for a lent one.
    pub(crate) fn keep(&self) -> Result<Tensor> {
        let Some(loan) = &self.loan else {
            return Ok(self.tensor.clone());
        };
        let live = loan.read().unwrap_or_else(|p| p.into_inner());
        if !*live {
            return Err(MoteError::new(
                MoteErrorCode::InvalidHandle,
                "the MoteTensor was lent to a callback that has returned",
            ));
        }
        Ok(self.tensor.deep_copy()?)
    }
}

/// A tensor lent to a callback for one call: the handle, freed when the loan is dropped.
pub(crate) struct Loan {
    handle: *mut MoteTensor,
    entry: Arc<TensorEntry>,
}

impl Loan {
    pub(crate) fn new(tensor: Tensor) -> Result<Loan> {
        let entry = Arc::new(TensorEntry {
            tensor,
            loan: Some(RwLock::new(true)),
        });
        let handle = TENSORS.insert_arc(Arc::clone(&entry))?.cast();
        Ok(Loan { handle, entry })
    }

    pub(crate) fn handle(&self) -> *mut MoteTensor {
        self.handle
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        // The handle may already be gone (the callback freed it, or passed it on as its
        // result): either way it must not be live after this.
        let _ = TENSORS.remove(self.handle);
        if let Some(loan) = &self.entry.loan {
            *loan.write().unwrap_or_else(|p| p.into_inner()) = false;
        }
    }
}
pub(crate) static TENSOR_LISTS: Table<Vec<Tensor>> = Table::new(0x4c, "MoteTensorList");

impl From<MoteDtype> for DType {
    fn from(d: MoteDtype) -> DType {
        DType {
            code: d.code,
            bits: d.bits,
            lanes: d.lanes,
        }
    }
}

impl From<DType> for MoteDtype {
    fn from(d: DType) -> MoteDtype {
        MoteDtype {
            code: d.code,
            bits: d.bits,
            lanes: d.lanes,
        }
    }
}

pub(crate) fn new_handle(t: Tensor) -> Result<*mut MoteTensor> {
    Ok(TENSORS
        .insert(TensorEntry {
            tensor: t,
            loan: None,
        })?
        .cast())
}

fn shape_arg<'a>(shape: *const i64, ndim: usize) -> Result<&'a [i64]> {
    if ndim == 0 {
        return Ok(&[]);
    }
    if shape.is_null() {
        return Err(MoteError::null("shape"));
    }
    if ndim > 32 {
        return Err(MoteError::new(
            MoteErrorCode::InvalidArgument,
            format!("{ndim} dimensions; at most 32 are supported"),
        ));
    }
    // SAFETY: non-NULL; the contract requires `ndim` readable elements.
    let s = unsafe { std::slice::from_raw_parts(shape, ndim) };
    if let Some(d) = s.iter().find(|&&d| d < 0) {
        return Err(MoteError::new(
            MoteErrorCode::InvalidArgument,
            format!("negative dimension {d} in shape {s:?}"),
        ));
    }
    Ok(s)
}

fn check_dtype(dtype: MoteDtype) -> Result<DType> {
    let d = DType::from(dtype);
    let known = matches!(
        (d.code, d.bits),
        (0, 8 | 16 | 32 | 64) | (1, 8 | 16 | 32 | 64) | (2, 16 | 32 | 64) | (4, 16) | (6, 8)
    );
    if !known || d.lanes != 1 {
        return Err(MoteError::new(
            MoteErrorCode::InvalidArgument,
            format!(
                "unsupported dtype (code {}, bits {}, lanes {})",
                d.code, d.bits, d.lanes
            ),
        ));
    }
    Ok(d)
}

/// A new zero-filled tensor (64-byte aligned).
#[no_mangle]
pub unsafe extern "C" fn mote_tensor_new(
    dtype: MoteDtype,
    shape: *const i64,
    ndim: usize,
    out: *mut *mut MoteTensor,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let t = Tensor::zeros(shape_arg(shape, ndim)?, check_dtype(dtype)?)?;
        write_out(out, new_handle(t)?);
        Ok(())
    })
}

/// A new tensor holding a copy of `byte_size` bytes at `data` (dense, row-major).
/// `byte_size` must equal the tensor's size; `data` is not retained.
#[no_mangle]
pub unsafe extern "C" fn mote_tensor_from_copy(
    dtype: MoteDtype,
    shape: *const i64,
    ndim: usize,
    data: *const c_void,
    byte_size: usize,
    out: *mut *mut MoteTensor,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let dtype = check_dtype(dtype)?;
        let shape = shape_arg(shape, ndim)?;
        let bytes = if byte_size == 0 {
            &[][..]
        } else if data.is_null() {
            return Err(MoteError::null("data"));
        } else {
            // SAFETY: non-NULL; the contract requires `byte_size` readable bytes.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), byte_size) }
        };
        let t = Tensor::from_bytes(shape, dtype, bytes)?;
        write_out(out, new_handle(t)?);
        Ok(())
    })
}

struct Borrowed {
    release: MoteReleaseCallback,
    user_data: usize,
    /// Set once the tensor is handed to the caller: a failed call must not call `release`.
    armed: Arc<AtomicBool>,
}

impl Drop for Borrowed {
    fn drop(&mut self) {
        if let (Some(release), true) = (self.release, self.armed.load(Ordering::Acquire)) {
            // SAFETY: the caller registered this callback to be called exactly once, from any
            // thread, when the memory is no longer used; this is that moment.
            crate::callback::embedder(|| unsafe { release(self.user_data as *mut c_void) })
        }
    }
}

/// A tensor over memory the caller owns: no copy. `data` must be 64-byte aligned, hold
/// `byte_size` bytes (exactly the tensor's size), and stay valid and otherwise unused until
/// Mote calls `release(user_data)`, which it does exactly once, from any thread, when neither
/// this tensor nor any output that shares its memory is in use any more (`release` may be NULL
/// if the caller instead keeps the memory alive for the rest of the process). On failure the
/// memory is not retained and `release` is not called.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mote_tensor_from_borrowed(
    dtype: MoteDtype,
    shape: *const i64,
    ndim: usize,
    data: *mut c_void,
    byte_size: usize,
    release: MoteReleaseCallback,
    user_data: *mut c_void,
    out: *mut *mut MoteTensor,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let dtype = check_dtype(dtype)?;
        let shape = shape_arg(shape, ndim)?;
        let Some(ptr) = NonNull::new(data.cast::<u8>()) else {
            return Err(MoteError::null("data"));
        };
        if (data as usize) % ALIGNMENT != 0 {
            return Err(MoteError::new(
                MoteErrorCode::InvalidArgument,
                format!("data {data:p} is not {ALIGNMENT}-byte aligned (model kernels assume it)"),
            ));
        }
        let expected = shape.iter().try_fold(dtype.bits as usize / 8, |acc, &d| {
            acc.checked_mul(d as usize)
        });
        if expected != Some(byte_size) {
            return Err(MoteError::new(
                MoteErrorCode::Mismatch,
                format!("byte_size {byte_size} does not match a {dtype} tensor of shape {shape:?}"),
            ));
        }
        let armed = Arc::new(AtomicBool::new(false));
        let owner = Borrowed {
            release,
            user_data: user_data as usize,
            armed: Arc::clone(&armed),
        };
        // SAFETY: the caller guarantees `data` is valid for `byte_size` bytes until `release`
        // runs, which happens when the storage (and so every tensor viewing it) is dropped.
        let storage = unsafe { Storage::borrowed(ptr, byte_size, Some(Box::new(owner))) };
        let handle = new_handle(Tensor::view(storage, 0, shape.to_vec(), dtype)?)?;
        armed.store(true, Ordering::Release);
        write_out(out, handle);
        Ok(())
    })
}

/// Dtype, shape, data pointer and size of a tensor. The pointers are borrowed: valid until
/// the tensor is freed. For a tensor lent to a callback, `data` is the lent memory itself
/// (writes reach the caller's buffer, as destination-passing outputs need) and is valid only
/// until the callback returns.
#[no_mangle]
pub unsafe extern "C" fn mote_tensor_info(
    tensor: *const MoteTensor,
    out: *mut MoteTensorInfo,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let e = TENSORS.get(tensor)?;
        let t = e.tensor();
        write_out(
            out,
            MoteTensorInfo {
                dtype: t.dtype().into(),
                ndim: t.ndim(),
                shape: t.shape().as_ptr(),
                data: t.data_ptr().cast(),
                byte_size: t.byte_len(),
            },
        );
        Ok(())
    })
}

/// A second handle to a tensor, which the caller frees. For an ordinary handle it shares the
/// memory (no copy). For a tensor lent to a callback (`MoteArg.tensor`) it is a deep copy into
/// fresh memory owned by the new handle, valid after the callback returns: the lent memory may
/// belong to a kernel and be reused or freed once the call is over. The copy is a snapshot:
/// later writes to the lent tensor do not reach it. Cloning a lent tensor after its callback
/// has returned gives `MOTE_ERROR_CODE_INVALID_HANDLE`.
#[no_mangle]
pub unsafe extern "C" fn mote_tensor_clone(
    tensor: *const MoteTensor,
    out: *mut *mut MoteTensor,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let kept = TENSORS.get(tensor)?.keep()?;
        write_out(out, new_handle(kept)?);
        Ok(())
    })
}

/// Free a tensor handle. NULL is a no-op; memory shared with live outputs stays alive. Handles
/// lent to a callback are freed by Mote when it returns (freeing one earlier is harmless).
#[no_mangle]
pub unsafe extern "C" fn mote_tensor_free(tensor: *mut MoteTensor) {
    crate::error::guard_value((), || TENSORS.free(tensor))
}

/// Number of tensors in a list.
#[no_mangle]
pub unsafe extern "C" fn mote_tensor_list_len(
    list: *const MoteTensorList,
    out: *mut usize,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        write_out(out, TENSOR_LISTS.get(list)?.len());
        Ok(())
    })
}

/// Tensor `index` of a list, as a new handle the caller frees (the list keeps its own).
#[no_mangle]
pub unsafe extern "C" fn mote_tensor_list_get(
    list: *const MoteTensorList,
    index: usize,
    out: *mut *mut MoteTensor,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let l = TENSOR_LISTS.get(list)?;
        let t = l
            .get(index)
            .cloned()
            .ok_or_else(|| MoteError::out_of_range(index, l.len(), "tensors in the list"))?;
        write_out(out, new_handle(t)?);
        Ok(())
    })
}

/// Free a tensor list. NULL is a no-op. Tensors taken from it stay valid.
#[no_mangle]
pub unsafe extern "C" fn mote_tensor_list_free(list: *mut MoteTensorList) {
    crate::error::guard_value((), || TENSOR_LISTS.free(list))
}
