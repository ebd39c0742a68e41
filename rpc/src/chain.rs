//! Chained sessions (docs/rpc.md "Chained sessions"): a `kInitServer` whose constructor is
//! `rpc.Connect` makes this session a TVM client of the next hop, then a relay of packets
//! between the client and that hop, as TVM's server does with the session `rpc.Connect`
//! returns.
//!
//! A client that makes the server connect somewhere is a door into the server's network, so
//! only the hops the server allows (`ServerBuilder::allow_hops`, `--allow-hop`) are reached.

use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use crate::session::{PollingReader, RequestError, SessionConfig, SessionEnd, Wake, Writer, POLL};
use crate::wire::{self, Arg, Put, RpcCode, WireError};

/// The only session constructor this server knows.
pub(crate) const CONNECT: &str = "rpc.Connect";

/// The next hop a client asked for, allowed by the server.
#[derive(Debug, Clone)]
pub(crate) struct Hop {
    host: String,
    port: u16,
    /// The key as given (the handshake sends `client:<key>`).
    key: String,
    /// The constructor arguments the next hop gets in its `kInitServer` (those after
    /// `enable_logging`).
    init_args: Vec<Arg>,
}

impl Hop {
    /// A hop to `host:port`, matching `key`, whose `kInitServer` carries `init_args` (the
    /// client of `crate::client` connects through this too).
    pub(crate) fn new(host: String, port: u16, key: String, init_args: Vec<Arg>) -> Hop {
        Hop {
            host,
            port,
            key,
            init_args,
        }
    }

    /// `host:port`, bracketing an IPv6 address.
    pub(crate) fn name(&self) -> String {
        join_host_port(&self.host, self.port)
    }
}

/// `host:port`, bracketing an IPv6 address.
pub(crate) fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Splits `HOST:PORT` (`[v6]:PORT` for an IPv6 address); `None` when malformed.
pub fn parse_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = s.trim().rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = match host.strip_prefix('[') {
        Some(h) => h.strip_suffix(']')?,
        None if host.contains(':') => return None,
        None => host,
    };
    if host.is_empty() || host.chars().any(char::is_whitespace) {
        return None;
    }
    Some((host.to_owned(), port))
}

/// Whether `host:port` is one of `allowed` (hosts compared without case, ports exactly; the
/// name is compared as written, not resolved).
fn allowed(allowed: &[String], host: &str, port: u16) -> bool {
    allowed.iter().filter_map(|a| parse_host_port(a)).any(|(h, p)| {
        p == port
            && (h.eq_ignore_ascii_case(host)
                || matches!((h.parse::<IpAddr>(), host.parse::<IpAddr>()), (Ok(a), Ok(b)) if a == b))
    })
}

/// Reads the constructor arguments of a `kInitServer` (`args[0]` is the constructor's name):
/// `rpc.Connect`, url, port, key, enable_logging, then the next hop's own constructor
/// arguments. Any other constructor, and a hop the server does not allow, is refused.
pub(crate) fn parse(args: &[Arg], allow: &[String]) -> Result<Hop, RequestError> {
    let name = match args.first() {
        Some(Arg::Str(s)) | Some(Arg::RawStr(s)) => s.as_str(),
        Some(a) => {
            return Err(RequestError::Invalid(format!(
                "kInitServer: the session constructor's name must be a string, got {}",
                a.kind()
            )))
        }
        None => return Err(RequestError::Invalid("kInitServer: no constructor".into())),
    };
    if name != CONNECT {
        return Err(RequestError::Unsupported(format!(
            "cannot find session constructor {name:?}: this server knows only {CONNECT} \
             (chaining to another server)"
        )));
    }
    let usage = || {
        RequestError::Invalid(format!(
            "{CONNECT} expects url (string), port (int), key (string), enable_logging (bool), \
             then the next hop's constructor arguments"
        ))
    };
    let string = |i: usize| match args.get(i) {
        Some(Arg::Str(s)) | Some(Arg::RawStr(s)) => Ok(s.clone()),
        _ => Err(usage()),
    };
    let host = string(1)?;
    let port = match args.get(2) {
        Some(Arg::Int(p)) => u16::try_from(*p)
            .map_err(|_| RequestError::Invalid(format!("{CONNECT}: port {p} is out of range")))?,
        _ => return Err(usage()),
    };
    let key = string(3)?;
    // enable_logging: accepted and ignored (the session logs the hop at info level).
    match args.get(4) {
        Some(Arg::Bool(_)) | Some(Arg::Int(_)) | None => {}
        Some(_) => return Err(usage()),
    }
    if host.is_empty() || host.len() > 1024 || key.len() > wire::MAX_KEY_LEN - 7 {
        return Err(usage());
    }
    let hop = Hop {
        host,
        port,
        key,
        init_args: args.get(5..).unwrap_or_default().to_vec(),
    };
    if !allowed(allow, &hop.host, hop.port) {
        return Err(RequestError::Invalid(format!(
            "{CONNECT} to {} refused: chaining to it is not allowed on this server (start it \
             with --allow-hop {}, or ServerBuilder::allow_hops)",
            hop.name(),
            hop.name()
        )));
    }
    Ok(hop)
}

/// Why connecting to the next hop ended without a relay.
pub(crate) enum ConnectError {
    /// The session must end (stop, client timeout, idle timeout).
    Woke(Wake),
    /// The client is told this; the session goes on, uninitialised.
    Failed(String),
}

impl From<io::Error> for ConnectError {
    fn from(e: io::Error) -> Self {
        ConnectError::Failed(e.to_string())
    }
}

/// Resolves the hop's name, bounded by `timeout` (an address needs no look-up; a look-up that
/// never returns leaves a thread behind, not the session).
fn resolve(host: &str, port: u16, timeout: Duration) -> Result<Vec<SocketAddr>, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let (tx, rx) = mpsc::channel();
    let name = host.to_owned();
    std::thread::Builder::new()
        .name("mote-rpc-resolve".into())
        .spawn(move || {
            let r = (name.as_str(), port)
                .to_socket_addrs()
                .map(|a| a.collect::<Vec<_>>());
            let _ = tx.send(r);
        })
        .map_err(|e| e.to_string())?;
    match rx.recv_timeout(timeout) {
        Ok(Ok(a)) if !a.is_empty() => Ok(a),
        Ok(Ok(_)) => Err("the name has no address".into()),
        Ok(Err(e)) => Err(format!("cannot resolve the name: {e}")),
        Err(_) => Err(format!(
            "resolving the name took more than {}s",
            timeout.as_secs_f64()
        )),
    }
}

/// Connects to the hop as a TVM client (`RPCConnect`): the handshake with `client:<key>`, then
/// `kInitServer` with the remaining constructor arguments, whose `kReturn` it waits for. The
/// connection and the handshake must finish within the handshake timeout; the answer to
/// `kInitServer` (the hop may chain further) waits as long as the session may: until the
/// server stops, the client's timeout expires or the idle timeout passes.
pub(crate) fn connect(
    hop: &Hop,
    config: &SessionConfig,
    stop: &AtomicBool,
    expired: &AtomicBool,
) -> Result<TcpStream, ConnectError> {
    let start = Instant::now();
    let limit = config.handshake_timeout;
    let left = || limit.saturating_sub(start.elapsed());
    let addrs = resolve(&hop.host, hop.port, limit).map_err(ConnectError::Failed)?;
    let mut sock = None;
    let mut last = String::from("no address");
    for a in addrs {
        if left().is_zero() {
            last = format!("no connection within {}s", limit.as_secs_f64());
            break;
        }
        match TcpStream::connect_timeout(&a, left()) {
            Ok(s) => {
                sock = Some(s);
                break;
            }
            Err(e) if a.ip().to_string() == hop.host => last = e.to_string(),
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    let sock = sock.ok_or(ConnectError::Failed(last))?;
    sock.set_read_timeout(Some(POLL))?;
    sock.set_write_timeout(Some(POLL))?;
    sock.set_nodelay(true)?;
    let ending = || stop.load(Ordering::SeqCst) || expired.load(Ordering::SeqCst);
    let mut w = Writer {
        stream: sock.try_clone()?,
        closed: false,
    };
    let mut hello = Vec::new();
    wire::write_handshake(&mut hello, &format!("client:{}", hop.key))?;
    w.send(&hello, &ending)?;

    let deadline = start.checked_add(limit);
    let mut r = PollingReader::new(&sock, stop, expired, deadline);
    let mut word = [0u8; 4];
    let read = |r: &mut PollingReader<'_>, buf: &mut [u8]| -> Result<(), ConnectError> {
        io::Read::read_exact(r, buf).map_err(|e| match r.woke {
            Some(Wake::Idle) => {
                ConnectError::Failed(format!("no handshake within {}s", limit.as_secs_f64()))
            }
            Some(w) => ConnectError::Woke(w),
            None => ConnectError::Failed(format!("the handshake failed: {e}")),
        })
    };
    read(&mut r, &mut word)?;
    match i32::from_le_bytes(word) {
        wire::CODE_SUCCESS => {}
        wire::CODE_MISMATCH => {
            return Err(ConnectError::Failed(format!(
                "no server there matches key {:?}",
                hop.key
            )))
        }
        wire::CODE_DUPLICATE => {
            return Err(ConnectError::Failed(format!(
                "the server there already has key {:?}",
                hop.key
            )))
        }
        _ => {
            return Err(ConnectError::Failed(
                "it is not a TVM RPC server (wrong handshake answer)".into(),
            ))
        }
    }
    read(&mut r, &mut word)?;
    let len = i32::from_le_bytes(word);
    if !(0..=wire::MAX_KEY_LEN as i32).contains(&len) {
        return Err(ConnectError::Failed(format!(
            "its handshake has a key length of {len}"
        )));
    }
    let mut key = vec![0u8; len as usize];
    read(&mut r, &mut key)?;

    let mut body = Vec::new();
    body.put_bytes(wire::PROTOCOL_VERSION.as_bytes());
    body.extend_from_slice(&wire::encode_seq(&hop.init_args));
    if body.len() as u64 + 4 > config.limits.max_packet {
        return Err(ConnectError::Failed(
            "the constructor arguments exceed the packet limit".into(),
        ));
    }
    w.send(&wire::frame(RpcCode::InitServer, &body), &ending)?;

    let mut r = PollingReader::new(&sock, stop, expired, config.idle_deadline());
    let p = match wire::read_packet(&mut r, config.limits.max_packet) {
        Ok(p) => p,
        Err(e) => {
            return Err(match r.woke {
                Some(w) => ConnectError::Woke(w),
                None if matches!(e, WireError::Closed) => {
                    ConnectError::Failed("it closed the connection after the handshake".into())
                }
                None => ConnectError::Failed(format!("its answer to kInitServer: {e}")),
            })
        }
    };
    match p.rpc_code() {
        Some(RpcCode::Return) => Ok(sock),
        Some(RpcCode::Exception) => {
            let msg = match wire::decode_seq(&p.body).ok().as_deref() {
                Some([Arg::RawStr(m), ..]) | Some([Arg::Str(m), ..]) => m.clone(),
                _ => "(no message)".into(),
            };
            Err(ConnectError::Failed(format!(
                "its kInitServer failed: {msg}"
            )))
        }
        _ => Err(ConnectError::Failed(format!(
            "it answered kInitServer with code {}",
            p.code
        ))),
    }
}

/// `u64 len`, `i32 code`, body: the packet as it came, for the other side.
fn raw_frame(code: i32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + body.len());
    out.put_u64(4 + body.len() as u64);
    out.put_i32(code);
    out.extend_from_slice(body);
    out
}

/// Relays packets between the client (`client`, written through `writer`, which the timeout
/// watchdog also uses) and the hop until either side closes, the client sends kShutdown
/// (relayed, as TVM's server relays it when it drops the chained session), the server stops,
/// the client's timeout expires, or neither side sends anything for the idle timeout while no
/// request is waiting for its answer. Packets are relayed whole and unchanged (TVM's server
/// decodes them and encodes the same bytes again: handles, data addresses and devices are the
/// hop's); each one, either way, must fit the packet limit.
pub(crate) fn relay(
    client: &TcpStream,
    hop: TcpStream,
    name: &str,
    config: &SessionConfig,
    stop: &AtomicBool,
    expired: &AtomicBool,
    writer: &Mutex<Writer>,
) -> SessionEnd {
    let hop_writer = match hop.try_clone() {
        Ok(s) => s,
        Err(e) => {
            let _ = hop.shutdown(Shutdown::Both);
            return SessionEnd::Setup(e.to_string());
        }
    };
    let mut hop_writer = Writer {
        stream: hop_writer,
        closed: false,
    };
    let max = config.limits.max_packet;
    // A request of the client waits for its answer: the idle timeout does not run.
    let pending = AtomicBool::new(false);
    let last = Mutex::new(Instant::now());
    let touch = || {
        if let Ok(mut l) = last.lock() {
            *l = Instant::now();
        }
    };
    let client_done = AtomicBool::new(false);
    let hop_done = AtomicBool::new(false);
    let ending = || stop.load(Ordering::SeqCst) || expired.load(Ordering::SeqCst);
    log::info!("relaying to {name}");

    let end = std::thread::scope(|scope| {
        let hop_side = scope.spawn(|| {
            let peer_gone = || client_done.load(Ordering::SeqCst).then_some(Wake::Peer);
            let give_up = || ending() || client_done.load(Ordering::SeqCst);
            let why = loop {
                let mut r = PollingReader::new(&hop, stop, expired, None);
                r.also = Some(&peer_gone);
                let p = match wire::read_packet(&mut r, max) {
                    Ok(p) => p,
                    Err(e) => {
                        break match (r.woke, e) {
                            (Some(_), _) => None,
                            (None, WireError::Closed) => {
                                Some(format!("the next hop {name} closed the connection"))
                            }
                            (None, e) => Some(format!("the next hop {name}: {e}")),
                        };
                    }
                };
                if matches!(
                    p.rpc_code(),
                    Some(RpcCode::Return | RpcCode::Exception | RpcCode::CopyAck)
                ) {
                    pending.store(false, Ordering::SeqCst);
                }
                touch();
                log::debug!("{name} -> client: code {}, {} bytes", p.code, p.body.len());
                let sent = match writer.lock() {
                    Ok(mut w) => w.send(&raw_frame(p.code, &p.body), &give_up),
                    Err(_) => Err(io::Error::other("writer lock poisoned")),
                };
                if sent.is_err() {
                    break None;
                }
            };
            if let Some(why) = &why {
                // A request waiting for its answer gets an error instead of a closed socket.
                if pending.load(Ordering::SeqCst) && !client_done.load(Ordering::SeqCst) {
                    if let Ok(mut w) = writer.lock() {
                        let _ = w.send(&wire::exception_frame(why), &give_up);
                    }
                }
            }
            hop_done.store(true, Ordering::SeqCst);
            why
        });

        let idle = config.idle_timeout;
        let also = || {
            if hop_done.load(Ordering::SeqCst) {
                return Some(Wake::Peer);
            }
            let quiet = last.lock().map(|l| l.elapsed()).unwrap_or_default();
            (!pending.load(Ordering::SeqCst) && idle.is_some_and(|d| quiet >= d))
                .then_some(Wake::Idle)
        };
        let give_up = || ending() || hop_done.load(Ordering::SeqCst);
        let end = loop {
            let mut r = PollingReader::new(client, stop, expired, None);
            r.also = Some(&also);
            let p = match wire::read_packet(&mut r, max) {
                Ok(p) => p,
                Err(e) => {
                    break match (r.woke, e) {
                        (Some(Wake::Expired), _) => SessionEnd::Timeout,
                        (Some(Wake::Stop), _) => SessionEnd::Stopped,
                        (Some(Wake::Idle), _) => SessionEnd::Idle,
                        (Some(Wake::Peer), _) => SessionEnd::Protocol(String::new()),
                        (None, WireError::Closed) => SessionEnd::Closed,
                        (None, e @ WireError::TooLarge { .. }) => {
                            if let Ok(mut w) = writer.lock() {
                                let _ = w.send(&wire::exception_frame(&e.to_string()), &give_up);
                            }
                            SessionEnd::Protocol(e.to_string())
                        }
                        (None, e) => SessionEnd::Protocol(e.to_string()),
                    };
                }
            };
            let shutdown = p.rpc_code() == Some(RpcCode::Shutdown);
            if !shutdown {
                pending.store(true, Ordering::SeqCst);
            }
            touch();
            log::debug!("client -> {name}: code {}, {} bytes", p.code, p.body.len());
            if hop_writer
                .send(&raw_frame(p.code, &p.body), &give_up)
                .is_err()
            {
                break if expired.load(Ordering::SeqCst) {
                    SessionEnd::Timeout
                } else if stop.load(Ordering::SeqCst) {
                    SessionEnd::Stopped
                } else {
                    SessionEnd::Protocol(format!("the next hop {name} does not read"))
                };
            }
            if shutdown {
                break SessionEnd::Shutdown;
            }
        };
        if !matches!(end, SessionEnd::Shutdown) && !hop_done.load(Ordering::SeqCst) {
            // What TVM's server does when the chained session goes: tell the hop (best effort).
            let now = || true;
            let _ = hop_writer.send(&wire::frame(RpcCode::Shutdown, &[]), &now);
        }
        client_done.store(true, Ordering::SeqCst);
        let _ = hop.shutdown(Shutdown::Write);
        let hop_why = hop_side.join().ok().flatten();
        match end {
            // The hop ended first: say so.
            SessionEnd::Protocol(m) if m.is_empty() => match hop_why {
                Some(why) => SessionEnd::Protocol(why),
                None => SessionEnd::Closed,
            },
            e => e,
        }
    });
    let _ = hop.shutdown(Shutdown::Both);
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Arg {
        Arg::Str(v.into())
    }

    #[test]
    fn host_port_forms() {
        assert_eq!(parse_host_port("a.b:1"), Some(("a.b".into(), 1)));
        assert_eq!(parse_host_port("[::1]:9090"), Some(("::1".into(), 9090)));
        assert_eq!(parse_host_port("::1:9090"), None);
        assert_eq!(parse_host_port("host"), None);
        assert_eq!(parse_host_port(":80"), None);
        assert_eq!(parse_host_port("h:99999"), None);
    }

    #[test]
    fn constructors_and_allow_list() {
        let allow = vec!["LocalHost:9091".to_string(), "[::1]:9092".to_string()];
        let args = |host: &str, port: i64| {
            vec![
                s(CONNECT),
                s(host),
                Arg::Int(port),
                s("k"),
                Arg::Bool(false),
                s("rpc.Connect"),
            ]
        };
        let hop = parse(&args("localhost", 9091), &allow).unwrap();
        assert_eq!(hop.init_args.len(), 1);
        assert_eq!(hop.name(), "localhost:9091");
        assert!(parse(&args("0:0:0:0:0:0:0:1", 9092), &allow).is_ok());
        let e = parse(&args("localhost", 9092), &allow)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--allow-hop localhost:9092"), "{e}");
        let e = parse(&args("localhost", 9091), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--allow-hop"), "{e}");
        assert!(parse(&args("localhost", 70000), &allow).is_err());
        assert!(parse(&[s(CONNECT), s("localhost")], &allow).is_err());
        let e = parse(&[s("rpc.NonExistingConstructor")], &allow)
            .unwrap_err()
            .to_string();
        assert!(e.contains("rpc.NonExistingConstructor"), "{e}");
        assert!(parse(&[Arg::Int(1)], &allow).is_err());
    }
}
