//! OpenCL devices through a `libOpenCL` loaded at run time (docs/opencl.md).
//!
//! Ownership follows OpenCL's own objects, each released exactly once by its Rust owner:
//! a [`Context`] per device, shared by everything on that device (buffers made by one session
//! are usable by another); a [`Queue`] per session (its kernels' arguments are set and
//! enqueued by one thread at a time, which `&mut` enforces); a [`Program`] per model and
//! device, built once; [`Buffer`]s that keep their context alive.

pub(crate) mod cache;
pub(crate) mod exec;
pub mod sys;

use std::ffi::{c_void, CString};
use std::fmt;
use std::path::Path;
use std::ptr;
use std::sync::{Arc, Mutex};

use sys::{Api, ClInt, ClUint};

/// An OpenCL failure: what was being done, and the driver's error code when there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClError {
    pub message: String,
    pub code: Option<ClInt>,
}

impl fmt::Display for ClError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(c) => write!(f, "{} ({}, {c})", self.message, sys::error_name(c)),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ClError {}

pub type ClResult<T> = Result<T, ClError>;

fn fail(what: impl Into<String>) -> ClError {
    ClError {
        message: what.into(),
        code: None,
    }
}

fn check(code: ClInt, what: impl FnOnce() -> String) -> ClResult<()> {
    if code == sys::SUCCESS {
        Ok(())
    } else {
        Err(ClError {
            message: what(),
            code: Some(code),
        })
    }
}

/// The OpenCL library of the process, opened on first use from [`sys::search_list`]. An
/// absent library is remembered as such: every later use gets the same error at once.
pub fn library() -> ClResult<Arc<Api>> {
    #[cfg(not(feature = "opencl"))]
    return Err(fail(sys::NOT_BUILT));
    #[cfg(feature = "opencl")]
    {
        static LIB: std::sync::OnceLock<Result<Arc<Api>, String>> = std::sync::OnceLock::new();
        LIB.get_or_init(|| sys::open(&sys::search_list()).map(Arc::new))
            .clone()
            .map_err(fail)
    }
}

/// The devices of [`library`], listed once per process: the first OpenCL call of a process
/// initialises the ICD loader and the drivers, which is not safe to race (ocl-icd's lazy
/// initialisation crashed when two threads of the tests made their first call at once).
pub fn system_devices() -> ClResult<&'static [DeviceInfo]> {
    #[cfg(not(feature = "opencl"))]
    return Err(fail(sys::NOT_BUILT));
    #[cfg(feature = "opencl")]
    {
        static LIST: std::sync::OnceLock<Result<Vec<DeviceInfo>, ClError>> =
            std::sync::OnceLock::new();
        LIST.get_or_init(|| devices(&library()?))
            .as_deref()
            .map_err(Clone::clone)
    }
}

/// A library the app named instead of the search list (not cached).
pub fn library_at(path: &Path) -> ClResult<Arc<Api>> {
    sys::open_path(path).map(Arc::new).map_err(fail)
}

/// What kind of device OpenCL says it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceType {
    Gpu,
    Cpu,
    Accelerator,
    Other,
}

/// One OpenCL device, with what Mote reads about it once.
#[derive(Clone)]
pub struct DeviceInfo {
    api: Arc<Api>,
    /// See [`sys::Built`].
    built: sys::Built,
    id: sys::DeviceId,
    pub platform_name: String,
    pub name: String,
    pub vendor: String,
    pub driver_version: String,
    /// `OpenCL <major>.<minor> <vendor text>`.
    pub version: String,
    pub opencl_c_version: String,
    pub device_type: DeviceType,
    pub compute_units: u32,
    pub max_clock_mhz: u32,
    pub max_work_group_size: usize,
    pub max_work_item_sizes: Vec<usize>,
    pub local_mem_bytes: u64,
    pub global_mem_bytes: u64,
    pub max_alloc_bytes: u64,
    pub global_cache_bytes: u64,
    /// Whether the device shares memory with the host (phones' GPUs, CPU devices):
    /// mapping a buffer then copies nothing.
    pub unified_memory: bool,
}

// SAFETY: platform and device ids are process-wide handles that OpenCL allows any thread to
// use (OpenCL 1.2 appendix A.2: all API calls are thread-safe except clSetKernelArg on one
// kernel), and the api table is immutable.
unsafe impl Send for DeviceInfo {}
// SAFETY: as for Send; the struct is read-only after discovery.
unsafe impl Sync for DeviceInfo {}

impl fmt::Debug for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceInfo")
            .field("platform", &self.platform_name)
            .field("name", &self.name)
            .field("type", &self.device_type)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Reads an info value of `T` (a plain number) with one of OpenCL's `clGet*Info` functions.
fn info_value<T: Copy + Default>(
    get: impl Fn(usize, *mut c_void, *mut usize) -> ClInt,
) -> ClResult<T> {
    let mut v = T::default();
    let code = get(
        std::mem::size_of::<T>(),
        (&mut v as *mut T).cast(),
        ptr::null_mut(),
    );
    check(code, || "reading an OpenCL info value".into())?;
    Ok(v)
}

/// Reads an info value that is an array of bytes (a string, or a list of numbers).
fn info_bytes(get: impl Fn(usize, *mut c_void, *mut usize) -> ClInt) -> ClResult<Vec<u8>> {
    let mut size = 0usize;
    check(get(0, ptr::null_mut(), &mut size), || {
        "sizing an OpenCL info value".into()
    })?;
    let mut buf = vec![0u8; size];
    check(get(size, buf.as_mut_ptr().cast(), ptr::null_mut()), || {
        "reading an OpenCL info value".into()
    })?;
    Ok(buf)
}

fn info_string(get: impl Fn(usize, *mut c_void, *mut usize) -> ClInt) -> ClResult<String> {
    let b = info_bytes(get)?;
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    Ok(String::from_utf8_lossy(&b[..end]).trim().to_string())
}

impl DeviceInfo {
    fn read(api: &Arc<Api>, platform_name: &str, id: sys::DeviceId) -> ClResult<DeviceInfo> {
        let dev = |param: ClUint| {
            move |size: usize, value: *mut c_void, ret: *mut usize| {
                // SAFETY: `id` came from clGetDeviceIDs of this library; `value` has `size`
                // writable bytes (or is NULL with size 0), as info_value/info_bytes pass.
                unsafe { (api.get_device_info)(id, param, size, value, ret) }
            }
        };
        let ty: u64 = info_value(dev(sys::DEVICE_TYPE))?;
        let sizes = info_bytes(dev(sys::DEVICE_MAX_WORK_ITEM_SIZES))?;
        let unified: u32 = info_value(dev(sys::DEVICE_HOST_UNIFIED_MEMORY)).unwrap_or(0);
        Ok(DeviceInfo {
            api: api.clone(),
            built: api.built,
            id,
            platform_name: platform_name.to_string(),
            name: info_string(dev(sys::DEVICE_NAME))?,
            vendor: info_string(dev(sys::DEVICE_VENDOR))?,
            driver_version: info_string(dev(sys::DRIVER_VERSION))?,
            version: info_string(dev(sys::DEVICE_VERSION))?,
            opencl_c_version: info_string(dev(sys::DEVICE_OPENCL_C_VERSION)).unwrap_or_default(),
            device_type: if ty & sys::DEVICE_TYPE_GPU != 0 {
                DeviceType::Gpu
            } else if ty & sys::DEVICE_TYPE_CPU != 0 {
                DeviceType::Cpu
            } else if ty & sys::DEVICE_TYPE_ACCELERATOR != 0 {
                DeviceType::Accelerator
            } else {
                DeviceType::Other
            },
            compute_units: info_value(dev(sys::DEVICE_MAX_COMPUTE_UNITS))?,
            max_clock_mhz: info_value(dev(sys::DEVICE_MAX_CLOCK_FREQUENCY))?,
            max_work_group_size: info_value(dev(sys::DEVICE_MAX_WORK_GROUP_SIZE))?,
            max_work_item_sizes: sizes
                .chunks_exact(std::mem::size_of::<usize>())
                .map(|c| {
                    usize::from_ne_bytes(c.try_into().expect("chunks_exact gives whole words"))
                })
                .collect(),
            local_mem_bytes: info_value(dev(sys::DEVICE_LOCAL_MEM_SIZE))?,
            global_mem_bytes: info_value(dev(sys::DEVICE_GLOBAL_MEM_SIZE))?,
            max_alloc_bytes: info_value(dev(sys::DEVICE_MAX_MEM_ALLOC_SIZE))?,
            global_cache_bytes: info_value(dev(sys::DEVICE_GLOBAL_MEM_CACHE_SIZE))?,
            unified_memory: unified != 0,
        })
    }

    /// The OpenCL library this device was found through.
    pub fn api(&self) -> &Arc<Api> {
        &self.api
    }
}

/// Every device of every platform of `api`, platforms in the order OpenCL lists them and
/// each platform's devices in its order. A platform that lists no device is left out (POCL
/// without a usable CPU, a GPU driver without a GPU).
pub fn devices(api: &Arc<Api>) -> ClResult<Vec<DeviceInfo>> {
    let mut n: ClUint = 0;
    // SAFETY: asking for the count only (0 entries, NULL array).
    let code = unsafe { (api.get_platform_ids)(0, ptr::null_mut(), &mut n) };
    if code == sys::PLATFORM_NOT_FOUND_KHR || (code == sys::SUCCESS && n == 0) {
        return Ok(Vec::new());
    }
    check(code, || "listing OpenCL platforms".into())?;
    let mut platforms = vec![ptr::null_mut(); n as usize];
    // SAFETY: `platforms` has room for `n` ids.
    let code = unsafe { (api.get_platform_ids)(n, platforms.as_mut_ptr(), ptr::null_mut()) };
    check(code, || "listing OpenCL platforms".into())?;
    let mut out = Vec::new();
    for p in platforms {
        let pname = info_string(|size, value, ret| {
            // SAFETY: `p` came from clGetPlatformIDs; `value` has `size` bytes.
            unsafe { (api.get_platform_info)(p, sys::PLATFORM_NAME, size, value, ret) }
        })?;
        let mut nd: ClUint = 0;
        // SAFETY: count only.
        let code =
            unsafe { (api.get_device_ids)(p, sys::DEVICE_TYPE_ALL, 0, ptr::null_mut(), &mut nd) };
        if code == sys::DEVICE_NOT_FOUND || (code == sys::SUCCESS && nd == 0) {
            continue;
        }
        check(code, || {
            format!("listing the devices of OpenCL platform `{pname}`")
        })?;
        let mut ids = vec![ptr::null_mut(); nd as usize];
        let all = sys::DEVICE_TYPE_ALL;
        // SAFETY: `ids` has room for `nd` ids.
        let code = unsafe { (api.get_device_ids)(p, all, nd, ids.as_mut_ptr(), ptr::null_mut()) };
        check(code, || {
            format!("listing the devices of OpenCL platform `{pname}`")
        })?;
        for id in ids {
            out.push(DeviceInfo::read(api, &pname, id)?);
        }
    }
    Ok(out)
}

/// The device Mote picks when the app names none: the first GPU, else the first device.
pub fn default_device(list: &[DeviceInfo]) -> Option<usize> {
    list.iter()
        .position(|d| d.device_type == DeviceType::Gpu)
        .or(if list.is_empty() { None } else { Some(0) })
}

/// An OpenCL context on one device.
pub struct Context {
    device: DeviceInfo,
    raw: sys::Context,
}

// SAFETY: OpenCL contexts may be used from any thread (all calls but clSetKernelArg are
// thread-safe); Context only releases `raw` in Drop, once.
unsafe impl Send for Context {}
// SAFETY: as for Send.
unsafe impl Sync for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: `raw` was created by clCreateContext and is released once, here; every
        // object made in it holds an Arc of this Context, so none outlives it.
        unsafe { (self.device.api.release_context)(self.raw) };
    }
}

impl Context {
    pub fn new(device: &DeviceInfo) -> ClResult<Arc<Context>> {
        let mut code = 0;
        // SAFETY: one valid device id; no properties, no callback.
        let raw = unsafe {
            (device.api.create_context)(
                ptr::null(),
                1,
                &device.id,
                None,
                ptr::null_mut(),
                &mut code,
            )
        };
        check(code, || {
            format!("creating an OpenCL context on `{}`", device.name)
        })?;
        if raw.is_null() {
            return Err(fail(format!(
                "creating an OpenCL context on `{}` gave NULL",
                device.name
            )));
        }
        Ok(Arc::new(Context {
            device: device.clone(),
            raw,
        }))
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.device
    }

    fn api(&self) -> &Api {
        &self.device.api
    }

    /// A buffer of `size` bytes (at least 1: OpenCL refuses empty buffers, and an empty
    /// tensor still needs an address). With `host_visible`, it is allocated where the host
    /// can map it (`CL_MEM_ALLOC_HOST_PTR`): on unified-memory devices mapping it copies
    /// nothing.
    pub fn buffer(self: &Arc<Context>, size: usize, host_visible: bool) -> ClResult<Buffer> {
        let mut flags = sys::MEM_READ_WRITE;
        if host_visible {
            flags |= sys::MEM_ALLOC_HOST_PTR;
        }
        let mut code = 0;
        // SAFETY: a valid context; no host pointer.
        let raw = unsafe {
            (self.api().create_buffer)(self.raw, flags, size.max(1), ptr::null_mut(), &mut code)
        };
        check(code, || {
            format!("allocating {size} bytes on `{}`", self.device.name)
        })?;
        if raw.is_null() {
            return Err(fail(format!(
                "allocating {size} bytes on `{}` gave NULL",
                self.device.name
            )));
        }
        Ok(Buffer {
            context: self.clone(),
            built: self.device.built,
            raw,
            size,
            host_visible,
            serial: NEXT_BUFFER_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// A command queue, with profiling on when `profiling` (per-kernel device times).
    pub fn queue(self: &Arc<Context>, profiling: bool) -> ClResult<Queue> {
        let mut code = 0;
        let props = if profiling {
            sys::QUEUE_PROFILING_ENABLE
        } else {
            0
        };
        // SAFETY: a valid context and its device.
        let raw = unsafe {
            (self.api().create_command_queue)(self.raw, self.device.id, props, &mut code)
        };
        check(code, || {
            format!("creating a command queue on `{}`", self.device.name)
        })?;
        if raw.is_null() {
            return Err(fail("creating a command queue gave NULL"));
        }
        Ok(Queue {
            context: self.clone(),
            built: self.device.built,
            raw,
            profiling,
        })
    }

    /// Builds `source` for this context's device. A rejected source is an error carrying the
    /// driver's build log.
    pub fn build(self: &Arc<Context>, source: &str, options: &str) -> ClResult<Program> {
        let mut code = 0;
        let ptr_ = source.as_ptr().cast();
        let len = source.len();
        // SAFETY: one string of `len` bytes (not NUL-terminated, so its length is given).
        let raw =
            unsafe { (self.api().create_program_with_source)(self.raw, 1, &ptr_, &len, &mut code) };
        check(code, || "creating an OpenCL program from source".into())?;
        let program = Program {
            context: self.clone(),
            raw,
        };
        program.build_for_device(options)?;
        Ok(program)
    }

    /// Loads a program from a binary that [`Program::binary`] produced for this device.
    pub fn from_binary(self: &Arc<Context>, binary: &[u8], options: &str) -> ClResult<Program> {
        let mut code = 0;
        let mut status = 0;
        let len = binary.len();
        let p = binary.as_ptr();
        // SAFETY: one device, one binary of `len` bytes.
        let raw = unsafe {
            (self.api().create_program_with_binary)(
                self.raw,
                1,
                &self.device.id,
                &len,
                &p,
                &mut status,
                &mut code,
            )
        };
        check(code, || "loading a cached OpenCL program binary".into())?;
        check(status, || "loading a cached OpenCL program binary".into())?;
        let program = Program {
            context: self.clone(),
            raw,
        };
        program.build_for_device(options)?;
        Ok(program)
    }
}

/// Device memory of one context.
pub struct Buffer {
    context: Arc<Context>,
    /// See [`sys::Built`].
    built: sys::Built,
    raw: sys::Mem,
    size: usize,
    /// Allocated with `CL_MEM_ALLOC_HOST_PTR`.
    host_visible: bool,
    /// This buffer's identity for [`Kernel::set_arg`]'s memory of arguments: never given to
    /// another buffer of the process, where a `cl_mem` value may come back for a new buffer
    /// once the old one is released.
    serial: u64,
}

/// The serial of the next buffer created (see [`Buffer`]'s `serial`).
static NEXT_BUFFER_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

// SAFETY: memory objects may be used from any thread; released once in Drop.
unsafe impl Send for Buffer {}
// SAFETY: as for Send; `&Buffer` only hands out the handle for enqueueing.
unsafe impl Sync for Buffer {}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: created by clCreateBuffer, released once here. OpenCL keeps the memory
        // until the commands already enqueued that use it have finished (clReleaseMemObject).
        unsafe { (self.context.api().release_mem_object)(self.raw) };
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Buffer({} bytes on {})",
            self.size, self.context.device.name
        )
    }
}

impl Buffer {
    /// See [`sys::Built`].
    pub(crate) fn built(&self) -> sys::Built {
        self.built
    }

    pub fn len(&self) -> usize {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.context
    }

    /// The `cl_mem` handle.
    pub fn raw(&self) -> sys::Mem {
        self.raw
    }

    /// Whether mapping this buffer into host memory copies nothing: it was allocated where
    /// the host can reach it (`CL_MEM_ALLOC_HOST_PTR`) on a device that shares memory with
    /// the host (`CL_DEVICE_HOST_UNIFIED_MEMORY`), as phones' GPUs do.
    pub fn maps_in_place(&self) -> bool {
        self.host_visible && self.context.device.unified_memory
    }
}

/// A built program.
pub struct Program {
    context: Arc<Context>,
    raw: sys::Program,
}

// SAFETY: programs may be used from any thread; kernels are created per queue owner.
unsafe impl Send for Program {}
// SAFETY: as for Send.
unsafe impl Sync for Program {}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by clCreateProgramWith*, released once here.
        unsafe { (self.context.api().release_program)(self.raw) };
    }
}

impl Program {
    fn build_for_device(&self, options: &str) -> ClResult<()> {
        let opts = CString::new(options).map_err(|_| fail("OpenCL build options contain NUL"))?;
        // SAFETY: a valid program and the context's one device; no callback (blocking build).
        let code = unsafe {
            (self.context.api().build_program)(
                self.raw,
                1,
                &self.context.device.id,
                opts.as_ptr(),
                None,
                ptr::null_mut(),
            )
        };
        if code == sys::SUCCESS {
            return Ok(());
        }
        let log = info_string(|size, value, ret| {
            // SAFETY: a valid program and device; `value` has `size` bytes.
            unsafe {
                (self.context.api().get_program_build_info)(
                    self.raw,
                    self.context.device.id,
                    sys::PROGRAM_BUILD_LOG,
                    size,
                    value,
                    ret,
                )
            }
        })
        .unwrap_or_else(|e| format!("(no build log: {e})"));
        Err(ClError {
            message: format!(
                "the OpenCL driver of `{}` rejected the program; build log:\n{}",
                self.context.device.name,
                cap(&log, 16 << 10)
            ),
            code: Some(code),
        })
    }

    /// The device binary of the built program (for the program cache).
    pub fn binary(&self) -> ClResult<Vec<u8>> {
        let api = self.context.api();
        let size: usize = info_value(|size, value, ret| {
            // SAFETY: one device, so one size_t.
            unsafe { (api.get_program_info)(self.raw, sys::PROGRAM_BINARY_SIZES, size, value, ret) }
        })?;
        let mut bin = vec![0u8; size];
        let mut p = bin.as_mut_ptr();
        // SAFETY: CL_PROGRAM_BINARIES takes an array of one pointer (one device) to `size`
        // writable bytes.
        let code = unsafe {
            (api.get_program_info)(
                self.raw,
                sys::PROGRAM_BINARIES,
                std::mem::size_of::<*mut u8>(),
                (&mut p as *mut *mut u8).cast(),
                ptr::null_mut(),
            )
        };
        check(code, || "reading an OpenCL program binary".into())?;
        Ok(bin)
    }

    /// A kernel of this program by its OpenCL name.
    pub fn kernel(&self, name: &str) -> ClResult<Kernel> {
        let c = CString::new(name).map_err(|_| fail("a kernel name contains NUL"))?;
        let mut code = 0;
        // SAFETY: a built program and a NUL-terminated name.
        let raw = unsafe { (self.context.api().create_kernel)(self.raw, c.as_ptr(), &mut code) };
        check(code, || format!("creating OpenCL kernel `{name}`"))?;
        Ok(Kernel {
            context: self.context.clone(),
            raw,
            name: name.to_string(),
            set: Vec::new(),
        })
    }
}

/// Caps a driver message (build logs can be megabytes) at `max` bytes, on a char boundary.
fn cap(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n... ({} more bytes)", &s[..end], s.len() - end)
}

/// A kernel object. Its arguments are state of the object, so it is owned by one queue's
/// user and set and enqueued through `&mut`.
pub struct Kernel {
    context: Arc<Context>,
    raw: sys::Kernel,
    name: String,
    /// What each argument was last set to, by index ([`SetArg::Unknown`] where not set or not
    /// remembered): setting an argument to what it already holds is skipped, since a kernel
    /// object keeps its arguments from one enqueue to the next (OpenCL 1.2 §5.7.2,
    /// clSetKernelArg; docs/opencl.md §5).
    set: Vec<SetArg>,
}

/// An argument value as [`Kernel::set_arg`] remembers it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetArg {
    Unknown,
    /// A buffer, by its serial (not its `cl_mem`, which a later buffer may reuse).
    Buffer(u64),
    Null,
    /// A scalar of up to 16 bytes (zero-extended), and its length.
    Bytes(u128, u8),
    Local(usize),
}

impl SetArg {
    /// `bytes` as remembered: one comparison of two words decides a later skip (the usual 4
    /// and 8 bytes read as integers, without a copy loop).
    fn scalar(bytes: &[u8]) -> SetArg {
        let v = match *bytes {
            [a, b, c, d] => u128::from(u32::from_ne_bytes([a, b, c, d])),
            [a, b, c, d, e, f, g, h] => u128::from(u64::from_ne_bytes([a, b, c, d, e, f, g, h])),
            _ if bytes.len() <= 16 => {
                let mut v = [0u8; 16];
                v[..bytes.len()].copy_from_slice(bytes);
                u128::from_ne_bytes(v)
            }
            _ => return SetArg::Unknown,
        };
        SetArg::Bytes(v, bytes.len() as u8)
    }
}

// SAFETY: a kernel may move between threads; `&mut self` on every argument-setting call keeps
// clSetKernelArg on it to one thread at a time (the one OpenCL call that is not thread-safe).
unsafe impl Send for Kernel {}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: created by clCreateKernel, released once here.
        unsafe { (self.context.api().release_kernel)(self.raw) };
    }
}

/// One kernel argument.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    Buffer(&'a Buffer),
    /// A scalar's bytes, as wide as the kernel's parameter (4 for `int`/`float`, 8 for
    /// `long`/`double`).
    Bytes(&'a [u8]),
    /// `__local` memory of this many bytes (dynamic shared memory).
    Local(usize),
    /// A buffer parameter given no buffer (TVM passes one for a tensor whose data is NULL).
    NullBuffer,
}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The largest work-group this kernel can run with on its device.
    pub fn max_work_group_size(&self) -> ClResult<usize> {
        let api = self.context.api();
        let dev = self.context.device.id;
        info_value(|size, value, ret| {
            // SAFETY: a valid kernel and its context's device.
            unsafe {
                (api.get_kernel_work_group_info)(
                    self.raw,
                    dev,
                    sys::KERNEL_WORK_GROUP_SIZE,
                    size,
                    value,
                    ret,
                )
            }
        })
    }

    /// Sets argument `index` to `arg`, unless the last call set it to the same value (the
    /// same buffer, the same bytes): the kernel object still holds it, and drivers spend
    /// hundreds of instructions per clSetKernelArg (docs/benchmarks.md, "OpenCL").
    pub fn set_arg(&mut self, index: u32, arg: KernelArg<'_>) -> ClResult<()> {
        let remembered = match arg {
            KernelArg::Buffer(b) => SetArg::Buffer(b.serial),
            KernelArg::NullBuffer => SetArg::Null,
            KernelArg::Bytes(bytes) => SetArg::scalar(bytes),
            KernelArg::Local(n) => SetArg::Local(n),
        };
        let i = index as usize;
        if remembered != SetArg::Unknown && self.set.get(i) == Some(&remembered) {
            return Ok(());
        }
        if self.set.len() <= i {
            self.set.resize(i + 1, SetArg::Unknown);
        }
        // Forgotten until the driver accepts the new value.
        self.set[i] = SetArg::Unknown;
        self.set_arg_now(index, arg)?;
        self.set[i] = remembered;
        Ok(())
    }

    fn set_arg_now(&mut self, index: u32, arg: KernelArg<'_>) -> ClResult<()> {
        let api = self.context.api();
        let code = match arg {
            KernelArg::Buffer(b) => {
                if !Arc::ptr_eq(&b.context, &self.context) {
                    return Err(fail(format!(
                        "kernel `{}` argument {index}: a buffer of another OpenCL context",
                        self.name
                    )));
                }
                let m = b.raw;
                // SAFETY: the value is one cl_mem, passed by address with its size.
                unsafe {
                    (api.set_kernel_arg)(
                        self.raw,
                        index,
                        std::mem::size_of::<sys::Mem>(),
                        (&m as *const sys::Mem).cast(),
                    )
                }
            }
            // SAFETY: `bytes.len()` readable bytes.
            KernelArg::Bytes(bytes) => unsafe {
                (api.set_kernel_arg)(self.raw, index, bytes.len(), bytes.as_ptr().cast())
            },
            // SAFETY: a NULL value with a size declares __local memory.
            KernelArg::Local(n) => unsafe { (api.set_kernel_arg)(self.raw, index, n, ptr::null()) },
            KernelArg::NullBuffer => {
                let m: sys::Mem = ptr::null_mut();
                // SAFETY: a buffer argument may point at a NULL cl_mem (OpenCL 1.2, clSetKernelArg).
                unsafe {
                    (api.set_kernel_arg)(
                        self.raw,
                        index,
                        std::mem::size_of::<sys::Mem>(),
                        (&m as *const sys::Mem).cast(),
                    )
                }
            }
        };
        check(code, || {
            format!("setting argument {index} of OpenCL kernel `{}`", self.name)
        })
    }
}

/// A command queue. Methods that read results wait for the queue; launches only enqueue.
pub struct Queue {
    context: Arc<Context>,
    /// See [`sys::Built`] (never read: it is here to make a queue, and so a device session,
    /// impossible in a build without OpenCL).
    #[allow(dead_code)]
    built: sys::Built,
    raw: sys::Queue,
    profiling: bool,
}

// SAFETY: a queue may move between threads; it is used through `&mut` or by one owner.
unsafe impl Send for Queue {}

impl Drop for Queue {
    fn drop(&mut self) {
        let api = self.context.api();
        // SAFETY: created by clCreateCommandQueue; finished so no command still runs, then
        // released once.
        unsafe {
            (api.finish)(self.raw);
            (api.release_command_queue)(self.raw);
        }
    }
}

/// Device time of one profiled launch, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceTime {
    pub nanos: u64,
}

impl Queue {
    pub fn context(&self) -> &Arc<Context> {
        &self.context
    }

    fn own(&self, b: &Buffer) -> ClResult<()> {
        if Arc::ptr_eq(&b.context, &self.context) {
            Ok(())
        } else {
            Err(fail("a buffer of another OpenCL context"))
        }
    }

    /// Copies `src` into `dst` at `offset` and waits for the copy.
    pub fn write(&mut self, dst: &Buffer, offset: usize, src: &[u8]) -> ClResult<()> {
        self.own(dst)?;
        in_bounds(dst, offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: a blocking write of `src.len()` bytes from `src` into the buffer's range,
        // which was checked to lie inside it.
        let code = unsafe {
            (self.context.api().enqueue_write_buffer)(
                self.raw,
                dst.raw,
                sys::TRUE,
                offset,
                src.len(),
                src.as_ptr().cast(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(code, || {
            format!(
                "copying {} bytes to `{}`",
                src.len(),
                self.context.device.name
            )
        })
    }

    /// Copies `dst.len()` bytes of `src` from `offset` into `dst` and waits for the copy (and
    /// so for every command enqueued before it).
    pub fn read(&mut self, src: &Buffer, offset: usize, dst: &mut [u8]) -> ClResult<()> {
        self.own(src)?;
        in_bounds(src, offset, dst.len())?;
        if dst.is_empty() {
            return self.finish();
        }
        // SAFETY: a blocking read of `dst.len()` bytes into `dst`, from a checked range.
        let code = unsafe {
            (self.context.api().enqueue_read_buffer)(
                self.raw,
                src.raw,
                sys::TRUE,
                offset,
                dst.len(),
                dst.as_mut_ptr().cast(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(code, || {
            format!(
                "copying {} bytes from `{}`",
                dst.len(),
                self.context.device.name
            )
        })
    }

    /// Copies `len` bytes between two buffers of this context (enqueued, not waited for).
    pub fn copy(
        &mut self,
        src: &Buffer,
        src_offset: usize,
        dst: &Buffer,
        dst_offset: usize,
        len: usize,
    ) -> ClResult<()> {
        self.own(src)?;
        self.own(dst)?;
        in_bounds(src, src_offset, len)?;
        in_bounds(dst, dst_offset, len)?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: both ranges were checked to lie inside their buffers.
        let code = unsafe {
            (self.context.api().enqueue_copy_buffer)(
                self.raw,
                src.raw,
                dst.raw,
                src_offset,
                dst_offset,
                len,
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(code, || {
            format!("copying {len} bytes on `{}`", self.context.device.name)
        })
    }

    /// Enqueues `kernel` over `global` work items in work-groups of `local` (None: the
    /// driver picks). With profiling on, waits for it and returns its device time.
    pub fn launch(
        &mut self,
        kernel: &mut Kernel,
        global: &[usize],
        local: Option<&[usize]>,
    ) -> ClResult<Option<DeviceTime>> {
        if !Arc::ptr_eq(&kernel.context, &self.context) {
            return Err(fail(format!(
                "kernel `{}` belongs to another OpenCL context",
                kernel.name
            )));
        }
        if global.is_empty() || global.len() > 3 || local.is_some_and(|l| l.len() != global.len()) {
            return Err(fail(format!(
                "kernel `{}`: work sizes of 1 to 3 dimensions, alike",
                kernel.name
            )));
        }
        if global.contains(&0) {
            // Nothing to run (OpenCL refuses a zero global size).
            return Ok(None);
        }
        let api = self.context.api();
        let mut event: sys::Event = ptr::null_mut();
        let ev_out = if self.profiling {
            &mut event as *mut sys::Event
        } else {
            ptr::null_mut()
        };
        // SAFETY: `global` (and `local`, when given) have `global.len()` entries; the
        // kernel's arguments were set through `&mut kernel`, which this call holds.
        let code = unsafe {
            (api.enqueue_nd_range_kernel)(
                self.raw,
                kernel.raw,
                global.len() as ClUint,
                ptr::null(),
                global.as_ptr(),
                local.map_or(ptr::null(), |l| l.as_ptr()),
                0,
                ptr::null(),
                ev_out,
            )
        };
        check(code, || {
            format!(
                "launching OpenCL kernel `{}` (global {global:?}, local {local:?})",
                kernel.name
            )
        })?;
        if !self.profiling {
            return Ok(None);
        }
        let _release = ReleaseEvent(api, event);
        // SAFETY: one event, returned by the enqueue above.
        check(unsafe { (api.wait_for_events)(1, &event) }, || {
            format!("running OpenCL kernel `{}`", kernel.name)
        })?;
        let stamp = |param| -> ClResult<u64> {
            info_value(|size, value, ret| {
                // SAFETY: a completed event of a profiling queue.
                unsafe { (api.get_event_profiling_info)(event, param, size, value, ret) }
            })
        };
        let start = stamp(sys::PROFILING_COMMAND_START)?;
        let end = stamp(sys::PROFILING_COMMAND_END)?;
        Ok(Some(DeviceTime {
            nanos: end.saturating_sub(start),
        }))
    }

    /// Waits until every command enqueued so far has finished.
    pub fn finish(&mut self) -> ClResult<()> {
        // SAFETY: a valid queue.
        let code = unsafe { (self.context.api().finish)(self.raw) };
        check(code, || {
            format!("waiting for `{}`", self.context.device.name)
        })
    }
}

/// A buffer mapped into host memory for reading and writing (docs/opencl.md §8): made by
/// [`Queue::map`], which waits for every command enqueued before; unmapped by
/// [`Mapping::unmap`] or when dropped, after which the device sees what the host wrote. It
/// borrows the queue, so nothing else is enqueued there while the host holds the bytes, and
/// the buffer, so the memory outlives the mapping.
pub struct Mapping<'q> {
    queue: &'q mut Queue,
    buffer: &'q Buffer,
    ptr: *mut u8,
    len: usize,
    mapped: bool,
}

impl Queue {
    /// The first `len` bytes of `buffer` in host memory, once every command enqueued before
    /// has finished. On a buffer that [`Buffer::maps_in_place`] this copies nothing; on others
    /// the driver copies the bytes out now and back at unmapping.
    pub fn map<'q>(&'q mut self, buffer: &'q Buffer, len: usize) -> ClResult<Mapping<'q>> {
        self.own(buffer)?;
        in_bounds(buffer, 0, len)?;
        if len == 0 {
            // OpenCL refuses an empty mapping; there are no bytes to reach.
            self.finish()?;
            return Ok(Mapping {
                queue: self,
                buffer,
                ptr: ptr::NonNull::<u8>::dangling().as_ptr(),
                len: 0,
                mapped: false,
            });
        }
        let mut code = 0;
        // SAFETY: a blocking map of a range checked to lie inside a buffer of this queue's
        // context; the pointer it returns stays valid until the matching unmap, which only
        // `Mapping` (holding both borrows) enqueues.
        let p = unsafe {
            (self.context.api().enqueue_map_buffer)(
                self.raw,
                buffer.raw,
                sys::TRUE,
                sys::MAP_READ | sys::MAP_WRITE,
                0,
                len,
                0,
                ptr::null(),
                ptr::null_mut(),
                &mut code,
            )
        };
        check(code, || {
            format!(
                "mapping {len} bytes of `{}` into host memory",
                self.context.device.name
            )
        })?;
        if p.is_null() {
            return Err(fail(format!(
                "mapping {len} bytes of `{}` gave NULL",
                self.context.device.name
            )));
        }
        Ok(Mapping {
            queue: self,
            buffer,
            ptr: p.cast(),
            len,
            mapped: true,
        })
    }
}

impl Mapping<'_> {
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes mapped for reading and writing (or none, at a dangling aligned
        // pointer); the mapping lives while `self` does, and `&self` excludes `bytes_mut`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only reference to the bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Whether this mapping reaches the device's own memory (no copy made).
    pub fn in_place(&self) -> bool {
        self.buffer.maps_in_place()
    }

    /// Gives the bytes back to the device and waits until it has them.
    pub fn unmap(mut self) -> ClResult<()> {
        self.release()
    }

    fn release(&mut self) -> ClResult<()> {
        if !std::mem::replace(&mut self.mapped, false) {
            return Ok(());
        }
        // SAFETY: `ptr` came from the map of `buffer` on this queue and is unmapped once (the
        // flag is cleared above); no reference to the bytes outlives `self`.
        let code = unsafe {
            (self.queue.context.api().enqueue_unmap_mem_object)(
                self.queue.raw,
                self.buffer.raw,
                self.ptr.cast(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check(code, || {
            format!("unmapping a buffer of `{}`", self.queue.context.device.name)
        })?;
        self.queue.finish()
    }
}

impl Drop for Mapping<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            log::error!("OpenCL: {e}");
        }
    }
}

struct ReleaseEvent<'a>(&'a Api, sys::Event);

impl Drop for ReleaseEvent<'_> {
    fn drop(&mut self) {
        // SAFETY: an event returned by an enqueue, released once.
        unsafe { (self.0.release_event)(self.1) };
    }
}

fn in_bounds(b: &Buffer, offset: usize, len: usize) -> ClResult<()> {
    match offset.checked_add(len) {
        Some(end) if end <= b.size => Ok(()),
        _ => Err(fail(format!(
            "{len} bytes at offset {offset} do not fit in a buffer of {} bytes",
            b.size
        ))),
    }
}

/// One context per device, shared by every model and session of the process, so a buffer
/// made for one is usable by all (contexts are created on first use and live as long as
/// something uses them).
pub fn shared_context(device: &DeviceInfo) -> ClResult<Arc<Context>> {
    static CONTEXTS: Mutex<Vec<(usize, std::sync::Weak<Context>)>> = Mutex::new(Vec::new());
    let key = device.id as usize;
    let mut list = CONTEXTS.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|(_, w)| w.strong_count() > 0);
    if let Some(c) = list
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(c);
    }
    let c = Context::new(device)?;
    list.push((key, Arc::downgrade(&c)));
    Ok(c)
}

#[cfg(test)]
mod tests;
