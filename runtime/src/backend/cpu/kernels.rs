//! The CPU backend's kernels, on dense row-major slices whose sizes the validated description
//! guarantees (each entry point re-checks lengths and reports a mismatch as an error).

use crate::error::Result;
use crate::subgraph::{broadcast_shapes, Activation, Layout, Op, Pool2d};

use super::backend_err;

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
    /// `c[m, n] = a[m, k] * b[k, n]`, row-major with leading dimensions (row strides).
    #[allow(clippy::too_many_arguments)]
    fn gemm(
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

impl Num for f32 {
    fn gemm(
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
        if !gemm_bounds(m, k, n, a.len(), lda, b.len(), ldb, c.len(), ldc)? {
            return Ok(());
        }
        // SAFETY: the bounds check above guarantees every element the strides address lies
        // inside the slices; `c` is exclusively borrowed and cannot alias `a` or `b`.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n,
                1.0,
                a.as_ptr(),
                lda as isize,
                1,
                b.as_ptr(),
                ldb as isize,
                1,
                0.0,
                c.as_mut_ptr(),
                ldc as isize,
                1,
            )
        };
        Ok(())
    }
}

impl Num for f64 {
    fn gemm(
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
        // SAFETY: as for f32.
        unsafe {
            matrixmultiply::dgemm(
                m,
                k,
                n,
                1.0,
                a.as_ptr(),
                lda as isize,
                1,
                b.as_ptr(),
                ldb as isize,
                1,
                0.0,
                c.as_mut_ptr(),
                ldc as isize,
                1,
            )
        };
        Ok(())
    }
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
}

/// Pixels per im2col block: keeps the column buffer in cache.
const BLOCK: usize = 128;

impl ConvPlan {
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
        self.kh == 1
            && self.kw == 1
            && self.strides == [1, 1]
            && self.padding == [0; 4]
            && self.groups == 1
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
    pub fn run<T: Num>(&self, x: &[T], w: &[T], y: &mut [T]) -> Result<()> {
        let (n, c, h, wd, o) = (self.n, self.c, self.h, self.w, self.o);
        if x.len() != n * c * h * wd
            || y.len() != n * o * self.oh * self.ow
            || w.len() != o * self.kdim()
        {
            return Err(backend_err("conv2d: buffer sizes do not match the plan"));
        }
        match (self.layout, self.depthwise()) {
            (Layout::Nhwc, true) => self.dw_nhwc(x, w, y),
            (Layout::Nchw, true) => self.dw_nchw(x, w, y),
            (Layout::Nhwc, false) => self.gemm_nhwc(x, w, y)?,
            (Layout::Nchw, false) => self.gemm_nchw(x, w, y)?,
        }
        Ok(())
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

    fn gemm_nhwc<T: Num>(&self, x: &[T], w: &[T], y: &mut [T]) -> Result<()> {
        let (h, wd, c, o) = (self.h, self.w, self.c, self.o);
        let (cg, og, kdim) = (self.cg(), self.og(), self.kdim());
        let pix = self.oh * self.ow;
        let mut col = if self.pointwise() {
            Vec::new()
        } else {
            vec![T::default(); BLOCK.min(pix) * kdim]
        };
        for b in 0..self.n {
            let xb = &x[b * h * wd * c..(b + 1) * h * wd * c];
            let yb = &mut y[b * pix * o..(b + 1) * pix * o];
            if self.pointwise() {
                T::gemm(pix, c, o, xb, c, w, o, yb, o)?;
                continue;
            }
            for g in 0..self.groups {
                let wg = &w[g * kdim * og..(g + 1) * kdim * og];
                let mut p0 = 0;
                while p0 < pix {
                    let rows = BLOCK.min(pix - p0);
                    for r in 0..rows {
                        let (oy, ox) = ((p0 + r) / self.ow, (p0 + r) % self.ow);
                        let dst = &mut col[r * kdim..(r + 1) * kdim];
                        for ky in 0..self.kh {
                            let iy = Self::src(
                                oy,
                                ky,
                                self.strides[0],
                                self.dilation[0],
                                self.padding[0],
                                h,
                            );
                            for kx in 0..self.kw {
                                let ix = Self::src(
                                    ox,
                                    kx,
                                    self.strides[1],
                                    self.dilation[1],
                                    self.padding[1],
                                    wd,
                                );
                                let d = &mut dst
                                    [(ky * self.kw + kx) * cg..(ky * self.kw + kx + 1) * cg];
                                match (iy, ix) {
                                    (Some(iy), Some(ix)) => {
                                        let s = (iy * wd + ix) * c + g * cg;
                                        d.copy_from_slice(&xb[s..s + cg]);
                                    }
                                    _ => d.fill(T::default()),
                                }
                            }
                        }
                    }
                    let yoff = p0 * o + g * og;
                    T::gemm(
                        rows,
                        kdim,
                        og,
                        &col[..rows * kdim],
                        kdim,
                        wg,
                        og,
                        &mut yb[yoff..],
                        o,
                    )?;
                    p0 += rows;
                }
            }
        }
        Ok(())
    }

    fn gemm_nchw<T: Num>(&self, x: &[T], w: &[T], y: &mut [T]) -> Result<()> {
        let (h, wd, c, o) = (self.h, self.w, self.c, self.o);
        let (cg, og, kdim) = (self.cg(), self.og(), self.kdim());
        let pix = self.oh * self.ow;
        let mut col = if self.pointwise() {
            Vec::new()
        } else {
            vec![T::default(); BLOCK.min(pix) * kdim]
        };
        for b in 0..self.n {
            let xb = &x[b * c * h * wd..(b + 1) * c * h * wd];
            let yb = &mut y[b * o * pix..(b + 1) * o * pix];
            if self.pointwise() {
                T::gemm(o, c, pix, w, c, xb, pix, yb, pix)?;
                continue;
            }
            for g in 0..self.groups {
                let wg = &w[g * og * kdim..(g + 1) * og * kdim];
                let mut p0 = 0;
                while p0 < pix {
                    let cols = BLOCK.min(pix - p0);
                    for ci in 0..cg {
                        let plane = &xb[(g * cg + ci) * h * wd..(g * cg + ci + 1) * h * wd];
                        for ky in 0..self.kh {
                            for kx in 0..self.kw {
                                let row = (ci * self.kh + ky) * self.kw + kx;
                                let dst = &mut col[row * cols..(row + 1) * cols];
                                for (j, d) in dst.iter_mut().enumerate() {
                                    let (oy, ox) = ((p0 + j) / self.ow, (p0 + j) % self.ow);
                                    let iy = Self::src(
                                        oy,
                                        ky,
                                        self.strides[0],
                                        self.dilation[0],
                                        self.padding[0],
                                        h,
                                    );
                                    let ix = Self::src(
                                        ox,
                                        kx,
                                        self.strides[1],
                                        self.dilation[1],
                                        self.padding[1],
                                        wd,
                                    );
                                    *d = match (iy, ix) {
                                        (Some(iy), Some(ix)) => plane[iy * wd + ix],
                                        _ => T::default(),
                                    };
                                }
                            }
                        }
                    }
                    let yoff = g * og * pix + p0;
                    T::gemm(
                        og,
                        kdim,
                        cols,
                        wg,
                        kdim,
                        &col[..kdim * cols],
                        cols,
                        &mut yb[yoff..],
                        pix,
                    )?;
                    p0 += cols;
                }
            }
        }
        Ok(())
    }

    fn dw_nhwc<T: Num>(&self, x: &[T], w: &[T], y: &mut [T]) {
        let (h, wd, c, o) = (self.h, self.w, self.c, self.o);
        let m = o / c;
        for b in 0..self.n {
            for oy in 0..self.oh {
                for ox in 0..self.ow {
                    let yo = ((b * self.oh + oy) * self.ow + ox) * o;
                    let out = &mut y[yo..yo + o];
                    out.fill(T::default());
                    for ky in 0..self.kh {
                        let Some(iy) = Self::src(
                            oy,
                            ky,
                            self.strides[0],
                            self.dilation[0],
                            self.padding[0],
                            h,
                        ) else {
                            continue;
                        };
                        for kx in 0..self.kw {
                            let Some(ix) = Self::src(
                                ox,
                                kx,
                                self.strides[1],
                                self.dilation[1],
                                self.padding[1],
                                wd,
                            ) else {
                                continue;
                            };
                            let xi = ((b * h + iy) * wd + ix) * c;
                            let inp = &x[xi..xi + c];
                            let wt = &w[(ky * self.kw + kx) * o..(ky * self.kw + kx + 1) * o];
                            if m == 1 {
                                for ((d, &a), &k) in out.iter_mut().zip(inp).zip(wt) {
                                    *d += a * k;
                                }
                            } else {
                                for (oc, (d, &k)) in out.iter_mut().zip(wt).enumerate() {
                                    *d += inp[oc / m] * k;
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn dw_nchw<T: Num>(&self, x: &[T], w: &[T], y: &mut [T]) {
        let (h, wd, c, o) = (self.h, self.w, self.c, self.o);
        let m = o / c;
        let (sy, sx) = (self.strides[0], self.strides[1]);
        let (dy, dx) = (self.dilation[0], self.dilation[1]);
        let (pt, pl) = (self.padding[0], self.padding[1]);
        for b in 0..self.n {
            for oc in 0..o {
                let plane = &x[(b * c + oc / m) * h * wd..(b * c + oc / m + 1) * h * wd];
                let yo = (b * o + oc) * self.oh * self.ow;
                let out = &mut y[yo..yo + self.oh * self.ow];
                out.fill(T::default());
                let wk = &w[oc * self.kh * self.kw..(oc + 1) * self.kh * self.kw];
                for oy in 0..self.oh {
                    let row = &mut out[oy * self.ow..(oy + 1) * self.ow];
                    for ky in 0..self.kh {
                        let Some(iy) = Self::src(oy, ky, sy, dy, pt, h) else {
                            continue;
                        };
                        let irow = &plane[iy * wd..(iy + 1) * wd];
                        for kx in 0..self.kw {
                            let k = wk[ky * self.kw + kx];
                            let off = kx * dx;
                            // Valid ox: pl <= ox*sx + off < pl + wd.
                            let lo = if off >= pl {
                                0
                            } else {
                                (pl - off).div_ceil(sx)
                            };
                            let hi = if pl + wd > off {
                                (pl + wd - off).div_ceil(sx).min(self.ow)
                            } else {
                                0
                            };
                            if sx == 1 {
                                if lo < hi {
                                    let start = lo + off - pl;
                                    for (d, &a) in
                                        row[lo..hi].iter_mut().zip(&irow[start..start + (hi - lo)])
                                    {
                                        *d += a * k;
                                    }
                                }
                            } else {
                                for ox in lo..hi {
                                    row[ox] += irow[ox * sx + off - pl] * k;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
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
    let (lo, hi) = act.bounds();
    let clamp = act != Activation::None;
    match (bias, layout) {
        (Some(b), Layout::Nhwc) => {
            for row in y.chunks_exact_mut(channels) {
                for (v, &bb) in row.iter_mut().zip(b) {
                    *v = (*v + bb).max(lo).min(hi);
                }
            }
        }
        (Some(b), Layout::Nchw) => {
            for (i, p) in y.chunks_exact_mut(plane.max(1)).enumerate() {
                let bb = b[i % channels];
                for v in p {
                    *v = (*v + bb).max(lo).min(hi);
                }
            }
        }
        (None, _) if clamp => {
            for v in y.iter_mut() {
                *v = v.max(lo).min(hi);
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

fn binary(
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

fn pool(p: &Pool2d, is_max: bool, x: &[f32], xs: &[i64], ys: &[i64], y: &mut [f32]) {
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
    let at = |b: usize, ch: usize, iy: usize, ix: usize| match p.layout {
        Layout::Nhwc => ((b * h + iy) * w + ix) * c + ch,
        Layout::Nchw => ((b * c + ch) * h + iy) * w + ix,
    };
    let out_at = |b: usize, ch: usize, oy: usize, ox: usize| match p.layout {
        Layout::Nhwc => ((b * oh + oy) * ow + ox) * c + ch,
        Layout::Nchw => ((b * c + ch) * oh + oy) * ow + ox,
    };
    let (kh, kw) = (p.pool_size[0] as i64, p.pool_size[1] as i64);
    let (sy, sx) = (p.strides[0] as i64, p.strides[1] as i64);
    let (dy, dx) = (p.dilation[0] as i64, p.dilation[1] as i64);
    let (pt, pl, pb, pr) = (
        p.padding[0] as i64,
        p.padding[1] as i64,
        p.padding[2] as i64,
        p.padding[3] as i64,
    );
    for b in 0..n {
        for oy in 0..oh {
            let y0 = oy as i64 * sy - pt;
            for ox in 0..ow {
                let x0 = ox as i64 * sx - pl;
                // count_include_pad divides by the window clipped to the padded input (the
                // ceil_mode extension does not count), like TVM's pool.
                let y1 = (y0 + (kh - 1) * dy).min(h as i64 + pb - 1);
                let x1 = (x0 + (kw - 1) * dx).min(w as i64 + pr - 1);
                let padded_count =
                    (((y1 - y0) / dy + 1).max(0) * ((x1 - x0) / dx + 1).max(0)).max(1);
                for ch in 0..c {
                    let mut acc = if is_max { f32::MIN } else { 0.0 };
                    let mut count = 0i64;
                    for ky in 0..kh {
                        let iy = y0 + ky * dy;
                        if iy < 0 || iy >= h as i64 {
                            continue;
                        }
                        for kx in 0..kw {
                            let ix = x0 + kx * dx;
                            if ix < 0 || ix >= w as i64 {
                                continue;
                            }
                            let v = x[at(b, ch, iy as usize, ix as usize)];
                            if is_max {
                                acc = acc.max(v);
                            } else {
                                acc += v;
                            }
                            count += 1;
                        }
                    }
                    let o = out_at(b, ch, oy, ox);
                    y[o] = if is_max {
                        acc
                    } else if p.count_include_pad {
                        acc / padded_count as f32
                    } else {
                        acc / count.max(1) as f32
                    };
                }
            }
        }
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
        f32::gemm(
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
            let (n, ci, h, w) = c.layout.nchw(shapes[0]);
            let (_, o, oh, ow) = c.layout.nchw(ys);
            let ws = shapes[1];
            let (kh, kw) = match c.layout {
                Layout::Nhwc => (ws[1], ws[2]),
                Layout::Nchw => (ws[2], ws[3]),
            };
            let plan = ConvPlan {
                layout: c.layout,
                n: n as usize,
                c: ci as usize,
                h: h as usize,
                w: w as usize,
                o: o as usize,
                kh: kh as usize,
                kw: kw as usize,
                oh: oh as usize,
                ow: ow as usize,
                groups: c.groups,
                strides: c.strides,
                padding: c.padding,
                dilation: c.dilation,
            };
            let packed = plan.pack(&xs[1]);
            plan.run(&xs[0], &packed, y)?;
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
            f32::gemm(m, kk, nn, &xs[0], kk, &wt, nn, y, nn)?;
            bias_act(
                y,
                xs.get(2).map(|b| &b[..]),
                *activation,
                nn,
                Layout::Nhwc,
                1,
            );
        }
        Op::MaxPool2d(p) => pool(p, true, &xs[0], shapes[0], ys, y),
        Op::AvgPool2d(p) => pool(p, false, &xs[0], shapes[0], ys, y),
        Op::GlobalMaxPool2d(l) | Op::GlobalAvgPool2d(l) => {
            let is_max = matches!(op, Op::GlobalMaxPool2d(_));
            let (n, c, h, w) = l.nchw(shapes[0]);
            let (n, c, hw) = (n as usize, c as usize, (h * w) as usize);
            let x = &xs[0];
            for b in 0..n {
                for ch in 0..c {
                    let mut acc = if is_max { f32::MIN } else { 0.0 };
                    for p in 0..hw {
                        let v = match l {
                            Layout::Nhwc => x[(b * hw + p) * c + ch],
                            Layout::Nchw => x[(b * c + ch) * hw + p],
                        };
                        acc = if is_max { acc.max(v) } else { acc + v };
                    }
                    y[b * c + ch] = if is_max { acc } else { acc / hw.max(1) as f32 };
                }
            }
        }
        Op::Matmul => matmul(&xs[0], shapes[0], &xs[1], shapes[1], ys, y)?,
        Op::Add { activation } | Op::Multiply { activation } => {
            let (lo, hi) = activation.bounds();
            if matches!(op, Op::Add { .. }) {
                binary(&xs[0], shapes[0], &xs[1], shapes[1], ys, y, |a, b| {
                    (a + b).max(lo).min(hi)
                });
            } else {
                binary(&xs[0], shapes[0], &xs[1], shapes[1], ys, y, |a, b| {
                    (a * b).max(lo).min(hi)
                });
            }
        }
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
    }
    let _ = broadcast_shapes;
    Ok(())
}
