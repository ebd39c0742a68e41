//! The instruction-set level the cpu backend's kernels use, chosen once per process.
//!
//! Detection runs at first use (`std::is_x86_feature_detected!` on x86_64; NEON is part of the
//! aarch64 base ISA). `MOTE_CPU_ISA` (`avx512`, `avx2`, `sse2`, `neon`, `scalar`) asks for a
//! lower level, for tests and benchmarks: a level the CPU lacks, or an unknown name, is ignored
//! (the detected level stays) and logged. The `avx512` level exists in builds with the `avx512`
//! feature (the default; it needs Rust 1.89 on x86_64): see docs/cpu-kernels.md.

use std::sync::OnceLock;

/// A kernel family. The x86_64 levels are ordered: each runs on any CPU the next one runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Isa {
    /// Plain Rust loops (the compiler may still vectorise them for the build's baseline).
    Scalar,
    /// x86_64 baseline: 128-bit vectors, separate multiply and add.
    Sse2,
    /// 256-bit vectors with fused multiply-add (AVX2 + FMA).
    Avx2,
    /// 512-bit vectors (AVX-512 F, VL, BW and DQ: x86-64-v4) on top of AVX2 + FMA.
    Avx512,
    /// aarch64 Advanced SIMD (128-bit, fused multiply-add).
    Neon,
}

impl Isa {
    /// The name `MOTE_CPU_ISA` and [`isa`] use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Sse2 => "sse2",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Neon => "neon",
        }
    }

    fn parse(s: &str) -> Option<Isa> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "scalar" => Isa::Scalar,
            "sse2" => Isa::Sse2,
            "avx2" => Isa::Avx2,
            "avx512" => Isa::Avx512,
            "neon" => Isa::Neon,
            _ => return None,
        })
    }
}

/// Every level this CPU and this build can run, best first (the last is always `Scalar`).
pub(crate) fn supported() -> &'static [Isa] {
    static LIST: OnceLock<Vec<Isa>> = OnceLock::new();
    LIST.get_or_init(|| {
        let mut v = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            let avx2 =
                std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
            #[cfg(feature = "avx512")]
            if avx2
                && std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512dq")
            {
                v.push(Isa::Avx512);
            }
            if avx2 {
                v.push(Isa::Avx2);
            }
            // SSE2 is part of the x86_64 baseline.
            v.push(Isa::Sse2);
        }
        #[cfg(target_arch = "aarch64")]
        v.push(Isa::Neon);
        v.push(Isa::Scalar);
        v
    })
}

/// The level the kernels use: the best supported one, or `MOTE_CPU_ISA`'s if supported.
pub(crate) fn current() -> Isa {
    static CHOSEN: OnceLock<Isa> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let best = supported()[0];
        let Ok(want) = std::env::var("MOTE_CPU_ISA") else {
            return best;
        };
        match Isa::parse(&want) {
            Some(isa) if supported().contains(&isa) => isa,
            _ => {
                log::warn!(
                    "MOTE_CPU_ISA={want:?} is not one of this CPU's levels {:?}; using {}",
                    supported().iter().map(|i| i.name()).collect::<Vec<_>>(),
                    best.name()
                );
                best
            }
        }
    })
}

/// The SIMD level the cpu backend's kernels run with in this process: `"avx512"` (AVX-512 F,
/// VL, BW, DQ; builds with the `avx512` feature), `"avx2"` (AVX2 + FMA), `"sse2"`, `"neon"` or
/// `"scalar"` (detected once; lowered by the `MOTE_CPU_ISA` environment variable when it names a
/// level this CPU has).
pub fn isa() -> &'static str {
    current().name()
}

/// Every level [`isa`] could report on this CPU with this build, best first.
pub fn supported_isas() -> Vec<&'static str> {
    supported().iter().map(|i| i.name()).collect()
}

/// Run `f` compiled for the chosen level ([`current`]); see [`run_as`].
#[inline(always)]
pub(crate) fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    run_as(current(), f)
}

/// Run `f` compiled for `level` (AVX-512 or AVX2 + FMA) when this CPU supports it, else as
/// built.
///
/// For plain loops (elementwise activations, bias, scale, the direct convolutions): the crate is
/// built for the x86_64 baseline, so the compiler vectorizes them 4 lanes wide without FMA;
/// inlined into this function's AVX2 instance they run 8 lanes wide with FMA, into its AVX-512
/// instance 16 wide. `f` must do its work itself (not hand it to other threads, whose code is
/// compiled separately), and callers mark it `#[inline(always)]`: called from three places here,
/// a large closure is otherwise left out of line, in baseline code (measured: the NHWC depthwise
/// loop lost its AVX2 speed that way).
#[inline(always)]
pub(crate) fn run_as<R>(level: Isa, f: impl FnOnce() -> R) -> R {
    #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
    if level == Isa::Avx512 && supported().contains(&Isa::Avx512) {
        #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
        unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        // SAFETY: `supported()` lists `Avx512` only when it detected AVX-512 F, VL, BW, DQ,
        // AVX2 and FMA on this CPU at run time, which is all `avx512` requires.
        return unsafe { avx512(f) };
    }
    #[cfg(target_arch = "x86_64")]
    if level == Isa::Avx2 && supported().contains(&Isa::Avx2) {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        // SAFETY: `supported()` lists `Avx2` only when it detected AVX2 and FMA on this CPU at
        // run time, which is all `avx2` requires.
        return unsafe { avx2(f) };
    }
    let _ = level;
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_the_choice_is_supported() {
        for &i in supported() {
            assert_eq!(Isa::parse(i.name()), Some(i));
        }
        assert_eq!(supported().last(), Some(&Isa::Scalar));
        assert!(supported().contains(&current()));
        assert_eq!(Isa::parse("avx9"), None);
        #[cfg(target_arch = "aarch64")]
        assert_eq!(supported()[0], Isa::Neon);
        #[cfg(target_arch = "x86_64")]
        assert!(supported().contains(&Isa::Sse2));
    }
}
