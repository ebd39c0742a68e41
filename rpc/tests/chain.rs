//! Chained sessions (docs/rpc.md "Chained sessions"): TVM's unchanged Python client asks the
//! first server, with `session_constructor_args=["rpc.Connect", host, port, key, False]`, to
//! connect to a second one and relay the session there. Needs MOTE_PYTHON and MOTE_ZOO_DIR
//! (scripts/test-rpc.sh).

mod common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{run, server};
use mote_rpc::{Server, ServerHandle};

fn addr(s: &ServerHandle) -> SocketAddr {
    s.local_addr().expect("listening")
}

/// A server on a free loopback port that lets clients chain to `hops`.
fn relay_to(hops: &[SocketAddr]) -> ServerHandle {
    common::init_log();
    Server::builder()
        .port(0)
        .allow_hops(hops.iter().map(|a| a.to_string()))
        .spawn()
        .expect("server starts")
}

/// `[host, port, key]` of each hop, for rpc/tests/python/chain.py.
fn hop_args(hops: &[(SocketAddr, &str)]) -> Vec<String> {
    hops.iter()
        .flat_map(|(a, k)| [a.ip().to_string(), a.port().to_string(), k.to_string()])
        .collect()
}

fn run_chain(front: &ServerHandle, mode: &str, hops: &[(SocketAddr, &str)]) -> String {
    let args = hop_args(hops);
    let mut extra: Vec<&str> = vec![mode];
    extra.extend(args.iter().map(String::as_str));
    run("chain.py", front, &extra)
}

/// Waits until `s` has served `n` sessions. The relayed session ends a moment after the
/// client's; in the timeout case the hop interrupts its running call when the relay says
/// goodbye (docs/rpc.md "Timeouts"), where it used to finish the 5 s timing call first (9 s
/// measured). The limit leaves room for a loaded machine (sanitizers, benchmarks).
fn wait_served(s: &ServerHandle, n: u64) {
    let start = Instant::now();
    while s.stats().served < n {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the hop served {:?}, expected {n} sessions",
            s.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_mlp_flow_runs_through_a_chain() {
    let b = server();
    let a = relay_to(&[addr(&b)]);
    let out = run_chain(&a, "mlp", &[(addr(&b), "")]);
    assert!(out.contains("chain mlp: ok (1 hops)"), "{out}");
    // The work was done by the hop: it served the relayed session.
    wait_served(&b, 1);
    assert_eq!(b.stats().served, 1, "{:?}", b.stats());
    a.stop();
    b.stop();
}

/// Client → A → B → C: A passes B the constructor arguments after its own, as TVM does.
#[test]
fn three_servers_chain_with_the_remaining_constructor_arguments() {
    let c = server();
    let b = relay_to(&[addr(&c)]);
    let a = relay_to(&[addr(&b)]);
    let out = run_chain(&a, "mlp", &[(addr(&b), ""), (addr(&c), "")]);
    assert!(out.contains("chain mlp: ok (2 hops)"), "{out}");
    wait_served(&c, 1);
    wait_served(&b, 1);
    a.stop();
    b.stop();
    c.stop();
}

#[test]
fn a_hop_not_allowed_is_refused_naming_the_option_and_the_server_serves_on() {
    let b = server();
    let other = server();
    // A allows another hop, not B; a server allowing none refuses as well.
    for a in [relay_to(&[addr(&other)]), server()] {
        let out = run_chain(&a, "refused", &[(addr(&b), "")]);
        assert!(out.contains("chain refused: ok"), "{out}");
        a.stop();
    }
    assert!(
        b.stats().served == 0 && b.stats().active == 0,
        "{:?}",
        b.stats()
    );
    b.stop();
    other.stop();
}

#[test]
fn an_unknown_constructor_and_a_wrong_hop_key_are_rpc_errors() {
    common::init_log();
    let b = Server::builder()
        .port(0)
        .key("x1")
        .spawn()
        .expect("server starts");
    let a = relay_to(&[addr(&b)]);
    let out = run("chain.py", &a, &["unknown"]);
    assert!(out.contains("chain unknown: ok"), "{out}");
    let hb = addr(&b);
    let py = format!(
        "from rpc_common import *\n\
         expect_rpc_error(lambda: connect(session_constructor_args=['rpc.Connect', '{}', {}, \
         'wrong', False]), 'wrong', 'wrong hop key')\n\
         r = connect(session_constructor_args=['rpc.Connect', '{}', {}, 'x1', False])\n\
         r.upload(bytearray(b'x'), 'f')\n\
         assert bytes(r.download('f')) == b'x'\n\
         print('key: ok')\n",
        hb.ip(),
        hb.port(),
        hb.ip(),
        hb.port()
    );
    let out = python_inline(&a, &py);
    assert!(out.contains("key: ok"), "{out}");
    a.stop();
    b.stop();
}

/// The client's `-timeout` holds on the relayed session: a call running on the hop longer than
/// it ends with RPCSessionTimeoutError, from the first server.
#[test]
fn the_client_timeout_ends_a_relayed_session() {
    let b = server();
    let a = relay_to(&[addr(&b)]);
    let out = run_chain(&a, "timeout", &[(addr(&b), "")]);
    assert!(out.contains("chain timeout: ok"), "{out}");
    wait_served(&b, 1);
    a.stop();
    b.stop();
}

/// The idle timeout ends a relayed session nobody uses, not one whose call is running.
#[test]
fn the_idle_timeout_ends_a_quiet_relayed_session() {
    let b = server();
    common::init_log();
    let a = Server::builder()
        .port(0)
        .allow_hops([addr(&b).to_string()])
        .idle_timeout(Duration::from_secs(1))
        .spawn()
        .expect("server starts");
    let hb = addr(&b);
    let py = format!(
        "import time\nfrom rpc_common import *\n\
         from tvm import relax\n\
         r = connect(session_constructor_args=['rpc.Connect', '{}', {}, '', False])\n\
         dev = r.cpu()\n\
         upload(r, 'mlp.so')\n\
         vm = relax.VirtualMachine(r.load_module('mlp.so'), dev)\n\
         args = [tvm.runtime.tensor(a, dev) for a in arrays('mlp.forward.inputs.npz', 'arg')]\n\
         t = vm.time_evaluator('forward', dev, number=1, repeat=1, min_repeat_ms=2500)(*args)\n\
         print('a 2.5 s call outlived the 1 s idle timeout')\n\
         r.upload(bytearray(b'x'), 'f')\n\
         time.sleep(2.5)\n\
         try:\n    r.download('f')\n\
         except Exception as e:\n    print('idle: ok', type(e).__name__)\n\
         else:\n    raise AssertionError('the idle session lived')\n",
        hb.ip(),
        hb.port()
    );
    let out = python_inline(&a, &py);
    assert!(out.contains("idle: ok"), "{out}");
    // The hop's session ended too (A closed it).
    wait_served(&b, 1);
    a.stop();
    b.stop();
}

/// Runs `code` with rpc_common's argv set for `server`.
fn python_inline(server: &ServerHandle, code: &str) -> String {
    let a = addr(server);
    let scripts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let out = Command::new(common::python())
        .arg("-c")
        .arg(code)
        .arg(a.ip().to_string())
        .arg(a.port().to_string())
        .arg(common::zoo())
        .env("PYTHONPATH", scripts)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "python failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// TVM's own Python server as the hop: Mote relays to it as TVM's server would.
#[test]
fn a_chain_to_tvms_own_server() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut tvm = Command::new(common::python())
        .args(["-m", "tvm.exec.rpc_server", "--host", "127.0.0.1"])
        .args(["--port", &port.to_string()])
        .args(["--port-end", &(port + 1).to_string()])
        .args(["--key", "x1"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("TVM's server starts");
    let stderr = tvm.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("tvm server: {line}");
            let _ = tx.send(line);
        }
    });
    let result = std::panic::catch_unwind(|| {
        let start = Instant::now();
        loop {
            match rx.recv_timeout(Duration::from_secs(1)) {
                Ok(l) if l.contains("bind to") => break,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("TVM's server exited before binding")
                }
                _ => assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "TVM's server did not bind within 60 s"
                ),
            }
        }
        let hop: SocketAddr = ([127, 0, 0, 1], port).into();
        let a = relay_to(&[hop]);
        let out = run_chain(&a, "mlp", &[(hop, "x1")]);
        assert!(out.contains("chain mlp: ok (1 hops)"), "{out}");
        a.stop();
        // TVM's server did the work: it loaded both uploads.
        std::thread::sleep(Duration::from_millis(500));
        let loads = rx.try_iter().filter(|l| l.contains("load_module")).count();
        assert_eq!(loads, 2, "TVM's server loaded {loads} modules");
    });
    let _ = tvm.kill();
    let _ = tvm.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
