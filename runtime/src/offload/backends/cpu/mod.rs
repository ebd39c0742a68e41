//! The built-in CPU backend: runs every op of subgraph formats 1 and 2, on any machine.
//!
//! Convolutions go through im2col (skipped for 1x1 stride-1 convolutions, which are a plain
//! GEMM on the input) and the GEMM of `gemm.rs` (ISA chosen at run time, `isa.rs`); depthwise convolutions are direct loops over
//! the contiguous dimension; bias and activation are fused into one pass over the output.
//! Weights are repacked once at prepare time. Quantized conv2d/dense accumulate exactly
//! (`(q - zp)` products summed in `i32` by the 8-bit GEMM of `qgemm.rs`, or in f64, exact
//! below 2^53, where it does not apply) and requantize with TVM's rounding
//! (`round(x / scale)`, ties to even, then `+ zero_point` and clip). Other quantized and
//! float16 ops run as dequantize -> float32 op -> quantize, which is what TVM's QDQ graph does.

mod dw;
mod gemm;
mod isa;
mod kernels;
mod nhwc;
mod ops;
mod packed;
mod qgemm;
mod winograd;

#[doc(hidden)]
pub use gemm::bench_sgemm;
pub use isa::{isa, supported_isas};
#[doc(hidden)]
pub use kernels::{bench_conv, bench_qconv, bench_qlevels};
pub(crate) use nhwc::to_nhwc;
#[doc(hidden)]
pub use packed::BenchPacked;

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::offload::format::{Activation, Conv2d, Graph, Layout, Op, Role, TensorDesc};
use crate::offload::{Backend, Buffers, Constants, Prepared};
use crate::tensor::Tensor;

/// The built-in CPU backend (`"cpu"`).
pub struct CpuBackend;

/// What the registry holds under this name.
pub(crate) fn registered() -> Arc<dyn Backend> {
    Arc::new(CpuBackend)
}

pub(crate) fn backend_err(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: crate::offload::CPU.into(),
        message: message.into(),
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        crate::offload::CPU
    }

    fn available(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    fn supports(&self, _: &Graph, _: usize, _: Constants<'_>) -> std::result::Result<(), String> {
        Ok(())
    }

    fn prepare(
        &self,
        graph: &Arc<Graph>,
        nodes: Range<usize>,
        constants: Constants<'_>,
    ) -> Result<Box<dyn Prepared>> {
        // Node by node: each constant is got, turned into the step's own form and dropped
        // before the next node gets its own, so at most one copy of a weight read from the
        // model file is alive at a time (`Constants`).
        let mut steps = Vec::with_capacity(nodes.len());
        for k in nodes.clone() {
            steps.push(prepare_node(graph, k, constants)?);
        }
        let concats = in_place_concats(graph, nodes.start, &steps);
        let mut writes_into = vec![None; steps.len()];
        let mut concat_at = vec![None; steps.len()];
        for (i, c) in concats.iter().enumerate() {
            concat_at[c.node - nodes.start] = Some(i);
            for &(p, off) in &c.producers {
                writes_into[p - nodes.start] = Some((i, off));
            }
        }
        Ok(Box::new(CpuSegment {
            graph: graph.clone(),
            steps,
            concats,
            writes_into,
            concat_at,
        }))
    }
}

/// A weight (or any constant operand) in the form a kernel wants it, or read at run time.
enum Weight<T> {
    Packed(Vec<T>),
    Runtime,
}

/// A float convolution's weight, held once, in the form its kernels read.
enum ConvWeight {
    /// Constant, packed for [`kernels::ConvPlan::run`].
    Packed(Vec<f32>),
    /// Constant, packed for the own GEMM, one operand per group
    /// ([`kernels::ConvPlan::run_packed`]; the plans that take it, at levels that have it).
    Gemm(Vec<packed::PackedB>),
    /// A run-time input, packed on every call.
    Runtime,
}

/// Per-node prepared state.
enum Step {
    Conv {
        node: usize,
        plan: kernels::ConvPlan,
        weight: ConvWeight,
        bias: Option<Vec<f32>>,
    },
    QConv {
        node: usize,
        plan: kernels::ConvPlan,
        /// The constant weight for the 8-bit GEMM, one operand per group (the plans that take
        /// it); else `w32`, for the exact f32 path; else `weight`, for the exact f64 path.
        q: Option<Vec<qgemm::QPacked>>,
        /// The constant weight, centered and packed in float32, when every sum of products
        /// is exact in float32 ([`exact_in_f32`]: depthwise convolutions among others) and
        /// there is no 8-bit GEMM for it.
        w32: Option<Vec<f32>>,
        weight: Weight<f64>,
        requant: Requant,
    },
    Dense {
        node: usize,
        /// The constant weight, `[K, N]` row-major, for the column split; `None` when `gemm`
        /// holds it or the weight is read at run time.
        weight: Option<Arc<Vec<f32>>>,
        /// The constant weight packed for the own GEMM (always `Some` inside), at levels that
        /// have one, when the rows are enough to split it over the preparing session's
        /// threads. A session with another thread count runs the form that was kept. Both
        /// forms are the call site's (`Constants::shared`), shared by its preparations.
        gemm: Option<Arc<Option<packed::PackedB>>>,
        bias: Option<Vec<f32>>,
    },
    QDense {
        node: usize,
        /// The constant weight for the 8-bit GEMM (when `K` keeps its sums exact); else
        /// `weight`, for the exact f64 path.
        q: Option<qgemm::QPacked>,
        weight: Weight<f64>,
        requant: Requant,
    },
    /// Everything else: runs on float32 views of its operands.
    Generic { node: usize },
}

/// How a quantized conv/dense turns exact accumulators into output values: per output channel
/// `c`, `real = acc as f32 * acc_scale[c] + bias[c]` (a multiply then an add, never fused),
/// clamped to the activation's bounds, then TVM's quantize ([`quantize`]).
struct Requant {
    x_zero: f64,
    /// Output channels.
    channels: usize,
    /// Per output channel: `s_x * s_w[o]`; then [`LANES`] more, wrapping around (entry `i` is
    /// channel `i % channels`'s), so that any [`LANES`] consecutive values of the output
    /// from channel `c < channels` find their channels' entries at `c..c + LANES`.
    acc_scale: Vec<f32>,
    /// Per output channel: the bias in real units; wrapping around as `acc_scale`.
    bias: Vec<f32>,
    out_scale: f32,
    out_zero: i32,
    out_dtype: DType,
    /// The activation's clamp bounds (unbounded for the others, which it does not apply).
    lo: f32,
    hi: f32,
    /// The output dtype's range less the zero point, in steps of `out_scale`, as f32: see
    /// [`Requant::one`].
    q_lo: f32,
    q_hi: f32,
}

/// `1.5 * 2^23`: `q + ROUND` is `ROUND + q` rounded to an integer, ties to even (the sum's
/// unit in the last place is 1), for `|q| <= 2^22`.
const ROUND: f32 = 12_582_912.0;

/// The largest output zero point (in magnitude) [`Requant::one`] takes: its bounds `q_lo`,
/// `q_hi` stay well inside `ROUND`'s range and exact.
const MAX_OUT_ZERO: i32 = 1 << 20;

/// Values per fixed-size requantization block ([`Requant::block`]): the 8-bit GEMM's panel
/// width, one AVX-512 vector of f32.
const LANES: usize = qgemm::NR;

struct CpuSegment {
    graph: Arc<Graph>,
    steps: Vec<Step>,
    /// Concatenations some of whose inputs are written in place by their producers.
    concats: Vec<InPlaceConcat>,
    /// Per step: the concatenation (index into `concats`) it writes its output into, and at
    /// which channel.
    writes_into: Vec<Option<(usize, usize)>>,
    /// Per step: the concatenation (index into `concats`) it is.
    concat_at: Vec<Option<usize>>,
}

/// A concatenation along the last axis (NHWC channels) of float32 tensors, some of whose
/// inputs are written straight into its output by the convolutions that make them (packed
/// weight, an activation the GEMM's epilogue applies: the SqueezeNet fire module's two
/// expand convolutions, Inception's branches, ShuffleNet's strided units), at their channel
/// offset with the output's row stride; the concatenation then copies only the other inputs.
///
/// The executor's scratch arena gives the output a slot only from the concatenation on, so
/// the slot may still hold a tensor that the nodes between the first producer and the
/// concatenation read or write. Each run therefore checks, on the run's actual buffers, that
/// none of those tensors overlaps the output (`CpuSegment::in_place_ok`); where one does, that
/// run computes as described (producers into their own tensors, then the whole copy).
struct InPlaceConcat {
    /// The concatenation's node and output tensor.
    node: usize,
    out: usize,
    /// Floats per output row (the concatenated last axis).
    width: usize,
    /// Producer nodes writing in place, each with its channel offset.
    producers: Vec<(usize, usize)>,
    /// Inputs copied at the concatenation: tensor, channel offset, channels.
    rest: Vec<(usize, usize, usize)>,
    /// Tensors that must not overlap the output for the writes in place to be right: every
    /// tensor the nodes from the first producer to the concatenation read or write (but the
    /// ones written in place, which then are neither written nor read), and the copied inputs.
    watch: Vec<usize>,
}

/// The concatenations of the segment's nodes (`start..start + steps.len()`) that can take some
/// inputs in place (see [`InPlaceConcat`]).
fn in_place_concats(g: &Graph, start: usize, steps: &[Step]) -> Vec<InPlaceConcat> {
    let end = start + steps.len();
    let readers = |t: usize| g.nodes.iter().filter(|n| n.inputs.contains(&t)).count();
    let producer = |t: usize| (start..end).find(|&j| g.nodes[j].outputs.contains(&t));
    let mut out = Vec::new();
    for k in start..end {
        let node = &g.nodes[k];
        let Op::Concatenate { axis } = node.op else {
            continue;
        };
        let odesc = &g.tensors[node.outputs[0]];
        let rank = odesc.shape.len();
        if rank == 0
            || axis != rank - 1
            || odesc.dtype != DType::F32
            || node
                .inputs
                .iter()
                .any(|&t| g.tensors[t].dtype != DType::F32 || g.tensors[t].shape.len() != rank)
        {
            continue;
        }
        let width = odesc.shape[rank - 1].max(0) as usize;
        let (mut producers, mut rest, mut inside) = (Vec::new(), Vec::new(), Vec::new());
        let mut off = 0;
        for &t in &node.inputs {
            let chans = g.tensors[t].shape[rank - 1].max(0) as usize;
            let p = producer(t).filter(|&p| {
                let conv_ok = match (&steps[p - start], &g.nodes[p].op) {
                    (
                        Step::Conv {
                            plan,
                            weight: ConvWeight::Gemm(_),
                            ..
                        },
                        Op::Conv2d(c),
                    ) => {
                        plan.layout == Layout::Nhwc
                            && c.activation.is_clamp()
                            && g.nodes[p].outputs == [t]
                    }
                    _ => false,
                };
                conv_ok
                    && p < k
                    && node.inputs.iter().filter(|&&u| u == t).count() == 1
                    && readers(t) == 1
                    && !g.outputs.contains(&t)
                    && g.role(t) == Role::Produced
            });
            match p {
                Some(p) => {
                    producers.push((p, off));
                    inside.push(t);
                }
                None => rest.push((t, off, chans)),
            }
            off += chans;
        }
        let Some(first) = producers.iter().map(|&(p, _)| p).min() else {
            continue;
        };
        let mut watch: Vec<usize> = rest.iter().map(|r| r.0).collect();
        for n in &g.nodes[first..k] {
            for &t in n.inputs.iter().chain(&n.outputs) {
                if !inside.contains(&t)
                    && !matches!(g.role(t), Role::Constant(_))
                    && !watch.contains(&t)
                {
                    watch.push(t);
                }
            }
        }
        out.push(InPlaceConcat {
            node: k,
            out: node.outputs[0],
            width,
            producers,
            rest,
            watch,
        });
    }
    out
}

/// Tensor `t` when it is one of the region's constants.
fn constant_of(g: &Graph, t: usize, constants: Constants<'_>) -> Result<Option<Tensor>> {
    match g.role(t) {
        Role::Constant(i) => constants.get(i),
        _ => Ok(None),
    }
}

/// The weight (input 1) and the bias (input 2, with its tensor index) of node `k`, each
/// `Some` when constant.
#[allow(clippy::type_complexity)]
fn weight_and_bias(
    g: &Graph,
    k: usize,
    constants: Constants<'_>,
) -> Result<(Option<Tensor>, Option<(usize, Option<Tensor>)>)> {
    let node = &g.nodes[k];
    let wt = match node.inputs.get(1) {
        Some(&w) => constant_of(g, w, constants)?,
        None => None,
    };
    let bias = match node.inputs.get(2) {
        Some(&b) => Some((b, constant_of(g, b, constants)?)),
        None => None,
    };
    Ok((wt, bias))
}

fn conv_plan(g: &Graph, k: usize, c: &Conv2d) -> kernels::ConvPlan {
    let node = &g.nodes[k];
    let shape = |t: usize| g.tensors[t].shape.as_slice();
    kernels::ConvPlan::new(
        c,
        shape(node.inputs[0]),
        shape(node.inputs[1]),
        shape(node.outputs[0]),
    )
}

fn prepare_node(g: &Graph, k: usize, constants: Constants<'_>) -> Result<Step> {
    let node = &g.nodes[k];
    let data = &g.tensors[node.inputs[0]];
    match &node.op {
        Op::Conv2d(c) => {
            let plan = conv_plan(g, k, c);
            let (mut weight_tensor, bias_t) = weight_and_bias(g, k, constants)?;
            let wt = weight_tensor.as_ref();
            let bias_t = bias_t.as_ref().map(|(b, t)| (*b, t.as_ref()));
            if data.is_quantized_8bit() {
                let wdesc = &g.tensors[node.inputs[1]];
                let q = match (qgemm::level(), wt, &wdesc.quant) {
                    (Some(level), Some(t), Some(wq)) => {
                        plan.qpack(level, t.data(), wdesc.dtype == DType::U8, |o| {
                            wq.zero_point_at(o)
                        })
                    }
                    _ => None,
                };
                let w32 = match wt {
                    Some(t)
                        if q.is_none() && exact_in_f32(wdesc.num_elements() / plan.o.max(1)) =>
                    {
                        let w = centered_weight(wdesc, t.data(), 0)?;
                        Some(plan.pack(&w.iter().map(|&v| v as f32).collect::<Vec<f32>>()))
                    }
                    _ => None,
                };
                let weight = match wt {
                    // The 8-bit GEMM or the f32 path holds the weight: no f64 copy.
                    Some(_) if q.is_some() || w32.is_some() => Weight::Runtime,
                    Some(t) => Weight::Packed(plan.pack(&centered_weight(wdesc, t.data(), 0)?)),
                    None => Weight::Runtime,
                };
                let requant = match (bias_t, wt) {
                    (Some((_, None)), _) => return Ok(Step::Generic { node: k }),
                    (bias, _) => {
                        requant_for(g, k, plan.o, bias.and_then(|(b, t)| t.map(|t| (b, t))))?
                    }
                };
                return Ok(Step::QConv {
                    node: k,
                    plan,
                    q,
                    w32,
                    weight,
                    requant,
                });
            }
            // The weight as given goes once it is repacked: at most two forms of it at a time.
            let weight = match weight_tensor.take() {
                Some(t) => {
                    let w = plan.pack(&load_f32(t.data(), &g.tensors[node.inputs[1]])?);
                    drop(t);
                    match plan.pack_gemm(&w) {
                        Some(gemm) => ConvWeight::Gemm(gemm),
                        None => ConvWeight::Packed(w),
                    }
                }
                None => ConvWeight::Runtime,
            };
            let bias = match bias_t {
                Some((b, Some(t))) => Some(load_f32(t.data(), &g.tensors[b])?.into_owned()),
                Some((_, None)) => return Ok(Step::Generic { node: k }),
                None => None,
            };
            Ok(Step::Conv {
                node: k,
                plan,
                weight,
                bias,
            })
        }
        Op::Dense { .. } => {
            let wdesc = &g.tensors[node.inputs[1]];
            let (nn, kk) = (wdesc.shape[0] as usize, wdesc.shape[1] as usize);
            if !data.is_quantized_8bit() {
                return prepare_dense_f32(g, k, constants);
            }
            let (weight_tensor, bias_t) = weight_and_bias(g, k, constants)?;
            let wt = weight_tensor.as_ref();
            let bias_t = bias_t.as_ref().map(|(b, t)| (*b, t.as_ref()));
            if matches!(bias_t, Some((_, None))) {
                return Ok(Step::Generic { node: k });
            }
            let unsigned = wdesc.dtype == DType::U8;
            let q = match (qgemm::level(), wt, &wdesc.quant) {
                (Some(level), Some(t), Some(wq)) if t.data().len() == nn * kk => {
                    let w = t.data();
                    let zeros = (0..nn)
                        .map(|n| qgemm::zero_i8(wq.zero_point_at(n), unsigned))
                        .collect();
                    qgemm::QPacked::new(
                        level,
                        kk,
                        nn,
                        |k, n| qgemm::to_i8(w[n * kk + k], unsigned),
                        zeros,
                    )
                }
                _ => None,
            };
            let weight = match wt {
                Some(_) if q.is_some() => Weight::Runtime,
                Some(t) => Weight::Packed(transpose(&centered_weight(wdesc, t.data(), 0)?, nn, kk)),
                None => Weight::Runtime,
            };
            let requant = requant_for(g, k, nn, bias_t.and_then(|(b, t)| t.map(|t| (b, t))))?;
            Ok(Step::QDense {
                node: k,
                q,
                weight,
                requant,
            })
        }
        _ => Ok(Step::Generic { node: k }),
    }
}

/// A float32 dense: its constant weight in the one form this preparation runs (see
/// `Step::Dense` in `run`), shared with the site's other preparations (other lengths of a
/// symbolic dimension, other backend orders: `Constants::shared`), so a new length does not
/// read and pack the weight again.
fn prepare_dense_f32(g: &Graph, k: usize, constants: Constants<'_>) -> Result<Step> {
    let node = &g.nodes[k];
    let wdesc = &g.tensors[node.inputs[1]];
    let (nn, kk) = (wdesc.shape[0] as usize, wdesc.shape[1] as usize);
    let bias = match node.inputs.get(2) {
        Some(&b) => match constant_of(g, b, constants)? {
            Some(t) => Some(load_f32(t.data(), &g.tensors[b])?.into_owned()),
            // A bias computed at run time: the generic path adds it.
            None => return Ok(Step::Generic { node: k }),
        },
        None => None,
    };
    let Role::Constant(ci) = g.role(node.inputs[1]) else {
        return Ok(Step::Dense {
            node: k,
            weight: None,
            gemm: None,
            bias,
        });
    };
    // `[K, N]`: the weight as given goes once it is transposed, so at most two forms of it
    // are held at a time while preparing (a model's dense weights are often most of it).
    let transposed = || -> Result<Vec<f32>> {
        let t = constants.get(ci)?.ok_or_else(|| {
            backend_err(format!("node `{}`: constant {ci} is missing", node.name))
        })?;
        let w = transpose(&load_f32(t.data(), wdesc)?, nn, kk);
        drop(t);
        Ok(w)
    };
    // Packed for the GEMM when the rows are enough to split it over the preparing session's
    // threads; else (or at a level without the packed GEMM) transposed for the column split.
    let rows = g.tensors[node.inputs[0]].num_elements() / kk.max(1);
    if rows >= 4 * crate::host::threadpool::current_parallelism() {
        let gemm = constants.shared(ci, "dense.packed", || {
            Ok(packed::PackedB::new(
                isa::current(),
                &transposed()?,
                kk,
                nn,
                nn,
            ))
        })?;
        if gemm.is_some() {
            return Ok(Step::Dense {
                node: k,
                weight: None,
                gemm: Some(gemm),
                bias,
            });
        }
    }
    Ok(Step::Dense {
        node: k,
        weight: Some(constants.shared(ci, "dense.transposed", transposed)?),
        gemm: None,
        bias,
    })
}

fn requant_for(
    g: &Graph,
    k: usize,
    channels: usize,
    bias: Option<(usize, &Tensor)>,
) -> Result<Requant> {
    let node = &g.nodes[k];
    let (d, w, out) = (
        &g.tensors[node.inputs[0]],
        &g.tensors[node.inputs[1]],
        &g.tensors[node.outputs[0]],
    );
    let missing = || {
        backend_err(format!(
            "node `{}`: quantized operand without quant",
            node.name
        ))
    };
    let (dq, wq, oq) = (
        d.quant.as_ref().ok_or_else(missing)?,
        w.quant.as_ref().ok_or_else(missing)?,
        out.quant.as_ref().ok_or_else(missing)?,
    );
    let sx = dq.scale_at(0);
    let acc_scale: Vec<f32> = (0..channels).map(|o| sx * wq.scale_at(o)).collect();
    let bias = match bias {
        Some((b, t)) => {
            let bd = &g.tensors[b];
            let raw = load_i32(t.data())?;
            raw.iter()
                .enumerate()
                .map(|(o, &q)| {
                    let (s, z) = match &bd.quant {
                        Some(bq) => (bq.scale_at(o), bq.zero_point_at(o)),
                        None => (acc_scale[o], 0),
                    };
                    s * (q as f32 - z as f32)
                })
                .collect()
        }
        None => vec![0.0; channels],
    };
    let activation = match node.op {
        Op::Conv2d(c) => c.activation,
        Op::Dense { activation } => activation,
        _ => Activation::None,
    };
    Ok(Requant::new(
        dq.zero_point_at(0) as f64,
        acc_scale,
        bias,
        (oq.scale_at(0), oq.zero_point_at(0), out.dtype),
        activation,
    ))
}

/// Whether sums of `k` products of centered 8-bit values (each at most `255 * 255` in
/// magnitude) are exact in float32 whatever the order and fusing of the operations: every
/// partial sum is then an integer below 2^24.
fn exact_in_f32(k: usize) -> bool {
    k.saturating_mul(255 * 255) < 1 << 24
}

/// A quantized weight as `q - zero_point[channel]` in f64 (channel along `axis`, the output
/// channel axis 0 for conv2d and dense).
fn centered_weight(desc: &TensorDesc, bytes: &[u8], axis: usize) -> Result<Vec<f64>> {
    let q = desc
        .quant
        .as_ref()
        .ok_or_else(|| backend_err("quantized weight without quant"))?;
    let n = desc.num_elements();
    if bytes.len() != n {
        return Err(backend_err("weight size does not match its description"));
    }
    let outer: usize = desc.shape[..=axis].iter().map(|&d| d as usize).product();
    let inner = n / outer.max(1);
    let chans = desc.shape.get(axis).copied().unwrap_or(1).max(1) as usize;
    let mut out = Vec::with_capacity(n);
    for (i, &b) in bytes.iter().enumerate() {
        let c = (i / inner.max(1)) % chans;
        let v = if desc.dtype == DType::I8 {
            b as i8 as f64
        } else {
            b as f64
        };
        out.push(v - q.zero_point_at(c) as f64);
    }
    Ok(out)
}

fn transpose<T: Copy + Default>(w: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut t = vec![T::default(); rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = w[r * cols + c];
        }
    }
    t
}

fn load_i32(bytes: &[u8]) -> Result<Vec<i32>> {
    if bytes.len() % 4 != 0 {
        return Err(backend_err("int32 buffer of odd size"));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// A float32 view of a buffer: zero-copy for aligned float32, converted (dequantized for
/// int8/uint8 with `quant`) otherwise.
pub(crate) fn load_f32<'a>(bytes: &'a [u8], desc: &TensorDesc) -> Result<Cow<'a, [f32]>> {
    let n = desc.num_elements();
    if bytes.len() != n * desc.dtype.size_bytes() {
        return Err(backend_err(format!(
            "a {} buffer of {} bytes for shape {:?}",
            desc.dtype,
            bytes.len(),
            desc.shape
        )));
    }
    match desc.dtype {
        DType::F32 => {
            // SAFETY: every bit pattern is a valid f32; align_to only reinterprets the aligned
            // middle part.
            let (pre, mid, post) = unsafe { bytes.align_to::<f32>() };
            if pre.is_empty() && post.is_empty() {
                Ok(Cow::Borrowed(mid))
            } else {
                Ok(Cow::Owned(
                    bytes
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                ))
            }
        }
        DType::F16 => Ok(Cow::Owned(
            bytes
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
        )),
        DType::I32 | DType::I8 | DType::U8 => {
            let raw: Vec<f32> = match desc.dtype {
                DType::I32 => load_i32(bytes)?.into_iter().map(|v| v as f32).collect(),
                DType::I8 => bytes.iter().map(|&b| b as i8 as f32).collect(),
                _ => bytes.iter().map(|&b| b as f32).collect(),
            };
            Ok(Cow::Owned(match &desc.quant {
                None => raw,
                Some(q) => {
                    let inner: usize = match q.axis {
                        Some(a) => desc.shape[a + 1..].iter().map(|&d| d as usize).product(),
                        None => n.max(1),
                    };
                    let chans = q.scale.len().max(1);
                    raw.iter()
                        .enumerate()
                        .map(|(i, &v)| {
                            let c = if q.axis.is_some() {
                                (i / inner.max(1)) % chans
                            } else {
                                0
                            };
                            q.scale_at(c) * (v - q.zero_point_at(c) as f32)
                        })
                        .collect()
                }
            }))
        }
        other => Err(backend_err(format!("dtype {other} is not supported"))),
    }
}

/// TVM's quantize: `clip(round(x / scale) + zero_point)`, ties to even.
#[inline]
pub(crate) fn quantize(x: f32, scale: f32, zero: i32, dtype: DType) -> u8 {
    let (lo, hi) = if dtype == DType::I8 {
        (-128.0, 127.0)
    } else {
        (0.0, 255.0)
    };
    let v = ((x / scale).round_ties_even() + zero as f32).clamp(lo, hi);
    if dtype == DType::I8 {
        (v as i8) as u8
    } else {
        v as u8
    }
}

/// Write float32 values into a buffer of the descriptor's dtype (quantizing when needed).
pub(crate) fn store_f32(vals: &[f32], desc: &TensorDesc, out: &mut [u8]) -> Result<()> {
    let n = vals.len();
    if out.len() != n * desc.dtype.size_bytes() {
        return Err(backend_err(
            "output buffer size does not match its description",
        ));
    }
    match desc.dtype {
        DType::F32 => {
            for (o, v) in out.chunks_exact_mut(4).zip(vals) {
                o.copy_from_slice(&v.to_le_bytes());
            }
        }
        DType::F16 => {
            for (o, v) in out.chunks_exact_mut(2).zip(vals) {
                o.copy_from_slice(&half::f16::from_f32(*v).to_le_bytes());
            }
        }
        DType::I32 => {
            for (o, v) in out.chunks_exact_mut(4).zip(vals) {
                let q = match &desc.quant {
                    Some(q) => (v / q.scale_at(0)).round_ties_even() + q.zero_point_at(0) as f32,
                    None => v.round_ties_even(),
                };
                o.copy_from_slice(&(q as i32).to_le_bytes());
            }
        }
        DType::I8 | DType::U8 => {
            let (s, z) = desc
                .quant
                .as_ref()
                .map(|q| (q.scale_at(0), q.zero_point_at(0)))
                .unwrap_or((1.0, 0));
            for (o, &v) in out.iter_mut().zip(vals) {
                *o = quantize(v, s, z, desc.dtype);
            }
        }
        other => return Err(backend_err(format!("dtype {other} is not supported"))),
    }
    Ok(())
}

/// Run `f` on a float32 output buffer: in place when the output is aligned float32, else on a
/// temporary that is then converted.
fn with_out_f32(
    out: &mut [u8],
    desc: &TensorDesc,
    f: impl FnOnce(&mut [f32]) -> Result<()>,
) -> Result<()> {
    if desc.dtype == DType::F32 {
        // SAFETY: every bit pattern is a valid f32; only the aligned middle is reinterpreted.
        let (pre, mid, post) = unsafe { out.align_to_mut::<f32>() };
        if pre.is_empty() && post.is_empty() && mid.len() == desc.num_elements() {
            return f(mid);
        }
    }
    let mut tmp = vec![0f32; desc.num_elements()];
    f(&mut tmp)?;
    store_f32(&tmp, desc, out)
}

fn centered_input(bytes: &[u8], desc: &TensorDesc, zero: f64) -> Vec<f64> {
    if desc.dtype == DType::I8 {
        bytes.iter().map(|&b| b as i8 as f64 - zero).collect()
    } else {
        bytes.iter().map(|&b| b as f64 - zero).collect()
    }
}

impl Requant {
    fn new(
        x_zero: f64,
        acc_scale: Vec<f32>,
        bias: Vec<f32>,
        (out_scale, out_zero, out_dtype): (f32, i32, DType),
        activation: Activation,
    ) -> Requant {
        let (lo, hi) = activation.bounds();
        let (d_lo, d_hi) = if out_dtype == DType::I8 {
            (-128, 127)
        } else {
            (0, 255)
        };
        let channels = acc_scale.len().min(bias.len());
        let wrap = |v: &[f32]| -> Vec<f32> {
            (0..channels + LANES * (channels > 0) as usize)
                .map(|i| v[i % channels])
                .collect()
        };
        Requant {
            x_zero,
            channels,
            acc_scale: wrap(&acc_scale),
            bias: wrap(&bias),
            out_scale,
            out_zero,
            out_dtype,
            lo,
            hi,
            q_lo: (d_lo - out_zero.clamp(-MAX_OUT_ZERO, MAX_OUT_ZERO)) as f32,
            q_hi: (d_hi - out_zero.clamp(-MAX_OUT_ZERO, MAX_OUT_ZERO)) as f32,
        }
    }

    /// The output channels it has values for.
    fn channels(&self) -> usize {
        self.channels
    }

    /// One value of channel `c` (`scale`, `bias` its entries), exactly as [`quantize`] of
    /// `(a * scale + bias).clamp(lo, hi)` computes it, in operations that vectorize on every
    /// level (no call to `rintf`, no integer division): the quotient is clamped to the output
    /// range less the zero point first, which commutes with rounding to an integer (the bounds
    /// are integers), so that it then rounds exactly with [`ROUND`] and the zero point adds
    /// in integers. A NaN passes every clamp and becomes 0, as in [`quantize`].
    #[inline(always)]
    fn one(&self, a: f32, scale: f32, bias: f32) -> u8 {
        let real = a * scale + bias;
        // `f32::clamp`'s comparisons (which let a NaN through), without its check of the
        // bounds.
        let real = if real < self.lo { self.lo } else { real };
        let real = if real > self.hi { self.hi } else { real };
        let q = real / self.out_scale;
        let q = if q < self.q_lo { self.q_lo } else { q };
        let q = if q > self.q_hi { self.q_hi } else { q };
        // `q + ROUND` is `ROUND + round(q)`, exactly; the difference of their bits is
        // `round(q)` (the exponent is the same). Integer operations: no float-to-integer
        // conversion, whose saturating form does not vectorize well.
        let v = ((q + ROUND).to_bits() as i32 - ROUND.to_bits() as i32) + self.out_zero;
        // A NaN becomes 0, as `NaN as i32` does in `quantize`.
        let v = if q.is_nan() { 0 } else { v };
        // `v` is in the dtype's range: its low byte is the value (two's complement for int8).
        v as u8
    }

    /// [`LANES`] consecutive values of the output whose first is of channel `c0 < channels`
    /// (the rest of the following channels, wrapping around to channel 0): a fixed-size loop,
    /// whole vectors. Inline into a caller compiled for the chosen level (`isa::run_as`).
    #[inline(always)]
    fn block<A: Copy>(
        &self,
        acc: &[A; LANES],
        to_f32: impl Fn(A) -> f32,
        c0: usize,
        out: &mut [u8; LANES],
    ) {
        let scale: &[f32; LANES] = (&self.acc_scale[c0..c0 + LANES]).try_into().expect("lanes");
        let bias: &[f32; LANES] = (&self.bias[c0..c0 + LANES]).try_into().expect("lanes");
        if self.out_zero.abs() > MAX_OUT_ZERO {
            for j in 0..LANES {
                let real = (to_f32(acc[j]) * scale[j] + bias[j]).clamp(self.lo, self.hi);
                out[j] = quantize(real, self.out_scale, self.out_zero, self.out_dtype);
            }
            return;
        }
        for j in 0..LANES {
            out[j] = self.one(to_f32(acc[j]), scale[j], bias[j]);
        }
    }

    /// Consecutive values of the output from one of channel `c0 < channels` on (the
    /// following channels, wrapping around to channel 0), at most [`LANES`] of them, or of
    /// channels `c0..c0 + acc.len() <= channels`. Inline into a caller compiled for the chosen
    /// level (`isa::run_as`).
    #[inline(always)]
    fn row<A: Copy>(&self, acc: &[A], to_f32: impl Fn(A) -> f32, c0: usize, out: &mut [u8]) {
        let n = acc.len();
        let (scale, bias) = (&self.acc_scale[c0..c0 + n], &self.bias[c0..c0 + n]);
        if self.out_zero.abs() > MAX_OUT_ZERO {
            for (((o, &a), &s), &b) in out.iter_mut().zip(acc).zip(scale).zip(bias) {
                let real = (to_f32(a) * s + b).clamp(self.lo, self.hi);
                *o = quantize(real, self.out_scale, self.out_zero, self.out_dtype);
            }
            return;
        }
        for (((o, &a), &s), &b) in out.iter_mut().zip(acc).zip(scale).zip(bias) {
            *o = self.one(to_f32(a), s, b);
        }
    }

    /// A whole output whose channel is the fastest-varying dimension (`channels` of them,
    /// `plane == 1`: NHWC, dense) or a plane of `plane` values each (NCHW), in pieces of whole
    /// rows or planes over the session's pool. `to_f32` rounds an exact accumulator to float32
    /// (the same value from an f64, f32 or i32 accumulator).
    fn apply<A: Copy + Sync>(
        &self,
        acc: &[A],
        to_f32: impl Fn(A) -> f32 + Copy + Sync,
        out: &mut [u8],
        channels: usize,
        plane: usize,
    ) -> Result<()> {
        if channels != self.channels || channels == 0 {
            return Err(backend_err(
                "requantization: channels do not match the operands",
            ));
        }
        let plane = plane.max(1);
        let unit = if plane == 1 { channels } else { plane };
        // About 16 KiB of output per piece.
        let per = (16384 / unit).max(1);
        let pieces: Vec<(usize, &[A], &mut [u8])> = acc
            .chunks(per * unit)
            .zip(out.chunks_mut(per * unit))
            .enumerate()
            .map(|(i, (a, o))| (i * per, a, o))
            .collect();
        kernels::for_each_piece(pieces, |(u0, acc, out)| {
            isa::vectorized(
                #[inline(always)]
                || {
                    if plane == 1 {
                        // Blocks of `LANES` values across rows (a piece starts at a row),
                        // then the rest.
                        let mut c = 0;
                        let blocks = acc.chunks_exact(LANES).zip(out.chunks_exact_mut(LANES));
                        for (a, o) in blocks {
                            let a: &[A; LANES] = a.try_into().expect("lanes");
                            self.block(a, to_f32, c, o.try_into().expect("lanes"));
                            c = (c + LANES) % channels;
                        }
                        let tail = acc.len() / LANES * LANES;
                        self.row(&acc[tail..], to_f32, c, &mut out[tail..]);
                        return;
                    }
                    for (i, (a, o)) in acc.chunks(plane).zip(out.chunks_mut(plane)).enumerate() {
                        let c = (u0 + i) % channels;
                        let (s, b) = (self.acc_scale[c], self.bias[c]);
                        if self.out_zero.abs() > MAX_OUT_ZERO {
                            for (o, &a) in o.iter_mut().zip(a) {
                                let real = (to_f32(a) * s + b).clamp(self.lo, self.hi);
                                *o = quantize(real, self.out_scale, self.out_zero, self.out_dtype);
                            }
                            continue;
                        }
                        for (o, &a) in o.iter_mut().zip(a) {
                            *o = self.one(to_f32(a), s, b);
                        }
                    }
                },
            );
            Ok(())
        })
    }
}

impl Prepared for CpuSegment {
    fn run(&self, bufs: &mut Buffers<'_>) -> Result<()> {
        let active: Vec<bool> = self
            .concats
            .iter()
            .map(|c| self.in_place_ok(c, bufs))
            .collect();
        for (i, step) in self.steps.iter().enumerate() {
            match (self.writes_into[i], self.concat_at[i]) {
                (Some((c, off)), _) if active[c] => {
                    self.run_conv_into(step, &self.concats[c], off, bufs)?
                }
                (_, Some(c)) if active[c] => self.run_concat_rest(&self.concats[c], bufs)?,
                _ => self.run_step(step, bufs)?,
            }
        }
        Ok(())
    }

    fn copied_constants(&self) -> Vec<usize> {
        // A convolution or dense layer whose constant weight was packed (for the float
        // kernels, the 8-bit GEMM or the exact f64 path) never reads the weight's buffer
        // again, nor the bias's, which preparation loaded (quantized ones into `Requant`).
        let mut out = Vec::new();
        for step in &self.steps {
            let node = match step {
                Step::Conv {
                    node,
                    weight: ConvWeight::Packed(_) | ConvWeight::Gemm(_),
                    ..
                }
                | Step::QConv {
                    node, q: Some(_), ..
                }
                | Step::QConv {
                    node, w32: Some(_), ..
                }
                | Step::QConv {
                    node,
                    weight: Weight::Packed(_),
                    ..
                }
                | Step::QDense {
                    node, q: Some(_), ..
                }
                | Step::QDense {
                    node,
                    weight: Weight::Packed(_),
                    ..
                } => *node,
                Step::Dense {
                    node, weight, gemm, ..
                } if gemm.is_some() || weight.is_some() => *node,
                _ => continue,
            };
            let ins = &self.graph.nodes[node].inputs;
            out.extend(ins.iter().skip(1).copied());
        }
        out
    }
}

impl CpuSegment {
    /// Whether `c`'s producers can write into its output in this run: the output is aligned
    /// float32 of its size, and overlaps none of the tensors in `c.watch`.
    fn in_place_ok(&self, c: &InPlaceConcat, bufs: &mut Buffers<'_>) -> bool {
        let g = &*self.graph;
        let Ok((ptrs, _)) = bufs.raw(&c.watch, &[]) else {
            return false;
        };
        let Ok((out, _)) = bufs.raw(&[c.out], &[]) else {
            return false;
        };
        let (o0, olen) = (out[0] as usize, g.tensors[c.out].byte_len());
        o0 % std::mem::align_of::<f32>() == 0
            && c.watch.iter().zip(&ptrs).all(|(&t, &p)| {
                let (p0, len) = (p as usize, g.tensors[t].byte_len());
                len == 0 || olen == 0 || p0 + len <= o0 || o0 + olen <= p0
            })
    }

    /// A convolution that writes its output into its channels of `c`'s output.
    fn run_conv_into(
        &self,
        step: &Step,
        c: &InPlaceConcat,
        off: usize,
        bufs: &mut Buffers<'_>,
    ) -> Result<()> {
        let g = &*self.graph;
        let Step::Conv {
            node: k,
            plan,
            weight: ConvWeight::Gemm(gemm),
            bias,
        } = step
        else {
            return Err(backend_err(
                "a step written in place is not a packed convolution",
            ));
        };
        let node = &g.nodes[*k];
        let ctx = |e: Error| match e {
            Error::Backend { backend, message } => Error::Backend {
                backend,
                message: format!("subgraph `{}`, node `{}`: {message}", g.name, node.name),
            },
            e => e,
        };
        let act = match node.op {
            Op::Conv2d(conv) => conv.activation,
            _ => Activation::None,
        };
        let (lo, hi) = act.bounds();
        let epi = packed::Epilogue {
            bias: bias.as_deref(),
            lo,
            hi,
        };
        let (ins, out) = bufs.node_io(&node.inputs, c.out)?;
        let x = load_f32(ins[0], &g.tensors[node.inputs[0]]).map_err(ctx)?;
        // SAFETY: every bit pattern is a valid f32; only the aligned middle is reinterpreted.
        let (pre, y, post) = unsafe { out.align_to_mut::<f32>() };
        if !pre.is_empty() || !post.is_empty() {
            return Err(ctx(backend_err("concatenation output not aligned")));
        }
        plan.run_packed_into(&x, gemm, y, c.width, off, epi)
            .map_err(ctx)
    }

    /// `c`'s concatenation, copying only the inputs not written in place (float32 rows, so
    /// bytes).
    fn run_concat_rest(&self, c: &InPlaceConcat, bufs: &mut Buffers<'_>) -> Result<()> {
        let g = &*self.graph;
        let ts: Vec<usize> = c.rest.iter().map(|r| r.0).collect();
        let (ins, out) = bufs.node_io(&ts, c.out)?;
        let rows = out.len() / (4 * c.width).max(1);
        for (&(t, off, chans), x) in c.rest.iter().zip(ins) {
            if x.len() != g.tensors[t].byte_len() || x.len() != rows * chans * 4 {
                return Err(backend_err(format!(
                    "subgraph `{}`, node `{}`: buffer sizes do not match the description",
                    g.name, g.nodes[c.node].name
                )));
            }
            for (r, src) in x.chunks_exact((4 * chans).max(1)).enumerate() {
                let d = (r * c.width + off) * 4;
                out[d..d + src.len()].copy_from_slice(src);
            }
        }
        Ok(())
    }

    fn run_step(&self, step: &Step, bufs: &mut Buffers<'_>) -> Result<()> {
        let g = &*self.graph;
        let k = match step {
            Step::Conv { node, .. }
            | Step::QConv { node, .. }
            | Step::Dense { node, .. }
            | Step::QDense { node, .. }
            | Step::Generic { node } => *node,
        };
        let node = &g.nodes[k];
        let desc = |i: usize| &g.tensors[node.inputs[i]];
        let ctx = |e: Error| match e {
            Error::Backend { backend, message } => Error::Backend {
                backend,
                message: format!("subgraph `{}`, node `{}`: {message}", g.name, node.name),
            },
            e => e,
        };
        if matches!(
            node.op,
            Op::Transpose { .. } | Op::ChannelShuffle { .. } | Op::Split { .. }
        ) {
            // Data movement, on raw elements (any dtype), with every output.
            let (ins, mut outs) = bufs.node_io_multi(&node.inputs, &node.outputs)?;
            let out_shapes: Vec<&[i64]> = node
                .outputs
                .iter()
                .map(|&t| g.tensors[t].shape.as_slice())
                .collect();
            let d = desc(0);
            if ins[0].len() != d.byte_len()
                || outs
                    .iter()
                    .zip(&node.outputs)
                    .any(|(o, &t)| o.len() != g.tensors[t].byte_len())
            {
                return Err(ctx(backend_err(
                    "buffer sizes do not match the description",
                )));
            }
            return ops::move_bytes(
                &node.op,
                d.dtype.size_bytes(),
                ins[0],
                &d.shape,
                &out_shapes,
                &mut outs,
            )
            .map_err(ctx);
        }
        let (ins, out) = bufs.node_io(&node.inputs, node.outputs[0])?;
        let odesc = &g.tensors[node.outputs[0]];
        match step {
            Step::Conv {
                plan, weight, bias, ..
            } => {
                let act = match node.op {
                    Op::Conv2d(c) => c.activation,
                    _ => Activation::None,
                };
                let x = load_f32(ins[0], desc(0)).map_err(ctx)?;
                let packed;
                let w: &[f32] = match weight {
                    ConvWeight::Gemm(gemm) => {
                        // Bias and clamp as the GEMM stores each tile; another activation
                        // after.
                        let (lo, hi) = act.bounds();
                        let epi = packed::Epilogue {
                            bias: bias.as_deref(),
                            lo,
                            hi,
                        };
                        let o = plan.o;
                        let post = |p: &mut [f32]| {
                            kernels::bias_act(p, None, act, o, Layout::Nhwc, 1);
                        };
                        let post: kernels::Post<'_, f32> = (!act.is_clamp()).then_some(&post);
                        return with_out_f32(out, odesc, |y| {
                            plan.run_packed(&x, gemm, y, epi, post)
                        })
                        .map_err(ctx);
                    }
                    ConvWeight::Packed(w) => w,
                    ConvWeight::Runtime => {
                        packed = plan.pack(&load_f32(ins[1], desc(1)).map_err(ctx)?);
                        &packed
                    }
                };
                with_out_f32(out, odesc, |y| {
                    let (o, plane) = (plan.o, plan.oh * plan.ow);
                    let post = |p: &mut [f32]| {
                        kernels::bias_act(p, bias.as_deref(), act, o, Layout::Nhwc, 1);
                    };
                    if !plan.run(&x, w, y, Some(&post))? {
                        kernels::bias_act(y, bias.as_deref(), act, o, plan.layout, plane);
                    }
                    Ok(())
                })
                .map_err(ctx)
            }
            Step::QConv {
                plan,
                q: Some(q),
                requant,
                ..
            } => {
                let unsigned = desc(0).dtype == DType::U8;
                let flip = if unsigned { 0x80 } else { 0 };
                let x_zero = qgemm::zero_i8(requant.x_zero as i32, unsigned);
                if out.len() != odesc.num_elements() {
                    return Err(ctx(backend_err("conv2d: output size does not match")));
                }
                let out = qgemm::Out::Bytes {
                    out,
                    ld: plan.o,
                    rq: requant,
                    ch0: 0,
                };
                plan.run_q_into(ins[0], flip, x_zero, q, out).map_err(ctx)
            }
            Step::QConv {
                plan,
                w32: Some(w),
                requant,
                ..
            } => {
                // Exact float32 sums (`exact_in_f32`) on the float kernels, then requantized.
                let zx = requant.x_zero as f32;
                let x: Vec<f32> = if desc(0).dtype == DType::I8 {
                    ins[0].iter().map(|&b| b as i8 as f32 - zx).collect()
                } else {
                    ins[0].iter().map(|&b| b as f32 - zx).collect()
                };
                let mut acc = vec![0f32; odesc.num_elements()];
                plan.run(&x, w, &mut acc, None).map_err(ctx)?;
                let plane = match plan.layout {
                    Layout::Nhwc => 1,
                    Layout::Nchw => plan.oh * plan.ow,
                };
                requant.apply(&acc, |a| a, out, plan.o, plane).map_err(ctx)
            }
            Step::QConv {
                plan,
                weight,
                requant,
                ..
            } => {
                let x = centered_input(ins[0], desc(0), requant.x_zero);
                let packed;
                let w: &[f64] = match weight {
                    Weight::Packed(w) => w,
                    Weight::Runtime => {
                        packed = plan.pack(&centered_weight(desc(1), ins[1], 0).map_err(ctx)?);
                        &packed
                    }
                };
                let mut acc = vec![0f64; odesc.num_elements()];
                plan.run(&x, w, &mut acc, None).map_err(ctx)?;
                let plane = match plan.layout {
                    Layout::Nhwc => 1,
                    Layout::Nchw => plan.oh * plan.ow,
                };
                requant
                    .apply(&acc, |a| a as f32, out, plan.o, plane)
                    .map_err(ctx)
            }
            Step::Dense {
                weight, gemm, bias, ..
            } => {
                let act = match node.op {
                    Op::Dense { activation } => activation,
                    _ => Activation::None,
                };
                let wd = desc(1);
                let (nn, kk) = (wd.shape[0] as usize, wd.shape[1] as usize);
                let m = desc(0).num_elements() / kk.max(1);
                let x = load_f32(ins[0], desc(0)).map_err(ctx)?;
                // The packed GEMM splits rows over the pool: with fewer rows than that needs,
                // the column split below (which also suits a single row) runs instead.
                // Preparation kept one form of a constant weight: packed when it expected as
                // many rows (at its thread count), else transposed for the column split.
                if let Some(gemm) = gemm.as_deref().and_then(Option::as_ref) {
                    let (lo, hi) = act.bounds();
                    let epi = packed::Epilogue {
                        bias: bias.as_deref(),
                        lo,
                        hi,
                    };
                    return with_out_f32(out, odesc, |y| {
                        kernels::par_packed(m, &x, gemm, y, epi)?;
                        if !act.is_clamp() {
                            kernels::bias_act(y, None, act, nn, Layout::Nhwc, 1);
                        }
                        Ok(())
                    })
                    .map_err(ctx);
                }
                let packed;
                let w: &[f32] = match weight {
                    Some(w) => w,
                    None => {
                        packed = transpose(&load_f32(ins[1], wd).map_err(ctx)?, nn, kk);
                        &packed
                    }
                };
                with_out_f32(out, odesc, |y| {
                    kernels::par_gemm(m, kk, nn, &x, kk, w, nn, y, nn)?;
                    kernels::bias_act(y, bias.as_deref(), act, nn, Layout::Nhwc, 1);
                    Ok(())
                })
                .map_err(ctx)
            }
            Step::QDense {
                q: Some(q),
                requant,
                ..
            } => {
                let (kk, nn, kp) = (q.k(), q.n(), q.k_padded());
                let m = desc(0).num_elements() / kk.max(1);
                let unsigned = desc(0).dtype == DType::U8;
                let x_zero = qgemm::zero_i8(requant.x_zero as i32, unsigned);
                if ins[0].len() != m * kk {
                    return Err(ctx(backend_err("dense: input size does not match")));
                }
                // Rows padded with zeros to `kp`, and their sums.
                let mut a = vec![0i8; m * kp];
                let mut sums = vec![0i32; m];
                for ((row, x), s) in a
                    .chunks_exact_mut(kp)
                    .zip(ins[0].chunks_exact(kk))
                    .zip(&mut sums)
                {
                    for (d, &b) in row.iter_mut().zip(x) {
                        *d = qgemm::to_i8(b, unsigned);
                        *s += *d as i32;
                    }
                }
                if out.len() != m * nn {
                    return Err(ctx(backend_err("dense: output size does not match")));
                }
                // Rows split over the pool; each piece requantized as its GEMM stores it.
                let threads = crate::host::threadpool::current_parallelism();
                let rows = m.div_ceil(threads).max(1);
                let out = qgemm::Out::Bytes {
                    out,
                    ld: nn,
                    rq: requant,
                    ch0: 0,
                };
                let pieces: Vec<(usize, qgemm::Out<'_>)> =
                    out.split_rows(rows).into_iter().enumerate().collect();
                kernels::for_each_piece(pieces, |(j, c)| {
                    let r0 = j * rows;
                    let mr = c.len().div_ceil(nn.max(1));
                    qgemm::gemm(
                        mr,
                        qgemm::Rows::I8(&a[r0 * kp..]),
                        x_zero,
                        &sums[r0..],
                        q,
                        c,
                    )
                })
                .map_err(ctx)
            }
            Step::QDense {
                weight, requant, ..
            } => {
                let wd = desc(1);
                let (nn, kk) = (wd.shape[0] as usize, wd.shape[1] as usize);
                let m = desc(0).num_elements() / kk.max(1);
                let x = centered_input(ins[0], desc(0), requant.x_zero);
                let packed;
                let w: &[f64] = match weight {
                    Weight::Packed(w) => w,
                    Weight::Runtime => {
                        packed = transpose(&centered_weight(wd, ins[1], 0).map_err(ctx)?, nn, kk);
                        &packed
                    }
                };
                let mut acc = vec![0f64; m * nn];
                kernels::par_gemm(m, kk, nn, &x, kk, w, nn, &mut acc, nn).map_err(ctx)?;
                requant.apply(&acc, |a| a as f32, out, nn, 1).map_err(ctx)
            }
            Step::Generic { .. } => {
                // Float models skip this (no list of descriptions per node and run).
                if odesc.is_quantized_8bit() {
                    let descs: Vec<&TensorDesc> = (0..ins.len()).map(desc).collect();
                    if let Some(r) = ops::quantized_generic(&node.op, &ins, &descs, odesc, out) {
                        return r.map_err(ctx);
                    }
                }
                let xs = ins
                    .iter()
                    .enumerate()
                    .map(|(i, b)| load_f32(b, desc(i)))
                    .collect::<Result<Vec<_>>>()
                    .map_err(ctx)?;
                let shapes: Vec<&[i64]> =
                    (0..ins.len()).map(|i| desc(i).shape.as_slice()).collect();
                if matches!(node.op, Op::Reshape)
                    && desc(0).dtype == odesc.dtype
                    && desc(0).quant == odesc.quant
                {
                    out.copy_from_slice(ins[0]);
                    return Ok(());
                }
                with_out_f32(out, odesc, |y| {
                    kernels::generic(&node.op, &xs, &shapes, &odesc.shape, y)
                })
                .map_err(ctx)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::threadpool::ThreadPool;

    /// Deterministic values in [-1, 1).
    /// Seeded values in [-1, 1] (xorshift), shared by the backend's test modules.
    pub(super) fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// A fire-module-like NHWC region: a 1x1 squeeze (ReLU), a 1x1 expand (ReLU) and a 3x3
    /// expand (no activation) of it, a 3x3 max pool of it, concatenated as [expand 1x1, pool,
    /// expand 3x3] (so the copied input sits between two written in place), then a 1x1
    /// convolution of the concatenation; the concatenation is a region output when `cat_out`.
    fn fire(cat_out: bool) -> String {
        let outputs = if cat_out { "[11,14]" } else { "[14]" };
        format!(
            r#"{{"format":"mote.subgraph","version":1,"target":"acl","name":"fire",
          "tensors":[{{"shape":[1,6,7,8],"dtype":"float32"}},
            {{"shape":[4,1,1,8],"dtype":"float32"}},{{"shape":[4],"dtype":"float32"}},
            {{"shape":[1,6,7,4],"dtype":"float32"}},
            {{"shape":[5,1,1,4],"dtype":"float32"}},{{"shape":[5],"dtype":"float32"}},
            {{"shape":[1,6,7,5],"dtype":"float32"}},
            {{"shape":[6,3,3,4],"dtype":"float32"}},{{"shape":[6],"dtype":"float32"}},
            {{"shape":[1,6,7,6],"dtype":"float32"}},
            {{"shape":[1,6,7,4],"dtype":"float32"}},
            {{"shape":[1,6,7,15],"dtype":"float32"}},
            {{"shape":[3,1,1,15],"dtype":"float32"}},{{"shape":[3],"dtype":"float32"}},
            {{"shape":[1,6,7,3],"dtype":"float32"}}],
          "inputs":[0],"constants":[1,2,4,5,7,8,12,13],"outputs":{outputs},
          "nodes":[
            {{"op":"conv2d","name":"squeeze","inputs":[0,1,2],"outputs":[3],
             "attrs":{{"layout":"NHWC","activation":"relu"}}}},
            {{"op":"conv2d","name":"e1","inputs":[3,4,5],"outputs":[6],
             "attrs":{{"layout":"NHWC","activation":"relu"}}}},
            {{"op":"conv2d","name":"e3","inputs":[3,7,8],"outputs":[9],
             "attrs":{{"layout":"NHWC","padding":[1,1,1,1]}}}},
            {{"op":"max_pool2d","name":"pool","inputs":[3],"outputs":[10],
             "attrs":{{"layout":"NHWC","pool_size":[3,3],"padding":[1,1,1,1]}}}},
            {{"op":"concatenate","name":"cat","inputs":[6,10,9],"outputs":[11],
             "attrs":{{"axis":-1}}}},
            {{"op":"conv2d","name":"final","inputs":[11,12,13],"outputs":[14],
             "attrs":{{"layout":"NHWC"}}}}]}}"#
        )
    }

    /// Naive NHWC convolution (OHWI weight, stride 1, `pad` on every side) in f64.
    #[allow(clippy::too_many_arguments)]
    fn conv(
        x: &[f64],
        h: usize,
        w: usize,
        c: usize,
        wt: &[f32],
        b: &[f32],
        k: usize,
        pad: usize,
        relu: bool,
    ) -> Vec<f64> {
        let o = b.len();
        let mut y = vec![0f64; h * w * o];
        for oy in 0..h {
            for ox in 0..w {
                for oc in 0..o {
                    let mut acc = b[oc] as f64;
                    for ky in 0..k {
                        for kx in 0..k {
                            let (iy, ix) =
                                ((oy + ky) as i64 - pad as i64, (ox + kx) as i64 - pad as i64);
                            if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                                continue;
                            }
                            for ci in 0..c {
                                acc += x[(iy as usize * w + ix as usize) * c + ci]
                                    * wt[((oc * k + ky) * k + kx) * c + ci] as f64;
                            }
                        }
                    }
                    y[(oy * w + ox) * o + oc] = if relu { acc.max(0.0) } else { acc };
                }
            }
        }
        y
    }

    /// The fire region's concatenation and output, computed naively in f64.
    fn fire_reference(x: &[f32], consts: &[Vec<f32>]) -> (Vec<f64>, Vec<f64>) {
        let (h, w) = (6, 7);
        let x: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let s = conv(&x, h, w, 8, &consts[0], &consts[1], 1, 0, true);
        let e1 = conv(&s, h, w, 4, &consts[2], &consts[3], 1, 0, true);
        let e3 = conv(&s, h, w, 4, &consts[4], &consts[5], 3, 1, false);
        let mut p = vec![f64::MIN; h * w * 4];
        for oy in 0..h {
            for ox in 0..w {
                for ch in 0..4 {
                    for iy in oy.saturating_sub(1)..(oy + 2).min(h) {
                        for ix in ox.saturating_sub(1)..(ox + 2).min(w) {
                            let v = s[(iy * w + ix) * 4 + ch];
                            let d = &mut p[(oy * w + ox) * 4 + ch];
                            *d = d.max(v);
                        }
                    }
                }
            }
        }
        let mut cat = Vec::with_capacity(h * w * 15);
        for px in 0..h * w {
            cat.extend_from_slice(&e1[px * 5..px * 5 + 5]);
            cat.extend_from_slice(&p[px * 4..px * 4 + 4]);
            cat.extend_from_slice(&e3[px * 6..px * 6 + 6]);
        }
        let out = conv(&cat, h, w, 15, &consts[6], &consts[7], 1, 0, false);
        (cat, out)
    }

    fn close(what: &str, got: &[f32], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{what}: element {i}: {g} vs {w}"
            );
        }
    }

    fn fire_constants() -> Vec<Vec<f32>> {
        [32, 4, 20, 5, 216, 6, 45, 3]
            .iter()
            .enumerate()
            .map(|(i, &n)| values(n, 10 + i as u64))
            .collect()
    }

    /// Concatenation inputs written in place by their convolutions: the SqueezeNet-like region
    /// run on the prepared segment with buffers of our own. With every tensor in its own
    /// buffer the two expand convolutions write straight into the concatenation (their own
    /// NaN-poisoned tensors stay untouched) and the pool's output is copied between them; with
    /// the concatenation's buffer over the squeeze output (as the executor's arena may place
    /// it: the squeeze output is dead once the concatenation runs, but the 3x3 expand still
    /// reads it after the 1x1 expand ran) the segment computes as described instead. Both
    /// match a naive f64 reference, on 1 and 2 threads; and so does the executor's own run.
    #[test]
    fn concat_inputs_written_in_place_match_the_copy() {
        let g = Arc::new(Graph::parse(&fire(false), "fire").expect("parses"));
        let consts = fire_constants();
        let tensors: Vec<Tensor> = g
            .constants
            .iter()
            .zip(&consts)
            .map(|(&t, v)| Tensor::from_slice(&g.tensors[t].shape, v).expect("constant"))
            .collect();
        let x = values(6 * 7 * 8, 3);
        let (want_cat, want_out) = fire_reference(&x, &consts);

        // The plan: both expand convolutions in place, the pool copied.
        let steps: Vec<Step> = (0..g.nodes.len())
            .map(|k| prepare_node(&g, k, Constants::from(tensors.as_slice())).expect("step"))
            .collect();
        if !packed::available(isa::current()) {
            // No packed kernels at this level (sse2, scalar): nothing is written in place.
            assert!(in_place_concats(&g, 0, &steps).is_empty());
            return;
        }
        let plans = in_place_concats(&g, 0, &steps);
        assert_eq!(plans.len(), 1);
        assert_eq!(plans[0].producers, [(1, 0), (2, 9)]);
        assert_eq!(plans[0].rest, [(10, 5, 4)]);

        for threads in [1, 2] {
            ThreadPool::new(threads).install(|| {
                let seg = CpuBackend
                    .prepare(&g, 0..g.nodes.len(), Constants::from(tensors.as_slice()))
                    .expect("prepares");
                for aliased in [false, true] {
                    let mut bufs: Vec<Vec<u8>> = g
                        .tensors
                        .iter()
                        .map(|d| f32::NAN.to_le_bytes().repeat(d.num_elements()))
                        .collect();
                    bufs[0] = x.iter().flat_map(|v| v.to_le_bytes()).collect();
                    for (&t, v) in g.constants.iter().zip(&consts) {
                        bufs[t] = v.iter().flat_map(|v| v.to_le_bytes()).collect();
                    }
                    let mut ptrs: Vec<Option<(*mut u8, usize)>> = bufs
                        .iter_mut()
                        .map(|b| Some((b.as_mut_ptr(), b.len())))
                        .collect();
                    if aliased {
                        // The squeeze output at the start of the concatenation's buffer.
                        let (cat, len) = ptrs[11].expect("cat");
                        assert!(bufs[3].len() <= len);
                        ptrs[3] = Some((cat, bufs[3].len()));
                    }
                    // SAFETY: every pointer addresses its own live Vec (the aliased case puts
                    // the squeeze output inside the concatenation's, as the executor's arena
                    // does with tensors whose lifetimes do not overlap); the Vecs outlive
                    // `b`.
                    let mut b = unsafe { Buffers::from_raw(ptrs) };
                    seg.run(&mut b).expect("runs");
                    drop(b);
                    let f = |t: usize| -> Vec<f32> {
                        bufs[t]
                            .chunks_exact(4)
                            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                            .collect()
                    };
                    let what = format!("t{threads} aliased {aliased}");
                    close(&format!("{what}: output"), &f(14), &want_out);
                    // Written in place, the expand outputs' own buffers are never written.
                    let untouched = f(6).iter().chain(&f(9)).all(|v| v.is_nan());
                    assert_eq!(untouched, !aliased, "{what}: expand outputs untouched");
                    if !aliased {
                        close(&format!("{what}: concatenation"), &f(11), &want_cat);
                    }
                }
            });
        }

        // Through the executor (its own arena, poisoned), the concatenation as an intermediate
        // and as a region output.
        for cat_out in [false, true] {
            let runner = crate::offload::SubgraphRunner::new(&fire(cat_out), tensors.clone())
                .expect("parses");
            for threads in [1, 2] {
                ThreadPool::new(threads).install(|| {
                    let input = Tensor::from_slice(&[1, 6, 7, 8], &x).expect("input");
                    for _ in 0..2 {
                        let outs = runner
                            .run(&["cpu".to_string()], std::slice::from_ref(&input))
                            .expect("runs");
                        let last = outs.last().expect("output");
                        close(
                            "executor: output",
                            last.as_slice::<f32>().expect("f32"),
                            &want_out,
                        );
                        if cat_out {
                            close(
                                "executor: concatenation",
                                outs[0].as_slice::<f32>().expect("f32"),
                                &want_cat,
                            );
                        }
                    }
                });
            }
        }
    }

    /// Today's scalar requantization, the definition the fast one must equal bit for bit:
    /// `acc * scale + bias` (a multiply then an add), clamped to the activation's bounds, then
    /// `round_ties_even(x / out_scale) + zero`, clamped to the dtype's range.
    pub(super) fn requant_reference(rq: &Requant, acc: f32, c: usize) -> u8 {
        let real = (acc * rq.acc_scale[c] + rq.bias[c]).clamp(rq.lo, rq.hi);
        let (dlo, dhi) = if rq.out_dtype == DType::I8 {
            (-128.0, 127.0)
        } else {
            (0.0, 255.0)
        };
        let v = ((real / rq.out_scale).round_ties_even() + rq.out_zero as f32).clamp(dlo, dhi);
        if rq.out_dtype == DType::I8 {
            v as i8 as u8
        } else {
            v as u8
        }
    }

    /// Requantization cases: per-channel scales and biases that make exact ties (x.5 steps of
    /// the output scale), huge and infinite values, a NaN (an infinite scale times 0), with
    /// every activation's bounds, int8 and uint8 outputs at zero points from far negative to
    /// far positive (past `MAX_OUT_ZERO` too), and channel counts around the vector widths.
    pub(super) fn requant_cases(mut f: impl FnMut(&Requant, &[i32], &str)) {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let activations = [
            Activation::None,
            Activation::Relu,
            Activation::Relu6,
            Activation::Clip(-0.75, 2.5),
            Activation::Sigmoid,
            Activation::Tanh,
            Activation::Hardswish,
            Activation::Hardsigmoid(0.2, 0.5),
            Activation::Silu,
            Activation::Gelu,
            Activation::GeluTanh,
            Activation::LeakyRelu(0.1),
        ];
        for channels in [1usize, 3, 15, 16, 17, 33, 40] {
            for dtype in [DType::I8, DType::U8] {
                for zero in [-(1 << 25), -300, -128, -5, 0, 3, 127, 128, 255, 1 << 21] {
                    for (ai, &act) in activations.iter().enumerate() {
                        // Channel kinds: exact ties (scale 0.5 or 0.25 of an output step of
                        // 1 or 0.5, half-step biases), random scales, huge ones, infinite.
                        let (mut scale, mut bias) = (Vec::new(), Vec::new());
                        for c in 0..channels {
                            let (s, b) = match (c + ai) % 6 {
                                0 => (0.5, 0.0),
                                1 => (0.25, -0.5),
                                2 => (f32::from_bits(0x3a00_0000 | (next() as u32 & 0xffff)), 0.1),
                                3 => (0.5, 0.25 * ((next() % 64) as f32 - 32.0)),
                                4 => (1e30, -1e30),
                                _ => (f32::INFINITY, 0.0),
                            };
                            scale.push(s);
                            bias.push(b);
                        }
                        let out_scale = if ai % 2 == 0 { 1.0 } else { 0.5 };
                        let rq = Requant::new(0.0, scale, bias, (out_scale, zero, dtype), act);
                        // Accumulators: small (every tie near the output range), random
                        // 32-bit, the extremes and zero (the NaN of the infinite scale).
                        let rows = 9;
                        let acc: Vec<i32> = (0..rows * channels)
                            .map(|i| match (i / channels) % 5 {
                                0 | 1 => (next() % 1200) as i32 - 600,
                                2 => next() as i32,
                                3 => [i32::MIN, i32::MAX, 0, -1, 1][i % 5],
                                _ => (next() % 64) as i32 - 32,
                            })
                            .collect();
                        let what = format!("{channels} channels {dtype:?} zero {zero} {act:?}");
                        f(&rq, &acc, &what);
                    }
                }
            }
        }
        // Values where the order of operations decides the output: a fused multiply-add for
        // `acc * scale + bias`, or a multiply by `1 / out_scale` for the division, lands on
        // the other side of a tie. Searched for, then one row of them (enough that both kinds
        // occur and the row is longer than a vector).
        let out_scale = 0.1f32;
        let (mut scale, mut bias, mut acc) = (Vec::new(), Vec::new(), Vec::new());
        let (mut fma, mut recip) = (0, 0);
        while fma < 20 || recip < 20 {
            let a = (next() % 2000) as i32 - 1000;
            let k = (next() % 200) as f32 - 100.0;
            if fma <= recip {
                // `a * s` lands on half a step from an integer number of steps, rounded.
                let s = f32::from_bits(0x3c00_0000 | (next() as u32 & 0x7f_ffff));
                let b = (k + 0.5) * out_scale - a as f32 * s;
                let unfused = ((a as f32 * s + b) / out_scale).round_ties_even();
                let fused = ((a as f32).mul_add(s, b) / out_scale).round_ties_even();
                if unfused != fused {
                    scale.push(s);
                    bias.push(b);
                    acc.push(a);
                    fma += 1;
                }
            } else {
                // The bias (scale 0) within a few units in the last place of a tie.
                let tie = (k + 0.5) * out_scale;
                let b = f32::from_bits((tie.to_bits() as i64 + (next() % 5) as i64 - 2) as u32);
                let div = (b / out_scale).round_ties_even();
                let mul = (b * (1.0 / out_scale)).round_ties_even();
                if div != mul {
                    scale.push(0.0);
                    bias.push(b);
                    acc.push(a);
                    recip += 1;
                }
            }
        }
        for dtype in [DType::I8, DType::U8] {
            let rq = Requant::new(
                0.0,
                scale.clone(),
                bias.clone(),
                (out_scale, 10, dtype),
                Activation::None,
            );
            f(&rq, &acc, &format!("order of operations, {dtype:?}"));
        }
    }

    /// Per output row and through `apply` (channel-last and planes), at every ISA level this
    /// CPU has, the requantization equals the scalar formula bit for bit.
    #[test]
    fn quantized_requant_matches_the_scalar_formula_bit_for_bit() {
        let mut cases = 0;
        requant_cases(|rq, acc, what| {
            let ch = rq.channels();
            let want: Vec<u8> = acc
                .iter()
                .enumerate()
                .map(|(i, &a)| requant_reference(rq, a as f32, i % ch))
                .collect();
            for &level in isa::supported() {
                let mut got = vec![0xa5u8; acc.len()];
                isa::run_as(level, || {
                    for (a, o) in acc.chunks(ch).zip(got.chunks_mut(ch)) {
                        rq.row(a, |v| v as f32, 0, o);
                    }
                });
                assert_eq!(got, want, "{what}, rows at {}", level.name());
                // Blocks of `LANES` across rows, wrapping around the channels.
                let mut got = vec![0xa5u8; acc.len()];
                isa::run_as(level, || {
                    let mut c = 0;
                    for (a, o) in acc.chunks_exact(LANES).zip(got.chunks_exact_mut(LANES)) {
                        let a: &[i32; LANES] = a.try_into().expect("lanes");
                        rq.block(a, |v| v as f32, c, o.try_into().expect("lanes"));
                        c = (c + LANES) % ch;
                    }
                    let tail = acc.len() / LANES * LANES;
                    rq.row(&acc[tail..], |v| v as f32, c, &mut got[tail..]);
                });
                assert_eq!(got, want, "{what}, blocks at {}", level.name());
            }
            // A row's tail from channel 1 on.
            if ch > 1 {
                let mut got = vec![0u8; ch - 1];
                rq.row(&acc[1..ch], |v| v as f32, 1, &mut got);
                assert_eq!(got, want[1..ch], "{what}, from channel 1");
            }
            let mut got = vec![0xa5u8; acc.len()];
            rq.apply(acc, |v| v as f32, &mut got, ch, 1).expect("apply");
            assert_eq!(got, want, "{what}, apply");
            // Planes of 3 values per channel (NCHW), from f64 accumulators.
            let accf: Vec<f64> = acc.iter().map(|&a| a as f64).collect();
            let planes = acc.len() / 3;
            let want: Vec<u8> = acc[..planes * 3]
                .iter()
                .enumerate()
                .map(|(i, &a)| requant_reference(rq, a as f32, (i / 3) % ch))
                .collect();
            let mut got = vec![0xa5u8; planes * 3];
            rq.apply(&accf[..planes * 3], |v| v as f32, &mut got, ch, 3)
                .expect("apply");
            assert_eq!(got, want, "{what}, apply to planes");
            cases += 1;
        });
        assert_eq!(cases, 7 * 2 * 10 * 12 + 2);
    }

    /// The exact float32 path of quantized convolutions without the 8-bit GEMM (`w32`): on
    /// depthwise plans (3x3 and 5x5, NHWC and NCHW, multipliers 1 and 2, stride 2, padding)
    /// and on plain convolutions up to the largest `K` it takes, with centered values at the
    /// extremes (products of +-255 x +-255, all of one sign in the largest), the float32 sums
    /// equal the f64 ones exactly, at every ISA level, on 1 and 2 threads.
    #[test]
    fn quantized_exact_f32_sums_equal_the_f64_ones() {
        assert!(exact_in_f32(258) && !exact_in_f32(259));
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // (layout, n, c, h, w, o, k, stride, pad, groups)
        let cases = [
            (Layout::Nhwc, 1, 40, 9, 11, 40, 3, 1, 1, 40),
            (Layout::Nhwc, 2, 24, 10, 8, 24, 5, 2, 2, 24),
            (Layout::Nhwc, 1, 8, 7, 7, 16, 3, 1, 1, 8),
            (Layout::Nchw, 1, 16, 9, 9, 16, 3, 2, 1, 16),
            (Layout::Nchw, 1, 2, 12, 12, 3, 11, 1, 0, 1),
            (Layout::Nhwc, 1, 2, 12, 12, 17, 11, 1, 5, 1),
        ];
        for (layout, n, c, h, w, o, k, s, pad, groups) in cases {
            for &isa in isa::supported() {
                let plan = kernels::ConvPlan {
                    layout,
                    n,
                    c,
                    h,
                    w,
                    o,
                    kh: k,
                    kw: k,
                    oh: (h + 2 * pad - k) / s + 1,
                    ow: (w + 2 * pad - k) / s + 1,
                    groups,
                    strides: [s, s],
                    padding: [pad; 4],
                    dilation: [1, 1],
                    isa,
                };
                assert!(exact_in_f32(k * k * c / groups));
                for extreme in [true, false] {
                    let pick = |v: u64| match v % 4 {
                        _ if extreme => 255.0,
                        0 => 255.0,
                        1 => -255.0,
                        _ => (v % 511) as f64 - 255.0,
                    };
                    let x64: Vec<f64> = (0..n * c * h * w).map(|_| pick(next())).collect();
                    let w64: Vec<f64> = (0..o * k * k * c / groups).map(|_| pick(next())).collect();
                    let mut want = vec![0f64; n * o * plan.oh * plan.ow];
                    plan.run(&x64, &plan.pack(&w64), &mut want, None)
                        .expect("f64");
                    let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
                    let w32: Vec<f32> = w64.iter().map(|&v| v as f32).collect();
                    let packed = plan.pack(&w32);
                    for threads in [1, 2] {
                        let mut got = vec![f32::NAN; want.len()];
                        ThreadPool::new(threads)
                            .install(|| plan.run(&x32, &packed, &mut got, None))
                            .expect("f32");
                        for (i, (&g, &e)) in got.iter().zip(&want).enumerate() {
                            assert_eq!(
                                g,
                                e as f32,
                                "{layout:?} c{c} o{o} k{k} g{groups} {} {threads}t [{i}]",
                                isa.name()
                            );
                        }
                    }
                }
            }
        }
    }
}
