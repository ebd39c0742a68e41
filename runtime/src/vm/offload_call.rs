//! The `mote.subgraph` call: find the call site checked at load, check the VM's tensors against
//! the description, and run the site's executor for this session's backend order.

use std::sync::Arc;

use super::program::Program;
use super::Session;
use crate::error::{Error, Result};
use crate::value::Value;

impl Session {
    /// A `mote.subgraph` call: `(desc, inputs..., constants..., outputs...)`.
    pub(super) fn run_subgraph(&mut self, m: &Program, args: &[Value]) -> Result<Value> {
        if !crate::offload::BUILT {
            // Unreachable in practice (such a model does not load), and a door: nothing of the
            // executor stays in a build without the `offload` feature.
            return Err(crate::offload::left_out(crate::offload::Needs::Model));
        }
        let desc = match args.first() {
            Some(Value::Str(s)) => s,
            _ => {
                return Err(Error::Subgraph {
                    subgraph: super::program::SUBGRAPH_FUNCTION.into(),
                    node: None,
                    message: "the first argument is not the description string".into(),
                })
            }
        };
        // The call site: the same description constant and the same weights.
        let site = m
            .subgraphs()
            .iter()
            .filter(|s| Arc::ptr_eq(&s.desc, desc) || *s.desc == **desc)
            .find(|s| {
                let ni = s.graph.inputs.len();
                s.constants
                    .iter()
                    .enumerate()
                    .all(|(k, c)| args.get(1 + ni + k).is_some_and(|a| c.is(a)))
            })
            .ok_or_else(|| Error::Subgraph {
                subgraph: super::program::SUBGRAPH_FUNCTION.into(),
                node: None,
                message: "a call that does not match any call site checked at load (description or weights differ)".into(),
            })?;
        let g0 = &site.graph;
        let (ni, nc, no) = (g0.inputs.len(), g0.constants.len(), g0.outputs.len());
        let bad = |message: String| Error::Subgraph {
            subgraph: g0.name.clone(),
            node: None,
            message,
        };
        if args.len() != 1 + ni + nc + no {
            return Err(bad(format!(
                "called with {} arguments, the description needs 1 + {ni} inputs + {nc} constants + {no} outputs",
                args.len()
            )));
        }
        // Symbolic dimensions (format version 3) take their sizes from the input tensors; the
        // graph bound to them is checked in full before anything is prepared for it.
        let mut shapes = Vec::with_capacity(ni);
        for (k, a) in args[1..1 + ni].iter().enumerate() {
            match a {
                Value::Tensor(x) => shapes.push(x.shape()),
                v => return Err(bad(format!("input {k} is a {}, not a tensor", v.kind()))),
            }
        }
        let binding = site.bind(&shapes)?;
        if self.backends.is_none() {
            self.backends = Some(crate::offload::resolve(&self.backend_names));
        }
        let backends = self.backends.as_deref().unwrap_or(&[]);
        let (g, exec) = site.executor(backends, &binding)?;
        let tensor_at = |k: usize, what: &str, t: usize| -> Result<crate::Tensor> {
            let d = &g.tensors[t];
            match &args[k] {
                Value::Tensor(x) if x.shape() == d.shape.as_slice() && x.dtype() == d.dtype => {
                    Ok(x.clone())
                }
                Value::Tensor(x) => Err(bad(format!(
                    "{what} is a {} tensor of shape {:?}, the description says {} {:?}",
                    x.dtype(),
                    x.shape(),
                    d.dtype,
                    d.shape
                ))),
                v => Err(bad(format!("{what} is a {}, not a tensor", v.kind()))),
            }
        };
        let inputs = g
            .inputs
            .iter()
            .enumerate()
            .map(|(k, &t)| tensor_at(1 + k, &format!("input {k}"), t))
            .collect::<Result<Vec<_>>>()?;
        let outputs = g
            .outputs
            .iter()
            .enumerate()
            .map(|(k, &t)| tensor_at(1 + ni + nc + k, &format!("output {k}"), t))
            .collect::<Result<Vec<_>>>()?;
        let scratch = exec.arena_bytes();
        if scratch > self.pool.budget_left() {
            return Err(Error::ResourceExhausted {
                budget: "SessionOptions::memory_budget_bytes",
                message: format!(
                    "subgraph `{}` needs {scratch} bytes of scratch memory, more than the {} \
                     bytes the budget has left",
                    g.name,
                    self.pool.budget_left()
                ),
            });
        }
        exec.run(
            &inputs,
            &outputs,
            self.pool.poisons(),
            Some(&self.interrupt),
        )?;
        Ok(Value::None)
    }
}
