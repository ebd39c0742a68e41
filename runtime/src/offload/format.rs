//! Offloaded subgraph descriptions (`docs/subgraph-format.md`, format `mote.subgraph` versions 1
//! to 3): parsing and validation into typed Rust. A description with symbolic dimensions
//! (version 3) is parsed by [`super::symbolic`], which binds them and comes back here.
//!
//! A description is untrusted input (it comes from a model file). [`Graph::parse`] checks
//! everything a backend relies on: indices in range, every tensor defined before it is read and
//! produced once, operand counts and dtypes, and every output shape against shape inference. A
//! graph that parsed can be run without further checks on its structure.

use std::collections::HashSet;

use serde_json::Value as Json;

pub use super::symbolic::Symbolic;
use crate::dtype::DType;
use crate::error::{Error, Result};

/// The highest format version this runtime reads (it reads every version from 1 up to it).
pub const FORMAT_VERSION: i64 = 3;

/// The lowest format version this runtime reads.
pub const MIN_FORMAT_VERSION: i64 = 1;

/// Largest rank of a `transpose` (format version 2).
pub const MAX_TRANSPOSE_RANK: usize = 6;

/// Highest tensor rank accepted (the plug-in ABI carries at most this many dims).
pub const MAX_RANK: usize = 8;

/// Quantization parameters: `real = scale * (q - zero_point)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quant {
    /// One entry (per tensor) or one per channel along `axis`.
    pub scale: Vec<f32>,
    /// As many entries as `scale`, or one shared by all channels.
    pub zero_point: Vec<i32>,
    /// The channel axis (normalized) when per channel.
    pub axis: Option<usize>,
}

impl Quant {
    /// Whether one scale covers the whole tensor.
    pub fn per_tensor(&self) -> bool {
        self.scale.len() == 1
    }
    /// Scale of channel `c` (or the only scale).
    pub fn scale_at(&self, c: usize) -> f32 {
        if self.scale.len() == 1 {
            self.scale[0]
        } else {
            self.scale.get(c).copied().unwrap_or(1.0)
        }
    }
    /// Zero point of channel `c` (or the only one).
    pub fn zero_point_at(&self, c: usize) -> i32 {
        if self.zero_point.len() == 1 {
            self.zero_point[0]
        } else {
            self.zero_point.get(c).copied().unwrap_or(0)
        }
    }
}

/// One tensor of a region.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorDesc {
    pub shape: Vec<i64>,
    pub dtype: DType,
    pub quant: Option<Quant>,
}

impl TensorDesc {
    pub fn num_elements(&self) -> usize {
        self.shape.iter().map(|&d| d as usize).product()
    }
    pub fn byte_len(&self) -> usize {
        self.num_elements() * self.dtype.size_bytes()
    }
    /// int8/uint8.
    pub fn is_quantized_8bit(&self) -> bool {
        self.dtype == DType::I8 || self.dtype == DType::U8
    }
}

/// Layout of a 4-D op (weights follow it: OHWI with NHWC, OIHW with NCHW).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    Nhwc,
    Nchw,
}

impl Layout {
    /// `(n, c, h, w)` of a 4-D data shape.
    pub fn nchw(self, s: &[i64]) -> (i64, i64, i64, i64) {
        match self {
            Layout::Nhwc => (s[0], s[3], s[1], s[2]),
            Layout::Nchw => (s[0], s[1], s[2], s[3]),
        }
    }
    /// A data shape from `(n, c, h, w)`.
    pub fn shape(self, n: i64, c: i64, h: i64, w: i64) -> Vec<i64> {
        match self {
            Layout::Nhwc => vec![n, h, w, c],
            Layout::Nchw => vec![n, c, h, w],
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Layout::Nhwc => "NHWC",
            Layout::Nchw => "NCHW",
        }
    }
}

/// A fused activation, in real units. The first four are format version 1's (clamps); the
/// others came with version 2 and apply to float32 only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    None,
    Relu,
    Relu6,
    Clip(f32, f32),
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    Tanh,
    /// `x * min(max(x + 3, 0), 6) / 6`.
    Hardswish,
    /// `min(max(alpha * x + beta, 0), 1)`: `(alpha, beta)`.
    Hardsigmoid(f32, f32),
    /// `x * sigmoid(x)`.
    Silu,
    /// `0.5 * x * (1 + erf(x / sqrt(2)))`.
    Gelu,
    /// `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
    GeluTanh,
    /// `x` if `x >= 0`, else `alpha * x`.
    LeakyRelu(f32),
}

impl Activation {
    /// Whether it is a clamp (`None`, `Relu`, `Relu6`, `Clip`: the activations of version 1,
    /// the only ones quantized ops take).
    pub fn is_clamp(self) -> bool {
        matches!(
            self,
            Activation::None | Activation::Relu | Activation::Relu6 | Activation::Clip(..)
        )
    }

    /// The clamp bounds it applies; unbounded for the activations that are not clamps (check
    /// [`Activation::is_clamp`] first).
    pub fn bounds(self) -> (f32, f32) {
        match self {
            Activation::Relu => (0.0, f32::INFINITY),
            Activation::Relu6 => (0.0, 6.0),
            Activation::Clip(lo, hi) => (lo, hi),
            _ => (f32::NEG_INFINITY, f32::INFINITY),
        }
    }

    /// Its spelling in the format (without parameters).
    pub fn name(self) -> &'static str {
        match self {
            Activation::None => "none",
            Activation::Relu => "relu",
            Activation::Relu6 => "relu6",
            Activation::Clip(..) => "clip",
            Activation::Sigmoid => "sigmoid",
            Activation::Tanh => "tanh",
            Activation::Hardswish => "hardswish",
            Activation::Hardsigmoid(..) => "hardsigmoid",
            Activation::Silu => "silu",
            Activation::Gelu => "gelu",
            Activation::GeluTanh => "gelu_tanh",
            Activation::LeakyRelu(_) => "leaky_relu",
        }
    }

    /// Its value in the format.
    pub fn to_json(self) -> Json {
        use serde_json::json;
        match self {
            Activation::Clip(lo, hi) => json!({"clip": [lo, hi]}),
            Activation::Hardsigmoid(a, b) => json!({"hardsigmoid": [a, b]}),
            Activation::LeakyRelu(a) => json!({ "leaky_relu": a }),
            a => json!(a.name()),
        }
    }

    /// The format version that introduced it.
    pub fn version(self) -> i64 {
        if self.is_clamp() {
            1
        } else {
            2
        }
    }
}

/// conv2d attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conv2d {
    pub layout: Layout,
    pub strides: [usize; 2],
    /// `[top, left, bottom, right]`.
    pub padding: [usize; 4],
    pub dilation: [usize; 2],
    pub groups: usize,
    pub activation: Activation,
}

/// max/avg pool attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pool2d {
    pub layout: Layout,
    pub pool_size: [usize; 2],
    pub strides: [usize; 2],
    pub padding: [usize; 4],
    pub dilation: [usize; 2],
    pub ceil_mode: bool,
    pub count_include_pad: bool,
}

/// An op of format version 1 with its typed attributes.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Conv2d(Conv2d),
    MaxPool2d(Pool2d),
    AvgPool2d(Pool2d),
    GlobalMaxPool2d(Layout),
    GlobalAvgPool2d(Layout),
    Dense {
        activation: Activation,
    },
    Matmul,
    Add {
        activation: Activation,
    },
    Multiply {
        activation: Activation,
    },
    Relu,
    Relu6,
    Clip {
        min: f32,
        max: f32,
    },
    /// Axis normalized to `0..rank`.
    Softmax {
        axis: usize,
    },
    Reshape,
    /// Axis normalized to `0..rank`.
    Concatenate {
        axis: usize,
    },
    // ---- format version 2 ----
    /// An activation on its own (float32).
    Activation(Activation),
    Subtract {
        activation: Activation,
    },
    Divide {
        activation: Activation,
    },
    /// `y = x * scale[c] + shift[c]`, `c` the index along `axis` (normalized to `0..rank`).
    ScaleShift {
        axis: usize,
        activation: Activation,
    },
    /// ONNX LRN across channels.
    Lrn(Lrn),
    /// `np.transpose(x, axes)`: output dim `i` is input dim `axes[i]`.
    Transpose {
        axes: Vec<usize>,
    },
    /// ShuffleNet's channel shuffle: output channel `j * groups + i` is input channel
    /// `i * (C / groups) + j`.
    ChannelShuffle {
        layout: Layout,
        groups: usize,
    },
    /// Consecutive pieces along `axis` (normalized), one per output.
    Split {
        axis: usize,
    },
    /// Normalization over the last axis (`axis` is always `rank - 1`).
    LayerNorm {
        axis: usize,
        epsilon: f32,
    },
}

/// `lrn` attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lrn {
    pub layout: Layout,
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub bias: f32,
}

impl Op {
    /// The op's name in the format.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Conv2d(_) => "conv2d",
            Op::MaxPool2d(_) => "max_pool2d",
            Op::AvgPool2d(_) => "avg_pool2d",
            Op::GlobalMaxPool2d(_) => "global_max_pool2d",
            Op::GlobalAvgPool2d(_) => "global_avg_pool2d",
            Op::Dense { .. } => "dense",
            Op::Matmul => "matmul",
            Op::Add { .. } => "add",
            Op::Multiply { .. } => "multiply",
            Op::Relu => "relu",
            Op::Relu6 => "relu6",
            Op::Clip { .. } => "clip",
            Op::Softmax { .. } => "softmax",
            Op::Reshape => "reshape",
            Op::Concatenate { .. } => "concatenate",
            Op::Activation(_) => "activation",
            Op::Subtract { .. } => "subtract",
            Op::Divide { .. } => "divide",
            Op::ScaleShift { .. } => "scale_shift",
            Op::Lrn(_) => "lrn",
            Op::Transpose { .. } => "transpose",
            Op::ChannelShuffle { .. } => "channel_shuffle",
            Op::Split { .. } => "split",
            Op::LayerNorm { .. } => "layer_norm",
        }
    }

    /// The op's `attrs` object in the format.
    pub fn attrs_json(&self) -> Json {
        use serde_json::json;
        let window = |l: Layout, s: [usize; 2], p: [usize; 4], d: [usize; 2]| json!({"layout": l.name(), "strides": s, "padding": p, "dilation": d});
        match self {
            Op::Conv2d(c) => {
                let mut a = window(c.layout, c.strides, c.padding, c.dilation);
                a["groups"] = json!(c.groups);
                a["activation"] = c.activation.to_json();
                a
            }
            Op::MaxPool2d(p) | Op::AvgPool2d(p) => {
                let mut a = window(p.layout, p.strides, p.padding, p.dilation);
                a["pool_size"] = json!(p.pool_size);
                a["ceil_mode"] = json!(p.ceil_mode);
                a["count_include_pad"] = json!(p.count_include_pad);
                a
            }
            Op::GlobalMaxPool2d(l) | Op::GlobalAvgPool2d(l) => json!({"layout": l.name()}),
            Op::Dense { activation }
            | Op::Add { activation }
            | Op::Multiply { activation }
            | Op::Subtract { activation }
            | Op::Divide { activation }
            | Op::Activation(activation) => json!({"activation": activation.to_json()}),
            Op::Matmul | Op::Relu | Op::Relu6 | Op::Reshape => json!({}),
            Op::Clip { min, max } => json!({"min": min, "max": max}),
            Op::Softmax { axis } | Op::Concatenate { axis } | Op::Split { axis } => {
                json!({"axis": axis})
            }
            Op::ScaleShift { axis, activation } => {
                json!({"axis": axis, "activation": activation.to_json()})
            }
            Op::Lrn(l) => json!({"layout": l.layout.name(), "size": l.size, "alpha": l.alpha,
                                 "beta": l.beta, "bias": l.bias}),
            Op::Transpose { axes } => json!({ "axes": axes }),
            Op::ChannelShuffle { layout, groups } => {
                json!({"layout": layout.name(), "groups": groups})
            }
            Op::LayerNorm { axis, epsilon } => json!({"axis": axis, "epsilon": epsilon}),
        }
    }

    /// The format version that introduced the op.
    pub fn version(&self) -> i64 {
        match self {
            Op::Activation(_)
            | Op::Subtract { .. }
            | Op::Divide { .. }
            | Op::ScaleShift { .. }
            | Op::Lrn(_)
            | Op::Transpose { .. }
            | Op::ChannelShuffle { .. }
            | Op::Split { .. }
            | Op::LayerNorm { .. } => 2,
            _ => 1,
        }
    }

    /// Its activation, fused or (for the `activation` op) its whole function.
    pub fn activation(&self) -> Option<Activation> {
        match self {
            Op::Conv2d(c) => Some(c.activation),
            Op::Dense { activation }
            | Op::Add { activation }
            | Op::Multiply { activation }
            | Op::Subtract { activation }
            | Op::Divide { activation }
            | Op::ScaleShift { activation, .. } => Some(*activation),
            Op::Activation(a) => Some(*a),
            _ => None,
        }
    }
}

/// One node: an op reading and writing tensors by index.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
}

/// The ops format version 2 introduced.
pub const V2_OPS: &[&str] = &[
    "activation",
    "subtract",
    "divide",
    "scale_shift",
    "lrn",
    "transpose",
    "channel_shuffle",
    "split",
    "layer_norm",
];

/// A validated subgraph description.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    pub version: i64,
    /// The partitioner that produced it (a preference hint).
    pub target: String,
    pub name: String,
    pub tensors: Vec<TensorDesc>,
    pub inputs: Vec<usize>,
    pub constants: Vec<usize>,
    pub outputs: Vec<usize>,
    pub nodes: Vec<Node>,
}

/// What a tensor is in a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Input(usize),
    Constant(usize),
    /// Produced by a node (possibly also a region output).
    Produced,
}

type Res<T> = std::result::Result<T, String>;

fn err(graph: &str, node: Option<&str>, message: impl Into<String>) -> Error {
    Error::Subgraph {
        subgraph: graph.to_string(),
        node: node.map(str::to_string),
        message: message.into(),
    }
}

fn as_index(v: &Json, what: &str, n: usize) -> Res<usize> {
    let i = v
        .as_u64()
        .ok_or_else(|| format!("{what}: {v} is not a tensor index"))?;
    usize::try_from(i).ok().filter(|&i| i < n).ok_or_else(|| {
        format!("{what}: tensor index {i} out of range (the region has {n} tensors)")
    })
}

fn index_list(v: Option<&Json>, what: &str, n: usize) -> Res<Vec<usize>> {
    let arr = v
        .and_then(Json::as_array)
        .ok_or_else(|| format!("`{what}` must be an array of tensor indices"))?;
    arr.iter().map(|x| as_index(x, what, n)).collect()
}

fn int_list<const N: usize>(
    attrs: &Json,
    key: &str,
    default: Option<[usize; N]>,
) -> Res<[usize; N]> {
    let Some(v) = attrs.get(key) else {
        return default.ok_or_else(|| format!("attribute `{key}` is missing"));
    };
    let arr = v
        .as_array()
        .filter(|a| a.len() == N)
        .ok_or_else(|| format!("attribute `{key}` must be a list of {N} integers, got {v}"))?;
    let mut out = [0usize; N];
    for (o, x) in out.iter_mut().zip(arr) {
        *o = x
            .as_u64()
            .and_then(|u| usize::try_from(u).ok())
            .filter(|&u| u <= 1 << 20)
            .ok_or_else(|| format!("attribute `{key}`: {x} is not a small non-negative integer"))?;
    }
    Ok(out)
}

fn positive<const N: usize>(a: [usize; N], key: &str) -> Res<[usize; N]> {
    if a.contains(&0) {
        return Err(format!("attribute `{key}` must be positive, got {a:?}"));
    }
    Ok(a)
}

fn layout(attrs: &Json) -> Res<Layout> {
    match attrs.get("layout").and_then(Json::as_str) {
        Some("NHWC") => Ok(Layout::Nhwc),
        Some("NCHW") => Ok(Layout::Nchw),
        Some(other) => Err(format!("layout `{other}` (expected NHWC or NCHW)")),
        None => Err("attribute `layout` is missing".into()),
    }
}

fn finite_f32(v: &Json, what: &str) -> Res<f32> {
    v.as_f64()
        .map(|f| f as f32)
        .filter(|f| !f.is_nan())
        .ok_or_else(|| format!("{what}: {v} is not a number"))
}

fn activation(attrs: &Json) -> Res<Activation> {
    let Some(v) = attrs.get("activation") else {
        return Ok(Activation::None);
    };
    parse_activation(v)
}

/// One activation value: a name, or a one-key object carrying the parameters.
fn parse_activation(v: &Json) -> Res<Activation> {
    match v {
        Json::Null => Ok(Activation::None),
        Json::String(s) => match s.as_str() {
            "none" => Ok(Activation::None),
            "relu" => Ok(Activation::Relu),
            "relu6" => Ok(Activation::Relu6),
            "sigmoid" => Ok(Activation::Sigmoid),
            "tanh" => Ok(Activation::Tanh),
            "hardswish" => Ok(Activation::Hardswish),
            "silu" => Ok(Activation::Silu),
            "gelu" => Ok(Activation::Gelu),
            "gelu_tanh" => Ok(Activation::GeluTanh),
            "clip" | "hardsigmoid" | "leaky_relu" => Err(format!(
                "activation `{s}` needs its parameters ({{\"{s}\": ...}})"
            )),
            other => Err(format!("unknown activation `{other}`")),
        },
        Json::Object(o) if o.len() == 1 => {
            let (key, val) = o.iter().next().ok_or("empty activation object")?;
            let pair = |what: &str| -> Res<(f32, f32)> {
                let a = val
                    .as_array()
                    .filter(|a| a.len() == 2)
                    .ok_or_else(|| format!("activation {v}: expected {{\"{what}\": [a, b]}}"))?;
                Ok((
                    finite_f32(&a[0], &format!("{what} parameter"))?,
                    finite_f32(&a[1], &format!("{what} parameter"))?,
                ))
            };
            match key.as_str() {
                "clip" => {
                    let (lo, hi) = pair("clip")?;
                    if lo > hi {
                        return Err(format!("activation clip [{lo}, {hi}] is empty"));
                    }
                    Ok(Activation::Clip(lo, hi))
                }
                "hardsigmoid" => {
                    let (alpha, beta) = pair("hardsigmoid")?;
                    if !alpha.is_finite() || !beta.is_finite() {
                        return Err(format!("hardsigmoid [{alpha}, {beta}] is not finite"));
                    }
                    Ok(Activation::Hardsigmoid(alpha, beta))
                }
                "leaky_relu" => {
                    let alpha = finite_f32(val, "leaky_relu alpha")?;
                    if !alpha.is_finite() {
                        return Err(format!("leaky_relu alpha {alpha} is not finite"));
                    }
                    Ok(Activation::LeakyRelu(alpha))
                }
                other => Err(format!("unknown activation `{other}` in {v}")),
            }
        }
        other => Err(format!(
            "activation {other} is neither a name nor a one-key object such as {{\"clip\": [lo, hi]}}"
        )),
    }
}

fn axis_attr(attrs: &Json, rank: usize, default: Option<i64>) -> Res<usize> {
    let a = match attrs.get("axis") {
        Some(v) => v
            .as_i64()
            .ok_or_else(|| format!("attribute `axis`: {v} is not an integer"))?,
        None => default.ok_or("attribute `axis` is missing")?,
    };
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(format!("axis {a} out of range for rank {rank}"));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

fn parse_dtype(v: Option<&Json>) -> Res<DType> {
    match v.and_then(Json::as_str) {
        Some("float32") => Ok(DType::F32),
        Some("float16") => Ok(DType::F16),
        Some("int32") => Ok(DType::I32),
        Some("int8") => Ok(DType::I8),
        Some("uint8") => Ok(DType::U8),
        Some(other) => Err(format!(
            "dtype `{other}` (expected float32, float16, int32, int8 or uint8)"
        )),
        None => Err("`dtype` is missing".into()),
    }
}

fn parse_quant(v: &Json, shape: &[i64], dtype: DType) -> Res<Quant> {
    let scale = v
        .get("scale")
        .and_then(Json::as_array)
        .ok_or("quant.scale must be an array")?;
    let zp = v
        .get("zero_point")
        .and_then(Json::as_array)
        .ok_or("quant.zero_point must be an array")?;
    if scale.is_empty() {
        return Err("quant.scale is empty".into());
    }
    let scale = scale
        .iter()
        .map(|s| {
            finite_f32(s, "quant.scale").and_then(|f| {
                if f > 0.0 && f.is_finite() {
                    Ok(f)
                } else {
                    Err(format!("quant.scale {f} is not a positive finite number"))
                }
            })
        })
        .collect::<Res<Vec<f32>>>()?;
    let (lo, hi) = match dtype {
        DType::I8 => (-128, 127),
        DType::U8 => (0, 255),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        other => return Err(format!("a {other} tensor cannot be quantized")),
    };
    let zero_point = zp
        .iter()
        .map(|z| {
            z.as_i64()
                .filter(|z| (lo..=hi).contains(z))
                .map(|z| z as i32)
                .ok_or_else(|| format!("quant.zero_point {z} is not an integer in {lo}..={hi}"))
        })
        .collect::<Res<Vec<i32>>>()?;
    if zero_point.len() != scale.len() && zero_point.len() != 1 {
        return Err(format!(
            "quant has {} scales but {} zero points",
            scale.len(),
            zero_point.len()
        ));
    }
    let axis = if scale.len() > 1 || zero_point.len() > 1 {
        let a = v
            .get("axis")
            .and_then(Json::as_i64)
            .ok_or("per-channel quant needs an integer `axis`")?;
        let r = shape.len() as i64;
        if a < -r || a >= r {
            return Err(format!("quant.axis {a} out of range for rank {r}"));
        }
        let a = if a < 0 { a + r } else { a } as usize;
        if shape[a] as usize != scale.len() {
            return Err(format!(
                "per-channel quant has {} scales but dimension {a} is {}",
                scale.len(),
                shape[a]
            ));
        }
        Some(a)
    } else {
        None
    };
    Ok(Quant {
        scale,
        zero_point,
        axis,
    })
}

fn parse_tensor(v: &Json) -> Res<TensorDesc> {
    let shape = v
        .get("shape")
        .and_then(Json::as_array)
        .ok_or("`shape` must be an array")?;
    if shape.len() > MAX_RANK {
        return Err(format!("rank {} exceeds {MAX_RANK}", shape.len()));
    }
    let shape = shape
        .iter()
        .map(|d| {
            d.as_i64()
                .filter(|&d| (0..=1 << 31).contains(&d))
                .ok_or_else(|| format!("dimension {d} is not a non-negative integer"))
        })
        .collect::<Res<Vec<i64>>>()?;
    let total = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
        .filter(|&n| n <= 1 << 34)
        .ok_or_else(|| format!("shape {shape:?} is too large"))?;
    let _ = total;
    let dtype = parse_dtype(v.get("dtype"))?;
    let quant = match v.get("quant") {
        None | Some(Json::Null) => None,
        Some(q) => Some(parse_quant(q, &shape, dtype)?),
    };
    Ok(TensorDesc {
        shape,
        dtype,
        quant,
    })
}

/// numpy broadcasting of two shapes.
pub fn broadcast_shapes(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    Some(out)
}

/// Output size of a sliding window (conv or pool) along one axis; `None` when it is empty.
pub fn window_out(
    input: i64,
    pad_before: usize,
    pad_after: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    ceil: bool,
) -> Option<i64> {
    let eff = dilation as i64 * (kernel as i64 - 1) + 1;
    let mut num = input + pad_before as i64 + pad_after as i64 - eff;
    if num < 0 {
        return None;
    }
    if ceil {
        num += stride as i64 - 1;
    }
    Some(num / stride as i64 + 1)
}

impl Graph {
    /// Parse and validate a description. `context` names the call site for error messages
    /// (used until the description's own `name` is known).
    /// As [`Graph::parse`], for a description that may have symbolic dimensions (version 3):
    /// the graph, bound to sample sizes when it has some, and the symbols each call binds
    /// ([`Symbolic::bind`], [`Symbolic::instantiate`]).
    pub fn parse_symbolic(text: &str, context: &str) -> Result<(Graph, Option<Symbolic>)> {
        super::symbolic::parse(text, context)
    }

    pub fn parse(text: &str, context: &str) -> Result<Graph> {
        let json: Json = serde_json::from_str(text).map_err(|e| {
            err(
                context,
                None,
                format!("the description is not valid JSON: {e}"),
            )
        })?;
        Self::from_json(&json, context)
    }

    pub(crate) fn from_json(j: &Json, context: &str) -> Result<Graph> {
        if !j.is_object() {
            return Err(err(context, None, "the description is not a JSON object"));
        }
        match j.get("format").and_then(Json::as_str) {
            Some("mote.subgraph") => {}
            Some(f) => {
                return Err(err(
                    context,
                    None,
                    format!("format is `{f}`, expected `mote.subgraph`"),
                ))
            }
            None => return Err(err(context, None, "`format` is missing")),
        }
        let version = j
            .get("version")
            .and_then(Json::as_i64)
            .ok_or_else(|| err(context, None, "`version` is missing or not an integer"))?;
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(err(
                context,
                None,
                format!(
                    "description version {version} is not supported (this runtime reads versions {MIN_FORMAT_VERSION} to {FORMAT_VERSION})"
                ),
            ));
        }
        let name = match j.get("name") {
            None | Some(Json::Null) => context.to_string(),
            Some(Json::String(s)) => s.clone(),
            Some(v) => return Err(err(context, None, format!("`name` {v} is not a string"))),
        };
        let gname = if name == context {
            name.clone()
        } else {
            format!("{name} ({context})")
        };
        let target = j
            .get("target")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string();
        let e0 = |m: String| err(&gname, None, m);
        let tensors = j
            .get("tensors")
            .and_then(Json::as_array)
            .ok_or_else(|| e0("`tensors` must be an array".into()))?
            .iter()
            .enumerate()
            .map(|(i, t)| parse_tensor(t).map_err(|m| e0(format!("tensor {i}: {m}"))))
            .collect::<Result<Vec<_>>>()?;
        let n = tensors.len();
        let inputs = index_list(j.get("inputs"), "inputs", n).map_err(e0)?;
        let constants = index_list(j.get("constants"), "constants", n).map_err(e0)?;
        let outputs = index_list(j.get("outputs"), "outputs", n).map_err(e0)?;
        if outputs.is_empty() {
            return Err(e0("the region has no outputs".into()));
        }
        // Which tensors are defined so far (inputs and constants from the start).
        let mut defined = vec![false; n];
        for &t in inputs.iter().chain(&constants) {
            if defined[t] {
                return Err(e0(format!(
                    "tensor {t} is listed twice among the inputs and constants"
                )));
            }
            defined[t] = true;
        }
        let mut seen_out = HashSet::new();
        for &t in &outputs {
            if defined[t] {
                return Err(e0(format!(
                    "output tensor {t} is also an input or constant; outputs must be produced by a node"
                )));
            }
            if !seen_out.insert(t) {
                return Err(e0(format!("output tensor {t} is listed twice")));
            }
        }
        let raw_nodes = j
            .get("nodes")
            .and_then(Json::as_array)
            .ok_or_else(|| e0("`nodes` must be an array".into()))?;
        if raw_nodes.is_empty() {
            return Err(e0("the region has no nodes".into()));
        }
        let mut names = HashSet::new();
        let mut nodes = Vec::with_capacity(raw_nodes.len());
        for (k, rn) in raw_nodes.iter().enumerate() {
            let nname = match rn.get("name").and_then(Json::as_str) {
                Some(s) if !s.is_empty() => s.to_string(),
                _ => format!("#{k}"),
            };
            let en = |m: String| err(&gname, Some(&nname), m);
            if !names.insert(nname.clone()) {
                return Err(en("the node name is not unique".into()));
            }
            let op_name = rn
                .get("op")
                .and_then(Json::as_str)
                .ok_or_else(|| en("`op` is missing".into()))?;
            let ins = index_list(rn.get("inputs"), "inputs", n).map_err(en)?;
            let outs = index_list(rn.get("outputs"), "outputs", n).map_err(en)?;
            for &t in ins.iter().chain(&outs) {
                zero_sized(t, &tensors[t]).map_err(en)?;
            }
            for &t in &ins {
                if !defined[t] {
                    return Err(en(format!(
                        "reads tensor {t} before any node produces it (nodes must be in execution order, without cycles)"
                    )));
                }
            }
            // `split` has one output per piece; every other op exactly one.
            if op_name == "split" {
                if outs.is_empty() {
                    return Err(en("split has no outputs; it needs at least one".into()));
                }
            } else if outs.len() != 1 {
                return Err(en(format!(
                    "has {} outputs; `{op_name}` has exactly one",
                    outs.len()
                )));
            }
            for &t in &outs {
                if defined[t] {
                    return Err(en(format!(
                        "writes tensor {t}, which is an input, a constant or produced by another node"
                    )));
                }
                defined[t] = true;
            }
            let empty = Json::Object(Default::default());
            let attrs = match rn.get("attrs") {
                None | Some(Json::Null) => &empty,
                Some(a) if a.is_object() => a,
                Some(a) => return Err(en(format!("`attrs` {a} is not an object"))),
            };
            if V2_OPS.contains(&op_name) && version < 2 {
                return Err(en(format!(
                    "op `{op_name}` needs subgraph format version 2; this description says version {version}"
                )));
            }
            let op = check_node(op_name, attrs, &ins, &outs, &tensors).map_err(en)?;
            if let Some(a) = op.activation().filter(|a| a.version() > version) {
                return Err(en(format!(
                    "activation `{}` needs subgraph format version {}; this description says version {version}",
                    a.name(),
                    a.version()
                )));
            }
            nodes.push(Node {
                name: nname,
                op,
                inputs: ins,
                outputs: outs,
            });
        }
        for &t in &outputs {
            if !defined[t] {
                return Err(e0(format!("output tensor {t} is never produced")));
            }
        }
        // Tensors no node touches (an unused input or constant) follow the same rule.
        for (t, d) in tensors.iter().enumerate() {
            zero_sized(t, d).map_err(e0)?;
        }
        if let Some(t) = defined.iter().position(|d| !d) {
            return Err(e0(format!(
                "tensor {t} is neither an input, a constant, nor produced by a node"
            )));
        }
        Ok(Graph {
            version,
            target,
            name,
            tensors,
            inputs,
            constants,
            outputs,
            nodes,
        })
    }

    /// The description as JSON, which [`Graph::parse`] reads back to an equal graph (a graph
    /// built in code is checked by parsing this).
    pub fn to_json(&self) -> Json {
        use serde_json::json;
        let tensors: Vec<Json> = self
            .tensors
            .iter()
            .map(|t| {
                let mut d = json!({"shape": t.shape, "dtype": t.dtype.to_string()});
                if let Some(q) = &t.quant {
                    d["quant"] = json!({"scale": q.scale, "zero_point": q.zero_point});
                    if let Some(a) = q.axis {
                        d["quant"]["axis"] = json!(a);
                    }
                }
                d
            })
            .collect();
        let nodes: Vec<Json> = self
            .nodes
            .iter()
            .map(|n| {
                json!({"op": n.op.name(), "name": n.name, "inputs": n.inputs,
                       "outputs": n.outputs, "attrs": n.op.attrs_json()})
            })
            .collect();
        json!({"format": "mote.subgraph", "version": self.version, "target": self.target,
               "name": self.name, "tensors": tensors, "inputs": self.inputs,
               "constants": self.constants, "outputs": self.outputs, "nodes": nodes})
    }

    /// What tensor `t` is.
    pub fn role(&self, t: usize) -> Role {
        if let Some(i) = self.inputs.iter().position(|&x| x == t) {
            Role::Input(i)
        } else if let Some(i) = self.constants.iter().position(|&x| x == t) {
            Role::Constant(i)
        } else {
            Role::Produced
        }
    }
}

/// No op of the format is defined on an empty tensor here: TVM's partitioners never offload
/// one, and several ops have no sound empty result (a K = 0 dense, the mean of an empty plane,
/// a softmax or layer_norm over an empty axis), so every zero-sized dimension is refused before
/// any kernel sees it (docs/subgraph-format.md, "Shapes").
fn zero_sized(t: usize, d: &TensorDesc) -> Res<()> {
    if let Some(i) = d.shape.iter().position(|&x| x == 0) {
        return Err(format!(
            "tensor {t} has shape {:?}: dimension {i} is 0, and zero-sized tensors are not supported",
            d.shape
        ));
    }
    Ok(())
}

fn dt_is(t: &TensorDesc, allowed: &[DType], what: &str) -> Res<()> {
    if allowed.contains(&t.dtype) {
        Ok(())
    } else {
        let names: Vec<String> = allowed.iter().map(|d| d.to_string()).collect();
        Err(format!(
            "{what} is {}, expected {}",
            t.dtype,
            names.join(" or ")
        ))
    }
}

fn need_quant<'a>(t: &'a TensorDesc, what: &str) -> Res<&'a Quant> {
    t.quant
        .as_ref()
        .ok_or_else(|| format!("{what} is {} but has no `quant`", t.dtype))
}

fn per_tensor_quant(t: &TensorDesc, what: &str) -> Res<()> {
    if t.is_quantized_8bit() {
        let q = need_quant(t, what)?;
        if !q.per_tensor() || q.zero_point.len() != 1 {
            return Err(format!("{what} must be quantized per tensor"));
        }
    }
    Ok(())
}

fn arity(ins: &[usize], lo: usize, hi: usize, op: &str) -> Res<()> {
    if ins.len() < lo || ins.len() > hi {
        let want = if lo == hi {
            format!("{lo}")
        } else {
            format!("{lo} to {hi}")
        };
        return Err(format!("{op} takes {want} inputs, got {}", ins.len()));
    }
    Ok(())
}

fn shape_is(out: &TensorDesc, want: &[i64]) -> Res<()> {
    if out.shape != want {
        return Err(format!(
            "output shape {:?} does not match the inferred shape {want:?}",
            out.shape
        ));
    }
    Ok(())
}

const FP: &[DType] = &[DType::F32, DType::F16];
const Q8: &[DType] = &[DType::I8, DType::U8];
const ANY: &[DType] = &[DType::F32, DType::F16, DType::I8, DType::U8, DType::I32];

/// Check a node's operands against its op; return the typed op.
fn check_node(op: &str, attrs: &Json, ins: &[usize], outs: &[usize], ts: &[TensorDesc]) -> Res<Op> {
    let out = &ts[outs[0]];
    let t = |k: usize| &ts[ins[k]];
    match op {
        "conv2d" => {
            arity(ins, 2, 3, op)?;
            let c = Conv2d {
                layout: layout(attrs)?,
                strides: positive(int_list(attrs, "strides", Some([1, 1]))?, "strides")?,
                padding: int_list(attrs, "padding", Some([0; 4]))?,
                dilation: positive(int_list(attrs, "dilation", Some([1, 1]))?, "dilation")?,
                groups: match attrs.get("groups") {
                    None => 1,
                    Some(g) => g
                        .as_u64()
                        .filter(|g| (1..=1 << 24).contains(g))
                        .ok_or_else(|| format!("groups {g} is not a positive integer"))?
                        as usize,
                },
                activation: activation(attrs)?,
            };
            let (d, w) = (t(0), t(1));
            if d.shape.len() != 4 || w.shape.len() != 4 || out.shape.len() != 4 {
                return Err("conv2d data, weight and output must be 4-D".into());
            }
            let (n, ci, h, wd) = c.layout.nchw(&d.shape);
            let (o, kh, kw, wi) = match c.layout {
                Layout::Nhwc => (w.shape[0], w.shape[1], w.shape[2], w.shape[3]),
                Layout::Nchw => (w.shape[0], w.shape[2], w.shape[3], w.shape[1]),
            };
            let g = c.groups as i64;
            if ci % g != 0 || o % g != 0 || wi * g != ci {
                return Err(format!(
                    "weight {:?} ({}) does not fit {ci} input channels in {g} groups",
                    w.shape,
                    if c.layout == Layout::Nhwc {
                        "OHWI"
                    } else {
                        "OIHW"
                    }
                ));
            }
            if kh == 0 || kw == 0 || o == 0 {
                return Err("the weight has an empty dimension".into());
            }
            let oh = window_out(
                h,
                c.padding[0],
                c.padding[2],
                kh as usize,
                c.strides[0],
                c.dilation[0],
                false,
            );
            let ow = window_out(
                wd,
                c.padding[1],
                c.padding[3],
                kw as usize,
                c.strides[1],
                c.dilation[1],
                false,
            );
            let (Some(oh), Some(ow)) = (oh, ow) else {
                return Err("the kernel is larger than the padded input".into());
            };
            shape_is(out, &c.layout.shape(n, o, oh, ow))?;
            if let Some(&b) = ins.get(2) {
                if ts[b].shape != [o] {
                    return Err(format!("bias shape {:?}, expected [{o}]", ts[b].shape));
                }
            }
            check_linear_dtypes(ins, ts, out, o as usize, "conv2d")?;
            act_for_dtype(c.activation, d.dtype, op)?;
            Ok(Op::Conv2d(c))
        }
        "max_pool2d" | "avg_pool2d" => {
            arity(ins, 1, 1, op)?;
            let p = Pool2d {
                layout: layout(attrs)?,
                pool_size: positive(int_list(attrs, "pool_size", None)?, "pool_size")?,
                strides: positive(int_list(attrs, "strides", Some([1, 1]))?, "strides")?,
                padding: int_list(attrs, "padding", Some([0; 4]))?,
                dilation: positive(int_list(attrs, "dilation", Some([1, 1]))?, "dilation")?,
                ceil_mode: attrs
                    .get("ceil_mode")
                    .and_then(Json::as_bool)
                    .unwrap_or(false),
                count_include_pad: attrs
                    .get("count_include_pad")
                    .and_then(Json::as_bool)
                    .unwrap_or(false),
            };
            let d = t(0);
            if d.shape.len() != 4 || out.shape.len() != 4 {
                return Err(format!("{op} data and output must be 4-D"));
            }
            dt_is(d, ANY, "data")?;
            if out.dtype != d.dtype {
                return Err(format!("output is {}, data is {}", out.dtype, d.dtype));
            }
            let (n, c, h, w) = p.layout.nchw(&d.shape);
            let dims = |ceil: bool| {
                let oh = window_out(
                    h,
                    p.padding[0],
                    p.padding[2],
                    p.pool_size[0],
                    p.strides[0],
                    p.dilation[0],
                    ceil,
                );
                let ow = window_out(
                    w,
                    p.padding[1],
                    p.padding[3],
                    p.pool_size[1],
                    p.strides[1],
                    p.dilation[1],
                    ceil,
                );
                oh.zip(ow)
            };
            let Some((oh, ow)) = dims(p.ceil_mode) else {
                return Err("the window is larger than the padded input".into());
            };
            let want = p.layout.shape(n, c, oh, ow);
            // With ceil_mode, frameworks differ on whether a last window that starts in the
            // bottom/right padding counts: accept either, the kernel follows the declared shape.
            let mut ok = out.shape == want;
            if !ok && p.ceil_mode {
                let fix = |o: i64, i: i64, pad: usize, s: usize| {
                    if o > 1 && (o - 1) * s as i64 >= i + pad as i64 {
                        o - 1
                    } else {
                        o
                    }
                };
                let alt = p.layout.shape(
                    n,
                    c,
                    fix(oh, h, p.padding[0], p.strides[0]),
                    fix(ow, w, p.padding[1], p.strides[1]),
                );
                ok = out.shape == alt;
            }
            if !ok {
                return Err(format!(
                    "output shape {:?} does not match the inferred shape {want:?}",
                    out.shape
                ));
            }
            if op == "max_pool2d" {
                Ok(Op::MaxPool2d(p))
            } else {
                Ok(Op::AvgPool2d(p))
            }
        }
        "global_max_pool2d" | "global_avg_pool2d" => {
            arity(ins, 1, 1, op)?;
            let l = layout(attrs)?;
            let d = t(0);
            if d.shape.len() != 4 {
                return Err(format!("{op} data must be 4-D"));
            }
            dt_is(d, ANY, "data")?;
            if out.dtype != d.dtype {
                return Err(format!("output is {}, data is {}", out.dtype, d.dtype));
            }
            let (n, c, _, _) = l.nchw(&d.shape);
            shape_is(out, &l.shape(n, c, 1, 1))?;
            if op == "global_max_pool2d" {
                Ok(Op::GlobalMaxPool2d(l))
            } else {
                Ok(Op::GlobalAvgPool2d(l))
            }
        }
        "dense" => {
            arity(ins, 2, 3, op)?;
            let (d, w) = (t(0), t(1));
            if d.shape.is_empty() || w.shape.len() != 2 {
                return Err("dense needs data [..., K] and weight [N, K]".into());
            }
            let k = d.shape[d.shape.len() - 1];
            if w.shape[1] != k {
                return Err(format!(
                    "weight {:?} does not match K = {k} of data {:?}",
                    w.shape, d.shape
                ));
            }
            let nn = w.shape[0];
            let mut want = d.shape.clone();
            if let Some(l) = want.last_mut() {
                *l = nn;
            }
            shape_is(out, &want)?;
            if let Some(&b) = ins.get(2) {
                if ts[b].shape != [nn] {
                    return Err(format!("bias shape {:?}, expected [{nn}]", ts[b].shape));
                }
            }
            check_linear_dtypes(ins, ts, out, nn as usize, "dense")?;
            let activation = activation(attrs)?;
            act_for_dtype(activation, d.dtype, op)?;
            Ok(Op::Dense { activation })
        }
        "matmul" => {
            arity(ins, 2, 2, op)?;
            let (a, b) = (t(0), t(1));
            if a.shape.len() < 2 || b.shape.len() < 2 {
                return Err("matmul operands must have rank >= 2".into());
            }
            dt_is(a, FP, "a")?;
            if b.dtype != a.dtype || out.dtype != a.dtype {
                return Err("matmul operands and output must share one float dtype".into());
            }
            let (ra, rb) = (a.shape.len(), b.shape.len());
            let (m, k) = (a.shape[ra - 2], a.shape[ra - 1]);
            let (k2, nn) = (b.shape[rb - 2], b.shape[rb - 1]);
            if k != k2 {
                return Err(format!(
                    "inner dimensions differ: {:?} x {:?}",
                    a.shape, b.shape
                ));
            }
            let mut want =
                broadcast_shapes(&a.shape[..ra - 2], &b.shape[..rb - 2]).ok_or_else(|| {
                    format!(
                        "batch dims of {:?} and {:?} do not broadcast",
                        a.shape, b.shape
                    )
                })?;
            want.push(m);
            want.push(nn);
            shape_is(out, &want)?;
            Ok(Op::Matmul)
        }
        "add" | "multiply" => {
            arity(ins, 2, 2, op)?;
            let (a, b) = (t(0), t(1));
            let want = broadcast_shapes(&a.shape, &b.shape)
                .ok_or_else(|| format!("{:?} and {:?} do not broadcast", a.shape, b.shape))?;
            shape_is(out, &want)?;
            let act = activation(attrs)?;
            if a.dtype.is_float() {
                dt_is(a, FP, "a")?;
                if b.dtype != a.dtype || out.dtype != a.dtype {
                    return Err(format!("{op} operands and output must share one dtype"));
                }
            } else {
                for (x, what) in [(a, "a"), (b, "b"), (out, "output")] {
                    dt_is(x, Q8, what)?;
                    per_tensor_quant(x, what)?;
                }
            }
            act_for_dtype(act, a.dtype, op)?;
            Ok(if op == "add" {
                Op::Add { activation: act }
            } else {
                Op::Multiply { activation: act }
            })
        }
        "relu" | "relu6" | "clip" => {
            arity(ins, 1, 1, op)?;
            let d = t(0);
            dt_is(d, &[DType::F32, DType::F16, DType::I8, DType::U8], "data")?;
            if out.shape != d.shape || out.dtype != d.dtype {
                return Err(format!("{op} output must have the data's shape and dtype"));
            }
            per_tensor_quant(d, "data")?;
            per_tensor_quant(out, "output")?;
            Ok(match op {
                "relu" => Op::Relu,
                "relu6" => Op::Relu6,
                _ => {
                    let min = finite_f32(attrs.get("min").unwrap_or(&Json::Null), "clip min")?;
                    let max = finite_f32(attrs.get("max").unwrap_or(&Json::Null), "clip max")?;
                    if min > max {
                        return Err(format!("clip [{min}, {max}] is empty"));
                    }
                    Op::Clip { min, max }
                }
            })
        }
        "softmax" => {
            arity(ins, 1, 1, op)?;
            let d = t(0);
            if d.shape.is_empty() {
                return Err("softmax of a scalar".into());
            }
            let axis = axis_attr(attrs, d.shape.len(), Some(-1))?;
            dt_is(d, &[DType::F32, DType::F16, DType::I8, DType::U8], "data")?;
            if out.shape != d.shape || out.dtype != d.dtype {
                return Err("softmax output must have the data's shape and dtype".into());
            }
            per_tensor_quant(d, "data")?;
            per_tensor_quant(out, "output")?;
            Ok(Op::Softmax { axis })
        }
        "reshape" => {
            arity(ins, 1, 1, op)?;
            let d = t(0);
            if out.dtype != d.dtype {
                return Err(format!("output is {}, data is {}", out.dtype, d.dtype));
            }
            if out.num_elements() != d.num_elements() {
                return Err(format!(
                    "cannot reshape {:?} ({} elements) to {:?} ({} elements)",
                    d.shape,
                    d.num_elements(),
                    out.shape,
                    out.num_elements()
                ));
            }
            Ok(Op::Reshape)
        }
        "concatenate" => {
            if ins.is_empty() {
                return Err("concatenate takes at least one input".into());
            }
            let first = t(0);
            if first.shape.is_empty() {
                return Err("concatenate of scalars".into());
            }
            let axis = axis_attr(attrs, first.shape.len(), None)?;
            let mut want = first.shape.clone();
            want[axis] = 0;
            for &i in ins {
                let x = &ts[i];
                if x.shape.len() != want.len()
                    || x.shape
                        .iter()
                        .enumerate()
                        .any(|(k, &d)| k != axis && d != want[k])
                {
                    return Err(format!(
                        "input {:?} does not match {:?} outside axis {axis}",
                        x.shape, first.shape
                    ));
                }
                if x.dtype != first.dtype && !(x.is_quantized_8bit() && first.is_quantized_8bit()) {
                    return Err("concatenate inputs differ in dtype".into());
                }
                per_tensor_quant(x, "input")?;
                want[axis] += x.shape[axis];
            }
            shape_is(out, &want)?;
            if out.dtype != first.dtype {
                return Err(format!(
                    "output is {}, inputs are {}",
                    out.dtype, first.dtype
                ));
            }
            per_tensor_quant(out, "output")?;
            Ok(Op::Concatenate { axis })
        }
        "activation" => {
            arity(ins, 1, 1, op)?;
            let d = t(0);
            f32_only(d, "data", op)?;
            same_as_data(out, d, op)?;
            let a = attrs
                .get("activation")
                .ok_or("attribute `activation` is missing")
                .map_err(String::from)
                .and_then(parse_activation)?;
            Ok(Op::Activation(a))
        }
        "subtract" | "divide" => {
            arity(ins, 2, 2, op)?;
            let (a, b) = (t(0), t(1));
            let want = broadcast_shapes(&a.shape, &b.shape)
                .ok_or_else(|| format!("{:?} and {:?} do not broadcast", a.shape, b.shape))?;
            shape_is(out, &want)?;
            f32_only(a, "a", op)?;
            f32_only(b, "b", op)?;
            f32_only(out, "output", op)?;
            let activation = activation(attrs)?;
            Ok(if op == "subtract" {
                Op::Subtract { activation }
            } else {
                Op::Divide { activation }
            })
        }
        "scale_shift" => {
            arity(ins, 3, 3, op)?;
            let d = t(0);
            if d.shape.is_empty() {
                return Err("scale_shift of a scalar".into());
            }
            let axis = axis_attr(attrs, d.shape.len(), None)?;
            let c = d.shape[axis];
            for (k, what) in [(1, "scale"), (2, "shift")] {
                f32_only(t(k), what, op)?;
                if t(k).shape != [c] {
                    return Err(format!(
                        "{what} shape {:?}, expected [{c}] (dimension {axis} of the data)",
                        t(k).shape
                    ));
                }
            }
            f32_only(d, "data", op)?;
            same_as_data(out, d, op)?;
            Ok(Op::ScaleShift {
                axis,
                activation: activation(attrs)?,
            })
        }
        "lrn" => {
            arity(ins, 1, 1, op)?;
            let d = t(0);
            if d.shape.len() != 4 {
                return Err(format!("lrn data must be 4-D, got {:?}", d.shape));
            }
            f32_only(d, "data", op)?;
            same_as_data(out, d, op)?;
            let size = attrs
                .get("size")
                .ok_or("attribute `size` is missing")?
                .as_u64()
                .filter(|&v| (1..=1 << 20).contains(&v))
                .ok_or_else(|| format!("lrn size {} is not an integer >= 1", attrs["size"]))?
                as usize;
            // ONNX's defaults for the omitted floats.
            let num = |key: &str, default: f32| -> Res<f32> {
                match attrs.get(key) {
                    None => Ok(default),
                    Some(v) => {
                        let f = finite_f32(v, &format!("lrn {key}"))?;
                        if f.is_finite() {
                            Ok(f)
                        } else {
                            Err(format!("lrn {key} {f} is not finite"))
                        }
                    }
                }
            };
            Ok(Op::Lrn(Lrn {
                layout: layout(attrs)?,
                size,
                alpha: num("alpha", 1e-4)?,
                beta: num("beta", 0.75)?,
                bias: num("bias", 1.0)?,
            }))
        }
        "transpose" => {
            arity(ins, 1, 1, op)?;
            let d = t(0);
            let rank = d.shape.len();
            if !(1..=MAX_TRANSPOSE_RANK).contains(&rank) {
                return Err(format!(
                    "transpose data has rank {rank}; ranks 1 to {MAX_TRANSPOSE_RANK} are supported"
                ));
            }
            let raw = attrs
                .get("axes")
                .ok_or("attribute `axes` is missing")?
                .as_array()
                .ok_or_else(|| format!("attribute `axes` {} is not a list", attrs["axes"]))?;
            let mut axes = Vec::with_capacity(raw.len());
            let mut seen = vec![false; rank];
            for a in raw {
                let i = a
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .filter(|&i| i < rank)
                    .ok_or_else(|| {
                        format!(
                            "axes {}: {a} is not an axis of a rank-{rank} tensor",
                            attrs["axes"]
                        )
                    })?;
                if std::mem::replace(&mut seen[i], true) {
                    return Err(format!("axes {} repeats axis {i}", attrs["axes"]));
                }
                axes.push(i);
            }
            if axes.len() != rank {
                return Err(format!(
                    "axes {} is not a permutation of 0..{rank}",
                    attrs["axes"]
                ));
            }
            let want: Vec<i64> = axes.iter().map(|&a| d.shape[a]).collect();
            shape_is(out, &want)?;
            same_dtype_quant(out, d)?;
            Ok(Op::Transpose { axes })
        }
        "channel_shuffle" => {
            arity(ins, 1, 1, op)?;
            let d = t(0);
            if d.shape.len() != 4 {
                return Err(format!(
                    "channel_shuffle data must be 4-D, got {:?}",
                    d.shape
                ));
            }
            let l = layout(attrs)?;
            let groups = attrs
                .get("groups")
                .ok_or("attribute `groups` is missing")?
                .as_u64()
                .filter(|&g| (1..=1 << 24).contains(&g))
                .ok_or_else(|| format!("groups {} is not a positive integer", attrs["groups"]))?
                as usize;
            let (_, c, _, _) = l.nchw(&d.shape);
            if c as usize % groups != 0 {
                return Err(format!("groups {groups} does not divide the {c} channels"));
            }
            shape_is(out, &d.shape)?;
            same_dtype_quant(out, d)?;
            Ok(Op::ChannelShuffle { layout: l, groups })
        }
        "split" => {
            arity(ins, 1, 1, op)?;
            let d = t(0);
            if d.shape.is_empty() {
                return Err("split of a scalar".into());
            }
            let axis = axis_attr(attrs, d.shape.len(), None)?;
            let mut total = 0i64;
            for (k, &o) in outs.iter().enumerate() {
                let y = &ts[o];
                if y.shape.len() != d.shape.len()
                    || y.shape
                        .iter()
                        .zip(&d.shape)
                        .enumerate()
                        .any(|(i, (a, b))| i != axis && a != b)
                {
                    return Err(format!(
                        "output {k} {:?} does not match the data {:?} outside axis {axis}",
                        y.shape, d.shape
                    ));
                }
                same_dtype_quant(y, d)?;
                total += y.shape[axis];
            }
            if total != d.shape[axis] {
                return Err(format!(
                    "the outputs' sizes along axis {axis} sum to {total}, the data has {}",
                    d.shape[axis]
                ));
            }
            Ok(Op::Split { axis })
        }
        "layer_norm" => {
            arity(ins, 3, 3, op)?;
            let d = t(0);
            if d.shape.is_empty() {
                return Err("layer_norm of a scalar".into());
            }
            let rank = d.shape.len();
            let axis = axis_attr(attrs, rank, Some(-1))?;
            if axis != rank - 1 {
                return Err(format!(
                    "layer_norm over axis {axis}: only the last axis ({}) is supported",
                    rank - 1
                ));
            }
            let dd = d.shape[axis];
            for (k, what) in [(1, "gamma"), (2, "beta")] {
                f32_only(t(k), what, op)?;
                if t(k).shape != [dd] {
                    return Err(format!("{what} shape {:?}, expected [{dd}]", t(k).shape));
                }
            }
            f32_only(d, "data", op)?;
            same_as_data(out, d, op)?;
            let epsilon = match attrs.get("epsilon") {
                None => 1e-5,
                Some(v) => finite_f32(v, "layer_norm epsilon")?,
            };
            if !(epsilon >= 0.0 && epsilon.is_finite()) {
                return Err(format!(
                    "layer_norm epsilon {epsilon} is not a finite number >= 0"
                ));
            }
            Ok(Op::LayerNorm { axis, epsilon })
        }
        other => Err(format!(
            "unknown op `{other}` (format version {FORMAT_VERSION})"
        )),
    }
}

/// A float32-only operand of a version-2 op.
fn f32_only(x: &TensorDesc, what: &str, op: &str) -> Res<()> {
    if x.dtype != DType::F32 {
        return Err(format!(
            "{op} {what} is {}; {op} takes float32 only",
            x.dtype
        ));
    }
    Ok(())
}

/// An elementwise op's output: the data's shape and dtype.
fn same_as_data(out: &TensorDesc, d: &TensorDesc, op: &str) -> Res<()> {
    if out.shape != d.shape || out.dtype != d.dtype {
        return Err(format!(
            "{op} output is {} {:?}, the data is {} {:?}",
            out.dtype, out.shape, d.dtype, d.shape
        ));
    }
    Ok(())
}

/// A data-movement op's output: the data's dtype and quantization (per tensor: a per-channel
/// quantization would not follow the moved channels).
fn same_dtype_quant(out: &TensorDesc, d: &TensorDesc) -> Res<()> {
    per_tensor_quant(d, "data")?;
    if out.dtype != d.dtype {
        return Err(format!("output is {}, data is {}", out.dtype, d.dtype));
    }
    if out.quant != d.quant {
        return Err("the output's quantization differs from the data's (this op moves values, it cannot requantize)".into());
    }
    Ok(())
}

/// The activations of version 2 are float32 only: quantized (and float16) ops take the clamps
/// of version 1.
fn act_for_dtype(act: Activation, dtype: DType, op: &str) -> Res<()> {
    if !act.is_clamp() && dtype != DType::F32 {
        let what = if dtype.is_float() { "" } else { "quantized " };
        return Err(format!(
            "activation `{}` on a {what}{dtype} {op}: it is float32 only; other ops take none, relu, relu6 or clip",
            act.name()
        ));
    }
    Ok(())
}

/// dtypes of conv2d/dense: all float, or quantized data/weight/output with an int32 bias.
fn check_linear_dtypes(
    ins: &[usize],
    ts: &[TensorDesc],
    out: &TensorDesc,
    channels: usize,
    op: &str,
) -> Res<()> {
    let (d, w) = (&ts[ins[0]], &ts[ins[1]]);
    let bias = ins.get(2).map(|&b| &ts[b]);
    if d.dtype.is_float() {
        dt_is(d, FP, "data")?;
        if w.dtype != d.dtype || out.dtype != d.dtype || bias.is_some_and(|b| b.dtype != d.dtype) {
            return Err(format!(
                "{op}: data, weight, bias and output must share one float dtype"
            ));
        }
        return Ok(());
    }
    dt_is(d, Q8, "data")?;
    dt_is(w, Q8, "weight")?;
    dt_is(out, Q8, "output")?;
    per_tensor_quant(d, "data")?;
    per_tensor_quant(out, "output")?;
    let wq = need_quant(w, "weight")?;
    if !wq.per_tensor() && (wq.axis != Some(0) || wq.scale.len() != channels) {
        return Err(
            "per-channel weight quantization must be along the output-channel axis 0".into(),
        );
    }
    if let Some(b) = bias {
        dt_is(b, &[DType::I32], "bias")?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A version-2 description using every op that version introduced (several tests start
    /// from it, here and in the cpu backend's).
    pub(crate) const V2_EXAMPLE: &str = r#"{"format":"mote.subgraph","version":2,"name":"v2",
          "tensors":[{"shape":[1,4,3,5],"dtype":"float32"},{"shape":[4],"dtype":"float32"},
            {"shape":[4],"dtype":"float32"},{"shape":[1,4,3,5],"dtype":"float32"},
            {"shape":[1,4,3,5],"dtype":"float32"},{"shape":[1,1,3,5],"dtype":"float32"},
            {"shape":[1,3,3,5],"dtype":"float32"},{"shape":[1,3,3,5],"dtype":"float32"},
            {"shape":[1,3,5,3],"dtype":"float32"},{"shape":[3],"dtype":"float32"},
            {"shape":[1,3,5,3],"dtype":"float32"},{"shape":[1,3,5,3],"dtype":"float32"},
            {"shape":[1,3,5,3],"dtype":"float32"}],
          "inputs":[0],"constants":[1,2,9],"outputs":[5,12],
          "nodes":[
            {"op":"scale_shift","name":"a","inputs":[0,1,2],"outputs":[3],
             "attrs":{"axis":1,"activation":{"hardsigmoid":[0.2,0.5]}}},
            {"op":"channel_shuffle","name":"b","inputs":[3],"outputs":[4],
             "attrs":{"layout":"NCHW","groups":2}},
            {"op":"split","name":"c","inputs":[4],"outputs":[5,6],"attrs":{"axis":-3}},
            {"op":"lrn","name":"d","inputs":[6],"outputs":[7],
             "attrs":{"layout":"NCHW","size":3,"alpha":0.01,"beta":0.75,"bias":1.0}},
            {"op":"transpose","name":"e","inputs":[7],"outputs":[8],"attrs":{"axes":[0,1,3,2]}},
            {"op":"layer_norm","name":"f","inputs":[8,9,9],"outputs":[10],
             "attrs":{"axis":-1,"epsilon":1e-5}},
            {"op":"divide","name":"g","inputs":[10,8],"outputs":[11],
             "attrs":{"activation":{"leaky_relu":0.1}}},
            {"op":"activation","name":"h","inputs":[11],"outputs":[12],
             "attrs":{"activation":"gelu_tanh"}}]}"#;

    /// `to_json` writes what `parse` reads back to the same graph, for every op and attribute
    /// kind (the version-2 example below, the doc example, quantized per-channel tensors).
    #[test]
    fn descriptions_round_trip_through_to_json() {
        let quantized = json!({"format": "mote.subgraph", "version": 1, "name": "q",
            "tensors": [
                {"shape": [1, 4, 4, 2], "dtype": "int8", "quant": {"scale": [0.5], "zero_point": [3]}},
                {"shape": [3, 1, 1, 2], "dtype": "int8",
                 "quant": {"scale": [0.1, 0.2, 0.3], "zero_point": [0], "axis": 0}},
                {"shape": [1, 4, 4, 3], "dtype": "int8", "quant": {"scale": [0.25], "zero_point": [-1]}},
                {"shape": [1, 2, 2, 3], "dtype": "int8", "quant": {"scale": [0.25], "zero_point": [-1]}},
                {"shape": [1, 2, 2, 3], "dtype": "int8", "quant": {"scale": [0.25], "zero_point": [-1]}}],
            "inputs": [0], "constants": [1], "outputs": [4],
            "nodes": [
                {"op": "conv2d", "name": "c", "inputs": [0, 1], "outputs": [2],
                 "attrs": {"layout": "NHWC", "groups": 1, "activation": {"clip": [-1.0, 2.5]}}},
                {"op": "avg_pool2d", "name": "p", "inputs": [2], "outputs": [3],
                 "attrs": {"layout": "NHWC", "pool_size": [3, 3], "strides": [2, 2],
                           "padding": [1, 1, 0, 0], "ceil_mode": true, "count_include_pad": true}},
                {"op": "clip", "name": "k", "inputs": [3], "outputs": [4],
                 "attrs": {"min": -0.5, "max": 0.75}}]})
        .to_string();
        let v2 = V2_EXAMPLE;
        let doc = r#"{"format":"mote.subgraph","version":1,"target":"acl","name":"mote_acl_0",
          "tensors":[{"shape":[1,16,16,3],"dtype":"float32"},{"shape":[8,3,3,3],"dtype":"float32"},
                     {"shape":[8],"dtype":"float32"},{"shape":[1,8,12,8],"dtype":"float32"},
                     {"shape":[1,1,1,8],"dtype":"float32"},{"shape":[1,8],"dtype":"float32"},
                     {"shape":[4,8],"dtype":"float32"},{"shape":[1,4],"dtype":"float32"},
                     {"shape":[1,4],"dtype":"float32"}],
          "inputs":[0],"constants":[1,2,6],"outputs":[8],
          "nodes":[{"op":"conv2d","name":"conv2d_0","inputs":[0,1,2],"outputs":[3],
            "attrs":{"layout":"NHWC","strides":[2,1],"padding":[1,0,1,2],"dilation":[1,3],
                     "groups":1,"activation":"relu6"}},
            {"op":"global_max_pool2d","name":"g","inputs":[3],"outputs":[4],"attrs":{"layout":"NHWC"}},
            {"op":"reshape","name":"r","inputs":[4],"outputs":[5]},
            {"op":"dense","name":"fc","inputs":[5,6],"outputs":[7],"attrs":{"activation":"relu"}},
            {"op":"softmax","name":"s","inputs":[7],"outputs":[8],"attrs":{"axis":-1}}]}"#;
        for text in [quantized.as_str(), v2, doc] {
            let g = Graph::parse(text, "t").unwrap();
            let again = Graph::parse(&g.to_json().to_string(), "t").unwrap();
            assert_eq!(g, again, "{}", g.to_json());
        }
    }

    #[test]
    fn parses_the_doc_example() {
        let text = r#"{"format":"mote.subgraph","version":1,"target":"acl","name":"mote_acl_0",
          "tensors":[{"shape":[1,16,16,3],"dtype":"float32"},{"shape":[8,3,3,3],"dtype":"float32"},
                     {"shape":[8],"dtype":"float32"},{"shape":[1,16,16,8],"dtype":"float32"}],
          "inputs":[0],"constants":[1,2],"outputs":[3],
          "nodes":[{"op":"conv2d","name":"conv2d_0","inputs":[0,1,2],"outputs":[3],
            "attrs":{"layout":"NHWC","strides":[1,1],"padding":[1,1,1,1],"dilation":[1,1],
                     "groups":1,"activation":"relu"}}]}"#;
        let g = Graph::parse(text, "test").unwrap();
        assert_eq!(g.nodes.len(), 1);
        assert!(matches!(g.nodes[0].op, Op::Conv2d(c) if c.activation == Activation::Relu));
    }

    use serde_json::json;

    /// A one-node description: `tensors` as (shape, dtype), tensor 0 the input, `consts` the
    /// constants, the node's outputs the region outputs.
    fn one(
        version: i64,
        op: &str,
        attrs: Json,
        tensors: &[(&[i64], &str)],
        ins: &[usize],
        outs: &[usize],
        consts: &[usize],
    ) -> String {
        let ts: Vec<Json> = tensors
            .iter()
            .map(|(s, d)| json!({"shape": s, "dtype": d}))
            .collect();
        json!({"format": "mote.subgraph", "version": version, "name": "g", "tensors": ts,
               "inputs": [0], "constants": consts, "outputs": outs,
               "nodes": [{"op": op, "name": "the_node", "inputs": ins, "outputs": outs,
                          "attrs": attrs}]})
        .to_string()
    }

    /// Parsing fails with a subgraph error naming the node and containing `needle`.
    fn refused(text: &str, needle: &str) {
        match Graph::parse(text, "t") {
            Err(Error::Subgraph { node, message, .. }) => {
                assert!(
                    message.contains(needle),
                    "message `{message}` lacks `{needle}`"
                );
                assert_eq!(node.as_deref(), Some("the_node"), "{message}");
            }
            other => panic!("expected a subgraph error with `{needle}`, got {other:?}"),
        }
    }

    fn op_of(text: &str) -> Op {
        match Graph::parse(text, "t") {
            Ok(g) => g.nodes[0].op.clone(),
            Err(e) => panic!("{e}"),
        }
    }

    const F: &str = "float32";

    fn unary(version: i64, op: &str, attrs: Json, x: &[i64], y: &[i64]) -> String {
        one(version, op, attrs, &[(x, F), (y, F)], &[0], &[1], &[])
    }

    #[test]
    fn every_new_activation_parses_with_its_parameters() {
        let cases = [
            (json!("sigmoid"), Activation::Sigmoid),
            (json!("tanh"), Activation::Tanh),
            (json!("hardswish"), Activation::Hardswish),
            (
                json!({"hardsigmoid": [0.2, 0.5]}),
                Activation::Hardsigmoid(0.2, 0.5),
            ),
            (json!("silu"), Activation::Silu),
            (json!("gelu"), Activation::Gelu),
            (json!("gelu_tanh"), Activation::GeluTanh),
            (json!({"leaky_relu": 0.01}), Activation::LeakyRelu(0.01)),
            (json!({"clip": [-1.0, 2.0]}), Activation::Clip(-1.0, 2.0)),
            (json!("relu6"), Activation::Relu6),
        ];
        for (spelling, want) in cases {
            let t = unary(
                2,
                "activation",
                json!({"activation": spelling}),
                &[2, 3],
                &[2, 3],
            );
            assert_eq!(op_of(&t), Op::Activation(want));
            // Fused on a binary op too.
            let t = one(
                2,
                "add",
                json!({"activation": spelling}),
                &[(&[2, 3], F), (&[3], F), (&[2, 3], F)],
                &[0, 1],
                &[2],
                &[1],
            );
            assert_eq!(op_of(&t), Op::Add { activation: want });
        }
    }

    #[test]
    fn malformed_activations_are_refused() {
        for (spelling, needle) in [
            (json!({"hardsigmoid": [0.2]}), "hardsigmoid"),
            (json!({"hardsigmoid": 0.2}), "hardsigmoid"),
            (json!({"leaky_relu": "x"}), "leaky_relu"),
            (json!({"leaky_relu": [0.1]}), "leaky_relu"),
            (json!("hardsigmoid"), "needs its parameters"),
            (json!("leaky_relu"), "needs its parameters"),
            (json!("swish"), "unknown activation `swish`"),
            (json!({"clip": [0, 1], "relu": 1}), "one-key"),
            (json!({"elu": 1.0}), "unknown activation `elu`"),
            (json!(3), "neither a name"),
        ] {
            refused(
                &unary(2, "activation", json!({"activation": spelling}), &[4], &[4]),
                needle,
            );
        }
        refused(
            &unary(2, "activation", json!({}), &[4], &[4]),
            "`activation` is missing",
        );
    }

    #[test]
    fn version_rule_names_the_op_or_activation_and_both_versions() {
        refused(
            &unary(
                1,
                "lrn",
                json!({"layout": "NCHW", "size": 3}),
                &[1, 4, 2, 2],
                &[1, 4, 2, 2],
            ),
            "op `lrn` needs subgraph format version 2; this description says version 1",
        );
        for op in ["subtract", "divide"] {
            refused(
                &one(
                    1,
                    op,
                    json!({}),
                    &[(&[3], F), (&[3], F), (&[3], F)],
                    &[0, 1],
                    &[2],
                    &[1],
                ),
                &format!("op `{op}` needs subgraph format version 2"),
            );
        }
        refused(
            &one(
                1,
                "conv2d",
                json!({"layout": "NHWC", "activation": "sigmoid"}),
                &[(&[1, 3, 3, 2], F), (&[4, 1, 1, 2], F), (&[1, 3, 3, 4], F)],
                &[0, 1],
                &[2],
                &[1],
            ),
            "activation `sigmoid` needs subgraph format version 2; this description says version 1",
        );
        refused(
            &one(
                1,
                "dense",
                json!({"activation": {"leaky_relu": 0.1}}),
                &[(&[2, 3], F), (&[4, 3], F), (&[2, 4], F)],
                &[0, 1],
                &[2],
                &[1],
            ),
            "activation `leaky_relu` needs subgraph format version 2",
        );
        // Version 1 content in a version 2 or 3 description is fine; versions 0 and 4 are refused.
        assert!(Graph::parse(&unary(3, "relu", json!({}), &[3], &[3]), "t").is_ok());
        assert!(Graph::parse(&unary(2, "relu", json!({}), &[3], &[3]), "t").is_ok());
        assert!(Graph::parse(&unary(1, "relu", json!({}), &[3], &[3]), "t").is_ok());
        for v in [0, 4] {
            let e = Graph::parse(&unary(v, "relu", json!({}), &[3], &[3]), "t")
                .expect_err("refused")
                .to_string();
            assert!(e.contains(&format!("version {v} is not supported")), "{e}");
        }
    }

    #[test]
    fn float_only_ops_refuse_other_dtypes_and_quantized_ops_keep_clamps() {
        let q = |s: &[i64]| json!({"shape": s, "dtype": "int8", "quant": {"scale": [0.1], "zero_point": [0]}});
        let text = |op: &str, attrs: Json, tensors: Vec<Json>, ins: &[usize], n: usize| {
            json!({"format": "mote.subgraph", "version": 2, "name": "g", "tensors": tensors,
                   "inputs": [0], "constants": (1..n).collect::<Vec<_>>(), "outputs": [n],
                   "nodes": [{"op": op, "name": "the_node", "inputs": ins, "outputs": [n],
                              "attrs": attrs}]})
            .to_string()
        };
        refused(
            &text(
                "activation",
                json!({"activation": "tanh"}),
                vec![q(&[4]), q(&[4])],
                &[0],
                1,
            ),
            "activation data is int8; activation takes float32 only",
        );
        refused(
            &text(
                "subtract",
                json!({}),
                vec![q(&[4]), q(&[4]), q(&[4])],
                &[0, 1],
                2,
            ),
            "takes float32 only",
        );
        refused(
            &unary(2, "activation", json!({"activation": "tanh"}), &[4], &[4])
                .replace("float32", "float16"),
            "float32 only",
        );
        // float16 add with gelu.
        refused(
            &one(
                2,
                "add",
                json!({"activation": "gelu"}),
                &[(&[4], "float16"), (&[4], "float16"), (&[4], "float16")],
                &[0, 1],
                &[2],
                &[1],
            ),
            "activation `gelu` on a float16 add: it is float32 only",
        );
        // Quantized add with sigmoid.
        refused(
            &text(
                "add",
                json!({"activation": "sigmoid"}),
                vec![q(&[4]), q(&[4]), q(&[4])],
                &[0, 1],
                2,
            ),
            "activation `sigmoid` on a quantized int8 add",
        );
        // Quantized conv2d with silu.
        let w = json!({"shape": [2, 1, 1, 3], "dtype": "int8",
                       "quant": {"scale": [0.1], "zero_point": [0]}});
        refused(
            &text(
                "conv2d",
                json!({"layout": "NHWC", "activation": "silu"}),
                vec![q(&[1, 2, 2, 3]), w, q(&[1, 2, 2, 2])],
                &[0, 1],
                2,
            ),
            "activation `silu` on a quantized int8 conv2d",
        );
    }

    #[test]
    fn scale_shift_checks() {
        let ok = one(
            2,
            "scale_shift",
            json!({"axis": -3}),
            &[(&[1, 4, 2, 2], F), (&[4], F), (&[4], F), (&[1, 4, 2, 2], F)],
            &[0, 1, 2],
            &[3],
            &[1, 2],
        );
        assert_eq!(
            op_of(&ok),
            Op::ScaleShift {
                axis: 1,
                activation: Activation::None
            }
        );
        refused(
            &one(
                2,
                "scale_shift",
                json!({"axis": 1}),
                &[(&[1, 4, 2, 2], F), (&[4], F), (&[1, 4, 2, 2], F)],
                &[0, 1],
                &[2],
                &[1],
            ),
            "scale_shift takes 3 inputs, got 2",
        );
        refused(
            &one(
                2,
                "scale_shift",
                json!({"axis": 3}),
                &[(&[1, 4, 2, 2], F), (&[4], F), (&[4], F), (&[1, 4, 2, 2], F)],
                &[0, 1, 2],
                &[3],
                &[1, 2],
            ),
            "scale shape [4], expected [2]",
        );
        refused(
            &one(
                2,
                "scale_shift",
                json!({"axis": 4}),
                &[(&[1, 4, 2, 2], F), (&[4], F), (&[4], F), (&[1, 4, 2, 2], F)],
                &[0, 1, 2],
                &[3],
                &[1, 2],
            ),
            "axis 4 out of range",
        );
        refused(
            &one(
                2,
                "scale_shift",
                json!({}),
                &[(&[1, 4, 2, 2], F), (&[4], F), (&[4], F), (&[1, 4, 2, 2], F)],
                &[0, 1, 2],
                &[3],
                &[1, 2],
            ),
            "attribute `axis` is missing",
        );
    }

    #[test]
    fn lrn_checks() {
        let s: &[i64] = &[1, 6, 3, 3];
        for size in [1, 2, 4, 5] {
            let t = unary(
                2,
                "lrn",
                json!({"layout": "NCHW", "size": size, "alpha": 1e-4,
                                           "beta": 0.75, "bias": 2.0}),
                s,
                s,
            );
            assert!(matches!(op_of(&t), Op::Lrn(l) if l.size == size && l.bias == 2.0));
        }
        refused(
            &unary(2, "lrn", json!({"layout": "NCHW", "size": 0}), s, s),
            "lrn size 0",
        );
        refused(
            &unary(2, "lrn", json!({"layout": "NCHW", "size": 2.5}), s, s),
            "lrn size",
        );
        refused(
            &unary(2, "lrn", json!({"layout": "NCHW"}), s, s),
            "`size` is missing",
        );
        refused(
            &unary(2, "lrn", json!({"size": 3}), s, s),
            "`layout` is missing",
        );
        refused(
            &unary(
                2,
                "lrn",
                json!({"layout": "NCHW", "size": 3}),
                &[6, 3, 3],
                &[6, 3, 3],
            ),
            "lrn data must be 4-D",
        );
        refused(
            &unary(
                2,
                "lrn",
                json!({"layout": "NCHW", "size": 3, "beta": "x"}),
                s,
                s,
            ),
            "lrn beta",
        );
        refused(
            &unary(
                2,
                "lrn",
                json!({"layout": "NCHW", "size": 3}),
                s,
                &[1, 6, 3, 2],
            ),
            "lrn output is float32 [1, 6, 3, 2]",
        );
    }

    #[test]
    fn transpose_checks() {
        let t = unary(
            2,
            "transpose",
            json!({"axes": [0, 2, 3, 1]}),
            &[1, 4, 5, 6],
            &[1, 5, 6, 4],
        );
        assert_eq!(
            op_of(&t),
            Op::Transpose {
                axes: vec![0, 2, 3, 1]
            }
        );
        let bad = |axes: Json, y: &[i64], needle: &str| {
            refused(
                &unary(2, "transpose", json!({"axes": axes}), &[1, 4, 5, 6], y),
                needle,
            )
        };
        bad(json!([0, 2, 2, 1]), &[1, 5, 5, 4], "repeats axis 2");
        bad(
            json!([0, 2, 4, 1]),
            &[1, 5, 6, 4],
            "is not an axis of a rank-4 tensor",
        );
        bad(json!([0, 2, 1]), &[1, 5, 4], "not a permutation of 0..4");
        bad(json!([0, -1, 2, 1]), &[1, 5, 6, 4], "is not an axis");
        bad(json!("0231"), &[1, 5, 6, 4], "is not a list");
        bad(
            json!([0, 2, 3, 1]),
            &[1, 4, 5, 6],
            "does not match the inferred shape [1, 5, 6, 4]",
        );
        refused(
            &unary(2, "transpose", json!({}), &[2, 3], &[3, 2]),
            "`axes` is missing",
        );
        refused(
            &unary(
                2,
                "transpose",
                json!({"axes": [0, 1, 2, 3, 4, 5, 6]}),
                &[1, 1, 1, 1, 1, 1, 1],
                &[1, 1, 1, 1, 1, 1, 1],
            ),
            "ranks 1 to 6",
        );
        // Moves int8 values, but cannot requantize.
        let qt = |zp: i64| {
            json!({"format": "mote.subgraph", "version": 2, "name": "g",
                   "tensors": [
                       {"shape": [2, 3], "dtype": "int8", "quant": {"scale": [0.5], "zero_point": [0]}},
                       {"shape": [3, 2], "dtype": "int8", "quant": {"scale": [0.5], "zero_point": [zp]}}],
                   "inputs": [0], "constants": [], "outputs": [1],
                   "nodes": [{"op": "transpose", "name": "the_node", "inputs": [0], "outputs": [1],
                              "attrs": {"axes": [1, 0]}}]})
            .to_string()
        };
        assert!(Graph::parse(&qt(0), "t").is_ok());
        refused(&qt(3), "cannot requantize");
        let mut pc: Json = serde_json::from_str(&qt(0)).expect("json");
        pc["tensors"][0]["quant"] = json!({"axis": 1, "scale": [0.5, 0.5, 0.5], "zero_point": [0]});
        refused(&pc.to_string(), "data must be quantized per tensor");
    }

    #[test]
    fn channel_shuffle_checks() {
        let s: &[i64] = &[1, 3, 3, 12];
        let t = unary(
            2,
            "channel_shuffle",
            json!({"layout": "NHWC", "groups": 4}),
            s,
            s,
        );
        assert_eq!(
            op_of(&t),
            Op::ChannelShuffle {
                layout: Layout::Nhwc,
                groups: 4
            }
        );
        refused(
            &unary(
                2,
                "channel_shuffle",
                json!({"layout": "NHWC", "groups": 5}),
                s,
                s,
            ),
            "groups 5 does not divide the 12 channels",
        );
        refused(
            &unary(
                2,
                "channel_shuffle",
                json!({"layout": "NCHW", "groups": 2}),
                s,
                s,
            ),
            "groups 2 does not divide the 3 channels",
        );
        refused(
            &unary(
                2,
                "channel_shuffle",
                json!({"layout": "NHWC", "groups": 0}),
                s,
                s,
            ),
            "groups 0 is not a positive integer",
        );
        refused(
            &unary(2, "channel_shuffle", json!({"layout": "NHWC"}), s, s),
            "`groups` is missing",
        );
        refused(
            &unary(
                2,
                "channel_shuffle",
                json!({"layout": "NHWC", "groups": 1}),
                &[3, 12],
                &[3, 12],
            ),
            "must be 4-D",
        );
    }

    #[test]
    fn split_checks() {
        let text = |axis: i64, outs: &[&[i64]]| {
            let mut ts: Vec<(&[i64], &str)> = vec![(&[2, 7, 3], F)];
            ts.extend(outs.iter().map(|s| (*s, F)));
            let o: Vec<usize> = (1..=outs.len()).collect();
            one(2, "split", json!({"axis": axis}), &ts, &[0], &o, &[])
        };
        let g = Graph::parse(&text(-2, &[&[2, 2, 3], &[2, 4, 3], &[2, 1, 3]]), "t").expect("ok");
        assert_eq!(g.nodes[0].op, Op::Split { axis: 1 });
        assert_eq!(g.nodes[0].outputs, [1, 2, 3]);
        assert!(Graph::parse(&text(0, &[&[2, 7, 3]]), "t").is_ok());
        refused(
            &text(1, &[&[2, 2, 3], &[2, 4, 3]]),
            "the outputs' sizes along axis 1 sum to 6, the data has 7",
        );
        refused(
            &text(1, &[&[2, 2, 3], &[2, 5, 2]]),
            "output 1 [2, 5, 2] does not match the data [2, 7, 3] outside axis 1",
        );
        refused(&text(3, &[&[2, 7, 3]]), "axis 3 out of range");
        // No outputs at all.
        let none = one(
            2,
            "split",
            json!({"axis": 0}),
            &[(&[2], F), (&[2], F)],
            &[0],
            &[],
            &[],
        );
        let e = Graph::parse(&none, "t").expect_err("refused").to_string();
        assert!(e.contains("no outputs"), "{e}");
        // Only split may have several outputs.
        refused(
            &one(
                2,
                "relu",
                json!({}),
                &[(&[2], F), (&[2], F), (&[2], F)],
                &[0],
                &[1, 2],
                &[],
            ),
            "has 2 outputs; `relu` has exactly one",
        );
    }

    #[test]
    fn layer_norm_checks() {
        let t = |axis: i64, g: &[i64]| {
            one(
                2,
                "layer_norm",
                json!({"axis": axis, "epsilon": 1e-5}),
                &[(&[2, 3, 8], F), (g, F), (g, F), (&[2, 3, 8], F)],
                &[0, 1, 2],
                &[3],
                &[1, 2],
            )
        };
        assert_eq!(
            op_of(&t(-1, &[8])),
            Op::LayerNorm {
                axis: 2,
                epsilon: 1e-5
            }
        );
        assert_eq!(
            op_of(&t(2, &[8])),
            Op::LayerNorm {
                axis: 2,
                epsilon: 1e-5
            }
        );
        refused(
            &t(1, &[3]),
            "layer_norm over axis 1: only the last axis (2) is supported",
        );
        refused(&t(-2, &[3]), "only the last axis");
        refused(&t(-1, &[3]), "gamma shape [3], expected [8]");
        refused(
            &one(
                2,
                "layer_norm",
                json!({"axis": -1, "epsilon": -1.0}),
                &[(&[2, 8], F), (&[8], F), (&[8], F), (&[2, 8], F)],
                &[0, 1, 2],
                &[3],
                &[1, 2],
            ),
            "epsilon -1 is not a finite number >= 0",
        );
        refused(
            &one(
                2,
                "layer_norm",
                json!({"axis": -1}),
                &[(&[2, 8], F), (&[8], F), (&[2, 8], F)],
                &[0, 1],
                &[2],
                &[1],
            ),
            "layer_norm takes 3 inputs, got 2",
        );
    }

    /// No version-2 description makes the parser panic: every truncation and 3,000 byte
    /// substitutions of one using every new op give a graph or a typed error.
    #[test]
    fn version_2_descriptions_never_panic_the_parser() {
        let text = V2_EXAMPLE;
        let g = Graph::parse(text, "t").expect("the seed parses");
        assert_eq!(g.nodes.len(), 8);
        for cut in 0..text.len() {
            let r = std::panic::catch_unwind(|| Graph::parse(&text[..cut], "t").is_ok());
            assert_eq!(r.ok(), Some(false), "truncation at {cut}");
        }
        let mut state = 12345u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet = b"0123456789-[]{},:\"ae.";
        for _ in 0..3000 {
            let mut b = text.as_bytes().to_vec();
            let i = next() as usize % b.len();
            b[i] = alphabet[next() as usize % alphabet.len()];
            let s = String::from_utf8_lossy(&b).into_owned();
            let r = std::panic::catch_unwind(|| Graph::parse(&s, "t").map(|_| ()));
            assert!(r.is_ok(), "panic on {s}");
        }
    }

    /// Every op refuses a tensor with a zero-sized dimension at parse time, naming the node and
    /// the tensor (issue 27: the kernels once panicked or answered wrongly on such shapes); a
    /// zero-sized tensor no node touches is refused naming the tensor.
    #[test]
    fn zero_sized_dimensions_are_refused_for_every_op() {
        let q = |zp: i64| json!({"scale": [0.5], "zero_point": [zp]});
        // (label, op, attrs, tensors, node inputs, constants, quantized tensors)
        type Case<'a> = (
            &'a str,
            &'a str,
            Json,
            Vec<(&'a [i64], &'a str)>,
            Vec<usize>,
            Vec<usize>,
            Vec<usize>,
        );
        let nhwc = json!({"layout": "NHWC"});
        let nchw = json!({"layout": "NCHW"});
        let (u8_, i8_) = ("uint8", "int8");
        let cases: Vec<Case> = vec![
            (
                "conv2d batch 0",
                "conv2d",
                nhwc.clone(),
                vec![(&[0, 4, 4, 2], F), (&[3, 1, 1, 2], F), (&[0, 4, 4, 3], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "conv2d NCHW batch 0",
                "conv2d",
                nchw.clone(),
                vec![(&[0, 2, 4, 4], F), (&[3, 2, 3, 3], F), (&[0, 3, 2, 2], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "conv2d 0 input channels",
                "conv2d",
                nhwc.clone(),
                vec![(&[1, 4, 4, 0], F), (&[3, 1, 1, 0], F), (&[1, 4, 4, 3], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "conv2d 0 output channels",
                "conv2d",
                nhwc.clone(),
                vec![(&[1, 4, 4, 2], F), (&[0, 1, 1, 2], F), (&[1, 4, 4, 0], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "conv2d height 0 inside padding",
                "conv2d",
                json!({"layout": "NHWC", "padding": [1, 0, 1, 0]}),
                vec![(&[1, 0, 4, 2], F), (&[3, 1, 1, 2], F), (&[1, 2, 4, 3], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "quantized conv2d 0 input channels",
                "conv2d",
                nhwc.clone(),
                vec![
                    (&[1, 4, 4, 0], u8_),
                    (&[3, 1, 1, 0], i8_),
                    (&[1, 4, 4, 3], u8_),
                ],
                vec![0, 1],
                vec![1],
                vec![0, 1, 2],
            ),
            (
                "quantized conv2d batch 0",
                "conv2d",
                nhwc.clone(),
                vec![
                    (&[0, 4, 4, 2], u8_),
                    (&[3, 3, 3, 2], i8_),
                    (&[0, 2, 2, 3], u8_),
                ],
                vec![0, 1],
                vec![1],
                vec![0, 1, 2],
            ),
            (
                "max_pool2d height 0 inside padding",
                "max_pool2d",
                json!({"layout": "NCHW", "pool_size": [1, 1], "padding": [1, 0, 1, 0]}),
                vec![(&[1, 2, 0, 3], F), (&[1, 2, 2, 3], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "avg_pool2d 0 channels",
                "avg_pool2d",
                json!({"layout": "NCHW", "pool_size": [1, 1]}),
                vec![(&[1, 0, 3, 3], F), (&[1, 0, 3, 3], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "global_avg_pool2d empty plane",
                "global_avg_pool2d",
                nchw.clone(),
                vec![(&[1, 2, 0, 0], F), (&[1, 2, 1, 1], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "global_max_pool2d batch 0",
                "global_max_pool2d",
                nhwc.clone(),
                vec![(&[0, 3, 3, 2], F), (&[0, 1, 1, 2], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "dense N = 0",
                "dense",
                json!({}),
                vec![(&[2, 4], F), (&[0, 4], F), (&[2, 0], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "dense K = 0",
                "dense",
                json!({}),
                vec![(&[2, 0], F), (&[3, 0], F), (&[2, 3], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "dense M = 0",
                "dense",
                json!({}),
                vec![(&[0, 4], F), (&[3, 4], F), (&[0, 3], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "quantized dense N = 0",
                "dense",
                json!({}),
                vec![(&[2, 4], u8_), (&[0, 4], i8_), (&[2, 0], u8_)],
                vec![0, 1],
                vec![1],
                vec![0, 1, 2],
            ),
            (
                "quantized dense K = 0",
                "dense",
                json!({}),
                vec![(&[2, 0], u8_), (&[3, 0], i8_), (&[2, 3], u8_)],
                vec![0, 1],
                vec![1],
                vec![0, 1, 2],
            ),
            (
                "matmul K = 0",
                "matmul",
                json!({}),
                vec![(&[2, 0], F), (&[0, 3], F), (&[2, 3], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "add",
                "add",
                json!({}),
                vec![(&[0, 3], F), (&[3], F), (&[0, 3], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "multiply broadcast against 0",
                "multiply",
                json!({}),
                vec![(&[2, 1], F), (&[0], F), (&[2, 0], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "quantized add",
                "add",
                json!({}),
                vec![(&[0, 3], u8_), (&[3], u8_), (&[0, 3], u8_)],
                vec![0, 1],
                vec![1],
                vec![0, 1, 2],
            ),
            (
                "relu",
                "relu",
                json!({}),
                vec![(&[0], F), (&[0], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "relu6",
                "relu6",
                json!({}),
                vec![(&[3, 0], F), (&[3, 0], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "clip",
                "clip",
                json!({"min": 0.0, "max": 1.0}),
                vec![(&[0, 2], F), (&[0, 2], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "softmax over an empty axis",
                "softmax",
                json!({"axis": -1}),
                vec![(&[2, 0], F), (&[2, 0], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "reshape",
                "reshape",
                json!({}),
                vec![(&[0, 2], F), (&[0], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "concatenate with an empty piece",
                "concatenate",
                json!({"axis": 1}),
                vec![(&[2, 0], F), (&[2, 3], F), (&[2, 3], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "activation",
                "activation",
                json!({"activation": "gelu"}),
                vec![(&[0, 5], F), (&[0, 5], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "subtract",
                "subtract",
                json!({}),
                vec![(&[4, 0], F), (&[1], F), (&[4, 0], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "divide",
                "divide",
                json!({}),
                vec![(&[4, 0], F), (&[4, 0], F), (&[4, 0], F)],
                vec![0, 1],
                vec![1],
                vec![],
            ),
            (
                "scale_shift 0 channels",
                "scale_shift",
                json!({"axis": 1}),
                vec![(&[1, 0, 2, 2], F), (&[0], F), (&[0], F), (&[1, 0, 2, 2], F)],
                vec![0, 1, 2],
                vec![1, 2],
                vec![],
            ),
            (
                "lrn 0 channels",
                "lrn",
                json!({"layout": "NCHW", "size": 3}),
                vec![(&[1, 0, 2, 2], F), (&[1, 0, 2, 2], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "transpose",
                "transpose",
                json!({"axes": [1, 0]}),
                vec![(&[0, 3], F), (&[3, 0], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "channel_shuffle 0 channels",
                "channel_shuffle",
                json!({"layout": "NCHW", "groups": 2}),
                vec![(&[1, 0, 2, 2], F), (&[1, 0, 2, 2], F)],
                vec![0],
                vec![],
                vec![],
            ),
            (
                "layer_norm D = 0",
                "layer_norm",
                json!({"axis": -1}),
                vec![(&[2, 0], F), (&[0], F), (&[0], F), (&[2, 0], F)],
                vec![0, 1, 2],
                vec![1, 2],
                vec![],
            ),
        ];
        let mut wrong = Vec::new();
        for (label, op, attrs, tensors, ins, consts, quant) in cases {
            let out = tensors.len() - 1;
            let text = one(2, op, attrs, &tensors, &ins, &[out], &consts);
            let mut j: Json = serde_json::from_str(&text).expect("json");
            for t in quant {
                // int32 quantization is not needed: no case has a bias.
                j["tensors"][t]["quant"] = q(if tensors[t].1 == u8_ { 128 } else { 0 });
            }
            match Graph::parse(&j.to_string(), "t") {
                Err(Error::Subgraph {
                    node: Some(node),
                    message,
                    ..
                }) if node == "the_node" && message.contains("zero-sized") => {}
                other => wrong.push(format!("{label}: {other:?}")),
            }
        }
        // split: one empty piece.
        let split = one(
            2,
            "split",
            json!({"axis": 1}),
            &[(&[2, 4], F), (&[2, 0], F), (&[2, 4], F)],
            &[0],
            &[1, 2],
            &[],
        );
        match Graph::parse(&split, "t") {
            Err(Error::Subgraph {
                node: Some(node),
                message,
                ..
            }) if node == "the_node" && message.contains("tensor 1") => {}
            other => wrong.push(format!("split with an empty piece: {other:?}")),
        }
        assert!(
            wrong.is_empty(),
            "accepted or refused otherwise:\n{}",
            wrong.join("\n")
        );
        // A zero-sized input no node reads: refused naming the tensor.
        let mut j: Json =
            serde_json::from_str(&unary(2, "relu", json!({}), &[2], &[2])).expect("json");
        j["tensors"]
            .as_array_mut()
            .expect("array")
            .push(json!({"shape": [3, 0], "dtype": F}));
        j["inputs"] = json!([0, 2]);
        match Graph::parse(&j.to_string(), "t") {
            Err(Error::Subgraph {
                node: None,
                message,
                ..
            }) => {
                assert!(
                    message.contains("tensor 2") && message.contains("zero-sized"),
                    "{message}"
                )
            }
            other => panic!("an unused empty input: {other:?}"),
        }
    }

    #[test]
    fn subtract_and_divide_broadcast_like_add() {
        for op in ["subtract", "divide"] {
            let t = one(
                2,
                op,
                json!({"activation": "gelu"}),
                &[(&[2, 1, 5], F), (&[3, 1], F), (&[2, 3, 5], F)],
                &[0, 1],
                &[2],
                &[1],
            );
            assert_eq!(op_of(&t).activation(), Some(Activation::Gelu));
            refused(
                &one(
                    2,
                    op,
                    json!({}),
                    &[(&[2, 4], F), (&[3], F), (&[2, 4], F)],
                    &[0, 1],
                    &[2],
                    &[1],
                ),
                "do not broadcast",
            );
            refused(
                &one(
                    2,
                    op,
                    json!({}),
                    &[(&[2, 4], F), (&[2, 4], F)],
                    &[0],
                    &[1],
                    &[],
                ),
                &format!("{op} takes 2 inputs, got 1"),
            );
        }
    }
}
