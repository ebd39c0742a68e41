//! Every zoo model, run through Mote, matches TVM's own `relax.VirtualMachine` outputs; the
//! kernel-only libraries (`gemm`, `kernels`) match TVM's own `lib[kernel](...)` calls.

use mote::{DType, Error, Model, Session, Tensor, Value};
use mote_tests::*;

fn run_model(name: &str) {
    register_scale_shift();
    let entry = model_entry(name);
    if entry["kind"] == "kernels" {
        run_kernel_library(name, &entry);
        return;
    }
    let model =
        Model::load(manifest_path_of(&entry)).unwrap_or_else(|e| panic!("{name}: load: {e}"));
    run_relax_cases(&model, name, &entry);
}

fn run_kernel_library(name: &str, entry: &serde_json::Value) {
    run_kernel_cases(&zoo_dir(), name, entry);
}

fn session(model: &Model, threads: usize) -> Session {
    poisoned_session(model, threads)
}

/// `gemm.gemm`'s arguments (each tensor held only here), the output poisoned, and TVM's
/// output.
fn gemm_case() -> (Vec<Value>, Tensor) {
    let mut args = load_args("gemm.gemm.inputs.npz");
    poison(&mut args[2]);
    let values = args.into_iter().map(Value::Tensor).collect();
    (values, load_outputs("gemm.gemm.expected.npz").remove(0))
}

fn tensor(v: &Value) -> &Tensor {
    v.as_tensor().expect("a tensor argument")
}

/// An `InvalidArgument` whose message contains every needle.
fn invalid_argument(e: Error, needles: &[&str]) {
    match &e {
        Error::InvalidArgument(m) if needles.iter().all(|n| m.contains(n)) => {}
        _ => panic!("expected InvalidArgument mentioning {needles:?}, got {e:?}"),
    }
}

#[test]
fn kernel_library_runs_through_call_kernel_only() {
    let model = Model::load(zoo_path("gemm.so")).unwrap();
    assert_eq!(model.function_names(), ["gemm", "main"]);
    for threads in [1, 2] {
        let mut s = session(&model, threads);
        for function in ["gemm", "main"] {
            let (mut args, want) = gemm_case();
            assert!(matches!(
                s.call_kernel(function, &mut args).unwrap(),
                Value::None
            ));
            assert_close(
                &format!("{function}: C"),
                tensor(&args[2]),
                &want,
                1e-5,
                1e-5,
            );
        }
        // The entry points that cannot hold the tensors exclusively are refused before the
        // kernel runs, pointing at call_kernel; the output buffer stays poisoned.
        let (args, _) = gemm_case();
        let tensors: Vec<Tensor> = args.iter().map(|v| tensor(v).clone()).collect();
        invalid_argument(s.call("gemm", &args).unwrap_err(), &["call_kernel"]);
        invalid_argument(s.run("gemm", &tensors).unwrap_err(), &["call_kernel"]);
        invalid_argument(
            s.set_input("main", args.clone()).unwrap_err(),
            &["stateful", "call_kernel"],
        );
        invalid_argument(
            s.invoke_stateful("main").unwrap_err(),
            &["stateful", "call_kernel"],
        );
        assert!(to_f64(&tensors[2]).iter().all(|v| v.is_nan()));
        // A pending interrupt cancels the next kernel call before the kernel runs (the output
        // stays poisoned), once: the call after it computes.
        let (mut args, want) = gemm_case();
        s.interrupt_handle().interrupt();
        assert!(matches!(
            s.call_kernel("gemm", &mut args),
            Err(Error::Cancelled)
        ));
        assert!(to_f64(tensor(&args[2])).iter().all(|v| v.is_nan()));
        s.call_kernel("gemm", &mut args).unwrap();
        assert_close("after a cancel: C", tensor(&args[2]), &want, 1e-5, 1e-5);
        // Profiling sees the kernel.
        let (mut args, _) = gemm_case();
        s.set_profiling(true);
        s.call_kernel("gemm", &mut args).unwrap();
        let p = s.take_profile();
        assert!(
            p.iter()
                .any(|e| e.name == "gemm" && e.kind == mote::CallKind::Kernel && e.calls == 1),
            "{p:?}"
        );
    }
    // From memory, too.
    let bytes = std::fs::read(zoo_path("gemm.so")).unwrap();
    let model = Model::load_from_memory(&bytes).unwrap();
    assert!(model.is_kernel_library());
    let (mut args, want) = gemm_case();
    session(&model, 2).call_kernel("main", &mut args).unwrap();
    assert_close("from memory: C", tensor(&args[2]), &want, 1e-5, 1e-5);
}

#[test]
fn call_kernel_refuses_tensors_another_handle_can_see() {
    let model = Model::load(zoo_path("gemm.so")).unwrap();
    let mut s = session(&model, 2);
    let (mut args, want) = gemm_case();
    let is_poisoned = |t: &Tensor| to_f64(t).iter().all(|v| v.is_nan());
    // A clone of the output handle: refused by index, with the fixes named; nothing written.
    let kept = tensor(&args[2]).clone();
    invalid_argument(
        s.call_kernel("gemm", &mut args).unwrap_err(),
        &["tensor argument 2 is shared", "deep_copy", "clones"],
    );
    assert!(is_poisoned(&kept));
    // A clone of an input is as shared as one of the output.
    drop(kept);
    let kept = tensor(&args[0]).clone();
    invalid_argument(
        s.call_kernel("gemm", &mut args).unwrap_err(),
        &["tensor argument 0"],
    );
    drop(kept);
    // Another view of the output's storage (a reshape), then a kept storage reference.
    let view = tensor(&args[2]).reshape(&[48, 64]).unwrap();
    invalid_argument(
        s.call_kernel("gemm", &mut args).unwrap_err(),
        &["tensor argument 2"],
    );
    assert!(is_poisoned(&view));
    drop(view);
    let storage = tensor(&args[2]).storage().clone();
    invalid_argument(
        s.call_kernel("gemm", &mut args).unwrap_err(),
        &["tensor argument 2"],
    );
    drop(storage);
    // The same tensor twice: each handle shares it with the other.
    let mut twice = vec![args[0].clone(), args[0].clone(), args[2].clone()];
    invalid_argument(
        s.call_kernel("gemm", &mut twice).unwrap_err(),
        &["tensor argument 0"],
    );
    drop(twice);
    assert!(is_poisoned(tensor(&args[2])));
    // Every other handle gone: the call goes through and writes the caller's buffer.
    s.call_kernel("gemm", &mut args).unwrap();
    assert_close("exclusive: C", tensor(&args[2]), &want, 1e-5, 1e-5);
    // The documented fix: a deep copy is exclusive, and the result is read from it.
    let (args0, _) = gemm_case();
    let mut copies: Vec<Value> = args0
        .iter()
        .map(|v| Value::Tensor(tensor(v).deep_copy().unwrap()))
        .collect();
    s.call_kernel("gemm", &mut copies).unwrap();
    assert_close("deep copies: C", tensor(&copies[2]), &want, 1e-5, 1e-5);
    assert!(is_poisoned(tensor(&args0[2])), "the original is untouched");
}

#[test]
fn relax_models_keep_call_and_refuse_call_kernel() {
    let model = Model::load(zoo_path("mlp.so")).unwrap();
    let mut s = session(&model, 1);
    let mut args: Vec<Value> = load_args("mlp.forward.inputs.npz")
        .into_iter()
        .map(Value::Tensor)
        .collect();
    invalid_argument(
        s.call_kernel("forward", &mut args).unwrap_err(),
        &["kernel-only", "Session::call"],
    );
    let out = s.call("forward", &args).unwrap().flatten_tensors();
    let want = load_outputs("mlp.forward.expected.npz");
    assert_eq!(out.len(), want.len());
    for (k, (got, want)) in out.iter().zip(&want).enumerate() {
        assert_close(&format!("mlp.forward out{k}"), got, want, 1e-4, 1e-5);
    }
}

#[test]
fn kernel_library_errors_are_typed_and_the_session_goes_on() {
    let model = Model::load(zoo_path("gemm.so")).unwrap();
    let mut s = session(&model, 2);
    let (mut values, want) = gemm_case();
    // Arguments that share nothing with `values`, for the calls the kernel refuses.
    let fresh = || -> Vec<Value> { gemm_case().0 };

    match s.call_kernel("gemm2", &mut values).unwrap_err() {
        Error::UnknownFunction { name, available } => {
            assert_eq!(name, "gemm2");
            assert_eq!(available, ["gemm", "main"]);
        }
        e => panic!("wrong name: {e:?}"),
    }

    let kernel_error = |e: Error, needle: &str| match &e {
        Error::Kernel {
            kernel, message, ..
        } if kernel == "gemm" && message.contains(needle) => {}
        _ => panic!("expected a kernel error of gemm with `{needle}`, got {e:?}"),
    };
    kernel_error(
        s.call_kernel("gemm", &mut fresh()[..2]).unwrap_err(),
        "Expected 3 arguments",
    );
    kernel_error(
        s.call_kernel("gemm", &mut []).unwrap_err(),
        "Expected 3 arguments",
    );
    let mut extra = fresh();
    extra.push(Value::Int(1));
    kernel_error(
        s.call_kernel("gemm", &mut extra).unwrap_err(),
        "Expected 3 arguments",
    );
    let mut wrong = fresh();
    wrong[1] = Value::Tensor(Tensor::zeros(&[32, 47], DType::F32).unwrap());
    kernel_error(s.call_kernel("gemm", &mut wrong).unwrap_err(), "B.shape[1]");
    wrong[1] = Value::Tensor(Tensor::zeros(&[32, 48], DType::F64).unwrap());
    kernel_error(s.call_kernel("gemm", &mut wrong).unwrap_err(), "B.dtype");
    wrong[1] = Value::Tensor(Tensor::zeros(&[32, 48, 1], DType::F32).unwrap());
    kernel_error(s.call_kernel("gemm", &mut wrong).unwrap_err(), "B.ndim");
    wrong[1] = Value::Int(3);
    kernel_error(s.call_kernel("gemm", &mut wrong).unwrap_err(), "B");
    // What no kernel can take, or a caller cannot vouch for, is refused before the call.
    wrong[1] = Value::Str("B".into());
    let e = s.call_kernel("gemm", &mut wrong).unwrap_err();
    assert!(matches!(e, Error::Mismatch(_)), "{e:?}");
    wrong[1] = Value::OpaquePtr(tensor(&values[1]).data_ptr() as usize);
    let e = s.call_kernel("gemm", &mut wrong).unwrap_err();
    assert!(
        matches!(&e, Error::Mismatch(m) if m.contains("opaque pointer")),
        "{e:?}"
    );

    // The session still works, and the failed calls wrote nothing.
    assert!(to_f64(tensor(&values[2])).iter().all(|v| v.is_nan()));
    assert!(matches!(
        s.call_kernel("gemm", &mut values).unwrap(),
        Value::None
    ));
    assert_close("after the errors: C", tensor(&values[2]), &want, 1e-5, 1e-5);
}

#[test]
fn kernel_library_describes_its_kernels() {
    let gemm = Model::load(zoo_path("gemm.so")).unwrap();
    let (nconst, bytes) = gemm.constant_bytes();
    assert_eq!((nconst, bytes), (0, 0));
    assert!(gemm.builtins().is_empty() && gemm.partition_plan(&[]).is_empty());
    let f32_param = |p: &mote::ParamInfo, name: &str, shape: [i64; 2]| {
        assert_eq!(p.name, name);
        assert_eq!(p.dtype, Some(DType::F32), "{name}");
        assert_eq!(
            p.shape,
            Some(shape.iter().map(|&d| mote::Dim::Fixed(d)).collect()),
            "{name}"
        );
    };
    // `main` reports the kernel it stands for.
    for function in ["gemm", "main"] {
        let info = gemm.function_info(function).unwrap();
        assert_eq!(info.name, function);
        assert_eq!(info.params.len(), 3, "{function}");
        f32_param(&info.params[0], "A", [64, 32]);
        f32_param(&info.params[1], "B", [32, 48]);
        f32_param(&info.params[2], "C", [64, 48]);
    }
    let e = gemm.function_info("gemm2").unwrap_err();
    assert!(matches!(e, Error::UnknownFunction { .. }), "{e:?}");

    let kernels = Model::load(zoo_path("kernels.so")).unwrap();
    assert_eq!(
        kernels.function_names(),
        ["gemm", "scaled_gemm", "shift"],
        "three kernels and no main alias"
    );
    let e = kernels.function_info("main").unwrap_err();
    assert!(
        matches!(&e, Error::UnknownFunction { available, .. } if available.len() == 3),
        "{e:?}"
    );
    let info = kernels.function_info("scaled_gemm").unwrap();
    let names: Vec<&str> = info.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["A", "B", "alpha", "C"]);
    assert!(info.params[2].dtype.is_none() && info.params[2].shape.is_none());
    f32_param(&info.params[3], "C", [64, 48]);
    let shift = kernels.kernel_signature("shift").unwrap();
    assert_eq!(shift.params[0].1, Some(DType::I32));
    assert_eq!(shift.params[1], ("n".to_string(), None, None));
}

macro_rules! zoo_tests {
    ($($name:ident),* $(,)?) => {
        $( #[test] fn $name() { run_model(stringify!($name)); } )*

        #[test]
        fn every_zoo_model_has_a_test() {
            let tested = [$(stringify!($name)),*];
            for m in manifest()["models"].as_array().unwrap() {
                let n = m["name"].as_str().unwrap();
                assert!(tested.contains(&n), "zoo model `{n}` has no test");
            }
        }
    };
}

zoo_tests!(
    mlp,
    cnn,
    mobilenet_block,
    transformer,
    mlp_dyn,
    multi,
    ctrl,
    par,
    quant,
    half,
    raise,
    packed,
    gemm,
    kernels
);
