//! The C structures of the kernel ABI Mote implements (tvm-ffi "safe call", DLPack), as
//! docs/tvm-format.md §6-§7 describes them.
//! Internal: nothing here is part of Mote's public API.

use std::ffi::c_void;

use crate::dtype::DType;

/// `TVMFFITypeIndex` values Mote produces or accepts (docs/tvm-format.md §6.2 says which
/// direction each goes).
pub mod type_index {
    pub const NONE: i32 = 0;
    pub const INT: i32 = 1;
    pub const BOOL: i32 = 2;
    pub const FLOAT: i32 = 3;
    pub const OPAQUE_PTR: i32 = 4;
    pub const DATA_TYPE: i32 = 5;
    pub const DL_TENSOR_PTR: i32 = 7;
    pub const RAW_STR: i32 = 8;
    pub const TENSOR: i32 = 70;
}

/// DLPack's device type for host memory, the only device Mote runs on (docs/tvm-format.md §6.4).
pub const DEVICE_CPU: i32 = 1;

/// Size of the `TVMFFIObject` header every tvm-ffi heap object starts with; a Tensor object
/// (type index 70) keeps its `DLTensor` right after it (docs/tvm-format.md §6.5).
pub const OBJECT_HEADER_BYTES: usize = 24;

/// A `DLDataType` as the payload of a `TVMFFIAny` of type `DATA_TYPE`: `code | bits << 8 |
/// lanes << 16` (docs/tvm-format.md §6.3).
pub fn pack_dtype(dt: DType) -> u64 {
    dt.code as u64 | (dt.bits as u64) << 8 | (dt.lanes as u64) << 16
}

/// The inverse of [`pack_dtype`]; bits above the 32 it writes are ignored.
pub fn unpack_dtype(payload: u64) -> DType {
    DType {
        code: payload as u8,
        bits: (payload >> 8) as u8,
        lanes: (payload >> 16) as u16,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

/// DLPack's `DLTensor`, 48 bytes on 64-bit targets (docs/tvm-format.md §6.4).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

/// `TVMFFIAny`: a 16-byte tagged value (docs/tvm-format.md §6.1). The union is kept as raw bits.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct FfiAny {
    pub type_index: i32,
    pub zero_padding: u32,
    pub value: u64,
}

impl FfiAny {
    pub const NONE: FfiAny = FfiAny {
        type_index: type_index::NONE,
        zero_padding: 0,
        value: 0,
    };
    pub fn int(v: i64) -> Self {
        FfiAny {
            type_index: type_index::INT,
            zero_padding: 0,
            value: v as u64,
        }
    }
    pub fn bool(v: bool) -> Self {
        FfiAny {
            type_index: type_index::BOOL,
            zero_padding: 0,
            value: v as u64,
        }
    }
    pub fn float(v: f64) -> Self {
        FfiAny {
            type_index: type_index::FLOAT,
            zero_padding: 0,
            value: v.to_bits(),
        }
    }
    pub fn ptr(type_index: i32, p: *const c_void) -> Self {
        FfiAny {
            type_index,
            zero_padding: 0,
            value: p as usize as u64,
        }
    }
    pub fn dtype(dt: DType) -> Self {
        FfiAny {
            type_index: type_index::DATA_TYPE,
            zero_padding: 0,
            value: pack_dtype(dt),
        }
    }
    pub fn as_ptr(&self) -> *mut c_void {
        self.value as usize as *mut c_void
    }
}

/// `TVMFFISafeCallType`: every exported kernel has this signature.
pub type SafeCallFn = unsafe extern "C" fn(
    handle: *mut c_void,
    args: *const FfiAny,
    num_args: i32,
    result: *mut FfiAny,
) -> i32;

/// `TVMParallelGroupEnv`.
#[repr(C)]
pub struct ParallelGroupEnv {
    pub sync_handle: *mut c_void,
    pub num_task: i32,
}

/// `FTVMParallelLambda`.
pub type ParallelLambda =
    unsafe extern "C" fn(task_id: i32, penv: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_spec() {
        assert_eq!(std::mem::size_of::<FfiAny>(), 16);
        assert_eq!(std::mem::size_of::<DType>(), 4);
        assert_eq!(std::mem::size_of::<DLDevice>(), 8);
        if cfg!(target_pointer_width = "64") {
            assert_eq!(std::mem::size_of::<DLTensor>(), 48);
            assert_eq!(std::mem::offset_of!(DLTensor, shape), 0x18);
            assert_eq!(std::mem::offset_of!(DLTensor, byte_offset), 0x28);
            assert_eq!(std::mem::offset_of!(ParallelGroupEnv, num_task), 8);
        }
        assert_eq!(
            std::mem::offset_of!(DLTensor, ndim),
            0x10.min(std::mem::size_of::<usize>() + 8)
        );
    }
}
