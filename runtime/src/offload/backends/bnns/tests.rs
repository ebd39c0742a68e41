//! The whole backend (support checks, descriptor building, batching, broadcasts, copies,
//! scratch, filter pools) on real subgraph descriptions, against the built-in CPU backend.
//! Off Apple the filters run on the emulator; on Apple targets every case also runs on
//! Accelerate itself.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use super::emu::EMULATOR;
use super::*;
use crate::offload::backends::cpu::CpuBackend;
use crate::offload::executor::Executor;
use crate::offload::Constants;
use crate::tensor::Tensor;

fn engines() -> Vec<&'static dyn Engine> {
    #[allow(unused_mut)]
    let mut v: Vec<&'static dyn Engine> = vec![&EMULATOR];
    #[cfg(target_vendor = "apple")]
    v.push(&engine::Accelerate);
    v
}

struct Rng(u64);
impl Rng {
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 = self
                    .0
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
            })
            .collect()
    }
    fn tensor(&mut self, shape: &[i64]) -> Tensor {
        let n = shape.iter().product::<i64>() as usize;
        Tensor::from_slice(shape, &self.vec(n)).unwrap()
    }
}

fn t(shape: &[i64]) -> Json {
    json!({"shape": shape, "dtype": "float32"})
}

fn desc(
    tensors: Vec<Json>,
    inputs: &[usize],
    constants: &[usize],
    outputs: &[usize],
    nodes: Vec<Json>,
) -> String {
    json!({"format": "mote.subgraph", "version": 1, "target": "bnns", "name": "bnns_test",
           "tensors": tensors, "inputs": inputs, "constants": constants, "outputs": outputs,
           "nodes": nodes})
    .to_string()
}

fn node(op: &str, inputs: &[usize], output: usize, attrs: Json) -> Json {
    json!({"op": op, "name": format!("{op}_{output}"), "inputs": inputs, "outputs": [output],
           "attrs": attrs})
}

fn run(
    graph: &Arc<Graph>,
    order: &[Arc<dyn Backend>],
    consts: &[Tensor],
    inputs: &[Tensor],
) -> Vec<Tensor> {
    let exec = Executor::new(graph.clone(), Constants::from(consts), order).unwrap();
    let outputs: Vec<Tensor> = graph
        .outputs
        .iter()
        .map(|&o| Tensor::zeros(&graph.tensors[o].shape, graph.tensors[o].dtype).unwrap())
        .collect();
    exec.run(inputs, &outputs, true, None).unwrap();
    outputs
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (
        got.as_slice::<f32>().unwrap(),
        want.as_slice::<f32>().unwrap(),
    );
    for (i, (a, b)) in g.iter().zip(w).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
            "{what}: element {i} is {a}, the cpu backend gives {b}"
        );
    }
}

/// Every node must go to BNNS and prepare there; outputs must match the CPU backend.
fn check(what: &str, text: &str, consts: Vec<Tensor>, inputs: Vec<Tensor>) {
    let graph = Arc::new(Graph::parse(text, "test").unwrap());
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend);
    let want = run(&graph, std::slice::from_ref(&cpu), &consts, &inputs);
    for engine in engines() {
        let what = format!("{what} on {}", engine.name());
        let bnns: Arc<dyn Backend> = Arc::new(BnnsBackend::with_engine(engine));
        for k in 0..graph.nodes.len() {
            if let Err(why) = bnns.supports(&graph, k, Constants::from(&consts)) {
                panic!("{what}: node `{}` refused: {why}", graph.nodes[k].name);
            }
        }
        if let Err(e) = bnns.prepare(&graph, 0..graph.nodes.len(), Constants::from(&consts)) {
            panic!("{what}: prepare failed: {e}");
        }
        let order = [bnns.clone(), cpu.clone()];
        let exec = Executor::new(graph.clone(), Constants::from(&consts), &order).unwrap();
        assert!(
            exec.segment_backends().all(|b| b == NAME),
            "{what}: some nodes did not run on bnns"
        );
        // Twice: the second run reuses the pooled filter set and scratch.
        for round in 0..2 {
            let got = run(&graph, &order, &consts, &inputs);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_close(&format!("{what} (run {round}) out{i}"), g, w);
            }
        }
    }
}

fn conv_case(what: &str, x: &[i64], w: &[i64], bias: bool, attrs: Json, seed: u64) {
    let mut rng = Rng(seed);
    let get = |key: &str, default: [usize; 4]| -> Vec<usize> {
        attrs
            .get(key)
            .and_then(Json::as_array)
            .map(|a| a.iter().map(|v| v.as_u64().unwrap() as usize).collect())
            .unwrap_or_else(|| default.to_vec())
    };
    let (st, pad, dil) = (
        get("strides", [1; 4]),
        get("padding", [0; 4]),
        get("dilation", [1; 4]),
    );
    let out_dim = |i: usize| {
        crate::offload::format::window_out(
            x[2 + i],
            pad[i],
            pad[i + 2],
            w[2 + i] as usize,
            st[i],
            dil[i],
            false,
        )
        .unwrap()
    };
    let y = vec![x[0], w[0], out_dim(0), out_dim(1)];
    let ins: Vec<usize> = if bias { vec![0, 1, 2] } else { vec![0, 1] };
    let consts_idx: Vec<usize> = if bias { vec![1, 2] } else { vec![1] };
    let mut tensors = vec![t(x), t(w)];
    if bias {
        tensors.push(t(&[w[0]]));
    }
    let out = tensors.len();
    tensors.push(t(&y));
    let text = desc(
        tensors,
        &[0],
        &consts_idx,
        &[out],
        vec![node("conv2d", &ins, out, attrs)],
    );
    let mut consts = vec![rng.tensor(w)];
    if bias {
        consts.push(rng.tensor(&[w[0]]));
    }
    check(what, &text, consts, vec![rng.tensor(x)]);
}

fn nchw(extra: Json) -> Json {
    let mut a = json!({"layout": "NCHW"});
    if let (Some(a), Some(e)) = (a.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            a.insert(k.clone(), v.clone());
        }
    }
    a
}

#[test]
fn conv2d_variants_match_cpu() {
    conv_case(
        "plain",
        &[1, 3, 8, 8],
        &[4, 3, 3, 3],
        false,
        nchw(json!({})),
        1,
    );
    conv_case(
        "asymmetric padding",
        &[1, 3, 7, 8],
        &[4, 3, 3, 3],
        true,
        nchw(json!({"padding": [2, 1, 0, 1]})),
        2,
    );
    conv_case(
        "stride 2, trailing padding trimmed",
        &[1, 3, 8, 8],
        &[5, 3, 3, 3],
        true,
        nchw(json!({"strides": [2, 2], "padding": [1, 1, 1, 1]})),
        3,
    );
    conv_case(
        "dilation 2",
        &[1, 2, 9, 10],
        &[3, 2, 3, 3],
        false,
        nchw(json!({"dilation": [2, 2], "padding": [2, 1, 2, 1]})),
        4,
    );
    conv_case(
        "depthwise + bias + relu6",
        &[1, 4, 6, 6],
        &[4, 1, 3, 3],
        true,
        nchw(json!({"groups": 4, "padding": [1, 1, 1, 1], "activation": "relu6"})),
        5,
    );
    conv_case(
        "depthwise multiplier 2, stride 2",
        &[1, 4, 7, 7],
        &[8, 1, 3, 3],
        false,
        nchw(json!({"groups": 4, "strides": [2, 2], "padding": [1, 1, 1, 1]})),
        6,
    );
    conv_case(
        "groups 2",
        &[1, 4, 5, 5],
        &[6, 2, 3, 3],
        true,
        nchw(json!({"groups": 2, "activation": "relu"})),
        7,
    );
    conv_case(
        "batch 2 + bias + relu6",
        &[2, 3, 6, 6],
        &[5, 3, 3, 3],
        true,
        nchw(json!({"padding": [1, 1, 1, 1], "activation": "relu6"})),
        8,
    );
    conv_case(
        "1x1 + clip, rectangular stride",
        &[2, 3, 5, 6],
        &[4, 3, 1, 1],
        true,
        nchw(json!({"strides": [1, 2], "activation": {"clip": [-0.5, 0.75]}})),
        9,
    );
}

fn unary_case(what: &str, op: &str, x: &[i64], y: &[i64], attrs: Json, seed: u64) {
    let text = desc(
        vec![t(x), t(y)],
        &[0],
        &[],
        &[1],
        vec![node(op, &[0], 1, attrs)],
    );
    check(what, &text, vec![], vec![Rng(seed).tensor(x)]);
}

#[test]
fn pools_match_cpu() {
    let x = [2, 3, 9, 9];
    unary_case(
        "max 3x3 s2 p1",
        "max_pool2d",
        &x,
        &[2, 3, 5, 5],
        nchw(json!({"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1, 1, 1]})),
        11,
    );
    unary_case(
        "avg excluding padding",
        "avg_pool2d",
        &x,
        &[2, 3, 5, 5],
        nchw(
            json!({"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1, 1, 1],
                    "count_include_pad": false}),
        ),
        12,
    );
    unary_case(
        "avg including padding, bottom/right pad",
        "avg_pool2d",
        &x,
        &[2, 3, 5, 5],
        nchw(
            json!({"pool_size": [2, 2], "strides": [2, 2], "padding": [0, 0, 1, 1],
                    "count_include_pad": true}),
        ),
        13,
    );
    unary_case(
        "avg with a ceil_mode that does not change the size",
        "avg_pool2d",
        &x,
        &[2, 3, 4, 4],
        nchw(json!({"pool_size": [3, 3], "strides": [2, 2], "ceil_mode": true})),
        14,
    );
    unary_case(
        "dilated max, trailing padding trimmed",
        "max_pool2d",
        &[1, 2, 8, 8],
        &[1, 2, 3, 3],
        nchw(
            json!({"pool_size": [2, 2], "strides": [3, 3], "dilation": [2, 2],
                    "padding": [0, 0, 1, 1]}),
        ),
        15,
    );
    unary_case(
        "max 2x2 s2 over 5x7: unread last row/column cropped",
        "max_pool2d",
        &[2, 3, 5, 7],
        &[2, 3, 2, 3],
        nchw(json!({"pool_size": [2, 2], "strides": [2, 2]})),
        16,
    );
}

#[test]
fn global_pools_match_cpu() {
    let attrs = json!({"layout": "NCHW"});
    unary_case(
        "global max",
        "global_max_pool2d",
        &[2, 5, 4, 3],
        &[2, 5, 1, 1],
        attrs.clone(),
        21,
    );
    unary_case(
        "global avg",
        "global_avg_pool2d",
        &[2, 5, 4, 3],
        &[2, 5, 1, 1],
        attrs,
        22,
    );
}

#[test]
fn dense_matches_cpu() {
    let mut rng = Rng(31);
    let text = desc(
        vec![t(&[2, 16]), t(&[8, 16]), t(&[8]), t(&[2, 8])],
        &[0],
        &[1, 2],
        &[3],
        vec![node("dense", &[0, 1, 2], 3, json!({"activation": "relu"}))],
    );
    check(
        "dense + bias + relu, batch 2",
        &text,
        vec![rng.tensor(&[8, 16]), rng.tensor(&[8])],
        vec![rng.tensor(&[2, 16])],
    );
    let text = desc(
        vec![t(&[2, 3, 5]), t(&[4, 5]), t(&[2, 3, 4])],
        &[0],
        &[1],
        &[2],
        vec![node(
            "dense",
            &[0, 1],
            2,
            json!({"activation": {"clip": [-0.2, 0.3]}}),
        )],
    );
    check(
        "dense on 3-D data (batch 6) + clip",
        &text,
        vec![rng.tensor(&[4, 5])],
        vec![rng.tensor(&[2, 3, 5])],
    );
}

#[test]
fn add_and_multiply_match_cpu() {
    let mut rng = Rng(41);
    let text = desc(
        vec![t(&[2, 3, 4]), t(&[2, 3, 4]), t(&[2, 3, 4])],
        &[0, 1],
        &[],
        &[2],
        vec![node("add", &[0, 1], 2, json!({}))],
    );
    check(
        "add",
        &text,
        vec![],
        vec![rng.tensor(&[2, 3, 4]), rng.tensor(&[2, 3, 4])],
    );
    let text = desc(
        vec![t(&[2, 3, 4]), t(&[2, 3, 4]), t(&[2, 3, 4])],
        &[0, 1],
        &[],
        &[2],
        vec![node("multiply", &[0, 1], 2, json!({"activation": "relu6"}))],
    );
    check(
        "multiply + relu6",
        &text,
        vec![],
        vec![rng.tensor(&[2, 3, 4]), rng.tensor(&[2, 3, 4])],
    );
    // Broadcasting: an input broadcast at run time, a constant broadcast at prepare time.
    let text = desc(
        vec![
            t(&[1, 4, 3, 3]),
            t(&[1, 4, 1, 3]),
            t(&[1, 4, 3, 3]),
            t(&[4, 1, 1]),
            t(&[1, 4, 3, 3]),
        ],
        &[0, 1],
        &[3],
        &[4],
        vec![
            node("add", &[0, 1], 2, json!({})),
            node("multiply", &[2, 3], 4, json!({"activation": "relu"})),
        ],
    );
    check(
        "broadcast add, multiply by a constant",
        &text,
        vec![rng.tensor(&[4, 1, 1])],
        vec![rng.tensor(&[1, 4, 3, 3]), rng.tensor(&[1, 4, 1, 3])],
    );
}

#[test]
fn activations_and_softmax_match_cpu() {
    let s = [2, 3, 4];
    unary_case("relu", "relu", &s, &s, json!({}), 51);
    unary_case("relu6", "relu6", &s, &s, json!({}), 52);
    unary_case("clip", "clip", &s, &s, json!({"min": -0.3, "max": 0.4}), 53);
    unary_case(
        "softmax last axis",
        "softmax",
        &[2, 10],
        &[2, 10],
        json!({"axis": -1}),
        54,
    );
    unary_case(
        "softmax before trailing unit dims",
        "softmax",
        &[2, 3, 4, 1],
        &[2, 3, 4, 1],
        json!({"axis": 2}),
        55,
    );
}

#[test]
fn reshape_and_concatenate_match_cpu() {
    let mut rng = Rng(61);
    unary_case(
        "reshape (a copy)",
        "reshape",
        &[2, 3, 4],
        &[6, 4],
        json!({}),
        62,
    );
    // relu -> reshape (internal: shares the relu output) -> softmax.
    let text = desc(
        vec![t(&[2, 3, 4, 4]), t(&[2, 3, 4, 4]), t(&[2, 48]), t(&[2, 48])],
        &[0],
        &[],
        &[3],
        vec![
            node("relu", &[0], 1, json!({})),
            node("reshape", &[1], 2, json!({})),
            node("softmax", &[2], 3, json!({"axis": -1})),
        ],
    );
    check(
        "relu -> reshape -> softmax",
        &text,
        vec![],
        vec![rng.tensor(&[2, 3, 4, 4])],
    );
    let text = desc(
        vec![t(&[2, 2, 3, 3]), t(&[2, 3, 3, 3]), t(&[2, 5, 3, 3])],
        &[0, 1],
        &[],
        &[2],
        vec![node("concatenate", &[0, 1], 2, json!({"axis": 1}))],
    );
    check(
        "concatenate channels",
        &text,
        vec![],
        vec![rng.tensor(&[2, 2, 3, 3]), rng.tensor(&[2, 3, 3, 3])],
    );
    // Two convs concatenated (internal tensors in scratch), then relu.
    let text = desc(
        vec![
            t(&[1, 3, 6, 6]),
            t(&[4, 3, 3, 3]),
            t(&[2, 3, 1, 1]),
            t(&[1, 4, 6, 6]),
            t(&[1, 2, 6, 6]),
            t(&[1, 6, 6, 6]),
            t(&[1, 6, 6, 6]),
        ],
        &[0],
        &[1, 2],
        &[6],
        vec![
            node("conv2d", &[0, 1], 3, nchw(json!({"padding": [1, 1, 1, 1]}))),
            node("conv2d", &[0, 2], 4, nchw(json!({}))),
            node("concatenate", &[3, 4], 5, json!({"axis": -3})),
            node("relu", &[5], 6, json!({})),
        ],
    );
    check(
        "conv, conv -> concatenate -> relu",
        &text,
        vec![rng.tensor(&[4, 3, 3, 3]), rng.tensor(&[2, 3, 1, 1])],
        vec![rng.tensor(&[1, 3, 6, 6])],
    );
}

fn cnn() -> (String, Vec<Tensor>, Vec<Tensor>) {
    let mut rng = Rng(71);
    let text = desc(
        vec![
            t(&[2, 3, 8, 8]),
            t(&[4, 3, 3, 3]),
            t(&[4]),
            t(&[2, 4, 8, 8]),
            t(&[2, 4, 8, 8]),
            t(&[2, 4, 4, 4]),
            t(&[2, 64]),
            t(&[10, 64]),
            t(&[10]),
            t(&[2, 10]),
        ],
        &[0],
        &[1, 2, 7, 8],
        &[9],
        vec![
            node(
                "conv2d",
                &[0, 1, 2],
                3,
                nchw(json!({"padding": [1, 1, 1, 1]})),
            ),
            node("relu", &[3], 4, json!({})),
            node(
                "max_pool2d",
                &[4],
                5,
                nchw(json!({"pool_size": [2, 2], "strides": [2, 2]})),
            ),
            node("reshape", &[5], 6, json!({})),
            node("dense", &[6, 7, 8], 9, json!({})),
        ],
    );
    let consts = vec![
        rng.tensor(&[4, 3, 3, 3]),
        rng.tensor(&[4]),
        rng.tensor(&[10, 64]),
        rng.tensor(&[10]),
    ];
    (text, consts, vec![rng.tensor(&[2, 3, 8, 8])])
}

#[test]
fn multi_node_segment_matches_cpu() {
    let (text, consts, inputs) = cnn();
    check(
        "conv -> relu -> max_pool -> reshape -> dense",
        &text,
        consts,
        inputs,
    );
}

#[test]
fn concurrent_runs_of_one_segment_agree() {
    let (text, consts, inputs) = cnn();
    let graph = Arc::new(Graph::parse(&text, "test").unwrap());
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend);
    let want = run(&graph, std::slice::from_ref(&cpu), &consts, &inputs);
    for engine in engines() {
        let order: Vec<Arc<dyn Backend>> =
            vec![Arc::new(BnnsBackend::with_engine(engine)), cpu.clone()];
        let exec = Executor::new(graph.clone(), Constants::from(&consts), &order).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..8 {
                        let out = Tensor::zeros(&[2, 10], DType::F32).unwrap();
                        exec.run(&inputs, std::slice::from_ref(&out), true, None)
                            .unwrap();
                        assert_close("concurrent run", &out, &want[0]);
                    }
                });
            }
        });
    }
}

fn refusal(text: &str, needle: &str) {
    let graph = Graph::parse(text, "test").unwrap();
    let b = BnnsBackend::with_engine(&EMULATOR);
    match b.supports(&graph, 0, Constants::from(&[] as &[Tensor])) {
        Ok(()) => panic!("node accepted; expected a refusal mentioning `{needle}`"),
        Err(why) => assert!(why.contains(needle), "reason `{why}` lacks `{needle}`"),
    }
}

#[test]
fn unsupported_nodes_are_refused_with_the_reason() {
    refusal(
        &desc(
            vec![t(&[1, 8, 8, 3]), t(&[4, 3, 3, 3]), t(&[1, 6, 6, 4])],
            &[0],
            &[1],
            &[2],
            vec![node("conv2d", &[0, 1], 2, json!({"layout": "NHWC"}))],
        ),
        "NHWC",
    );
    refusal(
        &desc(
            vec![
                json!({"shape": [2, 3], "dtype": "float16"}),
                json!({"shape": [2, 3], "dtype": "float16"}),
            ],
            &[0],
            &[],
            &[1],
            vec![node("relu", &[0], 1, json!({}))],
        ),
        "float16",
    );
    let q = json!({"shape": [2, 3], "dtype": "int8",
                   "quant": {"scale": [0.1], "zero_point": [0]}});
    refusal(
        &desc(
            vec![q.clone(), q.clone(), q],
            &[0, 1],
            &[],
            &[2],
            vec![node("add", &[0, 1], 2, json!({}))],
        ),
        "int8",
    );
    refusal(
        &desc(
            vec![t(&[1, 3, 6, 6]), t(&[4, 3, 3, 3]), t(&[1, 4, 4, 4])],
            &[0, 1],
            &[],
            &[2],
            vec![node("conv2d", &[0, 1], 2, nchw(json!({})))],
        ),
        "not a constant",
    );
    refusal(
        &desc(
            vec![t(&[1, 2, 6, 6]), t(&[1, 2, 4, 4])],
            &[0],
            &[],
            &[1],
            vec![node(
                "max_pool2d",
                &[0],
                1,
                nchw(
                    json!({"pool_size": [2, 2], "strides": [2, 2], "padding": [0, 0, 1, 1],
                            "ceil_mode": true}),
                ),
            )],
        ),
        "ceil_mode",
    );
    refusal(
        &desc(
            vec![t(&[1, 3, 4, 4]), t(&[1, 3, 4, 4])],
            &[0],
            &[],
            &[1],
            vec![node("softmax", &[0], 1, json!({"axis": 1}))],
        ),
        "axis_flags",
    );
    refusal(
        &desc(
            vec![t(&[2, 3]), t(&[3, 4]), t(&[2, 4])],
            &[0, 1],
            &[],
            &[2],
            vec![node("matmul", &[0, 1], 2, json!({}))],
        ),
        "matmul",
    );
}

#[test]
fn unavailable_off_apple_with_a_reason() {
    let b = BnnsBackend::default();
    if cfg!(target_vendor = "apple") {
        assert!(b.available().is_ok());
    } else {
        let why = b.available().unwrap_err();
        assert!(why.contains("Accelerate"), "{why}");
        let g = Graph::parse(&cnn().0, "test").unwrap();
        assert!(b
            .supports(&g, 0, Constants::from(&[] as &[Tensor]))
            .is_err());
    }
}

/// Version-2 ops and activations are not mapped (docs/bnns.md): refused with a reason that names
/// them, so they run on `cpu`.
#[test]
fn version_2_ops_and_activations_are_refused_with_the_reason() {
    let v2 = |tensors: Vec<Json>, consts: &[usize], nodes: Vec<Json>, outs: &[usize]| {
        let mut j: Json = serde_json::from_str(&desc(tensors, &[0], consts, outs, nodes)).unwrap();
        j["version"] = json!(2);
        j.to_string()
    };
    let x = || t(&[1, 4, 3, 3]);
    // (op, tensors, constants, attrs, outputs)
    type Case = (&'static str, Vec<Json>, Vec<usize>, Json, Vec<usize>);
    let cases: Vec<Case> = vec![
        (
            "activation",
            vec![x(), x()],
            vec![],
            json!({"activation": "sigmoid"}),
            vec![1],
        ),
        (
            "lrn",
            vec![x(), x()],
            vec![],
            nchw(json!({"size": 3})),
            vec![1],
        ),
        (
            "transpose",
            vec![x(), t(&[1, 3, 3, 4])],
            vec![],
            json!({"axes": [0, 2, 3, 1]}),
            vec![1],
        ),
        (
            "channel_shuffle",
            vec![x(), x()],
            vec![],
            nchw(json!({"groups": 2})),
            vec![1],
        ),
        (
            "split",
            vec![x(), t(&[1, 1, 3, 3]), t(&[1, 3, 3, 3])],
            vec![],
            json!({"axis": 1}),
            vec![1, 2],
        ),
        (
            "scale_shift",
            vec![x(), t(&[4]), t(&[4]), x()],
            vec![1, 2],
            json!({"axis": 1}),
            vec![3],
        ),
        (
            "layer_norm",
            vec![x(), t(&[3]), t(&[3]), x()],
            vec![1, 2],
            json!({"axis": -1}),
            vec![3],
        ),
    ];
    for (op, tensors, consts, attrs, outs) in cases {
        let ins: Vec<usize> = std::iter::once(0).chain(consts.iter().copied()).collect();
        let n = json!({"op": op, "name": "n", "inputs": ins, "outputs": outs, "attrs": attrs});
        refusal(&v2(tensors, &consts, vec![n], &outs), op);
    }
    for op in ["subtract", "divide"] {
        refusal(
            &v2(
                vec![x(), x(), x()],
                &[],
                vec![node(op, &[0, 1], 2, json!({}))],
                &[2],
            )
            .replace("\"inputs\":[0]", "\"inputs\":[0,1]"),
            op,
        );
    }
    // A fused version-2 activation on an op BNNS maps otherwise.
    refusal(
        &v2(
            vec![t(&[2, 3]), t(&[4, 3]), t(&[2, 4])],
            &[1],
            vec![node("dense", &[0, 1], 2, json!({"activation": "gelu"}))],
            &[2],
        ),
        "activation `gelu`",
    );
}
