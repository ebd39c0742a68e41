//! The JNI entries of `org.mote.rpc`: Mote's RPC server (`mote-rpc`, docs/rpc.md "Three ways
//! to serve") started, observed and stopped from Java (`Server`), and the RPC client
//! (`RemoteSession`, `RemoteFunction`, `RemoteModule`; the objects and translations behind
//! those entries are in `rpc_client`). Each `/// java:` line is the exact declaration of the
//! function below it in the package-private class `org.mote.rpc.RpcBridge`, generated like
//! `org.mote.NativeBridge` (`scripts/java-natives.sh`).
//!
//! A server is a [`ServerH`] behind a Java `long` handle. Java serialises `serverStop` calls and
//! frees the handle only after the last call using it returned (a read/write lock in `Server`).
//! A state snapshot crosses as a `long[]` (indexes `S_*`) and a `String[]` filled in place
//! (indexes `T_*`); both index tables are generated into `RpcBridge`, so the two sides cannot
//! disagree.
//!
//! A client session is a [`ClientH`] and each function or module on the server a [`RefH`],
//! each behind a handle one Java object owns (`org.mote.rpc.NativeHandle`: freed once, after
//! every call using it returned). No handle borrows another: a [`RefH`] holds its own clone of
//! the session's client.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jni::objects::{JByteArray, JClass, JDoubleArray, JLongArray, JObject, JObjectArray, JString};
use jni::sys::{jboolean, jint, jlong};
use jni::{Env, EnvUnowned};
use mote_rpc::proxy::ProxyState;
use mote_rpc::tracker::TrackerState;
use mote_rpc::{Server, ServerHandle, ServerStats};

use crate::rpc_client::{
    client_err, dtype_name, read_args, result, tensor_array, ClientH, RefH, TensorH,
};
use crate::rpc_layout::{Num, Text, MODE_LISTEN, MODE_PROXY, MODE_TRACKER, NUMS, TEXTS};
use crate::{entry, free_handle, handle_ref, into_handle, JErr};

/// One look at a server.
#[derive(Clone, Debug, Default)]
struct Snapshot {
    stopped: bool,
    addr: Option<SocketAddr>,
    stats: ServerStats,
    tracker: Option<TrackerState>,
    proxy: Option<ProxyState>,
}

impl Snapshot {
    fn of(h: &ServerHandle) -> Snapshot {
        Snapshot {
            stopped: false,
            addr: h.local_addr(),
            stats: h.stats(),
            tracker: h.tracker_state(),
            proxy: h.proxy_state(),
        }
    }

    fn nums(&self) -> [i64; NUMS] {
        let mut n = [0i64; NUMS];
        let b = |v: bool| i64::from(v);
        n[Num::Stopped as usize] = b(self.stopped);
        n[Num::Active as usize] = i64::try_from(self.stats.active).unwrap_or(i64::MAX);
        n[Num::Served as usize] = i64::try_from(self.stats.served).unwrap_or(i64::MAX);
        n[Num::Refused as usize] = i64::try_from(self.stats.refused).unwrap_or(i64::MAX);
        n[Num::Port as usize] = self.addr.map_or(-1, |a| i64::from(a.port()));
        if let Some(t) = &self.tracker {
            n[Num::HasTracker as usize] = 1;
            n[Num::TrackerConnected as usize] = b(t.connected);
            n[Num::TrackerRegistrations as usize] =
                i64::try_from(t.registrations).unwrap_or(i64::MAX);
        }
        if let Some(p) = &self.proxy {
            n[Num::HasProxy as usize] = 1;
            n[Num::ProxyWaiting as usize] = b(p.waiting);
            n[Num::ProxySessions as usize] = i64::try_from(p.sessions).unwrap_or(i64::MAX);
        }
        n
    }

    fn texts(&self) -> [Option<String>; TEXTS] {
        let mut t: [Option<String>; TEXTS] = Default::default();
        t[Text::Address as usize] = self.addr.map(|a| a.ip().to_string());
        if let Some(tr) = &self.tracker {
            t[Text::TrackerError as usize] = tr.last_error.clone();
            t[Text::TrackerOffers as usize] = Some(tr.registered.join("\n"));
        }
        if let Some(p) = &self.proxy {
            t[Text::ProxyError as usize] = p.last_error.clone();
        }
        t
    }
}

/// A server owned by one `org.mote.rpc.Server`.
pub struct ServerH {
    /// The running server; `None` once stopped.
    running: Mutex<Option<ServerHandle>>,
    /// The server's stop flag (set first by `serverStop`, so no new session starts while it
    /// waits for the running ones).
    stop: Arc<AtomicBool>,
    /// The last snapshot, taken when the server stopped.
    last: Mutex<Snapshot>,
}

/// Lock ignoring poison: every value behind these locks stays consistent between statements
/// (a panic elsewhere cannot leave one half-written).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ServerH {
    fn snapshot(&self) -> Snapshot {
        match &*lock(&self.running) {
            Some(h) => Snapshot::of(h),
            None => lock(&self.last).clone(),
        }
    }

    /// Stop and wait: no new sessions, wait until the running ones ended (a call in progress
    /// finishes first), then leave the tracker or proxy and remove the sandboxes. The counters
    /// kept afterwards are those seen when the last session had ended.
    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let handle = loop {
            let mut running = lock(&self.running);
            let Some(h) = running.as_ref() else {
                return; // stopped already
            };
            let snap = Snapshot::of(h);
            if snap.stats.active == 0 {
                *lock(&self.last) = snap;
                break running.take();
            }
            drop(running);
            std::thread::sleep(Duration::from_millis(10));
        };
        if let Some(h) = handle {
            let (tracker, proxy) = (h.tracker_state(), h.proxy_state());
            h.stop();
            let mut last = lock(&self.last);
            last.stopped = true;
            // Gone from the tracker and the proxy now; keep their counters and last errors.
            last.tracker = tracker.map(|t| TrackerState {
                connected: false,
                registered: Vec::new(),
                ..t
            });
            last.proxy = proxy.map(|p| ProxyState {
                waiting: false,
                ..p
            });
        }
    }
}

fn opt_string(env: &Env<'_>, s: &JString<'_>) -> Result<Option<String>, JErr> {
    if s.is_null() {
        Ok(None)
    } else {
        Ok(Some(s.try_to_string(env)?))
    }
}

fn io_err(what: &str, e: std::io::Error) -> JErr {
    if e.kind() == std::io::ErrorKind::InvalidInput {
        JErr::Arg(format!("{what}: {e}"))
    } else {
        JErr::Mote(mote::Error::Io {
            path: PathBuf::from(what),
            source: e,
        })
    }
}

/// java: static native long serverStart(String host, int port, String key, String[] allow, int maxSessions, String sandbox, int mode, String modeAddress, String customAddress, int sessionThreads, long idleTimeoutMillis, boolean serveRegistered);
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_serverStart<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    host: JString<'l>,
    port: jint,
    key: JString<'l>,
    allow: JObjectArray<'l>,
    max_sessions: jint,
    sandbox: JString<'l>,
    mode: jint,
    mode_address: JString<'l>,
    custom_address: JString<'l>,
    session_threads: jint,
    idle_timeout_millis: jlong,
    serve_registered: jboolean,
) -> jlong {
    entry(&mut env, |env| {
        let host = opt_string(env, &host)?.ok_or_else(|| JErr::Arg("host is null".into()))?;
        let port =
            u16::try_from(port).map_err(|_| JErr::Arg(format!("port {port} is not 0..65535")))?;
        let key = opt_string(env, &key)?.unwrap_or_default();
        // 0: Mote's default (4, and 1 in tracker mode).
        let max_sessions = usize::try_from(max_sessions)
            .map_err(|_| JErr::Arg(format!("maxSessions {max_sessions} is negative")))?;
        let mut b = Server::builder().host(host.clone()).port(port).key(key);
        if max_sessions > 0 {
            b = b.max_sessions(max_sessions);
        }
        if !allow.is_null() {
            let mut ips: Vec<IpAddr> = Vec::new();
            for i in 0..allow.len(env)? {
                let o = allow.get_element(env, i)?;
                let s = env.cast_local::<JString>(o)?;
                let s = opt_string(env, &s)?
                    .ok_or_else(|| JErr::Arg("an allowed address is null".into()))?;
                ips.push(
                    s.parse()
                        .map_err(|_| JErr::Arg(format!("{s:?} is not an IP address")))?,
                );
            }
            b = b.allow(ips);
        }
        if let Some(dir) = opt_string(env, &sandbox)? {
            // Created here so that a failure names the folder (spawn's error would not).
            std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
            b = b.sandbox_root(dir);
        }
        let mode_address = opt_string(env, &mode_address)?;
        let custom_address = opt_string(env, &custom_address)?;
        let need = |what: &str| {
            mode_address
                .clone()
                .ok_or_else(|| JErr::Arg(format!("{what} address is null")))
        };
        b = match mode {
            MODE_LISTEN => b,
            MODE_TRACKER => b.tracker(need("tracker")?, custom_address),
            MODE_PROXY => b.through_proxy(need("proxy")?),
            m => return Err(JErr::Arg(format!("unknown mode {m}"))),
        };
        if session_threads != 0 {
            let n = usize::try_from(session_threads)
                .map_err(|_| JErr::Arg(format!("sessionThreads {session_threads} is negative")))?;
            b = b.session_threads(n);
        }
        if idle_timeout_millis != 0 {
            let ms = u64::try_from(idle_timeout_millis).map_err(|_| {
                JErr::Arg(format!("idle timeout {idle_timeout_millis} ms is negative"))
            })?;
            b = b.idle_timeout(Duration::from_millis(ms));
        }
        // The functions registered in this process (`Function.register`, from Java or native
        // code) for clients too (docs/rpc.md "Global functions"): off unless asked for.
        b = b.serve_registered_functions(serve_registered);
        let what = match mode {
            MODE_PROXY => "RPC server (proxy mode)".to_string(),
            _ => format!("RPC server on {host}:{port}"),
        };
        let handle = b.spawn().map_err(|e| io_err(&what, e))?;
        let stop = handle.stop_flag();
        Ok(into_handle(ServerH {
            running: Mutex::new(Some(handle)),
            stop,
            last: Mutex::new(Snapshot::default()),
        }))
    })
}

/// java: static native long[] serverState(long server, String[] texts);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_serverState<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    server: jlong,
    texts: JObjectArray<'l>,
) -> JLongArray<'l> {
    entry(&mut env, |env| {
        // SAFETY: Java passes the handle of a server it has not freed and frees it only after
        // this call returned (Server's read/write lock).
        let s = unsafe { handle_ref::<ServerH>(server, "Server")? };
        if texts.is_null() || texts.len(env)? != TEXTS {
            return Err(JErr::Arg(format!("texts must be a String[{TEXTS}]")));
        }
        let snap = s.snapshot();
        for (i, t) in snap.texts().iter().enumerate() {
            match t {
                Some(t) => {
                    let js = JString::from_str(env, t)?;
                    texts.set_element(env, i, &js)?;
                }
                None => texts.set_element(env, i, jni::objects::JObject::null())?,
            }
        }
        let nums = snap.nums();
        let a = env.new_long_array(NUMS)?;
        a.set_region(env, 0, &nums)?;
        Ok(a)
    })
}

/// java: static native void serverStop(long server);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_serverStop<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    server: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: as in serverState.
        let s = unsafe { handle_ref::<ServerH>(server, "Server")? };
        s.stop();
        Ok(())
    })
}

/// java: static native void serverFree(long server);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_serverFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    server: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java frees each handle once, after every other call using it returned.
        // Dropping a server that is still running stops it (ServerHandle's Drop).
        unsafe { free_handle::<ServerH>(server) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// The client: org.mote.rpc.RemoteSession, RemoteFunction, RemoteModule

fn client_ref<'a>(client: jlong) -> Result<&'a ClientH, JErr> {
    // SAFETY: Java passes the handle of a session it has not freed and frees it only after
    // every call using it returned (RemoteSession's NativeHandle).
    unsafe { handle_ref::<ClientH>(client, "RemoteSession") }
}

fn remote_ref<'a>(r: jlong, what: &str) -> Result<&'a RefH, JErr> {
    // SAFETY: as in client_ref, for a RemoteFunction's or RemoteModule's handle.
    unsafe { handle_ref::<RefH>(r, what) }
}

fn tensor_ref<'a>(t: jlong) -> Result<&'a TensorH, JErr> {
    // SAFETY: as in client_ref, for a RemoteTensor's handle.
    unsafe { handle_ref::<TensorH>(t, "RemoteTensor") }
}

fn name_of(env: &Env<'_>, s: &JString<'_>, what: &str) -> Result<String, JErr> {
    opt_string(env, s)?.ok_or_else(|| JErr::Arg(format!("{what} is null")))
}

/// java: static native boolean rpcAvailable();
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_rpcAvailable<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
) -> jboolean {
    // Its existence is the answer: a library built without the `rpc` feature lacks it, and
    // Java's call then fails with UnsatisfiedLinkError.
    entry(&mut env, |_| Ok(true))
}

/// java: static native long clientConnect(String host, int port, String key, long connectTimeoutMillis);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_clientConnect<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    host: JString<'l>,
    port: jint,
    key: JString<'l>,
    connect_timeout_millis: jlong,
) -> jlong {
    entry(&mut env, |env| {
        let host = name_of(env, &host, "host")?;
        let port =
            u16::try_from(port).map_err(|_| JErr::Arg(format!("port {port} is not 0..65535")))?;
        let key = opt_string(env, &key)?.unwrap_or_default();
        // 0: the client's default.
        let timeout = match connect_timeout_millis {
            0 => None,
            ms => Some(Duration::from_millis(u64::try_from(ms).map_err(|_| {
                JErr::Arg(format!("connect timeout {ms} ms is negative"))
            })?)),
        };
        match ClientH::connect(&host, port, &key, timeout) {
            Ok(c) => Ok(into_handle(c)),
            Err(e) => Err(client_err(env, e)),
        }
    })
}

/// java: static native void clientClose(long client);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_clientClose<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    client: jlong,
) {
    entry(&mut env, |_| {
        // Waits for a request in progress (requests are serialised), then ends the session.
        client_ref(client)?.client().close();
        Ok(())
    })
}

/// java: static native void clientFree(long client);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_clientFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    client: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java frees each handle once, after every other call using it returned. The
        // session ends with the last of its objects (the functions and modules hold clones).
        unsafe { free_handle::<ClientH>(client) };
        Ok(())
    })
}

/// java: static native long clientGetFunction(long client, String name);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_clientGetFunction<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    client: jlong,
    name: JString<'l>,
) -> jlong {
    entry(&mut env, |env| {
        let c = client_ref(client)?;
        let name = name_of(env, &name, "function name")?;
        match c.client().get_function(&name) {
            Ok(Some(f)) => Ok(into_handle(c.adopt(f, false))),
            Ok(None) => Ok(0),
            Err(e) => Err(client_err(env, e)),
        }
    })
}

/// java: static native void clientUpload(long client, String name, byte[] data);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_clientUpload<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    client: jlong,
    name: JString<'l>,
    data: JByteArray<'l>,
) {
    entry(&mut env, |env| {
        let c = client_ref(client)?;
        let name = name_of(env, &name, "file name")?;
        if data.is_null() {
            return Err(JErr::Arg("data is null".into()));
        }
        let bytes = env.convert_byte_array(&data)?;
        c.client()
            .upload(&name, &bytes)
            .map_err(|e| client_err(env, e))
    })
}

/// java: static native byte[] clientDownload(long client, String name);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_clientDownload<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    client: jlong,
    name: JString<'l>,
) -> JByteArray<'l> {
    entry(&mut env, |env| {
        let c = client_ref(client)?;
        let name = name_of(env, &name, "file name")?;
        match c.client().download(&name) {
            Ok(b) => Ok(env.byte_array_from_slice(&b)?),
            Err(e) => Err(client_err(env, e)),
        }
    })
}

/// java: static native long clientLoadModule(long client, String name);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_clientLoadModule<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    client: jlong,
    name: JString<'l>,
) -> jlong {
    entry(&mut env, |env| {
        let c = client_ref(client)?;
        let name = name_of(env, &name, "file name")?;
        match c.client().load_module(&name) {
            Ok(m) => Ok(into_handle(c.adopt(m, true))),
            Err(e) => Err(client_err(env, e)),
        }
    })
}

/// java: static native boolean clientDeviceExists(long client, int deviceType, int deviceId);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_clientDeviceExists<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    client: jlong,
    device_type: jint,
    device_id: jint,
) -> jboolean {
    entry(&mut env, |env| {
        let c = client_ref(client)?;
        let dev = mote_rpc::wire::Device {
            device_type,
            device_id,
        };
        c.client()
            .device_exists(dev)
            .map_err(|e| client_err(env, e))
    })
}

/// java: static native long remoteModuleFunction(long module, String name, boolean queryImports);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_remoteModuleFunction<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    module: jlong,
    name: JString<'l>,
    query_imports: jboolean,
) -> jlong {
    entry(&mut env, |env| {
        let m = remote_ref(module, "RemoteModule")?;
        let name = name_of(env, &name, "function name")?;
        match m.module_function(&name, query_imports) {
            Ok(Some(f)) => Ok(into_handle(f)),
            Ok(None) => Ok(0),
            Err(e) => Err(client_err(env, e)),
        }
    })
}

/// java: static native Object remoteCall(long function, String kinds, long[] longs, double[] doubles, Object[] objects);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_remoteCall<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    function: jlong,
    kinds: JString<'l>,
    longs: JLongArray<'l>,
    doubles: JDoubleArray<'l>,
    objects: JObjectArray<'l>,
) -> JObject<'l> {
    entry(&mut env, |env| {
        let f = remote_ref(function, "RemoteFunction")?;
        let args = read_args(env, f, &kinds, &longs, &doubles, &objects)?;
        match f.call(&args) {
            Ok(v) => result(env, f, v),
            Err(e) => Err(client_err(env, e)),
        }
    })
}

/// java: static native void remoteFree(long ref);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_remoteFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    r: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java frees each handle once, after every other call using it returned.
        // Dropping it frees the object on the server (a request: it waits for one in progress).
        unsafe { free_handle::<RefH>(r) };
        Ok(())
    })
}

/// java: static native Object clientEmpty(long client, long[] shape, String dtype, int deviceType, int deviceId);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_clientEmpty<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    client: jlong,
    shape: JLongArray<'l>,
    dtype: JString<'l>,
    device_type: jint,
    device_id: jint,
) -> JObject<'l> {
    entry(&mut env, |env| {
        let c = client_ref(client)?;
        if shape.is_null() {
            return Err(JErr::Arg("shape is null".into()));
        }
        let mut dims = vec![0i64; shape.len(env)?];
        shape.get_region(env, 0, &mut dims)?;
        let dtype = name_of(env, &dtype, "dtype")?;
        let dev = mote_rpc::wire::Device {
            device_type,
            device_id,
        };
        match c.empty(&dims, &dtype, dev) {
            Ok(t) => tensor_array(env, t),
            Err(e) => Err(client_err(env, e)),
        }
    })
}

/// java: static native String tensorDtype(long tensor);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_tensorDtype<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
) -> JString<'l> {
    entry(&mut env, |env| {
        let t = tensor_ref(tensor)?;
        Ok(JString::from_str(env, dtype_name(t.record().dtype))?)
    })
}

/// java: static native void tensorWrite(long tensor, byte[] data);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_tensorWrite<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
    data: JByteArray<'l>,
) {
    entry(&mut env, |env| {
        let t = tensor_ref(tensor)?;
        if data.is_null() {
            return Err(JErr::Arg("data is null".into()));
        }
        let bytes = env.convert_byte_array(&data)?;
        t.write(&bytes).map_err(|e| client_err(env, e))
    })
}

/// java: static native byte[] tensorRead(long tensor);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_tensorRead<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
) -> JByteArray<'l> {
    entry(&mut env, |env| {
        let t = tensor_ref(tensor)?;
        match t.read() {
            Ok(b) => Ok(env.byte_array_from_slice(&b)?),
            Err(e) => Err(client_err(env, e)),
        }
    })
}

/// java: static native void tensorFree(long tensor);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_rpc_RpcBridge_tensorFree<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    tensor: jlong,
) {
    entry(&mut env, |_| {
        // SAFETY: Java frees each handle once, after every other call using it returned.
        // Dropping it frees the memory on the server (a request: it waits for one in progress).
        unsafe { free_handle::<TensorH>(tensor) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_snapshot_reads_back() {
        let server = Server::builder().port(0).spawn().expect("bind 127.0.0.1:0");
        let port = server.local_addr().expect("listening").port();
        let h = ServerH {
            stop: server.stop_flag(),
            running: Mutex::new(Some(server)),
            last: Mutex::new(Snapshot::default()),
        };
        let live = h.snapshot().nums();
        assert_eq!(live[Num::Stopped as usize], 0);
        assert_eq!(live[Num::Port as usize], i64::from(port));
        h.stop();
        h.stop();
        let last = h.snapshot();
        assert_eq!(last.nums()[Num::Stopped as usize], 1);
        assert_eq!(
            last.texts()[Text::Address as usize].as_deref(),
            Some("127.0.0.1")
        );
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}
