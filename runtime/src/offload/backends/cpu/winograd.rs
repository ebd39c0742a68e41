//! Winograd F(2x2, 3x3) for NHWC 3x3 convolutions at stride 1, without groups or dilation:
//! each 4x4 tile of the input gives a 2x2 tile of the output through 16 products of a
//! `[tiles, C]` by a `[C, O]` matrix (the packed GEMM), where the direct convolution takes 36
//! multiply-adds per input and output channel for the same four outputs (docs/cpu-kernels.md,
//! "Winograd for 3x3 convolutions").
//!
//! With `d` a 4x4 tile of one input channel and `g` a 3x3 kernel, the 2x2 outputs are
//! `A^T [(G g G^T) * (B^T d B)] A` (`*` elementwise), where
//!
//! ```text
//! B^T = | 1  0 -1  0 |    G = | 1    0    0   |    A^T = | 1  1  1  0 |
//!       | 0  1  1  0 |        | 1/2  1/2  1/2 |          | 0  1 -1 -1 |
//!       | 0 -1  1  0 |        | 1/2 -1/2  1/2 |
//!       | 0  1  0 -1 |        | 0    0    1   |
//! ```
//!
//! Summed over the input channels, position `p` of the 4x4 elementwise product is a GEMM:
//! row `t` (a tile) of `V_p = (B^T d B)_p` times `U_p = (G g G^T)_p`, `[C, O]`. The weights'
//! 16 `U_p` are made once, when the model is prepared; a call transforms a band of tiles of
//! the input, runs the 16 GEMMs (split over the session's threads by position) and transforms
//! the products into output pixels, adding the bias and clamping as it stores them.

use std::cell::RefCell;

use super::backend_err;
use super::isa::{self, Isa};
use super::kernels::{for_each_piece, Post};
use super::packed::{self, Epilogue, PackedB};
use crate::error::Result;

/// Positions of a transformed tile: the GEMMs of one call, and the weight's operands.
pub(crate) const POSITIONS: usize = 16;

/// Scratch per band of tiles, in floats (its transformed inputs and its products): 2 MiB. A
/// band holds at least one row of tiles, whatever its size. Measured against 1 MiB (a Zen 4
/// core's L2): the same at 1 thread, faster at 2 (VGG-16 0.79x -> 0.61x of the direct
/// convolutions' time; its 224-wide layers had one row of tiles per band, so one piece of
/// transforms for two threads). Unit tests take 256 KiB, so that their small cases cross
/// bands.
#[cfg(not(test))]
const BAND_FLOATS: usize = 1 << 19;
#[cfg(test)]
const BAND_FLOATS: usize = 1 << 16;

/// Channels per step of the transforms (one AVX-512 vector; the compiler vectorizes the
/// fixed-size lanes at every level).
const LANES: usize = 16;

thread_local! {
    /// The band scratch of the thread that runs the convolution, kept between calls (the
    /// threads running the pieces only borrow it for the call).
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// A convolution's shape, as [`run`] needs it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    pub oh: usize,
    pub ow: usize,
    /// Padding above and to the left (below and to the right follow from `oh`, `ow`).
    pub pt: usize,
    pub pl: usize,
    pub isa: Isa,
}

/// The 16 operands `U_p` (`[C, O]` each) of a 3x3 weight given as `[3, 3, C, O]` (the
/// NHWC GEMM's form, `ConvPlan::pack`), packed for the GEMM of `isa`; `None` when that level
/// has no packed kernel or the weight is not that long. Each entry is computed in f64 and
/// rounded once, straight into its packed operand: no unpacked copy of the 16 is ever held,
/// so preparing holds the weight and its transformed form (1 + 16/9 of the weight), not twice
/// the transformed form as well.
pub(crate) fn transform_weights(isa: Isa, w: &[f32], c: usize, o: usize) -> Option<Vec<PackedB>> {
    if w.len() != 9 * c * o || !packed::available(isa) {
        return None;
    }
    (0..POSITIONS)
        .map(|p| {
            let (r, s) = (p / 4, p % 4);
            PackedB::from_rows(isa, c, o, |(ci, oc0), row| {
                for (oc, u) in (oc0..).zip(row.iter_mut()) {
                    let g = |ky: usize, kx: usize| f64::from(w[((ky * 3 + kx) * c + ci) * o + oc]);
                    // Row `r` of G g (a combination of the kernel's rows), at column `kx`.
                    let gg = |kx: usize| match r {
                        0 => g(0, kx),
                        1 => (g(0, kx) + g(1, kx) + g(2, kx)) / 2.0,
                        2 => (g(0, kx) - g(1, kx) + g(2, kx)) / 2.0,
                        _ => g(2, kx),
                    };
                    // Column `s` of (G g) G^T.
                    *u = match s {
                        0 => gg(0),
                        1 => (gg(0) + gg(1) + gg(2)) / 2.0,
                        2 => (gg(0) - gg(1) + gg(2)) / 2.0,
                        _ => gg(2),
                    } as f32;
                }
            })
        })
        .collect()
}

/// The convolution of NHWC `x` by [`transform_weights`]' operands `u` into channels
/// `off..off + o` of NHWC `y`, whose pixels are `ldy` channels apart; the epilogue's bias and
/// clamp are applied as each output is stored, then `post` on each finished piece of whole
/// output rows (only where `ldy == o`: the callers pass `None` otherwise).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    g: &Geometry,
    x: &[f32],
    u: &[PackedB],
    y: &mut [f32],
    ldy: usize,
    off: usize,
    epi: Epilogue<'_>,
    post: Post<'_, f32>,
) -> Result<()> {
    let Geometry {
        n,
        c,
        h,
        w,
        o,
        oh,
        ow,
        ..
    } = *g;
    if u.len() != POSITIONS
        || u.iter().any(|b| b.k() != c || b.n() != o)
        || x.len() != n * h * w * c
        || off + o > ldy
        || y.len() != n * oh * ow * ldy
        || epi.bias.is_some_and(|b| b.len() != o)
    {
        return Err(backend_err(
            "conv2d (winograd): buffer sizes do not match the plan",
        ));
    }
    if n == 0 || oh == 0 || ow == 0 || c == 0 || o == 0 {
        return Ok(());
    }
    let (th, tw) = (oh.div_ceil(2), ow.div_ceil(2));
    let band_rows = (BAND_FLOATS / (POSITIONS * tw * (c + o))).clamp(1, th);
    let most = band_rows * tw;
    let mut scratch = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
    scratch.resize(POSITIONS * most * (c + o), 0.0);
    let result = (|| {
        for (xb, yb) in x
            .chunks_exact(h * w * c)
            .zip(y.chunks_exact_mut(oh * ow * ldy))
        {
            for r0 in (0..th).step_by(band_rows) {
                let band = r0..(r0 + band_rows).min(th);
                let tiles = band.len() * tw;
                let (v, m) = scratch.split_at_mut(POSITIONS * most * c);
                let (v, m) = (
                    &mut v[..POSITIONS * tiles * c],
                    &mut m[..POSITIONS * tiles * o],
                );
                transform_input(g, xb, band.clone(), tw, v)?;
                let v = &*v;
                let products: Vec<(usize, &mut [f32])> =
                    m.chunks_exact_mut(tiles * o).enumerate().collect();
                for_each_piece(products, |(p, mp)| {
                    let a = &v[p * tiles * c..(p + 1) * tiles * c];
                    packed::gemm(tiles, a, c, &u[p], mp, o, Epilogue::NONE)
                })?;
                transform_output(g, m, band, tw, yb, ldy, off, epi, post)?;
            }
        }
        Ok(())
    })();
    SCRATCH.with(|s| *s.borrow_mut() = scratch);
    result
}

/// `len` (at most [`LANES`]) floats of `src` into `lane`, zeros after them. A whole vector is
/// a copy of fixed length, vector moves; the last, shorter one of a row of channels is out of
/// line (inlined, the compiler merged both into one call to memmove of `len` floats: 3% of
/// ResNet-18's time).
#[inline(always)]
fn load(lane: &mut [f32; LANES], src: &[f32], len: usize) {
    if len == LANES {
        lane.copy_from_slice(&src[..LANES]);
    } else {
        load_part(lane, src, len);
    }
}

#[cold]
#[inline(never)]
fn load_part(lane: &mut [f32; LANES], src: &[f32], len: usize) {
    lane.fill(0.0);
    lane[..len].copy_from_slice(&src[..len]);
}

/// The first `len` lanes of `val` into `dst` (as [`load`]).
#[inline(always)]
fn store(dst: &mut [f32], val: &[f32; LANES], len: usize) {
    if len == LANES {
        dst[..LANES].copy_from_slice(val);
    } else {
        store_part(dst, val, len);
    }
}

#[cold]
#[inline(never)]
fn store_part(dst: &mut [f32], val: &[f32; LANES], len: usize) {
    dst[..len].copy_from_slice(&val[..len]);
}

/// `V_p` for the tiles of rows `band` (`tw` tiles each) of one image: `v` is 16 matrices of
/// `band.len() * tw` rows of `c`; pieces are rows of tiles.
fn transform_input(
    g: &Geometry,
    xb: &[f32],
    band: std::ops::Range<usize>,
    tw: usize,
    v: &mut [f32],
) -> Result<()> {
    let c = g.c;
    let tiles = band.len() * tw;
    let mut rows: Vec<(usize, Vec<&mut [f32]>)> =
        band.map(|r| (r, Vec::with_capacity(POSITIONS))).collect();
    for vp in v.chunks_exact_mut(tiles * c) {
        for (row, part) in rows.iter_mut().zip(vp.chunks_exact_mut(tw * c)) {
            row.1.push(part);
        }
    }
    let zero = vec![0f32; c];
    for_each_piece(rows, |(r, mut outs)| {
        isa::run_as(
            g.isa,
            #[inline(always)]
            || {
                let mut d = [[0f32; LANES]; POSITIONS];
                let mut v = [[0f32; LANES]; POSITIONS];
                for tx in 0..tw {
                    // The tile's 16 input pixels (zeros in the padding).
                    let px: [[&[f32]; 4]; 4] = std::array::from_fn(|i| {
                        std::array::from_fn(|j| {
                            let iy = (2 * r + i).checked_sub(g.pt).filter(|&y| y < g.h);
                            let ix = (2 * tx + j).checked_sub(g.pl).filter(|&x| x < g.w);
                            match (iy, ix) {
                                (Some(iy), Some(ix)) => &xb[(iy * g.w + ix) * c..][..c],
                                _ => &zero[..],
                            }
                        })
                    });
                    for c0 in (0..c).step_by(LANES) {
                        let len = LANES.min(c - c0);
                        for (k, lane) in d.iter_mut().enumerate() {
                            load(lane, &px[k / 4][k % 4][c0..], len);
                        }
                        // Lane by lane (the compiler makes vectors of the lanes): B^T d, then
                        // (B^T d) B.
                        for l in 0..LANES {
                            let e = |i: usize, j: usize| d[i * 4 + j][l];
                            let t: [[f32; 4]; 4] = [
                                [0, 1, 2, 3].map(|j| e(0, j) - e(2, j)),
                                [0, 1, 2, 3].map(|j| e(1, j) + e(2, j)),
                                [0, 1, 2, 3].map(|j| e(2, j) - e(1, j)),
                                [0, 1, 2, 3].map(|j| e(1, j) - e(3, j)),
                            ];
                            for (i, ti) in t.iter().enumerate() {
                                v[i * 4][l] = ti[0] - ti[2];
                                v[i * 4 + 1][l] = ti[1] + ti[2];
                                v[i * 4 + 2][l] = ti[2] - ti[1];
                                v[i * 4 + 3][l] = ti[1] - ti[3];
                            }
                        }
                        for (out, val) in outs.iter_mut().zip(&v) {
                            store(&mut out[tx * c + c0..], val, len);
                        }
                    }
                }
            },
        );
        Ok(())
    })
}

/// The output pixels of the tiles of rows `band` from their products `m` (16 matrices of
/// `band.len() * tw` rows of `o`), with the epilogue, into `yb` (one image; pixels `ldy`
/// channels apart from channel `off`); pieces are pairs of output rows.
#[allow(clippy::too_many_arguments)]
fn transform_output(
    g: &Geometry,
    m: &[f32],
    band: std::ops::Range<usize>,
    tw: usize,
    yb: &mut [f32],
    ldy: usize,
    off: usize,
    epi: Epilogue<'_>,
    post: Post<'_, f32>,
) -> Result<()> {
    let (o, ow) = (g.o, g.ow);
    let tiles = band.len() * tw;
    let row_len = ow * ldy;
    let rows = &mut yb[2 * band.start * row_len..(2 * band.end).min(g.oh) * row_len];
    let pieces: Vec<(usize, &mut [f32])> = rows
        .chunks_mut(2 * row_len)
        .enumerate()
        .map(|(i, ys)| (i * tw, ys))
        .collect();
    for_each_piece(pieces, |(first, ys)| {
        let out_rows = ys.len() / row_len;
        isa::run_as(
            g.isa,
            #[inline(always)]
            || {
                let mut mm = [[0f32; LANES]; POSITIONS];
                let mut px = [[0f32; LANES]; 4];
                let mut bias = [0f32; LANES];
                for tx in 0..tw {
                    let cols = (ow - 2 * tx).min(2);
                    for c0 in (0..o).step_by(LANES) {
                        let len = LANES.min(o - c0);
                        for (p, lane) in mm.iter_mut().enumerate() {
                            load(lane, &m[(p * tiles + first + tx) * o + c0..], len);
                        }
                        match epi.bias {
                            Some(b) => load(&mut bias, &b[c0..], len),
                            None => bias.fill(0.0),
                        }
                        // Lane by lane: A^T M, then (A^T M) A, plus the bias, clamped; output
                        // pixel (i, j) of the tile in `px[i * 2 + j]`.
                        for l in 0..LANES {
                            let e = |p: usize| mm[p][l];
                            let s0 = [0, 1, 2, 3].map(|j| e(j) + e(4 + j) + e(8 + j));
                            let s1 = [0, 1, 2, 3].map(|j| e(4 + j) - e(8 + j) - e(12 + j));
                            for (k, si) in [s0, s1].iter().enumerate() {
                                for (jx, val) in [si[0] + si[1] + si[2], si[1] - si[2] - si[3]]
                                    .into_iter()
                                    .enumerate()
                                {
                                    let val = val + bias[l];
                                    let val = if val < epi.lo { epi.lo } else { val };
                                    px[k * 2 + jx][l] = if val > epi.hi { epi.hi } else { val };
                                }
                            }
                        }
                        for i in 0..out_rows {
                            for jx in 0..cols {
                                let at = (i * ow + 2 * tx + jx) * ldy + off + c0;
                                store(&mut ys[at..], &px[i * 2 + jx], len);
                            }
                        }
                    }
                }
            },
        );
        if let Some(f) = post {
            f(ys);
        }
        Ok(())
    })
}
