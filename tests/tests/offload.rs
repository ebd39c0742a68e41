//! Every model of the offload zoo (models partitioned by `mote_tvm`, whose regions are
//! `mote.subgraph` calls) runs through Mote's backends and matches TVM's unpartitioned model.
//!
//! The zoo comes from `python/offload_zoo.py` (via `scripts/offload-zoo.sh`); its folder is
//! `MOTE_OFFLOAD_ZOO_DIR`, with the manifest schema of `python/zoo.py`. Tests never skip.

use std::path::PathBuf;

use mote::{Model, SessionOptions, Tensor, Value};
use mote_tests::assert_close;
use serde_json::Value as Json;

fn zoo_dir() -> PathBuf {
    match std::env::var_os("MOTE_OFFLOAD_ZOO_DIR") {
        Some(d) => PathBuf::from(d),
        None => panic!(
            "MOTE_OFFLOAD_ZOO_DIR is not set: build the offload zoo with `scripts/offload-zoo.sh` \
             (python/offload_zoo.py --out DIR) and export MOTE_OFFLOAD_ZOO_DIR=DIR"
        ),
    }
}

fn manifest() -> Json {
    mote_tests::manifest_in(&zoo_dir())
}

fn load_indexed(file: &str, prefix: &str) -> Vec<Tensor> {
    mote_tests::load_indexed_in(&zoo_dir(), file, prefix)
}

fn run_all(backends: &[&str]) {
    let m = manifest();
    let models = m["models"].as_array().expect("manifest has `models`");
    assert!(!models.is_empty(), "the offload zoo has no models");
    let backends: Vec<String> = backends.iter().map(|s| s.to_string()).collect();
    let mut checked = 0;
    for entry in models {
        let name = entry["name"].as_str().expect("model name");
        let file = entry["file"].as_str().expect("model file");
        let model =
            Model::load(zoo_dir().join(file)).unwrap_or_else(|e| panic!("{name}: load: {e}"));
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
                let expected = load_indexed(case["expected"].as_str().expect("expected"), "out");
                assert_eq!(out.len(), expected.len(), "{cname}: number of outputs");
                let tol = &case["tolerance"];
                let (rtol, atol) = (
                    tol["rtol"].as_f64().expect("rtol"),
                    tol["atol"].as_f64().expect("atol"),
                );
                for (i, (g, w)) in out.iter().zip(&expected).enumerate() {
                    assert_close(&format!("{cname} out{i}"), g, w, rtol, atol);
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "no case was checked");
}

#[test]
fn offload_zoo_matches_tvm_with_default_backends() {
    run_all(&[]);
}

#[test]
fn offload_zoo_matches_tvm_on_the_cpu_backend() {
    run_all(&["cpu"]);
}

/// With the C test plug-in (float32 add and relu only) loaded and preferred, the nodes it takes
/// run in it on the VM's own buffers and the rest falls back to `cpu`; results still match TVM.
#[test]
fn offload_zoo_matches_tvm_with_the_test_plugin_preferred() {
    let path = env!("MOTE_TEST_PLUGIN");
    assert!(
        !path.is_empty(),
        "tests/build.rs did not build the test plug-in"
    );
    mote::backend::load_plugin(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let m = manifest();
    let mut on_plugin = 0;
    for entry in m["models"].as_array().expect("models") {
        let file = entry["file"].as_str().expect("file");
        let model = Model::load(zoo_dir().join(file)).expect("load");
        for p in model.partition_plan(&["testplug".to_string(), "cpu".to_string()]) {
            on_plugin += p.nodes.iter().filter(|n| n.backend == "testplug").count();
            for n in p.nodes.iter().filter(|n| n.backend == "cpu") {
                assert!(
                    n.fallback_reasons
                        .iter()
                        .any(|r| r.starts_with("testplug:")),
                    "{file}: node `{}` fell back without a reason: {n:?}",
                    n.name
                );
            }
        }
    }
    assert!(on_plugin > 0, "no zoo node went to the test plug-in");
    run_all(&["testplug", "cpu"]);
}

/// On Arm Linux, the real ACL backend (`libmote_acl.so`, built by `scripts/build-acl-shim.sh`
/// against ACL 24.11) is loaded and preferred: the nodes it accepts run in ACL, the rest fall
/// back to `cpu`, and every output still matches TVM's unpartitioned model.
#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
#[test]
fn offload_zoo_matches_tvm_on_acl() {
    let path = std::env::var("MOTE_ACL_PLUGIN").unwrap_or_else(|_| {
        panic!("MOTE_ACL_PLUGIN is not set: build libmote_acl.so with scripts/build-acl-shim.sh (scripts/test-aarch64.sh does)")
    });
    mote::backend::load_plugin(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let prefs = ["acl".to_string(), "cpu".to_string()];
    let (mut on_acl, mut total) = (0, 0);
    for entry in manifest()["models"].as_array().expect("models") {
        let model =
            Model::load(zoo_dir().join(entry["file"].as_str().expect("file"))).expect("load");
        for p in model.partition_plan(&prefs) {
            total += p.nodes.len();
            on_acl += p.nodes.iter().filter(|n| n.backend == "acl").count();
        }
    }
    eprintln!("offload zoo on ACL: {on_acl} of {total} subgraph nodes run in ACL");
    assert!(on_acl > total / 2, "only {on_acl} of {total} nodes on acl");
    run_all(&["acl", "cpu"]);
}
