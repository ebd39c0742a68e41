//! `mote_rpc::Client` (docs/rpc.md "Client") against two servers: Mote's, in-process, and TVM
//! 0.27's own Python server (`python -m tvm.exec.rpc_server`) as the independent oracle; and
//! through TVM's proxy with a key, as tvm4j's proxy test connects. Results are checked against
//! the zoo's expected outputs, which TVM computed. Needs MOTE_PYTHON and MOTE_ZOO_DIR
//! (scripts/test-rpc.sh).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{python, server, zoo};
use mote_rpc::wire::{Arg, Device, WireDType};
use mote_rpc::{Client, ClientError, ClientOptions, Server, Value};

const F32: WireDType = WireDType {
    code: 2,
    bits: 32,
    lanes: 1,
};

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A TVM Python process (server or proxy) in its own process group, killed on drop.
struct Py(Child, PathBuf);

impl Py {
    fn spawn(args: &[&str], port: u16, name: &str) -> Py {
        let log = std::env::temp_dir().join(format!(
            "mote-rust-client-{}-{name}.log",
            std::process::id()
        ));
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let (p, end) = (port.to_string(), (port + 1).to_string());
        let child = Command::new(python())
            .args(args)
            .args(["--host", "127.0.0.1", "--port", &p, "--port-end", &end])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run MOTE_PYTHON={}: {e}", python()));
        let mut py = Py(child, log);
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = py.0.try_wait() {
                panic!("{name}: {status}; see {}", py.1.display());
            }
            assert!(
                Instant::now() < deadline,
                "{name} never listened; see {}",
                py.1.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        py
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let pgid = self.0.id() as libc::pid_t;
        // SAFETY: kill(2) takes no pointers; -pgid is the process group this test created with
        // process_group(0), led by our child (not yet reaped, so the id is still ours).
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.0.wait();
        // The log is kept for a failing test to point at; a passing one leaves nothing behind.
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.1);
        }
    }
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn npz(name: &str) -> Vec<(Vec<i64>, Vec<u8>)> {
    mote::npy::read_npz(zoo().join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .into_iter()
        .map(|(_, t)| (t.shape().to_vec(), t.data().to_vec()))
        .collect()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-5 * w.abs(),
            "{what}: element {i} is {g}, TVM computed {w}"
        );
    }
}

/// The flow every server must pass: files, a Relax model through the VM's functions, a
/// kernel-only library writing into client memory, errors, and the end of the session.
fn flow(c: &Client, who: &str) {
    assert!(
        c.get_function("no.such.function").unwrap().is_none(),
        "{who}"
    );
    assert!(c.device_exists(Device::CPU).unwrap(), "{who}: cpu(0)");

    // Files.
    let so = std::fs::read(zoo().join("mlp.so")).expect("mlp.so");
    c.upload("m.so", &so).unwrap();
    assert_eq!(c.download("m.so").unwrap(), so, "{who}: download");
    match c.download("no-such-file.bin") {
        Err(ClientError::Remote(m)) => assert!(m.contains("no-such-file.bin"), "{who}: {m}"),
        other => panic!("{who}: download of a missing file gave {other:?}"),
    }

    // A Relax model, as relax.VirtualMachine drives it.
    let lib = c.load_module("m.so").unwrap();
    let load = c
        .module_function(&lib, "vm_load_executable", false)
        .unwrap()
        .expect("vm_load_executable");
    let vm = match c.call(&load, &[]).unwrap() {
        Value::Module(m) => m,
        v => panic!("{who}: vm_load_executable gave {v:?}"),
    };
    let init = c
        .module_function(&vm, "vm_initialization", false)
        .unwrap()
        .expect("vm_initialization");
    // cpu(0) with the pooled allocator (2), as relax.VirtualMachine(lib, remote.cpu()) sends.
    c.call(&init, &[Arg::Int(1), Arg::Int(0), Arg::Int(2)])
        .unwrap();
    let forward = c
        .module_function(&vm, "forward", false)
        .unwrap()
        .expect("forward");
    assert!(c
        .module_function(&vm, "no_such_function", false)
        .unwrap()
        .is_none());
    let inputs: Vec<_> = npz("mlp.forward.inputs.npz")
        .into_iter()
        .map(|(shape, bytes)| {
            let t = c.empty(&shape, F32, Device::CPU).unwrap();
            c.copy_to(t.record(), &bytes).unwrap();
            assert_eq!(c.copy_from(t.record()).unwrap(), bytes, "{who}: round trip");
            t
        })
        .collect();
    let (_, want) = npz("mlp.forward.expected.npz").remove(0);
    let args: Vec<Arg> = inputs.iter().map(|t| t.as_arg()).collect();
    for round in 0..2 {
        let out = match c.call(&forward, &args).unwrap() {
            Value::Tensor(record, keep) => {
                assert_eq!(record.shape, vec![2, 8], "{who}");
                let b = c.copy_from(&record).unwrap();
                drop(keep);
                b
            }
            v => panic!("{who}: forward gave {v:?}"),
        };
        assert_close(
            &f32s(&out),
            &f32s(&want),
            &format!("{who}: mlp forward, round {round}"),
        );
    }
    // A wrong call is the server's error; the session goes on.
    match c.call(&forward, &args[..2]) {
        Err(ClientError::Remote(_)) => {}
        other => panic!("{who}: a call with 2 of 5 arguments gave {other:?}"),
    }

    // A kernel-only library writes its output into client memory (docs/rpc.md "Modules").
    let k = std::fs::read(zoo().join("kernels.so")).expect("kernels.so");
    c.upload("k.so", &k).unwrap();
    let klib = c.load_module("k.so").unwrap();
    let gemm = c
        .module_function(&klib, "gemm", false)
        .unwrap()
        .expect("gemm");
    let ins = npz("kernels.gemm.inputs.npz");
    let tensors: Vec<_> = ins
        .iter()
        .map(|(shape, bytes)| {
            let t = c.empty(shape, F32, Device::CPU).unwrap();
            // The output (arg2) is poisoned, so the result must come from the kernel.
            let fill = if shape == &ins[2].0 {
                vec![0xFFu8; bytes.len()]
            } else {
                bytes.clone()
            };
            c.copy_to(t.record(), &fill).unwrap();
            t
        })
        .collect();
    let args: Vec<Arg> = tensors.iter().map(|t| t.as_arg()).collect();
    assert!(
        matches!(c.call(&gemm, &args).unwrap(), Value::None),
        "{who}"
    );
    let (_, want) = npz("kernels.gemm.expected.npz").remove(0);
    assert_close(
        &f32s(&c.copy_from(tensors[2].record()).unwrap()),
        &f32s(&want),
        &format!("{who}: gemm"),
    );

    // Argument checks happen before anything is sent.
    assert!(matches!(
        c.copy_to(tensors[0].record(), &[0u8; 3]),
        Err(ClientError::Argument(_))
    ));

    // The session ends; handles dropped afterwards free nothing and do not fail.
    let still = c.clone();
    c.close();
    assert!(!still.is_open());
    assert!(matches!(
        still.get_function("tvm.rpc.server.upload"),
        Err(ClientError::Closed)
    ));
    drop((gemm, klib, forward, vm, lib, tensors, inputs));
}

#[test]
fn mote_server() {
    let s = server();
    let port = s.local_addr().expect("listening").port();
    let c = Client::connect("127.0.0.1", port, "", &ClientOptions::default()).unwrap();
    assert_eq!(c.peer(), format!("127.0.0.1:{port}"));
    flow(&c, "Mote's server");
    s.stop();
}

#[test]
fn tvm_server() {
    let port = free_port();
    let _py = Py::spawn(&["-m", "tvm.exec.rpc_server"], port, "server");
    let c = Client::connect("127.0.0.1", port, "", &ClientOptions::default()).unwrap();
    flow(&c, "TVM's server");
}

/// tvm4j's proxy flow: a server registers with TVM's proxy under a key, the client connects to
/// the proxy with that key.
#[test]
fn through_tvm_proxy_with_a_key() {
    let port = free_port();
    let _proxy = Py::spawn(
        &["-m", "tvm.exec.rpc_proxy", "--web-port", "0"],
        port,
        "proxy",
    );
    let s = Server::builder()
        .key("x1")
        .through_proxy(format!("127.0.0.1:{port}"))
        .spawn()
        .expect("server in proxy mode");
    // The server registers with the proxy in the background: retry until it is there.
    let deadline = Instant::now() + Duration::from_secs(20);
    let c = loop {
        match Client::connect("127.0.0.1", port, "x1", &ClientOptions::default()) {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("{e}"),
        }
    };
    let data = b"through the proxy".to_vec();
    c.upload("p.bin", &data).unwrap();
    assert_eq!(c.download("p.bin").unwrap(), data);
    c.close();
    s.stop();
}

#[test]
fn connection_failures_are_typed() {
    let s = server();
    let port = s.local_addr().expect("listening").port();
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(3),
        ..ClientOptions::default()
    };
    let keyed = Server::builder()
        .port(0)
        .key("phone")
        .spawn()
        .expect("server");
    let kport = keyed.local_addr().expect("listening").port();
    match Client::connect("127.0.0.1", kport, "other", &opts) {
        Err(ClientError::Connect { why, .. }) => assert!(why.contains("key"), "{why}"),
        other => panic!("a wrong key gave {other:?}"),
    }
    assert!(Client::connect("127.0.0.1", kport, "phone", &opts).is_ok());
    let closed = free_port();
    assert!(matches!(
        Client::connect("127.0.0.1", closed, "", &opts),
        Err(ClientError::Connect { .. })
    ));
    assert!(matches!(
        Client::connect("127.0.0.1", port, &"k".repeat(5000), &opts),
        Err(ClientError::Argument(_))
    ));
    keyed.stop();
    s.stop();
}

/// A peer that answers the handshake and then sends `after` to every request.
fn hostile(after: Vec<u8>) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        let mut buf = [0u8; 12];
        s.read_exact(&mut buf[..8]).expect("magic, key length");
        let len = i32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
        let mut key = vec![0u8; len];
        s.read_exact(&mut key).expect("key");
        let mut hello = Vec::new();
        hello.extend_from_slice(&0xFF271i32.to_le_bytes());
        hello.extend_from_slice(&7i32.to_le_bytes());
        hello.extend_from_slice(b"server:");
        s.write_all(&hello).expect("hello");
        // kInitServer: answer [None] properly.
        let mut len = [0u8; 8];
        s.read_exact(&mut len).expect("init length");
        let mut body = vec![0u8; u64::from_le_bytes(len) as usize];
        s.read_exact(&mut body).expect("init");
        let ok = mote_rpc::wire::return_frame(&[Arg::None]);
        s.write_all(&ok).expect("init answer");
        // The next request gets `after`.
        if s.read_exact(&mut len).is_ok() {
            let mut body = vec![0u8; u64::from_le_bytes(len) as usize];
            let _ = s.read_exact(&mut body);
            let _ = s.write_all(&after);
        }
        let _ = s.flush();
        std::thread::sleep(Duration::from_millis(200));
    });
    (port, t)
}

#[test]
fn a_hostile_server_gives_typed_errors_and_closes_the_session() {
    let mut garbage = Vec::new();
    garbage.extend_from_slice(&12u64.to_le_bytes());
    garbage.extend_from_slice(&4i32.to_le_bytes());
    garbage.extend_from_slice(&(-5i32).to_le_bytes()); // a negative count
    garbage.extend_from_slice(&[0u8; 4]);
    let huge = u64::MAX.to_le_bytes().to_vec();
    let mut wrong_code = Vec::new();
    wrong_code.extend_from_slice(&4u64.to_le_bytes());
    wrong_code.extend_from_slice(&3i32.to_le_bytes()); // kCallFunc from the server
    for (what, after) in [
        ("garbage", garbage),
        ("a huge packet", huge),
        ("a request", wrong_code),
        ("a close", Vec::new()),
    ] {
        let (port, t) = hostile(after);
        let c = Client::connect("127.0.0.1", port, "", &ClientOptions::default()).unwrap();
        match c.get_function("x") {
            Err(ClientError::Protocol(m)) => eprintln!("{what}: {m}"),
            other => panic!("{what}: {other:?}"),
        }
        assert!(!c.is_open(), "{what}: the session must be closed");
        assert!(
            matches!(c.get_function("x"), Err(ClientError::Closed)),
            "{what}"
        );
        t.join().expect("peer thread");
    }
}

/// One session shared by threads: requests are serialised, so every answer reaches the thread
/// that asked. Each thread's files hold its own bytes, and handles looked up and dropped
/// concurrently are freed once each (the server's handle limit would refuse leaked ones).
#[test]
fn one_session_shared_by_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Client>();
    assert_send_sync::<mote_rpc::RemoteRef>();
    assert_send_sync::<mote_rpc::RemoteTensor>();
    let s = Server::builder()
        .port(0)
        .limits(mote_rpc::Limits {
            max_handles: 16,
            ..mote_rpc::Limits::default()
        })
        .spawn()
        .expect("server");
    let port = s.local_addr().expect("listening").port();
    let c = Client::connect("127.0.0.1", port, "", &ClientOptions::default()).unwrap();
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let c = c.clone();
            std::thread::spawn(move || {
                for i in 0..50u8 {
                    let name = format!("t{t}.bin");
                    let data = vec![t.wrapping_mul(31).wrapping_add(i); 1000 + usize::from(i)];
                    c.upload(&name, &data).unwrap();
                    assert_eq!(c.download(&name).unwrap(), data, "thread {t}, round {i}");
                    let f = c
                        .get_function("tvm.rpc.server.remove")
                        .unwrap()
                        .expect("remove");
                    c.call(&f, &[Arg::RawStr(name)]).unwrap();
                    let x = c.empty(&[4], F32, Device::CPU).unwrap();
                    let bytes: Vec<u8> = (0..16).map(|k| k ^ t ^ i).collect();
                    c.copy_to(x.record(), &bytes).unwrap();
                    assert_eq!(c.copy_from(x.record()).unwrap(), bytes);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    // Nothing leaked: 16 handles can still be held at once.
    let held: Vec<_> = (0..16)
        .map(|_| {
            c.get_function("tvm.rpc.server.upload")
                .unwrap()
                .expect("upload")
        })
        .collect();
    drop(held);
    c.close();
    s.stop();
}
