//! Layer specifications (plain Rust, owning their weights) and how they become BNNS layer
//! parameters. A spec is kept for the life of a prepared segment, so more filter sets can be
//! created from it later (one per concurrent runner); the `#[repr(C)]` structs with their raw
//! pointers only ever live on the stack for the duration of one create call.

use std::ffi::c_void;

use super::engine::{Engine, Filter, Layer};
use super::sys::{self, BnnsActivation, BnnsNdArrayDescriptor};

/// A fused activation as BNNS spells it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Act {
    pub function: u32,
    pub alpha: f32,
    pub beta: f32,
}

impl Act {
    pub(crate) const IDENTITY: Act = Act {
        function: sys::ACTIVATION_IDENTITY,
        alpha: 0.0,
        beta: 0.0,
    };

    /// relu -> ReLU; relu6 and clip -> Clamp(lo, hi) (`min(max(x, alpha), beta)`). The
    /// activations of format version 2 are not mapped (`None`; docs/bnns.md says why).
    pub(crate) fn from_graph(a: crate::offload::format::Activation) -> Option<Act> {
        use crate::offload::format::Activation as A;
        Some(match a {
            A::None => Act::IDENTITY,
            A::Relu => Act {
                function: sys::ACTIVATION_RELU,
                alpha: 0.0,
                beta: 0.0,
            },
            A::Relu6 => Act::clamp(0.0, 6.0),
            A::Clip(lo, hi) => Act::clamp(lo, hi),
            _ => return None,
        })
    }

    pub(crate) fn clamp(lo: f32, hi: f32) -> Act {
        Act {
            function: sys::ACTIVATION_CLAMP,
            alpha: lo,
            beta: hi,
        }
    }

    fn raw(self) -> BnnsActivation {
        BnnsActivation::new(self.function, self.alpha, self.beta)
    }
}

/// A CHW image (one sample).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Image {
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl Image {
    pub(crate) fn len(self) -> usize {
        self.c * self.h * self.w
    }
}

/// One window (conv or pool) geometry, per axis `[y, x]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// BNNS order: left, right, up, down.
    pub pad: [usize; 4],
}

/// What one filter computes, with its weights.
#[derive(Clone, Debug)]
pub(crate) enum LayerSpec {
    Convolution {
        input: Image,
        output: Image,
        window: Window,
        groups: usize,
        /// OIHW, `[O, I/groups, KH, KW]` (the description's NCHW weight layout).
        weights: Vec<f32>,
        bias: Option<Vec<f32>>,
        act: Act,
    },
    FullyConnected {
        inputs: usize,
        outputs: usize,
        /// Row-major `[outputs, inputs]` (the description's dense weight layout).
        weights: Vec<f32>,
        bias: Option<Vec<f32>>,
        act: Act,
    },
    Pooling {
        input: Image,
        output: Image,
        window: Window,
        function: u32,
    },
    /// Element-wise activation (or softmax) over a vector of `len` values.
    Activation {
        len: usize,
        act: Act,
        axis_flags: u32,
    },
    /// `out = act(a <function> b)` over vectors of `len` values, both operands per sample.
    Arithmetic { len: usize, function: u32, act: Act },
}

fn f32_desc(layout: u32, dims: &[usize], data: *mut c_void) -> BnnsNdArrayDescriptor {
    let mut d = BnnsNdArrayDescriptor::empty();
    d.layout = layout;
    d.size[..dims.len()].copy_from_slice(dims);
    d.data = data;
    d.data_type = sys::DATA_TYPE_FLOAT32;
    d.data_scale = 1.0;
    d.data_bias = 0.0;
    d
}

/// An `ImageCHW` descriptor: size = (W, H, C), innermost first.
pub(crate) fn image_desc(i: Image) -> BnnsNdArrayDescriptor {
    f32_desc(
        sys::LAYOUT_IMAGE_CHW,
        &[i.w, i.h, i.c],
        std::ptr::null_mut(),
    )
}

/// A `Vector` descriptor of `n` values.
pub(crate) fn vector_desc(n: usize, data: *mut c_void) -> BnnsNdArrayDescriptor {
    f32_desc(sys::LAYOUT_VECTOR, &[n], data)
}

/// A bias vector, or the empty descriptor (NULL data) BNNS reads as "no bias".
fn bias_desc(n: usize, bias: &Option<Vec<f32>>) -> BnnsNdArrayDescriptor {
    match bias {
        Some(b) => vector_desc(n, b.as_ptr() as *mut c_void),
        None => {
            let mut d = vector_desc(n, std::ptr::null_mut());
            d.size = [0; 8];
            d
        }
    }
}

impl LayerSpec {
    /// The values one sample reads and writes (`(in, out)`), i.e. the dense batch strides.
    pub(crate) fn sample_sizes(&self) -> (usize, usize) {
        match self {
            LayerSpec::Convolution { input, output, .. }
            | LayerSpec::Pooling { input, output, .. } => (input.len(), output.len()),
            LayerSpec::FullyConnected {
                inputs, outputs, ..
            } => (*inputs, *outputs),
            LayerSpec::Activation { len, .. } | LayerSpec::Arithmetic { len, .. } => (*len, *len),
        }
    }

    /// The parameters, for error messages.
    pub(crate) fn describe(&self) -> String {
        let img = |i: &Image| format!("{}x{}x{}", i.c, i.h, i.w);
        let win = |w: &Window| {
            format!(
                "kernel {}x{}, stride {}x{}, dilation {}x{}, pad left {} right {} up {} down {}",
                w.kernel[0],
                w.kernel[1],
                w.stride[0],
                w.stride[1],
                w.dilation[0],
                w.dilation[1],
                w.pad[0],
                w.pad[1],
                w.pad[2],
                w.pad[3]
            )
        };
        match self {
            LayerSpec::Convolution {
                input,
                output,
                window,
                groups,
                bias,
                act,
                ..
            } => format!(
                "convolution CHW {} -> {}, {}, groups {groups}, bias {}, activation {act:?}",
                img(input),
                img(output),
                win(window),
                bias.is_some()
            ),
            LayerSpec::FullyConnected {
                inputs,
                outputs,
                bias,
                act,
                ..
            } => format!(
                "fully connected {inputs} -> {outputs}, bias {}, activation {act:?}",
                bias.is_some()
            ),
            LayerSpec::Pooling {
                input,
                output,
                window,
                function,
            } => format!(
                "pooling function {function}, CHW {} -> {}, {}",
                img(input),
                img(output),
                win(window)
            ),
            LayerSpec::Activation {
                len,
                act,
                axis_flags,
            } => format!("activation {act:?} over {len} values, axis_flags {axis_flags}"),
            LayerSpec::Arithmetic { len, function, act } => {
                format!("arithmetic function {function} over {len} values, activation {act:?}")
            }
        }
    }

    /// Create a filter on `engine`; `None` when the engine refuses the parameters.
    pub(crate) fn create(&self, engine: &'static dyn Engine) -> Option<Filter> {
        // Weights and bias are passed by pointer and copied by the library during the create
        // call (no `BNNSFlagsUseClientPtr`), so the filter never points into `self`.
        let ptr = match self {
            LayerSpec::Convolution {
                input,
                output,
                window,
                groups,
                weights,
                bias,
                act,
            } => {
                let p = sys::BnnsLayerParametersConvolution {
                    i_desc: image_desc(*input),
                    w_desc: f32_desc(
                        sys::LAYOUT_CONVOLUTION_WEIGHTS_OIHW,
                        &[
                            window.kernel[1],
                            window.kernel[0],
                            input.c / (*groups).max(1),
                            output.c,
                        ],
                        weights.as_ptr() as *mut c_void,
                    ),
                    o_desc: image_desc(*output),
                    bias: bias_desc(output.c, bias),
                    activation: act.raw(),
                    x_stride: window.stride[1],
                    y_stride: window.stride[0],
                    x_dilation_stride: window.dilation[1],
                    y_dilation_stride: window.dilation[0],
                    x_padding: 0,
                    y_padding: 0,
                    groups: *groups,
                    pad: window.pad,
                };
                // SAFETY: the weight and bias pointers come from live Vecs of `self` holding
                // exactly the sizes the descriptors state (checked when the spec was built).
                unsafe { engine.create(Layer::Convolution(&p)) }
            }
            LayerSpec::FullyConnected {
                inputs,
                outputs,
                weights,
                bias,
                act,
            } => {
                let p = sys::BnnsLayerParametersFullyConnected {
                    i_desc: vector_desc(*inputs, std::ptr::null_mut()),
                    // RowMajorMatrix: size = (columns, rows) = (inputs, outputs).
                    w_desc: f32_desc(
                        sys::LAYOUT_ROW_MAJOR_MATRIX,
                        &[*inputs, *outputs],
                        weights.as_ptr() as *mut c_void,
                    ),
                    o_desc: vector_desc(*outputs, std::ptr::null_mut()),
                    bias: bias_desc(*outputs, bias),
                    activation: act.raw(),
                };
                // SAFETY: as for the convolution.
                unsafe { engine.create(Layer::FullyConnected(&p)) }
            }
            LayerSpec::Pooling {
                input,
                output,
                window,
                function,
            } => {
                let p = sys::BnnsLayerParametersPooling {
                    i_desc: image_desc(*input),
                    o_desc: image_desc(*output),
                    bias: bias_desc(output.c, &None),
                    activation: Act::IDENTITY.raw(),
                    pooling_function: *function,
                    k_width: window.kernel[1],
                    k_height: window.kernel[0],
                    x_stride: window.stride[1],
                    y_stride: window.stride[0],
                    x_dilation_stride: window.dilation[1],
                    y_dilation_stride: window.dilation[0],
                    x_padding: 0,
                    y_padding: 0,
                    pad: window.pad,
                };
                // SAFETY: no data pointers besides NULL.
                unsafe { engine.create(Layer::Pooling(&p)) }
            }
            LayerSpec::Activation {
                len,
                act,
                axis_flags,
            } => {
                let p = sys::BnnsLayerParametersActivation {
                    i_desc: vector_desc(*len, std::ptr::null_mut()),
                    o_desc: vector_desc(*len, std::ptr::null_mut()),
                    activation: act.raw(),
                    axis_flags: *axis_flags,
                };
                // SAFETY: no data pointers besides NULL.
                unsafe { engine.create(Layer::Activation(&p)) }
            }
            LayerSpec::Arithmetic { len, function, act } => {
                let mut fields = sys::BnnsArithmeticBinary {
                    in1: vector_desc(*len, std::ptr::null_mut()),
                    in1_type: sys::DESCRIPTOR_TYPE_SAMPLE,
                    in2: vector_desc(*len, std::ptr::null_mut()),
                    in2_type: sys::DESCRIPTOR_TYPE_SAMPLE,
                    out: vector_desc(*len, std::ptr::null_mut()),
                    out_type: sys::DESCRIPTOR_TYPE_SAMPLE,
                };
                let p = sys::BnnsLayerParametersArithmetic {
                    arithmetic_function: *function,
                    arithmetic_function_fields: &mut fields as *mut _ as *mut c_void,
                    activation: act.raw(),
                };
                // SAFETY: the fields pointer refers to `fields`, alive on this stack frame for
                // the whole call; its descriptors carry no data pointers.
                unsafe { engine.create(Layer::Arithmetic(&p)) }
            }
        }?;
        Some(Filter::new(ptr, engine))
    }
}
