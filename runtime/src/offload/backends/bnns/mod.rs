//! Apple's BNNS (Accelerate) as a backend, through its per-layer filter API.
//!
//! Why the filter API: BNNSGraph's only C entry point compiles a Core ML `.mlmodelc`, and its
//! builder is Swift-only, so it cannot take a subgraph description at run time. The filter API
//! (macOS 11 / iOS 14, deprecated but exported since macOS 15 / iOS 18) can: every supported
//! node becomes one filter (`BNNSFilterCreateLayer*`) created once at prepare time, weights
//! copied in, and applied per run with `BNNSFilterApplyBatch` over the outer dimension
//! (descriptors describe one sample; batch strides count values). Reshape and concatenate are
//! copies done here (BNNS has no concat layer). `docs/bnns.md` lists what maps to what and what
//! is refused.
//!
//! Threading: nothing public says one filter may be applied from two threads at once, so each
//! concurrent run takes a whole filter set (plus its scratch for the segment's internal tensors)
//! from a pool, creating another from the kept layer specs when the pool is empty.
//!
//! Off Apple targets the backend reports itself unavailable; unit tests run the same code on an
//! emulator of the filter semantics (`emu.rs`) behind the [`engine::Engine`] seam.

mod desc;
#[cfg(test)]
mod emu;
mod engine;
mod sys;
#[cfg(test)]
mod tests;

use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::offload::format::{window_out, Graph, Layout, Op, Role, TensorDesc};
use crate::offload::{segment_io, Backend, Buffers, Constants, Prepared};
use desc::{Act, Image, LayerSpec, Window};
use engine::{Engine, Filter};

/// The name sessions use for this backend.
pub const NAME: &str = "bnns";

/// Idle filter sets kept per prepared segment.
const MAX_IDLE_SETS: usize = 8;

/// Apple's BNNS (Accelerate), through its filter API.
pub struct BnnsBackend {
    engine: Option<&'static dyn Engine>,
}

/// What the registry holds under this name.
pub(crate) fn registered() -> Arc<dyn crate::offload::Backend> {
    Arc::new(BnnsBackend::default())
}

impl Default for BnnsBackend {
    fn default() -> Self {
        BnnsBackend {
            engine: platform_engine(),
        }
    }
}

#[cfg(target_vendor = "apple")]
fn platform_engine() -> Option<&'static dyn Engine> {
    Some(&engine::Accelerate)
}

#[cfg(not(target_vendor = "apple"))]
fn platform_engine() -> Option<&'static dyn Engine> {
    None
}

use super::BNNS_UNAVAILABLE as UNAVAILABLE;

impl BnnsBackend {
    /// The backend on a given engine (tests: the emulator).
    #[cfg(test)]
    pub(crate) fn with_engine(engine: &'static dyn Engine) -> BnnsBackend {
        BnnsBackend {
            engine: Some(engine),
        }
    }
}

fn backend_err(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: NAME.into(),
        message: message.into(),
    }
}

impl Backend for BnnsBackend {
    fn name(&self) -> &str {
        NAME
    }

    fn available(&self) -> std::result::Result<(), String> {
        match self.engine {
            Some(_) => Ok(()),
            None => Err(UNAVAILABLE.into()),
        }
    }

    fn supports(
        &self,
        graph: &Graph,
        node: usize,
        _: Constants<'_>,
    ) -> std::result::Result<(), String> {
        self.available()?;
        check_node(graph, node)
    }

    fn prepare(
        &self,
        graph: &Arc<Graph>,
        nodes: Range<usize>,
        constants: Constants<'_>,
    ) -> Result<Box<dyn Prepared>> {
        let engine = self.engine.ok_or_else(|| backend_err(UNAVAILABLE))?;
        let seg = Segment::build(engine, graph, nodes, constants)?;
        // Creating the first filter set is the validation step: BNNS refuses what it cannot
        // run, and the executor then falls back to `cpu` for the segment.
        let first = seg.new_set()?;
        if let Ok(mut idle) = seg.idle.lock() {
            idle.push(first);
        }
        Ok(Box::new(seg))
    }
}

// ---- what is supported ----

fn dtype_reason(t: usize, d: &TensorDesc) -> String {
    match d.dtype {
        DType::F16 => format!(
            "tensor {t} is float16: this backend maps float32 layers only"
        ),
        DType::I8 | DType::U8 => format!(
            "tensor {t} is {} (quantized): BNNS only dequantizes integer storage through data_scale/data_bias and has no requantizing integer conv/dense/add, so quantized ops stay on cpu",
            d.dtype
        ),
        other => format!("tensor {t} is {other}: this backend maps float32 layers only"),
    }
}

fn need_nchw(layout: Layout) -> std::result::Result<(), String> {
    match layout {
        Layout::Nchw => Ok(()),
        Layout::Nhwc => Err(
            "layout NHWC: BNNS convolution and pooling take CHW images (BNNSDataLayoutImageCHW) only; an NHWC node would need transposes around it".into(),
        ),
    }
}

fn need_constant(graph: &Graph, t: usize, what: &str) -> std::result::Result<(), String> {
    match graph.role(t) {
        Role::Constant(_) => Ok(()),
        _ => Err(format!(
            "the {what} (tensor {t}) is not a constant: BNNS fixes weights and bias when the filter is created"
        )),
    }
}

fn dims(d: &TensorDesc) -> Vec<usize> {
    d.shape.iter().map(|&v| v as usize).collect()
}

/// BNNS's window arithmetic along one axis: `in + pad_before + pad_after` must equal
/// `stride * (out - 1) + dilated_kernel` exactly. Rows or columns after the last window are
/// never read, so the trailing padding is trimmed to meet that, and when that is not enough the
/// unread input rows/columns are cropped off (copied out at run time). Returns
/// `(trailing padding, values to crop)`.
#[allow(clippy::too_many_arguments)]
fn fit_axis(
    input: usize,
    output: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    before: usize,
    after: usize,
    axis: &str,
) -> std::result::Result<(usize, usize), String> {
    let eff = dilation * (kernel - 1) + 1;
    let need = stride * (output - 1) + eff;
    let have = input + before + after;
    if have < need {
        return Err(format!(
            "the {axis} windows read past the padded input ({have} < {need})"
        ));
    }
    let extra = have - need;
    if extra > after {
        Ok((0, extra - after))
    } else {
        Ok((after - extra, 0))
    }
}

/// The window of a conv/pool with `padding` `[top, left, bottom, right]`, in BNNS terms, and
/// the `[rows, columns]` to crop off the bottom/right of the input first.
type Fitted = (Window, [usize; 2]);

fn window(
    input: Image,
    output: Image,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    padding: [usize; 4],
) -> std::result::Result<Fitted, String> {
    let (down, crop_rows) = fit_axis(
        input.h,
        output.h,
        kernel[0],
        stride[0],
        dilation[0],
        padding[0],
        padding[2],
        "row",
    )?;
    let (right, crop_cols) = fit_axis(
        input.w,
        output.w,
        kernel[1],
        stride[1],
        dilation[1],
        padding[1],
        padding[3],
        "column",
    )?;
    Ok((
        Window {
            kernel,
            stride,
            dilation,
            pad: [padding[1], right, padding[0], down],
        },
        [crop_rows, crop_cols],
    ))
}

fn image(d: &TensorDesc) -> Image {
    let s = dims(d);
    Image {
        c: s[1],
        h: s[2],
        w: s[3],
    }
}

/// The geometry of a conv2d or pool node, checked against BNNS's rules.
fn node_window(graph: &Graph, k: usize) -> std::result::Result<Option<Fitted>, String> {
    let node = &graph.nodes[k];
    let x = image(&graph.tensors[node.inputs[0]]);
    let y = image(&graph.tensors[node.outputs[0]]);
    match &node.op {
        Op::Conv2d(c) => {
            let w = dims(&graph.tensors[node.inputs[1]]);
            window(x, y, [w[2], w[3]], c.strides, c.dilation, c.padding).map(Some)
        }
        Op::MaxPool2d(p) | Op::AvgPool2d(p) => {
            let floor = |i: usize| {
                let (inp, pb, pa) = if i == 0 {
                    (x.h, p.padding[0], p.padding[2])
                } else {
                    (x.w, p.padding[1], p.padding[3])
                };
                window_out(
                    inp as i64,
                    pb,
                    pa,
                    p.pool_size[i],
                    p.strides[i],
                    p.dilation[i],
                    false,
                )
            };
            if floor(0) != Some(y.h as i64) || floor(1) != Some(y.w as i64) {
                return Err(format!(
                    "ceil_mode makes the output {}x{} instead of {:?}x{:?}: BNNS pooling has no ceil mode",
                    y.h,
                    y.w,
                    floor(0).unwrap_or(0),
                    floor(1).unwrap_or(0)
                ));
            }
            window(x, y, p.pool_size, p.strides, p.dilation, p.padding).map(Some)
        }
        Op::GlobalMaxPool2d(_) | Op::GlobalAvgPool2d(_) => Ok(Some((
            Window {
                kernel: [x.h, x.w],
                stride: [1, 1],
                dilation: [1, 1],
                pad: [0; 4],
            },
            [0, 0],
        ))),
        _ => Ok(None),
    }
}

/// Whether node `k` can run here, with the reason when not.
fn check_node(graph: &Graph, k: usize) -> std::result::Result<(), String> {
    let node = &graph.nodes[k];
    for &t in node.inputs.iter().chain(&node.outputs) {
        let d = &graph.tensors[t];
        if d.dtype != DType::F32 {
            return Err(dtype_reason(t, d));
        }
        if d.num_elements() == 0 {
            return Err(format!("tensor {t} is empty"));
        }
    }
    match &node.op {
        Op::Conv2d(c) => {
            need_nchw(c.layout)?;
            need_constant(graph, node.inputs[1], "weight")?;
            if let Some(&b) = node.inputs.get(2) {
                need_constant(graph, b, "bias")?;
            }
            node_window(graph, k)?;
        }
        Op::MaxPool2d(p) | Op::AvgPool2d(p) => {
            need_nchw(p.layout)?;
            node_window(graph, k)?;
        }
        Op::GlobalMaxPool2d(l) | Op::GlobalAvgPool2d(l) => need_nchw(*l)?,
        Op::Dense { .. } => {
            need_constant(graph, node.inputs[1], "weight")?;
            if let Some(&b) = node.inputs.get(2) {
                need_constant(graph, b, "bias")?;
            }
        }
        Op::Matmul => {
            return Err(
                "matmul is not mapped: BNNS's BroadcastMatMul reads size[] in an order TVM had to reverse by trial, which cannot be verified without a Mac".into(),
            )
        }
        Op::Softmax { axis } => {
            let s = &graph.tensors[node.inputs[0]].shape;
            if s[axis + 1..].iter().any(|&d| d != 1) {
                return Err(format!(
                    "softmax over axis {axis} of {s:?} is not over contiguous values: this backend gives BNNS one vector per softmax (the meaning of axis_flags for other layouts is not documented)"
                ));
            }
        }
        Op::Add { .. }
        | Op::Multiply { .. }
        | Op::Relu
        | Op::Relu6
        | Op::Clip { .. }
        | Op::Reshape
        | Op::Concatenate { .. } => {}
        Op::Activation(_)
        | Op::Subtract { .. }
        | Op::Divide { .. }
        | Op::ScaleShift { .. }
        | Op::Lrn(_)
        | Op::Transpose { .. }
        | Op::ChannelShuffle { .. }
        | Op::Split { .. }
        | Op::LayerNorm { .. } => {
            return Err(format!(
                "{} (subgraph format version 2) is not mapped onto BNNS: without a Mac its BNNS layer cannot be checked, so it runs on cpu",
                node.op.name()
            ))
        }
    }
    if let Some(a) = node.op.activation().filter(|a| !a.is_clamp()) {
        return Err(format!(
            "activation `{}` (subgraph format version 2) is not mapped onto BNNS's activation functions: without a Mac their numerics cannot be checked, so the node runs on cpu",
            a.name()
        ));
    }
    Ok(())
}

/// The BNNS activation of a node that `check_node` accepted.
fn mapped_act(a: crate::offload::format::Activation) -> Result<Act> {
    Act::from_graph(a)
        .ok_or_else(|| backend_err(format!("activation `{}` is not mapped onto BNNS", a.name())))
}

// ---- the prepared segment ----

/// Where a tensor lives during a run of one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Not touched by this segment.
    Unused,
    /// A buffer from the executor (segment input or output, or a constant).
    Buffer,
    /// Internal to the segment: values at this offset of the run's scratch.
    Scratch(usize),
    /// A reshape of another tensor: the same memory.
    Alias(usize),
}

/// An operand of a two-input filter.
enum Operand {
    /// The tensor's memory as is (it has the output's shape).
    Tensor(usize),
    /// A constant broadcast to the output's shape once, at prepare time.
    Prepared(Vec<f32>),
    /// A tensor broadcast to the output's shape at run time, into scratch at `offset`.
    Broadcast {
        tensor: usize,
        from: Vec<usize>,
        to: Vec<usize>,
        offset: usize,
    },
}

/// Copy the top-left `to` part of every `from` image into scratch at `offset`.
struct Crop {
    from: Image,
    to: Image,
    offset: usize,
}

enum Exec {
    Unary {
        filter: usize,
        batch: usize,
        input: usize,
        crop: Option<Crop>,
        output: usize,
    },
    Binary {
        filter: usize,
        batch: usize,
        a: Operand,
        b: Operand,
        output: usize,
    },
    /// A reshape whose output keeps the input's memory.
    Alias,
    /// A reshape into a buffer of its own.
    Copy {
        input: usize,
        output: usize,
        len: usize,
    },
    /// Each input's `inner` values per outer index, side by side in the output.
    Concat {
        parts: Vec<(usize, usize)>,
        outer: usize,
        output: usize,
    },
}

struct Step {
    node: usize,
    exec: Exec,
}

/// Everything one concurrent run owns: a filter per layer and the scratch memory.
struct FilterSet {
    filters: Vec<Filter>,
    scratch: Vec<f32>,
}

struct Segment {
    engine: &'static dyn Engine,
    graph: Arc<Graph>,
    steps: Vec<Step>,
    /// Kept to create more filter sets; `layer_node[i]` is the node of `layers[i]`.
    layers: Vec<LayerSpec>,
    layer_node: Vec<usize>,
    place: Vec<Place>,
    /// Tensors read from the executor's buffers: segment inputs and any constant a node reads
    /// directly (a conv's data, a concatenated or reshaped constant).
    ext_reads: Vec<usize>,
    /// Segment outputs (executor buffers).
    writes: Vec<usize>,
    scratch_len: usize,
    idle: Mutex<Vec<FilterSet>>,
}

fn constant_f32(graph: &Graph, t: usize, constants: Constants<'_>) -> Result<Vec<f32>> {
    let Role::Constant(i) = graph.role(t) else {
        return Err(backend_err(format!("tensor {t} is not a constant")));
    };
    let c = constants
        .get(i)?
        .ok_or_else(|| backend_err(format!("constant {i} (tensor {t}) was not given")))?;
    let d = &graph.tensors[t];
    let bytes = c.data();
    if c.dtype() != DType::F32 || bytes.len() != d.num_elements() * 4 {
        return Err(backend_err(format!(
            "constant {i} (tensor {t}) is {} {:?}, the description says {} {:?}",
            c.dtype(),
            c.shape(),
            d.dtype,
            d.shape
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// numpy broadcasting of `src` (shape `from`) to shape `to`, into `dst`.
fn broadcast_into(src: &[f32], from: &[usize], to: &[usize], dst: &mut [f32]) {
    let rank = to.len();
    let lead = rank - from.len();
    // Source stride per output axis (0 where the source dimension is broadcast).
    let mut strides = vec![0usize; rank];
    let mut s = 1;
    for i in (0..rank).rev() {
        if i >= lead {
            let d = from[i - lead];
            strides[i] = if d == 1 { 0 } else { s };
            s *= d;
        }
    }
    let mut idx = vec![0usize; rank];
    for v in dst.iter_mut() {
        let off: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        *v = src.get(off).copied().unwrap_or(0.0);
        for ax in (0..rank).rev() {
            idx[ax] += 1;
            if idx[ax] < to[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
}

/// The image a conv/pool filter sees: `x` itself, or `x` without its last `cut` rows/columns,
/// copied into scratch (from `alloc`) at run time.
fn cropped(
    x: Image,
    cut: [usize; 2],
    batch: usize,
    alloc: &mut impl FnMut(usize) -> usize,
) -> (Image, Option<Crop>) {
    if cut == [0, 0] {
        return (x, None);
    }
    let to = Image {
        c: x.c,
        h: x.h - cut[0],
        w: x.w - cut[1],
    };
    let offset = alloc(batch * to.len());
    (
        to,
        Some(Crop {
            from: x,
            to,
            offset,
        }),
    )
}

/// `(batch, values per sample)` of an element-wise tensor: the outer dimension is the batch.
fn split_batch(shape: &[usize]) -> (usize, usize) {
    let n: usize = shape.iter().product();
    match shape {
        [b, _, ..] if *b > 0 => (*b, n / *b),
        _ => (1, n),
    }
}

impl Segment {
    fn build(
        engine: &'static dyn Engine,
        graph: &Arc<Graph>,
        nodes: Range<usize>,
        constants: Constants<'_>,
    ) -> Result<Segment> {
        let g = &**graph;
        let (_, writes) = segment_io(g, nodes.clone());
        let mut place = vec![Place::Unused; g.tensors.len()];
        let mut scratch_len = 0usize;
        let mut alloc = |n: usize| {
            let off = scratch_len;
            scratch_len += n;
            off
        };
        let mut steps = Vec::new();
        let mut layers = Vec::new();
        let mut layer_node = Vec::new();
        for k in nodes {
            let node = &g.nodes[k];
            check_node(g, k).map_err(|why| {
                backend_err(format!(
                    "cannot run {} node `{}`: {why}",
                    node.op.name(),
                    node.name
                ))
            })?;
            for &t in &node.inputs {
                if place[t] == Place::Unused {
                    place[t] = Place::Buffer;
                }
            }
            let out = node.outputs[0];
            let od = &g.tensors[out];
            let internal = !writes.contains(&out);
            place[out] = match (&node.op, internal) {
                (Op::Reshape, true) => Place::Alias(node.inputs[0]),
                (_, true) => Place::Scratch(alloc(od.num_elements())),
                (_, false) => Place::Buffer,
            };
            let mut push_layer = |spec: LayerSpec| {
                layers.push(spec);
                layer_node.push(k);
                layers.len() - 1
            };
            let exec = match &node.op {
                Op::Conv2d(c) => {
                    let (window, cut) = node_window(g, k)
                        .map_err(backend_err)?
                        .ok_or_else(|| backend_err("conv2d without a window"))?;
                    let batch = dims(od)[0];
                    let (x, crop) =
                        cropped(image(&g.tensors[node.inputs[0]]), cut, batch, &mut alloc);
                    let y = image(od);
                    let weights = constant_f32(g, node.inputs[1], constants)?;
                    let bias = node
                        .inputs
                        .get(2)
                        .map(|&b| constant_f32(g, b, constants))
                        .transpose()?;
                    let filter = push_layer(LayerSpec::Convolution {
                        input: x,
                        output: y,
                        window,
                        groups: c.groups,
                        weights,
                        bias,
                        act: mapped_act(c.activation)?,
                    });
                    Exec::Unary {
                        filter,
                        batch,
                        input: node.inputs[0],
                        crop,
                        output: out,
                    }
                }
                Op::MaxPool2d(_)
                | Op::AvgPool2d(_)
                | Op::GlobalMaxPool2d(_)
                | Op::GlobalAvgPool2d(_) => {
                    let (window, cut) = node_window(g, k)
                        .map_err(backend_err)?
                        .ok_or_else(|| backend_err("pool without a window"))?;
                    let batch = dims(od)[0];
                    let (x, crop) =
                        cropped(image(&g.tensors[node.inputs[0]]), cut, batch, &mut alloc);
                    let function = match &node.op {
                        Op::MaxPool2d(_) | Op::GlobalMaxPool2d(_) => sys::POOLING_MAX,
                        Op::AvgPool2d(p) if p.count_include_pad => {
                            sys::POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                        }
                        _ => sys::POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
                    };
                    let filter = push_layer(LayerSpec::Pooling {
                        input: x,
                        output: image(od),
                        window,
                        function,
                    });
                    Exec::Unary {
                        filter,
                        batch,
                        input: node.inputs[0],
                        crop,
                        output: out,
                    }
                }
                Op::Dense { activation } => {
                    let w = dims(&g.tensors[node.inputs[1]]);
                    let (n, kk) = (w[0], w[1]);
                    let weights = constant_f32(g, node.inputs[1], constants)?;
                    let bias = node
                        .inputs
                        .get(2)
                        .map(|&b| constant_f32(g, b, constants))
                        .transpose()?;
                    let filter = push_layer(LayerSpec::FullyConnected {
                        inputs: kk,
                        outputs: n,
                        weights,
                        bias,
                        act: mapped_act(*activation)?,
                    });
                    Exec::Unary {
                        filter,
                        batch: g.tensors[node.inputs[0]].num_elements() / kk.max(1),
                        input: node.inputs[0],
                        crop: None,
                        output: out,
                    }
                }
                Op::Relu | Op::Relu6 | Op::Clip { .. } | Op::Softmax { .. } => {
                    let shape = dims(od);
                    let (batch, len, act, axis_flags) = match &node.op {
                        Op::Softmax { axis } => {
                            let len = shape[*axis];
                            let act = Act {
                                function: sys::ACTIVATION_SOFTMAX,
                                alpha: 0.0,
                                beta: 0.0,
                            };
                            // One vector per softmax: bit 0 names its only dimension.
                            (od.num_elements() / len, len, act, 1)
                        }
                        op => {
                            let (batch, len) = split_batch(&shape);
                            let act = match op {
                                Op::Relu => mapped_act(crate::offload::format::Activation::Relu)?,
                                Op::Relu6 => Act::clamp(0.0, 6.0),
                                Op::Clip { min, max } => Act::clamp(*min, *max),
                                _ => Act::IDENTITY,
                            };
                            (batch, len, act, 0)
                        }
                    };
                    let filter = push_layer(LayerSpec::Activation {
                        len,
                        act,
                        axis_flags,
                    });
                    Exec::Unary {
                        filter,
                        batch,
                        input: node.inputs[0],
                        crop: None,
                        output: out,
                    }
                }
                Op::Add { activation } | Op::Multiply { activation } => {
                    let shape = dims(od);
                    let (batch, len) = split_batch(&shape);
                    let mut operand = |t: usize| -> Result<Operand> {
                        let from = dims(&g.tensors[t]);
                        if matches!(g.role(t), Role::Constant(_)) {
                            let c = constant_f32(g, t, constants)?;
                            let mut v = vec![0f32; od.num_elements()];
                            broadcast_into(&c, &from, &shape, &mut v);
                            Ok(Operand::Prepared(v))
                        } else if from == shape {
                            Ok(Operand::Tensor(t))
                        } else {
                            Ok(Operand::Broadcast {
                                tensor: t,
                                from,
                                to: shape.clone(),
                                offset: alloc(od.num_elements()),
                            })
                        }
                    };
                    let a = operand(node.inputs[0])?;
                    let b = operand(node.inputs[1])?;
                    let function = if matches!(node.op, Op::Add { .. }) {
                        sys::ARITHMETIC_ADD
                    } else {
                        sys::ARITHMETIC_MULTIPLY
                    };
                    let filter = push_layer(LayerSpec::Arithmetic {
                        len,
                        function,
                        act: mapped_act(*activation)?,
                    });
                    Exec::Binary {
                        filter,
                        batch,
                        a,
                        b,
                        output: out,
                    }
                }
                Op::Reshape => {
                    if internal {
                        Exec::Alias
                    } else {
                        Exec::Copy {
                            input: node.inputs[0],
                            output: out,
                            len: od.num_elements(),
                        }
                    }
                }
                Op::Concatenate { axis } => {
                    let shape = dims(od);
                    let outer: usize = shape[..*axis].iter().product();
                    let parts = node
                        .inputs
                        .iter()
                        .map(|&t| (t, g.tensors[t].num_elements() / outer.max(1)))
                        .collect();
                    Exec::Concat {
                        parts,
                        outer,
                        output: out,
                    }
                }
                Op::Matmul
                | Op::Activation(_)
                | Op::Subtract { .. }
                | Op::Divide { .. }
                | Op::ScaleShift { .. }
                | Op::Lrn(_)
                | Op::Transpose { .. }
                | Op::ChannelShuffle { .. }
                | Op::Split { .. }
                | Op::LayerNorm { .. } => {
                    return Err(backend_err(format!(
                        "{} node `{}` is not mapped",
                        node.op.name(),
                        node.name
                    )))
                }
            };
            steps.push(Step { node: k, exec });
        }
        let ext_reads = (0..g.tensors.len())
            .filter(|&t| place[t] == Place::Buffer && !writes.contains(&t))
            .collect();
        Ok(Segment {
            engine,
            graph: graph.clone(),
            steps,
            layers,
            layer_node,
            place,
            ext_reads,
            writes,
            scratch_len,
            idle: Mutex::new(Vec::new()),
        })
    }

    fn new_set(&self) -> Result<FilterSet> {
        let mut filters = Vec::with_capacity(self.layers.len());
        for (spec, &k) in self.layers.iter().zip(&self.layer_node) {
            let node = &self.graph.nodes[k];
            let f = spec.create(self.engine).ok_or_else(|| {
                backend_err(format!(
                    "BNNS ({}) refused {} node `{}` ({})",
                    self.engine.name(),
                    node.op.name(),
                    node.name,
                    spec.describe()
                ))
            })?;
            filters.push(f);
        }
        Ok(FilterSet {
            filters,
            scratch: vec![0f32; self.scratch_len],
        })
    }

    fn run_on(&self, set: &mut FilterSet, bufs: &mut Buffers<'_>) -> Result<()> {
        let g = &*self.graph;
        let (r, w) = bufs.raw(&self.ext_reads, &self.writes)?;
        let mut ptr: Vec<*mut f32> = vec![std::ptr::null_mut(); g.tensors.len()];
        for (&t, p) in self
            .ext_reads
            .iter()
            .zip(r.into_iter().map(|p| p as *mut u8))
            .chain(self.writes.iter().zip(w))
        {
            if (p as usize) % std::mem::align_of::<f32>() != 0 {
                return Err(backend_err(format!(
                    "subgraph `{}`: the buffer of tensor {t} is not 4-byte aligned",
                    g.name
                )));
            }
            ptr[t] = p.cast();
        }
        let base = set.scratch.as_mut_ptr();
        for (t, pl) in self.place.iter().enumerate() {
            if let Place::Scratch(off) = *pl {
                // SAFETY: `off + len(t)` lies within the scratch (allocated for exactly the
                // offsets handed out in `build`).
                ptr[t] = unsafe { base.add(off) };
            }
        }
        for step in &self.steps {
            let node = &g.nodes[step.node];
            let failed = |what: &str, rc: i32| {
                backend_err(format!(
                    "subgraph `{}`: BNNS ({}) failed to apply {what} of {} node `{}` (status {rc})",
                    g.name,
                    self.engine.name(),
                    node.op.name(),
                    node.name
                ))
            };
            match &step.exec {
                Exec::Unary {
                    filter,
                    batch,
                    input,
                    crop,
                    output,
                } => {
                    let (is, os) = self.layers[*filter].sample_sizes();
                    let src = match crop {
                        None => ptr[*input],
                        Some(Crop { from, to, offset }) => {
                            // SAFETY: the input holds `batch` images of `from`; the destination
                            // is this step's own scratch region of `batch` images of `to`.
                            let (x, y) = unsafe {
                                (
                                    std::slice::from_raw_parts(ptr[*input], batch * from.len()),
                                    std::slice::from_raw_parts_mut(
                                        base.add(*offset),
                                        batch * to.len(),
                                    ),
                                )
                            };
                            for (plane, dst) in y.chunks_exact_mut(to.h * to.w).enumerate() {
                                let src = &x[plane * from.h * from.w..];
                                for (r, row) in dst.chunks_exact_mut(to.w).enumerate() {
                                    row.copy_from_slice(&src[r * from.w..r * from.w + to.w]);
                                }
                            }
                            y.as_ptr() as *mut f32
                        }
                    };
                    // SAFETY: the input and output pointers cover `batch` samples of `is`/`os`
                    // values (their descriptors' sizes, as the segment was built from them);
                    // they are distinct buffers or disjoint scratch regions; the filter set is
                    // this run's alone.
                    let rc = unsafe {
                        self.engine.apply(
                            set.filters[*filter].ptr(),
                            *batch,
                            src,
                            is,
                            ptr[*output],
                            os,
                        )
                    };
                    if rc != 0 {
                        return Err(failed("the filter", rc));
                    }
                }
                Exec::Binary {
                    filter,
                    batch,
                    a,
                    b,
                    output,
                } => {
                    let (len, _) = self.layers[*filter].sample_sizes();
                    let operand = |o: &Operand| -> *const f32 {
                        match o {
                            Operand::Tensor(t) => ptr[*t],
                            Operand::Prepared(v) => v.as_ptr(),
                            Operand::Broadcast {
                                tensor,
                                from,
                                to,
                                offset,
                            } => {
                                let n_from: usize = from.iter().product();
                                let n_to: usize = to.iter().product();
                                // SAFETY: the source is a buffer of `n_from` values; the
                                // destination is this operand's own scratch region of `n_to`
                                // values, disjoint from everything else.
                                let (src, dst) = unsafe {
                                    (
                                        std::slice::from_raw_parts(ptr[*tensor], n_from),
                                        std::slice::from_raw_parts_mut(base.add(*offset), n_to),
                                    )
                                };
                                broadcast_into(src, from, to, dst);
                                dst.as_ptr()
                            }
                        }
                    };
                    let (pa, pb) = (operand(a), operand(b));
                    // SAFETY: both operands and the output hold `batch * len` values (the
                    // output's shape); the output is a distinct buffer or scratch region.
                    let rc = unsafe {
                        self.engine.apply_two(
                            set.filters[*filter].ptr(),
                            *batch,
                            pa,
                            len,
                            pb,
                            len,
                            ptr[*output],
                            len,
                        )
                    };
                    if rc != 0 {
                        return Err(failed("the two-input filter", rc));
                    }
                }
                Exec::Alias => {
                    let (i, o) = (node.inputs[0], node.outputs[0]);
                    ptr[o] = ptr[i];
                }
                Exec::Copy { input, output, len } => {
                    // SAFETY: both hold `len` values (a reshape keeps the element count) and
                    // are distinct buffers.
                    unsafe { std::ptr::copy_nonoverlapping(ptr[*input], ptr[*output], *len) };
                }
                Exec::Concat {
                    parts,
                    outer,
                    output,
                } => {
                    let total: usize = parts.iter().map(|(_, n)| n).sum();
                    let mut at = 0;
                    for &(t, inner) in parts {
                        for o in 0..*outer {
                            // SAFETY: input `t` holds `outer * inner` values; the output holds
                            // `outer * total` and this writes its columns `at..at + inner` of
                            // row `o`; input and output are distinct buffers.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    ptr[t].add(o * inner),
                                    ptr[*output].add(o * total + at),
                                    inner,
                                )
                            };
                        }
                        at += inner;
                    }
                }
            }
        }
        Ok(())
    }
}

impl Prepared for Segment {
    fn run(&self, bufs: &mut Buffers<'_>) -> Result<()> {
        let idle = self.idle.lock().ok().and_then(|mut v| v.pop());
        let mut set = match idle {
            Some(s) => s,
            None => self.new_set()?,
        };
        let result = self.run_on(&mut set, bufs);
        if let Ok(mut v) = self.idle.lock() {
            if v.len() < MAX_IDLE_SETS {
                v.push(set);
            }
        }
        result
    }
}
