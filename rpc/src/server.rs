//! The server: listen mode, tracker mode and proxy mode, one thread and one sandbox per
//! session (docs/rpc.md "Server" and "Three ways to serve").

use std::any::Any;
use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::proxy::{ProxyClient, ProxyConfig, ProxyState, SessionFn};
use crate::session::{
    serve_connection, serve_session, ExactKey, KeyMatcher, Limits, SessionConfig,
};
use crate::slots::{Slot, Slots};
use crate::tracker::{TrackerClient, TrackerConfig, TrackerState};

/// How clients reach the server (docs/rpc.md "Three ways to serve").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Clients connect to the listening socket with the key `client:<key>`.
    Listen,
    /// Listen, and offer each free session to the TVM tracker at `tracker` (`host:port`) under
    /// `key`; a client gets a one-time match key from the tracker and connects with it. Only
    /// those match keys are accepted. `custom_addr` is the address the tracker hands to
    /// clients (default: the address the tracker sees this server at).
    Tracker {
        tracker: String,
        custom_addr: Option<String>,
    },
    /// Nothing listens: connect out to the TVM proxy at `proxy` (`host:port`) as `server:<key>`
    /// and serve the clients it pairs with this server.
    Proxy { proxy: String },
}

/// Handshakes that may be in progress at once in tracker mode beyond `max_sessions` (a client
/// must finish its handshake before its match key tells whether it has a place).
const EXTRA_HANDSHAKES: usize = 4;

/// Counters of a running server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Sessions running now (handshake included).
    pub active: usize,
    /// Connections whose session has ended.
    pub served: u64,
    /// Connections refused (peer not allowed, or `max_sessions` reached).
    pub refused: u64,
}

/// A server to configure; [`ServerBuilder::spawn`] starts it.
#[derive(Clone)]
pub struct ServerBuilder {
    host: String,
    port: u16,
    key: String,
    matcher: Option<Arc<dyn KeyMatcher>>,
    mode: Mode,
    allow: Vec<IpAddr>,
    max_sessions: Option<usize>,
    sandbox_root: Option<PathBuf>,
    config: SessionConfig,
}

/// Sessions at once when [`ServerBuilder::max_sessions`] is not given, in listen and proxy
/// modes.
pub const DEFAULT_MAX_SESSIONS: usize = 4;

/// Sessions at once when [`ServerBuilder::max_sessions`] is not given, in tracker mode: one
/// place offered to the tracker, as TVM's server offers (a tuning tool that gets two places on
/// one device would measure two uploads competing for it).
pub const DEFAULT_TRACKER_SESSIONS: usize = 1;

/// Mote's RPC server.
#[derive(Debug)]
pub struct Server;

impl Server {
    /// Defaults: listen mode on 127.0.0.1, any free port, key `""`, any peer, 4 sessions (1 in
    /// tracker mode), a temporary sandbox root, [`Limits::default`], no idle timeout, 10 s for
    /// the handshake, the process's registered functions not served.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            host: "127.0.0.1".into(),
            port: 0,
            key: String::new(),
            matcher: None,
            mode: Mode::Listen,
            allow: Vec::new(),
            max_sessions: None,
            sandbox_root: None,
            config: SessionConfig::default(),
        }
    }
}

impl ServerBuilder {
    /// Address to bind (default `127.0.0.1`).
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = host.into();
        self
    }
    /// Port to bind (0: any free port; see [`ServerHandle::local_addr`]).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }
    /// The key clients must present (`client:<key>`). Not a secret: see docs/rpc.md.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }
    /// Decide client keys with `matcher` instead of [`ServerBuilder::key`] (tracker mode claims
    /// per-offer match keys this way).
    pub fn key_matcher(mut self, matcher: Arc<dyn KeyMatcher>) -> Self {
        self.matcher = Some(matcher);
        self
    }
    /// How clients reach the server (default [`Mode::Listen`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }
    /// [`Mode::Tracker`]: register with the TVM tracker at `addr` (`host:port`).
    pub fn tracker(self, addr: impl Into<String>, custom_addr: Option<String>) -> Self {
        self.mode(Mode::Tracker {
            tracker: addr.into(),
            custom_addr,
        })
    }
    /// [`Mode::Proxy`]: serve through the TVM proxy at `addr` (`host:port`).
    pub fn through_proxy(self, addr: impl Into<String>) -> Self {
        self.mode(Mode::Proxy { proxy: addr.into() })
    }
    /// Only these peer addresses may connect (empty: everyone who can reach the socket).
    pub fn allow(mut self, ips: impl IntoIterator<Item = IpAddr>) -> Self {
        self.allow.extend(ips);
        self
    }
    /// Hops (`host:port`, `[v6]:port`) a client may make a session chain to with TVM's
    /// session constructor `rpc.Connect` (`tvm.rpc.connect(...,
    /// session_constructor_args=["rpc.Connect", host, port, key, False])`). Empty, the default:
    /// chaining is refused, since it makes the server connect where a client says. A host is
    /// compared as written (without case), not resolved; a malformed entry fails
    /// [`ServerBuilder::spawn`].
    pub fn allow_hops<S: Into<String>>(mut self, hops: impl IntoIterator<Item = S>) -> Self {
        self.config
            .allow_hops
            .extend(hops.into_iter().map(Into::into));
        self
    }
    /// Sessions served at once (default [`DEFAULT_MAX_SESSIONS`], in tracker mode
    /// [`DEFAULT_TRACKER_SESSIONS`]). In listen mode more connections are closed at once and
    /// counted as refused; in tracker mode it is also the number of places offered to the
    /// tracker, each a match key that admits one session; in proxy mode it bounds the sessions
    /// the proxy may pair at once.
    pub fn max_sessions(mut self, n: usize) -> Self {
        self.max_sessions = Some(n);
        self
    }
    /// Folder under which each session gets its own sandbox (default: a new temporary folder,
    /// removed at stop).
    pub fn sandbox_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sandbox_root = Some(dir.into());
        self
    }
    /// Per-session limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.config.limits = limits;
        self
    }
    /// Threads of each session's Mote runtime (default: Mote's default).
    pub fn session_threads(mut self, n: usize) -> Self {
        self.config.session_threads = Some(n);
        self
    }
    /// Load uploaded libraries code-free: read as data, never mapped as code; a library that
    /// calls compiled kernels is refused with their names (docs/code-free.md). On iOS every
    /// load is code-free whatever this says.
    pub fn code_free(mut self, on: bool) -> Self {
        self.config.code_free = on;
        self
    }
    /// End sessions idle this long.
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.config.idle_timeout = Some(d);
        self
    }
    /// Time allowed for a client's handshake.
    pub fn handshake_timeout(mut self, d: Duration) -> Self {
        self.config.handshake_timeout = d;
        self
    }
    /// The most VM instructions one model call may execute (default
    /// `mote::DEFAULT_MAX_INSTRUCTIONS`); beyond it the call fails with
    /// `Error::ResourceExhausted`. A session's timeout and a stop interrupt a call whatever
    /// this says (docs/rpc.md "Timeouts").
    pub fn max_instructions(mut self, n: u64) -> Self {
        self.config.max_instructions = n;
        self
    }
    /// Let clients look up and call the functions registered in this process with
    /// `mote::register_function` (default `false`), as TVM's server serves its process's
    /// global functions: `remote.get_function("test.rpc.addone")` then finds the function
    /// registered under that name, resolved when the client looks it up; the server's own
    /// functions keep their names. Off, a registered name is unknown to clients (TVM's client
    /// raises `AttributeError`). A registered function runs on the session's thread with
    /// whatever rights the process has, so turn this on only for functions fit for the
    /// clients who can reach the server (docs/rpc.md "Global functions").
    pub fn serve_registered_functions(mut self, on: bool) -> Self {
        self.config.serve_registered_functions = on;
        self
    }

    /// Starts the server: binds and accepts in a background thread (listen and tracker
    /// modes), registers with the tracker, or connects out to the proxy.
    pub fn spawn(self) -> io::Result<ServerHandle> {
        if let Some(bad) = self
            .config
            .allow_hops
            .iter()
            .find(|h| crate::chain::parse_host_port(h).is_none())
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("allowed hop {bad:?} is not HOST:PORT"),
            ));
        }
        let max_sessions = self.max_sessions.unwrap_or(match self.mode {
            Mode::Tracker { .. } => DEFAULT_TRACKER_SESSIONS,
            _ => DEFAULT_MAX_SESSIONS,
        });
        if max_sessions == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "max_sessions must be at least 1",
            ));
        }
        let (root, owned_root) = match self.sandbox_root {
            Some(r) => (r, false),
            None => {
                static N: AtomicUsize = AtomicUsize::new(0);
                let r = std::env::temp_dir().join(format!(
                    "mote-rpc-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::SeqCst)
                ));
                (r, true)
            }
        };
        if owned_root {
            // A fresh folder only this user can enter: an existing path (perhaps a symlink
            // another local user planted in the temp folder) is an error, not reused.
            std::fs::DirBuilder::new().mode(0o700).create(&root)?;
        } else {
            std::fs::create_dir_all(&root)?;
        }
        let mut config = self.config;
        config.sandbox_root = root.clone();
        let config = Arc::new(config);
        let shared = Arc::new(Shared {
            stop: Arc::new(AtomicBool::new(false)),
            active: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        });
        let slots = Slots::new(max_sessions);
        let mut handle = ServerHandle {
            addr: None,
            shared: shared.clone(),
            slots: slots.clone(),
            thread: None,
            tracker: None,
            proxy: None,
            root: owned_root.then_some(root),
            joined: false,
        };
        if let Mode::Proxy { proxy } = &self.mode {
            let session = proxy_session(config, shared);
            handle.proxy = Some(ProxyClient::start(
                ProxyConfig::new(proxy.clone(), self.key.clone()),
                slots,
                session,
            )?);
            log::info!(
                "RPC server serving through the proxy at {proxy} as server:{}",
                self.key
            );
            return Ok(handle);
        }
        let listener = TcpListener::bind((self.host.as_str(), self.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        handle.addr = Some(addr);
        let (matcher, admission): (Arc<dyn KeyMatcher>, Admission) =
            match (&self.mode, self.matcher) {
                (_, Some(m)) => (m, Admission::Slot),
                (Mode::Tracker { .. }, None) => (
                    Arc::new(OfferKey {
                        slots: slots.clone(),
                        key: self.key.clone(),
                    }),
                    Admission::Offer,
                ),
                _ => (
                    Arc::new(ExactKey {
                        key: self.key.clone(),
                    }),
                    Admission::Slot,
                ),
            };
        let ctx = Accept {
            listener,
            matcher,
            admission,
            allow: self.allow,
            slots: slots.clone(),
            max_sessions,
            config,
            shared,
        };
        log::info!("RPC server listening on {addr}");
        handle.thread = Some(
            std::thread::Builder::new()
                .name("mote-rpc-listen".into())
                .spawn(move || ctx.run())?,
        );
        if let Mode::Tracker {
            tracker,
            custom_addr,
        } = &self.mode
        {
            let mut cfg = TrackerConfig::new(tracker.clone(), self.key.clone(), addr.port());
            cfg.custom_addr = custom_addr.clone();
            handle.tracker = Some(TrackerClient::start(cfg, slots)?);
            log::info!(
                "RPC server registering with the tracker at {tracker} under key {:?}",
                self.key
            );
        }
        Ok(handle)
    }
}

/// The proxy client's session callback: one session on a socket the proxy paired, holding its
/// slot, counted like a listener's session.
fn proxy_session(config: Arc<SessionConfig>, shared: Arc<Shared>) -> SessionFn {
    Arc::new(move |stream: TcpStream, client_key: String, slot: Slot| {
        shared.active.fetch_add(1, Ordering::SeqCst);
        let _count = SessionCount(shared.clone());
        // The key is "client:<key>[ options]"; the options (-timeout=) apply to this session.
        let options = client_key.split_once(' ').map_or("", |(_, o)| o);
        log::info!("proxy client {client_key:?}: connected");
        let end = serve_session(stream, options, &config, shared.stop.clone());
        log::info!("proxy client {client_key:?}: session over: {end:?}");
        drop(slot);
    })
}

struct Shared {
    stop: Arc<AtomicBool>,
    active: AtomicUsize,
    served: AtomicU64,
    refused: AtomicU64,
}

/// How the listener decides that a connection may have a session.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// Take a free place at accept time (listen mode): a full server refuses at once.
    Slot,
    /// The client's match key claims the place its tracker offer reserved (tracker mode).
    Offer,
}

/// Tracker mode's key check: `client:<matchkey>` must name a live offer, which it consumes.
struct OfferKey {
    slots: Slots,
    key: String,
}

impl KeyMatcher for OfferKey {
    fn claim(&self, client_key: &str) -> Option<Box<dyn Any + Send>> {
        let slot = self
            .slots
            .claim_offer(client_key.strip_prefix("client:")?)?;
        Some(Box::new(slot))
    }
    fn server_key(&self) -> String {
        format!("server:{}", self.key)
    }
}

struct Accept {
    listener: TcpListener,
    matcher: Arc<dyn KeyMatcher>,
    admission: Admission,
    allow: Vec<IpAddr>,
    slots: Slots,
    max_sessions: usize,
    config: Arc<SessionConfig>,
    shared: Arc<Shared>,
}

/// How often the accept loop looks at the stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(50);

impl Accept {
    fn run(self) {
        let mut sessions: Vec<JoinHandle<()>> = Vec::new();
        while !self.shared.stop.load(Ordering::SeqCst) {
            sessions.retain(|h| !h.is_finished());
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    if let Some(h) = self.admit(stream, peer) {
                        sessions.push(h);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(ACCEPT_POLL),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::warn!("accept failed: {e}");
                    std::thread::sleep(ACCEPT_POLL);
                }
            }
        }
        drop(self.listener);
        for h in sessions {
            let _ = h.join();
        }
    }

    fn refuse(&self, stream: TcpStream, peer: SocketAddr, why: &str) {
        log::warn!("{peer}: refused: {why}");
        // Counted before the peer can see the connection close.
        self.shared.refused.fetch_add(1, Ordering::SeqCst);
        let _ = stream.shutdown(Shutdown::Both);
    }

    fn admit(&self, stream: TcpStream, peer: SocketAddr) -> Option<JoinHandle<()>> {
        if !self.allow.is_empty() && !self.allow.contains(&peer.ip()) {
            self.refuse(stream, peer, "address not in the allow-list");
            return None;
        }
        // Only this thread increments, so checking then adding cannot overshoot.
        let (slot, limit) = match self.admission {
            Admission::Slot => match self.slots.try_take() {
                Some(s) => (Some(s), self.max_sessions),
                None => {
                    self.refuse(stream, peer, "max_sessions reached");
                    return None;
                }
            },
            Admission::Offer => (None, self.max_sessions + EXTRA_HANDSHAKES),
        };
        if self.shared.active.load(Ordering::SeqCst) >= limit {
            self.refuse(stream, peer, "max_sessions reached");
            return None;
        }
        if let Err(e) = stream.set_nonblocking(false) {
            self.refuse(stream, peer, &e.to_string());
            return None;
        }
        self.shared.active.fetch_add(1, Ordering::SeqCst);
        let (matcher, config, shared) = (
            self.matcher.clone(),
            self.config.clone(),
            self.shared.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name(format!("mote-rpc-{peer}"))
            .spawn(move || {
                // Counted as over even if the session panics (a bug), so the place comes back.
                let _count = SessionCount(shared.clone());
                let _slot = slot;
                let end = serve_connection(stream, &*matcher, &config, shared.stop.clone());
                log::info!("{peer}: session over: {end:?}");
            });
        match spawned {
            Ok(h) => Some(h),
            Err(e) => {
                log::warn!("{peer}: cannot start a session thread: {e}");
                self.shared.active.fetch_sub(1, Ordering::SeqCst);
                self.shared.refused.fetch_add(1, Ordering::SeqCst);
                None
            }
        }
    }
}

/// Moves a session from `active` to `served` when dropped.
struct SessionCount(Arc<Shared>);

impl Drop for SessionCount {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
        self.0.served.fetch_add(1, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("key", &self.key)
            .field("custom_matcher", &self.matcher.is_some())
            .field("mode", &self.mode)
            .field("allow", &self.allow)
            .field("max_sessions", &self.max_sessions)
            .field("config", &self.config)
            .finish()
    }
}

/// A running server. Dropping it stops it.
pub struct ServerHandle {
    addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    slots: Slots,
    thread: Option<JoinHandle<()>>,
    tracker: Option<TrackerClient>,
    proxy: Option<ProxyClient>,
    root: Option<PathBuf>,
    joined: bool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Shared")
    }
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .field("stats", &self.stats())
            .field("tracker", &self.tracker_state())
            .field("proxy", &self.proxy_state())
            .finish()
    }
}

impl ServerHandle {
    /// The listening address (with the actual port when 0 was asked); `None` in proxy mode,
    /// where nothing listens.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// Current counters.
    pub fn stats(&self) -> ServerStats {
        ServerStats {
            active: self.shared.active.load(Ordering::SeqCst),
            served: self.shared.served.load(Ordering::SeqCst),
            refused: self.shared.refused.load(Ordering::SeqCst),
        }
    }

    /// Tracker mode: whether the server is registered, its live offers, the last error.
    pub fn tracker_state(&self) -> Option<TrackerState> {
        self.tracker.as_ref().map(TrackerClient::state)
    }

    /// Proxy mode: whether a connection waits at the proxy, sessions so far, the last error.
    pub fn proxy_state(&self) -> Option<ProxyState> {
        self.proxy.as_ref().map(ProxyClient::state)
    }

    /// Whether the server has been told to stop.
    pub fn is_stopping(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }

    /// A flag that stops the server when set (for signal handlers); [`ServerHandle::wait`]
    /// then returns.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.shared.stop.clone()
    }

    /// Stops accepting, leaves the tracker or proxy, ends every session (a call in progress
    /// finishes first), removes the sandboxes, and waits for all of it.
    pub fn stop(mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.join();
    }

    /// Waits until the server is stopped through [`ServerHandle::stop_flag`], then shuts it
    /// down as [`ServerHandle::stop`] does.
    pub fn wait(mut self) {
        while !self.shared.stop.load(Ordering::SeqCst) {
            std::thread::sleep(ACCEPT_POLL);
        }
        self.join();
    }

    fn join(&mut self) {
        if std::mem::replace(&mut self.joined, true) {
            return;
        }
        self.slots.stop();
        if let Some(t) = self.tracker.take() {
            t.stop();
        }
        if let Some(p) = self.proxy.take() {
            p.stop();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Proxy sessions run on threads of their own: wait until the last one has ended.
        while self.shared.active.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(root) = self.root.take() {
            let _ = std::fs::remove_dir_all(root);
        }
        log::info!("RPC server stopped");
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.join();
    }
}
