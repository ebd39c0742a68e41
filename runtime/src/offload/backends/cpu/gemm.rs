//! The cpu backend's f32 GEMM: packed panels (BLIS-style blocking) and one register-tile
//! microkernel per instruction-set level ([`Isa`]).
//!
//! `C[m, n] = A[m, k] * B[k, n]`, all row-major with row strides. B is copied, `KC` rows by
//! `NC` columns at a time, into panels `NR` columns wide (k-major inside a panel); A, `MC`
//! rows by `KC` columns at a time, into panels `MR` rows tall. The microkernel keeps an
//! `MR x NR` tile of C in vector registers over the `KC` products (one vector load of B and
//! `MR` broadcasts of A per step) and stores or adds it to C once. Edge tiles are computed into
//! a scratch tile and copied. The AVX2/FMA and NEON levels use the `gemm` crate instead, which
//! measured faster than these kernels and than `matrixmultiply` (docs/cpu-kernels.md); the own
//! kernels are the SSE2 and scalar levels.

use std::cell::RefCell;

use super::backend_err;
use super::isa::Isa;
use crate::error::Result;

/// Depth of a packed block (rows of B, columns of A).
const KC: usize = 256;
/// Rows of A packed at once: a multiple of every `MR` below (4, 6).
const MC: usize = 96;
/// Columns of B packed at once: a multiple of every `NR` below (4, 8).
const NC: usize = 960;
/// Largest `MR * NR` of any microkernel (the edge scratch tile).
const MAX_TILE: usize = 6 * 8;

/// `tile(kc, a, b, c, ldc, add)`: `C[MR, NR] (+)= Apanel * Bpanel`.
///
/// # Safety
/// `a` holds `kc * MR` floats, `b` `kc * NR`, and `c` addresses `MR` rows of `NR` writable
/// floats `ldc` apart; the CPU has the kernel's target features.
type Tile = unsafe fn(usize, *const f32, *const f32, *mut f32, usize, bool);

/// One microkernel and its tile shape.
#[derive(Clone, Copy)]
struct Kernel {
    mr: usize,
    nr: usize,
    tile: Tile,
}

/// Generates a microkernel from vector primitives: `$v` vectors of `$w` floats, an
/// `$mr x ($nv * $w)` tile.
macro_rules! microkernel {
    ($(#[$attr:meta])* $name:ident, $v:ty, $w:expr, $mr:expr, $nv:expr,
     zero: $zero:expr, load: $load:path, store: $store:path, splat: $splat:path,
     add: $add:path, fma: $fma:path) => {
        $(#[$attr])*
        #[allow(clippy::needless_range_loop, unused_unsafe)]
        pub(super) unsafe fn $name(
            kc: usize,
            a: *const f32,
            b: *const f32,
            c: *mut f32,
            ldc: usize,
            add: bool,
        ) {
            // SAFETY: the caller guarantees the panel lengths and the tile of C ([`Tile`]);
            // every offset below stays inside them. The target features are the function's.
            unsafe {
                let mut acc: [[$v; $nv]; $mr] = [[$zero; $nv]; $mr];
                let (mut a, mut b) = (a, b);
                for _ in 0..kc {
                    let mut bv: [$v; $nv] = [$zero; $nv];
                    for j in 0..$nv {
                        bv[j] = $load(b.add(j * $w));
                    }
                    for i in 0..$mr {
                        let av = $splat(*a.add(i));
                        for j in 0..$nv {
                            acc[i][j] = $fma(acc[i][j], av, bv[j]);
                        }
                    }
                    a = a.add($mr);
                    b = b.add($nv * $w);
                }
                for i in 0..$mr {
                    for j in 0..$nv {
                        let p = c.add(i * ldc + j * $w);
                        let v = if add { $add($load(p), acc[i][j]) } else { acc[i][j] };
                        $store(p, v);
                    }
                }
            }
        }
    };
}

mod scalar {
    #[inline(always)]
    pub unsafe fn load(p: *const f32) -> f32 {
        // SAFETY: the microkernel passes in-bounds pointers.
        unsafe { *p }
    }
    #[inline(always)]
    pub unsafe fn store(p: *mut f32, v: f32) {
        // SAFETY: the microkernel passes in-bounds pointers.
        unsafe { *p = v }
    }
    #[inline(always)]
    pub fn splat(x: f32) -> f32 {
        x
    }
    #[inline(always)]
    pub fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    pub fn fma(acc: f32, a: f32, b: f32) -> f32 {
        acc + a * b
    }
    microkernel!(tile_4x4, f32, 1, 4, 4, zero: 0.0, load: load, store: store, splat: splat,
        add: add, fma: fma);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "sse2")]
    #[allow(unused_unsafe)]
    pub unsafe fn fma_sse2(acc: __m128, a: __m128, b: __m128) -> __m128 {
        // SAFETY: SSE2 is part of the x86_64 baseline.
        unsafe { _mm_add_ps(acc, _mm_mul_ps(a, b)) }
    }
    microkernel!(#[target_feature(enable = "sse2")] tile_sse2_6x8, __m128, 4, 6, 2,
        zero: _mm_setzero_ps(), load: _mm_loadu_ps, store: _mm_storeu_ps, splat: _mm_set1_ps,
        add: _mm_add_ps, fma: fma_sse2);
}

/// The own microkernel of `isa` (levels without one use the `gemm` crate, [`sgemm`]).
fn kernel(isa: Isa) -> Kernel {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => Kernel {
            mr: 6,
            nr: 8,
            tile: x86::tile_sse2_6x8,
        },
        _ => Kernel {
            mr: 4,
            nr: 4,
            tile: scalar::tile_4x4,
        },
    }
}

thread_local! {
    /// Packing buffers, reused by every GEMM on this thread.
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Floats a row-major `rows x cols` operand with row stride `ld` spans.
fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

/// `c[m, n] = a[m, k] * b[k, n]` (row-major, row strides `lda`, `ldb`, `ldc`) with the
/// microkernel of `isa`, which must be one of [`super::isa::supported`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm(
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
    if lda < k
        || ldb < n
        || ldc < n
        || a.len() < span(m, k, lda)
        || b.len() < span(k, n, ldb)
        || c.len() < span(m, n, ldc)
    {
        return Err(backend_err(format!(
            "gemm {m}x{k}x{n}: operand buffers too small"
        )));
    }
    if !super::isa::supported().contains(&isa) {
        return Err(backend_err(format!(
            "gemm: this CPU cannot run the {} kernels",
            isa.name()
        )));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        for row in c.chunks_mut(ldc).take(m) {
            row[..n].fill(0.0);
        }
        return Ok(());
    }
    if matches!(isa, Isa::Avx512 | Isa::Avx2 | Isa::Neon) {
        // SAFETY: the checks above keep every element the strides address inside the slices;
        // `c` is exclusively borrowed, so it cannot alias `a` or `b`.
        unsafe {
            crate_gemm(
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
        return Ok(());
    }
    let kern = kernel(isa);
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut bufs) => {
            let (ap, bp) = &mut *bufs;
            blocked(kern, m, k, n, a, lda, b, ldb, c, ldc, ap, bp);
        }
        // Only if a GEMM ever ran inside another on one thread: fresh buffers.
        Err(_) => blocked(
            kern,
            m,
            k,
            n,
            a,
            lda,
            b,
            ldb,
            c,
            ldc,
            &mut Vec::new(),
            &mut Vec::new(),
        ),
    });
    Ok(())
}

/// `c = a * b` with the `gemm` crate (its own AVX2/FMA or NEON kernels, one thread).
///
/// # Safety
/// The operands address `m x k`, `k x n` and `m x n` elements with the given row strides, all
/// inside live allocations; `c` does not overlap `a` or `b`; `m, n, k > 0`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn crate_gemm<T: Copy + From<u8> + 'static>(
    m: usize,
    k: usize,
    n: usize,
    a: *const T,
    lda: usize,
    b: *const T,
    ldb: usize,
    c: *mut T,
    ldc: usize,
) {
    // SAFETY: the caller's contract; `read_dst = false` makes `c = 1 * (a * b)` (alpha unused).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c,
            1,
            ldc as isize,
            false,
            a,
            1,
            lda as isize,
            b,
            1,
            ldb as isize,
            T::from(0u8),
            T::from(1u8),
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// Dense `c[m, n] = a[m, k] * b[k, n]` with the kernels of the level named `isa` (one of
/// [`super::supported_isas`]): for benchmarks comparing GEMMs (runtime/examples/gemm_bench.rs);
/// not a stable API.
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn bench_sgemm(
    isa: &str,
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
) -> Result<()> {
    let level = super::isa::supported()
        .iter()
        .copied()
        .find(|i| i.name() == isa)
        .ok_or_else(|| backend_err(format!("gemm: no {isa} kernels on this CPU")))?;
    sgemm(level, m, k, n, a, k, b, n, c, n)
}

/// The blocked loops of [`sgemm`] (operands already checked; `k, m, n > 0`).
#[allow(clippy::too_many_arguments)]
fn blocked(
    kern: Kernel,
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
    ap: &mut Vec<f32>,
    bp: &mut Vec<f32>,
) {
    let (mr, nr) = (kern.mr, kern.nr);
    ap.resize(MC * KC, 0.0);
    bp.resize(NC.min(n.next_multiple_of(nr)) * KC, 0.0);
    let mut edge = [0.0f32; MAX_TILE];
    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            pack_b(&b[pc * ldb..], ldb, kc, jc, nc, nr, bp);
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                pack_a(&a[ic * lda + pc..], lda, mc, kc, mr, ap);
                for jp in 0..nc.div_ceil(nr) {
                    let nn = nr.min(nc - jp * nr);
                    let bpan = &bp[jp * nr * kc..(jp + 1) * nr * kc];
                    for ip in 0..mc.div_ceil(mr) {
                        let mm = mr.min(mc - ip * mr);
                        let apan = &ap[ip * mr * kc..(ip + 1) * mr * kc];
                        let c0 = (ic + ip * mr) * ldc + jc + jp * nr;
                        if mm == mr && nn == nr {
                            // The full tile lies in `c`: rows c0 / ldc .. + mr of the
                            // checked span, columns < n <= ldc.
                            let tile = &mut c[c0..c0 + (mr - 1) * ldc + nr];
                            // SAFETY: `apan` holds kc * mr floats and `bpan` kc * nr; `tile`
                            // covers mr rows of nr floats ldc apart; `kernel` only returns
                            // kernels of supported levels (checked in `sgemm`).
                            unsafe {
                                (kern.tile)(
                                    kc,
                                    apan.as_ptr(),
                                    bpan.as_ptr(),
                                    tile.as_mut_ptr(),
                                    ldc,
                                    pc > 0,
                                )
                            };
                        } else {
                            let t = &mut edge[..mr * nr];
                            // SAFETY: as above, with the scratch tile (mr rows of nr, ld nr).
                            unsafe {
                                (kern.tile)(
                                    kc,
                                    apan.as_ptr(),
                                    bpan.as_ptr(),
                                    t.as_mut_ptr(),
                                    nr,
                                    false,
                                )
                            };
                            for i in 0..mm {
                                let row = &mut c[c0 + i * ldc..c0 + i * ldc + nn];
                                let src = &t[i * nr..i * nr + nn];
                                if pc > 0 {
                                    row.iter_mut().zip(src).for_each(|(d, s)| *d += s);
                                } else {
                                    row.copy_from_slice(src);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Packs rows `0..kc` (from `b`, row stride `ldb`), columns `jc..jc + nc` into panels of
/// `nr` columns, k-major, zero-padded to whole panels.
fn pack_b(b: &[f32], ldb: usize, kc: usize, jc: usize, nc: usize, nr: usize, bp: &mut [f32]) {
    for jp in 0..nc.div_ceil(nr) {
        let j0 = jc + jp * nr;
        let nn = nr.min(nc - jp * nr);
        let panel = &mut bp[jp * nr * kc..(jp + 1) * nr * kc];
        for (p, dst) in panel.chunks_exact_mut(nr).enumerate() {
            let src = &b[p * ldb + j0..p * ldb + j0 + nn];
            dst[..nn].copy_from_slice(src);
            dst[nn..].fill(0.0);
        }
    }
}

/// Packs rows `0..mc` (from `a`, row stride `lda`), columns `0..kc` into panels of `mr` rows,
/// k-major, zero-padded to whole panels.
fn pack_a(a: &[f32], lda: usize, mc: usize, kc: usize, mr: usize, ap: &mut [f32]) {
    for ip in 0..mc.div_ceil(mr) {
        let panel = &mut ap[ip * mr * kc..(ip + 1) * mr * kc];
        for i in 0..mr {
            let r = ip * mr + i;
            if r < mc {
                let row = &a[r * lda..r * lda + kc];
                for (p, &v) in row.iter().enumerate() {
                    panel[p * mr + i] = v;
                }
            } else {
                for p in 0..kc {
                    panel[p * mr + i] = 0.0;
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Deterministic values in [-1, 1) (xorshift).
    pub(crate) fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn reference(
        m: usize,
        k: usize,
        n: usize,
        a: &[f32],
        lda: usize,
        b: &[f32],
        ldb: usize,
    ) -> Vec<f64> {
        let mut c = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| a[i * lda + p] as f64 * b[p * ldb + j] as f64)
                    .sum();
            }
        }
        c
    }

    #[test]
    fn every_level_matches_an_f64_reference_on_odd_shapes() {
        let shapes = [
            (1, 1, 1),
            (1, 7, 1),
            (5, 3, 7),
            (6, 16, 16),
            (7, 17, 33),
            (13, 1, 29),
            (97, 300, 41),
            (50, 600, 965),
            (3, 1000, 2),
            (200, 27, 8),
        ];
        let mut covered = Vec::new();
        for &isa in crate::offload::backends::cpu::isa::supported() {
            for (si, &(m, k, n)) in shapes.iter().enumerate() {
                // Strided operands: lda = k + 3, ldb = n + 1, ldc = n + 2.
                let (lda, ldb, ldc) = (k + 3, n + 1, n + 2);
                let a = values(m * lda, si as u64 + 1);
                let b = values(k * ldb, si as u64 + 100);
                let mut c = vec![f32::NAN; m * ldc];
                sgemm(isa, m, k, n, &a, lda, &b, ldb, &mut c, ldc).unwrap();
                let want = reference(m, k, n, &a, lda, &b, ldb);
                check(isa, (m, k, n), &c, ldc, |i, j| want[i * n + j]);
            }
            covered.push(isa.name());
        }
        // scripts/test.sh reads this line (with --nocapture) and fails when a level the CPU
        // has, per /proc/cpuinfo, is missing from it: a level that never ran checked nothing.
        println!("cpu kernel levels covered: {}", covered.join(" "));
    }

    /// `c` (row stride `ldc`, at least 2 past `n`, NaN-filled before the GEMM) holds `want`
    /// within the GEMMs' tolerance, and the padding between rows was not written.
    pub(crate) fn check(
        isa: Isa,
        (m, k, n): (usize, usize, usize),
        c: &[f32],
        ldc: usize,
        want: impl Fn(usize, usize) -> f64,
    ) {
        let tol = 1e-5 * (k as f64).sqrt().max(1.0) * 4.0;
        for i in 0..m {
            for j in 0..n {
                let (got, w) = (c[i * ldc + j] as f64, want(i, j));
                assert!(
                    (got - w).abs() <= tol,
                    "{} {m}x{k}x{n} at ({i},{j}): {got} vs {w}",
                    isa.name()
                );
            }
            if i + 1 < m {
                assert!(c[i * ldc + n].is_nan() && c[i * ldc + n + 1].is_nan());
            }
        }
    }

    #[test]
    fn k_zero_gives_zeros_and_bad_operands_are_errors() {
        for &isa in crate::offload::backends::cpu::isa::supported() {
            let mut c = vec![f32::NAN; 6];
            sgemm(isa, 2, 0, 3, &[], 0, &[], 3, &mut c, 3).unwrap();
            assert!(c.iter().all(|&v| v == 0.0));
            assert!(sgemm(isa, 2, 2, 3, &[0.0; 3], 2, &[0.0; 6], 3, &mut c, 3).is_err());
            assert!(sgemm(isa, 2, 2, 3, &[0.0; 4], 2, &[0.0; 6], 3, &mut c[..5], 3).is_err());
            assert!(sgemm(isa, 2, 2, 3, &[0.0; 4], 1, &[0.0; 6], 3, &mut c, 3).is_err());
        }
    }
}
