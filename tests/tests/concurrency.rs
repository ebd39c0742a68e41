//! Models are shareable across threads, sessions are per thread, and two models (or the same
//! file loaded twice) do not interfere.

use std::sync::Arc;

use mote::{Model, SessionOptions, Value};
use mote_tests::*;

fn check(model: &Model, case: &str, function: &str, threads: usize, iterations: usize) {
    let mut s = model
        .session_with(SessionOptions {
            threads: Some(threads),
            poison_memory: true,
            ..Default::default()
        })
        .unwrap();
    let args: Vec<Value> = load_args(&format!("{case}.inputs.npz"))
        .into_iter()
        .map(Value::Tensor)
        .collect();
    let want = load_outputs(&format!("{case}.expected.npz"));
    for _ in 0..iterations {
        let out = s.call(function, &args).unwrap().flatten_tensors();
        for (g, w) in out.iter().zip(&want) {
            assert_close(case, g, w, 1e-5, 1e-5);
        }
    }
}

#[test]
fn models_and_sessions_across_threads() {
    let mlp = Arc::new(Model::load(zoo_path("mlp.so")).unwrap());
    let cnn = Model::load(zoo_path("cnn.so")).unwrap();
    let par = Model::load(zoo_path("par.so")).unwrap();
    let mlp_again = Model::load(zoo_path("mlp.so")).unwrap();
    std::thread::scope(|scope| {
        for i in 0..3 {
            let mlp = mlp.clone();
            scope.spawn(move || check(&mlp, "mlp.forward", "forward", 1, 50 + i));
        }
        scope.spawn(|| check(&cnn, "cnn.forward", "forward", 1, 30));
        scope.spawn(|| check(&par, "par.main", "main", 2, 5));
        scope.spawn(|| check(&mlp_again, "mlp.forward", "forward", 1, 30));
    });
    // Dropping one handle of a file loaded twice leaves the other working.
    drop(mlp_again);
    check(&mlp, "mlp.forward", "forward", 1, 2);
}

#[test]
fn outputs_outlive_the_session_and_the_model() {
    let out = {
        let m = Model::load(zoo_path("cnn.so")).unwrap();
        let mut s = m.session().unwrap();
        let args: Vec<Value> = load_args("cnn.forward.inputs.npz")
            .into_iter()
            .map(Value::Tensor)
            .collect();
        s.call("forward", &args).unwrap().flatten_tensors()
    };
    assert_close(
        "cnn after drop",
        &out[0],
        &load_outputs("cnn.forward.expected.npz")[0],
        1e-5,
        1e-5,
    );
}
