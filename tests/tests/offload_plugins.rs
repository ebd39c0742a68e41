//! The offload zoo with backend plug-ins loaded: the C test plug-in, and on Arm Linux the real
//! ACL shim. A process of its own (see `offload.rs`), so loading a plug-in here cannot change
//! what "the default backends" means to another test; every run here names its backends.

use mote::{LoadOptions, Model};
use mote_tests::offload_zoo::{check_model, dir, manifest, run_all};

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
        let model = Model::load(dir().join(file)).expect("load");
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

/// Weights only offloaded regions read stay in the mapped file (docs/footprint.md, "Memory"):
/// every backend order a model is prepared for reads them again from there. One model, two
/// orders (the test plug-in first, then `cpu` alone: two executors per call site), each
/// checked against TVM. A code-free load of the file maps it as data and leaves the same weights
/// in it (both orders again); one from memory keeps every constant in memory.
#[test]
fn weights_left_in_the_file_are_read_again_for_each_backend_order() {
    let path = env!("MOTE_TEST_PLUGIN");
    mote::backend::load_plugin(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (mut models_in_file, mut checked, mut read_as_data) = (0, 0, 0);
    for entry in manifest()["models"].as_array().expect("models") {
        let name = entry["name"].as_str().expect("name");
        let file = dir().join(entry["file"].as_str().expect("file"));
        let model = Model::load(&file).unwrap_or_else(|e| panic!("{name}: load: {e}"));
        let (n, bytes) = model.constant_bytes();
        let (in_file, in_file_bytes) = model.constants_in_file();
        assert!(
            in_file <= n && in_file_bytes <= bytes,
            "{name}: {in_file} constants ({in_file_bytes} bytes) in the file, of {n} ({bytes})"
        );
        if in_file > 0 {
            models_in_file += 1;
        }
        checked += check_model(&model, entry, &["testplug", "cpu"]);
        checked += check_model(&model, entry, &["cpu"]);
        checked += check_model(&model, entry, &["testplug", "cpu"]);
        // Read as data from the file, a model leaves the same weights in it; from memory,
        // none. Models that call compiled kernels cannot be read as data (refused, typed).
        match Model::load_with(&file, LoadOptions::default().code_free(true)) {
            Ok(data) => {
                assert_eq!(
                    data.constants_in_file(),
                    (in_file, in_file_bytes),
                    "{name}: read as data from the file"
                );
                assert_eq!(data.constant_bytes(), (n, bytes), "{name}: read as data");
                checked += check_model(&data, entry, &["testplug", "cpu"]);
                checked += check_model(&data, entry, &["cpu"]);
                drop(data);
                let bytes_of_file = std::fs::read(&file).expect("read the model file");
                let data = Model::load_from_memory_with(
                    &bytes_of_file,
                    LoadOptions::default().code_free(true),
                )
                .unwrap_or_else(|e| panic!("{name}: code-free load from memory: {e}"));
                assert_eq!(data.constants_in_file(), (0, 0), "{name}: read from memory");
                assert_eq!(
                    data.constant_bytes(),
                    (n, bytes),
                    "{name}: read from memory"
                );
                checked += check_model(&data, entry, &["cpu"]);
                read_as_data += 1;
            }
            Err(mote::Error::Unsupported(_)) => {}
            Err(e) => panic!("{name}: code-free load: {e}"),
        }
    }
    assert!(checked > 0, "no case was checked");
    assert!(
        read_as_data > 0,
        "no model of the offload zoo was read as data"
    );
    assert!(
        models_in_file > 0,
        "no model of the offload zoo left a weight in its file"
    );
}

/// On Arm Linux, the real ACL backend (`libmote_acl.so`, built by `scripts/build-acl-shim.sh`
/// against ACL 24.11) is loaded and preferred: every subgraph node of the zoo must run in ACL,
/// but the two kinds ACL 24.11 refuses (the tanh GELU, a reshape that requantizes), and every
/// output still matches TVM's
/// unpartitioned model.
#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
#[test]
fn offload_zoo_matches_tvm_on_acl() {
    let path = std::env::var("MOTE_ACL_PLUGIN").unwrap_or_else(|_| {
        panic!("MOTE_ACL_PLUGIN is not set: build libmote_acl.so with scripts/build-acl-shim.sh (scripts/test-aarch64.sh does)")
    });
    mote::backend::load_plugin(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let prefs = ["acl".to_string(), "cpu".to_string()];
    let (mut on_acl, mut gelu_tanh, mut requant_reshape, mut total) = (0, 0, 0, 0);
    for entry in manifest()["models"].as_array().expect("models") {
        let name = entry["name"].as_str().expect("name");
        let model = Model::load(dir().join(entry["file"].as_str().expect("file"))).expect("load");
        for p in model.partition_plan(&prefs) {
            total += p.nodes.len();
            for n in &p.nodes {
                if n.backend == "acl" {
                    on_acl += 1;
                } else if name == "qdq_ops_acl" && n.op == "reshape" {
                    // ACL 24.11's reshape takes only equal quantization on both sides: a QDQ
                    // reshape that requantizes falls back to `cpu` inside the region (cheaper
                    // than leaving it to TVM, which would cut the region in two).
                    assert!(
                        n.fallback_reasons
                            .iter()
                            .any(|r| r.contains("different quantization information")),
                        "{}: {n:?} did not run in ACL",
                        p.name
                    );
                    requant_reshape += 1;
                } else {
                    assert!(
                        name.starts_with("onnx_gelu_tanh_"),
                        "{name}: {n:?} did not run in ACL"
                    );
                    // The one op ACL 24.11 lacks (only the erf GELU): the partitioner keeps it
                    // a node of its own, so it alone falls back to `cpu`.
                    assert_eq!(n.op, "activation", "{}: {n:?} did not run in ACL", p.name);
                    assert!(
                        n.fallback_reasons.iter().any(|r| r.contains("gelu_tanh")),
                        "{}: {n:?} did not run in ACL",
                        p.name
                    );
                    gelu_tanh += 1;
                }
            }
        }
    }
    eprintln!(
        "offload zoo on ACL: {on_acl} of {total} subgraph nodes run in ACL, {gelu_tanh} tanh-GELU \
         activations and {requant_reshape} requantizing reshape on cpu"
    );
    assert!(total > 0, "the offload zoo has no subgraph nodes");
    // onnx_gelu_tanh has three tanh GELUs in each flavour (its BNNS-partitioned file is planned
    // here too, with ACL preferred); every other node runs in ACL.
    assert_eq!(gelu_tanh, 6, "tanh-GELU nodes that fell back to cpu");
    // qdq_ops has one reshape between different quantization parameters.
    assert_eq!(
        requant_reshape, 1,
        "requantizing reshapes that fell back to cpu"
    );
    assert_eq!(
        on_acl + gelu_tanh + requant_reshape,
        total,
        "every other subgraph node of the zoo runs in ACL"
    );
    run_all(&["acl", "cpu"]);
}
