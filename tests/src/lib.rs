//! Shared helpers for the conformance tests: the zoo built by `scripts/zoo.sh`, its manifest,
//! and comparison against TVM's reference outputs.

use std::path::{Path, PathBuf};

use mote::{DType, Error, Model, SessionOptions, Tensor, Value};
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

/// The function the `packed` model's kernel calls by name: dst[i] = 2 * src[i] + 1 on raw
/// float32 pointers (the same contract as the Python version the zoo registers with TVM).
pub fn register_scale_shift() {
    mote::register_function(
        "mote.zoo.scale_shift",
        std::sync::Arc::new(|args: &[mote::Arg<'_>]| {
            let [mote::Arg::OpaquePtr(src), mote::Arg::OpaquePtr(dst), mote::Arg::Int(n)] = *args
            else {
                return Err(mote::Error::InvalidArgument(format!(
                    "unexpected arguments {args:?}"
                )));
            };
            for i in 0..n as usize {
                // SAFETY: the kernel passes the data pointers of its two float32[8] buffers and 8.
                unsafe {
                    let v = *(src as *const f32).add(i);
                    *(dst as *mut f32).add(i) = 2.0 * v + 1.0;
                }
            }
            Ok(Value::None)
        }),
    );
}

/// Run every case of zoo model `name` (its manifest `entry`) through `model` (the zoo's build,
/// or another build of the same module) on 1 and 2 threads, twice each in a poisoned session,
/// against TVM's outputs; a case where TVM raises must give a kernel error with its text.
pub fn run_relax_cases(model: &Model, name: &str, entry: &Json) {
    for threads in [1, 2] {
        let mut session = poisoned_session(model, threads);
        for case in entry["cases"].as_array().expect("cases") {
            let cname = format!(
                "{name}.{} ({threads} threads)",
                case["case"].as_str().unwrap()
            );
            let function = case["function"].as_str().unwrap();
            let args: Vec<Value> = load_args(case["inputs"].as_str().unwrap())
                .into_iter()
                .map(Value::Tensor)
                .collect();
            let result = match case["mode"].as_str().unwrap() {
                "stateful" => session
                    .set_input(function, args)
                    .and_then(|_| session.invoke_stateful(function))
                    .and_then(|_| session.get_output(function)),
                _ => session.call(function, &args),
            };
            if let Some(expected_error) = case["expect_error"].as_str() {
                let err = result.expect_err(&format!("{cname}: TVM raises here, Mote must too"));
                assert!(
                    err.to_string().contains(expected_error),
                    "{cname}: error `{err}` does not mention `{expected_error}`"
                );
                assert!(
                    matches!(err, mote::Error::Kernel { .. }),
                    "{cname}: {err:?} is not a kernel error"
                );
                continue;
            }
            let out = result
                .unwrap_or_else(|e| panic!("{cname}: {e}"))
                .flatten_tensors();
            let want = load_outputs(case["expected"].as_str().unwrap());
            assert_eq!(out.len(), want.len(), "{cname}: number of outputs");
            let tol = &case["tolerance"];
            let (rtol, atol) = (tol["rtol"].as_f64().unwrap(), tol["atol"].as_f64().unwrap());
            for (i, (g, w)) in out.iter().zip(&want).enumerate() {
                assert_close(&format!("{cname} out{i}"), g, w, rtol, atol);
            }
            // Run again, the same way: now every intermediate comes from reused (and
            // re-poisoned) storage, and the answer must still be TVM's.
            let args: Vec<Value> = load_args(case["inputs"].as_str().unwrap())
                .into_iter()
                .map(Value::Tensor)
                .collect();
            let again = match case["mode"].as_str().unwrap() {
                "stateful" => session
                    .invoke_stateful(function)
                    .and_then(|_| session.get_output(function)),
                _ => session.call(function, &args),
            };
            let again = again
                .unwrap_or_else(|e| panic!("{cname} second run: {e}"))
                .flatten_tensors();
            assert_eq!(
                again.len(),
                want.len(),
                "{cname} second run: number of outputs"
            );
            for (i, (g, w)) in again.iter().zip(&want).enumerate() {
                assert_close(&format!("{cname} second run out{i}"), g, w, rtol, atol);
            }
            // The first run's outputs are the caller's: the second run must not have reused
            // their memory.
            for (i, (g, w)) in out.iter().zip(&want).enumerate() {
                assert_close(&format!("{cname} first run out{i}, kept"), g, w, rtol, atol);
            }
        }
    }
}

pub fn manifest_path_of(model: &Json) -> PathBuf {
    zoo_path(model["file"].as_str().expect("file"))
}

/// A session of `threads` threads whose every buffer, fresh or reused, starts as NaN (or 0xA5
/// bytes): an output element no kernel task wrote cannot match TVM.
pub fn poisoned_session(model: &Model, threads: usize) -> mote::Session {
    model
        .session_with(SessionOptions {
            threads: Some(threads),
            poison_memory: true,
            ..Default::default()
        })
        .unwrap()
}

/// Overwrite every byte of a tensor the test owns alone with 0xFF: NaN in every float width,
/// -1 in every integer width, a value no zoo kernel output has.
pub fn poison(t: &mut Tensor) {
    t.data_mut()
        .expect("the test holds the only handle to its output buffer")
        .fill(0xFF);
}

/// A case's arguments: tensors from its `.npz` in `dir`, in order, with the `scalars` indices
/// (0-d arrays) turned into scalars by their dtype and the `outputs` indices poisoned.
pub fn kernel_args(dir: &Path, case: &Json) -> Vec<Value> {
    let index_list = |k: &str| -> Vec<usize> {
        case[k]
            .as_array()
            .unwrap_or_else(|| panic!("kernel case without `{k}`"))
            .iter()
            .map(|v| v.as_u64().expect("index") as usize)
            .collect()
    };
    let (scalars, outputs) = (index_list("scalars"), index_list("outputs"));
    load_indexed_in(dir, case["inputs"].as_str().unwrap(), "arg")
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            if scalars.contains(&i) {
                assert_eq!(t.ndim(), 0, "arg{i} is a scalar, stored as a 0-d array");
                let v = to_f64(&t)[0];
                return match t.dtype() {
                    DType::F32 | DType::F64 => Value::Float(v),
                    _ => Value::Int(v as i64),
                };
            }
            if outputs.contains(&i) {
                poison(&mut t);
            }
            Value::Tensor(t)
        })
        .collect()
}

/// Every case of a kernel-only library of the zoo in `dir` (the zoo, or the OpenCL zoo), at 1
/// and 2 threads: each kernel called with caller-provided, poisoned output buffers must fill
/// them with TVM's values, leave its inputs alone and return None; the cases where TVM's
/// kernel raises must raise the same message as `Error::Kernel`.
pub fn run_kernel_cases(dir: &Path, name: &str, entry: &Json) {
    let file = dir.join(entry["file"].as_str().expect("file"));
    let model = Model::load(&file).unwrap_or_else(|e| panic!("{name}: load: {e}"));
    assert!(model.is_kernel_library(), "{name}: not a kernel library");
    let listed: Vec<&str> = entry["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        model.function_names(),
        listed,
        "{name}: kernels as nm lists them"
    );
    assert_eq!(model.kernels(), listed, "{name}: kernels()");
    for threads in [1, 2] {
        let mut session = poisoned_session(&model, threads);
        for case in entry["cases"].as_array().expect("cases") {
            let cname = format!(
                "{name}.{} ({threads} threads)",
                case["case"].as_str().unwrap()
            );
            assert_eq!(case["mode"], "kernel", "{cname}");
            let function = case["function"].as_str().unwrap();
            if let Some(expected_error) = case["expect_error"].as_str() {
                let err = session
                    .call_kernel(function, &mut kernel_args(dir, case))
                    .expect_err(&format!("{cname}: TVM raises here, Mote must too"));
                assert!(
                    matches!(&err, Error::Kernel { kernel, .. } if kernel == function),
                    "{cname}: {err:?} is not an error of kernel `{function}`"
                );
                assert!(
                    err.to_string().contains(expected_error),
                    "{cname}: error `{err}` does not mention `{expected_error}`"
                );
                continue;
            }
            let want = load_indexed_in(dir, case["expected"].as_str().unwrap(), "out");
            let outputs: Vec<usize> = case["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(outputs.len(), want.len(), "{cname}: outputs");
            let tol = &case["tolerance"];
            let (rtol, atol) = (tol["rtol"].as_f64().unwrap(), tol["atol"].as_f64().unwrap());
            let given = load_indexed_in(dir, case["inputs"].as_str().unwrap(), "arg");
            // Twice in one session, each time into freshly poisoned buffers.
            for run in ["first", "second"] {
                let mut args = kernel_args(dir, case);
                let result = session
                    .call_kernel(function, &mut args)
                    .unwrap_or_else(|e| panic!("{cname} {run} run: {e}"));
                assert!(
                    matches!(result, Value::None),
                    "{cname}: a destination-passing kernel returns None, got {result:?}"
                );
                for (k, (&i, w)) in outputs.iter().zip(&want).enumerate() {
                    let got = args[i].as_tensor().expect("output buffer");
                    assert_close(&format!("{cname} {run} run out{k}"), got, w, rtol, atol);
                }
                for (i, a) in args.iter().enumerate() {
                    if let (Some(t), false) = (a.as_tensor(), outputs.contains(&i)) {
                        assert_close(&format!("{cname} input {i}"), t, &given[i], 0.0, 0.0);
                    }
                }
            }
        }
    }
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
            // The symbolic dimensions each call's description names (format version 3): the
            // cases then run at several sizes through the same call site.
            let want: Vec<Vec<String>> = entry["subgraph_symbols"]
                .as_array()
                .expect("subgraph_symbols")
                .iter()
                .map(|s| {
                    s.as_array()
                        .expect("symbol names")
                        .iter()
                        .map(|n| n.as_str().expect("symbol name").to_string())
                        .collect()
                })
                .collect();
            let got: Vec<Vec<String>> = plan.iter().map(|p| p.symbols.clone()).collect();
            assert_eq!(
                got, want,
                "{name}: symbolic dimensions per mote.subgraph call"
            );
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
