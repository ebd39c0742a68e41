//! Running a planned subgraph: segments prepared once per preference order, a scratch arena per
//! concurrent run, the VM's tensors as zero-copy I/O; and the call sites a model holds.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use super::backend::{Backend, Buffers, Prepared, CPU};
use super::constants::{Constant, Constants, Forms};
use super::planner::{plan, plan_site, segment_io, segments_of, SubgraphPlan};
use super::registry::{resolve, resolve_with_reasons, unavailable_reason};
use crate::error::{Error, Result};
use crate::offload::format::Graph;
use crate::offload::symbolic::Symbolic;
use crate::tensor::{Storage, Tensor};

/// A subgraph description run on its own, outside a model (tests, tools, benchmarks): parsed
/// and validated like a model's, prepared once per backend order, run on fresh outputs.
pub struct SubgraphRunner {
    site: Site,
}

impl SubgraphRunner {
    /// Parse `description`; `constants` are its weights in the order of its `constants`.
    /// A description with symbolic dimensions (version 3) is bound to its inputs' shapes at each
    /// [`SubgraphRunner::run`].
    pub fn new(description: &str, constants: Vec<Tensor>) -> Result<SubgraphRunner> {
        let (graph, symbolic) = super::symbolic::parse(description, "standalone")?;
        check_tensors(&graph, "constant", &constants, &graph.constants)?;
        Ok(SubgraphRunner {
            site: Site::new(
                String::new(),
                Arc::from(description),
                graph,
                symbolic,
                constants.into_iter().map(Constant::Held).collect(),
            ),
        })
    }

    /// The parsed description (with symbolic dimensions: bound to the load-time sample sizes).
    pub fn graph(&self) -> &Graph {
        &self.site.graph
    }

    #[cfg(test)]
    pub(crate) fn site(&self) -> &Site {
        &self.site
    }

    /// The symbolic dimensions of the description, if it has any.
    pub fn symbols(&self) -> &[String] {
        self.site.symbols()
    }

    /// The partition plan for a preference order (empty: the default order).
    pub fn plan(&self, backends: &[String]) -> SubgraphPlan {
        let (order, unavailable) = resolve_with_reasons(backends);
        plan_site(
            "",
            &self.site.graph,
            self.symbols(),
            Constants::of_site(&self.site.constants),
            &order,
            &unavailable,
        )
    }

    /// Run on `inputs` (in the order of the description's `inputs`); returns the outputs.
    pub fn run(&self, backends: &[String], inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let g0 = &self.site.graph;
        if inputs.len() != g0.inputs.len() {
            check_tensors(g0, "input", inputs, &g0.inputs)?;
        }
        let shapes: Vec<&[i64]> = inputs.iter().map(Tensor::shape).collect();
        let binding = self.site.bind(&shapes)?;
        let order = resolve(backends);
        let (g, exec) = self.site.executor(&order, &binding)?;
        check_tensors(&g, "input", inputs, &g.inputs)?;
        let outputs = g
            .outputs
            .iter()
            .map(|&t| Tensor::zeros(&g.tensors[t].shape, g.tensors[t].dtype))
            .collect::<Result<Vec<_>>>()?;
        exec.run(inputs, &outputs, crate::tensor::poison_by_default(), None)?;
        Ok(outputs)
    }
}

/// `given` matches the description's tensors `expected` (`what`: "input", "constant") in
/// number, shape and dtype.
fn check_tensors(g: &Graph, what: &str, given: &[Tensor], expected: &[usize]) -> Result<()> {
    let bad = |message: String| Error::Subgraph {
        subgraph: g.name.clone(),
        node: None,
        message,
    };
    if given.len() != expected.len() {
        return Err(bad(format!(
            "{} {what}s given, the description has {}",
            given.len(),
            expected.len()
        )));
    }
    for (k, (x, &t)) in given.iter().zip(expected).enumerate() {
        let d = &g.tensors[t];
        if x.shape() != d.shape.as_slice() || x.dtype() != d.dtype {
            return Err(bad(format!(
                "{what} {k} is {} {:?}, the description says {} {:?}",
                x.dtype(),
                x.shape(),
                d.dtype,
                d.shape
            )));
        }
    }
    Ok(())
}

struct Segment {
    backend: String,
    nodes: Range<usize>,
    prepared: Box<dyn Prepared>,
}

/// A subgraph prepared for one preference order: segments plus the scratch layout.
pub(crate) struct Executor {
    graph: Arc<Graph>,
    /// The constants the segments read at run time, in the order of `graph.constants`: the
    /// site's (a region rewritten to NHWC: its own, 4-D ones transposed); `None` where every
    /// segment that reads one copied it while preparing (`Prepared::copied_constants`).
    constants: Vec<Option<Tensor>>,
    segments: Vec<Segment>,
    /// Scratch slot of every tensor that needs one (intermediates seen by the runtime).
    slot_of: Vec<Option<usize>>,
    slot_bytes: Vec<usize>,
    /// Idle scratch arenas, one taken per concurrent run.
    arenas: Mutex<Vec<Vec<Arc<Storage>>>>,
}

impl Executor {
    pub(crate) fn new(
        graph: Arc<Graph>,
        constants: Constants<'_>,
        backends: &[Arc<dyn Backend>],
    ) -> Result<Executor> {
        Self::with_layout(graph, constants, backends, true)
    }

    /// As [`Executor::new`]; `nhwc`: whether a region that runs wholly on `cpu` may be
    /// rewritten to NHWC (`cpu::to_nhwc`).
    pub(crate) fn with_layout(
        graph: Arc<Graph>,
        constants: Constants<'_>,
        backends: &[Arc<dyn Backend>],
        nhwc: bool,
    ) -> Result<Executor> {
        let (mut which, mut plan) = plan(&graph, constants, backends);
        let cpu_index = backends.iter().position(|b| b.name() == CPU);
        let mut graph = graph;
        let mut converted = None;
        if let Some(ci) = cpu_index.filter(|&ci| nhwc && which.iter().all(|&b| b == ci)) {
            match super::backends::cpu::to_nhwc(&graph, constants) {
                Ok(Some(c)) => {
                    log::debug!(
                        "subgraph `{}`: NCHW region runs in NHWC on `cpu` ({} transposes added)",
                        graph.name,
                        c.transposes
                    );
                    graph = Arc::clone(&c.graph);
                    which = vec![ci; graph.nodes.len()];
                    converted = Some(c);
                }
                Ok(None) => {}
                Err(e) => log::warn!(
                    "subgraph `{}`: could not rewrite it to NHWC, running it in NCHW: {e}",
                    graph.name
                ),
            }
        }
        // A rewritten region reads its 4-D constants transposed, each as a backend gets it.
        let relayout = |k: usize, t: Tensor| match &converted {
            Some(c) => c.constant(k, t),
            None => Ok(t),
        };
        let constants = if converted.is_some() {
            constants.mapped(&relayout)
        } else {
            constants
        };
        let mut segments = Vec::new();
        let mut pending = segments_of(&which);
        let mut i = 0;
        while i < pending.len() {
            let (bi, range) = pending[i].clone();
            let b = &backends[bi];
            match b.prepare(&graph, range.clone(), constants) {
                Ok(prepared) => segments.push(Segment {
                    backend: b.name().to_string(),
                    nodes: range,
                    prepared,
                }),
                Err(e) => match cpu_index {
                    Some(ci) if ci != bi => {
                        log::warn!(
                            "subgraph `{}`: backend `{}` could not prepare nodes {:?}; running them on `cpu`: {e}",
                            graph.name,
                            b.name(),
                            range
                        );
                        for k in range.clone() {
                            which[k] = ci;
                            plan[k]
                                .fallback_reasons
                                .push(format!("{}: prepare failed: {e}", b.name()));
                            plan[k].backend = CPU.into();
                        }
                        pending[i] = (ci, range);
                        continue;
                    }
                    _ => return Err(e),
                },
            }
            i += 1;
        }
        // Which tensors need runtime buffers: all non-constant tensors of CPU segments, and
        // the I/O of every segment. Region inputs/outputs are the VM's; the rest get slots.
        let n = graph.tensors.len();
        let mut need = vec![false; n];
        for s in &segments {
            let (r, w) = segment_io(&graph, s.nodes.clone());
            for t in r.into_iter().chain(w) {
                need[t] = true;
            }
            if s.backend == CPU {
                for node in &graph.nodes[s.nodes.clone()] {
                    for &t in node.inputs.iter().chain(&node.outputs) {
                        need[t] = true;
                    }
                }
            }
        }
        // Lifetimes for slot reuse: a tensor lives from the node that produces it to its last
        // reader.
        let mut last_use = vec![0usize; n];
        for (k, node) in graph.nodes.iter().enumerate() {
            for &t in &node.inputs {
                last_use[t] = k;
            }
        }
        let mut slot_of = vec![None; n];
        let mut slot_bytes: Vec<usize> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        for (k, node) in graph.nodes.iter().enumerate() {
            for &t in &node.outputs {
                if !need[t] || graph.outputs.contains(&t) {
                    continue;
                }
                let bytes = graph.tensors[t].byte_len();
                // Best fit among free slots, else a new one.
                let pick = free
                    .iter()
                    .enumerate()
                    .filter(|(_, &s)| slot_bytes[s] >= bytes)
                    .min_by_key(|(_, &s)| slot_bytes[s])
                    .map(|(i, _)| i);
                let s = match pick {
                    Some(i) => free.swap_remove(i),
                    None => {
                        slot_bytes.push(bytes);
                        slot_bytes.len() - 1
                    }
                };
                slot_of[t] = Some(s);
            }
            for &t in &node.inputs {
                if last_use[t] == k {
                    if let Some(s) = slot_of[t] {
                        if !free.contains(&s) {
                            free.push(s);
                        }
                    }
                }
            }
            // An output nobody reads frees its slot right away.
            for &t in &node.outputs {
                if let Some(s) = slot_of[t] {
                    if !graph.nodes.iter().any(|m| m.inputs.contains(&t)) && !free.contains(&s) {
                        free.push(s);
                    }
                }
            }
        }
        // Constants every reader copied while preparing are not kept; the others are, each
        // read once more if it lives in the model file.
        let copied: Vec<Vec<usize>> = segments
            .iter()
            .map(|s| s.prepared.copied_constants())
            .collect();
        let constants = graph
            .constants
            .iter()
            .enumerate()
            .map(|(k, &t)| {
                let unread = graph.nodes.iter().enumerate().all(|(n, node)| {
                    !node.inputs.contains(&t)
                        || segments
                            .iter()
                            .zip(&copied)
                            .any(|(s, c)| s.nodes.contains(&n) && c.contains(&t))
                });
                if unread {
                    Ok(None)
                } else {
                    constants.get(k)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Executor {
            graph,
            constants,
            segments,
            slot_of,
            slot_bytes,
            arenas: Mutex::new(Vec::new()),
        })
    }

    /// The constants (tensor indices) this executor does not keep after preparation.
    #[cfg(test)]
    pub(crate) fn released_constants(&self) -> Vec<usize> {
        self.graph
            .constants
            .iter()
            .zip(&self.constants)
            .filter(|(_, c)| c.is_none())
            .map(|(&t, _)| t)
            .collect()
    }

    /// The backend of each prepared segment, in node order.
    #[cfg(test)]
    pub(crate) fn segment_backends(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().map(|s| s.backend.as_str())
    }

    /// Run on the VM's tensors (already checked against the description). With `poison`, the
    /// scratch arena is overwritten first (see `SessionOptions::poison_memory`).
    /// Bytes of scratch memory (arena slots) one run holds.
    pub(crate) fn arena_bytes(&self) -> usize {
        self.slot_bytes
            .iter()
            .fold(0usize, |a, &b| a.saturating_add(b))
    }

    /// Run on `inputs` into `outputs`. `interrupt`, when given, is consumed between backend
    /// segments: a pending interrupt stops the run with `Error::Cancelled`.
    pub(crate) fn run(
        &self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        poison: bool,
        interrupt: Option<&crate::vm::InterruptHandle>,
    ) -> Result<()> {
        let g = &self.graph;
        let arena = match self.arenas.lock().ok().and_then(|mut a| a.pop()) {
            Some(a) => a,
            None => self
                .slot_bytes
                .iter()
                .map(|&b| Storage::alloc(b, None))
                .collect::<Result<Vec<_>>>()?,
        };
        if poison {
            for (t, s) in self.slot_of.iter().enumerate() {
                if let Some(s) = *s {
                    let byte = crate::tensor::poison_byte(g.tensors[t].dtype);
                    // SAFETY: this run took the arena out of the shared list, so no other run
                    // uses it; each slot is a live allocation of at least `slot_bytes[s]` bytes.
                    unsafe { std::ptr::write_bytes(arena[s].as_ptr(), byte, self.slot_bytes[s]) };
                }
            }
        }
        let mut ptrs: Vec<Option<(*mut u8, usize)>> = vec![None; g.tensors.len()];
        let mut copies = Vec::new();
        for (k, &t) in g.inputs.iter().enumerate() {
            let x = &inputs[k];
            // Zero-copy unless the VM aliased an input with an output buffer.
            let overlaps = outputs.iter().any(|o| ranges_overlap(x, o));
            let x = if overlaps {
                let c = x.deep_copy()?;
                copies.push(c.clone());
                c
            } else {
                x.clone()
            };
            ptrs[t] = Some((x.data_ptr(), x.byte_len()));
        }
        for (k, &t) in g.constants.iter().enumerate() {
            ptrs[t] = Some(match self.constants.get(k).and_then(Option::as_ref) {
                Some(c) => (c.data_ptr(), c.byte_len()),
                // Released: no segment reads it (`Prepared::copied_constants`).
                None => (std::ptr::NonNull::<u8>::dangling().as_ptr(), 0),
            });
        }
        for (k, &t) in g.outputs.iter().enumerate() {
            let o = &outputs[k];
            if outputs[..k].iter().any(|p| ranges_overlap(p, o)) {
                return Err(Error::Subgraph {
                    subgraph: g.name.clone(),
                    node: None,
                    message: "two output buffers overlap".into(),
                });
            }
            ptrs[t] = Some((o.data_ptr(), o.byte_len()));
        }
        for (t, s) in self.slot_of.iter().enumerate() {
            if let Some(s) = *s {
                ptrs[t] = Some((arena[s].as_ptr(), g.tensors[t].byte_len()));
            }
        }
        // SAFETY: inputs, constants and outputs are tensors the caller or `self` keeps alive
        // for this call (a released constant is an empty buffer at a dangling, aligned,
        // non-null pointer, valid for zero bytes); arena slots live until the arena goes back
        // below. Outputs were checked not to
        // overlap each other, inputs that overlap an output were copied, and arena slots are
        // disjoint allocations.
        let mut bufs = unsafe { Buffers::from_raw(ptrs) };
        let mut result = Ok(());
        for s in &self.segments {
            if interrupt.is_some_and(|i| i.take()) {
                result = Err(Error::Cancelled);
                break;
            }
            result = s.prepared.run(&mut bufs);
            if result.is_err() {
                break;
            }
        }
        drop(bufs);
        drop(copies);
        if let Ok(mut a) = self.arenas.lock() {
            if a.len() < 8 {
                a.push(arena);
            }
        }
        result
    }
}

fn ranges_overlap(a: &Tensor, b: &Tensor) -> bool {
    let (a0, b0) = (a.data_ptr() as usize, b.data_ptr() as usize);
    let (a1, b1) = (a0 + a.byte_len(), b0 + b.byte_len());
    a.byte_len() > 0 && b.byte_len() > 0 && a0 < b1 && b0 < a1
}

/// A `mote.subgraph` call site of a model: the parsed description and its weights.
pub(crate) struct Site {
    pub function: String,
    pub desc: Arc<str>,
    /// The description's graph; with symbolic dimensions, bound to the load-time sample sizes
    /// (what does not depend on sizes: counts, names, ops, dtypes).
    pub graph: Arc<Graph>,
    /// The symbolic dimensions each call binds (format version 3), if any.
    pub symbolic: Option<Symbolic>,
    pub constants: Vec<Constant>,
    /// What backends built from `constants`, shared by every preparation of this site.
    forms: Forms,
    /// Prepared executors by backend order and binding of the symbolic dimensions.
    pub prepared: Mutex<Executors>,
}

/// Most bindings of a symbolic site kept prepared at once (each holds its backends' prepared
/// weights); the least recently used one is dropped for a new one.
pub(crate) const MAX_BINDINGS: usize = 8;

/// A site's prepared executors, with when each was last used.
#[derive(Default)]
pub(crate) struct Executors {
    map: HashMap<(Vec<String>, Vec<i64>), Bound>,
    tick: u64,
}

#[derive(Clone)]
struct Bound {
    graph: Arc<Graph>,
    executor: Arc<Executor>,
    used: u64,
}

impl Site {
    pub(crate) fn new(
        function: String,
        desc: Arc<str>,
        graph: Graph,
        symbolic: Option<Symbolic>,
        constants: Vec<Constant>,
    ) -> Site {
        Site {
            function,
            desc,
            graph: Arc::new(graph),
            symbolic,
            constants,
            forms: Forms::default(),
            prepared: Mutex::new(Executors::default()),
        }
    }

    /// The names of the description's symbolic dimensions (none for fixed shapes).
    pub(crate) fn symbols(&self) -> &[String] {
        self.symbolic.as_ref().map_or(&[], |s| s.names.as_slice())
    }

    /// The sizes of the symbolic dimensions for a call with inputs of these shapes (empty when
    /// the description has none).
    pub(crate) fn bind(&self, shapes: &[&[i64]]) -> Result<Vec<i64>> {
        match &self.symbolic {
            Some(s) => s.bind(shapes),
            None => Ok(Vec::new()),
        }
    }

    /// The graph for a binding (from [`Site::bind`]) and its executor for this preference
    /// order, prepared on first use.
    pub(crate) fn executor(
        &self,
        backends: &[Arc<dyn Backend>],
        binding: &[i64],
    ) -> Result<(Arc<Graph>, Arc<Executor>)> {
        let key = (
            backends
                .iter()
                .map(|b| b.name().to_string())
                .collect::<Vec<_>>(),
            binding.to_vec(),
        );
        let mut cache = self.prepared.lock().map_err(|_| Error::Backend {
            backend: CPU.into(),
            message: "a previous preparation panicked".into(),
        })?;
        cache.tick += 1;
        let tick = cache.tick;
        if let Some(b) = cache.map.get_mut(&key) {
            b.used = tick;
            return Ok((b.graph.clone(), b.executor.clone()));
        }
        let g = match &self.symbolic {
            Some(s) => Arc::new(s.instantiate(binding)?),
            None => self.graph.clone(),
        };
        if !g.target.is_empty() && !key.0.iter().any(|n| *n == g.target) {
            if let Some(why) = unavailable_reason(&g.target) {
                log::warn!(
                    "subgraph `{}` was partitioned for `{}`, which is unavailable here ({why}); running it on {}",
                    g.name,
                    g.target,
                    key.0.join(", ")
                );
            }
        }
        let e = Arc::new(Executor::new(
            g.clone(),
            Constants::of_site_sharing(&self.constants, &self.forms),
            backends,
        )?);
        if self.symbolic.is_some() {
            let held = cache.map.keys().filter(|k| k.0 == key.0).count();
            if held >= MAX_BINDINGS {
                let oldest = cache
                    .map
                    .iter()
                    .filter(|(k, _)| k.0 == key.0)
                    .min_by_key(|(_, b)| b.used)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    cache.map.remove(&k);
                }
            }
        }
        cache.map.insert(
            key,
            Bound {
                graph: g.clone(),
                executor: e.clone(),
                used: tick,
            },
        );
        Ok((g, e))
    }

    /// The constants' forms kept for this site's preparations.
    #[cfg(test)]
    pub(crate) fn forms(&self) -> &Forms {
        &self.forms
    }

    /// How many bindings are prepared for this preference order.
    #[cfg(test)]
    pub(crate) fn bindings_held(&self, backends: &[Arc<dyn Backend>]) -> usize {
        let names: Vec<String> = backends.iter().map(|b| b.name().to_string()).collect();
        self.prepared
            .lock()
            .map(|c| c.map.keys().filter(|k| k.0 == names).count())
            .unwrap_or(0)
    }
}
