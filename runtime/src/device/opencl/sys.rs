//! The OpenCL entry points Mote calls, resolved from a `libOpenCL` loaded at run time
//! (docs/opencl.md §1). Nothing here links against OpenCL: a process without it loses the
//! OpenCL device and nothing else.
//!
//! Types and constants are those of the Khronos headers (`CL/cl.h`, OpenCL 1.2 unless noted);
//! only what Mote uses is declared.

use std::ffi::{c_char, c_void};
use std::path::{Path, PathBuf};

/// What every OpenCL object carries (from its [`Api`]): nothing in a build with the `opencl`
/// feature, and an uninhabited type in one without it. Without the feature no `Api` can be
/// made (`open` always fails), so no device, context, buffer, queue, device session or device
/// tensor can exist either, and the compiler proves every path that uses one unreachable and
/// leaves it out of the library (docs/footprint.md, "Selective builds").
#[cfg(feature = "opencl")]
pub type Built = ();
/// See the `opencl` build's definition.
#[cfg(not(feature = "opencl"))]
pub type Built = std::convert::Infallible;

/// The error of every attempt to open OpenCL in a build without the `opencl` feature.
#[cfg(not(feature = "opencl"))]
pub const NOT_BUILT: &str = "this Mote library was built without its `opencl` feature (a \
    selective build for models without OpenCL code; docs/footprint.md): it runs no OpenCL model";

pub type ClInt = i32;
pub type ClUint = u32;
pub type ClBitfield = u64;
pub type PlatformId = *mut c_void;
pub type DeviceId = *mut c_void;
pub type Context = *mut c_void;
pub type Queue = *mut c_void;
pub type Mem = *mut c_void;
pub type Program = *mut c_void;
pub type Kernel = *mut c_void;
pub type Event = *mut c_void;

pub const SUCCESS: ClInt = 0;
pub const DEVICE_NOT_FOUND: ClInt = -1;
pub const BUILD_PROGRAM_FAILURE: ClInt = -11;
pub const PLATFORM_NOT_FOUND_KHR: ClInt = -1001;

pub const PLATFORM_VERSION: ClUint = 0x0901;
pub const PLATFORM_NAME: ClUint = 0x0902;
pub const PLATFORM_VENDOR: ClUint = 0x0903;

pub const DEVICE_TYPE_CPU: ClBitfield = 1 << 1;
pub const DEVICE_TYPE_GPU: ClBitfield = 1 << 2;
pub const DEVICE_TYPE_ACCELERATOR: ClBitfield = 1 << 3;
pub const DEVICE_TYPE_ALL: ClBitfield = 0xFFFF_FFFF;

pub const DEVICE_TYPE: ClUint = 0x1000;
pub const DEVICE_MAX_COMPUTE_UNITS: ClUint = 0x1002;
pub const DEVICE_MAX_WORK_ITEM_DIMENSIONS: ClUint = 0x1003;
pub const DEVICE_MAX_WORK_GROUP_SIZE: ClUint = 0x1004;
pub const DEVICE_MAX_WORK_ITEM_SIZES: ClUint = 0x1005;
pub const DEVICE_MAX_CLOCK_FREQUENCY: ClUint = 0x100C;
pub const DEVICE_MAX_MEM_ALLOC_SIZE: ClUint = 0x1010;
pub const DEVICE_GLOBAL_MEM_CACHE_SIZE: ClUint = 0x101E;
pub const DEVICE_GLOBAL_MEM_SIZE: ClUint = 0x101F;
pub const DEVICE_LOCAL_MEM_SIZE: ClUint = 0x1023;
pub const DEVICE_HOST_UNIFIED_MEMORY: ClUint = 0x1035;
pub const DEVICE_NAME: ClUint = 0x102B;
pub const DEVICE_VENDOR: ClUint = 0x102C;
pub const DRIVER_VERSION: ClUint = 0x102D;
pub const DEVICE_VERSION: ClUint = 0x102F;
pub const DEVICE_OPENCL_C_VERSION: ClUint = 0x103D;

pub const QUEUE_PROFILING_ENABLE: ClBitfield = 1 << 1;

pub const MEM_READ_WRITE: ClBitfield = 1;
pub const MEM_ALLOC_HOST_PTR: ClBitfield = 1 << 4;
pub const MAP_READ: ClBitfield = 1;
pub const MAP_WRITE: ClBitfield = 1 << 1;

pub const PROGRAM_BINARY_SIZES: ClUint = 0x1165;
pub const PROGRAM_BINARIES: ClUint = 0x1166;
pub const PROGRAM_BUILD_LOG: ClUint = 0x1183;
pub const KERNEL_WORK_GROUP_SIZE: ClUint = 0x11B0;
pub const PROFILING_COMMAND_START: ClUint = 0x1282;
pub const PROFILING_COMMAND_END: ClUint = 0x1283;

pub const TRUE: ClUint = 1;

/// The name OpenCL's headers give an error code, for messages.
pub fn error_name(code: ClInt) -> &'static str {
    match code {
        0 => "CL_SUCCESS",
        -1 => "CL_DEVICE_NOT_FOUND",
        -2 => "CL_DEVICE_NOT_AVAILABLE",
        -3 => "CL_COMPILER_NOT_AVAILABLE",
        -4 => "CL_MEM_OBJECT_ALLOCATION_FAILURE",
        -5 => "CL_OUT_OF_RESOURCES",
        -6 => "CL_OUT_OF_HOST_MEMORY",
        -7 => "CL_PROFILING_INFO_NOT_AVAILABLE",
        -11 => "CL_BUILD_PROGRAM_FAILURE",
        -12 => "CL_MAP_FAILURE",
        -30 => "CL_INVALID_VALUE",
        -31 => "CL_INVALID_DEVICE_TYPE",
        -32 => "CL_INVALID_PLATFORM",
        -33 => "CL_INVALID_DEVICE",
        -34 => "CL_INVALID_CONTEXT",
        -36 => "CL_INVALID_COMMAND_QUEUE",
        -38 => "CL_INVALID_MEM_OBJECT",
        -42 => "CL_INVALID_BINARY",
        -43 => "CL_INVALID_BUILD_OPTIONS",
        -44 => "CL_INVALID_PROGRAM",
        -45 => "CL_INVALID_PROGRAM_EXECUTABLE",
        -46 => "CL_INVALID_KERNEL_NAME",
        -48 => "CL_INVALID_KERNEL",
        -49 => "CL_INVALID_ARG_INDEX",
        -50 => "CL_INVALID_ARG_VALUE",
        -51 => "CL_INVALID_ARG_SIZE",
        -52 => "CL_INVALID_KERNEL_ARGS",
        -53 => "CL_INVALID_WORK_DIMENSION",
        -54 => "CL_INVALID_WORK_GROUP_SIZE",
        -55 => "CL_INVALID_WORK_ITEM_SIZE",
        -56 => "CL_INVALID_GLOBAL_OFFSET",
        -58 => "CL_INVALID_EVENT",
        -61 => "CL_INVALID_BUFFER_SIZE",
        -63 => "CL_INVALID_GLOBAL_WORK_SIZE",
        -1001 => "CL_PLATFORM_NOT_FOUND_KHR",
        _ => "an unknown OpenCL error",
    }
}

type InfoFn<H> = unsafe extern "C" fn(H, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
type Notify = Option<unsafe extern "C" fn(*const c_char, *const c_void, usize, *mut c_void)>;
type BuildNotify = Option<unsafe extern "C" fn(Program, *mut c_void)>;

macro_rules! api {
    ($( $field:ident = $sym:literal : $ty:ty; )*) => {
        /// The entry points, each resolved by name when the library is opened. The library
        /// stays loaded as long as this table lives, so the pointers stay valid.
        pub struct Api {
            $( pub $field: $ty, )*
            /// Where the library was found.
            pub path: PathBuf,
            /// See [`Built`].
            pub built: Built,
            #[cfg(feature = "opencl")]
            _lib: libloading::Library,
        }

        #[cfg(feature = "opencl")]
        impl Api {
            fn resolve(lib: libloading::Library, path: PathBuf) -> Result<Api, String> {
                $(
                    // SAFETY: the symbol's type is the one the Khronos headers declare for
                    // this name; it is only called while `lib`, kept in the table, is loaded.
                    let $field: $ty = *unsafe { lib.get::<$ty>(concat!($sym, "\0").as_bytes()) }
                        .map_err(|e| format!("{}: no {} ({e})", path.display(), $sym))?;
                )*
                Ok(Api { $( $field, )* path, built: (), _lib: lib })
            }
        }
    };
}

api! {
    get_platform_ids = "clGetPlatformIDs":
        unsafe extern "C" fn(ClUint, *mut PlatformId, *mut ClUint) -> ClInt;
    get_platform_info = "clGetPlatformInfo": InfoFn<PlatformId>;
    get_device_ids = "clGetDeviceIDs":
        unsafe extern "C" fn(PlatformId, ClBitfield, ClUint, *mut DeviceId, *mut ClUint) -> ClInt;
    get_device_info = "clGetDeviceInfo": InfoFn<DeviceId>;
    create_context = "clCreateContext":
        unsafe extern "C" fn(*const isize, ClUint, *const DeviceId, Notify, *mut c_void, *mut ClInt)
            -> Context;
    release_context = "clReleaseContext": unsafe extern "C" fn(Context) -> ClInt;
    // Deprecated by OpenCL 2.0 but exported by every ICD loader and vendor library, 1.2 ones
    // included (Mali and Adreno drivers of older phones).
    create_command_queue = "clCreateCommandQueue":
        unsafe extern "C" fn(Context, DeviceId, ClBitfield, *mut ClInt) -> Queue;
    release_command_queue = "clReleaseCommandQueue": unsafe extern "C" fn(Queue) -> ClInt;
    create_buffer = "clCreateBuffer":
        unsafe extern "C" fn(Context, ClBitfield, usize, *mut c_void, *mut ClInt) -> Mem;
    release_mem_object = "clReleaseMemObject": unsafe extern "C" fn(Mem) -> ClInt;
    enqueue_read_buffer = "clEnqueueReadBuffer":
        unsafe extern "C" fn(Queue, Mem, ClUint, usize, usize, *mut c_void, ClUint, *const Event,
            *mut Event) -> ClInt;
    enqueue_write_buffer = "clEnqueueWriteBuffer":
        unsafe extern "C" fn(Queue, Mem, ClUint, usize, usize, *const c_void, ClUint, *const Event,
            *mut Event) -> ClInt;
    enqueue_copy_buffer = "clEnqueueCopyBuffer":
        unsafe extern "C" fn(Queue, Mem, Mem, usize, usize, usize, ClUint, *const Event, *mut Event)
            -> ClInt;
    enqueue_map_buffer = "clEnqueueMapBuffer":
        unsafe extern "C" fn(Queue, Mem, ClUint, ClBitfield, usize, usize, ClUint, *const Event,
            *mut Event, *mut ClInt) -> *mut c_void;
    enqueue_unmap_mem_object = "clEnqueueUnmapMemObject":
        unsafe extern "C" fn(Queue, Mem, *mut c_void, ClUint, *const Event, *mut Event) -> ClInt;
    create_program_with_source = "clCreateProgramWithSource":
        unsafe extern "C" fn(Context, ClUint, *const *const c_char, *const usize, *mut ClInt)
            -> Program;
    create_program_with_binary = "clCreateProgramWithBinary":
        unsafe extern "C" fn(Context, ClUint, *const DeviceId, *const usize, *const *const u8,
            *mut ClInt, *mut ClInt) -> Program;
    build_program = "clBuildProgram":
        unsafe extern "C" fn(Program, ClUint, *const DeviceId, *const c_char, BuildNotify,
            *mut c_void) -> ClInt;
    get_program_info = "clGetProgramInfo": InfoFn<Program>;
    get_program_build_info = "clGetProgramBuildInfo":
        unsafe extern "C" fn(Program, DeviceId, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
    release_program = "clReleaseProgram": unsafe extern "C" fn(Program) -> ClInt;
    create_kernel = "clCreateKernel":
        unsafe extern "C" fn(Program, *const c_char, *mut ClInt) -> Kernel;
    release_kernel = "clReleaseKernel": unsafe extern "C" fn(Kernel) -> ClInt;
    get_kernel_work_group_info = "clGetKernelWorkGroupInfo":
        unsafe extern "C" fn(Kernel, DeviceId, ClUint, usize, *mut c_void, *mut usize) -> ClInt;
    set_kernel_arg = "clSetKernelArg":
        unsafe extern "C" fn(Kernel, ClUint, usize, *const c_void) -> ClInt;
    enqueue_nd_range_kernel = "clEnqueueNDRangeKernel":
        unsafe extern "C" fn(Queue, Kernel, ClUint, *const usize, *const usize, *const usize,
            ClUint, *const Event, *mut Event) -> ClInt;
    finish = "clFinish": unsafe extern "C" fn(Queue) -> ClInt;
    wait_for_events = "clWaitForEvents": unsafe extern "C" fn(ClUint, *const Event) -> ClInt;
    get_event_profiling_info = "clGetEventProfilingInfo": InfoFn<Event>;
    release_event = "clReleaseEvent": unsafe extern "C" fn(Event) -> ClInt;
}

/// Where `libOpenCL` is looked for when the app names no file, in order (docs/opencl.md §1).
/// On Android the first, bare name is found through the app's linker namespace when the
/// manifest declares `<uses-native-library android:name="libOpenCL.so">`; the vendor paths
/// after it are where Mali, Adreno and PowerVR drivers put the library on phones whose
/// namespace does not expose it.
pub fn search_list() -> Vec<PathBuf> {
    let names: &[&str] = if cfg!(target_os = "android") {
        if cfg!(target_pointer_width = "64") {
            &[
                "libOpenCL.so",
                "/vendor/lib64/libOpenCL.so",
                "/system/vendor/lib64/libOpenCL.so",
                "/system/lib64/libOpenCL.so",
                "/vendor/lib64/egl/libGLES_mali.so",
                "/vendor/lib64/libPVROCL.so",
            ]
        } else {
            &[
                "libOpenCL.so",
                "/vendor/lib/libOpenCL.so",
                "/system/vendor/lib/libOpenCL.so",
                "/system/lib/libOpenCL.so",
                "/vendor/lib/egl/libGLES_mali.so",
                "/vendor/lib/libPVROCL.so",
            ]
        }
    } else if cfg!(target_vendor = "apple") {
        &["/System/Library/Frameworks/OpenCL.framework/OpenCL"]
    } else {
        // The ICD loader (ocl-icd or Khronos'), which dispatches to the installed drivers.
        &["libOpenCL.so.1", "libOpenCL.so"]
    };
    names.iter().map(PathBuf::from).collect()
}

/// Opens the first of `candidates` that loads and exports every entry point. The error lists
/// each candidate with why it was passed over.
#[cfg(feature = "opencl")]
pub fn open(candidates: &[PathBuf]) -> Result<Api, String> {
    let mut why = Vec::new();
    for path in candidates {
        // SAFETY: loading a system OpenCL library runs its initializers; it is the platform's
        // own driver, loaded the way every OpenCL program loads it.
        match unsafe { libloading::Library::new(path) } {
            Ok(lib) => match Api::resolve(lib, path.clone()) {
                Ok(api) => return Ok(api),
                Err(e) => why.push(e),
            },
            Err(e) => why.push(format!("{}: {e}", path.display())),
        }
    }
    Err(format!(
        "no usable OpenCL library (looked for {}): {}",
        candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        why.join("; ")
    ))
}

/// Without the `opencl` feature: always [`NOT_BUILT`].
#[cfg(not(feature = "opencl"))]
#[inline(always)]
pub fn open(candidates: &[PathBuf]) -> Result<Api, String> {
    let _ = candidates;
    Err(NOT_BUILT.into())
}

/// `open` of one file the app named.
pub fn open_path(path: &Path) -> Result<Api, String> {
    open(&[path.to_path_buf()])
}
