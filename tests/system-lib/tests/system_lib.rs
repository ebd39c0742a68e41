//! Zoo models built as system libraries and linked into this test binary (see build.rs) load
//! by prefix and match TVM's outputs; several live side by side; an unknown prefix is a typed
//! error (docs/system-lib.md).

use std::path::{Path, PathBuf};

use mote::{Error, Model, SessionOptions, Value};
use mote_tests::{assert_close, load_indexed_in, manifest_in};

/// `(name, prefix)` of every model build.rs linked in, or a loud failure saying why none is.
fn linked() -> Vec<(&'static str, &'static str)> {
    let problem = env!("MOTE_SYSLIB_PROBLEM");
    assert!(
        problem.is_empty(),
        "no system library is linked into this test: {problem}"
    );
    env!("MOTE_SYSLIB_LINKED")
        .split(',')
        .filter_map(|p| p.split_once(':'))
        .collect()
}

/// The zoo the models were linked from (its expected outputs belong to those objects).
fn zoo() -> PathBuf {
    PathBuf::from(env!("MOTE_SYSLIB_ZOO"))
}

fn entry(zoo: &Path, name: &str) -> serde_json::Value {
    manifest_in(zoo)["models"]
        .as_array()
        .expect("models")
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not in the zoo manifest"))
        .clone()
}

/// Run every case of the zoo model `name` through `model` with 1 and 2 threads, twice per
/// session (the second time from re-poisoned, reused storage); a case where TVM raises must
/// be a kernel error with TVM's message.
fn check_against_tvm(name: &str, model: &Model) {
    let zoo = zoo();
    let entry = entry(&zoo, name);
    for threads in [1, 2] {
        let mut session = model
            .session_with(SessionOptions {
                threads: Some(threads),
                poison_memory: true,
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("{name}: session: {e}"));
        for case in entry["cases"].as_array().expect("cases") {
            let cname = format!("{name}.{} ({threads} threads)", case["case"]);
            let function = case["function"].as_str().expect("function");
            if let Some(expected) = case["expect_error"].as_str() {
                // The kernel raises through TVMFFIErrorSetRaisedFromCStrParts, called directly.
                let args: Vec<Value> =
                    load_indexed_in(&zoo, case["inputs"].as_str().expect("inputs"), "arg")
                        .into_iter()
                        .map(Value::Tensor)
                        .collect();
                let err = session
                    .call(function, &args)
                    .expect_err(&format!("{cname}: TVM raises here, Mote must too"));
                assert!(
                    matches!(&err, Error::Kernel { message, .. } if message.contains(expected)),
                    "{cname}: {err:?} is not a kernel error with `{expected}`"
                );
                continue;
            }
            let want = load_indexed_in(&zoo, case["expected"].as_str().expect("expected"), "out");
            let tol = &case["tolerance"];
            let (rtol, atol) = (tol["rtol"].as_f64().unwrap(), tol["atol"].as_f64().unwrap());
            for run in ["first", "second"] {
                let args: Vec<Value> =
                    load_indexed_in(&zoo, case["inputs"].as_str().expect("inputs"), "arg")
                        .into_iter()
                        .map(Value::Tensor)
                        .collect();
                let result = match case["mode"].as_str() {
                    Some("stateful") => session
                        .set_input(function, args)
                        .and_then(|_| session.invoke_stateful(function))
                        .and_then(|_| session.get_output(function)),
                    _ => session.call(function, &args),
                };
                let out = result
                    .unwrap_or_else(|e| panic!("{cname} {run} run: {e}"))
                    .flatten_tensors();
                assert_eq!(out.len(), want.len(), "{cname}: number of outputs");
                for (i, (g, w)) in out.iter().zip(&want).enumerate() {
                    assert_close(&format!("{cname} {run} run out{i}"), g, w, rtol, atol);
                }
            }
        }
    }
}

#[test]
fn every_linked_model_matches_tvm_by_prefix() {
    let linked = linked();
    for name in ["mlp", "cnn", "multi", "par", "raise"] {
        assert!(
            linked.iter().any(|(n, _)| *n == name),
            "{name} is not linked in ({linked:?})"
        );
    }
    for (name, prefix) in linked {
        let model = Model::from_system_lib(prefix).unwrap_or_else(|e| panic!("{prefix}: {e}"));
        assert_eq!(
            model.path(),
            Path::new(&format!("<system-lib {prefix}>")),
            "{name}"
        );
        assert!(!model.kernels().is_empty(), "{name}: no kernels resolved");
        check_against_tvm(name, &model);
    }
}

/// The registrations happened before `main`: the registry lists every linked prefix.
#[test]
fn registrations_before_main_are_recorded() {
    let prefixes = Model::system_lib_prefixes();
    for (_, prefix) in linked() {
        assert!(
            prefixes.iter().any(|p| p == prefix),
            "{prefix} not among {prefixes:?}"
        );
    }
}

/// Several models at once, one thread each, each loaded twice (one library per prefix,
/// shared by both models): all answer as TVM does.
#[test]
fn several_prefixes_live_side_by_side() {
    let linked = linked();
    std::thread::scope(|s| {
        for &(name, prefix) in &linked {
            s.spawn(move || {
                let a = Model::from_system_lib(prefix).unwrap();
                let b = Model::from_system_lib(prefix).unwrap();
                check_against_tvm(name, &a);
                drop(a);
                check_against_tvm(name, &b);
            });
        }
    });
}

#[test]
fn an_unknown_prefix_is_a_load_error_listing_the_known_ones() {
    let linked = linked();
    let err = Model::from_system_lib("nosuch_")
        .err()
        .expect("nosuch_ loaded");
    let Error::Load { path, message } = &err else {
        panic!("not a load error: {err:?}");
    };
    assert_eq!(path, Path::new("<system-lib nosuch_>"));
    for (_, prefix) in linked {
        assert!(message.contains(&format!("`{prefix}`")), "{message}");
    }
    assert!(message.contains("whole-archive"), "{message}");
    // A prefix that is only the start of a real one is not that one.
    assert!(Model::from_system_lib("ml").is_err());
}

/// par's kernel calls TVMBackendParallelLaunch and the workspace functions directly (the zoo
/// checked lib0.o's undefined symbols): with 2 threads its tasks run on the pool, and fifty
/// calls in a row, each taking and freeing a workspace, all give TVM's answer.
#[test]
fn par_runs_parallel_tasks_through_the_direct_symbols() {
    let zoo = zoo();
    let entry = entry(&zoo, "par");
    let undefined = entry["system_lib"]["undefined"].to_string();
    for sym in [
        "TVMBackendParallelLaunch",
        "TVMBackendAllocWorkspace",
        "TVMBackendFreeWorkspace",
    ] {
        assert!(
            undefined.contains(sym),
            "par's lib0.o does not call {sym}: {undefined}"
        );
    }
    let model = Model::from_system_lib("par_").unwrap();
    let mut session = model
        .session_with(SessionOptions {
            threads: Some(2),
            poison_memory: true,
            ..Default::default()
        })
        .unwrap();
    let case = &entry["cases"][0];
    let want = load_indexed_in(&zoo, case["expected"].as_str().unwrap(), "out");
    let args: Vec<Value> = load_indexed_in(&zoo, case["inputs"].as_str().unwrap(), "arg")
        .into_iter()
        .map(Value::Tensor)
        .collect();
    let tol = &case["tolerance"];
    let (rtol, atol) = (tol["rtol"].as_f64().unwrap(), tol["atol"].as_f64().unwrap());
    for i in 0..50 {
        let out = session.call("main", &args).unwrap().flatten_tensors();
        assert_close(&format!("par call {i}"), &out[0], &want[0], rtol, atol);
    }
}
