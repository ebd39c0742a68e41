//! Every zoo model, run through Mote, matches TVM's own `relax.VirtualMachine` outputs.

use mote::{Arg, Model, SessionOptions, Value};
use mote_tests::*;

/// The function the `packed` model's kernel calls by name: dst[i] = 2 * src[i] + 1 on raw
/// float32 pointers (the same contract as the Python version the zoo registers with TVM).
fn register_scale_shift() {
    mote::register_function(
        "mote.zoo.scale_shift",
        std::sync::Arc::new(|args: &[Arg<'_>]| {
            let [Arg::OpaquePtr(src), Arg::OpaquePtr(dst), Arg::Int(n)] = *args else {
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

fn run_model(name: &str) {
    register_scale_shift();
    let entry = model_entry(name);
    let model =
        Model::load(manifest_path_of(&entry)).unwrap_or_else(|e| panic!("{name}: load: {e}"));
    for threads in [1, 2] {
        let mut session = model
            .session_with(SessionOptions {
                threads: Some(threads),
                // Every buffer the session hands out, fresh or reused, starts as NaN (or 0xA5
                // bytes): an output element no kernel task wrote cannot match TVM.
                poison_memory: true,
                ..Default::default()
            })
            .unwrap();
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
    packed
);
