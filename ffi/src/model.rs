//! Models: loading, and what their functions take.

use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::sync::{Arc, Mutex};

use mote::{Dim, Model};

use crate::error::{check_out, guard, str_arg, write_out, MoteError, Result};
use crate::handle::Table;
use crate::tensor::MoteDtype;

/// A loaded model (opaque handle). Thread-safe: one model may be used from any number of
/// threads at once (typically one session per thread). Sessions keep their model alive, so a
/// model may be freed while sessions made from it are still in use.
pub struct MoteModel {
    _private: [u8; 0],
}

/// One parameter of a model function. Pointers are borrowed from the model and valid until it
/// is freed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MoteParamInfo {
    /// The parameter's name in the Relax function (or the kernel, in a kernel-only library),
    /// UTF-8.
    pub name: *const c_char,
    /// Its dtype; all fields 0 when the model does not say (and for a kernel's scalar
    /// parameter).
    pub dtype: MoteDtype,
    /// Number of dimensions, or -1 when the model does not say (and for a kernel's scalar
    /// parameter).
    pub ndim: i32,
    /// `ndim` dimensions (NULL when `ndim` is -1); -1 marks a symbolic dimension (any size).
    pub shape: *const i64,
}

pub(crate) struct FfiModel {
    pub(crate) model: Model,
    names: Vec<CString>,
    described: Mutex<HashMap<String, Arc<Described>>>,
}

/// What the model says of one function, in the C layout.
struct Described {
    params: Vec<Param>,
    /// `None` when the bytecode does not say what the function returns.
    outputs: Option<Vec<Param>>,
}

struct Param {
    name: CString,
    dtype: MoteDtype,
    shape: Option<Vec<i64>>,
}

pub(crate) static MODELS: Table<FfiModel> = Table::new(0x4d, "MoteModel");

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

impl FfiModel {
    fn new(model: Model) -> FfiModel {
        let names = model.function_names().iter().map(|n| cstring(n)).collect();
        FfiModel {
            model,
            names,
            described: Mutex::new(HashMap::new()),
        }
    }

    /// Parameters and outputs of `function`, computed once and kept for the model's lifetime
    /// (the C side holds pointers into them).
    fn describe(&self, function: &str) -> Result<Arc<Described>> {
        let mut cache = self.described.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = cache.get(function) {
            return Ok(Arc::clone(d));
        }
        let info = self.model.function_info(function)?;
        let described = Arc::new(Described {
            params: info.params.iter().map(Param::from).collect(),
            outputs: info
                .outputs
                .as_ref()
                .map(|o| o.iter().map(Param::from).collect()),
        });
        cache.insert(function.to_string(), Arc::clone(&described));
        Ok(described)
    }

    /// The outputs of `function`: none for a kernel of a kernel-only library (kernels write
    /// into their arguments); `Unsupported` when the bytecode does not say.
    fn outputs(&self, function: &str) -> Result<Arc<Described>> {
        let d = self.describe(function)?;
        if d.outputs.is_none() && !self.model.is_kernel_library() {
            return Err(mote::Error::Unsupported(format!(
                "the instructions of `{function}` do not say what it returns (docs/tvm-format.md \
                 §9.3)"
            ))
            .into());
        }
        Ok(d)
    }
}

impl From<&mote::ParamInfo> for Param {
    fn from(p: &mote::ParamInfo) -> Param {
        Param {
            name: cstring(&p.name),
            dtype: p.dtype.map_or(
                MoteDtype {
                    code: 0,
                    bits: 0,
                    lanes: 0,
                },
                Into::into,
            ),
            shape: p.shape.as_ref().map(|dims| {
                dims.iter()
                    .map(|d| match d {
                        Dim::Fixed(v) => *v,
                        Dim::Var(_) => -1,
                    })
                    .collect()
            }),
        }
    }
}

/// Entry `index` of `list` in the C layout (out of range: an error naming `what`). Its
/// pointers stay valid while the model caches the description, that is until it is freed.
fn info_at(list: &[Param], index: usize, what: std::fmt::Arguments<'_>) -> Result<MoteParamInfo> {
    let p = list
        .get(index)
        .ok_or_else(|| MoteError::out_of_range(index, list.len(), what))?;
    Ok(p.info())
}

impl Param {
    /// The C view; its pointers stay valid while the model caches the description.
    fn info(&self) -> MoteParamInfo {
        MoteParamInfo {
            name: self.name.as_ptr(),
            dtype: self.dtype,
            ndim: self.shape.as_ref().map_or(-1, |s| s.len() as i32),
            shape: self.shape.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
        }
    }
}

fn finish_load(result: mote::Result<Model>, out: *mut *mut MoteModel) -> Result<()> {
    let model = result?;
    let h = MODELS.insert(FfiModel::new(model))?;
    write_out(out, h.cast());
    Ok(())
}

/// The body of the `mote_model_load*` functions that take a path and options: the pointers are
/// checked before `options` is asked for, so a NULL argument is reported first.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or writable.
unsafe fn load_path(
    path: *const c_char,
    out: *mut *mut MoteModel,
    options: impl FnOnce() -> Result<mote::LoadOptions>,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let path = str_arg(path, "path")?;
        finish_load(Model::load_with(path, options()?), out)
    })
}

/// As [`load_path`], for the functions that take `size` bytes at `data`.
///
/// # Safety
/// `data` is NULL or points to `size` readable bytes; `out` is NULL or writable.
unsafe fn load_memory(
    data: *const u8,
    size: usize,
    out: *mut *mut MoteModel,
    options: impl FnOnce() -> Result<mote::LoadOptions>,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        if data.is_null() {
            return Err(MoteError::null("data"));
        }
        let options = options()?;
        // SAFETY: non-NULL; the caller's contract requires `size` readable bytes.
        let bytes = unsafe { std::slice::from_raw_parts(data, size) };
        finish_load(Model::load_from_memory_with(bytes, options), out)
    })
}

/// Load a model library made by TVM 0.27's `export_library`: a Relax model, or a kernel-only
/// library (a TIR module exported on its own), whose functions are its kernels. Loading runs
/// the library's code: only load files you trust as you would a native library.
#[no_mangle]
pub unsafe extern "C" fn mote_model_load(
    path: *const c_char,
    out: *mut *mut MoteModel,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let path = str_arg(path, "path")?;
        finish_load(Model::load(path), out)
    })
}

/// Load a model library from `size` bytes in memory (Linux and Android; elsewhere
/// `MOTE_ERROR_CODE_UNSUPPORTED`). The bytes are copied; the caller may free them at once.
#[no_mangle]
pub unsafe extern "C" fn mote_model_load_from_memory(
    data: *const u8,
    size: usize,
    out: *mut *mut MoteModel,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        if data.is_null() {
            return Err(MoteError::null("data"));
        }
        // SAFETY: non-NULL; the contract requires `size` readable bytes.
        let bytes = unsafe { std::slice::from_raw_parts(data, size) };
        finish_load(Model::load_from_memory(bytes), out)
    })
}

/// Load a model linked into the program (a TVM "system library", built with the
/// `system_lib_prefix` attribute) by its prefix, e.g. `"mlp_"`. Its objects registered
/// themselves before `main`; objects taken from a static archive must be linked whole
/// (`-Wl,--whole-archive` on Linux and Android, `-Wl,-force_load` on Apple) or they are left
/// out. An unknown prefix fails with `MOTE_ERROR_CODE_LOAD`, whose message lists the prefixes
/// there are. See docs/system-lib.md.
#[no_mangle]
pub unsafe extern "C" fn mote_model_from_system_lib(
    prefix: *const c_char,
    out: *mut *mut MoteModel,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let prefix = str_arg(prefix, "prefix")?;
        finish_load(Model::from_system_lib(prefix), out)
    })
}

/// Load flag for `mote_model_load_with_options` and `mote_model_load_from_memory_with_options`
/// (flags are bits; a value is never reused): read the library as data instead of mapping it
/// as code (docs/code-free.md). Only its module blob is used, nothing in the file runs, and a
/// library whose program calls compiled kernels fails with `MOTE_ERROR_CODE_UNSUPPORTED`
/// naming them. Accepts an ELF `.so`, a Mach-O `.dylib`, an ELF or Mach-O `.o`, or the `.tar`
/// `export_library` writes. A file is mapped read-only (never executable) while the model
/// lives, holding the weights only offloaded regions read: replace it by renaming, never
/// rewrite it in place.
pub const MOTE_LOAD_CODE_FREE: u32 = 1;

/// Load flag, with `MOTE_LOAD_CODE_FREE` and a path: read the whole file into memory instead
/// of mapping it, so that a later truncation or rewrite of the file in place cannot fault the
/// process (`SIGBUS`); every weight is then copied (docs/code-free.md §4). For files the
/// program does not control. Without `MOTE_LOAD_CODE_FREE` it is
/// `MOTE_ERROR_CODE_INVALID_ARGUMENT` (a library that runs code is mapped by the system
/// loader); loads from memory ignore it.
pub const MOTE_LOAD_READ_FILE: u32 = 2;

fn load_options(flags: u32) -> Result<mote::LoadOptions> {
    let known = MOTE_LOAD_CODE_FREE | MOTE_LOAD_READ_FILE;
    if flags & !known != 0 {
        return Err(MoteError::new(
            crate::error::MoteErrorCode::InvalidArgument,
            format!("unknown load flags {:#x}", flags & !known),
        ));
    }
    Ok(mote::LoadOptions::default()
        .code_free(flags & MOTE_LOAD_CODE_FREE != 0)
        .read_into_memory(flags & MOTE_LOAD_READ_FILE != 0))
}

/// `mote_model_load` with `flags`, a bit set of `MOTE_LOAD_*` values (0: as
/// `mote_model_load`; unknown bits: `MOTE_ERROR_CODE_INVALID_ARGUMENT`). With
/// `MOTE_LOAD_CODE_FREE` nothing of the file runs, so the trust rule of `mote_model_load`
/// does not apply. On iOS, tvOS, watchOS and visionOS every load is code-free.
#[no_mangle]
pub unsafe extern "C" fn mote_model_load_with_options(
    path: *const c_char,
    flags: u32,
    out: *mut *mut MoteModel,
) -> *mut MoteError {
    // SAFETY: the caller's contract for `path` and `out` is this function's.
    unsafe { load_path(path, out, || load_options(flags)) }
}

/// `mote_model_load_from_memory` with `flags` as for `mote_model_load_with_options`. A
/// code-free load from memory works on every platform. The bytes are copied (or read) before
/// the call returns; the caller may free them at once.
#[no_mangle]
pub unsafe extern "C" fn mote_model_load_from_memory_with_options(
    data: *const u8,
    size: usize,
    flags: u32,
    out: *mut *mut MoteModel,
) -> *mut MoteError {
    // SAFETY: the caller's contract for `data`, `size` and `out` is this function's.
    unsafe { load_memory(data, size, out, || load_options(flags)) }
}

/// `load_options(flags)` with a load memory budget: only for code-free loads (a load that maps
/// the library runs its code, which no budget bounds), and never 0.
fn budgeted_load_options(flags: u32, memory_budget: u64) -> Result<mote::LoadOptions> {
    use crate::error::MoteErrorCode::InvalidArgument;
    if flags & MOTE_LOAD_CODE_FREE == 0 {
        return Err(MoteError::new(
            InvalidArgument,
            "a load memory budget needs MOTE_LOAD_CODE_FREE (a library mapped as code runs its \
             own code, which no budget bounds)",
        ));
    }
    if memory_budget == 0 {
        return Err(MoteError::new(
            InvalidArgument,
            "the load memory budget must be at least 1 byte",
        ));
    }
    Ok(load_options(flags)?.memory_budget(memory_budget))
}

/// `mote_model_load_with_options` with a bound on the memory the load may allocate to decode the
/// file: a gzip-compressed `.tar` is inflated only up to `memory_budget` bytes, and one that
/// would inflate further fails with `MOTE_ERROR_CODE_RESOURCE_EXHAUSTED` (having held at most
/// that much). `flags` must include `MOTE_LOAD_CODE_FREE`, and `memory_budget` must not be 0
/// (else `MOTE_ERROR_CODE_INVALID_ARGUMENT`). Without this function a code-free load's budget
/// is 16 times the file's size plus 64 MiB, at most 4 GiB (docs/untrusted-models.md §3).
#[no_mangle]
pub unsafe extern "C" fn mote_model_load_with_budget(
    path: *const c_char,
    flags: u32,
    memory_budget: u64,
    out: *mut *mut MoteModel,
) -> *mut MoteError {
    // SAFETY: the caller's contract for `path` and `out` is this function's.
    unsafe { load_path(path, out, || budgeted_load_options(flags, memory_budget)) }
}

/// `mote_model_load_from_memory_with_options` with a load memory budget, as for
/// `mote_model_load_with_budget` (`flags` must include `MOTE_LOAD_CODE_FREE`). The bytes are
/// copied (or read) before the call returns.
#[no_mangle]
pub unsafe extern "C" fn mote_model_load_from_memory_with_budget(
    data: *const u8,
    size: usize,
    flags: u32,
    memory_budget: u64,
    out: *mut *mut MoteModel,
) -> *mut MoteError {
    // SAFETY: the caller's contract for `data`, `size` and `out` is this function's.
    unsafe {
        load_memory(data, size, out, || {
            budgeted_load_options(flags, memory_budget)
        })
    }
}

/// Whether the model's program calls no compiled kernel (docs/code-free.md §1), written to
/// `*out`; `*loaded_code_free` (may be NULL) says whether this model was loaded code-free.
#[no_mangle]
pub unsafe extern "C" fn mote_model_is_code_free(
    model: *const MoteModel,
    out: *mut bool,
    loaded_code_free: *mut bool,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let m = MODELS.get(model)?;
        write_out(out, m.model.is_code_free());
        if !loaded_code_free.is_null() {
            write_out(loaded_code_free, m.model.is_loaded_code_free());
        }
        Ok(())
    })
}

/// Free a model. NULL is a no-op. Sessions made from it keep working.
#[no_mangle]
pub unsafe extern "C" fn mote_model_free(model: *mut MoteModel) {
    crate::error::guard_value((), || MODELS.free(model))
}

/// Number of functions the model exports: Relax functions callable by name, or for a
/// kernel-only library its kernels (`main` among them when TVM emitted that alias).
#[no_mangle]
pub unsafe extern "C" fn mote_model_function_count(
    model: *const MoteModel,
    out: *mut usize,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        write_out(out, MODELS.get(model)?.names.len());
        Ok(())
    })
}

/// Name of function `index` (0-based, in a stable order). Borrowed: valid until the model is
/// freed.
#[no_mangle]
pub unsafe extern "C" fn mote_model_function_name(
    model: *const MoteModel,
    index: usize,
    out: *mut *const c_char,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let m = MODELS.get(model)?;
        let name = m
            .names
            .get(index)
            .ok_or_else(|| MoteError::out_of_range(index, m.names.len(), "functions"))?;
        write_out(out, name.as_ptr());
        Ok(())
    })
}

/// Number of parameters of `function`.
#[no_mangle]
pub unsafe extern "C" fn mote_model_param_count(
    model: *const MoteModel,
    function: *const c_char,
    out: *mut usize,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let m = MODELS.get(model)?;
        let n = m.describe(str_arg(function, "function")?)?.params.len();
        write_out(out, n);
        Ok(())
    })
}

/// Name, dtype and shape of parameter `index` of `function`, as far as the model records them.
#[no_mangle]
pub unsafe extern "C" fn mote_model_param_info(
    model: *const MoteModel,
    function: *const c_char,
    index: usize,
    out: *mut MoteParamInfo,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let m = MODELS.get(model)?;
        let function = str_arg(function, "function")?;
        let d = m.describe(function)?;
        let info = info_at(&d.params, index, format_args!("parameters of `{function}`"))?;
        write_out(out, info);
        Ok(())
    })
}

/// Number of tensors `mote_session_run` of `function` gives back, read from the model's
/// instructions; 0 for a kernel of a kernel-only library (kernels write into their
/// arguments). `MOTE_ERROR_CODE_UNSUPPORTED` when the instructions do not say.
#[no_mangle]
pub unsafe extern "C" fn mote_model_output_count(
    model: *const MoteModel,
    function: *const c_char,
    out: *mut usize,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let m = MODELS.get(model)?;
        let d = m.outputs(str_arg(function, "function")?)?;
        write_out(out, d.outputs.as_ref().map_or(0, Vec::len));
        Ok(())
    })
}

/// Name (`output`, or `output[i]` for a tuple's tensors), dtype and shape of output `index` of
/// `function`, in the order `mote_session_run` gives them back, as far as the instructions say.
#[no_mangle]
pub unsafe extern "C" fn mote_model_output_info(
    model: *const MoteModel,
    function: *const c_char,
    index: usize,
    out: *mut MoteParamInfo,
) -> *mut MoteError {
    guard(|| {
        check_out(out, "out")?;
        let m = MODELS.get(model)?;
        let function = str_arg(function, "function")?;
        let d = m.outputs(function)?;
        let outputs = d.outputs.as_deref().unwrap_or_default();
        let info = info_at(outputs, index, format_args!("outputs of `{function}`"))?;
        write_out(out, info);
        Ok(())
    })
}
