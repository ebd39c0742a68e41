//! A hostile peer against the in-process server, over raw TCP: malformed handshakes and packets,
//! forged and freed handles, type confusion, out-of-range copies, sandbox escapes, non-libraries,
//! a thousand dropped connections, stalled and trickling peers, and every limit.
//!
//! After every attack a well-formed client (handshake, kInitServer, upload/download/remove,
//! a remote tensor round trip, kShutdown; written with the crate's own wire encoder) must still
//! be served correctly, every session must end, and the process's open file descriptors and the
//! server's sandbox folders must be back to their baseline. At the end the server's counters are
//! checked and the resident memory growth over a thousand connections is bounded (see
//! `RSS_BOUND`). Facts about the protocol and the server's rules: docs/rpc.md.
//!
//! Attacks run sequentially in one test so the fd counts are meaningful; a second test that
//! needs the model zoo (`MOTE_ZOO_DIR`) attacks a loaded model's argument checks, serialised
//! with the first by a mutex. Failures are collected and reported together at the end, so one
//! run shows every defence that is missing.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mote_rpc::wire::{
    self, decode_seq, encode_seq, Arg, Device, Packet, Put, RpcCode, WireDType, WireTensor,
};
use mote_rpc::{Limits, Server, ServerHandle};

/// Serialises the tests of this file (fd counts are per process).
static SERIAL: Mutex<()> = Mutex::new(());

const KEY: &str = "hostile";
const MAX_PACKET: u64 = 1 << 20;
const MAX_UPLOAD: u64 = 64 << 10;
const MAX_SANDBOX: u64 = 160 << 10;
const MAX_HANDLES: usize = 64;
const MAX_MEMORY: u64 = 1 << 20;
const MAX_SESSIONS: usize = 4;
const IDLE: Duration = Duration::from_millis(1000);
const HANDSHAKE: Duration = Duration::from_millis(1000);
/// How much longer than a timeout the server may take to act on it (its poll interval is
/// 100 ms; the rest is slack for a loaded 2-core machine).
const SLACK: Duration = Duration::from_millis(1500);

type R<T> = Result<T, String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

// ---------------------------------------------------------------------------------------------
// The environment: one server, its sandbox root, the baselines.

struct Env {
    server: ServerHandle,
    root: PathBuf,
    fds: usize,
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(usize::MAX)
}

/// What the open descriptors are (for messages).
fn fd_targets() -> Vec<String> {
    match std::fs::read_dir("/proc/self/fd") {
        Ok(d) => d
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .map(|t| t.display().to_string())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Whether resident-memory bounds apply: not under AddressSanitizer (`scripts/sanitize.sh`
/// sets `MOTE_TEST_NO_RSS_BOUNDS`), whose quarantine keeps freed memory resident on purpose;
/// LeakSanitizer checks for leaks there instead.
fn rss_bounds() -> bool {
    std::env::var_os("MOTE_TEST_NO_RSS_BOUNDS").is_none()
}

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn dir_entries(p: &Path) -> Vec<String> {
    match std::fs::read_dir(p) {
        Ok(d) => d
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn limits() -> Limits {
    Limits {
        max_packet: MAX_PACKET,
        max_upload_file: MAX_UPLOAD,
        max_sandbox_bytes: MAX_SANDBOX,
        max_handles: MAX_HANDLES,
        max_remote_memory: MAX_MEMORY,
    }
}

impl Env {
    fn new(root: PathBuf, limits: Limits) -> Env {
        Env::with_threads(root, limits, 1)
    }

    /// `threads`: of each Mote session the server makes (one per VM module).
    fn with_threads(root: PathBuf, limits: Limits, threads: usize) -> Env {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("sandbox root");
        let server = Server::builder()
            .port(0)
            .key(KEY)
            .max_sessions(MAX_SESSIONS)
            .sandbox_root(&root)
            .limits(limits)
            .session_threads(threads)
            .idle_timeout(IDLE)
            .handshake_timeout(HANDSHAKE)
            .spawn()
            .expect("server starts");
        Env {
            server,
            root,
            fds: 0,
        }
    }

    /// Waits until no session runs (up to `limit`).
    fn wait_idle(&self, limit: Duration) -> R<()> {
        let t = Instant::now();
        while self.server.stats().active != 0 {
            ensure!(
                t.elapsed() < limit,
                "sessions still active after {limit:?}: {:?}",
                self.server.stats()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Sessions over, sandbox root empty, fds back at the baseline (sockets close
    /// asynchronously on the server side, so this polls for a while).
    fn at_baseline(&self) -> R<()> {
        self.wait_idle(Duration::from_secs(5))?;
        let t = Instant::now();
        loop {
            let fds = open_fds();
            let dirs = dir_entries(&self.root);
            if fds == self.fds && dirs.is_empty() {
                return Ok(());
            }
            ensure!(
                t.elapsed() < Duration::from_secs(3),
                "not back to baseline: {fds} open fds (baseline {}: {:?}), sandbox root holds \
                 {dirs:?}",
                self.fds,
                fd_targets()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A raw peer.

struct Peer {
    s: TcpStream,
}

fn seq_of(p: &Packet) -> R<Vec<Arg>> {
    decode_seq(&p.body).map_err(|e| format!("reply does not decode: {e} ({p:?})"))
}

fn exception_text(p: &Packet) -> R<String> {
    ensure!(
        p.rpc_code() == Some(RpcCode::Exception),
        "expected kException, got code {} with {:?}",
        p.code,
        decode_seq(&p.body)
    );
    match seq_of(p)?.as_slice() {
        [Arg::RawStr(s)] => Ok(s.clone()),
        other => Err(format!("exception body {other:?}")),
    }
}

fn returned(p: &Packet) -> R<Vec<Arg>> {
    ensure!(
        p.rpc_code() == Some(RpcCode::Return),
        "expected kReturn, got code {} with {:?}",
        p.code,
        decode_seq(&p.body)
    );
    seq_of(p)
}

fn f32_tensor(data: u64, shape: Vec<i64>, byte_offset: u64) -> WireTensor {
    WireTensor {
        data,
        device: Device::CPU,
        dtype: WireDType {
            code: 2,
            bits: 32,
            lanes: 1,
        },
        shape,
        byte_offset,
    }
}

fn handshake_bytes(key: &str) -> Vec<u8> {
    let mut b = Vec::new();
    wire::write_handshake(&mut b, key).expect("to a Vec");
    b
}

fn init_body(version: &str, args: &[Arg]) -> Vec<u8> {
    let mut b = Vec::new();
    b.put_bytes(version.as_bytes());
    b.extend_from_slice(&encode_seq(args));
    b
}

impl Peer {
    fn connect(env: &Env) -> R<Peer> {
        let s = TcpStream::connect(env.server.local_addr().expect("listening"))
            .map_err(|e| format!("connect: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        Ok(Peer { s })
    }

    fn send(&self, b: &[u8]) -> R<()> {
        (&self.s)
            .write_all(b)
            .map_err(|e| format!("send {} bytes: {e}", b.len()))
    }

    /// Handshake with `key`, expecting success.
    fn hello(env: &Env, key: &str) -> R<Peer> {
        let p = Peer::connect(env)?;
        p.send(&handshake_bytes(key))?;
        let mut b = [0u8; 8];
        (&p.s)
            .read_exact(&mut b)
            .map_err(|e| format!("handshake reply: {e}"))?;
        ensure!(
            b[..4] == wire::CODE_SUCCESS.to_le_bytes(),
            "handshake answered {:x?}",
            &b[..4]
        );
        let n = i32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let want = format!("server:{KEY}");
        ensure!(n as usize == want.len(), "server key length {n}");
        let mut k = vec![0u8; want.len()];
        (&p.s).read_exact(&mut k).map_err(|e| e.to_string())?;
        ensure!(k == want.as_bytes(), "server key {k:?}");
        Ok(p)
    }

    /// Handshake and kInitServer.
    fn session(env: &Env) -> R<Peer> {
        Peer::session_with(env, &format!("client:{KEY}"))
    }

    fn session_with(env: &Env, key: &str) -> R<Peer> {
        let p = Peer::hello(env, key)?;
        let r = p.request_raw(RpcCode::InitServer as i32, &init_body("0.8.0", &[]))?;
        ensure!(
            returned(&r)? == vec![Arg::None],
            "kInitServer answered {r:?}"
        );
        Ok(p)
    }

    fn read_reply(&self) -> R<Packet> {
        wire::read_packet(&mut &self.s, 1 << 30).map_err(|e| format!("reading the reply: {e}"))
    }

    fn request_raw(&self, code: i32, body: &[u8]) -> R<Packet> {
        let mut f = Vec::with_capacity(12 + body.len());
        f.put_u64(4 + body.len() as u64);
        f.put_i32(code);
        f.extend_from_slice(body);
        self.send(&f)?;
        self.read_reply()
    }

    fn request(&self, code: RpcCode, body: &[u8]) -> R<Packet> {
        self.request_raw(code as i32, body)
    }

    fn syscall(&self, code: RpcCode, args: &[Arg]) -> R<Packet> {
        self.request(code, &encode_seq(args))
    }

    fn call(&self, h: u64, args: &[Arg]) -> R<Packet> {
        let mut b = Vec::new();
        b.put_u64(h);
        b.extend_from_slice(&encode_seq(args));
        self.request(RpcCode::CallFunc, &b)
    }

    fn global(&self, name: &str) -> R<u64> {
        let r = self.syscall(RpcCode::GetGlobalFunc, &[Arg::RawStr(name.into())])?;
        match returned(&r)?.as_slice() {
            [Arg::OpaquePtr(h)] if *h != 0 => Ok(*h),
            other => Err(format!("global {name}: {other:?}")),
        }
    }

    fn free(&self, h: u64) -> R<()> {
        let r = self.syscall(RpcCode::FreeHandle, &[Arg::OpaquePtr(h)])?;
        ensure!(returned(&r)? == vec![Arg::None], "kFreeHandle: {r:?}");
        Ok(())
    }

    fn alloc(&self, shape: Vec<i64>) -> R<u64> {
        let r = self.syscall(
            RpcCode::DevAllocDataWithScope,
            &[Arg::Tensor(f32_tensor(0, shape, 0)), Arg::None],
        )?;
        match returned(&r)?.as_slice() {
            [Arg::OpaquePtr(h)] => Ok(*h),
            other => Err(format!("alloc: {other:?}")),
        }
    }

    fn free_data(&self, data: u64) -> R<Packet> {
        self.syscall(
            RpcCode::DevFreeData,
            &[Arg::Device(Device::CPU), Arg::OpaquePtr(data)],
        )
    }

    fn copy_to(&self, t: &WireTensor, data: &[u8]) -> R<Packet> {
        let mut b = Vec::new();
        b.put_tensor(t);
        b.put_bytes(data);
        self.request(RpcCode::CopyToRemote, &b)
    }

    fn copy_from(&self, t: &WireTensor, n: u64) -> R<Packet> {
        let mut b = Vec::new();
        b.put_tensor(t);
        b.put_u64(n);
        self.request(RpcCode::CopyFromRemote, &b)
    }

    /// Expects a kException (the session going on); returns its text.
    fn refused(&self, what: &str, r: R<Packet>) -> R<String> {
        let p = r.map_err(|e| format!("{what}: {e}"))?;
        exception_text(&p).map_err(|e| format!("{what}: {e}"))
    }

    /// Whether the server closed the connection within `limit` (EOF or reset; a read timeout is
    /// "still open"). Bytes the server sends first (an exception) are returned.
    fn closed_within(&self, limit: Duration) -> (bool, Vec<u8>) {
        let _ = self.s.set_read_timeout(Some(limit));
        let mut got = Vec::new();
        let mut b = [0u8; 4096];
        let t = Instant::now();
        loop {
            match (&self.s).read(&mut b) {
                Ok(0) => return (true, got),
                Ok(n) => got.extend_from_slice(&b[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return (false, got)
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return (true, got),
            }
            if t.elapsed() > limit {
                return (false, got);
            }
        }
    }

    fn expect_closed(&self, what: &str, limit: Duration) -> R<Vec<u8>> {
        let (closed, got) = self.closed_within(limit);
        ensure!(
            closed,
            "{what}: the connection is still open after {limit:?}"
        );
        Ok(got)
    }
}

// ---------------------------------------------------------------------------------------------
// The well-formed client run after every attack.

fn normal_client(env: &Env) -> R<Duration> {
    let t = Instant::now();
    let p = Peer::session(env)?;
    let upload = p.global("tvm.rpc.server.upload")?;
    let download = p.global("tvm.rpc.server.download")?;
    let remove = p.global("tvm.rpc.server.remove")?;
    let blob: Vec<u8> = (0..3000u32).map(|i| (i * 7 + 3) as u8).collect();
    let r = p.call(
        upload,
        &[Arg::RawStr("probe.bin".into()), Arg::Bytes(blob.clone())],
    )?;
    ensure!(
        returned(&r)? == vec![Arg::Int(0), Arg::None],
        "upload: {r:?}"
    );
    let r = p.call(download, &[Arg::RawStr("probe.bin".into())])?;
    ensure!(
        returned(&r)? == vec![Arg::Int(66), Arg::ByteArray(blob)],
        "download returned something else"
    );
    let r = p.call(remove, &[Arg::RawStr("probe.bin".into())])?;
    ensure!(
        returned(&r)? == vec![Arg::Int(0), Arg::None],
        "remove: {r:?}"
    );
    p.refused(
        "download after remove",
        p.call(download, &[Arg::RawStr("probe.bin".into())]),
    )?;
    // A remote tensor round trip.
    let data = p.alloc(vec![4, 4])?;
    let bytes: Vec<u8> = (0..64u8).map(|i| i ^ 0x5a).collect();
    let r = p.copy_to(&f32_tensor(data, vec![4, 4], 0), &bytes)?;
    ensure!(returned(&r)? == vec![Arg::None], "copy to: {r:?}");
    let r = p.copy_from(&f32_tensor(data, vec![4, 4], 16), 48)?;
    ensure!(
        r.rpc_code() == Some(RpcCode::CopyAck) && r.body == bytes[16..],
        "copy from: {r:?}"
    );
    let r = p.syscall(
        RpcCode::DevStreamSync,
        &[Arg::Device(Device::CPU), Arg::OpaquePtr(0)],
    )?;
    ensure!(returned(&r)? == vec![Arg::None], "sync: {r:?}");
    ensure!(
        returned(&p.free_data(data)?)? == vec![Arg::None],
        "kDevFreeData"
    );
    // An unknown global is handle 0.
    let r = p.syscall(RpcCode::GetGlobalFunc, &[Arg::RawStr("no.such".into())])?;
    ensure!(returned(&r)? == vec![Arg::OpaquePtr(0)], "unknown global");
    for h in [upload, download, remove] {
        p.free(h)?;
    }
    p.send(&wire::frame(RpcCode::Shutdown, &[]))?;
    let rest = p.expect_closed("after kShutdown", Duration::from_secs(5))?;
    ensure!(rest.is_empty(), "bytes after kShutdown: {rest:?}");
    Ok(t.elapsed())
}

// ---------------------------------------------------------------------------------------------
// Attacks. Each returns Err(description) when the server did not defend itself.

fn bad_magic(env: &Env) -> R<()> {
    for b in [
        vec![1u8, 2, 3, 4, 0, 0, 0, 0],
        wire::CODE_MISMATCH.to_le_bytes().to_vec(),
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        vec![0; 64],
    ] {
        let p = Peer::connect(env)?;
        p.send(&b)?;
        let got = p.expect_closed("bad magic", Duration::from_secs(5))?;
        ensure!(got.is_empty(), "a bad magic was answered with {got:?}");
    }
    Ok(())
}

fn truncated_handshakes(env: &Env) -> R<()> {
    let full = handshake_bytes(&format!("client:{KEY}"));
    for cut in [1, 3, 4, 5, 7, 8, 9, full.len() - 1] {
        let p = Peer::connect(env)?;
        p.send(&full[..cut])?;
        let _ = p.s.shutdown(Shutdown::Write);
        let got = p.expect_closed("truncated handshake", Duration::from_secs(5))?;
        ensure!(got.is_empty(), "a truncated handshake got {got:?}");
    }
    // Length says 20, 5 bytes arrive, then close.
    let p = Peer::connect(env)?;
    let mut b = Vec::new();
    b.put_i32(wire::RPC_MAGIC);
    b.put_i32(20);
    b.extend_from_slice(b"clien");
    p.send(&b)?;
    drop(p);
    Ok(())
}

fn huge_key_lengths(env: &Env) -> R<()> {
    for len in [i32::MAX, -1, i32::MIN, 4097, 1 << 20] {
        let p = Peer::connect(env)?;
        let mut b = Vec::new();
        b.put_i32(wire::RPC_MAGIC);
        b.put_i32(len);
        b.extend_from_slice(b"client:hostile");
        p.send(&b)?;
        let got = p.expect_closed("huge key length", Duration::from_secs(5))?;
        ensure!(
            got.is_empty() || got == wire::CODE_MISMATCH.to_le_bytes(),
            "key length {len} was answered with {got:?}"
        );
    }
    Ok(())
}

fn wrong_keys(env: &Env) -> R<()> {
    for key in [
        "client:wrong".to_string(),
        "client:".to_string(),
        format!("client:{KEY}x"),
        format!("server:{KEY}"),
        KEY.to_string(),
        format!("client:{KEY}\0"),
        String::new(),
        "x".repeat(4096),
    ] {
        let p = Peer::connect(env)?;
        p.send(&handshake_bytes(&key))?;
        let got = p.expect_closed("wrong key", Duration::from_secs(5))?;
        ensure!(
            got == wire::CODE_MISMATCH.to_le_bytes(),
            "key {:?} was answered with {got:?}",
            &key[..key.len().min(40)]
        );
    }
    // Not UTF-8: closed (with or without the mismatch code), never accepted.
    let p = Peer::connect(env)?;
    let mut b = Vec::new();
    b.put_i32(wire::RPC_MAGIC);
    b.put_i32(3);
    b.extend_from_slice(&[0xff, 0xfe, 0xfd]);
    p.send(&b)?;
    let got = p.expect_closed("non-UTF-8 key", Duration::from_secs(5))?;
    ensure!(
        got.is_empty() || got == wire::CODE_MISMATCH.to_le_bytes(),
        "non-UTF-8 key answered {got:?}"
    );
    Ok(())
}

fn client_timeout_options(env: &Env) -> R<()> {
    // Garbage and absurd -timeout values mean no timeout; the session works.
    for opts in [
        "-timeout=abc -timeout=-5 -timeout=nan -timeout=inf",
        "-timeout=1e300",
        "-timeout=0",
        "-timeout=",
    ] {
        let p = Peer::session_with(env, &format!("client:{KEY} {opts}"))?;
        let h = p.global("tvm.rpc.server.upload")?;
        p.free(h)?;
    }
    // A real one: after it expires the server says so (RPCSessionTimeoutError) and closes.
    let p = Peer::session_with(env, &format!("client:{KEY} -timeout=0.3"))?;
    let t = Instant::now();
    let got = p.expect_closed("-timeout=0.3", Duration::from_secs(5))?;
    let e = wire::read_packet(&mut &got[..], 1 << 20)
        .map_err(|e| format!("-timeout: no exception before the close ({e})"))?;
    let text = exception_text(&e)?;
    ensure!(
        text.starts_with(wire::TIMEOUT_ERROR_PREFIX),
        "timeout message {text:?}"
    );
    ensure!(
        t.elapsed() < Duration::from_millis(300) + SLACK,
        "timeout took {:?}",
        t.elapsed()
    );
    Ok(())
}

fn truncated_packets(env: &Env) -> R<()> {
    // Length says 100, 20 bytes arrive, then close: the session ends.
    let p = Peer::session(env)?;
    let mut b = Vec::new();
    b.put_u64(100);
    b.put_i32(RpcCode::CallFunc as i32);
    b.extend_from_slice(&[0u8; 16]);
    p.send(&b)?;
    let _ = p.s.shutdown(Shutdown::Write);
    p.expect_closed("truncated packet", Duration::from_secs(5))?;
    // Lengths 1..3 cannot hold a code: the stream is broken, the session ends.
    for n in 1..4u64 {
        let p = Peer::session(env)?;
        let mut b = Vec::new();
        b.put_u64(n);
        b.extend_from_slice(&[1, 0, 0][..n as usize]);
        p.send(&b)?;
        p.expect_closed("packet shorter than its code", Duration::from_secs(5))?;
    }
    Ok(())
}

fn huge_packets(env: &Env) -> R<()> {
    for len in [1u64 << 63, u64::MAX, MAX_PACKET + 1, 1 << 40] {
        let p = Peer::session(env)?;
        let mut b = Vec::new();
        b.put_u64(len);
        b.put_i32(RpcCode::CallFunc as i32);
        b.extend_from_slice(&[0u8; 64]);
        p.send(&b)?;
        let got = p.expect_closed("huge packet", Duration::from_secs(5))?;
        // The server says why before closing (docs/rpc.md "Sessions").
        let e = wire::read_packet(&mut &got[..], 1 << 20)
            .map_err(|e| format!("packet of {len} bytes: no exception ({e})"))?;
        let text = exception_text(&e)?;
        ensure!(text.contains("limit"), "packet of {len} bytes: {text:?}");
    }
    Ok(())
}

fn empty_packets_and_unknown_codes(env: &Env) -> R<()> {
    let p = Peer::session(env)?;
    // A thousand empty packets are skipped; the next request is answered.
    p.send(&vec![0u8; 8 * 1000])?;
    let h = p.global("tvm.rpc.server.upload")?;
    p.free(h)?;
    for code in [0, 4, 5, 8, 22, 99, -1, i32::MIN, i32::MAX] {
        p.refused(&format!("code {code}"), p.request_raw(code, &[1, 2, 3]))?;
    }
    // kInitServer again with a wrong version or arguments, and with a garbage body.
    p.refused(
        "kInitServer 0.9.0",
        p.request(RpcCode::InitServer, &init_body("0.9.0", &[])),
    )?;
    p.refused(
        "kInitServer with a constructor",
        p.request(
            RpcCode::InitServer,
            &init_body("0.8.0", &[Arg::RawStr("rpc.Connect".into())]),
        ),
    )?;
    p.refused(
        "kInitServer garbage",
        p.request(RpcCode::InitServer, &[0xff; 11]),
    )?;
    // Malformed bodies for every request code.
    for code in 2..=21 {
        if code == RpcCode::Shutdown as i32 {
            continue;
        }
        p.refused(
            &format!("garbage body for code {code}"),
            p.request_raw(code, &[0xff, 0xff, 0xff, 0x7f, 7]),
        )?;
    }
    let h = p.global("tvm.rpc.server.download")?;
    p.free(h)?;
    // Before kInitServer nothing but kInitServer is served.
    let q = Peer::hello(env, &format!("client:{KEY}"))?;
    q.refused(
        "kGetGlobalFunc before kInitServer",
        q.syscall(
            RpcCode::GetGlobalFunc,
            &[Arg::RawStr("tvm.rpc.server.upload".into())],
        ),
    )?;
    Ok(())
}

fn forged_and_freed_handles(env: &Env) -> R<()> {
    let p = Peer::session(env)?;
    let data = p.alloc(vec![4])?;
    for h in [0, 1, 0xdead_beef, u64::MAX, 0x7f8f_7400_f1e0, data] {
        p.refused(&format!("call {h:#x}"), p.call(h, &[]))?;
    }
    let up = p.global("tvm.rpc.server.upload")?;
    p.free(up)?;
    p.refused(
        "call of a freed handle",
        p.call(
            up,
            &[Arg::RawStr("x".into()), Arg::Bytes(b"payload".to_vec())],
        ),
    )?;
    ensure!(
        dir_entries(&env.root)
            .iter()
            .all(|d| dir_entries(&env.root.join(d)).is_empty()),
        "a freed upload handle wrote a file"
    );
    p.refused(
        "double kFreeHandle",
        p.syscall(RpcCode::FreeHandle, &[Arg::OpaquePtr(up)]),
    )?;
    for args in [
        vec![],
        vec![Arg::Device(Device::CPU)],
        vec![Arg::RawStr("tvm.rpc.server.upload".into())],
        vec![Arg::OpaquePtr(0)],
        vec![Arg::OpaquePtr(data)],
    ] {
        p.refused(
            &format!("kFreeHandle {args:?}"),
            p.syscall(RpcCode::FreeHandle, &args),
        )?;
    }
    // The data id survived kFreeHandle on it.
    let r = p.copy_to(&f32_tensor(data, vec![4], 0), &[1; 16])?;
    ensure!(
        returned(&r)? == vec![Arg::None],
        "data id broken by kFreeHandle"
    );
    // Handle ids and data ids are different tables.
    let dl = p.global("tvm.rpc.server.download")?;
    p.refused("kDevFreeData of a function handle", p.free_data(dl))?;
    p.refused(
        "copy into a function handle",
        p.copy_to(&f32_tensor(dl, vec![4], 0), &[1; 16]),
    )?;
    ensure!(
        returned(&p.free_data(data)?)? == vec![Arg::None],
        "kDevFreeData"
    );
    p.refused("double kDevFreeData", p.free_data(data))?;
    p.refused(
        "copy into freed memory",
        p.copy_to(&f32_tensor(data, vec![4], 0), &[1; 16]),
    )?;
    p.refused(
        "copy from freed memory",
        p.copy_from(&f32_tensor(data, vec![4], 0), 16),
    )?;
    // A handle is freed once, whatever wrapper it comes in.
    p.free(dl)?;
    p.refused(
        "kFreeHandle Function(freed)",
        p.syscall(RpcCode::FreeHandle, &[Arg::Function(dl)]),
    )?;
    // Malformed kCallFunc bodies.
    p.refused(
        "kCallFunc of 4 bytes",
        p.request(RpcCode::CallFunc, &[0; 4]),
    )?;
    p.refused(
        "kCallFunc with trailing bytes",
        p.request(RpcCode::CallFunc, &[0; 13]),
    )?;
    Ok(())
}

fn type_confusion(env: &Env) -> R<()> {
    let p = Peer::session(env)?;
    let up = p.global("tvm.rpc.server.upload")?;
    let dl = p.global("tvm.rpc.server.download")?;
    let load = p.global("tvm.rpc.server.load_module")?;
    let getf = p.global("tvm.rpc.server.ModuleGetFunction")?;
    let import = p.global("tvm.rpc.server.ImportModule")?;
    let timer = p.global("runtime.RPCTimeEvaluator")?;
    let profile = p.global("mote.profile")?;
    let data = p.alloc(vec![16])?;
    let tensor = Arg::Tensor(f32_tensor(data, vec![16], 0));
    let cases: Vec<(&str, u64, Vec<Arg>)> = vec![
        (
            "upload(tensor, bytes)",
            up,
            vec![tensor.clone(), Arg::Bytes(vec![1])],
        ),
        (
            "upload(name, str)",
            up,
            vec![Arg::RawStr("a".into()), Arg::RawStr("b".into())],
        ),
        (
            "upload(name, tensor)",
            up,
            vec![Arg::RawStr("a".into()), tensor.clone()],
        ),
        ("upload(name)", up, vec![Arg::RawStr("a".into())]),
        (
            "upload(int, bytes)",
            up,
            vec![Arg::Int(3), Arg::Bytes(vec![1])],
        ),
        ("download(tensor)", dl, vec![tensor.clone()]),
        ("download(module handle)", dl, vec![Arg::Module(up)]),
        (
            "load_module(bytes)",
            load,
            vec![Arg::Bytes(b"x.so".to_vec())],
        ),
        ("load_module()", load, vec![]),
        (
            "ModuleGetFunction(function handle as module)",
            getf,
            vec![Arg::Module(up), Arg::RawStr("x".into()), Arg::Bool(true)],
        ),
        (
            "ModuleGetFunction(data id as module)",
            getf,
            vec![Arg::Module(data), Arg::RawStr("x".into()), Arg::Bool(true)],
        ),
        (
            "ModuleGetFunction(object ref to a function)",
            getf,
            vec![
                Arg::ObjectRef {
                    type_index: 73,
                    handle: dl,
                },
                Arg::RawStr("x".into()),
            ],
        ),
        (
            "ModuleGetFunction(tensor)",
            getf,
            vec![tensor.clone(), Arg::RawStr("x".into()), Arg::Bool(true)],
        ),
        (
            "ImportModule(function, function)",
            import,
            vec![Arg::Module(up), Arg::Module(dl)],
        ),
        (
            "RPCTimeEvaluator(function as module)",
            timer,
            vec![
                Arg::Module(up),
                Arg::RawStr("f".into()),
                Arg::Int(1),
                Arg::Int(0),
                Arg::Int(1),
                Arg::Int(1),
                Arg::Int(0),
                Arg::Int(100),
                Arg::Int(0),
                Arg::Int(1),
                Arg::Int(0),
                Arg::RawStr(String::new()),
            ],
        ),
        (
            "RPCTimeEvaluator(global)",
            timer,
            vec![
                Arg::None,
                Arg::RawStr("tvm.rpc.server.upload".into()),
                Arg::Int(1),
                Arg::Int(0),
                Arg::Int(i64::MAX),
                Arg::Int(-1),
                Arg::Int(0),
                Arg::Int(100),
                Arg::Int(0),
                Arg::Int(1),
                Arg::Int(i64::MIN),
                Arg::RawStr(String::new()),
            ],
        ),
        ("RPCTimeEvaluator()", timer, vec![]),
        (
            "mote.profile(function, ...)",
            profile,
            vec![Arg::Module(up), Arg::RawStr("f".into()), tensor.clone()],
        ),
        ("mote.profile()", profile, vec![]),
    ];
    for (what, h, args) in cases {
        p.refused(what, p.call(h, &args))?;
    }
    // Calling a data id, or a handle wrapped as a tensor's data.
    p.refused("call of a data id", p.call(data, &[]))?;
    for bogus in [0, up, 0x7f00_0000_1000, u64::MAX] {
        let t = f32_tensor(bogus, vec![16], 0);
        p.refused(
            &format!("copy into data {bogus:#x}"),
            p.copy_to(&t, &[0; 64]),
        )?;
        p.refused(&format!("copy from data {bogus:#x}"), p.copy_from(&t, 64))?;
        p.refused(
            &format!("kCopyAmongRemote from data {bogus:#x}"),
            p.syscall(
                RpcCode::CopyAmongRemote,
                &[
                    Arg::Tensor(t.clone()),
                    Arg::Tensor(f32_tensor(data, vec![16], 0)),
                    Arg::OpaquePtr(0),
                ],
            ),
        )?;
    }
    // Devices other than cpu(0).
    let gpu = WireTensor {
        device: Device {
            device_type: 2,
            device_id: 0,
        },
        ..f32_tensor(data, vec![16], 0)
    };
    p.refused("copy to a cuda record", p.copy_to(&gpu, &[0; 64]))?;
    p.refused(
        "alloc on cuda",
        p.syscall(
            RpcCode::DevAllocDataWithScope,
            &[
                Arg::Tensor(WireTensor {
                    data: 0,
                    ..gpu.clone()
                }),
                Arg::None,
            ],
        ),
    )?;
    p.refused(
        "alloc with a texture scope",
        p.syscall(
            RpcCode::DevAllocDataWithScope,
            &[
                Arg::Tensor(f32_tensor(0, vec![4], 0)),
                Arg::RawStr("global.texture".into()),
            ],
        ),
    )?;
    p.refused(
        "kDevGetAttr(cpu, 1<<40)",
        p.syscall(
            RpcCode::DevGetAttr,
            &[Arg::Device(Device::CPU), Arg::Int(1 << 40)],
        ),
    )?;
    p.refused(
        "kDevSetDevice(int)",
        p.syscall(RpcCode::DevSetDevice, &[Arg::Int(1)]),
    )?;
    Ok(())
}

fn out_of_range_memory(env: &Env) -> R<()> {
    let p = Peer::session(env)?;
    let data = p.alloc(vec![16])?; // 64 bytes
    let at = |off: u64| f32_tensor(data, vec![16], off);
    for (what, off, n) in [
        ("offset 1, 64 bytes", 1u64, 64usize),
        ("offset 64, 1 byte", 64, 1),
        ("65 bytes", 0, 65),
        ("offset u64::MAX, 1 byte", u64::MAX, 1),
        ("offset 2^63, 1 byte", 1 << 63, 1),
    ] {
        p.refused(
            &format!("copy to, {what}"),
            p.copy_to(&at(off), &vec![0xee; n]),
        )?;
    }
    for (what, off, n) in [
        ("offset 1, 64 bytes", 1u64, 64u64),
        ("65 bytes", 0, 65),
        ("2^62 bytes", 0, 1 << 62),
        ("u64::MAX bytes", 0, u64::MAX),
        ("offset u64::MAX, 1 byte", u64::MAX, 1),
        ("offset 2^64-8, 16 bytes", u64::MAX - 7, 16),
    ] {
        p.refused(&format!("copy from, {what}"), p.copy_from(&at(off), n))?;
    }
    // A copy whose nbytes says more than the body holds.
    let mut b = Vec::new();
    b.put_tensor(&at(0));
    b.put_u64(64);
    b.extend_from_slice(&[0; 10]);
    p.refused(
        "copy to with a short payload",
        p.request(RpcCode::CopyToRemote, &b),
    )?;
    // The memory is intact: nothing above landed.
    let r = p.copy_from(&at(0), 64)?;
    ensure!(
        r.rpc_code() == Some(RpcCode::CopyAck) && r.body == vec![0; 64],
        "memory changed by refused copies: {r:?}"
    );
    // Exactly at the edge is fine.
    let r = p.copy_to(&at(60), &[7; 4])?;
    ensure!(returned(&r)? == vec![Arg::None], "copy of the last 4 bytes");
    let r = p.copy_from(&at(64), 0)?;
    ensure!(
        r.rpc_code() == Some(RpcCode::CopyAck) && r.body.is_empty(),
        "empty copy at the end: {r:?}"
    );
    // kCopyAmongRemote with sizes that differ or overflow.
    let other = p.alloc(vec![8])?;
    p.refused(
        "kCopyAmongRemote 64 -> 32 bytes",
        p.syscall(
            RpcCode::CopyAmongRemote,
            &[
                Arg::Tensor(at(0)),
                Arg::Tensor(f32_tensor(other, vec![8], 0)),
                Arg::OpaquePtr(0),
            ],
        ),
    )?;
    p.refused(
        "kCopyAmongRemote at offset 32",
        p.syscall(
            RpcCode::CopyAmongRemote,
            &[
                Arg::Tensor(f32_tensor(data, vec![8], 0)),
                Arg::Tensor(f32_tensor(other, vec![8], 32)),
                Arg::OpaquePtr(0),
            ],
        ),
    )?;
    // Shapes: negative, overflowing, absurd ndim, zero-size or sub-byte types, too big.
    for (what, shape) in [
        ("negative dim", vec![-1i64]),
        ("negative dims", vec![-4, -4]),
        ("i64::MIN", vec![i64::MIN, 1]),
        ("overflow", vec![1 << 31, 1 << 31, 1 << 31]),
        ("over the memory limit", vec![1 << 20]),
        ("2^40 elements", vec![1 << 40]),
    ] {
        p.refused(
            &format!("alloc {what}"),
            p.syscall(
                RpcCode::DevAllocDataWithScope,
                &[Arg::Tensor(f32_tensor(0, shape, 0)), Arg::None],
            ),
        )?;
    }
    for (code, bits, lanes) in [(2u8, 0u8, 1u16), (1, 1, 1), (2, 32, 0), (1, 4, 1)] {
        let t = WireTensor {
            dtype: WireDType { code, bits, lanes },
            ..f32_tensor(0, vec![8], 0)
        };
        p.refused(
            &format!("alloc with dtype ({code},{bits},{lanes})"),
            p.syscall(RpcCode::DevAllocDataWithScope, &[Arg::Tensor(t), Arg::None]),
        )?;
    }
    // ndim = i32::MAX with no extents behind it.
    let mut b = Vec::new();
    b.put_i32(2);
    b.put_i32(7);
    b.put_u64(0);
    b.put_i32(1);
    b.put_i32(0);
    b.put_i32(i32::MAX);
    b.extend_from_slice(&[2, 32, 1, 0]);
    b.put_u64(1);
    p.refused(
        "alloc with ndim i32::MAX",
        p.request(RpcCode::DevAllocDataWithScope, &b),
    )?;
    // kDevAllocData: negative, huge sizes and bad alignments.
    for (n, align) in [
        (-1i64, 64i64),
        (i64::MIN, 64),
        (1 << 62, 64),
        (64, 0),
        (64, 3),
        (64, -64),
        (64, 1 << 40),
    ] {
        p.refused(
            &format!("kDevAllocData({n}, {align})"),
            p.syscall(
                RpcCode::DevAllocData,
                &[
                    Arg::Device(Device::CPU),
                    Arg::Int(n),
                    Arg::Int(align),
                    Arg::DataType(WireDType {
                        code: 2,
                        bits: 32,
                        lanes: 1,
                    }),
                ],
            ),
        )?;
    }
    Ok(())
}

fn the_session_folder(env: &Env) -> R<PathBuf> {
    let dirs = dir_entries(&env.root);
    ensure!(
        dirs.len() == 1,
        "expected one session folder, found {dirs:?}"
    );
    Ok(env.root.join(&dirs[0]))
}

fn sandbox_escapes(env: &Env, outside: &Path) -> R<()> {
    let p = Peer::session(env)?;
    let up = p.global("tvm.rpc.server.upload")?;
    let dl = p.global("tvm.rpc.server.download")?;
    let rm = p.global("tvm.rpc.server.remove")?;
    let load = p.global("tvm.rpc.server.load_module")?;
    let folder = the_session_folder(env)?;
    let abs = outside.join("abs-target");
    let long = "a".repeat(256);
    let names = [
        "../x".to_string(),
        "../../x".to_string(),
        "a/../../x".to_string(),
        "sub/x".to_string(),
        abs.to_string_lossy().into_owned(),
        "/etc/passwd".to_string(),
        "a\0b".to_string(),
        "x\0".to_string(),
        String::new(),
        ".".to_string(),
        "..".to_string(),
        "a\\..\\x".to_string(),
        "./x".to_string(),
        long,
    ];
    for name in &names {
        let n = || Arg::RawStr(name.clone());
        p.refused(
            &format!("upload {name:?}"),
            p.call(up, &[n(), Arg::Bytes(b"pwned".to_vec())]),
        )?;
        p.refused(&format!("download {name:?}"), p.call(dl, &[n()]))?;
        p.refused(&format!("load {name:?}"), p.call(load, &[n()]))?;
        if name != "/etc/passwd" {
            p.refused(&format!("remove {name:?}"), p.call(rm, &[n()]))?;
        }
    }
    // Also as Str objects (outer/inner 65) rather than raw strings.
    p.refused(
        "upload Str(\"../y\")",
        p.call(
            up,
            &[Arg::Str("../y".into()), Arg::Bytes(b"pwned".to_vec())],
        ),
    )?;
    ensure!(
        !abs.exists(),
        "an absolute upload created {}",
        abs.display()
    );
    ensure!(
        dir_entries(&folder).is_empty(),
        "the session folder holds {:?}",
        dir_entries(&folder)
    );
    let root_entries = dir_entries(&env.root);
    ensure!(
        root_entries.len() == 1,
        "files appeared beside the session folder: {root_entries:?}"
    );
    ensure!(
        !env.root.parent().unwrap_or(&env.root).join("x").exists()
            && !env.root.join("x").exists()
            && !env.root.join("y").exists(),
        "a ../ upload landed outside the session folder"
    );

    // Links and special files someone else planted in the folder: never followed, never
    // replaced, never loaded; `remove` deletes the link, not its target.
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, b"secret").map_err(|e| e.to_string())?;
    let dangling = outside.join("created-through-a-link");
    let dir_target = outside.join("a-dir");
    std::fs::create_dir_all(&dir_target).map_err(|e| e.to_string())?;
    let plant = |name: &str, target: &Path| {
        std::os::unix::fs::symlink(target, folder.join(name)).map_err(|e| e.to_string())
    };
    plant("link", &secret)?;
    plant("dangling", &dangling)?;
    plant("dirlink", &dir_target)?;
    let fifo = folder.join("fifo");
    let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: `c` is a valid NUL-terminated path; mkfifo only creates a file system node.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    ensure!(rc == 0, "mkfifo failed");
    std::fs::create_dir(folder.join("adir")).map_err(|e| e.to_string())?;
    for name in ["link", "dangling", "dirlink", "fifo", "adir"] {
        let n = || Arg::RawStr(name.into());
        let t = Instant::now();
        p.refused(
            &format!("upload over {name}"),
            p.call(up, &[n(), Arg::Bytes(b"pwned".to_vec())]),
        )?;
        p.refused(&format!("download {name}"), p.call(dl, &[n()]))?;
        p.refused(&format!("load {name}"), p.call(load, &[n()]))?;
        ensure!(
            t.elapsed() < Duration::from_secs(2),
            "{name}: took {:?} (blocked on a special file?)",
            t.elapsed()
        );
        p.refused(
            &format!("upload into {name}/x"),
            p.call(
                up,
                &[
                    Arg::RawStr(format!("{name}/x")),
                    Arg::Bytes(b"pwned".to_vec()),
                ],
            ),
        )?;
    }
    ensure!(
        std::fs::read(&secret).map_err(|e| e.to_string())? == b"secret",
        "a link's target was overwritten"
    );
    ensure!(
        !dangling.exists(),
        "an upload created a file through a dangling link"
    );
    ensure!(
        dir_entries(&dir_target).is_empty(),
        "an upload wrote into a linked folder"
    );
    let r = p.call(rm, &[Arg::RawStr("link".into())])?;
    ensure!(
        returned(&r)? == vec![Arg::Int(0), Arg::None],
        "remove link: {r:?}"
    );
    ensure!(secret.exists(), "removing a link removed its target");
    p.refused("remove a folder", p.call(rm, &[Arg::RawStr("adir".into())]))?;
    // The session ends; its folder goes, links and all, and nothing outside is touched.
    p.send(&wire::frame(RpcCode::Shutdown, &[]))?;
    p.expect_closed("shutdown", Duration::from_secs(5))?;
    env.wait_idle(Duration::from_secs(5))?;
    ensure!(!folder.exists(), "the session folder survived its session");
    ensure!(
        secret.exists() && dir_target.exists(),
        "removing the session folder followed a link out of it"
    );
    Ok(())
}

fn upload_limits(env: &Env) -> R<()> {
    let p = Peer::session(env)?;
    let up = p.global("tvm.rpc.server.upload")?;
    let folder = the_session_folder(env)?;
    let upload = |name: &str, n: u64| {
        p.call(
            up,
            &[Arg::RawStr(name.into()), Arg::Bytes(vec![0x42; n as usize])],
        )
    };
    let text = p.refused("upload above the file limit", upload("big", MAX_UPLOAD + 1))?;
    ensure!(text.contains("limit"), "{text:?}");
    ensure!(!folder.join("big").exists(), "a refused upload left a file");
    ensure!(
        returned(&upload("a", MAX_UPLOAD)?)? == vec![Arg::Int(0), Arg::None],
        "upload at the file limit"
    );
    ensure!(
        returned(&upload("b", MAX_UPLOAD)?)? == vec![Arg::Int(0), Arg::None],
        "second upload"
    );
    // Above the per-session total.
    let room = MAX_SANDBOX - 2 * MAX_UPLOAD;
    let text = p.refused("upload above the session total", upload("c", room + 1))?;
    ensure!(text.contains("limit"), "{text:?}");
    ensure!(!folder.join("c").exists(), "a refused upload left a file");
    // Replacing a file counts its new size only; then the total is filled exactly.
    ensure!(
        returned(&upload("a", 10)?)? == vec![Arg::Int(0), Arg::None],
        "replacing an upload"
    );
    ensure!(
        returned(&upload("c", MAX_UPLOAD)?)? == vec![Arg::Int(0), Arg::None],
        "upload after a replacement made room"
    );
    let room = MAX_SANDBOX - 2 * MAX_UPLOAD - 10;
    ensure!(
        returned(&upload("d", room)?)? == vec![Arg::Int(0), Arg::None],
        "upload filling the session total exactly"
    );
    p.refused("one byte over the session total", upload("e", 1))?;
    // An upload in a packet above the packet limit: exception, then the connection closes.
    let mut f = Vec::new();
    let mut body = Vec::new();
    body.put_u64(up);
    body.extend_from_slice(&encode_seq(&[
        Arg::RawStr("huge".into()),
        Arg::Bytes(vec![1; MAX_PACKET as usize]),
    ]));
    f.put_u64(4 + body.len() as u64);
    f.put_i32(RpcCode::CallFunc as i32);
    f.extend_from_slice(&body);
    // The server may close before all of it is sent.
    let _ = (&p.s).write_all(&f);
    let got = p.expect_closed("upload above the packet limit", Duration::from_secs(5))?;
    if !got.is_empty() {
        let e = wire::read_packet(&mut &got[..], 1 << 20).map_err(|e| e.to_string())?;
        exception_text(&e)?;
    }
    Ok(())
}

fn non_libraries(env: &Env) -> R<()> {
    let p = Peer::session(env)?;
    let up = p.global("tvm.rpc.server.upload")?;
    let load = p.global("tvm.rpc.server.load_module")?;
    let getf = p.global("tvm.rpc.server.ModuleGetFunction")?;
    let mut noise = Vec::new();
    let mut x = 0x1234_5678u32;
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise.push(x as u8);
    }
    let mut fake_elf = b"\x7fELF\x02\x01\x01\0".to_vec();
    fake_elf.extend_from_slice(&noise[..56]);
    // A real shared library that is not a TVM export, cut short and whole (its size permitting).
    let libm = std::fs::read("/lib/x86_64-linux-gnu/libm.so.6")
        .or_else(|_| std::fs::read("/usr/lib/x86_64-linux-gnu/libm.so.6"))
        .unwrap_or_default();
    let mut files: Vec<(&str, Vec<u8>)> = vec![
        ("empty.so", Vec::new()),
        ("text.so", b"this is not a library\n".to_vec()),
        ("noise.so", noise),
        ("fake-elf.so", fake_elf),
    ];
    if libm.len() > 4096 {
        files.push(("libm-head.so", libm[..4096].to_vec()));
    }
    if !libm.is_empty() && (libm.len() as u64) <= MAX_UPLOAD {
        files.push(("libm.so", libm.clone()));
    }
    for (name, bytes) in &files {
        let r = p.call(
            up,
            &[Arg::RawStr((*name).into()), Arg::Bytes(bytes.clone())],
        )?;
        ensure!(
            returned(&r)? == vec![Arg::Int(0), Arg::None],
            "upload {name}: {r:?}"
        );
        p.refused(
            &format!("load_module {name}"),
            p.call(load, &[Arg::RawStr((*name).into())]),
        )?;
    }
    p.refused(
        "load_module of a missing file",
        p.call(load, &[Arg::RawStr("missing.so".into())]),
    )?;
    // Nothing was registered as a module: a forged module handle finds nothing.
    p.refused(
        "ModuleGetFunction on a never-loaded module",
        p.call(
            getf,
            &[
                Arg::Module(load + 1000),
                Arg::RawStr("vm_load_executable".into()),
                Arg::Bool(true),
            ],
        ),
    )?;
    Ok(())
}

fn session_limit(env: &Env) -> R<()> {
    let refused0 = env.server.stats().refused;
    let mut held = Vec::new();
    for _ in 0..MAX_SESSIONS {
        held.push(Peer::session(env)?);
    }
    ensure!(
        env.server.stats().active == MAX_SESSIONS,
        "{:?}",
        env.server.stats()
    );
    // One more: closed at once, counted as refused.
    let extra = Peer::connect(env)?;
    let _ = (&extra.s).write_all(&handshake_bytes(&format!("client:{KEY}")));
    let got = extra.expect_closed("session over the limit", Duration::from_secs(5))?;
    ensure!(got.is_empty(), "a refused connection got {got:?}");
    ensure!(
        env.server.stats().refused == refused0 + 1,
        "refusal not counted: {:?}",
        env.server.stats()
    );
    // The held sessions still work; when one ends, a new client gets its slot.
    for p in &held {
        let h = p.global("tvm.rpc.server.upload")?;
        p.free(h)?;
    }
    drop(held.pop());
    let t = Instant::now();
    while env.server.stats().active >= MAX_SESSIONS {
        ensure!(t.elapsed() < Duration::from_secs(5), "slot not returned");
        std::thread::sleep(Duration::from_millis(10));
    }
    let p = Peer::session(env)?;
    drop(p);
    drop(held);
    Ok(())
}

fn handle_and_memory_limits(env: &Env) -> R<()> {
    let p = Peer::session(env)?;
    let mut hs = Vec::new();
    for _ in 0..MAX_HANDLES {
        hs.push(p.global("tvm.rpc.server.download")?);
    }
    let text = p.refused(
        "a handle over the limit",
        p.syscall(
            RpcCode::GetGlobalFunc,
            &[Arg::RawStr("tvm.rpc.server.download".into())],
        ),
    )?;
    ensure!(text.contains("limit"), "{text:?}");
    // A handle-creating call fails the same way (load_module needs a handle for its result).
    p.free(hs.pop().unwrap_or(0))?;
    hs.push(p.global("tvm.rpc.server.upload")?);
    p.refused(
        "GetGlobalFunc at the limit",
        p.syscall(
            RpcCode::GetGlobalFunc,
            &[Arg::RawStr("tvm.rpc.server.remove".into())],
        ),
    )?;
    for h in hs.drain(..) {
        p.free(h)?;
    }
    // Remote memory: the whole budget, then one byte more.
    let all = p.alloc(vec![(MAX_MEMORY / 4) as i64])?;
    let text = p.refused(
        "memory over the limit",
        p.syscall(
            RpcCode::DevAllocDataWithScope,
            &[Arg::Tensor(f32_tensor(0, vec![1], 0)), Arg::None],
        ),
    )?;
    ensure!(text.contains("limit"), "{text:?}");
    ensure!(
        returned(&p.free_data(all)?)? == vec![Arg::None],
        "kDevFreeData"
    );
    let again = p.alloc(vec![(MAX_MEMORY / 4) as i64])?;
    ensure!(
        returned(&p.free_data(again)?)? == vec![Arg::None],
        "kDevFreeData"
    );
    // Many small allocations and frees: the accounting does not drift.
    for _ in 0..200 {
        let d = p.alloc(vec![1024])?;
        ensure!(
            returned(&p.free_data(d)?)? == vec![Arg::None],
            "kDevFreeData"
        );
    }
    let full = p.alloc(vec![(MAX_MEMORY / 4) as i64])?;
    ensure!(
        returned(&p.free_data(full)?)? == vec![Arg::None],
        "kDevFreeData"
    );
    // A copy-from larger than the packet limit is refused even when the memory is there.
    let d = p.alloc(vec![(MAX_MEMORY / 4) as i64])?;
    p.refused(
        "kCopyFromRemote above the packet limit",
        p.copy_from(&f32_tensor(d, vec![(MAX_MEMORY / 4) as i64], 0), MAX_MEMORY),
    )?;
    Ok(())
}

/// Opens `n` connections and drops them: a third at once, a third after part of a handshake,
/// a third after a full handshake (and a kInitServer for some). Waits until the server has
/// accounted for all of them.
fn connection_storm(env: &Env, n: usize) -> R<()> {
    let before = env.server.stats();
    let full = handshake_bytes(&format!("client:{KEY}"));
    let init = wire::frame(RpcCode::InitServer, &init_body("0.8.0", &[]));
    let mut open = Vec::new();
    for i in 0..n {
        let s = match TcpStream::connect(env.server.local_addr().expect("listening")) {
            Ok(s) => s,
            Err(e) => return Err(format!("connection {i}: {e}")),
        };
        match i % 3 {
            0 => {}
            1 => {
                let _ = (&s).write_all(&full[..1 + i % (full.len() - 1)]);
            }
            _ => {
                let _ = (&s).write_all(&full);
                if i % 2 == 0 {
                    let _ = (&s).write_all(&init);
                }
            }
        }
        open.push(s);
        // Drop in batches, so the accept backlog never overflows.
        if open.len() == 50 {
            open.clear();
            let t = Instant::now();
            loop {
                let st = env.server.stats();
                if (st.served + st.refused) - (before.served + before.refused) >= (i + 1) as u64 {
                    break;
                }
                ensure!(
                    t.elapsed() < Duration::from_secs(10),
                    "after {} connections the server accounted for {}: {st:?}",
                    i + 1,
                    (st.served + st.refused) - (before.served + before.refused)
                );
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
    drop(open);
    let t = Instant::now();
    loop {
        let st = env.server.stats();
        let seen = (st.served + st.refused) - (before.served + before.refused);
        if seen >= n as u64 && st.active == 0 {
            return Ok(());
        }
        ensure!(
            t.elapsed() < Duration::from_secs(10),
            "the server accounted for {seen} of {n} connections: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Peers that stop sending in the middle of something. Each must not delay a normal client, and
/// the server's timeouts must end each.
fn stalled_peers(env: &Env) -> R<()> {
    // Mid-packet.
    let mid_packet = Peer::session(env)?;
    let mut b = Vec::new();
    b.put_u64(100);
    b.put_i32(RpcCode::CallFunc as i32);
    b.extend_from_slice(&[0; 10]);
    mid_packet.send(&b)?;
    // Mid-handshake.
    let mid_handshake = Peer::connect(env)?;
    mid_handshake.send(&handshake_bytes(&format!("client:{KEY}"))[..6])?;
    // After the handshake, before kInitServer.
    let silent = Peer::hello(env, &format!("client:{KEY}"))?;
    let t0 = Instant::now();
    // Three stalled peers hold three of the four slots; a normal client is still served at once.
    let took = normal_client(env)?;
    ensure!(
        took < IDLE.min(HANDSHAKE),
        "a normal client took {took:?} while peers stalled (it waited for them)"
    );
    for (what, p, limit) in [
        ("stalled mid-handshake", &mid_handshake, HANDSHAKE),
        ("stalled mid-packet", &mid_packet, IDLE),
        ("silent after the handshake", &silent, IDLE),
    ] {
        let left = (limit + SLACK).saturating_sub(t0.elapsed());
        p.expect_closed(what, left.max(Duration::from_millis(1)))?;
    }
    Ok(())
}

/// Uploads a file of `MAX_UPLOAD - 1024` bytes and asks for it `n` times without reading any
/// answer, so the server's writes block once the socket buffers are full.
fn flood_without_reading(p: &Peer, n: usize) -> R<()> {
    let up = p.global("tvm.rpc.server.upload")?;
    let dl = p.global("tvm.rpc.server.download")?;
    let r = p.call(
        up,
        &[
            Arg::RawStr("big".into()),
            Arg::Bytes(vec![0x33; (MAX_UPLOAD - 1024) as usize]),
        ],
    )?;
    ensure!(
        returned(&r)? == vec![Arg::Int(0), Arg::None],
        "upload: {r:?}"
    );
    let one = wire::frame(
        RpcCode::CallFunc,
        &call_body(dl, &[Arg::RawStr("big".into())]),
    );
    let mut all = Vec::with_capacity(one.len() * n);
    for _ in 0..n {
        all.extend_from_slice(&one);
    }
    p.send(&all)?;
    Ok(())
}

/// A client that stops reading while the server has answers to send (its socket buffers
/// full): its `-timeout` still ends the session on time, other clients are served meanwhile.
fn clients_that_do_not_read(env: &Env) -> R<()> {
    let p = Peer::session_with(env, &format!("client:{KEY} -timeout=1"))?;
    let t = Instant::now();
    // 400 answers of 63 KiB: 25 MiB, more than loopback socket buffers hold.
    flood_without_reading(&p, 400)?;
    let took = normal_client(env)?;
    ensure!(
        took < Duration::from_secs(1),
        "a normal client took {took:?} beside a client that does not read"
    );
    let limit = Duration::from_secs(1) + SLACK;
    while env.server.stats().active > 0 {
        ensure!(
            t.elapsed() < limit,
            "the session of a client that does not read outlived its 1 s -timeout: still \
             running after {:?}",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(p);
    Ok(())
}

/// Sends `bytes` one at a time, one every `every`, on its own thread, until they run out,
/// `halt` is set, or a write fails because the server closed the connection. The thread's
/// result is how long the server took to close it (`None`: it never did).
fn trickle(
    s: TcpStream,
    bytes: Vec<u8>,
    every: Duration,
    halt: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Option<Duration>> {
    std::thread::spawn(move || {
        let t = Instant::now();
        for b in bytes {
            if halt.load(Ordering::SeqCst) {
                return None;
            }
            if (&s).write_all(&[b]).is_err() {
                return Some(t.elapsed());
            }
            std::thread::sleep(every);
        }
        None
    })
}

/// One byte per 30 ms: faster than the server's 100 ms read poll, so none of its reads ever
/// times out.
const TRICKLE: Duration = Duration::from_millis(30);

/// Peers that keep sending, one byte at a time, too slowly to finish but fast enough that the
/// server's reads never time out. The handshake must arrive whole within its timeout
/// (docs/rpc.md "Handshake"); a packet trickled this way must not hold a session slot for ever
/// either (the idle timeout is taken per packet, as it is for a peer that pauses).
fn trickling_peers(env: &Env) -> R<()> {
    let halt = Arc::new(AtomicBool::new(false));
    let hs = Peer::connect(env)?;
    let key = handshake_bytes(&format!("client:{KEY} {}", "x".repeat(400)));
    let pk = Peer::session(env)?;
    let mut packet = Vec::new();
    packet.put_u64(400);
    packet.put_i32(RpcCode::CallFunc as i32);
    packet.extend_from_slice(&[0; 396]);
    let hs_t = trickle(hs.s, key, TRICKLE, halt.clone());
    let pk_t = trickle(pk.s, packet, TRICKLE, halt.clone());
    let give_up = Instant::now() + IDLE.max(HANDSHAKE) + SLACK + Duration::from_millis(500);
    while !(hs_t.is_finished() && pk_t.is_finished()) && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(10));
    }
    halt.store(true, Ordering::SeqCst);
    let hs_closed = hs_t.join().map_err(|_| "trickler panicked".to_string())?;
    let pk_closed = pk_t.join().map_err(|_| "trickler panicked".to_string())?;
    let mut errors = Vec::new();
    match hs_closed {
        Some(t) if t <= HANDSHAKE + SLACK => {}
        other => errors.push(format!(
            "a handshake trickled at one byte per {TRICKLE:?} was not cut at its {HANDSHAKE:?} \
             timeout (closed after {other:?})"
        )),
    }
    match pk_closed {
        Some(t) if t <= IDLE + SLACK => {}
        other => errors.push(format!(
            "a packet trickled at one byte per {TRICKLE:?} was not cut at the {IDLE:?} idle \
             timeout (closed after {other:?})"
        )),
    }
    ensure!(errors.is_empty(), "{}", errors.join("; "));
    Ok(())
}

/// `stop()` with a session, a handshaken peer, a connecting peer and a trickling peer: it
/// returns promptly, every connection is closed, no sandbox folder is left.
fn stop_with_sessions_open(env: Env) -> R<()> {
    let a = Peer::session(&env)?;
    let b = Peer::hello(&env, &format!("client:{KEY}"))?;
    let c = Peer::connect(&env)?;
    c.send(&[0x71])?;
    let halt = Arc::new(AtomicBool::new(false));
    let d = Peer::session(&env)?;
    let mut packet = Vec::new();
    packet.put_u64(4000);
    packet.put_i32(RpcCode::CallFunc as i32);
    packet.extend_from_slice(&[0; 3996]);
    let trickler = trickle(d.s, packet, TRICKLE, halt.clone());
    // The session `a` stops reading while the server has answers for it.
    flood_without_reading(&a, 400)?;
    std::thread::sleep(Duration::from_millis(200));
    let root = env.root.clone();
    let t = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    let stopper = std::thread::spawn(move || {
        env.server.stop();
        let _ = tx.send(());
    });
    let prompt = rx.recv_timeout(Duration::from_secs(3)).is_ok();
    let took = t.elapsed();
    // Let a blocked stop() finish so the test can go on.
    halt.store(true, Ordering::SeqCst);
    let mut a = Some(a);
    if !prompt {
        drop(a.take());
    }
    let _ = trickler.join();
    let _ = stopper.join();
    let mut errors = Vec::new();
    if !prompt {
        errors.push(format!(
            "stop() did not return within {took:?} while a peer trickled a packet and another \
             did not read (it returned only after they went)"
        ));
    }
    let mut open = vec![("handshaken", &b), ("connecting", &c)];
    if let Some(a) = &a {
        open.push(("session that does not read", a));
    }
    for (what, p) in open {
        if let Err(e) = p.expect_closed(&format!("{what} at stop"), Duration::from_secs(3)) {
            errors.push(e);
        }
    }
    if !dir_entries(&root).is_empty() {
        errors.push(format!(
            "sandbox folders left after stop: {:?}",
            dir_entries(&root)
        ));
    }
    ensure!(errors.is_empty(), "{}", errors.join("; "));
    Ok(())
}

// ---------------------------------------------------------------------------------------------

/// Resident memory may grow by at most this much over a thousand connections, measured after a
/// warm-up storm of the same shape: glibc keeps freed thread stacks and per-thread malloc arenas
/// for reuse, so the first storm grows RSS by a few MiB that later ones reuse. 4 MiB over 1000
/// connections is 4 KiB per connection: a leak of one page (a buffer, a thread stack, a sandbox
/// path) per connection would exceed it.
const RSS_BOUND: u64 = 4 << 20;

#[test]
fn hostile_peers_do_not_hurt_the_server() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t_start = Instant::now();
    let base = std::env::temp_dir().join(format!("mote-hostile-{}", std::process::id()));
    let outside = base.join("outside");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&outside).expect("scratch folder");
    let mut env = Env::new(base.join("root"), limits());

    let mut failures: Vec<String> = Vec::new();
    // The first normal session warms up lazily created state; the fd baseline is taken after it.
    if let Err(e) = normal_client(&env) {
        panic!("a normal client fails before any attack: {e}");
    }
    env.wait_idle(Duration::from_secs(5)).expect("idle");
    std::thread::sleep(Duration::from_millis(100));
    env.fds = open_fds();
    let stats0 = env.server.stats();
    println!("baseline: {} fds, {stats0:?}", env.fds);

    type Attack<'a> = (&'a str, Box<dyn Fn(&Env) -> R<()> + 'a>);
    let outside_ref = &outside;
    let attacks: Vec<Attack> = vec![
        ("bad magic", Box::new(bad_magic)),
        ("truncated handshakes", Box::new(truncated_handshakes)),
        ("huge key lengths", Box::new(huge_key_lengths)),
        ("wrong keys", Box::new(wrong_keys)),
        ("client -timeout options", Box::new(client_timeout_options)),
        ("truncated packets", Box::new(truncated_packets)),
        ("huge packet lengths", Box::new(huge_packets)),
        (
            "empty packets, unknown codes, malformed bodies",
            Box::new(empty_packets_and_unknown_codes),
        ),
        (
            "forged and freed handles",
            Box::new(forged_and_freed_handles),
        ),
        ("type confusion", Box::new(type_confusion)),
        ("out-of-range memory", Box::new(out_of_range_memory)),
        (
            "sandbox escapes, links, special files",
            Box::new(move |e: &Env| sandbox_escapes(e, outside_ref)),
        ),
        ("upload limits", Box::new(upload_limits)),
        ("non-libraries", Box::new(non_libraries)),
        ("session limit", Box::new(session_limit)),
        (
            "handle and memory limits",
            Box::new(handle_and_memory_limits),
        ),
        ("stalled peers", Box::new(stalled_peers)),
        ("trickling peers", Box::new(trickling_peers)),
        (
            "clients that do not read",
            Box::new(clients_that_do_not_read),
        ),
    ];
    for (name, attack) in &attacks {
        let t = Instant::now();
        let r = attack(&env);
        let took = t.elapsed();
        if let Err(e) = r {
            failures.push(format!("{name}: {e}"));
        }
        // Whatever happened, the server must be whole again.
        if let Err(e) = env.at_baseline() {
            failures.push(format!("after {name}: {e}"));
        }
        match normal_client(&env) {
            Ok(_) => {}
            Err(e) => failures.push(format!("after {name}: a normal client failed: {e}")),
        }
        if let Err(e) = env.at_baseline() {
            failures.push(format!("after {name} and a normal client: {e}"));
        }
        println!("attack {name:?}: {took:?}");
    }

    // A thousand connections, after a warm-up storm; resident memory must not grow with them.
    let r = connection_storm(&env, 150);
    if let Err(e) = r.and_then(|_| env.at_baseline()) {
        failures.push(format!("warm-up storm: {e}"));
    }
    let rss0 = rss_bytes();
    let st0 = env.server.stats();
    let t = Instant::now();
    if let Err(e) = connection_storm(&env, 1000) {
        failures.push(format!("thousand connections: {e}"));
    }
    let took = t.elapsed();
    if let Err(e) = env.at_baseline() {
        failures.push(format!("after a thousand connections: {e}"));
    }
    if let Err(e) = normal_client(&env) {
        failures.push(format!(
            "after a thousand connections: a normal client failed: {e}"
        ));
    }
    let rss1 = rss_bytes();
    let st1 = env.server.stats();
    println!(
        "thousand connections in {took:?}: served +{}, refused +{}; RSS {} KiB -> {} KiB \
         ({:+} KiB, bound {} KiB)",
        st1.served - st0.served,
        st1.refused - st0.refused,
        rss0 >> 10,
        rss1 >> 10,
        (rss1 as i64 - rss0 as i64) / 1024,
        RSS_BOUND >> 10
    );
    if rss_bounds() && rss1 > rss0 + RSS_BOUND {
        failures.push(format!(
            "RSS grew by {} KiB over a thousand connections (bound {} KiB)",
            (rss1 - rss0) >> 10,
            RSS_BOUND >> 10
        ));
    }

    // Final accounting.
    if let Err(e) = env.at_baseline() {
        failures.push(format!("at the end: {e}"));
    }
    let st = env.server.stats();
    println!("final: {} fds, {st:?}", open_fds());
    if st.active != 0 {
        failures.push(format!("{} sessions still active at the end", st.active));
    }
    if let Err(e) = stop_with_sessions_open(env) {
        failures.push(format!("stop with sessions open: {e}"));
    }
    let _ = std::fs::remove_dir_all(&base);
    println!("hostile suite took {:?}", t_start.elapsed());
    assert!(
        failures.is_empty(),
        "{} defence(s) failed:\n- {}",
        failures.len(),
        failures.join("\n- ")
    );
}

// ---------------------------------------------------------------------------------------------
// Attacks on a loaded model's argument checks (needs the zoo: MOTE_ZOO_DIR).

fn zoo_dir() -> PathBuf {
    let dir = std::env::var("MOTE_ZOO_DIR").unwrap_or_else(|_| {
        panic!("MOTE_ZOO_DIR is not set: point it at the x86_64 zoo (scripts/zoo.sh prints it)")
    });
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("mlp.so").is_file() && dir.join("gemm.so").is_file(),
        "MOTE_ZOO_DIR={} has no mlp.so / gemm.so",
        dir.display()
    );
    dir
}

/// Deterministic test values in [-0.5, 0.5).
fn values(n: usize, salt: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 + salt * 11) % 23) as f32 / 23.0 - 0.5)
        .collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_of(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The zoo's mlp in f64, written from its description (Linear(16,32) + ReLU + Linear(32,8),
/// `y = x W^T + b`): the oracle for the model's answers.
fn mlp_oracle(x: &[f32], w1: &[f32], b1: &[f32], w2: &[f32], b2: &[f32]) -> Vec<f64> {
    let mut out = Vec::new();
    for r in 0..2 {
        let h: Vec<f64> = (0..32)
            .map(|o| {
                let s: f64 = (0..16)
                    .map(|i| f64::from(x[r * 16 + i]) * f64::from(w1[o * 16 + i]))
                    .sum();
                (s + f64::from(b1[o])).max(0.0)
            })
            .collect();
        for o in 0..8 {
            let s: f64 = (0..32).map(|i| h[i] * f64::from(w2[o * 32 + i])).sum();
            out.push(s + f64::from(b2[o]));
        }
    }
    out
}

fn close_to(got: &[f32], want: &[f64], tol: f64) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| (f64::from(*g) - w).abs() <= tol * (1.0 + w.abs()))
}

/// An uploaded, loaded, initialised mlp with its inputs in remote memory.
struct Mlp {
    module: u64,
    vm: u64,
    forward: u64,
    inputs: Vec<WireTensor>,
    want: Vec<f64>,
}

fn ret_handle(r: &Packet, type_index: i64, what: &str) -> R<u64> {
    match returned(r)?.as_slice() {
        [Arg::Int(t), Arg::OpaquePtr(h)] if *t == type_index => Ok(*h),
        other => Err(format!("{what}: {other:?}")),
    }
}

fn load_mlp(p: &Peer, zoo: &Path) -> R<Mlp> {
    let up = p.global("tvm.rpc.server.upload")?;
    let load = p.global("tvm.rpc.server.load_module")?;
    let getf = p.global("tvm.rpc.server.ModuleGetFunction")?;
    let lib = std::fs::read(zoo.join("mlp.so")).map_err(|e| e.to_string())?;
    let r = p.call(up, &[Arg::RawStr("mlp.so".into()), Arg::Bytes(lib)])?;
    ensure!(returned(&r)? == vec![Arg::Int(0), Arg::None], "upload mlp");
    let module = ret_handle(
        &p.call(load, &[Arg::RawStr("mlp.so".into())])?,
        73,
        "load mlp",
    )?;
    let get = |m: u64, name: &str| -> R<u64> {
        ret_handle(
            &p.call(
                getf,
                &[Arg::Module(m), Arg::RawStr(name.into()), Arg::Bool(true)],
            )?,
            68,
            name,
        )
    };
    let f = get(module, "vm_load_executable")?;
    let vm = ret_handle(&p.call(f, &[])?, 73, "vm_load_executable")?;
    p.free(f)?;
    let init = get(vm, "vm_initialization")?;
    let r = p.call(init, &[Arg::Int(1), Arg::Int(0), Arg::Int(2)])?;
    ensure!(
        returned(&r)? == vec![Arg::Int(0), Arg::None],
        "vm_initialization"
    );
    p.free(init)?;
    let forward = get(vm, "forward")?;
    let shapes: [Vec<i64>; 5] = [vec![2, 16], vec![32, 16], vec![32], vec![8, 32], vec![8]];
    let mut host = Vec::new();
    let mut inputs = Vec::new();
    for (k, shape) in shapes.iter().enumerate() {
        let n = shape.iter().product::<i64>() as usize;
        let v = values(n, k);
        let data = p.alloc(shape.clone())?;
        let t = f32_tensor(data, shape.clone(), 0);
        let r = p.copy_to(&t, &f32_bytes(&v))?;
        ensure!(returned(&r)? == vec![Arg::None], "input copy");
        host.push(v);
        inputs.push(t);
    }
    let want = mlp_oracle(&host[0], &host[1], &host[2], &host[3], &host[4]);
    for h in [up, load, getf] {
        p.free(h)?;
    }
    Ok(Mlp {
        module,
        vm,
        forward,
        inputs,
        want,
    })
}

/// Calls forward with the good inputs and checks the answer against the oracle; returns the
/// output's record and handle.
fn forward_ok(p: &Peer, m: &Mlp) -> R<(WireTensor, u64)> {
    let args: Vec<Arg> = m.inputs.iter().cloned().map(Arg::Tensor).collect();
    let r = p.call(m.forward, &args)?;
    let (rec, h) = match returned(&r)?.as_slice() {
        [Arg::Int(70), Arg::Tensor(t), Arg::OpaquePtr(h)] => (t.clone(), *h),
        other => return Err(format!("forward returned {other:?}")),
    };
    ensure!(rec.shape == vec![2, 8], "output shape {:?}", rec.shape);
    let r = p.copy_from(&rec, 64)?;
    ensure!(
        r.rpc_code() == Some(RpcCode::CopyAck),
        "reading the output: {r:?}"
    );
    let got = f32_of(&r.body);
    ensure!(
        close_to(&got, &m.want, 1e-4),
        "forward gave {got:?}, the oracle {:?}",
        m.want
    );
    Ok((rec, h))
}

fn model_argument_attacks(env: &Env, zoo: &Path) -> R<()> {
    let p = Peer::session(env)?;
    let m = load_mlp(&p, zoo)?;
    let (out, out_h) = forward_ok(&p, &m)?;
    let good: Vec<Arg> = m.inputs.iter().cloned().map(Arg::Tensor).collect();
    let with = |i: usize, a: Arg| {
        let mut v = good.clone();
        v[i] = a;
        v
    };
    let x = m.inputs[0].clone();
    let freed = p.alloc(vec![2, 16])?;
    ensure!(
        returned(&p.free_data(freed)?)? == vec![Arg::None],
        "kDevFreeData"
    );
    let huge_rank = WireTensor {
        shape: {
            let mut s = vec![2, 16];
            s.extend(std::iter::repeat_n(1, 998));
            s
        },
        ..x.clone()
    };
    let cases: Vec<(&str, Vec<Arg>)> = vec![
        ("no arguments", vec![]),
        ("four arguments", good[..4].to_vec()),
        ("six arguments", {
            let mut v = good.clone();
            v.push(good[4].clone());
            v
        }),
        (
            "data id of a function handle",
            with(
                0,
                Arg::Tensor(WireTensor {
                    data: m.forward,
                    ..x.clone()
                }),
            ),
        ),
        (
            "data id 0",
            with(
                0,
                Arg::Tensor(WireTensor {
                    data: 0,
                    ..x.clone()
                }),
            ),
        ),
        (
            "data id u64::MAX",
            with(
                0,
                Arg::Tensor(WireTensor {
                    data: u64::MAX,
                    ..x.clone()
                }),
            ),
        ),
        (
            "freed data id",
            with(
                0,
                Arg::Tensor(WireTensor {
                    data: freed,
                    ..x.clone()
                }),
            ),
        ),
        (
            "byte_offset past the allocation",
            with(
                0,
                Arg::Tensor(WireTensor {
                    byte_offset: 4,
                    ..x.clone()
                }),
            ),
        ),
        (
            "byte_offset u64::MAX",
            with(
                0,
                Arg::Tensor(WireTensor {
                    byte_offset: u64::MAX,
                    ..x.clone()
                }),
            ),
        ),
        (
            "negative dims",
            with(
                0,
                Arg::Tensor(WireTensor {
                    shape: vec![-2, -16],
                    ..x.clone()
                }),
            ),
        ),
        (
            "one negative dim",
            with(
                0,
                Arg::Tensor(WireTensor {
                    shape: vec![2, -16],
                    ..x.clone()
                }),
            ),
        ),
        (
            "overflowing shape",
            with(
                0,
                Arg::Tensor(WireTensor {
                    shape: vec![1 << 62, 4],
                    ..x.clone()
                }),
            ),
        ),
        ("rank 1000", with(0, Arg::Tensor(huge_rank))),
        (
            "same bytes, other shape",
            with(
                0,
                Arg::Tensor(WireTensor {
                    shape: vec![16, 2],
                    ..x.clone()
                }),
            ),
        ),
        (
            "smaller shape",
            with(
                0,
                Arg::Tensor(WireTensor {
                    shape: vec![1, 16],
                    ..x.clone()
                }),
            ),
        ),
        (
            "int32 dtype",
            with(
                0,
                Arg::Tensor(WireTensor {
                    dtype: WireDType {
                        code: 0,
                        bits: 32,
                        lanes: 1,
                    },
                    ..x.clone()
                }),
            ),
        ),
        (
            "float16 dtype",
            with(
                0,
                Arg::Tensor(WireTensor {
                    dtype: WireDType {
                        code: 2,
                        bits: 16,
                        lanes: 1,
                    },
                    ..x.clone()
                }),
            ),
        ),
        (
            "4 lanes",
            with(
                0,
                Arg::Tensor(WireTensor {
                    dtype: WireDType {
                        code: 2,
                        bits: 32,
                        lanes: 4,
                    },
                    shape: vec![2, 4],
                    ..x.clone()
                }),
            ),
        ),
        (
            "cuda device",
            with(
                0,
                Arg::Tensor(WireTensor {
                    device: Device {
                        device_type: 2,
                        device_id: 0,
                    },
                    ..x.clone()
                }),
            ),
        ),
        ("a string", with(0, Arg::RawStr("x".into()))),
        ("bytes", with(0, Arg::Bytes(vec![0; 128]))),
        ("an int", with(0, Arg::Int(3))),
        ("None", with(0, Arg::None)),
        ("a module handle", with(0, Arg::Module(m.module))),
        ("a function handle", with(0, Arg::Function(m.forward))),
        (
            "the output tensor (wrong shape)",
            with(
                0,
                Arg::ObjectRef {
                    type_index: 70,
                    handle: out_h,
                },
            ),
        ),
        (
            "an object ref to the VM",
            with(
                0,
                Arg::ObjectRef {
                    type_index: 69,
                    handle: m.vm,
                },
            ),
        ),
        ("a device", with(0, Arg::Device(Device::CPU))),
        (
            "an opaque pointer",
            with(0, Arg::OpaquePtr(0x7f00_0000_1000)),
        ),
    ];
    for (what, args) in &cases {
        p.refused(&format!("forward with {what}"), p.call(m.forward, args))?;
    }
    // The output is readable within its bounds only, and read-only.
    p.refused("copy into a returned tensor", p.copy_to(&out, &[0; 64]))?;
    p.refused("reading past a returned tensor", p.copy_from(&out, 65))?;
    p.refused(
        "reading past a returned tensor at an offset",
        p.copy_from(
            &WireTensor {
                byte_offset: 60,
                ..out.clone()
            },
            8,
        ),
    )?;
    p.free(out_h)?;
    p.refused("reading a freed output", p.copy_from(&out, 64))?;
    p.refused(
        "double free of an output",
        p.syscall(RpcCode::FreeHandle, &[Arg::OpaquePtr(out_h)]),
    )?;
    // The VM's own API with junk.
    let getf = p.global("tvm.rpc.server.ModuleGetFunction")?;
    let api = |name: &str| -> R<u64> {
        ret_handle(
            &p.call(
                getf,
                &[Arg::Module(m.vm), Arg::RawStr(name.into()), Arg::Bool(true)],
            )?,
            68,
            name,
        )
    };
    let s = |v: &str| Arg::RawStr(v.into());
    let junk: Vec<(&str, Vec<Arg>)> = vec![
        ("get_function_arity", vec![s("nope")]),
        ("get_function_arity", vec![]),
        (
            "get_function_param_name",
            vec![s("forward"), Arg::Int(1 << 40)],
        ),
        ("get_function_param_name", vec![s("forward"), Arg::Int(-1)]),
        ("get_output", vec![s("forward"), Arg::Int(-1)]),
        ("get_output", vec![s("nope")]),
        ("get_output_arity", vec![s("nope"), Arg::Int(i64::MAX)]),
        ("set_input", vec![s("forward"), Arg::Int(1)]),
        ("set_input", vec![s("nope")]),
        ("set_input", vec![]),
        ("invoke_stateful", vec![s("nope")]),
        ("invoke_stateful", vec![Arg::Int(0)]),
        ("save_function", vec![s("nope"), s("saved"), Arg::Int(1)]),
        (
            "save_function",
            vec![s("forward"), s("vm_initialization"), Arg::Int(1)],
        ),
        ("save_function", vec![]),
        ("invoke_closure", vec![Arg::Function(m.forward)]),
        (
            "vm_initialization",
            vec![Arg::Int(2), Arg::Int(0), Arg::Int(2)],
        ),
        ("vm_initialization", vec![Arg::Int(1), Arg::Int(0)]),
        (
            "vm_initialization",
            vec![Arg::Int(1 << 40), Arg::Int(0), Arg::Int(2)],
        ),
    ];
    for (name, args) in &junk {
        let f = api(name)?;
        p.refused(&format!("{name}{args:?}"), p.call(f, args))?;
        p.free(f)?;
    }
    // An absent function is None, not an error.
    let r = p.call(
        getf,
        &[
            Arg::Module(m.vm),
            Arg::RawStr("nope".into()),
            Arg::Bool(true),
        ],
    )?;
    ensure!(
        returned(&r)? == vec![Arg::Int(0), Arg::None],
        "ModuleGetFunction of an absent function: {r:?}"
    );
    // Import cycles.
    let import = p.global("tvm.rpc.server.ImportModule")?;
    p.refused(
        "a module importing itself",
        p.call(import, &[Arg::Module(m.vm), Arg::Module(m.vm)]),
    )?;
    let r = p.call(import, &[Arg::Module(m.vm), Arg::Module(m.module)])?;
    ensure!(
        returned(&r)? == vec![Arg::Int(0), Arg::None],
        "import: {r:?}"
    );
    p.refused(
        "an import cycle",
        p.call(import, &[Arg::Module(m.module), Arg::Module(m.vm)]),
    )?;
    // The time evaluator's parameters.
    let timer = p.global("runtime.RPCTimeEvaluator")?;
    let timer_args = |number: i64, repeat: i64, flush: i64, pre: &str| {
        vec![
            Arg::Module(m.vm),
            s("forward"),
            Arg::Int(1),
            Arg::Int(0),
            Arg::Int(number),
            Arg::Int(repeat),
            Arg::Int(0),
            Arg::Int(100),
            Arg::Int(0),
            Arg::Int(1),
            Arg::Int(flush),
            s(pre),
        ]
    };
    for (what, a) in [
        ("number 0", timer_args(0, 1, 0, "")),
        ("number -1", timer_args(-1, 1, 0, "")),
        ("repeat 0", timer_args(1, 0, 0, "")),
        ("repeat 2^30", timer_args(1, 1 << 30, 0, "")),
        ("repeat 2^40", timer_args(1, 1 << 40, 0, "")),
        (
            "cache flush 2 GiB",
            timer_args(1, 1, i64::from(i32::MAX), ""),
        ),
        ("negative cache flush", timer_args(1, 1, -1, "")),
    ] {
        let r = p.call(timer, &a)?;
        if r.rpc_code() == Some(RpcCode::Return) {
            // Accepted at creation: the call must then fail, never run away.
            let h = ret_handle(&r, 68, what)?;
            let t = Instant::now();
            p.refused(&format!("timer with {what}"), p.call(h, &good))?;
            ensure!(
                t.elapsed() < Duration::from_secs(5),
                "timer with {what} ran {:?}",
                t.elapsed()
            );
            p.free(h)?;
        } else {
            exception_text(&r).map_err(|e| format!("timer with {what}: {e}"))?;
        }
    }
    // An unknown f_preproc must not run anything; a sane timer works and its bytes are sane.
    let r = p.call(timer, &timer_args(1, 1, 0, "rm -rf /"))?;
    if r.rpc_code() == Some(RpcCode::Return) {
        let h = ret_handle(&r, 68, "f_preproc")?;
        p.refused("timer with an unknown f_preproc", p.call(h, &good))?;
        p.free(h)?;
    }
    let h = ret_handle(&p.call(timer, &timer_args(2, 3, 0, ""))?, 68, "timer")?;
    p.refused("timer with bad arguments", p.call(h, &with(0, Arg::Int(1))))?;
    let r = p.call(h, &good)?;
    match returned(&r)?.as_slice() {
        [Arg::Int(66), Arg::ByteArray(b)] if b.len() == 24 => {
            for c in b.chunks_exact(8) {
                let v = f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
                ensure!((0.0..1.0).contains(&v), "timer seconds {v}");
            }
        }
        other => return Err(format!("timer returned {other:?}")),
    }
    p.free(h)?;
    let prof = p.global("mote.profile")?;
    p.refused(
        "mote.profile with a forged tensor",
        p.call(
            prof,
            &[
                Arg::Module(m.vm),
                s("forward"),
                Arg::Tensor(WireTensor {
                    data: freed,
                    ..x.clone()
                }),
            ],
        ),
    )?;
    p.refused(
        "mote.profile of an absent function",
        p.call(prof, &[Arg::Module(m.vm), s("nope")]),
    )?;
    // After all that, forward still computes the right answer.
    let (_, h) = forward_ok(&p, &m)?;
    p.free(h)?;
    // Freeing the modules while a function handle lives: the function keeps working (each
    // handle owns a reference) or is refused; it never reaches freed memory.
    p.free(m.vm)?;
    p.free(m.module)?;
    let args: Vec<Arg> = m.inputs.iter().cloned().map(Arg::Tensor).collect();
    let r = p.call(m.forward, &args)?;
    if r.rpc_code() == Some(RpcCode::Return) {
        match returned(&r)?.as_slice() {
            [Arg::Int(70), Arg::Tensor(t), Arg::OpaquePtr(h)] => {
                let c = p.copy_from(t, 64)?;
                ensure!(
                    close_to(&f32_of(&c.body), &m.want, 1e-4),
                    "forward after its module was freed gave wrong values"
                );
                p.free(*h)?;
            }
            other => return Err(format!("forward after free: {other:?}")),
        }
    } else {
        exception_text(&r)?;
    }
    // Inputs freed while nothing holds them; a call naming them is refused.
    for t in &m.inputs {
        ensure!(
            returned(&p.free_data(t.data)?)? == vec![Arg::None],
            "kDevFreeData of an input"
        );
    }
    p.refused("forward on freed inputs", p.call(m.forward, &args))?;
    for h in [m.forward, getf, import, timer, prof] {
        p.free(h)?;
    }
    p.send(&wire::frame(RpcCode::Shutdown, &[]))?;
    p.expect_closed("shutdown", Duration::from_secs(5))?;
    Ok(())
}

/// gemm.so, a kernel-only library: its kernel writes into the caller's buffers, so every
/// record must be checked before the kernel sees it.
fn kernel_argument_attacks(env: &Env, zoo: &Path) -> R<()> {
    let p = Peer::session(env)?;
    let up = p.global("tvm.rpc.server.upload")?;
    let load = p.global("tvm.rpc.server.load_module")?;
    let getf = p.global("tvm.rpc.server.ModuleGetFunction")?;
    let lib = std::fs::read(zoo.join("gemm.so")).map_err(|e| e.to_string())?;
    let r = p.call(up, &[Arg::RawStr("gemm.so".into()), Arg::Bytes(lib)])?;
    ensure!(returned(&r)? == vec![Arg::Int(0), Arg::None], "upload gemm");
    let k = ret_handle(
        &p.call(load, &[Arg::RawStr("gemm.so".into())])?,
        73,
        "load gemm",
    )?;
    let g = ret_handle(
        &p.call(
            getf,
            &[Arg::Module(k), Arg::RawStr("gemm".into()), Arg::Bool(true)],
        )?,
        68,
        "gemm",
    )?;
    let a_v = values(64 * 32, 1);
    let b_v = values(32 * 48, 2);
    let a = f32_tensor(p.alloc(vec![64, 32])?, vec![64, 32], 0);
    let b = f32_tensor(p.alloc(vec![32, 48])?, vec![32, 48], 0);
    let c = f32_tensor(p.alloc(vec![64, 48])?, vec![64, 48], 0);
    let small = f32_tensor(p.alloc(vec![64, 47])?, vec![64, 48], 0);
    for (t, v) in [(&a, &a_v), (&b, &b_v)] {
        ensure!(
            returned(&p.copy_to(t, &f32_bytes(v))?)? == vec![Arg::None],
            "input copy"
        );
    }
    let sentinel = f32_bytes(&vec![-7.0; 64 * 48]);
    ensure!(
        returned(&p.copy_to(&c, &sentinel)?)? == vec![Arg::None],
        "output fill"
    );
    let t = |x: &WireTensor| Arg::Tensor(x.clone());
    for (what, args) in [
        (
            "an output record larger than its allocation",
            vec![t(&a), t(&b), t(&small)],
        ),
        (
            "an output at an offset past its allocation",
            vec![
                t(&a),
                t(&b),
                Arg::Tensor(WireTensor {
                    byte_offset: 4,
                    ..c.clone()
                }),
            ],
        ),
        (
            "an output naming a function handle",
            vec![
                t(&a),
                t(&b),
                Arg::Tensor(WireTensor {
                    data: g,
                    ..c.clone()
                }),
            ],
        ),
        ("a missing output", vec![t(&a), t(&b)]),
        (
            "an int32 output",
            vec![
                t(&a),
                t(&b),
                Arg::Tensor(WireTensor {
                    dtype: WireDType {
                        code: 0,
                        bits: 32,
                        lanes: 1,
                    },
                    ..c.clone()
                }),
            ],
        ),
        (
            "a transposed output",
            vec![
                t(&a),
                t(&b),
                Arg::Tensor(WireTensor {
                    shape: vec![48, 64],
                    ..c.clone()
                }),
            ],
        ),
        (
            "a string output",
            vec![t(&a), t(&b), Arg::RawStr("c".into())],
        ),
    ] {
        p.refused(&format!("gemm with {what}"), p.call(g, &args))?;
    }
    // None of the refused calls wrote the output.
    let r = p.copy_from(&c, 64 * 48 * 4)?;
    ensure!(r.body == sentinel, "a refused kernel call wrote its output");
    // The real call, against a naive product.
    let r = p.call(g, &[t(&a), t(&b), t(&c)])?;
    ensure!(returned(&r)? == vec![Arg::Int(0), Arg::None], "gemm: {r:?}");
    let got = f32_of(&p.copy_from(&c, 64 * 48 * 4)?.body);
    let want: Vec<f64> = (0..64)
        .flat_map(|i| {
            let (a_v, b_v) = (&a_v, &b_v);
            (0..48).map(move |j| {
                (0..32)
                    .map(|q| f64::from(a_v[i * 32 + q]) * f64::from(b_v[q * 48 + j]))
                    .sum::<f64>()
            })
        })
        .collect();
    ensure!(close_to(&got, &want, 1e-4), "gemm gave wrong values");
    for h in [g, k, up, load, getf] {
        p.free(h)?;
    }
    p.send(&wire::frame(RpcCode::Shutdown, &[]))?;
    p.expect_closed("shutdown", Duration::from_secs(5))?;
    Ok(())
}

/// Memory the client allocated and then freed with kDevFreeData, while a saved function
/// (`save_function`) still binds a view of it, is still held by the server. The session's
/// `max_remote_memory` must bound what the server holds for the client, so either the binding
/// keeps the bytes counted or later allocations are refused. Oracle: the process's resident
/// memory (each allocation is filled, so its pages are resident).
fn memory_kept_by_saved_functions(env: &Env, zoo: &Path) -> R<()> {
    let p = Peer::session(env)?;
    let m = load_mlp(&p, zoo)?;
    let getf = p.global("tvm.rpc.server.ModuleGetFunction")?;
    let save = ret_handle(
        &p.call(
            getf,
            &[
                Arg::Module(m.vm),
                Arg::RawStr("save_function".into()),
                Arg::Bool(true),
            ],
        )?,
        68,
        "save_function",
    )?;
    // The inputs of load_mlp take a few KiB of the budget; use what is left, in one block.
    let block = (MAX_MEMORY - 8192) / 4;
    let fill = vec![0x5a_u8; (block * 4) as usize];
    let rss0 = rss_bytes();
    let rounds = 24;
    let mut held = 0;
    for i in 0..rounds {
        let r = p.syscall(
            RpcCode::DevAllocDataWithScope,
            &[Arg::Tensor(f32_tensor(0, vec![block as i64], 0)), Arg::None],
        )?;
        let data = match returned(&r) {
            Ok(v) => match v.as_slice() {
                [Arg::OpaquePtr(h)] => *h,
                other => return Err(format!("alloc: {other:?}")),
            },
            Err(_) => break,
        };
        let t = f32_tensor(data, vec![block as i64], 0);
        ensure!(returned(&p.copy_to(&t, &fill)?)? == vec![Arg::None], "fill");
        // Bind a small view of the block as forward's last argument (fc2.bias, [8]).
        let view = f32_tensor(data, vec![8], 0);
        let r = p.call(
            save,
            &[
                Arg::RawStr("forward".into()),
                Arg::RawStr(format!("saved{i}")),
                Arg::Int(1),
                Arg::Tensor(view),
            ],
        )?;
        ensure!(
            returned(&r)? == vec![Arg::Int(0), Arg::None],
            "save_function: {r:?}"
        );
        ensure!(
            returned(&p.free_data(data)?)? == vec![Arg::None],
            "kDevFreeData"
        );
        held += 1;
    }
    let grown = rss_bytes().saturating_sub(rss0);
    println!(
        "saved functions: {held} blocks of {} KiB allocated, bound and freed; RSS +{} KiB \
         (limit {} KiB)",
        block * 4 / 1024,
        grown / 1024,
        MAX_MEMORY / 1024
    );
    ensure!(
        held <= 1 && (!rss_bounds() || grown <= MAX_MEMORY + (4 << 20)),
        "the server holds {held} blocks of {} KiB for this session (its memory limit is {} KiB; \
         resident memory grew {} KiB): kDevFreeData stopped counting memory a saved function \
         still binds",
        block * 4 / 1024,
        MAX_MEMORY / 1024,
        grown / 1024
    );
    Ok(())
}

/// Modules a session keeps alive only through imports (their handles freed) still count: a
/// client holding four handles must not be able to keep hundreds of VM modules, each a Mote
/// session with its own worker threads, alive. Oracle: the process's thread count.
fn modules_kept_alive_by_imports(env: &Env, zoo: &Path) -> R<()> {
    let tasks = || std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    let t0 = tasks();
    let p = Peer::session(env)?;
    let m = load_mlp(&p, zoo)?;
    let getf = p.global("tvm.rpc.server.ModuleGetFunction")?;
    let import = p.global("tvm.rpc.server.ImportModule")?;
    let make_vm = ret_handle(
        &p.call(
            getf,
            &[
                Arg::Module(m.module),
                Arg::RawStr("vm_load_executable".into()),
                Arg::Bool(true),
            ],
        )?,
        68,
        "vm_load_executable",
    )?;
    let limit = 256; // max_handles of this server
    let mut tail = m.vm;
    let mut made = 0;
    let mut refused = None;
    for i in 0..2 * limit {
        let r = p.call(make_vm, &[])?;
        if r.rpc_code() == Some(RpcCode::Exception) {
            refused = Some((i, exception_text(&r)?));
            break;
        }
        let vm = ret_handle(&r, 73, "vm_load_executable")?;
        let r = p.call(import, &[Arg::Module(tail), Arg::Module(vm)])?;
        ensure!(
            returned(&r)? == vec![Arg::Int(0), Arg::None],
            "import: {r:?}"
        );
        if tail != m.vm {
            p.free(tail)?;
        }
        tail = vm;
        made += 1;
    }
    let grown = tasks().saturating_sub(t0);
    println!(
        "note: {made} VM modules kept alive through imports with 6 handles; threads +{grown}; \
         refused: {refused:?}"
    );
    ensure!(
        refused.is_some() && made < limit,
        "{made} VM modules alive through imports (the session's max_handles is {limit}); the \
         process gained {grown} threads"
    );
    Ok(())
}

/// A small PRNG (splitmix64) for the request fuzzer.
struct Prng(u64);

impl Prng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        if v.is_empty() {
            None
        } else {
            Some(&v[self.below(v.len())])
        }
    }
}

/// Thousands of random but well-framed requests in one session with a model loaded: every
/// code, every global, handles and data ids harvested from earlier answers (live, freed, of the
/// wrong kind), random arguments. Every request must get exactly one answer of the right kind,
/// and the session must go on. Integers come from a small set so that no time evaluation can
/// ask for hours. `MOTE_HOSTILE_REQUESTS` (default 20,000) and `MOTE_HOSTILE_SEED` vary it.
fn random_requests(env: &Env, zoo: &Path) -> R<()> {
    let iters: usize = std::env::var("MOTE_HOSTILE_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let seed: u64 = std::env::var("MOTE_HOSTILE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x686f_7374_696c_6531);
    let p = Peer::session(env)?;
    let m = load_mlp(&p, zoo)?;
    let mut rng = Prng(seed);
    let mut handles: Vec<u64> = vec![m.module, m.vm, m.forward];
    let mut data: Vec<u64> = m.inputs.iter().map(|t| t.data).collect();
    let globals = [
        "tvm.rpc.server.upload",
        "tvm.rpc.server.download",
        "tvm.rpc.server.remove",
        "tvm.rpc.server.load_module",
        "tvm.rpc.server.ModuleGetFunction",
        "tvm.rpc.server.ImportModule",
        "runtime.RPCTimeEvaluator",
        "mote.profile",
        "mote.trace",
        "no.such",
    ];
    let words = [
        "forward",
        "vm_load_executable",
        "vm_initialization",
        "set_input",
        "invoke_stateful",
        "get_output",
        "get_output_arity",
        "get_function_arity",
        "get_function_param_name",
        "save_function",
        "invoke_closure",
        "set_instrument",
        "stats",
        "has_function",
        "mlp.so",
        "x.bin",
        "../x",
        "",
        "cache_flush_cpu_non_first_arg",
        "global",
    ];
    let ints = [0i64, 1, 2, 3, 8, -1, 1 << 40, i64::MIN];
    let (mut answered, mut returns, mut copies) = (0usize, 0usize, 0usize);
    let t = Instant::now();
    for i in 0..iters {
        let shapes = [
            vec![2, 16],
            vec![32, 16],
            vec![32],
            vec![8, 32],
            vec![8],
            vec![-1],
            vec![],
            vec![0],
            vec![0, 16],
            vec![2, 0, 16],
        ];
        let tensor = |rng: &mut Prng, data: &[u64], handles: &[u64]| -> WireTensor {
            let d = match rng.below(4) {
                0 => *rng.pick(handles).unwrap_or(&0),
                1 => rng.next(),
                _ => *rng.pick(data).unwrap_or(&0),
            };
            WireTensor {
                data: d,
                byte_offset: [0, 4, 64, u64::MAX][rng.below(4)],
                ..f32_tensor(d, rng.pick(&shapes).cloned().unwrap_or_default(), 0)
            }
        };
        let arg = |rng: &mut Prng, data: &[u64], handles: &[u64]| -> Arg {
            let h = *rng.pick(handles).unwrap_or(&0);
            match rng.below(12) {
                0 => Arg::None,
                1 | 2 => Arg::Int(ints[rng.below(ints.len())]),
                3 => Arg::Bool(rng.below(2) == 1),
                4 | 5 => Arg::RawStr(words[rng.below(words.len())].into()),
                6 | 7 => Arg::Tensor(tensor(rng, data, handles)),
                8 => Arg::Module(h),
                9 => Arg::Function(h),
                10 => Arg::ObjectRef {
                    type_index: 70,
                    handle: h,
                },
                _ => Arg::Bytes(vec![0x7f; rng.below(16)]),
            }
        };
        let action = rng.below(12);
        let (code, body): (RpcCode, Vec<u8>) = match action {
            0 => (
                RpcCode::GetGlobalFunc,
                encode_seq(&[Arg::RawStr(globals[rng.below(globals.len())].into())]),
            ),
            1..=4 => {
                let h = if rng.below(8) == 0 {
                    rng.next()
                } else {
                    *rng.pick(&handles).unwrap_or(&0)
                };
                let n = rng.below(6);
                let args: Vec<Arg> = (0..n).map(|_| arg(&mut rng, &data, &handles)).collect();
                (RpcCode::CallFunc, call_body(h, &args))
            }
            5 => {
                let h = *rng.pick(&handles).unwrap_or(&0);
                (RpcCode::FreeHandle, encode_seq(&[Arg::OpaquePtr(h)]))
            }
            6 => (
                RpcCode::DevAllocDataWithScope,
                encode_seq(&[Arg::Tensor(tensor(&mut rng, &[0], &[0])), Arg::None]),
            ),
            7 => {
                let d = *rng.pick(&data).unwrap_or(&0);
                (
                    RpcCode::DevFreeData,
                    encode_seq(&[Arg::Device(Device::CPU), Arg::OpaquePtr(d)]),
                )
            }
            8 => {
                let mut b = Vec::new();
                b.put_tensor(&tensor(&mut rng, &data, &handles));
                b.put_bytes(&vec![0x11; [0, 4, 64, 128, 129][rng.below(5)]]);
                (RpcCode::CopyToRemote, b)
            }
            9 => {
                let mut b = Vec::new();
                b.put_tensor(&tensor(&mut rng, &data, &handles));
                b.put_u64([0, 4, 64, 128, 129, u64::MAX][rng.below(6)]);
                (RpcCode::CopyFromRemote, b)
            }
            10 => {
                let codes = [11, 12, 13, 14, 15, 16, 18, 19, 20, 21];
                let code =
                    RpcCode::from_i32(codes[rng.below(codes.len())]).unwrap_or(RpcCode::None);
                let n = rng.below(4);
                let mut args: Vec<Arg> = vec![Arg::Device(Device::CPU)];
                args.extend((0..n).map(|_| arg(&mut rng, &data, &handles)));
                (code, encode_seq(&args))
            }
            _ => {
                // A valid sequence, cut or extended by a few bytes.
                let codes = [3, 9, 10, 13, 14, 17];
                let code =
                    RpcCode::from_i32(codes[rng.below(codes.len())]).unwrap_or(RpcCode::None);
                let mut b = encode_seq(&[
                    arg(&mut rng, &data, &handles),
                    arg(&mut rng, &data, &handles),
                ]);
                if rng.below(2) == 0 {
                    b.truncate(b.len().saturating_sub(1 + rng.below(8)));
                } else {
                    b.extend_from_slice(&[0xff; 3]);
                }
                (code, b)
            }
        };
        let r = p
            .request(code, &body)
            .map_err(|e| format!("request {i} ({code:?}): {e}"))?;
        answered += 1;
        match r.rpc_code() {
            Some(RpcCode::Exception) => {
                exception_text(&r).map_err(|e| format!("request {i}: {e}"))?;
            }
            Some(RpcCode::CopyAck) if code == RpcCode::CopyFromRemote => copies += 1,
            Some(RpcCode::Return) => {
                returns += 1;
                let v = seq_of(&r)?;
                match (code, v.as_slice()) {
                    (RpcCode::GetGlobalFunc, [Arg::OpaquePtr(h)]) if *h != 0 => handles.push(*h),
                    (RpcCode::DevAllocDataWithScope, [Arg::OpaquePtr(d)]) => data.push(*d),
                    (RpcCode::FreeHandle, [Arg::None]) => {}
                    (RpcCode::CallFunc, [Arg::Int(_), Arg::OpaquePtr(h)]) => handles.push(*h),
                    (RpcCode::CallFunc, [Arg::Int(70), Arg::Tensor(t), Arg::OpaquePtr(h)]) => {
                        handles.push(*h);
                        data.push(t.data);
                    }
                    (RpcCode::CallFunc, [Arg::Int(_), _]) => {}
                    (RpcCode::CallFunc, other) => {
                        return Err(format!("request {i}: kCallFunc returned {other:?}"))
                    }
                    (_, [_]) => {}
                    (_, other) => return Err(format!("request {i} ({code:?}) returned {other:?}")),
                }
            }
            _ => return Err(format!("request {i} ({code:?}) was answered with {r:?}")),
        }
        // Keep the pools small: stale ids stay in (they test freed handles); old ones are
        // freed (an error for those already freed) and forgotten.
        if handles.len() > 150 {
            let old: Vec<(RpcCode, Vec<u8>)> = handles
                .drain(..50)
                .map(|h| (RpcCode::FreeHandle, encode_seq(&[Arg::OpaquePtr(h)])))
                .collect();
            p.pipeline(&old)?;
        }
        if data.len() > 60 {
            let old: Vec<(RpcCode, Vec<u8>)> = data
                .drain(..20)
                .map(|d| {
                    (
                        RpcCode::DevFreeData,
                        encode_seq(&[Arg::Device(Device::CPU), Arg::OpaquePtr(d)]),
                    )
                })
                .collect();
            p.pipeline(&old)?;
        }
    }
    let h = p.global("tvm.rpc.server.upload")?;
    p.free(h)?;
    println!(
        "note: {answered} random requests answered in {:?} ({returns} returns, {copies} copies, \
         the rest exceptions)",
        t.elapsed()
    );
    Ok(())
}

/// A time evaluation asked to run for ever (2^31 - 1 calls per repeat, or a 24-day cooldown)
/// must end at the client's `-timeout` with `RPCSessionTimeoutError`, like any session.
fn runaway_timers(env: &Env, zoo: &Path) -> R<()> {
    for (what, number, cooldown) in [
        ("2^31-1 calls", i64::from(i32::MAX), 0),
        ("a 24-day cooldown", 1, i64::from(i32::MAX)),
    ] {
        let p = Peer::session_with(env, &format!("client:{KEY} -timeout=1"))?;
        let m = load_mlp(&p, zoo)?;
        let timer = p.global("runtime.RPCTimeEvaluator")?;
        let args = vec![
            Arg::Module(m.vm),
            Arg::RawStr("forward".into()),
            Arg::Int(1),
            Arg::Int(0),
            Arg::Int(number),
            Arg::Int(2),
            Arg::Int(0),
            Arg::Int(100),
            Arg::Int(cooldown),
            Arg::Int(1),
            Arg::Int(0),
            Arg::RawStr(String::new()),
        ];
        let h = ret_handle(&p.call(timer, &args)?, 68, "timer")?;
        let good: Vec<u8> = {
            let mut b = Vec::new();
            b.put_u64(h);
            b.extend_from_slice(&encode_seq(
                &m.inputs
                    .iter()
                    .cloned()
                    .map(Arg::Tensor)
                    .collect::<Vec<_>>(),
            ));
            b
        };
        let t = Instant::now();
        p.send(&wire::frame(RpcCode::CallFunc, &good))?;
        let got = p.expect_closed(
            &format!("timer with {what}"),
            Duration::from_secs(1) + SLACK,
        )?;
        let e = wire::read_packet(&mut &got[..], 1 << 20)
            .map_err(|e| format!("timer with {what}: no exception before the close ({e})"))?;
        let text = exception_text(&e)?;
        ensure!(
            text.starts_with(wire::TIMEOUT_ERROR_PREFIX),
            "timer with {what}: {text:?} after {:?}",
            t.elapsed()
        );
    }
    Ok(())
}

/// `stop()` while a session runs a time evaluation that would last for ever returns promptly.
fn stop_during_a_runaway_timer(env: Env, zoo: &Path) -> R<()> {
    let p = Peer::session(&env)?;
    let m = load_mlp(&p, zoo)?;
    let timer = p.global("runtime.RPCTimeEvaluator")?;
    let args = vec![
        Arg::Module(m.vm),
        Arg::RawStr("forward".into()),
        Arg::Int(1),
        Arg::Int(0),
        Arg::Int(i64::from(i32::MAX)),
        Arg::Int(1),
        Arg::Int(0),
        Arg::Int(100),
        Arg::Int(0),
        Arg::Int(1),
        Arg::Int(0),
        Arg::RawStr(String::new()),
    ];
    let h = ret_handle(&p.call(timer, &args)?, 68, "timer")?;
    let mut b = Vec::new();
    b.put_u64(h);
    b.extend_from_slice(&encode_seq(
        &m.inputs
            .iter()
            .cloned()
            .map(Arg::Tensor)
            .collect::<Vec<_>>(),
    ));
    p.send(&wire::frame(RpcCode::CallFunc, &b))?;
    std::thread::sleep(Duration::from_millis(300));
    let root = env.root.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = Instant::now();
    let stopper = std::thread::spawn(move || {
        env.server.stop();
        let _ = tx.send(());
    });
    let prompt = rx.recv_timeout(Duration::from_secs(3)).is_ok();
    let took = t.elapsed();
    // Closing our end cannot end the evaluation either; if stop() hangs, so does this test.
    drop(p);
    let _ = stopper.join();
    ensure!(prompt, "stop() took {took:?} while a time evaluation ran");
    ensure!(
        dir_entries(&root).is_empty(),
        "sandbox folders left after stop: {:?}",
        dir_entries(&root)
    );
    Ok(())
}

#[test]
fn hostile_arguments_to_loaded_models() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let zoo = zoo_dir();
    let base = std::env::temp_dir().join(format!("mote-hostile-models-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let limits = Limits {
        max_packet: 4 << 20,
        max_upload_file: 1 << 20,
        max_sandbox_bytes: 4 << 20,
        max_handles: 256,
        ..limits()
    };
    // Two threads per Mote session: each VM module has a worker thread, which
    // modules_kept_alive_by_imports counts.
    let mut env = Env::with_threads(base.join("root"), limits, 2);
    normal_client(&env).expect("a normal client before any attack");
    env.wait_idle(Duration::from_secs(5)).expect("idle");
    std::thread::sleep(Duration::from_millis(100));
    env.fds = open_fds();
    let mut failures = Vec::new();
    type ModelAttack = fn(&Env, &Path) -> R<()>;
    let attacks: [(&str, ModelAttack); 7] = [
        ("mlp arguments", model_argument_attacks),
        ("gemm arguments", kernel_argument_attacks),
        ("runaway time evaluations", runaway_timers),
        (
            "memory kept by saved functions",
            memory_kept_by_saved_functions,
        ),
        (
            "an import cycle deeper than 64",
            import_cycle_deeper_than_64,
        ),
        (
            "modules kept alive by imports",
            modules_kept_alive_by_imports,
        ),
        ("random requests", random_requests),
    ];
    for (name, attack) in attacks {
        if let Err(e) = attack(&env, &zoo) {
            failures.push(format!("{name}: {e}"));
        }
        if let Err(e) = env.at_baseline() {
            failures.push(format!("after {name}: {e}"));
        }
        if let Err(e) = normal_client(&env) {
            failures.push(format!("after {name}: a normal client failed: {e}"));
        }
    }
    if let Err(e) = env.at_baseline() {
        failures.push(format!("at the end: {e}"));
    }
    if let Err(e) = stop_during_a_runaway_timer(env, &zoo) {
        failures.push(format!("stop during a runaway time evaluation: {e}"));
    }
    let _ = std::fs::remove_dir_all(&base);
    assert!(
        failures.is_empty(),
        "{} defence(s) failed:\n- {}",
        failures.len(),
        failures.join("\n- ")
    );
}

/// Re-uploading a file under the name of a library a session has loaded (what a user does
/// after recompiling a model) must neither crash the server nor change the loaded model: the
/// loaded module keeps computing the old function, and loading the name again gives the new
/// file. Runs in a child process, since a failure here kills the process (the server is
/// in-process).
fn reupload_of_a_loaded_library(zoo: &Path) -> R<()> {
    let base = std::env::temp_dir().join(format!("mote-hostile-reupload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let limits = Limits {
        max_packet: 4 << 20,
        max_upload_file: 1 << 20,
        max_sandbox_bytes: 4 << 20,
        ..limits()
    };
    let mut env = Env::new(base.join("root"), limits);
    normal_client(&env)?;
    env.wait_idle(Duration::from_secs(5))?;
    std::thread::sleep(Duration::from_millis(100));
    env.fds = open_fds();
    let p = Peer::session(&env)?;
    let m = load_mlp(&p, zoo)?;
    let (_, h) = forward_ok(&p, &m)?;
    p.free(h)?;
    let up = p.global("tvm.rpc.server.upload")?;
    let load = p.global("tvm.rpc.server.load_module")?;
    let getf = p.global("tvm.rpc.server.ModuleGetFunction")?;
    let gemm = std::fs::read(zoo.join("gemm.so")).map_err(|e| e.to_string())?;
    let r = p.call(up, &[Arg::RawStr("mlp.so".into()), Arg::Bytes(gemm)])?;
    ensure!(
        returned(&r)? == vec![Arg::Int(0), Arg::None],
        "re-upload: {r:?}"
    );
    // The loaded model is untouched.
    let (_, h) = forward_ok(&p, &m)?;
    p.free(h)?;
    // Loading the name again: the new file (a kernel library with `gemm`), or, while the old
    // library is still loaded from that path, the old one again (the system loader returns a
    // library it already has open under the same path; TVM's server behaves the same). Either
    // way a working module, never a mixture.
    let k = ret_handle(
        &p.call(load, &[Arg::RawStr("mlp.so".into())])?,
        73,
        "load the re-uploaded file",
    )?;
    let lookup = |name: &str| -> R<Vec<Arg>> {
        returned(&p.call(
            getf,
            &[Arg::Module(k), Arg::RawStr(name.into()), Arg::Bool(true)],
        )?)
    };
    let g = match (
        lookup("gemm")?.as_slice(),
        lookup("vm_load_executable")?.as_slice(),
    ) {
        ([Arg::Int(68), Arg::OpaquePtr(g)], [Arg::Int(0), Arg::None]) => {
            println!("note: re-upload: loading the name again gives the new file");
            *g
        }
        ([Arg::Int(0), Arg::None], [Arg::Int(68), Arg::OpaquePtr(f)]) => {
            println!("note: re-upload: loading the name again gives the library already loaded");
            *f
        }
        (a, b) => {
            return Err(format!(
                "the reloaded module answers gemm {a:?}, vm_load_executable {b:?}"
            ))
        }
    };
    // Removing a loaded file is harmless too.
    let rm = p.global("tvm.rpc.server.remove")?;
    let r = p.call(rm, &[Arg::RawStr("mlp.so".into())])?;
    ensure!(
        returned(&r)? == vec![Arg::Int(0), Arg::None],
        "remove: {r:?}"
    );
    let (_, h) = forward_ok(&p, &m)?;
    p.free(h)?;
    for h in [g, k, up, load, getf, rm, m.forward, m.vm, m.module] {
        p.free(h)?;
    }
    p.send(&wire::frame(RpcCode::Shutdown, &[]))?;
    p.expect_closed("shutdown", Duration::from_secs(5))?;
    drop(p);
    env.at_baseline()?;
    normal_client(&env)?;
    env.server.stop();
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// Runs `body` in a child process (this test binary, running only the test `name`, with
/// `MOTE_HOSTILE_CHILD` set), so that a crash or a hang of the in-process server cannot take the
/// other tests down. The child exits at once with status 3 when `body` fails (a server thread
/// that hangs would otherwise hang the child's own `stop()`); the parent kills it after `limit`.
fn child_test(name: &str, limit: Duration, body: impl FnOnce() -> R<()>) {
    if std::env::var_os("MOTE_HOSTILE_CHILD").is_some() {
        if let Err(e) = body() {
            eprintln!("ATTACK FAILED: {e}");
            std::process::exit(3);
        }
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    zoo_dir();
    let dir =
        std::env::temp_dir().join(format!("mote-hostile-child-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let (out_path, err_path) = (dir.join("stdout"), dir.join("stderr"));
    let exe = std::env::current_exe().expect("test binary");
    let mut child = std::process::Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("MOTE_HOSTILE_CHILD", "1")
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("the test binary runs");
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let tail: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("[INFO]"))
        .collect();
    let tail = tail[tail.len().saturating_sub(12)..].join("\n");
    match status {
        None => {
            panic!("{name}: the server's process was still busy after {limit:?} (killed):\n{tail}")
        }
        Some(st) => assert!(
            st.success() && stdout.contains("1 passed"),
            "{name}: the server's process ended with {st:?}:\n{tail}"
        ),
    }
    // (libtest prints the test's name first, so a note may start mid-line.)
    for l in stdout
        .lines()
        .filter_map(|l| l.find("note: ").map(|i| &l[i..]))
    {
        println!("{l}");
    }
}

#[test]
fn reuploading_a_loaded_library_keeps_the_server_alive() {
    child_test(
        "reuploading_a_loaded_library_keeps_the_server_alive",
        Duration::from_secs(60),
        || reupload_of_a_loaded_library(&zoo_dir()),
    );
}

/// Modules importing each other twice per level make a graph with 2^levels paths. The cycle
/// check (`ImportModule`) and the import search (`ModuleGetFunction(.., query_imports)`) must
/// not walk every path: each request is answered within a second or two, and the session (and
/// so `stop()`) is never stuck in a traversal.
fn import_graph_with_exponentially_many_paths(zoo: &Path) -> R<()> {
    let base = std::env::temp_dir().join(format!("mote-hostile-imports-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let limits = Limits {
        max_packet: 4 << 20,
        max_upload_file: 1 << 20,
        max_sandbox_bytes: 4 << 20,
        max_handles: 256,
        ..limits()
    };
    let env = Env::new(base.join("root"), limits);
    let p = Peer::session(&env)?;
    p.s.set_read_timeout(Some(Duration::from_secs(3)))
        .map_err(|e| e.to_string())?;
    let up = p.global("tvm.rpc.server.upload")?;
    let load = p.global("tvm.rpc.server.load_module")?;
    let import = p.global("tvm.rpc.server.ImportModule")?;
    let getf = p.global("tvm.rpc.server.ModuleGetFunction")?;
    let lib = std::fs::read(zoo.join("gemm.so")).map_err(|e| e.to_string())?;
    let r = p.call(up, &[Arg::RawStr("g.so".into()), Arg::Bytes(lib)])?;
    ensure!(returned(&r)? == vec![Arg::Int(0), Arg::None], "upload");
    const LEVELS: usize = 48;
    let mut mods = Vec::new();
    for _ in 0..=LEVELS {
        mods.push(ret_handle(
            &p.call(load, &[Arg::RawStr("g.so".into())])?,
            73,
            "load",
        )?);
    }
    // Bottom up, each level imports the next one twice.
    for i in (0..LEVELS).rev() {
        for _ in 0..2 {
            let t = Instant::now();
            let r = p
                .call(import, &[Arg::Module(mods[i]), Arg::Module(mods[i + 1])])
                .map_err(|e| format!("ImportModule at level {i}: {e} after {:?}", t.elapsed()))?;
            ensure!(
                returned(&r)? == vec![Arg::Int(0), Arg::None],
                "ImportModule at level {i}: {r:?}"
            );
            ensure!(
                t.elapsed() < Duration::from_secs(2),
                "ImportModule at level {i} took {:?}",
                t.elapsed()
            );
        }
    }
    let t = Instant::now();
    let r = p
        .call(
            getf,
            &[
                Arg::Module(mods[0]),
                Arg::RawStr("nope".into()),
                Arg::Bool(true),
            ],
        )
        .map_err(|e| {
            format!(
                "ModuleGetFunction over the graph: {e} after {:?}",
                t.elapsed()
            )
        })?;
    ensure!(
        returned(&r)? == vec![Arg::Int(0), Arg::None],
        "ModuleGetFunction over the graph: {r:?}"
    );
    let r = p
        .call(import, &[Arg::Module(mods[LEVELS]), Arg::Module(mods[0])])
        .map_err(|e| format!("closing a cycle over the graph: {e}"))?;
    p.refused("closing a cycle over the graph", Ok(r))?;
    drop(p);
    let t = Instant::now();
    env.server.stop();
    ensure!(
        t.elapsed() < Duration::from_secs(3),
        "stop() took {:?}",
        t.elapsed()
    );
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

#[test]
fn import_graphs_are_not_walked_path_by_path() {
    child_test(
        "import_graphs_are_not_walked_path_by_path",
        Duration::from_secs(90),
        || import_graph_with_exponentially_many_paths(&zoo_dir()),
    );
}

/// A chain of imports deeper than any traversal limit, closed into a cycle, must still be
/// refused as a cycle (docs/rpc.md "Global functions": cycles refused).
fn import_cycle_deeper_than_64(env: &Env, zoo: &Path) -> R<()> {
    let p = Peer::session(env)?;
    let up = p.global("tvm.rpc.server.upload")?;
    let load = p.global("tvm.rpc.server.load_module")?;
    let import = p.global("tvm.rpc.server.ImportModule")?;
    let lib = std::fs::read(zoo.join("gemm.so")).map_err(|e| e.to_string())?;
    let r = p.call(up, &[Arg::RawStr("g.so".into()), Arg::Bytes(lib)])?;
    ensure!(returned(&r)? == vec![Arg::Int(0), Arg::None], "upload");
    let mut mods = Vec::new();
    for _ in 0..80 {
        mods.push(ret_handle(
            &p.call(load, &[Arg::RawStr("g.so".into())])?,
            73,
            "load",
        )?);
    }
    for w in mods.windows(2) {
        let r = p.call(import, &[Arg::Module(w[0]), Arg::Module(w[1])])?;
        ensure!(
            returned(&r)? == vec![Arg::Int(0), Arg::None],
            "import: {r:?}"
        );
    }
    p.refused(
        "a cycle through 80 modules",
        p.call(import, &[Arg::Module(mods[79]), Arg::Module(mods[0])]),
    )?;
    Ok(())
}

impl Peer {
    /// Sends all `requests` (code, body) before reading their answers, for speed.
    fn pipeline(&self, requests: &[(RpcCode, Vec<u8>)]) -> R<Vec<Packet>> {
        let mut out = Vec::new();
        for (code, body) in requests {
            out.extend_from_slice(&wire::frame(*code, body));
        }
        self.send(&out)?;
        (0..requests.len()).map(|_| self.read_reply()).collect()
    }
}

fn call_body(h: u64, args: &[Arg]) -> Vec<u8> {
    let mut b = Vec::new();
    b.put_u64(h);
    b.extend_from_slice(&encode_seq(args));
    b
}

/// A chain of modules, each importing the next, built while holding three handles (an import
/// keeps its child alive after the child's handle is freed). When the session ends the chain
/// is freed; a recursive drop of thousands of nested modules would overflow the session
/// thread's stack and abort the whole server.
fn deep_import_chain(zoo: &Path, depth: usize) -> R<()> {
    let base = std::env::temp_dir().join(format!("mote-hostile-chain-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let limits = Limits {
        max_packet: 4 << 20,
        max_upload_file: 1 << 20,
        max_sandbox_bytes: 4 << 20,
        max_handles: 256,
        ..limits()
    };
    let env = Env::new(base.join("root"), limits);
    let p = Peer::session(&env)?;
    let up = p.global("tvm.rpc.server.upload")?;
    let load = p.global("tvm.rpc.server.load_module")?;
    let import = p.global("tvm.rpc.server.ImportModule")?;
    let lib = std::fs::read(zoo.join("gemm.so")).map_err(|e| e.to_string())?;
    let r = p.call(up, &[Arg::RawStr("g.so".into()), Arg::Bytes(lib)])?;
    ensure!(returned(&r)? == vec![Arg::Int(0), Arg::None], "upload");
    let name = || vec![Arg::RawStr("g.so".into())];
    let root = ret_handle(&p.call(load, &name())?, 73, "load")?;
    let mut tail = root;
    let mut built = 0;
    let t = Instant::now();
    while built < depth {
        let n = (depth - built).min(100);
        let loads: Vec<(RpcCode, Vec<u8>)> = (0..n)
            .map(|_| (RpcCode::CallFunc, call_body(load, &name())))
            .collect();
        let mut new = Vec::new();
        let mut refused = None;
        for r in p.pipeline(&loads)? {
            if r.rpc_code() == Some(RpcCode::Exception) {
                refused.get_or_insert(exception_text(&r)?);
                continue;
            }
            new.push(ret_handle(&r, 73, "load")?);
        }
        if let Some(e) = refused {
            // The session bounds the modules it keeps alive: nothing deep to free. Release
            // what this batch made and go on to the end of the session.
            println!("note: import chain refused after {built} modules: {e}");
            let frees: Vec<(RpcCode, Vec<u8>)> = new
                .iter()
                .map(|&m| (RpcCode::FreeHandle, encode_seq(&[Arg::OpaquePtr(m)])))
                .collect();
            p.pipeline(&frees)?;
            ensure!(
                built <= 256,
                "the chain was refused only after {built} modules (max_handles 256)"
            );
            break;
        }
        let mut links = Vec::new();
        let mut frees = Vec::new();
        for &m in &new {
            links.push((
                RpcCode::CallFunc,
                call_body(import, &[Arg::Module(tail), Arg::Module(m)]),
            ));
            if tail != root {
                frees.push((RpcCode::FreeHandle, encode_seq(&[Arg::OpaquePtr(tail)])));
            }
            tail = m;
        }
        for r in p.pipeline(&links)? {
            ensure!(
                returned(&r)? == vec![Arg::Int(0), Arg::None],
                "import: {r:?}"
            );
        }
        for r in p.pipeline(&frees)? {
            ensure!(returned(&r)? == vec![Arg::None], "free: {r:?}");
        }
        built += n;
    }
    println!(
        "note: import chain of {built} modules (of {depth} asked) built in {:?}",
        t.elapsed()
    );
    // The whole chain answers a lookup from its root (the deepest module has `gemm`).
    let getf = p.global("tvm.rpc.server.ModuleGetFunction")?;
    let r = p.call(
        getf,
        &[
            Arg::Module(root),
            Arg::RawStr("gemm".into()),
            Arg::Bool(true),
        ],
    )?;
    ret_handle(&r, 68, "gemm through the chain")?;
    // Freeing the root frees the chain, in the session thread.
    p.free(root)?;
    p.send(&wire::frame(RpcCode::Shutdown, &[]))?;
    p.expect_closed("shutdown", Duration::from_secs(10))?;
    drop(p);
    env.wait_idle(Duration::from_secs(10))?;
    normal_client(&env)?;
    env.server.stop();
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

#[test]
fn a_deep_import_chain_is_freed_without_overflowing_the_stack() {
    child_test(
        "a_deep_import_chain_is_freed_without_overflowing_the_stack",
        Duration::from_secs(120),
        || deep_import_chain(&zoo_dir(), 10_000),
    );
}
