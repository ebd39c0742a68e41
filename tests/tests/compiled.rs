//! Relax models built with `exec_mode="compiled"` (the VM program as native code,
//! docs/tvm-format.md §3.6): every Relax model of the x86_64 zoo has such a build
//! (`compiled/NAME.so`, whose cases TVM checked give exactly its bytecode build's outputs), and
//! Mote must run each case as TVM does; loading one code-free is refused by name, and the
//! session's budgets and interrupt reach into the native code through the builtins it calls.

use mote::{Error, LoadOptions, Model, SessionOptions, Value};
use mote_tests::*;

fn compiled_entries() -> Vec<serde_json::Value> {
    let all: Vec<_> = manifest()["models"]
        .as_array()
        .expect("models")
        .iter()
        .filter(|m| m["kind"] != "kernels")
        .cloned()
        .collect();
    for m in &all {
        assert!(
            m["compiled"]["file"].is_string(),
            "zoo model `{}` has no compiled build: rebuild the zoo (scripts/zoo.sh)",
            m["name"]
        );
    }
    assert!(all.len() >= 12, "{} Relax models in the zoo", all.len());
    all
}

/// The function and arguments of an entry's first case.
fn first_case(entry: &serde_json::Value) -> (String, Vec<Value>) {
    let case = &entry["cases"][0];
    let args = load_args(case["inputs"].as_str().unwrap())
        .into_iter()
        .map(Value::Tensor)
        .collect();
    (case["function"].as_str().unwrap().to_string(), args)
}

fn load_compiled(entry: &serde_json::Value) -> Model {
    let file = entry["compiled"]["file"].as_str().unwrap();
    Model::load(zoo_path(file)).unwrap_or_else(|e| panic!("{file}: load: {e}"))
}

#[test]
fn every_compiled_build_matches_tvm() {
    register_scale_shift();
    for entry in compiled_entries() {
        let name = entry["name"].as_str().unwrap();
        let model = load_compiled(&entry);
        let bytecode = Model::load(manifest_path_of(&entry)).unwrap();
        assert_eq!(
            model.function_names(),
            bytecode.function_names(),
            "{name}: the compiled build's functions"
        );
        assert!(
            !model.is_code_free(),
            "{name}: native code is not code-free"
        );
        run_relax_cases(&model, &format!("{name} (compiled)"), &entry);
    }
}

#[test]
fn compiled_builds_import_what_mote_exports() {
    for entry in compiled_entries() {
        let undefined: Vec<&str> = entry["compiled"]["undefined"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        for u in &undefined {
            assert!(
                *u == mote::ERROR_SYMBOL || mote::COMPILED_MODE_SYMBOLS.contains(u),
                "{}: imports {u}, which Mote does not define",
                entry["name"]
            );
        }
        assert!(undefined.contains(&"TVMBackendAnyListSetPackedArg"));
    }
}

#[test]
fn a_code_free_load_refuses_compiled_functions_by_name() {
    let entry = model_entry("multi");
    let file = entry["compiled"]["file"].as_str().unwrap();
    let err = Model::load_with(zoo_path(file), LoadOptions::default().code_free(true))
        .err()
        .expect("a code-free load of native Relax functions must fail");
    match &err {
        Error::Unsupported(m) => {
            for needle in ["exec_mode=\"compiled\"", "embed", "forward", "code-free"] {
                assert!(m.contains(needle), "`{m}` lacks `{needle}`");
            }
        }
        e => panic!("expected Unsupported, got {e:?}"),
    }
}

/// `mlp_dyn` in compiled mode: its builtin calls (shape checks, matching, allocation) are
/// where the instruction budget is charged, one each.
#[test]
fn the_instruction_budget_counts_builtin_calls() {
    let entry = model_entry("mlp_dyn");
    let model = load_compiled(&entry);
    let (function, args) = first_case(&entry);
    let function = function.as_str();
    let mut needed = None;
    for budget in 1..200u64 {
        let mut s = model
            .session_with(SessionOptions {
                max_instructions: budget,
                ..Default::default()
            })
            .unwrap();
        match s.call(function, &args) {
            Ok(_) => {
                needed = Some(budget);
                break;
            }
            Err(Error::ResourceExhausted { budget: b, message }) => {
                assert_eq!(b, "SessionOptions::max_instructions");
                assert!(message.contains("compiled function"), "{message}");
            }
            Err(e) => panic!("budget {budget}: {e:?}"),
        }
    }
    let needed = needed.expect("the call fits some budget under 200");
    assert!(needed > 3, "only {needed} builtin calls");
    // The budget is per call: the same session runs again within it.
    let mut s = model
        .session_with(SessionOptions {
            max_instructions: needed,
            ..Default::default()
        })
        .unwrap();
    for _ in 0..3 {
        s.call(function, &args).expect("within the budget");
    }
}

/// An interrupt set before the call cancels it at its first builtin call, once; the session
/// then runs the model again and matches TVM.
#[test]
fn an_interrupt_cancels_a_compiled_call_once() {
    let entry = model_entry("mlp");
    let model = load_compiled(&entry);
    let (function, args) = first_case(&entry);
    let function = function.as_str();
    let mut s = poisoned_session(&model, 1);
    let h = s.interrupt_handle();
    h.interrupt();
    assert!(matches!(s.call(function, &args), Err(Error::Cancelled)));
    let out = s
        .call(function, &args)
        .expect("the next call runs")
        .flatten_tensors();
    let want = load_outputs(entry["cases"][0]["expected"].as_str().unwrap());
    assert_close(
        "mlp (compiled) after an interrupt",
        &out[0],
        &want[0],
        1e-5,
        1e-5,
    );
}

/// Wrong arguments are refused before the native code runs, or by the checks it calls, with
/// the bytecode build's error kinds; the session goes on.
#[test]
fn bad_arguments_are_typed_errors() {
    let entry = model_entry("mlp");
    let model = load_compiled(&entry);
    let mut s = model.session().unwrap();
    let (function, args) = first_case(&entry);
    let function = function.as_str();
    assert!(matches!(
        s.call(function, &[]),
        Err(Error::ArgumentCount { .. })
    ));
    let mut wrong = args.clone();
    wrong[0] = Value::Tensor(mote::Tensor::zeros(&[3, 3], mote::DType::F32).unwrap());
    let bytecode = Model::load(manifest_path_of(&entry)).unwrap();
    let want = bytecode
        .session()
        .unwrap()
        .call(function, &wrong)
        .expect_err("bytecode refuses");
    match s.call(function, &wrong) {
        Err(e) => assert_eq!(
            std::mem::discriminant(&e),
            std::mem::discriminant(&want),
            "compiled: {e:?}, bytecode: {want:?}"
        ),
        Ok(_) => panic!("a 3x3 input ran"),
    }
    s.call(function, &args).expect("the session goes on");
}
