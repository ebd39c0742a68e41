//! Tests of `ops.rs`: every version-2 op and activation against the format's definitions
//! computed in f64 here, in both layouts where one applies, on 1 and 2 threads, on odd sizes,
//! with outputs poisoned (NaN or 0xAA) before each run.

use std::borrow::Cow;

use super::*;
use crate::host::threadpool::ThreadPool;

/// Deterministic values in [-r, r).
fn data(n: usize, seed: u32, r: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0) * r
        })
        .collect()
}

/// erf in f64: its Taylor series below |x| = 3, the continued fraction of erfc above.
fn erf64(x: f64) -> f64 {
    let a = x.abs();
    let v = if a < 3.0 {
        let (mut term, mut sum, mut n) = (a, a, 0.0);
        while term.abs() > 1e-17 * sum.abs().max(1e-300) {
            n += 1.0;
            term *= -a * a / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let mut k = a;
        for n in (1..=60).rev() {
            k = a + (n as f64 / 2.0) / k;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / k
    };
    v.copysign(x)
}

/// The format's definition of each activation, in f64.
fn act64(a: Activation, x: f64) -> f64 {
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    match a {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::Relu6 => x.clamp(0.0, 6.0),
        Activation::Clip(lo, hi) => x.clamp(lo as f64, hi as f64),
        Activation::Sigmoid => sig(x),
        Activation::Tanh => x.tanh(),
        Activation::Hardswish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
        Activation::Hardsigmoid(al, be) => (al as f64 * x + be as f64).clamp(0.0, 1.0),
        Activation::Silu => x * sig(x),
        Activation::Gelu => 0.5 * x * (1.0 + erf64(x / 2f64.sqrt())),
        Activation::GeluTanh => {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
        }
        Activation::LeakyRelu(al) => {
            if x >= 0.0 {
                x
            } else {
                al as f64 * x
            }
        }
    }
}

const ALL: [Activation; 12] = [
    Activation::None,
    Activation::Relu,
    Activation::Relu6,
    Activation::Clip(-0.5, 1.5),
    Activation::Sigmoid,
    Activation::Tanh,
    Activation::Hardswish,
    Activation::Hardsigmoid(0.2, 0.5),
    Activation::Silu,
    Activation::Gelu,
    Activation::GeluTanh,
    Activation::LeakyRelu(0.1),
];

/// `got` equals `want` within 1e-5 absolute plus 1e-5 relative (ten times tighter than the
/// format's tolerance); NaN (a poisoned element left unwritten) never passes.
fn close(what: &str, got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(
            err <= 1e-5 + 1e-5 * w.abs(),
            "{what}: y[{i}] = {g}, want {w} (error {err:e})"
        );
    }
}

/// Run `f` on 1 and 2 threads of a session pool.
fn on_threads(mut f: impl FnMut(usize)) {
    for t in [1, 2] {
        let pool = ThreadPool::new(t);
        pool.install(|| f(t));
    }
}

/// Run `op` through the backend's float32 entry point on a NaN-poisoned output.
fn run(op: &Op, xs: &[Vec<f32>], shapes: &[&[i64]], ys: &[i64]) -> Vec<f32> {
    let n: usize = ys.iter().map(|&d| d as usize).product();
    let cows: Vec<Cow<'_, [f32]>> = xs.iter().map(|x| Cow::Borrowed(&x[..])).collect();
    let mut y = vec![f32::NAN; n];
    super::super::kernels::generic(op, &cows, shapes, ys, &mut y).expect("runs");
    y
}

#[test]
fn scalar_approximations_are_accurate_over_the_float_range() {
    // Dense sweep plus the extremes (saturation, tiny values, the exp clamp).
    let mut xs: Vec<f32> = (-200_000..=200_000).map(|i| i as f32 * 1e-4).collect();
    xs.extend([
        -1e4, -100.0, -88.5, -87.0, -1e-6, 0.0, 1e-6, 87.0, 88.5, 100.0, 1e4,
    ]);
    for a in ALL {
        let got: Vec<f32> = xs.iter().map(|&x| activate(a, x)).collect();
        let want: Vec<f64> = xs.iter().map(|&x| act64(a, x as f64)).collect();
        close(a.name(), &got, &want);
    }
    // tanh and silu keep their relative accuracy near 0 too.
    for i in 0..2000 {
        let x = 1e-6f32 * 1.01f32.powi(i);
        for (name, g, w) in [
            ("tanh", tanh(x) as f64, (x as f64).tanh()),
            ("tanh", tanh(-x) as f64, (-x as f64).tanh()),
            ("silu", silu(x) as f64, act64(Activation::Silu, x as f64)),
        ] {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs(),
                "{name}({x}) = {g}, want {w}"
            );
        }
    }
    for &x in &[
        -80.0f32, -20.0, -1.0, -1e-3, 0.0, 1e-3, 0.5, 1.0, 20.0, 80.0,
    ] {
        let (g, w) = (exp(x) as f64, (x as f64).exp());
        assert!((g - w).abs() <= 4e-7 * w, "exp({x}) = {g}, want {w}");
    }
}

#[test]
fn activation_op_matches_the_definition_on_1_and_2_threads() {
    // 40_001 elements: above the parallel threshold, odd.
    for n in [7usize, 40_001] {
        let x = data(n, 3, 8.0);
        for a in ALL {
            let want: Vec<f64> = x.iter().map(|&v| act64(a, v as f64)).collect();
            on_threads(|t| {
                let y = run(
                    &Op::Activation(a),
                    std::slice::from_ref(&x),
                    &[&[n as i64]],
                    &[n as i64],
                );
                close(&format!("{} n={n} threads={t}", a.name()), &y, &want);
            });
        }
    }
}

#[test]
fn fused_bias_activation_nhwc_and_nchw() {
    let (c, plane, n) = (5usize, 13usize, 3usize);
    let x = data(n * c * plane, 4, 4.0);
    let b = data(c, 5, 1.0);
    for a in ALL {
        for layout in [Layout::Nhwc, Layout::Nchw] {
            for bias in [Some(&b[..]), None] {
                let mut y = x.clone();
                super::super::kernels::bias_act(&mut y, bias, a, c, layout, plane);
                let want: Vec<f64> = x
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let ch = match layout {
                            Layout::Nhwc => i % c,
                            Layout::Nchw => (i / plane) % c,
                        };
                        act64(a, v as f64 + bias.map_or(0.0, |b| b[ch] as f64))
                    })
                    .collect();
                close(&format!("bias_act {} {layout:?}", a.name()), &y, &want);
            }
        }
    }
}

/// For each element of `out` (row-major), the offset of the element of `src` that numpy
/// broadcasting reads.
fn index_map(src: &[i64], out: &[i64]) -> Vec<usize> {
    let n: usize = out.iter().product::<i64>() as usize;
    let lead = out.len() - src.len();
    (0..n)
        .map(|mut i| {
            let mut off = 0usize;
            let mut stride = 1usize;
            for k in (0..out.len()).rev() {
                let idx = i % out[k] as usize;
                i /= out[k] as usize;
                if k >= lead {
                    let d = src[k - lead] as usize;
                    if d != 1 {
                        off += idx * stride;
                    }
                    stride *= d;
                }
            }
            off
        })
        .collect()
}

type MakeOp = fn(Activation) -> Op;
type BinaryCase = (&'static str, MakeOp, fn(f64, f64) -> f64);

#[test]
fn binary_ops_broadcast_and_fuse_activations() {
    let ops: [BinaryCase; 4] = [
        ("add", |a| Op::Add { activation: a }, |u, v| u + v),
        ("multiply", |a| Op::Multiply { activation: a }, |u, v| u * v),
        ("subtract", |a| Op::Subtract { activation: a }, |u, v| u - v),
        ("divide", |a| Op::Divide { activation: a }, |u, v| u / v),
    ];
    // (a shape, b shape, out shape)
    let cases: [(&[i64], &[i64], &[i64]); 14] = [
        (&[3, 11, 1031], &[3, 11, 1031], &[3, 11, 1031]),
        // Batch 1, where the leading 1 of the scale meets the output's 1 (a block pattern).
        (&[1, 29, 31, 24], &[1, 1, 1, 24], &[1, 29, 31, 24]),
        (&[1, 24, 29, 31], &[1, 24, 1, 1], &[1, 24, 29, 31]),
        // Not one run of dims (the general path).
        (&[2, 3, 4, 5], &[3, 1, 5], &[2, 3, 4, 5]),
        (&[2, 3, 5], &[5], &[2, 3, 5]),
        (&[2, 3, 5], &[3, 1], &[2, 3, 5]),
        (&[1, 3, 1], &[2, 1, 4], &[2, 3, 4]),
        // Squeeze-excitation scales, NCHW and NHWC, above the parallel threshold.
        (&[2, 24, 29, 31], &[2, 24, 1, 1], &[2, 24, 29, 31]),
        (&[2, 29, 31, 24], &[2, 1, 1, 24], &[2, 29, 31, 24]),
        // The small operand first (subtract and divide are not symmetric).
        (&[24, 1, 1], &[2, 24, 29, 31], &[2, 24, 29, 31]),
        (&[1], &[3, 7], &[3, 7]),
        (&[3, 7], &[], &[3, 7]),
        (&[2, 1, 5], &[2, 3, 5], &[2, 3, 5]),
        (&[1, 1], &[1, 1], &[1, 1]),
    ];
    for (sa, sb, so) in cases {
        let na: usize = sa.iter().product::<i64>() as usize;
        let nb: usize = sb.iter().product::<i64>() as usize;
        let a = data(na, 6, 3.0);
        // Divisors away from zero.
        let b: Vec<f32> = data(nb, 7, 1.0)
            .iter()
            .map(|v| v + 1.5 * v.signum() + 0.01)
            .collect();
        let ia = index_map(sa, so);
        let ib = index_map(sb, so);
        for (name, mk, f) in ops {
            for act in [
                Activation::None,
                Activation::Relu6,
                Activation::Sigmoid,
                Activation::LeakyRelu(0.2),
            ] {
                let want: Vec<f64> = ia
                    .iter()
                    .zip(&ib)
                    .map(|(&i, &j)| act64(act, f(a[i] as f64, b[j] as f64)))
                    .collect();
                on_threads(|t| {
                    let y = run(&mk(act), &[a.clone(), b.clone()], &[sa, sb], so);
                    close(
                        &format!("{name} {sa:?}x{sb:?} {} t{t}", act.name()),
                        &y,
                        &want,
                    );
                });
            }
        }
    }
}

#[test]
fn scale_shift_on_any_axis() {
    // [2, 16, 33, 33] is above the parallel threshold.
    let cases: [(&[i64], usize); 4] = [
        (&[2, 16, 33, 33], 1),
        (&[2, 33, 33, 16], 3),
        (&[5, 3, 7], 0),
        (&[9], 0),
    ];
    for (shape, axis) in cases {
        let n: usize = shape.iter().product::<i64>() as usize;
        let c = shape[axis] as usize;
        let inner: usize = shape[axis + 1..].iter().product::<i64>() as usize;
        let x = data(n, 8, 3.0);
        let s = data(c, 9, 2.0);
        let b = data(c, 10, 1.0);
        for act in [Activation::None, Activation::Relu, Activation::Silu] {
            let want: Vec<f64> = x
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let ch = (i / inner) % c;
                    act64(act, v as f64 * s[ch] as f64 + b[ch] as f64)
                })
                .collect();
            let op = Op::ScaleShift {
                axis,
                activation: act,
            };
            on_threads(|t| {
                let y = run(
                    &op,
                    &[x.clone(), s.clone(), b.clone()],
                    &[shape, &[c as i64], &[c as i64]],
                    shape,
                );
                close(
                    &format!("scale_shift {shape:?} axis {axis} {} t{t}", act.name()),
                    &y,
                    &want,
                );
            });
        }
    }
}

#[test]
fn lrn_across_channels_nchw_and_nhwc() {
    let (n, c, h, w) = (2usize, 7usize, 5usize, 3usize);
    let x = data(n * c * h * w, 11, 3.0);
    for layout in [Layout::Nchw, Layout::Nhwc] {
        let shape = layout.shape(n as i64, c as i64, h as i64, w as i64);
        let at = |b: usize, ch: usize, p: usize| match layout {
            Layout::Nchw => (b * c + ch) * h * w + p,
            Layout::Nhwc => (b * h * w + p) * c + ch,
        };
        for (size, beta) in [
            (1usize, 0.75f32),
            (2, 0.75),
            (3, 0.6),
            (5, 0.75),
            (4, 1.0),
            (9, 0.5),
        ] {
            let l = Lrn {
                layout,
                size,
                alpha: 0.3,
                beta,
                bias: 1.5,
            };
            let mut want = vec![0f64; x.len()];
            for b in 0..n {
                for ch in 0..c {
                    for p in 0..h * w {
                        // [c - floor((size-1)/2), c + ceil((size-1)/2)]
                        let lo = ch as i64 - (size as i64 - 1) / 2;
                        let hi = ch as i64 + (size as i64 - 1 + 1) / 2;
                        let sq: f64 = (lo.max(0)..=hi.min(c as i64 - 1))
                            .map(|k| (x[at(b, k as usize, p)] as f64).powi(2))
                            .sum();
                        let v = x[at(b, ch, p)] as f64;
                        want[at(b, ch, p)] = v / (1.5 + 0.3 / size as f64 * sq).powf(beta as f64);
                    }
                }
            }
            on_threads(|t| {
                let y = run(&Op::Lrn(l), std::slice::from_ref(&x), &[&shape], &shape);
                close(
                    &format!("lrn {layout:?} size {size} beta {beta} t{t}"),
                    &y,
                    &want,
                );
            });
        }
    }
}

#[test]
fn layer_norm_over_the_last_axis() {
    for shape in [&[3i64, 5, 17][..], &[1, 768], &[64, 640]] {
        let d = *shape.last().unwrap_or(&1) as usize;
        let n: usize = shape.iter().product::<i64>() as usize;
        let x: Vec<f32> = data(n, 12, 2.0).iter().map(|v| v + 3.0).collect();
        let g = data(d, 13, 1.5);
        let be = data(d, 14, 0.5);
        let mut want = vec![0f64; n];
        for r in 0..n / d {
            let row = &x[r * d..(r + 1) * d];
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
            for k in 0..d {
                want[r * d + k] =
                    (row[k] as f64 - mean) / (var + 1e-5).sqrt() * g[k] as f64 + be[k] as f64;
            }
        }
        let op = Op::LayerNorm {
            axis: shape.len() - 1,
            epsilon: 1e-5,
        };
        on_threads(|t| {
            let y = run(
                &op,
                &[x.clone(), g.clone(), be.clone()],
                &[shape, &[d as i64], &[d as i64]],
                shape,
            );
            close(&format!("layer_norm {shape:?} t{t}"), &y, &want);
        });
    }
}

fn perms(r: usize) -> Vec<Vec<usize>> {
    if r == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in perms(r - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, r - 1);
            out.push(q);
        }
    }
    out
}

/// Every permutation of ranks 1 to 4 and a few of ranks 5 and 6, against index arithmetic;
/// as f32 through `generic` and as 1- and 2-byte elements through `move_bytes`.
#[test]
fn transpose_every_permutation() {
    let dims = [3i64, 4, 2, 5, 3, 2];
    let mut cases: Vec<Vec<usize>> = (1..=4).flat_map(perms).collect();
    cases.push(vec![4, 2, 0, 3, 1]);
    cases.push(vec![5, 0, 4, 1, 3, 2]);
    cases.push(vec![0, 1, 2, 3, 5, 4]);
    for axes in cases {
        let r = axes.len();
        // NCHW -> NHWC big enough to split over threads.
        let shape: Vec<i64> = if axes == [0, 2, 3, 1] {
            vec![2, 64, 17, 19]
        } else {
            dims[..r].to_vec()
        };
        let n: usize = shape.iter().product::<i64>() as usize;
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let oshape: Vec<i64> = axes.iter().map(|&a| shape[a]).collect();
        let ist = strides(&shape.iter().map(|&d| d as usize).collect::<Vec<_>>());
        let want: Vec<f64> = (0..n)
            .map(|mut i| {
                let mut off = 0;
                for k in (0..r).rev() {
                    off += (i % oshape[k] as usize) * ist[axes[k]];
                    i /= oshape[k] as usize;
                }
                off as f64
            })
            .collect();
        let op = Op::Transpose { axes: axes.clone() };
        on_threads(|t| {
            let y = run(&op, std::slice::from_ref(&x), &[&shape], &oshape);
            close(&format!("transpose {shape:?} {axes:?} t{t}"), &y, &want);
        });
        for elem in [1usize, 2] {
            let xb: Vec<u8> = (0..n * elem)
                .map(|i| (i / elem) as u8 ^ (i % elem) as u8)
                .collect();
            let mut yb = vec![0xAAu8; n * elem];
            move_bytes(&op, elem, &xb, &shape, &[&oshape], &mut [&mut yb]).expect("moves");
            for (i, &w) in want.iter().enumerate() {
                for e in 0..elem {
                    assert_eq!(
                        yb[i * elem + e],
                        xb[w as usize * elem + e],
                        "transpose bytes {axes:?} elem {elem} at {i}"
                    );
                }
            }
        }
    }
}

#[test]
fn channel_shuffle_is_reshape_transpose_reshape() {
    // Every group count with its own NHWC loop (2, 3, 4, 8) and the general one (5, 6), at
    // sizes under and over the parallel threshold, on 1 and 2 threads.
    for (n, c, h, w, g, threads) in [
        (2usize, 12usize, 3usize, 5usize, 3usize, 1usize),
        (1, 24, 4, 3, 2, 1),
        (1, 24, 4, 3, 4, 2),
        (1, 40, 3, 3, 8, 1),
        (1, 30, 2, 3, 5, 1),
        (1, 60, 28, 28, 3, 2),
        (1, 96, 20, 20, 8, 2),
        (1, 72, 20, 20, 6, 2),
    ] {
        ThreadPool::new(threads).install(|| channel_shuffle_case(n, c, h, w, g));
    }
}

fn channel_shuffle_case(n: usize, c: usize, h: usize, w: usize, g: usize) {
    let x: Vec<f32> = (0..n * c * h * w).map(|i| i as f32).collect();
    for layout in [Layout::Nchw, Layout::Nhwc] {
        let shape = layout.shape(n as i64, c as i64, h as i64, w as i64);
        let at = |b: usize, ch: usize, p: usize| match layout {
            Layout::Nchw => (b * c + ch) * h * w + p,
            Layout::Nhwc => (b * h * w + p) * c + ch,
        };
        let mut want = vec![0f64; x.len()];
        // [N, g, C/g, H, W] -> transpose(0, 2, 1, 3, 4): out (j, i) reads in (i, j).
        for b in 0..n {
            for i in 0..g {
                for j in 0..c / g {
                    for p in 0..h * w {
                        want[at(b, j * g + i, p)] = x[at(b, i * (c / g) + j, p)] as f64;
                    }
                }
            }
        }
        for groups in [g, 1] {
            let op = Op::ChannelShuffle { layout, groups };
            let want = if groups == 1 {
                x.iter().map(|&v| v as f64).collect()
            } else {
                want.clone()
            };
            let y = run(&op, std::slice::from_ref(&x), &[&shape], &shape);
            close(&format!("channel_shuffle {layout:?} g{groups}"), &y, &want);
            // Raw 1-byte elements agree.
            let xb: Vec<u8> = x.iter().map(|&v| v as u8).collect();
            let mut yb = vec![0xAAu8; xb.len()];
            move_bytes(&op, 1, &xb, &shape, &[&shape], &mut [&mut yb]).expect("moves");
            let wb: Vec<u8> = want.iter().map(|&v| v as u8).collect();
            assert_eq!(yb, wb, "channel_shuffle bytes {layout:?} g{groups}");
            // And 4-byte elements (float32 as the backend moves them), exactly.
            let x4: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut y4 = vec![0xAAu8; x4.len()];
            move_bytes(&op, 4, &x4, &shape, &[&shape], &mut [&mut y4]).expect("moves");
            let w4: Vec<u8> = want
                .iter()
                .flat_map(|&v| (v as f32).to_le_bytes())
                .collect();
            assert!(
                y4 == w4,
                "channel_shuffle 4-byte elements {layout:?} g{groups}"
            );
        }
    }
}

#[test]
fn split_into_uneven_pieces_of_raw_elements() {
    let shape = [2i64, 7, 3];
    let x: Vec<u8> = (0..168u8).collect();
    for (axis, sizes) in [(1usize, vec![2i64, 4, 1]), (0, vec![1, 1]), (2, vec![3])] {
        let outs: Vec<Vec<i64>> = sizes
            .iter()
            .map(|&s| {
                let mut o = shape.to_vec();
                o[axis] = s;
                o
            })
            .collect();
        let oshapes: Vec<&[i64]> = outs.iter().map(|o| o.as_slice()).collect();
        let mut bufs: Vec<Vec<u8>> = outs
            .iter()
            .map(|o| vec![0xAA; o.iter().product::<i64>() as usize * 4])
            .collect();
        let mut views: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        move_bytes(&Op::Split { axis }, 4, &x, &shape, &oshapes, &mut views).expect("splits");
        // Concatenating the pieces back gives the input.
        let inner: usize = shape[axis + 1..].iter().product::<i64>() as usize * 4;
        let outer: usize = shape[..axis].iter().product::<i64>() as usize;
        let mut back = Vec::new();
        for o in 0..outer {
            for (b, &s) in bufs.iter().zip(&sizes) {
                let chunk = s as usize * inner;
                back.extend_from_slice(&b[o * chunk..(o + 1) * chunk]);
            }
        }
        assert_eq!(back, x, "split axis {axis} {sizes:?}");
    }
}

/// A version-2 region through the executor and the `cpu` backend: scale_shift ->
/// channel_shuffle -> split into a region output and an intermediate that goes through lrn and
/// a subtract with a fused tanh; 1 and 2 threads, poisoned scratch (the runner's default).
#[test]
fn a_version_2_region_runs_end_to_end() {
    use crate::tensor::Tensor;
    let desc = r#"{"format":"mote.subgraph","version":2,"target":"acl","name":"v2",
      "tensors":[{"shape":[1,4,3,5],"dtype":"float32"},{"shape":[4],"dtype":"float32"},
                 {"shape":[4],"dtype":"float32"},{"shape":[1,4,3,5],"dtype":"float32"},
                 {"shape":[1,4,3,5],"dtype":"float32"},{"shape":[1,1,3,5],"dtype":"float32"},
                 {"shape":[1,3,3,5],"dtype":"float32"},{"shape":[1,3,3,5],"dtype":"float32"},
                 {"shape":[1,3,3,5],"dtype":"float32"}],
      "inputs":[0],"constants":[1,2],"outputs":[5,8],
      "nodes":[
        {"op":"scale_shift","name":"bn","inputs":[0,1,2],"outputs":[3],
         "attrs":{"axis":1,"activation":"hardswish"}},
        {"op":"channel_shuffle","name":"shuffle","inputs":[3],"outputs":[4],
         "attrs":{"layout":"NCHW","groups":2}},
        {"op":"split","name":"split","inputs":[4],"outputs":[5,6],"attrs":{"axis":-3}},
        {"op":"lrn","name":"lrn","inputs":[6],"outputs":[7],
         "attrs":{"layout":"NCHW","size":3,"alpha":0.01,"beta":0.75,"bias":1.0}},
        {"op":"subtract","name":"sub","inputs":[7,6],"outputs":[8],
         "attrs":{"activation":"tanh"}}]}"#;
    let x = data(60, 20, 4.0);
    let s = data(4, 21, 2.0);
    let b = data(4, 22, 1.0);
    let runner = crate::offload::SubgraphRunner::new(
        desc,
        vec![
            Tensor::from_slice(&[4], &s).expect("scale"),
            Tensor::from_slice(&[4], &b).expect("shift"),
        ],
    )
    .expect("parses");
    // Reference in f64.
    let bn: Vec<f64> = (0..60)
        .map(|i| {
            act64(
                Activation::Hardswish,
                x[i] as f64 * s[i / 15] as f64 + b[i / 15] as f64,
            )
        })
        .collect();
    let src = |oc: usize| (oc % 2) * 2 + oc / 2;
    let sh: Vec<f64> = (0..60).map(|i| bn[src(i / 15) * 15 + i % 15]).collect();
    let (first, rest) = sh.split_at(15);
    let mut out2 = vec![0f64; 45];
    for ch in 0..3usize {
        for p in 0..15 {
            let sq: f64 = (ch.saturating_sub(1)..(ch + 2).min(3))
                .map(|k| rest[k * 15 + p].powi(2))
                .sum();
            let v = rest[ch * 15 + p];
            let l = v / (1.0 + 0.01 / 3.0 * sq).powf(0.75);
            out2[ch * 15 + p] = (l - v).tanh();
        }
    }
    on_threads(|t| {
        let input = Tensor::from_slice(&[1, 4, 3, 5], &x).expect("input");
        let outs = runner.run(&["cpu".to_string()], &[input]).expect("runs");
        close(
            &format!("split piece t{t}"),
            outs[0].as_slice::<f32>().expect("f32"),
            first,
        );
        close(
            &format!("lrn/sub t{t}"),
            outs[1].as_slice::<f32>().expect("f32"),
            &out2,
        );
    });
}

/// Throughput of the activations on 1M elements, one thread: `cargo test -p mote --lib
/// --release activation_speed -- --ignored --nocapture` prints ns per element, next to a loop
/// over the standard library's `exp`/`tanh`.
#[test]
#[ignore]
fn activation_speed() {
    let n = 1 << 20;
    let x = data(n, 30, 6.0);
    let std_sigmoid: fn(f32) -> f32 = |v| 1.0 / (1.0 + (-v).exp());
    let std_tanh: fn(f32) -> f32 = f32::tanh;
    for a in [
        Activation::Sigmoid,
        Activation::Silu,
        Activation::Tanh,
        Activation::Gelu,
        Activation::GeluTanh,
        Activation::Hardswish,
    ] {
        let mut y = vec![0f32; n];
        let reps = 50;
        let t0 = std::time::Instant::now();
        for _ in 0..reps {
            activation_op(a, &x, &mut y).expect("runs");
        }
        let ns = t0.elapsed().as_nanos() as f64 / (reps * n) as f64;
        let std_f = match a {
            Activation::Tanh => Some(std_tanh),
            Activation::Sigmoid => Some(std_sigmoid),
            _ => None,
        };
        let std_ns = std_f.map(|f| {
            let t0 = std::time::Instant::now();
            for _ in 0..reps {
                for (d, &v) in y.iter_mut().zip(&x) {
                    *d = f(v);
                }
            }
            std::hint::black_box(&y);
            t0.elapsed().as_nanos() as f64 / (reps * n) as f64
        });
        match std_ns {
            Some(s) => println!(
                "{:<10} {ns:.3} ns/element (std library loop: {s:.3})",
                a.name()
            ),
            None => println!("{:<10} {ns:.3} ns/element", a.name()),
        }
    }
}

/// Version-2 activations fused into conv2d (both layouts, the prepared GEMM and depthwise paths)
/// and dense, through the executor: the backend's prepared steps apply them, not only
/// `generic`.
#[test]
fn fused_activations_on_prepared_conv_and_dense() {
    use crate::tensor::Tensor;
    let (n, c, h, w, o) = (1usize, 3usize, 4usize, 5usize, 6usize);
    let x = data(n * c * h * w, 40, 2.0);
    for (layout, groups) in [("NHWC", 1usize), ("NCHW", 1), ("NHWC", 3), ("NCHW", 3)] {
        let cg = c / groups;
        let og = o / groups;
        let wt = data(o * cg, 41, 1.0);
        let bias = data(o, 42, 0.5);
        let (xs, ws, ys) = if layout == "NHWC" {
            (vec![1, h, w, c], vec![o, 1, 1, cg], vec![1, h, w, o])
        } else {
            (vec![1, c, h, w], vec![o, cg, 1, 1], vec![1, o, h, w])
        };
        let act = Activation::Hardsigmoid(0.2, 0.5);
        let desc = json_desc(
            &[&xs, &ws, &[o], &ys],
            &format!(
                r#"{{"op":"conv2d","name":"conv","inputs":[0,1,2],"outputs":[3],
                    "attrs":{{"layout":"{layout}","groups":{groups},
                              "activation":{{"hardsigmoid":[0.2,0.5]}}}}}}"#
            ),
        );
        let runner = crate::offload::SubgraphRunner::new(
            &desc,
            vec![
                Tensor::from_slice(&to_i64(&ws), &wt).expect("w"),
                Tensor::from_slice(&[o as i64], &bias).expect("b"),
            ],
        )
        .expect("parses");
        let mut want = vec![0f64; n * o * h * w];
        for oc in 0..o {
            let g = oc / og;
            for p in 0..h * w {
                let mut acc = bias[oc] as f64;
                for ci in 0..cg {
                    let ch = g * cg + ci;
                    let xv = if layout == "NHWC" {
                        x[p * c + ch]
                    } else {
                        x[ch * h * w + p]
                    };
                    acc += xv as f64 * wt[oc * cg + ci] as f64;
                }
                let at = if layout == "NHWC" {
                    p * o + oc
                } else {
                    oc * h * w + p
                };
                want[at] = act64(act, acc);
            }
        }
        on_threads(|t| {
            let input = Tensor::from_slice(&to_i64(&xs), &x).expect("x");
            let out = runner.run(&["cpu".to_string()], &[input]).expect("runs");
            close(
                &format!("conv2d {layout} g{groups} hardsigmoid t{t}"),
                out[0].as_slice::<f32>().expect("f32"),
                &want,
            );
        });
    }
    // dense with gelu.
    let (m, k, nn) = (3usize, 7usize, 5usize);
    let a = data(m * k, 43, 2.0);
    let wt = data(nn * k, 44, 1.0);
    let desc = json_desc(
        &[&[m, k], &[nn, k], &[m, nn]],
        r#"{"op":"dense","name":"fc","inputs":[0,1],"outputs":[2],"attrs":{"activation":"gelu"}}"#,
    );
    let runner = crate::offload::SubgraphRunner::new(
        &desc,
        vec![Tensor::from_slice(&[nn as i64, k as i64], &wt).expect("w")],
    )
    .expect("parses");
    let want: Vec<f64> = (0..m * nn)
        .map(|i| {
            let (r, j) = (i / nn, i % nn);
            let acc: f64 = (0..k)
                .map(|q| a[r * k + q] as f64 * wt[j * k + q] as f64)
                .sum();
            act64(Activation::Gelu, acc)
        })
        .collect();
    let input = Tensor::from_slice(&[m as i64, k as i64], &a).expect("a");
    let out = runner.run(&["cpu".to_string()], &[input]).expect("runs");
    close("dense gelu", out[0].as_slice::<f32>().expect("f32"), &want);
}

fn to_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// A version-2 description of float32 tensors with the given shapes: tensor 0 the input, the
/// last the output, the others constants; one node.
fn json_desc(shapes: &[&[usize]], node: &str) -> String {
    let ts: Vec<String> = shapes
        .iter()
        .map(|s| format!(r#"{{"shape":{:?},"dtype":"float32"}}"#, s))
        .collect();
    let last = shapes.len() - 1;
    let consts: Vec<String> = (1..last).map(|i| i.to_string()).collect();
    format!(
        r#"{{"format":"mote.subgraph","version":2,"name":"t","tensors":[{}],"inputs":[0],
            "constants":[{}],"outputs":[{last}],"nodes":[{node}]}}"#,
        ts.join(","),
        consts.join(",")
    )
}

/// Version-1 regions with conv2d (float NCHW grouped, quantized NHWC), pools and dense (float
/// and quantized), the mutation test's other seeds.
const V1_SEEDS: [&str; 2] = [
    r#"{"format":"mote.subgraph","version":1,"name":"q",
      "tensors":[{"shape":[1,5,5,3],"dtype":"uint8","quant":{"scale":[0.5],"zero_point":[128]}},
        {"shape":[4,3,3,3],"dtype":"int8","quant":{"scale":[0.25],"zero_point":[3]}},
        {"shape":[4],"dtype":"int32","quant":{"scale":[0.125],"zero_point":[0]}},
        {"shape":[1,5,5,4],"dtype":"uint8","quant":{"scale":[0.5],"zero_point":[120]}},
        {"shape":[1,2,2,4],"dtype":"uint8","quant":{"scale":[0.5],"zero_point":[120]}},
        {"shape":[1,16],"dtype":"uint8","quant":{"scale":[0.5],"zero_point":[120]}},
        {"shape":[5,16],"dtype":"int8","quant":{"scale":[0.25],"zero_point":[0]}},
        {"shape":[1,5],"dtype":"uint8","quant":{"scale":[0.75],"zero_point":[130]}}],
      "inputs":[0],"constants":[1,2,6],"outputs":[7],
      "nodes":[{"op":"conv2d","name":"c","inputs":[0,1,2],"outputs":[3],
         "attrs":{"layout":"NHWC","strides":[1,1],"padding":[1,1,1,1],"dilation":[1,1],"groups":1,
                  "activation":"relu"}},
        {"op":"max_pool2d","name":"p","inputs":[3],"outputs":[4],
         "attrs":{"layout":"NHWC","pool_size":[2,2],"strides":[2,2]}},
        {"op":"reshape","name":"r","inputs":[4],"outputs":[5]},
        {"op":"dense","name":"d","inputs":[5,6],"outputs":[7]}]}"#,
    r#"{"format":"mote.subgraph","version":1,"name":"f",
      "tensors":[{"shape":[2,4,6,6],"dtype":"float32"},{"shape":[6,2,3,3],"dtype":"float32"},
        {"shape":[6],"dtype":"float32"},{"shape":[2,6,6,6],"dtype":"float32"},
        {"shape":[2,6,3,3],"dtype":"float32"},{"shape":[2,6,1,1],"dtype":"float32"},
        {"shape":[2,6],"dtype":"float32"},{"shape":[3,6],"dtype":"float32"},
        {"shape":[2,3],"dtype":"float32"},{"shape":[2,3],"dtype":"float32"}],
      "inputs":[0],"constants":[1,2,7],"outputs":[9],
      "nodes":[{"op":"conv2d","name":"c","inputs":[0,1,2],"outputs":[3],
         "attrs":{"layout":"NCHW","strides":[1,1],"padding":[1,1,1,1],"dilation":[1,1],"groups":2}},
        {"op":"avg_pool2d","name":"p","inputs":[3],"outputs":[4],
         "attrs":{"layout":"NCHW","pool_size":[3,3],"strides":[2,2],"padding":[1,1,0,0],
                  "count_include_pad":false}},
        {"op":"global_avg_pool2d","name":"g","inputs":[4],"outputs":[5],"attrs":{"layout":"NCHW"}},
        {"op":"reshape","name":"r","inputs":[5],"outputs":[6]},
        {"op":"dense","name":"d","inputs":[6,7],"outputs":[8],"attrs":{"activation":"relu6"}},
        {"op":"softmax","name":"s","inputs":[8],"outputs":[9],"attrs":{"axis":-1}}]}"#,
];

/// The byte ranges of every dimension written in a `"shape":[...]` of `text`.
fn shape_dims(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut dims = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(r#""shape":["#) {
        let mut i = from + at + r#""shape":["#.len();
        while i < b.len() && b[i] != b']' {
            if b[i].is_ascii_digit() {
                let j = i + b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
                dims.push((i, j));
                i = j;
            } else {
                i += 1;
            }
        }
        from = i;
    }
    dims
}

/// Descriptions that differ from a valid one (the version-2 example, and [`V1_SEEDS`] with
/// conv2d, pools and dense, float and quantized) in a digit (other shapes, axes, sizes, groups,
/// attributes) either fail to parse or run on the `cpu` backend without a panic: the kernels
/// trust only what the parser checked. One mutation in three sets a dimension of a tensor's
/// shape to 0, which must be refused (issue 27).
#[test]
fn mutated_version_2_regions_parse_or_run_without_panicking() {
    use crate::tensor::Tensor;
    let seeds = [
        crate::offload::format::tests::V2_EXAMPLE,
        V1_SEEDS[0],
        V1_SEEDS[1],
    ];
    for text in seeds {
        crate::offload::format::Graph::parse(text, "t").expect("the seed parses");
    }
    let mut state = 99u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut ran, mut refused, mut zeroed) = (0, 0, 0);
    for _ in 0..1500 {
        let text = seeds[next() as usize % seeds.len()];
        let s = if next() % 3 == 0 {
            let dims = shape_dims(text);
            let (i, j) = dims[next() as usize % dims.len()];
            let s = format!("{}0{}", &text[..i], &text[j..]);
            match crate::offload::format::Graph::parse(&s, "t") {
                Err(crate::Error::Subgraph { message, .. }) if message.contains("zero-sized") => {
                    zeroed += 1;
                    continue;
                }
                other => panic!("a zero-sized dimension gave {other:?}\n{s}"),
            }
        } else {
            let digits: Vec<usize> = text
                .bytes()
                .enumerate()
                .filter(|(_, b)| b.is_ascii_digit())
                .map(|(i, _)| i)
                .collect();
            let mut b = text.as_bytes().to_vec();
            for _ in 0..1 + next() % 2 {
                let i = digits[next() as usize % digits.len()];
                b[i] = b'0' + (next() % 10) as u8;
            }
            String::from_utf8_lossy(&b).into_owned()
        };
        let Ok(g) = crate::offload::format::Graph::parse(&s, "t") else {
            refused += 1;
            continue;
        };
        assert!(
            g.tensors.iter().all(|t| !t.shape.contains(&0)),
            "a zero-sized tensor parsed: {s}"
        );
        let zeros = |t: &usize| {
            let d = &g.tensors[*t];
            Tensor::zeros(&d.shape, d.dtype).expect("tensor")
        };
        let consts: Vec<Tensor> = g.constants.iter().map(zeros).collect();
        let inputs: Vec<Tensor> = g.inputs.iter().map(zeros).collect();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let runner = crate::offload::SubgraphRunner::new(&s, consts).expect("parsed");
            ThreadPool::new(2).install(|| runner.run(&["cpu".to_string()], &inputs))
        }));
        match r {
            Ok(Ok(_)) => ran += 1,
            Ok(Err(e)) => panic!("a parsed description failed to run: {e}\n{s}"),
            Err(_) => panic!("panic on {s}"),
        }
    }
    assert!(
        ran > 100 && refused > 100 && zeroed > 300,
        "ran {ran}, refused {refused}, zeroed {zeroed}"
    );
}

/// The crafted descriptions of issue 27 that once reached a kernel with a zero-sized dimension
/// (the 8-bit GEMM with `N` or `K` = 0, a quantized convolution without input channels, a
/// batch-0 convolution on 2 threads: panics; an f64-path dense with `K` = 0: 0 instead of the
/// zero point) are refused when the runner is built, on 1 and 2 threads, whatever ISA level
/// the process runs (`MOTE_CPU_ISA`); a description that parsed would be run, so a regression
/// shows up as the panic or result it causes.
#[test]
fn zero_sized_regions_are_refused_before_any_kernel() {
    use crate::tensor::Tensor;
    use serde_json::json;
    let q = |zp: i64| json!({"scale": [0.5], "zero_point": [zp]});
    let t = |shape: &[i64], dtype: &str, quant: Option<serde_json::Value>| match quant {
        Some(qq) => json!({"shape": shape, "dtype": dtype, "quant": qq}),
        None => json!({"shape": shape, "dtype": dtype}),
    };
    let region = |op: &str, attrs: serde_json::Value, ts: Vec<serde_json::Value>| {
        json!({"format": "mote.subgraph", "version": 1, "name": "z", "tensors": ts,
               "inputs": [0], "constants": [1], "outputs": [2],
               "nodes": [{"op": op, "name": "n", "inputs": [0, 1], "outputs": [2],
                          "attrs": attrs}]})
        .to_string()
    };
    let (u, i) = (Some(q(128)), Some(q(3)));
    let cases = [
        (
            "quantized dense N = 0",
            region(
                "dense",
                json!({}),
                vec![
                    t(&[2, 4], "uint8", u.clone()),
                    t(&[0, 4], "int8", i.clone()),
                    t(&[2, 0], "uint8", u.clone()),
                ],
            ),
        ),
        (
            "quantized dense K = 0",
            region(
                "dense",
                json!({}),
                vec![
                    t(&[2, 0], "uint8", u.clone()),
                    t(&[3, 0], "int8", i.clone()),
                    t(&[2, 3], "uint8", u.clone()),
                ],
            ),
        ),
        (
            "quantized conv2d without input channels",
            region(
                "conv2d",
                json!({"layout": "NHWC"}),
                vec![
                    t(&[1, 4, 4, 0], "uint8", u.clone()),
                    t(&[3, 1, 1, 0], "int8", i.clone()),
                    t(&[1, 4, 4, 3], "uint8", u.clone()),
                ],
            ),
        ),
        (
            "conv2d NHWC batch 0",
            region(
                "conv2d",
                json!({"layout": "NHWC", "padding": [1, 1, 1, 1]}),
                vec![
                    t(&[0, 5, 5, 3], "float32", None),
                    t(&[4, 3, 3, 3], "float32", None),
                    t(&[0, 5, 5, 4], "float32", None),
                ],
            ),
        ),
        (
            "conv2d NCHW batch 0",
            region(
                "conv2d",
                json!({"layout": "NCHW", "padding": [1, 1, 1, 1]}),
                vec![
                    t(&[0, 3, 5, 5], "float32", None),
                    t(&[4, 3, 3, 3], "float32", None),
                    t(&[0, 4, 5, 5], "float32", None),
                ],
            ),
        ),
        (
            "quantized conv2d batch 0",
            region(
                "conv2d",
                json!({"layout": "NHWC", "padding": [1, 1, 1, 1]}),
                vec![
                    t(&[0, 5, 5, 3], "uint8", u.clone()),
                    t(&[4, 3, 3, 3], "int8", i.clone()),
                    t(&[0, 5, 5, 4], "uint8", u.clone()),
                ],
            ),
        ),
        (
            "dense K = 0",
            region(
                "dense",
                json!({}),
                vec![
                    t(&[2, 0], "float32", None),
                    t(&[3, 0], "float32", None),
                    t(&[2, 3], "float32", None),
                ],
            ),
        ),
    ];
    let mut wrong = Vec::new();
    for (label, text) in &cases {
        for threads in [1, 2] {
            let g = match crate::offload::format::Graph::parse(text, "t") {
                Err(crate::Error::Subgraph {
                    node: Some(node),
                    message,
                    ..
                }) if node == "n" && message.contains("zero-sized") => continue,
                Err(e) => {
                    wrong.push(format!("{label}: refused otherwise: {e}"));
                    continue;
                }
                Ok(g) => g,
            };
            let zeros = |t: &usize| {
                let d = &g.tensors[*t];
                Tensor::zeros(&d.shape, d.dtype).expect("tensor")
            };
            let consts: Vec<Tensor> = g.constants.iter().map(zeros).collect();
            let inputs: Vec<Tensor> = g.inputs.iter().map(zeros).collect();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let runner = crate::offload::SubgraphRunner::new(text, consts).expect("parsed");
                ThreadPool::new(threads).install(|| runner.run(&["cpu".to_string()], &inputs))
            }));
            let outcome = match r {
                Err(_) => "panicked".to_string(),
                Ok(Err(e)) => format!("failed: {e}"),
                Ok(Ok(outs)) => format!("ran, output bytes {:?}", outs[0].data()),
            };
            wrong.push(format!(
                "{label}, {threads} threads, ISA {}: parsed, then {outcome}",
                crate::offload::backends::cpu::isa()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The quantize of `quantized_generic` (its rounding without `rintf`) gives exactly the backend's
/// `quantize` (TVM's: ties to even, then the zero point and the 8-bit clamp) on ties, on values
/// near and beyond 2^22 and 2^23, on infinities and NaN, for both 8-bit dtypes.
#[test]
fn fast_quantize_is_the_backends_quantize_bit_for_bit() {
    let mut ys: Vec<f32> = (-40_000..40_000).map(|k| k as f32 * 0.25).collect();
    ys.extend(data(20_000, 91, 600.0));
    for big in [
        4_194_303.5f32,
        4_194_304.0,
        4_194_304.5,
        8_388_607.5,
        8_388_608.0,
        1e9,
        3.0e38,
    ] {
        for v in [
            big,
            -big,
            f32::from_bits(big.to_bits() + 1),
            -f32::from_bits(big.to_bits() - 1),
        ] {
            ys.push(v);
        }
    }
    ys.extend([
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
    ]);
    for (dtype, scale, zero) in [
        (DType::U8, 1.0f32, 0),
        (DType::U8, 0.25, 128),
        (DType::U8, 0.0234, 7),
        (DType::I8, 1.0, 0),
        (DType::I8, 0.5, -3),
        (DType::I8, 0.0711, 12),
    ] {
        let mut got = vec![0u8; ys.len()];
        quantize_into(&ys, dtype, scale, zero, &mut got);
        for (&y, &g) in ys.iter().zip(&got) {
            let want = super::super::quantize(y, scale, zero, dtype);
            assert_eq!(g, want, "{dtype} scale {scale} zero {zero}: x = {y:e}");
        }
    }
}

fn q8_desc(shape: &[i64], dtype: DType, scale: f32, zero: i32) -> TensorDesc {
    TensorDesc {
        shape: shape.to_vec(),
        dtype,
        quant: Some(crate::offload::format::Quant {
            scale: vec![scale],
            zero_point: vec![zero],
            axis: Some(1),
        }),
    }
}

fn codes(n: usize, seed: u32) -> Vec<u8> {
    data(n, seed, 1.0)
        .iter()
        .map(|v| ((v + 1.0) * 128.0) as u8)
        .collect()
}

/// QDQ ops on 8-bit operands with parameters of their own (an add of two scales into a third,
/// pools, a concatenation of differently scaled int8 and uint8 pieces, reshapes that copy or
/// requantize) give through `quantized_generic` exactly the bytes of the general path
/// (`load_f32`, the float32 kernel, `store_f32`), which is TVM's dequantize, op, quantize; and
/// the general path is what runs when an operand is not 8-bit per tensor.
#[test]
fn quantized_ops_match_the_general_path_bit_for_bit() {
    use crate::offload::format::Pool2d;
    let nhwc: &[i64] = &[1, 5, 7, 6];
    let pool = |count_include_pad| Pool2d {
        layout: Layout::Nhwc,
        pool_size: [3, 3],
        strides: [2, 2],
        padding: [1, 1, 1, 1],
        dilation: [1, 1],
        ceil_mode: false,
        count_include_pad,
    };
    let a = q8_desc(nhwc, DType::U8, 0.031, 128);
    let b = q8_desc(&[1, 1, 1, 6], DType::I8, 0.017, -5);
    let c = q8_desc(&[1, 5, 7, 2], DType::I8, 0.05, 3);
    type Case = (Op, Vec<TensorDesc>, TensorDesc);
    let cases: Vec<Case> = vec![
        (
            Op::Add {
                activation: Activation::None,
            },
            vec![a.clone(), a.clone()],
            q8_desc(nhwc, DType::U8, 0.05, 100),
        ),
        (
            Op::Add {
                activation: Activation::Relu6,
            },
            vec![a.clone(), b.clone()],
            q8_desc(nhwc, DType::I8, 0.029, -20),
        ),
        (
            Op::MaxPool2d(pool(false)),
            vec![a.clone()],
            q8_desc(&[1, 3, 4, 6], DType::U8, 0.031, 128),
        ),
        (
            Op::AvgPool2d(pool(false)),
            vec![a.clone()],
            q8_desc(&[1, 3, 4, 6], DType::U8, 0.013, 120),
        ),
        (
            Op::AvgPool2d(pool(true)),
            vec![c.clone()],
            q8_desc(&[1, 3, 4, 2], DType::I8, 0.03, 0),
        ),
        (
            Op::GlobalAvgPool2d(Layout::Nhwc),
            vec![a.clone()],
            q8_desc(&[1, 1, 1, 6], DType::U8, 0.002, 130),
        ),
        // On the codes: batches, channels that are no vector width, int8 both sides.
        (
            Op::GlobalAvgPool2d(Layout::Nhwc),
            vec![q8_desc(&[2, 13, 11, 37], DType::I8, 0.07, -3)],
            q8_desc(&[2, 1, 1, 37], DType::I8, 0.0011, 1),
        ),
        (
            Op::Concatenate { axis: 3 },
            vec![a.clone(), c.clone()],
            q8_desc(&[1, 5, 7, 8], DType::U8, 0.04, 90),
        ),
        // Residual adds of operands with the output's shape (`add_8bit`): each pair of
        // dtypes, into either dtype, with no activation, a ReLU and a clip; sizes that cross
        // the pool's pieces and end in a partial vector; parameters whose sums saturate.
        (
            Op::Add {
                activation: Activation::Relu,
            },
            vec![
                q8_desc(&[1, 37, 41, 33], DType::U8, 0.031, 128),
                q8_desc(&[1, 37, 41, 33], DType::I8, 0.017, -5),
            ],
            q8_desc(&[1, 37, 41, 33], DType::U8, 0.04, 0),
        ),
        (
            Op::Add {
                activation: Activation::None,
            },
            vec![
                q8_desc(&[2, 3, 5, 7], DType::I8, 0.05, 3),
                q8_desc(&[2, 3, 5, 7], DType::I8, 0.02, -100),
            ],
            q8_desc(&[2, 3, 5, 7], DType::I8, 0.03, 7),
        ),
        (
            Op::Add {
                activation: Activation::Clip(-1.5, 2.25),
            },
            vec![
                q8_desc(&[1, 9, 9, 17], DType::I8, 0.1, 0),
                q8_desc(&[1, 9, 9, 17], DType::U8, 0.06, 200),
            ],
            q8_desc(&[1, 9, 9, 17], DType::I8, 0.03, -20),
        ),
        (
            Op::Add {
                activation: Activation::None,
            },
            vec![a.clone(), a.clone()],
            q8_desc(nhwc, DType::U8, 0.001, 250),
        ),
        // On the codes (`on_codes`): concatenations that copy (the output's parameters) and
        // that map codes, along the last axis and others, with three inputs; max pools of
        // uint8 and int8 into other parameters and the same ones, with dilation, stride 1,
        // channels that are no vector width, windows wholly in the padding (rows and columns),
        // and a negative scale (not monotone: the general path).
        (
            Op::Concatenate { axis: 3 },
            vec![a.clone(), a.clone(), c.clone()],
            q8_desc(&[1, 5, 7, 14], DType::U8, 0.031, 128),
        ),
        (
            Op::Concatenate { axis: 1 },
            vec![
                a.clone(),
                q8_desc(&[1, 2, 7, 6], DType::I8, 0.031, 0),
                a.clone(),
            ],
            q8_desc(&[1, 12, 7, 6], DType::I8, 0.025, -3),
        ),
        (
            Op::Concatenate { axis: 2 },
            vec![c.clone(), q8_desc(&[1, 5, 3, 2], DType::I8, 0.05, 3)],
            q8_desc(&[1, 5, 10, 2], DType::I8, 0.05, 3),
        ),
        (
            Op::MaxPool2d(pool(false)),
            vec![a.clone()],
            q8_desc(&[1, 3, 4, 6], DType::U8, 0.031, 128),
        ),
        (
            Op::MaxPool2d(Pool2d {
                pool_size: [2, 3],
                strides: [1, 2],
                padding: [0, 1, 2, 0],
                dilation: [2, 1],
                ..pool(false)
            }),
            vec![q8_desc(&[2, 6, 7, 19], DType::I8, 0.02, -9)],
            q8_desc(&[2, 6, 3, 19], DType::I8, 0.013, 4),
        ),
        (
            Op::MaxPool2d(Pool2d {
                pool_size: [2, 2],
                strides: [1, 1],
                padding: [3, 0, 0, 3],
                ..pool(false)
            }),
            vec![q8_desc(&[1, 4, 3, 17], DType::U8, 0.1, 60)],
            q8_desc(&[1, 6, 5, 17], DType::I8, 0.07, -100),
        ),
        (
            Op::MaxPool2d(pool(false)),
            vec![q8_desc(nhwc, DType::U8, -0.031, 128)],
            q8_desc(&[1, 3, 4, 6], DType::U8, 0.02, 128),
        ),
        (
            Op::Reshape,
            vec![a.clone()],
            q8_desc(&[1, 35, 6], DType::U8, 0.031, 128),
        ),
        (
            Op::Reshape,
            vec![a.clone()],
            q8_desc(&[1, 210], DType::I8, 0.02, 0),
        ),
    ];
    for (k, (op, ins, out)) in cases.iter().enumerate() {
        let bytes: Vec<Vec<u8>> = ins
            .iter()
            .enumerate()
            .map(|(i, d)| codes(d.num_elements(), 31 * k as u32 + i as u32))
            .collect();
        let refs: Vec<&[u8]> = bytes.iter().map(|b| b.as_slice()).collect();
        let descs: Vec<&TensorDesc> = ins.iter().collect();
        let xs: Vec<Cow<'_, [f32]>> = refs
            .iter()
            .zip(ins)
            .map(|(b, d)| super::super::load_f32(b, d).unwrap())
            .collect();
        let shapes: Vec<&[i64]> = ins.iter().map(|d| d.shape.as_slice()).collect();
        let mut y = vec![0f32; out.num_elements()];
        super::super::kernels::generic(op, &xs, &shapes, &out.shape, &mut y).unwrap();
        let mut want = vec![0u8; out.num_elements()];
        super::super::store_f32(&y, out, &mut want).unwrap();
        let mut got = vec![0xA5u8; out.num_elements()];
        quantized_generic(op, &refs, &descs, out, &mut got)
            .expect("8-bit per-tensor operands take the quantized path")
            .unwrap();
        assert_eq!(got, want, "case {k}: {op:?}");
        assert!(
            want.iter().any(|&v| v != want[0]),
            "case {k}: a constant output tests nothing"
        );
    }
    // Not 8-bit per tensor: the caller's general path.
    let f = TensorDesc {
        shape: nhwc.to_vec(),
        dtype: DType::F32,
        quant: None,
    };
    let x = vec![0u8; f.byte_len()];
    let mut o = vec![0u8; a.num_elements()];
    assert!(quantized_generic(&Op::Reshape, &[&x], &[&f], &a, &mut o).is_none());
}
