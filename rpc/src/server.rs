//! Listen mode: accept TCP clients, one thread and one sandbox per session
//! (docs/rpc.md "Server").

use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::session::{serve_connection, ExactKey, KeyMatcher, Limits, SessionConfig};

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
    allow: Vec<IpAddr>,
    max_sessions: usize,
    sandbox_root: Option<PathBuf>,
    config: SessionConfig,
}

/// The listen-mode server.
#[derive(Debug)]
pub struct Server;

impl Server {
    /// Defaults: 127.0.0.1, any free port, key `""`, any peer, 4 sessions, a temporary sandbox
    /// root, [`Limits::default`], no idle timeout, 10 s for the handshake.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            host: "127.0.0.1".into(),
            port: 0,
            key: String::new(),
            matcher: None,
            allow: Vec::new(),
            max_sessions: 4,
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
    /// Only these peer addresses may connect (empty: everyone who can reach the socket).
    pub fn allow(mut self, ips: impl IntoIterator<Item = IpAddr>) -> Self {
        self.allow.extend(ips);
        self
    }
    /// Sessions served at once; more connections are closed at once and counted as refused.
    pub fn max_sessions(mut self, n: usize) -> Self {
        self.max_sessions = n;
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

    /// Binds and starts accepting in a background thread.
    pub fn spawn(self) -> io::Result<ServerHandle> {
        if self.max_sessions == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "max_sessions must be at least 1",
            ));
        }
        let listener = TcpListener::bind((self.host.as_str(), self.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
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
        std::fs::create_dir_all(&root)?;
        let mut config = self.config;
        config.sandbox_root = root.clone();
        let shared = Arc::new(Shared {
            stop: Arc::new(AtomicBool::new(false)),
            active: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        });
        let ctx = Accept {
            listener,
            matcher: self
                .matcher
                .unwrap_or_else(|| Arc::new(ExactKey { key: self.key })),
            allow: self.allow,
            max_sessions: self.max_sessions,
            config: Arc::new(config),
            shared: shared.clone(),
        };
        log::info!("RPC server listening on {addr}");
        let thread = std::thread::Builder::new()
            .name("mote-rpc-listen".into())
            .spawn(move || ctx.run())?;
        Ok(ServerHandle {
            addr,
            shared,
            thread: Some(thread),
            root: owned_root.then_some(root),
        })
    }
}

struct Shared {
    stop: Arc<AtomicBool>,
    active: AtomicUsize,
    served: AtomicU64,
    refused: AtomicU64,
}

struct Accept {
    listener: TcpListener,
    matcher: Arc<dyn KeyMatcher>,
    allow: Vec<IpAddr>,
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
        log::info!("RPC server stopped");
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
        if self.shared.active.load(Ordering::SeqCst) >= self.max_sessions {
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
                // Counted as over even if the session panics (a bug), so the slot comes back.
                let _count = SessionCount(shared.clone());
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
            .field("allow", &self.allow)
            .field("max_sessions", &self.max_sessions)
            .field("config", &self.config)
            .finish()
    }
}

/// A running server. Dropping it stops it.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    root: Option<PathBuf>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Shared")
    }
}

impl ServerHandle {
    /// The bound address (with the actual port when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
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

    /// A flag that stops the server when set (for signal handlers).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.shared.stop.clone()
    }

    /// Stops accepting, ends every session (a call in progress finishes first), removes the
    /// sandboxes, and waits for all of it.
    pub fn stop(mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.join();
    }

    /// Waits until the server stops (through [`ServerHandle::stop_flag`]).
    pub fn wait(mut self) {
        self.join();
    }

    fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(root) = self.root.take() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.join();
    }
}
