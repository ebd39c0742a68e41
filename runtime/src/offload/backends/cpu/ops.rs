//! The ops and activations of subgraph format version 2 (`docs/subgraph-format.md`) on the CPU
//! backend: float32 elementwise kernels written as plain loops the compiler vectorizes, with
//! `exp`, `tanh` and `erf` as float32 approximations accurate to a few units in the last place
//! (well inside the format's 1e-4 tolerance), and data movement (transpose, channel shuffle,
//! split) on raw elements of any dtype. Work big enough to share is split over the session's
//! thread pool in disjoint pieces of whole rows, so results do not depend on the thread count.

use std::borrow::Cow;

use crate::dtype::DType;
use crate::error::Result;
use crate::offload::format::{Activation, Layout, Lrn, Op, TensorDesc};

use super::backend_err;
use super::isa::vectorized;
use super::kernels::{binary, for_each_piece};

/// Elements below which an elementwise kernel runs on one thread.
const PAR_MIN: usize = 1 << 15;

// ---- scalar functions (inlined into the loops, which then vectorize) ----

/// `v < lo ? lo : v`, as a comparison (vectorizes to a max instruction).
#[inline(always)]
fn at_least(v: f32, lo: f32) -> f32 {
    if v < lo {
        lo
    } else {
        v
    }
}

#[inline(always)]
fn at_most(v: f32, hi: f32) -> f32 {
    if v > hi {
        hi
    } else {
        v
    }
}

/// `exp(x)` for float32: `2^n * e^r` with `n = round(x / ln 2)` (by the 1.5 * 2^23 trick, so no
/// rounding call), `|r| <= ln 2 / 2`, `e^r` by its degree-6 Taylor polynomial (truncation error
/// below 2e-7 relative). Inputs are clamped to [-87, 88], where `2^n` stays a normal number;
/// `exp(-87)` is 1.6e-38, so below it the result is that tiny number instead of smaller.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so `n * LN2_HI` is exact for |n| < 256.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
    let x = at_most(at_least(x, -87.0), 88.0);
    let t = x * LOG2E + MAGIC;
    let n = t - MAGIC;
    // The low mantissa bits of `t` hold n (two's complement around 2^22).
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(((ni + 127) << 23) as u32)
}

#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `tanh(x) = sign(x) * (1 - e) / (1 + e)` with `e = exp(-2|x|)`; below |x| = 0.3, where
/// `1 - e` would cancel, its Taylor polynomial to degree 9 (relative error below 1e-7).
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let a = if x < 0.0 { -x } else { x };
    let e = exp(-2.0 * a);
    let t = (1.0 - e) / (1.0 + e);
    let a2 = a * a;
    let small = a
        * (1.0
            + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0 + a2 * (62.0 / 2835.0)))));
    let t = if a < 0.3 { small } else { t };
    if x < 0.0 {
        -t
    } else {
        t
    }
}

/// `erf(x)` by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7), odd-extended.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let a = if x < 0.0 { -x } else { x };
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152_1 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp(-a * a);
    if x < 0.0 {
        -y
    } else {
        y
    }
}

#[inline(always)]
pub(crate) fn hardswish(x: f32) -> f32 {
    x * at_most(at_least(x + 3.0, 0.0), 6.0) * (1.0 / 6.0)
}

#[inline(always)]
pub(crate) fn hardsigmoid(x: f32, alpha: f32, beta: f32) -> f32 {
    at_most(at_least(alpha * x + beta, 0.0), 1.0)
}

#[inline(always)]
pub(crate) fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

#[inline(always)]
pub(crate) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[inline(always)]
pub(crate) fn gelu_tanh(x: f32) -> f32 {
    // sqrt(2 / pi)
    const K: f32 = 0.797_884_6;
    0.5 * x * (1.0 + tanh(K * (x + 0.044_715 * x * x * x)))
}

#[inline(always)]
pub(crate) fn leaky_relu(x: f32, alpha: f32) -> f32 {
    if x >= 0.0 {
        x
    } else {
        alpha * x
    }
}

/// Evaluate `$body` with `$f` bound to the activation's scalar function: one monomorphized copy
/// of the loop per activation, so no per-element branch on the kind.
macro_rules! with_act {
    ($act:expr, |$f:ident| $body:expr) => {{
        use $crate::offload::format::Activation as A;
        match $act {
            A::None => {
                let $f = |x: f32| x;
                $body
            }
            A::Relu | A::Relu6 | A::Clip(..) => {
                let (lo, hi) = $act.bounds();
                let $f = move |x: f32| x.max(lo).min(hi);
                $body
            }
            A::Sigmoid => {
                let $f = sigmoid;
                $body
            }
            A::Tanh => {
                let $f = tanh;
                $body
            }
            A::Hardswish => {
                let $f = hardswish;
                $body
            }
            A::Hardsigmoid(alpha, beta) => {
                let $f = move |x: f32| hardsigmoid(x, alpha, beta);
                $body
            }
            A::Silu => {
                let $f = silu;
                $body
            }
            A::Gelu => {
                let $f = gelu;
                $body
            }
            A::GeluTanh => {
                let $f = gelu_tanh;
                $body
            }
            A::LeakyRelu(alpha) => {
                let $f = move |x: f32| leaky_relu(x, alpha);
                $body
            }
        }
    }};
}

/// The activation of one value.
#[cfg(test)]
pub(crate) fn activate(a: Activation, x: f32) -> f32 {
    with_act!(a, |f| f(x))
}

// ---- work splitting ----

/// Run `f(first_unit, piece)` over `y` cut into pieces of whole `unit`-element units, spread
/// over the session's pool when `y` is large enough (else one piece).
fn par_units(
    y: &mut [f32],
    unit: usize,
    f: impl Fn(usize, &mut [f32]) -> Result<()> + Sync,
) -> Result<()> {
    let unit = unit.max(1);
    let threads = crate::host::threadpool::current_parallelism();
    let units = y.len() / unit;
    if threads <= 1 || y.len() < PAR_MIN || units < 2 {
        return f(0, y);
    }
    // A few pieces per thread evens out uneven progress.
    let per = units.div_ceil(threads * 4).max(PAR_MIN / 8 / unit).max(1);
    let pieces: Vec<(usize, &mut [f32])> = y
        .chunks_mut(per * unit)
        .enumerate()
        .map(|(i, p)| (i * per, p))
        .collect();
    for_each_piece(pieces, |(u0, p)| f(u0, p))
}

// ---- elementwise ----

/// `y = act(x)`.
fn activation_op(a: Activation, x: &[f32], y: &mut [f32]) -> Result<()> {
    with_act!(a, |f| par_units(y, 1, |u0, p| {
        let n = p.len();
        vectorized(
            #[inline(always)]
            || {
                for (d, &v) in p.iter_mut().zip(&x[u0..u0 + n]) {
                    *d = f(v);
                }
            },
        );
        Ok(())
    }))
}

/// Add a per-channel bias (if any) and apply an activation that is not a clamp, in one pass:
/// the version-2 part of `kernels::bias_act` (same arguments).
pub(crate) fn bias_act(
    y: &mut [f32],
    bias: Option<&[f32]>,
    act: Activation,
    channels: usize,
    layout: Layout,
    plane: usize,
) {
    with_act!(act, |f| vectorized(
        #[inline(always)]
        || match (bias, layout) {
            (Some(b), Layout::Nhwc) => {
                for row in y.chunks_exact_mut(channels.max(1)) {
                    for (v, &bb) in row.iter_mut().zip(b) {
                        *v = f(*v + bb);
                    }
                }
            }
            (Some(b), Layout::Nchw) => {
                for (i, p) in y.chunks_exact_mut(plane.max(1)).enumerate() {
                    let bb = b[i % channels.max(1)];
                    for v in p {
                        *v = f(*v + bb);
                    }
                }
            }
            (None, _) => {
                for v in y.iter_mut() {
                    *v = f(*v);
                }
            }
        }
    ))
}

/// How the smaller operand of a binary op is broadcast over the output, when it is a block
/// pattern: padded to the output's rank, its shape is `[1]*k0 ++ out[k0..k1] ++ [1]*(r-k1)`, so
/// output element `i` reads element `(i / inner) % len` with `inner = prod(out[k1..])`.
fn block_broadcast(small: &[i64], out: &[i64]) -> Option<usize> {
    let r = out.len();
    if small.len() > r {
        return None;
    }
    let pad: Vec<i64> = std::iter::repeat_n(1, r - small.len())
        .chain(small.iter().copied())
        .collect();
    // The dims that are not 1 must be one run, each equal to the output's; the block is what
    // follows the run. (A 1 in both shapes belongs to neither side: a squeeze-excitation
    // scale [1,1,1,C] on [1,H,W,C] is a block pattern with a block of 1.)
    let Some(k0) = pad.iter().position(|&d| d != 1) else {
        return Some(out.iter().map(|&d| d as usize).product());
    };
    let k1 = pad.iter().rposition(|&d| d != 1).map_or(k0, |k| k + 1);
    if (k0..k1).any(|k| pad[k] != out[k]) {
        return None;
    }
    Some(out[k1..].iter().map(|&d| d as usize).product())
}

/// add / multiply / subtract / divide with numpy broadcasting and a fused activation, in one
/// pass over the output: same shapes and block broadcasts (a scalar, a per-channel vector in
/// either layout, a squeeze-excitation scale) split over the pool; other broadcasts go through
/// `kernels::binary`.
///
/// `op` is generic so that each operation's loops are compiled (and vectorised) for it; a
/// function pointer there cost a call per element. To keep the number of compiled loops down,
/// only clamps (relu, relu6, clip) are fused into them; another activation is applied to each
/// piece of the output right after it is written, while it is still in cache.
fn binary_op<O: Fn(f32, f32) -> f32 + Copy + Send + Sync>(
    op: O,
    act: Activation,
    xs: &[std::borrow::Cow<'_, [f32]>],
    shapes: &[&[i64]],
    ys: &[i64],
    y: &mut [f32],
) -> Result<()> {
    if act == Activation::None {
        binary_pass(op, |x| x, None, xs, shapes, ys, y)
    } else if act.is_clamp() {
        let (lo, hi) = act.bounds();
        binary_pass(op, move |x: f32| x.max(lo).min(hi), None, xs, shapes, ys, y)
    } else {
        binary_pass(op, |x| x, Some(act), xs, shapes, ys, y)
    }
}

/// Apply `act` to `p` in place: [`bias_act`] without a bias.
fn activate_in_place(act: Activation, p: &mut [f32]) {
    bias_act(p, None, act, 1, Layout::Nhwc, 1)
}

/// [`binary_op`]'s pass: `y = f(op(a, b))`, then `post` (if any) on each piece.
fn binary_pass<O, F>(
    op: O,
    f: F,
    post: Option<Activation>,
    xs: &[std::borrow::Cow<'_, [f32]>],
    shapes: &[&[i64]],
    ys: &[i64],
    y: &mut [f32],
) -> Result<()>
where
    O: Fn(f32, f32) -> f32 + Copy + Send + Sync,
    F: Fn(f32) -> f32 + Copy + Send + Sync,
{
    let finish = |p: &mut [f32]| {
        if let Some(a) = post {
            activate_in_place(a, p);
        }
    };
    let (a, b) = (&xs[0][..], &xs[1][..]);
    if shapes[0] == shapes[1] {
        return par_units(y, 1, |u0, p| {
            let n = p.len();
            vectorized(
                #[inline(always)]
                || {
                    for ((d, &u), &v) in p.iter_mut().zip(&a[u0..u0 + n]).zip(&b[u0..u0 + n]) {
                        *d = f(op(u, v));
                    }
                },
            );
            finish(p);
            Ok(())
        });
    }
    // One operand has the output's shape, the other a block pattern (`full` is that
    // operand; `flip` when it is the second).
    let pattern = if shapes[0] == ys {
        block_broadcast(shapes[1], ys).map(|inner| (a, b, inner, false))
    } else if shapes[1] == ys {
        block_broadcast(shapes[0], ys).map(|inner| (b, a, inner, true))
    } else {
        None
    };
    let Some((full, small, inner, flip)) = pattern else {
        binary(a, shapes[0], b, shapes[1], ys, y, |u, v| f(op(u, v)));
        finish(y);
        return Ok(());
    };
    let g = move |x: f32, s: f32| if flip { f(op(s, x)) } else { f(op(x, s)) };
    let len = small.len().max(1);
    if small.is_empty() {
        return Ok(());
    }
    if len == 1 {
        let s = small[0];
        return par_units(y, 1, |u0, p| {
            let n = p.len();
            vectorized(
                #[inline(always)]
                || {
                    for (d, &x) in p.iter_mut().zip(&full[u0..u0 + n]) {
                        *d = g(x, s);
                    }
                },
            );
            finish(p);
            Ok(())
        });
    }
    if inner == 1 {
        // The small operand repeats every `len` elements (e.g. a channel vector, NHWC).
        return par_units(y, len, |u0, p| {
            let xs = &full[u0 * len..u0 * len + p.len()];
            vectorized(
                #[inline(always)]
                || {
                    for (row, xr) in p.chunks_exact_mut(len).zip(xs.chunks_exact(len)) {
                        for ((d, &x), &s) in row.iter_mut().zip(xr).zip(small) {
                            *d = g(x, s);
                        }
                    }
                },
            );
            finish(p);
            Ok(())
        });
    }
    // Each element of the small operand covers a block of `inner` (NCHW channel planes).
    par_units(y, inner, |u0, p| {
        let xs = &full[u0 * inner..u0 * inner + p.len()];
        vectorized(
            #[inline(always)]
            || {
                for (k, (blk, xb)) in p
                    .chunks_exact_mut(inner)
                    .zip(xs.chunks_exact(inner))
                    .enumerate()
                {
                    let s = small[(u0 + k) % len];
                    for (d, &x) in blk.iter_mut().zip(xb) {
                        *d = g(x, s);
                    }
                }
            },
        );
        finish(p);
        Ok(())
    })
}

/// `y = act(x * scale[c] + shift[c])`, `c` the index along `axis`.
fn scale_shift(
    axis: usize,
    act: Activation,
    x: &[f32],
    shape: &[i64],
    scale: &[f32],
    shift: &[f32],
    y: &mut [f32],
) -> Result<()> {
    let c = shape[axis] as usize;
    let inner: usize = shape[axis + 1..].iter().map(|&d| d as usize).product();
    if c == 0 || y.is_empty() {
        return Ok(());
    }
    if scale.len() != c || shift.len() != c {
        return Err(backend_err("scale_shift: scale/shift length is not C"));
    }
    with_act!(act, |f| {
        if inner == 1 {
            // The channel is the innermost dim: rows of C.
            par_units(y, c, |u0, p| {
                let xs = &x[u0 * c..u0 * c + p.len()];
                vectorized(
                    #[inline(always)]
                    || {
                        for (row, xr) in p.chunks_exact_mut(c).zip(xs.chunks_exact(c)) {
                            for (((d, &v), &s), &t) in row.iter_mut().zip(xr).zip(scale).zip(shift)
                            {
                                *d = f(v * s + t);
                            }
                        }
                    },
                );
                Ok(())
            })
        } else {
            // Planes of `inner` elements, one channel each.
            par_units(y, inner, |u0, p| {
                let xs = &x[u0 * inner..u0 * inner + p.len()];
                vectorized(
                    #[inline(always)]
                    || {
                        for (k, (row, xr)) in p
                            .chunks_exact_mut(inner)
                            .zip(xs.chunks_exact(inner))
                            .enumerate()
                        {
                            let ch = (u0 + k) % c;
                            let (s, t) = (scale[ch], shift[ch]);
                            for (d, &v) in row.iter_mut().zip(xr) {
                                *d = f(v * s + t);
                            }
                        }
                    },
                );
                Ok(())
            })
        }
    })
}

/// `base^-beta` (base > 0), with beta = 0.75 (the usual LRN) by square roots.
#[inline(always)]
fn inv_pow(base: f32, beta: f32) -> f32 {
    if beta == 0.75 {
        let s = base.sqrt();
        1.0 / (s * s.sqrt())
    } else if beta == 0.5 {
        1.0 / base.sqrt()
    } else if beta == 1.0 {
        1.0 / base
    } else {
        base.powf(-beta)
    }
}

/// ONNX LRN across channels: `y = x / (bias + alpha / size * sq)^beta`, `sq` the sum of squares
/// over channels `c - floor((size-1)/2) ..= c + ceil((size-1)/2)` inside `0..C`.
fn lrn(l: &Lrn, x: &[f32], shape: &[i64], y: &mut [f32]) -> Result<()> {
    let (_, c, h, w) = l.layout.nchw(shape);
    let (c, hw) = (c as usize, (h * w) as usize);
    if c == 0 || y.is_empty() {
        return Ok(());
    }
    let before = (l.size - 1) / 2;
    let after = l.size - 1 - before;
    let k = l.alpha / l.size as f32;
    let (bias, beta) = (l.bias, l.beta);
    let window = move |ch: usize| ch.saturating_sub(before)..(ch + after + 1).min(c);
    match l.layout {
        Layout::Nchw => par_units(y, hw, |u0, p| {
            let mut sq = vec![0f32; hw];
            for (j, out) in p.chunks_exact_mut(hw).enumerate() {
                let plane = u0 + j;
                let (img, ch) = (plane / c, plane % c);
                let base = img * c * hw;
                sq.fill(0.0);
                for cc in window(ch) {
                    for (s, &v) in sq.iter_mut().zip(&x[base + cc * hw..base + (cc + 1) * hw]) {
                        *s += v * v;
                    }
                }
                let xr = &x[base + ch * hw..base + (ch + 1) * hw];
                for ((d, &v), &s) in out.iter_mut().zip(xr).zip(&sq) {
                    *d = v * inv_pow(bias + k * s, beta);
                }
            }
            Ok(())
        }),
        Layout::Nhwc => par_units(y, c, |u0, p| {
            let mut sq = vec![0f32; c];
            for (j, out) in p.chunks_exact_mut(c).enumerate() {
                let xr = &x[(u0 + j) * c..(u0 + j + 1) * c];
                for (s, &v) in sq.iter_mut().zip(xr) {
                    *s = v * v;
                }
                for (ch, (d, &v)) in out.iter_mut().zip(xr).enumerate() {
                    let s: f32 = sq[window(ch)].iter().sum();
                    *d = v * inv_pow(bias + k * s, beta);
                }
            }
            Ok(())
        }),
    }
}

/// Normalize each row of `d` values: `(x - mean) / sqrt(var + eps) * gamma + beta`.
fn layer_norm(
    d: usize,
    eps: f32,
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    y: &mut [f32],
) -> Result<()> {
    if d == 0 || y.is_empty() {
        return Ok(());
    }
    if gamma.len() != d || beta.len() != d {
        return Err(backend_err("layer_norm: gamma/beta length is not D"));
    }
    par_units(y, d, |u0, p| {
        for (j, out) in p.chunks_exact_mut(d).enumerate() {
            let xr = &x[(u0 + j) * d..(u0 + j + 1) * d];
            let mean = xr.iter().sum::<f32>() / d as f32;
            let var = xr.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for (((o, &v), &g), &b) in out.iter_mut().zip(xr).zip(gamma).zip(beta) {
                *o = (v - mean) * inv * g + b;
            }
        }
        Ok(())
    })
}

// ---- data movement (any element type) ----

/// A byte buffer as elements of `N` bytes (`[u8; N]` has alignment 1, so any buffer works).
fn elems<const N: usize>(b: &[u8]) -> &[[u8; N]] {
    // SAFETY: `[u8; N]` has size N and alignment 1; the slice covers `len / N * N <= len` bytes
    // of `b`, borrowed for the same lifetime.
    unsafe { std::slice::from_raw_parts(b.as_ptr().cast(), b.len() / N) }
}

fn elems_mut<const N: usize>(b: &mut [u8]) -> &mut [[u8; N]] {
    // SAFETY: as in `elems`; the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast(), b.len() / N) }
}

/// Run a data-movement op (transpose, channel_shuffle, split) on raw elements of `elem` bytes:
/// exact for every dtype (the parser makes outputs share the data's dtype and quantization).
pub(crate) fn move_bytes(
    op: &Op,
    elem: usize,
    x: &[u8],
    shape: &[i64],
    out_shapes: &[&[i64]],
    ys: &mut [&mut [u8]],
) -> Result<()> {
    fn run<const N: usize>(
        op: &Op,
        x: &[u8],
        shape: &[i64],
        out_shapes: &[&[i64]],
        ys: &mut [&mut [u8]],
    ) -> Result<()> {
        let x = elems::<N>(x);
        match op {
            Op::Transpose { axes } => match ys {
                [y] => transpose(x, shape, axes, elems_mut::<N>(y)),
                _ => Err(backend_err("transpose has one output")),
            },
            Op::ChannelShuffle { layout, groups } => match ys {
                [y] => channel_shuffle(*layout, *groups, x, shape, elems_mut::<N>(y)),
                _ => Err(backend_err("channel_shuffle has one output")),
            },
            Op::Split { axis } => {
                let sizes: Vec<usize> = out_shapes.iter().map(|s| s[*axis] as usize).collect();
                let mut outs: Vec<&mut [[u8; N]]> =
                    ys.iter_mut().map(|y| elems_mut::<N>(y)).collect();
                split(*axis, x, shape, &sizes, &mut outs)
            }
            other => Err(backend_err(format!("{} does not move data", other.name()))),
        }
    }
    match elem {
        1 => run::<1>(op, x, shape, out_shapes, ys),
        2 => run::<2>(op, x, shape, out_shapes, ys),
        4 => run::<4>(op, x, shape, out_shapes, ys),
        8 => run::<8>(op, x, shape, out_shapes, ys),
        other => Err(backend_err(format!("elements of {other} bytes"))),
    }
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// `y = np.transpose(x, axes)` for a `shape`d `x`.
pub(crate) fn transpose<T: Copy + Send + Sync>(
    x: &[T],
    shape: &[i64],
    axes: &[usize],
    y: &mut [T],
) -> Result<()> {
    let ishape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let n: usize = ishape.iter().product();
    if x.len() != n || y.len() != n || axes.len() != ishape.len() {
        return Err(backend_err(
            "transpose: buffer sizes do not match the shape",
        ));
    }
    if n == 0 {
        return Ok(());
    }
    let ist = strides(&ishape);
    let oshape: Vec<usize> = axes.iter().map(|&a| ishape[a]).collect();
    // Input stride of each output dim.
    let step: Vec<usize> = axes.iter().map(|&a| ist[a]).collect();
    let r = oshape.len();
    let last = oshape[r - 1];
    let last_step = step[r - 1];
    let rows = n / last;
    let body = |row0: usize, out: &mut [T]| {
        // Multi-index of output row `row0` over dims 0..r-1.
        let mut idx = vec![0usize; r - 1];
        let mut rem = row0;
        for i in (0..r - 1).rev() {
            idx[i] = rem % oshape[i];
            rem /= oshape[i];
        }
        for orow in out.chunks_exact_mut(last) {
            let base: usize = idx.iter().zip(&step).map(|(&i, &s)| i * s).sum();
            if last_step == 1 {
                orow.copy_from_slice(&x[base..base + last]);
            } else {
                for (k, d) in orow.iter_mut().enumerate() {
                    *d = x[base + k * last_step];
                }
            }
            for i in (0..r - 1).rev() {
                idx[i] += 1;
                if idx[i] < oshape[i] {
                    break;
                }
                idx[i] = 0;
            }
        }
    };
    let threads = crate::host::threadpool::current_parallelism();
    if threads <= 1 || n < PAR_MIN || rows < 2 {
        body(0, y);
        return Ok(());
    }
    let per = rows.div_ceil(threads * 4).max(1);
    let pieces: Vec<(usize, &mut [T])> = y
        .chunks_mut(per * last)
        .enumerate()
        .map(|(i, p)| (i * per, p))
        .collect();
    for_each_piece(pieces, |(r0, p)| {
        body(r0, p);
        Ok(())
    })
}

/// Output channel `j * g + i` = input channel `i * (C / g) + j`.
pub(crate) fn channel_shuffle<T: Copy + Send + Sync>(
    layout: Layout,
    groups: usize,
    x: &[T],
    shape: &[i64],
    y: &mut [T],
) -> Result<()> {
    let (n, c, h, w) = layout.nchw(shape);
    let (n, c, hw) = (n as usize, c as usize, (h * w) as usize);
    if x.len() != n * c * hw || y.len() != x.len() || groups == 0 || c % groups != 0 {
        return Err(backend_err(
            "channel_shuffle: buffer sizes do not match the shape",
        ));
    }
    let per = c / groups;
    let src = |oc: usize| (oc % groups) * per + oc / groups;
    match layout {
        Layout::Nchw => {
            for b in 0..n {
                for oc in 0..c {
                    let (o, i) = ((b * c + oc) * hw, (b * c + src(oc)) * hw);
                    y[o..o + hw].copy_from_slice(&x[i..i + hw]);
                }
            }
        }
        Layout::Nhwc => {
            if c == 0 || y.is_empty() {
                return Ok(());
            }
            // Each pixel's channels are a [groups, C / groups] matrix, transposed. ShuffleNet's
            // group counts get a loop with the group count fixed, which writes each output
            // channel group in order from `groups` input rows (the general gather through an
            // index map took about 1 ns per element).
            let body = |x: &[T], y: &mut [T]| match groups {
                2 => shuffle_pixels::<T, 2>(per, x, y),
                3 => shuffle_pixels::<T, 3>(per, x, y),
                4 => shuffle_pixels::<T, 4>(per, x, y),
                8 => shuffle_pixels::<T, 8>(per, x, y),
                _ => {
                    let map: Vec<usize> = (0..c).map(src).collect();
                    for (orow, irow) in y.chunks_exact_mut(c).zip(x.chunks_exact(c)) {
                        for (d, &s) in orow.iter_mut().zip(&map) {
                            *d = irow[s];
                        }
                    }
                }
            };
            let threads = crate::host::threadpool::current_parallelism();
            let pixels = y.len() / c;
            if threads <= 1 || y.len() < PAR_MIN || pixels < 2 {
                body(x, y);
                return Ok(());
            }
            let per_piece = pixels.div_ceil(threads * 4).max(1) * c;
            let pieces: Vec<(usize, &mut [T])> = y.chunks_mut(per_piece).enumerate().collect();
            for_each_piece(pieces, |(i, p)| {
                let x = &x[i * per_piece..i * per_piece + p.len()];
                body(x, p);
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// NHWC channel shuffle of whole pixels (`G * per` channels each): output channel
/// `j * G + i` = input channel `i * per + j`.
fn shuffle_pixels<T: Copy, const G: usize>(per: usize, x: &[T], y: &mut [T]) {
    let c = G * per;
    for (orow, irow) in y.chunks_exact_mut(c).zip(x.chunks_exact(c)) {
        let rows: [&[T]; G] = std::array::from_fn(|i| &irow[i * per..(i + 1) * per]);
        for (j, o) in orow.chunks_exact_mut(G).enumerate() {
            for (d, row) in o.iter_mut().zip(&rows) {
                *d = row[j];
            }
        }
    }
}

/// Consecutive pieces of `x` along `axis` into `ys` (each output's extent along `axis` is
/// `sizes[k]`).
pub(crate) fn split<T: Copy>(
    axis: usize,
    x: &[T],
    shape: &[i64],
    sizes: &[usize],
    ys: &mut [&mut [T]],
) -> Result<()> {
    let outer: usize = shape[..axis].iter().map(|&d| d as usize).product();
    let inner: usize = shape[axis + 1..].iter().map(|&d| d as usize).product();
    let total = shape[axis] as usize;
    if sizes.iter().sum::<usize>() != total
        || sizes.len() != ys.len()
        || x.len() != outer * total * inner
    {
        return Err(backend_err("split: buffer sizes do not match the shapes"));
    }
    let mut off = 0;
    for (y, &s) in ys.iter_mut().zip(sizes) {
        let chunk = s * inner;
        if y.len() != outer * chunk {
            return Err(backend_err(
                "split: an output buffer does not match its shape",
            ));
        }
        for o in 0..outer {
            let src = o * total * inner + off * inner;
            y[o * chunk..(o + 1) * chunk].copy_from_slice(&x[src..src + chunk]);
        }
        off += s;
    }
    Ok(())
}

/// Run a version-2 op (or add/multiply with a version-2 activation) on float32 operands; the
/// entry `kernels::generic` forwards to. `split` writes only its first output here (the backend
/// runs it through [`split`] with every output).
pub(crate) fn generic(
    op: &Op,
    xs: &[std::borrow::Cow<'_, [f32]>],
    shapes: &[&[i64]],
    ys: &[i64],
    y: &mut [f32],
) -> Result<()> {
    match op {
        Op::Add { activation } => binary_op(|a, b| a + b, *activation, xs, shapes, ys, y),
        Op::Multiply { activation } => binary_op(|a, b| a * b, *activation, xs, shapes, ys, y),
        Op::Subtract { activation } => binary_op(|a, b| a - b, *activation, xs, shapes, ys, y),
        Op::Divide { activation } => binary_op(|a, b| a / b, *activation, xs, shapes, ys, y),
        Op::Activation(a) => activation_op(*a, &xs[0], y),
        Op::ScaleShift { axis, activation } => {
            scale_shift(*axis, *activation, &xs[0], shapes[0], &xs[1], &xs[2], y)
        }
        Op::Lrn(l) => lrn(l, &xs[0], shapes[0], y),
        Op::Transpose { axes } => transpose(&xs[0], shapes[0], axes, y),
        Op::ChannelShuffle { layout, groups } => {
            channel_shuffle(*layout, *groups, &xs[0], shapes[0], y)
        }
        Op::Split { axis } => {
            let first = ys[*axis] as usize;
            let rest = shapes[0][*axis] as usize - first;
            let mut scratch = vec![0f32; xs[0].len() - y.len()];
            split(
                *axis,
                &xs[0],
                shapes[0],
                &[first, rest],
                &mut [y, &mut scratch],
            )
        }
        Op::LayerNorm { axis, epsilon } => layer_norm(
            shapes[0][*axis] as usize,
            *epsilon,
            &xs[0],
            &xs[1],
            &xs[2],
            y,
        ),
        other => Err(backend_err(format!(
            "{} is not a version-2 op of the cpu backend",
            other.name()
        ))),
    }
}

// ---- quantized ops of the generic path ----

/// The per-tensor `(scale, zero point)` of an 8-bit tensor, or `None`.
fn q8(desc: &TensorDesc) -> Option<(f32, i32)> {
    let q = desc.quant.as_ref()?;
    (desc.is_quantized_8bit() && q.per_tensor() && q.zero_point.len() == 1)
        .then(|| (q.scale[0], q.zero_point[0]))
}

/// The real value of each of the 256 codes of an 8-bit tensor, computed as TVM's dequantize
/// (and `load_f32`) computes each element: `scale * (q - zero_point)` in float32.
fn dequantize_table(dtype: DType, scale: f32, zero: i32) -> [f32; 256] {
    let d = Dequant::new(dtype, (scale, zero));
    std::array::from_fn(|b| d.value(b as u8))
}

/// `v` rounded to the nearest integer, ties to even, for `|v| < 2^22`; `v` itself beyond,
/// where the caller's clamp to 8 bits gives what rounding first would (the value stays far
/// outside the range, with its sign; NaN stays NaN). For `|v| < 2^22`, `v + 1.5 * 2^23` lies in
/// (2^23, 2^24), where float32 values are exactly the integers, so the addition rounds `v` to
/// an integer (to nearest, ties to even: the default rounding mode) and subtracting the
/// constant again is exact. Unlike `f32::round_ties_even`, which on baseline x86_64 is a call
/// to libm's `rintf` per element, this vectorizes.
#[inline(always)]
fn round_ties_even_small(v: f32) -> f32 {
    if v.abs() < 4_194_304.0 {
        (v + super::ROUND) - super::ROUND
    } else {
        v
    }
}

/// TVM's quantize of each value (as the backend's `quantize`: `clip(round(x / scale) +
/// zero_point)`, ties to even), into 8-bit codes of `dtype`.
fn quantize_into(y: &[f32], dtype: DType, scale: f32, zero: i32, out: &mut [u8]) {
    let q = Quant::new(dtype, (scale, zero));
    vectorized(
        #[inline(always)]
        || {
            for (o, &v) in out.iter_mut().zip(y) {
                *o = q.code(v);
            }
        },
    );
}

/// An op of the generic path whose operands and output are all 8-bit with per-tensor
/// parameters (a QDQ model's add, pools, concatenation, reshape): the same arithmetic as
/// dequantizing each operand with `load_f32`, the float32 op and `store_f32` (bit for bit:
/// the same float32 values in, the same kernel, the same rounding), but the dequantize is a
/// lookup in a 256-entry table per operand and the quantize vectorizes. A reshape between two
/// tensors with the same dtype and parameters is a copy. `None` when some operand or the
/// output is not 8-bit per tensor (the caller then takes the general path).
pub(crate) fn quantized_generic(
    op: &Op,
    ins: &[&[u8]],
    descs: &[&TensorDesc],
    odesc: &TensorDesc,
    out: &mut [u8],
) -> Option<Result<()>> {
    let (os, oz) = q8(odesc)?;
    let params = descs.iter().map(|d| q8(d)).collect::<Option<Vec<_>>>()?;
    if ins.len() != descs.len()
        || out.len() != odesc.num_elements()
        || ins
            .iter()
            .zip(descs)
            .any(|(b, d)| b.len() != d.num_elements())
    {
        return Some(Err(backend_err(
            "buffer sizes do not match the description",
        )));
    }
    if matches!(op, Op::Reshape) && descs[0].dtype == odesc.dtype && params[0] == (os, oz) {
        out.copy_from_slice(ins[0]);
        return Some(Ok(()));
    }
    if let Some(r) = on_codes(op, ins, descs, &params, odesc, (os, oz), out) {
        return Some(r);
    }
    if let Some(r) = add_8bit(op, ins, descs, &params, odesc, (os, oz), out) {
        return Some(r);
    }
    let xs: Vec<Cow<'_, [f32]>> = ins
        .iter()
        .zip(descs)
        .zip(&params)
        .map(|((b, d), &(s, z))| {
            let t = dequantize_table(d.dtype, s, z);
            Cow::Owned(b.iter().map(|&v| t[v as usize]).collect())
        })
        .collect();
    let shapes: Vec<&[i64]> = descs.iter().map(|d| d.shape.as_slice()).collect();
    let mut y = vec![0f32; out.len()];
    Some(
        super::kernels::generic(op, &xs, &shapes, &odesc.shape, &mut y)
            .map(|()| quantize_into(&y, odesc.dtype, os, oz, out)),
    )
}

/// An 8-bit tensor's codes' values as TVM's dequantize computes them (`scale * (q -
/// zero_point)` in float32), in operations that vectorize: an int8 code's `q` is `code ^
/// 0x80` less 128, exactly, so one expression serves both dtypes. [`dequantize_table`] is
/// this per code.
#[derive(Clone, Copy)]
struct Dequant {
    flip: u8,
    off: f32,
    scale: f32,
    zero: f32,
}

impl Dequant {
    fn new(dtype: DType, (scale, zero): (f32, i32)) -> Dequant {
        let signed = dtype == DType::I8;
        Dequant {
            flip: if signed { 0x80 } else { 0 },
            off: if signed { 128.0 } else { 0.0 },
            scale,
            zero: zero as f32,
        }
    }

    #[inline(always)]
    fn value(self, c: u8) -> f32 {
        self.scale * (((c ^ self.flip) as f32 - self.off) - self.zero)
    }
}

/// TVM's quantize of one value (as the backend's `quantize`: `clip(round(x / scale) +
/// zero_point)`, ties to even; [`quantize_into`] is this per value), in operations that
/// vectorize: the rounding without `rintf` ([`round_ties_even_small`]), the clamp as
/// comparisons (`f32::clamp`'s check of its bounds kept loops scalar; a NaN passes), and the
/// integer to its byte by the bits of `v + ROUND`, as `Requant::one` does (an `as i8` or `as
/// u8` per element does not vectorize); a NaN becomes 0, as `as` makes it.
#[derive(Clone, Copy)]
struct Quant {
    scale: f32,
    zero: f32,
    lo: f32,
    hi: f32,
}

impl Quant {
    fn new(dtype: DType, (scale, zero): (f32, i32)) -> Quant {
        let (lo, hi) = if dtype == DType::I8 {
            (-128.0, 127.0)
        } else {
            (0.0, 255.0)
        };
        Quant {
            scale,
            zero: zero as f32,
            lo,
            hi,
        }
    }

    #[inline(always)]
    fn code(self, v: f32) -> u8 {
        let v = round_ties_even_small(v / self.scale) + self.zero;
        let v = if v < self.lo { self.lo } else { v };
        let v = if v > self.hi { self.hi } else { v };
        let i = (v + super::ROUND).to_bits() as i32 - super::ROUND.to_bits() as i32;
        if v.is_nan() {
            0
        } else {
            i as u8
        }
    }
}

/// Elements per piece of [`add_8bit`] spread over the pool.
const ADD_PIECE: usize = 16384;

/// [`quantized_generic`] for a QDQ model's residual add: two 8-bit operands of the output's
/// shape and a clamp activation (or none), element by element in one vectorized pass with no
/// float32 copies: each operand's value ([`Dequant`]), the float32 sum, the activation's clamp
/// as `binary_op` applies it, and [`quantize_into`]'s rounding ([`Quant`]).
/// The same bytes as the general path; `None` (that path) for other ops, shapes or
/// activations.
fn add_8bit(
    op: &Op,
    ins: &[&[u8]],
    descs: &[&TensorDesc],
    params: &[(f32, i32)],
    odesc: &TensorDesc,
    (os, oz): (f32, i32),
    out: &mut [u8],
) -> Option<Result<()>> {
    let Op::Add { activation } = op else {
        return None;
    };
    if !activation.is_clamp()
        || ins.len() != 2
        || descs.iter().any(|d| d.shape != odesc.shape)
        || ins.iter().any(|x| x.len() != out.len())
    {
        return None;
    }
    let (fa, fb) = (
        Dequant::new(descs[0].dtype, params[0]),
        Dequant::new(descs[1].dtype, params[1]),
    );
    let clamp = (*activation != Activation::None).then(|| activation.bounds());
    let quant = Quant::new(odesc.dtype, (os, oz));
    let (a, b) = (ins[0], ins[1]);
    let pieces: Vec<(usize, &mut [u8])> = out
        .chunks_mut(ADD_PIECE)
        .enumerate()
        .map(|(i, o)| (i * ADD_PIECE, o))
        .collect();
    Some(for_each_piece(pieces, |(i0, o)| {
        let n = o.len();
        let (a, b) = (&a[i0..i0 + n], &b[i0..i0 + n]);
        vectorized(
            #[inline(always)]
            || {
                for ((d, &u), &v) in o.iter_mut().zip(a).zip(b) {
                    let x = fa.value(u) + fb.value(v);
                    let x = match clamp {
                        Some((lo, hi)) => x.max(lo).min(hi),
                        None => x,
                    };
                    *d = quant.code(x);
                }
            },
        );
        Ok(())
    }))
}

/// Each code of an input (`dtype`, `scale`, `zero`) as the output's code: the table's
/// value quantized by [`quantize_into`], which is what the general path gives for an op that
/// only moves or selects values.
fn code_map(dtype: DType, (s, z): (f32, i32), odtype: DType, (os, oz): (f32, i32)) -> [u8; 256] {
    let t = dequantize_table(dtype, s, z);
    let mut m = [0u8; 256];
    quantize_into(&t, odtype, os, oz, &mut m);
    m
}

/// [`quantized_generic`] for ops that only move or select values, on the 8-bit codes
/// themselves: a concatenation (each input's codes through its [`code_map`], a copy where that
/// is the identity) and an NHWC max pool (the largest code of the window, where the dequantize
/// table is finite and non-decreasing in the codes' order, so that the largest value is the
/// largest code's), instead of a float32 value per element and a quantize. The same bytes as
/// the general path; `None` (that path) for other ops or shapes.
fn on_codes(
    op: &Op,
    ins: &[&[u8]],
    descs: &[&TensorDesc],
    params: &[(f32, i32)],
    odesc: &TensorDesc,
    oparams: (f32, i32),
    out: &mut [u8],
) -> Option<Result<()>> {
    let ys = &odesc.shape;
    let dims = |s: &[i64]| -> Option<usize> {
        s.iter()
            .try_fold(1usize, |a, &d| a.checked_mul(usize::try_from(d).ok()?))
    };
    match op {
        Op::Concatenate { axis } => {
            let axis = *axis;
            if axis >= ys.len()
                || descs.iter().any(|d| {
                    d.shape.len() != ys.len()
                        || d.shape
                            .iter()
                            .zip(ys)
                            .enumerate()
                            .any(|(i, (a, b))| i != axis && a != b)
                })
            {
                return None;
            }
            let outer = dims(&ys[..axis])?;
            let inner = dims(&ys[axis + 1..])?;
            let chunks = descs
                .iter()
                .map(|d| inner.checked_mul(usize::try_from(d.shape[axis]).ok()?))
                .collect::<Option<Vec<usize>>>()?;
            let total = chunks.iter().try_fold(0usize, |a, &c| a.checked_add(c))?;
            if outer.checked_mul(total) != Some(out.len())
                || ins
                    .iter()
                    .zip(&chunks)
                    .any(|(x, &c)| outer.checked_mul(c) != Some(x.len()))
            {
                return None;
            }
            if total == 0 {
                return Some(Ok(()));
            }
            let mut off = 0;
            for (((x, d), &p), &chunk) in ins.iter().zip(descs).zip(params).zip(&chunks) {
                let map = code_map(d.dtype, p, odesc.dtype, oparams);
                let same = map.iter().enumerate().all(|(i, &v)| v as usize == i);
                // Otherwise the map's own arithmetic per element, which vectorizes (a lookup
                // per byte does not).
                let (from, to) = (Dequant::new(d.dtype, p), Quant::new(odesc.dtype, oparams));
                if chunk > 0 && same {
                    for (dst, src) in out.chunks_exact_mut(total).zip(x.chunks_exact(chunk)) {
                        dst[off..off + chunk].copy_from_slice(src);
                    }
                } else if chunk > 0 {
                    vectorized(
                        #[inline(always)]
                        || {
                            for (dst, src) in out.chunks_exact_mut(total).zip(x.chunks_exact(chunk))
                            {
                                for (o, &v) in dst[off..off + chunk].iter_mut().zip(src) {
                                    *o = to.code(from.value(v));
                                }
                            }
                        },
                    );
                }
                off += chunk;
            }
            Some(Ok(()))
        }
        Op::GlobalAvgPool2d(Layout::Nhwc) if ins.len() == 1 && descs[0].shape.len() == 4 => {
            // The float32 kernel's sums (`kernels::generic`: each channel over the pixels in
            // pixel order, then divided by their count) of the codes' values, without the
            // float32 copy of the input.
            let (n, c, h, w) = Layout::Nhwc.nchw(&descs[0].shape);
            if ys.len() != 4 || ys[0] != n || ys[1] != 1 || ys[2] != 1 || ys[3] != c {
                return None;
            }
            let (n, c, hw) = (
                usize::try_from(n).ok()?,
                usize::try_from(c).ok()?,
                usize::try_from(h.checked_mul(w)?).ok()?,
            );
            if ins[0].len() != n.checked_mul(hw)?.checked_mul(c)? || out.len() != n * c {
                return None;
            }
            let (from, to) = (
                Dequant::new(descs[0].dtype, params[0]),
                Quant::new(odesc.dtype, oparams),
            );
            let mut sums = vec![0f32; c];
            for (b, ob) in out.chunks_exact_mut(c.max(1)).enumerate().take(n) {
                let xb = &ins[0][b * hw * c..(b + 1) * hw * c];
                vectorized(
                    #[inline(always)]
                    || {
                        sums.fill(0.0);
                        for row in xb.chunks_exact(c.max(1)) {
                            for (a, &v) in sums.iter_mut().zip(row) {
                                *a += from.value(v);
                            }
                        }
                        for (o, &a) in ob.iter_mut().zip(&sums) {
                            *o = to.code(a / hw.max(1) as f32);
                        }
                    },
                );
            }
            Some(Ok(()))
        }
        Op::MaxPool2d(p) if p.layout == Layout::Nhwc && ins.len() == 1 => {
            let (d, x) = (descs[0], ins[0]);
            // Codes in increasing order of their value: uint8 as is, int8 from -128 (`k ^
            // 0x80` is the `k`-th).
            let flip = if d.dtype == DType::I8 { 0x80u8 } else { 0 };
            let t = dequantize_table(d.dtype, params[0].0, params[0].1);
            let tk: Vec<f32> = (0..256).map(|k| t[k ^ flip as usize]).collect();
            // `<=` is false for a NaN; finite values are all above the float pool's start
            // (`f32::MIN`), so its maximum is the largest code's value.
            if !tk.iter().all(|v| v.is_finite()) || !tk.windows(2).all(|w| w[0] <= w[1]) {
                return None;
            }
            let mut map = [0u8; 256];
            quantize_into(&tk, odesc.dtype, oparams.0, oparams.1, &mut map);
            let identity = (0..256).all(|k| map[k] as usize == k ^ flip as usize);
            let (from, to) = (
                Dequant::new(d.dtype, params[0]),
                Quant::new(odesc.dtype, oparams),
            );
            let mut empty = [0u8; 1];
            quantize_into(&[f32::MIN], odesc.dtype, oparams.0, oparams.1, &mut empty);
            if d.shape.len() != 4 || ys.len() != 4 {
                return None;
            }
            let (n, h, w, c) = (d.shape[0], d.shape[1], d.shape[2], d.shape[3]);
            let (oh, ow) = (ys[1], ys[2]);
            if ys[0] != n || ys[3] != c {
                return None;
            }
            let (h, w, c, oh, ow) = (
                usize::try_from(h).ok()?,
                usize::try_from(w).ok()?,
                usize::try_from(c).ok()?,
                usize::try_from(oh).ok()?,
                usize::try_from(ow).ok()?,
            );
            if dims(&d.shape)? != x.len() || dims(ys)? != out.len() {
                return None;
            }
            if out.is_empty() {
                return Some(Ok(()));
            }
            let (rows, cols) = (
                super::kernels::pool_axis(p, 0, h, oh),
                super::kernels::pool_axis(p, 1, w, ow),
            );
            let pieces: Vec<(usize, &mut [u8])> = out.chunks_mut(ow * c).enumerate().collect();
            Some(for_each_piece(pieces, |(row, orow)| {
                let (b, oy) = (row / oh, row % oh);
                let ry = &rows[oy];
                vectorized(
                    #[inline(always)]
                    || {
                        for (o, cx) in orow.chunks_exact_mut(c).zip(&cols) {
                            if ry.taps.is_empty() || cx.taps.is_empty() {
                                o.fill(empty[0]);
                                continue;
                            }
                            // The largest key of the window (keys in value order), in `o`.
                            let mut first = true;
                            for &iy in &ry.taps {
                                for &ix in &cx.taps {
                                    let t0 = ((b * h + iy) * w + ix) * c;
                                    let src = &x[t0..t0 + c];
                                    if first {
                                        for (a, &v) in o.iter_mut().zip(src) {
                                            *a = v ^ flip;
                                        }
                                        first = false;
                                    } else {
                                        for (a, &v) in o.iter_mut().zip(src) {
                                            *a = (*a).max(v ^ flip);
                                        }
                                    }
                                }
                            }
                            // The key's code in the output: itself back when the output has
                            // the input's parameters, else the map's arithmetic (`Dequant`
                            // of the code, `Quant`), which vectorizes.
                            if identity {
                                for a in o.iter_mut() {
                                    *a ^= flip;
                                }
                            } else {
                                for a in o.iter_mut() {
                                    *a = to.code(from.value(*a ^ flip));
                                }
                            }
                        }
                    },
                );
                Ok(())
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "ops_tests.rs"]
mod tests;
