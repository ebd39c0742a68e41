//! The stable C ABI of Mote. The contract (errors, ownership, NULL and panic policy,
//! threading) is in `ffi/README.md` and the preamble of `include/mote.h`, generated from
//! these sources by cbindgen (`scripts/cbindgen.sh`).
//!
//! Every `extern "C"` function runs its body inside [`error::guard`], which turns errors and
//! panics into a returned `MoteError*`; handles are table tokens (`handle.rs`), so a stale
//! handle is an error, not undefined behaviour.

// Pointer arguments follow one rule for the whole ABI (README: "Pointers"), rather than a
// `# Safety` section repeated on each of the functions.
#![allow(clippy::missing_safety_doc)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(test)]
mod budget_tests;
mod callback;
mod device;
mod error;
mod function;
mod handle;
mod log;
mod model;
mod session;
mod tensor;

pub use device::{
    mote_device_tensor_free, mote_device_tensor_info, mote_device_tensor_list_free,
    mote_device_tensor_list_get, mote_device_tensor_list_len, mote_session_download,
    mote_session_run_device, mote_session_upload, MoteCallArg, MoteDeviceTensor,
    MoteDeviceTensorList,
};
pub use error::{
    mote_error_code, mote_error_free, mote_error_message, mote_error_new, MoteError, MoteErrorCode,
};
pub use function::{
    mote_function_register, mote_function_unregister, MoteArg, MoteArgKind, MoteFreeCallback,
    MoteFunctionCallback,
};
pub use log::{mote_log_set_callback, MoteLogCallback, MoteLogLevel};
pub use model::{
    mote_model_free, mote_model_from_system_lib, mote_model_function_count,
    mote_model_function_name, mote_model_is_code_free, mote_model_load,
    mote_model_load_from_memory, mote_model_load_from_memory_with_budget,
    mote_model_load_from_memory_with_options, mote_model_load_with_budget,
    mote_model_load_with_options, mote_model_output_count, mote_model_output_info,
    mote_model_param_count, mote_model_param_info, MoteModel, MoteParamInfo, MOTE_LOAD_CODE_FREE,
    MOTE_LOAD_READ_FILE,
};
pub use session::{
    mote_profile_free, mote_profile_get, mote_profile_len, mote_session_device, mote_session_free,
    mote_session_get_output, mote_session_interrupt, mote_session_invoke_stateful,
    mote_session_new, mote_session_options_add_backend, mote_session_options_free,
    mote_session_options_new, mote_session_options_set_max_instructions,
    mote_session_options_set_max_registers, mote_session_options_set_memory_budget,
    mote_session_options_set_opencl_device, mote_session_options_set_opencl_profiling,
    mote_session_options_set_opencl_program_cache, mote_session_options_set_pool_limit,
    mote_session_options_set_stack_budget, mote_session_options_set_threads, mote_session_run,
    mote_session_set_input, mote_session_set_profiling, mote_session_take_profile, MoteProfile,
    MoteProfileEntry, MoteSession, MoteSessionOptions,
};
pub use tensor::{
    mote_tensor_clone, mote_tensor_free, mote_tensor_from_borrowed, mote_tensor_from_copy,
    mote_tensor_info, mote_tensor_list_free, mote_tensor_list_get, mote_tensor_list_len,
    mote_tensor_new, MoteDtype, MoteDtypeCode, MoteReleaseCallback, MoteTensor, MoteTensorInfo,
    MoteTensorList,
};

use std::ffi::c_char;

/// Version of the C ABI this header describes. `mote_abi_version()` returns the library's;
/// they must be equal. It changes only when a release breaks the ABI.
pub const MOTE_ABI_VERSION: u32 = 1;

/// The ABI version of the loaded library (compare with `MOTE_ABI_VERSION`).
#[no_mangle]
pub extern "C" fn mote_abi_version() -> u32 {
    MOTE_ABI_VERSION
}

/// Mote's version, e.g. "0.1.0": a static string, never freed.
#[no_mangle]
pub extern "C" fn mote_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
