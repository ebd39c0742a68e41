//! Mote finds the ACL backend by itself, or says that it did not and runs on `cpu`.
//!
//! With no configuration, on Arm Linux and Android Mote looks for `libmote_acl.so` through the
//! dynamic linker's search path and beside its own binary. What this process should see is
//! `MOTE_EXPECT_ACL`: `found` (the plug-in is on `LD_LIBRARY_PATH`; `scripts/test-aarch64.sh`
//! runs this file once that way) or `missing` (the default, and the only possibility off Arm).
//! Either way, an ACL-partitioned model of the offload zoo (`MOTE_OFFLOAD_ZOO_DIR`) gives
//! TVM's outputs.
//!
//! This file is its own test binary, so no other test has loaded a plug-in into the registry.

use std::path::PathBuf;
use std::sync::Mutex;

use mote::{Model, Value};
use mote_tests::{assert_close, load_indexed_in, manifest_in};

static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        if let Ok(mut l) = LOG.lock() {
            l.push(format!("{} {}", record.level(), record.args()));
        }
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture;

fn zoo_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("MOTE_OFFLOAD_ZOO_DIR").unwrap_or_else(|| {
        panic!("MOTE_OFFLOAD_ZOO_DIR is not set: build the offload zoo with scripts/offload-zoo.sh")
    }))
}

fn expect_found() -> bool {
    let arm_linux = cfg!(all(
        any(target_os = "linux", target_os = "android"),
        any(target_arch = "aarch64", target_arch = "arm")
    ));
    match std::env::var("MOTE_EXPECT_ACL").as_deref() {
        Ok("found") => {
            assert!(arm_linux, "MOTE_EXPECT_ACL=found, but ACL is Arm-only");
            true
        }
        Ok("missing") | Err(_) => false,
        Ok(other) => panic!("MOTE_EXPECT_ACL must be `found` or `missing`, not `{other}`"),
    }
}

#[test]
fn acl_is_discovered_or_its_absence_is_logged() {
    log::set_logger(&CAPTURE).expect("no other logger in this binary");
    log::set_max_level(log::LevelFilter::Debug);
    let found = expect_found();
    let dir = zoo_dir();
    let manifest = manifest_in(&dir);
    let entry = manifest["models"]
        .as_array()
        .expect("models")
        .iter()
        .find(|e| e["name"] == "cnn_acl")
        .expect("the offload zoo has cnn_acl");
    let model = Model::load(dir.join(entry["file"].as_str().expect("file"))).expect("load");

    // The default order: every registered backend that is available here, then cpu.
    assert!(
        mote::backend::backend_names().iter().any(|n| n == "acl"),
        "acl is always registered (as a placeholder when missing)"
    );
    let plan = model.partition_plan(&[]);
    let nodes: Vec<_> = plan.iter().flat_map(|p| &p.nodes).collect();
    let on_acl = nodes.iter().filter(|n| n.backend == "acl").count();
    eprintln!(
        "expect {}: {on_acl} of {} nodes on acl",
        if found { "found" } else { "missing" },
        nodes.len()
    );

    let mut session = model.session().expect("session");
    for case in entry["cases"].as_array().expect("cases") {
        let args: Vec<Value> =
            load_indexed_in(&dir, case["inputs"].as_str().expect("inputs"), "arg")
                .into_iter()
                .map(Value::Tensor)
                .collect();
        let out = session
            .call(case["function"].as_str().expect("function"), &args)
            .expect("run")
            .flatten_tensors();
        let expected = load_indexed_in(&dir, case["expected"].as_str().expect("expected"), "out");
        assert_eq!(out.len(), expected.len());
        for (i, (g, w)) in out.iter().zip(&expected).enumerate() {
            assert_close(&format!("cnn_acl out{i}"), g, w, 1e-4, 1e-4);
        }
    }

    let log = LOG.lock().expect("log").clone();
    if found {
        assert_eq!(
            on_acl,
            nodes.len(),
            "every cnn_acl node runs in ACL; log: {log:#?}"
        );
        assert!(
            log.iter()
                .any(|l| l.contains("loaded the ACL backend from libmote_acl.so")),
            "no discovery record in {log:#?}"
        );
    } else {
        assert_eq!(on_acl, 0);
        assert!(nodes.iter().all(|n| n.backend == "cpu"));
        let said = log.iter().find(|l| {
            l.starts_with("WARN")
                && l.contains("partitioned for `acl`, which is unavailable here")
                && l.contains("running it on cpu")
        });
        assert!(said.is_some(), "no fallback warning in {log:#?}");
        eprintln!("{}", said.map(String::as_str).unwrap_or_default());
    }
}
