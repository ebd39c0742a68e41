//! One client connection: the server-side handshake, then the request loop
//! (docs/rpc.md "Sessions").

use std::any::Any;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::chain;
use crate::interrupt::{self, Calls};
use crate::sandbox::Sandbox;
use crate::state::{Reply, State};
use crate::wire::{self, Arg, WireError};

/// Resource limits of one session (defaults in docs/rpc.md "Limits").
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest packet accepted or sent (an upload travels in one packet).
    pub max_packet: u64,
    /// Largest uploaded file.
    pub max_upload_file: u64,
    /// Total bytes of the files a session keeps in its sandbox.
    pub max_sandbox_bytes: u64,
    /// Handles a session may hold at once.
    pub max_handles: usize,
    /// Bytes a session may allocate with kDevAllocData*.
    pub max_remote_memory: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_packet: 256 << 20,
            max_upload_file: 256 << 20,
            max_sandbox_bytes: 512 << 20,
            max_handles: 4096,
            max_remote_memory: 1 << 30,
        }
    }
}

/// Everything a session needs to know besides its socket.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Limits.
    pub limits: Limits,
    /// Each session creates its own folder under this one.
    pub sandbox_root: PathBuf,
    /// Threads of each Mote session (`None`: Mote's default).
    pub session_threads: Option<usize>,
    /// Load uploaded libraries as data, never as code (docs/code-free.md): a library whose
    /// program calls compiled kernels is refused naming them. Always so where the platform
    /// cannot load code (iOS); `mote rpc serve --code-free` elsewhere.
    pub code_free: bool,
    /// End a session when the client sends nothing for this long (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// How long a client has to send its handshake.
    pub handshake_timeout: Duration,
    /// The most VM instructions one model call may execute (`mote::SessionOptions::
    /// max_instructions`; default `mote::DEFAULT_MAX_INSTRUCTIONS`). The other budgets of
    /// `mote::SessionOptions` and `mote::LoadOptions` keep the runtime's defaults.
    pub max_instructions: u64,
    /// The hops (`host:port`) a client may chain to with the session constructor
    /// `rpc.Connect` (docs/rpc.md "Chained sessions"); empty, the default: chaining is
    /// refused. A host is compared as written (without case), not resolved.
    pub allow_hops: Vec<String>,
    /// Answer `kGetGlobalFunc` with the functions registered in the server's process
    /// (`mote::register_function`) besides the server's own (docs/rpc.md "Global functions"):
    /// a client can then call them, as tvm4j's RPC tests call a function the Java app
    /// registered. Default `false`: only the server's own functions exist for clients.
    pub serve_registered_functions: bool,
}

impl SessionConfig {
    /// When a read that starts now gives up for the idle timeout, if there is one.
    pub(crate) fn idle_deadline(&self) -> Option<Instant> {
        self.idle_timeout
            .and_then(|d| Instant::now().checked_add(d))
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            limits: Limits::default(),
            sandbox_root: std::env::temp_dir().join("mote-rpc"),
            session_threads: None,
            code_free: false,
            idle_timeout: None,
            handshake_timeout: Duration::from_secs(10),
            max_instructions: mote::DEFAULT_MAX_INSTRUCTIONS,
            allow_hops: Vec::new(),
            serve_registered_functions: false,
        }
    }
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionEnd {
    /// The client sent kShutdown.
    Shutdown,
    /// The client closed the connection between requests.
    Closed,
    /// The client's `-timeout` expired; it was told with `RPCSessionTimeoutError`.
    Timeout,
    /// The client sent nothing for the idle timeout.
    Idle,
    /// The server is stopping.
    Stopped,
    /// The handshake failed (bad magic, malformed, too slow).
    Handshake(String),
    /// The client's key did not match; it got `RPC_CODE_MISMATCH`.
    KeyMismatch(String),
    /// The byte stream broke (bad framing, oversized packet, socket error).
    Protocol(String),
    /// The session could not start (sandbox creation failed).
    Setup(String),
}

/// A failed request; its message is what the client sees after `RPCError`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// Mote refused or failed (load, call, argument checks).
    #[error("{0}")]
    Mote(#[from] mote::Error),
    /// The request's body is malformed.
    #[error("malformed request: {0}")]
    Wire(#[from] WireError),
    /// The request makes no sense in this session (unknown handle, wrong arguments...).
    #[error("{0}")]
    Invalid(String),
    /// A session limit would be exceeded.
    #[error("limit exceeded: {0}")]
    Limit(String),
    /// A file name or file refused by the sandbox rules.
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// A file operation failed.
    #[error("{0}")]
    Io(String),
    /// A protocol feature Mote's server does not implement.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// An argument a function registered in the server's process cannot take over RPC
    /// (docs/rpc.md "Global functions"); `index` counts from 0.
    #[error("{function}: argument {index}: {reason}")]
    Argument {
        /// The registered function's name.
        function: String,
        /// The argument's position.
        index: usize,
        /// Why it is refused.
        reason: String,
    },
    /// A function registered in the server's process panicked; the session goes on.
    #[error("the registered function {function} panicked: {message}")]
    Panicked {
        /// The registered function's name.
        function: String,
        /// The panic's message, when it was a string.
        message: String,
    },
}

/// Decides whether a client's key is accepted, and what the server answers.
///
/// Listen mode uses [`ExactKey`]. Tracker mode plugs in a matcher that claims a per-offer
/// match key; the guard it returns lives as long as the session.
pub trait KeyMatcher: Send + Sync {
    /// `client_key` is the first token of the client's handshake (`client:<matchkey>`).
    /// `Some(guard)` accepts; the guard is dropped when the session ends.
    fn claim(&self, client_key: &str) -> Option<Box<dyn Any + Send>>;
    /// The key sent back on success (`server:<key>`).
    fn server_key(&self) -> String;
}

/// Listen mode: the client's key must be exactly `client:<key>`.
#[derive(Debug, Clone, Default)]
pub struct ExactKey {
    /// The server's key (`""` by default, as TVM's server).
    pub key: String,
}

impl KeyMatcher for ExactKey {
    fn claim(&self, client_key: &str) -> Option<Box<dyn Any + Send>> {
        (client_key.strip_prefix("client:") == Some(self.key.as_str()))
            .then(|| Box::new(()) as Box<dyn Any + Send>)
    }
    fn server_key(&self) -> String {
        format!("server:{}", self.key)
    }
}

/// Does the server side of the handshake on `stream`, then serves the client.
pub fn serve_connection(
    stream: TcpStream,
    matcher: &dyn KeyMatcher,
    config: &SessionConfig,
    stop: Arc<AtomicBool>,
) -> SessionEnd {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    if let Err(e) = stream.set_read_timeout(Some(POLL)) {
        return SessionEnd::Protocol(e.to_string());
    }
    // The whole handshake must arrive within the timeout (a peer trickling bytes cannot hold a
    // session slot), and a stopping server does not wait for it.
    let never = AtomicBool::new(false);
    let mut reader = PollingReader::new(
        &stream,
        &stop,
        &never,
        Instant::now().checked_add(config.handshake_timeout),
    );
    let hello = match wire::read_client_handshake(&mut reader) {
        Ok(h) => h,
        Err(e) => {
            let _ = stream.shutdown(Shutdown::Both);
            return match reader.woke {
                Some(Wake::Stop) => SessionEnd::Stopped,
                Some(_) => SessionEnd::Handshake("no handshake within the timeout".into()),
                None => SessionEnd::Handshake(e.to_string()),
            };
        }
    };
    let guard = match matcher.claim(hello.key()) {
        Some(g) => g,
        None => {
            let _ = wire::write_server_reply(&mut &stream, wire::CODE_MISMATCH, "");
            let _ = stream.shutdown(Shutdown::Both);
            return SessionEnd::KeyMismatch(hello.key().to_owned());
        }
    };
    if let Err(e) =
        wire::write_server_reply(&mut &stream, wire::CODE_SUCCESS, &matcher.server_key())
    {
        return SessionEnd::Protocol(e.to_string());
    }
    log::info!("{peer}: connected with key {:?}", hello.raw);
    let end = serve_session(stream, hello.options(), config, stop);
    drop(guard);
    end
}

/// How often a blocked read wakes up to look at the stop flag and the timeouts.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// Longest time a write may make no progress because the peer does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Whoever writes to the socket holds this lock, so frames never interleave.
pub(crate) struct Writer {
    pub(crate) stream: TcpStream,
    pub(crate) closed: bool,
}

impl Writer {
    /// Writes a whole frame in slices of at most `POLL` (the socket's write timeout), so a peer
    /// that stops reading holds the writer (and the lock) only until `give_up()` says the
    /// session is ending, or for `WRITE_TIMEOUT` without progress. A frame cut short ends the
    /// session.
    pub(crate) fn send(&mut self, frame: &[u8], give_up: &dyn Fn() -> bool) -> io::Result<()> {
        if self.closed {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "session closed"));
        }
        let mut deadline = Instant::now() + WRITE_TIMEOUT;
        let mut rest = frame;
        while !rest.is_empty() {
            match self.stream.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    rest = &rest[n..];
                    deadline = Instant::now() + WRITE_TIMEOUT;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    if give_up() || Instant::now() >= deadline {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the peer does not read",
                        ));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        self.stream.flush()
    }
}

/// Why the polling reader gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    Stop,
    Expired,
    Idle,
    /// A chained session's other side ended (docs/rpc.md "Chained sessions").
    Peer,
}

/// A reader that waits in short slices so it can notice the stop flag and the timeouts.
pub(crate) struct PollingReader<'a> {
    pub(crate) stream: &'a TcpStream,
    pub(crate) stop: &'a AtomicBool,
    pub(crate) expired: &'a AtomicBool,
    pub(crate) idle_deadline: Option<Instant>,
    /// Another reason to wake, looked at with the others (a relay's idle rule and its other
    /// side's end).
    pub(crate) also: Option<&'a dyn Fn() -> Option<Wake>>,
    pub(crate) woke: Option<Wake>,
}

impl<'a> PollingReader<'a> {
    /// A reader of `stream` that gives up at the stop flag, at `expired`, and at
    /// `idle_deadline` when given.
    pub(crate) fn new(
        stream: &'a TcpStream,
        stop: &'a AtomicBool,
        expired: &'a AtomicBool,
        idle_deadline: Option<Instant>,
    ) -> PollingReader<'a> {
        PollingReader {
            stream,
            stop,
            expired,
            idle_deadline,
            also: None,
            woke: None,
        }
    }
}

impl Read for PollingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // Checked before every read, not only after one timed out: a peer sending a byte
            // per poll interval never lets a read time out, yet must meet the deadline and must
            // not hold up a stop.
            let wake = if self.expired.load(Ordering::SeqCst) {
                Some(Wake::Expired)
            } else if self.stop.load(Ordering::SeqCst) {
                Some(Wake::Stop)
            } else if self.idle_deadline.is_some_and(|d| Instant::now() >= d) {
                Some(Wake::Idle)
            } else {
                self.also.and_then(|f| f())
            };
            if let Some(w) = wake {
                self.woke = Some(w);
                return Err(io::Error::new(io::ErrorKind::TimedOut, format!("{w:?}")));
            }
            match (&mut &*self.stream).read(buf) {
                Ok(n) => return Ok(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    if self.expired.load(Ordering::SeqCst) {
                        self.woke = Some(Wake::Expired);
                    }
                    return Err(e);
                }
            }
        }
    }
}

/// Serves one client whose handshake is done: requests until kShutdown, EOF, an error of the
/// byte stream, the client's `-timeout` (from `client_options`), the idle timeout or `stop`.
/// The session's sandbox folder is created here and removed before returning.
pub fn serve_session(
    stream: TcpStream,
    client_options: &str,
    config: &SessionConfig,
    stop: Arc<AtomicBool>,
) -> SessionEnd {
    let end = run_session(stream, client_options, config, &stop);
    log::info!("session ended: {end:?}");
    end
}

fn run_session(
    stream: TcpStream,
    client_options: &str,
    config: &SessionConfig,
    stop: &AtomicBool,
) -> SessionEnd {
    let setup = || -> io::Result<(TcpStream, Sandbox)> {
        stream.set_read_timeout(Some(POLL))?;
        stream.set_write_timeout(Some(POLL))?;
        stream.set_nodelay(true)?;
        let w = stream.try_clone()?;
        let sb = Sandbox::create(
            &config.sandbox_root,
            "session",
            config.limits.max_upload_file,
            config.limits.max_sandbox_bytes,
        )?;
        Ok((w, sb))
    };
    let (wstream, sandbox) = match setup() {
        Ok(x) => x,
        Err(e) => {
            let _ = stream.shutdown(Shutdown::Both);
            return SessionEnd::Setup(e.to_string());
        }
    };
    log::info!("session sandbox {}", sandbox.dir().display());
    let writer = Mutex::new(Writer {
        stream: wstream,
        closed: false,
    });
    let expired = AtomicBool::new(false);
    // A timeout too large for a Duration (or an instant) means no timeout.
    let deadline = wire::parse_timeout(client_options)
        .and_then(|t| Duration::try_from_secs_f64(t).ok())
        .and_then(|t| Some((t, Instant::now().checked_add(t)?)));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let calls = Calls::new(stop, &expired);

    std::thread::scope(|scope| {
        let (writer, calls, stream) = (&writer, &calls, &stream);
        // The watchdog: a model call in progress is interrupted when the server stops, the
        // client's timeout expires or the client leaves (docs/rpc.md "Timeouts"); it ends with
        // the session.
        scope.spawn(move || {
            let gone = || interrupt::peer_gone(stream);
            interrupt::watch(calls, deadline.map(|(_, d)| d), done_rx, gone, || {
                let t = deadline.map_or(Duration::ZERO, |(t, _)| t);
                // Tell the client the way TVM's server does, then cut the connection; the call
                // in progress was interrupted, and its reply is dropped.
                let msg = format!(
                    "{}the session's {}s timeout expired; the server closed it",
                    wire::TIMEOUT_ERROR_PREFIX,
                    t.as_secs_f64()
                );
                // A write blocked on a peer that does not read sees `expired` and lets go of
                // the lock; this message then gets a second at most.
                let started = Instant::now();
                if let Ok(mut w) = writer.lock() {
                    let give_up = || {
                        stop.load(Ordering::SeqCst) || started.elapsed() > Duration::from_secs(1)
                    };
                    let _ = w.send(&wire::exception_frame(&msg), &give_up);
                    w.closed = true;
                }
                let _ = stream.shutdown(Shutdown::Both);
            })
        });
        let end = request_loop(stream, config, stop, &expired, writer, calls, sandbox);
        drop(done_tx);
        if let Ok(mut w) = writer.lock() {
            w.closed = true;
        }
        let _ = stream.shutdown(Shutdown::Both);
        end
    })
}

fn request_loop(
    stream: &TcpStream,
    config: &SessionConfig,
    stop: &AtomicBool,
    expired: &AtomicBool,
    writer: &Mutex<Writer>,
    calls: &Calls<'_>,
    sandbox: Sandbox,
) -> SessionEnd {
    let cancel = || calls.ending();
    let mut state = State::new(config, sandbox, calls);
    loop {
        let mut reader = PollingReader::new(stream, stop, expired, config.idle_deadline());
        let packet = match wire::read_packet(&mut reader, config.limits.max_packet) {
            Ok(p) => p,
            Err(e) => {
                return match (reader.woke, e) {
                    (Some(Wake::Expired), _) => SessionEnd::Timeout,
                    (Some(Wake::Stop), _) => SessionEnd::Stopped,
                    (Some(Wake::Idle), _) => SessionEnd::Idle,
                    (Some(Wake::Peer), _) | (None, WireError::Closed) => SessionEnd::Closed,
                    (None, e @ WireError::TooLarge { .. }) => {
                        // The stream cannot be resynchronised; say why before closing.
                        if let Ok(mut w) = writer.lock() {
                            let _ = w.send(&wire::exception_frame(&e.to_string()), &cancel);
                        }
                        SessionEnd::Protocol(e.to_string())
                    }
                    (None, e) => SessionEnd::Protocol(e.to_string()),
                };
            }
        };
        let reply = state.handle(&packet);
        if expired.load(Ordering::SeqCst) {
            return SessionEnd::Timeout;
        }
        let f = match reply {
            Reply::Shutdown => return SessionEnd::Shutdown,
            Reply::Frame(f) => f,
            Reply::Chain(hop) => match chain::connect(&hop, config, stop, expired) {
                Ok(sock) => {
                    log::info!("chained to {}", hop.name());
                    let ok = match writer.lock() {
                        Ok(mut w) => w.send(&wire::return_frame(&[Arg::None]), &cancel),
                        Err(_) => Err(io::Error::other("writer lock poisoned")),
                    };
                    if ok.is_err() {
                        let _ = sock.shutdown(Shutdown::Both);
                        return SessionEnd::Closed;
                    }
                    // The session's own state (and its sandbox) is not used from here.
                    drop(state);
                    return chain::relay(stream, sock, &hop.name(), config, stop, expired, writer);
                }
                Err(chain::ConnectError::Woke(w)) => {
                    return match w {
                        Wake::Expired => SessionEnd::Timeout,
                        Wake::Stop => SessionEnd::Stopped,
                        Wake::Idle => SessionEnd::Idle,
                        Wake::Peer => SessionEnd::Closed,
                    }
                }
                Err(chain::ConnectError::Failed(why)) => {
                    log::warn!("cannot chain to {}: {why}", hop.name());
                    wire::exception_frame(&format!(
                        "session constructor {}: cannot connect to {}: {why}",
                        chain::CONNECT,
                        hop.name()
                    ))
                }
            },
        };
        let sent = match writer.lock() {
            Ok(mut w) => w.send(&f, &cancel),
            Err(_) => Err(io::Error::other("writer lock poisoned")),
        };
        if let Err(e) = sent {
            return if expired.load(Ordering::SeqCst) {
                SessionEnd::Timeout
            } else if stop.load(Ordering::SeqCst) {
                SessionEnd::Stopped
            } else {
                SessionEnd::Protocol(e.to_string())
            };
        }
        if stop.load(Ordering::SeqCst) {
            return SessionEnd::Stopped;
        }
    }
}
