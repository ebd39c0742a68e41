//! The kernel services under their own C names, for kernels that call them directly instead of
//! through context slots: those of system libraries, the objects linked into the program
//! (docs/system-lib.md §4). Each forwards to the implementation the slots get.

use std::ffi::c_void;

use super::abi::{ParallelGroupEnv, ParallelLambda};
use super::error_slot::c_boundary;
use super::{services, threadpool};

/// `TVMBackendAllocWorkspace` (docs/tvm-format.md §8.2).
///
/// # Safety
/// None beyond the C signature; the hints are ignored.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAllocWorkspace(
    device_type: i32,
    device_id: i32,
    nbytes: u64,
    dtype_code_hint: i32,
    dtype_bits_hint: i32,
) -> *mut c_void {
    c_boundary("TVMBackendAllocWorkspace", std::ptr::null_mut(), || {
        // SAFETY: the same contract as the context slot's function.
        unsafe {
            services::alloc_workspace(
                device_type,
                device_id,
                nbytes,
                dtype_code_hint,
                dtype_bits_hint,
            )
        }
    })
}

/// `TVMBackendFreeWorkspace` (docs/tvm-format.md §8.2).
///
/// # Safety
/// `ptr` is NULL or a block from `TVMBackendAllocWorkspace` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendFreeWorkspace(
    device_type: i32,
    device_id: i32,
    ptr: *mut c_void,
) -> i32 {
    // SAFETY: the caller's contract is the slot function's.
    c_boundary("TVMBackendFreeWorkspace", -1, || unsafe {
        services::free_workspace(device_type, device_id, ptr)
    })
}

/// `TVMBackendParallelLaunch` (docs/tvm-format.md §8.3).
///
/// # Safety
/// `f` is a parallel lambda that accepts `cdata`.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendParallelLaunch(
    f: ParallelLambda,
    cdata: *mut c_void,
    num_task: i32,
) -> i32 {
    // SAFETY: the caller's contract is the slot function's.
    c_boundary("TVMBackendParallelLaunch", -1, || unsafe {
        threadpool::parallel_launch(f, cdata, num_task)
    })
}

/// `TVMBackendParallelBarrier` (docs/tvm-format.md §8.3).
///
/// # Safety
/// `penv` is NULL or the environment Mote passed to the calling task.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendParallelBarrier(
    task_id: i32,
    penv: *mut ParallelGroupEnv,
) -> i32 {
    // SAFETY: the caller's contract is the slot function's.
    c_boundary("TVMBackendParallelBarrier", -1, || unsafe {
        threadpool::parallel_barrier(task_id, penv)
    })
}
