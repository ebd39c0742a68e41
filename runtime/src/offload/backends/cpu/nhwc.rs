//! NCHW regions run in NHWC on the cpu backend (docs/cpu-kernels.md, "NCHW regions run in
//! NHWC").
//!
//! A region partitioned for BNNS is described in NCHW, BNNS's layout. Off Apple it runs on this
//! backend, whose NHWC convolutions are the fast ones (weights pre-packed for the own GEMM,
//! depthwise over contiguous channels). When every node of such a region runs here, the region
//! is rewritten once, before preparation: every 4-D tensor inside it is held in NHWC, 4-D
//! constants are transposed once, layout attributes and axes follow, and a transpose at the
//! region's edge converts each 4-D input and output; the VM's tensors stay NCHW. This is the
//! rewrite the partitioner does for ACL regions (docs/subgraph-format.md), done at run time.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::offload::format::{Graph, Layout, Node, Op, Role, TensorDesc};
use crate::offload::Constants;
use crate::tensor::Tensor;

/// Output dim `i` of an NCHW -> NHWC transpose is input dim `TO_NHWC[i]`.
const TO_NHWC: [usize; 4] = [0, 2, 3, 1];
/// Output dim `i` of an NHWC -> NCHW transpose is input dim `TO_NCHW[i]`.
const TO_NCHW: [usize; 4] = [0, 3, 1, 2];

/// A region rewritten to NHWC.
pub(crate) struct Converted {
    pub graph: Arc<Graph>,
    /// For each of the region's constants (in the order of `graph.constants`), whether it is
    /// 4-D and so held in NHWC by the rewritten region: [`Converted::constant`] transposes it
    /// when a backend gets it.
    pub transposed: Vec<bool>,
    /// Transposes the rewrite added (at the edge and around order-dependent reshapes).
    pub transposes: usize,
}

/// Where an NCHW axis of a 4-D tensor is in NHWC.
fn axis_in_nhwc(axis: usize) -> usize {
    TO_NHWC.iter().position(|&a| a == axis).unwrap_or(axis)
}

fn is_4d(g: &Graph, t: usize) -> bool {
    g.tensors[t].shape.len() == 4
}

/// Whether NCHW -> NHWC keeps a 4-D shape's element order (one channel, or one pixel).
fn order_kept(shape: &[i64]) -> bool {
    shape.len() != 4 || shape[1] == 1 || shape[2] * shape[3] == 1
}

/// Why node `node` cannot be rewritten, if it cannot.
fn blocker(g: &Graph, node: &Node) -> Option<&'static str> {
    let any_4d = node
        .inputs
        .iter()
        .chain(&node.outputs)
        .any(|&t| is_4d(g, t));
    let nchw = |l: Layout| (l != Layout::Nchw).then_some("an NHWC op in an NCHW region");
    match &node.op {
        Op::Conv2d(c) => nchw(c.layout),
        Op::MaxPool2d(p) | Op::AvgPool2d(p) => nchw(p.layout),
        Op::GlobalMaxPool2d(l) | Op::GlobalAvgPool2d(l) => nchw(*l),
        Op::Lrn(l) => nchw(l.layout),
        Op::ChannelShuffle { layout, .. } => nchw(*layout),
        Op::Dense { .. } | Op::Matmul | Op::LayerNorm { .. } => {
            any_4d.then_some("a 4-D operand of an op that reads it by its last axes")
        }
        Op::Add { .. } | Op::Multiply { .. } | Op::Subtract { .. } | Op::Divide { .. } => {
            // Broadcasting aligns trailing dims: a 4-D operand can only meet another 4-D one
            // (then both are permuted alike) or a single value.
            let mixed = any_4d
                && node
                    .inputs
                    .iter()
                    .any(|&t| !is_4d(g, t) && g.tensors[t].num_elements() != 1);
            mixed.then_some("a 4-D operand broadcast against a lower-rank one")
        }
        Op::Relu
        | Op::Relu6
        | Op::Clip { .. }
        | Op::Activation(_)
        | Op::Softmax { .. }
        | Op::Reshape
        | Op::Concatenate { .. }
        | Op::ScaleShift { .. }
        | Op::Transpose { .. }
        | Op::Split { .. } => None,
    }
}

/// The op with its layout and axes for NHWC operands.
fn convert_op(g: &Graph, node: &Node) -> Op {
    let rank4 = is_4d(g, node.inputs[0]);
    let axis = |a: usize| if rank4 { axis_in_nhwc(a) } else { a };
    match &node.op {
        Op::Conv2d(c) => Op::Conv2d(crate::offload::format::Conv2d {
            layout: Layout::Nhwc,
            ..*c
        }),
        Op::MaxPool2d(p) => Op::MaxPool2d(crate::offload::format::Pool2d {
            layout: Layout::Nhwc,
            ..*p
        }),
        Op::AvgPool2d(p) => Op::AvgPool2d(crate::offload::format::Pool2d {
            layout: Layout::Nhwc,
            ..*p
        }),
        Op::GlobalMaxPool2d(_) => Op::GlobalMaxPool2d(Layout::Nhwc),
        Op::GlobalAvgPool2d(_) => Op::GlobalAvgPool2d(Layout::Nhwc),
        Op::Lrn(l) => Op::Lrn(crate::offload::format::Lrn {
            layout: Layout::Nhwc,
            ..*l
        }),
        Op::ChannelShuffle { groups, .. } => Op::ChannelShuffle {
            layout: Layout::Nhwc,
            groups: *groups,
        },
        Op::Softmax { axis: a } => Op::Softmax { axis: axis(*a) },
        Op::Concatenate { axis: a } => Op::Concatenate { axis: axis(*a) },
        Op::Split { axis: a } => Op::Split { axis: axis(*a) },
        Op::ScaleShift {
            axis: a,
            activation,
        } => Op::ScaleShift {
            axis: axis(*a),
            activation: *activation,
        },
        // y_nchw = x_nchw.transpose(a), x_nchw = x_nhwc.transpose(TO_NCHW) and
        // y_nhwc = y_nchw.transpose(TO_NHWC), so y_nhwc = x_nhwc.transpose(p) with
        // p[i] = TO_NCHW[a[TO_NHWC[i]]].
        Op::Transpose { axes } if axes.len() == 4 => Op::Transpose {
            axes: (0..4).map(|i| TO_NCHW[axes[TO_NHWC[i]]]).collect(),
        },
        op => op.clone(),
    }
}

/// The NHWC description of a 4-D NCHW tensor.
fn nhwc_desc(d: &TensorDesc) -> TensorDesc {
    let mut d = d.clone();
    d.shape = TO_NHWC.iter().map(|&i| d.shape[i]).collect();
    if let Some(q) = d.quant.as_mut() {
        q.axis = q.axis.map(axis_in_nhwc);
    }
    d
}

/// `x` (row-major, `shape`) transposed by `axes`.
fn transpose_tensor(x: &Tensor, axes: &[usize]) -> Result<Tensor> {
    let shape: Vec<i64> = axes.iter().map(|&a| x.shape()[a]).collect();
    let mut y = Tensor::zeros(&shape, x.dtype())?;
    let op = Op::Transpose {
        axes: axes.to_vec(),
    };
    let out_shapes = [shape.as_slice()];
    super::ops::move_bytes(
        &op,
        x.dtype().size_bytes(),
        x.data(),
        x.shape(),
        &out_shapes,
        &mut [y.data_mut()?],
    )?;
    Ok(y)
}

/// `g` rewritten to NHWC, when it has an NCHW convolution and every node can be rewritten
/// (`Ok(None)` otherwise, with the reason logged).
pub(crate) fn to_nhwc(g: &Graph, constants: Constants<'_>) -> Result<Option<Converted>> {
    let has_nchw_conv = g
        .nodes
        .iter()
        .any(|n| matches!(&n.op, Op::Conv2d(c) if c.layout == Layout::Nchw));
    if !has_nchw_conv {
        return Ok(None);
    }
    if let Some((node, why)) = g
        .nodes
        .iter()
        .find_map(|n| blocker(g, n).map(|why| (n, why)))
    {
        log::debug!(
            "subgraph `{}` stays NCHW on cpu: node `{}` ({}): {why}",
            g.name,
            node.name,
            node.op.name()
        );
        return Ok(None);
    }
    if g.outputs
        .iter()
        .any(|&t| g.role(t) != Role::Produced && is_4d(g, t))
    {
        return Ok(None);
    }

    let mut tensors = g.tensors.clone();
    // The tensor each node reads or writes in place of the region's own: 4-D inputs and
    // outputs get an NHWC twin inside; every other 4-D tensor is held in NHWC itself.
    let mut inner: Vec<usize> = (0..g.tensors.len()).collect();
    for (t, d) in g.tensors.iter().enumerate() {
        if d.shape.len() != 4 {
            continue;
        }
        let io = g.inputs.contains(&t) || g.outputs.contains(&t);
        if io {
            inner[t] = tensors.len();
            tensors.push(nhwc_desc(d));
        } else {
            tensors[t] = nhwc_desc(d);
        }
    }
    let mut nodes = Vec::with_capacity(g.nodes.len() + g.inputs.len() + g.outputs.len());
    let mut transposes = 0;
    let mut transpose = |nodes: &mut Vec<Node>, name: String, axes: &[usize], x, y| {
        transposes += 1;
        nodes.push(Node {
            name,
            op: Op::Transpose {
                axes: axes.to_vec(),
            },
            inputs: vec![x],
            outputs: vec![y],
        });
    };
    for &t in &g.inputs {
        if inner[t] != t && g.nodes.iter().any(|n| n.inputs.contains(&t)) {
            let name = format!("to_nhwc_{t}");
            transpose(&mut nodes, name, &TO_NHWC, t, inner[t]);
        }
    }
    for node in &g.nodes {
        let inputs: Vec<usize> = node.inputs.iter().map(|&t| inner[t]).collect();
        let outputs: Vec<usize> = node.outputs.iter().map(|&t| inner[t]).collect();
        if matches!(node.op, Op::Reshape) {
            let (x, y) = (node.inputs[0], node.outputs[0]);
            let (xs, ys) = (&g.tensors[x].shape, &g.tensors[y].shape);
            if !(order_kept(xs) && order_kept(ys)) {
                // The reshape reads and writes the NCHW element order: transposes around it,
                // through tensors held as described.
                let mut from = inputs[0];
                if xs.len() == 4 {
                    from = tensors.len();
                    tensors.push(g.tensors[x].clone());
                    let name = format!("{}_to_nchw", node.name);
                    transpose(&mut nodes, name, &TO_NCHW, inputs[0], from);
                }
                let mut to = outputs[0];
                if ys.len() == 4 {
                    to = tensors.len();
                    tensors.push(g.tensors[y].clone());
                }
                nodes.push(Node {
                    name: node.name.clone(),
                    op: Op::Reshape,
                    inputs: vec![from],
                    outputs: vec![to],
                });
                if ys.len() == 4 {
                    let name = format!("{}_to_nhwc", node.name);
                    transpose(&mut nodes, name, &TO_NHWC, to, outputs[0]);
                }
                continue;
            }
        }
        nodes.push(Node {
            name: node.name.clone(),
            op: convert_op(g, node),
            inputs,
            outputs,
        });
    }
    for &t in &g.outputs {
        if inner[t] != t {
            let name = format!("to_nchw_{t}");
            transpose(&mut nodes, name, &TO_NCHW, inner[t], t);
        }
    }
    if constants.len() != g.constants.len() {
        return Err(Error::Subgraph {
            subgraph: g.name.clone(),
            node: None,
            message: format!(
                "{} constants given for {} in the description",
                constants.len(),
                g.constants.len()
            ),
        });
    }
    // Transposed as each is got (`Converted::constant`), not all here: a region's weights are
    // never all held twice, and weights left in the model file stay there until then.
    let transposed = g.constants.iter().map(|&t| is_4d(g, t)).collect();
    let graph = Graph {
        // `transpose` came with format version 2.
        version: g.version.max(2),
        target: g.target.clone(),
        name: g.name.clone(),
        tensors,
        inputs: g.inputs.clone(),
        constants: g.constants.clone(),
        outputs: g.outputs.clone(),
        nodes,
    };
    // Checked as a description from a file is: a rewrite that got something wrong is an error
    // (and the region runs as described), never a kernel reading out of bounds.
    let graph = Arc::new(Graph::from_json(&graph.to_json(), &g.name)?);
    Ok(Some(Converted {
        graph,
        transposed,
        transposes,
    }))
}

impl Converted {
    /// Constant `k` of the region, `t` as the original region holds it, in the layout the
    /// rewritten region reads.
    pub(crate) fn constant(&self, k: usize, t: Tensor) -> Result<Tensor> {
        if self.transposed.get(k).copied().unwrap_or(false) {
            transpose_tensor(&t, &TO_NHWC)
        } else {
            Ok(t)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::tests::values;
    use super::*;
    use crate::dtype::DType;
    use crate::host::threadpool::ThreadPool;
    use crate::offload::executor::Executor;
    use crate::offload::registry::resolve;

    /// An NCHW region with every op the rewrite changes: convolutions (plain, depthwise,
    /// grouped), scale/shift, channel shuffle, split, LRN, concatenate, a broadcast 4-D
    /// constant and a scalar, pools, a 4-D transpose, softmax over channels, reshapes that
    /// keep and that depend on the NCHW order (to 2-D and to 4-D), dense layers, and 4-D and
    /// 2-D outputs.
    const REGION: &str = r#"{"format":"mote.subgraph","version":2,"name":"nchw",
      "tensors":[
        {"shape":[1,3,9,9],"dtype":"float32"},
        {"shape":[8,3,3,3],"dtype":"float32"},{"shape":[8],"dtype":"float32"},
        {"shape":[1,8,9,9],"dtype":"float32"},
        {"shape":[8,1,3,3],"dtype":"float32"},{"shape":[1,8,5,5],"dtype":"float32"},
        {"shape":[8,4,1,1],"dtype":"float32"},{"shape":[1,8,5,5],"dtype":"float32"},
        {"shape":[8],"dtype":"float32"},{"shape":[8],"dtype":"float32"},
        {"shape":[1,8,5,5],"dtype":"float32"},{"shape":[1,8,5,5],"dtype":"float32"},
        {"shape":[1,4,5,5],"dtype":"float32"},{"shape":[1,4,5,5],"dtype":"float32"},
        {"shape":[1,4,5,5],"dtype":"float32"},{"shape":[1,8,5,5],"dtype":"float32"},
        {"shape":[1,8,1,1],"dtype":"float32"},{"shape":[1,8,5,5],"dtype":"float32"},
        {"shape":[1,8,4,4],"dtype":"float32"},{"shape":[1,8,4,4],"dtype":"float32"},
        {"shape":[1,8,4,4],"dtype":"float32"},
        {"shape":[1,8,1,1],"dtype":"float32"},{"shape":[1,8],"dtype":"float32"},
        {"shape":[4,8],"dtype":"float32"},{"shape":[1,4],"dtype":"float32"},
        {"shape":[1,128],"dtype":"float32"},{"shape":[3,128],"dtype":"float32"},
        {"shape":[1,3],"dtype":"float32"},
        {"shape":[1,2,4,16],"dtype":"float32"},{"shape":[1,2,4,16],"dtype":"float32"},
        {"shape":[1,2,4,16],"dtype":"float32"},{"shape":[1,2,4,16],"dtype":"float32"},
        {"shape":[1],"dtype":"float32"},{"shape":[1,2,4,16],"dtype":"float32"},
        {"shape":[1,8,2,2],"dtype":"float32"}],
      "inputs":[0,30],"constants":[1,2,4,6,8,9,16,23,26,32],"outputs":[20,24,27,33,34,17],
      "nodes":[
        {"op":"conv2d","name":"conv","inputs":[0,1,2],"outputs":[3],
         "attrs":{"layout":"NCHW","padding":[1,1,1,1],"groups":1,"activation":"relu"}},
        {"op":"conv2d","name":"dw","inputs":[3,4],"outputs":[5],
         "attrs":{"layout":"NCHW","strides":[2,2],"padding":[1,1,1,1],"groups":8}},
        {"op":"conv2d","name":"grouped","inputs":[5,6],"outputs":[7],
         "attrs":{"layout":"NCHW","groups":2}},
        {"op":"scale_shift","name":"bn","inputs":[7,8,9],"outputs":[10],
         "attrs":{"axis":1,"activation":"hardswish"}},
        {"op":"channel_shuffle","name":"shuffle","inputs":[10],"outputs":[11],
         "attrs":{"layout":"NCHW","groups":2}},
        {"op":"split","name":"split","inputs":[11],"outputs":[12,13],"attrs":{"axis":1}},
        {"op":"lrn","name":"lrn","inputs":[12],"outputs":[14],
         "attrs":{"layout":"NCHW","size":3,"alpha":0.01,"beta":0.75,"bias":1.0}},
        {"op":"concatenate","name":"concat","inputs":[14,13],"outputs":[15],"attrs":{"axis":-3}},
        {"op":"add","name":"add","inputs":[15,16],"outputs":[17],"attrs":{}},
        {"op":"max_pool2d","name":"maxpool","inputs":[17],"outputs":[18],
         "attrs":{"layout":"NCHW","pool_size":[2,2]}},
        {"op":"transpose","name":"swap_hw","inputs":[18],"outputs":[19],
         "attrs":{"axes":[0,1,3,2]}},
        {"op":"softmax","name":"softmax","inputs":[19],"outputs":[20],"attrs":{"axis":1}},
        {"op":"global_avg_pool2d","name":"gap","inputs":[17],"outputs":[21],
         "attrs":{"layout":"NCHW"}},
        {"op":"reshape","name":"squeeze","inputs":[21],"outputs":[22]},
        {"op":"dense","name":"fc","inputs":[22,23],"outputs":[24],"attrs":{}},
        {"op":"reshape","name":"flatten","inputs":[19],"outputs":[25]},
        {"op":"dense","name":"fc2","inputs":[25,26],"outputs":[27],"attrs":{}},
        {"op":"reshape","name":"regroup","inputs":[18],"outputs":[28]},
        {"op":"relu6","name":"relu6","inputs":[28],"outputs":[29]},
        {"op":"subtract","name":"sub","inputs":[29,30],"outputs":[31],"attrs":{}},
        {"op":"multiply","name":"scale","inputs":[31,32],"outputs":[33],"attrs":{}},
        {"op":"avg_pool2d","name":"avgpool","inputs":[17],"outputs":[34],
         "attrs":{"layout":"NCHW","pool_size":[3,3],"strides":[2,2]}}]}"#;

    fn tensors_for(g: &Graph, which: &[usize], seed: u64) -> Vec<Tensor> {
        which
            .iter()
            .enumerate()
            .map(|(k, &t)| {
                let d = &g.tensors[t];
                let v = values(d.num_elements(), seed + k as u64);
                Tensor::from_slice(&d.shape, &v).expect("tensor")
            })
            .collect()
    }

    /// The region prepared on `cpu` alone, rewritten to NHWC when `nhwc` (and it can be).
    fn prepare(g: &Arc<Graph>, consts: &[Tensor], nhwc: bool) -> Executor {
        Executor::with_layout(
            g.clone(),
            Constants::from(consts),
            &resolve(&["cpu".into()]),
            nhwc,
        )
        .expect("prepares")
    }

    fn run(g: &Arc<Graph>, consts: &[Tensor], inputs: &[Tensor], nhwc: bool) -> Vec<Vec<f32>> {
        let exec = prepare(g, consts, nhwc);
        (0..3)
            .map(|_| {
                let outs: Vec<Tensor> = g
                    .outputs
                    .iter()
                    .map(|&t| Tensor::zeros(&g.tensors[t].shape, DType::F32).expect("out"))
                    .collect();
                exec.run(inputs, &outs, true, None).expect("runs");
                outs.iter()
                    .flat_map(|o| o.as_slice::<f32>().expect("f32").to_vec())
                    .collect()
            })
            .collect()
    }

    /// Every run of the rewritten region (poisoned scratch, three runs, 1 and 2 threads)
    /// matches the same region run in NCHW, output by output.
    #[test]
    fn a_region_rewritten_to_nhwc_computes_what_the_nchw_one_does() {
        let g = Arc::new(Graph::parse(REGION, "t").expect("parses"));
        let consts = tensors_for(&g, &g.constants, 1);
        let inputs = tensors_for(&g, &g.inputs, 100);
        let c = to_nhwc(&g, Constants::from(&consts))
            .expect("rewrites")
            .expect("convertible");
        // Edge: 2 inputs in, 2 4-D outputs... every 4-D output back; the order-dependent
        // reshapes: flatten (1 in), regroup (1 in, 1 out).
        let outs_4d = g.outputs.iter().filter(|&&t| is_4d(&g, t)).count();
        assert_eq!(c.transposes, 2 + outs_4d + 3);
        assert!(c.graph.nodes.iter().all(|n| match &n.op {
            Op::Conv2d(c) => c.layout == Layout::Nhwc,
            Op::MaxPool2d(p) | Op::AvgPool2d(p) => p.layout == Layout::Nhwc,
            Op::GlobalAvgPool2d(l) => *l == Layout::Nhwc,
            _ => true,
        }));
        for threads in [1, 2] {
            ThreadPool::new(threads).install(|| {
                let want = run(&g, &consts, &inputs, false);
                let got = run(&g, &consts, &inputs, true);
                for (r, (w, o)) in want.iter().zip(&got).enumerate() {
                    assert_eq!(w.len(), o.len());
                    for (i, (a, b)) in w.iter().zip(o).enumerate() {
                        assert!(
                            (a - b).abs() <= 1e-5 * (1.0 + a.abs()),
                            "{threads} threads, run {r}: element {i}: NHWC {b}, NCHW {a}"
                        );
                    }
                }
            });
        }
    }

    /// Regions that cannot be rewritten run as described: a 4-D operand of layer_norm, no
    /// NCHW convolution.
    #[test]
    fn regions_it_cannot_rewrite_are_left_alone() {
        let ln = r#"{"format":"mote.subgraph","version":2,"name":"ln",
          "tensors":[{"shape":[1,2,3,3],"dtype":"float32"},{"shape":[2,2,1,1],"dtype":"float32"},
            {"shape":[1,2,3,3],"dtype":"float32"},{"shape":[3],"dtype":"float32"},
            {"shape":[1,2,3,3],"dtype":"float32"}],
          "inputs":[0],"constants":[1,3],"outputs":[4],
          "nodes":[{"op":"conv2d","name":"c","inputs":[0,1],"outputs":[2],
              "attrs":{"layout":"NCHW","groups":1}},
            {"op":"layer_norm","name":"n","inputs":[2,3,3],"outputs":[4],
              "attrs":{"axis":-1,"epsilon":1e-5}}]}"#;
        let pool = r#"{"format":"mote.subgraph","version":1,"name":"pool",
          "tensors":[{"shape":[1,2,4,4],"dtype":"float32"},{"shape":[1,2,2,2],"dtype":"float32"}],
          "inputs":[0],"constants":[],"outputs":[1],
          "nodes":[{"op":"max_pool2d","name":"p","inputs":[0],"outputs":[1],
              "attrs":{"layout":"NCHW","pool_size":[2,2],"strides":[2,2]}}]}"#;
        for text in [ln, pool] {
            let g = Graph::parse(text, "t").expect("parses");
            let consts = tensors_for(&g, &g.constants, 1);
            assert!(
                to_nhwc(&g, Constants::from(&consts))
                    .expect("no error")
                    .is_none(),
                "{}",
                g.name
            );
        }
    }

    /// A rewritten region transposes each 4-D weight only when the backend gets it: while a
    /// chain of eight NCHW convolutions is prepared, the bytes held at once never exceed what
    /// the executor keeps (the packed weights) plus a few weights in flight. Transposing every
    /// weight first, as the rewrite once did, holds all of them twice (about 18 weights' worth
    /// at the peak against the 12 allowed here).
    #[test]
    fn weights_are_transposed_one_at_a_time_while_preparing() {
        const CONVS: usize = 8;
        let act = r#"{"shape":[1,64,8,8],"dtype":"float32"}"#;
        let weight = r#"{"shape":[64,64,3,3],"dtype":"float32"}"#;
        let mut tensors = vec![act.to_string()];
        tensors.extend((0..CONVS).map(|_| weight.to_string()));
        tensors.extend((0..CONVS).map(|_| act.to_string()));
        let nodes: Vec<String> = (0..CONVS)
            .map(|i| {
                let x = if i == 0 { 0 } else { CONVS + i };
                format!(
                    r#"{{"op":"conv2d","name":"c{i}","inputs":[{x},{}],"outputs":[{}],
                        "attrs":{{"layout":"NCHW","padding":[1,1,1,1],"groups":1}}}}"#,
                    1 + i,
                    CONVS + 1 + i
                )
            })
            .collect();
        let constants: Vec<String> = (1..=CONVS).map(|t| t.to_string()).collect();
        let text = format!(
            r#"{{"format":"mote.subgraph","version":2,"name":"chain","tensors":[{}],
                "inputs":[0],"constants":[{}],"outputs":[{}],"nodes":[{}]}}"#,
            tensors.join(","),
            constants.join(","),
            2 * CONVS,
            nodes.join(",")
        );
        let g = Arc::new(Graph::parse(&text, "t").expect("parses"));
        let consts = tensors_for(&g, &g.constants, 3);
        let inputs = tensors_for(&g, &g.inputs, 300);
        let weight_bytes = 64 * 64 * 9 * 4;
        // One thread: every allocation and free of the preparation is this thread's.
        ThreadPool::new(1).install(|| {
            let before = crate::test_alloc::live();
            crate::test_alloc::peak_since_reset();
            let exec = prepare(&g, &consts, true);
            let peak = crate::test_alloc::peak_since_reset() - before;
            let kept = crate::test_alloc::live() - before;
            assert!(
                kept >= (CONVS * weight_bytes) as isize,
                "the executor keeps {kept} bytes, less than the packed weights"
            );
            assert!(
                peak <= kept + (4 * weight_bytes) as isize,
                "preparing held {peak} bytes at once: {} weights of {weight_bytes} bytes beyond \
                 the {kept} kept",
                (peak - kept) as f64 / weight_bytes as f64
            );
            // And it computes what the region run in NCHW does.
            let want = run(&g, &consts, &inputs, false);
            let outs = [Tensor::zeros(&[1, 64, 8, 8], DType::F32).expect("out")];
            exec.run(&inputs, &outs, true, None).expect("runs");
            let got = outs[0].as_slice::<f32>().expect("f32");
            // Eight layers without normalization grow the values to about 1e6: the two
            // summation orders agree relative to the output's scale.
            let scale = want[0].iter().fold(1f32, |m, v| m.max(v.abs()));
            for (i, (a, b)) in want[0].iter().zip(got).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * scale,
                    "element {i}: NHWC {b}, NCHW {a} (scale {scale})"
                );
            }
        });
    }

    /// A dense layer's weight is held in at most two forms at once while it is prepared: the
    /// weight as read (a fresh copy per get, as from a model file) goes once transposed, and
    /// the packed form is built only for the path kept (one row: the transposed weight; 64
    /// rows: the packed one). Keeping the copy and building both forms, as preparation once
    /// did, held three. Not NHWC-specific: this module has the preparation helpers.
    #[test]
    fn a_dense_weight_is_held_in_at_most_two_forms_while_preparing() {
        let (n, k) = (1024usize, 1024usize);
        let weight_bytes = (n * k * 4) as isize;
        for rows in [1usize, 64] {
            let text = format!(
                r#"{{"format":"mote.subgraph","version":2,"name":"fc","tensors":[
                    {{"shape":[{rows},{k}],"dtype":"float32"}},
                    {{"shape":[{n},{k}],"dtype":"float32"}},
                    {{"shape":[{rows},{n}],"dtype":"float32"}}],
                  "inputs":[0],"constants":[1],"outputs":[2],
                  "nodes":[{{"op":"dense","name":"fc","inputs":[0,1],"outputs":[2]}}]}}"#
            );
            let g = Arc::new(Graph::parse(&text, "t").expect("parses"));
            let consts = tensors_for(&g, &g.constants, 5);
            // Each get copies, as a weight read from the model file is.
            let read = |_: usize, t: Tensor| Tensor::from_bytes(t.shape(), t.dtype(), t.data());
            let held = Constants::from(&consts);
            // One thread: every allocation and free of the preparation is this thread's.
            ThreadPool::new(1).install(|| {
                let before = crate::test_alloc::live();
                crate::test_alloc::peak_since_reset();
                let exec = Executor::with_layout(
                    g.clone(),
                    held.mapped(&read),
                    &resolve(&["cpu".into()]),
                    true,
                )
                .expect("prepares");
                let peak = crate::test_alloc::peak_since_reset() - before;
                let kept = crate::test_alloc::live() - before;
                assert!(
                    kept >= weight_bytes,
                    "{rows} rows: the executor keeps {kept} bytes, less than the weight"
                );
                assert!(
                    peak - kept <= weight_bytes + weight_bytes / 2,
                    "{rows} rows: preparing held {:.2} weights beyond the {:.2} kept",
                    (peak - kept) as f64 / weight_bytes as f64,
                    kept as f64 / weight_bytes as f64
                );
                drop(exec);
            });
        }
    }

    /// The rewritten region holds its transposed weights only until the convolutions and
    /// dense layers have packed them: the executor releases them, and runs still match.
    #[test]
    fn packed_weights_are_released_after_preparation() {
        let g = Arc::new(Graph::parse(REGION, "t").expect("parses"));
        let consts = tensors_for(&g, &g.constants, 1);
        let exec = prepare(&g, &consts, true);
        let released = exec.released_constants();
        // The three conv weights, the conv bias and the two dense weights; the 4-D add
        // constant is read at run time.
        assert_eq!(released, vec![1, 2, 4, 6, 23, 26]);
    }
}
