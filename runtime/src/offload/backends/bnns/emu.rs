//! A naive stand-in for Accelerate's filter API, for tests on machines without it.
//!
//! It reads the `#[repr(C)]` parameter structs the way the BNNS header defines them (ImageCHW
//! size = (W, H, C); OIHW weights size = (KW, KH, I/groups, O); `pad[4]` = left, right, up,
//! down, used when `x_padding`/`y_padding` are 0; dilation ignored when <= 1; RowMajorMatrix
//! size = (columns, rows); output = act(bias + op); Clamp = min(max(x, alpha), beta); ApplyBatch
//! strides in values) and refuses, like BNNS, what it does not implement or what breaks the
//! header's exact window rule `in + pads = stride * (out - 1) + dilated kernel`. It copies
//! weights at creation, as BNNS does without `BNNSFlagsUseClientPtr`. It is written from the
//! header's definitions, independently of the CPU backend it is compared with.

use std::ffi::c_void;
use std::ptr::NonNull;

use super::engine::{Engine, Layer};
use super::sys::{self, BnnsActivation, BnnsNdArrayDescriptor};

/// The emulator (stateless; filters are boxed [`EmuFilter`]s).
pub(crate) struct Emulator;

/// The one instance tests hand to the backend.
pub(crate) static EMULATOR: Emulator = Emulator;

#[derive(Clone, Copy)]
struct Act {
    function: u32,
    alpha: f32,
    beta: f32,
}

impl Act {
    fn read(a: &BnnsActivation) -> Option<Act> {
        match a.function {
            sys::ACTIVATION_IDENTITY | sys::ACTIVATION_RELU | sys::ACTIVATION_CLAMP => Some(Act {
                function: a.function,
                alpha: a.alpha,
                beta: a.beta,
            }),
            _ => None,
        }
    }
    fn apply(self, x: f32) -> f32 {
        match self.function {
            sys::ACTIVATION_RELU => x.max(0.0),
            sys::ACTIVATION_CLAMP => x.max(self.alpha).min(self.beta),
            _ => x,
        }
    }
}

#[derive(Clone, Copy)]
struct Geometry {
    k: [usize; 2],      // kw, kh
    s: [usize; 2],      // x, y stride
    d: [usize; 2],      // x, y dilation
    before: [usize; 2], // left, up
}

enum EmuFilter {
    Conv {
        i: [usize; 3], // w, h, c
        o: [usize; 3],
        g: Geometry,
        groups: usize,
        weights: Vec<f32>,
        bias: Option<Vec<f32>>,
        act: Act,
    },
    Fc {
        inputs: usize,
        outputs: usize,
        weights: Vec<f32>,
        bias: Option<Vec<f32>>,
        act: Act,
    },
    Pool {
        i: [usize; 3],
        o: [usize; 3],
        g: Geometry,
        function: u32,
    },
    Act {
        len: usize,
        act: Act,
        softmax: bool,
    },
    Arith {
        len: usize,
        function: u32,
        act: Act,
    },
}

fn plain_f32(d: &BnnsNdArrayDescriptor) -> bool {
    d.data_type == sys::DATA_TYPE_FLOAT32 && d.stride.iter().all(|&s| s == 0)
}

/// `size[..rank]` of a descriptor with `layout`, the rest zero.
fn sizes<const R: usize>(d: &BnnsNdArrayDescriptor, layout: u32) -> Option<[usize; R]> {
    if d.layout != layout || !plain_f32(d) || d.size[R..].iter().any(|&s| s != 0) {
        return None;
    }
    let mut out = [0; R];
    out.copy_from_slice(&d.size[..R]);
    out.iter().all(|&s| s > 0).then_some(out)
}

/// Copy `n` floats from a descriptor's data (`None` if NULL).
///
/// # Safety
/// A non-NULL `data` is valid for `n` floats.
unsafe fn copy_data(d: &BnnsNdArrayDescriptor, n: usize) -> Option<Vec<f32>> {
    if d.data.is_null() {
        return None;
    }
    // SAFETY: per this function's contract.
    Some(unsafe { std::slice::from_raw_parts(d.data as *const f32, n) }.to_vec())
}

/// Optional bias of `n` values: absent when its data is NULL.
///
/// # Safety
/// As [`copy_data`].
unsafe fn bias(d: &BnnsNdArrayDescriptor, n: usize) -> Result<Option<Vec<f32>>, ()> {
    if d.data.is_null() {
        return Ok(None);
    }
    if sizes::<1>(d, sys::LAYOUT_VECTOR) != Some([n]) {
        return Err(());
    }
    // SAFETY: non-NULL, described as `n` floats.
    Ok(unsafe { copy_data(d, n) })
}

/// The padding, checked against the exact window rule on both axes.
#[allow(clippy::too_many_arguments)]
fn geometry(
    i: [usize; 3],
    o: [usize; 3],
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    x_padding: usize,
    y_padding: usize,
    pad: [usize; 4],
) -> Option<Geometry> {
    let (l, r, u, dn) = if x_padding > 0 || y_padding > 0 {
        (x_padding, x_padding, y_padding, y_padding)
    } else {
        (pad[0], pad[1], pad[2], pad[3])
    };
    let d = [d[0].max(1), d[1].max(1)];
    if s.contains(&0) {
        return None;
    }
    for (ax, (b, a)) in [(l, r), (u, dn)].into_iter().enumerate() {
        let eff = d[ax] * (k[ax] - 1) + 1;
        if i[ax] + b + a != s[ax] * (o[ax] - 1) + eff {
            return None;
        }
    }
    Some(Geometry {
        k,
        s,
        d,
        before: [l, u],
    })
}

impl EmuFilter {
    /// # Safety
    /// As [`Engine::create`].
    unsafe fn from_layer(layer: Layer<'_>) -> Option<EmuFilter> {
        match layer {
            Layer::Convolution(p) => {
                let i = sizes::<3>(&p.i_desc, sys::LAYOUT_IMAGE_CHW)?;
                let o = sizes::<3>(&p.o_desc, sys::LAYOUT_IMAGE_CHW)?;
                let w = sizes::<4>(&p.w_desc, sys::LAYOUT_CONVOLUTION_WEIGHTS_OIHW)?;
                let groups = p.groups.max(1);
                if i[2] % groups != 0 || o[2] % groups != 0 || w[2] != i[2] / groups || w[3] != o[2]
                {
                    return None;
                }
                let g = geometry(
                    i,
                    o,
                    [w[0], w[1]],
                    [p.x_stride, p.y_stride],
                    [p.x_dilation_stride, p.y_dilation_stride],
                    p.x_padding,
                    p.y_padding,
                    p.pad,
                )?;
                // SAFETY: the caller guarantees the weight and bias data match their
                // descriptors.
                let weights = unsafe { copy_data(&p.w_desc, w.iter().product()) }?;
                // SAFETY: as above.
                let bias = unsafe { bias(&p.bias, o[2]) }.ok()?;
                Some(EmuFilter::Conv {
                    i,
                    o,
                    g,
                    groups,
                    weights,
                    bias,
                    act: Act::read(&p.activation)?,
                })
            }
            Layer::FullyConnected(p) => {
                let [inputs] = sizes::<1>(&p.i_desc, sys::LAYOUT_VECTOR)?;
                let [outputs] = sizes::<1>(&p.o_desc, sys::LAYOUT_VECTOR)?;
                if sizes::<2>(&p.w_desc, sys::LAYOUT_ROW_MAJOR_MATRIX)? != [inputs, outputs] {
                    return None;
                }
                // SAFETY: the caller guarantees the data match the descriptors.
                let weights = unsafe { copy_data(&p.w_desc, inputs * outputs) }?;
                // SAFETY: as above.
                let bias = unsafe { bias(&p.bias, outputs) }.ok()?;
                Some(EmuFilter::Fc {
                    inputs,
                    outputs,
                    weights,
                    bias,
                    act: Act::read(&p.activation)?,
                })
            }
            Layer::Pooling(p) => {
                let i = sizes::<3>(&p.i_desc, sys::LAYOUT_IMAGE_CHW)?;
                let o = sizes::<3>(&p.o_desc, sys::LAYOUT_IMAGE_CHW)?;
                // This emulator implements pooling without the optional bias and activation.
                if i[2] != o[2]
                    || !p.bias.data.is_null()
                    || p.activation.function != sys::ACTIVATION_IDENTITY
                {
                    return None;
                }
                if !matches!(
                    p.pooling_function,
                    sys::POOLING_MAX
                        | sys::POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                        | sys::POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                ) {
                    return None;
                }
                let g = geometry(
                    i,
                    o,
                    [p.k_width, p.k_height],
                    [p.x_stride, p.y_stride],
                    [p.x_dilation_stride, p.y_dilation_stride],
                    p.x_padding,
                    p.y_padding,
                    p.pad,
                )?;
                Some(EmuFilter::Pool {
                    i,
                    o,
                    g,
                    function: p.pooling_function,
                })
            }
            Layer::Activation(p) => {
                let [len] = sizes::<1>(&p.i_desc, sys::LAYOUT_VECTOR)?;
                if sizes::<1>(&p.o_desc, sys::LAYOUT_VECTOR)? != [len] {
                    return None;
                }
                if p.activation.function == sys::ACTIVATION_SOFTMAX {
                    // Softmax along dimension 0, the vector's only one.
                    return (p.axis_flags == 1).then_some(EmuFilter::Act {
                        len,
                        act: Act {
                            function: sys::ACTIVATION_IDENTITY,
                            alpha: 0.0,
                            beta: 0.0,
                        },
                        softmax: true,
                    });
                }
                Some(EmuFilter::Act {
                    len,
                    act: Act::read(&p.activation)?,
                    softmax: false,
                })
            }
            Layer::Arithmetic(p) => {
                if !matches!(
                    p.arithmetic_function,
                    sys::ARITHMETIC_ADD | sys::ARITHMETIC_MULTIPLY
                ) || p.arithmetic_function_fields.is_null()
                {
                    return None;
                }
                // SAFETY: for a binary function the fields pointer refers to a live
                // BNNSArithmeticBinary (the caller's contract).
                let f =
                    unsafe { &*(p.arithmetic_function_fields as *const sys::BnnsArithmeticBinary) };
                let [len] = sizes::<1>(&f.in1, sys::LAYOUT_VECTOR)?;
                if sizes::<1>(&f.in2, sys::LAYOUT_VECTOR)? != [len]
                    || sizes::<1>(&f.out, sys::LAYOUT_VECTOR)? != [len]
                    || [f.in1_type, f.in2_type, f.out_type]
                        .iter()
                        .any(|&t| t != sys::DESCRIPTOR_TYPE_SAMPLE)
                {
                    return None;
                }
                Some(EmuFilter::Arith {
                    len,
                    function: p.arithmetic_function,
                    act: Act::read(&p.activation)?,
                })
            }
        }
    }

    fn sample_sizes(&self) -> (usize, usize) {
        match self {
            EmuFilter::Conv { i, o, .. } | EmuFilter::Pool { i, o, .. } => {
                (i.iter().product(), o.iter().product())
            }
            EmuFilter::Fc {
                inputs, outputs, ..
            } => (*inputs, *outputs),
            EmuFilter::Act { len, .. } | EmuFilter::Arith { len, .. } => (*len, *len),
        }
    }

    /// One sample.
    fn run(&self, x: &[f32], y: &mut [f32]) {
        match self {
            EmuFilter::Conv {
                i,
                o,
                g,
                groups,
                weights,
                bias,
                act,
            } => {
                let [iw, ih, ic] = *i;
                let [ow, oh, oc] = *o;
                let [kw, kh] = g.k;
                let (icg, ocg) = (ic / groups, oc / groups);
                for oo in 0..oc {
                    let grp = oo / ocg;
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let mut acc = bias.as_ref().map_or(0.0, |b| b[oo]);
                            for ci in 0..icg {
                                let c = grp * icg + ci;
                                for ky in 0..kh {
                                    let iy =
                                        (oy * g.s[1] + ky * g.d[1]) as isize - g.before[1] as isize;
                                    if iy < 0 || iy >= ih as isize {
                                        continue;
                                    }
                                    for kx in 0..kw {
                                        let ix = (ox * g.s[0] + kx * g.d[0]) as isize
                                            - g.before[0] as isize;
                                        if ix < 0 || ix >= iw as isize {
                                            continue;
                                        }
                                        let xv = x[(c * ih + iy as usize) * iw + ix as usize];
                                        let wv = weights[((oo * icg + ci) * kh + ky) * kw + kx];
                                        acc += xv * wv;
                                    }
                                }
                            }
                            y[(oo * oh + oy) * ow + ox] = act.apply(acc);
                        }
                    }
                }
            }
            EmuFilter::Fc {
                inputs,
                outputs,
                weights,
                bias,
                act,
            } => {
                for j in 0..*outputs {
                    let row = &weights[j * inputs..(j + 1) * inputs];
                    let dot: f32 = row.iter().zip(x).map(|(w, v)| w * v).sum();
                    y[j] = act.apply(dot + bias.as_ref().map_or(0.0, |b| b[j]));
                }
            }
            EmuFilter::Pool { i, o, g, function } => {
                let [iw, ih, c] = *i;
                let [ow, oh, _] = *o;
                let [kw, kh] = g.k;
                for ch in 0..c {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let (mut max, mut sum, mut n) = (f32::NEG_INFINITY, 0.0f32, 0usize);
                            for ky in 0..kh {
                                let iy =
                                    (oy * g.s[1] + ky * g.d[1]) as isize - g.before[1] as isize;
                                if iy < 0 || iy >= ih as isize {
                                    continue;
                                }
                                for kx in 0..kw {
                                    let ix =
                                        (ox * g.s[0] + kx * g.d[0]) as isize - g.before[0] as isize;
                                    if ix < 0 || ix >= iw as isize {
                                        continue;
                                    }
                                    let v = x[(ch * ih + iy as usize) * iw + ix as usize];
                                    max = max.max(v);
                                    sum += v;
                                    n += 1;
                                }
                            }
                            y[(ch * oh + oy) * ow + ox] = match *function {
                                sys::POOLING_MAX => max,
                                sys::POOLING_AVERAGE_COUNT_INCLUDE_PADDING => {
                                    sum / (kw * kh) as f32
                                }
                                _ => sum / n.max(1) as f32,
                            };
                        }
                    }
                }
            }
            EmuFilter::Act { act, softmax, .. } => {
                if *softmax {
                    let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let mut total = 0.0f32;
                    for (o, &v) in y.iter_mut().zip(x) {
                        *o = (v - m).exp();
                        total += *o;
                    }
                    for o in y.iter_mut() {
                        *o /= total;
                    }
                } else {
                    for (o, &v) in y.iter_mut().zip(x) {
                        *o = act.apply(v);
                    }
                }
            }
            EmuFilter::Arith { .. } => {}
        }
    }
}

impl Engine for Emulator {
    fn name(&self) -> &'static str {
        "emulator"
    }

    unsafe fn create(&self, layer: Layer<'_>) -> Option<NonNull<c_void>> {
        // SAFETY: forwarded contract of `Engine::create`.
        let f = unsafe { EmuFilter::from_layer(layer) }?;
        NonNull::new(Box::into_raw(Box::new(f)).cast())
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
        // SAFETY: `filter` is a boxed EmuFilter from `create`, not yet destroyed.
        let f = unsafe { &*(filter.as_ptr() as *const EmuFilter) };
        let (is, os) = f.sample_sizes();
        if matches!(f, EmuFilter::Arith { .. })
            || (batch > 1 && (in_stride < is || out_stride < os))
        {
            return -1;
        }
        for b in 0..batch {
            // SAFETY: the caller guarantees `batch` samples at these strides, input and output
            // disjoint.
            let (x, y) = unsafe {
                (
                    std::slice::from_raw_parts(input.add(b * in_stride), is),
                    std::slice::from_raw_parts_mut(output.add(b * out_stride), os),
                )
            };
            f.run(x, y);
        }
        0
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
        // SAFETY: `filter` is a boxed EmuFilter from `create`, not yet destroyed.
        let f = unsafe { &*(filter.as_ptr() as *const EmuFilter) };
        let EmuFilter::Arith { len, function, act } = f else {
            return -1;
        };
        if batch > 1 && (a_stride < *len || b_stride < *len || out_stride < *len) {
            return -1;
        }
        for s in 0..batch {
            // SAFETY: the caller guarantees `batch` samples of each operand at these strides,
            // the output disjoint from both inputs.
            let (x1, x2, y) = unsafe {
                (
                    std::slice::from_raw_parts(a.add(s * a_stride), *len),
                    std::slice::from_raw_parts(b.add(s * b_stride), *len),
                    std::slice::from_raw_parts_mut(output.add(s * out_stride), *len),
                )
            };
            for ((o, &p), &q) in y.iter_mut().zip(x1).zip(x2) {
                let v = if *function == sys::ARITHMETIC_ADD {
                    p + q
                } else {
                    p * q
                };
                *o = act.apply(v);
            }
        }
        0
    }

    unsafe fn destroy(&self, filter: NonNull<c_void>) {
        // SAFETY: `filter` came from `Box::into_raw` in `create` and is destroyed once.
        drop(unsafe { Box::from_raw(filter.as_ptr() as *mut EmuFilter) });
    }
}
