//! `mote rpc serve`, run as a user would: it answers TVM's handshake and stops cleanly on
//! SIGINT, removing its sandbox folder.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn serve_answers_the_handshake_and_stops_on_sigint() {
    let sandbox = std::env::temp_dir().join(format!("mote-cli-rpc-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(["rpc", "serve", "--port", "0", "--key", "k", "--sandbox"])
        .arg(&sandbox)
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mote");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut addr = None;
    let mut line = String::new();
    while addr.is_none() && err.read_line(&mut line).expect("read") > 0 {
        if let Some(rest) = line.strip_prefix("mote rpc: listening on ") {
            addr = rest.split_whitespace().next().map(str::to_owned);
        }
        line.clear();
    }
    let addr = addr.expect("the listening address is printed");

    // TVM's handshake: magic, key length, "client:k" -> magic, length, "server:k".
    let mut c = TcpStream::connect(&addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = 0xFF271i32.to_le_bytes().to_vec();
    hello.extend_from_slice(&8i32.to_le_bytes());
    hello.extend_from_slice(b"client:k");
    c.write_all(&hello).unwrap();
    let mut reply = [0u8; 16];
    c.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[..4], &0xFF271i32.to_le_bytes());
    assert_eq!(&reply[8..], b"server:k");
    drop(c);

    let t = Instant::now();
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let mut log = String::new();
    err.read_to_string(&mut log).unwrap();
    assert!(log.contains("connected with key \"client:k\""), "{log}");
    assert!(log.contains("RPC server stopped"), "{log}");
    // The root was given, so it stays; the session's own folder is gone.
    assert_eq!(std::fs::read_dir(&sandbox).unwrap().count(), 0);
    std::fs::remove_dir_all(&sandbox).unwrap();
}

/// Contradictory or incomplete mode flags are refused by the parser (exit 2), before anything
/// listens or connects.
#[test]
fn mode_flags_that_contradict_are_refused() {
    for args in [
        &["--tracker", "127.0.0.1:1", "--through-proxy", "127.0.0.1:2"][..],
        &["--custom-addr", "10.0.0.1"][..],
        &["--tracker"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_mote"))
            .args(["rpc", "serve", "--port", "0"])
            .args(args)
            .output()
            .expect("run mote");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--tracker") || err.contains("--custom-addr"),
            "{args:?}: {err}"
        );
    }
}

/// `--through-proxy` listens nowhere and says so; an unreachable proxy is retried (logged), not
/// fatal, and SIGINT still stops it.
#[test]
fn through_proxy_listens_nowhere_and_stops_on_sigint() {
    // A port nothing listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind")
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(["rpc", "serve", "--key", "p", "--through-proxy"])
        .arg(format!("127.0.0.1:{port}"))
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mote");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    let mut line = String::new();
    while err.read_line(&mut line).expect("read") > 0 {
        seen.push_str(&line);
        if line.starts_with("mote rpc: serving through the proxy") {
            break;
        }
        line.clear();
    }
    assert!(seen.contains("serving through the proxy"), "{seen}");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "mote did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `mote rpc serve` of a test; killed if the test fails before [`sigint_and_log`].
struct Serving(Option<std::process::Child>);

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `mote rpc serve --port 0` with `args`; returns the child, its stderr and its address.
fn serve(args: &[&str]) -> (Serving, BufReader<std::process::ChildStderr>, String) {
    let mut s = Serving(Some(
        Command::new(env!("CARGO_BIN_EXE_mote"))
            .args(["rpc", "serve", "--port", "0"])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("run mote"),
    ));
    let stderr = s.0.as_mut().and_then(|c| c.stderr.take());
    let mut err = BufReader::new(stderr.expect("stderr"));
    let mut line = String::new();
    while err.read_line(&mut line).expect("read") > 0 {
        if let Some(rest) = line.strip_prefix("mote rpc: listening on ") {
            let addr = rest.split_whitespace().next().expect("address").to_owned();
            return (s, err, addr);
        }
        line.clear();
    }
    panic!("no listening address printed");
}

/// A packet: `u64 len`, `i32 code`, body.
fn packet(code: i32, body: &[u8]) -> Vec<u8> {
    let mut out = (4 + body.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// kInitServer (code 2) with the session constructor `rpc.Connect` to `host:port`, key `key`.
fn init_connect(host: &str, port: u16, key: &str) -> Vec<u8> {
    let ver = b"0.8.0";
    let mut body = (ver.len() as u64).to_le_bytes().to_vec();
    body.extend_from_slice(ver);
    body.extend_from_slice(&5i32.to_le_bytes());
    for s in ["rpc.Connect", host] {
        body.extend_from_slice(&8i32.to_le_bytes());
        body.extend_from_slice(&(s.len() as u64).to_le_bytes());
        body.extend_from_slice(s.as_bytes());
    }
    body.extend_from_slice(&1i32.to_le_bytes());
    body.extend_from_slice(&i64::from(port).to_le_bytes());
    body.extend_from_slice(&8i32.to_le_bytes());
    body.extend_from_slice(&(key.len() as u64).to_le_bytes());
    body.extend_from_slice(key.as_bytes());
    body.extend_from_slice(&2i32.to_le_bytes());
    body.extend_from_slice(&0i64.to_le_bytes());
    packet(2, &body)
}

/// Connects to `addr` with key "client:" and sends `init`; returns the answer's code and body.
fn init_session(addr: &str, init: &[u8]) -> (i32, Vec<u8>) {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut hello = 0xFF271i32.to_le_bytes().to_vec();
    hello.extend_from_slice(&7i32.to_le_bytes());
    hello.extend_from_slice(b"client:");
    c.write_all(&hello).unwrap();
    let mut reply = [0u8; 15];
    c.read_exact(&mut reply).unwrap();
    c.write_all(init).unwrap();
    let mut len = [0u8; 8];
    c.read_exact(&mut len).unwrap();
    let mut p = vec![0u8; u64::from_le_bytes(len) as usize];
    c.read_exact(&mut p).unwrap();
    // kShutdown ends the session (relayed to the hop when chained).
    c.write_all(&packet(1, &[])).unwrap();
    let code = i32::from_le_bytes(p[..4].try_into().unwrap());
    (code, p[4..].to_vec())
}

fn sigint_and_log(mut s: Serving, mut err: BufReader<std::process::ChildStderr>) -> String {
    let mut child = s.0.take().expect("running");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    assert!(child.wait().expect("wait").success());
    let mut log = String::new();
    err.read_to_string(&mut log).unwrap();
    log
}

/// `--allow-hop` lets a client chain a session to that server (TVM's `rpc.Connect` session
/// constructor), and only to it; a malformed value stops the server at start.
#[test]
fn allow_hop_lets_a_session_chain_there_and_only_there() {
    let (b, b_err, b_addr) = serve(&["--key", "b"]);
    let (a, a_err, a_addr) = serve(&["--allow-hop", &b_addr]);
    let (host, port) = b_addr.rsplit_once(':').unwrap();
    let port: u16 = port.parse().unwrap();

    // Chained: kReturn (4), and B serves a session with key "client:b".
    let (code, body) = init_session(&a_addr, &init_connect(host, port, "b"));
    assert_eq!(code, 4, "{}", String::from_utf8_lossy(&body));
    // Not allowed (another port): kException (5) naming the option.
    let (code, body) = init_session(&a_addr, &init_connect(host, port.wrapping_add(1), "b"));
    assert_eq!(code, 5);
    let msg = String::from_utf8_lossy(&body);
    assert!(msg.contains("--allow-hop"), "{msg}");

    std::thread::sleep(Duration::from_millis(300));
    let a_log = sigint_and_log(a, a_err);
    let b_log = sigint_and_log(b, b_err);
    assert!(a_log.contains(&format!("chained to {b_addr}")), "{a_log}");
    assert_eq!(
        b_log.matches("connected with key \"client:b\"").count(),
        1,
        "{b_log}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(["rpc", "serve", "--port", "0", "--allow-hop", "no-port"])
        .output()
        .expect("run mote");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("HOST:PORT"), "{err}");
}
