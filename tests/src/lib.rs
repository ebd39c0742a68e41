//! Shared helpers for the conformance tests: the zoo built by `scripts/zoo.sh`, its manifest,
//! and comparison against TVM's reference outputs.

use std::path::PathBuf;

use mote::{DType, Tensor};
use serde_json::Value as Json;

/// The zoo directory. Tests never skip: without `MOTE_ZOO_DIR` they fail and say how to get one.
pub fn zoo_dir() -> PathBuf {
    match std::env::var_os("MOTE_ZOO_DIR") {
        Some(d) => PathBuf::from(d),
        None => panic!("MOTE_ZOO_DIR is not set: run `scripts/zoo.sh` and export MOTE_ZOO_DIR=<its output> (scripts/test.sh does this)"),
    }
}

pub fn manifest() -> Json {
    manifest_in(&zoo_dir())
}

/// The manifest of a zoo folder (the zoo, or the offload zoo: both use `python/zoo.py`'s schema).
pub fn manifest_in(dir: &std::path::Path) -> Json {
    let p = dir.join("manifest.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("manifest.json is valid JSON")
}

/// The manifest entry of one model.
pub fn model_entry(name: &str) -> Json {
    manifest()["models"]
        .as_array()
        .expect("models")
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("model `{name}` is not in the zoo manifest"))
        .clone()
}

pub fn zoo_path(file: &str) -> PathBuf {
    zoo_dir().join(file)
}

/// The arrays of a zoo `.npz` whose keys are `<prefix>0, <prefix>1, ...`, in index order.
fn load_indexed(file: &str, prefix: &str) -> Vec<Tensor> {
    load_indexed_in(&zoo_dir(), file, prefix)
}

/// The arrays of `dir/file` whose keys are `<prefix>0, <prefix>1, ...`, in index order.
pub fn load_indexed_in(dir: &std::path::Path, file: &str, prefix: &str) -> Vec<Tensor> {
    let mut arrays = mote::npy::read_npz(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    arrays.sort_by_key(|(k, _)| {
        k.trim_start_matches(prefix)
            .parse::<usize>()
            .unwrap_or(usize::MAX)
    });
    arrays.into_iter().map(|(_, t)| t).collect()
}

/// Inputs of a case, in `arg0, arg1, ...` order.
pub fn load_args(file: &str) -> Vec<Tensor> {
    load_indexed(file, "arg")
}

/// Expected outputs, in `out0, out1, ...` order.
pub fn load_outputs(file: &str) -> Vec<Tensor> {
    load_indexed(file, "out")
}

/// Elements as f64, for comparison across dtypes.
/// The first `N` bytes of `b` (an element of a tensor's data) as an array.
fn le<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

pub fn to_f64(t: &Tensor) -> Vec<f64> {
    let d = t.data();
    let n = t.num_elements();
    let dt = t.dtype();
    (0..n)
        .map(|i| {
            let b = &d[i * dt.size_bytes()..(i + 1) * dt.size_bytes()];
            match dt {
                DType::F32 => f32::from_le_bytes(le(b)) as f64,
                DType::F64 => f64::from_le_bytes(le(b)),
                DType::F16 => half::f16::from_le_bytes(le(b)).to_f64(),
                DType::BF16 => half::bf16::from_le_bytes(le(b)).to_f64(),
                DType::I8 => b[0] as i8 as f64,
                DType::U8 | DType::BOOL => b[0] as f64,
                DType::I16 => i16::from_le_bytes(le(b)) as f64,
                DType::I32 => i32::from_le_bytes(le(b)) as f64,
                DType::I64 => i64::from_le_bytes(le(b)) as f64,
                other => panic!("no comparison for {other}"),
            }
        })
        .collect()
}

/// Assert `got` matches `want` within `|got - want| <= atol + rtol * |want|` elementwise,
/// with equal shapes and dtypes; reports the worst element.
pub fn assert_close(what: &str, got: &Tensor, want: &Tensor, rtol: f64, atol: f64) {
    if let Err(m) = check_close(what, got, want, rtol, atol) {
        panic!("{m}");
    }
}

/// [`assert_close`] as a result, for callers that count failures instead of stopping at the
/// first (the soak binary): `Err` says what differs (dtype, shape, or the worst element).
pub fn check_close(
    what: &str,
    got: &Tensor,
    want: &Tensor,
    rtol: f64,
    atol: f64,
) -> Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!(
            "{what}: dtype is {} but TVM gives {}",
            got.dtype(),
            want.dtype()
        ));
    }
    if got.shape() != want.shape() {
        return Err(format!(
            "{what}: shape is {:?} but TVM gives {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let (g, w) = (to_f64(got), to_f64(want));
    let mut worst: Option<(usize, f64)> = None;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let excess = (a - b).abs() - (atol + rtol * b.abs());
        if (excess > 0.0 || a.is_nan() != b.is_nan()) && worst.is_none_or(|(_, e)| excess > e) {
            worst = Some((i, excess));
        }
    }
    match worst {
        Some((i, _)) => Err(format!(
            "{what}: element {i} is {} but TVM gives {} (rtol {rtol}, atol {atol})",
            g[i], w[i]
        )),
        None => Ok(()),
    }
}

pub fn manifest_path_of(model: &Json) -> PathBuf {
    zoo_path(model["file"].as_str().expect("file"))
}

/// The offload zoo (`scripts/offload-zoo.sh`, folder in `MOTE_OFFLOAD_ZOO_DIR`): partitioned
/// models checked against TVM's unpartitioned outputs.
pub mod offload_zoo {
    use std::path::PathBuf;

    use mote::{Model, SessionOptions, Tensor, Value};
    use serde_json::Value as Json;

    pub fn dir() -> PathBuf {
        match std::env::var_os("MOTE_OFFLOAD_ZOO_DIR") {
            Some(d) => PathBuf::from(d),
            None => panic!(
                "MOTE_OFFLOAD_ZOO_DIR is not set: build the offload zoo with `scripts/offload-zoo.sh` \
                 (python/offload_zoo.py --out DIR) and export MOTE_OFFLOAD_ZOO_DIR=DIR"
            ),
        }
    }

    pub fn manifest() -> Json {
        crate::manifest_in(&dir())
    }

    pub fn load_indexed(file: &str, prefix: &str) -> Vec<Tensor> {
        crate::load_indexed_in(&dir(), file, prefix)
    }

    pub fn run_all(backends: &[&str]) {
        let m = manifest();
        let models = m["models"].as_array().expect("manifest has `models`");
        assert!(!models.is_empty(), "the offload zoo has no models");
        let mut checked = 0;
        for entry in models {
            let name = entry["name"].as_str().expect("model name");
            let file = entry["file"].as_str().expect("model file");
            let model =
                Model::load(dir().join(file)).unwrap_or_else(|e| panic!("{name}: load: {e}"));
            checked += check_model(&model, entry, backends);
        }
        assert!(checked > 0, "no case was checked");
    }

    /// Run every case of the zoo entry `entry` on `model` with the preference order `backends`
    /// (1 and 2 threads, poisoned memory) and compare with TVM; returns the cases checked.
    pub fn check_model(model: &Model, entry: &Json, backends: &[&str]) -> usize {
        let name = entry["name"].as_str().expect("model name");
        let backends: Vec<String> = backends.iter().map(|s| s.to_string()).collect();
        let mut checked = 0;
        {
            let plan = model.partition_plan(&backends);
            if let Some(n) = entry["subgraphs"].as_u64() {
                assert_eq!(
                    plan.len() as u64,
                    n,
                    "{name}: number of mote.subgraph calls"
                );
            }
            for p in &plan {
                assert!(
                    !p.nodes.is_empty(),
                    "{name}: subgraph `{}` has no nodes",
                    p.name
                );
            }
            for threads in [1, 2] {
                let mut session = model
                    .session_with(SessionOptions {
                        threads: Some(threads),
                        backends: backends.clone(),
                        poison_memory: true,
                        ..Default::default()
                    })
                    .unwrap_or_else(|e| panic!("{name}: session: {e}"));
                for case in entry["cases"].as_array().expect("cases") {
                    let cname = format!(
                        "{name}.{} ({threads} threads, backends {backends:?})",
                        case["case"]
                    );
                    let function = case["function"].as_str().expect("function");
                    let args: Vec<Value> =
                        load_indexed(case["inputs"].as_str().expect("inputs"), "arg")
                            .into_iter()
                            .map(Value::Tensor)
                            .collect();
                    let out = session
                        .call(function, &args)
                        .unwrap_or_else(|e| panic!("{cname}: {e}"))
                        .flatten_tensors();
                    let expected =
                        load_indexed(case["expected"].as_str().expect("expected"), "out");
                    assert_eq!(out.len(), expected.len(), "{cname}: number of outputs");
                    let tol = &case["tolerance"];
                    let (rtol, atol) = (
                        tol["rtol"].as_f64().expect("rtol"),
                        tol["atol"].as_f64().expect("atol"),
                    );
                    for (i, (g, w)) in out.iter().zip(&expected).enumerate() {
                        crate::assert_close(&format!("{cname} out{i}"), g, w, rtol, atol);
                    }
                    checked += 1;
                }
            }
        }
        checked
    }
}
