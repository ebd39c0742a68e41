//! A hand-written peer speaking the wire format directly: handshake answers, request errors
//! that leave the session usable, the memory table's checks, limits, refusals and timeouts.

use std::io::Read;
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};

use mote_rpc::wire::{self, Arg, Device, Packet, Put, RpcCode, WireDType, WireTensor};
use mote_rpc::{Limits, Server, ServerHandle};

fn connect(s: &ServerHandle, key: &str) -> TcpStream {
    let c = TcpStream::connect(s.local_addr()).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    wire::write_handshake(&mut &c, key).unwrap();
    c
}

/// Connects with the right key and initialises the session.
fn session(s: &ServerHandle) -> TcpStream {
    let c = connect(s, "client:");
    let mut b = [0u8; 4];
    (&c).read_exact(&mut b).unwrap();
    assert_eq!(i32::from_le_bytes(b), wire::CODE_SUCCESS);
    (&c).read_exact(&mut b).unwrap();
    let mut key = vec![0u8; i32::from_le_bytes(b) as usize];
    (&c).read_exact(&mut key).unwrap();
    assert_eq!(key, b"server:");
    let mut body = Vec::new();
    body.put_bytes(b"0.8.0");
    body.put_i32(0);
    assert_eq!(request(&c, RpcCode::InitServer, &body), ok(vec![Arg::None]));
    c
}

fn request(c: &TcpStream, code: RpcCode, body: &[u8]) -> Packet {
    wire::write_packet(&mut &*c, code, body).unwrap();
    wire::read_packet(&mut &*c, 1 << 30).unwrap()
}

fn syscall(c: &TcpStream, code: RpcCode, args: &[Arg]) -> Packet {
    request(c, code, &wire::encode_seq(args))
}

fn ok(args: Vec<Arg>) -> Packet {
    Packet {
        code: RpcCode::Return as i32,
        body: wire::encode_seq(&args),
    }
}

fn exception_text(p: &Packet) -> String {
    assert_eq!(p.rpc_code(), Some(RpcCode::Exception), "{p:?}");
    match wire::decode_seq(&p.body).unwrap().as_slice() {
        [Arg::RawStr(s)] => s.clone(),
        other => panic!("{other:?}"),
    }
}

fn f32_tensor(data: u64, n: i64, offset: u64) -> WireTensor {
    WireTensor {
        data,
        device: Device::CPU,
        dtype: WireDType {
            code: 2,
            bits: 32,
            lanes: 1,
        },
        shape: vec![n],
        byte_offset: offset,
    }
}

fn alloc(c: &TcpStream, n: i64) -> Result<u64, String> {
    let p = syscall(
        c,
        RpcCode::DevAllocDataWithScope,
        &[Arg::Tensor(f32_tensor(0, n, 0)), Arg::None],
    );
    match wire::decode_seq(&p.body).unwrap().as_slice() {
        [Arg::OpaquePtr(h)] if p.rpc_code() == Some(RpcCode::Return) => Ok(*h),
        _ => Err(exception_text(&p)),
    }
}

fn closed(c: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!((&*c).read(&mut b), Ok(0) | Err(_))
}

#[test]
fn handshake_answers() {
    let s = Server::builder().key("k1").spawn().unwrap();
    // Bad magic: closed without an answer.
    let c = TcpStream::connect(s.local_addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    std::io::Write::write_all(&mut &c, &[1, 2, 3, 4, 0, 0, 0, 0]).unwrap();
    let mut rest = Vec::new();
    let _ = (&c).read_to_end(&mut rest);
    assert!(rest.is_empty(), "{rest:?}");
    // Wrong key: RPC_CODE_MISMATCH, then closed.
    let c = connect(&s, "client:k2");
    let mut rest = Vec::new();
    let _ = (&c).read_to_end(&mut rest);
    assert_eq!(rest, wire::CODE_MISMATCH.to_le_bytes());
    // Right key with options: success and the server's key.
    let c = connect(&s, "client:k1 -timeout=30");
    let mut b = [0u8; 17];
    (&c).read_exact(&mut b).unwrap();
    assert_eq!(&b[..4], &wire::CODE_SUCCESS.to_le_bytes());
    assert_eq!(&b[8..], b"server:k1");
    s.stop();
}

#[test]
fn bad_requests_are_exceptions_and_the_session_goes_on() {
    let s = Server::builder().spawn().unwrap();
    let c = session(&s);
    // Unknown code, malformed body, unknown handles.
    let p = Packet {
        code: 99,
        body: vec![],
    };
    let mut f = Vec::new();
    f.put_u64(4);
    f.put_i32(p.code);
    std::io::Write::write_all(&mut &c, &f).unwrap();
    let r = wire::read_packet(&mut &c, 1 << 20).unwrap();
    assert!(exception_text(&r).contains("unknown RPC code 99"));
    let r = request(&c, RpcCode::GetGlobalFunc, &[1, 2, 3]);
    assert!(exception_text(&r).contains("malformed"), "{r:?}");
    let mut body = Vec::new();
    body.put_u64(12345);
    body.put_i32(0);
    assert!(exception_text(&request(&c, RpcCode::CallFunc, &body)).contains("unknown handle"));
    assert!(
        exception_text(&syscall(&c, RpcCode::FreeHandle, &[Arg::OpaquePtr(7)]))
            .contains("unknown handle")
    );
    // Unknown global: handle 0; known: a handle, freed once.
    assert_eq!(
        syscall(&c, RpcCode::GetGlobalFunc, &[Arg::RawStr("no.such".into())]),
        ok(vec![Arg::OpaquePtr(0)])
    );
    let p = syscall(
        &c,
        RpcCode::GetGlobalFunc,
        &[Arg::RawStr("tvm.rpc.server.upload".into())],
    );
    let [Arg::OpaquePtr(h)] = wire::decode_seq(&p.body).unwrap()[..] else {
        panic!("{p:?}")
    };
    assert_ne!(h, 0);
    assert_eq!(
        syscall(&c, RpcCode::FreeHandle, &[Arg::OpaquePtr(h)]),
        ok(vec![Arg::None])
    );
    assert!(
        exception_text(&syscall(&c, RpcCode::FreeHandle, &[Arg::OpaquePtr(h)]))
            .contains("unknown handle")
    );
    // Device attributes.
    assert_eq!(
        syscall(
            &c,
            RpcCode::DevGetAttr,
            &[Arg::Device(Device::CPU), Arg::Int(0)]
        ),
        ok(vec![Arg::Int(1)])
    );
    let gpu = Device {
        device_type: 2,
        device_id: 0,
    };
    assert_eq!(
        syscall(&c, RpcCode::DevGetAttr, &[Arg::Device(gpu), Arg::Int(0)]),
        ok(vec![Arg::Int(0)])
    );
    // Shutdown closes the connection.
    wire::write_packet(&mut &c, RpcCode::Shutdown, &[]).unwrap();
    assert!(closed(&c));
    s.stop();
}

#[test]
fn remote_memory_is_checked_against_its_table() {
    let limits = Limits {
        max_remote_memory: 1024,
        ..Limits::default()
    };
    let s = Server::builder().limits(limits).spawn().unwrap();
    let c = session(&s);
    let d = alloc(&c, 16).unwrap(); // 64 bytes
                                    // Round trip at an offset.
    let mut body = Vec::new();
    body.put_tensor(&f32_tensor(d, 16, 8));
    body.put_u64(8);
    body.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(
        request(&c, RpcCode::CopyToRemote, &body),
        ok(vec![Arg::None])
    );
    let mut body = Vec::new();
    body.put_tensor(&f32_tensor(d, 16, 0));
    body.put_u64(24);
    let r = request(&c, RpcCode::CopyFromRemote, &body);
    assert_eq!(r.rpc_code(), Some(RpcCode::CopyAck));
    assert_eq!(
        r.body,
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    // Past the end, unknown data, after free.
    let mut body = Vec::new();
    body.put_tensor(&f32_tensor(d, 16, 60));
    body.put_u64(8);
    body.extend_from_slice(&[0; 8]);
    assert!(exception_text(&request(&c, RpcCode::CopyToRemote, &body)).contains("do not fit"));
    let mut body = Vec::new();
    body.put_tensor(&f32_tensor(d + 1000, 16, 0));
    body.put_u64(4);
    assert!(exception_text(&request(&c, RpcCode::CopyFromRemote, &body))
        .contains("unknown data handle"));
    let mut body = Vec::new();
    body.put_tensor(&f32_tensor(d, 16, u64::MAX));
    body.put_u64(4);
    assert!(exception_text(&request(&c, RpcCode::CopyFromRemote, &body)).contains("do not fit"));
    // The session's memory limit.
    assert!(alloc(&c, 1000).unwrap_err().contains("limit"));
    assert!(alloc(&c, -1).unwrap_err().contains("valid size"));
    assert_eq!(
        syscall(
            &c,
            RpcCode::DevFreeData,
            &[Arg::Device(Device::CPU), Arg::OpaquePtr(d)]
        ),
        ok(vec![Arg::None])
    );
    let mut body = Vec::new();
    body.put_tensor(&f32_tensor(d, 16, 0));
    body.put_u64(4);
    assert!(exception_text(&request(&c, RpcCode::CopyFromRemote, &body))
        .contains("unknown data handle"));
    // Freed memory counts no more: a full-size allocation fits again.
    alloc(&c, 256).unwrap();
    s.stop();
}

#[test]
fn handle_limit_and_oversized_packets() {
    let limits = Limits {
        max_handles: 3,
        max_packet: 4096,
        ..Limits::default()
    };
    let s = Server::builder().limits(limits).spawn().unwrap();
    let c = session(&s);
    let get = || {
        syscall(
            &c,
            RpcCode::GetGlobalFunc,
            &[Arg::RawStr("tvm.rpc.server.download".into())],
        )
    };
    for _ in 0..3 {
        assert_eq!(get().rpc_code(), Some(RpcCode::Return));
    }
    assert!(exception_text(&get()).contains("limit"));
    // A packet above max_packet: an exception saying why, then the connection closes.
    let mut f = Vec::new();
    f.put_u64(1 << 40);
    f.put_i32(RpcCode::CallFunc as i32);
    std::io::Write::write_all(&mut &c, &f).unwrap();
    let r = wire::read_packet(&mut &c, 1 << 20).unwrap();
    assert!(exception_text(&r).contains("exceeds the limit"));
    assert!(closed(&c));
    s.stop();
}

#[test]
fn refusals_are_counted() {
    let s = Server::builder().max_sessions(1).spawn().unwrap();
    let c1 = session(&s);
    let c2 = connect(&s, "client:");
    assert!(closed(&c2), "the second session is refused");
    assert_eq!(s.stats().refused, 1);
    assert_eq!(s.stats().active, 1);
    drop(c1);
    s.stop();

    let other: IpAddr = "10.1.2.3".parse().unwrap();
    let s = Server::builder().allow([other]).spawn().unwrap();
    let c = connect(&s, "client:");
    assert!(closed(&c), "a peer outside the allow-list is refused");
    assert_eq!(s.stats().refused, 1);
    s.stop();
}

#[test]
fn idle_sessions_end_and_sandboxes_go() {
    let root = std::env::temp_dir().join(format!("mote-rpc-idle-{}", std::process::id()));
    let s = Server::builder()
        .idle_timeout(Duration::from_millis(300))
        .sandbox_root(&root)
        .spawn()
        .unwrap();
    let c = session(&s);
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1, "one sandbox");
    let t = Instant::now();
    assert!(closed(&c));
    assert!(t.elapsed() < Duration::from_secs(5));
    let t = Instant::now();
    while s.stats().served < 1 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(s.stats().served, 1);
    assert_eq!(
        std::fs::read_dir(&root).unwrap().count(),
        0,
        "sandbox removed"
    );
    s.stop();
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_trickled_handshake_times_out_as_a_whole() {
    let s = Server::builder()
        .handshake_timeout(Duration::from_millis(500))
        .spawn()
        .unwrap();
    let c = TcpStream::connect(s.local_addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t = Instant::now();
    // One byte every 200 ms: each read is quick, the whole is too slow.
    for b in wire::RPC_MAGIC.to_le_bytes() {
        if std::io::Write::write_all(&mut &c, &[b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(closed(&c));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let t = Instant::now();
    while s.stats().served < 1 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(s.stats().served, 1);
    assert_eq!(s.stats().active, 0);
    s.stop();
}

#[test]
fn an_absurd_client_timeout_is_no_timeout() {
    let s = Server::builder().spawn().unwrap();
    let c = connect(&s, "client: -timeout=1e300");
    let mut b = [0u8; 15];
    (&c).read_exact(&mut b).unwrap();
    let mut body = Vec::new();
    body.put_bytes(b"0.8.0");
    body.put_i32(0);
    assert_eq!(request(&c, RpcCode::InitServer, &body), ok(vec![Arg::None]));
    s.stop();
}

#[test]
fn a_key_matcher_claims_keys_and_its_guard_lives_as_long_as_the_session() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    /// Accepts `client:offer` once at a time; the guard frees the offer again.
    struct OneOffer(Arc<AtomicUsize>);
    struct Guard(Arc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    impl mote_rpc::KeyMatcher for OneOffer {
        fn claim(&self, key: &str) -> Option<Box<dyn std::any::Any + Send>> {
            if key != "client:offer" || self.0.fetch_add(1, Ordering::SeqCst) != 0 {
                if key == "client:offer" {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
                return None;
            }
            Some(Box::new(Guard(self.0.clone())))
        }
        fn server_key(&self) -> String {
            "server:offer".into()
        }
    }
    let claimed = Arc::new(AtomicUsize::new(0));
    let s = Server::builder()
        .key_matcher(Arc::new(OneOffer(claimed.clone())))
        .spawn()
        .unwrap();
    let c1 = connect(&s, "client:offer -timeout=30");
    let mut b = [0u8; 20];
    (&c1).read_exact(&mut b).unwrap();
    assert_eq!(&b[8..], b"server:offer");
    assert_eq!(claimed.load(Ordering::SeqCst), 1);
    // The offer is taken while the first session lives.
    let c2 = connect(&s, "client:offer");
    let mut rest = Vec::new();
    let _ = (&c2).read_to_end(&mut rest);
    assert_eq!(rest, wire::CODE_MISMATCH.to_le_bytes());
    drop(c1);
    let t = Instant::now();
    while claimed.load(Ordering::SeqCst) != 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        claimed.load(Ordering::SeqCst),
        0,
        "the guard is dropped with the session"
    );
    s.stop();
}
