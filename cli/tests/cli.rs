//! The `mote` command, run as a user would, checked against TVM's outputs.

use std::process::Command;

use mote_tests::*;

fn mote(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(args)
        .output()
        .expect("run mote");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn zoo(file: &str) -> String {
    zoo_path(file).display().to_string()
}

#[test]
fn inspect_lists_functions_kernels_and_builtins() {
    let (ok, out, err) = mote(&["inspect", &zoo("mlp.so")]);
    assert!(ok, "{err}");
    assert!(
        out.contains(
            "forward(x: float32[2, 16], fc1.weight: float32[32, 16], fc1.bias: float32[32]"
        ),
        "{out}"
    );
    assert!(
        out.contains("relu(add: float32[2, 32], compute: float32[2, 32])"),
        "{out}"
    );
    assert!(out.contains("vm.builtin.alloc_storage"), "{out}");

    let (ok, out, _) = mote(&["inspect", &zoo("mlp_dyn.so"), "--json"]);
    assert!(ok);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        j["functions"][0]["params"][0]["shape"],
        serde_json::json!(["n", 16])
    );
    assert_eq!(j["functions"][0]["params"][0]["dtype"], "float32");

    let (ok, out, _) = mote(&["inspect", &zoo("cnn.so"), "--json"]);
    assert!(ok);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["constants"]["tensors"], 4, "{j}");
    assert!(j["constants"]["bytes"].as_u64().unwrap() > 0);
}

#[test]
fn run_writes_outputs_that_match_tvm() {
    let dir = std::env::temp_dir().join(format!("mote-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (model, case, function) in [
        ("mlp", "mlp.forward", "forward"),
        ("multi", "multi.embed", "embed"),
        ("quant", "quant.main", "main"),
    ] {
        let out_file = dir.join(format!("{case}.npz"));
        let (ok, stdout, err) = mote(&[
            "run",
            &zoo(&format!("{model}.so")),
            "--function",
            function,
            "--inputs",
            &zoo(&format!("{case}.inputs.npz")),
            "--output",
            out_file.to_str().unwrap(),
            "--threads",
            "2",
        ]);
        assert!(ok, "{err}");
        assert!(stdout.contains("out0:"), "{stdout}");
        let got: Vec<_> = mote::npy::read_npz(&out_file).unwrap();
        let want = load_outputs(&format!("{case}.expected.npz"));
        assert_eq!(got.len(), want.len());
        for (i, ((key, g), w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(key, &format!("out{i}"));
            assert_close(case, g, w, 1e-5, 1e-5);
        }
    }
    // Missing inputs are generated: weights too (their shapes come from kernel signatures),
    // and symbolic dims from --dim.
    let (ok, stdout, err) = mote(&[
        "run",
        &zoo("mlp_dyn.so"),
        "-f",
        "forward",
        "--dim",
        "n=3",
        "--seed",
        "7",
    ]);
    assert!(ok, "{err}");
    assert!(stdout.contains("out0: float32 [3, 8]"), "{stdout}");
    // A given input by name, the rest generated.
    let x = dir.join("x.npy");
    mote::npy::write_npy(&x, &load_args("mlp.forward.inputs.npz")[0]).unwrap();
    let (ok, _, err) = mote(&[
        "run",
        &zoo("mlp.so"),
        "-f",
        "forward",
        "--input",
        &format!("x={}", x.display()),
    ]);
    assert!(ok, "{err}");
}

#[test]
fn bench_reports_latency_profile_and_trace() {
    let trace = std::env::temp_dir().join(format!("mote-trace-{}.json", std::process::id()));
    let (ok, out, err) = mote(&[
        "bench",
        &zoo("cnn.so"),
        "-f",
        "forward",
        "--runs",
        "20",
        "--warmup",
        "2",
        "--profile",
        "--trace",
        trace.to_str().unwrap(),
        "--json",
    ]);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for k in ["median_ms", "min_ms", "p90_ms", "max_ms"] {
        assert!(j[k].as_f64().unwrap() > 0.0, "{k} in {j}");
    }
    assert_eq!(j["runs"], 20);
    assert!(
        j["min_ms"].as_f64() <= j["median_ms"].as_f64()
            && j["median_ms"].as_f64() <= j["max_ms"].as_f64()
    );
    let names: Vec<&str> = j["profile"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"conv2d") || names.iter().any(|n| n.contains("conv")),
        "{names:?}"
    );
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = t["traceEvents"].as_array().unwrap();
    assert!(
        events.len() > 10
            && events
                .iter()
                .all(|e| e["ph"] == "X" && e["dur"].as_f64().is_some())
    );

    let (ok, out, _) = mote(&[
        "bench",
        &zoo("mlp.so"),
        "-f",
        "forward",
        "--runs",
        "5",
        "--profile",
    ]);
    assert!(ok);
    assert!(out.contains("median") && out.contains("matmul"), "{out}");
}

#[test]
fn errors_are_reported_not_panicked() {
    let (ok, _, err) = mote(&["run", &zoo("mlp.so"), "-f", "nope"]);
    assert!(!ok);
    assert!(
        err.contains("no function named `nope`") && !err.contains("panicked"),
        "{err}"
    );
    let (ok, _, err) = mote(&[
        "run",
        &zoo("mlp.so"),
        "-f",
        "forward",
        "--input",
        "bogus=/nonexistent.npy",
    ]);
    assert!(!ok && !err.contains("panicked"), "{err}");
    let (ok, _, err) = mote(&["inspect", "/nonexistent.so"]);
    assert!(!ok && err.contains("error:"), "{err}");
}

/// `--backends` chooses where offloaded subgraphs run: `inspect` shows the plan for that order
/// and `run` uses it; an ACL-partitioned model on a machine without ACL says so and runs on cpu.
#[test]
fn backends_choose_where_subgraphs_run() {
    let dir = std::env::var_os("MOTE_OFFLOAD_ZOO_DIR")
        .map(std::path::PathBuf::from)
        .expect("MOTE_OFFLOAD_ZOO_DIR is not set: build it with scripts/offload-zoo.sh");
    let model = dir.join("cnn_acl.so").display().to_string();
    let (ok, out, err) = mote(&["inspect", &model, "--backends", "cpu"]);
    assert!(ok, "{err}");
    assert!(out.contains("backends cpu"), "{out}");
    assert!(out.contains("-> cpu"), "{out}");
    assert!(!out.contains("-> acl"), "{out}");

    let (ok, out, err) = mote(&["inspect", &model, "--json", "--backends", "nosuch,cpu"]);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).expect("json");
    let nodes = j["subgraphs"][0]["nodes"].as_array().expect("nodes");
    assert!(nodes.iter().all(|n| n["backend"] == "cpu"), "{out}");

    let (ok, out, err) = mote(&["run", &model, "--backends", "acl,cpu", "--threads", "2"]);
    assert!(ok, "{err}");
    assert!(out.contains("out0"), "{out}");

    let (ok, _, err) = mote(&["inspect", &model, "--plugin", "/nonexistent/libmote_x.so"]);
    assert!(!ok);
    assert!(err.contains("cannot load plug-in"), "{err}");
}

/// A model named without a folder is the file in the current directory, not a search of the
/// library path.
#[test]
fn a_bare_file_name_is_the_file_in_the_current_directory() {
    let path = zoo_path("mlp.so");
    let out = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(["run", "mlp.so", "-f", "forward"])
        .current_dir(path.parent().expect("zoo folder"))
        .output()
        .expect("run mote");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
