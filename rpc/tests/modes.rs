//! Tracker and proxy modes against TVM's own tracker and proxy (the oracles), started from the
//! venv python named by `MOTE_PYTHON`. Every process is started here, on 127.0.0.1, in its own
//! process group, and killed here (the tracker forks a worker, hence the group).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use mote_rpc::proxy::{ProxyClient, ProxyConfig, SessionFn};
use mote_rpc::slots::Slots;
use mote_rpc::tracker::{TrackerClient, TrackerConfig};
use mote_rpc::wire::{CODE_MISMATCH, CODE_SUCCESS, RPC_MAGIC};
use serde_json::Value;

mod common;

fn python() -> String {
    std::env::var("MOTE_PYTHON").unwrap_or_else(|_| {
        panic!(
            "set MOTE_PYTHON to the TVM 0.27 venv python \
             (e.g. /root/.cache/mote/venv-4de63d3809f6/bin/python); these tests use TVM's own \
             tracker and proxy as oracles"
        )
    })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

fn log_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("mote-rpc-{}-{name}.log", std::process::id()))
}

/// A TVM python process in its own process group; killed (whole group) on drop.
struct Py {
    child: Child,
    log: PathBuf,
}

impl Py {
    fn spawn(args: &[&str], name: &str) -> Py {
        let log = log_path(name);
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = Command::new(python())
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run MOTE_PYTHON={}: {e}", python()));
        Py { child, log }
    }

    fn tracker(port: u16) -> Py {
        let (p, end) = (port.to_string(), (port + 1).to_string());
        let args = ["-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1"];
        Py::spawn(
            &[&args[..], &["--port", &p, "--port-end", &end]].concat(),
            "tracker",
        )
    }

    fn proxy(port: u16) -> Py {
        let (p, end) = (port.to_string(), (port + 1).to_string());
        let args = [
            "-m",
            "tvm.exec.rpc_proxy",
            "--host",
            "127.0.0.1",
            "--web-port",
            "0",
        ];
        Py::spawn(
            &[&args[..], &["--port", &p, "--port-end", &end]].concat(),
            "proxy",
        )
    }

    fn wait_listening(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{status}; see {}", self.log.display());
            }
            assert!(
                Instant::now() < deadline,
                "nothing listens on {port}; see {}",
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) takes no pointers; -pgid names the process group this test created
        // with process_group(0), whose leader is our child (not yet reaped, so the id is ours).
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `rpc/tests/tvm_oracle.py`: TVM's Python tracker client, one JSON answer per command.
struct Oracle {
    _py: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Oracle {
    fn start() -> Oracle {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tvm_oracle.py");
        let mut py = Command::new(python())
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run MOTE_PYTHON={}: {e}", python()));
        let stdin = py.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(py.stdout.take().expect("piped stdout"));
        let mut oracle = Oracle {
            _py: py,
            stdin,
            stdout,
        };
        assert_eq!(oracle.read_line()["ready"], true, "oracle did not start");
        oracle
    }

    fn read_line(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("oracle output");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("oracle said {line:?}: {e}"))
    }

    fn ask(&mut self, command: &str) -> Value {
        writeln!(self.stdin, "{command}").expect("oracle input");
        self.read_line()
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        // Closing stdin ends the helper's loop; kill it anyway in case it is stuck.
        let _ = self._py.kill();
        let _ = self._py.wait();
    }
}

fn until<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `free` of queue `key` in a TVM tracker summary, and whether `server:<key>` is listed with
/// address [127.0.0.1, port].
fn free_and_listed(summary: &Value, key: &str, port: u16) -> (Option<i64>, bool) {
    let free = summary["queue_info"][key]["free"].as_i64();
    let want = serde_json::json!({"key": format!("server:{key}"), "addr": ["127.0.0.1", port]});
    let listed = summary["server_info"]
        .as_array()
        .is_some_and(|servers| servers.contains(&want));
    (free, listed)
}

/// The accept path of a listener in tracker mode, as the core's server should wire it
/// (docs/rpc.md "Tracker mode"): read the client's handshake, claim the offer named by its first token,
/// answer SUCCESS + "server:<key>" or MISMATCH. The stand-in session echoes bytes while it
/// holds the slot. Runs until `stop` is set.
fn stand_in_listener(
    listener: TcpListener,
    slots: Slots,
    rpc_key: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let Ok((mut sock, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            sock.set_nonblocking(false).expect("blocking");
            sock.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            let mut word = [0u8; 4];
            if sock.read_exact(&mut word).is_err() || i32::from_le_bytes(word) != RPC_MAGIC {
                continue;
            }
            if sock.read_exact(&mut word).is_err() {
                continue;
            }
            let len = i32::from_le_bytes(word);
            if !(0..=4096).contains(&len) {
                continue;
            }
            let mut key = vec![0u8; len as usize];
            if sock.read_exact(&mut key).is_err() {
                continue;
            }
            let key = String::from_utf8_lossy(&key).into_owned();
            let first = key.split_whitespace().next().unwrap_or("");
            let slot = first
                .strip_prefix("client:")
                .and_then(|match_key| slots.claim_offer(match_key));
            let Some(slot) = slot else {
                let _ = sock.write_all(&CODE_MISMATCH.to_le_bytes());
                continue;
            };
            let server_key = format!("server:{rpc_key}");
            let mut reply = CODE_SUCCESS.to_le_bytes().to_vec();
            reply.extend_from_slice(&(server_key.len() as i32).to_le_bytes());
            reply.extend_from_slice(server_key.as_bytes());
            if sock.write_all(&reply).is_err() {
                continue;
            }
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = sock.read(&mut buf) {
                    if sock.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                drop(slot);
            });
        }
    })
}

#[test]
fn tracker_mode_against_tvm_tracker() {
    const KEY: &str = "motetest";
    let tracker_port = free_port();
    let server = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in listener");
    let server_port = server.local_addr().expect("addr").port();
    let tracker_addr = format!("127.0.0.1:{tracker_port}");
    let mut tracker = Py::tracker(tracker_port);
    let mut oracle = Oracle::start();
    tracker.wait_listening(tracker_port);
    let summary_cmd = format!("summary 127.0.0.1 {tracker_port}");
    let request_cmd = format!("request 127.0.0.1 {tracker_port} {KEY}");

    let slots = Slots::new(2);
    let mut cfg = TrackerConfig::new(tracker_addr, KEY, server_port);
    cfg.poll_interval = Duration::from_millis(300);
    cfg.renew_after_polls = 3;
    cfg.backoff_initial = Duration::from_millis(200);
    cfg.backoff_max = Duration::from_secs(1);
    let client = TrackerClient::start(cfg, slots.clone()).expect("start tracker client");
    let listener_stop = Arc::new(AtomicBool::new(false));
    let listener = stand_in_listener(server, slots.clone(), KEY, Arc::clone(&listener_stop));

    // (a) Registration: TVM's TrackerSession.summary() lists us with free = max_sessions.
    until(10, "summary lists server:motetest with free 2", || {
        let s = oracle.ask(&summary_cmd);
        (free_and_listed(&s, KEY, server_port) == (Some(2), true)).then_some(())
    });
    let st = client.state();
    assert!(st.connected);
    assert_eq!(st.registered.len(), 2);
    assert_eq!(st.registrations, 1);

    // (b) REQUEST hands out one of our match keys; it claims exactly once.
    let reply = oracle.ask(&request_cmd);
    assert_eq!(reply[0], 0, "REQUEST reply {reply}");
    assert_eq!(reply[1][0], "127.0.0.1", "{reply}");
    assert_eq!(reply[1][1], server_port, "{reply}");
    let mk = reply[1][2].as_str().expect("match key").to_owned();
    assert!(
        st.registered.contains(&mk),
        "{mk} not among {:?}",
        st.registered
    );
    let slot = slots
        .claim_offer(&mk)
        .expect("tracker-issued key claims a slot");
    assert!(
        slots.claim_offer(&mk).is_none(),
        "a claimed key claimed again"
    );
    let s = oracle.ask(&summary_cmd);
    assert_eq!(
        free_and_listed(&s, KEY, server_port),
        (Some(1), true),
        "{s}"
    );
    assert!(!slots.offers().contains(&mk));

    // (c) The session ends: the slot is offered again under a new key.
    drop(slot);
    until(5, "free back to 2 after the session", || {
        let s = oracle.ask(&summary_cmd);
        (free_and_listed(&s, KEY, server_port).0 == Some(2)).then_some(())
    });
    let offers = slots.offers();
    assert_eq!(offers.len(), 2);
    assert!(!offers.contains(&mk));

    // The whole client path as TVM's TrackerSession.request takes it: REQUEST, then the
    // handshake "client:<matchkey> -timeout=30" with the listener the tracker named.
    let got = oracle.ask(&format!("via_tracker 127.0.0.1 {tracker_port} {KEY}"));
    assert_eq!(got["code"], 0, "{got}");
    assert_eq!(got["server_key"], format!("server:{KEY}"), "{got}");
    assert_eq!(got["echo"], "ping", "{got}");
    let used = got["matchkey"].as_str().expect("match key").to_owned();
    // A used key never works again, even after its session ended.
    let again = oracle.ask(&format!(
        "handshake 127.0.0.1 {server_port} client:{used} -timeout=30"
    ));
    assert_eq!(again["code"], 2, "reuse of {used} was not refused: {again}");
    until(5, "free back to 2 after the tracker-routed session", || {
        let s = oracle.ask(&summary_cmd);
        (free_and_listed(&s, KEY, server_port).0 == Some(2)).then_some(())
    });

    // Renewal: a key handed out but never used is withdrawn and replaced after a few polls.
    let reply = oracle.ask(&request_cmd);
    let unused = reply[1][2].as_str().expect("match key").to_owned();
    let s = oracle.ask(&summary_cmd);
    assert_eq!(free_and_listed(&s, KEY, server_port).0, Some(1), "{s}");
    until(5, "unused key renewed", || {
        let s = oracle.ask(&summary_cmd);
        (!slots.has_offer(&unused) && free_and_listed(&s, KEY, server_port).0 == Some(2))
            .then_some(())
    });
    assert!(
        slots.claim_offer(&unused).is_none(),
        "withdrawn key still valid"
    );

    // (d) The tracker dies and comes back on the same port: we register again.
    tracker.kill();
    until(5, "client notices the tracker is gone", || {
        (!client.state().connected).then_some(())
    });
    assert!(slots.offers().is_empty(), "offers of a dead tracker kept");
    let mut tracker = Py::tracker(tracker_port);
    tracker.wait_listening(tracker_port);
    until(10, "re-registered with the restarted tracker", || {
        let s = oracle.ask(&summary_cmd);
        (free_and_listed(&s, KEY, server_port) == (Some(2), true)).then_some(())
    });
    assert!(client.state().registrations >= 2);

    // Stop is prompt, and closing the connection withdraws our offers at the tracker.
    let t = Instant::now();
    client.stop();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(1), "stop took {took:?}");
    until(5, "offers gone from the tracker after stop", || {
        let s = oracle.ask(&summary_cmd);
        (free_and_listed(&s, KEY, server_port) == (Some(0), false)).then_some(())
    });
    listener_stop.store(true, Ordering::SeqCst);
    listener.join().expect("stand-in listener");
    drop(tracker);
}

/// Handshake as TVM's client does (docs/rpc.md "Handshake"): magic, key length, key; returns
/// the reply code and the key the proxy forwarded from the server.
fn client_handshake(proxy_port: u16, key: &str) -> (TcpStream, i32, String) {
    let mut sock = TcpStream::connect(("127.0.0.1", proxy_port)).expect("connect proxy");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut hello = RPC_MAGIC.to_le_bytes().to_vec();
    hello.extend_from_slice(&(key.len() as i32).to_le_bytes());
    hello.extend_from_slice(key.as_bytes());
    sock.write_all(&hello).expect("send handshake");
    let mut word = [0u8; 4];
    sock.read_exact(&mut word).expect("reply code");
    let code = i32::from_le_bytes(word);
    sock.read_exact(&mut word).expect("key length");
    let mut server_key = vec![0u8; i32::from_le_bytes(word) as usize];
    sock.read_exact(&mut server_key).expect("key");
    (
        sock,
        code,
        String::from_utf8(server_key).expect("utf-8 key"),
    )
}

fn echo_round_trip(sock: &mut TcpStream, payload: &[u8]) {
    sock.write_all(payload).expect("send payload");
    let mut back = vec![0u8; payload.len()];
    sock.read_exact(&mut back).expect("echo");
    assert_eq!(back, payload);
}

#[test]
fn proxy_mode_against_tvm_proxy() {
    let proxy_port = free_port();
    let mut proxy = Py::proxy(proxy_port);
    proxy.wait_listening(proxy_port);

    // Stand-in session: reports the client key it was given, then echoes until EOF.
    let (keys_tx, keys_rx) = mpsc::channel::<String>();
    let keys_tx = std::sync::Mutex::new(keys_tx);
    let session: SessionFn = Arc::new(move |mut sock, client_key, slot| {
        let _ = keys_tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(client_key);
        let mut buf = [0u8; 4096];
        loop {
            match sock.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if sock.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        drop(slot);
    });

    let slots = Slots::new(1);
    let mut cfg = ProxyConfig::new(format!("127.0.0.1:{proxy_port}"), "dev1");
    cfg.backoff_initial = Duration::from_millis(200);
    cfg.backoff_max = Duration::from_secs(1);
    let client = ProxyClient::start(cfg, slots.clone(), session).expect("start proxy client");
    until(10, "server waiting at the proxy", || {
        client.state().waiting.then_some(())
    });

    // First session: paired, the server's key comes back, bytes round-trip.
    let (mut c1, code, server_key) = client_handshake(proxy_port, "client:dev1 -timeout=30");
    assert_eq!(code, CODE_SUCCESS);
    assert_eq!(server_key, "server:dev1");
    echo_round_trip(&mut c1, b"first session bytes");
    let got = keys_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("session started");
    assert_eq!(
        got, "client:dev1 -timeout=30",
        "options must reach the session"
    );
    // Capacity 1 is in use: nobody waits at the proxy meanwhile.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(slots.in_use(), 1);
    assert!(
        !client.state().waiting,
        "waiting at the proxy beyond capacity"
    );
    drop(c1);

    // The slot comes back and a second session works.
    let (mut c2, code, server_key) = client_handshake(proxy_port, "client:dev1");
    assert_eq!(code, CODE_SUCCESS);
    assert_eq!(server_key, "server:dev1");
    echo_round_trip(&mut c2, b"second");
    assert_eq!(
        keys_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("second session"),
        "client:dev1"
    );
    assert_eq!(client.state().sessions, 2);
    drop(c2);

    until(5, "slot free after the second session", || {
        client.state().waiting.then_some(())
    });
    let t = Instant::now();
    client.stop();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(1), "stop took {took:?}");
    assert_eq!(slots.in_use(), 0);
    drop(proxy);
}

/// `rpc/tests/python/modes_client.py` against a tracker or proxy at `port`; panics with its
/// output unless it exits 0.
fn modes_client(port: u16, mode: &str, key: &str, rounds: u32) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python");
    let out = Command::new(python())
        .arg(format!("{dir}/modes_client.py"))
        .args(["127.0.0.1", &port.to_string()])
        .arg(common::zoo())
        .args([mode, key, &rounds.to_string()])
        .env("PYTHONPATH", dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run MOTE_PYTHON={}: {e}", python()));
    assert!(
        out.status.success(),
        "modes_client.py {mode} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Mote's real server in tracker mode, TVM's real tracker and client: registration (summary
/// and query_rpc_tracker list it), request(key) runs a model, the place is free again after
/// each session, and a tracker restart on the same port is survived.
#[test]
fn tvm_client_reaches_mote_through_the_tracker_and_a_restart() {
    common::init_log();
    let port = free_port();
    let mut tracker = Py::tracker(port);
    tracker.wait_listening(port);
    let server = mote_rpc::Server::builder()
        .port(0)
        .key("e2e")
        .max_sessions(1)
        .session_threads(1)
        .tracker(format!("127.0.0.1:{port}"), None)
        .spawn()
        .expect("server starts");
    modes_client(port, "tracker", "e2e", 2);
    until(10, "2 sessions served", || {
        (server.stats().served == 2).then_some(())
    });

    tracker.kill();
    let mut tracker = Py::tracker(port);
    tracker.wait_listening(port);
    modes_client(port, "tracker", "e2e", 1);
    let st = server.tracker_state().expect("tracker mode");
    assert!(st.registrations >= 2, "{st:?}");
    until(10, "3 sessions served", || {
        (server.stats().served == 3).then_some(())
    });
    server.stop();
}

/// Mote's real server behind TVM's proxy (listening nowhere) serves TVM's client twice.
#[test]
fn tvm_client_reaches_mote_through_the_proxy() {
    common::init_log();
    let port = free_port();
    let mut proxy = Py::proxy(port);
    proxy.wait_listening(port);
    let server = mote_rpc::Server::builder()
        .key("dev9")
        .max_sessions(1)
        .session_threads(1)
        .through_proxy(format!("127.0.0.1:{port}"))
        .spawn()
        .expect("server starts");
    assert!(server.local_addr().is_none());
    modes_client(port, "proxy", "dev9", 2);
    // The client's last close reaches the server a moment after the client exits.
    until(10, "2 sessions served", || {
        (server.stats().served == 2).then_some(())
    });
    assert_eq!(server.proxy_state().expect("proxy mode").sessions, 2);
    server.stop();
}

/// In tracker mode the server offers the tracker as many places as it serves at once: one by
/// default, as TVM's server does, `max_sessions` when given; TVM's tracker summary counts them,
/// and the one place is offered again after a session.
#[test]
fn tracker_mode_offers_one_place_by_default() {
    common::init_log();
    let port = free_port();
    let mut tracker = Py::tracker(port);
    tracker.wait_listening(port);
    let mut oracle = Oracle::start();
    let summary_cmd = format!("summary 127.0.0.1 {port}");
    let one = mote_rpc::Server::builder()
        .port(0)
        .key("one")
        .tracker(format!("127.0.0.1:{port}"), None)
        .spawn()
        .expect("server starts");
    let three = mote_rpc::Server::builder()
        .port(0)
        .key("three")
        .max_sessions(3)
        .tracker(format!("127.0.0.1:{port}"), None)
        .spawn()
        .expect("server starts");
    let one_port = one.local_addr().expect("listens").port();
    let three_port = three.local_addr().expect("listens").port();
    until(10, "summary: one with 1 free place, three with 3", || {
        let s = oracle.ask(&summary_cmd);
        (free_and_listed(&s, "one", one_port) == (Some(1), true)
            && free_and_listed(&s, "three", three_port) == (Some(3), true))
            .then_some(())
    });
    // A whole client through the tracker takes the one place and gives it back.
    modes_client(port, "tracker", "one", 1);
    until(10, "the place is offered again", || {
        let s = oracle.ask(&summary_cmd);
        (one.stats().served == 1 && free_and_listed(&s, "one", one_port) == (Some(1), true))
            .then_some(())
    });
    assert_eq!(
        one.tracker_state().expect("tracker mode").registered.len(),
        1
    );
    one.stop();
    three.stop();
}
