//! Exact 8-bit GEMM for quantized conv2d and dense (docs/cpu-kernels.md, "8-bit GEMM").
//!
//! `c[m][n] = sum_k (a[m][k] - za) * (b[k][n] - zb[n])`, exact in `i32`. Both operands are held
//! as `i8`: uint8 values are shifted by -128 (`x ^ 0x80`), and so are their zero points, which
//! leaves every difference unchanged. The kernels sum the raw products `a * b` (an `i8` dot
//! product: `sdot` on aarch64 CPUs with the dot-product extension, `vpdpbusd` with AVX-512
//! VNNI, `vpmaddwd` on AVX2) and the
//! zero points come in once per output element:
//!
//! `c = sum(a*b) - za * colsum(b)[n] - zb[n] * rowsum(a)[m] + K * za * zb[n]`,
//!
//! computed with wrapping `i32` arithmetic: every term is exact modulo 2^32 and the true result
//! fits in an `i32` when `K * 255 * 255 < 2^31`, which [`MAX_K`] guarantees.

use super::isa::{self, Isa};

/// Columns per packed panel.
pub(crate) const NR: usize = 16;
/// Rows per kernel tile.
const MR: usize = 4;
/// The largest `K` whose sums are exact in `i32` (`K * 255 * 255 < 2^31`).
pub(crate) const MAX_K: usize = 33_000;

/// `K` rounded up to whole 16-byte loads (the `a` rows and `b` panels are zero-padded to it).
pub(crate) fn k_padded(k: usize) -> usize {
    k.div_ceil(16) * 16
}

/// A stored 8-bit value as `i8` (uint8 shifted by -128).
#[inline(always)]
pub(crate) fn to_i8(b: u8, unsigned: bool) -> i8 {
    if unsigned {
        (b ^ 0x80) as i8
    } else {
        b as i8
    }
}

/// A zero point in the `i8` domain of [`to_i8`].
pub(crate) fn zero_i8(z: i32, unsigned: bool) -> i32 {
    if unsigned {
        z - 128
    } else {
        z
    }
}

/// The kernel family: the dot-product extension where the CPU has it, else by [`Isa`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Scalar,
    /// x86_64 AVX2 (`vpmaddwd` on widened operands).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2,
    /// x86_64 AVX-512 with VNNI (`vpdpbusd`: uint8 x int8, 4 products per 32-bit lane; the
    /// `a` side is shifted back to uint8, which adds `128 * colsum(b)`, taken off again).
    #[cfg_attr(not(all(target_arch = "x86_64", feature = "avx512")), allow(dead_code))]
    Avx512Vnni,
    /// aarch64 with the dot-product extension (`sdot`).
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    Dotprod,
}

/// The levels this CPU runs, best first (the last is `Scalar`).
pub(crate) fn levels() -> Vec<Level> {
    let mut v = Vec::new();
    #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
    if isa::supported().contains(&Isa::Avx512) && std::is_x86_feature_detected!("avx512vnni") {
        v.push(Level::Avx512Vnni);
    }
    #[cfg(target_arch = "x86_64")]
    if isa::supported().contains(&Isa::Avx2) {
        v.push(Level::Avx2);
    }
    #[cfg(target_arch = "aarch64")]
    if std::arch::is_aarch64_feature_detected!("dotprod") {
        v.push(Level::Dotprod);
    }
    v.push(Level::Scalar);
    v
}

/// The level quantized convolutions and dense layers use, if any: the dot-product kernel on
/// aarch64 CPUs that have it; VNNI at the `avx512` level (1.1-3.4x faster than the f64 path);
/// the AVX2 kernel on x86_64 CPUs (or builds) without the `avx512` level (1.1-2.1x faster);
/// none where the f64 path is faster (AVX-512 without VNNI: the `gemm` crate's f64 kernels
/// then beat the AVX2 kernel by 1.1-1.3x) or where only the scalar kernel would run (10x
/// slower). `MOTE_CPU_ISA=sse2` or `scalar` turns it off. docs/cpu-kernels.md has the table.
pub(crate) fn level() -> Option<Level> {
    match (levels()[0], isa::current()) {
        (Level::Avx512Vnni, Isa::Avx512) => Some(Level::Avx512Vnni),
        (Level::Avx2, Isa::Avx2) if !isa::supported().contains(&Isa::Avx512) => Some(Level::Avx2),
        (Level::Dotprod, Isa::Neon) => Some(Level::Dotprod),
        _ => None,
    }
}

/// The right-hand operand `b[K, N]`, packed once: panels of [`NR`] columns, each `k_padded(K) /
/// 4` steps of `NR` columns x 4 consecutive `k` (the `sdot` layout), zero-padded; with its
/// column sums and zero points.
pub(crate) struct QPacked {
    level: Level,
    k: usize,
    n: usize,
    kp: usize,
    data: Vec<i8>,
    col_sums: Vec<i32>,
    zero: Vec<i32>,
}

impl QPacked {
    /// For the kernels of `level`. `b(k, n)` gives element `[k][n]` as `i8` ([`to_i8`]); `zero[n]` its column's zero point
    /// in the same domain. `None` when `k` is over [`MAX_K`].
    pub(crate) fn new(
        level: Level,
        k: usize,
        n: usize,
        b: impl Fn(usize, usize) -> i8,
        zero: Vec<i32>,
    ) -> Option<QPacked> {
        if k > MAX_K || zero.len() != n {
            return None;
        }
        let kp = k_padded(k);
        let panels = n.div_ceil(NR);
        let mut data = vec![0i8; panels * kp * NR];
        let mut col_sums = vec![0i32; n];
        for (j, sum) in col_sums.iter_mut().enumerate() {
            let (p, c) = (j / NR, j % NR);
            for kk in 0..k {
                let v = b(kk, j);
                *sum += v as i32;
                data[p * kp * NR + (kk / 4) * NR * 4 + c * 4 + kk % 4] = v;
            }
        }
        Some(QPacked {
            level,
            k,
            n,
            kp,
            data,
            col_sums,
            zero,
        })
    }

    pub(crate) fn k(&self) -> usize {
        self.k
    }

    pub(crate) fn n(&self) -> usize {
        self.n
    }

    pub(crate) fn k_padded(&self) -> usize {
        self.kp
    }

    /// Whether some column's zero point is not 0 (only then do the row sums count).
    pub(crate) fn has_zero_points(&self) -> bool {
        self.zero.iter().any(|&z| z != 0)
    }
}

/// Where [`gemm`] (and the convolution on it, `ConvPlan::run_q_into`) leaves its results.
pub(crate) enum Out<'a> {
    /// The exact sums, `i32`, rows `ld` apart.
    Acc { c: &'a mut [i32], ld: usize },
    /// Requantized by `rq` as each tile is finished (its column `j` is channel `ch0 + j`),
    /// one byte per value, rows `ld` apart.
    Bytes {
        out: &'a mut [u8],
        ld: usize,
        rq: &'a super::Requant,
        ch0: usize,
    },
}

impl<'a> Out<'a> {
    /// Elements from the first row's start to the end of the buffer.
    pub(crate) fn len(&self) -> usize {
        match self {
            Out::Acc { c, .. } => c.len(),
            Out::Bytes { out, .. } => out.len(),
        }
    }

    /// The row stride.
    pub(crate) fn ld(&self) -> usize {
        match self {
            Out::Acc { ld, .. } | Out::Bytes { ld, .. } => *ld,
        }
    }

    /// Consecutive pieces of `rows` rows each (the last may have fewer), for splitting the
    /// work over threads.
    pub(crate) fn split_rows(self, rows: usize) -> Vec<Out<'a>> {
        let step = (rows * self.ld()).max(1);
        match self {
            Out::Acc { c, ld } => c.chunks_mut(step).map(|c| Out::Acc { c, ld }).collect(),
            Out::Bytes { out, ld, rq, ch0 } => out
                .chunks_mut(step)
                .map(|out| Out::Bytes { out, ld, rq, ch0 })
                .collect(),
        }
    }

    /// The same rows from column `col` on (a group's channels).
    pub(crate) fn cols_from(&mut self, col: usize) -> Out<'_> {
        match self {
            Out::Acc { c, ld } => Out::Acc {
                c: &mut c[col..],
                ld: *ld,
            },
            Out::Bytes { out, ld, rq, ch0 } => Out::Bytes {
                out: &mut out[col..],
                ld: *ld,
                rq,
                ch0: *ch0 + col,
            },
        }
    }
}

/// The left operand's rows: as `i8`, or as uint8 (`i8 ^ 0x80`, each value plus 128), the form
/// the VNNI kernel reads ([`wants_u8`]): a caller that builds its rows in that form spares the
/// conversion.
#[derive(Clone, Copy)]
pub(crate) enum Rows<'a> {
    I8(&'a [i8]),
    U8(&'a [u8]),
}

impl Rows<'_> {
    fn len(&self) -> usize {
        match self {
            Rows::I8(a) => a.len(),
            Rows::U8(a) => a.len(),
        }
    }
}

/// The kernel this CPU runs for `b`'s level.
fn run_level(b: &QPacked) -> Level {
    match b.level {
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 if isa::supported().contains(&Isa::Avx2) => Level::Avx2,
        #[cfg(target_arch = "aarch64")]
        Level::Dotprod if std::arch::is_aarch64_feature_detected!("dotprod") => Level::Dotprod,
        #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
        Level::Avx512Vnni if levels().contains(&Level::Avx512Vnni) => Level::Avx512Vnni,
        _ => Level::Scalar,
    }
}

/// Whether [`gemm`] reads `b`'s left operand as uint8 ([`Rows::U8`]) without converting it.
pub(crate) fn wants_u8(b: &QPacked) -> bool {
    run_level(b) == Level::Avx512Vnni
}

/// The exact product above, by `b`'s level, for `m` rows of `a` (row stride
/// `b.k_padded()`; any values beyond `K`, where `b` is zero) whose sums over `K` (of the `i8`
/// values) are `row_sums`, into `out`: as sums, or requantized tile by tile while they are in
/// cache (the requantization compiled for the chosen ISA level, `isa::run_as`).
pub(crate) fn gemm(
    m: usize,
    a: Rows<'_>,
    a_zero: i32,
    row_sums: &[i32],
    b: &QPacked,
    mut out: Out<'_>,
) -> crate::error::Result<()> {
    let (kp, n) = (b.kp, b.n);
    let (ld, len) = (out.ld(), out.len());
    if a.len() < m * kp || row_sums.len() < m || (m > 0 && len < (m - 1) * ld + n) {
        return Err(super::backend_err("qgemm: operand buffers too small"));
    }
    if let Out::Bytes { rq, ch0, .. } = &out {
        if rq.channels() < ch0 + n {
            return Err(super::backend_err(
                "qgemm: fewer requantization channels than columns",
            ));
        }
    }
    // The kernel this CPU runs for `b`'s level, checked once (not per tile).
    let level = run_level(b);
    // Rows in the other form than the kernel's (callers mostly avoid it): converted.
    let a_i8: Vec<i8>;
    let a = match (a, level) {
        (Rows::U8(au), l) if l != Level::Avx512Vnni => {
            a_i8 = au[..m * kp].iter().map(|&v| (v ^ 0x80) as i8).collect();
            Rows::I8(&a_i8)
        }
        _ => a,
    };
    let convert = matches!(a, Rows::I8(_)) && level == Level::Avx512Vnni;
    // The VNNI kernel's `a` as uint8: this thread's buffer, taken out of its cell for the
    // call (the work inside `LocalKey::with` would be compiled apart from `run_as`'s level).
    let mut au = match convert {
        true => A_U8.with(|cell| cell.try_borrow_mut().map(|mut v| std::mem::take(&mut *v))),
        false => Ok(Vec::new()),
    }
    .unwrap_or_default();
    if convert && au.len() < m * kp {
        au.resize(m * kp, 0);
    }
    isa::run_as(
        isa::current(),
        #[inline(always)]
        || gemm_body(m, a, &mut au, a_zero, row_sums, b, level, &mut out),
    );
    if convert {
        A_U8.with(|cell| {
            if let Ok(mut v) = cell.try_borrow_mut() {
                *v = au;
            }
        });
    }
    Ok(())
}

/// Rows and panels of `b` per tile of the VNNI kernel: 6 x 4 accumulators (of the 32 zmm
/// registers), which one load of each panel and one broadcast per row feed for 24
/// `vpdpbusd`.
const VNNI_MR: usize = 6;
const VNNI_NB: usize = 4;

thread_local! {
    /// The VNNI kernel's `a` as uint8, per thread, kept between calls.
    static A_U8: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`gemm`] once checked, with the kernels of `level` (one this CPU runs): `a` as uint8 for
/// the VNNI kernel, else as `i8`; `au` at least `m * kp` bytes for the VNNI kernel given `i8`
/// rows.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gemm_body(
    m: usize,
    a: Rows<'_>,
    au: &mut [u8],
    a_zero: i32,
    row_sums: &[i32],
    b: &QPacked,
    level: Level,
    out: &mut Out<'_>,
) {
    let len = m * b.kp;
    match a {
        Rows::U8(a) => tiles(m, &[], &a[..len], a_zero, row_sums, b, level, out),
        Rows::I8(a) if level != Level::Avx512Vnni => {
            tiles(m, a, &[], a_zero, row_sums, b, level, out)
        }
        Rows::I8(a) => {
            // `vpdpbusd` multiplies uint8 by int8: `a` shifted back to uint8 once here, not
            // per tile and panel (its sums gain `128 * colsum(b)`, taken off with the zero
            // points).
            for (d, &v) in au[..len].iter_mut().zip(&a[..len]) {
                *d = v as u8 ^ 0x80;
            }
            tiles(m, &[], &au[..len], a_zero, row_sums, b, level, out)
        }
    }
}

/// The tile loops of [`gemm_body`]: panels of `b` (groups of [`VNNI_NB`] for the VNNI kernel)
/// outermost, so that they stay in cache while the rows of `a` pass; `au` is `a` as uint8 for
/// the VNNI kernel (else unused).
#[allow(clippy::too_many_arguments)]
#[cfg_attr(
    not(all(target_arch = "x86_64", feature = "avx512")),
    allow(unused_variables)
)]
#[inline(always)]
fn tiles(
    m: usize,
    a: &[i8],
    au: &[u8],
    a_zero: i32,
    row_sums: &[i32],
    b: &QPacked,
    level: Level,
    out: &mut Out<'_>,
) {
    let (kp, n) = (b.kp, b.n);
    let kz = (b.k as i32).wrapping_mul(a_zero);
    // Without zero points in `b` (ONNX Runtime's symmetric weights) the row sums do not
    // count: a multiply and a subtraction fewer per vector of results.
    let zero_points = b.has_zero_points();
    let panels = n.div_ceil(NR);
    let (mr, nb) = match level {
        Level::Avx512Vnni => (VNNI_MR, VNNI_NB),
        _ => (MR, 1),
    };
    for p0 in (0..panels).step_by(nb) {
        let np = nb.min(panels - p0);
        // Per column of each panel: the terms that do not depend on the row (zero beyond
        // `n`, whose sums are never stored).
        let mut zb = [[0i32; NR]; VNNI_NB];
        let mut corr = [[0i32; NR]; VNNI_NB];
        for (i, (zb, corr)) in zb.iter_mut().zip(&mut corr).enumerate().take(np) {
            let c0 = (p0 + i) * NR;
            for j in 0..NR.min(n - c0) {
                let (cs, z) = (b.col_sums[c0 + j], b.zero[c0 + j]);
                zb[j] = z;
                corr[j] = kz.wrapping_mul(z).wrapping_sub(a_zero.wrapping_mul(cs));
                if level == Level::Avx512Vnni {
                    // That kernel sums (a + 128) * b.
                    corr[j] = corr[j].wrapping_sub(128i32.wrapping_mul(cs));
                }
            }
        }
        let bp = &b.data[p0 * kp * NR..(p0 + np) * kp * NR];
        // Every tile writes the sums it leaves (`rows` rows, `np` panels) before they are
        // read, so the array is zeroed once, not per tile (1.5 KiB each time).
        let mut acc = [[[0i32; NR]; VNNI_NB]; VNNI_MR];
        for r0 in (0..m).step_by(mr) {
            let rows = mr.min(m - r0);
            // `a` for the `i8` kernels (empty for the VNNI kernel, which reads `au`).
            let at = a.get(r0 * kp..(r0 + rows) * kp).unwrap_or(&[]);
            if level != Level::Avx512Vnni && at.len() != rows * kp {
                // Not reached: `gemm` gives these levels `i8` rows of `m * kp` bytes.
                return;
            }
            let mut four = [[0i32; NR]; MR];
            match level {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `gemm` chose this level only where AVX2 was detected on this CPU;
                // `at` holds `rows` rows of `kp` bytes and `bp` (one panel) `kp * NR`, which
                // is all the kernel reads.
                Level::Avx2 => unsafe { avx2::tile(rows, at, kp, bp, &mut four) },
                #[cfg(target_arch = "aarch64")]
                // SAFETY: `gemm` chose this level only where the dot-product extension was
                // detected; `at` holds `rows` rows of `kp` bytes (a multiple of 16) and `bp`
                // (one panel) `kp * NR`.
                Level::Dotprod => unsafe { dotprod::tile(rows, at, kp, bp, &mut four) },
                #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
                // SAFETY: `gemm` chose this level only where AVX-512 F/BW and VNNI were
                // detected; `au` holds `rows` rows of `kp` bytes from row `r0` on, `bp` `np`
                // panels of `kp * NR`, and `rows <= VNNI_MR`, `np <= VNNI_NB`.
                Level::Avx512Vnni => unsafe {
                    vnni::tile(rows, np, &au[r0 * kp..(r0 + rows) * kp], kp, bp, &mut acc)
                },
                _ => scalar_tile(rows, at, kp, bp, &mut four),
            }
            #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
            if level == Level::Avx512Vnni {
                if let Out::Bytes { out, ld, rq, ch0 } = &mut *out {
                    if rq.out_zero.abs() <= super::MAX_OUT_ZERO {
                        let cols: [usize; VNNI_NB] =
                            std::array::from_fn(|i| NR.min(n.saturating_sub((p0 + i) * NR)));
                        let ld = *ld;
                        // SAFETY: this level was detected (as above); `rq.out_zero` was just
                        // checked; `np` and `rows` are at most the tile's; `row_sums` holds
                        // `m` entries (`gemm` checked); `gemm` checked `rq` has channels for
                        // `ch0 + n`, and the wrapped entries cover `NR` more from any below.
                        unsafe {
                            vnni::requant_tile(
                                rows,
                                np,
                                &acc,
                                &corr,
                                zero_points.then_some(&zb),
                                &row_sums[r0..r0 + rows],
                                rq,
                                *ch0 + p0 * NR,
                                &cols,
                                &mut out[r0 * ld + p0 * NR..],
                                ld,
                            )
                        };
                        continue;
                    }
                }
            }
            if nb == 1 {
                for (accr, f) in acc.iter_mut().zip(four) {
                    accr[0] = f;
                }
            }
            for (r, accr) in acc.iter().enumerate().take(rows) {
                let rs = row_sums[r0 + r];
                for (i, accp) in accr.iter().enumerate().take(np) {
                    let c0 = (p0 + i) * NR;
                    let cols = NR.min(n - c0);
                    let v: [i32; NR] = if zero_points {
                        std::array::from_fn(|j| {
                            accp[j]
                                .wrapping_add(corr[i][j])
                                .wrapping_sub(zb[i][j].wrapping_mul(rs))
                        })
                    } else {
                        std::array::from_fn(|j| accp[j].wrapping_add(corr[i][j]))
                    };
                    let o0 = (r0 + r) * out.ld() + c0;
                    match out {
                        Out::Acc { c, .. } => c[o0..o0 + cols].copy_from_slice(&v[..cols]),
                        // A whole panel as a fixed-size row (one or a few vectors, no
                        // remainder loop), else the edge columns.
                        // A whole panel in one fixed-size block (one or a few vectors, no
                        // remainder loop); the edge panel's too, then its columns kept.
                        Out::Bytes { out, rq, ch0, .. } if cols == NR => {
                            let o: &mut [u8; NR] =
                                (&mut out[o0..o0 + NR]).try_into().expect("a panel");
                            rq.block(&v, |a| a as f32, *ch0 + c0, o)
                        }
                        Out::Bytes { out, rq, ch0, .. } => {
                            let mut o = [0u8; NR];
                            rq.block(&v, |a| a as f32, *ch0 + c0, &mut o);
                            out[o0..o0 + cols].copy_from_slice(&o[..cols]);
                        }
                    }
                }
            }
        }
    }
}

fn scalar_tile(rows: usize, a: &[i8], kp: usize, panel: &[i8], acc: &mut [[i32; NR]; MR]) {
    for (r, accr) in acc.iter_mut().enumerate().take(rows) {
        let ar = &a[r * kp..(r + 1) * kp];
        for (q, bq) in panel.chunks_exact(NR * 4).enumerate() {
            let aq = &ar[q * 4..q * 4 + 4];
            for (j, bc) in bq.chunks_exact(4).enumerate() {
                let mut s = 0i32;
                for t in 0..4 {
                    s += aq[t] as i32 * bc[t] as i32;
                }
                accr[j] += s;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{MR, NR};
    use std::arch::x86_64::*;

    /// One step is 4 `k` x 16 columns of `b` (64 bytes), widened to four vectors of 16 `i16`
    /// (4 columns x 4 `k` each); each row's 4 values of `a`, widened and repeated, multiply
    /// them with `vpmaddwd`, which leaves two partial sums per column (summed at the end).
    ///
    /// # Safety
    /// AVX2 must be available; `a` holds `rows <= MR` rows of `kp` bytes, `panel` `kp * NR`.
    #[target_feature(enable = "avx2")]
    #[allow(unused_unsafe)]
    pub(super) unsafe fn tile(
        rows: usize,
        a: &[i8],
        kp: usize,
        panel: &[i8],
        acc: &mut [[i32; NR]; MR],
    ) {
        // SAFETY: AVX2 is present (the caller's contract), which the intrinsics need (Rust
        // before 1.87 calls them unsafe even here); the pointer reads are justified below.
        unsafe { tile_body(rows, a, kp, panel, acc) }
    }

    #[target_feature(enable = "avx2")]
    #[allow(unused_unsafe)]
    #[inline]
    unsafe fn tile_body(rows: usize, a: &[i8], kp: usize, panel: &[i8], acc: &mut [[i32; NR]; MR]) {
        // SAFETY: as for `tile`.
        unsafe {
            // Two rows at a time: 8 accumulators, 4 widened `b` vectors, 2 `a` vectors.
            let mut r = 0;
            while r < rows {
                let two = rows - r >= 2;
                let mut s = [_mm256_setzero_si256(); 8];
                for q in 0..kp / 4 {
                    // SAFETY: step `q` of the panel is 64 bytes at `q * 64 < kp * NR`.
                    let bp = unsafe { panel.as_ptr().add(q * NR * 4) } as *const __m128i;
                    // SAFETY: as above: four 16-byte loads inside the step (unaligned loads).
                    let b: [__m256i; 4] = unsafe {
                        [
                            _mm256_cvtepi8_epi16(_mm_loadu_si128(bp)),
                            _mm256_cvtepi8_epi16(_mm_loadu_si128(bp.add(1))),
                            _mm256_cvtepi8_epi16(_mm_loadu_si128(bp.add(2))),
                            _mm256_cvtepi8_epi16(_mm_loadu_si128(bp.add(3))),
                        ]
                    };
                    for (i, row) in [r, r + 1].into_iter().enumerate().take(1 + two as usize) {
                        let o = row * kp + q * 4;
                        // The row's four values, widened to i16, repeated across the vector.
                        let v = [a[o], a[o + 1], a[o + 2], a[o + 3]];
                        let w = (v[0] as i16 as u16 as i64)
                            | ((v[1] as i16 as u16 as i64) << 16)
                            | ((v[2] as i16 as u16 as i64) << 32)
                            | ((v[3] as i16 as u16 as i64) << 48);
                        let av = _mm256_set1_epi64x(w);
                        for (j, bj) in b.iter().enumerate() {
                            s[i * 4 + j] =
                                _mm256_add_epi32(s[i * 4 + j], _mm256_madd_epi16(av, *bj));
                        }
                    }
                }
                for i in 0..1 + two as usize {
                    for j in 0..4 {
                        let mut lanes = [0i32; 8];
                        // SAFETY: `lanes` is 32 bytes, an unaligned store fits it.
                        unsafe {
                            _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, s[i * 4 + j])
                        };
                        for c in 0..4 {
                            acc[r + i][j * 4 + c] += lanes[2 * c] + lanes[2 * c + 1];
                        }
                    }
                }
                r += 2;
            }
        }
    }
}

// AVX-512 intrinsics are stable from Rust 1.89, which the `avx512` feature requires on
// x86_64 (docs/cpu-kernels.md); builds for 1.85 leave the feature off.
#[cfg(all(target_arch = "x86_64", feature = "avx512"))]
#[allow(clippy::incompatible_msrv)]
mod vnni {
    use super::super::Requant;
    use super::{NR, VNNI_MR, VNNI_NB};
    use std::arch::x86_64::*;

    /// One step is 4 `k` x 16 columns of each of `np` panels of `b`: one 64-byte vector per
    /// panel, the `vpdpbusd` layout. Each row's 4 values of `a` (uint8), repeated across a
    /// vector, go through `vpdpbusd` with every panel's vector: `rows x np` accumulators.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI must be available; `a` holds `rows <= VNNI_MR` rows of `kp`
    /// bytes, `b` `np <= VNNI_NB` panels of `kp * NR` bytes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(unused_unsafe)]
    pub(super) unsafe fn tile(
        rows: usize,
        np: usize,
        a: &[u8],
        kp: usize,
        b: &[i8],
        acc: &mut Acc,
    ) {
        macro_rules! by_panels {
            ($r:literal) => {
                match np {
                    4 => rows_n::<$r, 4>(a, kp, b, acc),
                    3 => rows_n::<$r, 3>(a, kp, b, acc),
                    2 => rows_n::<$r, 2>(a, kp, b, acc),
                    _ => rows_n::<$r, 1>(a, kp, b, acc),
                }
            };
        }
        // SAFETY: the caller's contract: the features are present (the intrinsics need
        // them), `rows` rows of `kp` bytes (4 read per step and row) and `np` panels of
        // `kp / 4` steps of 64 bytes.
        unsafe {
            match rows {
                6 => by_panels!(6),
                5 => by_panels!(5),
                4 => by_panels!(4),
                3 => by_panels!(3),
                2 => by_panels!(2),
                _ => by_panels!(1),
            }
        }
    }

    type Acc = [[[i32; NR]; VNNI_NB]; VNNI_MR];

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(unused_unsafe)]
    #[inline]
    unsafe fn rows_n<const R: usize, const P: usize>(a: &[u8], kp: usize, b: &[i8], acc: &mut Acc) {
        // SAFETY: `tile`'s contract, with `R` its `rows` and `P` its `np`.
        unsafe {
            let mut s = [[_mm512_setzero_si512(); P]; R];
            let (ap, bp) = (a.as_ptr(), b.as_ptr());
            for q in 0..kp / 4 {
                let bv: [__m512i; P] = std::array::from_fn(|j| {
                    _mm512_loadu_si512(bp.add(j * kp * NR + q * NR * 4) as *const _)
                });
                for (r, sr) in s.iter_mut().enumerate() {
                    let v = (ap.add(r * kp + q * 4) as *const i32).read_unaligned();
                    let av = _mm512_set1_epi32(v);
                    for (sj, bj) in sr.iter_mut().zip(&bv) {
                        *sj = _mm512_dpbusd_epi32(*sj, av, *bj);
                    }
                }
            }
            for (sr, accr) in s.iter().zip(acc.iter_mut()) {
                for (sj, accj) in sr.iter().zip(accr.iter_mut()) {
                    _mm512_storeu_si512(accj.as_mut_ptr() as *mut _, *sj);
                }
            }
        }
    }

    /// A tile's sums (`rows` rows of `np` panels in `acc`) to bytes, as [`Requant::block`]
    /// computes each (`Requant::one`: the same float32 operations in the same order, the
    /// clamps as comparisons that let a NaN through, a NaN to 0), one vector per row and
    /// panel: each panel's terms (`corr`, the zero points `zb` times the row's sum when
    /// there are any, the channels' scales and biases) loaded once for all rows, and each
    /// vector stored with the panel's columns as its mask. Row `r`'s panel `i` goes to
    /// `out[r * ld + i * NR..]`, `cols[i]` bytes, channels from `ch0 + i * NR` on.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI must be available; `rq.out_zero` within `MAX_OUT_ZERO` (the
    /// other case is `Requant::block`'s own); `np <= VNNI_NB`, `rows <= VNNI_MR`,
    /// `row_sums.len() >= rows`, and `ch0 + np * NR <= rq.acc_scale.len()` (the wrapped
    /// entries cover any run of `NR` channels from one below `channels`).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(unused_unsafe, clippy::too_many_arguments)]
    pub(super) unsafe fn requant_tile(
        rows: usize,
        np: usize,
        acc: &Acc,
        corr: &[[i32; NR]; VNNI_NB],
        zb: Option<&[[i32; NR]; VNNI_NB]>,
        row_sums: &[i32],
        rq: &Requant,
        ch0: usize,
        cols: &[usize; VNNI_NB],
        out: &mut [u8],
        ld: usize,
    ) {
        // SAFETY: the features are present (the caller's contract); every load is of `NR`
        // values from arrays or slices checked to hold them (the slice indexing panics
        // otherwise, which the caller's contract rules out), and every store writes the
        // `cols[i]` bytes of a slice of that length (the mask has `cols[i]` bits).
        unsafe {
            let (lo, hi) = (_mm512_set1_ps(rq.lo), _mm512_set1_ps(rq.hi));
            let (q_lo, q_hi) = (_mm512_set1_ps(rq.q_lo), _mm512_set1_ps(rq.q_hi));
            let os = _mm512_set1_ps(rq.out_scale);
            let round = _mm512_set1_ps(super::super::ROUND);
            let round_bits = _mm512_set1_epi32(super::super::ROUND.to_bits() as i32);
            let oz = _mm512_set1_epi32(rq.out_zero);
            let between = |v: __m512, lo: __m512, hi: __m512| {
                let v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, lo), v, lo);
                _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, hi), v, hi)
            };
            for i in 0..np.min(VNNI_NB) {
                let ch = ch0 + i * NR;
                let scale = _mm512_loadu_ps(rq.acc_scale[ch..ch + NR].as_ptr());
                let bias = _mm512_loadu_ps(rq.bias[ch..ch + NR].as_ptr());
                let c = _mm512_loadu_si512(corr[i].as_ptr() as *const _);
                let z = zb.map(|zb| _mm512_loadu_si512(zb[i].as_ptr() as *const _));
                let w = cols[i].min(NR);
                let mask = ((1u32 << w) - 1) as __mmask16;
                for r in 0..rows.min(VNNI_MR) {
                    let mut v =
                        _mm512_add_epi32(_mm512_loadu_si512(acc[r][i].as_ptr() as *const _), c);
                    if let Some(z) = z {
                        let rs = _mm512_set1_epi32(row_sums[r]);
                        v = _mm512_sub_epi32(v, _mm512_mullo_epi32(z, rs));
                    }
                    let real = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(v), scale), bias);
                    let q = between(_mm512_div_ps(between(real, lo, hi), os), q_lo, q_hi);
                    let bits =
                        _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(q, round)), round_bits);
                    let ordered = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(q, q);
                    let bits = _mm512_maskz_mov_epi32(ordered, _mm512_add_epi32(bits, oz));
                    let o0 = r * ld + i * NR;
                    let dst = &mut out[o0..o0 + w];
                    _mm512_mask_cvtepi32_storeu_epi8(dst.as_mut_ptr() as *mut _, mask, bits);
                }
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod dotprod {
    use super::{MR, NR};
    use std::arch::aarch64::*;

    /// `acc += b . a[lane]`: each 32-bit lane of `acc` adds the dot product of its 4 bytes of
    /// `b` with bytes `4 * lane..4 * lane + 4` of `a`.
    macro_rules! sdot {
        ($acc:expr, $b:expr, $a:expr, $lane:literal) => {
            // SAFETY: a register-only instruction of the dot-product extension, which the
            // enclosing function requires.
            unsafe {
                core::arch::asm!(
                    concat!("sdot {acc:v}.4s, {b:v}.16b, {a:v}.4b[", $lane, "]"),
                    acc = inout(vreg) $acc,
                    b = in(vreg) $b,
                    a = in(vreg) $a,
                    options(pure, nomem, nostack, preserves_flags)
                )
            }
        };
    }

    /// One step is 4 `k` x 16 columns (four vectors, one `sdot` each per row); every row's
    /// 16 bytes of `a` serve four steps, one lane each.
    ///
    /// # Safety
    /// The dot-product extension must be available; `a` holds `rows <= MR` rows of `kp`
    /// bytes (`kp` a multiple of 16), `panel` `kp * NR`.
    #[target_feature(enable = "neon,dotprod")]
    #[allow(unused_unsafe)]
    pub(super) unsafe fn tile(
        rows: usize,
        a: &[i8],
        kp: usize,
        panel: &[i8],
        acc: &mut [[i32; NR]; MR],
    ) {
        // SAFETY: NEON and the dot-product extension are present (the caller's contract),
        // which the intrinsics need (Rust before 1.87 calls them unsafe even here); the
        // pointer reads are justified below.
        unsafe {
            if rows == 0 {
                return;
            }
            // Rows past `rows` read the last real row again: every row is loaded without a
            // check in the loop (which cost 12 instructions per 16 `k` in llvm-mca's view,
            // docs/cpu-kernels.md), and their sums are never stored.
            let row: [*const i8; MR] =
                std::array::from_fn(|r| a.as_ptr().wrapping_add(r.min(rows - 1) * kp));
            let mut s = [[vdupq_n_s32(0); 4]; MR];
            for k16 in 0..kp / 16 {
                // SAFETY: 16 bytes at `k16 * 16` of a real row (`rows` rows of `kp` bytes).
                let av: [int8x16_t; MR] =
                    std::array::from_fn(|r| unsafe { vld1q_s8(row[r].add(k16 * 16)) });
                let bp = panel.as_ptr();
                // SAFETY (the loads below): step `4 * k16 + t` is 64 bytes at
                // `(4 * k16 + t) * 64 < kp * NR`.
                macro_rules! step {
                    ($t:literal) => {{
                        let o = (k16 * 4 + $t) * NR * 4;
                        let b = unsafe {
                            [
                                vld1q_s8(bp.add(o)),
                                vld1q_s8(bp.add(o + 16)),
                                vld1q_s8(bp.add(o + 32)),
                                vld1q_s8(bp.add(o + 48)),
                            ]
                        };
                        for r in 0..MR {
                            sdot!(s[r][0], b[0], av[r], $t);
                            sdot!(s[r][1], b[1], av[r], $t);
                            sdot!(s[r][2], b[2], av[r], $t);
                            sdot!(s[r][3], b[3], av[r], $t);
                        }
                    }};
                }
                step!(0);
                step!(1);
                step!(2);
                step!(3);
            }
            for r in 0..rows {
                for j in 0..4 {
                    let mut lanes = [0i32; 4];
                    // SAFETY: `lanes` holds four i32.
                    unsafe { vst1q_s32(lanes.as_mut_ptr(), s[r][j]) };
                    for c in 0..4 {
                        acc[r][j * 4 + c] += lanes[c];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::requant_reference;
    use super::super::Requant;
    use super::*;
    use crate::dtype::DType;
    use crate::offload::format::Activation;

    /// Every level against an `i64` reference of the centered products, on shapes with edge
    /// tiles (rows and panels: the VNNI kernel's 6-row, 4-panel tiles with every remainder)
    /// and padded `k`, uint8 and int8 operands at extreme zero points, into a poisoned output
    /// with a row stride wider than `n`; and requantized as the tiles are stored, against the
    /// scalar formula on the exact sums.
    #[test]
    fn qgemm_matches_an_exact_reference() {
        let mut state = 7u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for &(m, k, n) in &[
            (1, 1, 1),
            (3, 5, 7),
            (4, 16, 16),
            (5, 27, 17),
            (9, 64, 33),
            (7, 300, 40),
            (2, 1153, 5),
            (13, 70, 80),
            (6, 20, 129),
        ] {
            for (ua, ub) in [(true, false), (false, false), (true, true)] {
                let a_raw: Vec<u8> = (0..m * k).map(|_| next() as u8).collect();
                let b_raw: Vec<u8> = (0..k * n).map(|_| next() as u8).collect();
                let za = if ua { 255 } else { -128 };
                let zb: Vec<i32> = (0..n)
                    .map(|j| match (ub, j % 3) {
                        (true, 0) => 0,
                        (true, _) => 200,
                        (false, 0) => 127,
                        (false, _) => -5,
                    })
                    .collect();
                let real = |v: u8, u: bool| if u { v as i64 } else { v as i8 as i64 };
                let want: Vec<i64> = (0..m * n)
                    .map(|i| {
                        let (r, j) = (i / n, i % n);
                        (0..k)
                            .map(|q| {
                                (real(a_raw[r * k + q], ua) - za as i64)
                                    * (real(b_raw[q * n + j], ub) - zb[j] as i64)
                            })
                            .sum()
                    })
                    .collect();
                let zb8: Vec<i32> = zb.iter().map(|&z| zero_i8(z, ub)).collect();
                let kp = k_padded(k);
                // Values beyond `k` that are not zero: `b` is zero there.
                let mut a = vec![0x5ai8; m * kp];
                let mut sums = vec![0i32; m];
                for r in 0..m {
                    for q in 0..k {
                        a[r * kp + q] = to_i8(a_raw[r * k + q], ua);
                        sums[r] += a[r * kp + q] as i32;
                    }
                }
                let au: Vec<u8> = a.iter().map(|&v| v as u8 ^ 0x80).collect();
                for (level, rows) in levels()
                    .into_iter()
                    .flat_map(|l| [(l, Rows::I8(&a)), (l, Rows::U8(&au))])
                {
                    let b =
                        QPacked::new(level, k, n, |q, j| to_i8(b_raw[q * n + j], ub), zb8.clone())
                            .expect("b");
                    let ldc = n + 3;
                    let mut c = vec![i32::MIN; m * ldc];
                    gemm(
                        m,
                        rows,
                        zero_i8(za, ua),
                        &sums,
                        &b,
                        Out::Acc { c: &mut c, ld: ldc },
                    )
                    .expect("gemm");
                    for (i, &w) in want.iter().enumerate() {
                        let (r, j) = (i / n, i % n);
                        assert_eq!(
                            c[r * ldc + j] as i64,
                            w,
                            "{level:?} {m}x{k}x{n} (ua {ua}, ub {ub}): c[{r}][{j}]"
                        );
                    }
                    for r in 0..m {
                        assert!(c[r * ldc + n..(r + 1) * ldc].iter().all(|&v| v == i32::MIN));
                    }
                    // Requantized as the tiles are stored, columns from channel 2 on: equal
                    // to the scalar formula on the exact sums, row padding untouched.
                    for (dtype, zero, act) in [
                        (DType::U8, 3, Activation::Relu),
                        (DType::I8, -7, Activation::None),
                        (DType::I8, 100, Activation::Clip(-2.0, 1.5)),
                    ] {
                        let scale: Vec<f32> = (0..n + 2)
                            .map(|j| [0.5, 1.0 / 1024.0, 3e-4, 0.25][j % 4])
                            .collect();
                        let bias: Vec<f32> = (0..n + 2).map(|j| [0.0, -0.5, 1.25][j % 3]).collect();
                        let out_scale = if zero == 3 { 0.5 } else { 1.0 };
                        let rq = Requant::new(0.0, scale, bias, (out_scale, zero, dtype), act);
                        let mut q = vec![0xa5u8; m * ldc];
                        let out = Out::Bytes {
                            out: &mut q,
                            ld: ldc,
                            rq: &rq,
                            ch0: 2,
                        };
                        gemm(m, rows, zero_i8(za, ua), &sums, &b, out).expect("gemm");
                        for (i, &w) in want.iter().enumerate() {
                            let (r, j) = (i / n, i % n);
                            assert_eq!(
                                q[r * ldc + j],
                                requant_reference(&rq, w as i32 as f32, j + 2),
                                "{level:?} {m}x{k}x{n} (ua {ua}, ub {ub}) {dtype:?}: q[{r}][{j}]"
                            );
                        }
                        for r in 0..m {
                            assert!(q[r * ldc + n..(r + 1) * ldc].iter().all(|&v| v == 0xa5));
                        }
                    }
                }
            }
        }
        // scripts/test.sh reads this line (with --nocapture) and compares it with the CPU's
        // flags, as it does the f32 levels (gemm.rs); a panic above never prints it.
        let names: Vec<&str> = levels()
            .into_iter()
            .map(|l| match l {
                Level::Scalar => "scalar",
                Level::Avx2 => "avx2",
                Level::Avx512Vnni => "avx512vnni",
                Level::Dotprod => "dotprod",
            })
            .collect();
        println!("cpu qgemm levels covered: {}", names.join(" "));
        assert!(QPacked::new(Level::Scalar, MAX_K + 1, 1, |_, _| 0, vec![0]).is_none());
    }
}
