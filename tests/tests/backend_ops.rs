//! The CPU backend, op by op, against naive double-precision references written here; malformed
//! descriptions; the plug-in ABI (a C test plug-in takes the nodes it supports, the rest falls
//! back; a wrong ABI version is refused).

use mote::backend::SubgraphRunner;
use mote::{DType, Error, ErrorCode, Tensor};
use mote_tests::to_f64;
use serde_json::{json, Value as Json};

// ---------- helpers ----------

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
    fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| lo + (hi - lo) * self.next()).collect()
    }
    fn ints(&mut self, n: usize, lo: i64, hi: i64) -> Vec<i64> {
        (0..n)
            .map(|_| lo + ((hi - lo + 1) as f64 * self.next()) as i64)
            .map(|v| v.min(hi))
            .collect()
    }
}

fn numel(s: &[i64]) -> usize {
    s.iter().product::<i64>() as usize
}

fn f32_tensor(shape: &[i64], v: &[f64]) -> Tensor {
    let d: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    Tensor::from_slice(shape, &d).unwrap()
}

fn q_tensor(shape: &[i64], v: &[i64], dtype: DType) -> Tensor {
    let bytes: Vec<u8> = v
        .iter()
        .map(|&x| {
            if dtype == DType::I8 {
                x as i8 as u8
            } else {
                x as u8
            }
        })
        .collect();
    Tensor::from_bytes(shape, dtype, &bytes).unwrap()
}

fn i32_tensor(shape: &[i64], v: &[i64]) -> Tensor {
    let d: Vec<i32> = v.iter().map(|&x| x as i32).collect();
    Tensor::from_slice(shape, &d).unwrap()
}

fn t(shape: &[i64], dtype: &str) -> Json {
    json!({"shape": shape, "dtype": dtype})
}

fn tq(shape: &[i64], dtype: &str, scale: &[f64], zp: &[i64], axis: i64) -> Json {
    json!({"shape": shape, "dtype": dtype, "quant": {"scale": scale, "zero_point": zp, "axis": axis}})
}

fn desc(
    tensors: Vec<Json>,
    inputs: &[usize],
    constants: &[usize],
    outputs: &[usize],
    nodes: Vec<Json>,
) -> String {
    json!({"format": "mote.subgraph", "version": 1, "target": "acl", "name": "test",
           "tensors": tensors, "inputs": inputs, "constants": constants, "outputs": outputs,
           "nodes": nodes})
    .to_string()
}

fn cpu() -> Vec<String> {
    vec!["cpu".to_string()]
}

fn run_cpu(d: &str, consts: Vec<Tensor>, inputs: Vec<Tensor>) -> Vec<Tensor> {
    let r = SubgraphRunner::new(d, consts).unwrap_or_else(|e| panic!("parse: {e}\n{d}"));
    r.run(&cpu(), &inputs)
        .unwrap_or_else(|e| panic!("run: {e}"))
}

fn check_close(what: &str, got: &Tensor, want: &[f64], tol: f64) {
    let g = to_f64(got);
    assert_eq!(g.len(), want.len(), "{what}: element count");
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{what}: element {i} is {a}, reference {b}"
        );
    }
}

fn check_lsb(what: &str, got: &Tensor, want: &[i64]) {
    let g = to_f64(got);
    assert_eq!(g.len(), want.len(), "{what}: element count");
    let mut exact = 0;
    for (i, (a, &b)) in g.iter().zip(want).enumerate() {
        assert!(
            (a - b as f64).abs() <= 1.0,
            "{what}: element {i} is {a}, reference {b} (more than 1 LSB)"
        );
        if *a == b as f64 {
            exact += 1;
        }
    }
    // Off-by-one only on rounding ties of the float path, never systematically.
    assert!(
        exact * 10 >= want.len() * 9,
        "{what}: only {exact}/{} exact",
        want.len()
    );
}

fn quantize_ref(x: f64, scale: f64, zp: i64, dtype: DType) -> i64 {
    let (lo, hi) = if dtype == DType::I8 {
        (-128, 127)
    } else {
        (0, 255)
    };
    (((x / scale).round_ties_even() as i64) + zp).clamp(lo, hi)
}

// ---------- conv2d reference ----------

#[derive(Clone, Copy, Debug)]
struct ConvCase {
    nhwc: bool,
    n: i64,
    c: i64,
    h: i64,
    w: i64,
    o: i64,
    k: [i64; 2],
    s: [i64; 2],
    p: [i64; 4],
    d: [i64; 2],
    g: i64,
    bias: bool,
    act: &'static str,
}

impl ConvCase {
    fn out_hw(&self) -> (i64, i64) {
        let oh = (self.h + self.p[0] + self.p[2] - self.d[0] * (self.k[0] - 1) - 1) / self.s[0] + 1;
        let ow = (self.w + self.p[1] + self.p[3] - self.d[1] * (self.k[1] - 1) - 1) / self.s[1] + 1;
        (oh, ow)
    }
    fn x_shape(&self) -> Vec<i64> {
        if self.nhwc {
            vec![self.n, self.h, self.w, self.c]
        } else {
            vec![self.n, self.c, self.h, self.w]
        }
    }
    fn w_shape(&self) -> Vec<i64> {
        let ig = self.c / self.g;
        if self.nhwc {
            vec![self.o, self.k[0], self.k[1], ig]
        } else {
            vec![self.o, ig, self.k[0], self.k[1]]
        }
    }
    fn y_shape(&self) -> Vec<i64> {
        let (oh, ow) = self.out_hw();
        if self.nhwc {
            vec![self.n, oh, ow, self.o]
        } else {
            vec![self.n, self.o, oh, ow]
        }
    }
    fn xi(&self, n: i64, c: i64, y: i64, x: i64) -> usize {
        (if self.nhwc {
            ((n * self.h + y) * self.w + x) * self.c + c
        } else {
            ((n * self.c + c) * self.h + y) * self.w + x
        }) as usize
    }
    fn wi(&self, o: i64, i: i64, ky: i64, kx: i64) -> usize {
        let ig = self.c / self.g;
        (if self.nhwc {
            ((o * self.k[0] + ky) * self.k[1] + kx) * ig + i
        } else {
            ((o * ig + i) * self.k[0] + ky) * self.k[1] + kx
        }) as usize
    }
    fn yi(&self, n: i64, o: i64, y: i64, x: i64) -> usize {
        let (oh, ow) = self.out_hw();
        (if self.nhwc {
            ((n * oh + y) * ow + x) * self.o + o
        } else {
            ((n * self.o + o) * oh + y) * ow + x
        }) as usize
    }
    /// Raw accumulation sum_{i,ky,kx} x * w over the group of `o` (zero padding).
    fn reference(&self, x: &[f64], w: &[f64]) -> Vec<f64> {
        let (oh, ow) = self.out_hw();
        let (ig, og) = (self.c / self.g, self.o / self.g);
        let mut y = vec![0.0; numel(&self.y_shape())];
        for n in 0..self.n {
            for o in 0..self.o {
                let grp = o / og;
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = 0.0;
                        for i in 0..ig {
                            for ky in 0..self.k[0] {
                                for kx in 0..self.k[1] {
                                    let iy = oy * self.s[0] + ky * self.d[0] - self.p[0];
                                    let ix = ox * self.s[1] + kx * self.d[1] - self.p[1];
                                    if iy < 0 || ix < 0 || iy >= self.h || ix >= self.w {
                                        continue;
                                    }
                                    acc += x[self.xi(n, grp * ig + i, iy, ix)]
                                        * w[self.wi(o, i, ky, kx)];
                                }
                            }
                        }
                        y[self.yi(n, o, oy, ox)] = acc;
                    }
                }
            }
        }
        y
    }
    fn attrs(&self) -> Json {
        let act = match self.act {
            "clip" => json!({"clip": [-0.5, 0.75]}),
            a => json!(a),
        };
        json!({"layout": if self.nhwc {"NHWC"} else {"NCHW"}, "strides": self.s, "padding": self.p,
               "dilation": self.d, "groups": self.g, "activation": act})
    }
    fn channel_of(&self, idx: usize) -> usize {
        let (oh, ow) = self.out_hw();
        if self.nhwc {
            idx % self.o as usize
        } else {
            (idx / (oh * ow) as usize) % self.o as usize
        }
    }
}

fn act_ref(v: f64, act: &str) -> f64 {
    match act {
        "relu" => v.max(0.0),
        "relu6" => v.clamp(0.0, 6.0),
        "clip" => v.clamp(-0.5, 0.75),
        _ => v,
    }
}

fn conv_cases() -> Vec<ConvCase> {
    let base = ConvCase {
        nhwc: true,
        n: 1,
        c: 3,
        h: 9,
        w: 11,
        o: 8,
        k: [3, 3],
        s: [1, 1],
        p: [1, 1, 1, 1],
        d: [1, 1],
        g: 1,
        bias: true,
        act: "relu",
    };
    let mut v = Vec::new();
    for nhwc in [true, false] {
        let b = ConvCase { nhwc, ..base };
        v.push(b);
        v.push(ConvCase {
            k: [1, 1],
            p: [0; 4],
            c: 16,
            o: 24,
            act: "none",
            ..b
        }); // pointwise
        v.push(ConvCase {
            s: [2, 2],
            p: [0, 1, 1, 0],
            act: "relu6",
            ..b
        }); // stride, asymmetric pad
        v.push(ConvCase {
            d: [2, 2],
            p: [2, 2, 2, 2],
            bias: false,
            act: "clip",
            ..b
        }); // dilation
        v.push(ConvCase {
            c: 4,
            o: 6,
            g: 2,
            ..b
        }); // grouped
        v.push(ConvCase {
            c: 8,
            o: 8,
            g: 8,
            ..b
        }); // depthwise
        v.push(ConvCase {
            c: 4,
            o: 8,
            g: 4,
            s: [2, 1],
            ..b
        }); // depthwise, multiplier 2
        v.push(ConvCase {
            c: 8,
            o: 8,
            g: 8,
            s: [2, 2],
            p: [0, 0, 1, 1],
            ..b
        }); // depthwise stride 2
        v.push(ConvCase {
            n: 2,
            k: [2, 3],
            s: [1, 2],
            p: [0, 2, 1, 0],
            ..b
        }); // batch, rect kernel
        v.push(ConvCase {
            k: [1, 1],
            p: [0; 4],
            s: [2, 2],
            c: 5,
            o: 7,
            ..b
        }); // strided 1x1
        v.push(ConvCase {
            h: 20,
            w: 20,
            c: 6,
            o: 10,
            ..b
        }); // several im2col blocks
    }
    v
}

#[test]
fn conv2d_float32_matches_reference() {
    let mut rng = Rng(1);
    for (ci, c) in conv_cases().into_iter().enumerate() {
        let x = rng.vec(numel(&c.x_shape()), -1.0, 1.0);
        let w = rng.vec(numel(&c.w_shape()), -1.0, 1.0);
        let b = rng.vec(c.o as usize, -0.5, 0.5);
        let mut tensors = vec![t(&c.x_shape(), "float32"), t(&c.w_shape(), "float32")];
        let mut consts = vec![f32_tensor(&c.w_shape(), &w)];
        let mut node_in = vec![0, 1];
        if c.bias {
            tensors.push(t(&[c.o], "float32"));
            consts.push(f32_tensor(&[c.o], &b));
            node_in.push(2);
        }
        let out = tensors.len();
        tensors.push(t(&c.y_shape(), "float32"));
        let cidx: Vec<usize> = (1..out).collect();
        let d = desc(
            tensors,
            &[0],
            &cidx,
            &[out],
            vec![
                json!({"op": "conv2d", "name": "c0", "inputs": node_in, "outputs": [out], "attrs": c.attrs()}),
            ],
        );
        let got = run_cpu(&d, consts, vec![f32_tensor(&c.x_shape(), &x)]);
        let xr: Vec<f64> = x.iter().map(|&v| v as f32 as f64).collect();
        let wr: Vec<f64> = w.iter().map(|&v| v as f32 as f64).collect();
        let want: Vec<f64> = c
            .reference(&xr, &wr)
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                act_ref(
                    v + if c.bias {
                        b[c.channel_of(i)] as f32 as f64
                    } else {
                        0.0
                    },
                    c.act,
                )
            })
            .collect();
        check_close(&format!("conv case {ci} {c:?}"), &got[0], &want, 1e-5);
    }
}

#[test]
fn conv2d_quantized_matches_reference_within_one_lsb() {
    let mut rng = Rng(2);
    for dtype in [DType::U8, DType::I8] {
        let dn = if dtype == DType::U8 { "uint8" } else { "int8" };
        let (qlo, qhi) = if dtype == DType::U8 {
            (0, 255)
        } else {
            (-128, 127)
        };
        for per_channel in [false, true] {
            for (ci, c) in conv_cases().into_iter().enumerate() {
                let (sx, zx) = (0.02, if dtype == DType::U8 { 128 } else { 3 });
                let (so, zo) = (0.05, if dtype == DType::U8 { 120 } else { -5 });
                let sw: Vec<f64> = if per_channel {
                    rng.vec(c.o as usize, 0.002, 0.01)
                } else {
                    vec![0.005]
                };
                let zw: Vec<i64> = vec![0; sw.len()];
                let x = rng.ints(numel(&c.x_shape()), qlo, qhi);
                let w = rng.ints(numel(&c.w_shape()), -127, 127);
                let w: Vec<i64> = w
                    .iter()
                    .map(|&v| {
                        if dtype == DType::U8 {
                            (v + 128).clamp(0, 255)
                        } else {
                            v
                        }
                    })
                    .collect();
                let zw: Vec<i64> = if dtype == DType::U8 {
                    vec![128; sw.len()]
                } else {
                    zw
                };
                let bias = rng.ints(c.o as usize, -2000, 2000);
                let sb: Vec<f64> = sw.iter().map(|s| s * sx).collect();
                let zb = vec![0i64; sb.len()];
                let mut tensors = vec![
                    tq(&c.x_shape(), dn, &[sx], &[zx], 0),
                    tq(&c.w_shape(), dn, &sw, &zw, 0),
                ];
                let mut consts = vec![q_tensor(&c.w_shape(), &w, dtype)];
                let mut node_in = vec![0, 1];
                if c.bias {
                    tensors.push(tq(&[c.o], "int32", &sb, &zb, 0));
                    consts.push(i32_tensor(&[c.o], &bias));
                    node_in.push(2);
                }
                let out = tensors.len();
                tensors.push(tq(&c.y_shape(), dn, &[so], &[zo], 0));
                let cidx: Vec<usize> = (1..out).collect();
                let d = desc(
                    tensors,
                    &[0],
                    &cidx,
                    &[out],
                    vec![
                        json!({"op": "conv2d", "name": "qc", "inputs": node_in, "outputs": [out], "attrs": c.attrs()}),
                    ],
                );
                let got = run_cpu(&d, consts, vec![q_tensor(&c.x_shape(), &x, dtype)]);
                // Reference: dequantize, float conv in f64, bias, activation, quantize.
                let ig_per = numel(&c.w_shape()) / c.o as usize;
                let xr: Vec<f64> = x.iter().map(|&q| sx * (q - zx) as f64).collect();
                let wr: Vec<f64> = w
                    .iter()
                    .enumerate()
                    .map(|(i, &q)| {
                        let o = i / ig_per;
                        let k = if per_channel { o } else { 0 };
                        sw[k] * (q - zw[k]) as f64
                    })
                    .collect();
                let want: Vec<i64> = c
                    .reference(&xr, &wr)
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let o = c.channel_of(i);
                        let k = if per_channel { o } else { 0 };
                        let b = if c.bias { bias[o] as f64 * sb[k] } else { 0.0 };
                        quantize_ref(act_ref(v + b, c.act), so, zo, dtype)
                    })
                    .collect();
                check_lsb(
                    &format!("{dn} conv case {ci} per_channel={per_channel}"),
                    &got[0],
                    &want,
                );
            }
        }
    }
}

// ---------- dense / matmul ----------

#[test]
fn dense_float32_and_quantized() {
    let mut rng = Rng(3);
    let (m, k, n) = (5i64, 37i64, 11i64);
    let x = rng.vec((m * k) as usize, -1.0, 1.0);
    let w = rng.vec((n * k) as usize, -1.0, 1.0);
    let b = rng.vec(n as usize, -1.0, 1.0);
    let d = desc(
        vec![
            t(&[m, k], "float32"),
            t(&[n, k], "float32"),
            t(&[n], "float32"),
            t(&[m, n], "float32"),
        ],
        &[0],
        &[1, 2],
        &[3],
        vec![
            json!({"op": "dense", "name": "fc", "inputs": [0, 1, 2], "outputs": [3], "attrs": {"activation": "relu"}}),
        ],
    );
    let got = run_cpu(
        &d,
        vec![f32_tensor(&[n, k], &w), f32_tensor(&[n], &b)],
        vec![f32_tensor(&[m, k], &x)],
    );
    let f = |v: f64| v as f32 as f64;
    let want: Vec<f64> = (0..m * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            let s: f64 = (0..k)
                .map(|j| f(x[(r * k + j) as usize]) * f(w[(c * k + j) as usize]))
                .sum();
            (s + f(b[c as usize])).max(0.0)
        })
        .collect();
    check_close("dense f32", &got[0], &want, 1e-5);

    for dtype in [DType::U8, DType::I8] {
        let dn = if dtype == DType::U8 { "uint8" } else { "int8" };
        let (lo, hi, zx, zo) = if dtype == DType::U8 {
            (0, 255, 100, 128)
        } else {
            (-128, 127, -10, 7)
        };
        let (sx, so) = (0.03, 0.2);
        let sw: Vec<f64> = rng.vec(n as usize, 0.002, 0.01);
        let x = rng.ints((m * k) as usize, lo, hi);
        let w = rng.ints((n * k) as usize, -100, 100);
        let w: Vec<i64> = w
            .iter()
            .map(|&v| if dtype == DType::U8 { v + 128 } else { v })
            .collect();
        let zw = if dtype == DType::U8 { 128 } else { 0 };
        let bias = rng.ints(n as usize, -500, 500);
        let sb: Vec<f64> = sw.iter().map(|s| s * sx).collect();
        let d = desc(
            vec![
                tq(&[m, k], dn, &[sx], &[zx], 0),
                tq(&[n, k], dn, &sw, &[zw], 0),
                tq(&[n], "int32", &sb, &[0], 0),
                tq(&[m, n], dn, &[so], &[zo], 0),
            ],
            &[0],
            &[1, 2],
            &[3],
            vec![json!({"op": "dense", "name": "qfc", "inputs": [0, 1, 2], "outputs": [3]})],
        );
        let got = run_cpu(
            &d,
            vec![q_tensor(&[n, k], &w, dtype), i32_tensor(&[n], &bias)],
            vec![q_tensor(&[m, k], &x, dtype)],
        );
        let want: Vec<i64> = (0..m * n)
            .map(|i| {
                let (r, c) = (i / n, i % n);
                let s: f64 = (0..k)
                    .map(|j| {
                        sx * (x[(r * k + j) as usize] - zx) as f64
                            * sw[c as usize]
                            * (w[(c * k + j) as usize] - zw) as f64
                    })
                    .sum();
                quantize_ref(s + bias[c as usize] as f64 * sb[c as usize], so, zo, dtype)
            })
            .collect();
        check_lsb(&format!("dense {dn}"), &got[0], &want);
    }
}

#[test]
fn batched_matmul_broadcasts() {
    let mut rng = Rng(4);
    for (sa, sb, sy) in [
        (vec![2i64, 3, 4, 5], vec![5i64, 6], vec![2i64, 3, 4, 6]),
        (vec![3, 1, 4, 5], vec![2, 5, 6], vec![3, 2, 4, 6]),
        (vec![7, 9], vec![9, 3], vec![7, 3]),
    ] {
        let a = rng.vec(numel(&sa), -1.0, 1.0);
        let b = rng.vec(numel(&sb), -1.0, 1.0);
        // b as a constant in the first case, an input otherwise.
        let d = desc(
            vec![t(&sa, "float32"), t(&sb, "float32"), t(&sy, "float32")],
            &[0, 1],
            &[],
            &[2],
            vec![json!({"op": "matmul", "name": "mm", "inputs": [0, 1], "outputs": [2]})],
        );
        let got = run_cpu(&d, vec![], vec![f32_tensor(&sa, &a), f32_tensor(&sb, &b)]);
        let (m, k, n) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
        let batch = &sy[..sy.len() - 2];
        let bidx = |shape: &[i64], idx: &[i64]| -> i64 {
            // numpy broadcasting of batch index `idx` into `shape`'s batch dims
            let bs = &shape[..shape.len() - 2];
            let lead = idx.len() - bs.len();
            let mut off = 0;
            for (j, &d) in bs.iter().enumerate() {
                off = off * d + if d == 1 { 0 } else { idx[lead + j] };
            }
            off
        };
        let nb = numel(batch);
        let mut want = vec![0.0; numel(&sy)];
        for bi in 0..nb as i64 {
            let mut idx = vec![0i64; batch.len()];
            let mut r = bi;
            for j in (0..batch.len()).rev() {
                idx[j] = r % batch[j];
                r /= batch[j];
            }
            let (ao, bo) = (bidx(&sa, &idx) * m * k, bidx(&sb, &idx) * k * n);
            for i in 0..m {
                for j in 0..n {
                    want[(bi * m * n + i * n + j) as usize] = (0..k)
                        .map(|q| {
                            a[(ao + i * k + q) as usize] as f32 as f64
                                * b[(bo + q * n + j) as usize] as f32 as f64
                        })
                        .sum();
                }
            }
        }
        check_close(&format!("matmul {sa:?} x {sb:?}"), &got[0], &want, 1e-5);
    }
}

// ---------- pools ----------

#[allow(clippy::too_many_arguments)]
fn pool_ref(
    nhwc: bool,
    is_max: bool,
    xs: &[i64],
    x: &[f64],
    k: [i64; 2],
    s: [i64; 2],
    p: [i64; 4],
    dil: [i64; 2],
    oh: i64,
    ow: i64,
    cip: bool,
) -> Vec<f64> {
    let (n, c, h, w) = if nhwc {
        (xs[0], xs[3], xs[1], xs[2])
    } else {
        (xs[0], xs[1], xs[2], xs[3])
    };
    let at = |b: i64, ch: i64, y: i64, xx: i64| {
        (if nhwc {
            ((b * h + y) * w + xx) * c + ch
        } else {
            ((b * c + ch) * h + y) * w + xx
        }) as usize
    };
    let oat = |b: i64, ch: i64, y: i64, xx: i64| {
        (if nhwc {
            ((b * oh + y) * ow + xx) * c + ch
        } else {
            ((b * c + ch) * oh + y) * ow + xx
        }) as usize
    };
    let mut out = vec![0.0; (n * c * oh * ow) as usize];
    for b in 0..n {
        for ch in 0..c {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut vals = Vec::new();
                    let mut in_padded = 0;
                    for ky in 0..k[0] {
                        for kx in 0..k[1] {
                            let iy = oy * s[0] + ky * dil[0] - p[0];
                            let ix = ox * s[1] + kx * dil[1] - p[1];
                            // Taps inside input + declared padding (not the ceil_mode extension).
                            if iy < h + p[2] && ix < w + p[3] {
                                in_padded += 1;
                            }
                            if iy >= 0 && ix >= 0 && iy < h && ix < w {
                                vals.push(x[at(b, ch, iy, ix)]);
                            }
                        }
                    }
                    out[oat(b, ch, oy, ox)] = if is_max {
                        vals.iter().cloned().fold(f32::MIN as f64, f64::max)
                    } else {
                        let sum: f64 = vals.iter().sum();
                        sum / (if cip { in_padded } else { vals.len() }).max(1) as f64
                    };
                }
            }
        }
    }
    out
}

#[test]
fn pools_match_reference_including_ceil_mode() {
    let mut rng = Rng(5);
    type PoolCase = ([i64; 2], [i64; 2], [i64; 4], [i64; 2], bool, bool);
    let cases: Vec<PoolCase> = vec![
        ([2, 2], [2, 2], [0; 4], [1, 1], false, false),
        ([3, 3], [2, 2], [1, 1, 1, 1], [1, 1], false, true),
        ([3, 3], [2, 2], [1, 1, 1, 1], [1, 1], false, false),
        ([3, 3], [2, 2], [0, 0, 0, 0], [1, 1], true, false),
        ([3, 3], [2, 2], [1, 1, 1, 1], [1, 1], true, true),
        ([2, 3], [3, 2], [0, 1, 1, 0], [1, 1], true, true),
        ([3, 3], [1, 1], [2, 2, 2, 2], [2, 2], false, false),
    ];
    for nhwc in [true, false] {
        for is_max in [true, false] {
            for (ci, &(k, s, p, dil, ceil, cip)) in cases.iter().enumerate() {
                let (n, c, h, w) = (2i64, 3i64, 10i64, 9i64);
                let outd = |i: i64, pa: i64, pb: i64, kk: i64, ss: i64, dd: i64| {
                    let mut num = i + pa + pb - dd * (kk - 1) - 1;
                    if ceil {
                        num += ss - 1;
                    }
                    num / ss + 1
                };
                let oh = outd(h, p[0], p[2], k[0], s[0], dil[0]);
                let ow = outd(w, p[1], p[3], k[1], s[1], dil[1]);
                let xs = if nhwc {
                    vec![n, h, w, c]
                } else {
                    vec![n, c, h, w]
                };
                let ys = if nhwc {
                    vec![n, oh, ow, c]
                } else {
                    vec![n, c, oh, ow]
                };
                let x = rng.vec(numel(&xs), -2.0, 2.0);
                let op = if is_max { "max_pool2d" } else { "avg_pool2d" };
                let d = desc(
                    vec![t(&xs, "float32"), t(&ys, "float32")],
                    &[0],
                    &[],
                    &[1],
                    vec![json!({
                    "op": op, "name": "pool", "inputs": [0], "outputs": [1],
                    "attrs": {"layout": if nhwc {"NHWC"} else {"NCHW"}, "pool_size": k, "strides": s, "padding": p,
                              "dilation": dil, "ceil_mode": ceil, "count_include_pad": cip}})],
                );
                let got = run_cpu(&d, vec![], vec![f32_tensor(&xs, &x)]);
                let xr: Vec<f64> = x.iter().map(|&v| v as f32 as f64).collect();
                let want = pool_ref(nhwc, is_max, &xs, &xr, k, s, p, dil, oh, ow, cip);
                check_close(&format!("{op} nhwc={nhwc} case {ci}"), &got[0], &want, 1e-5);
            }
        }
        // Global pools.
        for is_max in [true, false] {
            let xs = if nhwc {
                vec![2i64, 5, 7, 4]
            } else {
                vec![2i64, 4, 5, 7]
            };
            let ys = if nhwc {
                vec![2i64, 1, 1, 4]
            } else {
                vec![2i64, 4, 1, 1]
            };
            let x = rng.vec(numel(&xs), -2.0, 2.0);
            let op = if is_max {
                "global_max_pool2d"
            } else {
                "global_avg_pool2d"
            };
            let d = desc(
                vec![t(&xs, "float32"), t(&ys, "float32")],
                &[0],
                &[],
                &[1],
                vec![
                    json!({"op": op, "name": "gp", "inputs": [0], "outputs": [1], "attrs": {"layout": if nhwc {"NHWC"} else {"NCHW"}}}),
                ],
            );
            let got = run_cpu(&d, vec![], vec![f32_tensor(&xs, &x)]);
            let xr: Vec<f64> = x.iter().map(|&v| v as f32 as f64).collect();
            let want = pool_ref(
                nhwc,
                is_max,
                &xs,
                &xr,
                [5, 7],
                [1, 1],
                [0; 4],
                [1, 1],
                1,
                1,
                false,
            );
            check_close(&format!("{op} nhwc={nhwc}"), &got[0], &want, 1e-5);
        }
    }
}

// ---------- elementwise, softmax, reshape, concatenate ----------

#[test]
fn elementwise_softmax_reshape_concat() {
    let mut rng = Rng(6);
    // add / multiply with broadcasting and a fused activation.
    for (sa, sb) in [
        (vec![2i64, 3, 4], vec![2i64, 3, 4]),
        (vec![2, 3, 4], vec![4]),
        (vec![2, 1, 4], vec![3, 1]),
        (vec![1], vec![2, 3]),
    ] {
        let sy: Vec<i64> = {
            let n = sa.len().max(sb.len());
            (0..n)
                .map(|i| {
                    let a = if i + sa.len() >= n {
                        sa[i + sa.len() - n]
                    } else {
                        1
                    };
                    let b = if i + sb.len() >= n {
                        sb[i + sb.len() - n]
                    } else {
                        1
                    };
                    a.max(b)
                })
                .collect()
        };
        let a = rng.vec(numel(&sa), -2.0, 2.0);
        let b = rng.vec(numel(&sb), -2.0, 2.0);
        for op in ["add", "multiply"] {
            let d = desc(
                vec![t(&sa, "float32"), t(&sb, "float32"), t(&sy, "float32")],
                &[0],
                &[1],
                &[2],
                vec![
                    json!({"op": op, "name": "e", "inputs": [0, 1], "outputs": [2], "attrs": {"activation": "relu6"}}),
                ],
            );
            let got = run_cpu(&d, vec![f32_tensor(&sb, &b)], vec![f32_tensor(&sa, &a)]);
            let idx = |s: &[i64], flat: usize| -> usize {
                let mut rem = flat as i64;
                let mut coords = vec![0i64; sy.len()];
                for j in (0..sy.len()).rev() {
                    coords[j] = rem % sy[j];
                    rem /= sy[j];
                }
                let lead = sy.len() - s.len();
                let mut off = 0;
                for (j, &d) in s.iter().enumerate() {
                    off = off * d + if d == 1 { 0 } else { coords[lead + j] };
                }
                off as usize
            };
            let want: Vec<f64> = (0..numel(&sy))
                .map(|i| {
                    let (x, y) = (a[idx(&sa, i)] as f32 as f64, b[idx(&sb, i)] as f32 as f64);
                    (if op == "add" { x + y } else { x * y }).clamp(0.0, 6.0)
                })
                .collect();
            check_close(&format!("{op} {sa:?} {sb:?}"), &got[0], &want, 1e-6);
        }
    }
    // relu, relu6, clip
    let s = [3i64, 5];
    let x = rng.vec(15, -8.0, 8.0);
    for (op, attrs, lo, hi) in [
        ("relu", json!({}), 0.0, f64::INFINITY),
        ("relu6", json!({}), 0.0, 6.0),
        ("clip", json!({"min": -1.5, "max": 2.5}), -1.5, 2.5),
    ] {
        let d = desc(
            vec![t(&s, "float32"), t(&s, "float32")],
            &[0],
            &[],
            &[1],
            vec![json!({"op": op, "name": "a", "inputs": [0], "outputs": [1], "attrs": attrs})],
        );
        let got = run_cpu(&d, vec![], vec![f32_tensor(&s, &x)]);
        let want: Vec<f64> = x.iter().map(|&v| (v as f32 as f64).clamp(lo, hi)).collect();
        check_close(op, &got[0], &want, 1e-6);
    }
    // softmax over each axis (negative numbering too)
    let s = [2i64, 3, 4];
    let x = rng.vec(24, -3.0, 3.0);
    for axis in [-1i64, 0, 1, 2, -3] {
        let d = desc(
            vec![t(&s, "float32"), t(&s, "float32")],
            &[0],
            &[],
            &[1],
            vec![
                json!({"op": "softmax", "name": "sm", "inputs": [0], "outputs": [1], "attrs": {"axis": axis}}),
            ],
        );
        let got = run_cpu(&d, vec![], vec![f32_tensor(&s, &x)]);
        let ax = if axis < 0 { axis + 3 } else { axis } as usize;
        let mut want = vec![0.0; 24];
        let st = [12usize, 4, 1];
        for i in 0..24usize {
            let base = i - ((i / st[ax]) % s[ax] as usize) * st[ax];
            let vals: Vec<f64> = (0..s[ax] as usize)
                .map(|k| x[base + k * st[ax]] as f32 as f64)
                .collect();
            let mx = vals.iter().cloned().fold(f64::MIN, f64::max);
            let sum: f64 = vals.iter().map(|v| (v - mx).exp()).sum();
            want[i] = ((x[i] as f32 as f64) - mx).exp() / sum;
        }
        check_close(&format!("softmax axis {axis}"), &got[0], &want, 1e-6);
    }
    // softmax along a last axis wider than the 16-lane chunks (37 = 2 x 16 + 5), with large
    // values (the maximum must be subtracted) and on rows of 1
    for (s, spread) in [([3i64, 37], 40.0), ([5, 1], 3.0)] {
        let (rows, len) = (s[0] as usize, s[1] as usize);
        let x = rng.vec(rows * len, -spread, spread);
        let d = desc(
            vec![t(&s, "float32"), t(&s, "float32")],
            &[0],
            &[],
            &[1],
            vec![
                json!({"op": "softmax", "name": "sm", "inputs": [0], "outputs": [1], "attrs": {"axis": -1}}),
            ],
        );
        let got = run_cpu(&d, vec![], vec![f32_tensor(&s, &x)]);
        let mut want = vec![0.0; rows * len];
        for r in 0..rows {
            let vals: Vec<f64> = x[r * len..(r + 1) * len]
                .iter()
                .map(|&v| v as f32 as f64)
                .collect();
            let mx = vals.iter().cloned().fold(f64::MIN, f64::max);
            let sum: f64 = vals.iter().map(|v| (v - mx).exp()).sum();
            for (k, v) in vals.iter().enumerate() {
                want[r * len + k] = (v - mx).exp() / sum;
            }
        }
        check_close(&format!("softmax {s:?} last axis"), &got[0], &want, 1e-6);
    }
    // reshape then concatenate along axis -2 with a constant, in one graph
    let a = rng.vec(12, -1.0, 1.0);
    let c = rng.vec(16, -1.0, 1.0);
    let d = desc(
        vec![
            t(&[3, 4], "float32"),
            t(&[2, 3, 2], "float32"),
            t(&[2, 4, 2], "float32"),
            t(&[2, 7, 2], "float32"),
        ],
        &[0],
        &[2],
        &[3],
        vec![
            json!({"op": "reshape", "name": "r", "inputs": [0], "outputs": [1]}),
            json!({"op": "concatenate", "name": "cat", "inputs": [1, 2], "outputs": [3], "attrs": {"axis": -2}}),
        ],
    );
    let got = run_cpu(
        &d,
        vec![f32_tensor(&[2, 4, 2], &c)],
        vec![f32_tensor(&[3, 4], &a)],
    );
    let mut want = Vec::new();
    for b in 0..2 {
        want.extend(a[b * 6..b * 6 + 6].iter().map(|&v| v as f32 as f64));
        want.extend(c[b * 8..b * 8 + 8].iter().map(|&v| v as f32 as f64));
    }
    check_close("reshape+concatenate", &got[0], &want, 0.0);
}

#[test]
fn quantized_add_and_pool_within_one_lsb() {
    let mut rng = Rng(7);
    for dtype in [DType::U8, DType::I8] {
        let dn = if dtype == DType::U8 { "uint8" } else { "int8" };
        let (lo, hi) = if dtype == DType::U8 {
            (0, 255)
        } else {
            (-128, 127)
        };
        let s = [2i64, 4, 4, 8];
        let (sa, za, sb, zb, so, zo) = (0.02, lo + 100, 0.03, lo + 120, 0.04, lo + 110);
        let a = rng.ints(numel(&s), lo, hi);
        let b = rng.ints(8, lo, hi);
        let d = desc(
            vec![
                tq(&s, dn, &[sa], &[za], 0),
                tq(&[8], dn, &[sb], &[zb], 0),
                tq(&s, dn, &[so], &[zo], 0),
            ],
            &[0],
            &[1],
            &[2],
            vec![
                json!({"op": "add", "name": "qadd", "inputs": [0, 1], "outputs": [2], "attrs": {"activation": "relu"}}),
            ],
        );
        let got = run_cpu(
            &d,
            vec![q_tensor(&[8], &b, dtype)],
            vec![q_tensor(&s, &a, dtype)],
        );
        let want: Vec<i64> = (0..numel(&s))
            .map(|i| {
                let v = sa * (a[i] - za) as f64 + sb * (b[i % 8] - zb) as f64;
                quantize_ref(v.max(0.0), so, zo, dtype)
            })
            .collect();
        check_lsb(&format!("add {dn}"), &got[0], &want);

        let ys = [2i64, 2, 2, 8];
        let d = desc(
            vec![tq(&s, dn, &[sa], &[za], 0), tq(&ys, dn, &[sa], &[za], 0)],
            &[0],
            &[],
            &[1],
            vec![
                json!({"op": "avg_pool2d", "name": "qpool", "inputs": [0], "outputs": [1],
                        "attrs": {"layout": "NHWC", "pool_size": [2, 2], "strides": [2, 2]}}),
            ],
        );
        let got = run_cpu(&d, vec![], vec![q_tensor(&s, &a, dtype)]);
        let ar: Vec<f64> = a.iter().map(|&q| sa * (q - za) as f64).collect();
        let want: Vec<i64> = pool_ref(
            true,
            false,
            &s,
            &ar,
            [2, 2],
            [2, 2],
            [0; 4],
            [1, 1],
            2,
            2,
            false,
        )
        .iter()
        .map(|&v| quantize_ref(v, sa, za, dtype))
        .collect();
        check_lsb(&format!("avg_pool2d {dn}"), &got[0], &want);
    }
}

// ---------- malformed descriptions ----------

fn good_desc() -> String {
    desc(
        vec![
            t(&[1, 4, 4, 3], "float32"),
            t(&[8, 3, 3, 3], "float32"),
            t(&[8], "float32"),
            t(&[1, 4, 4, 8], "float32"),
            t(&[1, 4, 4, 8], "float32"),
        ],
        &[0],
        &[1, 2],
        &[4],
        vec![
            json!({"op": "conv2d", "name": "conv", "inputs": [0, 1, 2], "outputs": [3],
                   "attrs": {"layout": "NHWC", "strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1, "activation": "none"}}),
            json!({"op": "relu", "name": "act", "inputs": [3], "outputs": [4]}),
        ],
    )
}

fn expect_subgraph_error(text: &str, needles: &[&str]) {
    match SubgraphRunner::new(text, vec![]) {
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::Subgraph, "{e}");
            let msg = e.to_string();
            for n in needles {
                assert!(msg.contains(n), "error `{msg}` lacks `{n}`");
            }
        }
        Ok(_) => panic!("accepted: {text}"),
    }
}

#[test]
fn malformed_descriptions_give_typed_errors() {
    let g: Json = serde_json::from_str(&good_desc()).unwrap();
    let with = |f: &dyn Fn(&mut Json)| {
        let mut j = g.clone();
        f(&mut j);
        j.to_string()
    };
    expect_subgraph_error("{not json", &["not valid JSON"]);
    expect_subgraph_error("[]", &["not a JSON object"]);
    expect_subgraph_error(&with(&|j| j["format"] = json!("tvm.json")), &["format"]);
    expect_subgraph_error(
        &with(&|j| j["version"] = json!(4)),
        &["version 4", "versions 1 to 3"],
    );
    expect_subgraph_error(
        &with(&|j| j["nodes"][0]["attrs"]["activation"] = json!("sigmoid")),
        &[
            "node `conv`",
            "activation `sigmoid` needs subgraph format version 2; this description says version 1",
        ],
    );
    expect_subgraph_error(
        &with(&|j| j["nodes"][1]["op"] = json!("gelu")),
        &["node `act`", "unknown op `gelu`"],
    );
    expect_subgraph_error(
        &with(&|j| j["nodes"][0]["inputs"][0] = json!(17)),
        &["node `conv`", "out of range"],
    );
    expect_subgraph_error(
        &with(&|j| j["tensors"][3]["shape"] = json!([1, 4, 4, 9])),
        &["node `conv`", "inferred shape"],
    );
    expect_subgraph_error(
        &with(&|j| j["nodes"][0]["attrs"]["strides"] = json!([2, 2])),
        &["node `conv`", "inferred shape"],
    );
    expect_subgraph_error(
        &with(&|j| j["nodes"][1]["outputs"][0] = json!(3)),
        &["node `act`"],
    );
    expect_subgraph_error(
        &with(&|j| {
            // Out of order: relu before the conv that produces its input.
            let n = j["nodes"].as_array_mut().unwrap();
            n.swap(0, 1);
        }),
        &["node `act`", "before any node produces it"],
    );
    expect_subgraph_error(
        &with(&|j| j["nodes"][1]["name"] = json!("conv")),
        &["not unique"],
    );
    expect_subgraph_error(
        &with(&|j| j["tensors"][0]["dtype"] = json!("complex64")),
        &["tensor 0", "complex64"],
    );
    expect_subgraph_error(
        &with(&|j| j["nodes"][0]["attrs"]["layout"] = json!("NCWH")),
        &["node `conv`", "NCWH"],
    );
    expect_subgraph_error(
        &with(&|j| j["nodes"][0]["attrs"]["activation"] = json!("gelu")),
        &["gelu"],
    );
    expect_subgraph_error(&with(&|j| j["outputs"] = json!([4, 4])), &["listed twice"]);
    expect_subgraph_error(
        &with(&|j| {
            j["nodes"].as_array_mut().unwrap().pop();
        }),
        &["tensor 4", "never produced"],
    );
    expect_subgraph_error(
        &with(&|j| j["tensors"][0]["quant"] = json!({"scale": [-1.0], "zero_point": [0]})),
        &["tensor 0"],
    );
    expect_subgraph_error(
        &with(&|j| j["nodes"][0]["attrs"]["groups"] = json!(2)),
        &["node `conv`", "groups"],
    );

    // No input may panic: every truncation and a few byte flips of a valid description.
    let text = good_desc();
    for cut in 0..text.len() {
        let r = std::panic::catch_unwind(|| SubgraphRunner::new(&text[..cut], vec![]).map(|_| ()));
        assert!(r.is_ok(), "panic on a truncated description ({cut} bytes)");
        assert!(r.unwrap().is_err());
    }
    let bytes = text.as_bytes();
    let mut rng = Rng(9);
    for _ in 0..2000 {
        let mut b = bytes.to_vec();
        let i = (rng.next() * b.len() as f64) as usize % b.len();
        b[i] = b"0123456789-[]{},:\"ae"[(rng.next() * 20.0) as usize % 20];
        let s = String::from_utf8_lossy(&b).into_owned();
        let r = std::panic::catch_unwind(|| SubgraphRunner::new(&s, vec![]).map(|_| ()));
        assert!(r.is_ok(), "panic on {s}");
    }

    // A valid description with constants of the wrong shape is refused too.
    let r = SubgraphRunner::new(
        &good_desc(),
        vec![
            f32_tensor(&[8, 3, 3, 2], &[0.0; 144]),
            f32_tensor(&[8], &[0.0; 8]),
        ],
    );
    assert!(matches!(r, Err(Error::Subgraph { .. })));
    // And inputs of the wrong shape at run time.
    let r = SubgraphRunner::new(
        &good_desc(),
        vec![
            f32_tensor(&[8, 3, 3, 3], &[0.0; 216]),
            f32_tensor(&[8], &[0.0; 8]),
        ],
    )
    .unwrap();
    let e = r
        .run(&cpu(), &[f32_tensor(&[1, 4, 4, 2], &[0.0; 32])])
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Subgraph, "{e}");
}

// ---------- plug-ins ----------

#[cfg(target_os = "linux")]
fn plugin_counter(path: &str, symbol: &str) -> u64 {
    use std::ffi::{c_char, c_int, c_void, CString};
    extern "C" {
        fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }
    let p = CString::new(path).unwrap();
    let s = CString::new(symbol).unwrap();
    // SAFETY: RTLD_LAZY (1) | RTLD_NOLOAD (4 on Linux/glibc) only looks up the already loaded
    // plug-in; the symbol is a u64 counter defined by tests/plugins/test_plugin.c.
    unsafe {
        let h = dlopen(p.as_ptr(), 1 | 4);
        assert!(!h.is_null(), "the test plug-in is not loaded");
        let v = dlsym(h, s.as_ptr());
        assert!(!v.is_null(), "no symbol {symbol}");
        std::ptr::read_volatile(v as *const u64)
    }
}

#[test]
fn plugin_takes_supported_nodes_and_the_rest_falls_back() {
    let path = env!("MOTE_TEST_PLUGIN");
    assert!(
        !path.is_empty(),
        "tests/build.rs did not build the test plug-in"
    );
    let b = mote::backend::load_plugin(path).unwrap_or_else(|e| panic!("load {path}: {e}"));
    assert_eq!(b.name(), "testplug");
    assert!(mote::backend::backend_names()
        .iter()
        .any(|n| n == "testplug"));

    // conv (cpu) -> add with an input (plug-in) -> relu (plug-in) -> max_pool (cpu) -> add with
    // broadcasting (plug-in refuses: no broadcast) -> output
    let mut rng = Rng(11);
    let d = desc(
        vec![
            t(&[1, 6, 6, 3], "float32"), // 0 x
            t(&[4, 3, 3, 3], "float32"), // 1 w
            t(&[1, 6, 6, 4], "float32"), // 2 conv out
            t(&[1, 6, 6, 4], "float32"), // 3 skip input
            t(&[1, 6, 6, 4], "float32"), // 4 add out
            t(&[1, 6, 6, 4], "float32"), // 5 relu out
            t(&[1, 3, 3, 4], "float32"), // 6 pool out
            t(&[4], "float32"),          // 7 per-channel constant
            t(&[1, 3, 3, 4], "float32"), // 8 final
        ],
        &[0, 3],
        &[1, 7],
        &[8, 5],
        vec![
            json!({"op": "conv2d", "name": "conv", "inputs": [0, 1], "outputs": [2],
                   "attrs": {"layout": "NHWC", "padding": [1, 1, 1, 1]}}),
            json!({"op": "add", "name": "skip_add", "inputs": [2, 3], "outputs": [4]}),
            json!({"op": "relu", "name": "act", "inputs": [4], "outputs": [5]}),
            json!({"op": "max_pool2d", "name": "pool", "inputs": [5], "outputs": [6],
                   "attrs": {"layout": "NHWC", "pool_size": [2, 2], "strides": [2, 2]}}),
            json!({"op": "add", "name": "bias_add", "inputs": [6, 7], "outputs": [8]}),
        ],
    );
    let w = f32_tensor(&[4, 3, 3, 3], &rng.vec(108, -1.0, 1.0));
    let k = f32_tensor(&[4], &rng.vec(4, -1.0, 1.0));
    let x = f32_tensor(&[1, 6, 6, 3], &rng.vec(108, -1.0, 1.0));
    let skip = f32_tensor(&[1, 6, 6, 4], &rng.vec(144, -1.0, 1.0));
    let r = SubgraphRunner::new(&d, vec![w, k]).unwrap();

    let plan = r.plan(&[]);
    assert_eq!(
        plan.backends.first().map(String::as_str),
        Some("testplug"),
        "{plan:?}"
    );
    let on: Vec<(&str, &str)> = plan
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.backend.as_str()))
        .collect();
    assert_eq!(
        on,
        [
            ("conv", "cpu"),
            ("skip_add", "testplug"),
            ("act", "testplug"),
            ("pool", "cpu"),
            ("bias_add", "cpu")
        ]
    );
    let conv = &plan.nodes[0];
    assert!(
        conv.fallback_reasons
            .iter()
            .any(|r| r.contains("testplug") && r.contains("only float32 add and relu")),
        "{conv:?}"
    );
    assert!(
        plan.nodes[4]
            .fallback_reasons
            .iter()
            .any(|r| r.contains("broadcast")),
        "{:?}",
        plan.nodes[4]
    );
    assert_eq!(
        plan.segments,
        [
            ("cpu".into(), 0, 1),
            ("testplug".into(), 1, 2),
            ("cpu".into(), 3, 2)
        ]
    );

    #[cfg(target_os = "linux")]
    let before = plugin_counter(path, "test_plugin_nodes_run");
    let with_plugin = r.run(&[], &[x.clone(), skip.clone()]).unwrap();
    #[cfg(target_os = "linux")]
    assert_eq!(
        plugin_counter(path, "test_plugin_nodes_run") - before,
        2,
        "the plug-in ran both of its nodes"
    );
    let cpu_only = r.run(&cpu(), &[x, skip]).unwrap();
    assert_eq!(
        r.plan(&cpu())
            .nodes
            .iter()
            .filter(|n| n.backend == "cpu")
            .count(),
        5
    );
    for (a, b) in with_plugin.iter().zip(&cpu_only) {
        check_close("plug-in vs cpu", a, &to_f64(b), 1e-6);
    }
}

#[test]
fn plugins_with_a_wrong_abi_or_missing_symbols_are_refused() {
    let bad = env!("MOTE_TEST_PLUGIN_BAD_ABI");
    assert!(
        !bad.is_empty(),
        "tests/build.rs did not build the bad-ABI plug-in"
    );
    let e = mote::backend::load_plugin(bad)
        .err()
        .expect("a wrong ABI version must be refused");
    assert_eq!(e.code(), ErrorCode::Backend);
    assert!(e.to_string().contains("ABI version 99"), "{e}");

    let e = mote::backend::load_plugin("/nonexistent/libnothing.so")
        .err()
        .expect("missing file");
    assert_eq!(e.code(), ErrorCode::Backend, "{e}");

    // A real shared library that is not a plug-in: the test binary's own libc.
    #[cfg(target_os = "linux")]
    {
        let e = mote::backend::load_plugin("libc.so.6")
            .err()
            .expect("libc is not a plug-in");
        assert!(e.to_string().contains("mote_backend_abi_version"), "{e}");
    }
    assert!(!mote::backend::backend_names().iter().any(|n| n.is_empty()));
}
