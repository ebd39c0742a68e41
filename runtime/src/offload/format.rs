//! Offloaded subgraph descriptions (`docs/subgraph-format.md`, format `mote.subgraph` version 1):
//! parsing and validation into typed Rust.
//!
//! A description is untrusted input (it comes from a model file). [`Graph::parse`] checks
//! everything a backend relies on: indices in range, every tensor defined before it is read and
//! produced once, operand counts and dtypes, and every output shape against shape inference. A
//! graph that parsed can be run without further checks on its structure.

use std::collections::HashSet;

use serde_json::Value as Json;

use crate::dtype::DType;
use crate::error::{Error, Result};

/// The format version this runtime reads.
pub const FORMAT_VERSION: i64 = 1;

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

/// A fused activation, in real units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    None,
    Relu,
    Relu6,
    Clip(f32, f32),
}

impl Activation {
    /// The clamp bounds it applies.
    pub fn bounds(self) -> (f32, f32) {
        match self {
            Activation::None => (f32::NEG_INFINITY, f32::INFINITY),
            Activation::Relu => (0.0, f32::INFINITY),
            Activation::Relu6 => (0.0, 6.0),
            Activation::Clip(lo, hi) => (lo, hi),
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
    match v {
        Json::Null => Ok(Activation::None),
        Json::String(s) => match s.as_str() {
            "none" => Ok(Activation::None),
            "relu" => Ok(Activation::Relu),
            "relu6" => Ok(Activation::Relu6),
            other => Err(format!("unknown activation `{other}`")),
        },
        Json::Object(o) => {
            let clip = o
                .get("clip")
                .and_then(Json::as_array)
                .filter(|a| a.len() == 2)
                .ok_or_else(|| format!("activation {v}: expected {{\"clip\": [lo, hi]}}"))?;
            let lo = finite_f32(&clip[0], "clip bound")?;
            let hi = finite_f32(&clip[1], "clip bound")?;
            if lo > hi {
                return Err(format!("activation clip [{lo}, {hi}] is empty"));
            }
            Ok(Activation::Clip(lo, hi))
        }
        other => Err(format!(
            "activation {other} is neither a name nor {{\"clip\": [lo, hi]}}"
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

    fn from_json(j: &Json, context: &str) -> Result<Graph> {
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
        if version != FORMAT_VERSION {
            return Err(err(
                context,
                None,
                format!(
                    "description version {version} is not supported (this runtime reads version {FORMAT_VERSION})"
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
            for &t in &ins {
                if !defined[t] {
                    return Err(en(format!(
                        "reads tensor {t} before any node produces it (nodes must be in execution order, without cycles)"
                    )));
                }
            }
            if outs.len() != 1 {
                return Err(en(format!(
                    "has {} outputs; every op of version 1 has exactly one",
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
            let op = check_node(op_name, attrs, &ins, &outs, &tensors).map_err(en)?;
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
            Ok(Op::Dense {
                activation: activation(attrs)?,
            })
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
        other => Err(format!(
            "unknown op `{other}` (format version {FORMAT_VERSION})"
        )),
    }
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
mod tests {
    use super::*;

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
}
