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
        // The preview's minimum, maximum and mean of a float output are TVM's output's.
        if let Ok(w) = want[0].as_slice::<f32>() {
            let line = stdout.lines().find(|l| l.starts_with("out0:")).unwrap();
            let stat = |name: &str| -> f64 {
                let at = line
                    .find(&format!("{name} "))
                    .unwrap_or_else(|| panic!("{line}"));
                line[at + name.len() + 1..]
                    .split([',', ')'])
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            let lo = w.iter().fold(f64::INFINITY, |a, &x| a.min(x as f64));
            let hi = w.iter().fold(f64::NEG_INFINITY, |a, &x| a.max(x as f64));
            let mean = w.iter().map(|&x| x as f64).sum::<f64>() / w.len() as f64;
            for (name, v) in [("min", lo), ("max", hi), ("mean", mean)] {
                assert!(
                    (stat(name) - v).abs() <= 2e-6 + 1e-5 * v.abs(),
                    "{case} {name}: {line} vs {v}"
                );
            }
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

/// Runs `mote`: its exit code (`None` if a signal ended it), stdout and stderr.
fn mote_status(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(args)
        .output()
        .expect("run mote");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `mote args` is refused as a usage error: exit status 2 (so not a crash, which has no exit
/// code, nor an abort's 134), one `error:` line naming everything in `names` (the flag and the
/// bad value), no panic, no failed allocation, nothing on stdout.
#[track_caller]
fn assert_refused(args: &[&str], names: &[&str]) {
    let (code, out, err) = mote_status(args);
    assert_eq!(code, Some(2), "mote {args:?}: stderr {err}");
    assert!(out.is_empty(), "mote {args:?}: stdout {out}");
    assert!(
        !err.contains("panicked") && !err.contains("memory allocation"),
        "mote {args:?}: {err}"
    );
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("mote {args:?}: no error line in {err}"));
    for n in names {
        assert!(line.contains(n), "mote {args:?}: `{n}` not in {line}");
    }
}

/// `--dim NAME=N` takes N from 1 to 4294967296, for a symbolic dimension the function has,
/// once; generated inputs over 4 GiB are refused before anything is allocated.
#[test]
fn bad_dims_are_refused_with_the_flag_named() {
    let model = zoo("mlp_dyn.so");
    for cmd in ["run", "bench"] {
        // Malformed, negative, zero, past the bound, past i64 and u64: refused by the parser.
        for v in [
            "n=-1",
            "n=0",
            "n=-0",
            "n=4294967297",
            "n=9223372036854775808",
            "n=99999999999999999999",
            "n=1e99",
            "n=abc",
            "n=",
            "n",
            "=3",
            "-1",
        ] {
            assert_refused(
                &[cmd, &model, "-f", "forward", "--dim", v],
                &["--dim", &format!("'{v}'")],
            );
        }
        assert_refused(
            &[cmd, &model, "-f", "forward", "--dim=n=-5"],
            &["--dim", "n=-5"],
        );
        // Within the bound, but x alone would be n * 16 floats: refused, naming the value and
        // the limit, instead of allocating 6.4 GB (or 275 GB).
        for n in ["100000000", "4294967296"] {
            let v = format!("n={n}");
            assert_refused(
                &[cmd, &model, "-f", "forward", "--dim", &v],
                &[&format!("--dim {v}"), "4294967296 bytes", "`x`"],
            );
        }
        // A dimension the function does not have, and one given twice.
        assert_refused(
            &[cmd, &model, "-f", "forward", "--dim", "m=3"],
            &["--dim m=3", "no symbolic dimension `m`", "they have n"],
        );
        assert_refused(
            &[cmd, &model, "-f", "forward", "--dim", "n=2", "--dim", "n=3"],
            &["--dim n", "n=2", "n=3"],
        );
    }
    // The bounds are not so tight that real values fail: 1, and a batch of 1000.
    for (n, shape) in [("1", "[1, 8]"), ("1000", "[1000, 8]")] {
        let (code, out, err) =
            mote_status(&["run", &model, "-f", "forward", "--dim", &format!("n={n}")]);
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains(&format!("out0: float32 {shape}")), "{out}");
    }
    // `--input` without `=` is a usage error too.
    assert_refused(
        &["run", &model, "-f", "forward", "--input", "x.npy"],
        &["--input", "x.npy"],
    );
}

/// `--runs` is 1 to 10000000 and `--warmup` 0 to 10000000, whatever the spelling of the bad
/// value; `--runs -1` is the value -1, not an unknown flag `-1`.
#[test]
fn bad_runs_and_warmup_are_refused_with_the_flag_named() {
    let model = zoo("mlp.so");
    let bad_runs = [
        "-1",
        "0",
        "10000001",
        "18446744073709551615",
        "99999999999999999999999",
        "1e99",
        "1.5",
        "abc",
        "",
    ];
    for v in bad_runs {
        assert_refused(
            &["bench", &model, "-f", "forward", "--runs", v],
            &["--runs", &format!("'{v}'"), "1 to 10000000"],
        );
    }
    let bad_warmup = [
        "-1",
        "10000001",
        "18446744073709551616",
        "99999999999999999999999",
        "1e99",
        "abc",
    ];
    for v in bad_warmup {
        assert_refused(
            &["bench", &model, "-f", "forward", "--warmup", v],
            &["--warmup", &format!("'{v}'"), "0 to 10000000"],
        );
    }
    assert_refused(
        &["bench", &model, "-f", "forward", "--runs=-7"],
        &["--runs", "'-7'"],
    );
    // The smallest legal values run.
    let (code, out, err) = mote_status(&[
        "bench", &model, "-f", "forward", "--runs", "1", "--warmup", "0", "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(
        (j["runs"].as_u64(), j["warmup"].as_u64()),
        (Some(1), Some(0))
    );
    assert!(j["median_ms"].as_f64().is_some_and(|t| t > 0.0), "{j}");
    // Load and first run are reported; with no warm-up the first run is the one timed run.
    assert!(j["load_ms"].as_f64().is_some_and(|t| t > 0.0), "{j}");
    assert_eq!(j["first_run_ms"].as_f64(), j["median_ms"].as_f64(), "{j}");
    let before = j["rss_before_load_kib"].as_u64().expect("Linux has VmRSS");
    let peak = j["peak_rss_kib"].as_u64().expect("Linux has VmHWM");
    assert!(before > 0 && peak >= before, "{j}");
}

/// `--threads` is 1 to 1024 for both commands that run; `--seed` any u64, nothing else.
#[test]
fn bad_threads_and_seeds_are_refused_with_the_flag_named() {
    let model = zoo("mlp.so");
    for cmd in ["run", "bench"] {
        for v in [
            "-1",
            "0",
            "1025",
            "4294967297",
            "99999999999999999999999",
            "1e99",
            "abc",
        ] {
            assert_refused(
                &[cmd, &model, "-f", "forward", "--threads", v],
                &["--threads", &format!("'{v}'"), "1 to 1024"],
            );
        }
        for v in ["-1", "18446744073709551616", "1e99", "abc"] {
            assert_refused(
                &[cmd, &model, "-f", "forward", "--seed", v],
                &["--seed", &format!("'{v}'")],
            );
        }
    }
    let (code, out, err) = mote_status(&[
        "run",
        &model,
        "-f",
        "forward",
        "--threads",
        "1",
        "--seed",
        "18446744073709551615",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("1 threads"), "{out}");
}

/// The bounds are in the help, with the numbers the parser enforces.
#[test]
fn help_states_the_bounds() {
    let (code, out, err) = mote_status(&["bench", "--help"]);
    assert_eq!(code, Some(0), "{err}");
    for s in [
        "--runs <N>",
        "Timed runs, 1 to 10000000",
        "Untimed runs first, 0 to 10000000",
        "1 to 1024",
        "N is a whole number from 1 to 4294967296",
        "zero-size dimensions are refused",
        "at most 4294967296 bytes (4 GiB)",
    ] {
        assert!(out.contains(s), "`{s}` not in {out}");
    }
    let (code, out, _) = mote_status(&["run", "-h"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("N from 1 to 4294967296") && out.contains("1 to 1024"),
        "{out}"
    );
    let (_, out, _) = mote_status(&["--help"]);
    assert!(
        out.contains("2 for a malformed or out-of-range argument"),
        "{out}"
    );
}

// ---- kernel-only libraries: a TIR module exported on its own, called like lib["gemm"](a, b, c)

fn scratch_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mote-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn inspect_lists_the_kernels_of_a_kernel_library() {
    let (ok, out, err) = mote(&["inspect", &zoo("gemm.so")]);
    assert!(ok, "{err}");
    assert!(out.contains("kernel-only library"), "{out}");
    assert!(out.contains("kernels (2):"), "{out}");
    for k in ["gemm", "main"] {
        assert!(
            out.contains(&format!(
                "  {k}(A: float32[64, 32], B: float32[32, 48], C: float32[64, 48])"
            )),
            "{out}"
        );
    }
    let (ok, out, err) = mote(&["inspect", &zoo("kernels.so")]);
    assert!(ok, "{err}");
    assert!(
        out.contains("scaled_gemm(A: float32[64, 32], B: float32[32, 48], alpha: scalar, C: float32[64, 48])"),
        "{out}"
    );
    assert!(
        out.contains("shift(X: int32[16], n: scalar, Y: int32[16])"),
        "{out}"
    );
    assert!(!out.contains("main("), "{out}");

    let (ok, out, err) = mote(&["inspect", &zoo("kernels.so"), "--json"]);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["kind"], "kernel_library");
    let names: Vec<&str> = j["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gemm", "scaled_gemm", "shift"]);
    let alpha = &j["functions"][1]["params"][2];
    assert_eq!(alpha["name"], "alpha");
    assert_eq!(alpha["kind"], "scalar");
    let c = &j["functions"][1]["params"][3];
    assert_eq!(
        (&c["kind"], &c["dtype"], &c["shape"]),
        (
            &serde_json::json!("tensor"),
            &serde_json::json!("float32"),
            &serde_json::json!([64, 48])
        )
    );
    // A Relax model says what it is too.
    let (_, out, _) = mote(&["inspect", &zoo("mlp.so"), "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["kind"], "relax");
}

/// `mote run` on a kernel: the .npz holds every argument (the output buffer as NaN), and
/// `--output` writes every tensor argument after the call: the output buffer holds TVM's
/// result, the inputs are unchanged.
#[test]
fn run_calls_a_kernel_with_caller_provided_output_buffers() {
    let dir = scratch_dir("kernel-run");
    for (lib, case, function, output) in [
        ("gemm", "gemm.gemm", "gemm", 2),
        ("gemm", "gemm.main", "main", 2),
        ("kernels", "kernels.scaled_gemm", "scaled_gemm", 3),
        ("kernels", "kernels.shift", "shift", 2),
    ] {
        let out_file = dir.join(format!("{case}.npz"));
        let inputs = zoo(&format!("{case}.inputs.npz"));
        let given = load_args(&format!("{case}.inputs.npz"));
        let (ok, stdout, err) = mote(&[
            "run",
            &zoo(&format!("{lib}.so")),
            "--function",
            function,
            "--inputs",
            &inputs,
            "--output",
            out_file.to_str().unwrap(),
            "--threads",
            "2",
        ]);
        assert!(ok, "{case}: {err}");
        assert!(stdout.contains("result: None"), "{stdout}");
        let got = mote::npy::read_npz(&out_file).unwrap();
        let want = load_outputs(&format!("{case}.expected.npz"));
        // Every tensor argument, by position; 0-d scalars are not tensors of the call.
        let tensors: Vec<usize> = (0..given.len()).filter(|&i| given[i].ndim() > 0).collect();
        let keys: Vec<String> = tensors.iter().map(|i| format!("arg{i}")).collect();
        let got_keys: Vec<&String> = got.iter().map(|(k, _)| k).collect();
        assert_eq!(got_keys.len(), keys.len(), "{case}: {got_keys:?}");
        for (k, t) in &got {
            assert!(keys.contains(k), "{case}: key {k}");
            let i: usize = k[3..].parse().unwrap();
            if i == output {
                assert_close(&format!("{case} {k}"), t, &want[0], 1e-5, 1e-5);
            } else {
                assert_close(&format!("{case} {k} unchanged"), t, &given[i], 0.0, 0.0);
            }
        }
    }
    // Arguments by parameter name, each from its own .npy; the output buffer of zeros.
    let args = load_args("gemm.gemm.inputs.npz");
    let zeros = mote::Tensor::zeros(&[64, 48], mote::DType::F32).unwrap();
    let mut flags = Vec::new();
    for (name, t) in [("A", &args[0]), ("B", &args[1]), ("C", &zeros)] {
        let p = dir.join(format!("{name}.npy"));
        mote::npy::write_npy(&p, t).unwrap();
        flags.push("--input".to_string());
        flags.push(format!("{name}={}", p.display()));
    }
    let out_file = dir.join("by-name.npz");
    let lib = zoo("gemm.so");
    let mut cmd = vec!["run", &lib];
    cmd.extend(flags.iter().map(String::as_str));
    let out_flag = out_file.to_str().unwrap().to_string();
    cmd.extend(["--output", &out_flag]);
    let (ok, _, err) = mote(&cmd);
    assert!(ok, "{err}");
    let got = mote::npy::read_npz(&out_file).unwrap();
    let c = &got.iter().find(|(k, _)| k == "arg2").expect("arg2").1;
    assert_close(
        "by name: C",
        c,
        &load_outputs("gemm.gemm.expected.npz")[0],
        1e-5,
        1e-5,
    );
}

/// Missing, unknown, doubly given and mis-shaped kernel arguments are usage errors (status 2,
/// one `error:` line), found before the call; an unknown kernel names the real ones.
#[test]
fn bad_kernel_arguments_are_refused() {
    let dir = scratch_dir("kernel-bad");
    let lib = zoo("gemm.so");
    let npz = zoo("gemm.gemm.inputs.npz");
    let npy = |name: &str, t: &mote::Tensor| {
        let p = dir.join(format!("{name}.npy"));
        mote::npy::write_npy(&p, t).unwrap();
        p.display().to_string()
    };
    let args = load_args("gemm.gemm.inputs.npz");
    let f64_b = npy(
        "b64",
        &mote::Tensor::zeros(&[32, 48], mote::DType::F64).unwrap(),
    );
    let short_b = npy(
        "b31",
        &mote::Tensor::zeros(&[31, 48], mote::DType::F32).unwrap(),
    );
    let flat_b = npy(
        "b1d",
        &mote::Tensor::zeros(&[1536], mote::DType::F32).unwrap(),
    );
    let a = npy("a", &args[0]);
    for cmd in ["run", "bench"] {
        // Fewer arguments than parameters: the missing one is named with its type.
        assert_refused(
            &[
                cmd,
                &lib,
                "-f",
                "gemm",
                "--inputs",
                &zoo("gemm.arity.inputs.npz"),
            ],
            &["missing", "C (arg2): float32[64, 48]"],
        );
        assert_refused(
            &[cmd, &lib, "-f", "gemm"],
            &["missing", "A (arg0)", "C (arg2)"],
        );
        // Wrong shapes, dtype, rank.
        assert_refused(
            &[
                cmd,
                &lib,
                "-f",
                "gemm",
                "--inputs",
                &zoo("gemm.shape.inputs.npz"),
            ],
            &["`A` (arg0)", "float32[64, 32]", "[63, 32]"],
        );
        for (bad, shown) in [
            (&f64_b, "float64"),
            (&short_b, "[31, 48]"),
            (&flat_b, "[1536]"),
        ] {
            assert_refused(
                &[
                    cmd,
                    &lib,
                    "-f",
                    "main",
                    "--inputs",
                    &npz,
                    "--input",
                    &format!("B={bad}"),
                ],
                &["`B` (arg1)", shown],
            );
        }
        // A name the kernel does not have, an index past its parameters, a parameter twice.
        assert_refused(
            &[cmd, &lib, "--inputs", &npz, "--input", &format!("D={a}")],
            &["no parameter `D`", "A: float32[64, 32]"],
        );
        assert_refused(
            &[cmd, &lib, "--inputs", &npz, "--input", &format!("arg3={a}")],
            &["no parameter `arg3`"],
        );
        assert_refused(
            &[
                cmd,
                &lib,
                "--inputs",
                &npz,
                "--input",
                &format!("A={a}"),
                "--input",
                &format!("arg0={a}"),
            ],
            &["`A` (arg0) is given twice in --input"],
        );
        // Nothing is generated for kernels.
        assert_refused(
            &[cmd, &lib, "--inputs", &npz, "--dim", "n=2"],
            &["--dim n=2"],
        );
    }
    // A scalar parameter needs a 0-d array.
    assert_refused(
        &[
            "run",
            &zoo("kernels.so"),
            "-f",
            "scaled_gemm",
            "--inputs",
            &zoo("kernels.scaled_gemm.inputs.npz"),
            "--input",
            &format!("alpha={a}"),
        ],
        &["`alpha` (arg2) is a scalar", "0-d"],
    );
    // An unknown kernel is a runtime error naming the kernels there are.
    let (code, _, err) = mote_status(&["run", &lib, "-f", "gemm2", "--inputs", &npz]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("no function named `gemm2`") && err.contains("gemm, main"),
        "{err}"
    );
}

#[test]
fn bench_times_a_kernel() {
    let (ok, out, err) = mote(&[
        "bench",
        &zoo("kernels.so"),
        "-f",
        "scaled_gemm",
        "--inputs",
        &zoo("kernels.scaled_gemm.inputs.npz"),
        "--runs",
        "5",
        "--warmup",
        "1",
        "--profile",
        "--json",
    ]);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert!(j["median_ms"].as_f64().unwrap() > 0.0, "{j}");
    assert_eq!(j["profile"][0]["name"], "scaled_gemm", "{j}");
    assert_eq!(j["profile"][0]["kind"], "kernel", "{j}");
    let (code, out, _) = mote_status(&["run", "--help"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("Kernel-only libraries")
            && out.contains("--output writes every tensor argument"),
        "{out}"
    );
}

/// `inspect` says whether a model is code-free; `--code-free` reads it as data (docs/code-free.md):
/// `run` matches TVM's output from the `.tar`, and a model with kernels is refused naming them.
#[test]
fn code_free_models_say_so_and_run_from_the_tar() {
    let dir = std::env::var_os("MOTE_OFFLOAD_ZOO_DIR")
        .map(std::path::PathBuf::from)
        .expect("MOTE_OFFLOAD_ZOO_DIR is not set: build it with scripts/offload-zoo.sh");
    let path = |f: &str| dir.join(f).display().to_string();
    let (ok, out, err) = mote(&["inspect", &path("mlp_bnns.so")]);
    assert!(ok, "{err}");
    assert!(
        out.contains("code-free: yes (calls no compiled kernel"),
        "{out}"
    );
    let (ok, out, err) = mote(&["inspect", "--code-free", &path("mlp_bnns.tar")]);
    assert!(ok, "{err}");
    assert!(
        out.contains("code-free: yes (read as data, nothing mapped as code)"),
        "{out}"
    );
    let (ok, out, err) = mote(&["inspect", "--json", &path("cnn_acl.so")]);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(j["code_free"], false, "{out}");
    assert_eq!(j["loaded_code_free"], false, "{out}");
    let (ok, out, err) = mote(&["inspect", &path("cnn_acl.so")]);
    assert!(ok, "{err}");
    assert!(
        // One region with one layout transpose at its input (its output is 2-D).
        out.contains("code-free: no (calls compiled kernels transpose)"),
        "{out}"
    );
    let (ok, _, err) = mote(&["inspect", "--code-free", &path("cnn_acl.so")]);
    assert!(!ok);
    assert!(
        err.contains("cnn_acl.so is not code-free") && err.contains("transpose"),
        "{err}"
    );

    let out_npz =
        std::env::temp_dir().join(format!("mote-cli-code-free-{}.npz", std::process::id()));
    let (ok, _, err) = mote(&[
        "run",
        "--code-free",
        &path("mlp_bnns.tar"),
        "--inputs",
        &path("mlp_bnns.main.inputs.npz"),
        "--output",
        &out_npz.display().to_string(),
    ]);
    assert!(ok, "{err}");
    let got = mote::npy::read_npz(&out_npz).expect("outputs");
    let _ = std::fs::remove_file(&out_npz);
    let want = mote::npy::read_npz(dir.join("mlp_bnns.main.expected.npz")).expect("expected");
    assert_eq!(got.len(), want.len());
    for ((gk, g), (wk, w)) in got.iter().zip(&want) {
        assert_eq!(gk, wk);
        assert_close(gk, g, w, 1e-4, 1e-4);
    }
    let (ok, out, err) = mote(&[
        "bench",
        "--code-free",
        &path("mlp_bnns.tar"),
        "--runs",
        "3",
        "--warmup",
        "1",
    ]);
    assert!(ok, "{err}");
    assert!(!out.is_empty());
}

/// A kernel-only library compiled for OpenCL (the OpenCL zoo, `MOTE_OPENCL_ZOO_DIR`; run on
/// POCL): `inspect` lists the device kernels, `bench --profile` times each on the device, and a
/// device index out of range is refused.
#[test]
fn opencl_libraries_show_their_device_kernels_and_device_time() {
    let dir = std::path::PathBuf::from(
        std::env::var_os("MOTE_OPENCL_ZOO_DIR")
            .expect("MOTE_OPENCL_ZOO_DIR (scripts/opencl-zoo.sh)"),
    );
    let gemm = dir.join("gemm_cl.so").display().to_string();
    let inputs = dir
        .join("gemm_cl.gemm_gpu.inputs.npz")
        .display()
        .to_string();
    let (ok, out, err) = mote(&["inspect", &gemm]);
    assert!(ok, "{err}");
    assert!(
        out.contains("opencl gemm_gpu_kernel(buffer, buffer, buffer, int32, int32) launched with blockIdx.x, threadIdx.x"),
        "{out}"
    );
    let (ok, out, err) = mote(&[
        "bench",
        &gemm,
        "--function",
        "main",
        "--inputs",
        &inputs,
        "--runs",
        "2",
        "--warmup",
        "1",
        "--profile",
    ]);
    assert!(ok, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("gemm_gpu_kernel"))
        .unwrap_or_else(|| panic!("no device time row: {out}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1], "16", "16 launches per run: {row}");
    assert!(cols[2].parse::<f64>().unwrap() > 0.0, "{row}");
    let (ok, _, err) = mote(&[
        "run",
        &gemm,
        "--function",
        "main",
        "--inputs",
        &inputs,
        "--opencl-device",
        "99",
    ]);
    assert!(!ok && err.contains("opencl_device 99"), "{err}");
    // The launch trace the C replay reads (scripts/bench/opencl-replay.c): the kernel's source
    // once, then 16 launches of 4096 work items in groups of 64 with three 256 KiB buffers and
    // the two int32 loop indices; timed with the tensors resident on the device.
    let trace = std::env::temp_dir().join(format!("mote-cli-trace-{}.txt", std::process::id()));
    let (ok, _, err) = mote(&[
        "bench",
        &gemm,
        "--function",
        "main",
        "--inputs",
        &inputs,
        "--runs",
        "2",
        "--device-resident",
        "--opencl-trace",
        trace.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&trace).unwrap();
    std::fs::remove_file(&trace).unwrap();
    assert_eq!(
        text.matches("\nkernel 0 gemm_gpu_kernel ").count()
            + usize::from(text.starts_with("kernel 0 gemm_gpu_kernel ")),
        1,
        "{text}"
    );
    let launches: Vec<&str> = text.lines().filter(|l| l.starts_with("launch ")).collect();
    assert_eq!(launches.len(), 16, "{text}");
    assert!(
        launches.iter().all(|l| *l == "launch 0 1 4096 64 5"),
        "{launches:?}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("buffer ") && l.ends_with(" 262144"))
            .count(),
        48
    );
    assert!(
        text.contains("scalar 03000000"),
        "the last loop index, 3 as int32"
    );
    // On a CPU model the two options are refused.
    let zoo = std::path::PathBuf::from(std::env::var_os("MOTE_ZOO_DIR").expect("MOTE_ZOO_DIR"));
    let (ok, _, err) = mote(&[
        "bench",
        zoo.join("mlp.so").to_str().unwrap(),
        "--function",
        "forward",
        "--device-resident",
    ]);
    assert!(!ok && err.contains("compiled for OpenCL"), "{err}");
}
