//! Per-callee timing and Chrome/Perfetto traces.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::program::{Callee, Program};
use super::Session;

/// What a profiled call was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    Kernel,
    Builtin,
    Function,
    Registered,
}

/// Accumulated time of one callee.
#[derive(Clone, Debug)]
pub struct ProfileEntry {
    pub name: String,
    pub kind: CallKind,
    pub calls: u64,
    pub total: Duration,
}

/// One call, for a Chrome/Perfetto trace.
#[derive(Clone, Debug)]
pub struct TraceEvent {
    pub name: String,
    pub kind: CallKind,
    /// Since the session's trace started.
    pub start: Duration,
    pub duration: Duration,
    pub depth: usize,
}

#[derive(Default)]
pub(super) struct Profiler {
    by_func: HashMap<u32, (u64, Duration)>,
    trace: Option<(Instant, Vec<TraceEvent>)>,
}

impl Session {
    /// Turn per-callee timing on or off (off by default; on costs two clock reads per call).
    pub fn set_profiling(&mut self, on: bool) {
        match (on, self.profiler.is_some()) {
            (true, false) => self.profiler = Some(Box::default()),
            (false, true) => self.profiler = None,
            _ => {}
        }
    }

    /// Record every call for a trace (implies profiling).
    pub fn set_tracing(&mut self, on: bool) {
        self.set_profiling(on || self.profiler.is_some());
        if let Some(p) = &mut self.profiler {
            p.trace = on.then(|| (Instant::now(), Vec::new()));
        }
    }

    /// Time per callee since profiling was turned on, slowest first; resets the counters.
    pub fn take_profile(&mut self) -> Vec<ProfileEntry> {
        let Some(p) = &mut self.profiler else {
            return Vec::new();
        };
        let m = &self.model.inner;
        let mut out: Vec<ProfileEntry> = p
            .by_func
            .drain()
            .map(|(f, (calls, total))| ProfileEntry {
                name: m.exe().funcs[f as usize].name.clone(),
                kind: kind_of(m.callee(f)),
                calls,
                total,
            })
            .collect();
        out.sort_by_key(|e| std::cmp::Reverse(e.total));
        out
    }

    /// The trace events recorded since tracing was turned on; resets the trace.
    pub fn take_trace(&mut self) -> Vec<TraceEvent> {
        match self.profiler.as_mut().and_then(|p| p.trace.as_mut()) {
            Some((_, events)) => std::mem::take(events),
            None => Vec::new(),
        }
    }

    pub(super) fn record(&mut self, m: &Program, func: u32, start: Instant) {
        let depth = self.depth;
        let Some(p) = self.profiler.as_mut() else {
            return;
        };
        let d = start.elapsed();
        let e = p.by_func.entry(func).or_default();
        e.0 += 1;
        e.1 += d;
        if let Some((t0, events)) = &mut p.trace {
            events.push(TraceEvent {
                name: m.exe().funcs[func as usize].name.clone(),
                kind: kind_of(m.callee(func)),
                start: start.saturating_duration_since(*t0),
                duration: d,
                depth,
            });
        }
    }
}

pub(super) fn kind_of(c: &Callee) -> CallKind {
    match c {
        Callee::Vm(_) => CallKind::Function,
        Callee::Kernel(_) | Callee::DeviceKernel(_) => CallKind::Kernel,
        Callee::Builtin(_) => CallKind::Builtin,
        Callee::Registered(_) => CallKind::Registered,
        Callee::Subgraph => CallKind::Builtin,
    }
}
