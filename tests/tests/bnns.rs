//! The BNNS backend on the offload zoo's BNNS-partitioned models (`*_bnns`, built by
//! `scripts/offload-zoo.sh`; folder in `MOTE_OFFLOAD_ZOO_DIR`), with backend preference
//! `["bnns", "cpu"]`, checked against TVM's unpartitioned model within 1e-4.
//!
//! On Apple targets, BNNS (Accelerate) must take nodes and the outputs must still match. Elsewhere
//! BNNS is unavailable: every node must fall back to `cpu`, the plan must say why, and the
//! outputs must match. Tests never skip.

use std::path::PathBuf;

use mote::{Model, SessionOptions, SubgraphPlan, Value};
use mote_tests::assert_close;
use serde_json::Value as Json;

const TOL: f64 = 1e-4;

fn zoo_dir() -> PathBuf {
    match std::env::var_os("MOTE_OFFLOAD_ZOO_DIR") {
        Some(d) => PathBuf::from(d),
        None => panic!(
            "MOTE_OFFLOAD_ZOO_DIR is not set: build the offload zoo with `scripts/offload-zoo.sh` \
             and export MOTE_OFFLOAD_ZOO_DIR=<the directory it prints last>"
        ),
    }
}

fn prefs() -> Vec<String> {
    vec!["bnns".to_string(), "cpu".to_string()]
}

/// The `*_bnns` models of the manifest.
fn bnns_models() -> Vec<Json> {
    let m = mote_tests::manifest_in(&zoo_dir());
    let models: Vec<Json> = m["models"]
        .as_array()
        .expect("manifest has `models`")
        .iter()
        .filter(|e| e["partition"] == "bnns")
        .cloned()
        .collect();
    assert!(
        !models.is_empty(),
        "the offload zoo has no BNNS-partitioned models"
    );
    models
}

/// Run every case of `entry` with `["bnns", "cpu"]` (1 and 2 threads) against TVM's outputs.
fn run_cases(entry: &Json, model: &Model) -> usize {
    let name = entry["name"].as_str().expect("name");
    let mut checked = 0;
    for threads in [1, 2] {
        let mut session = model
            .session_with(SessionOptions {
                threads: Some(threads),
                backends: prefs(),
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("{name}: session: {e}"));
        for case in entry["cases"].as_array().expect("cases") {
            let cname = format!("{name}.{} ({threads} threads)", case["case"]);
            let args: Vec<Value> = mote_tests::load_indexed_in(
                &zoo_dir(),
                case["inputs"].as_str().expect("inputs"),
                "arg",
            )
            .into_iter()
            .map(Value::Tensor)
            .collect();
            let out = session
                .call(case["function"].as_str().expect("function"), &args)
                .unwrap_or_else(|e| panic!("{cname}: {e}"))
                .flatten_tensors();
            let expected = mote_tests::load_indexed_in(
                &zoo_dir(),
                case["expected"].as_str().expect("expected"),
                "out",
            );
            assert_eq!(out.len(), expected.len(), "{cname}: number of outputs");
            for (i, (g, w)) in out.iter().zip(&expected).enumerate() {
                assert_close(&format!("{cname} out{i}"), g, w, TOL, TOL);
            }
            checked += 1;
        }
    }
    checked
}

fn load(entry: &Json) -> (Model, Vec<SubgraphPlan>) {
    let file = entry["file"].as_str().expect("file");
    let model = Model::load(zoo_dir().join(file)).unwrap_or_else(|e| panic!("{file}: load: {e}"));
    let plan = model.partition_plan(&prefs());
    assert!(!plan.is_empty(), "{file}: no mote.subgraph call");
    (model, plan)
}

/// BNNS takes nodes of the BNNS-partitioned models; whatever it leaves says why; every output
/// matches TVM.
#[cfg(target_vendor = "apple")]
#[test]
fn bnns_offload_zoo_runs_on_accelerate_and_matches_tvm() {
    let (mut on_bnns, mut total, mut checked) = (0, 0, 0);
    for entry in bnns_models() {
        let (model, plan) = load(&entry);
        for p in &plan {
            for n in &p.nodes {
                total += 1;
                if n.backend == "bnns" {
                    on_bnns += 1;
                } else {
                    assert!(
                        n.fallback_reasons.iter().any(|r| r.starts_with("bnns:")),
                        "{}: node `{}` left bnns without a reason: {n:?}",
                        entry["name"],
                        n.name
                    );
                    eprintln!(
                        "{}: `{}` on {}: {:?}",
                        entry["name"], n.name, n.backend, n.fallback_reasons
                    );
                }
            }
        }
        checked += run_cases(&entry, &model);
    }
    eprintln!("BNNS offload zoo: {on_bnns} of {total} subgraph nodes planned on bnns");
    assert!(
        on_bnns > total / 2,
        "only {on_bnns} of {total} nodes on bnns"
    );
    assert!(checked > 0, "no case was checked");
}

/// Off Apple, BNNS is unavailable: with `["bnns", "cpu"]` every node of the BNNS-partitioned
/// models runs on `cpu`, the plan records that `bnns` was not usable, and outputs match TVM.
#[cfg(not(target_vendor = "apple"))]
#[test]
fn bnns_offload_zoo_falls_back_to_cpu_off_apple_and_matches_tvm() {
    let why = mote::backend::backend_names();
    assert!(
        why.iter().any(|n| n == "bnns"),
        "bnns is not registered: {why:?}"
    );
    let mut checked = 0;
    for entry in bnns_models() {
        let (model, plan) = load(&entry);
        for p in &plan {
            // `bnns` is skipped as unavailable when the order is resolved; the plan names the
            // backends actually tried, and says why bnns is not among them.
            assert_eq!(
                p.backends,
                vec!["cpu".to_string()],
                "{}: backends tried",
                entry["name"]
            );
            let bnns = p.unavailable.iter().find(|(b, _)| b == "bnns");
            assert!(
                bnns.is_some_and(|(_, why)| why.contains("Apple")),
                "{}: the plan does not say why bnns is unavailable: {:?}",
                entry["name"],
                p.unavailable
            );
            for n in &p.nodes {
                assert_eq!(n.backend, "cpu", "{}: node `{}`", entry["name"], n.name);
            }
        }
        checked += run_cases(&entry, &model);
    }
    assert!(checked > 0, "no case was checked");
}
