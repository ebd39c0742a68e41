//! The CPU backend's kernels, on dense row-major slices whose sizes the validated description
//! guarantees (each entry point re-checks lengths and reports a mismatch as an error).

use super::qgemm::{self, QPacked};
use crate::error::Result;
use crate::offload::format::{broadcast_shapes, Activation, Conv2d, Layout, Op, Pool2d};

use super::backend_err;
use super::dw;
use super::isa::{self, Isa};
use super::packed::{self, Epilogue, PackedB};
use super::winograd;

/// Element types the GEMM-based kernels run in: f32 (float ops) and f64 (exact quantized
/// accumulation).
pub(crate) trait Num:
    Copy
    + Default
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::AddAssign
    + Send
    + Sync
    + 'static
{
    /// `c[m, n] = a[m, k] * b[k, n]`, row-major with leading dimensions (row strides), with the
    /// kernels of `isa` (one of [`isa::supported`]).
    #[allow(clippy::too_many_arguments)]
    fn gemm_isa(
        isa: Isa,
        m: usize,
        k: usize,
        n: usize,
        a: &[Self],
        lda: usize,
        b: &[Self],
        ldb: usize,
        c: &mut [Self],
        ldc: usize,
    ) -> Result<()>;

    /// Run `f` on a scratch buffer of `len` elements that this thread keeps between calls
    /// (im2col columns and GEMM tiles: allocating, zeroing and page-faulting them again on every
    /// run cost several percent). Its contents are whatever the last user left: `f` must write
    /// every element it reads. The buffer grows to the largest `len` asked for on the thread.
    fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R;

    /// Depthwise interior pixels with explicit vectors where there are some (f32: dw.rs):
    /// returns how many leading channels of every pixel of `out` (`c` channels each) it
    /// computed (0: none).
    #[allow(clippy::too_many_arguments)]
    fn dw_interior(
        _isa: Isa,
        _x: &[Self],
        _w: &[Self],
        _base: usize,
        _step: usize,
        _taps: &[(usize, usize)],
        _last: (usize, usize),
        _out: &mut [Self],
        _c: usize,
    ) -> usize {
        0
    }
}

thread_local! {
    static SCRATCH_F32: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    static SCRATCH_F64: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`Num::with_scratch`] on one of the thread-local buffers above; a fresh buffer if it is in
/// use (only a kernel running inside another on this thread would find it so).
fn with_buffer<T: Copy + Default + 'static, R>(
    key: &'static std::thread::LocalKey<std::cell::RefCell<Vec<T>>>,
    len: usize,
    f: impl FnOnce(&mut [T]) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, T::default());
            }
            f(&mut buf[..len])
        }
        Err(_) => f(&mut vec![T::default(); len]),
    })
}

impl Num for f32 {
    fn gemm_isa(
        isa: Isa,
        m: usize,
        k: usize,
        n: usize,
        a: &[f32],
        lda: usize,
        b: &[f32],
        ldb: usize,
        c: &mut [f32],
        ldc: usize,
    ) -> Result<()> {
        super::gemm::sgemm(isa, m, k, n, a, lda, b, ldb, c, ldc)
    }

    fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
        with_buffer(&SCRATCH_F32, len, f)
    }

    fn dw_interior(
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
        dw::interior(isa, x, w, base, step, taps, last, out, c)
    }
}

/// The f64 GEMM (exact quantized accumulation: every order of summing integers below 2^53 gives
/// the same result) always runs the `gemm` crate's kernels.
impl Num for f64 {
    fn gemm_isa(
        _: Isa,
        m: usize,
        k: usize,
        n: usize,
        a: &[f64],
        lda: usize,
        b: &[f64],
        ldb: usize,
        c: &mut [f64],
        ldc: usize,
    ) -> Result<()> {
        if !gemm_bounds(m, k, n, a.len(), lda, b.len(), ldb, c.len(), ldc)? {
            return Ok(());
        }
        if k == 0 {
            for row in c.chunks_mut(ldc).take(m) {
                row[..n].fill(0.0);
            }
            return Ok(());
        }
        // SAFETY: the bounds check above guarantees every element the strides address lies
        // inside the slices; `c` is exclusively borrowed and cannot alias `a` or `b`; m, n, k > 0.
        unsafe {
            super::gemm::crate_gemm(
                m,
                k,
                n,
                a.as_ptr(),
                lda,
                b.as_ptr(),
                ldb,
                c.as_mut_ptr(),
                ldc,
            )
        };
        Ok(())
    }

    fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f64]) -> R) -> R {
        with_buffer(&SCRATCH_F64, len, f)
    }
}

#[allow(clippy::too_many_arguments)]
fn gemm_bounds(
    m: usize,
    k: usize,
    n: usize,
    la: usize,
    lda: usize,
    lb: usize,
    ldb: usize,
    lc: usize,
    ldc: usize,
) -> Result<bool> {
    if m == 0 || n == 0 {
        return Ok(false);
    }
    let need = |rows: usize, cols: usize, ld: usize| {
        if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * ld + cols
        }
    };
    if la < need(m, k, lda)
        || lb < need(k, n, ldb)
        || lc < need(m, n, ldc)
        || lda < k
        || ldb < n
        || ldc < n
    {
        return Err(backend_err(format!(
            "gemm {m}x{k}x{n}: operand buffers too small"
        )));
    }
    Ok(true)
}

/// A conv2d with its static sizes.
#[derive(Clone, Debug)]
pub(crate) struct ConvPlan {
    pub layout: Layout,
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    pub kh: usize,
    pub kw: usize,
    pub oh: usize,
    pub ow: usize,
    pub groups: usize,
    pub strides: [usize; 2],
    pub padding: [usize; 4],
    pub dilation: [usize; 2],
    /// The kernels' instruction-set level ([`isa::current`] unless a test picks one).
    pub isa: Isa,
}

/// Work run on each finished piece of a convolution's output (whole pixels, NHWC).
pub(crate) type Post<'a, T> = Option<&'a (dyn Fn(&mut [T]) + Sync)>;

/// Pixels per piece of a 1x1 convolution (no im2col buffer; bounds how often the weight is
/// repacked and keeps the output piece in L2 for the bias/activation pass).
const PW_BLOCK: usize = 512;

/// Outputs per stretch of the stride-1 NCHW depthwise loop (8 KiB of f32 accumulators).
const DW_STRETCH: usize = 2048;

thread_local! {
    /// The 8-bit convolution's im2col rows, per thread, kept between calls.
    static QCOL: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Pixels per im2col block: keeps the column buffer in cache.
const BLOCK: usize = 128;

/// Fewest input and output channels of a convolution run as Winograd ([`ConvPlan::winograd`]):
/// with fewer, the 16 GEMMs' short rows of `k` cost more in storing and reloading the tiles of
/// C than the multiply-adds they save (docs/cpu-kernels.md, "Winograd for 3x3 convolutions").
const WINOGRAD_MIN_C: usize = 32;
const WINOGRAD_MIN_O: usize = 32;

/// Shortest tap an NHWC convolution reads in place ([`ConvPlan::taps`]), in floats: shorter
/// ones (a 7x7 stem's 21 floats per kernel row) cost more in setting up each stretch of the
/// microkernel than the im2col copy they save (ResNet-18's stem 2.8 -> 3.7 ms read in place).
const TAP_MIN: usize = 64;

/// The pieces of each GEMM row of an NHWC convolution read in place: `count` taps of `len`
/// floats, each a kernel row (`kw` pixels of every channel: `rows`) or one pixel of one
/// group's channels.
#[derive(Clone, Copy, Debug)]
struct Taps {
    count: usize,
    len: usize,
    rows: bool,
}

/// The pieces of an NHWC output `y` (images of `image` elements, pixels `ldy` apart) in blocks
/// of `bs` pixels: `(image, first pixel, the block's rows of y)`.
fn pixel_pieces<T>(
    y: &mut [T],
    image: usize,
    bs: usize,
    ldy: usize,
) -> Vec<(usize, usize, &mut [T])> {
    let mut pieces = Vec::new();
    for (b, yb) in y.chunks_mut(image.max(1)).enumerate() {
        for (j, rows) in yb.chunks_mut((bs * ldy).max(1)).enumerate() {
            pieces.push((b, j * bs, rows));
        }
    }
    pieces
}

/// Where one tap of one output pixel reads ([`ConvPlan::tap_src`]).
enum TapSrc {
    /// `len` floats of the image from this offset.
    In(usize),
    /// Entirely in the padding.
    Zero,
    /// A kernel row whose taps `lo..hi` lie inside the input, from this offset on, the others
    /// in the padding.
    Part { at: usize, lo: usize, hi: usize },
}

impl ConvPlan {
    /// The plan of a conv2d with data, weight and output shapes `x`, `w`, `y` (validated by
    /// the description parser; weight OHWI with NHWC, OIHW with NCHW).
    pub fn new(c: &Conv2d, x: &[i64], w: &[i64], y: &[i64]) -> ConvPlan {
        let (n, ci, h, wd) = c.layout.nchw(x);
        let (_, o, oh, ow) = c.layout.nchw(y);
        let (kh, kw) = match c.layout {
            Layout::Nhwc => (w[1], w[2]),
            Layout::Nchw => (w[2], w[3]),
        };
        ConvPlan {
            layout: c.layout,
            n: n as usize,
            c: ci as usize,
            h: h as usize,
            w: wd as usize,
            o: o as usize,
            kh: kh as usize,
            kw: kw as usize,
            oh: oh as usize,
            ow: ow as usize,
            groups: c.groups,
            strides: c.strides,
            padding: c.padding,
            dilation: c.dilation,
            isa: isa::current(),
        }
    }

    /// Whether the packed GEMM path runs this plan as Winograd F(2x2, 3x3) (winograd.rs): an
    /// NHWC 3x3 convolution at stride 1, without groups or dilation, with at least
    /// [`WINOGRAD_MIN_C`] input and [`WINOGRAD_MIN_O`] output channels, at a level with packed
    /// kernels.
    pub fn winograd(&self) -> bool {
        self.layout == Layout::Nhwc
            && self.groups == 1
            && (self.kh, self.kw) == (3, 3)
            && self.strides == [1, 1]
            && self.dilation == [1, 1]
            && self.c >= WINOGRAD_MIN_C
            && self.o >= WINOGRAD_MIN_O
            && packed::available(self.isa)
    }

    fn winograd_geometry(&self) -> winograd::Geometry {
        winograd::Geometry {
            n: self.n,
            c: self.c,
            h: self.h,
            w: self.w,
            o: self.o,
            oh: self.oh,
            ow: self.ow,
            pt: self.padding[0],
            pl: self.padding[1],
            isa: self.isa,
        }
    }

    fn depthwise(&self) -> bool {
        self.groups > 1 && self.groups == self.c
    }
    fn cg(&self) -> usize {
        self.c / self.groups
    }
    fn og(&self) -> usize {
        self.o / self.groups
    }
    fn kdim(&self) -> usize {
        self.kh * self.kw * self.cg()
    }
    fn pointwise(&self) -> bool {
        self.one_by_one() && self.groups == 1
    }
    /// A 1x1 convolution at stride 1 without padding: in NHWC its input is already the GEMM's
    /// left operand, each group's the rows' slice of `cg` channels (`nhwc_pieces`).
    fn one_by_one(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.strides == [1, 1] && self.padding == [0; 4]
    }

    /// Repack a weight (OHWI for NHWC, OIHW for NCHW) for [`ConvPlan::run`].
    pub fn pack<T: Num>(&self, w: &[T]) -> Vec<T> {
        let (o, kh, kw, cg, og) = (self.o, self.kh, self.kw, self.cg(), self.og());
        if w.len() != o * kh * kw * cg {
            return Vec::new();
        }
        match (self.layout, self.depthwise()) {
            // [KH, KW, O]: channels contiguous for the direct loop.
            (Layout::Nhwc, true) => {
                let mut p = vec![T::default(); w.len()];
                for oc in 0..o {
                    for t in 0..kh * kw {
                        p[t * o + oc] = w[oc * kh * kw + t];
                    }
                }
                p
            }
            // OIHW with I = 1 is already per-channel planes.
            (Layout::Nchw, true) => w.to_vec(),
            // Per group, B = [K, Og] with K in (kh, kw, ci) order.
            (Layout::Nhwc, false) => {
                let k = kh * kw * cg;
                let mut p = vec![T::default(); w.len()];
                for g in 0..self.groups {
                    for oo in 0..og {
                        let src = &w[(g * og + oo) * k..(g * og + oo + 1) * k];
                        for (kk, &v) in src.iter().enumerate() {
                            p[g * k * og + kk * og + oo] = v;
                        }
                    }
                }
                p
            }
            // Per group, A = [Og, K] with K in (ci, kh, kw) order: OIHW as is.
            (Layout::Nchw, false) => w.to_vec(),
        }
    }

    /// Convolution without bias: `x` the input, `w` packed, `y` the output (zeroed here).
    /// With NHWC, `post` (e.g. bias and activation) runs on each finished piece of whole output
    /// pixels while it is still in cache; returns whether it ran (with NCHW it does not, and the
    /// caller applies it to `y`).
    pub fn run<T: Num>(&self, x: &[T], w: &[T], y: &mut [T], post: Post<'_, T>) -> Result<bool> {
        let (n, c, h, wd, o) = (self.n, self.c, self.h, self.w, self.o);
        if x.len() != n * c * h * wd
            || y.len() != n * o * self.oh * self.ow
            || w.len() != o * self.kdim()
        {
            return Err(backend_err("conv2d: buffer sizes do not match the plan"));
        }
        match (self.layout, self.depthwise()) {
            (Layout::Nhwc, true) => self.dw_nhwc(x, w, y, post)?,
            (Layout::Nchw, true) => self.dw_nchw(x, w, y)?,
            (Layout::Nhwc, false) if self.direct() => self.direct_nhwc(x, w, y, post)?,
            (Layout::Nhwc, false) => self.gemm_nhwc(x, w, y, post)?,
            (Layout::Nchw, false) => self.gemm_nchw(x, w, y)?,
        }
        Ok(self.layout == Layout::Nhwc)
    }

    /// The weight packed ([`ConvPlan::pack`]'s output) once more for the packed GEMM, one
    /// operand per group: for NHWC convolutions that run as GEMMs (not depthwise, not direct)
    /// at a level with packed kernels ([`packed::available`]); `None` otherwise. Where the plan
    /// runs as Winograd ([`ConvPlan::winograd`]), the 16 transformed operands instead.
    pub fn pack_gemm(&self, w: &[f32]) -> Option<Vec<PackedB>> {
        if self.winograd() {
            return winograd::transform_weights(self.isa, w, self.c, self.o);
        }
        if self.layout != Layout::Nhwc
            || self.depthwise()
            || self.direct()
            || !packed::available(self.isa)
            || w.len() != self.o * self.kdim()
        {
            return None;
        }
        let (kdim, og) = (self.kdim(), self.og());
        (0..self.groups)
            .map(|g| {
                PackedB::new(
                    self.isa,
                    &w[g * kdim * og..(g + 1) * kdim * og],
                    kdim,
                    og,
                    og,
                )
            })
            .collect()
    }

    /// An NHWC convolution through the packed GEMM ([`ConvPlan::pack_gemm`]'s operands):
    /// the bias and clamp of `epi` are applied as each tile is stored, then `post` (an
    /// activation that is not a clamp) runs on each finished piece of whole output pixels.
    pub fn run_packed(
        &self,
        x: &[f32],
        w: &[PackedB],
        y: &mut [f32],
        epi: Epilogue<'_>,
        post: Post<'_, f32>,
    ) -> Result<()> {
        let (n, o) = (self.n, self.o);
        if y.len() != n * o * self.oh * self.ow {
            return Err(backend_err("conv2d: buffer sizes do not match the plan"));
        }
        // The operands and `x` are checked by `run_packed_rows`.
        self.run_packed_rows(x, w, y, o, 0, epi, post)
    }

    /// [`ConvPlan::run_packed`] into channels `off..off + o` of an NHWC output whose pixels
    /// are `ldy` channels apart (a slice of a concatenation along the channels, written in
    /// place); the other channels are left as they are. No `post` pass: only an activation
    /// the epilogue applies (a clamp) can be fused this way.
    pub fn run_packed_into(
        &self,
        x: &[f32],
        w: &[PackedB],
        y: &mut [f32],
        ldy: usize,
        off: usize,
        epi: Epilogue<'_>,
    ) -> Result<()> {
        if self.layout != Layout::Nhwc
            || off + self.o > ldy
            || y.len() != self.n * self.oh * self.ow * ldy
        {
            return Err(backend_err(
                "conv2d: the concatenation's buffer does not match the plan",
            ));
        }
        self.run_packed_rows(x, w, y, ldy, off, epi, None)
    }

    /// [`ConvPlan::run_packed`] with output pixels `ldy` channels apart from channel `off`
    /// (`y` checked by the callers).
    #[allow(clippy::too_many_arguments)]
    fn run_packed_rows(
        &self,
        x: &[f32],
        w: &[PackedB],
        y: &mut [f32],
        ldy: usize,
        off: usize,
        epi: Epilogue<'_>,
        post: Post<'_, f32>,
    ) -> Result<()> {
        if self.winograd() {
            let g = self.winograd_geometry();
            return winograd::run(&g, x, w, y, ldy, off, epi, post);
        }
        let (og, kdim) = (self.og(), self.kdim());
        if x.len() != self.n * self.c * self.h * self.w
            || w.len() != self.groups
            || w.iter().any(|b| b.k() != kdim || b.n() != og)
            || epi.bias.is_some_and(|b| b.len() != self.o)
        {
            return Err(backend_err("conv2d: buffer sizes do not match the plan"));
        }
        let group_epi = |g: usize| Epilogue {
            bias: epi.bias.map(|b| &b[g * og..(g + 1) * og]),
            ..epi
        };
        if let Some(taps) = self.taps() {
            return self.nhwc_tap_pieces(x, y, ldy, off, post, taps, |g, rows, t, c, ldc| {
                packed::gemm_taps(rows, t, taps.count, &w[g], c, ldc, group_epi(g))
            });
        }
        self.nhwc_pieces(x, y, ldy, off, post, |g, rows, a, lda, c, ldc| {
            packed::gemm(rows, a, lda, &w[g], c, ldc, group_epi(g))
        })
    }

    /// How an NHWC convolution's GEMM reads its input in place ([`ConvPlan::nhwc_tap_pieces`]),
    /// or `None` where im2col rows are the better operand (1x1 convolutions read the input
    /// directly anyway; pieces narrower than [`TAP_MIN`] floats cost more in pointer set-up
    /// than the copy).
    fn taps(&self) -> Option<Taps> {
        if self.layout != Layout::Nhwc || self.one_by_one() {
            return None;
        }
        let t = if self.groups == 1 && self.dilation[1] == 1 {
            Taps {
                count: self.kh,
                len: self.kw * self.c,
                rows: true,
            }
        } else {
            Taps {
                count: self.kh * self.kw,
                len: self.cg(),
                rows: false,
            }
        };
        (t.len >= TAP_MIN && t.count > 0).then_some(t)
    }

    /// Where tap `t` of output pixel `(oy, ox)`, group `g`, reads its `taps.len` floats.
    fn tap_src(&self, taps: Taps, oy: usize, ox: usize, t: usize, g: usize) -> TapSrc {
        let (wd, c) = (self.w, self.c);
        if taps.rows {
            // A kernel row: `kw` pixels of all channels, contiguous in the input row when
            // every one of them is inside it.
            let Some(iy) = self.src_y(oy, t) else {
                return TapSrc::Zero;
            };
            let (kw, sx, pl) = (self.kw, self.strides[1], self.padding[1]);
            let lo = pl.saturating_sub(ox * sx).min(kw);
            let hi = (wd + pl).saturating_sub(ox * sx).clamp(lo, kw);
            if lo == 0 && hi == kw {
                TapSrc::In((iy * wd + ox * sx - pl) * c)
            } else if lo == hi {
                TapSrc::Zero
            } else {
                TapSrc::Part {
                    at: (iy * wd + ox * sx + lo - pl) * c,
                    lo,
                    hi,
                }
            }
        } else {
            let (ky, kx) = (t / self.kw, t % self.kw);
            match (self.src_y(oy, ky), self.src_x(ox, kx)) {
                (Some(iy), Some(ix)) => TapSrc::In((iy * wd + ix) * c + g * self.cg()),
                _ => TapSrc::Zero,
            }
        }
    }

    /// [`ConvPlan::nhwc_pieces`] without im2col: each output pixel's GEMM row is given as the
    /// slices its taps read ([`packed::gemm_taps`]): slices of the input where the tap lies
    /// inside it, a zero slice where it lies in the padding, and, for a kernel row cut by the
    /// left or right padding, a copy with zeros in the per-thread scratch. No im2col block is
    /// written or kept (`128 * K` floats per thread: 2.3 MiB for a 3x3 convolution on 512
    /// channels); docs/cpu-kernels.md, "Convolutions without im2col".
    #[allow(clippy::too_many_arguments)]
    fn nhwc_tap_pieces(
        &self,
        x: &[f32],
        y: &mut [f32],
        ldy: usize,
        off: usize,
        post: Post<'_, f32>,
        taps: Taps,
        gemm: impl Fn(usize, usize, &[&[f32]], &mut [f32], usize) -> Result<()> + Sync,
    ) -> Result<()> {
        let (h, wd, c) = (self.h, self.w, self.c);
        let pix = self.oh * self.ow;
        let og = self.og();
        let ldy = ldy.max(1);
        let bs = self.block(crate::host::threadpool::current_parallelism());
        let pieces = pixel_pieces(y, pix * ldy, bs, ldy);
        let len = taps.len;
        for_each_piece(pieces, |(b, p0, yrows)| {
            let xb = &x[b * h * wd * c..(b + 1) * h * wd * c];
            let rows = yrows.len() / ldy;
            let mut srcs = Vec::with_capacity(rows * taps.count);
            for g in 0..self.groups {
                // Where each tap of each row reads, in (row, tap) order.
                srcs.clear();
                for p in p0..p0 + rows {
                    let (oy, ox) = (p / self.ow, p % self.ow);
                    srcs.extend((0..taps.count).map(|t| self.tap_src(taps, oy, ox, t, g)));
                }
                let cut = srcs
                    .iter()
                    .filter(|s| matches!(s, TapSrc::Part { .. }))
                    .count();
                // The scratch: a zero tap, then the cut kernel rows in (row, tap) order; every
                // element is written before the table below borrows it.
                f32::with_scratch(len * (1 + cut), |scratch| {
                    let (zero, copies) = scratch.split_at_mut(len);
                    zero.fill(0.0);
                    let cuts = srcs.iter().filter_map(|s| match *s {
                        TapSrc::Part { at, lo, hi } => Some((at, lo, hi)),
                        _ => None,
                    });
                    for ((at, lo, hi), d) in cuts.zip(copies.chunks_exact_mut(len)) {
                        d[..lo * c].fill(0.0);
                        d[lo * c..hi * c].copy_from_slice(&xb[at..at + (hi - lo) * c]);
                        d[hi * c..].fill(0.0);
                    }
                    let (zero, copies): (&[f32], &[f32]) = (zero, copies);
                    let mut next = copies.chunks_exact(len);
                    let table = srcs
                        .iter()
                        .map(|s| match *s {
                            TapSrc::In(at) => Ok(&xb[at..at + len]),
                            TapSrc::Zero => Ok(zero),
                            TapSrc::Part { .. } => next
                                .next()
                                .ok_or_else(|| backend_err("conv2d: a cut tap has no scratch")),
                        })
                        .collect::<Result<Vec<&[f32]>>>()?;
                    gemm(g, rows, &table, &mut yrows[off + g * og..], ldy)
                })?;
            }
            if let Some(f) = post {
                f(yrows);
            }
            Ok(())
        })
    }

    /// Input row/col for output index `o` and tap `k` along one axis, if inside the input.
    #[inline]
    fn src(
        o: usize,
        k: usize,
        stride: usize,
        dil: usize,
        pad: usize,
        size: usize,
    ) -> Option<usize> {
        (o * stride + k * dil)
            .checked_sub(pad)
            .filter(|&i| i < size)
    }

    /// Input row of output row `oy` at kernel row `ky`, if inside the input.
    #[inline]
    fn src_y(&self, oy: usize, ky: usize) -> Option<usize> {
        Self::src(
            oy,
            ky,
            self.strides[0],
            self.dilation[0],
            self.padding[0],
            self.h,
        )
    }

    /// Input column of output column `ox` at kernel column `kx`, if inside the input.
    #[inline]
    fn src_x(&self, ox: usize, kx: usize) -> Option<usize> {
        Self::src(
            ox,
            kx,
            self.strides[1],
            self.dilation[1],
            self.padding[1],
            self.w,
        )
    }

    /// Pixels per work piece: whole `BLOCK`s on one thread, smaller pieces when that gives
    /// every pool thread work.
    fn block(&self, threads: usize) -> usize {
        let pix = self.oh * self.ow;
        if threads <= 1 {
            return BLOCK;
        }
        (self.n * pix)
            .div_ceil(threads)
            .div_ceil(self.n.max(1))
            .clamp(16, BLOCK)
    }

    /// The im2col rows of output pixels `p0..p0 + rows` of one image, NHWC: row `r` holds the
    /// taps of pixel `p0 + r` for group `g` in (ky, kx, ci) order.
    fn im2col_nhwc<T: Num>(&self, xb: &[T], g: usize, p0: usize, rows: usize, col: &mut [T]) {
        self.im2col_rows(xb, g, p0, rows, col, self.kdim(), T::default());
    }

    /// [`ConvPlan::im2col_nhwc`] with rows `stride` apart (the first `kdim` of each written)
    /// and `pad` for taps outside the input.
    #[allow(clippy::too_many_arguments)]
    fn im2col_rows<T: Copy>(
        &self,
        xb: &[T],
        g: usize,
        p0: usize,
        rows: usize,
        col: &mut [T],
        stride: usize,
        pad: T,
    ) {
        let (wd, c, cg, kdim) = (self.w, self.c, self.cg(), self.kdim());
        // Without groups and column dilation, a kernel row's taps inside the input are one
        // contiguous run of the input row (`kw * c` floats): one copy instead of one per tap
        // (a 7x7 stem on 3 channels made 49 copies of 3 floats per pixel, and ran its GEMM at
        // half speed).
        // A kernel row of no taps or channels has no runs (and `chunks_exact_mut(0)` panics).
        let runs = self.groups == 1 && self.dilation[1] == 1 && self.kw * self.c > 0;
        let (kw, sx, pl) = (self.kw, self.strides[1], self.padding[1]);
        for r in 0..rows {
            let (oy, ox) = ((p0 + r) / self.ow, (p0 + r) % self.ow);
            let dst = &mut col[r * stride..r * stride + kdim];
            if runs {
                // Taps kx in lo..hi read input columns ox * sx + kx - pl, all inside the row.
                let lo = pl.saturating_sub(ox * sx).min(kw);
                let hi = (wd + pl).saturating_sub(ox * sx).clamp(lo, kw);
                for (ky, d) in dst.chunks_exact_mut(kw * c).enumerate() {
                    match self.src_y(oy, ky) {
                        Some(iy) if lo < hi => {
                            let s = (iy * wd + ox * sx + lo - pl) * c;
                            // Only the padding there is (an empty fill is still a call).
                            if lo > 0 {
                                d[..lo * c].fill(pad);
                            }
                            d[lo * c..hi * c].copy_from_slice(&xb[s..s + (hi - lo) * c]);
                            if hi < kw {
                                d[hi * c..].fill(pad);
                            }
                        }
                        _ => d.fill(pad),
                    }
                }
                continue;
            }
            for ky in 0..self.kh {
                let iy = self.src_y(oy, ky);
                for kx in 0..self.kw {
                    let ix = self.src_x(ox, kx);
                    let d = &mut dst[(ky * self.kw + kx) * cg..(ky * self.kw + kx + 1) * cg];
                    match (iy, ix) {
                        (Some(iy), Some(ix)) => {
                            let s = (iy * wd + ix) * c + g * cg;
                            d.copy_from_slice(&xb[s..s + cg]);
                        }
                        _ => d.fill(pad),
                    }
                }
            }
        }
    }

    /// The weight (`OHWI`, as stored: `unsigned` for uint8) packed for the 8-bit GEMM, one
    /// operand per group, `zero(o)` the zero point of output channel `o`: for NHWC
    /// convolutions that are not depthwise and whose `K` keeps the sums exact; `None`
    /// otherwise.
    pub fn qpack(
        &self,
        level: qgemm::Level,
        w: &[u8],
        unsigned: bool,
        zero: impl Fn(usize) -> i32,
    ) -> Option<Vec<QPacked>> {
        if self.layout != Layout::Nhwc || self.depthwise() || w.len() != self.o * self.kdim() {
            return None;
        }
        let (kdim, og) = (self.kdim(), self.og());
        (0..self.groups)
            .map(|g| {
                let zeros = (0..og)
                    .map(|n| qgemm::zero_i8(zero(g * og + n), unsigned))
                    .collect();
                QPacked::new(
                    level,
                    kdim,
                    og,
                    |k, n| qgemm::to_i8(w[(g * og + n) * kdim + k], unsigned),
                    zeros,
                )
            })
            .collect()
    }

    /// An NHWC convolution through the 8-bit GEMM ([`ConvPlan::qpack`]'s operands): `x` the
    /// input as `i8` ([`qgemm::to_i8`]) and `x_zero` its zero point there; `acc` gets the
    /// exact sums of centered products, NHWC.
    pub fn run_q(&self, x: &[i8], x_zero: i32, w: &[QPacked], acc: &mut [i32]) -> Result<()> {
        let ld = self.o;
        let x: Vec<u8> = x.iter().map(|&v| v as u8).collect();
        self.run_q_into(&x, 0, x_zero, w, qgemm::Out::Acc { c: acc, ld })
    }

    /// [`ConvPlan::run_q`] into `out` (NHWC, row stride `o`): the sums, or requantized by the
    /// GEMM as it finishes each tile, on the pool thread that computed it. `x` holds the
    /// input as stored: `(x ^ flip) as i8` is [`qgemm::to_i8`]'s value (`flip` 0x80 for
    /// uint8, 0 for int8); each piece's im2col rows are built from it in the form the GEMM's
    /// kernel reads ([`qgemm::wants_u8`]), in a buffer this thread keeps, with row sums only
    /// where a weight zero point needs them.
    pub(crate) fn run_q_into(
        &self,
        x: &[u8],
        flip: u8,
        x_zero: i32,
        w: &[QPacked],
        out: qgemm::Out<'_>,
    ) -> Result<()> {
        let (n, c, h, wd, o) = (self.n, self.c, self.h, self.w, self.o);
        let (og, kdim) = (self.og(), self.kdim());
        if x.len() != n * c * h * wd
            || out.len() != n * o * self.oh * self.ow
            || out.ld() != o
            || w.len() != self.groups
            || w.iter().any(|b| b.k() != kdim || b.n() != og)
            || !(-128..=127).contains(&x_zero)
        {
            return Err(backend_err("conv2d: buffer sizes do not match the plan"));
        }
        let kp = qgemm::k_padded(kdim);
        let pix = self.oh * self.ow;
        let bs = self.block(crate::host::threadpool::current_parallelism());
        let mut pieces = Vec::new();
        for (b, yb) in out.split_rows(pix).into_iter().enumerate() {
            for (j, rows) in yb.split_rows(bs).into_iter().enumerate() {
                pieces.push((b, j * bs, rows));
            }
        }
        // The zero point as stored (the im2col padding).
        let pad = (x_zero as i8 as u8) ^ flip;
        let direct = self.pointwise() && kdim == kp;
        // To the kernel's form: `i8` is the stored value `^ flip`, uint8 that `^ 0x80`.
        let form = |wg: &QPacked| {
            if qgemm::wants_u8(wg) {
                flip ^ 0x80
            } else {
                flip
            }
        };
        for_each_piece(pieces, |(b, p0, mut yrows)| {
            let xb = &x[b * h * wd * c..(b + 1) * h * wd * c];
            let rows = yrows.len() / o;
            let mut col = QCOL
                .with(|cell| cell.try_borrow_mut().map(|mut v| std::mem::take(&mut *v)))
                .unwrap_or_default();
            // Values beyond `kdim` in a row are whatever the buffer held: the GEMM multiplies
            // them by zeros. (Rows read in place need none of it.)
            if !(direct && w.iter().all(|wg| form(wg) == 0)) && col.len() < rows * kp {
                col.resize(rows * kp, 0);
            }
            let mut sums = vec![0i32; rows];
            let mut result = Ok(());
            for (g, wg) in w.iter().enumerate() {
                let u8_rows = qgemm::wants_u8(wg);
                let to = form(wg);
                let col_rows: &[u8] = if direct && to == 0 {
                    // A pointwise convolution whose input is stored in the kernel's form, with
                    // as many channels as the padded `K`: its rows are the GEMM's operand.
                    &xb[p0 * c..(p0 + rows) * c]
                } else {
                    let col_rows = &mut col[..rows * kp];
                    self.im2col_rows(xb, g, p0, rows, col_rows, kp, pad);
                    if to != 0 {
                        for row in col_rows.chunks_exact_mut(kp) {
                            for v in &mut row[..kdim] {
                                *v ^= to;
                            }
                        }
                    }
                    col_rows
                };
                if wg.has_zero_points() {
                    for (s, row) in sums.iter_mut().zip(col_rows.chunks_exact(kp)) {
                        *s = if u8_rows {
                            row[..kdim].iter().map(|&v| v as i32).sum::<i32>() - 128 * kdim as i32
                        } else {
                            row[..kdim].iter().map(|&v| v as i8 as i32).sum()
                        };
                    }
                }
                let a = if u8_rows {
                    qgemm::Rows::U8(col_rows)
                } else {
                    // SAFETY: `i8` and `u8` have the same size and alignment and every bit
                    // pattern is valid for both; the view borrows `col_rows` (shared, for as
                    // long as `a` lives) and covers exactly its bytes.
                    qgemm::Rows::I8(unsafe {
                        std::slice::from_raw_parts(col_rows.as_ptr() as *const i8, col_rows.len())
                    })
                };
                result = qgemm::gemm(rows, a, x_zero, &sums, wg, yrows.cols_from(g * og));
                if result.is_err() {
                    break;
                }
            }
            QCOL.with(|cell| {
                if let Ok(mut v) = cell.try_borrow_mut() {
                    *v = col;
                }
            });
            result
        })
    }

    /// The im2col columns of output pixels `p0..p0 + cols` of one image, NCHW: row
    /// `(ci, ky, kx)` holds that tap for each pixel of group `g`. Works along output rows: the
    /// valid columns of a tap are one range (a slice copy at stride 1), the rest padding.
    fn im2col_nchw<T: Num>(&self, xb: &[T], g: usize, p0: usize, cols: usize, col: &mut [T]) {
        let (h, wd, cg, ow) = (self.h, self.w, self.cg(), self.ow);
        let (sx, dx, pl) = (self.strides[1], self.dilation[1], self.padding[1]);
        for ci in 0..cg {
            let plane = &xb[(g * cg + ci) * h * wd..(g * cg + ci + 1) * h * wd];
            for ky in 0..self.kh {
                for kx in 0..self.kw {
                    let row = (ci * self.kh + ky) * self.kw + kx;
                    let dst = &mut col[row * cols..(row + 1) * cols];
                    let off = kx * dx;
                    // Valid output columns: pl <= ox * sx + off < pl + wd.
                    let lo = if off >= pl {
                        0
                    } else {
                        (pl - off).div_ceil(sx)
                    };
                    let hi = if pl + wd > off {
                        (pl + wd - off).div_ceil(sx).min(ow)
                    } else {
                        0
                    };
                    let (mut oy, mut ox0, mut j) = (p0 / ow, p0 % ow, 0);
                    while j < cols {
                        let len = (ow - ox0).min(cols - j);
                        let seg = &mut dst[j..j + len];
                        match self.src_y(oy, ky) {
                            None => seg.fill(T::default()),
                            Some(iy) => {
                                let irow = &plane[iy * wd..(iy + 1) * wd];
                                let a = lo.clamp(ox0, ox0 + len);
                                let b = hi.clamp(a, ox0 + len);
                                seg[..a - ox0].fill(T::default());
                                seg[b - ox0..].fill(T::default());
                                let valid = &mut seg[a - ox0..b - ox0];
                                // A piece that starts right of the tap's last valid column
                                // has a = b beyond it: nothing to read (and `a + off - pl`
                                // may lie past the input row).
                                if valid.is_empty() {
                                } else if sx == 1 {
                                    let s0 = a + off - pl;
                                    valid.copy_from_slice(&irow[s0..s0 + (b - a)]);
                                } else {
                                    for (t, d) in valid.iter_mut().enumerate() {
                                        *d = irow[(a + t) * sx + off - pl];
                                    }
                                }
                            }
                        }
                        j += len;
                        oy += 1;
                        ox0 = 0;
                    }
                }
            }
        }
    }

    /// NHWC convolution as GEMMs with the `gemm` crate (or the own kernels of levels without
    /// packed ones); see [`ConvPlan::nhwc_pieces`].
    fn gemm_nhwc<T: Num>(&self, x: &[T], w: &[T], y: &mut [T], post: Post<'_, T>) -> Result<()> {
        let (o, og, kdim) = (self.o, self.og(), self.kdim());
        self.nhwc_pieces(x, y, o, 0, post, |g, rows, a, lda, c, ldc| {
            let wg = &w[g * kdim * og..(g + 1) * kdim * og];
            T::gemm_isa(self.isa, rows, kdim, og, a, lda, wg, og, c, ldc)
        })
    }

    /// The pieces of an NHWC convolution as GEMMs: blocks of output pixels (rows of `y`, `ldy`
    /// channels apart, the convolution's from channel `off`), spread over the pool. For each
    /// piece and group `g`, `gemm(g, rows, a, lda, c, ldc)` must write `c[rows, og]` (row
    /// stride `ldc`, starting at the group's first channel) = `a[rows, kdim]` (row stride
    /// `lda`) times the group's weight: `a` is the input itself (from the group's first
    /// channel, `lda` = `c`) for a 1x1 stride-1 convolution, grouped or not, else the piece's
    /// im2col rows (`lda` = `kdim`). `post` runs on each finished piece (whole rows of `y`).
    #[allow(clippy::type_complexity)]
    fn nhwc_pieces<T: Num>(
        &self,
        x: &[T],
        y: &mut [T],
        ldy: usize,
        off: usize,
        post: Post<'_, T>,
        gemm: impl Fn(usize, usize, &[T], usize, &mut [T], usize) -> Result<()> + Sync,
    ) -> Result<()> {
        let (h, wd, c) = (self.h, self.w, self.c);
        let pix = self.oh * self.ow;
        let (og, kdim) = (self.og(), self.kdim());
        let threads = crate::host::threadpool::current_parallelism();
        let ldy = ldy.max(1);
        if self.one_by_one() {
            // The input is the im2col matrix already: [n * pix, c], group g's columns from
            // g * cg (grouped 1x1 convolutions, as in ShuffleNet, copy nothing either). Larger
            // pieces than for im2col: there is no column buffer to keep in cache.
            let cg = self.cg();
            let bs = (self.n * pix).div_ceil(threads).clamp(1, PW_BLOCK);
            let pieces: Vec<(usize, &mut [T])> = y.chunks_mut(bs * ldy).enumerate().collect();
            return for_each_piece(pieces, |(j, yrows)| {
                let rows = yrows.len() / ldy;
                for g in 0..self.groups {
                    let a = &x[j * bs * c + g * cg..];
                    gemm(g, rows, a, c, &mut yrows[off + g * og..], ldy)?;
                }
                if let Some(f) = post {
                    f(yrows);
                }
                Ok(())
            });
        }
        let bs = self.block(threads);
        let pieces = pixel_pieces(y, pix * ldy, bs, ldy);
        for_each_piece(pieces, |(b, p0, yrows)| {
            let xb = &x[b * h * wd * c..(b + 1) * h * wd * c];
            let rows = yrows.len() / ldy;
            // im2col_nhwc writes every element of `col`.
            T::with_scratch(rows * kdim, |col| {
                for g in 0..self.groups {
                    self.im2col_nhwc(xb, g, p0, rows, col);
                    gemm(g, rows, col, kdim, &mut yrows[off + g * og..], ldy)?;
                }
                Ok::<(), crate::error::Error>(())
            })?;
            if let Some(f) = post {
                f(yrows);
            }
            Ok(())
        })
    }

    /// NCHW convolution as GEMMs: pieces are blocks of output pixels, a column segment of every
    /// output channel's plane, computed into a tile and copied out.
    fn gemm_nchw<T: Num>(&self, x: &[T], w: &[T], y: &mut [T]) -> Result<()> {
        let (h, wd, c, o) = (self.h, self.w, self.c, self.o);
        let pix = self.oh * self.ow;
        if self.pointwise() {
            for (b, yb) in y.chunks_mut(o * pix).enumerate() {
                let xb = &x[b * c * pix..(b + 1) * c * pix];
                par_gemm_isa(self.isa, o, c, pix, w, c, xb, pix, yb, pix)?;
            }
            return Ok(());
        }
        let (og, kdim) = (self.og(), self.kdim());
        let bs = self.block(crate::host::threadpool::current_parallelism());
        let blocks = pix.div_ceil(bs);
        let mut pieces: Vec<(usize, usize, Vec<&mut [T]>)> = (0..self.n * blocks)
            .map(|i| (i / blocks, (i % blocks) * bs, Vec::with_capacity(o)))
            .collect();
        for (b, yb) in y.chunks_mut(o * pix).enumerate() {
            for plane in yb.chunks_mut(pix) {
                for (j, seg) in plane.chunks_mut(bs).enumerate() {
                    pieces[b * blocks + j].2.push(seg);
                }
            }
        }
        for_each_piece(pieces, |(b, p0, mut segs)| {
            let xb = &x[b * c * h * wd..(b + 1) * c * h * wd];
            let cols = segs.first().map_or(0, |s| s.len());
            // im2col_nchw writes every element of `col`, and the GEMMs every element of
            // `tile` (one `og x cols` block per group).
            T::with_scratch(kdim * cols + o * cols, |buf| {
                let (col, tile) = buf.split_at_mut(kdim * cols);
                for g in 0..self.groups {
                    self.im2col_nchw(xb, g, p0, cols, col);
                    let wg = &w[g * og * kdim..(g + 1) * og * kdim];
                    T::gemm_isa(
                        self.isa,
                        og,
                        kdim,
                        cols,
                        wg,
                        kdim,
                        col,
                        cols,
                        &mut tile[g * og * cols..],
                        cols,
                    )?;
                }
                for (seg, t) in segs.iter_mut().zip(tile.chunks_exact(cols.max(1))) {
                    seg.copy_from_slice(t);
                }
                Ok(())
            })
        })
    }

    /// Whether an NHWC convolution runs as direct loops: few output channels per group (4, 8 or
    /// 16: a register-sized accumulator) and a short reduction, where im2col and GEMM packing
    /// cost more than the arithmetic (e.g. a 3 -> 8 channel 3x3 convolution on 16x16).
    fn direct(&self) -> bool {
        matches!(self.og(), 4 | 8 | 16) && self.kdim() <= 64 && !self.pointwise()
    }

    /// Direct NHWC convolution (see [`ConvPlan::direct`]): pieces are output rows; each pixel
    /// sums its taps' input channels times the packed weight rows ([K, Og] per group).
    fn direct_nhwc<T: Num>(&self, x: &[T], w: &[T], y: &mut [T], post: Post<'_, T>) -> Result<()> {
        let pieces: Vec<(usize, &mut [T])> = y.chunks_mut(self.ow * self.o).enumerate().collect();
        for_each_piece(pieces, |(row, yrow)| {
            isa::run_as(
                self.isa,
                #[inline(always)]
                || self.direct_row(x, w, row, yrow),
            );
            if let Some(f) = post {
                f(yrow);
            }
            Ok(())
        })
    }

    /// One output row (`row` = image * oh + oy) of [`ConvPlan::direct_nhwc`].
    #[inline(always)]
    fn direct_row<T: Num>(&self, x: &[T], w: &[T], row: usize, yrow: &mut [T]) {
        match self.og() {
            4 => self.direct_row_og::<T, 4>(x, w, row, yrow),
            8 => self.direct_row_og::<T, 8>(x, w, row, yrow),
            _ => self.direct_row_og::<T, 16>(x, w, row, yrow),
        }
    }

    #[inline(always)]
    fn direct_row_og<T: Num, const OG: usize>(&self, x: &[T], w: &[T], row: usize, yrow: &mut [T]) {
        let (h, wd, c, cg, kdim) = (self.h, self.w, self.c, self.cg(), self.kdim());
        let (b, oy) = (row / self.oh, row % self.oh);
        for (ox, out) in yrow.chunks_exact_mut(self.o).enumerate() {
            for (g, og_out) in out.chunks_exact_mut(OG).enumerate() {
                let wg = &w[g * kdim * OG..(g + 1) * kdim * OG];
                let mut acc = [T::default(); OG];
                for ky in 0..self.kh {
                    let Some(iy) = self.src_y(oy, ky) else {
                        continue;
                    };
                    for kx in 0..self.kw {
                        let Some(ix) = self.src_x(ox, kx) else {
                            continue;
                        };
                        let xi = ((b * h + iy) * wd + ix) * c + g * cg;
                        let t = (ky * self.kw + kx) * cg;
                        for (ci, &v) in x[xi..xi + cg].iter().enumerate() {
                            let wrow = &wg[(t + ci) * OG..(t + ci + 1) * OG];
                            for (a, &k) in acc.iter_mut().zip(wrow) {
                                *a += v * k;
                            }
                        }
                    }
                }
                og_out.copy_from_slice(&acc);
            }
        }
    }

    /// Depthwise NHWC: pieces are output rows. The taps of the row's interior pixels (every
    /// column tap inside the input) are listed once per row, as offsets from the pixel's first
    /// input column; only the edge pixels list their own (listing taps per pixel cost more than
    /// the arithmetic with few channels: 32 channels at 112x112 ran at 12 GFLOP/s).
    fn dw_nhwc<T: Num>(&self, x: &[T], w: &[T], y: &mut [T], post: Post<'_, T>) -> Result<()> {
        let (h, wd, c, o) = (self.h, self.w, self.c, self.o);
        let m = o / c;
        let (sx, dx, pl) = (self.strides[1], self.dilation[1], self.padding[1]);
        // Interior columns: ox * sx >= pl and ox * sx - pl + (kw - 1) * dx < wd.
        let ox_lo = pl.div_ceil(sx).min(self.ow);
        let span = (self.kw - 1) * dx;
        let ox_hi = if wd + pl > span {
            ((wd + pl - span - 1) / sx + 1).clamp(ox_lo, self.ow)
        } else {
            ox_lo
        };
        let pieces: Vec<(usize, &mut [T])> = y.chunks_mut(self.ow * o).enumerate().collect();
        for_each_piece(pieces, |(row, yrow)| {
            let (b, oy) = (row / self.oh, row % self.oh);
            // (input offset, weight offset) of every tap inside the input, per output pixel.
            let mut taps: Vec<(usize, usize)> = Vec::with_capacity(self.kh * self.kw);
            // Interior pixels: (input offset from the pixel's column ox * sx - pl, weight offset).
            let mut rel: Vec<(usize, usize)> = Vec::with_capacity(self.kh * self.kw);
            for ky in 0..self.kh {
                if let Some(iy) = self.src_y(oy, ky) {
                    for kx in 0..self.kw {
                        rel.push((((b * h + iy) * wd + kx * dx) * c, (ky * self.kw + kx) * o));
                    }
                }
            }
            let rel_last = last_tap(&rel);
            // One level switch per row, not per pixel.
            isa::run_as(
                self.isa,
                #[inline(always)]
                || {
                    // f32 interior pixels, channels a whole number of register tiles wide:
                    // explicit vectors (dw.rs); the rest below.
                    let (mut simd_to, mut simd_ch) = (ox_lo, 0);
                    let n = (ox_hi - ox_lo) / dw::PIXELS * dw::PIXELS;
                    if m == 1 && n > 0 {
                        let run = &mut yrow[ox_lo * o..(ox_lo + n) * o];
                        let base = (ox_lo * sx - pl) * c;
                        let step = sx * c;
                        simd_ch =
                            T::dw_interior(self.isa, x, w, base, step, &rel, rel_last, run, c);
                        simd_to = ox_lo + n;
                    }
                    for (ox, out) in yrow.chunks_exact_mut(o).enumerate() {
                        if m == 1 && (ox_lo..ox_hi).contains(&ox) {
                            let xb = (ox * sx - pl) * c;
                            if ox < simd_to && simd_ch > 0 {
                                // Only the channels past the tiles remain.
                                let rest = &mut out[simd_ch..];
                                dw_pixel(x, &w[simd_ch..], xb + simd_ch, &rel, rel_last, rest);
                            } else {
                                dw_pixel(x, w, xb, &rel, rel_last, out);
                            }
                            continue;
                        }
                        taps.clear();
                        for ky in 0..self.kh {
                            let Some(iy) = self.src_y(oy, ky) else {
                                continue;
                            };
                            for kx in 0..self.kw {
                                if let Some(ix) = self.src_x(ox, kx) {
                                    taps.push((
                                        ((b * h + iy) * wd + ix) * c,
                                        (ky * self.kw + kx) * o,
                                    ));
                                }
                            }
                        }
                        if m == 1 {
                            dw_pixel(x, w, 0, &taps, last_tap(&taps), out);
                        } else {
                            out.fill(T::default());
                            for &(xi, wi) in &taps {
                                let inp = &x[xi..xi + c];
                                for (oc, (d, &k)) in out.iter_mut().zip(&w[wi..wi + o]).enumerate()
                                {
                                    *d += inp[oc / m] * k;
                                }
                            }
                        }
                    }
                },
            );
            if let Some(f) = post {
                f(yrow);
            }
            Ok(())
        })
    }

    /// Depthwise NCHW: pieces are output planes.
    fn dw_nchw<T: Num>(&self, x: &[T], w: &[T], y: &mut [T]) -> Result<()> {
        let (h, wd, c, o) = (self.h, self.w, self.c, self.o);
        let m = o / c;
        let pieces: Vec<(usize, &mut [T])> = y.chunks_mut(self.oh * self.ow).enumerate().collect();
        for_each_piece(pieces, |(p, out)| {
            let (b, oc) = (p / o, p % o);
            let plane = &x[(b * c + oc / m) * h * wd..(b * c + oc / m + 1) * h * wd];
            let wk = &w[oc * self.kh * self.kw..(oc + 1) * self.kh * self.kw];
            T::with_scratch(self.dw_scratch_len(), |scratch| {
                isa::run_as(
                    self.isa,
                    #[inline(always)]
                    || self.dw_plane(plane, wk, out, scratch),
                )
            });
            Ok(())
        })
    }

    /// The padded extent of [`ConvPlan::dw_plane`]'s scratch plane: (rows, columns, columns per
    /// stride phase, row length).
    fn dw_extent(&self) -> (usize, usize, usize, usize) {
        let need_h = (self.oh - 1) * self.strides[0] + (self.kh - 1) * self.dilation[0] + 1;
        let need_w = (self.ow - 1) * self.strides[1] + (self.kw - 1) * self.dilation[1] + 1;
        let len = need_w.div_ceil(self.strides[1]);
        (need_h, need_w, len, self.strides[1] * len)
    }

    /// Elements of [`ConvPlan::dw_plane`]'s scratch: the padded plane, and at stride 1 the
    /// padded-width accumulator.
    fn dw_scratch_len(&self) -> usize {
        let (need_h, need_w, _, stride_row) = self.dw_extent();
        let acc = if self.strides == [1, 1] {
            self.oh * need_w
        } else {
            0
        };
        need_h * stride_row + acc
    }

    /// One output plane of a depthwise NCHW convolution: input plane `plane`, kernel `wk`.
    /// The input is first copied into a zero-padded scratch plane whose rows are split into
    /// `stride` phases (column `c` at phase `c % stride`, index `c / stride`): every tap is then
    /// a contiguous slice along the output row, at any stride, with no bounds tests.
    /// `scratch` has [`ConvPlan::dw_scratch_len`] elements, any contents.
    #[inline(always)]
    fn dw_plane<T: Num>(&self, plane: &[T], wk: &[T], out: &mut [T], scratch: &mut [T]) {
        let (h, wd, oh, ow) = (self.h, self.w, self.oh, self.ow);
        let (sy, sx) = (self.strides[0], self.strides[1]);
        let (dy, dx) = (self.dilation[0], self.dilation[1]);
        let (pt, pl) = (self.padding[0], self.padding[1]);
        let (need_h, need_w, len, stride_row) = self.dw_extent();
        scratch.fill(T::default());
        let (buf, acc) = scratch.split_at_mut(need_h * stride_row);
        // Valid padded columns: pl <= c < pl + wd.
        let (c0, c1) = (pl.min(need_w), (pl + wd).min(need_w));
        for (r, prow) in buf.chunks_exact_mut(stride_row).enumerate() {
            let Some(iy) = r.checked_sub(pt).filter(|&iy| iy < h && c0 < c1) else {
                continue;
            };
            let irow = &plane[iy * wd..(iy + 1) * wd];
            if sx == 1 {
                prow[c0..c1].copy_from_slice(&irow[c0 - pl..c1 - pl]);
            } else if sx == 2 {
                // Both phases in one pass over pairs of columns (a deinterleave the compiler
                // vectorises; the general loop below reads at a run-time stride, one by one).
                let (even, odd) = prow.split_at_mut(len);
                let mut c = c0;
                if c % 2 == 1 {
                    odd[c / 2] = irow[c - pl];
                    c += 1;
                }
                let pairs = (c1.max(c) - c) / 2;
                let src = &irow[c - pl..c - pl + 2 * pairs];
                for ((e, o), s) in even[c / 2..c / 2 + pairs]
                    .iter_mut()
                    .zip(&mut odd[c / 2..c / 2 + pairs])
                    .zip(src.chunks_exact(2))
                {
                    *e = s[0];
                    *o = s[1];
                }
                c += 2 * pairs;
                if c < c1 {
                    even[c / 2] = irow[c - pl];
                }
            } else {
                for (phase, dst) in prow.chunks_exact_mut(len).enumerate() {
                    // Columns phase, phase + sx, ... from the first valid one.
                    let first = if c0 > phase {
                        phase + (c0 - phase).div_ceil(sx) * sx
                    } else {
                        phase
                    };
                    if first < c1 {
                        let src = irow[first - pl..c1 - pl].iter().step_by(sx);
                        for (d, &v) in dst[first / sx..].iter_mut().zip(src) {
                            *d = v;
                        }
                    }
                }
            }
        }
        // Every tap of an output row is a contiguous slice of the phase-split scratch: offset
        // (from the row's first padded input row) and weight.
        let taps = || -> Vec<(usize, T)> {
            (0..self.kh * self.kw)
                .map(|t| {
                    let (ky, kx) = (t / self.kw, t % self.kw);
                    let off = kx * dx;
                    (ky * dy * stride_row + (off % sx) * len + off / sx, wk[t])
                })
                .collect()
        };
        if ow >= 16 {
            let taps = taps();
            // Rows wide enough for vectors: per output row, all taps summed in registers,
            // 32, 16, 8, then 1 column(s) at a time, each output written once (a pass per tap
            // over the row left an 8-column scalar tail on 56-wide rows, nine times).
            for (oy, row) in out.chunks_exact_mut(ow).enumerate() {
                let base = oy * sy * stride_row;
                let mut x0 = dw_row_chunks::<T, 32>(buf, base, &taps, row, 0);
                x0 = dw_row_chunks::<T, 16>(buf, base, &taps, row, x0);
                x0 = dw_row_chunks::<T, 8>(buf, base, &taps, row, x0);
                dw_row_chunks::<T, 1>(buf, base, &taps, row, x0);
            }
            return;
        }
        if sx == 1 && sy == 1 {
            // Output rows at the padded width (the last kw - 1 columns of each are junk): every
            // tap is one long contiguous pass, which keeps small planes vectorised too.
            // Done in stretches of DW_STRETCH outputs, all taps per stretch, so that the
            // accumulators stay in the L1 cache (whole-plane passes sent a 112x112 plane's
            // through L2 once per tap).
            let span = (oh - 1) * need_w + ow;
            for s0 in (0..span).step_by(DW_STRETCH) {
                let n = DW_STRETCH.min(span - s0);
                let acc = &mut acc[s0..s0 + n];
                for ky in 0..self.kh {
                    for kx in 0..self.kw {
                        let k = wk[ky * self.kw + kx];
                        let src = &buf[ky * dy * need_w + kx * dx + s0..][..n];
                        for (d, &a) in acc.iter_mut().zip(src) {
                            *d += a * k;
                        }
                    }
                }
            }
            for (row, a) in out.chunks_exact_mut(ow).zip(acc.chunks(need_w)) {
                row.copy_from_slice(&a[..ow]);
            }
            return;
        }
        let taps = taps();
        out.fill(T::default());
        for (oy, row) in out.chunks_exact_mut(ow).enumerate() {
            let base = oy * sy * stride_row;
            for &(off, k) in &taps {
                let src = &buf[base + off..][..ow];
                for (d, &a) in row.iter_mut().zip(src) {
                    *d += a * k;
                }
            }
        }
    }
}

/// The plan of a benchmark convolution: `shape` is `[n, c, h, w, o, k, stride, pad, groups]`
/// (square kernel, stride and padding, no dilation).
fn bench_plan(layout: Layout, shape: [usize; 9], level: Isa) -> Result<ConvPlan> {
    let [n, c, h, wd, o, k, s, pad, groups] = shape;
    if groups == 0
        || c % groups != 0
        || o % groups != 0
        || s == 0
        || h + 2 * pad < k
        || wd + 2 * pad < k
    {
        return Err(backend_err("conv: bad benchmark shape"));
    }
    Ok(ConvPlan {
        layout,
        n,
        c,
        h,
        w: wd,
        o,
        kh: k,
        kw: k,
        oh: (h + 2 * pad - k) / s + 1,
        ow: (wd + 2 * pad - k) / s + 1,
        groups,
        strides: [s, s],
        padding: [pad; 4],
        dilation: [1, 1],
        isa: level,
    })
}

/// Seconds per run (best of `reps`) of a float convolution through the cpu backend's kernels
/// at the level named `isa` (one of [`super::supported_isas`]), on the calling thread: for
/// benchmarks (runtime/examples/gemm_bench.rs); not a stable API. `shape` is
/// `[n, c, h, w, o, k, stride, pad, groups]` (square kernel, symmetric padding).
#[doc(hidden)]
pub fn bench_conv(isa: &str, nchw: bool, shape: [usize; 9], reps: usize) -> Result<f64> {
    let level = isa::supported()
        .iter()
        .copied()
        .find(|i| i.name() == isa)
        .ok_or_else(|| backend_err(format!("conv: no {isa} kernels on this CPU")))?;
    let layout = if nchw { Layout::Nchw } else { Layout::Nhwc };
    let plan = bench_plan(layout, shape, level)?;
    let [n, c, h, wd, o, ..] = shape;
    let x: Vec<f32> = (0..n * c * h * wd).map(|i| (i % 7) as f32 - 3.0).collect();
    let w: Vec<f32> = (0..o * plan.kdim()).map(|i| (i % 5) as f32 - 2.0).collect();
    let packed = plan.pack(&w);
    let gemm = plan.pack_gemm(&packed);
    let mut y = vec![0f32; n * o * plan.oh * plan.ow];
    let mut best = f64::MAX;
    for _ in 0..reps.max(1) {
        let t = std::time::Instant::now();
        match &gemm {
            Some(g) => plan.run_packed(&x, g, &mut y, Epilogue::NONE, None)?,
            None => {
                plan.run(&x, &packed, &mut y, None)?;
            }
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// Seconds for the best of `reps` runs of a uint8 NHWC convolution (`shape` as for
/// [`bench_conv`]) on its exact accumulators: `kernel` `"f64"` (the centered-f64 GEMM) or an
/// 8-bit GEMM level (`"avx2"`, `"dotprod"`, `"scalar"`, whether or not the backend would pick
/// it), including the input's conversion.
#[doc(hidden)]
pub fn bench_qconv(kernel: &str, shape: [usize; 9], reps: usize) -> Result<f64> {
    let plan = bench_plan(Layout::Nhwc, shape, isa::current())?;
    let [n, c, h, wd, o, ..] = shape;
    let x: Vec<u8> = (0..n * c * h * wd).map(|i| (i * 7 % 251) as u8).collect();
    let w: Vec<u8> = (0..o * plan.kdim()).map(|i| (i * 5 % 253) as u8).collect();
    let (zx, zw) = (120i32, 128i32);
    let y = n * o * plan.oh * plan.ow;
    let mut best = f64::MAX;
    let level = qgemm::levels()
        .into_iter()
        .find(|l| format!("{l:?}").eq_ignore_ascii_case(kernel));
    match level {
        Some(level) => {
            let q = plan
                .qpack(level, &w, true, |_| zw)
                .ok_or_else(|| backend_err("qconv: the 8-bit GEMM does not take this shape"))?;
            let mut acc = vec![0i32; y];
            for _ in 0..reps.max(1) {
                let t = std::time::Instant::now();
                let xi: Vec<i8> = x.iter().map(|&b| qgemm::to_i8(b, true)).collect();
                plan.run_q(&xi, zx - 128, &q, &mut acc)?;
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        None if kernel == "f64" => {
            let wf: Vec<f64> = w.iter().map(|&b| b as f64 - zw as f64).collect();
            let packed = plan.pack(&wf);
            let mut acc = vec![0f64; y];
            for _ in 0..reps.max(1) {
                let t = std::time::Instant::now();
                let xf: Vec<f64> = x.iter().map(|&b| b as f64 - zx as f64).collect();
                plan.run(&xf, &packed, &mut acc, None)?;
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        None => return Err(backend_err(format!("qconv: no {kernel} kernel here"))),
    }
    Ok(best)
}

/// The 8-bit GEMM levels this CPU runs, best first.
#[doc(hidden)]
pub fn bench_qlevels() -> Vec<String> {
    qgemm::levels()
        .into_iter()
        .map(|l| format!("{l:?}").to_ascii_lowercase())
        .collect()
}

/// One output pixel of a depthwise convolution with multiplier 1 (NHWC): the sum over `taps`
/// (input offset from `base`, weight offset) of input channels times weights, accumulated in
/// registers 32, 16, 8 and then 1 channel(s) at a time, and stored once.
///
/// `last` is the largest offset pair in `taps` ([`last_tap`]).
#[inline(always)]
fn dw_pixel<T: Num>(
    x: &[T],
    w: &[T],
    base: usize,
    taps: &[(usize, usize)],
    last: (usize, usize),
    out: &mut [T],
) {
    let c = out.len();
    // Every read below stays under these bounds, checked once per pixel rather than per vector
    // (the per-load checks cost about as much as the arithmetic). They hold by construction
    // (the offsets come from the validated plan); if they did not, the pixel is left as is
    // rather than read out of bounds, and the conv tests compare every element.
    if base + last.0 + c > x.len() || last.1 + c > w.len() {
        return;
    }
    let mut c0 = dw_chunks::<T, 32>(x, w, base, taps, out, 0);
    c0 = dw_chunks::<T, 16>(x, w, base, taps, out, c0);
    c0 = dw_chunks::<T, 8>(x, w, base, taps, out, c0);
    dw_chunks::<T, 1>(x, w, base, taps, out, c0);
}

/// Columns `x0..` of one NCHW depthwise output row, `N` at a time while `N` remain: each sums
/// `taps` (offset from `base` in the scratch plane, weight) in registers; returns where it
/// stopped.
#[inline(always)]
fn dw_row_chunks<T: Num, const N: usize>(
    buf: &[T],
    base: usize,
    taps: &[(usize, T)],
    row: &mut [T],
    mut x0: usize,
) -> usize {
    while x0 + N <= row.len() {
        let mut acc = [T::default(); N];
        for &(off, k) in taps {
            let s = base + off + x0;
            // In bounds by construction (the scratch holds every tap of every output); if
            // not, the columns are left unwritten rather than read out of bounds.
            let Some(Ok(src)) = buf.get(s..s + N).map(<&[T; N]>::try_from) else {
                return x0;
            };
            for j in 0..N {
                acc[j] += src[j] * k;
            }
        }
        row[x0..x0 + N].copy_from_slice(&acc);
        x0 += N;
    }
    x0
}

/// The largest input and weight offsets of `taps`.
fn last_tap(taps: &[(usize, usize)]) -> (usize, usize) {
    taps.iter()
        .fold((0, 0), |(a, b), &(x, w)| (a.max(x), b.max(w)))
}

/// The channels of [`dw_pixel`] from `c0` on, `N` at a time while `N` remain; returns where it
/// stopped. The caller checked that every tap's `out.len()` channels lie inside `x` and `w`.
#[inline(always)]
fn dw_chunks<T: Num, const N: usize>(
    x: &[T],
    w: &[T],
    base: usize,
    taps: &[(usize, usize)],
    out: &mut [T],
    mut c0: usize,
) -> usize {
    while c0 + N <= out.len() {
        let mut acc = [T::default(); N];
        for &(xi, wi) in taps {
            // SAFETY: base + xi + c0 + N <= base + xi + out.len() <= x.len(), and
            // wi + c0 + N <= w.len() (checked by `dw_pixel`); the arrays are `T`-aligned.
            let (inp, wt) = unsafe {
                (
                    &*x.as_ptr().add(base + xi + c0).cast::<[T; N]>(),
                    &*w.as_ptr().add(wi + c0).cast::<[T; N]>(),
                )
            };
            for j in 0..N {
                acc[j] += inp[j] * wt[j];
            }
        }
        out[c0..c0 + N].copy_from_slice(&acc);
        c0 += N;
    }
    c0
}

/// Run `f` on every piece (disjoint parts of an output), spread over the session's pool.
pub(crate) fn for_each_piece<P: Send>(
    pieces: Vec<P>,
    f: impl Fn(P) -> Result<()> + Sync,
) -> Result<()> {
    let slots: Vec<std::sync::Mutex<Option<P>>> = pieces
        .into_iter()
        .map(|p| std::sync::Mutex::new(Some(p)))
        .collect();
    crate::host::threadpool::parallel_chunks(slots.len(), &|range| {
        for slot in &slots[range] {
            let piece = slot
                .lock()
                .ok()
                .and_then(|mut s| s.take())
                .ok_or_else(|| backend_err("a work piece was taken twice"))?;
            f(piece)?;
        }
        Ok(())
    })
}

/// Below this many multiply-adds a GEMM runs on one thread.
const PAR_GEMM_MIN: usize = 1 << 16;

/// `c[m, n] = a[m, k] * b[k, n]` with `c` dense (`ldc = n`), split over the session's pool:
/// by rows of `c` when there are enough, else by column blocks computed into tiles.
#[allow(clippy::too_many_arguments)]
pub(crate) fn par_gemm<T: Num>(
    m: usize,
    k: usize,
    n: usize,
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
    c: &mut [T],
    ldc: usize,
) -> Result<()> {
    par_gemm_isa(isa::current(), m, k, n, a, lda, b, ldb, c, ldc)
}

/// [`par_gemm`] with the kernels of `isa`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn par_gemm_isa<T: Num>(
    isa: Isa,
    m: usize,
    k: usize,
    n: usize,
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
    c: &mut [T],
    ldc: usize,
) -> Result<()> {
    let threads = crate::host::threadpool::current_parallelism();
    if threads <= 1 || m * n * k < PAR_GEMM_MIN || ldc != n || m == 0 || n == 0 {
        return T::gemm_isa(isa, m, k, n, a, lda, b, ldb, c, ldc);
    }
    if c.len() < m * n {
        return Err(backend_err(format!("gemm {m}x{k}x{n}: output too small")));
    }
    if m >= threads {
        let rows = m.div_ceil(threads);
        let pieces: Vec<(usize, &mut [T])> = c[..m * n].chunks_mut(rows * n).enumerate().collect();
        return for_each_piece(pieces, |(i, cr)| {
            let r0 = i * rows;
            let a0 = a.get(r0 * lda..).unwrap_or(&[]);
            T::gemm_isa(isa, cr.len() / n, k, n, a0, lda, b, ldb, cr, n)
        });
    }
    let cols = n.div_ceil(threads);
    let blocks = n.div_ceil(cols);
    let mut pieces: Vec<(usize, Vec<&mut [T]>)> = (0..blocks)
        .map(|j| (j * cols, Vec::with_capacity(m)))
        .collect();
    for row in c[..m * n].chunks_mut(n) {
        for (j, seg) in row.chunks_mut(cols).enumerate() {
            pieces[j].1.push(seg);
        }
    }
    for_each_piece(pieces, |(c0, mut segs)| {
        let w = segs.first().map_or(0, |s| s.len());
        let mut tile = vec![T::default(); m * w];
        let b0 = b.get(c0..).unwrap_or(&[]);
        T::gemm_isa(isa, m, k, w, a, lda, b0, ldb, &mut tile, w)?;
        for (seg, t) in segs.iter_mut().zip(tile.chunks_exact(w.max(1))) {
            seg.copy_from_slice(t);
        }
        Ok(())
    })
}

/// `c[m, n] = a[m, k] * b` then `epi`, dense row-major, split by rows over the session's pool.
pub(crate) fn par_packed(
    m: usize,
    a: &[f32],
    b: &PackedB,
    c: &mut [f32],
    epi: Epilogue<'_>,
) -> Result<()> {
    let (k, n) = (b.k(), b.n());
    if a.len() != m * k || c.len() != m * n {
        return Err(backend_err(format!(
            "gemm {m}x{k}x{n}: operand sizes do not match"
        )));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    let threads = crate::host::threadpool::current_parallelism();
    let rows = m.div_ceil(threads.max(1));
    let pieces: Vec<(usize, &mut [f32])> = c.chunks_mut(rows * n).enumerate().collect();
    for_each_piece(pieces, |(i, cr)| {
        let a0 = &a[i * rows * k..];
        packed::gemm(cr.len() / n, a0, k, b, cr, n, epi)
    })
}

/// Add a per-channel bias and clamp, in one pass. `channels` is the channel count; with NHWC the
/// channel is the innermost dim, with NCHW each channel is a plane of `plane` elements.
pub(crate) fn bias_act(
    y: &mut [f32],
    bias: Option<&[f32]>,
    act: Activation,
    channels: usize,
    layout: Layout,
    plane: usize,
) {
    if !act.is_clamp() {
        return super::ops::bias_act(y, bias, act, channels, layout, plane);
    }
    let (lo, hi) = act.bounds();
    let clamp = act != Activation::None;
    // Comparisons rather than f32::max/min: they vectorize to plain max/min instructions (and
    // let a NaN through, as the model would).
    #[inline(always)]
    fn clampf(v: f32, lo: f32, hi: f32) -> f32 {
        let v = if v < lo { lo } else { v };
        if v > hi {
            hi
        } else {
            v
        }
    }
    // Compiled for the chosen level (at the baseline these passes were ~10% of MobileNetV2's
    // time). The rows are plain loops: fixed 16-wide chunks, which helped the baseline build
    // with short rows, compiled to much slower code inside the AVX2/AVX-512 functions.
    match (bias, layout) {
        (Some(b), Layout::Nhwc) => isa::vectorized(
            #[inline(always)]
            || {
                for row in y.chunks_exact_mut(channels) {
                    for (v, &bb) in row.iter_mut().zip(b) {
                        *v = clampf(*v + bb, lo, hi);
                    }
                }
            },
        ),
        (Some(b), Layout::Nchw) => isa::vectorized(
            #[inline(always)]
            || {
                for (i, p) in y.chunks_exact_mut(plane.max(1)).enumerate() {
                    let bb = b[i % channels];
                    for v in p {
                        *v = clampf(*v + bb, lo, hi);
                    }
                }
            },
        ),
        (None, _) if clamp => {
            for v in y.iter_mut() {
                *v = clampf(*v, lo, hi);
            }
        }
        (None, _) => {}
    }
}

fn strides_of(shape: &[i64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as usize;
    }
    s
}

/// Element offsets into `src` (broadcast to `out`) for every output element, in order.
fn broadcast_index(src: &[i64], out: &[i64]) -> Vec<usize> {
    let n: usize = out.iter().map(|&d| d as usize).product();
    let ss = strides_of(src);
    let lead = out.len() - src.len();
    let mut idx = vec![0usize; out.len()];
    let mut res = Vec::with_capacity(n);
    for _ in 0..n {
        let mut off = 0;
        for (i, &v) in idx.iter().enumerate().skip(lead) {
            let d = src[i - lead];
            if d != 1 {
                off += v * ss[i - lead];
            }
        }
        res.push(off);
        for i in (0..out.len()).rev() {
            idx[i] += 1;
            if (idx[i] as i64) < out[i] {
                break;
            }
            idx[i] = 0;
        }
    }
    res
}

pub(crate) fn binary(
    a: &[f32],
    sa: &[i64],
    b: &[f32],
    sb: &[i64],
    out_shape: &[i64],
    y: &mut [f32],
    f: impl Fn(f32, f32) -> f32,
) {
    if sa == sb {
        for ((d, &x), &z) in y.iter_mut().zip(a).zip(b) {
            *d = f(x, z);
        }
        return;
    }
    if b.len() == 1 {
        for (d, &x) in y.iter_mut().zip(a) {
            *d = f(x, b[0]);
        }
        return;
    }
    // Common case: b is a per-channel vector broadcast over the innermost dim.
    if sa == out_shape
        && sb.iter().rev().skip(1).all(|&d| d == 1)
        && !sb.is_empty()
        && b.len() == *sa.last().unwrap_or(&0) as usize
    {
        for (row_y, row_a) in y.chunks_exact_mut(b.len()).zip(a.chunks_exact(b.len())) {
            for ((d, &x), &z) in row_y.iter_mut().zip(row_a).zip(b) {
                *d = f(x, z);
            }
        }
        return;
    }
    let ia = broadcast_index(sa, out_shape);
    let ib = broadcast_index(sb, out_shape);
    for ((d, &i), &j) in y.iter_mut().zip(&ia).zip(&ib) {
        *d = f(a[i], b[j]);
    }
}

/// The taps of one output row or column of a pooling window: the input indices inside the
/// input, and the window's extent clipped to the padded input (the `count_include_pad`
/// divisor's factor: the ceil_mode extension does not count, like TVM's pool).
pub(crate) struct PoolAxis {
    pub(crate) taps: Vec<usize>,
    padded: i64,
}

/// [`PoolAxis`] of every output index along axis `a` of `p`'s window (0: rows, 1: columns), for
/// an input of `size` along it giving `out` outputs.
pub(crate) fn pool_axis(p: &Pool2d, a: usize, size: usize, out: usize) -> Vec<PoolAxis> {
    let (k, s, d) = (
        p.pool_size[a] as i64,
        p.strides[a] as i64,
        p.dilation[a] as i64,
    );
    // Padding is [top, left, bottom, right]: before and after along axis `a`.
    let (pa, pb) = (p.padding[a] as i64, p.padding[a + 2] as i64);
    (0..out)
        .map(|o| {
            let start = o as i64 * s - pa;
            let end = (start + (k - 1) * d).min(size as i64 + pb - 1);
            let taps = (0..k)
                .map(|t| start + t * d)
                .filter(|&i| i >= 0 && i < size as i64)
                .map(|i| i as usize)
                .collect();
            PoolAxis {
                taps,
                padded: ((end - start) / d + 1).max(0),
            }
        })
        .collect()
}

/// Max or average pooling. The window is separable: NCHW planes combine their window rows
/// first (a vectorised pass along the input row), then each output pixel reduces its columns of
/// that combined row; NHWC combines whole channel rows tap by tap. Pieces are output planes
/// (NCHW) or output rows (NHWC), spread over the session's pool.
fn pool(p: &Pool2d, is_max: bool, x: &[f32], xs: &[i64], ys: &[i64], y: &mut [f32]) -> Result<()> {
    let (n, c, h, w) = p.layout.nchw(xs);
    let (_, _, oh, ow) = p.layout.nchw(ys);
    let (n, c, h, w, oh, ow) = (
        n as usize,
        c as usize,
        h as usize,
        w as usize,
        oh as usize,
        ow as usize,
    );
    if x.len() != n * c * h * w || y.len() != n * c * oh * ow {
        return Err(backend_err("pool: a buffer does not match its shape"));
    }
    if y.is_empty() {
        return Ok(());
    }
    let (rows, cols) = (pool_axis(p, 0, h, oh), pool_axis(p, 1, w, ow));
    let init = if is_max { f32::MIN } else { 0.0 };
    #[inline(always)]
    fn combine(is_max: bool, a: f32, v: f32) -> f32 {
        if is_max {
            if v > a {
                v
            } else {
                a
            }
        } else {
            a + v
        }
    }
    let divisor = |ry: &PoolAxis, cx: &PoolAxis| -> f32 {
        (if p.count_include_pad {
            (ry.padded * cx.padded).max(1)
        } else {
            ((ry.taps.len() * cx.taps.len()) as i64).max(1)
        }) as f32
    };
    match p.layout {
        Layout::Nchw => {
            let pieces: Vec<(usize, &mut [f32])> = y.chunks_mut(oh * ow).enumerate().collect();
            for_each_piece(pieces, |(pi, out)| {
                let plane = &x[pi * h * w..(pi + 1) * h * w];
                f32::with_scratch(w, |acc| {
                    for (ry, orow) in rows.iter().zip(out.chunks_exact_mut(ow)) {
                        isa::vectorized(
                            #[inline(always)]
                            || {
                                acc.fill(init);
                                for &iy in &ry.taps {
                                    for (a, &v) in acc.iter_mut().zip(&plane[iy * w..(iy + 1) * w])
                                    {
                                        *a = combine(is_max, *a, v);
                                    }
                                }
                            },
                        );
                        for (o, cx) in orow.iter_mut().zip(&cols) {
                            let v = cx
                                .taps
                                .iter()
                                .fold(init, |a, &ix| combine(is_max, a, acc[ix]));
                            *o = if is_max { v } else { v / divisor(ry, cx) };
                        }
                    }
                });
                Ok(())
            })
        }
        Layout::Nhwc => {
            let pieces: Vec<(usize, &mut [f32])> = y.chunks_mut(ow * c).enumerate().collect();
            for_each_piece(pieces, |(row, orow)| {
                let (b, oy) = (row / oh, row % oh);
                let ry = &rows[oy];
                // Each output pixel's window as offsets of its taps' first channel.
                let mut taps = Vec::with_capacity(p.pool_size[0] * p.pool_size[1]);
                isa::vectorized(
                    #[inline(always)]
                    || {
                        for (out, cx) in orow.chunks_exact_mut(c.max(1)).zip(&cols) {
                            taps.clear();
                            for &iy in &ry.taps {
                                taps.extend(cx.taps.iter().map(|&ix| ((b * h + iy) * w + ix) * c));
                            }
                            if is_max {
                                pool_pixel::<true>(x, &taps, out, 1.0);
                            } else {
                                pool_pixel::<false>(x, &taps, out, divisor(ry, cx));
                            }
                        }
                    },
                );
                Ok(())
            })
        }
    }
}

/// One NHWC output pixel of a pooling window: the channels combined over the taps at offsets
/// `taps` of `x` (max, or sum divided by `div`), 16 channels (one AVX-512 register) at a time
/// so that the running values stay in registers across the taps: combining into `out` tap by
/// tap loaded and stored it for every tap, and 64-channel chunks were kept on the stack (both
/// slower).
#[inline(always)]
fn pool_pixel<const MAX: bool>(x: &[f32], taps: &[usize], out: &mut [f32], div: f32) {
    #[inline(always)]
    fn chunk<const MAX: bool, const W: usize>(
        x: &[f32],
        taps: &[usize],
        c0: usize,
        out: &mut [f32],
        div: f32,
    ) {
        let mut acc = [if MAX { f32::MIN } else { 0.0 }; W];
        for &t in taps {
            let src = &x[t + c0..t + c0 + W];
            for (a, &v) in acc.iter_mut().zip(src) {
                // `v > a ? v : a` keeps the first of equal values and skips a NaN `v`, as
                // the scalar loop this replaced did.
                *a = if MAX {
                    if v > *a {
                        v
                    } else {
                        *a
                    }
                } else {
                    *a + v
                };
            }
        }
        for (o, a) in out[c0..c0 + W].iter_mut().zip(acc) {
            *o = if MAX { a } else { a / div };
        }
    }
    let c = out.len();
    let mut c0 = 0;
    while c0 + 16 <= c {
        chunk::<MAX, 16>(x, taps, c0, out, div);
        c0 += 16;
    }
    while c0 + 8 <= c {
        chunk::<MAX, 8>(x, taps, c0, out, div);
        c0 += 8;
    }
    while c0 < c {
        chunk::<MAX, 1>(x, taps, c0, out, div);
        c0 += 1;
    }
}

fn matmul(a: &[f32], sa: &[i64], b: &[f32], sb: &[i64], ys: &[i64], y: &mut [f32]) -> Result<()> {
    let (ra, rb, ry) = (sa.len(), sb.len(), ys.len());
    let (m, k, n) = (
        sa[ra - 2] as usize,
        sa[ra - 1] as usize,
        sb[rb - 1] as usize,
    );
    let batch_shape = &ys[..ry - 2];
    let ia = broadcast_index(&sa[..ra - 2], batch_shape);
    let ib = broadcast_index(&sb[..rb - 2], batch_shape);
    for (bi, (&i, &j)) in ia.iter().zip(&ib).enumerate() {
        let (ao, bo, yo) = (i * m * k, j * k * n, bi * m * n);
        par_gemm(
            m,
            k,
            n,
            &a[ao..ao + m * k],
            k,
            &b[bo..bo + k * n],
            n,
            &mut y[yo..yo + m * n],
            n,
        )?;
    }
    Ok(())
}

/// `y = softmax(x)` over one contiguous row: the maximum and the sum in 16 lanes (summed in a
/// different order than one by one: within a few ulps), `exp` by the float32 approximation of
/// ops.rs (relative error below 2e-7), compiled for the chosen level.
fn softmax_row(x: &[f32], y: &mut [f32]) {
    const L: usize = 16;
    isa::vectorized(
        #[inline(always)]
        || {
            let mut lanes = [f32::NEG_INFINITY; L];
            let chunks = x.chunks_exact(L);
            let tail = chunks.remainder();
            for c in chunks {
                for (m, &v) in lanes.iter_mut().zip(c) {
                    *m = if v > *m { v } else { *m };
                }
            }
            let mut mx = tail
                .iter()
                .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
            for &m in &lanes {
                mx = if m > mx { m } else { mx };
            }
            for (d, &v) in y.iter_mut().zip(x) {
                *d = super::ops::exp(v - mx);
            }
            let mut sums = [0.0f32; L];
            let chunks = y.chunks_exact(L);
            let tail: f32 = chunks.remainder().iter().sum();
            for c in chunks {
                for (s, &v) in sums.iter_mut().zip(c) {
                    *s += v;
                }
            }
            let inv = 1.0 / (sums.iter().sum::<f32>() + tail);
            for d in y.iter_mut() {
                *d *= inv;
            }
        },
    )
}

/// Any op on float32 operands (dequantized or converted by the caller).
pub(crate) fn generic(
    op: &Op,
    xs: &[std::borrow::Cow<'_, [f32]>],
    shapes: &[&[i64]],
    ys: &[i64],
    y: &mut [f32],
) -> Result<()> {
    let n_out: usize = ys.iter().map(|&d| d as usize).product();
    if y.len() != n_out {
        return Err(backend_err(
            "output buffer size does not match its description",
        ));
    }
    for (x, s) in xs.iter().zip(shapes) {
        if x.len() != s.iter().map(|&d| d as usize).product::<usize>() {
            return Err(backend_err(
                "input buffer size does not match its description",
            ));
        }
    }
    match op {
        Op::Conv2d(c) => {
            let plan = ConvPlan::new(c, shapes[0], shapes[1], ys);
            let packed = plan.pack(&xs[1]);
            plan.run(&xs[0], &packed, y, None)?;
            bias_act(
                y,
                xs.get(2).map(|b| &b[..]),
                c.activation,
                plan.o,
                c.layout,
                plan.oh * plan.ow,
            );
        }
        Op::Dense { activation } => {
            let (nn, kk) = (shapes[1][0] as usize, shapes[1][1] as usize);
            let m = xs[0].len() / kk.max(1);
            let mut wt = vec![0f32; nn * kk];
            for r in 0..nn {
                for c in 0..kk {
                    wt[c * nn + r] = xs[1][r * kk + c];
                }
            }
            par_gemm(m, kk, nn, &xs[0], kk, &wt, nn, y, nn)?;
            bias_act(
                y,
                xs.get(2).map(|b| &b[..]),
                *activation,
                nn,
                Layout::Nhwc,
                1,
            );
        }
        Op::MaxPool2d(p) => pool(p, true, &xs[0], shapes[0], ys, y)?,
        Op::AvgPool2d(p) => pool(p, false, &xs[0], shapes[0], ys, y)?,
        Op::GlobalMaxPool2d(l) | Op::GlobalAvgPool2d(l) => {
            let is_max = matches!(op, Op::GlobalMaxPool2d(_));
            let (n, c, h, w) = l.nchw(shapes[0]);
            let (n, c, hw) = (n as usize, c as usize, (h * w) as usize);
            let x = &xs[0];
            let init = if is_max { f32::MIN } else { 0.0 };
            // Every channel accumulates over the pixels in pixel order (in both layouts), so
            // the result does not depend on the layout; NHWC reads whole rows of C at a time.
            super::isa::vectorized(
                #[inline(always)]
                || match l {
                    Layout::Nhwc => {
                        for (b, yb) in y.chunks_exact_mut(c.max(1)).enumerate().take(n) {
                            yb.fill(init);
                            for row in x[b * hw * c..(b + 1) * hw * c].chunks_exact(c.max(1)) {
                                for (a, &v) in yb.iter_mut().zip(row) {
                                    *a = if is_max { a.max(v) } else { *a + v };
                                }
                            }
                            if !is_max {
                                for a in yb.iter_mut() {
                                    *a /= hw.max(1) as f32;
                                }
                            }
                        }
                    }
                    Layout::Nchw => {
                        for (d, plane) in y.iter_mut().zip(x.chunks_exact(hw.max(1))).take(n * c) {
                            let acc =
                                plane
                                    .iter()
                                    .fold(init, |a, &v| if is_max { a.max(v) } else { a + v });
                            *d = if is_max { acc } else { acc / hw.max(1) as f32 };
                        }
                    }
                },
            );
        }
        Op::Matmul => matmul(&xs[0], shapes[0], &xs[1], shapes[1], ys, y)?,
        // Binary ops and their fused activations: one pass, split over the pool (ops.rs).
        Op::Add { .. } | Op::Multiply { .. } => super::ops::generic(op, xs, shapes, ys, y)?,
        Op::Relu | Op::Relu6 | Op::Clip { .. } => {
            let (lo, hi) = match op {
                Op::Relu => (0.0, f32::INFINITY),
                Op::Relu6 => (0.0, 6.0),
                Op::Clip { min, max } => (*min, *max),
                _ => (f32::NEG_INFINITY, f32::INFINITY),
            };
            for (d, &v) in y.iter_mut().zip(xs[0].iter()) {
                *d = v.max(lo).min(hi);
            }
        }
        Op::Softmax { axis } => {
            let s = shapes[0];
            let len = s[*axis] as usize;
            let inner: usize = s[axis + 1..].iter().map(|&d| d as usize).product();
            let outer: usize = s[..*axis].iter().map(|&d| d as usize).product();
            let x = &xs[0];
            if inner == 1 && len > 0 {
                // Along the last axis (attention scores): contiguous rows, split over the pool
                // and vectorised (libm's expf one element at a time was most of a transformer
                // layer's softmax).
                let pieces: Vec<(usize, &mut [f32])> = y.chunks_mut(len).enumerate().collect();
                return for_each_piece(pieces, |(r, row)| {
                    softmax_row(&x[r * len..(r + 1) * len], row);
                    Ok(())
                });
            }
            for o in 0..outer {
                for i in 0..inner {
                    let at = |k: usize| (o * len + k) * inner + i;
                    let mx = (0..len).map(|k| x[at(k)]).fold(f32::NEG_INFINITY, f32::max);
                    let mut sum = 0.0f32;
                    for k in 0..len {
                        let e = (x[at(k)] - mx).exp();
                        y[at(k)] = e;
                        sum += e;
                    }
                    for k in 0..len {
                        y[at(k)] /= sum;
                    }
                }
            }
        }
        Op::Reshape => y.copy_from_slice(&xs[0]),
        Op::Concatenate { axis } => {
            let outer: usize = ys[..*axis].iter().map(|&d| d as usize).product();
            let inner: usize = ys[axis + 1..].iter().map(|&d| d as usize).product();
            let total = ys[*axis] as usize * inner;
            let mut off = 0;
            for (x, s) in xs.iter().zip(shapes) {
                let chunk = s[*axis] as usize * inner;
                for o in 0..outer {
                    y[o * total + off..o * total + off + chunk]
                        .copy_from_slice(&x[o * chunk..(o + 1) * chunk]);
                }
                off += chunk;
            }
        }
        // The ops of format version 2.
        _ => super::ops::generic(op, xs, shapes, ys, y)?,
    }
    let _ = broadcast_shapes;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::threadpool::ThreadPool;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect()
    }

    /// A direct convolution over the plan's layout: the reference for every kernel split.
    fn naive(p: &ConvPlan, x: &[f32], w: &[f32]) -> Vec<f32> {
        let (cg, og) = (p.c / p.groups, p.o / p.groups);
        let mut y = vec![0f32; p.n * p.o * p.oh * p.ow];
        for b in 0..p.n {
            for oc in 0..p.o {
                let g = oc / og;
                for oy in 0..p.oh {
                    for ox in 0..p.ow {
                        let mut acc = 0f64;
                        for ci in 0..cg {
                            for ky in 0..p.kh {
                                for kx in 0..p.kw {
                                    let iy = ConvPlan::src(
                                        oy,
                                        ky,
                                        p.strides[0],
                                        p.dilation[0],
                                        p.padding[0],
                                        p.h,
                                    );
                                    let ix = ConvPlan::src(
                                        ox,
                                        kx,
                                        p.strides[1],
                                        p.dilation[1],
                                        p.padding[1],
                                        p.w,
                                    );
                                    let (Some(iy), Some(ix)) = (iy, ix) else {
                                        continue;
                                    };
                                    let c = g * cg + ci;
                                    let (xv, wv) = match p.layout {
                                        Layout::Nchw => (
                                            x[((b * p.c + c) * p.h + iy) * p.w + ix],
                                            w[((oc * cg + ci) * p.kh + ky) * p.kw + kx],
                                        ),
                                        Layout::Nhwc => (
                                            x[((b * p.h + iy) * p.w + ix) * p.c + c],
                                            w[((oc * p.kh + ky) * p.kw + kx) * cg + ci],
                                        ),
                                    };
                                    acc += f64::from(xv) * f64::from(wv);
                                }
                            }
                        }
                        let yi = match p.layout {
                            Layout::Nchw => ((b * p.o + oc) * p.oh + oy) * p.ow + ox,
                            Layout::Nhwc => ((b * p.oh + oy) * p.ow + ox) * p.o + oc,
                        };
                        y[yi] = acc as f32;
                    }
                }
            }
        }
        y
    }

    /// The plan of a convolution with square kernel, strides, padding and dilation:
    /// `[n, c, h, w, o, k, stride, pad, groups, dilation]`.
    fn square_plan(layout: Layout, g: [usize; 10], isa: Isa) -> ConvPlan {
        let [n, c, h, w, o, k, s, pad, groups, d] = g;
        ConvPlan {
            layout,
            n,
            c,
            h,
            w,
            o,
            kh: k,
            kw: k,
            oh: (h + 2 * pad - d * (k - 1) - 1) / s + 1,
            ow: (w + 2 * pad - d * (k - 1) - 1) / s + 1,
            groups,
            strides: [s, s],
            padding: [pad; 4],
            dilation: [d, d],
            isa,
        }
    }

    /// Quantized NHWC convolutions on the 8-bit GEMM (`run_q`), at every level this CPU has,
    /// give exactly the sums the f64 path gives: padding taps (filled with the input's zero
    /// point) add nothing, groups write their own channels, on 1 and 2 threads, into a
    /// poisoned accumulator; depthwise plans are refused.
    #[test]
    fn quantized_convolutions_on_the_8bit_gemm_match_the_f64_path() {
        let mut state = 3u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        };
        for g in [
            [1, 3, 7, 6, 8, 3, 1, 1, 1, 1],
            [2, 8, 9, 9, 16, 3, 2, 1, 2, 1],
            [1, 20, 5, 5, 17, 1, 1, 0, 1, 1],
            // Pointwise with channels a multiple of 16: the stored rows are the operand
            // where they are in the kernel's form (uint8 for VNNI, int8 for the others).
            [2, 32, 6, 7, 24, 1, 1, 0, 1, 1],
            [1, 16, 4, 4, 5, 1, 1, 0, 1, 1],
            [1, 6, 8, 8, 6, 5, 1, 2, 3, 2],
            [1, 4, 6, 6, 4, 3, 1, 1, 4, 1],
        ] {
            let plan = square_plan(Layout::Nhwc, g, isa::current());
            // Weight zero points of their own, or symmetric weights (0 as `i8`: no row sums).
            for (unsigned, sym) in [(true, false), (false, false), (true, true), (false, true)] {
                let x: Vec<u8> = (0..plan.n * plan.c * plan.h * plan.w)
                    .map(|_| next())
                    .collect();
                let w: Vec<u8> = (0..plan.o * plan.kdim()).map(|_| next()).collect();
                let (zx, zw) = if unsigned { (250, 3) } else { (-100, 90) };
                let zw_of = |o: usize| match (sym, unsigned) {
                    (true, true) => 128,
                    (true, false) => 0,
                    _ => zw - (o % 3) as i32,
                };
                let real = |b: u8| if unsigned { b as f64 } else { b as i8 as f64 };
                let xf: Vec<f64> = x.iter().map(|&b| real(b) - zx as f64).collect();
                let wf: Vec<f64> = w
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| real(b) - zw_of(i / plan.kdim()) as f64)
                    .collect();
                let mut want = vec![0f64; plan.n * plan.o * plan.oh * plan.ow];
                plan.run(&xf, &plan.pack(&wf), &mut want, None)
                    .expect("f64");
                let xi: Vec<i8> = x.iter().map(|&b| qgemm::to_i8(b, unsigned)).collect();
                for level in qgemm::levels() {
                    let q = plan.qpack(level, &w, unsigned, zw_of);
                    if plan.depthwise() {
                        assert!(q.is_none());
                        continue;
                    }
                    let q = q.expect("packs");
                    for threads in [1, 2] {
                        let mut acc = vec![i32::MIN; want.len()];
                        ThreadPool::new(threads)
                            .install(|| plan.run_q(&xi, qgemm::zero_i8(zx, unsigned), &q, &mut acc))
                            .expect("runs");
                        for (i, (&a, &r)) in acc.iter().zip(&want).enumerate() {
                            assert_eq!(
                                a as f64, r,
                                "{level:?} {g:?} u{unsigned} s{sym} {threads}t: [{i}]"
                            );
                        }
                        // From the stored bytes, as the backend calls it.
                        let mut acc = vec![i32::MIN; want.len()];
                        let flip = if unsigned { 0x80 } else { 0 };
                        let out = qgemm::Out::Acc {
                            c: &mut acc,
                            ld: plan.o,
                        };
                        ThreadPool::new(threads)
                            .install(|| {
                                let zx = qgemm::zero_i8(zx, unsigned);
                                plan.run_q_into(&x, flip, zx, &q, out)
                            })
                            .expect("runs");
                        for (i, (&a, &r)) in acc.iter().zip(&want).enumerate() {
                            assert_eq!(
                                a as f64, r,
                                "{level:?} {g:?} u{unsigned} s{sym} {threads}t stored: [{i}]"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A plan with batch 0 (the parser refuses one; this guards the kernels themselves) runs to
    /// an empty output on every path and ISA level, on 1 to 3 threads, f32, packed and 8-bit:
    /// splitting the pixels once divided by the batch (issue 27).
    #[test]
    fn batch_0_plans_run_empty_on_every_isa_and_thread_count() {
        // (c, h, w, o, k, stride, pad, groups, dilation): GEMM, pointwise, grouped, depthwise.
        let cases = [
            [3, 5, 5, 4, 3, 1, 1, 1, 1],
            [8, 4, 4, 16, 1, 1, 0, 1, 1],
            [4, 6, 6, 8, 3, 2, 1, 2, 1],
            [8, 6, 6, 8, 3, 1, 1, 8, 1],
        ];
        for &isa in isa::supported() {
            for [c, h, wd, o, k, s, pad, groups, d] in cases {
                for layout in [Layout::Nchw, Layout::Nhwc] {
                    let plan = square_plan(layout, [0, c, h, wd, o, k, s, pad, groups, d], isa);
                    let w = data(o * (c / groups) * k * k, 2);
                    let packed = plan.pack(&w);
                    let what = format!("{} {layout:?} {c}->{o} k{k} g{groups}", isa.name());
                    for threads in [1, 2, 3] {
                        let pool = ThreadPool::new(threads);
                        let mut y: Vec<f32> = Vec::new();
                        pool.install(|| plan.run(&[], &packed, &mut y, None))
                            .unwrap_or_else(|e| panic!("{what}, {threads} threads: {e}"));
                        if let Some(gemm) = plan.pack_gemm(&packed) {
                            let epi = Epilogue {
                                bias: None,
                                lo: f32::MIN,
                                hi: f32::MAX,
                            };
                            pool.install(|| plan.run_packed(&[], &gemm, &mut y, epi, None))
                                .unwrap_or_else(|e| {
                                    panic!("packed {what}, {threads} threads: {e}")
                                });
                        }
                        let wq = vec![1u8; w.len()];
                        for level in qgemm::levels() {
                            let Some(q) = plan.qpack(level, &wq, true, |_| 0) else {
                                continue;
                            };
                            let mut acc: Vec<i32> = Vec::new();
                            pool.install(|| plan.run_q(&[], 0, &q, &mut acc))
                                .unwrap_or_else(|e| {
                                    panic!("{level:?} {what}, {threads} threads: {e}")
                                });
                        }
                    }
                }
            }
        }
    }

    /// Every conv path (GEMM, direct, pointwise, grouped, depthwise 3x3/5x5; strides, dilation,
    /// padding;
    /// both layouts) with every ISA level this CPU has, on 1, 2 and 3 threads, against the
    /// direct f64 reference: neither the kernels nor splitting the work changes the result.
    #[test]
    fn conv_paths_match_the_direct_reference_on_every_isa_and_thread_count() {
        // (n, c, h, w, o, k, stride, pad, groups, dilation)
        let cases = [
            (2, 3, 9, 11, 8, 3, 1, 1, 1, 1),
            (1, 3, 16, 16, 8, 3, 1, 1, 1, 1),
            (1, 8, 14, 14, 16, 1, 1, 0, 1, 1),
            (1, 13, 5, 7, 19, 1, 1, 0, 1, 1),
            (2, 8, 7, 7, 8, 3, 2, 1, 8, 1),
            (1, 4, 10, 6, 8, 3, 1, 2, 4, 1),
            (1, 6, 12, 12, 12, 3, 2, 1, 2, 1),
            (1, 16, 20, 20, 24, 3, 1, 1, 1, 1),
            (1, 5, 11, 13, 7, 3, 1, 2, 1, 2),
            (2, 40, 9, 9, 40, 3, 1, 1, 40, 1),
            (1, 64, 8, 8, 64, 3, 2, 1, 64, 1),
            (1, 24, 11, 9, 24, 5, 1, 2, 24, 1),
            (1, 17, 12, 12, 17, 5, 2, 2, 17, 1),
            (1, 8, 10, 10, 16, 3, 1, 2, 8, 2),
            (1, 300, 3, 3, 10, 3, 1, 1, 1, 1),
            (1, 6, 9, 9, 4, 3, 2, 1, 1, 1),
            (1, 7, 8, 10, 16, 3, 1, 1, 1, 2),
            (2, 8, 9, 9, 16, 3, 1, 1, 2, 1),
            (1, 5, 6, 6, 8, 1, 2, 0, 1, 1),
            (1, 6, 13, 11, 6, 3, 2, 2, 6, 2),
            (1, 4, 15, 15, 4, 5, 2, 2, 4, 1),
            (1, 3, 2, 2, 3, 3, 2, 1, 3, 1),
            (1, 8, 9, 9, 40, 3, 1, 1, 2, 1),
            (1, 70, 6, 5, 130, 1, 1, 0, 1, 1),
            // Depthwise outputs 16 or more wide (NCHW: the per-row register path; 37 = 32 + 5,
            // 35 = 32 + 3, 40 = 32 + 8 columns).
            (1, 3, 20, 37, 3, 3, 1, 1, 3, 1),
            (1, 2, 16, 70, 2, 3, 2, 2, 2, 2),
            (1, 2, 10, 40, 4, 3, 1, 1, 2, 1),
            // NHWC depthwise 3x3 at stride 1 over three register tiles of pixels and two of
            // channels (dw.rs: NEON's kernel-row loop), and with 4 channels left over.
            (1, 16, 12, 14, 16, 3, 1, 1, 16, 1),
            (1, 20, 7, 10, 20, 3, 1, 1, 20, 1),
            // Grouped 1x1 convolutions (ShuffleNet v1's, groups 3 and 8): NHWC reads each
            // group's channels in place, rows `c` apart.
            (2, 12, 7, 9, 24, 1, 1, 0, 3, 1),
            (1, 24, 5, 6, 16, 1, 1, 0, 8, 1),
            (1, 60, 9, 9, 33, 1, 1, 0, 3, 1),
            // NHWC convolutions whose packed GEMM reads the input in place (`taps`): kernel
            // rows of 72 floats over two images; 5x5 at stride 2 with 3 pixels of padding
            // (rows cut by the padding copied, rows wholly in it read as zeros) and 70 output
            // channels (a 64- and a 16-wide panel: stretches cross the 512-row blocks of
            // `k`); padding wider than the kernel; one pixel of 64 channels per tap, with
            // dilation and with two groups.
            (2, 24, 9, 11, 20, 3, 1, 1, 1, 1),
            (1, 22, 13, 13, 70, 5, 2, 3, 1, 1),
            (1, 32, 3, 3, 8, 3, 1, 3, 1, 1),
            (1, 64, 9, 9, 32, 3, 1, 2, 1, 2),
            (1, 128, 7, 7, 64, 3, 2, 1, 2, 1),
            // Winograd F(2x2, 3x3) (winograd.rs): odd output sides (tiles cut by the edge),
            // no padding over two images with 40 channels (two vectors of lanes and a half),
            // padding 2 with 70 output channels (a 64- and a 16-wide panel, 6 lanes left),
            // padding wider than the kernel, and 33 tile columns by 8 rows of 32 channels in
            // and out: eight bands of one row of tiles (the tests' bands are 64 Ki floats).
            (1, 32, 5, 7, 32, 3, 1, 1, 1, 1),
            (2, 40, 6, 6, 48, 3, 1, 0, 1, 1),
            (1, 33, 8, 9, 70, 3, 1, 2, 1, 1),
            (1, 32, 3, 4, 32, 3, 1, 3, 1, 1),
            (1, 32, 16, 66, 32, 3, 1, 1, 1, 1),
        ];
        let (mut packed_runs, mut tap_runs, mut winograd_runs) = (0, 0, 0);
        for &isa in isa::supported() {
            for (n, c, h, wd, o, k, s, pad, groups, d) in cases {
                for layout in [Layout::Nchw, Layout::Nhwc] {
                    let plan = square_plan(layout, [n, c, h, wd, o, k, s, pad, groups, d], isa);
                    let x = data(n * c * h * wd, 1);
                    let w = data(o * (c / groups) * k * k, 2);
                    let want = naive(&plan, &x, &w);
                    let packed = plan.pack(&w);
                    let tol = 2e-6 * ((c / groups * k * k) as f32).sqrt().max(4.0);
                    for threads in [1, 2, 3] {
                        let pool = ThreadPool::new(threads);
                        // Poisoned output, reused across runs: every element must be written.
                        let mut y = vec![f32::NAN; want.len()];
                        for run in 0..2 {
                            pool.install(|| plan.run(&x, &packed, &mut y, None))
                                .expect("conv runs");
                            for (i, (g, r)) in y.iter().zip(&want).enumerate() {
                                assert!(
                                    (g - r).abs() <= tol,
                                    "{} {layout:?} {n}x{c}x{h}x{wd} -> {o} k{k} s{s} p{pad} g{groups} d{d}, {threads} threads, run {run}: y[{i}] = {g}, want {r}",
                                    isa.name()
                                );
                            }
                            y.fill(f32::NAN);
                        }
                        // The packed GEMM, where this plan takes it, with a bias and a clamp
                        // applied as it stores.
                        let Some(gemm) = plan.pack_gemm(&packed) else {
                            continue;
                        };
                        packed_runs += 1;
                        tap_runs += usize::from(plan.taps().is_some() && !plan.winograd());
                        winograd_runs += usize::from(plan.winograd());
                        let bias = data(o, 3);
                        let epi = Epilogue {
                            bias: Some(&bias),
                            lo: -0.5,
                            hi: 0.75,
                        };
                        for run in 0..2 {
                            pool.install(|| plan.run_packed(&x, &gemm, &mut y, epi, None))
                                .expect("packed conv runs");
                            for (i, (g, r)) in y.iter().zip(&want).enumerate() {
                                let r = (r + bias[i % o]).clamp(-0.5, 0.75);
                                assert!(
                                    (g - r).abs() <= tol,
                                    "packed {} {n}x{c}x{h}x{wd} -> {o} k{k} s{s} p{pad} g{groups} d{d}, {threads} threads, run {run}: y[{i}] = {g}, want {r}",
                                    isa.name()
                                );
                            }
                            y.fill(f32::NAN);
                        }
                    }
                }
            }
        }
        // Every level with packed kernels ran them on the GEMM-shaped cases.
        let levels = isa::supported()
            .iter()
            .filter(|&&i| packed::available(i))
            .count();
        assert!(
            levels == 0 || packed_runs >= levels * 3 * 6,
            "{packed_runs} packed runs"
        );
        // ... and read the input in place on the six cases with long enough taps (the five
        // above and the 300-channel one).
        assert!(
            levels == 0 || tap_runs >= levels * 3 * 6,
            "{tap_runs} runs reading taps in place"
        );
        // ... and ran the five Winograd cases as Winograd.
        assert!(
            levels == 0 || winograd_runs >= levels * 3 * 5,
            "{winograd_runs} Winograd runs"
        );
    }

    /// Winograd (winograd.rs) with uneven padding (one row above, none to the left, two
    /// columns to the right: TensorFlow's "same" padding for even sides is one side only),
    /// written into a slice of a wider output (a concatenation's channels `off..off + o`,
    /// as `run_packed_into` writes it) at every level and on 1, 2 and 3 threads, against the
    /// direct f64 reference: the other channels keep their poison, the slice holds the
    /// convolution plus the bias, clamped; a post pass sees whole output rows.
    #[test]
    fn winograd_with_uneven_padding_into_a_concatenation_matches_the_reference() {
        let (n, c, h, w, o) = (2, 36, 7, 10, 34);
        let (ldy, off) = (o + 7, 5);
        let x = data(n * h * w * c, 11);
        let wt = data(o * 9 * c, 12);
        let bias = data(o, 13);
        let mut checked = 0;
        for &isa in isa::supported() {
            let plan = ConvPlan {
                layout: Layout::Nhwc,
                n,
                c,
                h,
                w,
                o,
                kh: 3,
                kw: 3,
                // rows: 1 above, 0 below; columns: 0 left, 2 right.
                oh: h + 1 - 2,
                ow: w + 2 - 2,
                groups: 1,
                strides: [1, 1],
                padding: [1, 0, 0, 2],
                dilation: [1, 1],
                isa,
            };
            let Some(u) = plan.pack_gemm(&plan.pack(&wt)) else {
                continue;
            };
            assert!(plan.winograd() && u.len() == 16, "{}", isa.name());
            let want = naive(&plan, &x, &wt);
            let tol = 2e-6 * ((c * 9) as f32).sqrt();
            let epi = Epilogue {
                bias: Some(&bias),
                lo: -0.6,
                hi: 0.6,
            };
            for threads in [1, 2, 3] {
                let pool = ThreadPool::new(threads);
                let mut y = vec![f32::NAN; n * plan.oh * plan.ow * ldy];
                pool.install(|| plan.run_packed_into(&x, &u, &mut y, ldy, off, epi))
                    .expect("winograd into a slice runs");
                for (p, px) in y.chunks_exact(ldy).enumerate() {
                    for (ch, &g) in px.iter().enumerate() {
                        if !(off..off + o).contains(&ch) {
                            assert!(
                                g.is_nan(),
                                "{} channel {ch} of pixel {p} written",
                                isa.name()
                            );
                            continue;
                        }
                        let r = (want[p * o + ch - off] + bias[ch - off]).clamp(-0.6, 0.6);
                        assert!(
                            (g - r).abs() <= tol,
                            "{} {threads} threads: pixel {p} channel {ch} = {g}, want {r}",
                            isa.name()
                        );
                    }
                }
                // Dense output with a post pass: every piece is whole rows of pixels.
                let mut y = vec![f32::NAN; n * plan.oh * plan.ow * o];
                let row = plan.ow * o;
                let post = |piece: &mut [f32]| {
                    assert!(piece.len() % row == 0 && !piece.is_empty());
                    piece.iter_mut().for_each(|v| *v *= 2.0);
                };
                pool.install(|| plan.run_packed(&x, &u, &mut y, epi, Some(&post)))
                    .expect("winograd runs");
                for (i, (&g, r)) in y.iter().zip(&want).enumerate() {
                    let r = 2.0 * (r + bias[i % o]).clamp(-0.6, 0.6);
                    assert!(
                        (g - r).abs() <= 2.0 * tol,
                        "{} y[{i}] = {g}, want {r}",
                        isa.name()
                    );
                }
                checked += 1;
            }
        }
        let levels = isa::supported()
            .iter()
            .filter(|&&i| packed::available(i))
            .count();
        assert_eq!(checked, levels * 3);
    }

    /// Stress: one Winograd plan and one set of transformed weights shared by four threads at
    /// once, each running it on a pool of its own (2 threads) 25 times into a poisoned output
    /// and a band scratch of its own (winograd.rs keeps one per calling thread), with inputs of
    /// two sizes alternating (a convolution with more tiles grows the scratch): every run
    /// equals the direct f64 reference.
    #[test]
    fn winograd_shared_by_four_threads_matches_the_reference_every_run() {
        let isa = isa::current();
        let plans = [(9, 9), (20, 14)].map(|(h, w)| ConvPlan {
            layout: Layout::Nhwc,
            n: 1,
            c: 32,
            h,
            w,
            o: 40,
            kh: 3,
            kw: 3,
            oh: h,
            ow: w,
            groups: 1,
            strides: [1, 1],
            padding: [1; 4],
            dilation: [1, 1],
            isa,
        });
        let wt = data(40 * 9 * 32, 21);
        let Some(u) = plans[0].pack_gemm(&plans[0].pack(&wt)) else {
            assert!(!packed::available(isa));
            return;
        };
        let xs = plans.each_ref().map(|p| data(p.h * p.w * 32, 22));
        let wants: Vec<Vec<f32>> = plans
            .iter()
            .zip(&xs)
            .map(|(p, x)| naive(p, x, &wt))
            .collect();
        let tol = 2e-6 * ((32 * 9) as f32).sqrt();
        std::thread::scope(|scope| {
            for t in 0..4 {
                let (plans, xs, wants, u) = (&plans, &xs, &wants, &u);
                scope.spawn(move || {
                    let pool = ThreadPool::new(2);
                    for run in 0..25 {
                        let k = (run + t) % 2;
                        let mut y = vec![f32::NAN; wants[k].len()];
                        pool.install(|| {
                            plans[k].run_packed(&xs[k], u, &mut y, Epilogue::NONE, None)
                        })
                        .expect("winograd runs");
                        for (i, (g, r)) in y.iter().zip(&wants[k]).enumerate() {
                            assert!(
                                (g - r).abs() <= tol,
                                "thread {t} run {run}: y[{i}] = {g}, want {r}"
                            );
                        }
                    }
                });
            }
        });
    }

    /// `im2col_nchw` for every piece (start pixel, length) of the output equals a naive
    /// gather: pieces may start anywhere in an output row, including right of a tap's last
    /// valid column (AlexNet's 5x5 pad-2 conv on 27x27 split over two threads once read past
    /// the input row there).
    #[test]
    fn nchw_im2col_of_every_piece_matches_a_naive_gather() {
        // (c, h, w, k, stride, pad, dilation, groups)
        for (c, h, wd, k, s, pad, d, groups) in [
            (2, 27, 27, 5, 1, 2, 1, 2),
            (1, 7, 9, 3, 2, 1, 1, 1),
            (1, 6, 5, 3, 1, 2, 2, 1),
            (2, 4, 4, 5, 1, 3, 1, 1),
            (1, 5, 8, 1, 3, 0, 1, 1),
        ] {
            let plan = square_plan(
                Layout::Nchw,
                [1, c, h, wd, groups, k, s, pad, groups, d],
                isa::current(),
            );
            let (oh, ow) = (plan.oh, plan.ow);
            let x = data(c * h * wd, 5);
            let cg = c / groups;
            let pix = oh * ow;
            for g in 0..groups {
                for p0 in 0..pix {
                    // Pieces of one to a few pixels, about a row, and (from the first rows)
                    // everything to the end.
                    let mut lens = vec![1, 2, 3, ow.saturating_sub(1), ow, ow + 2];
                    if p0 < 2 * ow {
                        lens.push(pix - p0);
                    }
                    lens.retain(|&l| l >= 1 && l <= pix - p0);
                    lens.sort_unstable();
                    lens.dedup();
                    for cols in lens {
                        let mut col = vec![f32::NAN; cg * k * k * cols];
                        plan.im2col_nchw(&x, g, p0, cols, &mut col);
                        for ci in 0..cg {
                            for ky in 0..k {
                                for kx in 0..k {
                                    let row = (ci * k + ky) * k + kx;
                                    for j in 0..cols {
                                        let (oy, ox) = ((p0 + j) / ow, (p0 + j) % ow);
                                        let want = match (
                                            ConvPlan::src(oy, ky, s, d, pad, h),
                                            ConvPlan::src(ox, kx, s, d, pad, wd),
                                        ) {
                                            (Some(iy), Some(ix)) => {
                                                x[((g * cg + ci) * h + iy) * wd + ix]
                                            }
                                            _ => 0.0,
                                        };
                                        assert_eq!(
                                            col[row * cols + j].to_bits(),
                                            want.to_bits(),
                                            "c{c} {h}x{wd} k{k} s{s} p{pad} d{d} g{g}: piece {p0}+{cols}, row {row}, col {j}"
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// `im2col_nhwc` (through `im2col_rows`, which the 8-bit path shares with a pad value)
    /// for pieces starting at every output pixel equals a naive gather, tap by tap: the
    /// ungrouped, undilated plans copy each kernel row's valid taps as one run, cut at both
    /// edges by padding (a 7x7 stride-2 stem on 3 channels, taps wider than the input,
    /// strides that skip the right edge); grouped and dilated ones copy tap by tap.
    #[test]
    fn nhwc_im2col_of_every_piece_matches_a_naive_gather() {
        // (c, h, w, k, stride, pad, dilation, groups)
        for (c, h, wd, k, s, pad, d, groups) in [
            (3, 15, 13, 7, 2, 3, 1, 1),
            (3, 9, 11, 7, 2, 0, 1, 1),
            (4, 6, 5, 3, 1, 1, 1, 1),
            (2, 4, 3, 5, 1, 3, 1, 1),
            (5, 7, 8, 3, 3, 2, 1, 1),
            (6, 7, 7, 3, 1, 2, 2, 1),
            (6, 6, 7, 3, 2, 1, 1, 3),
            (1, 5, 8, 1, 3, 0, 1, 1),
        ] {
            let plan = square_plan(
                Layout::Nhwc,
                [1, c, h, wd, groups, k, s, pad, groups, d],
                isa::current(),
            );
            let (oh, ow, kdim) = (plan.oh, plan.ow, plan.kdim());
            let x = data(c * h * wd, 7);
            let cg = c / groups;
            let pix = oh * ow;
            for g in 0..groups {
                for p0 in 0..pix {
                    let rows = (pix - p0).min(ow + 3);
                    // Rows `kdim + 2` apart: the two floats between rows must stay untouched.
                    let stride = kdim + 2;
                    let mut col = vec![f32::NAN; rows * stride];
                    plan.im2col_rows(&x, g, p0, rows, &mut col, stride, -1.5);
                    for r in 0..rows {
                        let (oy, ox) = ((p0 + r) / ow, (p0 + r) % ow);
                        for ky in 0..k {
                            for kx in 0..k {
                                for ci in 0..cg {
                                    let want = match (
                                        ConvPlan::src(oy, ky, s, d, pad, h),
                                        ConvPlan::src(ox, kx, s, d, pad, wd),
                                    ) {
                                        (Some(iy), Some(ix)) => x[(iy * wd + ix) * c + g * cg + ci],
                                        _ => -1.5,
                                    };
                                    let got = col[r * stride + (ky * k + kx) * cg + ci];
                                    assert_eq!(
                                        got.to_bits(),
                                        want.to_bits(),
                                        "c{c} {h}x{wd} k{k} s{s} p{pad} d{d} g{g}: piece {p0}, row {r}, tap ({ky}, {kx}), channel {ci}"
                                    );
                                }
                            }
                        }
                        assert!(col[r * stride + kdim..(r + 1) * stride]
                            .iter()
                            .all(|v| v.is_nan()));
                    }
                }
            }
        }
    }

    /// Max and average pooling, NHWC and NCHW, against a naive loop over each window: channel
    /// counts below, at and across the NHWC loop's 16- and 64-channel chunks, padding with
    /// and without `count_include_pad`, strides, dilation, a window wider than the input and a
    /// ceil_mode row and column past the padded input; bit for bit (the same taps in the
    /// same order, one division), on 1 and 2 threads, into a NaN-poisoned output.
    #[test]
    fn pools_match_a_naive_window_loop() {
        // (c, h, w, kernel, stride, pads [top, left, bottom, right], dilation, include pad,
        // extra output rows/columns (ceil_mode))
        #[allow(clippy::type_complexity)]
        let cases: [(
            usize,
            usize,
            usize,
            usize,
            usize,
            [usize; 4],
            usize,
            bool,
            usize,
        ); 8] = [
            (96, 11, 11, 3, 2, [0; 4], 1, false, 0),
            (24, 12, 12, 3, 2, [1; 4], 1, true, 0),
            (24, 12, 12, 3, 2, [1; 4], 1, false, 0),
            (1, 5, 6, 2, 2, [0; 4], 1, false, 1),
            (70, 7, 7, 3, 1, [1, 0, 1, 2], 1, true, 0),
            (130, 6, 5, 3, 2, [0; 4], 2, false, 0),
            (17, 3, 3, 5, 1, [2; 4], 1, true, 0),
            (64, 9, 9, 3, 2, [0; 4], 1, false, 1),
        ];
        for threads in [1, 2] {
            ThreadPool::new(threads).install(|| {
                for (c, h, w, k, s, pad, d, include, extra) in cases {
                    let out = |size: usize, pa: usize, pb: usize| {
                        (size + pa + pb - d * (k - 1) - 1) / s + 1 + extra
                    };
                    let (oh, ow) = (out(h, pad[0], pad[2]), out(w, pad[1], pad[3]));
                    // Values on a coarse grid (exact sums in any order), so that windows hold
                    // ties; no -0 (max picks between 0 and -0 by the order of the taps).
                    let x: Vec<f32> = data(2 * c * h * w, 9)
                        .iter()
                        .map(|v| (v * 8.0).round() / 4.0 + 0.0)
                        .collect();
                    for layout in [Layout::Nhwc, Layout::Nchw] {
                        let p = Pool2d {
                            layout,
                            pool_size: [k, k],
                            strides: [s, s],
                            padding: pad,
                            dilation: [d, d],
                            ceil_mode: extra > 0,
                            count_include_pad: include,
                        };
                        let at = |b: usize, ch: usize, y: usize, xx: usize, hh: usize, ww: usize| {
                            match layout {
                                Layout::Nhwc => ((b * hh + y) * ww + xx) * c + ch,
                                Layout::Nchw => ((b * c + ch) * hh + y) * ww + xx,
                            }
                        };
                        let xs = layout.shape(2, c as i64, h as i64, w as i64);
                        let ys = layout.shape(2, c as i64, oh as i64, ow as i64);
                        for is_max in [true, false] {
                            let mut y = vec![f32::NAN; 2 * c * oh * ow];
                            pool(&p, is_max, &x, &xs, &ys, &mut y).expect("pool");
                            // One axis: the input indices of the window inside the input, and
                            // the window's extent inside the padded input.
                            let axis = |o: usize, size: usize, pa: usize, pb: usize| {
                                let start = (o * s) as i64 - pa as i64;
                                let inside: Vec<usize> = (0..k)
                                    .map(|t| start + (t * d) as i64)
                                    .filter(|&i| i >= 0 && i < size as i64)
                                    .map(|i| i as usize)
                                    .collect();
                                let padded = (0..k)
                                    .filter(|&t| start + ((t * d) as i64) < (size + pb) as i64)
                                    .count();
                                (inside, padded)
                            };
                            for b in 0..2 {
                                for ch in 0..c {
                                    for oy in 0..oh {
                                        for ox in 0..ow {
                                            let (ry, py) = axis(oy, h, pad[0], pad[2]);
                                            let (rx, px) = axis(ox, w, pad[1], pad[3]);
                                            let mut v = if is_max { f32::MIN } else { 0.0 };
                                            for &iy in &ry {
                                                for &ix in &rx {
                                                    let e = x[at(b, ch, iy, ix, h, w)];
                                                    v = if is_max {
                                                        if e > v {
                                                            e
                                                        } else {
                                                            v
                                                        }
                                                    } else {
                                                        v + e
                                                    };
                                                }
                                            }
                                            if !is_max {
                                                let n = if include {
                                                    py * px
                                                } else {
                                                    ry.len() * rx.len()
                                                };
                                                v /= n.max(1) as f32;
                                            }
                                            let got = y[at(b, ch, oy, ox, oh, ow)];
                                            assert_eq!(
                                                got.to_bits(),
                                                v.to_bits(),
                                                "{layout:?} max {is_max} c{c} {h}x{w} k{k} s{s} {pad:?} d{d}: ({b}, {ch}, {oy}, {ox}) {got} vs {v}"
                                            );
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            });
        }
    }

    /// `par_gemm` split by rows and by column blocks equals one GEMM (up to rounding: the
    /// `gemm` crate may block pieces of other sizes differently).
    #[test]
    fn par_gemm_splits_rows_and_columns_exactly() {
        for (m, k, n) in [(1, 300, 1000), (2, 64, 700), (64, 64, 64), (5, 1, 3)] {
            let a = data(m * k, 3);
            let b = data(k * n, 4);
            let mut want = vec![0f32; m * n];
            f32::gemm_isa(isa::current(), m, k, n, &a, k, &b, n, &mut want, n).expect("gemm");
            for threads in [2, 3] {
                let pool = ThreadPool::new(threads);
                let mut got = vec![f32::NAN; m * n];
                pool.install(|| par_gemm(m, k, n, &a, k, &b, n, &mut got, n))
                    .expect("par_gemm");
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-5,
                        "{m}x{k}x{n}, {threads} threads: {g} vs {w}"
                    );
                }
            }
            // The packed GEMM's row split, with a ReLU, on every level that has one.
            for &level in isa::supported().iter().filter(|&&i| packed::available(i)) {
                let pb = PackedB::new(level, &b, k, n, n).expect("packs");
                let epi = Epilogue {
                    lo: 0.0,
                    ..Epilogue::NONE
                };
                for threads in [1, 2, 3] {
                    let pool = ThreadPool::new(threads);
                    let mut got = vec![f32::NAN; m * n];
                    pool.install(|| par_packed(m, &a, &pb, &mut got, epi))
                        .expect("par_packed");
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            (g - w.max(0.0)).abs() <= 1e-5,
                            "packed {} {m}x{k}x{n}, {threads} threads: {g} vs {w}",
                            level.name()
                        );
                    }
                }
            }
        }
    }
}
