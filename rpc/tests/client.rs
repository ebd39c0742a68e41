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
    // exec_mode="compiled" builds (docs/tvm-format.md §3.11), uploaded and run the same way.
    assert!(out.contains("ctrl (compiled): 2 cases ok"), "{out}");
    assert!(out.contains(", 12 compiled builds"), "{out}");
    s.stop();
}

/// `remote.system_lib()` with nothing linked is an empty module (AttributeError for a missing
/// function) and `download_linked_module` returns a .so as it is and links .tar and .o uploads,
/// as TVM's own server does (rpc/tests/python/linked_module.py).
#[test]
fn system_lib_is_empty_and_download_linked_module_links() {
    let s = server();
    let out = run("linked_module.py", &s, &[]);
    assert!(out.contains("linked_module: ok"), "{out}");
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

/// `remote.cl(0)` of TVM's Android flow: exists, with OpenCL's own attribute values (docs/rpc.md
/// "Devices"; the machine's OpenCL device, POCL in CI).
#[test]
fn opencl_device_attributes_as_tvm_asks_for_them() {
    let s = server();
    assert!(run("opencl_device.py", &s, &[]).contains("opencl_device: ok"));
    s.stop();
}

/// The seed's GPU flow with TVM's client: the OpenCL GEMM on `remote.cl(0)` tensors, checked
/// against numpy and timed; a Relax model compiled for OpenCL through
/// `relax.VirtualMachine(rexec, remote.cl(0))` against TVM's CPU build (docs/rpc.md "Devices").
#[test]
fn opencl_seed_flow_and_relax_on_remote_cl() {
    let clzoo = std::env::var("MOTE_OPENCL_ZOO_DIR").unwrap_or_else(|_| {
        panic!("MOTE_OPENCL_ZOO_DIR is not set: point it at the OpenCL zoo (scripts/opencl-zoo.sh)")
    });
    let s = server();
    let out = run("opencl_seed.py", &s, &[&clzoo]);
    assert!(out.contains("opencl_seed: ok"), "{out}");
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

/// `craft::endless_loop()` (a code-free `.tar` whose `main()` never returns) written to a file
/// for the client to upload.
fn endless_model(tag: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("mote-rpc-endless-{}-{tag}.tar", std::process::id()));
    std::fs::write(&path, mote::fuzzing::craft::endless_loop()).expect("write the endless model");
    path
}

/// A code-free server (crafted models are code-free `.tar` files; what `mote rpc serve
/// --code-free` and the iOS app run) whose instruction budget never ends a call: only an
/// interrupt can.
fn unbounded_server() -> mote_rpc::ServerHandle {
    common::init_log();
    mote_rpc::Server::builder()
        .port(0)
        .code_free(true)
        .session_threads(2)
        .max_instructions(u64::MAX)
        .spawn()
        .expect("server starts")
}

#[test]
fn an_endless_call_ends_at_the_session_timeout_and_the_server_serves_on() {
    let endless = endless_model("timeout");
    let s = unbounded_server();
    let path = endless.to_string_lossy().into_owned();
    let out = common::run_in(
        "endless.py",
        &s,
        &common::offload_zoo(),
        &["timeout", &path, "first-code-free"],
    );
    assert!(out.contains("endless timeout: ok"), "{out}");
    // The timed-out call was interrupted: its session ended on the server, no thread spins.
    let t = Instant::now();
    while s.stats().active > 0 && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = s.stats();
    let _ = std::fs::remove_file(&endless);
    if stats.active != 0 {
        // Stopping would wait for the spinning session forever; fail now instead.
        std::mem::forget(s);
        panic!("the timed-out session still runs on the server: {stats:?}");
    }
    assert_eq!(stats.served, 2, "{stats:?}");
    let t = Instant::now();
    s.stop();
    assert!(t.elapsed() < Duration::from_secs(2));
}

/// An unbounded server whose one session runs the endless model's `main()` (`endless.py`'s
/// "stop" mode): the model's path, the server, the client process and its output, once the call
/// has had a second to reach the server and start looping.
fn an_endless_call_running(
    tag: &str,
) -> (
    std::path::PathBuf,
    mote_rpc::ServerHandle,
    std::process::Child,
    BufReader<std::process::ChildStdout>,
) {
    let endless = endless_model(tag);
    let s = unbounded_server();
    let path = endless.to_string_lossy().into_owned();
    let ozoo = common::offload_zoo();
    let mut child = common::spawn_in("endless.py", &s, &ozoo, &["stop", &path, "first-code-free"]);
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert!(line.contains("calling"), "{line}");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(s.stats().active, 1, "{:?}", s.stats());
    (endless, s, child, out)
}

#[test]
fn stopping_the_server_interrupts_a_running_call() {
    let (endless, s, mut child, mut out) = an_endless_call_running("stop");
    let (tx, rx) = std::sync::mpsc::channel();
    let t = Instant::now();
    std::thread::spawn(move || {
        s.stop();
        let _ = tx.send(());
    });
    let stopped = rx.recv_timeout(Duration::from_secs(5));
    let _ = std::fs::remove_file(&endless);
    assert!(
        stopped.is_ok(),
        "stop() still waits after 5 s: the call was not interrupted"
    );
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "stop took {:?}",
        t.elapsed()
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("read");
    assert!(child.wait().expect("wait").success(), "{rest}");
    // The interrupted call answered with Mote's typed error before the session closed.
    assert!(rest.contains("endless stop: ok (RPCError"), "{rest}");
    assert!(rest.contains("Cancelled"), "{rest}");
}

/// A client killed while its call runs (an engineer's Ctrl-C on the host, a laptop leaving the
/// network): the server sees its socket close, interrupts the endless call and serves on,
/// instead of computing for nobody while the next client waits.
#[test]
fn a_client_gone_mid_call_ends_its_session() {
    let (endless, s, mut child, _out) = an_endless_call_running("gone");
    let path = endless.to_string_lossy().into_owned();
    child.kill().expect("kill");
    let _ = child.wait();
    let t = Instant::now();
    while s.stats().active > 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = s.stats();
    let _ = std::fs::remove_file(&endless);
    if stats.active != 0 {
        // Stopping would wait for the spinning session forever; fail now instead.
        std::mem::forget(s);
        panic!("the session of a killed client still runs its call: {stats:?}");
    }
    assert_eq!(stats.served, 1, "{stats:?}");
    // The server serves on: a new session runs a zoo model as TVM computed it.
    let out = common::run_in(
        "endless.py",
        &s,
        &common::offload_zoo(),
        &["zoo", &path, "first-code-free"],
    );
    assert!(out.contains("endless zoo: ok"), "{out}");
    s.stop();
}
