//! GEMM against a constant right-hand operand packed once, with the bias and clamp applied as
//! the result is stored (docs/cpu-kernels.md, "Pre-packed weights").
//!
//! `C[m, n] = A[m, k] * B[k, n] (+ bias[n], clamped)`, row-major. `B` is a convolution's or
//! dense layer's weight: it is packed when the subgraph is prepared, not on every call (the
//! `gemm` crate repacks both operands on each call: 9-13% of a ResNet-50 or MobileNetV2 run).
//! `A` (the input pixels or the im2col block) is read in place: the microkernel broadcasts one
//! element of each of its `MR` rows per step, so rows only need to be contiguous along `k`.
//!
//! Packed layout: `k` is cut into blocks of `kc` rows; inside a block, the columns (padded
//! with zeros to whole vectors) are cut into panels at most `nr` wide, each stored k-major
//! (`kc` rows of the panel's width). One panel of one block (`kc * nr` floats: 32 KiB for
//! 16-float panels, 128 KiB for AVX-512's 64-float ones) stays in the L1 or L2 cache while every
//! row tile of `A` passes over it.
//!
//! The microkernel keeps an `MR x width` tile of `C` in vector registers: the accumulator
//! arrays below are plain Rust, unrolled and kept in registers by the compiler inside each
//! level's `#[target_feature]` wrapper, with `f32::mul_add` (one FMA instruction at these
//! levels; only levels with FMA use this path).

use super::backend_err;
use super::isa::Isa;
use crate::error::Result;

/// Rows of `A` per microkernel call.
const MR: usize = 6;

/// Rows of `k` per block: the `C` tile stays in registers for this many steps before it is
/// stored (and loaded again for the next block). With panels of up to 64 floats (AVX-512),
/// blocks of 128 rows (the earlier 32 KiB panels, sized for the L1 cache) cost 3-7% of a 3x3
/// convolution in those stores on a Zen 4 core; its panel of 128 KiB streams from the L2 cache
/// at the kernel's full rate (docs/cpu-kernels.md, "Pre-packed weights"). AVX2's and NEON's
/// 16-float panels had 512-row blocks already.
const KC: usize = 512;

/// What is done to each finished element: `+ bias[column]`, then clamped to `[lo, hi]`
/// (infinite bounds for no clamp; a NaN passes through, as in the model).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Epilogue<'a> {
    pub bias: Option<&'a [f32]>,
    pub lo: f32,
    pub hi: f32,
}

impl Epilogue<'_> {
    /// No bias, no clamp.
    pub(crate) const NONE: Epilogue<'static> = Epilogue {
        bias: None,
        lo: f32::NEG_INFINITY,
        hi: f32::INFINITY,
    };
}

/// `B[k, n]` packed for [`gemm`] with the kernels of one level.
#[derive(Debug)]
pub(crate) struct PackedB {
    isa: Isa,
    k: usize,
    n: usize,
    /// `n` rounded up to whole vectors.
    np: usize,
    /// Widest panel, in floats.
    nr: usize,
    /// Rows per block.
    kc: usize,
    data: Vec<f32>,
}

/// Vector width in floats and widest panel (in vectors) of the levels with a packed kernel.
fn shape_of(isa: Isa) -> Option<(usize, usize)> {
    match isa {
        #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
        Isa::Avx512 => Some((16, 4)),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => Some((8, 2)),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => Some((4, 4)),
        _ => None,
    }
}

/// Whether `isa` has packed kernels (AVX-512, AVX2 + FMA, NEON); the others run
/// [`super::gemm::sgemm`].
pub(crate) fn available(isa: Isa) -> bool {
    shape_of(isa).is_some() && super::isa::supported().contains(&isa)
}

impl PackedB {
    /// Pack row-major `b[k, n]` (row stride `ldb`) for the kernels of `isa`; `None` when that
    /// level has none ([`available`]) or `b` is too short.
    pub(crate) fn new(isa: Isa, b: &[f32], k: usize, n: usize, ldb: usize) -> Option<PackedB> {
        if ldb < n || b.len() < span(k, n, ldb) {
            return None;
        }
        Self::from_rows(isa, k, n, |r, row| {
            row.copy_from_slice(&b[r.0 * ldb + r.1..][..row.len()])
        })
    }

    /// [`PackedB::new`] of a `b[k, n]` that is never held whole: `fill((i, j), row)` writes
    /// `b[i, j..j + row.len()]` into `row` (a Winograd weight is made this way, straight into
    /// its packed form).
    pub(crate) fn from_rows(
        isa: Isa,
        k: usize,
        n: usize,
        mut fill: impl FnMut((usize, usize), &mut [f32]),
    ) -> Option<PackedB> {
        let (lanes, nv) = shape_of(isa)?;
        if !available(isa) {
            return None;
        }
        let nr = lanes * nv;
        let np = n.next_multiple_of(lanes);
        let kc = KC;
        let mut data = vec![0.0f32; k * np];
        for pc in (0..k).step_by(kc) {
            let kcb = kc.min(k - pc);
            for j0 in (0..np).step_by(nr) {
                let pw = nr.min(np - j0);
                let cols = pw.min(n.saturating_sub(j0));
                let panel = &mut data[pc * np + kcb * j0..][..kcb * pw];
                for (p, dst) in panel.chunks_exact_mut(pw).enumerate() {
                    fill((pc + p, j0), &mut dst[..cols]);
                }
            }
        }
        Some(PackedB {
            isa,
            k,
            n,
            np,
            nr,
            kc,
            data,
        })
    }

    pub(crate) fn k(&self) -> usize {
        self.k
    }

    pub(crate) fn n(&self) -> usize {
        self.n
    }
}

/// Floats a row-major `rows x cols` operand with row stride `ld` spans.
fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

/// One microkernel call: `rows <= MR` rows of `C` (from `a[i]`), `cols <= NR` columns.
struct TileArgs {
    kc: usize,
    a: [*const f32; MR],
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    /// Add to what `C` holds (a later block of `k`).
    accumulate: bool,
    /// Apply the epilogue (the last block of `k`): `bias` points at `cols` floats or is null.
    finish: bool,
    bias: *const f32,
    lo: f32,
    hi: f32,
}

/// One microkernel call whose rows of `A` are each a list of equal pieces ("taps") instead of
/// one run of `k` floats: the block `k0..k0 + t.kc` of row `i` is read from the taps at
/// `rows[i]` (a convolution reads its input pixels in place, [`gemm_taps`]).
struct TapArgs {
    /// `t.a` is unused.
    t: TileArgs,
    rows: [*const &'static [f32]; MR],
    k0: usize,
    tap_len: usize,
}

/// The vector operations a microkernel needs, for one register type.
pub(super) trait Vector: Copy {
    /// Floats per register.
    const W: usize;
    /// # Safety (all methods)
    /// The CPU has the type's target features; pointers address `W` floats.
    unsafe fn zero() -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn store(p: *mut f32, v: Self);
    unsafe fn splat(x: f32) -> Self;
    /// `acc + a * b`, fused.
    unsafe fn fma(acc: Self, a: Self, b: Self) -> Self;
    unsafe fn add(a: Self, b: Self) -> Self;
    /// `v` clamped to `[lo, hi]`, a NaN `v` kept (as the scalar `if v < lo { lo } else { v }`).
    unsafe fn clamp(v: Self, lo: Self, hi: Self) -> Self;
    /// The first `n` floats at `p` (`n < W`; `p` addresses `n` floats), zeros after.
    unsafe fn load_part(p: *const f32, n: usize) -> Self;
    /// Store the first `n` lanes of `v` (`n < W`) to `p` (`n` floats), nothing else.
    unsafe fn store_part(p: *mut f32, v: Self, n: usize);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Vector;
    use std::arch::x86_64::*;

    // SAFETY (every function below): the trait's contract; `maxps(lo, v)` returns its second
    // operand when either is NaN, which keeps a NaN `v`.
    // AVX-512 intrinsics are stable from Rust 1.89, which the `avx512` feature requires on
    // x86_64 (docs/cpu-kernels.md); builds for 1.85 leave the feature off.
    #[cfg(feature = "avx512")]
    #[allow(clippy::incompatible_msrv)]
    impl Vector for __m512 {
        const W: usize = 16;
        #[inline(always)]
        unsafe fn zero() -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm512_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm512_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: Self) {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm512_storeu_ps(p, v) }
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm512_set1_ps(x) }
        }
        #[inline(always)]
        unsafe fn fma(acc: Self, a: Self, b: Self) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm512_fmadd_ps(a, b, acc) }
        }
        #[inline(always)]
        unsafe fn add(a: Self, b: Self) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm512_add_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn clamp(v: Self, lo: Self, hi: Self) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm512_min_ps(hi, _mm512_max_ps(lo, v)) }
        }
        #[inline(always)]
        unsafe fn load_part(p: *const f32, n: usize) -> Self {
            // SAFETY: the trait contract; the mask reads only the first `n` floats.
            unsafe { _mm512_maskz_loadu_ps(((1u32 << n) - 1) as u16, p) }
        }
        #[inline(always)]
        unsafe fn store_part(p: *mut f32, v: Self, n: usize) {
            // SAFETY: the trait contract; the mask writes only the first `n` floats.
            unsafe { _mm512_mask_storeu_ps(p, ((1u32 << n) - 1) as u16, v) }
        }
    }

    impl Vector for __m256 {
        const W: usize = 8;
        #[inline(always)]
        unsafe fn zero() -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm256_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm256_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: Self) {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm256_storeu_ps(p, v) }
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm256_set1_ps(x) }
        }
        #[inline(always)]
        unsafe fn fma(acc: Self, a: Self, b: Self) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm256_fmadd_ps(a, b, acc) }
        }
        #[inline(always)]
        unsafe fn add(a: Self, b: Self) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm256_add_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn clamp(v: Self, lo: Self, hi: Self) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { _mm256_min_ps(hi, _mm256_max_ps(lo, v)) }
        }
        #[inline(always)]
        unsafe fn load_part(p: *const f32, n: usize) -> Self {
            // SAFETY: the trait contract; lanes whose mask is clear are not read.
            unsafe { _mm256_maskload_ps(p, lanes_below(n)) }
        }
        #[inline(always)]
        unsafe fn store_part(p: *mut f32, v: Self, n: usize) {
            // SAFETY: the trait contract; lanes whose mask is clear are not written.
            unsafe { _mm256_maskstore_ps(p, lanes_below(n), v) }
        }
    }

    /// An AVX2 lane mask with the lanes below `n` set.
    #[inline(always)]
    unsafe fn lanes_below(n: usize) -> __m256i {
        // SAFETY: AVX2 is present (the caller's trait contract).
        unsafe {
            _mm256_cmpgt_epi32(
                _mm256_set1_epi32(n as i32),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            )
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use super::Vector;
    use std::arch::aarch64::*;

    // SAFETY (every function below): the trait's contract. `fmax`/`fmin` return NaN when either
    // operand is NaN, which keeps a NaN `v` (the bounds are never NaN).
    impl Vector for float32x4_t {
        const W: usize = 4;
        #[inline(always)]
        unsafe fn zero() -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { vdupq_n_f32(0.0) }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { vld1q_f32(p) }
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: Self) {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { vst1q_f32(p, v) }
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { vdupq_n_f32(x) }
        }
        #[inline(always)]
        unsafe fn fma(acc: Self, a: Self, b: Self) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { vfmaq_f32(acc, a, b) }
        }
        #[inline(always)]
        unsafe fn add(a: Self, b: Self) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { vaddq_f32(a, b) }
        }
        #[inline(always)]
        unsafe fn clamp(v: Self, lo: Self, hi: Self) -> Self {
            // SAFETY: the trait contract (features present, pointers valid).
            unsafe { vminq_f32(hi, vmaxq_f32(lo, v)) }
        }
        #[inline(always)]
        unsafe fn load_part(p: *const f32, n: usize) -> Self {
            let mut tmp = [0.0f32; 4];
            // SAFETY: the trait contract: `p` addresses `n < 4` floats.
            unsafe {
                std::ptr::copy_nonoverlapping(p, tmp.as_mut_ptr(), n);
                vld1q_f32(tmp.as_ptr())
            }
        }
        #[inline(always)]
        unsafe fn store_part(p: *mut f32, v: Self, n: usize) {
            let mut tmp = [0.0f32; 4];
            // SAFETY: the trait contract: `p` addresses `n < 4` floats.
            unsafe {
                vst1q_f32(tmp.as_mut_ptr(), v);
                std::ptr::copy_nonoverlapping(tmp.as_ptr(), p, n);
            }
        }
    }
}

/// NEON's [`products`]: `A` read four steps of `k` at a time.
///
/// The generic loop broadcasts one element of each row per step (`ld1r`), and on Arm cores a
/// broadcast load takes a vector pipe the FMAs need: it caps the 6x8 tile at 67% of the FMA
/// rate in `llvm-mca`'s models (docs/cpu-kernels.md, "Arm kernels against the core's peak").
/// Here each row's next four elements come in one 128-bit load and each FMA takes its `A`
/// operand from a lane (`fmla v.4s, v.4s, v.s[L]`), so six loads of `A` serve four steps. The
/// sums are formed in the same order as [`tile`]'s (one FMA per step of `k`, in order), so the
/// results are the same bits.
///
/// # Safety
/// [`products`]' contract, on a CPU with NEON (`V` is NEON's `float32x4_t`: the parameter only
/// gives this function [`products`]' shape for `level!`).
#[cfg(target_arch = "aarch64")]
#[inline(always)]
unsafe fn products_lanes<V: Vector, const NV: usize>(
    mut acc: [[std::arch::aarch64::float32x4_t; NV]; MR],
    a: &[*const f32; MR],
    b: *const f32,
    len: usize,
) -> [[std::arch::aarch64::float32x4_t; NV]; MR] {
    use std::arch::aarch64::*;
    // One step of `k`: lane `L` of each row's loaded `A` against the panel row at `b`.
    #[inline(always)]
    unsafe fn step<const L: i32, const NV: usize>(
        acc: &mut [[float32x4_t; NV]; MR],
        av: &[float32x4_t; MR],
        b: *const f32,
    ) {
        // SAFETY: `b` addresses `NV * 4` floats (the caller's panel row).
        unsafe {
            for j in 0..NV {
                let bj = vld1q_f32(b.add(j * 4));
                for (row, &a) in acc.iter_mut().zip(av) {
                    row[j] = vfmaq_laneq_f32::<L>(row[j], bj, a);
                }
            }
        }
    }
    // SAFETY: every access below lies in the ranges the caller guarantees: `a[i]` addresses
    // `len` floats, and the four-step loop reads `A` only below `len & !3`; `b` advances one
    // panel row (`NV * 4` floats) per step, `len` rows in all.
    unsafe {
        let mut b = b;
        let whole = len & !3;
        let row = NV * 4;
        let mut p = 0;
        while p < whole {
            let av: [float32x4_t; MR] = std::array::from_fn(|i| vld1q_f32(a[i].add(p)));
            step::<0, NV>(&mut acc, &av, b);
            step::<1, NV>(&mut acc, &av, b.add(row));
            step::<2, NV>(&mut acc, &av, b.add(2 * row));
            step::<3, NV>(&mut acc, &av, b.add(3 * row));
            b = b.add(4 * row);
            p += 4;
        }
        for p in whole..len {
            for j in 0..NV {
                let bj = vld1q_f32(b.add(j * 4));
                for (row, a) in acc.iter_mut().zip(a) {
                    row[j] = vfmaq_n_f32(row[j], bj, *a.add(p));
                }
            }
            b = b.add(row);
        }
        acc
    }
}

/// [`tile`] with NEON's [`products_lanes`].
///
/// # Safety
/// [`tile`]'s contract, on a CPU with NEON.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
unsafe fn tile_lanes<V: Vector, const NV: usize>(t: &TileArgs) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        let acc = [[std::arch::aarch64::vdupq_n_f32(0.0); NV]; MR];
        let acc = products_lanes::<V, NV>(acc, &t.a, t.b, t.kc);
        store_tile(acc, t);
    }
}

/// [`tile_taps`] with NEON's [`products_lanes`].
///
/// # Safety
/// [`tile_taps`]'s contract, on a CPU with NEON.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
unsafe fn tile_taps_lanes<V: Vector, const NV: usize>(x: &TapArgs) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        let acc = [[std::arch::aarch64::vdupq_n_f32(0.0); NV]; MR];
        let acc = over_taps(x, acc, NV * 4, |acc, a, b, len| {
            products_lanes::<V, NV>(acc, a, b, len)
        });
        store_tile(acc, &x.t);
    }
}

/// `C[rows, cols] (+)= A[rows, kc] * Bpanel[kc, NV * V::W]`, then the epilogue.
///
/// The accumulators are only ever indexed by constants (the loops below unroll), so they stay
/// in registers; an edge tile is stored with masked (partial) vector loads and stores.
///
/// # Safety
/// `a[i]` addresses `kc` readable floats for every `i < MR`, `b` `kc * NV * V::W`; `c`
/// addresses `rows` rows of `cols` writable floats `ldc` apart, overlapping none of them;
/// `bias` is null or addresses `cols` floats. The CPU has `V`'s target
/// features.
#[inline(always)]
// NEON's level runs `tile_lanes` instead; the x86 levels run this one.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
unsafe fn tile<V: Vector, const NV: usize>(t: &TileArgs) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        let acc = products::<V, NV>([[V::zero(); NV]; MR], &t.a, t.b, t.kc);
        store_tile(acc, t);
    }
}

/// `acc + A[MR, len] * Bpanel[len, NV * V::W]`: row `i` of `A` from `a[i]`, the panel's rows
/// from `b`, one broadcast element of each row per step of `k`. The tile goes in and out by
/// value (never by address: see [`store_tile`]).
///
/// # Safety
/// `a[i]` addresses `len` readable floats for every `i < MR`, `b` `len * NV * V::W`; the CPU
/// has `V`'s target features.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
unsafe fn products<V: Vector, const NV: usize>(
    mut acc: [[V; NV]; MR],
    a: &[*const f32; MR],
    b: *const f32,
    len: usize,
) -> [[V; NV]; MR] {
    // SAFETY: every access below lies in the ranges the caller guarantees.
    unsafe {
        let mut b = b;
        for p in 0..len {
            let mut bv = [V::zero(); NV];
            for (j, v) in bv.iter_mut().enumerate() {
                *v = V::load(b.add(j * V::W));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let av = V::splat(*a[i].add(p));
                for (r, &bj) in row.iter_mut().zip(&bv) {
                    *r = V::fma(*r, av, bj);
                }
            }
            b = b.add(NV * V::W);
        }
        acc
    }
}

/// [`tile`] over taps: the block `x.k0..x.k0 + x.t.kc` of `k` crosses one or more taps, and
/// each stretch inside one tap is one [`products`] call on pointers into the rows' taps.
///
/// # Safety
/// [`tile`]'s contract for `x.t`, except for `A`: `x.rows[i]` addresses the taps of row `i`
/// (at least `(x.k0 + x.t.kc).div_ceil(x.tap_len)` of them, each `x.tap_len` floats).
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
unsafe fn tile_taps<V: Vector, const NV: usize>(x: &TapArgs) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        let acc = over_taps(x, [[V::zero(); NV]; MR], NV * V::W, |acc, a, b, len| {
            products::<V, NV>(acc, a, b, len)
        });
        store_tile(acc, &x.t);
    }
}

/// Runs `products(acc, a, b, len)` over the stretches of `x`'s block of `k` that lie in one
/// tap each: `a` points into every row's tap, `b` at the panel's row for that stretch (`row`
/// floats per panel row).
///
/// # Safety
/// [`tile_taps`]' contract; `products` reads `len` floats from each `a[i]` and `len` panel
/// rows from `b`.
#[inline(always)]
unsafe fn over_taps<A>(
    x: &TapArgs,
    mut acc: A,
    row: usize,
    products: impl Fn(A, &[*const f32; MR], *const f32, usize) -> A,
) -> A {
    // SAFETY: the caller's contract: tap `k / tap_len` of each row exists and holds `tap_len`
    // floats, so `ci + len <= tap_len` floats are readable from `a[i]`; the panel holds
    // `kc` rows of `row` floats, and the stretches sum to `kc`.
    unsafe {
        let (mut k, end) = (x.k0, x.k0 + x.t.kc);
        let mut b = x.t.b;
        while k < end {
            let (tap, ci) = (k / x.tap_len, k % x.tap_len);
            let len = (x.tap_len - ci).min(end - k);
            let a: [*const f32; MR] =
                std::array::from_fn(|i| (*x.rows[i].add(tap)).as_ptr().add(ci));
            acc = products(acc, &a, b, len);
            b = b.add(len * row);
            k += len;
        }
        acc
    }
}

/// Write a finished tile to `C`: whole vectors, and at the right edge the tile's valid part
/// with masked (partial) loads and stores; rows past `t.rows` are not stored.
///
/// # Safety
/// [`tile`]'s contract for `t`.
#[inline(always)]
unsafe fn store_tile<V: Vector, const NV: usize>(acc: [[V; NV]; MR], t: &TileArgs) {
    // SAFETY: every access below lies in the ranges the caller guarantees: row `i < t.rows`
    // of `C` holds `t.cols` floats from `t.c + i * t.ldc`, and `bias` (when not null)
    // `t.cols` floats; a vector `j` is stored whole only when `(j + 1) * W <= t.cols`, else
    // only its first `t.cols - j * W` lanes.
    unsafe {
        // The accumulators are only ever indexed by constants (the loops unroll, and iterate
        // `acc` by value): indexing it by a run-time value makes the compiler keep the whole
        // tile on the stack, stored to on every step of `k` (measured 3x slower). Given
        // `acc`'s address, LLVM kept the tile in memory in a build with one codegen unit (all
        // 24 AVX-512 accumulators stored on every step of `k`, the whole `cpu` backend
        // 1.7-2.6x slower), although not in the default build.
        let whole = t.rows == MR && t.cols == NV * V::W;
        let (lo, hi) = (V::splat(t.lo), V::splat(t.hi));
        let with_bias = t.finish && !t.bias.is_null();
        // Lanes of vector `j` inside the tile's columns: `W` (whole), fewer, or none.
        let lanes = |j: usize| t.cols.saturating_sub(j * V::W).min(V::W);
        let mut bias = [V::zero(); NV];
        if with_bias {
            for (j, v) in bias.iter_mut().enumerate() {
                let n = lanes(j);
                if n == V::W {
                    *v = V::load(t.bias.add(j * V::W));
                } else if n > 0 {
                    *v = V::load_part(t.bias.add(j * V::W), n);
                }
            }
        }
        for (i, row) in acc.into_iter().enumerate() {
            if !whole && i >= t.rows {
                break;
            }
            for (j, r) in row.into_iter().enumerate() {
                let p = t.c.add(i * t.ldc + j * V::W);
                let n = if whole { V::W } else { lanes(j) };
                if n == 0 {
                    break;
                }
                let mut v = r;
                if t.accumulate {
                    v = V::add(
                        v,
                        if n == V::W {
                            V::load(p)
                        } else {
                            V::load_part(p, n)
                        },
                    );
                }
                if t.finish {
                    if with_bias {
                        v = V::add(v, bias[j]);
                    }
                    v = V::clamp(v, lo, hi);
                }
                if n == V::W {
                    V::store(p, v);
                } else {
                    V::store_part(p, v, n);
                }
            }
        }
    }
}

/// Store one finished row `acc` into `row` (the `k == 0` case: no products).
fn store_row(row: &mut [f32], bias: Option<&[f32]>, lo: f32, hi: f32) {
    for (j, d) in row.iter_mut().enumerate() {
        let v = bias.map_or(0.0, |b| b[j]);
        let v = if v < lo { lo } else { v };
        *d = if v > hi { hi } else { v };
    }
}

/// A level's microkernels, indexed by panel width in vectors minus one.
type Tile = unsafe fn(&TileArgs);

macro_rules! level {
    ($modname:ident, $tapsname:ident, $features:literal, $v:ty, $tile:ident, $taps:ident,
     $($name:ident = $nv:literal),+) => {
        level!(@one $modname, $features, $v, $tile, TileArgs, $($name = $nv),+);
        level!(@one $tapsname, $features, $v, $taps, TapArgs, $($name = $nv),+);
    };
    (@one $modname:ident, $features:literal, $v:ty, $tile:ident, $args:ident,
     $($name:ident = $nv:literal),+) => {
        mod $modname {
            use super::{$tile, $args};
            $(
                /// # Safety
                /// The contract of the function wrapped, on a CPU with this level's features.
                #[target_feature(enable = $features)]
                pub(super) unsafe fn $name(t: &$args) {
                    // SAFETY: the caller's contract, passed on.
                    unsafe { $tile::<$v, $nv>(t) }
                }
            )+
        }
    };
}

/// A level's microkernels over taps ([`gemm_taps`]), indexed like [`Tile`]s.
type TapTile = unsafe fn(&TapArgs);

// Each level: its kernels reading rows of `A` (`tile`) and reading taps (`tile_taps`).
#[cfg(all(target_arch = "x86_64", feature = "avx512"))]
level!(
    avx512,
    avx512_taps,
    "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma",
    std::arch::x86_64::__m512,
    tile,
    tile_taps,
    t16 = 1,
    t32 = 2,
    t48 = 3,
    t64 = 4
);
#[cfg(target_arch = "x86_64")]
level!(
    avx2,
    avx2_taps,
    "avx2,fma",
    std::arch::x86_64::__m256,
    tile,
    tile_taps,
    t8 = 1,
    t16 = 2
);
#[cfg(target_arch = "aarch64")]
level!(
    neon,
    neon_taps,
    "neon",
    std::arch::aarch64::float32x4_t,
    tile_lanes,
    tile_taps_lanes,
    t4 = 1,
    t8 = 2,
    t12 = 3,
    t16 = 4
);

/// The microkernels of `isa`, narrowest first.
fn tiles(isa: Isa) -> &'static [Tile] {
    match isa {
        #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
        Isa::Avx512 => &[avx512::t16, avx512::t32, avx512::t48, avx512::t64],
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => &[avx2::t8, avx2::t16],
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => &[neon::t4, neon::t8, neon::t12, neon::t16],
        _ => &[],
    }
}

/// The microkernels over taps of `isa`, narrowest first.
fn tap_tiles(isa: Isa) -> &'static [TapTile] {
    match isa {
        #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
        Isa::Avx512 => &[
            avx512_taps::t16,
            avx512_taps::t32,
            avx512_taps::t48,
            avx512_taps::t64,
        ],
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => &[avx2_taps::t8, avx2_taps::t16],
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => &[neon_taps::t4, neon_taps::t8, neon_taps::t12, neon_taps::t16],
        _ => &[],
    }
}

/// `c[m, n] = a[m, k] * b` then the epilogue, `a` row-major with row stride `lda`, `c` with
/// `ldc`; `k` and `n` are the packed operand's.
pub(crate) fn gemm(
    m: usize,
    a: &[f32],
    lda: usize,
    b: &PackedB,
    c: &mut [f32],
    ldc: usize,
    epi: Epilogue<'_>,
) -> Result<()> {
    let k = b.k;
    if lda < k || a.len() < span(m, k, lda) {
        return Err(backend_err(format!(
            "packed gemm {m}x{k}x{}: operand buffers too small",
            b.n
        )));
    }
    let kernels = tiles(b.isa);
    each_tile(m, b, c, ldc, epi, kernels.len(), |w, i0, mut args| {
        // Rows past `m` repeat the last one (computed, not stored).
        let pc = args.k0;
        args.t.a = std::array::from_fn(|i| a[(i0 + i.min(args.t.rows - 1)) * lda + pc..].as_ptr());
        // SAFETY: each `a` row pointer starts `pc` floats into a row `< m` of `a`, which
        // holds `k >= pc + kc` floats (checked above); the rest is `each_tile`'s promise.
        unsafe { kernels[w](&args.t) };
    })
}

/// [`gemm`] with each row of `A` given as `taps` equal pieces: row `i` is the concatenation
/// of `rows[i * taps..(i + 1) * taps]`, each `k / taps` floats. A convolution passes slices of
/// its input pixels (and of a zero row for the padding) instead of copying them into im2col
/// rows (docs/cpu-kernels.md, "Convolutions without im2col").
pub(crate) fn gemm_taps(
    m: usize,
    rows: &[&[f32]],
    taps: usize,
    b: &PackedB,
    c: &mut [f32],
    ldc: usize,
    epi: Epilogue<'_>,
) -> Result<()> {
    let k = b.k;
    let tap_len = k.checked_div(taps).unwrap_or(0);
    if taps == 0
        || tap_len * taps != k
        || rows.len() != m * taps
        || rows.iter().any(|r| r.len() != tap_len)
    {
        return Err(backend_err(format!(
            "packed gemm {m}x{k}x{}: {} taps do not make rows of {k} in {taps} pieces",
            b.n,
            rows.len()
        )));
    }
    let kernels = tap_tiles(b.isa);
    each_tile(m, b, c, ldc, epi, kernels.len(), |w, i0, args| {
        let last = args.t.rows - 1;
        let x = TapArgs {
            rows: std::array::from_fn(|i| {
                rows[(i0 + i.min(last)) * taps..]
                    .as_ptr()
                    .cast::<&'static [f32]>()
            }),
            tap_len,
            ..args
        };
        // SAFETY: row `i0 + i < m` has `taps` slices of `tap_len` floats from its pointer
        // (checked above), covering `k >= k0 + kc`; the slices borrow live buffers for the
        // whole call (the 'static in the pointer type is never used to keep them); the rest
        // is `each_tile`'s promise.
        unsafe { kernels[w](&x) };
    })
}

/// The loops [`gemm`] and [`gemm_taps`] share: checks `c`, the bias and the CPU, handles
/// the empty cases, and calls `call(kernel, i0, args)` for each tile of `C` (rows from `i0`)
/// of each block of `k` and panel of `B`, in the order the kernels need (`k` blocks outermost:
/// a later block adds to what the earlier ones stored). `args.t.a` and `args.rows` are left
/// null for `call` to fill in: it must point them at rows holding `k0 + kc` floats of `A`.
/// `kernel` indexes a level's microkernels by panel width (`kernels` of them).
fn each_tile(
    m: usize,
    b: &PackedB,
    c: &mut [f32],
    ldc: usize,
    epi: Epilogue<'_>,
    kernels: usize,
    mut call: impl FnMut(usize, usize, TapArgs),
) -> Result<()> {
    let (k, n) = (b.k, b.n);
    if ldc < n || c.len() < span(m, n, ldc) || epi.bias.is_some_and(|bias| bias.len() < n) {
        return Err(backend_err(format!(
            "packed gemm {m}x{k}x{n}: operand buffers too small"
        )));
    }
    let (lanes, nv) = shape_of(b.isa).ok_or_else(|| backend_err("packed gemm: no kernels"))?;
    if !available(b.isa) || kernels != nv {
        return Err(backend_err(format!(
            "packed gemm: this CPU cannot run the {} kernels",
            b.isa.name()
        )));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        for row in c.chunks_mut(ldc).take(m) {
            store_row(&mut row[..n], epi.bias, epi.lo, epi.hi);
        }
        return Ok(());
    }
    for pc in (0..k).step_by(b.kc) {
        let kcb = b.kc.min(k - pc);
        for j0 in (0..b.np).step_by(b.nr) {
            let pw = b.nr.min(b.np - j0);
            let cols = pw.min(n - j0);
            let panel = &b.data[pc * b.np + kcb * j0..][..kcb * pw];
            let bias = match epi.bias {
                Some(bias) => bias[j0..j0 + cols].as_ptr(),
                None => std::ptr::null(),
            };
            for i0 in (0..m).step_by(MR) {
                let rows = MR.min(m - i0);
                let dst = &mut c[i0 * ldc + j0..][..span(rows, cols, ldc)];
                // `panel` holds `kcb * pw` floats, `pw` being the kernel's width; `dst` spans
                // `rows` rows of `cols` floats `ldc` apart and is exclusively borrowed; `bias`
                // is null or `cols` floats; `available` confirmed the CPU has the features.
                let args = TapArgs {
                    t: TileArgs {
                        kc: kcb,
                        a: [std::ptr::null(); MR],
                        b: panel.as_ptr(),
                        c: dst.as_mut_ptr(),
                        ldc,
                        rows,
                        cols,
                        accumulate: pc > 0,
                        finish: pc + kcb == k,
                        bias,
                        lo: epi.lo,
                        hi: epi.hi,
                    },
                    rows: [std::ptr::null(); MR],
                    k0: pc,
                    tap_len: 0,
                };
                call(pw / lanes - 1, i0, args);
            }
        }
    }
    Ok(())
}

/// A weight packed for the benchmarks comparing GEMMs (runtime/examples/gemm_bench.rs); not a
/// stable API.
#[doc(hidden)]
pub struct BenchPacked(PackedB);

impl BenchPacked {
    /// `b[k, n]` (dense, row-major) packed for the level named `isa`, if it has packed kernels.
    pub fn new(isa: &str, b: &[f32], k: usize, n: usize) -> Option<BenchPacked> {
        let level = super::isa::supported()
            .iter()
            .copied()
            .find(|i| i.name() == isa)?;
        PackedB::new(level, b, k, n, n).map(BenchPacked)
    }

    /// `c[m, n] = a[m, k] * b`, dense row-major.
    pub fn run(&self, m: usize, a: &[f32], c: &mut [f32]) -> Result<()> {
        gemm(m, a, self.0.k, &self.0, c, self.0.n, Epilogue::NONE)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gemm::tests::{check, values};
    use super::*;

    #[test]
    fn packed_gemm_matches_an_f64_reference_with_bias_and_clamp() {
        let levels: Vec<Isa> = super::super::isa::supported()
            .iter()
            .copied()
            .filter(|&i| available(i))
            .collect();
        // Every level this build can have is reachable on the CPUs CI runs on: at least one.
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        assert!(!levels.is_empty(), "no packed kernels on this CPU");
        let shapes = [
            (1, 1, 1),
            (1, 7, 3),
            (5, 3, 7),
            (6, 16, 16),
            (7, 17, 33),
            (13, 1, 29),
            (97, 300, 41),
            (50, 600, 965),
            (3, 1000, 2),
            (200, 27, 8),
            (12, 64, 64),
            (11, 2100, 70),
            (200, 27, 24),
            (31, 300, 20),
            (8, 5, 57),
        ];
        for &isa in &levels {
            for (si, &(m, k, n)) in shapes.iter().enumerate() {
                let (lda, ldb, ldc) = (k + 3, n + 1, n + 2);
                let a = values(m * lda, si as u64 + 1);
                let b = values(k * ldb, si as u64 + 100);
                let bias = values(n, si as u64 + 200);
                let pb = PackedB::new(isa, &b, k, n, ldb).unwrap();
                for (use_bias, lo, hi) in [
                    (false, f32::NEG_INFINITY, f32::INFINITY),
                    (true, -0.5, 0.75),
                ] {
                    let epi = Epilogue {
                        bias: use_bias.then_some(&bias[..]),
                        lo,
                        hi,
                    };
                    // Past the last row too: the edge tiles' masked stores write nothing there.
                    let mut c = vec![f32::NAN; m * ldc + 80];
                    gemm(m, &a, lda, &pb, &mut c, ldc, epi).unwrap();
                    assert!(c[(m - 1) * ldc + n..].iter().all(|v| v.is_nan()));
                    check(isa, (m, k, n), &c, ldc, |i, j| {
                        let dot: f64 = (0..k)
                            .map(|p| a[i * lda + p] as f64 * b[p * ldb + j] as f64)
                            .sum();
                        let bias = if use_bias { bias[j] as f64 } else { 0.0 };
                        (dot + bias).clamp(lo as f64, hi as f64)
                    });
                }
            }
        }
    }

    /// `gemm_taps` gives `gemm`'s bits when each row of `A` is cut into taps scattered over
    /// a buffer (taps of 1, 7 and 200 floats: stretches inside one block of `k`, crossing
    /// blocks, and blocks inside one tap), on every level with packed kernels; malformed tap
    /// tables are errors.
    #[test]
    fn gemm_over_taps_matches_gemm_on_the_same_rows() {
        for isa in super::super::isa::supported()
            .iter()
            .copied()
            .filter(|&i| available(i))
        {
            for (m, taps, tap_len, n) in [(1, 3, 1, 5), (13, 9, 7, 70), (7, 3, 200, 33)] {
                let k = taps * tap_len;
                let a = values(m * k, 7);
                let b = values(k * n, 8);
                let bias = values(n, 9);
                let pb = PackedB::new(isa, &b, k, n, n).unwrap();
                let epi = Epilogue {
                    bias: Some(&bias),
                    lo: -0.5,
                    hi: 0.75,
                };
                let ldc = n + 3;
                let mut want = vec![f32::NAN; m * ldc];
                gemm(m, &a, k, &pb, &mut want, ldc, epi).unwrap();
                // Each tap copied to its own place in a scattered buffer, last tap first.
                let mut scattered = vec![f32::NAN; 2 * m * k + tap_len];
                let mut at = vec![0; m * taps];
                for (j, slot) in at.iter_mut().enumerate().rev() {
                    let to = (m * taps - 1 - j) * 2 * tap_len + 1;
                    scattered[to..to + tap_len].copy_from_slice(&a[j * tap_len..][..tap_len]);
                    *slot = to;
                }
                let rows: Vec<&[f32]> = at.iter().map(|&s| &scattered[s..s + tap_len]).collect();
                let mut got = vec![f32::NAN; m * ldc];
                gemm_taps(m, &rows, taps, &pb, &mut got, ldc, epi).unwrap();
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        g.to_bits() == w.to_bits() || (i % ldc >= n && g.is_nan()),
                        "{} {m}x{taps}x{tap_len}x{n}: c[{i}] = {g}, want {w}",
                        isa.name()
                    );
                }
                let mut c = vec![0.0; m * ldc];
                let short = &rows[..rows.len() - 1];
                assert!(gemm_taps(m, short, taps, &pb, &mut c, ldc, epi).is_err());
                assert!(gemm_taps(m, &rows, 0, &pb, &mut c, ldc, epi).is_err());
                if taps > 1 {
                    let mut cut = rows.clone();
                    cut[1] = &cut[1][..tap_len - 1];
                    assert!(gemm_taps(m, &cut, taps, &pb, &mut c, ldc, epi).is_err());
                }
            }
        }
    }

    #[test]
    fn short_operands_are_errors() {
        for &isa in super::super::isa::supported() {
            let Some(pb) = PackedB::new(isa, &[0.0; 6], 2, 3, 3) else {
                continue;
            };
            let mut c = vec![0.0; 6];
            assert!(gemm(2, &[0.0; 3], 2, &pb, &mut c, 3, Epilogue::NONE).is_err());
            assert!(gemm(2, &[0.0; 4], 2, &pb, &mut c[..5], 3, Epilogue::NONE).is_err());
            assert!(gemm(2, &[0.0; 4], 1, &pb, &mut c, 3, Epilogue::NONE).is_err());
            let short_bias = Epilogue {
                bias: Some(&[0.0; 2]),
                ..Epilogue::NONE
            };
            assert!(gemm(2, &[0.0; 4], 2, &pb, &mut c, 3, short_bias).is_err());
            assert!(gemm(2, &[0.0; 4], 2, &pb, &mut c, 3, Epilogue::NONE).is_ok());
        }
        assert!(PackedB::new(super::super::isa::current(), &[0.0; 5], 2, 3, 3).is_none());
    }
}
