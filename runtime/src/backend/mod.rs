//! Backends that run offloaded subgraphs (`mote.subgraph` calls), the registry they live in, and
//! the planner that splits a subgraph between them.
//!
//! Every backend implements [`Backend`]: it says whether it can run on this machine, which nodes
//! it supports (with a reason when not), prepares a run of consecutive nodes once (weights
//! transformed there), and runs the prepared segment on borrowed buffers. The registry holds
//! plug-ins first (loaded from `MOTE_BACKEND_PLUGINS` or [`load_plugin`]) and the built-in `cpu`
//! backend last; `cpu` runs every op of the format, so every node has a home.
//!
//! Planning is per node: each node goes to the first backend in the session's preference order
//! that supports it; consecutive nodes on one backend form one segment, prepared once per model,
//! call site and preference order, and shared by every session of the model. A node that does
//! not go to the first choice is logged with the reasons the preferred backends gave.

pub mod bnns;
pub mod cpu;
pub mod plugin;

use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::error::{Error, Result};
use crate::subgraph::{Graph, Role};
use crate::tensor::{Storage, Tensor};

pub use plugin::load_plugin;

/// The name of the built-in backend.
pub const CPU: &str = "cpu";

/// A backend that can run subgraph nodes.
///
/// Implementations are shared between threads; `prepare` may be called concurrently for
/// different subgraphs.
pub trait Backend: Send + Sync {
    /// The name sessions refer to it by (`SessionOptions::backends`).
    fn name(&self) -> &str;
    /// `Ok` when it can run on this machine, else why not.
    fn available(&self) -> std::result::Result<(), String>;
    /// Whether it can run node `node` of `graph`; `constants` are the region's constant
    /// tensors, in the order of `graph.constants`. `Err` carries the reason.
    fn supports(
        &self,
        graph: &Graph,
        node: usize,
        constants: &[Tensor],
    ) -> std::result::Result<(), String>;
    /// Prepare the consecutive nodes `nodes` of `graph` to run many times.
    fn prepare(
        &self,
        graph: &Arc<Graph>,
        nodes: Range<usize>,
        constants: &[Tensor],
    ) -> Result<Box<dyn Prepared>>;
}

/// A prepared segment: immutable after preparation, runnable from several threads (a backend
/// that cannot run one segment concurrently serializes inside).
pub trait Prepared: Send + Sync {
    /// Run once. `buffers` holds every tensor the segment reads or writes (constants may be
    /// served from the prepared state instead).
    fn run(&self, buffers: &mut Buffers<'_>) -> Result<()>;
}

/// The memory of one run of a subgraph: a buffer per tensor index (region inputs and outputs
/// are the VM's tensors, zero-copy; intermediates come from a scratch arena).
///
/// All buffers are disjoint; mutable access to one tensor is handed out only while no other
/// view from this `Buffers` exists (every accessor borrows `self` mutably).
pub struct Buffers<'a> {
    ptrs: Vec<Option<(*mut u8, usize)>>,
    _life: PhantomData<&'a mut [u8]>,
}

impl<'a> Buffers<'a> {
    fn missing(t: usize) -> Error {
        Error::Backend {
            backend: CPU.into(),
            message: format!("tensor {t} has no buffer in this run"),
        }
    }

    /// The buffers a node reads (`inputs`) and the one it writes (`output`).
    pub fn node_io(&mut self, inputs: &[usize], output: usize) -> Result<(Vec<&[u8]>, &mut [u8])> {
        if inputs.contains(&output) {
            return Err(Error::Backend {
                backend: CPU.into(),
                message: format!("tensor {output} is both read and written by one node"),
            });
        }
        let mut ins = Vec::with_capacity(inputs.len());
        for &t in inputs {
            let (p, n) = self
                .ptrs
                .get(t)
                .copied()
                .flatten()
                .ok_or_else(|| Self::missing(t))?;
            // SAFETY: `p` is valid for `n` bytes for 'a (see `Buffers::new`); it is disjoint from
            // the output buffer, and nothing writes to it while the returned borrow of `self`
            // lives.
            ins.push(unsafe { std::slice::from_raw_parts(p as *const u8, n) });
        }
        let (p, n) = self
            .ptrs
            .get(output)
            .copied()
            .flatten()
            .ok_or_else(|| Self::missing(output))?;
        // SAFETY: as above; the output buffer is distinct from every input buffer and no other
        // view of it exists while `self` is mutably borrowed.
        let out = unsafe { std::slice::from_raw_parts_mut(p, n) };
        Ok((ins, out))
    }

    /// Raw pointers for a plug-in call: `reads` then `writes`.
    pub fn raw(
        &mut self,
        reads: &[usize],
        writes: &[usize],
    ) -> Result<(Vec<*const u8>, Vec<*mut u8>)> {
        let ptr = |t: usize| {
            self.ptrs
                .get(t)
                .copied()
                .flatten()
                .map(|(p, _)| p)
                .ok_or_else(|| Self::missing(t))
        };
        let r = reads
            .iter()
            .map(|&t| ptr(t).map(|p| p as *const u8))
            .collect::<Result<Vec<_>>>()?;
        let w = writes.iter().map(|&t| ptr(t)).collect::<Result<Vec<_>>>()?;
        Ok((r, w))
    }
}

// ---- registry ----

fn registry() -> &'static RwLock<Vec<Arc<dyn Backend>>> {
    static REG: OnceLock<RwLock<Vec<Arc<dyn Backend>>>> = OnceLock::new();
    REG.get_or_init(|| {
        let mut v: Vec<Arc<dyn Backend>> = Vec::new();
        v.extend(plugin::from_environment());
        if !v.iter().any(|b| b.name() == "acl") {
            v.push(plugin::discover_acl());
        }
        v.push(Arc::new(bnns::BnnsBackend::default()));
        v.push(Arc::new(cpu::CpuBackend));
        RwLock::new(v)
    })
}

/// A backend Mote knows but cannot use on this machine (its library is missing, or it is for
/// another platform); it refuses everything, with the reason.
pub(crate) struct Unavailable {
    pub name: &'static str,
    pub why: String,
}

impl Backend for Unavailable {
    fn name(&self) -> &str {
        self.name
    }

    fn available(&self) -> std::result::Result<(), String> {
        Err(self.why.clone())
    }

    fn supports(&self, _: &Graph, _: usize, _: &[Tensor]) -> std::result::Result<(), String> {
        Err(self.why.clone())
    }

    fn prepare(&self, _: &Arc<Graph>, _: Range<usize>, _: &[Tensor]) -> Result<Box<dyn Prepared>> {
        Err(Error::Backend {
            backend: self.name.into(),
            message: self.why.clone(),
        })
    }
}

/// Why backend `name` cannot run here (`None` when it can).
fn unavailable_reason(name: &str) -> Option<String> {
    let all: Vec<Arc<dyn Backend>> = registry().read().map(|r| r.clone()).unwrap_or_default();
    match all.iter().find(|b| b.name() == name) {
        Some(b) => b.available().err(),
        None => Some("no backend of that name is registered".into()),
    }
}

/// Add a backend ahead of the built-in CPU backend (a later registration of the same name
/// replaces the earlier one).
pub fn register_backend(backend: Arc<dyn Backend>) {
    if let Ok(mut r) = registry().write() {
        r.retain(|b| b.name() != backend.name());
        let pos = r.iter().position(|b| b.name() == CPU).unwrap_or(r.len());
        r.insert(pos, backend);
    }
}

/// Names of the registered backends, in default preference order.
pub fn backend_names() -> Vec<String> {
    registry()
        .read()
        .map(|r| r.iter().map(|b| b.name().to_string()).collect())
        .unwrap_or_default()
}

/// The backends to try, in order, for a session preference list (empty: every available
/// backend, plug-ins first). `cpu` is always last resort. Unknown or unavailable names are
/// logged and skipped: a missing vendor library means fallback, not failure.
pub(crate) fn resolve(preference: &[String]) -> Vec<Arc<dyn Backend>> {
    resolve_with_reasons(preference).0
}

/// Backends skipped when resolving an order: `(name, why)`.
pub(crate) type Skipped = Vec<(String, String)>;

/// [`resolve`], plus the backends it skipped: unknown names, and registered backends that
/// cannot run here.
pub(crate) fn resolve_with_reasons(preference: &[String]) -> (Vec<Arc<dyn Backend>>, Skipped) {
    let all: Vec<Arc<dyn Backend>> = registry().read().map(|r| r.clone()).unwrap_or_default();
    let mut out: Vec<Arc<dyn Backend>> = Vec::new();
    let mut skipped: Skipped = Vec::new();
    let wanted: Vec<String> = if preference.is_empty() {
        all.iter().map(|b| b.name().to_string()).collect()
    } else {
        preference.to_vec()
    };
    for name in &wanted {
        if out.iter().any(|b| b.name() == name) {
            continue;
        }
        match all.iter().find(|b| b.name() == name) {
            Some(b) => match b.available() {
                Ok(()) => out.push(b.clone()),
                // Asked for by name: worth saying. In the default order, a vendor backend for
                // another platform is expected; subgraphs partitioned for it say so instead
                // (`Site::executor`).
                Err(why) => {
                    if preference.is_empty() {
                        log::debug!("backend `{name}` is not available here: {why}");
                    } else {
                        log::info!("backend `{name}` is not available here: {why}");
                    }
                    skipped.push((name.clone(), why));
                }
            },
            None => {
                let known = all.iter().map(|b| b.name()).collect::<Vec<_>>().join(", ");
                log::warn!("backend `{name}` is not registered (known: {known}); skipping it");
                skipped.push((name.clone(), format!("not registered (known: {known})")));
            }
        }
    }
    if !out.iter().any(|b| b.name() == CPU) {
        out.push(Arc::new(cpu::CpuBackend));
    }
    (out, skipped)
}

// ---- planning ----

/// Where one node runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePlan {
    pub name: String,
    pub op: String,
    pub backend: String,
    /// Why each preferred backend refused it (`backend: reason`); empty when the first choice
    /// took it.
    pub fallback_reasons: Vec<String>,
}

/// The plan of one `mote.subgraph` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubgraphPlan {
    /// The Relax function holding the call.
    pub function: String,
    /// The description's `name`.
    pub name: String,
    /// The description's `target` (the partitioner's hint).
    pub target: String,
    /// The backends tried, in order.
    pub backends: Vec<String>,
    /// Backends asked for (or registered, with the default order) that cannot run here, with
    /// why: `(name, reason)`.
    pub unavailable: Vec<(String, String)>,
    pub nodes: Vec<NodePlan>,
    /// Consecutive nodes on one backend: `(backend, first node, node count)`.
    pub segments: Vec<(String, usize, usize)>,
}

/// Assign every node of `graph` to a backend.
pub(crate) fn plan(
    graph: &Graph,
    constants: &[Tensor],
    backends: &[Arc<dyn Backend>],
) -> (Vec<usize>, Vec<NodePlan>) {
    let mut which = Vec::with_capacity(graph.nodes.len());
    let mut plans = Vec::with_capacity(graph.nodes.len());
    for (k, node) in graph.nodes.iter().enumerate() {
        let mut reasons = Vec::new();
        let mut chosen = None;
        for (bi, b) in backends.iter().enumerate() {
            match b.supports(graph, k, constants) {
                Ok(()) => {
                    chosen = Some(bi);
                    break;
                }
                Err(why) => reasons.push(format!("{}: {why}", b.name())),
            }
        }
        // The CPU backend is always in the list and supports every valid node; should it refuse
        // anyway, the error surfaces when the segment is prepared.
        let bi = chosen.unwrap_or(backends.len().saturating_sub(1));
        let bname = backends
            .get(bi)
            .map(|b| b.name().to_string())
            .unwrap_or_else(|| CPU.into());
        if !reasons.is_empty() {
            log::warn!(
                "subgraph `{}`: node `{}` ({}) falls back to `{bname}`: {}",
                graph.name,
                node.name,
                node.op.name(),
                reasons.join("; ")
            );
        }
        which.push(bi);
        plans.push(NodePlan {
            name: node.name.clone(),
            op: node.op.name().to_string(),
            backend: bname,
            fallback_reasons: reasons,
        });
    }
    (which, plans)
}

/// The plan of one subgraph for a resolved backend order.
pub(crate) fn plan_site(
    function: &str,
    graph: &Graph,
    constants: &[Tensor],
    order: &[Arc<dyn Backend>],
    unavailable: &[(String, String)],
) -> SubgraphPlan {
    let names: Vec<String> = order.iter().map(|b| b.name().to_string()).collect();
    let (which, nodes) = plan(graph, constants, order);
    let segments = segments_of(&which)
        .into_iter()
        .map(|(b, r)| (names.get(b).cloned().unwrap_or_default(), r.start, r.len()))
        .collect();
    SubgraphPlan {
        function: function.to_string(),
        name: graph.name.clone(),
        target: graph.target.clone(),
        backends: names,
        unavailable: unavailable.to_vec(),
        nodes,
        segments,
    }
}

/// A subgraph description run on its own, outside a model (tests, tools, benchmarks): parsed
/// and validated like a model's, prepared once per backend order, run on fresh outputs.
pub struct SubgraphRunner {
    site: Site,
}

impl SubgraphRunner {
    /// Parse `description`; `constants` are its weights in the order of its `constants`.
    pub fn new(description: &str, constants: Vec<Tensor>) -> Result<SubgraphRunner> {
        let graph = Graph::parse(description, "standalone")?;
        check_tensors(&graph, "constant", &constants, &graph.constants)?;
        Ok(SubgraphRunner {
            site: Site {
                function: String::new(),
                desc: Arc::from(description),
                graph: Arc::new(graph),
                constants,
                prepared: Mutex::new(HashMap::new()),
            },
        })
    }

    /// The parsed description.
    pub fn graph(&self) -> &Graph {
        &self.site.graph
    }

    /// The partition plan for a preference order (empty: the default order).
    pub fn plan(&self, backends: &[String]) -> SubgraphPlan {
        let (order, unavailable) = resolve_with_reasons(backends);
        plan_site(
            "",
            &self.site.graph,
            &self.site.constants,
            &order,
            &unavailable,
        )
    }

    /// Run on `inputs` (in the order of the description's `inputs`); returns the outputs.
    pub fn run(&self, backends: &[String], inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let g = &self.site.graph;
        check_tensors(g, "input", inputs, &g.inputs)?;
        let outputs = g
            .outputs
            .iter()
            .map(|&t| Tensor::zeros(&g.tensors[t].shape, g.tensors[t].dtype))
            .collect::<Result<Vec<_>>>()?;
        let order = resolve(backends);
        let exec = self.site.executor(&order)?;
        exec.run(inputs, &self.site.constants, &outputs)?;
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

fn segments_of(which: &[usize]) -> Vec<(usize, Range<usize>)> {
    let mut segs: Vec<(usize, Range<usize>)> = Vec::new();
    for (k, &b) in which.iter().enumerate() {
        match segs.last_mut() {
            Some((lb, r)) if *lb == b => r.end = k + 1,
            _ => segs.push((b, k..k + 1)),
        }
    }
    segs
}

/// The tensors a segment reads from outside itself (non-constant), and the ones it produces
/// that are needed outside it (region outputs or read by other nodes).
pub fn segment_io(graph: &Graph, nodes: Range<usize>) -> (Vec<usize>, Vec<usize>) {
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    let produced_inside = |t: usize| {
        graph.nodes[nodes.clone()]
            .iter()
            .any(|n| n.outputs.contains(&t))
    };
    for n in &graph.nodes[nodes.clone()] {
        for &t in &n.inputs {
            if !matches!(graph.role(t), Role::Constant(_))
                && !produced_inside(t)
                && !reads.contains(&t)
            {
                reads.push(t);
            }
        }
    }
    for n in &graph.nodes[nodes.clone()] {
        for &t in &n.outputs {
            let used_outside = graph.outputs.contains(&t)
                || graph
                    .nodes
                    .iter()
                    .enumerate()
                    .any(|(k, m)| !nodes.contains(&k) && m.inputs.contains(&t));
            if used_outside && !writes.contains(&t) {
                writes.push(t);
            }
        }
    }
    (reads, writes)
}

struct Segment {
    backend: String,
    nodes: Range<usize>,
    prepared: Box<dyn Prepared>,
}

/// A subgraph prepared for one preference order: segments plus the scratch layout.
pub(crate) struct Executor {
    graph: Arc<Graph>,
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
        constants: &[Tensor],
        backends: &[Arc<dyn Backend>],
    ) -> Result<Executor> {
        let (mut which, mut plan) = plan(&graph, constants, backends);
        let cpu_index = backends.iter().position(|b| b.name() == CPU);
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
        Ok(Executor {
            graph,
            segments,
            slot_of,
            slot_bytes,
            arenas: Mutex::new(Vec::new()),
        })
    }

    /// Run on the VM's tensors (already checked against the description).
    pub(crate) fn run(
        &self,
        inputs: &[Tensor],
        constants: &[Tensor],
        outputs: &[Tensor],
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
            let c = &constants[k];
            ptrs[t] = Some((c.data_ptr(), c.byte_len()));
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
        let mut bufs = Buffers {
            ptrs,
            _life: PhantomData,
        };
        let mut result = Ok(());
        for s in &self.segments {
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
    pub graph: Arc<Graph>,
    pub constants: Vec<Tensor>,
    /// Prepared executors by backend order.
    pub prepared: Mutex<HashMap<Vec<String>, Arc<Executor>>>,
}

impl Site {
    /// The executor for this preference order, prepared on first use.
    pub(crate) fn executor(&self, backends: &[Arc<dyn Backend>]) -> Result<Arc<Executor>> {
        let key: Vec<String> = backends.iter().map(|b| b.name().to_string()).collect();
        let mut map = self.prepared.lock().map_err(|_| Error::Backend {
            backend: CPU.into(),
            message: "a previous preparation panicked".into(),
        })?;
        if let Some(e) = map.get(&key) {
            return Ok(e.clone());
        }
        let g = &self.graph;
        if !g.target.is_empty() && !key.iter().any(|n| *n == g.target) {
            if let Some(why) = unavailable_reason(&g.target) {
                log::warn!(
                    "subgraph `{}` was partitioned for `{}`, which is unavailable here ({why}); running it on {}",
                    g.name,
                    g.target,
                    key.join(", ")
                );
            }
        }
        let e = Arc::new(Executor::new(g.clone(), &self.constants, backends)?);
        map.insert(key, e.clone());
        Ok(e)
    }
}
