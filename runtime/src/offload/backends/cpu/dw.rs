//! NHWC depthwise convolution (channel multiplier 1) on interior pixels, with explicit
//! vectors: a register tile of [`PIXELS`] output pixels by `NV` vectors of channels sums the
//! taps, each weight vector loaded once for all the tile's pixels (docs/cpu-kernels.md).
//!
//! The portable loop in kernels.rs loads an input and a weight vector per multiply-add; here
//! the weight loads are shared, which the compiler would not do on its own (blocking pixels in
//! plain Rust, it vectorized across the pixels with gathers instead).

use super::isa::Isa;
use super::packed::Vector;

/// Output pixels per register tile.
pub(crate) const PIXELS: usize = 4;

/// One call of a level's kernel.
struct Args<'a> {
    x: &'a [f32],
    w: &'a [f32],
    /// Input offset of the first pixel's first column tap, and between pixels.
    base: usize,
    step: usize,
    /// (input offset from a pixel's base, weight offset) of every tap.
    taps: &'a [(usize, usize)],
    /// `pixels * c` outputs.
    out: &'a mut [f32],
    c: usize,
}

/// The channels `0..` a whole number of tiles wide, for every pixel of `t.out` (a multiple of
/// [`PIXELS`]); returns how many channels were done.
///
/// # Safety
/// The CPU has `V`'s target features; every tap's `c` channels from `base + p * step` (for
/// each pixel `p`) lie inside `x`, its weights' `c` inside `w` (checked by [`interior`]).
#[inline(always)]
unsafe fn run<V: Vector, const NV: usize>(t: &mut Args<'_>) -> usize {
    let width = NV * V::W;
    let chunks = t.c / width;
    let pixels = t.out.len() / t.c.max(1);
    let (x, w, out) = (t.x.as_ptr(), t.w.as_ptr(), t.out.as_mut_ptr());
    // SAFETY: offsets below stay under the bounds the caller checked; `out` holds
    // `pixels * c` floats.
    unsafe {
        for p0 in (0..pixels).step_by(PIXELS) {
            for ch in 0..chunks {
                let c0 = ch * width;
                let mut acc = [[V::zero(); NV]; PIXELS];
                for &(xi, wi) in t.taps {
                    let mut wv = [V::zero(); NV];
                    for (j, v) in wv.iter_mut().enumerate() {
                        *v = V::load(w.add(wi + c0 + j * V::W));
                    }
                    for (p, row) in acc.iter_mut().enumerate() {
                        let src = x.add(t.base + (p0 + p) * t.step + xi + c0);
                        for (j, a) in row.iter_mut().enumerate() {
                            *a = V::fma(*a, V::load(src.add(j * V::W)), wv[j]);
                        }
                    }
                }
                for (p, row) in acc.iter().enumerate() {
                    let dst = out.add((p0 + p) * t.c + c0);
                    for (j, &a) in row.iter().enumerate() {
                        V::store(dst.add(j * V::W), a);
                    }
                }
            }
        }
    }
    chunks * width
}

type Kernel = unsafe fn(&mut Args<'_>) -> usize;

macro_rules! level {
    ($name:ident, $features:literal, $v:ty, $nv:literal) => {
        /// # Safety
        /// [`run`]'s contract, on a CPU with this level's features.
        #[target_feature(enable = $features)]
        unsafe fn $name(t: &mut Args<'_>) -> usize {
            // SAFETY: the caller's contract, passed on.
            unsafe { run::<$v, $nv>(t) }
        }
    };
}

#[cfg(all(target_arch = "x86_64", feature = "avx512"))]
level!(
    avx512,
    "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma",
    std::arch::x86_64::__m512,
    2
);
#[cfg(target_arch = "x86_64")]
level!(avx2, "avx2,fma", std::arch::x86_64::__m256, 1);
#[cfg(target_arch = "aarch64")]
level!(neon, "neon", std::arch::aarch64::float32x4_t, 2);

fn kernel(isa: Isa) -> Option<Kernel> {
    match isa {
        #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
        Isa::Avx512 => Some(avx512),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => Some(avx2),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => Some(neon),
        _ => None,
    }
}

/// Depthwise outputs of `out.len() / c` consecutive interior pixels (a multiple of
/// [`PIXELS`]) of one output row: pixel `p` sums, over `taps` (input offset from
/// `base + p * step`, weight offset; `last` their largest), input channels times weights. Fills
/// the channels a whole number of register tiles wide and returns how many that is (0 when
/// `isa` has no kernel or the operands do not hold every tap); the caller does the rest.
#[allow(clippy::too_many_arguments)]
pub(crate) fn interior(
    isa: Isa,
    x: &[f32],
    w: &[f32],
    base: usize,
    step: usize,
    taps: &[(usize, usize)],
    last: (usize, usize),
    out: &mut [f32],
    c: usize,
) -> usize {
    let Some(kern) = kernel(isa) else {
        return 0;
    };
    let pixels = out.len().checked_div(c).unwrap_or(0);
    if pixels == 0
        || pixels % PIXELS != 0
        || out.len() != pixels * c
        || base + (pixels - 1) * step + last.0 + c > x.len()
        || last.1 + c > w.len()
        || !super::isa::supported().contains(&isa)
    {
        return 0;
    }
    let mut args = Args {
        x,
        w,
        base,
        step,
        taps,
        out,
        c,
    };
    #[cfg(target_arch = "aarch64")]
    if isa == Isa::Neon && rows_of_three(&args) {
        // SAFETY: as below; the row kernel reads exactly the taps' inputs and weights.
        return unsafe { neon_rows(&mut args) };
    }
    // SAFETY: the checks above: every pixel's taps lie inside `x` and `w`, `out` holds them
    // all, and this CPU has the level's features (`supported`).
    unsafe { kern(&mut args) }
}

/// Whether the taps are kernel rows of three adjacent columns at stride 1 (a 3x3 or 1x3
/// depthwise convolution without dilation): consecutive pixels then share input columns.
#[cfg(target_arch = "aarch64")]
fn rows_of_three(t: &Args<'_>) -> bool {
    let c = t.c;
    t.step == c
        && !t.taps.is_empty()
        && t.taps.len() % 3 == 0
        && t.taps
            .chunks_exact(3)
            .all(|r| r[1] == (r[0].0 + c, r[0].1 + c) && r[2] == (r[0].0 + 2 * c, r[0].1 + 2 * c))
}

/// [`run`] for [`rows_of_three`] taps on NEON, a kernel row at a time: the tile's
/// [`PIXELS`] pixels read `PIXELS + 2` columns of a row, each loaded once and multiplied by up
/// to three weights, where [`run`] loads every pixel's three columns (12 loads, not 6). The
/// generic loop was load-bound in llvm-mca's models (docs/cpu-kernels.md, "Arm kernels against
/// the core's peak"). Each pixel still adds its taps in [`run`]'s order (row by row, left to
/// right), so the results are the same bits.
///
/// # Safety
/// [`run`]'s contract, on a CPU with NEON; [`rows_of_three`] holds.
#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
// A function of its own (one call per row of output pixels), so that scripts/mca.sh finds
// its loop apart from `run`'s.
#[inline(never)]
unsafe fn neon_rows(t: &mut Args<'_>) -> usize {
    use std::arch::aarch64::*;
    const NV: usize = 2;
    const COLS: usize = PIXELS + 2;
    let width = NV * 4;
    let chunks = t.c / width;
    let pixels = t.out.len() / t.c.max(1);
    let (x, w, out, c) = (t.x.as_ptr(), t.w.as_ptr(), t.out.as_mut_ptr(), t.c);
    // SAFETY: column `col` of a row is pixel `col - k`'s tap `k` (step == c), so every load
    // below is one [`run`] makes, inside the bounds [`interior`] checked; `out` holds
    // `pixels * c` floats.
    unsafe {
        for p0 in (0..pixels).step_by(PIXELS) {
            for ch in 0..chunks {
                let c0 = ch * width;
                let mut acc = [[vdupq_n_f32(0.0); NV]; PIXELS];
                for row in t.taps.chunks_exact(3) {
                    let (xi, wi) = row[0];
                    let src = x.add(t.base + p0 * t.step + xi + c0);
                    let wv: [[float32x4_t; NV]; 3] = std::array::from_fn(|k| {
                        std::array::from_fn(|j| vld1q_f32(w.add(wi + k * c + c0 + j * 4)))
                    });
                    for col in 0..COLS {
                        let xv: [float32x4_t; NV] =
                            std::array::from_fn(|j| vld1q_f32(src.add(col * c + j * 4)));
                        // Pixel `col - k` takes this column as its tap `k`; in increasing `col`
                        // each pixel meets its taps in increasing `k`.
                        for (k, wk) in wv.iter().enumerate() {
                            if col >= k && col - k < PIXELS {
                                for ((a, &xj), &wj) in acc[col - k].iter_mut().zip(&xv).zip(wk) {
                                    *a = vfmaq_f32(*a, xj, wj);
                                }
                            }
                        }
                    }
                }
                for (p, row) in acc.iter().enumerate() {
                    let dst = out.add((p0 + p) * c + c0);
                    for (j, &a) in row.iter().enumerate() {
                        vst1q_f32(dst.add(j * 4), a);
                    }
                }
            }
        }
    }
    chunks * width
}
