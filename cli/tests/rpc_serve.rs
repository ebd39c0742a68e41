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
