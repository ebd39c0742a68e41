//! The contract between the runtime and a backend: what a backend says about itself, what it
//! prepares, and the buffers a prepared segment runs on.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::offload::format::Graph;

pub use super::constants::Constants;

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
    /// tensors, in the order of `graph.constants` (each `get` may read one from the model
    /// file: most backends decide from `graph` alone). `Err` carries the reason.
    fn supports(
        &self,
        graph: &Graph,
        node: usize,
        constants: Constants<'_>,
    ) -> std::result::Result<(), String>;
    /// Prepare the consecutive nodes `nodes` of `graph` to run many times. A backend that
    /// copies a constant into its own form should get it, copy it and drop it before getting
    /// the next one (see [`Constants`]), and list it in [`Prepared::copied_constants`].
    fn prepare(
        &self,
        graph: &Arc<Graph>,
        nodes: Range<usize>,
        constants: Constants<'_>,
    ) -> Result<Box<dyn Prepared>>;
}

/// A prepared segment: immutable after preparation, runnable from several threads (a backend
/// that cannot run one segment concurrently serializes inside).
pub trait Prepared: Send + Sync {
    /// Run once. `buffers` holds every tensor the segment reads or writes (constants may be
    /// served from the prepared state instead).
    fn run(&self, buffers: &mut Buffers<'_>) -> Result<()>;

    /// Constants (tensor indices) this segment copied while preparing and never reads from
    /// `buffers`: the runtime keeps no copy of them (unless another segment reads them) and
    /// passes an empty buffer instead.
    fn copied_constants(&self) -> Vec<usize> {
        Vec::new()
    }
}

/// The buffers a node reads and the ones it writes.
pub type NodeBuffers<'b> = (Vec<&'b [u8]>, Vec<&'b mut [u8]>);

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
    /// Buffers over raw `(pointer, length)` pairs, one per tensor index (`None`: no buffer).
    ///
    /// # Safety
    /// Every pointer must be valid for reads and writes of its length for `'a`, and no two
    /// buffers may overlap.
    pub(crate) unsafe fn from_raw(ptrs: Vec<Option<(*mut u8, usize)>>) -> Buffers<'a> {
        Buffers {
            ptrs,
            _life: PhantomData,
        }
    }

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

    /// The buffers a node with several outputs (`split`) reads and writes.
    pub fn node_io_multi(
        &mut self,
        inputs: &[usize],
        outputs: &[usize],
    ) -> Result<NodeBuffers<'_>> {
        for (k, &o) in outputs.iter().enumerate() {
            if inputs.contains(&o) || outputs[..k].contains(&o) {
                return Err(Error::Backend {
                    backend: CPU.into(),
                    message: format!("tensor {o} is written twice or also read by one node"),
                });
            }
        }
        let get = |t: usize| {
            self.ptrs
                .get(t)
                .copied()
                .flatten()
                .ok_or_else(|| Self::missing(t))
        };
        let mut ins = Vec::with_capacity(inputs.len());
        for &t in inputs {
            let (p, n) = get(t)?;
            // SAFETY: as in `node_io`: valid for 'a, disjoint from every output buffer, and not
            // written while the returned borrow of `self` lives.
            ins.push(unsafe { std::slice::from_raw_parts(p as *const u8, n) });
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for &t in outputs {
            let (p, n) = get(t)?;
            // SAFETY: the outputs are distinct tensors (checked above), whose buffers are
            // disjoint from each other and from the inputs; no other view exists while `self`
            // is mutably borrowed.
            outs.push(unsafe { std::slice::from_raw_parts_mut(p, n) });
        }
        Ok((ins, outs))
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
