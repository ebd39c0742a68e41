//! Device tensors (docs/opencl.md §8): tensors kept on a session's OpenCL device between calls,
//! so that a call does not copy them in or out each time.

use mote::{DeviceTensor, Value};

use crate::error::{check_out, guard, str_arg, write_out, MoteError, MoteErrorCode, Result};
use crate::handle::Table;
use crate::session::{dl_device, MoteSession, SESSIONS};
use crate::tensor::{new_handle, MoteTensor, TENSORS};

/// A tensor on an OpenCL device (opaque handle), made by `mote_session_upload` or returned by
/// `mote_session_run_device`. It belongs to the device of the session that made it and may be
/// passed to that session's calls (and to other sessions on the same device). Its device
/// memory counts in that session's memory budget until the last handle to it is freed. Any
/// thread; the handle itself is immutable.
pub struct MoteDeviceTensor {
    _private: [u8; 0],
}

/// A list of device tensors, the outputs of `mote_session_run_device` (opaque handle).
/// Immutable; any thread.
pub struct MoteDeviceTensorList {
    _private: [u8; 0],
}

/// One input of `mote_session_run_device`: exactly one of the two handles is non-NULL. A host
/// tensor is copied to the device for the call; a device tensor is passed as it is.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MoteCallArg {
    pub tensor: *const MoteTensor,
    pub device_tensor: *const MoteDeviceTensor,
}

pub(crate) static DEVICE_TENSORS: Table<DeviceTensor> = Table::new(0x44, "MoteDeviceTensor");
static DEVICE_TENSOR_LISTS: Table<Vec<DeviceTensor>> = Table::new(0x45, "MoteDeviceTensorList");

fn device_handle(t: DeviceTensor) -> Result<*mut MoteDeviceTensor> {
    Ok(DEVICE_TENSORS.insert(t)?.cast())
}

/// A copy of host tensor `tensor` on `session`'s device, as a new handle the caller frees.
/// The copy has finished when this returns: `tensor` may be changed or freed. A session on
/// the CPU (its model has no OpenCL code) is `MOTE_ERROR_CODE_INVALID_ARGUMENT`; a copy the
/// driver refuses is `MOTE_ERROR_CODE_DEVICE`, and device memory over the session's budget
/// `MOTE_ERROR_CODE_RESOURCE_EXHAUSTED`.
#[no_mangle]
pub unsafe extern "C" fn mote_session_upload(
    session: *mut MoteSession,
    tensor: *const MoteTensor,
    out: *mut *mut MoteDeviceTensor,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let s = SESSIONS.get(session)?;
        let t = TENSORS.get(tensor)?.keep()?;
        let d = s.lock()?.upload(&t)?;
        write_out(out, device_handle(d)?);
        Ok(())
    })
}

/// A host copy of device tensor `tensor`, once `session`'s work on the device has finished, as
/// a new tensor handle the caller frees. `session` must run on the device `tensor` is on.
#[no_mangle]
pub unsafe extern "C" fn mote_session_download(
    session: *mut MoteSession,
    tensor: *const MoteDeviceTensor,
    out: *mut *mut MoteTensor,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let s = SESSIONS.get(session)?;
        let t = DEVICE_TENSORS.get(tensor)?;
        let mut session = s.lock()?;
        let here = session.device();
        if t.device() != here {
            return Err(MoteError::new(
                MoteErrorCode::InvalidArgument,
                format!(
                    "a tensor on {} downloaded through a session on {here}",
                    t.device()
                ),
            ));
        }
        let host = session.download(&t)?;
        drop(session);
        write_out(out, new_handle(host)?);
        Ok(())
    })
}

/// Where `tensor` is, as DLPack codes (`*device_type` 4, `*device_id` the OpenCL device index),
/// and how many dimensions it has (`*ndim`). Any out-param may be NULL to skip it.
#[no_mangle]
pub unsafe extern "C" fn mote_device_tensor_info(
    tensor: *const MoteDeviceTensor,
    device_type: *mut i32,
    device_id: *mut i32,
    ndim: *mut usize,
) -> *mut MoteError {
    guard(|| {
        let t = DEVICE_TENSORS.get(tensor)?;
        let (ty, id) = dl_device(t.device())?;
        if !device_type.is_null() {
            write_out(device_type, ty);
        }
        if !device_id.is_null() {
            write_out(device_id, id);
        }
        if !ndim.is_null() {
            write_out(ndim, t.ndim());
        }
        Ok(())
    })
}

/// Free a device tensor handle. NULL is a no-op. The device memory is released when no
/// handle, list or running call holds it any more.
#[no_mangle]
pub unsafe extern "C" fn mote_device_tensor_free(tensor: *mut MoteDeviceTensor) {
    crate::error::guard_value((), || DEVICE_TENSORS.free(tensor))
}

fn call_args(inputs: *const MoteCallArg, count: usize) -> Result<Vec<Value>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if inputs.is_null() {
        return Err(MoteError::null("inputs"));
    }
    // SAFETY: non-NULL; the contract requires `count` readable entries, valid for the call.
    let inputs = unsafe { std::slice::from_raw_parts(inputs, count) };
    inputs
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let v = match (a.tensor.is_null(), a.device_tensor.is_null()) {
                (false, true) => TENSORS
                    .get(a.tensor)
                    .and_then(|e| e.keep())
                    .map(Value::Tensor),
                (true, false) => DEVICE_TENSORS
                    .get(a.device_tensor)
                    .map(|t| Value::DeviceTensor((*t).clone())),
                _ => Err(MoteError::new(
                    MoteErrorCode::InvalidArgument,
                    "exactly one of tensor and device_tensor must be set",
                )),
            };
            v.map_err(|e| e.context(format_args!("input {i}")))
        })
        .collect()
}

/// The device tensors of a `call_device` result, tuples flattened depth-first; a host tensor
/// among them (a function returning one) is uploaded.
fn device_leaves(
    session: &mut mote::Session,
    v: &Value,
    out: &mut Vec<DeviceTensor>,
) -> Result<()> {
    match v {
        Value::None => {}
        Value::DeviceTensor(t) => out.push(t.clone()),
        Value::Tensor(t) => out.push(session.upload(t)?),
        Value::Tuple(items) => {
            for i in items.iter() {
                device_leaves(session, i, out)?;
            }
        }
        other => {
            return Err(MoteError::new(
                MoteErrorCode::Unsupported,
                format!(
                    "the function returned a {}, which mote_session_run_device cannot \
                     represent (use mote_session_run)",
                    other.kind()
                ),
            ))
        }
    }
    Ok(())
}

/// Call Relax function `function` of a model compiled for OpenCL with `num_inputs` inputs, each
/// a host tensor (copied to the device) or a device tensor (passed as it is); its results stay
/// on the device and are written to `*outputs` as a new list of device tensors the caller
/// frees (tuples flattened depth-first; `mote_session_download` copies one to the host, and
/// they can be passed to the next call as they are). The device work has finished when it
/// returns. A session on the CPU is `MOTE_ERROR_CODE_INVALID_ARGUMENT`: use
/// `mote_session_run`. Busy rules as for `mote_session_run`.
#[no_mangle]
pub unsafe extern "C" fn mote_session_run_device(
    session: *mut MoteSession,
    function: *const std::ffi::c_char,
    inputs: *const MoteCallArg,
    num_inputs: usize,
    outputs: *mut *mut MoteDeviceTensorList,
) -> *mut MoteError {
    guard(|| {
        check_out(outputs, "outputs")?;
        let s = SESSIONS.get(session)?;
        let function = str_arg(function, "function")?;
        let args = call_args(inputs, num_inputs)?;
        let mut session = s.lock()?;
        if session.device() == mote::Device::Cpu {
            return Err(MoteError::new(
                MoteErrorCode::InvalidArgument,
                "mote_session_run_device: this session runs on the CPU (its model has no \
                 OpenCL code); use mote_session_run",
            ));
        }
        let result = session.call_device(function, &args)?;
        let mut leaves = Vec::new();
        device_leaves(&mut session, &result, &mut leaves)?;
        drop(session);
        write_out(outputs, DEVICE_TENSOR_LISTS.insert(leaves)?.cast());
        Ok(())
    })
}

/// Number of device tensors in a list.
#[no_mangle]
pub unsafe extern "C" fn mote_device_tensor_list_len(
    list: *const MoteDeviceTensorList,
    out: *mut usize,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        write_out(out, DEVICE_TENSOR_LISTS.get(list)?.len());
        Ok(())
    })
}

/// Device tensor `index` of a list, as a new handle the caller frees (the list keeps its own).
#[no_mangle]
pub unsafe extern "C" fn mote_device_tensor_list_get(
    list: *const MoteDeviceTensorList,
    index: usize,
    out: *mut *mut MoteDeviceTensor,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let l = DEVICE_TENSOR_LISTS.get(list)?;
        let t = l
            .get(index)
            .cloned()
            .ok_or_else(|| MoteError::out_of_range(index, l.len(), "device tensors in the list"))?;
        write_out(out, device_handle(t)?);
        Ok(())
    })
}

/// Free a device tensor list. NULL is a no-op. Handles taken from it stay valid.
#[no_mangle]
pub unsafe extern "C" fn mote_device_tensor_list_free(list: *mut MoteDeviceTensorList) {
    crate::error::guard_value((), || DEVICE_TENSOR_LISTS.free(list))
}
