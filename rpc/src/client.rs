//! A client of TVM 0.27's RPC protocol (docs/rpc.md "Client"): connects to a TVM RPC server
//! (Mote's, TVM's own, or either behind a proxy), looks functions up, calls them, moves files
//! and remote memory. It is what the Java bindings' `org.mote.rpc.RemoteSession` and tvm4j's
//! `rpc.Client` stand on.
//!
//! One [`Client`] is one session. Requests on it are serialised (the protocol answers each
//! request before the next); clones share the session. Everything the server hands out is owned
//! by a value here that frees it on the server when dropped: [`RemoteRef`] for functions,
//! modules and other objects (`kFreeHandle`), [`RemoteTensor`] for memory allocated by the
//! client (`kDevFreeData`). The session ends (`kShutdown`) on [`Client::close`] or when the last
//! clone and the last such value are gone.
//!
//! Nothing the server sends can make the client panic or allocate more than the packet limit:
//! answers are decoded with [`wire`]'s checked reader, and a stream that stops making sense
//! closes the session with [`ClientError::Protocol`].

use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::chain::{self, join_host_port, ConnectError, Hop};
use crate::session::{Limits, SessionConfig};
use crate::wire::{
    self, handle_of, Arg, Device, Put, Ret, RpcCode, WireDType, WireError, WireTensor,
};

/// How a [`Client`] connects and what it accepts.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long name resolution, the TCP connection, the handshake and the server's answer to
    /// `kInitServer` may take together.
    pub connect_timeout: Duration,
    /// The longest packet the client accepts from the server (the default is the server's own
    /// default limit, `Limits::default().max_packet`).
    pub max_packet: u64,
    /// How long one request may wait for its answer (`None`, the default: as long as it takes;
    /// a model call may run for minutes). A request that times out closes the session, since
    /// its answer would arrive out of turn.
    pub request_timeout: Option<Duration>,
    /// Asks the server to end the session after this long (the handshake's `-timeout=`
    /// option, docs/rpc.md "Handshake"); `None`: no limit asked for.
    pub session_timeout: Option<Duration>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(10),
            max_packet: Limits::default().max_packet,
            request_timeout: None,
            session_timeout: None,
        }
    }
}

/// Why a client request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// No session could be opened: the address does not resolve or refuses, no server there
    /// matches the key, it is not a TVM RPC server, or its `kInitServer` failed.
    #[error("cannot connect to {peer}: {why}")]
    Connect {
        /// `host:port`.
        peer: String,
        /// What went wrong.
        why: String,
    },
    /// The server answered the request with an error (`kException`); the session goes on.
    #[error("the server raised: {0}")]
    Remote(String),
    /// The server's answer broke the protocol; the session is closed.
    #[error("RPC protocol error: {0}")]
    Protocol(String),
    /// The connection failed (reset, timed out); the session is closed.
    #[error("RPC connection: {0}")]
    Io(#[from] io::Error),
    /// The session is closed ([`Client::close`], or an earlier failure closed it).
    #[error("the RPC session is closed")]
    Closed,
    /// The request cannot be made with these arguments (nothing was sent).
    #[error("invalid argument: {0}")]
    Argument(String),
}

/// What a remote function call returned (docs/rpc.md "Return values").
#[derive(Debug)]
pub enum Value {
    /// Nothing.
    None,
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A data type.
    DataType(WireDType),
    /// A function living on the server.
    Function(RemoteRef),
    /// A module living on the server.
    Module(RemoteRef),
    /// A tensor the server returned: its record (readable with [`Client::copy_from`]) and the
    /// handle that keeps its memory alive.
    Tensor(WireTensor, RemoteRef),
    /// Another object (a tuple, a shape...), by its type index.
    Object(i32, RemoteRef),
}

/// The connection, used by one request at a time.
#[derive(Debug)]
struct Conn {
    /// `None` once closed.
    stream: Option<TcpStream>,
}

#[derive(Debug)]
struct Inner {
    peer: String,
    max_packet: u64,
    conn: Mutex<Conn>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Conn> {
        // A panic while the lock was held cannot leave `Conn` half-updated (it holds one
        // Option), so a poisoned lock is safe to keep using.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends one request and reads its answer. Any failure of the byte stream closes the
    /// session, since later answers could no longer be matched to their requests.
    fn request(&self, code: RpcCode, body: &[u8]) -> Result<wire::Packet, ClientError> {
        let mut conn = self.lock();
        let stream = conn.stream.as_mut().ok_or(ClientError::Closed)?;
        let sent = stream
            .write_all(&wire::frame(code, body))
            .and_then(|()| stream.flush());
        let answer = match sent {
            Ok(()) => wire::read_packet(stream, self.max_packet).map_err(|e| match e {
                WireError::Io(e) => ClientError::Io(e),
                WireError::Closed => {
                    ClientError::Protocol("the server closed the connection".into())
                }
                e => ClientError::Protocol(e.to_string()),
            }),
            Err(e) => Err(ClientError::Io(e)),
        };
        let answer = answer.and_then(|p| match (code, p.rpc_code()) {
            (_, Some(RpcCode::Return | RpcCode::Exception)) => Ok(p),
            (RpcCode::CopyFromRemote, Some(RpcCode::CopyAck)) => Ok(p),
            _ => Err(ClientError::Protocol(format!(
                "the server answered request {} with packet code {}",
                code as i32, p.code
            ))),
        });
        if answer.is_err() {
            if let Some(s) = conn.stream.take() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        answer
    }

    /// Closes the session because an answer made no sense, and says why.
    fn broken(&self, why: String) -> ClientError {
        if let Some(s) = self.lock().stream.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        ClientError::Protocol(why)
    }

    /// Sends `kShutdown` (no answer comes) and closes.
    fn shutdown(&self) {
        let mut conn = self.lock();
        if let Some(mut s) = conn.stream.take() {
            let _ = s.write_all(&wire::frame(RpcCode::Shutdown, &[]));
            let _ = s.flush();
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// A syscall (codes 9 and up): a packed sequence in, exactly one value out.
    fn syscall(&self, code: RpcCode, args: &[Arg]) -> Result<Arg, ClientError> {
        let p = self.request(code, &wire::encode_seq(args))?;
        let mut vals = answer_seq(self, &p)?;
        if vals.len() != 1 {
            return Err(self.broken(format!(
                "the answer to request {} holds {} values, not 1",
                code as i32,
                vals.len()
            )));
        }
        Ok(vals.remove(0))
    }

    fn free(&self, handle: u64) {
        // Best effort: a closed session has freed everything already.
        let _ = self.syscall(RpcCode::FreeHandle, &[Arg::OpaquePtr(handle)]);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The values of a `kReturn`, or the message of a `kException`.
fn answer_seq(inner: &Inner, p: &wire::Packet) -> Result<Vec<Arg>, ClientError> {
    let vals = wire::decode_seq(&p.body).map_err(|e| inner.broken(format!("an answer: {e}")))?;
    if p.rpc_code() == Some(RpcCode::Exception) {
        let msg = match vals.first() {
            Some(Arg::RawStr(m) | Arg::Str(m)) => m.clone(),
            _ => "(no message)".into(),
        };
        return Err(ClientError::Remote(msg));
    }
    Ok(vals)
}

/// A server handle as the answer carries it.
/// A TVM RPC session (see the module docs).
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// A function, module or other object living on the server. Dropping it frees it there
/// (`kFreeHandle`); it keeps the session open meanwhile.
#[derive(Debug)]
pub struct RemoteRef {
    inner: Arc<Inner>,
    handle: u64,
}

impl RemoteRef {
    /// The server's handle (what [`Arg::Function`] / [`Arg::Module`] carry).
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// This function as a call argument.
    pub fn as_function_arg(&self) -> Arg {
        Arg::Function(self.handle)
    }

    /// This module as a call argument.
    pub fn as_module_arg(&self) -> Arg {
        Arg::Module(self.handle)
    }
}

impl Drop for RemoteRef {
    fn drop(&mut self) {
        self.inner.free(self.handle);
    }
}

/// Memory the client allocated on the server (`kDevAllocData`), seen as a contiguous tensor.
/// Dropping it frees the memory there (`kDevFreeData`).
#[derive(Debug)]
pub struct RemoteTensor {
    inner: Arc<Inner>,
    record: WireTensor,
}

impl RemoteTensor {
    /// Its record, as call arguments and copies name it.
    pub fn record(&self) -> &WireTensor {
        &self.record
    }

    /// This tensor as a call argument.
    pub fn as_arg(&self) -> Arg {
        Arg::Tensor(self.record.clone())
    }
}

impl Drop for RemoteTensor {
    fn drop(&mut self) {
        let _ = self.inner.syscall(
            RpcCode::DevFreeData,
            &[
                Arg::Device(self.record.device),
                Arg::OpaquePtr(self.record.data),
            ],
        );
    }
}

impl Client {
    /// Connects to the server (or proxy) at `host:port` and opens a session with the server
    /// that matches `key` (`""`: any server that asks for no key).
    pub fn connect(
        host: &str,
        port: u16,
        key: &str,
        opts: &ClientOptions,
    ) -> Result<Client, ClientError> {
        let peer = join_host_port(host, port);
        let failed = |why: String| ClientError::Connect {
            peer: peer.clone(),
            why,
        };
        let mut key = key.to_owned();
        if let Some(t) = opts.session_timeout {
            key.push_str(&format!(" -timeout={}", t.as_secs().max(1)));
        }
        if key.len() + "client:".len() > wire::MAX_KEY_LEN {
            return Err(ClientError::Argument(format!(
                "the key is longer than {} bytes",
                wire::MAX_KEY_LEN
            )));
        }
        let config = SessionConfig {
            handshake_timeout: opts.connect_timeout,
            // Bounds the wait for the answer to kInitServer.
            idle_timeout: Some(opts.connect_timeout),
            limits: Limits {
                max_packet: opts.max_packet,
                ..Limits::default()
            },
            ..SessionConfig::default()
        };
        let hop = Hop::new(host.to_owned(), port, key, Vec::new());
        let (stop, expired) = (AtomicBool::new(false), AtomicBool::new(false));
        let sock = chain::connect(&hop, &config, &stop, &expired).map_err(|e| match e {
            ConnectError::Failed(why) => failed(why),
            ConnectError::Woke(_) => failed(format!(
                "no answer to kInitServer within {}s",
                opts.connect_timeout.as_secs_f64()
            )),
        })?;
        let setup = sock
            .set_read_timeout(opts.request_timeout)
            .and_then(|()| sock.set_write_timeout(opts.request_timeout));
        setup.map_err(|e| failed(e.to_string()))?;
        Ok(Client {
            inner: Arc::new(Inner {
                peer,
                max_packet: opts.max_packet,
                conn: Mutex::new(Conn { stream: Some(sock) }),
            }),
        })
    }

    /// `host:port` of the server (or proxy) this session goes to.
    pub fn peer(&self) -> &str {
        &self.inner.peer
    }

    /// Whether the session is still open.
    pub fn is_open(&self) -> bool {
        self.inner.lock().stream.is_some()
    }

    /// Ends the session (`kShutdown`). Later requests, and those of clones, fail with
    /// [`ClientError::Closed`]; dropping remote values then does nothing.
    pub fn close(&self) {
        self.inner.shutdown();
    }

    fn remote(&self, handle: u64) -> RemoteRef {
        RemoteRef {
            inner: Arc::clone(&self.inner),
            handle,
        }
    }

    /// The server's global function `name`, `None` when it has none.
    pub fn get_function(&self, name: &str) -> Result<Option<RemoteRef>, ClientError> {
        let a = self
            .inner
            .syscall(RpcCode::GetGlobalFunc, &[Arg::RawStr(name.to_owned())])?;
        match handle_of(&a) {
            Some(0) => Ok(None),
            Some(h) => Ok(Some(self.remote(h))),
            None => Err(self
                .inner
                .broken(format!("kGetGlobalFunc answered a {}", a.kind()))),
        }
    }

    /// The global function `name`, an error naming it when the server has none.
    fn global(&self, name: &str) -> Result<RemoteRef, ClientError> {
        self.get_function(name)?
            .ok_or_else(|| ClientError::Remote(format!("the server has no function {name}")))
    }

    /// Calls a remote function with `args`: numbers, strings ([`Arg::RawStr`]), bytes
    /// ([`Arg::Bytes`]), devices, data types, tensor records ([`RemoteTensor::as_arg`], or a
    /// returned tensor's record), functions and modules by handle.
    pub fn call(&self, f: &RemoteRef, args: &[Arg]) -> Result<Value, ClientError> {
        if !Arc::ptr_eq(&f.inner, &self.inner) {
            return Err(ClientError::Argument(
                "the function belongs to another session".into(),
            ));
        }
        let mut body = Vec::new();
        body.put_u64(f.handle);
        body.extend_from_slice(&wire::encode_seq(args));
        let p = self.inner.request(RpcCode::CallFunc, &body)?;
        let vals = answer_seq(&self.inner, &p)?;
        self.decode_return(vals)
    }

    /// Turns the values of a call's `kReturn` into a [`Value`]; handles become owned only once
    /// the whole answer is known to be well formed (a malformed one leaks nothing we own: the
    /// session is then closed, which frees everything on the server).
    fn decode_return(&self, vals: Vec<Arg>) -> Result<Value, ClientError> {
        let Some(ret) = Ret::from_args(&vals) else {
            let kinds: Vec<&str> = vals.iter().map(Arg::kind).collect();
            return Err(self
                .inner
                .broken(format!("a call returned [{}]", kinds.join(", "))));
        };
        Ok(match ret {
            Ret::None => Value::None,
            Ret::Int(v) => Value::Int(v),
            Ret::Bool(v) => Value::Bool(v),
            Ret::Float(v) => Value::Float(v),
            Ret::DataType(d) => Value::DataType(d),
            Ret::Str(s) => Value::Str(s),
            Ret::Bytes(b) => Value::Bytes(b),
            Ret::Tensor(x, h) => Value::Tensor(x, self.remote(h)),
            Ret::Function(h) => Value::Function(self.remote(h)),
            Ret::Module(h) => Value::Module(self.remote(h)),
            Ret::Object(tag, h) => Value::Object(tag, self.remote(h)),
        })
    }

    /// Calls the global `name` with `args`.
    fn call_global(&self, name: &str, args: &[Arg]) -> Result<Value, ClientError> {
        let f = self.global(name)?;
        self.call(&f, args)
    }

    /// Writes `data` to the file `name` in the session's folder on the server.
    pub fn upload(&self, name: &str, data: &[u8]) -> Result<(), ClientError> {
        self.call_global(
            "tvm.rpc.server.upload",
            &[Arg::RawStr(name.to_owned()), Arg::Bytes(data.to_vec())],
        )?;
        Ok(())
    }

    /// Reads the file `name` from the session's folder on the server.
    pub fn download(&self, name: &str) -> Result<Vec<u8>, ClientError> {
        match self.call_global("tvm.rpc.server.download", &[Arg::RawStr(name.to_owned())])? {
            Value::Bytes(b) => Ok(b),
            v => Err(self
                .inner
                .broken(format!("download returned {v:?}, not bytes"))),
        }
    }

    /// Removes the file `name` from the session's folder on the server.
    pub fn remove(&self, name: &str) -> Result<(), ClientError> {
        self.call_global("tvm.rpc.server.remove", &[Arg::RawStr(name.to_owned())])?;
        Ok(())
    }

    /// Loads the uploaded library `name` on the server.
    pub fn load_module(&self, name: &str) -> Result<RemoteRef, ClientError> {
        match self.call_global(
            "tvm.rpc.server.load_module",
            &[Arg::RawStr(name.to_owned())],
        )? {
            Value::Module(m) => Ok(m),
            v => Err(self
                .inner
                .broken(format!("load_module returned {v:?}, not a module"))),
        }
    }

    /// The function `name` of a remote module (searching the modules it imports too when
    /// `query_imports`), `None` when it has none.
    pub fn module_function(
        &self,
        module: &RemoteRef,
        name: &str,
        query_imports: bool,
    ) -> Result<Option<RemoteRef>, ClientError> {
        let args = [
            module.as_module_arg(),
            Arg::RawStr(name.to_owned()),
            Arg::Bool(query_imports),
        ];
        match self.call_global("tvm.rpc.server.ModuleGetFunction", &args)? {
            Value::Function(f) => Ok(Some(f)),
            Value::None => Ok(None),
            v => Err(self
                .inner
                .broken(format!("ModuleGetFunction returned {v:?}, not a function"))),
        }
    }

    /// Whether the server has `dev` (`kDevGetAttr`, kind 0).
    pub fn device_exists(&self, dev: Device) -> Result<bool, ClientError> {
        match self
            .inner
            .syscall(RpcCode::DevGetAttr, &[Arg::Device(dev), Arg::Int(0)])?
        {
            Arg::Int(v) => Ok(v != 0),
            Arg::Bool(v) => Ok(v),
            Arg::None => Ok(false),
            a => Err(self
                .inner
                .broken(format!("kDevGetAttr answered a {}", a.kind()))),
        }
    }

    /// Allocates a contiguous tensor on the server (`kDevAllocData`, 64-byte aligned; Mote's
    /// server zeroes it, TVM's does not).
    pub fn empty(
        &self,
        shape: &[i64],
        dtype: WireDType,
        dev: Device,
    ) -> Result<RemoteTensor, ClientError> {
        let record = WireTensor {
            data: 0,
            device: dev,
            dtype,
            shape: shape.to_vec(),
            byte_offset: 0,
        };
        let nbytes = record.nbytes().ok_or_else(|| {
            ClientError::Argument(format!("shape {shape:?} of {dtype:?} has no byte size"))
        })?;
        let nbytes = i64::try_from(nbytes)
            .map_err(|_| ClientError::Argument(format!("{nbytes} bytes are too many")))?;
        let a = self.inner.syscall(
            RpcCode::DevAllocData,
            &[
                Arg::Device(dev),
                Arg::Int(nbytes),
                Arg::Int(64),
                Arg::DataType(dtype),
            ],
        )?;
        match handle_of(&a) {
            Some(data) if data != 0 => Ok(RemoteTensor {
                inner: Arc::clone(&self.inner),
                record: WireTensor { data, ..record },
            }),
            _ => Err(self
                .inner
                .broken(format!("kDevAllocData answered a {}", a.kind()))),
        }
    }

    /// Copies `data` into the remote tensor `t` (its whole size, from its byte offset).
    pub fn copy_to(&self, t: &WireTensor, data: &[u8]) -> Result<(), ClientError> {
        let want = t.nbytes().ok_or_else(|| {
            ClientError::Argument(format!("shape {:?} has no byte size", t.shape))
        })?;
        if want != data.len() as u64 {
            return Err(ClientError::Argument(format!(
                "the tensor holds {want} bytes, the data has {}",
                data.len()
            )));
        }
        let mut body = Vec::with_capacity(data.len() + 64);
        body.put_tensor(t);
        body.put_u64(want);
        body.extend_from_slice(data);
        let p = self.inner.request(RpcCode::CopyToRemote, &body)?;
        answer_seq(&self.inner, &p)?;
        Ok(())
    }

    /// Reads the whole of the remote tensor `t` (client memory or a tensor a call returned).
    pub fn copy_from(&self, t: &WireTensor) -> Result<Vec<u8>, ClientError> {
        let want = t.nbytes().ok_or_else(|| {
            ClientError::Argument(format!("shape {:?} has no byte size", t.shape))
        })?;
        let mut body = Vec::new();
        body.put_tensor(t);
        body.put_u64(want);
        let p = self.inner.request(RpcCode::CopyFromRemote, &body)?;
        if p.rpc_code() != Some(RpcCode::CopyAck) {
            answer_seq(&self.inner, &p)?;
            return Err(self
                .inner
                .broken("kCopyFromRemote was answered without data".into()));
        }
        if p.body.len() as u64 != want {
            let got = p.body.len();
            return Err(self.inner.broken(format!(
                "kCopyFromRemote asked for {want} bytes and got {got}"
            )));
        }
        Ok(p.body)
    }
}
