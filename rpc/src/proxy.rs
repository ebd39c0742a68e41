//! Proxy mode: serve through a TVM RPC proxy (`--through-proxy HOST:PORT --key K`), for
//! devices that clients cannot reach directly.
//!
//! Protocol (docs/rpc.md "Proxy mode"): the server connects to
//! the proxy and sends the client handshake shape with `"server:K"`. The proxy answers once a
//! client with key `"client:K ..."` arrives: SUCCESS followed by the client's *full* key (its
//! options, e.g. `-timeout=30`, included), then forwards bytes both ways, so the socket becomes
//! an ordinary session socket starting with the client's `kInitServer`. An unmatched server is
//! sent MISMATCH after the proxy's timeout (600 s by default); a second server waiting under
//! the same key is sent DUPLICATE.
//!
//! Because the proxy refuses a second waiting server with the same key, only one connection
//! waits at a time: the thread takes a free [`Slot`], waits at the proxy, hands the paired
//! socket and the slot to the session callback on a new thread, and then waits again with the
//! next free slot.

use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::background::{lock, Background};
use crate::slots::{Slot, Slots};
use crate::tracker::{connect, read_full, sleep_unless, TrackerError, STOP_CHECK};
use crate::wire::{CODE_DUPLICATE, CODE_MISMATCH, CODE_SUCCESS, MAX_KEY_LEN, RPC_MAGIC};

/// Runs one session on a paired socket: `(socket, client key, slot)`. The client key is the
/// full string the client sent, e.g. `"client:K -timeout=30"`; its options apply to the
/// session. The socket is blocking (no timeouts). Dropping the slot frees the place.
pub type SessionFn = Arc<dyn Fn(TcpStream, String, Slot) + Send + Sync>;

/// Why one wait at the proxy ended without a client.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Net(#[from] TrackerError),
    #[error("proxy has no client for this key yet (MISMATCH)")]
    Mismatch,
    #[error("proxy already has a server waiting with key {0:?} (DUPLICATE)")]
    Duplicate(String),
    #[error("peer is not a TVM RPC proxy (reply {0:#x})")]
    NotProxy(i32),
    #[error("proxy sent a client key of {0} bytes")]
    BadKeyLength(i32),
    #[error("client key is not UTF-8")]
    KeyNotUtf8,
    #[error("proxy I/O: {0}")]
    Io(#[from] io::Error),
}

/// Settings of a proxy client.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// `HOST:PORT` of the proxy.
    pub proxy: String,
    /// The server's `--key` (no `"server:"` prefix).
    pub key: String,
    /// First delay after a failed attempt; doubles up to `backoff_max`.
    pub backoff_initial: Duration,
    /// Largest delay between failed attempts.
    pub backoff_max: Duration,
    /// Connect timeout, and the longest wait for the key that follows SUCCESS.
    pub io_timeout: Duration,
}

impl ProxyConfig {
    /// Retries after 1 s doubling to 30 s.
    pub fn new(proxy: impl Into<String>, key: impl Into<String>) -> ProxyConfig {
        ProxyConfig {
            proxy: proxy.into(),
            key: key.into(),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(30),
            io_timeout: Duration::from_secs(10),
        }
    }
}

/// What the proxy thread is doing, readable through [`ProxyClient::state`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxyState {
    /// A connection is registered at the proxy and waits for a client.
    pub waiting: bool,
    /// Sessions handed to the callback so far.
    pub sessions: u64,
    /// Why the last attempt failed (MISMATCH timeouts included).
    pub last_error: Option<String>,
}

/// A running proxy client thread. Dropping it stops the thread (sessions already handed to
/// the callback run on their own threads and are not interrupted).
pub struct ProxyClient {
    inner: Background<ProxyState>,
}

impl ProxyClient {
    /// Starts the thread; every session it pairs runs `session` on a thread of its own.
    pub fn start(config: ProxyConfig, slots: Slots, session: SessionFn) -> io::Result<ProxyClient> {
        let inner = Background::start("mote-rpc-proxy", move |stop, state| {
            Worker {
                config,
                slots,
                session,
                stop,
                state,
            }
            .run()
        })?;
        Ok(ProxyClient { inner })
    }

    /// A snapshot of the thread's state.
    pub fn state(&self) -> ProxyState {
        self.inner.state()
    }

    /// Stops the thread and waits for it (about [`STOP_CHECK`], 100 ms).
    pub fn stop(mut self) {
        self.inner.shutdown();
    }
}

struct Worker {
    config: ProxyConfig,
    slots: Slots,
    session: SessionFn,
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<ProxyState>>,
}

impl Worker {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.slots.is_stopped()
    }

    fn update(&self, f: impl FnOnce(&mut ProxyState)) {
        f(&mut lock(&self.state));
    }

    fn run(self) {
        let mut backoff = self.config.backoff_initial;
        // The slot of a failed attempt is kept for the next one.
        let mut held: Option<Slot> = None;
        while !self.stopping() {
            let slot = match held.take() {
                Some(s) => s,
                None => match self.slots.take_timeout(STOP_CHECK) {
                    Some(s) => s,
                    None => continue,
                },
            };
            let began = Instant::now();
            let result = self.wait_for_client();
            self.update(|s| s.waiting = false);
            match result {
                Ok((sock, client_key)) => {
                    backoff = self.config.backoff_initial;
                    log::info!("proxy {} paired us with {client_key:?}", self.config.proxy);
                    self.update(|s| s.sessions += 1);
                    let session = Arc::clone(&self.session);
                    let spawned = std::thread::Builder::new()
                        .name("mote-rpc-session".into())
                        .spawn(move || session(sock, client_key, slot));
                    if let Err(e) = spawned {
                        // The closure (socket and slot) is dropped: the client sees EOF.
                        log::error!("cannot start a session thread: {e}");
                    }
                }
                Err(ProxyError::Net(TrackerError::Stopped)) => break,
                Err(ProxyError::Mismatch) if began.elapsed() >= self.config.backoff_initial => {
                    // The proxy's wait for a client timed out (600 s by default): wait again.
                    // A MISMATCH that comes at once is no such timeout; it backs off below.
                    backoff = self.config.backoff_initial;
                    log::info!(
                        "no client at proxy {} yet; waiting again",
                        self.config.proxy
                    );
                    self.update(|s| s.last_error = Some(ProxyError::Mismatch.to_string()));
                    held = Some(slot);
                }
                Err(e) => {
                    log::warn!("proxy {}: {e}; retrying in {backoff:?}", self.config.proxy);
                    self.update(|s| s.last_error = Some(e.to_string()));
                    held = Some(slot);
                    if sleep_unless(backoff, || self.stopping()) {
                        break;
                    }
                    backoff = (backoff * 2).min(self.config.backoff_max);
                }
            }
        }
        log::info!("proxy client for {} stopped", self.config.proxy);
    }

    /// Registers at the proxy and waits (as long as it takes, stop-aware) for a client.
    fn wait_for_client(&self) -> Result<(TcpStream, String), ProxyError> {
        let cfg = &self.config;
        let stop = || self.stopping();
        let mut sock = connect(&cfg.proxy, cfg.io_timeout)?;
        sock.set_read_timeout(Some(STOP_CHECK))?;
        sock.set_write_timeout(Some(cfg.io_timeout))?;
        let _ = sock.set_nodelay(true);

        let server_key = format!("server:{}", cfg.key);
        let len =
            i32::try_from(server_key.len()).map_err(|_| ProxyError::BadKeyLength(i32::MAX))?;
        let mut hello = Vec::with_capacity(8 + server_key.len());
        hello.extend_from_slice(&RPC_MAGIC.to_le_bytes());
        hello.extend_from_slice(&len.to_le_bytes());
        hello.extend_from_slice(server_key.as_bytes());
        sock.write_all(&hello)?;
        self.update(|s| s.waiting = true);
        log::info!("waiting at proxy {} as {server_key}", cfg.proxy);

        let mut word = [0u8; 4];
        read_full(&mut sock, &mut word, None, &stop)?;
        match i32::from_le_bytes(word) {
            CODE_SUCCESS => {}
            CODE_MISMATCH => return Err(ProxyError::Mismatch),
            CODE_DUPLICATE => return Err(ProxyError::Duplicate(server_key)),
            other => return Err(ProxyError::NotProxy(other)),
        }
        read_full(&mut sock, &mut word, Some(cfg.io_timeout), &stop)?;
        let len = i32::from_le_bytes(word);
        if len < 0 || len as usize > MAX_KEY_LEN {
            return Err(ProxyError::BadKeyLength(len));
        }
        let mut key = vec![0u8; len as usize];
        read_full(&mut sock, &mut key, Some(cfg.io_timeout), &stop)?;
        let key = String::from_utf8(key).map_err(|_| ProxyError::KeyNotUtf8)?;
        // The session owns the socket from here: blocking, no timeouts of ours.
        sock.set_read_timeout(None)?;
        sock.set_write_timeout(None)?;
        Ok((sock, key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    fn fake_proxy_replying(reply: Vec<u8>) -> (String, std::thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let t = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut hello = [0u8; 8 + 11];
            conn.read_exact(&mut hello).expect("hello");
            conn.write_all(&reply).expect("reply");
            std::thread::sleep(Duration::from_millis(200));
            hello.to_vec()
        });
        (addr, t)
    }

    #[test]
    fn not_a_proxy_is_reported_and_stop_is_prompt() {
        let (addr, fake) = fake_proxy_replying(0x77i32.to_le_bytes().to_vec());
        let slots = Slots::new(1);
        let mut cfg = ProxyConfig::new(addr, "dev1");
        cfg.backoff_initial = Duration::from_secs(10);
        let never: SessionFn = Arc::new(|_, _, _| panic!("no session expected"));
        let client = ProxyClient::start(cfg, slots.clone(), never).expect("start");
        let hello = fake.join().expect("fake proxy");
        assert_eq!(&hello[..4], &RPC_MAGIC.to_le_bytes());
        assert_eq!(&hello[4..8], &11i32.to_le_bytes());
        assert_eq!(&hello[8..], b"server:dev1");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(e) = client.state().last_error {
                assert!(e.contains("not a TVM RPC proxy"), "{e}");
                break;
            }
            assert!(Instant::now() < deadline, "no error recorded");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The failed attempt keeps its slot during the 10 s backoff; stop must not wait it out.
        assert_eq!(slots.in_use(), 1);
        let t = Instant::now();
        client.stop();
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        assert_eq!(slots.in_use(), 0, "slot not released on stop");
    }

    /// A proxy that answers MISMATCH at once (not after its wait timeout) must not make the
    /// client reconnect in a tight loop.
    #[test]
    fn immediate_mismatch_backs_off() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        listener.set_nonblocking(true).expect("nonblocking");
        let slots = Slots::new(1);
        let mut cfg = ProxyConfig::new(addr, "dev1");
        cfg.backoff_initial = Duration::from_millis(200);
        cfg.backoff_max = Duration::from_millis(400);
        let never: SessionFn = Arc::new(|_, _, _| panic!("no session expected"));
        let client = ProxyClient::start(cfg, slots, never).expect("start");
        let end = Instant::now() + Duration::from_millis(1500);
        let mut connections = 0;
        while Instant::now() < end {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    connections += 1;
                    let _ = conn.write_all(&CODE_MISMATCH.to_le_bytes());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        client.stop();
        // 200 ms, then 400 ms steps: about 4 attempts in 1.5 s; a tight loop makes hundreds.
        assert!((2..=8).contains(&connections), "{connections} connections");
    }

    #[test]
    fn duplicate_is_reported() {
        let (addr, fake) = fake_proxy_replying(CODE_DUPLICATE.to_le_bytes().to_vec());
        let mut cfg = ProxyConfig::new(addr, "dev1");
        cfg.backoff_initial = Duration::from_secs(10);
        let never: SessionFn = Arc::new(|_, _, _| panic!("no session expected"));
        let client = ProxyClient::start(cfg, Slots::new(1), never).expect("start");
        fake.join().expect("fake proxy");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(e) = client.state().last_error {
                assert!(e.contains("DUPLICATE"), "{e}");
                break;
            }
            assert!(Instant::now() < deadline, "no error recorded");
            std::thread::sleep(Duration::from_millis(20));
        }
        client.stop();
    }

    #[test]
    fn handles_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Slots>();
        send_sync::<ProxyClient>();
        send_sync::<crate::tracker::TrackerClient>();
        send::<Slot>();
    }

    #[test]
    fn oversized_client_key_is_rejected() {
        let mut reply = CODE_SUCCESS.to_le_bytes().to_vec();
        reply.extend_from_slice(&i32::MAX.to_le_bytes());
        let (addr, fake) = fake_proxy_replying(reply);
        let slots = Slots::new(1);
        let mut cfg = ProxyConfig::new(addr, "dev1");
        cfg.backoff_initial = Duration::from_secs(10);
        let never: SessionFn = Arc::new(|_, _, _| panic!("no session expected"));
        let client = ProxyClient::start(cfg, slots, never).expect("start");
        fake.join().expect("fake proxy");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(e) = client.state().last_error {
                assert!(e.contains("client key of"), "{e}");
                break;
            }
            assert!(Instant::now() < deadline, "no error recorded");
            std::thread::sleep(Duration::from_millis(20));
        }
        client.stop();
    }
}
