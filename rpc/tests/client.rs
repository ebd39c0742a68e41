//! TVM 0.27's own Python RPC client, unchanged, against Mote's server started in-process.
//! Needs MOTE_PYTHON (the TVM venv's python) and MOTE_ZOO_DIR (the x86_64 zoo); see
//! scripts/test-rpc.sh. The scripts in tests/python check results against the zoo's expected
//! outputs (computed by TVM) and numpy.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use common::{run, server, spawn};

#[test]
fn mlp_flow_of_the_spec_trace() {
    let s = server();
    assert!(run("mlp_flow.py", &s, &[]).contains("mlp_flow: ok"));
    s.stop();
}

#[test]
fn every_zoo_model_matches_tvm() {
    let s = server();
    let out = run("zoo_all.py", &s, &[]);
    assert!(out.contains("zoo_all:"), "{out}");
    assert!(out.contains("gemm: 4 cases ok"), "{out}");
    s.stop();
}

#[test]
fn a_code_free_server_runs_code_free_uploads_and_refuses_code() {
    let ozoo = std::env::var("MOTE_OFFLOAD_ZOO_DIR").unwrap_or_else(|_| {
        panic!("MOTE_OFFLOAD_ZOO_DIR is not set: point it at the x86_64 offload zoo (scripts/offload-zoo.sh)")
    });
    common::init_log();
    let s = mote_rpc::Server::builder()
        .port(0)
        .code_free(true)
        .spawn()
        .expect("server starts");
    let out = run("code_free.py", &s, &[&ozoo]);
    assert!(out.contains("code_free: ok (3 models)"), "{out}");
    s.stop();
}

#[test]
fn kernel_library_gemm_and_its_time_evaluator() {
    let s = server();
    assert!(run("gemm_kernels.py", &s, &[]).contains("gemm_kernels: ok"));
    s.stop();
}

#[test]
fn stateful_api_and_saved_functions() {
    let s = server();
    assert!(run("stateful.py", &s, &[]).contains("stateful: ok"));
    s.stop();
}

#[test]
fn profile_and_trace_from_a_plain_client() {
    let s = server();
    assert!(run("profile.py", &s, &[]).contains("profile: ok"));
    s.stop();
}

#[test]
fn client_timeout_ends_the_session_as_tvm_expects() {
    let s = server();
    assert!(run("timeout.py", &s, &[]).contains("timeout: ok"));
    // The server side ends too: the timed loop notices the expiry between calls.
    let t = Instant::now();
    while s.stats().active > 0 && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(s.stats().active, 0);
    s.stop();
}

#[test]
fn two_sessions_at_once_have_separate_sandboxes() {
    let s = server();
    let mut child = spawn("two_sessions.py", &s, &["hold"]);
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert!(line.contains("two_sessions: ok"), "{line}");
    assert_eq!(s.stats().active, 2, "{:?}", s.stats());
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"\n")
        .expect("write");
    assert!(child.wait().expect("wait").success());
    let t = Instant::now();
    while s.stats().served < 2 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(s.stats().served, 2);
    s.stop();
}

#[test]
fn stop_while_a_client_is_connected() {
    let s = server();
    let mut child = spawn("stop_client.py", &s, &[]);
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert!(line.contains("connected"), "{line}");
    assert_eq!(s.stats().active, 1);
    let t = Instant::now();
    s.stop();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(2), "stop took {took:?}");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"\n")
        .expect("write");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("read");
    assert!(child.wait().expect("wait").success(), "{rest}");
    assert!(rest.contains("stop_client: ok"), "{rest}");
}
