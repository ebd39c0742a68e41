//! `runtime.RPCTimeEvaluator`: time a model function on the server with TVM's semantics
//! (docs/rpc.md "Time evaluator").

use std::time::{Duration, Instant};

use mote::Value;

use crate::interrupt::Calls;
use crate::session::RequestError;
use crate::state::Target;

/// The twelve arguments of `runtime.RPCTimeEvaluator` after the module, name and device.
#[derive(Debug, Clone)]
pub(crate) struct TimerParams {
    pub number: i32,
    pub repeat: i32,
    pub min_repeat_ms: i32,
    pub limit_zero_time_iterations: i32,
    pub cooldown_interval_ms: i32,
    pub repeats_to_cooldown: i32,
    pub cache_flush_bytes: i32,
    pub f_preproc: String,
}

/// Most repeats one evaluation may ask for (each yields 8 bytes of reply).
const MAX_REPEAT: i32 = 1 << 20;

pub(crate) struct TimeEvaluator {
    target: Target,
    p: TimerParams,
    /// `number` as grown by `min_repeat_ms`; kept across calls of this evaluator, as TVM does.
    number: i32,
    flush_args: bool,
}

fn invalid(m: String) -> RequestError {
    RequestError::Invalid(m)
}

impl TimeEvaluator {
    pub(crate) fn new(
        target: Target,
        p: TimerParams,
        max_memory: u64,
    ) -> Result<Self, RequestError> {
        if p.number < 1 {
            return Err(invalid(format!(
                "time_evaluator: number {} must be >= 1",
                p.number
            )));
        }
        if !(1..=MAX_REPEAT).contains(&p.repeat) {
            return Err(invalid(format!(
                "time_evaluator: repeat {} must be in 1..={MAX_REPEAT}",
                p.repeat
            )));
        }
        if p.min_repeat_ms < 0 || p.cooldown_interval_ms < 0 || p.limit_zero_time_iterations < 0 {
            return Err(invalid(
                "time_evaluator: min_repeat_ms, cooldown_interval_ms and \
                 limit_zero_time_iterations must be >= 0"
                    .into(),
            ));
        }
        if p.cooldown_interval_ms > 0 && p.repeats_to_cooldown < 1 {
            return Err(invalid(format!(
                "time_evaluator: repeats_to_cooldown {} must be >= 1 when cooling down",
                p.repeats_to_cooldown
            )));
        }
        if p.cache_flush_bytes < 0 || 2 * p.cache_flush_bytes as u64 > max_memory {
            return Err(RequestError::Limit(format!(
                "time_evaluator: cache_flush_bytes {} (two buffers of that size must fit in the \
                 session's {max_memory}-byte memory limit)",
                p.cache_flush_bytes
            )));
        }
        let flush_args = match p.f_preproc.as_str() {
            "" => false,
            "cache_flush_cpu_non_first_arg" => true,
            other => {
                return Err(invalid(format!(
                    "time_evaluator: unknown f_preproc {other:?} (only \
                     \"cache_flush_cpu_non_first_arg\" or \"\")"
                )))
            }
        };
        Ok(TimeEvaluator {
            target,
            number: p.number,
            p,
            flush_args,
        })
    }

    /// Runs the evaluation; returns `repeat` little-endian f64 seconds per call.
    /// A stopping server or an expired client timeout interrupts the call in progress through
    /// `calls`, and is checked between calls: the evaluation ends early with `Cancelled`.
    pub(crate) fn run(
        &mut self,
        args: &[Value],
        calls: &Calls<'_>,
    ) -> Result<Vec<u8>, RequestError> {
        let cancel = || calls.ending();
        let cancelled = || RequestError::Mote(mote::Error::Cancelled);
        let p = &self.p;
        // One untimed call first (warms caches, lazy initialisation).
        drop(self.target.invoke(args, calls)?);
        // Two buffers; copying one into the other before each timed batch evicts caches.
        let words = (p.cache_flush_bytes / 4) as usize;
        let (mut a, b) = if words > 0 {
            (vec![0i32; words], vec![1i32; words])
        } else {
            (Vec::new(), Vec::new())
        };
        let mut out = Vec::with_capacity(p.repeat as usize * 8);
        for i in 0..p.repeat {
            if self.flush_args {
                // Every tensor argument but the first (TVM keeps the first, usually the input).
                for v in args.iter().skip(1) {
                    if let Value::Tensor(t) = v {
                        flush_cache(t.data());
                    }
                }
            }
            let mut elapsed = Duration::ZERO;
            let mut zero_times = 0;
            loop {
                if !elapsed.is_zero() {
                    // Grow by the golden ratio at least, or straight to the estimated count.
                    let ms = elapsed.as_secs_f64() * 1e3;
                    let per_call = ms / f64::from(self.number);
                    let want = (f64::from(p.min_repeat_ms) / per_call + 1.0)
                        .max(f64::from(self.number) * 1.618);
                    self.number = want.min(f64::from(i32::MAX)) as i32;
                }
                if words > 0 {
                    a.copy_from_slice(&b);
                    std::hint::black_box(&a);
                }
                let start = Instant::now();
                for _ in 0..self.number {
                    if cancel() {
                        return Err(cancelled());
                    }
                    drop(self.target.invoke(args, calls)?);
                }
                elapsed = start.elapsed();
                if elapsed.is_zero() {
                    zero_times += 1;
                }
                let ms = elapsed.as_secs_f64() * 1e3;
                if ms >= f64::from(p.min_repeat_ms) || zero_times >= p.limit_zero_time_iterations {
                    break;
                }
            }
            let seconds = elapsed.as_secs_f64() / f64::from(self.number);
            out.extend_from_slice(&seconds.to_le_bytes());
            if p.cooldown_interval_ms > 0 && i % p.repeats_to_cooldown == 0 {
                let until = Instant::now() + Duration::from_millis(p.cooldown_interval_ms as u64);
                while Instant::now() < until {
                    if cancel() {
                        return Err(cancelled());
                    }
                    let left = until.saturating_duration_since(Instant::now());
                    std::thread::sleep(left.min(Duration::from_millis(50)));
                }
            }
        }
        Ok(out)
    }
}

/// Evicts `data` from the CPU caches (x86_64: `clflush`; aarch64: `dc civac`; else nothing).
fn flush_cache(data: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        const LINE: usize = 64;
        let start = data.as_ptr() as usize & !(LINE - 1);
        let end = data.as_ptr() as usize + data.len();
        let mut p = start;
        while p < end {
            // SAFETY: `clflush` needs SSE2, part of every x86_64 CPU; it takes any address of a
            // mapped line, and every line from `start` to `end` overlaps `data`.
            unsafe { std::arch::x86_64::_mm_clflush(p as *const u8) };
            p += LINE;
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        const LINE: usize = 64;
        let start = data.as_ptr() as usize & !(LINE - 1);
        let end = data.as_ptr() as usize + data.len();
        let mut p = start;
        while p < end {
            // SAFETY: `dc civac` cleans and invalidates the line holding a mapped address; every
            // line from `start` to `end` overlaps `data`. It has no other effect on memory.
            unsafe { std::arch::asm!("dc civac, {0}", in(reg) p, options(nostack)) };
            p += LINE;
        }
        // SAFETY: a store barrier; no memory operands.
        unsafe { std::arch::asm!("dmb ish", options(nostack)) };
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = data;
}
