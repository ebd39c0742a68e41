//! The instruction-set level the cpu backend's kernels use, chosen once per process.
//!
//! Detection runs at first use (`std::is_x86_feature_detected!` on x86_64; NEON is part of the
//! aarch64 base ISA). `MOTE_CPU_ISA` (`avx2`, `sse2`, `neon`, `scalar`) asks for a lower level,
//! for tests and benchmarks: a level the CPU lacks, or an unknown name, is ignored (the detected
//! level stays) and logged. There are no AVX-512 kernels (an AVX-512 CPU runs the AVX2 ones):
//! see docs/cpu-kernels.md.

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
            Isa::Neon => "neon",
        }
    }

    fn parse(s: &str) -> Option<Isa> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "scalar" => Isa::Scalar,
            "sse2" => Isa::Sse2,
            "avx2" => Isa::Avx2,
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
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
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

/// The SIMD level the cpu backend's kernels run with in this process: `"avx2"` (AVX2 + FMA),
/// `"sse2"`, `"neon"` or `"scalar"` (detected once; lowered by the `MOTE_CPU_ISA` environment
/// variable when it names a level this CPU has).
pub fn isa() -> &'static str {
    current().name()
}

/// Every level [`isa`] could report on this CPU with this build, best first.
pub fn supported_isas() -> Vec<&'static str> {
    supported().iter().map(|i| i.name()).collect()
}

/// Run `f` compiled for AVX2 and FMA when the chosen level is [`Isa::Avx2`], else as built.
///
/// For plain loops (elementwise activations, bias, scale): the crate is built for the x86_64
/// baseline, so the compiler vectorizes them 4 lanes wide without FMA; inlined into this
/// function's AVX2 instance, the same loops run 8 lanes wide with FMA. `f` must do its work
/// itself (not hand it to other threads, whose code is compiled separately), and is inlined
/// because it is a closure called once from here.
#[inline(always)]
pub(crate) fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if current() == Isa::Avx2 {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        // SAFETY: `current()` is `Avx2` only when `supported()` detected AVX2 and FMA on this
        // CPU at run time, which is all `avx2` requires.
        return unsafe { avx2(f) };
    }
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
