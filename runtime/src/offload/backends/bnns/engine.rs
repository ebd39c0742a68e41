//! The seam between the backend and the library that runs filters: [`Engine`] creates, applies
//! and destroys BNNS filters. On Apple targets [`Accelerate`] calls the real framework; unit
//! tests on any platform use the emulator (`emu.rs`), which implements the same filter semantics
//! from the header's definitions, so every line of descriptor building, batching and scratch
//! handling runs in CI without a Mac.

use std::ffi::c_void;
use std::ptr::NonNull;

use super::sys;

/// One layer's creation parameters, borrowed for the duration of a create call.
// Only engines read the parameters, and a non-Apple, non-test build has none.
#[cfg_attr(not(any(test, target_vendor = "apple")), allow(dead_code))]
#[derive(Clone, Copy)]
pub(crate) enum Layer<'a> {
    Convolution(&'a sys::BnnsLayerParametersConvolution),
    FullyConnected(&'a sys::BnnsLayerParametersFullyConnected),
    Pooling(&'a sys::BnnsLayerParametersPooling),
    Activation(&'a sys::BnnsLayerParametersActivation),
    Arithmetic(&'a sys::BnnsLayerParametersArithmetic),
}

/// Something that implements BNNS's filter API.
pub(crate) trait Engine: Send + Sync {
    /// For messages and tests.
    fn name(&self) -> &'static str;

    /// Create a filter; `None` when the library refuses the parameters (BNNS returns NULL).
    ///
    /// # Safety
    /// Every non-NULL `data` pointer in the parameters (weights, bias, and the arithmetic
    /// fields pointer) is valid for reads of what its descriptor describes, for the duration of
    /// the call.
    unsafe fn create(&self, layer: Layer<'_>) -> Option<NonNull<c_void>>;

    /// `BNNSFilterApplyBatch`: strides in values. Returns 0 on success.
    ///
    /// # Safety
    /// `filter` came from this engine's `create` and is not used by another thread during the
    /// call; `input` is valid for reads and `output` for writes of `batch` samples at the given
    /// strides, of the sizes the filter was created with; they do not overlap.
    unsafe fn apply(
        &self,
        filter: NonNull<c_void>,
        batch: usize,
        input: *const f32,
        in_stride: usize,
        output: *mut f32,
        out_stride: usize,
    ) -> i32;

    /// `BNNSFilterApplyTwoInputBatch`: strides in values. Returns 0 on success.
    ///
    /// # Safety
    /// As [`Engine::apply`], for both inputs.
    #[allow(clippy::too_many_arguments)]
    unsafe fn apply_two(
        &self,
        filter: NonNull<c_void>,
        batch: usize,
        a: *const f32,
        a_stride: usize,
        b: *const f32,
        b_stride: usize,
        output: *mut f32,
        out_stride: usize,
    ) -> i32;

    /// `BNNSFilterDestroy`.
    ///
    /// # Safety
    /// `filter` came from this engine's `create` and is not used afterwards.
    unsafe fn destroy(&self, filter: NonNull<c_void>);
}

/// A filter owned by this backend: destroyed when dropped.
pub(crate) struct Filter {
    ptr: NonNull<c_void>,
    engine: &'static dyn Engine,
}

// SAFETY: a BNNS filter is a heap object with no thread affinity; the backend hands each filter
// set to one runner at a time (see `FilterSet` in mod.rs), so it is never applied from two
// threads at once.
unsafe impl Send for Filter {}

impl Filter {
    /// Take ownership of a filter `engine` created.
    pub(crate) fn new(ptr: NonNull<c_void>, engine: &'static dyn Engine) -> Filter {
        Filter { ptr, engine }
    }
    pub(crate) fn ptr(&self) -> NonNull<c_void> {
        self.ptr
    }
}

impl Drop for Filter {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `engine.create` (Filter::new's contract) and this is its only
        // owner; nothing uses it after drop.
        unsafe { self.engine.destroy(self.ptr) }
    }
}

/// The real framework.
#[cfg(target_vendor = "apple")]
pub(crate) struct Accelerate;

#[cfg(target_vendor = "apple")]
impl Engine for Accelerate {
    fn name(&self) -> &'static str {
        "Accelerate"
    }

    unsafe fn create(&self, layer: Layer<'_>) -> Option<NonNull<c_void>> {
        let none = std::ptr::null();
        // SAFETY: the parameter structs are live references with the C layout (checked in
        // sys.rs); their data pointers are valid per this function's contract; NULL filter
        // parameters select the defaults.
        let f = unsafe {
            match layer {
                Layer::Convolution(p) => sys::BNNSFilterCreateLayerConvolution(p, none),
                Layer::FullyConnected(p) => sys::BNNSFilterCreateLayerFullyConnected(p, none),
                Layer::Pooling(p) => sys::BNNSFilterCreateLayerPooling(p, none),
                Layer::Activation(p) => sys::BNNSFilterCreateLayerActivation(p, none),
                Layer::Arithmetic(p) => sys::BNNSFilterCreateLayerArithmetic(p, none),
            }
        };
        NonNull::new(f)
    }

    unsafe fn apply(
        &self,
        filter: NonNull<c_void>,
        batch: usize,
        input: *const f32,
        in_stride: usize,
        output: *mut f32,
        out_stride: usize,
    ) -> i32 {
        // SAFETY: forwarded contract of `Engine::apply`.
        unsafe {
            sys::BNNSFilterApplyBatch(
                filter.as_ptr(),
                batch,
                input.cast(),
                in_stride,
                output.cast(),
                out_stride,
            )
        }
    }

    unsafe fn apply_two(
        &self,
        filter: NonNull<c_void>,
        batch: usize,
        a: *const f32,
        a_stride: usize,
        b: *const f32,
        b_stride: usize,
        output: *mut f32,
        out_stride: usize,
    ) -> i32 {
        // SAFETY: forwarded contract of `Engine::apply_two`.
        unsafe {
            sys::BNNSFilterApplyTwoInputBatch(
                filter.as_ptr(),
                batch,
                a.cast(),
                a_stride,
                b.cast(),
                b_stride,
                output.cast(),
                out_stride,
            )
        }
    }

    unsafe fn destroy(&self, filter: NonNull<c_void>) {
        // SAFETY: forwarded contract of `Engine::destroy`.
        unsafe { sys::BNNSFilterDestroy(filter.as_ptr()) }
    }
}
