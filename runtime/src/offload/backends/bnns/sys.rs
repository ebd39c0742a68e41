//! The slice of Accelerate's BNNS C API this backend uses: `#[repr(C)]` mirrors of the structs in
//! `bnns_structures.h`, the enum values of `bnns_constants.h`, and (on Apple targets only) the
//! filter functions of `bnns.h`.
//!
//! Field order and sizes were transcribed from the public headers (LP64, the same on arm64 and
//! x86_64); the `const` assertions below pin sizes and offsets so a transcription error fails
//! the build instead of corrupting a call. Every BNNS enum is a `uint32_t`.

// A mirror of the C API: some fields and values exist for layout fidelity, not use.
#![allow(dead_code)]

use std::ffi::c_void;
use std::ptr;

/// An opaque filter handle (`BNNSFilter`, a `void *`).
pub type BnnsFilter = *mut c_void;

// ---- BNNSDataType ----
pub const DATA_TYPE_FLOAT32: u32 = 0x10020;

// ---- BNNSDataLayout ----
pub const LAYOUT_VECTOR: u32 = 0x10000;
pub const LAYOUT_ROW_MAJOR_MATRIX: u32 = 0x20000;
pub const LAYOUT_IMAGE_CHW: u32 = 0x30000;
pub const LAYOUT_CONVOLUTION_WEIGHTS_OIHW: u32 = 0x40000;

// ---- BNNSActivationFunction ----
pub const ACTIVATION_IDENTITY: u32 = 0;
pub const ACTIVATION_RELU: u32 = 1;
/// `min(max(x, alpha), beta)`.
pub const ACTIVATION_CLAMP: u32 = 8;
pub const ACTIVATION_SOFTMAX: u32 = 11;

// ---- BNNSPoolingFunction ----
pub const POOLING_MAX: u32 = 0;
pub const POOLING_AVERAGE_COUNT_INCLUDE_PADDING: u32 = 1;
pub const POOLING_AVERAGE_COUNT_EXCLUDE_PADDING: u32 = 2;

// ---- BNNSArithmeticFunction ----
pub const ARITHMETIC_ADD: u32 = 0;
pub const ARITHMETIC_MULTIPLY: u32 = 2;

// ---- BNNSDescriptorType (arithmetic operands) ----
pub const DESCRIPTOR_TYPE_CONSTANT: u32 = 0;
pub const DESCRIPTOR_TYPE_SAMPLE: u32 = 1;

/// `BNNSNDArrayDescriptor`: an N-D array (up to 8 dims). For the named layouts `size[]` is
/// innermost first (ImageCHW: W, H, C; RowMajorMatrix: columns, rows; conv weights: KW, KH, I, O).
/// A zero `stride[]` means contiguous.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BnnsNdArrayDescriptor {
    pub flags: u32,
    pub layout: u32,
    pub size: [usize; 8],
    pub stride: [usize; 8],
    pub data: *mut c_void,
    pub data_type: u32,
    pub table_data: *mut c_void,
    pub table_data_type: u32,
    pub data_scale: f32,
    pub data_bias: f32,
}

impl BnnsNdArrayDescriptor {
    /// All zero, NULL data: what BNNS reads as "absent" (e.g. no bias).
    pub const fn empty() -> Self {
        BnnsNdArrayDescriptor {
            flags: 0,
            layout: 0,
            size: [0; 8],
            stride: [0; 8],
            data: ptr::null_mut(),
            data_type: 0,
            table_data: ptr::null_mut(),
            table_data_type: 0,
            data_scale: 0.0,
            data_bias: 0.0,
        }
    }
}

/// `BNNSActivation`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BnnsActivation {
    pub function: u32,
    pub alpha: f32,
    pub beta: f32,
    pub iscale: i32,
    pub ioffset: i32,
    pub ishift: i32,
    pub iscale_per_channel: *const i32,
    pub ioffset_per_channel: *const i32,
    pub ishift_per_channel: *const i32,
}

impl BnnsActivation {
    /// A float activation (`alpha`/`beta` as the function defines them).
    pub const fn new(function: u32, alpha: f32, beta: f32) -> Self {
        BnnsActivation {
            function,
            alpha,
            beta,
            iscale: 0,
            ioffset: 0,
            ishift: 0,
            iscale_per_channel: ptr::null(),
            ioffset_per_channel: ptr::null(),
            ishift_per_channel: ptr::null(),
        }
    }
}

/// `BNNSLayerParametersConvolution`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BnnsLayerParametersConvolution {
    pub i_desc: BnnsNdArrayDescriptor,
    pub w_desc: BnnsNdArrayDescriptor,
    pub o_desc: BnnsNdArrayDescriptor,
    pub bias: BnnsNdArrayDescriptor,
    pub activation: BnnsActivation,
    pub x_stride: usize,
    pub y_stride: usize,
    pub x_dilation_stride: usize,
    pub y_dilation_stride: usize,
    pub x_padding: usize,
    pub y_padding: usize,
    pub groups: usize,
    /// left, right, up, down; used when `x_padding`/`y_padding` are 0.
    pub pad: [usize; 4],
}

/// `BNNSLayerParametersFullyConnected`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BnnsLayerParametersFullyConnected {
    pub i_desc: BnnsNdArrayDescriptor,
    pub w_desc: BnnsNdArrayDescriptor,
    pub o_desc: BnnsNdArrayDescriptor,
    pub bias: BnnsNdArrayDescriptor,
    pub activation: BnnsActivation,
}

/// `BNNSLayerParametersPooling`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BnnsLayerParametersPooling {
    pub i_desc: BnnsNdArrayDescriptor,
    pub o_desc: BnnsNdArrayDescriptor,
    pub bias: BnnsNdArrayDescriptor,
    pub activation: BnnsActivation,
    pub pooling_function: u32,
    pub k_width: usize,
    pub k_height: usize,
    pub x_stride: usize,
    pub y_stride: usize,
    pub x_dilation_stride: usize,
    pub y_dilation_stride: usize,
    pub x_padding: usize,
    pub y_padding: usize,
    pub pad: [usize; 4],
}

/// `BNNSLayerParametersActivation`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BnnsLayerParametersActivation {
    pub i_desc: BnnsNdArrayDescriptor,
    pub o_desc: BnnsNdArrayDescriptor,
    pub activation: BnnsActivation,
    pub axis_flags: u32,
}

/// `BNNSLayerParametersArithmetic`; `arithmetic_function_fields` points to a
/// [`BnnsArithmeticBinary`] for the binary functions.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BnnsLayerParametersArithmetic {
    pub arithmetic_function: u32,
    pub arithmetic_function_fields: *mut c_void,
    pub activation: BnnsActivation,
}

/// `BNNSArithmeticBinary`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BnnsArithmeticBinary {
    pub in1: BnnsNdArrayDescriptor,
    pub in1_type: u32,
    pub in2: BnnsNdArrayDescriptor,
    pub in2_type: u32,
    pub out: BnnsNdArrayDescriptor,
    pub out_type: u32,
}

/// `BNNSAlloc`: `posix_memalign` semantics.
pub type BnnsAlloc =
    Option<unsafe extern "C" fn(memptr: *mut *mut c_void, alignment: usize, size: usize) -> i32>;
/// `BNNSFree`.
pub type BnnsFree = Option<unsafe extern "C" fn(ptr: *mut c_void)>;

/// `BNNSFilterParameters` (this backend passes NULL, i.e. the defaults; declared for the layout
/// check and for callers that want `n_threads`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BnnsFilterParameters {
    pub flags: u32,
    pub n_threads: usize,
    pub alloc_memory: BnnsAlloc,
    pub free_memory: BnnsFree,
}

#[cfg(target_pointer_width = "64")]
mod layout_checks {
    use super::*;
    use std::mem::{offset_of, size_of};

    const _: () = {
        assert!(size_of::<BnnsNdArrayDescriptor>() == 176);
        assert!(offset_of!(BnnsNdArrayDescriptor, layout) == 4);
        assert!(offset_of!(BnnsNdArrayDescriptor, size) == 8);
        assert!(offset_of!(BnnsNdArrayDescriptor, stride) == 72);
        assert!(offset_of!(BnnsNdArrayDescriptor, data) == 136);
        assert!(offset_of!(BnnsNdArrayDescriptor, data_type) == 144);
        assert!(offset_of!(BnnsNdArrayDescriptor, table_data) == 152);
        assert!(offset_of!(BnnsNdArrayDescriptor, table_data_type) == 160);
        assert!(offset_of!(BnnsNdArrayDescriptor, data_scale) == 164);
        assert!(offset_of!(BnnsNdArrayDescriptor, data_bias) == 168);

        assert!(size_of::<BnnsActivation>() == 48);
        assert!(offset_of!(BnnsActivation, alpha) == 4);
        assert!(offset_of!(BnnsActivation, beta) == 8);
        assert!(offset_of!(BnnsActivation, iscale) == 12);
        assert!(offset_of!(BnnsActivation, ioffset) == 16);
        assert!(offset_of!(BnnsActivation, ishift) == 20);
        assert!(offset_of!(BnnsActivation, iscale_per_channel) == 24);
        assert!(offset_of!(BnnsActivation, ioffset_per_channel) == 32);
        assert!(offset_of!(BnnsActivation, ishift_per_channel) == 40);

        assert!(size_of::<BnnsLayerParametersConvolution>() == 840);
        assert!(offset_of!(BnnsLayerParametersConvolution, w_desc) == 176);
        assert!(offset_of!(BnnsLayerParametersConvolution, o_desc) == 352);
        assert!(offset_of!(BnnsLayerParametersConvolution, bias) == 528);
        assert!(offset_of!(BnnsLayerParametersConvolution, activation) == 704);
        assert!(offset_of!(BnnsLayerParametersConvolution, x_stride) == 752);
        assert!(offset_of!(BnnsLayerParametersConvolution, y_stride) == 760);
        assert!(offset_of!(BnnsLayerParametersConvolution, x_dilation_stride) == 768);
        assert!(offset_of!(BnnsLayerParametersConvolution, y_dilation_stride) == 776);
        assert!(offset_of!(BnnsLayerParametersConvolution, x_padding) == 784);
        assert!(offset_of!(BnnsLayerParametersConvolution, y_padding) == 792);
        assert!(offset_of!(BnnsLayerParametersConvolution, groups) == 800);
        assert!(offset_of!(BnnsLayerParametersConvolution, pad) == 808);

        assert!(size_of::<BnnsLayerParametersFullyConnected>() == 752);
        assert!(offset_of!(BnnsLayerParametersFullyConnected, w_desc) == 176);
        assert!(offset_of!(BnnsLayerParametersFullyConnected, o_desc) == 352);
        assert!(offset_of!(BnnsLayerParametersFullyConnected, bias) == 528);
        assert!(offset_of!(BnnsLayerParametersFullyConnected, activation) == 704);

        assert!(size_of::<BnnsLayerParametersPooling>() == 680);
        assert!(offset_of!(BnnsLayerParametersPooling, o_desc) == 176);
        assert!(offset_of!(BnnsLayerParametersPooling, bias) == 352);
        assert!(offset_of!(BnnsLayerParametersPooling, activation) == 528);
        assert!(offset_of!(BnnsLayerParametersPooling, pooling_function) == 576);
        assert!(offset_of!(BnnsLayerParametersPooling, k_width) == 584);
        assert!(offset_of!(BnnsLayerParametersPooling, k_height) == 592);
        assert!(offset_of!(BnnsLayerParametersPooling, x_stride) == 600);
        assert!(offset_of!(BnnsLayerParametersPooling, y_stride) == 608);
        assert!(offset_of!(BnnsLayerParametersPooling, x_dilation_stride) == 616);
        assert!(offset_of!(BnnsLayerParametersPooling, y_dilation_stride) == 624);
        assert!(offset_of!(BnnsLayerParametersPooling, x_padding) == 632);
        assert!(offset_of!(BnnsLayerParametersPooling, y_padding) == 640);
        assert!(offset_of!(BnnsLayerParametersPooling, pad) == 648);

        assert!(size_of::<BnnsLayerParametersActivation>() == 408);
        assert!(offset_of!(BnnsLayerParametersActivation, o_desc) == 176);
        assert!(offset_of!(BnnsLayerParametersActivation, activation) == 352);
        assert!(offset_of!(BnnsLayerParametersActivation, axis_flags) == 400);

        assert!(size_of::<BnnsLayerParametersArithmetic>() == 64);
        assert!(offset_of!(BnnsLayerParametersArithmetic, arithmetic_function_fields) == 8);
        assert!(offset_of!(BnnsLayerParametersArithmetic, activation) == 16);

        assert!(size_of::<BnnsArithmeticBinary>() == 552);
        assert!(offset_of!(BnnsArithmeticBinary, in1_type) == 176);
        assert!(offset_of!(BnnsArithmeticBinary, in2) == 184);
        assert!(offset_of!(BnnsArithmeticBinary, in2_type) == 360);
        assert!(offset_of!(BnnsArithmeticBinary, out) == 368);
        assert!(offset_of!(BnnsArithmeticBinary, out_type) == 544);

        assert!(size_of::<BnnsFilterParameters>() == 32);
        assert!(offset_of!(BnnsFilterParameters, n_threads) == 8);
        assert!(offset_of!(BnnsFilterParameters, alloc_memory) == 16);
        assert!(offset_of!(BnnsFilterParameters, free_memory) == 24);
    };
}

#[cfg(target_vendor = "apple")]
#[link(name = "Accelerate", kind = "framework")]
extern "C" {
    pub fn BNNSFilterCreateLayerConvolution(
        layer_params: *const BnnsLayerParametersConvolution,
        filter_params: *const BnnsFilterParameters,
    ) -> BnnsFilter;
    pub fn BNNSFilterCreateLayerFullyConnected(
        layer_params: *const BnnsLayerParametersFullyConnected,
        filter_params: *const BnnsFilterParameters,
    ) -> BnnsFilter;
    pub fn BNNSFilterCreateLayerPooling(
        layer_params: *const BnnsLayerParametersPooling,
        filter_params: *const BnnsFilterParameters,
    ) -> BnnsFilter;
    pub fn BNNSFilterCreateLayerActivation(
        layer_params: *const BnnsLayerParametersActivation,
        filter_params: *const BnnsFilterParameters,
    ) -> BnnsFilter;
    pub fn BNNSFilterCreateLayerArithmetic(
        layer_params: *const BnnsLayerParametersArithmetic,
        filter_params: *const BnnsFilterParameters,
    ) -> BnnsFilter;
    /// Strides are in values, not bytes; returns 0 on success, -1 on failure.
    pub fn BNNSFilterApplyBatch(
        filter: BnnsFilter,
        batch_size: usize,
        input: *const c_void,
        in_stride: usize,
        output: *mut c_void,
        out_stride: usize,
    ) -> i32;
    pub fn BNNSFilterApplyTwoInputBatch(
        filter: BnnsFilter,
        batch_size: usize,
        in_a: *const c_void,
        in_a_stride: usize,
        in_b: *const c_void,
        in_b_stride: usize,
        output: *mut c_void,
        out_stride: usize,
    ) -> i32;
    pub fn BNNSFilterDestroy(filter: BnnsFilter);
}
