//! Planning: which backend runs each node of a subgraph, and the segments that follow.

use std::ops::Range;
use std::sync::Arc;

use super::backend::{Backend, Constants, CPU};
use crate::offload::format::{Graph, Role};

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
    /// The description's symbolic dimensions (format version 3); with some, this plan is for the
    /// load-time sample sizes, and each call's sizes are planned when first seen.
    pub symbols: Vec<String>,
    /// Consecutive nodes on one backend: `(backend, first node, node count)`.
    pub segments: Vec<(String, usize, usize)>,
}

/// Assign every node of `graph` to a backend.
pub(crate) fn plan(
    graph: &Graph,
    constants: Constants<'_>,
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
    symbols: &[String],
    constants: Constants<'_>,
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
        symbols: symbols.to_vec(),
        segments,
    }
}

pub(crate) fn segments_of(which: &[usize]) -> Vec<(usize, Range<usize>)> {
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
