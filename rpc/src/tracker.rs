//! Tracker mode: a client thread that registers this server's free session slots with a TVM
//! tracker (`--tracker HOST:PORT --key K`).
//!
//! Protocol (docs/rpc.md "Tracker mode"): after the 4-byte magic
//! exchange, every message is an i32 LE length (1 byte to 1 MiB) and a UTF-8 JSON text, and
//! every request gets one reply. The thread sends UPDATE_INFO once per connection, PUTs one
//! random match key per free slot, and polls GET_PENDING_MATCHKEYS. A key the tracker handed
//! out (no longer pending) whose client never arrives is renewed after a few polls, as TVM's
//! own server does. When the connection fails, every offer is withdrawn (the tracker forgets
//! a closed connection's keys) and the thread reconnects with exponential backoff.
//!
//! The listener accepts a client of this mode with [`Slots::claim_offer`] on the match key
//! the client sends (`"client:<match key> [options]"`).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::background::{lock, Background};
use crate::slots::Slots;

/// `RPC_TRACKER_MAGIC` (docs/rpc.md "Tracker mode": i32 LE, echoed by the tracker).
pub const TRACKER_MAGIC: i32 = 0x2F271;
/// Largest tracker message either side accepts (docs/rpc.md "Tracker mode").
pub const MAX_MESSAGE: usize = 1 << 20;

/// TrackerCode values (docs/rpc.md "Tracker mode").
mod code {
    pub const SUCCESS: i64 = 0;
    pub const PUT: i64 = 3;
    pub const UPDATE_INFO: i64 = 5;
    pub const GET_PENDING_MATCHKEYS: i64 = 7;
}

/// How often stop flags are looked at while a thread waits on a socket or a timer.
pub(crate) const STOP_CHECK: Duration = Duration::from_millis(100);

/// Why a tracker connection ended.
#[derive(Debug, thiserror::Error)]
pub enum TrackerError {
    #[error("tracker I/O: {0}")]
    Io(#[from] io::Error),
    #[error("cannot resolve tracker address {0:?}")]
    Resolve(String),
    #[error("peer is not a TVM tracker (magic {0:#x})")]
    BadMagic(i32),
    #[error("tracker message length {0} outside 1..=1 MiB")]
    BadLength(i64),
    #[error("tracker sent invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("tracker refused {request}: replied {reply}")]
    Refused { request: &'static str, reply: Value },
    #[error("no reply from tracker within {0:?}")]
    Timeout(Duration),
    #[error("stopped")]
    Stopped,
}

/// Settings of a tracker client. [`TrackerConfig::new`] gives TVM's timings.
#[derive(Clone, Debug)]
pub struct TrackerConfig {
    /// `HOST:PORT` of the tracker; resolved again at every connection attempt.
    pub tracker: String,
    /// The server's `--key` (the tracker queue it serves; no `"server:"` prefix).
    pub key: String,
    /// The port clients should connect to (the listener's port).
    pub port: u16,
    /// Address clients should use instead of the one the tracker sees (`--custom-addr`).
    pub custom_addr: Option<String>,
    /// Interval between GET_PENDING_MATCHKEYS polls (TVM: 2 s).
    pub poll_interval: Duration,
    /// Polls a handed-out but unused key survives before it is renewed (TVM: 4).
    pub renew_after_polls: u32,
    /// First reconnect delay; doubles after every failed attempt (1 s).
    pub backoff_initial: Duration,
    /// Largest reconnect delay (30 s).
    pub backoff_max: Duration,
    /// Connect timeout and the longest wait for one reply.
    pub io_timeout: Duration,
}

impl TrackerConfig {
    /// TVM's timings: poll every 2 s, renew after 4 polls, reconnect after 1 s doubling to 30 s.
    pub fn new(tracker: impl Into<String>, key: impl Into<String>, port: u16) -> TrackerConfig {
        TrackerConfig {
            tracker: tracker.into(),
            key: key.into(),
            port,
            custom_addr: None,
            poll_interval: Duration::from_secs(2),
            renew_after_polls: 4,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(30),
            io_timeout: Duration::from_secs(10),
        }
    }
}

/// What the tracker thread is doing, readable from any thread through [`TrackerClient::state`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrackerState {
    /// Registered (UPDATE_INFO answered) on a live connection.
    pub connected: bool,
    /// Live offers PUT on the current connection, as of the last PUT or poll (a claim shows
    /// up at the next one), sorted.
    pub registered: Vec<String>,
    /// Number of successful registrations so far (reconnects included).
    pub registrations: u64,
    /// Why the last connection or attempt failed.
    pub last_error: Option<String>,
}

/// A running tracker client thread. Dropping it stops the thread (and waits for it).
pub struct TrackerClient {
    inner: Background<TrackerState>,
}

impl TrackerClient {
    /// Starts the thread. It registers every unreserved slot of `slots` under `config.key`.
    pub fn start(config: TrackerConfig, slots: Slots) -> io::Result<TrackerClient> {
        let inner = Background::start("mote-rpc-tracker", move |stop, state| {
            Worker {
                config,
                slots,
                stop,
                state,
            }
            .run()
        })?;
        Ok(TrackerClient { inner })
    }

    /// A snapshot of the thread's state.
    pub fn state(&self) -> TrackerState {
        self.inner.state()
    }

    /// Stops the thread and waits for it: at most about one [`STOP_CHECK`] (100 ms) plus one
    /// write timeout. Closing the connection makes the tracker drop this server's offers.
    pub fn stop(mut self) {
        self.inner.shutdown();
    }
}

struct Worker {
    config: TrackerConfig,
    slots: Slots,
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<TrackerState>>,
}

impl Worker {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.slots.is_stopped()
    }

    fn update(&self, f: impl FnOnce(&mut TrackerState)) {
        f(&mut lock(&self.state));
    }

    fn run(self) {
        let mut backoff = self.config.backoff_initial;
        while !self.stopping() {
            let mut registered = false;
            let result = self.connection(&mut registered);
            // The tracker forgets a closed connection's PUTs, so our keys are dead too.
            let withdrawn = self.slots.withdraw_all_offers();
            self.update(|s| {
                s.connected = false;
                s.registered.clear();
            });
            match result {
                Ok(()) | Err(TrackerError::Stopped) => break,
                Err(e) => {
                    log::warn!(
                        "tracker {}: {e}; {withdrawn} offer(s) withdrawn, retrying in {backoff:?}",
                        self.config.tracker
                    );
                    self.update(|s| s.last_error = Some(e.to_string()));
                }
            }
            if registered {
                backoff = self.config.backoff_initial;
            }
            if sleep_unless(backoff, || self.stopping()) {
                break;
            }
            if !registered {
                backoff = (backoff * 2).min(self.config.backoff_max);
            }
        }
        self.slots.withdraw_all_offers();
        log::info!("tracker client for {} stopped", self.config.tracker);
    }

    /// One tracker connection, from connect to failure or stop. `Ok` means stopped.
    fn connection(&self, registered: &mut bool) -> Result<(), TrackerError> {
        let cfg = &self.config;
        let stop = || self.stopping();
        let mut sock = connect(&cfg.tracker, cfg.io_timeout)?;
        sock.set_read_timeout(Some(STOP_CHECK))?;
        sock.set_write_timeout(Some(cfg.io_timeout))?;
        let _ = sock.set_nodelay(true);

        sock.write_all(&TRACKER_MAGIC.to_le_bytes())?;
        let mut magic = [0u8; 4];
        read_full(&mut sock, &mut magic, Some(cfg.io_timeout), &stop)?;
        let magic = i32::from_le_bytes(magic);
        if magic != TRACKER_MAGIC {
            return Err(TrackerError::BadMagic(magic));
        }

        let mut conn = Conn { sock, cfg, stop };
        let info = json!({
            "key": format!("server:{}", cfg.key),
            "addr": [cfg.custom_addr, cfg.port],
        });
        conn.expect_success("UPDATE_INFO", json!([code::UPDATE_INFO, info]))?;
        *registered = true;
        self.update(|s| {
            s.connected = true;
            s.registrations += 1;
            s.last_error = None;
        });
        log::info!(
            "registered with tracker {} as server:{} (port {})",
            cfg.tracker,
            cfg.key,
            cfg.port
        );

        let mut next_poll = Instant::now() + cfg.poll_interval;
        loop {
            if self.stopping() {
                return Ok(());
            }
            // A free slot (at start, after a session, after a renewal) gets a fresh key.
            let fresh = self.slots.make_offers(&cfg.key);
            for key in &fresh {
                let put = json!([code::PUT, cfg.key, [cfg.port, key], cfg.custom_addr]);
                conn.expect_success("PUT", put)?;
                log::info!("offered {key} to tracker");
            }
            if !fresh.is_empty() {
                self.publish_offers();
            }

            // Sleep until the next poll, waking early when a slot comes free.
            let mut seen = self.slots.generation();
            loop {
                if self.stopping() {
                    return Ok(());
                }
                let now = Instant::now();
                if now >= next_poll {
                    break;
                }
                let g = self
                    .slots
                    .wait_change(seen, (next_poll - now).min(STOP_CHECK));
                if g != seen {
                    seen = g;
                    if self.slots.unreserved() > 0 {
                        break;
                    }
                }
            }
            if Instant::now() < next_poll {
                continue;
            }
            next_poll = Instant::now() + cfg.poll_interval;

            let reply = conn.call(json!([code::GET_PENDING_MATCHKEYS]))?;
            let pending: Vec<String> = match reply {
                Value::Array(items) => items
                    .into_iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
                other => {
                    return Err(TrackerError::Refused {
                        request: "GET_PENDING_MATCHKEYS",
                        reply: other,
                    })
                }
            };
            let withdrawn = self.slots.observe_pending(&pending, cfg.renew_after_polls);
            for key in &withdrawn {
                log::info!("{key} was handed out but no client came; renewing");
            }
            self.publish_offers();
        }
    }

    fn publish_offers(&self) {
        let mut offers = self.slots.offers();
        offers.sort();
        self.update(|s| s.registered = offers);
    }
}

/// A registered tracker connection.
struct Conn<'a, F: Fn() -> bool> {
    sock: TcpStream,
    cfg: &'a TrackerConfig,
    stop: F,
}

impl<F: Fn() -> bool> Conn<'_, F> {
    fn call(&mut self, request: Value) -> Result<Value, TrackerError> {
        let text = request.to_string();
        let len = i32::try_from(text.len())
            .ok()
            .filter(|&n| n as usize <= MAX_MESSAGE)
            .ok_or(TrackerError::BadLength(text.len() as i64))?;
        let mut frame = Vec::with_capacity(4 + text.len());
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(text.as_bytes());
        self.sock.write_all(&frame)?;

        let mut len = [0u8; 4];
        read_full(
            &mut self.sock,
            &mut len,
            Some(self.cfg.io_timeout),
            &self.stop,
        )?;
        let len = i32::from_le_bytes(len);
        if len <= 0 || len as usize > MAX_MESSAGE {
            return Err(TrackerError::BadLength(len.into()));
        }
        let mut body = vec![0u8; len as usize];
        read_full(
            &mut self.sock,
            &mut body,
            Some(self.cfg.io_timeout),
            &self.stop,
        )?;
        Ok(serde_json::from_slice(&body)?)
    }

    fn expect_success(&mut self, request: &'static str, msg: Value) -> Result<(), TrackerError> {
        match self.call(msg)? {
            Value::Number(n) if n.as_i64() == Some(code::SUCCESS) => Ok(()),
            reply => Err(TrackerError::Refused { request, reply }),
        }
    }
}

/// Connects to the first address of `addr` (`HOST:PORT`) that answers within `timeout`.
pub(crate) fn connect(addr: &str, timeout: Duration) -> Result<TcpStream, TrackerError> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|_| TrackerError::Resolve(addr.to_owned()))?
        .collect();
    let mut last = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => TrackerError::Io(e),
        None => TrackerError::Resolve(addr.to_owned()),
    })
}

/// Fills `buf` from a socket whose read timeout is short ([`STOP_CHECK`]), checking `stop`
/// between reads. `deadline` bounds the whole read; `None` waits as long as the peer is there.
/// EOF before `buf` is full is an `UnexpectedEof` error.
pub(crate) fn read_full(
    sock: &mut TcpStream,
    buf: &mut [u8],
    limit: Option<Duration>,
    stop: &dyn Fn() -> bool,
) -> Result<(), TrackerError> {
    let start = Instant::now();
    let mut filled = 0;
    while filled < buf.len() {
        if stop() {
            return Err(TrackerError::Stopped);
        }
        match sock.read(&mut buf[filled..]) {
            Ok(0) => {
                return Err(TrackerError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed the connection",
                )))
            }
            Ok(n) => filled += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                if let Some(limit) = limit {
                    if start.elapsed() >= limit {
                        return Err(TrackerError::Timeout(limit));
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Sleeps for `total` in [`STOP_CHECK`] steps; returns `true` as soon as `stop()` is true.
pub(crate) fn sleep_unless(total: Duration, stop: impl Fn() -> bool) -> bool {
    let end = Instant::now() + total;
    loop {
        if stop() {
            return true;
        }
        let now = Instant::now();
        if now >= end {
            return false;
        }
        std::thread::sleep((end - now).min(STOP_CHECK));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A fake tracker that answers the handshake with a wrong magic: the client records the
    /// error, keeps its offers withdrawn and retries.
    #[test]
    fn bad_magic_is_reported_and_retried() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let fake = std::thread::spawn(move || {
            let mut accepted = 0;
            for conn in listener.incoming().take(2) {
                let mut conn = conn.expect("accept");
                let mut magic = [0u8; 4];
                conn.read_exact(&mut magic).expect("magic");
                assert_eq!(i32::from_le_bytes(magic), TRACKER_MAGIC);
                conn.write_all(&0x1234i32.to_le_bytes()).expect("write");
                accepted += 1;
            }
            accepted
        });
        let slots = Slots::new(1);
        let mut cfg = TrackerConfig::new(addr, "k", 9);
        cfg.backoff_initial = Duration::from_millis(50);
        let client = TrackerClient::start(cfg, slots.clone()).expect("start");
        assert_eq!(
            fake.join().expect("fake tracker"),
            2,
            "client did not retry"
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let st = client.state();
            if let Some(e) = st.last_error {
                assert!(e.contains("not a TVM tracker"), "{e}");
                assert!(!st.connected);
                break;
            }
            assert!(Instant::now() < deadline, "no error recorded");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(slots.offers().is_empty());
        let t = Instant::now();
        client.stop();
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }

    /// An oversized length prefix from the tracker is a typed error, not an allocation.
    #[test]
    fn oversized_reply_is_rejected() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let fake = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut magic = [0u8; 4];
            conn.read_exact(&mut magic).expect("magic");
            conn.write_all(&magic).expect("echo magic");
            let mut len = [0u8; 4];
            conn.read_exact(&mut len).expect("len");
            let mut body = vec![0u8; i32::from_le_bytes(len) as usize];
            conn.read_exact(&mut body).expect("body");
            conn.write_all(&i32::MAX.to_le_bytes()).expect("write");
            std::thread::sleep(Duration::from_millis(300));
        });
        let slots = Slots::new(1);
        let mut cfg = TrackerConfig::new(addr, "k", 9);
        cfg.backoff_initial = Duration::from_secs(5);
        let client = TrackerClient::start(cfg, slots).expect("start");
        fake.join().expect("fake tracker");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(e) = client.state().last_error {
                assert!(e.contains("outside 1..=1 MiB"), "{e}");
                break;
            }
            assert!(Instant::now() < deadline, "no error recorded");
            std::thread::sleep(Duration::from_millis(20));
        }
        client.stop();
    }
}
