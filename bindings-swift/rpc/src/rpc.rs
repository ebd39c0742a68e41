//! Mote's RPC server (`mote-rpc`, docs/rpc.md) for Swift: start with a configuration, read its
//! state, stop. TVM's unchanged Python client drives it.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mote_rpc::{Server, ServerHandle};

use crate::error::NativeError;

/// How clients reach the server (docs/rpc.md "Three ways to serve").
#[derive(uniffi::Enum, Clone)]
pub enum RpcMode {
    /// Clients connect to the listening socket (`rpc.connect(host, port, key=...)`).
    Listen,
    /// Listen, and offer sessions to the TVM tracker at `address` (`host:port`) under the key.
    /// `custom_address` is what the tracker tells clients (default: what it sees).
    Tracker {
        address: String,
        custom_address: Option<String>,
    },
    /// Nothing listens: wait at the TVM proxy at `address` (`host:port`).
    Proxy { address: String },
}

/// A server's settings.
#[derive(uniffi::Record)]
pub struct RpcConfig {
    /// Address to bind (listen and tracker modes).
    pub host: String,
    /// Port to bind; 0: any free port.
    pub port: u16,
    /// The key clients present. Not a secret.
    pub key: String,
    pub mode: RpcMode,
    /// Only these peer addresses may connect; empty: anyone who can reach the socket.
    pub allow: Vec<String>,
    /// Sessions served at once; 0: Mote's default (4, and 1 in tracker mode).
    pub max_sessions: u32,
    /// Threads of each session's runtime; 0: Mote's default.
    pub session_threads: u32,
    /// End sessions idle this many milliseconds; 0: never.
    pub idle_timeout_ms: u64,
    /// Folder under which each session gets its sandbox; `None`: a temporary folder, removed
    /// at stop.
    pub sandbox: Option<String>,
    /// Load uploaded libraries as data only (docs/code-free.md); always so on iOS.
    pub code_free: bool,
}

/// A snapshot of a server's state.
#[derive(uniffi::Record, Clone, PartialEq)]
pub struct RpcState {
    /// `listen`, `tracker` or `proxy`.
    pub mode: String,
    /// The listening address (`host:port`); `None` in proxy mode.
    pub address: Option<String>,
    /// Sessions running now.
    pub active: u64,
    /// Sessions that have ended.
    pub served: u64,
    /// Connections refused (peer not allowed, or too many sessions).
    pub refused: u64,
    /// Tracker mode: registered on a live connection.
    pub tracker_connected: bool,
    /// Tracker mode: successful registrations so far.
    pub tracker_registrations: u64,
    /// Tracker mode: offers live at the tracker.
    pub tracker_offers: Vec<String>,
    /// Tracker mode: why the last attempt failed.
    pub tracker_last_error: Option<String>,
    /// Proxy mode: a connection waits at the proxy.
    pub proxy_waiting: bool,
    /// Proxy mode: sessions the proxy paired so far.
    pub proxy_sessions: u64,
    /// Proxy mode: why the last attempt failed.
    pub proxy_last_error: Option<String>,
    /// The server has stopped.
    pub stopped: bool,
}

/// A running RPC server. `stop` (or dropping the last reference) stops it.
#[derive(uniffi::Object)]
pub struct NativeRpcServer {
    handle: Mutex<Option<ServerHandle>>,
    mode: RpcMode,
    address: Option<String>,
    last: Mutex<Option<RpcState>>,
}

#[uniffi::export]
impl NativeRpcServer {
    /// Start a server: binds at once (a port in use fails here); a tracker or proxy that cannot
    /// be reached is not an error (the server keeps trying; see the state's last errors).
    #[uniffi::constructor]
    pub fn start(config: RpcConfig) -> Result<Arc<Self>, NativeError> {
        let mut allow = Vec::with_capacity(config.allow.len());
        for a in &config.allow {
            allow.push(a.parse::<IpAddr>().map_err(|e| {
                NativeError::invalid(format!("allowed address `{a}` is not an IP address: {e}"))
            })?);
        }
        let mut b = Server::builder()
            .host(config.host)
            .port(config.port)
            .key(config.key)
            .allow(allow)
            .code_free(config.code_free);
        b = match config.mode.clone() {
            RpcMode::Listen => b,
            RpcMode::Tracker {
                address,
                custom_address,
            } => b.tracker(address, custom_address),
            RpcMode::Proxy { address } => b.through_proxy(address),
        };
        if config.max_sessions > 0 {
            b = b.max_sessions(config.max_sessions as usize);
        }
        if config.session_threads > 0 {
            b = b.session_threads(config.session_threads as usize);
        }
        if config.idle_timeout_ms > 0 {
            b = b.idle_timeout(Duration::from_millis(config.idle_timeout_ms));
        }
        if let Some(dir) = config.sandbox {
            b = b.sandbox_root(dir);
        }
        let handle = b
            .spawn()
            .map_err(|e| NativeError::new(mote::ErrorCode::Io, format!("RPC server: {e}")))?;
        Ok(Arc::new(NativeRpcServer {
            address: handle.local_addr().map(|a| a.to_string()),
            handle: Mutex::new(Some(handle)),
            mode: config.mode,
            last: Mutex::new(None),
        }))
    }

    /// The port clients connect to; `None` in proxy mode.
    pub fn port(&self) -> Option<u16> {
        self.address
            .as_ref()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
    }

    /// The current state.
    pub fn state(&self) -> RpcState {
        let handle = self.handle.lock().unwrap_or_else(|p| p.into_inner());
        let Some(h) = handle.as_ref() else {
            let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            return last.clone().unwrap_or_else(|| self.empty_state(true));
        };
        let stats = h.stats();
        let mut s = self.empty_state(false);
        s.active = stats.active as u64;
        s.served = stats.served;
        s.refused = stats.refused;
        if let Some(t) = h.tracker_state() {
            s.tracker_connected = t.connected;
            s.tracker_registrations = t.registrations;
            s.tracker_offers = t.registered;
            s.tracker_last_error = t.last_error;
        }
        if let Some(p) = h.proxy_state() {
            s.proxy_waiting = p.waiting;
            s.proxy_sessions = p.sessions;
            s.proxy_last_error = p.last_error;
        }
        s
    }

    /// Stop: refuse new sessions, let running calls finish, leave the tracker or proxy, remove
    /// the sandboxes, close the socket, and wait for all of it. A second call does nothing.
    pub fn stop(&self) {
        let before = self.state();
        let taken = self.handle.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = taken {
            h.stop();
            let mut s = before;
            s.active = 0;
            s.stopped = true;
            s.tracker_connected = false;
            s.tracker_offers.clear();
            s.proxy_waiting = false;
            *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(s);
        }
    }
}

/// Releasing the server never blocks the releasing thread (in Swift, often the main thread):
/// stopping waits for running calls, so a server still running when its last reference goes
/// is stopped on a thread of its own.
impl Drop for NativeRpcServer {
    fn drop(&mut self) {
        let taken = self
            .handle
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = taken {
            let stopping = std::thread::Builder::new()
                .name("mote-rpc-release".into())
                .spawn(move || h.stop());
            if let Err(e) = stopping {
                // No thread to stop it on: stop it here rather than leave it serving.
                log::warn!("RPC server released: stopping on the releasing thread ({e})");
            }
        }
    }
}

impl NativeRpcServer {
    fn empty_state(&self, stopped: bool) -> RpcState {
        RpcState {
            mode: match self.mode {
                RpcMode::Listen => "listen",
                RpcMode::Tracker { .. } => "tracker",
                RpcMode::Proxy { .. } => "proxy",
            }
            .to_string(),
            address: self.address.clone(),
            active: 0,
            served: 0,
            refused: 0,
            tracker_connected: false,
            tracker_registrations: 0,
            tracker_offers: Vec::new(),
            tracker_last_error: None,
            proxy_waiting: false,
            proxy_sessions: 0,
            proxy_last_error: None,
            stopped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn config() -> RpcConfig {
        RpcConfig {
            host: "127.0.0.1".into(),
            port: 0,
            key: String::new(),
            mode: RpcMode::Listen,
            allow: vec![],
            max_sessions: 2,
            session_threads: 1,
            idle_timeout_ms: 0,
            sandbox: None,
            code_free: false,
        }
    }

    /// Dropping the last reference of a running server stops it (on a thread of its own, so
    /// the release does not wait for running calls): its connections are closed and soon
    /// nothing listens on its port.
    #[test]
    fn releasing_a_running_server_stops_it_in_the_background() {
        let s = NativeRpcServer::start(config()).unwrap();
        let port = s.port().unwrap();
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        drop(s);
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 8];
        use std::io::Read;
        // The server closes the connection when it stops (end of stream or a reset).
        assert!(matches!(c.read(&mut buf), Ok(0) | Err(_)));
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            assert!(
                Instant::now() < deadline,
                "port {port} still accepts 5 s after release"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
